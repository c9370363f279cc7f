//! Shared by the hardening tests (queue_paths, queue_durable, queue_lock, terminal_injection;
//! included with `#[path]`): a fixture repository with evidence, and the real binary.
#![allow(dead_code)]

#[path = "propose_fixture.rs"]
mod fixture;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub use fixture::*;

/// A temporary repository (`repo/`) on `main` and a copy of the committed evidence bundle
/// (`evidence/`): real H200 runs whose half-filled TMA stages are a class today's verifier
/// misses, so `propose` makes a rule from them.
pub fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let evidence = tmp.path().join("evidence");
    make_repo(&repo);
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("evidence/bundle"), &evidence, &[]);
    (tmp, repo, evidence)
}

/// A store of failure reports (stage `run`) made from the wrong-answer runs of the store at
/// `clean`, over its programs, each report's class and message ending in `suffix`: a second
/// evidence set whose buckets differ from the run records'.
pub fn failure_store(tmp: &Path, clean: &Path, suffix: &str) -> PathBuf {
    use cake::runtime::job::Verdict;
    use cake_evolve::store::{EvidenceStore, FailureReport, Record, Stage};
    let dir = tmp.join(format!("failures-{}", suffix.len()));
    copy_dir(&clean.join("programs"), &dir.join("programs"), &[]);
    let store = EvidenceStore::open(&dir).unwrap();
    let mut made = 0;
    for s in &EvidenceStore::open(clean).unwrap().scan().records {
        let Record::Run(r) = &s.record else { continue };
        if r.verdict != Verdict::Mismatch {
            continue;
        }
        let f = FailureReport::new(&r.program.sha256, &r.program.target, Stage::Run, "cake", format!("run/mismatch{suffix}"), format!("wrong answer: rows differ{suffix}"));
        store.append(f).unwrap();
        made += 1;
    }
    assert!(made >= 2, "the store has wrong-answer runs");
    dir
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

/// The id of the first rule proposal in the queue (a proposal for a new fact, `a-…`, cannot be
/// accepted until its analysis exists).
pub fn first_rule_id(repo: &Path) -> String {
    record_files(repo).into_iter().find(|f| f.starts_with("r-")).expect("propose made a rule proposal").trim_end_matches(".toml").to_string()
}
