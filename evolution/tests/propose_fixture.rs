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

/// Drop the ablated codes' entries from a corpus manifest's expected findings.
fn ablate_manifest(text: &str) -> String {
    let mut out = text.to_string();
    for code in ABLATED {
        let pat = format!("{{ code = \"{code}\"");
        while let Some(i) = out.find(&pat) {
            let end = out[i..].find('}').map_or(out.len(), |j| i + j + 1);
            // The entry and the separator after it (", " or ",\n  ").
            let mut stop = end;
            let rest = &out[end..];
            if let Some(r) = rest.strip_prefix(',') {
                stop += 1 + (r.len() - r.trim_start_matches([' ', '\n']).len());
            }
            out.replace_range(i..stop, "");
        }
    }
    out.replace(", ]", " ]").replace(",\n]", "\n]")
}

/// A git repository at `dst` whose `main` holds the compiler data (less the [`ABLATED`] rules),
/// the corpus, the calibration and the CHANGELOG of this checkout, committed; HEAD on `main`,
/// working copy clean.
pub fn make_repo(dst: &Path) -> git2::Repository {
    let src = checkout();
    copy_dir(&src.join("compiler/rules"), &dst.join("compiler/rules"), &[]);
    for code in ABLATED {
        for e in std::fs::read_dir(dst.join("compiler/rules/data-consistency")).unwrap().flatten() {
            if e.file_name().to_string_lossy().starts_with(&format!("{code}-")) {
                std::fs::remove_file(e.path()).unwrap();
            }
        }
    }
    copy_dir(&src.join("compiler/catalog"), &dst.join("compiler/catalog"), &[]);
    std::fs::copy(src.join("compiler/targets.toml"), dst.join("compiler/targets.toml")).unwrap();
    copy_dir(&src.join("corpus"), &dst.join("corpus"), &["results"]);
    for code in ABLATED {
        for e in std::fs::read_dir(dst.join("corpus/verifier-negative")).unwrap().flatten() {
            let p = e.path();
            if e.file_name().to_string_lossy().starts_with(&format!("{code}-")) {
                std::fs::remove_file(&p).unwrap();
            } else if p.extension().is_some_and(|x| x == "toml") {
                let text = std::fs::read_to_string(&p).unwrap();
                std::fs::write(&p, ablate_manifest(&text)).unwrap();
            }
        }
    }
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
