//! UI tests: for every `tests/ui/*.cake`, run `check_source` and snapshot what a person and a
//! machine would see — the plain (uncolored) rustc-style rendering, then the JSON lines.
//!
//! Each input is a small, realistic program with exactly one thing wrong; its first line is a
//! comment `# expect: <what should be reported>`, which is also stored as the snapshot's
//! description so a reviewer sees intent and output side by side.
//!
//! Snapshots live in `tests/snapshots/ui__<stem>.snap`. To accept new or changed output:
//! `cargo insta review`, or without cargo-insta `INSTA_UPDATE=always cargo test -p cake-tests --test ui`
//! (then read the diff before committing). Every file is checked even when an earlier one fails;
//! the test fails at the end, naming all failing files. `UI_FILTER=syn_` runs only the files whose
//! name contains `syn_`.

use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use cake::check::check_source;
use cake::diag::Diagnostic;
use cake::render::{render_human, render_json_line};

fn ui_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ui")
}

fn ui_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(ui_dir())
        .expect("tests/ui exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cake"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no tests/ui/*.cake files");
    files
}

/// The files `ui` runs: all, or those whose stem contains `$UI_FILTER`.
fn selected_ui_files() -> Vec<PathBuf> {
    let filter = std::env::var("UI_FILTER").unwrap_or_default();
    ui_files().into_iter().filter(|p| stem(p).contains(&filter)).collect()
}

fn stem(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The `# expect: ...` text of the first line.
fn expectation(source: &str) -> Option<&str> {
    source.lines().next()?.strip_prefix("# expect:").map(str::trim)
}

/// Plain human rendering followed by the JSON lines (the snapshot text).
fn rendered(file_name: &str, source: &str, diags: &[Diagnostic]) -> String {
    let mut out = render_human(file_name, source, diags, false);
    out.push_str("---- json ----\n");
    for d in diags {
        out.push_str(&render_json_line(file_name, source, d));
        out.push('\n');
    }
    out
}

/// Invariants every diagnostic must hold, whatever its text.
fn check_invariants(source: &str, diags: &[Diagnostic]) -> Result<(), String> {
    if diags.is_empty() {
        return Err("no diagnostic at all (every tests/ui input is malformed or ill-typed)".into());
    }
    for d in diags {
        if d.code.trim().is_empty() {
            return Err(format!("diagnostic without a code: {:?}", d.message));
        }
        if d.message.trim().is_empty() {
            return Err(format!("{}: empty message", d.code));
        }
        let s = d.primary.span;
        if !(s.start <= s.end && s.end as usize <= source.len()) {
            return Err(format!(
                "{}: primary span {}..{} not within the source (len {})",
                d.code,
                s.start,
                s.end,
                source.len()
            ));
        }
        for l in &d.secondary {
            if !(l.span.start <= l.span.end && l.span.end as usize <= source.len()) {
                return Err(format!(
                    "{}: secondary span {}..{} not within the source",
                    d.code, l.span.start, l.span.end
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn ui() {
    let mut failures = Vec::new();
    for path in selected_ui_files() {
        let name = stem(&path);
        let source = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let Some(expect) = expectation(&source) else {
            failures.push(format!("{name}: first line must be `# expect: <what should be reported>`"));
            continue;
        };
        let output = match catch_unwind(AssertUnwindSafe(|| check_source(&source))) {
            Ok(output) => output,
            Err(_) => {
                failures.push(format!("{name}: check_source panicked (see above)"));
                continue;
            }
        };
        if let Err(e) = check_invariants(&source, &output.diagnostics) {
            failures.push(format!("{name}: {e}"));
        }
        let text = rendered(&format!("ui/{name}.cake"), &source, &output.diagnostics);
        let mut settings = insta::Settings::clone_current();
        settings.set_description(expect);
        settings.set_omit_expression(true);
        if catch_unwind(AssertUnwindSafe(|| settings.bind(|| insta::assert_snapshot!(name.as_str(), text)))).is_err() {
            failures.push(format!("{name}: snapshot missing or different (see above)"));
        }
    }
    assert!(failures.is_empty(), "{} UI check(s) failed:\n  {}", failures.len(), failures.join("\n  "));
}

/// Snapshots and inputs stay paired: a snapshot whose `.cake` was removed or renamed is stale.
#[test]
fn no_orphan_snapshots() {
    let stems: BTreeSet<String> = ui_files().iter().map(|p| stem(p)).collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots");
    let Ok(entries) = std::fs::read_dir(&dir) else { return };
    let orphans: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter_map(|f| f.strip_prefix("ui__").and_then(|f| f.strip_suffix(".snap")).map(str::to_string))
        .filter(|s| !stems.contains(s))
        .collect();
    assert!(orphans.is_empty(), "snapshots without a tests/ui/*.cake input: {orphans:?}");
}

/// Every code a UI input produces is documented for `cake explain` (compiler/diagnostics/*.toml).
#[test]
fn reported_codes_are_documented() {
    let mut undocumented = BTreeSet::new();
    for path in ui_files() {
        let Ok(source) = std::fs::read_to_string(&path) else { continue };
        let result = catch_unwind(AssertUnwindSafe(|| check_source(&source).diagnostics));
        for d in result.unwrap_or_default() {
            if cake::verify::rules::documented(&d.code).is_none() {
                undocumented.insert(format!("{} (first seen in {})", d.code, stem(&path)));
            }
        }
    }
    // Keep only the first file per code.
    let mut seen = BTreeSet::new();
    let undocumented: Vec<_> =
        undocumented.into_iter().filter(|s| seen.insert(s.split(' ').next().unwrap_or("").to_string())).collect();
    assert!(undocumented.is_empty(), "codes without documentation in compiler/diagnostics/*.toml: {undocumented:?}");
}
