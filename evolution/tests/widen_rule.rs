//! Widening an accepted rule (`widen.rs`): the base without the rule (its set, file and
//! verifier), and which of a bucket's programs the accepted rule misses.

use cake_evolve::records::Record;
use cake_evolve::synth::{Base, Program};

const OVER: &str = include_str!("../../corpus/verifier-negative/V201-mbarriers-and-base-slack-over-capacity.cake");
const GEMM: &str = include_str!("../../examples/gemm_bf16_ws.cake");

fn accepted(programs: &[&str]) -> Record {
    let text = format!(
        r#"id = "r-00000001"
kind = "rule"
status = "accepted"
title = "V201 smem-over-capacity"
branch = "evolve/rule/r-00000001-x"
base = "{z}"
commit = "{z}"
bucket = "0123456789ab"
signature = "lower/build_L002: shared memory"
construct = "kernel"
evidence = []
programs = [{p}]
seed = 0
changelog = "- x"
created_by = "test"
"#,
        z = "0".repeat(40),
        p = programs.iter().map(|h| format!("\"{h}\"")).collect::<Vec<_>>().join(", ")
    );
    toml::from_str(&text).expect("a record")
}

fn errors(base: &Base, src: &str) -> Vec<String> {
    base.frontend.check(src).diagnostics.iter().filter(|d| d.is_error()).map(|d| d.code.clone()).collect()
}

#[test]
fn the_base_without_a_rule_no_longer_rejects_its_class_and_misses_are_new_uncaught_programs() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let base = Base::load(&root).unwrap();
    assert!(errors(&base, OVER).contains(&"V201".to_string()));
    let (without, old_file) = cake_evolve::widen::base_without(&base, "V201").unwrap();
    assert_eq!(old_file.as_deref(), Some("compiler/rules/hardware-conformance/V201-smem-over-capacity.toml"));
    assert!(without.rules.get("V201").is_none() && without.rules.len() + 1 == base.rules.len());
    assert!(!without.rule_files.iter().any(|(p, _)| p.contains("V201-")));
    assert!(!errors(&without, OVER).contains(&"V201".to_string()), "the search base lets V201's class through");

    // Misses: programs the acceptance did not see that the rule does not reject.
    let over = Program { hash: "a".repeat(64), source: OVER.to_string() };
    let legal = Program { hash: "b".repeat(64), source: GEMM.to_string() };
    let acc = accepted(&[]);
    let missed = cake_evolve::widen::missed(&acc, "V201", &base, &[over.clone(), legal.clone()]);
    assert_eq!(missed, vec![legal.hash.clone()], "V201 catches the over-capacity program, misses the other");
    let acc = accepted(&[&legal.hash]);
    assert!(cake_evolve::widen::missed(&acc, "V201", &base, &[over, legal]).is_empty(), "programs the acceptance saw are not new evidence");
}
