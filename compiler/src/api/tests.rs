//! Each stage of the API on real programs: the examples pass every stage they can without a
//! GPU; each front-end stage fails with its own error type, its code and what to do.

use super::*;

const GEMM: &str = include_str!("../../../examples/gemm_bf16_ws.cake");
const TX_MISMATCH: &str = include_str!("../../../examples/broken/tx_mismatch.cake");

fn dims(text: &str) -> BTreeMap<String, i64> {
    crate::shape::parse(text).unwrap()
}

#[test]
fn an_example_passes_parse_check_verify_cost_and_lower() {
    let file = parse(GEMM).unwrap();
    let checked = check(file).unwrap();
    assert_eq!(checked.module.target, "sm_90a");
    let v = verify(checked).unwrap();
    // The same findings as `cake check`, in the same order.
    assert_eq!(v.findings, crate::check::check_source(GEMM).diagnostics);
    let est = cost_source(GEMM, &dims("M=8192,N=8192,K=8192"), None).unwrap();
    assert!(est.predicted_ms > 0.0);
    let l = lower(&v, &LowerOptions::default()).unwrap();
    assert!(l.cuda.contains(&l.entry));
}

#[test]
fn a_syntax_error_is_a_parse_error_with_its_code_and_place() {
    let e = parse("kernel k on sm_90a {\n  dim M\n").unwrap_err();
    assert!(e.code().starts_with("E01"), "{e}");
    let text = e.to_string();
    assert!(text.contains(e.code()) && text.contains("at bytes") && text.contains("help:"), "{text}");
    assert!(matches!(validate("kernel k on sm_90a {\n"), Err(Error::Parse(_))));
}

#[test]
fn an_unknown_op_is_a_check_error_and_keeps_every_finding() {
    let broken = GEMM.replacen("wgmma(", "wgmmx(", 1);
    assert_ne!(broken, GEMM, "the example calls wgmma");
    let e = check(parse(&broken).unwrap()).unwrap_err();
    let CheckError::Types { diagnostics } = &e else { panic!("{e}") };
    assert!(e.code().starts_with("E0"), "{e}");
    assert_eq!(diagnostics, &crate::check::check_source(&broken).diagnostics);
}

#[test]
fn a_verifier_rejection_is_a_verify_error_naming_the_first_finding() {
    let e = verify(check(parse(TX_MISMATCH).unwrap()).unwrap()).unwrap_err();
    let expected = crate::check::check_source(TX_MISMATCH).diagnostics;
    assert_eq!(e.findings, expected);
    let first = expected.iter().find(|d| d.is_error()).unwrap();
    assert_eq!(e.code(), first.code);
    assert!(e.to_string().contains(&first.message), "{e}");
    let err = validate(TX_MISMATCH).unwrap_err();
    assert!(matches!(err, Error::Verify(_)) && err.is_finding() && err.is_located());
}

#[test]
fn cost_errors_say_whose_fault_they_are() {
    // A missing dim is the caller's (exit 2), located at the dim's declaration.
    let e = cost_source(GEMM, &dims("M=8192,N=8192"), None).unwrap_err();
    assert_eq!(e.code(), "C101");
    assert!(!e.is_finding() && e.is_located());
    // A calibration file that does not exist is about the file, not the program.
    let e = cost_source(GEMM, &dims("M=8192,N=8192,K=8192"), Some(Path::new("no/such/calibration.toml"))).unwrap_err();
    assert!(matches!(e, Error::Calibration(_)) && e.code() == "C105" && !e.is_located() && !e.is_finding(), "{e}");
}

#[test]
fn run_usage_errors_have_documented_codes() {
    let opts = harness::Options {
        mode: harness::Mode::Run,
        program: "no/such/program.cake".into(),
        workload: None,
        shapes: Vec::new(),
        dists: Vec::new(),
        timeout: std::time::Duration::from_secs(1),
        unsafe_skip_verify: false,
        rules: std::sync::Arc::new(crate::verify::RuleSet::builtin().clone()),
        evidence: std::env::temp_dir().join("cake-api-test-unused"),
        repeats: None,
        warmup: None,
        baseline: None,
        seed: None,
        cublas_check: false,
        arch: None,
        exe: "cake".into(),
        max_timeouts: None,
        rounds: None,
    };
    let e = run(&opts, &mut |_| {}, &mut |_| {}).unwrap_err();
    assert_eq!(e.code(), "R001");
    assert!(e.is_usage() && e.to_string().contains("no/such/program.cake"), "{e}");
    for code in ["R001", "R002", "R003", "R004", "R005", "R006", "R007"] {
        assert!(crate::codes::lookup(code).is_some(), "{code} is documented in compiler/diagnostics/run.toml");
    }
}
