//! The NATS identities of one mneme deployment on disk: a directory holding one NKey seed per
//! role (`<role>.nk`, owner-only), and the `authorization` block a `nats-server` needs to admit
//! them with the permissions of [`proto::access`].
//!
//! `mneme up` makes the set on first start for the server it runs; `mneme nats-key --users DIR`
//! makes it for a box or a hub, and prints the block for that server's configuration.

use anyhow::Context as _;
use proto::access::Role;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// One identity of a key set: its role and public key (no secret).
#[derive(Debug, Clone)]
pub struct User {
    pub role: Role,
    pub public_key: String,
}

/// Write a new NKey user seed to `path`, owner-only, never replacing an existing file; returns
/// the public key.
pub fn new_seed_file(path: &Path) -> anyhow::Result<String> {
    let key = nkeys::KeyPair::new_user();
    let seed = key.seed().context("encoding the new seed")?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path).with_context(|| {
        format!(
            "creating {} (an existing key is never replaced)",
            path.display()
        )
    })?;
    writeln!(file, "{seed}").with_context(|| format!("writing {}", path.display()))?;
    file.sync_all()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(key.public_key())
}

/// The public key of the seed in `path`.
pub fn public_key(path: &Path) -> anyhow::Result<String> {
    let seed = crate::nats::read_seed(path)?;
    let key = nkeys::KeyPair::from_seed(&seed)
        .with_context(|| format!("{} does not hold a valid nkey seed", path.display()))?;
    Ok(key.public_key())
}

/// Make every role's seed that `dir` does not hold yet (the directory owner-only, each seed
/// 0600), keeping the ones it holds, and return the whole set.
pub fn ensure_keys(dir: &Path) -> anyhow::Result<Vec<User>> {
    store::private_dir(dir).with_context(|| format!("creating {}", dir.display()))?;
    Role::ALL
        .iter()
        .map(|&role| {
            let path = dir.join(role.key_file());
            let public_key = if path.exists() {
                public_key(&path)?
            } else {
                new_seed_file(&path)?
            };
            Ok(User { role, public_key })
        })
        .collect()
}

/// The seed file the client `mneme-<client>` uses from a keys directory, when it holds one.
pub fn seed_in(dir: &Path, client: &str) -> Option<PathBuf> {
    let path = dir.join(Role::of_client(client).key_file());
    path.is_file().then_some(path)
}

/// The `authorization` block of a nats-server configuration admitting `users`, each with its
/// role's permissions and nothing more; a connection without one of these keys is refused.
pub fn authorization(users: &[User]) -> String {
    authorization_with_members(users, &[])
}

/// The `authorization` block of a team hub: `users` as [`authorization`] renders them, and
/// after them one user per team member, admitted on the leaf node port only.
///
/// Members get no per-subject permissions. Their link is a leaf node connection, which carries
/// JetStream's own traffic in both directions: the hub's API (`$JS.hub.API.>`) that a member's
/// `mneme up` calls to make its mirror on the hub, the members' APIs (`$JS.<member>.API.>`)
/// that the hub's mirrors and the members' sources call, and the delivery subjects those
/// answer on, whose names JetStream makes up as it goes. A list narrow enough to mean something
/// would break replication, and the members of one hub are one team that trusts one another
/// with it. Each member's own server already keeps mneme's subjects (`mneme.>`) off the link
/// (`common::team::Team::leaf_block`). What members are held to is the connection type: a
/// member's seed cannot be used as an ordinary client of this server, so it never reaches the
/// box's own services.
pub fn authorization_with_members(users: &[User], members: &[Member]) -> String {
    let list = |subjects: &[String]| {
        subjects
            .iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut text = String::from("authorization {\n  users = [\n");
    for user in users {
        let permissions = user.role.permissions();
        text.push_str(&format!(
            "    # {}\n    {{ nkey: {:?}, permissions: {{ publish: {{ allow: [{}] }}, subscribe: {{ allow: [{}] }}{} }} }}\n",
            user.role.name(),
            user.public_key,
            list(&permissions.publish),
            list(&permissions.subscribe),
            if permissions.allow_responses {
                ", allow_responses: true"
            } else {
                ""
            },
        ));
    }
    if !members.is_empty() {
        text.push_str(
            "    # Team members: leaf node connections only, with no per-subject permissions (the\n    \
             # link carries JetStream's API and deliveries both ways; see common::access).\n",
        );
    }
    for member in members {
        text.push_str(&format!(
            "    # member {}\n    {{ nkey: {:?}, allowed_connection_types: [\"LEAFNODE\"] }}\n",
            member.name.as_deref().unwrap_or("(no name given)"),
            member.public_key,
        ));
    }
    text.push_str("  ]\n}\n");
    text
}

/// One member of a team hub, from the hub's members file: the public key of the NKey user its
/// `mneme team join --nkey` seed makes, and the name the hub's owner wrote beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub public_key: String,
    pub name: Option<String>,
    /// The line of the members file that lists it, for errors found later.
    pub line: usize,
}

/// The team members listed in `path`: one NKey user public key (`U…`) a line, optionally
/// followed by whitespace and a name; blank lines and everything from a `#` on are ignored.
/// A line that is not that, or a key listed twice, is refused with the file and line, so a
/// typo stops the hub at its start instead of locking a member out in silence.
pub fn read_members(path: &Path) -> anyhow::Result<Vec<Member>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the team members file {}", path.display()))?;
    parse_members(&text)
        .map_err(|(line, why)| anyhow::anyhow!("{}, line {line}: {why}", path.display()))
}

/// [`read_members`] on the text of the file; an error is its line number and what is wrong.
fn parse_members(text: &str) -> Result<Vec<Member>, (usize, String)> {
    let mut members: Vec<Member> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let line = line.split('#').next().unwrap_or_default().trim();
        let Some(key) = line.split_whitespace().next() else {
            continue;
        };
        // The line itself is never quoted back: a seed pasted by mistake would end up in a log.
        if nkeys::KeyPair::from_seed(key).is_ok() {
            return Err((
                number,
                "this is a seed, a secret, not a public key: remove it, have its owner make a new \
                 one (this one was shared), and list the public key `mneme nats-key` prints"
                    .to_owned(),
            ));
        }
        let is_user_key =
            key.len() == 56 && key.starts_with('U') && nkeys::KeyPair::from_public_key(key).is_ok();
        if !is_user_key {
            return Err((
                number,
                "expected an NKey user public key (U and 55 more characters, printed by \
                 `mneme nats-key`), optionally followed by a name"
                    .to_owned(),
            ));
        }
        let name = line[key.len()..].trim();
        // The name becomes a comment of the server's configuration, which a line break or
        // another control character could end.
        if name.chars().any(char::is_control) {
            return Err((number, "the name holds a control character".to_owned()));
        }
        if let Some(first) = members.iter().find(|m| m.public_key == key) {
            return Err((number, format!("the key of line {} again", first.line)));
        }
        members.push(Member {
            public_key: key.to_owned(),
            name: (!name.is_empty()).then(|| name.to_owned()),
            line: number,
        });
    }
    Ok(members)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_set_is_made_once_and_read_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        let first = ensure_keys(&keys).unwrap();
        let second = ensure_keys(&keys).unwrap();
        assert_eq!(first.len(), Role::ALL.len());
        for (a, b) in first.iter().zip(&second) {
            assert_eq!(a.public_key, b.public_key);
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&keys), 0o700);
            assert_eq!(mode(&keys.join("hook.nk")), 0o600);
        }
        let block = authorization(&first);
        assert!(block.contains(&first[0].public_key));
        assert!(block.contains("\"$JS.API.STREAM.CREATE.MNEME_EVENTS\""));
        assert_eq!(
            seed_in(&keys, "mcp"),
            Some(keys.join("api.nk")),
            "the api's mcp client is the api"
        );
    }

    #[test]
    fn team_members_are_read_with_their_names_and_admitted_on_the_leaf_port_only() {
        let alice = nkeys::KeyPair::new_user();
        let bob = nkeys::KeyPair::new_user();
        let text = format!(
            "# the payments team\n\n{}   alice laptop # since May\n  {}\n",
            alice.public_key(),
            bob.public_key()
        );
        let members = parse_members(&text).unwrap();
        assert_eq!(
            members,
            vec![
                Member {
                    public_key: alice.public_key(),
                    name: Some("alice laptop".to_owned()),
                    line: 3,
                },
                Member {
                    public_key: bob.public_key(),
                    name: None,
                    line: 4,
                },
            ]
        );
        let users = vec![User {
            role: Role::ALL[0],
            public_key: nkeys::KeyPair::new_user().public_key(),
        }];
        let block = authorization_with_members(&users, &members);
        // mneme's own identities come first, exactly as without members.
        let plain = authorization(&users);
        assert!(block.starts_with(plain.strip_suffix("  ]\n}\n").unwrap()));
        assert!(
            block.contains(&format!(
                "    # member alice laptop\n    {{ nkey: {:?}, allowed_connection_types: [\"LEAFNODE\"] }}\n",
                alice.public_key()
            )),
            "{block}"
        );
        assert_eq!(
            authorization_with_members(&users, &[]),
            authorization(&users)
        );
    }

    #[test]
    fn a_malformed_members_line_is_refused_with_its_number_and_never_quoted() {
        let seed = nkeys::KeyPair::new_user().seed().unwrap();
        let key = nkeys::KeyPair::new_user().public_key();
        let account = nkeys::KeyPair::new_account().public_key();
        let mut corrupt = key.clone();
        corrupt.replace_range(10..11, if &key[10..11] == "A" { "B" } else { "A" });
        for (text, line, why) in [
            (format!("# ok\n{seed} alice\n"), 2, "seed"),
            (
                format!("{key}\nnot-a-key\n"),
                2,
                "expected an NKey user public key",
            ),
            (
                format!("{account}\n"),
                1,
                "expected an NKey user public key",
            ),
            (
                format!("{corrupt}\n"),
                1,
                "expected an NKey user public key",
            ),
            (format!("{key} a\rb\n"), 1, "control character"),
            (
                format!("{key} alice\n\n{key} bob\n"),
                3,
                "the key of line 1 again",
            ),
        ] {
            let (number, said) = parse_members(&text).unwrap_err();
            assert_eq!(number, line, "{text:?}");
            assert!(said.contains(why), "{said}");
            assert!(!said.contains(&seed), "{said}");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("team-members");
        std::fs::write(&path, "nonsense\n").unwrap();
        let error = read_members(&path).unwrap_err().to_string();
        assert!(
            error.starts_with(&format!("{}, line 1: ", path.display())),
            "{error}"
        );
    }
}
