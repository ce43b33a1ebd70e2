//! The compose box's nats-server configurations, checked by the real `nats-server` with the
//! authorization block the real `mneme nats-key` makes, as the image's entry point does.

use crate::harness::binary;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn deploy_nats() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/nats")
}

fn nats_server() -> Command {
    Command::new(
        std::env::var_os("MNEME_NATS_SERVER")
            .map_or_else(|| PathBuf::from("nats-server"), PathBuf::from),
    )
}

/// `mneme nats-key --users DIR --members FILE`, as the entry point runs it for a hub.
fn nats_key_users(keys: &Path, members: &Path) -> Output {
    Command::new(binary("mneme"))
        .arg("nats-key")
        .arg("--users")
        .arg(keys)
        .arg("--members")
        .arg(members)
        .output()
        .unwrap()
}

/// `nats-server -t` (a configuration test: parse and check, start nothing) on `config`.
fn config_test(config: &Path, name: &str) -> Output {
    nats_server()
        .arg("-t")
        .arg("-c")
        .arg(config)
        .env("MNEME_NATS_NAME", name)
        .output()
        .unwrap()
}

#[test]
fn the_hub_configurations_admit_a_listed_member_and_a_malformed_list_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // A member's key, made the way a member makes it.
    let seed = dir.path().join("member.nk");
    let made = Command::new(binary("mneme"))
        .arg("nats-key")
        .arg("--out")
        .arg(&seed)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let public_key = String::from_utf8(made.stdout).unwrap().trim().to_owned();
    let members = dir.path().join("team-members");
    std::fs::write(&members, format!("# the team\n{public_key}  alice\n")).unwrap();

    let keys = dir.path().join("keys");
    let block = nats_key_users(&keys, &members);
    assert!(block.status.success(), "{block:?}");
    let block = String::from_utf8(block.stdout).unwrap();
    assert!(
        block.contains(&format!(
            "{{ nkey: {public_key:?}, allowed_connection_types: [\"LEAFNODE\"] }}"
        )),
        "{block}"
    );
    std::fs::write(keys.join("authorization.conf"), block).unwrap();
    for file in ["nats.conf", "nats-hub.conf", "nats-hub-cluster.conf"] {
        std::fs::copy(deploy_nats().join(file), keys.join(file)).unwrap();
    }
    for config in ["nats-hub.conf", "nats-hub-cluster.conf"] {
        let tested = config_test(&keys.join(config), "hub-1");
        assert!(
            tested.status.success(),
            "{config}: {}",
            String::from_utf8_lossy(&tested.stderr)
        );
    }

    // A typo on the second line: refused with the file and the line, before any key is made.
    let bad = dir.path().join("bad-members");
    std::fs::write(&bad, format!("{public_key} alice\nU-not-a-key bob\n")).unwrap();
    let fresh = dir.path().join("fresh-keys");
    let refused = nats_key_users(&fresh, &bad);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains(&format!("{}, line 2: ", bad.display())),
        "{said}"
    );
    assert!(!fresh.exists(), "nothing is made from a malformed list");
}
