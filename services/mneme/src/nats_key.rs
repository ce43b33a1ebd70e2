//! `mneme nats-key`: NKey users for a mneme box or hub whose NATS lists its users by public key.
//!
//! `--out FILE` makes one user (`deploy/nats/nats-nkey.conf`, one identity for everything);
//! `--users DIR` makes mneme's whole set, one identity per role with only that role's
//! permissions (`proto::access`), and prints the server's `authorization` block. Seeds go into
//! files only their owner can read (hooks and services read them through `MNEME_NATS_NKEY` or
//! `MNEME_NATS_KEYS`); public keys are no secret.

use std::path::Path;

/// Write a new user seed to `out` (refusing to overwrite one) and print its public key.
pub fn run(out: &Path) -> anyhow::Result<()> {
    let public = common::access::new_seed_file(out)?;
    println!("{public}");
    eprintln!(
        "seed written to {} (keep it secret: set MNEME_NATS_NKEY={} for hooks and services);\n\
         the line above is the public key: put it in the box's MNEME_NATS_NKEY_USER",
        out.display(),
        out.display()
    );
    Ok(())
}

/// Make every identity's seed missing from `dir` and print the server's authorization block.
pub fn users(dir: &Path) -> anyhow::Result<()> {
    let users = common::access::ensure_keys(dir)?;
    crate::print_all(common::access::authorization(&users).as_bytes())?;
    eprintln!(
        "seeds in {} (keep them secret; each part reads its own: MNEME_NATS_KEYS={} for the \
         services and the command line, MNEME_NATS_NKEY={}/hook.nk for a hook elsewhere);\n\
         the block above goes into the server's configuration",
        dir.display(),
        dir.display(),
        dir.display()
    );
    Ok(())
}
