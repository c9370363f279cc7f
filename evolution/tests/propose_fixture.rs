//! Test fixture shared by the propose / review / calibration tests (included with `#[path]`; on
//! its own it has no tests): a temporary git repository holding a copy of this checkout's compiler
//! data and corpus, and an evidence store filled by running real broken candidates through the
//! compiler.
//!
//! The evidence is not written by hand: each candidate is a corpus program with one mutation,
//! run through `cake::check::check_source` (which it passes — the verifier accepts it) and then
//! `cake::lower::lower`, whose refusal is recorded as a failure report (stage `lower`, the
//! lowering's code and message, the `.cake` line it names) with the program stored under
//! `programs/`. (The end-to-end test proposes from the bundled evidence of real runs instead,
//! `evolution/evidence/bundle`.)
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use cake_evolve::store::{EvidenceStore, FailureReport, SpanKind, SpanRef, Stage};

/// The checkout this test runs in.
pub fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Copy a directory tree, leaving out entries named in `skip`.
pub fn copy_dir(src: &Path, dst: &Path, skip: &[&str]) {
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
    pub from: &'static str,
    /// The replacements, each making one candidate per case.
    pub to: &'static [&'static str],
}

/// Run `source` through the compiler: `Some(failure)` when the verifier accepts it and the
/// lowering refuses it.
fn lower_failure(source: &str) -> Option<(String, String, Option<u32>)> {
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

/// Apply every mutation to every accepted sm_90a corpus case of `families` (in id order), at most
/// `per_mutation` failing candidates each; store each candidate the verifier accepts and the
/// lowering refuses in the store at `store_dir`. The stored programs' hashes.
pub fn make_evidence(repo_root: &Path, store_dir: &Path, families: &[&str], mutations: &[Mutation], per_mutation: usize) -> Vec<String> {
    let corpus = cake::corpus::Corpus::load(repo_root.join("corpus")).unwrap();
    let store = EvidenceStore::open(store_dir).unwrap();
    let mut stored = Vec::new();
    for m in mutations {
        let mut made = 0;
        for case in corpus.cases.iter().filter(|c| families.contains(&c.family.as_str()) && c.manifest.expect.verdict == cake::corpus::Verdict::Accept && c.manifest.target == "sm_90a") {
            if !case.source.contains(m.from) {
                continue;
            }
            for rep in m.to {
                if made >= per_mutation {
                    continue;
                }
                let source = case.source.replacen(m.from, rep, 1);
                let Some((code, message, line)) = lower_failure(&source) else { continue };
                made += 1;
                stored.push(store_failure(&store, &case.manifest.target, &source, &code, &message, line, rep));
            }
        }
    }
    stored
}

/// Record one lowering refusal of `source` in the store: the program under `programs/` and a
/// failure report naming the `.cake` line the lowering pointed at (found again in the stored,
/// canonical text by `marker`, the mutated text).
fn store_failure(store: &EvidenceStore, target: &str, source: &str, code: &str, message: &str, line: Option<u32>, marker: &str) -> String {
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
