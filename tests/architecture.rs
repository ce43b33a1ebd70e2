//! The invariants ARCHITECTURE.md states about the shape of the workspace, checked on the
//! manifests and on the built hook binary, so a change that breaks one fails here rather than
//! in a review.

use crate::harness;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The services: each runs on its own and may never depend on another.
const SERVICES: [&str; 6] = [
    "ingest",
    "retrieval",
    "compressor",
    "pattern",
    "api",
    "mneme-hook",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// The manifest of every workspace member, by package name.
fn manifests() -> Vec<(String, toml_edit::DocumentMut)> {
    let root = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    let root: toml_edit::DocumentMut = root.parse().unwrap();
    root["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|member| {
            let path = workspace()
                .join(member.as_str().unwrap())
                .join("Cargo.toml");
            let text = std::fs::read_to_string(&path).unwrap();
            let doc: toml_edit::DocumentMut = text.parse().unwrap();
            let name = doc["package"]["name"].as_str().unwrap().to_owned();
            (name, doc)
        })
        .collect()
}

/// The names of a manifest's dependencies of one kind (`dependencies`, `dev-dependencies`).
fn deps(doc: &toml_edit::DocumentMut, kind: &str) -> BTreeSet<String> {
    doc.get(kind)
        .and_then(|t| t.as_table_like())
        .map(|t| t.iter().map(|(k, _)| k.to_owned()).collect())
        .unwrap_or_default()
}

fn manifest(name: &str) -> toml_edit::DocumentMut {
    manifests()
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no workspace member {name}"))
        .1
}

#[test]
fn no_service_crate_depends_on_another() {
    let members = manifests();
    for service in SERVICES {
        let (_, doc) = members.iter().find(|(n, _)| n == service).unwrap();
        for kind in ["dependencies", "dev-dependencies", "build-dependencies"] {
            let found: Vec<String> = deps(doc, kind)
                .into_iter()
                .filter(|d| SERVICES.contains(&d.as_str()) && d != service)
                .collect();
            assert!(
                found.is_empty(),
                "{service} depends on the services {found:?} ({kind}); services talk over NATS"
            );
        }
    }
    // The shared crates sit below every service: none of them may reach up into one, or into
    // the all-in-one binary.
    for shared in [
        "proto",
        "common",
        "observation",
        "sanitize",
        "store",
        "archive",
        "hosts",
        "capabilities",
    ] {
        let Some((_, doc)) = members.iter().find(|(n, _)| n == shared) else {
            continue;
        };
        let up: Vec<String> = deps(doc, "dependencies")
            .into_iter()
            .filter(|d| SERVICES.contains(&d.as_str()) || d == "mneme")
            .collect();
        assert!(up.is_empty(), "{shared} depends on {up:?}");
    }
}

/// The hook starts in milliseconds because it links only what it runs: the client, the spool,
/// its spans and the host adapters. Not `common` (clap, tracing-subscriber, the OTLP batch
/// exporter), not the store, and not the hosts' install and import parts.
#[test]
fn the_hook_links_only_the_adapters() {
    let hook = manifest("mneme-hook");
    let normal = deps(&hook, "dependencies");
    for heavy in [
        "common",
        "store",
        "archive",
        "observation",
        "sqlx",
        "clap",
        "toml_edit",
        "sanitize-corpus",
    ] {
        assert!(
            !normal.contains(heavy),
            "mneme-hook must not depend on {heavy}"
        );
    }
    // `hosts` comes without its features: the workspace entry turns defaults off and the
    // hook asks for none.
    let root: toml_edit::DocumentMut = std::fs::read_to_string(workspace().join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let entry = &root["workspace"]["dependencies"]["hosts"];
    assert_eq!(
        entry.get("default-features").and_then(|v| v.as_bool()),
        Some(false),
        "the workspace's hosts entry must turn default features off"
    );
    assert!(
        hook["dependencies"]["hosts"].get("features").is_none(),
        "mneme-hook must take hosts without install or import"
    );
    // And what the adapters need is all `hosts` needs without those features.
    let hosts = manifest("hosts");
    let required: BTreeSet<String> = hosts["dependencies"]
        .as_table_like()
        .unwrap()
        .iter()
        .filter(|(_, v)| v.get("optional").and_then(|o| o.as_bool()) != Some(true))
        .map(|(k, _)| k.to_owned())
        .collect();
    let expected: BTreeSet<String> = ["proto", "sanitize", "serde_json"]
        .map(str::to_owned)
        .into();
    assert_eq!(required, expected);
}

/// The sanitiser's corpus is test data: only tests may depend on it.
#[test]
fn only_tests_depend_on_the_secret_corpus() {
    for (name, doc) in manifests() {
        assert!(
            !deps(&doc, "dependencies").contains("sanitize-corpus") || name == "sanitize-corpus",
            "{name} links the secret corpus; it belongs in dev-dependencies"
        );
    }
}

/// The same, read off the built hook: neither the corpus nor the settings-file editing is in it.
#[test]
fn the_hook_binary_carries_no_corpus_and_no_installer() {
    let bytes = std::fs::read(harness::binary("mneme-hook")).unwrap();
    let contains = |needle: &str| bytes.windows(needle.len()).any(|w| w == needle.as_bytes());
    // A look-alike line only the corpus holds.
    assert!(!contains("use crate::auth::token::TokenStore;"));
    // Messages only the settings-file editing and the transcript import hold.
    assert!(!contains("mneme will not overwrite it"));
    assert!(!contains("no kimi session index at"));
    // The check itself can fail: the adapters are in the hook, with their messages.
    assert!(contains("payload has no hook_event_name"));
}

/// Every `.rs` file under `dir`, recursively.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The api and the command line read other services' tables only through `archive`'s read
/// models: neither holds a query of its own (the benchmarks, which read tables to measure, aside).
#[test]
fn only_archive_reads_other_services_tables_for_the_front_ends() {
    let mut files = Vec::new();
    sources(&workspace().join("services/api/src"), &mut files);
    sources(&workspace().join("services/mneme/src"), &mut files);
    let mut found = Vec::new();
    for file in files {
        let relative = file.strip_prefix(workspace()).unwrap().to_owned();
        let name = relative.to_string_lossy().into_owned();
        if name.contains("/bench/") || name.ends_with("/bin/bench.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for needle in ["sqlx::query", "query_as(", "query_scalar("] {
            if text.contains(needle) {
                found.push(format!("{name}: {needle}"));
            }
        }
    }
    assert!(found.is_empty(), "SQL outside archive: {found:?}");
}
