//! Rendering diagnostics for people (rustc style, through `codespan-reporting`) and for machines
//! (one JSON object per line, `--message-format json`).
//!
//! Spans are trusted nowhere: a span past the end of the source (an "unexpected end of file"
//! pointing one past the last byte), reversed, or splitting a UTF-8 character is clamped to the
//! nearest valid range before anything is rendered, so rendering never panics.

use std::ops::Range;

use codespan_reporting::diagnostic::{Diagnostic as CsDiagnostic, Label as CsLabel, Severity as CsSeverity};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::termcolor::Buffer;
use codespan_reporting::term::{self, Chars, Config};
use serde::Serialize;

use crate::diag::{Diagnostic, Label, Severity};
use crate::span::{line_col, LineIndex, Span};
use crate::verify::rules::category_in;
use crate::verify::RuleSet;

/// Render diagnostics for a terminal (or, with `color == false`, for snapshots and logs) in
/// rustc's layout:
///
/// ```text
/// error[E0201]: unknown dtype `bf17`
///   --> gemm.cake:10:7
///    |
/// 10 | in A: bf17[M, K] tma [128, 64] swizzle 128B
///    |       ^^^^ not a dtype
///    |
///    = help: dtypes are bool i32 u32 i64 f32 f16 bf16 f8e4m3 f8e5m2
/// ```
///
/// Hints render as `help[CODE]: hint: ...` and coverage limits as `note[CODE]: coverage limit: ...`
/// so the kind of finding is always visible in words, not only in color.
pub fn render_human(file_name: &str, source: &str, diags: &[Diagnostic], color: bool) -> String {
    let file = SimpleFile::new(file_name, source);
    let config = config();
    let mut out = String::new();
    for d in diags {
        let cs = to_codespan(source, d);
        // Render each diagnostic into its own buffer so that a failure half-way (which clamping
        // should make impossible) never leaves a torn diagnostic in the output.
        let mut buf = new_buffer(color);
        match term::emit(&mut buf, &config, &file, &cs) {
            Ok(()) => out.push_str(&String::from_utf8_lossy(buf.as_slice())),
            Err(_) => out.push_str(&fallback_text(file_name, source, d)),
        }
    }
    out
}

/// Render a diagnostic that is about a whole file rather than a place in it — the file could not
/// be read, is not UTF-8, could not be written — with no source snippet. Its spans are ignored.
pub fn render_human_unlocated(d: &Diagnostic, color: bool) -> String {
    let file = SimpleFile::new("", "");
    let cs =
        CsDiagnostic::new(severity(d.severity)).with_code(d.code.clone()).with_message(message(d)).with_notes(notes(d));
    let mut buf = new_buffer(color);
    match term::emit(&mut buf, &config(), &file, &cs) {
        Ok(()) => String::from_utf8_lossy(buf.as_slice()).into_owned(),
        Err(_) => format!("{}[{}]: {}\n", d.severity.as_str(), d.code, d.message),
    }
}

/// One diagnostic as one line of JSON (no trailing newline):
///
/// ```json
/// {"code":"E0201","category":"types","severity":"error","message":"unknown dtype `bf17`","file":"gemm.cake",
///  "primary":{"start":120,"end":124,"line":10,"column":7,"end_line":10,"end_column":11,"message":"not a dtype"},
///  "secondary":[],"notes":[],"help":"dtypes are ..."}
/// ```
///
/// `category` is the rule's category or the stage that documents the code
/// ([`crate::verify::rules::category_in`], judged by the built-in rules here). `start`/`end`
/// are byte offsets (clamped into the source), `line`/`column` are 1-based, columns count
/// characters. `secondary` and `notes` are always present (possibly empty), `help` is a string
/// or `null`.
pub fn render_json_line(file_name: &str, source: &str, d: &Diagnostic) -> String {
    json_line(file_name, source, &LineIndex::new(source), d, RuleSet::builtin())
}

/// [`render_json_line`] for every diagnostic, each line followed by a newline; the source's
/// line index is built once, so the time is linear in the number of diagnostics.
pub fn render_json_lines(file_name: &str, source: &str, diags: &[Diagnostic]) -> String {
    render_json_lines_shown(file_name, source, diags, &[], RuleSet::builtin())
}

/// [`render_json_lines`] with the categories of the rule set that judged the program, where
/// `hidden[i]` follow-on findings of `diags[i]` were left out: a line gets `"suppressed": n` when
/// n > 0. A follow-on finding that is shown carries `"follows": {"code", "line", "column"}`, the
/// finding it follows from.
pub fn render_json_lines_shown(file_name: &str, source: &str, diags: &[Diagnostic], hidden: &[usize], rules: &RuleSet) -> String {
    let index = LineIndex::new(source);
    let mut out = String::new();
    for (i, d) in diags.iter().enumerate() {
        let mut line = json_line(file_name, source, &index, d, rules);
        if let Some(n) = hidden.get(i).filter(|n| **n > 0) {
            if let Some(body) = line.strip_suffix('}') {
                line = format!("{body},\"suppressed\":{n}}}");
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn json_line(file_name: &str, source: &str, index: &LineIndex<'_>, d: &Diagnostic, rules: &RuleSet) -> String {
    let category = category_in(rules, &d.code);
    let follows = d.follows.as_ref().map(|c| {
        let (line, column) = index.line_col(clamp_span(source, c.span).start);
        JsonCause { code: &c.code, line, column }
    });
    let json = JsonDiagnostic {
        code: &d.code,
        category: &category,
        severity: d.severity.as_str(),
        message: &d.message,
        file: file_name,
        primary: Some(json_label(source, index, &d.primary)),
        secondary: d.secondary.iter().map(|l| json_label(source, index, l)).collect(),
        notes: &d.notes,
        help: d.help.as_deref(),
        follows,
    };
    to_json(&json)
}

/// Like [`render_json_line`] for a diagnostic about a whole file (see
/// [`render_human_unlocated`]): `primary` is `null` and `secondary` is empty.
pub fn render_json_line_unlocated(file_name: &str, d: &Diagnostic) -> String {
    let category = category_in(RuleSet::builtin(), &d.code);
    let json = JsonDiagnostic {
        code: &d.code,
        category: &category,
        severity: d.severity.as_str(),
        message: &d.message,
        file: file_name,
        primary: None,
        secondary: Vec::new(),
        notes: &d.notes,
        help: d.help.as_deref(),
        follows: None,
    };
    to_json(&json)
}

/// Clamp a span into `source`: both ends at most `source.len()`, `start <= end`, and both on
/// character boundaries (the start moves back, the end moves forward, so the span only grows).
pub fn clamp_span(source: &str, span: Span) -> Range<usize> {
    let len = source.len();
    let mut start = (span.start as usize).min(len);
    let mut end = (span.end as usize).min(len).max(start);
    while start > 0 && !source.is_char_boundary(start) {
        start -= 1;
    }
    while end < len && !source.is_char_boundary(end) {
        end += 1;
    }
    start..end
}

fn config() -> Config {
    Config { chars: Chars::ascii(), ..Config::default() }
}

fn new_buffer(color: bool) -> Buffer {
    if color {
        Buffer::ansi()
    } else {
        Buffer::no_color()
    }
}

fn severity(s: Severity) -> CsSeverity {
    match s {
        Severity::Error => CsSeverity::Error,
        Severity::Warning => CsSeverity::Warning,
        Severity::Hint => CsSeverity::Help,
        Severity::CoverageLimit => CsSeverity::Note,
    }
}

/// The header message, with the kind of finding spelled out where codespan's severity word
/// (`help`, `note`) would not say it.
fn message(d: &Diagnostic) -> String {
    match d.severity {
        Severity::Error | Severity::Warning => d.message.clone(),
        Severity::Hint => format!("hint: {}", d.message),
        Severity::CoverageLimit => format!("coverage limit: {}", d.message),
    }
}

/// Notes and the help line, rendered by codespan as `= note: ...` / `= help: ...`.
fn notes(d: &Diagnostic) -> Vec<String> {
    let mut out: Vec<String> = d.notes.iter().map(|n| format!("note: {n}")).collect();
    if let Some(help) = &d.help {
        out.push(format!("help: {help}"));
    }
    out
}

/// The range a label is drawn at. Beyond clamping:
/// - a span ending in a line break ("found end of line" points at the `\n`) loses that line break,
///   so it draws as a caret after the line's text instead of a two-line bracket;
/// - an empty span at the very end of a source that ends with a newline moves onto that newline,
///   so an "unexpected end of file" caret appears just after the last line's text rather than on
///   an empty line below it (as rustc does).
fn display_range(source: &str, span: Span) -> Range<usize> {
    let mut r = clamp_span(source, span);
    let bytes = source.as_bytes();
    while r.end > r.start && matches!(bytes[r.end - 1], b'\n' | b'\r') {
        r.end -= 1;
    }
    if r.start == source.len() && r.is_empty() && source.ends_with('\n') {
        let mut at = source.len() - 1;
        if at > 0 && bytes[at - 1] == b'\r' {
            at -= 1;
        }
        return at..at;
    }
    r
}

fn to_codespan(source: &str, d: &Diagnostic) -> CsDiagnostic<()> {
    let mut labels =
        vec![CsLabel::primary((), display_range(source, d.primary.span)).with_message(d.primary.message.clone())];
    labels.extend(
        d.secondary
            .iter()
            .map(|l| CsLabel::secondary((), display_range(source, l.span)).with_message(l.message.clone())),
    );
    CsDiagnostic::new(severity(d.severity))
        .with_code(d.code.clone())
        .with_message(message(d))
        .with_labels(labels)
        .with_notes(notes(d))
}

/// Plain rendering used only if codespan refuses a diagnostic.
fn fallback_text(file_name: &str, source: &str, d: &Diagnostic) -> String {
    let r = clamp_span(source, d.primary.span);
    let (line, col) = line_col(source, r.start);
    let mut s = format!("{}[{}]: {}\n  --> {}:{}:{}\n", d.severity.as_str(), d.code, message(d), file_name, line, col);
    if !d.primary.message.is_empty() {
        s.push_str(&format!("   = {}\n", d.primary.message));
    }
    for n in notes(d) {
        s.push_str(&format!("   = {n}\n"));
    }
    s.push('\n');
    s
}

#[derive(Serialize)]
struct JsonDiagnostic<'a> {
    code: &'a str,
    category: &'a str,
    severity: &'a str,
    message: &'a str,
    file: &'a str,
    primary: Option<JsonLabel<'a>>,
    secondary: Vec<JsonLabel<'a>>,
    notes: &'a [String],
    help: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    follows: Option<JsonCause<'a>>,
}

#[derive(Serialize)]
struct JsonCause<'a> {
    code: &'a str,
    line: usize,
    column: usize,
}

#[derive(Serialize)]
struct JsonLabel<'a> {
    start: usize,
    end: usize,
    line: usize,
    column: usize,
    end_line: usize,
    end_column: usize,
    message: &'a str,
}

fn json_label<'a>(source: &str, index: &LineIndex<'_>, label: &'a Label) -> JsonLabel<'a> {
    let r = clamp_span(source, label.span);
    let (line, column) = index.line_col(r.start);
    let (end_line, end_column) = index.line_col(r.end);
    JsonLabel { start: r.start, end: r.end, line, column, end_line, end_column, message: &label.message }
}

fn to_json(value: &JsonDiagnostic<'_>) -> String {
    // Serializing plain strings and integers cannot fail; keep a valid JSON line regardless.
    serde_json::to_string(value).unwrap_or_else(|e| {
        let msg = serde_json::Value::String(format!("internal error: cannot serialize diagnostic: {e}"));
        format!("{{\"code\":\"E0000\",\"severity\":\"error\",\"message\":{msg}}}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diag(span: Span) -> Diagnostic {
        Diagnostic::error("E0101", "unexpected end of file", span, "expected `}`")
            .with_secondary(Span::new(0, 6), "block opened here")
            .with_note("blocks close with `}`")
            .with_help("add `}` at the end")
    }

    #[test]
    fn plain_has_rustc_layout() {
        let src = "on mma {\n    wait(ab)\n";
        let out = render_human("x.cake", src, &[diag(Span::new(src.len(), src.len()))], false);
        println!("{out}");
        assert!(out.starts_with("error[E0101]: unexpected end of file\n"), "{out}");
        assert!(out.contains("--> x.cake:2:13"), "{out}");
        assert!(out.contains("= note: blocks close with `}`"), "{out}");
        assert!(out.contains("= help: add `}` at the end"), "{out}");
        assert!(out.contains("block opened here"), "{out}");
        assert!(!out.contains('\u{1b}'), "plain output must have no escape codes");
        let colored = render_human("x.cake", src, &[diag(Span::new(src.len(), src.len()))], true);
        assert!(colored.contains('\u{1b}'));
    }

    #[test]
    fn spans_past_the_end_and_inside_chars_are_clamped() {
        for src in ["", "\n", "kernel k target sm_90a", "let d = a − b\n", "é"] {
            for (s, e) in [(0, 0), (0, 1000), (999, 1000), (1000, 3), (9, 10), (1, 2), (11, 12)] {
                let d = diag(Span { start: s, end: e });
                let _ = render_human("f.cake", src, std::slice::from_ref(&d), false);
                let line = render_json_line("f.cake", src, &d);
                let v: serde_json::Value = serde_json::from_str(&line).expect("valid JSON");
                let start = v["primary"]["start"].as_u64().unwrap() as usize;
                let end = v["primary"]["end"].as_u64().unwrap() as usize;
                assert!(start <= end && end <= src.len());
                assert!(src.is_char_boundary(start) && src.is_char_boundary(end));
            }
        }
    }

    #[test]
    fn end_of_line_spans_draw_as_one_caret() {
        let src = "kernel gemm\r\ndim M\n";
        // "found end of line": the span covers the line break after `gemm`.
        let d = Diagnostic::error("E0101", "expected keyword `target`", Span::new(11, 13), "expected `target`");
        let out = render_human("f.cake", src, &[d], false);
        assert!(out.contains("1 | kernel gemm\n  |            ^ expected `target`"), "{out}");
        assert!(!out.contains("2 |"), "{out}");
    }

    #[test]
    fn hint_and_coverage_limit_are_named() {
        let src = "kernel k target sm_90a\n";
        let hint = diag(Span::new(0, 6)).with_severity(Severity::Hint);
        let cov = diag(Span::new(0, 6)).with_severity(Severity::CoverageLimit);
        let out = render_human("f.cake", src, &[hint, cov], false);
        assert!(out.contains("help[E0101]: hint: unexpected end of file"), "{out}");
        assert!(out.contains("note[E0101]: coverage limit: unexpected end of file"), "{out}");
    }

    #[test]
    fn json_lines_match_one_by_one_and_the_line_index_matches_line_col() {
        let src = "dim M\n\nkernel k target sm_90a  # é\n  x\n";
        let diags: Vec<Diagnostic> = (0..src.len() + 3)
            .map(|i| Diagnostic::error("E0101", "m", Span { start: i as u32, end: (i + 2) as u32 }, "here"))
            .collect();
        let all = render_json_lines("f.cake", src, &diags);
        let one: String = diags.iter().map(|d| render_json_line("f.cake", src, d) + "\n").collect();
        assert_eq!(all, one);
        let index = LineIndex::new(src);
        for i in 0..src.len() + 3 {
            assert_eq!(index.line_col(i), line_col(src, i), "offset {i}");
        }
    }

    #[test]
    fn json_line_fields() {
        let src = "kernel k target sm_90a\non mma {\n";
        let d = diag(Span::new(23, 29));
        let line = render_json_line("f.cake", src, &d);
        assert!(!line.contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["code"], "E0101");
        assert_eq!(v["severity"], "error");
        assert_eq!(v["file"], "f.cake");
        assert_eq!(v["primary"]["line"], 2);
        assert_eq!(v["primary"]["column"], 1);
        assert_eq!(v["primary"]["end_line"], 2);
        assert_eq!(v["primary"]["end_column"], 7);
        assert_eq!(v["primary"]["message"], "expected `}`");
        assert_eq!(v["secondary"][0]["start"], 0);
        assert_eq!(v["notes"][0], "blocks close with `}`");
        assert_eq!(v["help"], "add `}` at the end");
        let u: serde_json::Value = serde_json::from_str(&render_json_line_unlocated("f.cake", &d)).unwrap();
        assert!(u["primary"].is_null());
    }

    #[test]
    fn unlocated_has_no_snippet() {
        let d = Diagnostic::error("E0001", "cannot read `nope.cake`: not found", Span::default(), "")
            .with_help("check the path");
        let out = render_human_unlocated(&d, false);
        assert_eq!(out, "error[E0001]: cannot read `nope.cake`: not found\n = help: check the path\n\n");
    }
}
