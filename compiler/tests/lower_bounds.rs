//! Sizes past what the kernel's 32-bit arithmetic holds (issue 15, item 5): a coded error, never
//! a panic or a kernel whose `int` loop counter overflows.

use cake::api;
use cake::lower::LowerOptions;

const SOFTMAX: &str = include_str!("../../examples/softmax_bf16.cake");

/// softmax with its `for i in 0..2` loop given another end.
fn with_loop_end(end: &str) -> String {
    let s = SOFTMAX.replacen("for i in 0..2 {", &format!("for i in 0..{end} {{"), 1);
    assert_ne!(s, SOFTMAX, "the example has the loop");
    s
}

#[test]
fn a_loop_bound_past_32_bits_is_l009_at_the_bound() {
    for end in ["2147483648", "4294967296", "9223372036854775807"] {
        let src = with_loop_end(end);
        // The verifier stops at its work bound (a coverage limit) and accepts the program.
        let v = api::validate(&src).unwrap_or_else(|e| panic!("{end}: {:?}", e.diagnostics()));
        let e = api::lower(&v, &LowerOptions::default()).expect_err(end);
        assert_eq!(e.code, "L009", "{end}: {e}");
        assert!(e.message.contains(end) && e.message.contains("32-bit"), "{e}");
        assert_eq!(&src[e.span.start as usize..e.span.end as usize], end, "the span is the bound");
    }
    // The largest bound that fits still lowers.
    let v = api::validate(&with_loop_end("2147483647")).unwrap();
    assert!(api::lower(&v, &LowerOptions::default()).is_ok());
}

/// A store index at i64::MAX overflowed the coverage analysis (`v + 1`, a panic in debug builds).
#[test]
fn a_store_index_at_i64_max_is_no_overflow() {
    let src = SOFTMAX.replacen("store(Y[t.r * 8 +", "store(Y[t.r * 9223372036854775807 +", 1);
    assert_ne!(src, SOFTMAX);
    // Whatever the verdict, it is one (no panic).
    let _ = api::validate(&src);
}
