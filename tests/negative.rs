//! The verifier's negative corpus: every `corpus/verifier-negative/<CODE>-<slug>.toml` manifest
//! names one program and what the verifier must say about it (the corpus gate's case format):
//!
//! ```toml
//! program = "V201-smem-over-capacity.cake"
//! target = "sm_90a"
//! tiers = ["static"]
//! [expect]
//! verdict = "reject"          # reject | accept
//! findings = [ { code = "V201", line = 16, column = 1 } ]   # every error, exactly
//! warnings = [ ... ]          # optional: every warning, exactly
//! hints = [ ... ]             # optional: every hint, exactly
//! coverage_limits = [ ... ]   # optional: every coverage-limit finding, exactly
//! ```
//!
//! The program runs through parse → check → verify. Findings that follow from an earlier one
//! (hidden by `cake check` unless `--all`) are not listed. Each finding must start at the given
//! line:column (1-based, columns in characters). A list that is absent is not compared (so a reject
//! case need not list the warnings it also produces). `NEGATIVE_FILTER=V2` runs only the manifests
//! whose file name contains `V2`.
//!
//! Also here: the example kernels verify with no errors (no false positives), every predicate rule
//! has a negative case, the rules load cleanly, a rule written to a temporary directory fires
//! without any Rust change, and malformed rule files are rejected with errors naming the file.
//! `CAKE_FACTS=path/to/file.cake cargo test -p cake-tests --test negative dump_facts -- --ignored
//! --nocapture` prints the facts every rule sees for one program.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use cake::check::check_source;
use cake::diag::{Diagnostic, Severity};
use cake::span::line_col;
use cake::target::TargetTable;
use cake::verify::{self, RuleSet};
use serde::Deserialize;

/// A case manifest. Keys of the corpus gate's schema this test does not use (`note`, `compile`,
/// `workload`) are allowed and ignored.
#[derive(Deserialize)]
struct Manifest {
    program: String,
    target: String,
    #[serde(default)]
    tiers: Vec<String>,
    expect: Expect,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    verdict: String,
    #[serde(default)]
    findings: Vec<ExpectedFinding>,
    #[serde(default)]
    warnings: Option<Vec<ExpectedFinding>>,
    #[serde(default)]
    hints: Option<Vec<ExpectedFinding>>,
    #[serde(default)]
    coverage_limits: Option<Vec<ExpectedFinding>>,
}

impl Expect {
    fn all(&self) -> impl Iterator<Item = &ExpectedFinding> {
        self.findings.iter().chain(self.warnings.iter().chain(&self.hints).chain(&self.coverage_limits).flatten())
    }
}

#[derive(Deserialize, Clone, PartialEq, Eq, PartialOrd, Ord, Debug)]
#[serde(deny_unknown_fields)]
struct ExpectedFinding {
    code: String,
    line: usize,
    column: usize,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn corpus_dir() -> PathBuf {
    root().join("corpus").join("verifier-negative")
}

fn manifests() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                // `family.toml` describes the corpus family for the gate; every other file is a case.
                .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.file_name().is_some_and(|n| n != "family.toml"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn describe(source: &str, d: &Diagnostic) -> String {
    let (l, c) = line_col(source, d.primary.span.start as usize);
    format!("{} {} at {l}:{c}: {}", d.code, d.severity.as_str(), d.message)
}

/// Check one manifest; `Err` explains the mismatch.
fn run_case(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let m: Manifest = toml::from_str(&text).map_err(|e| format!("bad manifest: {e}"))?;
    if m.tiers.iter().any(|t| t != "static" && t != "compile" && t != "gpu") {
        return Err(format!("unknown tier in {:?}", m.tiers));
    }
    if !["reject", "accept"].contains(&m.expect.verdict.as_str()) {
        return Err(format!("verdict must be reject or accept, not `{}`", m.expect.verdict));
    }
    let program = path.parent().unwrap_or(Path::new(".")).join(&m.program);
    let source = std::fs::read_to_string(&program).map_err(|e| format!("cannot read {}: {e}", program.display()))?;
    let out = std::panic::catch_unwind(|| check_source(&source)).map_err(|_| "the compiler panicked".to_string())?;
    if let Some(module) = &out.module {
        if module.target != m.target {
            return Err(format!("the program targets `{}` but the manifest says `{}`", module.target, m.target));
        }
    }
    let at = |severity: Severity| -> Vec<ExpectedFinding> {
        let mut v: Vec<ExpectedFinding> = out
            .diagnostics
            .iter()
            // Follow-on findings are hidden by `cake check`; a case lists the causes.
            .filter(|d| d.severity == severity && !d.is_follow_on())
            .map(|d| {
                let (line, column) = line_col(&source, d.primary.span.start as usize);
                ExpectedFinding { code: d.code.clone(), line, column }
            })
            .collect();
        v.sort();
        v
    };
    let verdict = if out.diagnostics.iter().any(Diagnostic::is_error) { "reject" } else { "accept" };
    let mut problems = Vec::new();
    if verdict != m.expect.verdict {
        problems.push(format!("expected verdict {}, got {verdict}", m.expect.verdict));
    }
    let lists = [
        ("errors", Severity::Error, Some(&m.expect.findings)),
        ("warnings", Severity::Warning, m.expect.warnings.as_ref()),
        ("hints", Severity::Hint, m.expect.hints.as_ref()),
        ("coverage limits", Severity::CoverageLimit, m.expect.coverage_limits.as_ref()),
    ];
    for (what, severity, want) in lists {
        let Some(want) = want else { continue };
        let mut want = want.clone();
        want.sort();
        let got = at(severity);
        if got != want {
            problems.push(format!("{what}: expected {want:?}\n    got {got:?}"));
        }
    }
    if !problems.is_empty() {
        let all: Vec<String> = out.diagnostics.iter().map(|d| format!("    {}", describe(&source, d))).collect();
        return Err(format!("{}\n  all findings:\n{}", problems.join("\n  "), all.join("\n")));
    }
    Ok(())
}

#[test]
fn negative_corpus() {
    let filter = std::env::var("NEGATIVE_FILTER").unwrap_or_default();
    let files: Vec<PathBuf> =
        manifests().into_iter().filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().contains(&filter))).collect();
    assert!(!files.is_empty() || !filter.is_empty(), "no manifests in {}", corpus_dir().display());
    let mut failures = Vec::new();
    for f in &files {
        if let Err(e) = run_case(f) {
            failures.push(format!("{}:\n  {e}", f.file_name().unwrap_or_default().to_string_lossy()));
        }
    }
    assert!(failures.is_empty(), "{} of {} negative cases failed:\n\n{}", failures.len(), files.len(), failures.join("\n\n"));
}

#[test]
fn examples_verify_without_errors() {
    let mut failures = Vec::new();
    for name in ["gemm_bf16_ws.cake", "gemm_bf16_sm80.cake", "kmeans_assign.cake"] {
        let path = root().join("examples").join(name);
        let source = std::fs::read_to_string(&path).expect("example exists");
        let out = check_source(&source);
        let errors: Vec<String> = out.diagnostics.iter().filter(|d| d.is_error()).map(|d| describe(&source, d)).collect();
        if out.module.is_none() || !errors.is_empty() || out.validated.is_none() {
            failures.push(format!("{name}: {errors:#?}"));
        }
        // Coverage limits and warnings on the examples are worth knowing about.
        for d in out.diagnostics.iter().filter(|d| !d.is_error()) {
            eprintln!("{name}: {}", describe(&source, d));
        }
    }
    assert!(failures.is_empty(), "examples rejected by the verifier:\n{}", failures.join("\n"));
}

#[test]
fn gemm_example_has_no_rule_findings_at_all() {
    let source = std::fs::read_to_string(root().join("examples/gemm_bf16_ws.cake")).expect("example exists");
    let out = check_source(&source);
    let mine: Vec<String> = out
        .diagnostics
        .iter()
        .filter(|d| RuleSet::builtin().get(&d.code).is_some_and(|r| r.require.is_some()) || d.severity == Severity::CoverageLimit)
        .map(|d| describe(&source, d))
        .collect();
    assert!(mine.is_empty(), "{mine:#?}");
}

#[test]
fn builtin_rules_load_cleanly() {
    let problems = RuleSet::builtin_problems();
    assert!(problems.is_empty(), "{}", problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n"));
    let checks = RuleSet::builtin().rules().iter().filter(|r| r.require.is_some()).count();
    assert!(checks >= 30, "only {checks} predicate rules");
    for r in RuleSet::builtin().rules() {
        let doc = RuleSet::builtin().doc(&r.code).expect("every rule is documented");
        assert!(doc.explanation.contains("Source:"), "{}", r.code);
    }
}

#[test]
fn every_rule_has_a_negative_case() {
    let mut covered = BTreeSet::new();
    for f in manifests() {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        if let Ok(m) = toml::from_str::<Manifest>(&text) {
            covered.extend(m.expect.all().map(|f| f.code.clone()));
        }
    }
    let missing: Vec<&str> = RuleSet::builtin()
        .rules()
        .iter()
        .filter(|r| r.require.is_some() && !covered.contains(&r.code))
        .map(|r| r.code.as_str())
        .collect();
    assert!(missing.is_empty(), "rules without a negative case in corpus/verifier-negative: {missing:?}");
}

/// A program that type-checks, for the rule-engine tests below.
fn gemm_module() -> cake::ir::Module {
    let source = std::fs::read_to_string(root().join("examples/gemm_bf16_ws.cake")).expect("example exists");
    check_source(&source).module.expect("the GEMM example type-checks")
}

struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("cake-rules-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn rule_written_to_a_directory_fires_without_rust_changes() {
    let dir = TempDir::new("fire");
    let sub = dir.0.join("schedule-semantics");
    std::fs::create_dir_all(&sub).expect("mkdir");
    std::fs::write(
        sub.join("V449-consumer-regs-cap.toml"),
        r#"
code = "V449"
name = "consumer-regs-cap"
category = "schedule-semantics"
severity = "error"
applies_to = "role"
when = "has_regs && consumes > 0"
require = "regs <= 200"
message = "consumer role `{name}` asks for {regs} registers; this project caps consumers at 200"
label = "budget {regs}"
primary = "attr:regs"
help = "lower `regs`"
[doc]
what = "A test rule."
why = "To show a rule fires from a file."
source = "tests/negative.rs"
"#,
    )
    .expect("write rule");
    let rules = RuleSet::builtin_with_dir(&dir.0).expect("the rule loads");
    assert!(rules.get("V449").is_some());
    let target = TargetTable::builtin().get("sm_90a").expect("sm_90a");
    let out = verify::verify_with(gemm_module(), target, &rules);
    let hits: Vec<&Diagnostic> = out.findings.iter().filter(|d| d.code == "V449").collect();
    assert_eq!(hits.len(), 1, "{:#?}", out.findings);
    assert_eq!(hits[0].message, "consumer role `mma` asks for 232 registers; this project caps consumers at 200");
    assert_eq!(hits[0].primary.message, "budget 232");
    let source = std::fs::read_to_string(root().join("examples/gemm_bf16_ws.cake")).expect("example");
    let role_line = source.find("role mma:").expect("the GEMM example declares role mma");
    let regs = role_line + source[role_line..].find("regs").expect("with a register budget");
    assert_eq!(hits[0].primary.span.start as usize, regs, "the finding points at `regs` of role mma");
    assert!(out.validated.is_none(), "an error blocks the module");
    // The built-in set alone accepts it.
    assert!(verify::verify(gemm_module(), target).validated.is_some());
}

#[test]
fn unknown_facts_become_coverage_limits() {
    let dir = TempDir::new("cov");
    std::fs::write(
        dir.0.join("V448-k-known.toml"),
        r#"
code = "V448"
name = "k-known"
category = "hardware-conformance"
severity = "error"
applies_to = "tensor"
require = "dim(1) <= 65536"
message = "`{name}` is too wide"
coverage = "V903"
[doc]
what = "A test rule."
why = "Dims are symbolic."
source = "tests/negative.rs"
"#,
    )
    .expect("write rule");
    let rules = RuleSet::load_dir(&dir.0).expect("loads");
    let target = TargetTable::builtin().get("sm_90a").expect("sm_90a");
    let out = verify::verify_with(gemm_module(), target, &rules);
    assert_eq!(out.findings.len(), 3, "{:#?}", out.findings);
    assert!(out.findings.iter().all(|d| d.code == "V903" && d.severity == Severity::CoverageLimit));
    assert!(out.findings[0].message.contains("`dim(1)`"), "{}", out.findings[0].message);
    assert!(out.validated.is_some(), "coverage limits do not block");
}

#[test]
fn malformed_rules_are_rejected_with_the_file_named() {
    let good = |extra: &str, replace: (&str, &str)| {
        let base = r#"
code = "V447"
name = "probe"
category = "hardware-conformance"
severity = "error"
applies_to = "kernel"
require = "smem_bytes <= target_smem_max"
message = "needs {smem_bytes} B"
[doc]
what = "w"
why = "y"
source = "s"
"#;
        format!("{}{extra}", base.replace(replace.0, replace.1))
    };
    let cases: Vec<(String, &str)> = vec![
        (good("", ("smem_bytes <=", "smem_byte <=")), "`smem_byte` is neither a fact"),
        (good("", ("<= target_smem_max\"", "<=\"")), "does not parse"),
        (good("", ("\"kernel\"", "\"kernal\"")), "unknown `applies_to"),
        (good("", ("\"error\"", "\"fatal\"")), "unknown severity"),
        (good("", ("hardware-conformance", "hardware")), "unknown category"),
        (good("", ("{smem_bytes}", "{smem}")), "placeholder `{smem}`"),
        (good("", ("V447", "X1")), "is not `V` followed by three digits"),
        (good("primary = \"attr:regs\"\n", ("", "")), "not a span of `kernel`"),
        (good("", ("what = \"w\"", "what = \"\"")), "`doc.what` must not be empty"),
        (good("", ("applies_to = \"kernel\"", "applies_to = \"call:nosuchop\"")), "not in the op catalog"),
        ("code = 3".to_string(), "invalid type"),
        (good("", ("applies_to = \"kernel\"\nrequire = \"smem_bytes <= target_smem_max\"", "applies_to = \"tensor\"\nrequire = \"dim <= 3\"")), "`dim` is an indexed fact"),
    ];
    for (text, needle) in cases {
        // `primary` after [doc] would land in the doc table: put extra keys before it.
        let text = if text.contains("primary = ") {
            text.replace("primary = \"attr:regs\"\n", "").replace("[doc]", "primary = \"attr:regs\"\n[doc]")
        } else {
            text
        };
        let err = RuleSet::from_files(&[("somewhere/V447-probe.toml", &text)]).expect_err(needle);
        let msg = err.to_string();
        assert!(msg.starts_with("somewhere/V447-probe.toml: ") || msg.starts_with("somewhere/V447-probe.toml:"), "{msg}");
        assert!(msg.contains(needle), "expected `{needle}` in: {msg}");
    }
    // Duplicate codes across files, and a file named after another code.
    let text = good("", ("", ""));
    let err = RuleSet::from_files(&[("a/V447-probe.toml", &text), ("b/V447-probe.toml", &text)]).expect_err("dup");
    assert!(err.to_string().contains("already used by a/V447-probe.toml"), "{err}");
    let err = RuleSet::from_files(&[("a/V446-probe.toml", &text)]).expect_err("name");
    assert!(err.to_string().contains("must start with the code"), "{err}");
    // A category folder that disagrees with the file.
    let err = RuleSet::from_files(&[("rules/data-consistency/V447-probe.toml", &text)]).expect_err("folder");
    assert!(err.to_string().contains("lies in folder `data-consistency`"), "{err}");
    // A missing directory.
    assert!(RuleSet::load_dir("/nonexistent/cake-rules").is_err());
}

#[test]
#[ignore = "a tool: prints the facts of $CAKE_FACTS"]
fn dump_facts() {
    let Ok(path) = std::env::var("CAKE_FACTS") else { return };
    let source = std::fs::read_to_string(&path).expect("readable");
    let out = check_source(&source);
    for d in &out.diagnostics {
        println!("{}", describe(&source, d));
    }
    let Some(module) = out.module else { return };
    let target = TargetTable::builtin().get(&module.target).expect("target");
    let facts = verify::module_facts(&module, target);
    for c in std::iter::once(&facts.kernel).chain(facts.constructs.iter()) {
        let (l, col) = line_col(&source, c.decl.start as usize);
        println!("== {} {} @{l}:{col}", c.kind.as_str(), c.name);
        for (k, v) in c.iter() {
            println!("   {k} = {v}");
        }
    }
}
