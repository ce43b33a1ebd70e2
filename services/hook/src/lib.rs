//! `mneme-hook`: the tiny client an agent host runs for every lifecycle hook.
//!
//! It reads the host's JSON payload on stdin, normalises it into a [`proto::Event`] (one adapter
//! per host), scrubs secrets and private blocks, and publishes it to JetStream with an ack. When
//! NATS is unreachable or slow it writes the event to a local [`spool`] and exits; the next run
//! that reaches NATS replays the spool first, in order, with the original event ids, so nothing
//! is lost or doubled. For hooks that can return context it asks retrieval within a time budget
//! and prints the host's expected output.
//!
//! Architecture invariant: the hook never blocks or breaks the agent. It always exits 0, writes
//! to stdout only the host's documented output, and bounds every wait.

pub mod adapter;
pub mod claude_code;
pub mod client;
pub mod codex;
pub mod config;
pub mod cursor;
pub mod gemini;
pub mod hosts;
pub mod install;
pub mod kimi;
pub mod kiro;
pub mod spool;
pub mod trace;
pub mod transcript;
