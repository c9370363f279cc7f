//! The bundled evidence set (`evolution/evidence/bundle/`, made by `scripts/make-evidence.sh`
//! from real runs of the broken candidates) mines into recurring buckets.

use std::path::PathBuf;

use cake_evolve::mine::mine_report;
use cake_evolve::store::{EvidenceStore, Record};

fn evidence() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("evidence")
}

#[test]
fn the_bundle_mines_into_recurring_buckets() {
    let store = EvidenceStore::open(evidence().join("bundle")).unwrap();
    let scan = store.scan();
    assert!(scan.problems.is_empty(), "the committed bundle reads cleanly: {:?}", scan.problems);
    assert!(!scan.records.is_empty(), "the bundle has records");
    // Every record's program is in the store (mining can re-verify it).
    for s in &scan.records {
        let sha = s.record.program_sha256();
        assert!(store.program(sha).unwrap().is_some(), "program {sha} of record {} is missing", s.id);
    }
    let report = mine_report(&store);
    // The only warning: build failures of the older compiler the GPU tier's newer one got past.
    assert!(report.warnings.iter().all(|w| w.starts_with("warning[M002]")), "{:?}", report.warnings);
    let recurring: Vec<_> = report.buckets.iter().filter(|b| b.program_hashes.len() >= 2).collect();
    assert!(
        recurring.len() >= 3,
        "at least 3 buckets with at least 2 programs each:\n{}",
        cake_evolve::mine::render_table(&report)
    );
    // The classes the lowering used to refuse behind the verifier's back recur in the bundle;
    // with one derived layout for every stage, today's verifier rejects every one of their
    // programs (V216, V223, V201), so no stage disagreement is left to learn from.
    let table = cake_evolve::mine::render_table(&report);
    for class in ["alignment <n> of `<sym>` is not a power of two", "cp.async needs the row stride", "shared memory needs <n> bytes"] {
        let b = report.buckets.iter().find(|b| b.signature.contains(class)).unwrap_or_else(|| panic!("a bucket `{class}`:\n{table}"));
        assert!(b.program_hashes.len() >= 2 && b.verifier.rejected == b.program_hashes.len(), "`{class}` recurs and the verifier rejects all of it:\n{table}");
    }
    // Lowering gaps the lowering has since closed (explicit barriers, stores into shared memory)
    // are superseded by the newer runs of the same programs.
    assert!(!report.buckets.iter().any(|b| b.signature.contains("explicit barriers") || b.signature.contains("store into shared memory")), "{table}");
    // Every evidence id of every bucket is a record of the store.
    for b in &report.buckets {
        for id in &b.evidence_ids {
            store.get(id).unwrap();
        }
    }
}

#[test]
fn bundle_programs_are_the_committed_candidates_and_heldouts_stay_apart() {
    let ev = evidence();
    let hashes = |dir: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(ev.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "cake"))
            .map(|p| {
                let src = std::fs::read_to_string(&p).unwrap();
                let file = cake::syntax::parse(&src).unwrap_or_else(|_| panic!("{} parses", p.display()));
                let canonical = cake::syntax::print(&file);
                assert_eq!(canonical, src, "{} is in canonical form (cake fmt)", p.display());
                cake::runtime::record::sha256_hex(canonical.as_bytes())
            })
            .collect();
        v.sort();
        v
    };
    let candidates = hashes("candidates");
    let heldout = hashes("heldout");
    assert!(candidates.len() >= 12, "at least 12 broken candidates");
    let store = EvidenceStore::open(ev.join("bundle")).unwrap();
    for s in store.scan().records {
        let sha = s.record.program_sha256().to_string();
        assert!(candidates.contains(&sha), "record {} is about a program that is not a candidate", s.id);
        assert!(!heldout.contains(&sha), "held-out program {sha} leaked into the bundle");
        if let Record::Run(r) = &s.record {
            assert_eq!(r.command, "run");
            assert!(r.program.path.starts_with("evolution/evidence/candidates/"), "{}", r.program.path);
        }
    }
}
