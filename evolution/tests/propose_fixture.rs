//! Test fixture shared by the propose / review tests (included with `#[path]`; on its own it has
//! no tests): a temporary git repository holding a copy of this checkout's compiler data and
//! corpus, and an evidence store filled by running real broken candidates through the compiler.
//!
//! The evidence is not written by hand: each candidate is a corpus program with one mutation,
//! run through `cake::check::check_source` (which it passes — the verifier accepts it) and then
//! `cake::lower::lower`, whose refusal is recorded as a failure report (stage `lower`, the
//! lowering's code and message, the `.cake` line it names) with the program stored under
//! `programs/`. Each mutation kind has training candidates (stored) and held-out candidates
//! (returned, never stored) made by the same kind of mutation with other values or programs.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cake_evolve::store::{EvidenceStore, FailureReport, SpanKind, SpanRef, Stage};

/// The checkout this test runs in.
pub fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn copy_dir(src: &Path, dst: &Path, skip: &[&str]) {
    std::fs::create_dir_all(dst).unwrap();
    let mut entries: Vec<_> = std::fs::read_dir(src).unwrap().flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if skip.contains(&name.as_str()) {
            continue;
        }
        if p.is_dir() {
            copy_dir(&p, &dst.join(&name), skip);
        } else {
            std::fs::copy(&p, dst.join(&name)).unwrap();
        }
    }
}

/// A git repository at `dst` whose `main` holds the compiler data, the corpus, the calibration
/// and the CHANGELOG of this checkout, committed; HEAD on `main`, working copy clean.
pub fn make_repo(dst: &Path) -> git2::Repository {
    let src = checkout();
    copy_dir(&src.join("compiler/rules"), &dst.join("compiler/rules"), &[]);
    copy_dir(&src.join("compiler/catalog"), &dst.join("compiler/catalog"), &[]);
    std::fs::copy(src.join("compiler/targets.toml"), dst.join("compiler/targets.toml")).unwrap();
    copy_dir(&src.join("corpus"), &dst.join("corpus"), &["results"]);
    copy_dir(&src.join("calibration"), &dst.join("calibration"), &["microbench"]);
    std::fs::copy(src.join("CHANGELOG.md"), dst.join("CHANGELOG.md")).unwrap();
    std::fs::create_dir_all(dst.join("proposals")).unwrap();
    std::fs::write(dst.join("proposals/README.md"), "# proposals/\n").unwrap();
    let mut opts = git2::RepositoryInitOptions::new();
    opts.initial_head("main");
    let repo = git2::Repository::init_opts(dst, &opts).unwrap();
    {
        let mut cfg = repo.config().unwrap();
        cfg.set_str("user.name", "Test Reviewer").unwrap();
        cfg.set_str("user.email", "reviewer@example.invalid").unwrap();
    }
    let mut index = repo.index().unwrap();
    index.add_all(["*"].iter(), git2::IndexAddOption::DEFAULT, None).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::new("Test Reviewer", "reviewer@example.invalid", &git2::Time::new(1_700_000_000, 0)).unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "Cake data, corpus and calibration", &tree, &[]).unwrap();
    drop(tree);
    repo
}

/// One kind of mutation: a text replacement applied to the first match in a program.
pub struct Mutation {
    pub name: &'static str,
    /// Only these corpus cases (empty: every case of the families).
    pub cases: &'static [&'static str],
    pub from: &'static str,
    /// Replacements used for the stored (training) evidence.
    pub train: &'static [&'static str],
    /// Replacements used for the held-out candidates.
    pub heldout: &'static [&'static str],
}

/// A candidate that failed after the verifier accepted it.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub mutation: &'static str,
    pub case: String,
    pub source: String,
    pub code: String,
    pub message: String,
}

/// Run `source` through the compiler: `Some(failure)` when the verifier accepts it and the
/// lowering refuses it.
pub fn lower_failure(source: &str) -> Option<(String, String, Option<u32>)> {
    let out = cake::check::check_source(source);
    let v = out.validated?;
    match cake::lower::lower(&v) {
        Ok(_) => None,
        Err(e) => {
            let line = cake::span::line_col(source, (e.span.start as usize).min(source.len())).0 as u32;
            Some((e.code.to_string(), e.message.clone(), (e.span.end > 0).then_some(line)))
        }
    }
}

/// Apply every mutation to every accepted sm_90a corpus case of `families` (in id order); store
/// the training failures in the store at `store_dir`, return the held-out failures.
pub fn make_evidence(repo_root: &Path, store_dir: &Path, families: &[&str], mutations: &[Mutation], per_mutation: usize) -> (Vec<Candidate>, Vec<Candidate>) {
    let corpus = cake::corpus::Corpus::load(repo_root.join("corpus")).unwrap();
    let store = EvidenceStore::open(store_dir).unwrap();
    let mut train = Vec::new();
    let mut heldout = Vec::new();
    for m in mutations {
        let mut made: BTreeMap<&str, usize> = BTreeMap::new();
        for case in corpus.cases.iter().filter(|c| families.contains(&c.family.as_str()) && c.manifest.expect.verdict == cake::corpus::Verdict::Accept && c.manifest.target == "sm_90a") {
            if !case.source.contains(m.from) || (!m.cases.is_empty() && !m.cases.contains(&case.id.as_str())) {
                continue;
            }
            for (set, reps, out) in [("train", m.train, &mut train), ("heldout", m.heldout, &mut heldout)] {
                for rep in reps {
                    if made.get(set).copied().unwrap_or(0) >= per_mutation {
                        continue;
                    }
                    let source = case.source.replacen(m.from, rep, 1);
                    let Some((code, message, line)) = lower_failure(&source) else { continue };
                    *made.entry(set).or_default() += 1;
                    if set == "train" {
                        store_failure(&store, &case.manifest.target, &source, &code, &message, line, rep);
                    }
                    out.push(Candidate { mutation: m.name, case: case.id.clone(), source, code, message });
                }
            }
        }
    }
    (train, heldout)
}

/// Record one lowering refusal of `source` in the store: the program under `programs/` and a
/// failure report naming the `.cake` line the lowering pointed at (found again in the stored,
/// canonical text by `marker`, the mutated text).
pub fn store_failure(store: &EvidenceStore, target: &str, source: &str, code: &str, message: &str, line: Option<u32>, marker: &str) -> String {
    let stored = store.put_program(source).unwrap();
    let mut r = FailureReport::new(&stored.sha256, target, Stage::Lower, "cake", format!("lower_{code}"), format!("{code}: {message}"));
    if let Some(l) = line {
        let canon = store.program(&stored.sha256).unwrap().unwrap();
        let want = marker.trim();
        let l2 = canon.lines().position(|x| x.contains(want)).map(|i| i as u32 + 1).unwrap_or(l);
        r.span = Some(SpanRef { kind: SpanKind::Cake, line: l2, col: None, file: None });
    }
    store.append(r).unwrap();
    stored.sha256
}
