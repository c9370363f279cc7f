//! Unit tests: parse and type-check source text, then run the protocol analysis alone.

use crate::check::check_source;
use crate::diag::{Diagnostic, Severity};
use crate::span::line_col;
use crate::target::TargetTable;

use super::{analyze, code};

fn run(src: &str) -> Vec<Diagnostic> {
    let out = check_source(src);
    let errs: Vec<String> = out.diagnostics.iter().filter(|d| d.is_error()).map(|d| format!("{}: {}", d.code, d.message)).collect();
    let module = out.module.unwrap_or_else(|| panic!("program does not type-check: {errs:?}"));
    let target = TargetTable::builtin().get(&module.target).expect("target").clone();
    analyze(&module, &target)
}

fn show(src: &str, ds: &[Diagnostic]) -> String {
    ds.iter()
        .map(|d| {
            let (l, c) = line_col(src, d.primary.span.start as usize);
            format!("{} {:?} {l}:{c} {}", d.code, d.severity, d.message)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn example(name: &str) -> String {
    let path = root().join("examples").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// (code, line, column) of the findings of one severity class.
fn located(src: &str, ds: &[Diagnostic], coverage: bool) -> Vec<(String, usize, usize)> {
    let mut v: Vec<(String, usize, usize)> = ds
        .iter()
        .filter(|d| if coverage { d.severity == Severity::CoverageLimit } else { d.severity == Severity::Error })
        .map(|d| {
            let (l, c) = line_col(src, d.primary.span.start as usize);
            (d.code.clone(), l, c)
        })
        .collect();
    v.sort();
    v
}

/// A variant of an example with textual substitutions (each must apply).
fn variant(name: &str, subs: &[(&str, &str)]) -> String {
    let mut s = example(name);
    for (a, b) in subs {
        assert!(s.contains(a), "`{a}` not in {name}");
        s = s.replacen(a, b, 1);
    }
    s
}

#[test]
fn examples_have_no_findings() {
    for name in ["gemm_bf16_ws.cake", "kmeans_assign.cake", "gemm_bf16_sm80.cake"] {
        let src = example(name);
        let ds = run(&src);
        assert!(ds.is_empty(), "{name}:\n{}", show(&src, &ds));
    }
}

/// Every negative corpus case of this analysis's codes (corpus/verifier-negative/V1xx, V45x,
/// V95x) is reported with exactly the manifest's findings by the protocol analysis alone.
#[test]
fn negative_corpus_cases() {
    let dir = root().join("corpus/verifier-negative");
    let mut seen_codes = std::collections::BTreeSet::new();
    let mut n = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir).expect("corpus/verifier-negative").filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|s| s.to_str()).unwrap_or("").to_string();
        if !name.ends_with(".toml") || !code::ALL.iter().any(|c| name.starts_with(&format!("{c}-"))) {
            continue;
        }
        let manifest: toml::Table = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let program = manifest["program"].as_str().unwrap();
        let src = std::fs::read_to_string(dir.join(program)).unwrap();
        let expect = manifest["expect"].as_table().unwrap();
        let list = |key: &str| -> Vec<(String, usize, usize)> {
            let mut v: Vec<(String, usize, usize)> = expect
                .get(key)
                .and_then(|x| x.as_array())
                .map(|a| {
                    a.iter()
                        .map(|f| {
                            let t = f.as_table().unwrap();
                            (t["code"].as_str().unwrap().to_string(), t["line"].as_integer().unwrap() as usize, t["column"].as_integer().unwrap() as usize)
                        })
                        .collect()
                })
                .unwrap_or_default();
            v.sort();
            v
        };
        let ds = run(&src);
        assert_eq!(located(&src, &ds, false), list("findings"), "{name}:\n{}", show(&src, &ds));
        if expect.contains_key("coverage_limits") {
            assert_eq!(located(&src, &ds, true), list("coverage_limits"), "{name}:\n{}", show(&src, &ds));
        }
        for (c, _, _) in list("findings").into_iter().chain(list("coverage_limits")) {
            seen_codes.insert(c);
        }
        n += 1;
    }
    assert!(n > 0, "no negative cases found in {}", dir.display());
    let missing: Vec<&&str> = code::ALL.iter().filter(|c| !seen_codes.contains(**c)).collect();
    assert!(missing.is_empty(), "codes without a negative corpus case: {missing:?}");
}

/// Every code has a rule doc file (kind = analysis) in compiler/rules/.
#[test]
fn every_code_is_documented() {
    let rules = crate::verify::RuleSet::builtin();
    for c in code::ALL {
        let r = rules.get(c).unwrap_or_else(|| panic!("{c} has no rule doc in compiler/rules/"));
        assert_eq!(r.kind, crate::verify::rules::RuleKind::Analysis, "{c}");
        let coverage = c.starts_with("V95");
        assert_eq!(r.severity == Severity::CoverageLimit, coverage, "{c}: severity");
    }
}

#[test]
fn release_of_previous_stage_after_wgmma_wait_one_is_accepted() {
    // The wgmma_wait(1) pipelining of CUTLASS: keep one group in flight, release the stage the
    // previous group read. Counted symbolically (no coverage limit).
    let src = variant(
        "gemm_bf16_ws.cake",
        &[(
            "            wgmma_wait(0)\n            release(ab)\n        }\n",
            "            wgmma_wait(1)\n            if kb > 0 {\n                release(ab)\n            }\n        }\n        wgmma_wait(0)\n        release(ab)\n",
        )],
    );
    let ds = run(&src);
    assert!(ds.is_empty(), "{}", show(&src, &ds));
}

#[test]
fn wgmma_wait_one_releasing_current_stage_is_rejected() {
    // The same, but releasing the stage the in-flight group still reads.
    let src = variant("gemm_bf16_ws.cake", &[("            wgmma_wait(0)\n            release(ab)\n", "            wgmma_wait(1)\n            release(ab)\n")]);
    let ds = run(&src);
    let found = located(&src, &ds, false);
    assert!(found.iter().any(|(c, _, _)| c == code::RELEASE_BEFORE_READ), "{}", show(&src, &ds));
}

#[test]
fn symbolic_trip_counts_normalize_quotients() {
    // K / 64 in the producer and (K / 32) / 2 in the consumer are the same count.
    let src = variant("gemm_bf16_ws.cake", &[("        for kb in 0..K / 64 {\n            wait(ab)", "        for kb in 0..(K / 32) / 2 {\n            wait(ab)")]);
    let ds = run(&src);
    assert!(ds.is_empty(), "{}", show(&src, &ds));
}

#[test]
fn sm80_missing_block_barrier_after_cp_async_wait() {
    // Without the sync() after cp_async_wait, other warps' copies are not visible, and the next
    // cp.async overwrites a stage other warps may still read.
    let src = variant("gemm_bf16_sm80.cake", &[("            cp_async_wait(1)\n            sync()\n", "            cp_async_wait(1)\n")]);
    let ds = run(&src);
    let codes: Vec<String> = located(&src, &ds, false).into_iter().map(|x| x.0).collect();
    assert!(codes.contains(&code::READ_BEFORE_WAIT.to_string()), "{}", show(&src, &ds));
    assert!(codes.contains(&code::OVERWRITE_IN_USE.to_string()), "{}", show(&src, &ds));
}

#[test]
fn kmeans_zero_before_wait_is_rejected() {
    // zero(acc) is a non-wgmma write of the accumulator: moved between commit and wait it races.
    let src = variant(
        "kmeans_assign.cake",
        &[
            ("            wait(cs)\n            zero(acc)\n", "            wait(cs)\n"),
            ("            wgmma_commit()\n            wgmma_wait(0)\n", "            wgmma_commit()\n            zero(acc)\n            wgmma_wait(0)\n"),
        ],
    );
    let ds = run(&src);
    let codes: Vec<String> = located(&src, &ds, false).into_iter().map(|x| x.0).collect();
    assert!(codes.contains(&code::ACC_BEFORE_WAIT.to_string()), "{}", show(&src, &ds));
}

/// No input panics: every example with any one line removed (when it still type-checks), and
/// with any two adjacent lines swapped.
#[test]
fn mutated_examples_never_panic() {
    let mut analysed = 0;
    for name in ["gemm_bf16_ws.cake", "kmeans_assign.cake", "gemm_bf16_sm80.cake"] {
        let src = example(name);
        let lines: Vec<&str> = src.lines().collect();
        let mut variants: Vec<String> = Vec::new();
        for i in 0..lines.len() {
            let mut v = lines.clone();
            v.remove(i);
            variants.push(v.join("\n"));
            if i + 1 < lines.len() {
                let mut w = lines.clone();
                w.swap(i, i + 1);
                variants.push(w.join("\n"));
            }
        }
        for v in variants {
            let out = check_source(&v);
            if let Some(module) = out.module {
                let target = TargetTable::builtin().get(&module.target).unwrap().clone();
                let _ = analyze(&module, &target);
                analysed += 1;
            }
        }
    }
    assert!(analysed > 50, "only {analysed} variants type-checked");
}

/// Development aid: `CAKE_PROTOCOL_FILE=a.cake:b.cake cargo test -p cake --lib protocol_file -- --ignored --nocapture`.
#[test]
#[ignore]
fn protocol_file() {
    let Ok(paths) = std::env::var("CAKE_PROTOCOL_FILE") else { return };
    for path in paths.split(':') {
        let src = std::fs::read_to_string(path).expect("read");
        let ds = run(&src);
        println!("== {path}\n{}", show(&src, &ds));
    }
}
