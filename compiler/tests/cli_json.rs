//! `--message-format json` is JSON everywhere (issue 16): `cake corpus` prints one JSON document
//! on stdout (the summary for people on stderr), findings carry `category`, a command without a
//! JSON form answers with the coded JSON error E0007, and `--format` is another spelling.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn cake(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cake")).args(args).current_dir(root()).output().expect("cake runs")
}

fn one_json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn corpus_gate_prints_json_on_stdout_and_the_summary_on_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results.json");
    let report = tmp.path().join("report.md");
    let out = cake(&[
        "corpus", "gate", "--tier", "static", "--family", "softmax", "--baseline", "corpus/results/baseline.json", "--no-progress",
        "-o", results.to_str().unwrap(), "--report", report.to_str().unwrap(), "--message-format", "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v = one_json(&out);
    assert_eq!(v["passed"], true, "{v}");
    let cases = v["results"].as_u64().unwrap();
    assert!(cases > 0 && v["counts"]["same-pass"] == cases, "{v}");
    assert_eq!(v["blocking"].as_array().unwrap().len(), 0);
    assert_eq!(v["results_file"], results.to_str().unwrap());
    assert!(results.exists() && report.exists());
    assert!(String::from_utf8_lossy(&out.stderr).contains("corpus gate ok: "), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn corpus_list_show_and_their_errors_are_json() {
    let v = one_json(&cake(&["corpus", "list", "--message-format", "json"]));
    assert!(v["families"].as_array().unwrap().iter().any(|f| f["name"] == "softmax" && f["cases"].as_u64().unwrap() > 0), "{v}");
    let v = one_json(&cake(&["corpus", "list", "--family", "softmax", "--message-format", "json"]));
    let first = &v["cases"][0];
    assert!(first["id"].as_str().unwrap().starts_with("softmax/"), "{v}");
    let id = first["id"].as_str().unwrap().to_string();
    let v = one_json(&cake(&["corpus", "show", &id, "--message-format", "json"]));
    assert_eq!(v["id"], id.as_str());
    assert!(v["source"].as_str().unwrap().lines().any(|l| l.starts_with("kernel ")), "{v}");
    assert!(v["manifest"]["tiers"].as_array().is_some_and(|t| !t.is_empty()), "{v}");
    let out = cake(&["corpus", "show", "no-such/case", "--message-format", "json"]);
    assert_eq!(out.status.code(), Some(2));
    let v = one_json(&out);
    assert_eq!(v["code"], "G009");
    assert_eq!(v["severity"], "error");
}

#[test]
fn findings_carry_their_category() {
    // A verifier rule's finding: the rule's category; a type error: the stage documenting it.
    for (case, code, category) in [("V101-tx-byte-mismatch", "V101", "program-safety"), ("E0305-tma-wgmma-swizzle-mismatch", "E0305", "types")] {
        let path = format!("corpus/verifier-negative/{case}.cake");
        let out = cake(&["check", &path, "--message-format", "json"]);
        assert_eq!(out.status.code(), Some(1));
        let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
        let finding = lines.iter().find(|d| d["code"] == code).unwrap_or_else(|| panic!("{case}: no {code} in {lines:?}"));
        assert_eq!(finding["category"], category, "{finding}");
        assert!(lines.iter().all(|d| d["category"].as_str().is_some_and(|c| !c.is_empty())), "{lines:?}");
    }
    // `--format` is the same flag.
    let out = Command::new(env!("CARGO_BIN_EXE_cake")).args(["check", "-", "--format", "json"]).current_dir(root()).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).spawn().and_then(|mut c| {
        use std::io::Write;
        c.stdin.take().unwrap().write_all(b"kernel t target sm_90a\nin A: bf17[M]\n")?;
        c.wait_with_output()
    });
    let out = out.unwrap();
    let first: serde_json::Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().expect("a finding")).unwrap();
    assert_eq!(first["code"], "E0203");
    assert_eq!(first["category"], "types");
}

#[test]
fn a_command_without_json_output_says_so_in_json() {
    for args in [&["lower", "examples/softmax_bf16.cake"][..], &["build", "examples/softmax_bf16.cake", "-o", "target/never"][..], &["mcp"][..]] {
        let mut a = args.to_vec();
        a.extend(["--message-format", "json"]);
        let out = cake(&a);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let v = one_json(&out);
        assert_eq!(v["code"], "E0007", "{v}");
        assert_eq!(v["category"], "cli");
        assert!(v["message"].as_str().unwrap().contains(&format!("`cake {}` has no JSON output", args[0])), "{v}");
    }
    assert!(!root().join("target/never").exists(), "build wrote nothing");
    // The code is documented.
    let out = cake(&["explain", "E0007"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("has no JSON output"));
}
