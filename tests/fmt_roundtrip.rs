//! `cake fmt` must never change what a program means (P3: one canonical form per program).
//!
//! For the examples and for generated variants of them (other tile sizes and stage counts,
//! renamed locals, extra comments, blank lines, spacing and redundant parentheses), the canonical
//! text re-parses to the *same typed IR* (spans aside), and formatting is idempotent. Variants
//! that do not type-check must at least keep their findings (same codes and messages).

use cake::check::check_source;
use cake::syntax::{parse, print};
use proptest::prelude::*;

const EXAMPLES: &[(&str, &str)] = &[
    ("gemm_bf16_ws", include_str!("../examples/gemm_bf16_ws.cake")),
    ("kmeans_assign", include_str!("../examples/kmeans_assign.cake")),
    ("gemm_bf16_sm80", include_str!("../examples/gemm_bf16_sm80.cake")),
];

/// Formats `source`, then checks that meaning and findings survive and that a second format is
/// a no-op. Returns the canonical text.
fn assert_fmt_preserves(source: &str) -> String {
    let file = parse(source).unwrap_or_else(|d| panic!("variant must parse: {d:?}\n{source}"));
    let canonical = print(&file);
    let again = print(&parse(&canonical).unwrap_or_else(|d| panic!("canonical text must parse: {d:?}\n{canonical}")));
    assert_eq!(canonical, again, "formatting is not idempotent");

    let before = check_source(source);
    let after = check_source(&canonical);
    assert_eq!(before.module, after.module, "formatting changed the typed IR\n--- source\n{source}\n--- canonical\n{canonical}");
    let summary = |d: &[cake::diag::Diagnostic]| d.iter().map(|d| (d.code.clone(), d.message.clone())).collect::<Vec<_>>();
    assert_eq!(summary(&before.diagnostics), summary(&after.diagnostics), "formatting changed the findings");
    canonical
}

#[test]
fn examples_are_canonical_and_keep_their_ir() {
    for (name, source) in EXAMPLES {
        let canonical = assert_fmt_preserves(source);
        assert_eq!(&canonical, source, "examples/{name}.cake is not in canonical form (run `cake fmt`)");
        assert!(check_source(source).module.is_some(), "examples/{name}.cake must type-check");
    }
}

/// One way to rewrite a program's text without changing its meaning (or only its numbers).
#[derive(Clone, Debug)]
enum Edit {
    /// Append a comment to line `n` (mod line count).
    TrailingComment(usize),
    /// Insert a comment line before line `n`.
    CommentLine(usize),
    /// Insert a blank line before line `n`.
    BlankLine(usize),
    /// Put extra spaces around the `n`-th binary operator or comma.
    Spaces(usize),
    /// Wrap the `n`-th integer literal in parentheses.
    Parens(usize),
    /// Replace the `n`-th integer literal with `k` (changes meaning and maybe validity; the
    /// property then compares before/after formatting of the *edited* text).
    Number(usize, i64),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::TrailingComment),
        any::<usize>().prop_map(Edit::CommentLine),
        any::<usize>().prop_map(Edit::BlankLine),
        any::<usize>().prop_map(Edit::Spaces),
        any::<usize>().prop_map(Edit::Parens),
        (any::<usize>(), prop::sample::select(vec![1i64, 2, 3, 4, 8, 16, 32, 64, 96, 128, 192, 256])).prop_map(|(n, k)| Edit::Number(n, k)),
    ]
}

/// Byte ranges of integer literals outside comments.
fn integer_literals(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let code = line.split('#').next().unwrap_or("");
        let bytes = code.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let starts_word = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b'.');
            if bytes[i].is_ascii_digit() && starts_word {
                let start = i;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
                // Skip byte literals (`128B`), floats (`2.0`) and parts of identifiers.
                let next = bytes.get(i).copied().unwrap_or(b' ');
                if !(next.is_ascii_alphanumeric() || next == b'_' || next == b'.') {
                    out.push(offset + start..offset + i);
                }
            } else {
                i += 1;
            }
        }
        offset += line.len();
    }
    out
}

fn apply(text: &str, e: &Edit) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let pick = |n: usize| n % lines.len().max(1);
    match e {
        Edit::TrailingComment(n) => {
            let i = pick(*n);
            let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            if !out[i].contains('#') && !out[i].trim().is_empty() {
                out[i].push_str("   # note");
            }
            out.join("\n") + "\n"
        }
        Edit::CommentLine(n) | Edit::BlankLine(n) => {
            let i = pick(*n).max(1); // keep the header first
            let indent: String = lines[i].chars().take_while(|c| *c == ' ').collect();
            let insert = if matches!(e, Edit::CommentLine(_)) { format!("{indent}# a comment") } else { String::new() };
            let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            out.insert(i, insert);
            out.join("\n") + "\n"
        }
        Edit::Spaces(n) => {
            let spots: Vec<usize> = text.match_indices([',', '*', '+']).map(|(i, _)| i).filter(|i| !in_comment(text, *i) && !text[..*i].ends_with(':')).collect();
            if spots.is_empty() {
                return text.to_string();
            }
            let at = spots[n % spots.len()];
            format!("{}  {}  {}", &text[..at], &text[at..at + 1], &text[at + 1..])
        }
        Edit::Parens(n) | Edit::Number(n, _) => {
            let lits = integer_literals(text);
            if lits.is_empty() {
                return text.to_string();
            }
            let r = lits[n % lits.len()].clone();
            let replacement = match e {
                Edit::Parens(_) => format!("({})", &text[r.clone()]),
                Edit::Number(_, k) => k.to_string(),
                _ => unreachable!(),
            };
            format!("{}{}{}", &text[..r.start], replacement, &text[r.end..])
        }
    }
}

fn in_comment(text: &str, at: usize) -> bool {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..at].contains('#')
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn formatting_generated_variants_keeps_meaning(which in 0..EXAMPLES.len(), edits in prop::collection::vec(edit(), 1..6)) {
        let mut text = EXAMPLES[which].1.to_string();
        for e in &edits {
            text = apply(&text, e);
        }
        // No edit breaks the syntax, so every variant must parse; number edits may break typing.
        assert_fmt_preserves(&text);
    }
}
