//! Which verifier rules `cake check` / `lower` verify with: `--rules DIR`, else the
//! `compiler/rules/` of the checkout the command runs in, else the rules built into the binary;
//! one `note: rules: ...` line says which, and JSON diagnostics carry a `rules` field.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn cake(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cake")).args(args).current_dir(dir).env_remove("NO_COLOR").output().expect("cake runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A copy of this checkout's rules, less the files whose name starts with one of `drop`.
fn rules_copy(dst: &Path, drop: &[&str]) -> PathBuf {
    let rules = dst.join("rules");
    for cat in std::fs::read_dir(root().join("compiler/rules")).unwrap().flatten().filter(|e| e.path().is_dir()) {
        let to = rules.join(cat.file_name());
        std::fs::create_dir_all(&to).unwrap();
        for f in std::fs::read_dir(cat.path()).unwrap().flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if !drop.iter().any(|d| name.starts_with(d)) {
                std::fs::copy(f.path(), to.join(&name)).unwrap();
            }
        }
    }
    rules
}

const NEGATIVE_V201: &str = "corpus/verifier-negative/V201-mbarriers-and-base-slack-over-capacity.cake";
const EXAMPLE: &str = "examples/gemm_bf16_ws.cake";

/// A rule every kernel with shared memory breaks.
const EXTRA_RULE: &str = r#"code = "V699"
name = "test-no-shared-memory"
category = "hardware-conformance"
severity = "error"
applies_to = "kernel"
require = "smem_bytes <= 0"
message = "the kernel needs {smem_bytes} B of shared memory; this test rule allows none"
label = "the kernel"
help = "remove the test rule"

[doc]
what = "A rule made by a test: no kernel may use shared memory."
why = "It shows that `--rules DIR` replaces the rule set."
example = "smem a_s: bf16[128, 64]"
source = "compiler/tests/cli_rules.rs"
"#;

#[test]
fn in_the_checkout_its_rules_are_used_and_said() {
    let o = cake(&root(), &["check", EXAMPLE]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    let note = err.lines().find(|l| l.starts_with("note: rules: ")).unwrap_or_else(|| panic!("a rules note:\n{err}"));
    assert!(note.contains("compiler/rules of checkout") && note.contains(" rules)"), "{note}");
    assert_eq!(err.lines().filter(|l| l.starts_with("note: rules: ")).count(), 1, "one note:\n{err}");
}

#[test]
fn outside_a_checkout_the_embedded_rules_are_used() {
    let tmp = tempfile::tempdir().unwrap();
    let program = tmp.path().join("k.cake");
    std::fs::copy(root().join(EXAMPLE), &program).unwrap();
    let o = cake(tmp.path(), &["check", "k.cake"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("note: rules: embedded rules (built into this binary"), "{}", stderr(&o));
}

#[test]
fn an_extra_rule_in_a_rules_dir_makes_check_reject() {
    let tmp = tempfile::tempdir().unwrap();
    let rules = rules_copy(tmp.path(), &[]);
    std::fs::write(rules.join("hardware-conformance/V699-test-no-shared-memory.toml"), EXTRA_RULE).unwrap();
    let dir = rules.to_str().unwrap();
    let o = cake(&root(), &["check", "--rules", dir, EXAMPLE]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("error[V699]"), "{err}");
    assert!(err.contains(&format!("note: rules: --rules {dir} (")), "{err}");
    // JSON diagnostics say which set judged them.
    let o = cake(&root(), &["--message-format", "json", "check", "--rules", dir, EXAMPLE]);
    let line = String::from_utf8_lossy(&o.stdout).lines().find(|l| l.contains("\"V699\"")).map(str::to_string).expect("a V699 line");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["rules"]["origin"], "flag", "{line}");
    assert_eq!(v["rules"]["dir"], dir, "{line}");
    assert!(v["rules"]["count"].as_u64().unwrap() > 1, "{line}");
}

#[test]
fn a_rule_removed_with_rules_lets_check_and_lower_accept() {
    // The checkout's rules reject the program (V201) ...
    let o = cake(&root(), &["check", NEGATIVE_V201]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("error[V201]"), "{}", stderr(&o));
    // ... a copy without V201 accepts it, and `lower` follows that set too (an ablation runs the
    // bug class through to the GPU).
    let tmp = tempfile::tempdir().unwrap();
    let rules = rules_copy(tmp.path(), &["V201-"]);
    let dir = rules.to_str().unwrap();
    let o = cake(&root(), &["check", "--rules", dir, NEGATIVE_V201]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("V201"), "{}", stderr(&o));
    let o = cake(&root(), &["lower", "--rules", dir, NEGATIVE_V201]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("__global__"), "CUDA on stdout");
    assert!(stderr(&o).contains(&format!("note: rules: --rules {dir} (")), "{}", stderr(&o));
}

#[test]
fn a_broken_rules_dir_is_e0006_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let rules = rules_copy(tmp.path(), &[]);
    let bad = rules.join("hardware-conformance/V698-broken.toml");
    std::fs::write(&bad, EXTRA_RULE.replace("V699", "V698").replace("smem_bytes <= 0", "no_such_fact <= 0")).unwrap();
    let o = cake(&root(), &["check", "--rules", rules.to_str().unwrap(), EXAMPLE]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("error[E0006]") && err.contains("V698-broken.toml"), "{err}");
    assert!(err.contains("help:"), "{err}");
    let o = cake(&root(), &["check", "--rules", tmp.path().join("missing").to_str().unwrap(), EXAMPLE]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("error[E0006]") && stderr(&o).contains("not a directory"), "{}", stderr(&o));
    // The code is documented.
    let o = cake(&root(), &["explain", "E0006"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}
