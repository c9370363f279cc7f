//! Bucketing, attribution and ranking over a store built here, and their determinism.

#[path = "support/records.rs"]
mod records;

use std::collections::BTreeMap;

use cake::runtime::record::RunRecord;
use cake_evolve::mine::{bucket_id, mine_report, render_table, Bucket};
use cake_evolve::store::{EvidenceStore, FailureReport, Record, SpanKind, SpanRef, Stage};

const GEMM: &str = include_str!("../../examples/gemm_bf16_ws.cake");
const KMEANS: &str = include_str!("../../examples/kmeans_assign.cake");

/// Distinct programs: the examples with a comment changed (the canonical text keeps comments).
fn variant(src: &str, i: usize) -> String {
    format!("# variant {i}\n{src}")
}

fn run_record(program_sha: &str, verdict: &str, error: Option<(&str, &str)>, created: u64, checks: serde_json::Value) -> RunRecord {
    let mut r = records::run_record("k", program_sha, verdict, error, created);
    r.workload = serde_json::from_value(serde_json::json!({ "path": "gemm.workload.toml", "sha256": "0".repeat(64), "oracle": "matmul_abt" })).unwrap();
    r.shape = [("M".to_string(), 256), ("N".to_string(), 512), ("K".to_string(), 192)].into();
    r.stage = "launch (correctness)".into();
    r.tensors = serde_json::from_value(serde_json::json!([{ "name": "C", "dtype": "bf16", "shape": [256, 512], "bytes": 262144, "role": "output" }])).unwrap();
    r.checks = serde_json::from_value(checks).expect("valid checks");
    r
}

fn mismatch_check(rows: std::ops::Range<u64>) -> serde_json::Value {
    let bad: Vec<_> = (0..10).map(|c| serde_json::json!({ "index": [rows.start, c], "got": 0.0, "want": 1.0 })).collect();
    serde_json::json!([{
        "oracle": "cublas", "tolerance": { "rtol": 0.02, "atol": 0.01, "samples": 64 }, "checked": 131072,
        "mismatches": 65536, "nonfinite": 0, "first_bad": bad, "max_abs_err": 3.0, "max_err_over_tol": 100.0,
        "rel_l2_err": 0.7, "passed": false
    }])
}

/// The 1-based line of the first line of `src` containing `needle`.
fn line_of(src: &str, needle: &str) -> u32 {
    src.lines().position(|l| l.contains(needle)).expect(needle) as u32 + 1
}

/// A generated-CUDA line that the lowering maps back to the statement containing `needle`.
fn cuda_line_of(src: &str, needle: &str) -> u32 {
    let out = cake::check::check_source(src);
    let m = out.module.expect("type-checks");
    let v = cake::verify::Validated::assume_verified_unsafe(m);
    let l = cake::lower::lower_with(&v, &cake::lower::LowerOptions::with_source("program.cake", src)).expect("lowers");
    let at = src.find(needle).expect(needle) as u32;
    // The innermost statement around it (a `for` loop's lines map to the whole loop).
    l.span_map.iter().filter(|(_, s)| s.start <= at && at < s.end).min_by_key(|(_, s)| s.len()).map(|(line, _)| *line).expect("a CUDA line for the statement")
}

/// Every record of the test store, in a fixed order.
fn records(store: &EvidenceStore) -> Vec<Record> {
    let mut out = Vec::new();
    let mut created = 1000;
    let mut next = || {
        created += 1;
        created
    };
    // Two GEMM variants hang (pipelines) — twice for the first one.
    for i in 0..2 {
        let sha = store.put_program(&variant(GEMM, i)).unwrap().sha256;
        out.push(Record::Run(Box::new(run_record(&sha, "timeout", Some(("timeout", "no result after 10.0 s (last stage: launch)")), next(), serde_json::json!([])))));
    }
    let g0 = store.put_program(&variant(GEMM, 0)).unwrap().sha256;
    out.push(Record::Run(Box::new(run_record(&g0, "timeout", Some(("timeout", "no result after 10.0 s (last stage: launch)")), next(), serde_json::json!([])))));
    // Three programs: ptxas says too much shared data (different kernels, sizes).
    for (i, (src, used)) in [(GEMM, "0x3c000"), (KMEANS, "0x40000"), (GEMM, "0x48000")].iter().enumerate() {
        let sha = store.put_program(&variant(src, 10 + i)).unwrap().sha256;
        let name = if *src == GEMM { "gemm_bf16_ws" } else { "kmeans_assign" };
        let msg = format!("ptxas error   : Entry function '{name}' uses too much shared data ({used} bytes, 0x38c00 max)");
        out.push(Record::Failure(Box::new(FailureReport::new(&sha, "sm_90a", Stage::Compile, "ptxas", "ptxas.too_much_shared_data", msg))));
    }
    // Two programs: memcheck at the generated CUDA line of the epilogue store.
    for i in 0..2 {
        let sha = store.put_program(&variant(GEMM, 20 + i)).unwrap().sha256;
        let src = store.program(&sha).unwrap().unwrap();
        let line = cuda_line_of(&src, "store(C[");
        let mut f = FailureReport::new(
            &sha,
            "sm_90a",
            Stage::Run,
            "memcheck",
            "memcheck.invalid_global_write",
            format!("Invalid __global__ write of size 4 bytes; Address 0x7f31c640{i}100 is out of bounds"),
        );
        f.span = Some(SpanRef { kind: SpanKind::Cuda, line, col: None, file: Some("kernel.cu".into()) });
        f.gpu_seconds = Some(3.0);
        out.push(Record::Failure(Box::new(f)));
    }
    // Two programs: a racecheck hazard at a .cake line (a tma_load).
    for i in 0..2 {
        let sha = store.put_program(&variant(GEMM, 30 + i)).unwrap().sha256;
        let src = store.program(&sha).unwrap().unwrap();
        let mut f = FailureReport::new(&sha, "sm_90a", Stage::Run, "racecheck", "racecheck.hazard_war", "Potential WAR hazard detected at __shared__ 0x400 in block (0,0,0) :");
        f.span = Some(SpanRef { kind: SpanKind::Cake, line: line_of(&src, "tma_load(a_s"), col: None, file: None });
        out.push(Record::Failure(Box::new(f)));
    }
    // Two programs answer wrongly in the same pattern.
    for i in 0..2 {
        let sha = store.put_program(&variant(GEMM, 40 + i)).unwrap().sha256;
        out.push(Record::Run(Box::new(run_record(&sha, "mismatch", None, next(), mismatch_check(64..128)))));
    }
    // Passing and skipped runs are not failures.
    out.push(Record::Run(Box::new(run_record(&g0, "pass", None, next(), serde_json::json!([])))));
    out.push(Record::Run(Box::new(run_record(&g0, "skipped", Some(("no_gpu", "no GPU: none")), next(), serde_json::json!([])))));
    // Cost-model evidence.
    let sha = store.put_program(&variant(KMEANS, 50)).unwrap().sha256;
    let mut f = FailureReport::new(&sha, "sm_90a", Stage::Run, "cake", "cost.misprediction", "predicted 0.6 ms, measured 1.0 ms");
    f.extra.insert("predicted_ms".into(), serde_json::json!(0.6));
    f.extra.insert("measured_ms".into(), serde_json::json!(1.0));
    out.push(Record::Failure(Box::new(f)));
    out
}

fn build_store(dir: &std::path::Path, reverse: bool) -> EvidenceStore {
    let store = EvidenceStore::open(dir).unwrap();
    let mut recs = records(&store);
    if reverse {
        recs.reverse();
    }
    for r in recs {
        store.append(r).unwrap();
    }
    store
}

fn find<'a>(buckets: &'a [Bucket], class: &str) -> &'a Bucket {
    buckets.iter().find(|b| b.class == class).unwrap_or_else(|| panic!("no bucket of class {class}"))
}

#[test]
fn buckets_attribution_and_ranking() {
    let dir = tempfile::tempdir().unwrap();
    let store = build_store(dir.path(), false);
    let report = mine_report(&store);
    // The store's build failures are recorded on the examples, which build today: stale evidence
    // (M003; M004 where NVRTC is missing), and nothing else to warn about.
    assert!(report.warnings.iter().all(|w| w.starts_with("warning[M003]") || w.starts_with("note[M004]")), "{:?}", report.warnings);
    let b = &report.buckets;
    assert_eq!(b.len(), 6, "{}", render_table(&report));

    // Hangs: attributed through the program's facts to its pipeline; counted per record,
    // recurrence per program; the most expensive, so ranked first.
    let t = find(b, "timeout");
    assert_eq!(t.signature, "run/timeout: hung at launch (correctness)");
    assert_eq!((t.construct_kind.as_str(), t.op.as_str()), ("pipeline", ""));
    assert_eq!(t.attribution, ["facts"]);
    assert_eq!((t.count, t.program_hashes.len(), t.evidence_ids.len()), (3, 2, 3));
    assert_eq!(t.cost, 60.0, "three timeouts of 10 s, weighed twice");
    assert_eq!(b[0].id, t.id);

    // ptxas: three kernels, one signature (names and sizes normalized), on shared memory.
    let s = find(b, "ptxas.too_much_shared_data");
    assert_eq!(s.signature, "compile/ptxas.too_much_shared_data: ptxas error : Entry function '<sym>' uses too much shared data (<hex> bytes, <hex> max)");
    assert_eq!((s.construct_kind.as_str(), s.program_hashes.len(), s.cost), ("smem", 3, 0.0));
    assert_eq!(s.verifier.rejected, 0, "the examples pass today's verifier");

    // memcheck at a generated CUDA line → the span map → the `store` call.
    let m = find(b, "memcheck.invalid_global_write");
    assert_eq!((m.construct_kind.as_str(), m.op.as_str()), ("call", "store"));
    assert_eq!(m.attribution, ["span"]);
    assert_eq!(m.program_hashes.len(), 2);
    assert_eq!(m.cost, 6.0);

    // A .cake line → the tma_load call on it.
    let r = find(b, "racecheck.hazard_war");
    assert_eq!((r.construct_kind.as_str(), r.op.as_str(), r.attribution[0].as_str()), ("call", "tma_load", "span"));

    // Wrong answers: the oracle and the pattern.
    let w = find(b, "mismatch");
    // Named by the workload's oracle (the pattern comes from the cuBLAS comparison, the largest).
    assert_eq!(w.signature, "run/mismatch: matmul_abt: rows");
    assert_eq!(w.program_hashes.len(), 2);

    // Cost-model evidence: the ratio bin.
    let c = find(b, "cost.misprediction");
    assert_eq!(c.signature, "run/cost.misprediction: predicted/measured 0.5-0.8 (predicted too fast)");

    // Ordering: score, then programs, then cost (descending), then id.
    for w in b.windows(2) {
        let key = |x: &Bucket| (-x.score, -(x.program_hashes.len() as i64), -x.cost, x.id.clone());
        assert!(key(&w[0]).partial_cmp(&key(&w[1])).unwrap().is_le(), "{} before {}", w[0].id, w[1].id);
    }
    for x in b {
        assert_eq!(x.id, bucket_id(&x.signature, &x.construct_kind, &x.op));
        assert_eq!(x.id.len(), 12);
        let mut sorted = x.evidence_ids.clone();
        sorted.sort();
        assert_eq!(x.evidence_ids, sorted);
        let mut sorted = x.program_hashes.clone();
        sorted.sort();
        assert_eq!(x.program_hashes, sorted);
    }
    let table = render_table(&report);
    assert!(table.starts_with("rank  bucket"), "{table}");
    assert!(table.contains(&t.id));
}

#[test]
fn mining_is_deterministic_whatever_the_order_of_appends() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let sa = build_store(a.path(), false);
    let sb = build_store(b.path(), true);
    let ra = serde_json::to_string_pretty(&mine_report(&sa)).unwrap();
    let rb = serde_json::to_string_pretty(&mine_report(&sb)).unwrap();
    assert_eq!(ra, rb);
    // And twice over the same store.
    assert_eq!(ra, serde_json::to_string_pretty(&mine_report(&sa)).unwrap());
    // Bucket ids are a function of the key only.
    assert_eq!(bucket_id("run/timeout: hung at launch", "pipeline", ""), bucket_id("run/timeout: hung at launch", "pipeline", ""));
    assert_ne!(bucket_id("run/timeout: hung at launch", "pipeline", ""), bucket_id("run/timeout: hung at launch", "barrier", ""));
}

#[test]
fn programs_missing_from_the_store_are_bucketed_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let store = EvidenceStore::open(dir.path()).unwrap();
    let f = FailureReport::new("b".repeat(64), "sm_90a", Stage::Run, "manual", "CUDA_ERROR_ILLEGAL_ADDRESS", "cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS");
    store.append(f).unwrap();
    let report = mine_report(&store);
    assert_eq!(report.buckets.len(), 1);
    let b = &report.buckets[0];
    assert_eq!((b.construct_kind.as_str(), b.attribution[0].as_str(), b.verifier.unknown), ("kernel", "none", 1));
    assert!(report.warnings.iter().any(|w| w.starts_with("warning[M001]")), "{:?}", report.warnings);
}

/// Passing runs whose measured time is far from the cost model's prediction are evidence for
/// recalibration; accurate ones are not failures.
#[test]
fn mispredicted_passing_runs_become_cost_model_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let store = EvidenceStore::open(dir.path()).unwrap();
    let timed = |sha: &str, created: u64, predicted: f64, measured: f64| {
        let mut r = run_record(sha, "pass", None, created, serde_json::json!([]));
        r.times_ms = Some(records::times(measured, 5));
        r.prediction = Some(cake::runtime::record::Prediction {
            predicted_ms: predicted,
            bottleneck: "memory".into(),
            calibration: "test".into(),
        });
        r
    };
    let mut shas = Vec::new();
    for (i, (p, m)) in [(1.0, 2.0), (0.5, 1.5), (1.0, 1.02)].into_iter().enumerate() {
        let src = variant(GEMM, 100 + i);
        let sha = store.put_program(&src).unwrap().sha256;
        store.append(timed(&sha, i as u64, p, m)).unwrap();
        shas.push(sha);
    }
    let report = mine_report(&store);
    let cost: Vec<&Bucket> = report.buckets.iter().filter(|b| b.class == "cost_model.misprediction").collect();
    assert_eq!(cost.len(), 2, "{:#?}", report.buckets);
    assert!(cost.iter().all(|b| b.signature.contains("predicted too fast") || b.signature.contains("far too fast")));
    assert!(cost.iter().all(|b| b.signature.contains("memory bound")));
    // The accurate run (1.0 predicted, 1.02 measured) yields nothing.
    assert!(!report.buckets.iter().any(|b| b.program_hashes.contains(&shas[2])));
}

/// A build failure of an older compiler is stale once a newer compiler's run of the same program
/// got past the build: it is left out of the buckets and counted in the warnings. Failures the
/// newer compiler shares, failures at run time, and failures that no newer, different compiler
/// got past stay.
#[test]
fn build_failures_a_newer_compiler_got_past_are_superseded() {
    use cake::runtime::record::ToolInfo;
    let dir = tempfile::tempdir().unwrap();
    let store = EvidenceStore::open(dir.path()).unwrap();
    let (old, new) = (Some("1".repeat(40)), Some("2".repeat(40)));
    let by = |mut r: RunRecord, commit: &Option<String>| {
        r.cake = ToolInfo { version: "0.1.0".into(), git_commit: commit.clone() };
        r
    };
    let build_failure = |sha: &str, created: u64, commit: &Option<String>| {
        let msg = "L001: not supported by the lowering yet: explicit barriers (use a pipeline)";
        let mut r = run_record(sha, "error", Some(("build_L001", msg)), created, serde_json::json!([]));
        r.stage = "build".into();
        by(r, commit)
    };
    let hang = |sha: &str, created: u64, commit: &Option<String>| {
        by(run_record(sha, "timeout", Some(("timeout", "no result after 10.0 s (last stage: launch)")), created, serde_json::json!([])), commit)
    };
    let no_gpu = |sha: &str, created: u64, commit: &Option<String>| by(run_record(sha, "skipped", Some(("no_gpu", "no GPU: none")), created, serde_json::json!([])), commit);
    let pass = |sha: &str, created: u64, commit: &Option<String>| by(run_record(sha, "pass", None, created, serde_json::json!([])), commit);
    let p: Vec<String> = (0..6).map(|i| store.put_program(&variant(GEMM, 200 + i)).unwrap().sha256).collect();
    let mut ids = BTreeMap::new();
    let mut put = |name: &str, r: RunRecord| {
        ids.insert(name.to_string(), store.append(r).unwrap().to_string());
    };
    // p0: a newer compiler built and ran it (it hangs now): the old build failure is stale.
    put("p0 old", build_failure(&p[0], 10, &old));
    put("p0 new", hang(&p[0], 20, &new));
    // p1: a newer binary that knows no commit built it, with no GPU to run on: stale too.
    put("p1 old", build_failure(&p[1], 10, &old));
    put("p1 new", no_gpu(&p[1], 20, &None));
    // p2: the newer compiler fails the same build: both stay.
    put("p2 old", build_failure(&p[2], 10, &old));
    put("p2 new", build_failure(&p[2], 20, &new));
    // p3: a later run got past the build with the same compiler: not a newer compiler, stays.
    put("p3 old", build_failure(&p[3], 10, &old));
    put("p3 new", no_gpu(&p[3], 20, &old));
    // p4: the build that got further is older than the failure: stays.
    put("p4 new", build_failure(&p[4], 20, &new));
    put("p4 old", pass(&p[4], 10, &old));
    // p5: a hang, and a newer compiler's run passes: run-time failures are never superseded.
    put("p5 old", hang(&p[5], 10, &old));
    put("p5 new", pass(&p[5], 20, &new));

    let scan = store.scan();
    let stale = cake_evolve::mine::superseded(&scan.records);
    let want: std::collections::BTreeSet<String> = [&ids["p0 old"], &ids["p1 old"]].into_iter().cloned().collect();
    assert_eq!(stale, want);

    let report = mine_report(&store);
    assert!(
        report.warnings.iter().any(|w| w.starts_with("warning[M002]: 2 record(s) superseded by newer runs of the same program")),
        "{:?}",
        report.warnings
    );
    // The build failures left: p2's (a build failure counts once per program), p3's and p4's.
    let l001 = find(&report.buckets, "build_L001");
    let mut kept = vec![p[2].clone(), p[3].clone(), p[4].clone()];
    kept.sort();
    assert_eq!(l001.program_hashes, kept, "{}", render_table(&report));
    assert!(l001.evidence_ids.contains(&ids["p3 old"]) && l001.evidence_ids.contains(&ids["p4 new"]));
    for b in &report.buckets {
        assert!(!b.evidence_ids.iter().any(|e| stale.contains(e)), "bucket {} holds a superseded record", b.id);
    }
    // The newer records are mined as usual: p0's hang and p5's are one bucket.
    let t = find(&report.buckets, "timeout");
    assert_eq!(t.program_hashes.len(), 2);
    assert!(t.evidence_ids.contains(&ids["p0 new"]) && t.evidence_ids.contains(&ids["p5 old"]));
}
