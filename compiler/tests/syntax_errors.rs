//! Syntax errors: the documentation in `diagnostics/syntax.toml` matches what the parser reports,
//! and errors point at the right bytes, with secondary labels where they help.

use cake::diag::Diagnostic;
use cake::span::Span;
use cake::syntax::parse;
use cake::syntax::parser::codes;

#[derive(serde::Deserialize)]
struct DocFile {
    code: Vec<Doc>,
}

#[derive(serde::Deserialize)]
struct Doc {
    code: String,
    title: String,
    explanation: String,
    example: String,
}

fn docs() -> Vec<Doc> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/diagnostics/syntax.toml");
    let text = std::fs::read_to_string(path).expect("diagnostics/syntax.toml");
    toml::from_str::<DocFile>(&text).expect("syntax.toml parses").code
}

fn errors(src: &str) -> Vec<Diagnostic> {
    parse(src).err().unwrap_or_else(|| panic!("expected errors for {src:?}"))
}

/// The text under a span.
fn at(src: &str, span: Span) -> &str {
    &src[span.range()]
}

#[test]
fn every_code_is_documented_once_and_every_documented_code_is_used() {
    let docs = docs();
    let documented: Vec<&str> = docs.iter().map(|d| d.code.as_str()).collect();
    assert_eq!(documented, codes::ALL, "syntax.toml must list exactly the parser's codes, in order");
    for d in &docs {
        assert!(!d.title.trim().is_empty() && !d.explanation.trim().is_empty(), "{}: incomplete entry", d.code);
        assert!(d.code.starts_with("E01"), "{}: syntax codes are E0101-E0199", d.code);
    }
}

#[test]
fn every_documented_example_reports_its_code_first() {
    for d in docs() {
        let errs = errors(&d.example);
        assert_eq!(errs[0].code, d.code, "example of {} reports {:#?}", d.code, errs);
        assert_eq!(errs.len(), 1, "example of {} should report one error: {errs:#?}", d.code);
        assert!(errs[0].help.is_some(), "{}: no help", d.code);
    }
}

const HEAD: &str = "kernel k target sm_90a\nrole r: warp 0\n";

fn body(stmts: &str) -> String {
    format!("{HEAD}on r {{\n{stmts}\n}}\n")
}

#[test]
fn unclosed_paren_points_at_opener_and_gap() {
    let src = body("    wgmma(acc, a_s[0]\n    wgmma_commit()");
    let errs = errors(&src);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let e = &errs[0];
    assert_eq!(e.code, "E0109");
    assert_eq!(at(&src, e.primary.span), "(");
    assert_eq!(e.primary.span.start as usize, src.find("wgmma(").unwrap() + 5);
    // The missing `)` belongs right after `a_s[0]`.
    let gap = e.secondary[0].span;
    assert!(gap.is_empty());
    assert_eq!(&src[..gap.start as usize], &src[..src.find("]\n").unwrap() + 1]);
}

#[test]
fn deeper_continuation_line_is_a_missing_comma_not_an_unclosed_paren() {
    let src = body("    wgmma(acc,\n          a_s[0]\n          b_s)");
    let errs = errors(&src);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(errs[0].code, "E0101");
    assert_eq!(at(&src, errs[0].primary.span), "b_s");
}

#[test]
fn mismatched_closer_names_the_open_delimiter() {
    let src = body("    f(a[0)");
    let e = &errors(&src)[0];
    assert_eq!(e.code, "E0111");
    assert_eq!(at(&src, e.primary.span), ")");
    assert_eq!(at(&src, e.secondary[0].span), "[");
}

#[test]
fn unterminated_block_at_end_of_file_and_at_next_body() {
    let src = format!("{HEAD}on r {{\n    for i in 0..4 {{\n        f()\n    }}\n");
    let e = &errors(&src)[0];
    assert_eq!((e.code.as_str(), e.primary.span.start as usize), ("E0102", src.find("{\n").unwrap()));
    assert_eq!(e.secondary[0].span.start as usize, src.len());

    let src = format!("{HEAD}on r {{\n    f()\n\non s {{\n    g(\n}}\n");
    let errs = errors(&src);
    assert_eq!(errs[0].code, "E0102");
    assert_eq!(at(&src, errs[0].secondary[0].span), "on");
    // Parsing resumed at `on s` and found the error inside it too.
    assert_eq!(errs[1].code, "E0109");
}

#[test]
fn blocks_open_at_end_of_file_are_one_error() {
    let src = format!("{HEAD}on r {{\n    for t in tiles {{\n        if c {{\n            f()\n");
    let errs = errors(&src);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let e = &errs[0];
    assert_eq!((e.code.as_str(), at(&src, e.primary.span)), ("E0102", "{"));
    assert_eq!(e.primary.span.start as usize, src.find("c {").unwrap() + 2);
    // The end of file, then the two enclosing blocks.
    assert_eq!(e.secondary.len(), 3, "{e:#?}");
}

#[test]
fn too_deep_is_reported_once_and_parsing_resynchronizes() {
    let n = 300;
    let src = format!("{HEAD}on r {{\n{}{}}}\non s {{\n    f(\n}}\n", "if c {\n".repeat(n), "}\n".repeat(n));
    let codes: Vec<_> = errors(&src).into_iter().map(|e| e.code).collect();
    assert_eq!(codes, ["E0112", "E0109"]);
}

#[test]
fn missing_range_end_or_value_before_the_next_key() {
    let src = format!("{HEAD}role mma: warpgroup 1.. regs 232\n");
    let e = &errors(&src)[0];
    assert_eq!((e.code.as_str(), at(&src, e.primary.span)), ("E0107", ".."));
    assert_eq!(at(&src, e.secondary[0].span), "regs");
    let src = format!("{HEAD}smem a: f32[4] stages swizzle 128B\n");
    let e = &errors(&src)[0];
    assert_eq!((e.code.as_str(), at(&src, e.primary.span)), ("E0116", "stages"));
    assert_eq!(at(&src, e.secondary[0].span), "swizzle");
}

#[test]
fn assignment_in_condition_suggests_comparison() {
    let e = &errors(&body("    if k % 3 = 0 {\n    }"))[0];
    assert_eq!(e.code, "E0101");
    assert!(e.help.as_ref().unwrap().contains("`==`"));
}

#[test]
fn missing_open_brace_does_not_cascade() {
    let src = body("    for kb in 0..4\n        f()\n    }");
    let errs = errors(&src);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(errs[0].code, "E0101");
    let src = format!("{HEAD}on r\n    f()\n");
    assert_eq!(errors(&src).len(), 1, "a body missing both braces is one error");
    let src = body("    if c\n    {\n        f()\n    }");
    let errs = errors(&src);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(at(&src, errs[0].primary.span), "{");
}

#[test]
fn errors_in_a_block_after_a_bad_header_are_still_found() {
    let src = body("    for i in 4 {\n        let = 1\n    }\n    x +");
    let codes: Vec<_> = errors(&src).into_iter().map(|e| e.code).collect();
    assert_eq!(codes, ["E0119", "E0108", "E0107"]);
}

#[test]
fn lexer_errors_are_not_reported_twice() {
    // The bad character and the bad number each give one error, and parsing continues past them.
    let src = body("    let x = a ; b\n    let y = 12KB\n    let = 3");
    let codes: Vec<_> = errors(&src).into_iter().map(|e| e.code).collect();
    assert_eq!(codes, ["E0110", "E0105", "E0108"]);
}

#[test]
fn first_errors_in_the_file_are_the_ones_kept() {
    // Many lexer errors late in the file must not crowd out parse errors early in it.
    let src = format!("{HEAD}dim\ndim\n{}", "const X = @\n".repeat(40));
    let errs = errors(&src);
    assert_eq!(errs.len(), cake::syntax::parser::MAX_ERRORS);
    assert_eq!((errs[0].code.as_str(), errs[1].code.as_str()), ("E0108", "E0108"));
}

#[test]
fn keyword_as_name_says_it_is_reserved() {
    let src = body("    let in = 3");
    let e = &errors(&src)[0];
    assert_eq!(e.code, "E0108");
    assert_eq!(at(&src, e.primary.span), "in");
    assert!(e.help.as_ref().unwrap().contains("reserved"));
}

#[test]
fn statement_at_top_level_points_to_role_bodies() {
    for line in ["zero(acc)", "let x = 1", "acc = 0", "for i in 0..4 {\n}"] {
        let src = format!("{HEAD}{line}\n");
        let e = &errors(&src)[0];
        assert_eq!(e.code, "E0104", "{line}");
        assert!(e.help.as_ref().unwrap().contains("on ROLE"), "{line}: {e:?}");
    }
}

#[test]
fn not_a_statement_helps_with_the_likely_fix() {
    let e = &errors(&body("    wgmma_commit"))[0];
    assert!(e.help.as_ref().unwrap().contains("wgmma_commit()"));
    let e = &errors(&body("    acc == 0"))[0];
    assert!(e.help.as_ref().unwrap().contains("single `=`"));
}
