//! Rule proposal ids name the predicate: two proposals of one bucket with different predicates
//! never share an id (nor a record, nor a branch); the same predicate keeps its id.

use cake_evolve::queue::{is_valid_id, rule_proposal_id};

#[test]
fn different_predicates_of_one_bucket_get_different_ids() {
    let bucket = "0123456789ab";
    let a = rule_proposal_id(bucket, "smem", None, "align <= 1024");
    let b = rule_proposal_id(bucket, "smem", None, "align <= 512");
    let guarded = rule_proposal_id(bucket, "smem", Some("stages > 1"), "align <= 1024");
    let other_construct = rule_proposal_id(bucket, "kernel", None, "align <= 1024");
    let ids = [&a, &b, &guarded, &other_construct];
    for (i, x) in ids.iter().enumerate() {
        assert!(is_valid_id(x), "{x}");
        assert!(x.starts_with("r-"), "{x}");
        for y in &ids[i + 1..] {
            assert_ne!(x, y, "two predicates share an id");
        }
    }
    // Deterministic: the same evidence and predicate give the same id (idempotent `propose`).
    assert_eq!(a, rule_proposal_id(bucket, "smem", None, "align <= 1024"));
    assert_ne!(a, rule_proposal_id("ba9876543210", "smem", None, "align <= 1024"), "the bucket is part of the id");
}
