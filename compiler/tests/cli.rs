//! End-to-end tests of the `cake` binary: exit codes (0 clean, 1 findings, 2 usage or I/O
//! error), JSON lines output, `fmt` / `fmt --check`, `explain`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn cake() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cake"));
    c.env_remove("NO_COLOR");
    c
}

fn run(args: &[&str]) -> Output {
    cake().args(args).output().expect("cake runs")
}

fn run_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = cake()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cake runs");
    child.stdin.take().expect("stdin piped").write_all(input).expect("write stdin");
    child.wait_with_output().expect("cake finishes")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited, not killed by a signal")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples").join(name)
}

fn example_text(name: &str) -> String {
    std::fs::read_to_string(example(name)).expect("example exists")
}

/// A well-formed program with a syntax error: the `on` block is never closed.
const SYNTAX_ERROR: &str = "kernel k target sm_90a\n\nrole mma: warpgroup 1..3 regs 232\n\non mma {\n    sync()\n";

/// `gemm_bf16_ws.cake` with spacing and indentation a formatter normalizes; it still parses.
fn misformatted() -> String {
    let src = example_text("gemm_bf16_ws.cake");
    let out = src
        .replace("dim M multiple_of 128", "dim   M    multiple_of  128")
        .replace("role load: warpgroup 0 regs 40", "role load :  warpgroup 0   regs 40")
        .replace("            acquire(ab)", "      acquire( ab )");
    assert_ne!(out, src);
    out
}

fn write(dir: &Path, name: &str, contents: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, contents).expect("write fixture");
    p
}

/// Every stdout line is one JSON object with the documented fields.
fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            for key in ["code", "severity", "message", "file", "primary", "secondary", "notes", "help"] {
                assert!(v.get(key).is_some(), "missing `{key}` in {line}");
            }
            assert!(!v["code"].as_str().unwrap_or("").is_empty(), "empty code in {line}");
            v
        })
        .collect()
}

// ---- check ----------------------------------------------------------------------------------

#[test]
fn check_examples_are_clean() {
    for name in ["gemm_bf16_ws.cake", "gemm_bf16_sm80.cake", "kmeans_assign.cake"] {
        let o = run(&["check", example(name).to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains("0 errors, 0 warnings"), "{}", stderr(&o));
        assert!(stdout(&o).is_empty());
    }
}

#[test]
fn check_syntax_error_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "bad.cake", SYNTAX_ERROR.as_bytes());
    let o = run(&["--color", "never", "check", p.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("error[E"), "{err}");
    assert!(err.contains("bad.cake:"), "{err}");
    assert!(err.contains("error"), "{err}");
    assert!(!err.contains('\u{1b}'), "--color never must not color: {err}");
}

#[test]
fn check_json_is_json_lines_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "bad.cake", SYNTAX_ERROR.as_bytes());
    let o = run(&["check", "--message-format", "json", p.to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    let lines = json_lines(&stdout(&o));
    assert!(!lines.is_empty());
    for v in &lines {
        assert_eq!(v["severity"], "error");
        assert_eq!(v["file"], p.to_str().unwrap());
        let start = v["primary"]["start"].as_u64().unwrap();
        let end = v["primary"]["end"].as_u64().unwrap();
        assert!(start <= end && end as usize <= SYNTAX_ERROR.len());
        assert!(v["primary"]["line"].as_u64().unwrap() >= 1);
    }
}

#[test]
fn check_color_always_colors() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "bad.cake", SYNTAX_ERROR.as_bytes());
    let o = run(&["check", "--color", "always", p.to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains('\u{1b}'));
    // auto: stderr is a pipe here, so no color.
    let o = run(&["check", p.to_str().unwrap()]);
    assert!(!stderr(&o).contains('\u{1b}'));
}

#[test]
fn check_reads_stdin() {
    let o = run_stdin(&["check", "--message-format", "json", "-"], SYNTAX_ERROR.as_bytes());
    assert_eq!(code(&o), 1);
    let lines = json_lines(&stdout(&o));
    assert_eq!(lines[0]["file"], "<stdin>");
    let o = run_stdin(&["check", "-"], example_text("gemm_bf16_ws.cake").as_bytes());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

#[test]
fn check_missing_file_exits_2() {
    let o = run(&["check", "no/such/file.cake"]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert!(err.contains("E0001") && err.contains("no/such/file.cake"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let o = run(&["check", "--message-format", "json", "no/such/file.cake"]);
    assert_eq!(code(&o), 2);
    let lines = json_lines(&stdout(&o));
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["code"], "E0001");
    assert!(lines[0]["primary"].is_null());
}

#[test]
fn check_directory_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&["check", dir.path().to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("E0001"), "{}", stderr(&o));
}

#[test]
fn check_non_utf8_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "latin1.cake", b"kernel k target sm_90a\n# caf\xe9\n");
    let o = run(&["check", p.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    let err = stderr(&o);
    assert!(err.contains("E0002") && err.contains("latin1.cake") && err.contains("UTF-8"), "{err}");
    assert!(err.contains("line 2, column 6"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn worst_outcome_decides_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "bad.cake", SYNTAX_ERROR.as_bytes());
    let o = run(&["check", bad.to_str().unwrap(), "missing.cake"]);
    assert_eq!(code(&o), 2);
    // Both files were reported.
    let err = stderr(&o);
    assert!(err.contains("bad.cake") && err.contains("missing.cake"), "{err}");
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(code(&run(&[])), 2);
    assert_eq!(code(&run(&["check"])), 2);
    assert_eq!(code(&run(&["frobnicate"])), 2);
    assert_eq!(code(&run(&["--message-format", "xml", "check", "x.cake"])), 2);
    assert_eq!(code(&run(&["explain"])), 2);
    assert_eq!(code(&run(&["--help"])), 0);
}

// ---- fmt ------------------------------------------------------------------------------------

#[test]
fn fmt_check_reports_a_diff_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let original = misformatted();
    let p = write(dir.path(), "gemm.cake", original.as_bytes());
    let o = run(&["fmt", "--check", p.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("would reformat") && out.contains("gemm.cake"), "{out}");
    assert!(
        out.contains("@@") && out.contains("-dim   M    multiple_of  128") && out.contains("+dim M multiple_of 128"),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(&p).unwrap(), original, "--check must not write");

    let o = run(&["fmt", "--check", "--message-format", "json", p.to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    let lines = json_lines(&stdout(&o));
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["code"], "E0005");
}

#[test]
fn fmt_rewrites_in_place_and_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "gemm.cake", misformatted().as_bytes());
    let o = run(&["fmt", p.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let formatted = std::fs::read_to_string(&p).unwrap();
    assert!(formatted.contains("dim M multiple_of 128"), "{formatted}");
    assert!(formatted.contains("role load: warpgroup 0 regs 40"), "{formatted}");
    // No temporary files left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 1, "{names:?}");
    // Formatting canonical text changes nothing.
    let o = run(&["fmt", "--check", p.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    let o = run(&["fmt", p.to_str().unwrap()]);
    assert_eq!(code(&o), 0);
    assert_eq!(std::fs::read_to_string(&p).unwrap(), formatted);
}

#[test]
fn fmt_leaves_files_with_syntax_errors_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "bad.cake", SYNTAX_ERROR.as_bytes());
    let o = run(&["fmt", p.to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("error[E"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&p).unwrap(), SYNTAX_ERROR);
}

#[test]
fn fmt_stdin_to_stdout() {
    let o = run_stdin(&["fmt", "-"], misformatted().as_bytes());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("dim M multiple_of 128"));
}

#[test]
fn fmt_missing_and_non_utf8_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "bin.cake", b"\xff\xfe k\x00");
    let o = run(&["fmt", p.to_str().unwrap()]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("E0002"));
    assert_eq!(std::fs::read(&p).unwrap(), b"\xff\xfe k\x00");
    assert_eq!(code(&run(&["fmt", "--check", "missing.cake"])), 2);
}

// ---- explain --------------------------------------------------------------------------------

#[test]
fn explain_known_code() {
    let o = run(&["explain", "E0001"]);
    assert_eq!(code(&o), 0);
    assert!(stdout(&o).starts_with("E0001: "), "{}", stdout(&o));
    // Case-insensitive.
    assert_eq!(code(&run(&["explain", "e0002"])), 0);
    let o = run(&["explain", "--message-format", "json", "E0001"]);
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["code"], "E0001");
}

#[test]
fn explain_operation_from_the_catalog() {
    let o = run(&["explain", "wgmma"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("wgmma: ") && out.contains("Type rule"), "{out}");
    let o = run(&["explain", "--message-format", "json", "wgmma"]);
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(v["name"], "wgmma");
}

#[test]
fn explain_unknown_code_exits_2() {
    let o = run(&["explain", "E9999"]);
    assert_eq!(code(&o), 2);
    assert!(stdout(&o).is_empty());
    assert!(stderr(&o).contains("E9999") && stderr(&o).contains("cake explain --list"), "{}", stderr(&o));
}

#[test]
fn explain_list() {
    let o = run(&["explain", "--list"]);
    assert_eq!(code(&o), 0);
    let out = stdout(&o);
    assert!(out.lines().any(|l| l.starts_with("E0001")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("V101")), "verifier rules are listed too:\n{out}");
    assert_eq!(out.lines().count(), cake::verify::rules::all_documented().len());
}
