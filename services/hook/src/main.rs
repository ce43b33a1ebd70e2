//! `mneme-hook <host>`: run by an agent host for each lifecycle hook, payload on stdin.
//! Always exits 0 so the agent is never blocked or broken by memory capture.

fn main() {
    let host = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "claude-code".to_owned());
    if host == "--version" || host == "-V" {
        println!("mneme-hook {}", env!("CARGO_PKG_VERSION"));
        return;
    }
    // Even a bug in mneme must not become a failing hook: the panic is reported on stderr and
    // in the hook log, and the process still exits 0.
    if std::panic::catch_unwind(|| mneme_hook::client::main(&host)).is_err() {
        mneme_hook::client::log_line("lost: mneme-hook panicked; please report this");
    }
}
