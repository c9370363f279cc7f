//! Unit tests: parse and type-check source text, then run the protocol analysis alone.

use crate::check::check_source;
use crate::diag::{Diagnostic, Severity};
use crate::span::line_col;
use crate::target::TargetTable;

use super::{analyze, code, Findings, Subject};

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
/// The shown findings (follow-ons left out, as `cake check` does) of one kind, located.
fn located(src: &str, ds: &[Diagnostic], coverage: bool) -> Vec<(String, usize, usize)> {
    let mut v: Vec<(String, usize, usize)> = ds
        .iter()
        .filter(|d| !d.is_follow_on())
        .filter(|d| if coverage { d.severity == Severity::CoverageLimit } else { d.severity == Severity::Error })
        .map(|d| {
            let (l, c) = line_col(src, d.primary.span.start as usize);
            (d.code.clone(), l, c)
        })
        .collect();
    v.sort();
    v
}

/// The three example kernels as of the analysis's tests (the variants below patch these, so an
/// edit of `examples/` does not silently change what the tests check).
const WS_GEMM: &str = r#"# Warp-specialized persistent bf16 GEMM for Hopper: C = A · Bᵀ (both operands K-major).
# One producer warpgroup streams 128×64 tiles of A and 256×64 tiles of B through a
# 4-stage TMA pipeline; two consumer warpgroups each own 64 rows of the 128×256 tile.
kernel gemm_bf16_ws target sm_90a

dim M multiple_of 128
dim N multiple_of 256
dim K multiple_of 64

in A: bf16[M, K] tma [128, 64] swizzle 128B
in B: bf16[N, K] tma [256, 64] swizzle 128B
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 256] persistent

smem a_s: bf16[128, 64] stages 4 swizzle 128B align 1024
smem b_s: bf16[256, 64] stages 4 swizzle 128B align 1024

# The producer gives registers back so the consumers can hold 64×256 fp32 accumulators.
role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline ab: stages 4 producer load consumer mma

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            acquire(ab)
            tma_load(a_s[ab.stage], A[t.m * 128 :+ 128, kb * 64 :+ 64], ab)
            tma_load(b_s[ab.stage], B[t.n * 256 :+ 256, kb * 64 :+ 64], ab)
        }
    }
}

on mma {
    reg acc: f32[64, 256] per warpgroup
    for t in tiles {
        zero(acc)
        for kb in 0..K / 64 {
            wait(ab)
            wgmma(acc, a_s[ab.stage, mma.warpgroup * 64 :+ 64], b_s[ab.stage])
            wgmma_commit()
            wgmma_wait(0)
            release(ab)
        }
        store(C[t.m * 128 + mma.warpgroup * 64 :+ 64, t.n * 256 :+ 256], cast(acc, bf16))
    }
}
"#;
const KMEANS: &str = r#"# Flash-KMeans assign for Hopper: for every point, the index of its nearest centroid.
# argmin_k ‖x − c_k‖² = argmin_k (‖c_k‖² − 2·x·c_k), so distances come from one wgmma per
# centroid tile plus the centroid norms. A 128-point tile of X is loaded once per output
# tile; centroids and their norms stream through a 4-stage pipeline; each consumer
# warpgroup keeps a running min / argmin for its 64 points.
# Headline shape: B=32, N=65536, K=1024, D=128.
kernel kmeans_assign target sm_90a

dim B
dim N multiple_of 128
dim K multiple_of 128
dim D multiple_of 128

in X: bf16[B, N, D] tma [1, 128, 64] swizzle 128B
in C: bf16[B, K, D] tma [1, 128, 64] swizzle 128B
in CN: f32[B, K] tma [1, 128]
out Idx: i32[B, N]

grid tiles[b = B, n = N / 128] persistent

smem x_s: bf16[2, 128, 64] swizzle 128B align 1024
smem c_s: bf16[2, 128, 64] stages 4 swizzle 128B align 1024
smem cn_s: f32[128] stages 4

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline xp: stages 1 producer load consumer mma
pipeline cs: stages 4 producer load consumer mma

on load {
    for t in tiles {
        acquire(xp)
        for dc in 0..2 {
            tma_load(x_s[dc], X[t.b, t.n * 128 :+ 128, dc * 64 :+ 64], xp)
        }
        for kt in 0..K / 128 {
            acquire(cs)
            for dc in 0..2 {
                tma_load(c_s[cs.stage, dc], C[t.b, kt * 128 :+ 128, dc * 64 :+ 64], cs)
            }
            tma_load(cn_s[cs.stage], CN[t.b, kt * 128 :+ 128], cs)
        }
    }
}

on mma {
    reg acc: f32[64, 128] per warpgroup
    reg best_d: f32[64] per warpgroup
    reg best_i: i32[64] per warpgroup
    for t in tiles {
        wait(xp)
        fill(best_d, inf)
        fill(best_i, 0)
        for kt in 0..K / 128 {
            wait(cs)
            zero(acc)
            for dc in 0..2 {
                wgmma(acc, x_s[dc, mma.warpgroup * 64 :+ 64], c_s[cs.stage, dc])
            }
            wgmma_commit()
            wgmma_wait(0)
            let d = cn_s[cs.stage] - 2.0 * acc
            release(cs)
            let m = reduce_min(d, axis=1)
            let i = reduce_argmin(d, axis=1) + kt * 128
            let better = m < best_d
            best_i = select(better, i, best_i)
            best_d = select(better, m, best_d)
        }
        release(xp)
        store(Idx[t.b, t.n * 128 + mma.warpgroup * 64 :+ 64], best_i)
    }
}
"#;
const SM80_GEMM: &str = r#"# Ampere bf16 GEMM: C = A · Bᵀ with mma.sync, ldmatrix and a 3-stage cp.async pipeline.
# Four warps share a 128×128 block tile (2×2 warps of 64×64); every warp both loads and
# computes, so stages are guarded by cp.async groups and a block-wide barrier.
kernel gemm_bf16_sm80 target sm_80

dim M multiple_of 128
dim N multiple_of 128
dim K multiple_of 64

in A: bf16[M, K]
in B: bf16[N, K]
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 128]

smem a_s: bf16[128, 32] stages 3 swizzle 64B
smem b_s: bf16[128, 32] stages 3 swizzle 64B

role all: warp 0..4

on all {
    reg acc: f32[64, 64] per warp
    reg a_f: bf16[64, 16] per warp
    reg b_f: bf16[64, 16] per warp
    for t in tiles {
        zero(acc)
        for s in 0..2 {
            cp_async(a_s[s], A[t.m * 128 :+ 128, s * 32 :+ 32])
            cp_async(b_s[s], B[t.n * 128 :+ 128, s * 32 :+ 32])
            cp_async_commit()
        }
        for kb in 0..K / 32 {
            cp_async_wait(1)
            sync()
            if kb + 2 < K / 32 {
                cp_async(a_s[(kb + 2) % 3], A[t.m * 128 :+ 128, (kb + 2) * 32 :+ 32])
                cp_async(b_s[(kb + 2) % 3], B[t.n * 128 :+ 128, (kb + 2) * 32 :+ 32])
            }
            cp_async_commit()
            for ks in 0..2 {
                ldmatrix(a_f, a_s[kb % 3, all.warp / 2 * 64 :+ 64, ks * 16 :+ 16])
                ldmatrix(b_f, b_s[kb % 3, all.warp % 2 * 64 :+ 64, ks * 16 :+ 16])
                mma_sync(acc, a_f, b_f)
            }
        }
        # The next tile's prologue overwrites stages that slower warps may still be reading.
        sync()
        store(C[t.m * 128 + all.warp / 2 * 64 :+ 64, t.n * 128 + all.warp % 2 * 64 :+ 64], cast(acc, bf16))
    }
}
"#;

/// A variant of a base kernel with textual substitutions (each must apply).
fn variant(name: &str, subs: &[(&str, &str)]) -> String {
    let mut s = match name {
        "gemm_bf16_ws.cake" => WS_GEMM.to_string(),
        "kmeans_assign.cake" => KMEANS.to_string(),
        "gemm_bf16_sm80.cake" => SM80_GEMM.to_string(),
        _ => example(name),
    };
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
    for src in [WS_GEMM, KMEANS, SM80_GEMM] {
        let ds = run(src);
        assert!(ds.is_empty(), "{}", show(src, &ds));
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
    let mut bases: Vec<String> = ["gemm_bf16_ws.cake", "kmeans_assign.cake", "gemm_bf16_sm80.cake"].iter().map(|n| example(n)).collect();
    bases.push(WS_GEMM.to_string());
    for src in &bases {
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

/// The ws GEMM with explicit barriers instead of a pipeline (the base of the explicit-barrier
/// negative cases): a 2-slot ring, full barriers armed with the TMA bytes, empty barriers the
/// producer waits on starting at parity 1.
const EXPLICIT_GEMM: &str = r#"# Hopper bf16 GEMM with explicit mbarriers instead of a pipeline: a 2-slot ring of A/B tiles,
# a full barrier per slot (TMA bytes) and an empty barrier per slot (consumer release).
kernel gemm_explicit target sm_90a

dim M multiple_of 128
dim N multiple_of 256
dim K multiple_of 64

in A: bf16[M, K] tma [128, 64] swizzle 128B
in B: bf16[N, K] tma [256, 64] swizzle 128B
out C: bf16[M, N]

grid tiles[m = M / 128, n = N / 256]

smem a_s: bf16[2, 128, 64] swizzle 128B align 1024
smem b_s: bf16[2, 256, 64] swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

barrier full: stages 2 count 1 producer load consumer mma
barrier empty: stages 2 count 1 producer mma consumer load

on load {
    for t in tiles {
        for kb in 0..K / 64 {
            wait_parity(empty[kb % 2], (kb / 2 + 1) % 2)
            arrive_expect_tx(full[kb % 2], 49152)
            tma_load(a_s[kb % 2], A[t.m * 128 :+ 128, kb * 64 :+ 64], full[kb % 2])
            tma_load(b_s[kb % 2], B[t.n * 256 :+ 256, kb * 64 :+ 64], full[kb % 2])
        }
    }
}

on mma {
    reg acc: f32[64, 256] per warpgroup
    for t in tiles {
        zero(acc)
        for kb in 0..K / 64 {
            wait(full[kb % 2])
            wgmma(acc, a_s[kb % 2, mma.warpgroup * 64 :+ 64], b_s[kb % 2])
            wgmma_commit()
            wgmma_wait(0)
            arrive(empty[kb % 2])
        }
        store(C[t.m * 128 + mma.warpgroup * 64 :+ 64, t.n * 256 :+ 256], cast(acc, bf16))
    }
}
"#;

/// Two chained GEMMs with P staged through shared memory (the base of the V455 case).
const CHAINED_GEMM: &str = r#"# Two chained GEMMs per tile (attention without the softmax): S = Q·Kᵀ, P = bf16(S), O += P·V.
kernel attn_lite target sm_90a

dim M multiple_of 128
dim N multiple_of 64

in Q: bf16[M, 64] tma [128, 64] swizzle 128B
in Kt: bf16[N, 64] tma [64, 64] swizzle 128B
in V: bf16[64, N] tma [64, 64] swizzle 128B
out O: bf16[M, 64]

grid tiles[m = M / 128] persistent

smem q_s: bf16[128, 64] swizzle 128B align 1024
smem k_s: bf16[64, 64] stages 2 swizzle 128B align 1024
smem v_s: bf16[64, 64] stages 2 swizzle 128B align 1024
smem p_s: bf16[2, 64, 64] swizzle 128B align 1024

role load: warpgroup 0 regs 40
role mma: warpgroup 1..3 regs 232

pipeline qp: stages 1 producer load consumer mma
pipeline kv: stages 2 producer load consumer mma

on load {
    for t in tiles {
        acquire(qp)
        tma_load(q_s, Q[t.m * 128 :+ 128, 0 :+ 64], qp)
        for nb in 0..N / 64 {
            acquire(kv)
            tma_load(k_s[kv.stage], Kt[nb * 64 :+ 64, 0 :+ 64], kv)
            tma_load(v_s[kv.stage], V[0 :+ 64, nb * 64 :+ 64], kv)
        }
    }
}

on mma {
    reg s: f32[64, 64] per warpgroup
    reg o: f32[64, 64] per warpgroup
    for t in tiles {
        wait(qp)
        zero(o)
        for nb in 0..N / 64 {
            wait(kv)
            zero(s)
            wgmma(s, q_s[mma.warpgroup * 64 :+ 64], k_s[kv.stage])
            wgmma_commit()
            wgmma_wait(0)
            stmatrix(p_s[mma.warpgroup], cast(s, bf16))
            fence_proxy_async()
            sync_role(mma)
            wgmma(o, p_s[mma.warpgroup], v_s[kv.stage])
            wgmma_commit()
            wgmma_wait(0)
            release(kv)
        }
        release(qp)
        store(O[t.m * 128 + mma.warpgroup * 64 :+ 64, 0 :+ 64], cast(o, bf16))
    }
}
"#;

#[test]
fn explicit_barrier_gemm_and_chained_gemm_are_accepted() {
    for src in [EXPLICIT_GEMM, CHAINED_GEMM] {
        let ds = run(src);
        assert!(ds.is_empty(), "{}", show(src, &ds));
    }
}

#[test]
fn explicit_barrier_parity_sequence_across_persistent_tiles() {
    // With a persistent grid the per-tile `kb` restarts; K/64 per slot is odd for the bindings,
    // so the producer's parity goes out of step on the second tile.
    let src = EXPLICIT_GEMM.replace("grid tiles[m = M / 128, n = N / 256]", "grid tiles[m = M / 128, n = N / 256] persistent");
    let ds = run(&src);
    let codes: Vec<String> = located(&src, &ds, false).into_iter().map(|x| x.0).collect();
    assert_eq!(codes, vec![code::PHASE_DESYNC.to_string()], "{}", show(&src, &ds));
}

#[test]
fn mutated_explicit_gemm_never_panics() {
    let lines: Vec<&str> = EXPLICIT_GEMM.lines().collect();
    for i in 0..lines.len() {
        let mut v = lines.clone();
        v.remove(i);
        let out = check_source(&v.join("\n"));
        if let Some(module) = out.module {
            let target = TargetTable::builtin().get(&module.target).unwrap().clone();
            let _ = analyze(&module, &target);
        }
    }
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

/// Of the errors about one barrier, a consequence (a deadlock) follows the cause even when it
/// was found first; errors about another barrier, and findings without a subject, stay causes.
#[test]
fn findings_about_one_barrier_follow_its_first_cause() {
    use crate::span::Span;
    let mut arena: crate::ir::Arena<crate::ir::BarrierDecl, crate::ir::DeclSpans> = Default::default();
    let ds = || crate::ir::DeclSpans { item: Span::default(), name: Span::default(), attrs: Vec::new() };
    let bar = |name: &str| crate::ir::BarrierDecl { name: name.to_string(), stages: 1, count: 1, producers: Vec::new(), consumers: Vec::new() };
    let (full, empty) = (arena.append(bar("full"), ds()), arena.append(bar("empty"), ds()));
    let err = |code: &str, at: usize| Diagnostic::error(code, code, Span::new(at, at + 1), "");
    let mut f = Findings::default();
    f.push_about(err(code::DEADLOCK, 1), Some(Subject::Barrier(full)));
    f.push_about(err(code::ARRIVAL_COUNT, 2), Some(Subject::Barrier(full)));
    f.push_about(err(code::TX_BYTES, 3), Some(Subject::Barrier(full)));
    f.push_about(err(code::DEADLOCK, 4), Some(Subject::Barrier(empty)));
    f.push(err(code::RELEASE_BEFORE_READ, 5));
    let out = f.into_sorted();
    let follows: Vec<(&str, Option<&str>)> = out.iter().map(|d| (d.code.as_str(), d.follows.as_ref().map(|c| c.code.as_str()))).collect();
    assert_eq!(
        follows,
        [
            (code::DEADLOCK, Some(code::ARRIVAL_COUNT)),
            (code::ARRIVAL_COUNT, None),
            (code::TX_BYTES, Some(code::ARRIVAL_COUNT)),
            (code::DEADLOCK, None),
            (code::RELEASE_BEFORE_READ, None),
        ]
    );
}
