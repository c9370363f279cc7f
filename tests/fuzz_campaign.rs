//! The fuzz campaign in CI, with a bounded budget (issue 15, item 7): every input of the
//! persisted corpus (`tests/fuzz/corpus/`) replays with no panic, hang or broken promise, and so
//! do fresh mutants of the seed programs for `CAKE_FUZZ_SECS` seconds (default 90, at most
//! `CAKE_FUZZ_INPUTS` inputs, default 20000) under the fixed seed `CAKE_FUZZ_SEED` (default 0).
//! What it finds is written under the test's scratch folder and named in the failure; move it to
//! `tests/fuzz/corpus/` with the fix. The long campaign is `cake-fuzz` (tests/fuzz/README.md).

use std::path::Path;
use std::time::Duration;

use cake_tests::fuzz::{self, Config};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn the_corpus_replays_and_fresh_mutants_find_nothing() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut cfg = Config::new(root);
    cfg.seed = env_u64("CAKE_FUZZ_SEED", 0);
    cfg.inputs = env_u64("CAKE_FUZZ_INPUTS", 20_000);
    cfg.budget = Some(Duration::from_secs(env_u64("CAKE_FUZZ_SECS", 90)));
    cfg.save_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-findings");
    let report = fuzz::run(&cfg, &mut |_| {});
    println!("{}", report.summary());
    assert!(report.seeds > 100, "the seed programs were not found under {}", root.display());
    assert_eq!(report.replayed, fuzz::cake_files(&cfg.corpus_dir, &["."]).len(), "every persisted input replays");
    assert!(report.inputs > 0, "no fresh input ran within the budget");
    assert!(report.findings.is_empty() && report.stopped.is_none(), "the fuzz campaign found something:\n{}", report.summary());
}
