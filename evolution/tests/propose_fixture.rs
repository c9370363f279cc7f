//! Test fixture shared by the propose / review / calibration tests (included with `#[path]`; on
//! its own it has no tests): a temporary git repository holding a copy of this checkout's compiler
//! data and corpus. The tests propose from the bundled evidence of real runs
//! (`evolution/evidence/bundle`). (This fixture once also made evidence from corpus programs the
//! verifier accepted and the lowering refused; with one derived layout for every stage there
//! are none left to make.)
#![allow(dead_code)]

use std::path::{Path, PathBuf};


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

/// Verifier rules the fixture's `main` leaves out, with their negative cases and every expected
/// finding of theirs: an ablation. The bundle's wrong answers were recorded before V325
/// (operand-read-at-other-rows) existed, and it rejects most of them; without it the engine has
/// to learn from them what it can (issue 12's ablation: remove a rule, let its class through).
pub const ABLATED: &[&str] = &["V325"];

/// A git repository at `dst` whose `main` holds the compiler data (less the [`ABLATED`] rules),
/// the corpus, the calibration and the CHANGELOG of this checkout, committed; HEAD on `main`,
/// working copy clean.
pub fn make_repo(dst: &Path) -> git2::Repository {
    let codes: Vec<String> = ABLATED.iter().map(|c| c.to_string()).collect();
    cake_evolve::benchmark::ablate::make_ablated_repo(&checkout(), dst, &codes).unwrap();
    let repo = git2::Repository::open(dst).unwrap();
    {
        let mut cfg = repo.config().unwrap();
        cfg.set_str("user.name", "Test Reviewer").unwrap();
        cfg.set_str("user.email", "reviewer@example.invalid").unwrap();
    }
    repo
}
