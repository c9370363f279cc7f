//! `cake-evolve-compiler evidence list|show` (issue 16): a record opened by id or prefix with its
//! signature, the program lines its failure names and the run's facts; JSON with
//! `--message-format json`; an unknown, crafted or ambiguous id a coded error.

#[path = "support/records.rs"]
mod records;

use std::path::Path;
use std::process::{Command, Output};

use cake_evolve::store::{EvidenceStore, FailureReport, SpanKind, SpanRef, Stage};

const PROGRAM: &str = "kernel t target sm_90a\n\ndim M multiple_of 128\n\nout C: f32[M]\n";

fn evolve(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cake-evolve-compiler")).args(args).current_dir(dir).output().expect("cake-evolve-compiler runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A store with the program, a ptxas failure on its `out` line (line 5) and a timed-out run.
fn store(dir: &Path) -> (String, String, String) {
    let store = EvidenceStore::open(dir.join("ev")).unwrap();
    let prog = store.put_program(PROGRAM).unwrap();
    let mut f = FailureReport::new(&prog.sha256, "sm_90a", Stage::Compile, "ptxas", "ptxas.too_much_shared_data", "ptxas error   : Entry function 't' uses too much shared data (0x40000 bytes, 0x38000 max)\x1b[31m");
    f.span = Some(SpanRef { kind: SpanKind::Cake, line: 5, col: Some(1), file: None });
    let failure = store.append(f).unwrap();
    let run = store.append(records::run_record("t", &prog.sha256, "timeout", Some(("timeout", "no result after 10.0 s (last stage: launch)")), 7)).unwrap();
    (prog.sha256, failure.to_string(), run.to_string())
}

#[test]
fn show_prints_the_signature_the_failing_line_and_the_facts() {
    let tmp = tempfile::tempdir().unwrap();
    let (sha, failure, _) = store(tmp.path());
    // A prefix of 10 digits opens it.
    let out = evolve(tmp.path(), &["evidence", "show", &failure[..10], "--store", "ev"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains(&format!("record    {failure} (failure report")), "{s}");
    assert!(s.contains(&format!("program   {sha} `kernel t`, target sm_90a")), "{s}");
    assert!(s.contains("failure   compile/ptxas.too_much_shared_data: "), "{s}");
    assert!(s.contains("tool      ptxas"), "{s}");
    assert!(s.contains("at        line 5, column 1"), "{s}");
    // The failing line is marked, with a caret under the column, and its neighbours are shown.
    assert!(s.contains("  > 5 | out C: f32[M]"), "{s}");
    assert!(s.contains("  > 5 | out C: f32[M]\n      | ^\n"), "{s}");
    assert!(s.contains("    3 | dim M multiple_of 128"), "{s}");
    // Text from the report reaches the terminal escaped.
    assert!(!s.contains('\x1b') && s.contains("\\x1b[31m"), "{s}");
}

#[test]
fn show_of_a_run_record_gives_the_run_facts_and_its_signature() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, _, run) = store(tmp.path());
    let out = evolve(tmp.path(), &["evidence", "show", &run, "--store", "ev"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("(run record"), "{s}");
    assert!(s.contains("verdict   timeout (last stage reached: launch)"), "{s}");
    assert!(s.contains("command   cake run (cake 0.1.0)"), "{s}");
    assert!(s.contains("failure   run/timeout: hung at launch"), "{s}");
    assert!(s.contains("at        no place named"), "{s}");
}

#[test]
fn show_as_json_is_the_record_with_its_failures() {
    let tmp = tempfile::tempdir().unwrap();
    let (sha, failure, _) = store(tmp.path());
    for flag in [&["--message-format", "json"][..], &["--format", "json"][..]] {
        let mut args = vec!["evidence", "show", failure.as_str(), "--store", "ev"];
        args.extend_from_slice(flag);
        let out = evolve(tmp.path(), &args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
        assert_eq!(v["id"], failure.as_str());
        assert_eq!(v["kind"], "failure");
        assert_eq!(v["program"]["sha256"], sha.as_str());
        assert_eq!(v["program"]["in_store"], true);
        assert_eq!(v["record"]["error_class"], "ptxas.too_much_shared_data");
        assert_eq!(v["record"]["span"]["line"], 5);
        assert!(v["failures"][0]["signature"].as_str().unwrap().starts_with("compile/ptxas.too_much_shared_data: "), "{v}");
        assert_eq!(v["failures"][0]["line"]["line"], 5);
    }
}

#[test]
fn unknown_crafted_and_ambiguous_ids_are_coded_errors() {
    let tmp = tempfile::tempdir().unwrap();
    store(tmp.path());
    // Two record files whose names share their first 12 digits: a prefix of them is ambiguous.
    let runs = tmp.path().join("ev/runs");
    for tail in ["a", "b"] {
        std::fs::write(runs.join(format!("{}{}.json", "abcdef012345".repeat(5), tail.repeat(4))), "{}").unwrap();
    }
    let cases: [(&str, &str); 4] = [
        (&"0".repeat(64), "no record"),
        ("../../etc/passwd", "is not a record id"),
        ("abc", "is not a record id"),
        ("abcdef012345", "is ambiguous: 2 records start with it (abcdef012345abcd…, abcdef012345abcd…)"),
    ];
    for (id, why) in cases {
        let out = evolve(tmp.path(), &["evidence", "show", id, "--store", "ev"]);
        assert_eq!(out.status.code(), Some(2), "{id}");
        let err = text(&out.stderr);
        assert!(err.starts_with("error[S007]: ") && err.contains(why) && err.contains("= help: `cake-evolve-compiler evidence list"), "{id}: {err}");
        assert!(out.stdout.is_empty());
        // The same error as JSON on stdout.
        let out = evolve(tmp.path(), &["evidence", "show", id, "--store", "ev", "--message-format", "json"]);
        assert_eq!(out.status.code(), Some(2));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the error is JSON");
        assert_eq!(v["code"], "S007");
        assert!(v["message"].as_str().unwrap().contains(why), "{v}");
    }
    // A store that is not there.
    let out = evolve(tmp.path(), &["evidence", "show", &"0".repeat(64), "--store", "nowhere"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("error[S009]: "), "{}", text(&out.stderr));
}

#[test]
fn list_names_every_record_and_json_lists_them_too() {
    let tmp = tempfile::tempdir().unwrap();
    let (sha, failure, run) = store(tmp.path());
    let out = evolve(tmp.path(), &["evidence", "list", "--store", "ev"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains(&format!("{}  failure  compile               ptxas.too_much_shared_data", &failure[..12])), "{s}");
    assert!(s.contains(&format!("{}  run      launch                timeout", &run[..12])), "{s}");
    assert!(s.contains("2 record(s);"), "{s}");
    let out = evolve(tmp.path(), &["evidence", "list", "--store", "ev", "--message-format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = v["records"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r["program"] == sha.as_str()));
    assert_eq!(rows[0]["signature"], "run/timeout: hung at launch");
    assert!(v["problems"].as_array().unwrap().is_empty());
}

#[test]
fn the_bundled_evidence_opens_record_by_record() {
    // Every record of the bundled store opens, as text and as JSON (real runs of the H200).
    let bundle = Path::new(env!("CARGO_MANIFEST_DIR")).join("evidence/bundle");
    let out = evolve(Path::new(env!("CARGO_MANIFEST_DIR")), &["evidence", "list", "--store", bundle.to_str().unwrap(), "--message-format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = v["records"].as_array().unwrap();
    assert!(rows.len() > 10, "{}", rows.len());
    for r in rows.iter().take(12) {
        let id = r["id"].as_str().unwrap();
        let out = evolve(Path::new(env!("CARGO_MANIFEST_DIR")), &["evidence", "show", id, "--store", bundle.to_str().unwrap()]);
        assert!(out.status.success(), "{id}: {}", text(&out.stderr));
        assert!(text(&out.stdout).starts_with(&format!("record    {id}")));
    }
}
