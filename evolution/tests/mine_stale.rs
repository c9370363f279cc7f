//! Stale evidence: a recorded build failure the current compiler no longer reproduces (the
//! program lowers and compiles now) proposes nothing, and `mine` says so (`M003`, with counts and
//! program ids); without NVRTC it says it could not re-check (`M004`) instead of guessing.

#[path = "support/records.rs"]
mod records;

use cake_evolve::mine::mine_report;
use cake_evolve::queue::{plan_for, Plan};
use cake_evolve::store::EvidenceStore;

const GEMM: &str = include_str!("../../examples/gemm_bf16_ws.cake");
/// Regions that fit, mbarriers and base slack that do not: the verifier's V201 rejects it today.
const OVER: &str = include_str!("../../corpus/verifier-negative/V201-mbarriers-and-base-slack-over-capacity.cake");

fn build_failure(sha: &str, created: u64) -> cake::runtime::record::RunRecord {
    let msg = "L005: a TMA window that does not match the tensor's box (at bytes 10..20)";
    let mut r = records::run_record("k", sha, "error", Some(("build_L005", msg)), created);
    r.stage = "build".into();
    r
}

#[test]
fn a_build_failure_the_compiler_no_longer_reproduces_is_stale() {
    let dir = tempfile::tempdir().unwrap();
    let store = EvidenceStore::open(dir.path()).unwrap();
    // Two programs that build today (the lowering gap their failure recorded was closed) ...
    let builds: Vec<String> = (0..2).map(|i| store.put_program(&format!("# variant {i}\n{GEMM}")).unwrap().sha256).collect();
    // ... and one the verifier rejects today (caught, not stale).
    let caught = store.put_program(OVER).unwrap().sha256;
    for (i, p) in builds.iter().chain([&caught]).enumerate() {
        store.append(build_failure(p, 10 + i as u64)).unwrap();
    }
    let report = mine_report(&store);
    let bucket = report.buckets.iter().find(|b| b.class == "build_L005").expect("the L005 bucket");
    assert_eq!(bucket.program_hashes.len(), 3);
    let nvrtc = report.warnings.iter().find(|w| w.starts_with("note[M004]"));
    if let Some(note) = nvrtc {
        // No toolchain on this machine: said, and nothing is called stale.
        assert!(note.contains("could not re-check") && note.contains("NVRTC"), "{note}");
        assert!(bucket.stale_programs.is_empty() && !bucket.is_stale());
        return;
    }
    let mut want = builds.clone();
    want.sort();
    assert_eq!(bucket.stale_programs, want, "{:?}", report.warnings);
    assert!(!bucket.is_stale(), "one program still fails (the verifier catches it)");
    let warning = report.warnings.iter().find(|w| w.starts_with("warning[M003]")).unwrap_or_else(|| panic!("M003 in {:?}", report.warnings));
    assert!(warning.contains("2 build failure record(s) of 2 program(s) no longer reproduce"), "{warning}");
    for p in &builds {
        assert!(warning.contains(&p[..12]), "the warning names {p}: {warning}");
    }
    assert!(!warning.contains(&caught[..12]), "{warning}");

    // With only the programs that build, the bucket is stale and `propose` skips it, saying why.
    let dir2 = tempfile::tempdir().unwrap();
    let store2 = EvidenceStore::open(dir2.path()).unwrap();
    for (i, src) in [GEMM, "# another\n"].iter().enumerate() {
        let text = if i == 0 { src.to_string() } else { format!("{src}{GEMM}") };
        let sha = store2.put_program(&text).unwrap().sha256;
        store2.append(build_failure(&sha, 10 + i as u64)).unwrap();
    }
    let report = mine_report(&store2);
    let bucket = report.buckets.iter().find(|b| b.class == "build_L005").expect("the L005 bucket");
    assert!(bucket.is_stale(), "{:?}", report.warnings);
    match plan_for(bucket) {
        Plan::Skip(why) => assert!(why.starts_with("stale:") && why.contains("no longer reproduces"), "{why}"),
        p => panic!("a stale bucket is skipped, not {p:?}"),
    }
}
