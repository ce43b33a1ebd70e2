//! The observation domain the services downstream of ingest share (the compressor, the pattern
//! service, retrieval): an observation as they read it from ingest's table ([`row`]), what makes
//! two observations the same thing ([`identity`]), and ingest's notices as they read them, with
//! what a batch of them asks of a service that walks sessions ([`notices`]).
//!
//! It sits between `common`, which knows nothing of any domain, and the services, none of which
//! may depend on another.

pub mod identity;
pub mod notices;
pub mod row;

pub use notices::{Notice, Walks};
