//! `mneme nats-key`: NKey users for a mneme box or hub whose NATS lists its users by public key.
//!
//! `--out FILE` makes one user (`deploy/nats/nats-nkey.conf`, one identity for everything);
//! `--users DIR` makes mneme's whole set, one identity per role with only that role's
//! permissions (`proto::access`), and prints the server's `authorization` block, with
//! `--members FILE` adding the team members of a hub (`deploy/nats/nats-hub.conf`, one
//! public key a line; see `common::access::read_members`). Seeds go into
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

/// Make every identity's seed missing from `dir` and print the server's authorization block,
/// admitting the team members listed in `members_file` too when given.
pub fn users(dir: &Path, members_file: Option<&Path>) -> anyhow::Result<()> {
    // The members file is read first, so a typo in it leaves nothing made.
    let members = match members_file {
        Some(path) => common::access::read_members(path)?,
        None => Vec::new(),
    };
    let users = common::access::ensure_keys(dir)?;
    // nats-server refuses a key listed twice; said here with the line to change.
    if let Some(path) = members_file {
        for member in &members {
            if let Some(user) = users.iter().find(|u| u.public_key == member.public_key) {
                anyhow::bail!(
                    "{}, line {}: this is the public key of mneme's own {} identity in {}, not a team member's",
                    path.display(),
                    member.line,
                    user.role.name(),
                    dir.display()
                );
            }
        }
    }
    crate::print_all(common::access::authorization_with_members(&users, &members).as_bytes())?;
    if let Some(path) = members_file {
        eprintln!(
            "{} team member(s) from {} admitted as leaf nodes",
            members.len(),
            path.display()
        );
    }
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
