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
