//! `otlp-sink [ADDR]`: a test OTLP/gRPC trace receiver (default `127.0.0.1:4317`) that prints each
//! span it receives as one JSON line on stdout, for tests that run mneme outside this process
//! (the compose test). It says where it listens on stderr and runs until it is killed.

use std::io::Write as _;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:4317".to_owned());
    let (sink, local) = otlp_sink::Sink::serve(&addr).await?;
    eprintln!("otlp-sink: listening on http://{local}");
    let mut printed = 0;
    loop {
        // Registered before the spans are read, so an export landing in between still wakes us.
        let arrived = sink.arrived();
        let spans = sink.spans();
        let mut stdout = std::io::stdout().lock();
        for span in &spans[printed..] {
            writeln!(stdout, "{}", span.to_json())?;
        }
        stdout.flush()?;
        printed = spans.len();
        drop(stdout);
        arrived.await;
    }
}
