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

/// Evidence no predicate over the verifier's facts can explain: the SwiGLU and GeGLU corpus
/// programs (sm_90a) with the activation applied to the wrong input (`silu(y) · x` for
/// `silu(x) · y`), recorded as wrong answers. Every fact of every construct equals the accepted
/// original's: which input an expression uses is no fact. Returns the programs' hashes.
pub fn unexpressible_evidence(repo_dir: &Path, store_dir: &Path) -> Vec<String> {
    use cake_evolve::store::{EvidenceStore, FailureReport, Stage};
    let corpus = cake::corpus::Corpus::load(repo_dir.join("corpus")).unwrap();
    let store = EvidenceStore::open(store_dir).unwrap();
    let swaps = [
        ("elementwise/swiglu-sm_90a-bf16-c4096", "x / (1.0 + exp(0.0 - x)) * y", "y / (1.0 + exp(0.0 - y)) * x"),
        ("elementwise/geglu-sm_90a-f16-c2048", "x / (1.0 + exp(-1.702 * x)) * y", "y / (1.0 + exp(-1.702 * y)) * x"),
    ];
    let mut out = Vec::new();
    for (id, from, to) in swaps {
        let case = corpus.cases.iter().find(|c| c.id == id).unwrap_or_else(|| panic!("corpus case {id}"));
        assert!(case.source.contains(from), "{id}: {from}");
        let src = case.source.replace(from, to);
        let stored = store.put_program(&src).unwrap();
        let mut r = FailureReport::new(&stored.sha256, "sm_90a", Stage::Run, "cake run", "mismatch", "Z: 1048576 of 1048576 elements differ from the oracle");
        for (k, v) in [("oracle", serde_json::json!("elementwise")), ("checked", serde_json::json!(1048576)), ("mismatches", serde_json::json!(1048576)), ("output_shape", serde_json::json!([256, 4096]))] {
            r.extra.insert(k.to_string(), v);
        }
        store.append(r).unwrap();
        out.push(stored.sha256);
    }
    out
}

/// `calibration/sm_90a.toml`'s text with `[param.NAME]`'s value times `factor`: a calibration
/// with one parameter off, for the tests whose "measured" times are the model's own under it.
pub fn scaled(text: &str, name: &str, factor: f64) -> String {
    let cal = cake::cost::Calibration::from_toml_str("calibration/sm_90a.toml", text).unwrap();
    let v = cal.params[name].value * factor;
    let header = format!("[param.{name}]");
    let mut inside = false;
    text.lines()
        .map(|l| {
            if l.starts_with('[') {
                inside = l.starts_with(&header);
            }
            if inside && l.starts_with("value") {
                format!("value = {v:e}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
