//! The commit `mneme --version` names: `MNEME_COMMIT` when the build sets it (an image built
//! from a context without `.git`), else what git says of this checkout, else `unknown`.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=MNEME_COMMIT");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let git = root.join(".git");
    // A new commit moves HEAD or the branch it names; either reruns this script.
    for watched in ["HEAD", "refs/heads", "packed-refs"] {
        let path = git.join(watched);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    let commit = std::env::var("MNEME_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            let output = Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .current_dir(&root)
                .output()
                .ok()?;
            output
                .status
                .success()
                .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
                .filter(|c| !c.is_empty())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=MNEME_COMMIT={commit}");
}
