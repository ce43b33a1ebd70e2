//! `mneme-hook`: the tiny client an agent host runs for every lifecycle hook.
//!
//! It reads the host's JSON payload on stdin, normalises it into a [`proto::Event`] through the
//! host's adapter (in the `hosts` crate, which the hook links without its install and import
//! parts), scrubs secrets and private blocks, and publishes it to JetStream with an ack. When
//! NATS is unreachable or slow it writes the event to a local [`spool`] and exits; the next run
//! that reaches NATS replays the spool first, in order, with the original event ids, so nothing
//! is lost or doubled. For hooks that can return context it asks retrieval within a time budget
//! and prints the host's expected output.
//!
//! Architecture invariant: the hook never blocks or breaks the agent. It always exits 0, writes
//! to stdout only the host's documented output, and bounds every wait.

pub mod client;
pub mod config;
pub mod spool;
pub mod trace;
