//! End-to-end tests: a real `nats-server` on a free port with a temporary JetStream store, a
//! temporary SQLite file, the services through the same `run` functions the binaries use, and
//! the real `mneme-hook`, `mneme-ingest` and `mneme` binaries as agents and users run them.
//!
//! Set `TEST_LOG=1` to see the services' logs.

mod api;
mod architecture;
mod browser;
mod capabilities;
mod deploy_configs;
mod harness;
mod hostile;
mod hosts;
mod import;
mod install;
mod mcp;
mod memory;
mod nats_access;
mod pipeline;
mod qdrant;
mod retrieval;
mod search_time;
mod security;
mod surface;
mod team;
mod traces;
mod workflows;
