//! Ports `mneme up` needs, claimed before anything starts, with an error a person can act on
//! when one is taken: which address, which setting moves it, and what holds it.

use std::net::SocketAddr;

/// Bind the api's address, or say why not in words a person can act on.
pub async fn bind_api(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|error| taken(addr, "MNEME_API_ADDR (or --api-addr)", &error))
}

/// Check that the local nats-server can have its port: the server itself only says it could
/// not listen, in its own log.
pub fn check_nats(port: u16) -> anyhow::Result<()> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    std::net::TcpListener::bind(addr).map(drop).map_err(|error| {
        taken(
            addr,
            "MNEME_NATS_PORT (or --nats-port), or point MNEME_NATS_URL at the NATS server already there",
            &error,
        )
    })
}

fn taken(addr: SocketAddr, setting: &str, error: &std::io::Error) -> anyhow::Error {
    if error.kind() != std::io::ErrorKind::AddrInUse {
        return anyhow::anyhow!("cannot listen on {addr}: {error}");
    }
    let holder = holder(addr.port())
        .map(|(pid, name)| format!("{name} (pid {pid}) holds it"))
        .unwrap_or_else(|| "another process holds it".to_owned());
    anyhow::anyhow!(
        "port {} on {} is taken: {holder}; stop it, or move mneme with {setting}",
        addr.port(),
        addr.ip()
    )
}

/// The process listening on TCP `port`, when this machine says (Linux's `/proc`; a process of
/// another user may not be visible).
fn holder(port: u16) -> Option<(u32, String)> {
    let inodes: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| listening_inodes(&text, port))
        .collect();
    if inodes.is_empty() {
        return None;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    for entry in std::fs::read_dir("/proc").ok()?.filter_map(Result::ok) {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.filter_map(Result::ok) {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            if wanted.iter().any(|w| target.as_os_str() == w.as_str()) {
                let name = std::fs::read_to_string(entry.path().join("comm"))
                    .map(|n| n.trim().to_owned())
                    .unwrap_or_else(|_| "a process".to_owned());
                return Some((pid, name));
            }
        }
    }
    None
}

/// The socket inodes of a `/proc/net/tcp` table listening on `port` (state `0A`).
fn listening_inodes(table: &str, port: u16) -> Vec<String> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local = fields.get(1)?;
            let local_port = u16::from_str_radix(local.rsplit(':').next()?, 16).ok()?;
            (local_port == port && fields.get(3) == Some(&"0A"))
                .then(|| fields.get(9).map(|inode| (*inode).to_owned()))
                .flatten()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_socket_is_found_in_a_proc_table() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1D0D 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 424242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1D0D 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 515151 1 0000000000000000 100 0 0 10 0";
        // 0x1D0D is 7437; only the listening row counts, not the connection on the same port.
        assert_eq!(listening_inodes(table, 7437), vec!["424242".to_owned()]);
        assert!(listening_inodes(table, 4222).is_empty());
    }

    #[tokio::test]
    async fn a_taken_port_names_the_setting_and_the_holder() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = held.local_addr().unwrap();
        let error = bind_api(addr).await.unwrap_err().to_string();
        assert!(error.contains(&format!("port {} on 127.0.0.1 is taken", addr.port())));
        assert!(error.contains("MNEME_API_ADDR"), "{error}");
        // This test process holds it, and /proc says so.
        if std::path::Path::new("/proc/net/tcp").exists() {
            assert!(
                error.contains(&format!("pid {}", std::process::id())),
                "{error}"
            );
        }
        let error = check_nats(addr.port()).unwrap_err().to_string();
        assert!(error.contains("MNEME_NATS_PORT"), "{error}");
    }
}
