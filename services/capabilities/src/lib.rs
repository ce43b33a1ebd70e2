//! The capability registry: what an agent can use in a project (skills, slash commands,
//! subagents, MCP servers, the project's own tasks, tools) and how to invoke each, kept in
//! YAML files a person can read and edit.
//!
//! Each directory holds two files: `capabilities.yaml`, written by hand (or by
//! `mneme capabilities add`), and `capabilities.generated.yaml`, written by the scanner
//! (`mneme capabilities scan`) and replaced whole by each scan. The user's are in mneme's home
//! (`$MNEME_HOME`) and `~/.config/mneme`, a project's in its `.mneme/`. [`load`] merges them,
//! the hand-written over the generated and the project over the user, and reports what it
//! cannot use as [`Problem`]s with file and line, loading everything else.
//!
//! ```yaml
//! categories:
//!   testing: Running, writing and fixing tests
//! capabilities:
//!   - id: make-test
//!     name: make test
//!     category: testing
//!     kind: task
//!     description: Run the whole test suite through the Makefile
//!     when: [run the tests, check nothing broke]
//!     invoke: make test
//!     source: Makefile
//! ```
//!
//! [`scan`] finds capabilities by reading the hosts' files and the project's build files,
//! running nothing, and leaves every secret it sees out of what it returns; [`write_generated`]
//! writes what it found, and only when that changed.

mod file;
mod model;
mod registry;
mod scan;
mod write;

pub use file::Problem;
pub use model::{
    Capability, Category, Kind, MAX_DESCRIPTION, MAX_SHORT, MAX_SOURCE, MAX_WHEN, Scope, clip,
    id_problem, make_id, sync_request, to_proto,
};
pub use registry::{GENERATED_FILE, HAND_FILE, Locations, PROJECT_DIR, Registry, load};
pub use scan::{CATEGORIES, Scanned, scan};
pub use write::{Error, add, remove, write_generated};

#[cfg(test)]
mod tests;
