//! Robustness: whatever bytes a `.cake` file holds, the front end and the renderers never panic,
//! and every diagnostic carries a code and spans the renderers can place.
//!
//! Inputs are random byte strings and mutations of the example programs (the interesting case:
//! almost-valid programs reach deep into the parser and checker). Each input goes through a temp
//! file and the same read-then-decode path the CLI uses; decoding failures are the CLI's E0002,
//! not the checker's business. A few cases also run the real binary. Bounded to a few seconds.

use std::path::Path;
use std::process::Command;

use cake::check::check_source;
use cake::render::{render_human, render_json_line};
use proptest::prelude::*;

const EXAMPLES: [&str; 3] = ["gemm_bf16_ws.cake", "gemm_bf16_sm80.cake", "kmeans_assign.cake"];

fn example(i: usize) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples").join(EXAMPLES[i % EXAMPLES.len()]);
    std::fs::read_to_string(path).expect("example exists")
}

/// Fragments that tend to matter to a lexer/parser: delimiters, operators, keywords, odd chars.
const FRAGMENTS: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ",",
    ":",
    ":+",
    "..",
    ".",
    "=",
    "==",
    "\n",
    " ",
    "\t",
    "#",
    "-",
    "*",
    "/",
    "%",
    "<<",
    ">>",
    "&&",
    "||",
    "!",
    "0",
    "1_024",
    "0x40",
    "128B",
    "2.5e-3",
    "1e",
    "0x",
    "inf",
    "kernel",
    "target",
    "sm_90a",
    "dim",
    "const",
    "in",
    "out",
    "grid",
    "smem",
    "view",
    "role",
    "barrier",
    "pipeline",
    "on",
    "reg",
    "let",
    "for",
    "if",
    "else",
    "tiles",
    "ab.stage",
    "wgmma",
    "acc",
    "per warpgroup",
    "é",
    "−",
    "\u{feff}",
    "\r\n",
    "\0",
    "99999999999999999999999",
    "((((((((",
    "))))",
];

#[derive(Debug, Clone)]
enum Mutation {
    Delete { at: usize, len: usize },
    Insert { at: usize, frag: usize },
    Duplicate { at: usize, len: usize },
    Truncate { at: usize },
    Byte { at: usize, byte: u8 },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1usize..40).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (any::<usize>(), 0..FRAGMENTS.len()).prop_map(|(at, frag)| Mutation::Insert { at, frag }),
        (any::<usize>(), 1usize..200).prop_map(|(at, len)| Mutation::Duplicate { at, len }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Byte { at, byte }),
    ]
}

fn apply(mut bytes: Vec<u8>, m: &Mutation) -> Vec<u8> {
    let n = bytes.len();
    let pos = |at: usize| if n == 0 { 0 } else { at % (n + 1) };
    match *m {
        Mutation::Delete { at, len } => {
            let s = pos(at);
            let e = (s + len).min(n);
            bytes.drain(s..e);
        }
        Mutation::Insert { at, frag } => {
            let s = pos(at);
            bytes.splice(s..s, FRAGMENTS[frag].bytes());
        }
        Mutation::Duplicate { at, len } => {
            let s = pos(at);
            let e = (s + len).min(n);
            let copy = bytes[s..e].to_vec();
            bytes.splice(e..e, copy);
        }
        Mutation::Truncate { at } => bytes.truncate(pos(at)),
        Mutation::Byte { at, byte } => {
            if n > 0 {
                bytes[at % n] = byte;
            }
        }
    }
    bytes
}

/// Write, read back and decode as the CLI does; check and render UTF-8 text.
fn exercise(bytes: &[u8]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let path = dir.path().join("input.cake");
    std::fs::write(&path, bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let read = std::fs::read(&path).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let Ok(source) = String::from_utf8(read) else {
        return Ok(()); // the CLI reports E0002; nothing reaches the checker
    };
    let output = check_source(&source);
    for d in &output.diagnostics {
        prop_assert!(!d.code.trim().is_empty(), "diagnostic without a code: {:?}", d);
        prop_assert!(!d.message.trim().is_empty(), "diagnostic without a message: {:?}", d);
        let json = render_json_line("input.cake", &source, d);
        let v: serde_json::Value =
            serde_json::from_str(&json).map_err(|e| TestCaseError::fail(format!("{e}: {json}")))?;
        prop_assert_eq!(v["code"].as_str(), Some(d.code.as_str()));
    }
    let _ = render_human("input.cake", &source, &output.diagnostics, false);
    let _ = render_human("input.cake", &source, &output.diagnostics, true);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        exercise(&bytes)?;
    }

    #[test]
    fn random_text_never_panics(text in "[ -~\n\t{}()\\[\\]:+.é−]{0,400}") {
        exercise(text.as_bytes())?;
    }

    #[test]
    fn mutated_examples_never_panic(which in 0usize..3, mutations in proptest::collection::vec(mutation(), 1..6)) {
        let bytes = mutations.iter().fold(example(which).into_bytes(), apply);
        exercise(&bytes)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, max_shrink_iters: 200, ..ProptestConfig::default() })]

    /// The renderers take any span over any text: past the end, reversed, inside a character,
    /// on line breaks, several labels on one line.
    #[test]
    fn renderers_accept_any_span(
        source in "[a-z {}()\n\r\té−]{0,80}",
        spans in proptest::collection::vec((0u32..100, 0u32..100), 1..4),
    ) {
        use cake::diag::{Diagnostic, Severity};
        use cake::span::Span;
        let (s, e) = spans[0];
        let mut d = Diagnostic::error("E0101", "msg", Span { start: s, end: e }, "primary");
        for &(s, e) in &spans[1..] {
            d = d.with_secondary(Span { start: s, end: e }, "secondary");
        }
        d = d.with_note("note").with_help("help");
        for sev in [Severity::Error, Severity::Warning, Severity::Hint, Severity::CoverageLimit] {
            let d = d.clone().with_severity(sev);
            let text = render_human("f.cake", &source, std::slice::from_ref(&d), false);
            prop_assert!(text.contains("[E0101]"), "{}", text);
            let json = render_json_line("f.cake", &source, &d);
            let v: serde_json::Value = serde_json::from_str(&json).map_err(|e| TestCaseError::fail(format!("{e}: {json}")))?;
            let (start, end) = (v["primary"]["start"].as_u64().unwrap_or(u64::MAX), v["primary"]["end"].as_u64().unwrap_or(0));
            prop_assert!(start <= end && end as usize <= source.len());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, max_shrink_iters: 50, ..ProptestConfig::default() })]

    /// The binary itself: exit code 0, 1 or 2 (never a panic's 101), JSON lines on stdout.
    #[test]
    fn binary_survives_mutated_examples(which in 0usize..3, mutations in proptest::collection::vec(mutation(), 1..4)) {
        let bytes = mutations.iter().fold(example(which).into_bytes(), apply);
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let path = dir.path().join("input.cake");
        std::fs::write(&path, &bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let out = Command::new(env!("CARGO_BIN_EXE_cake"))
            .args(["check", "--message-format", "json"])
            .arg(&path)
            .output()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let code = out.status.code();
        prop_assert!(matches!(code, Some(0..=2)), "exit {:?}: {}", code, String::from_utf8_lossy(&out.stderr));
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let v: serde_json::Value = serde_json::from_str(line).map_err(|e| TestCaseError::fail(format!("{e}: {line}")))?;
            prop_assert!(v["code"].as_str().is_some_and(|c| !c.is_empty()));
        }
    }
}
