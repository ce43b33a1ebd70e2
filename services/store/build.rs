//! `sqlx::migrate!` embeds the migrations at compile time but does not notice a new file, so
//! the crate is rebuilt whenever the migrations directory changes.

fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
