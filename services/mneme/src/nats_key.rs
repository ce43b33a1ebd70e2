//! `mneme nats-key --out FILE`: a new NKey user for a mneme box whose NATS lists its users by
//! public key (`deploy/nats/nats-nkey.conf`). The seed goes into a file only its owner can read
//! (hooks and services read it through `MNEME_NATS_NKEY`); the public key, which is no secret,
//! is printed for the server's configuration.

use anyhow::Context as _;
use std::io::Write as _;
use std::path::Path;

/// Write a new user seed to `out` (refusing to overwrite one) and print its public key.
pub fn run(out: &Path) -> anyhow::Result<()> {
    let key = nkeys::KeyPair::new_user();
    let seed = key.seed().context("encoding the new seed")?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(out).with_context(|| {
        format!(
            "creating {} (an existing key is never replaced)",
            out.display()
        )
    })?;
    writeln!(file, "{seed}").with_context(|| format!("writing {}", out.display()))?;
    println!("{}", key.public_key());
    eprintln!(
        "seed written to {} (keep it secret: set MNEME_NATS_NKEY={} for hooks and services);\n\
         the line above is the public key: put it in the box's MNEME_NATS_NKEY_USER",
        out.display(),
        out.display()
    );
    Ok(())
}
