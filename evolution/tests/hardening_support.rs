//! Shared by the hardening tests (queue_paths, queue_durable, queue_lock, terminal_injection;
//! included with `#[path]`): a fixture repository with evidence, and the real binary.
#![allow(dead_code)]

#[path = "propose_fixture.rs"]
mod fixture;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub use fixture::*;

/// A temporary repository (`repo/`) on `main` and an evidence store (`evidence/`) of lowering
/// refusals of real mutated corpus programs (one bucket: shared-memory alignment 2048).
pub fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let evidence = tmp.path().join("evidence");
    make_repo(&repo);
    let muts = [Mutation { from: "align 1024", to: &["align 2048"] }];
    let stored = make_evidence(&repo, &evidence, &["attention-fwd", "knn-topk"], &muts, 3);
    assert!(stored.len() >= 2, "the fixture makes evidence");
    (tmp, repo, evidence)
}

/// Run `cake-evolve-compiler` with `args` in `dir`.
pub fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cake-evolve-compiler")).args(args).current_dir(dir).output().expect("the binary runs")
}

pub fn text(o: &Output) -> String {
    format!("status {:?}\n--- stdout\n{}\n--- stderr\n{}", o.status.code(), String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// `propose --no-gates` from `evidence`; must succeed.
pub fn propose(repo: &Path, evidence: &Path) -> Output {
    let o = run(repo, &["propose", "--no-gates", "--no-progress", "--evidence", evidence.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    o
}

/// The record files of the queue (`proposals/*.toml`), by file name.
pub fn record_files(repo: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(repo.join("proposals")).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.ends_with(".toml")).collect();
    v.sort();
    v
}
