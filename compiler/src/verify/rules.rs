//! Verifier rules as data: one TOML file per rule under `compiler/rules/<category>/`, a
//! predicate over the facts of one construct (see `facts.rs`), interpreted here.
//!
//! ```toml
//! code = "V201"                        # unique; the file is named `<code>-<name>.toml`
//! name = "smem-over-capacity"          # kebab-case
//! category = "hardware-conformance"    # program-safety | hardware-conformance | data-consistency | schedule-semantics
//! kind = "rule"                        # rule (default) | analysis (documentation of a Rust analysis's code)
//! severity = "error"                   # error | warning | hint   (analysis entries may also say coverage-limit)
//! applies_to = "kernel"                # kernel | grid | smem | view | tensor | role | pipeline | barrier
//!                                      # | call:<op> | call:* | arg:<op> | arg:*
//! when = "true"                        # optional precondition
//! require = "smem_bytes <= target_smem_max"   # false → finding; undecidable → coverage-limit finding
//! message = "the kernel needs {smem_bytes} B of shared memory; {target} allows {target_smem_max} B per block"
//! label = "largest region"             # the primary label (placeholders allowed)
//! primary = "smem_largest"             # a span key of the construct: decl | name | attr:<key> | call | arg:<param> | ...
//! secondary = [{ span = "role_last", label = "..." }]   # optional; a plain string uses the default label
//! help = "reduce stages or tile sizes"
//! notes = ["..."]                      # optional extra notes
//! coverage = "V901"                    # optional: the code of the coverage-limit finding (default V900)
//! [doc]
//! what = "..."                         # what the rule checks
//! why = "..."                          # why violating it is wrong on the hardware
//! example = """a minimal failing snippet"""
//! source = "CUDA C++ Programming Guide, ..."   # where the hardware fact comes from
//! ```
//!
//! Facts are bare words (`smem_bytes`) or indexed (`dim(0)`, `box(-1)`, `has(wgmma)`); any other
//! bare word is a literal (a dtype, an op or parameter name, `warpgroup`, `pipeline`, ...). Message
//! placeholders `{fact}` / `{dim(0)}` are evaluated on the construct; `{name}` falls back to the
//! construct's display name; `{{` writes a brace. Everything is validated when the rule is loaded:
//! unique codes, known category / severity / construct, predicates that parse and name only facts of
//! that construct or known literals, placeholders that name facts, span keys that exist.
//!
//! Rules load from the files embedded at build time ([`RuleSet::builtin`]) and from any directory at
//! run time ([`RuleSet::load_dir`]), so a new rule needs no Rust change.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Deserialize;

use crate::catalog::Catalog;
use crate::codes::CodeDoc;
use crate::diag::{Diagnostic, Label, Severity};
use crate::pred::{self, PExpr, Value};
use crate::span::Span;
use crate::target::TargetTable;

use super::facts::{self, ConstructKind, FactSet, ModuleFacts};
use super::rule_text_error::{RuleTextError, WordError};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_rules.rs"));
}

/// The built-in rules directory (relative to the crate root), for file names in errors.
pub const BUILTIN_DIR: &str = "rules";

/// Code of a coverage-limit finding when a rule gives none.
pub const DEFAULT_COVERAGE_CODE: &str = "V900";
/// Code of the finding reported when a rule cannot be evaluated (an authoring error that
/// validation could not see). Reported as a coverage limit: the rule decided nothing.
pub const EVAL_ERROR_CODE: &str = "V949";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    ProgramSafety,
    HardwareConformance,
    DataConsistency,
    ScheduleSemantics,
}

impl Category {
    pub const ALL: [Category; 4] =
        [Category::ProgramSafety, Category::HardwareConformance, Category::DataConsistency, Category::ScheduleSemantics];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::ProgramSafety => "program-safety",
            Category::HardwareConformance => "hardware-conformance",
            Category::DataConsistency => "data-consistency",
            Category::ScheduleSemantics => "schedule-semantics",
        }
    }

    pub fn parse(s: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// A predicate rule, or the documentation of a code a Rust analysis reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleKind {
    Rule,
    Analysis,
}

/// Which constructs a rule is evaluated on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliesTo {
    pub kind: ConstructKind,
    /// For `call:<op>` / `arg:<op>`: the op; `None` for every op.
    pub op: Option<String>,
}

impl fmt::Display for AppliesTo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.kind, &self.op) {
            (k @ (ConstructKind::Call | ConstructKind::Arg), Some(op)) => write!(f, "{}:{op}", k.as_str()),
            (k @ (ConstructKind::Call | ConstructKind::Arg), None) => write!(f, "{}:*", k.as_str()),
            (k, _) => f.write_str(k.as_str()),
        }
    }
}

/// A predicate with its source text.
#[derive(Clone, Debug, PartialEq)]
pub struct Predicate {
    pub text: String,
    pub expr: PExpr,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SecondarySpan {
    pub span: String,
    pub label: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleDoc {
    pub what: String,
    pub why: String,
    #[serde(default)]
    pub example: String,
    pub source: String,
}

/// One rule (or analysis documentation entry), validated.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub code: String,
    pub name: String,
    pub category: Category,
    pub kind: RuleKind,
    pub severity: Severity,
    /// `None` for analysis entries.
    pub applies_to: Option<AppliesTo>,
    pub when: Option<Predicate>,
    pub require: Option<Predicate>,
    pub message: String,
    pub label: String,
    pub primary: String,
    pub secondary: Vec<SecondarySpan>,
    pub help: Option<String>,
    pub notes: Vec<String>,
    pub coverage: String,
    pub doc: RuleDoc,
    /// The file it came from (`rules/hardware-conformance/V201-smem-over-capacity.toml`).
    pub file: String,
}

impl Rule {
    /// The rule's documentation as `cake explain` prints it.
    pub fn code_doc(&self) -> CodeDoc {
        let mut text = format!("{}\n\nWhy: {}\n", self.doc.what.trim(), self.doc.why.trim());
        text.push_str(&format!("\nCategory: {}. Severity: {}.", self.category.as_str(), self.severity.as_str()));
        if let (Some(applies), Some(req)) = (&self.applies_to, &self.require) {
            text.push_str(&format!("\nChecked on every `{applies}`"));
            if let Some(w) = &self.when {
                text.push_str(&format!(" where `{}`", w.text));
            }
            text.push_str(&format!(": `{}`. When a fact it needs is unknown, {} reports a coverage limit.", req.text, self.coverage));
        }
        if let Some(h) = &self.help {
            text.push_str(&format!("\nFix: {}", h.trim()));
        }
        text.push_str(&format!("\nSource: {}", self.doc.source.trim()));
        CodeDoc {
            code: self.code.clone(),
            title: format!("{} ({})", self.name, self.category.as_str()),
            explanation: text,
            example: self.doc.example.clone(),
            file: self.file.clone(),
        }
    }
}

/// A rule file that failed to load: which file, which code, what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleError {
    pub file: String,
    pub code: Option<String>,
    pub message: String,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file)?;
        if let Some(c) = &self.code {
            write!(f, "rule {c}: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for RuleError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    code: String,
    name: String,
    category: String,
    #[serde(default)]
    kind: Option<String>,
    severity: String,
    #[serde(default)]
    applies_to: Option<String>,
    #[serde(default)]
    when: Option<String>,
    #[serde(default)]
    require: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    primary: Option<String>,
    #[serde(default)]
    secondary: Vec<RawSecondary>,
    #[serde(default)]
    help: Option<String>,
    #[serde(default)]
    notes: Vec<String>,
    #[serde(default)]
    coverage: Option<String>,
    doc: RuleDoc,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawSecondary {
    Key(String),
    Full { span: String, label: String },
}

/// A validated set of rules.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuleSet {
    rules: Vec<Rule>,
}

struct Builtin {
    set: RuleSet,
    problems: Vec<RuleError>,
}

fn builtin() -> &'static Builtin {
    static B: OnceLock<Builtin> = OnceLock::new();
    B.get_or_init(|| {
        let mut set = RuleSet::default();
        let mut problems = Vec::new();
        for (rel, text) in embedded::RULES_TOML {
            let name = format!("{BUILTIN_DIR}/{rel}");
            match parse_rule(&name, text, Catalog::builtin()) {
                Ok(rule) => {
                    if let Err(e) = set.push(rule) {
                        problems.push(e);
                    }
                }
                Err(e) => problems.push(e),
            }
        }
        Builtin { set, problems }
    })
}

impl RuleSet {
    /// The built-in rules (embedded at build time). A malformed built-in file is left out and
    /// recorded in [`RuleSet::builtin_problems`], which the crate's tests require to be empty.
    pub fn builtin() -> &'static RuleSet {
        &builtin().set
    }

    /// Problems found while loading the built-in rules.
    pub fn builtin_problems() -> &'static [RuleError] {
        &builtin().problems
    }

    /// The embedded rule files as (`rules/<category>/<file>.toml`, contents).
    pub fn builtin_files() -> Vec<(String, &'static str)> {
        embedded::RULES_TOML.iter().map(|(n, t)| (format!("{BUILTIN_DIR}/{n}"), *t)).collect()
    }

    /// Parse and validate rule files (name, contents) against the built-in catalog.
    pub fn from_files(files: &[(&str, &str)]) -> Result<RuleSet, RuleError> {
        let mut set = RuleSet::default();
        for (name, text) in files {
            set.push(parse_rule(name, text, Catalog::builtin())?)?;
        }
        Ok(set)
    }

    /// Load every `*.toml` file under a directory, recursively (sorted by path). A file inside a
    /// folder named after a category must declare that category.
    pub fn load_dir(path: impl AsRef<Path>) -> Result<RuleSet, RuleError> {
        let root = path.as_ref();
        let mut files = Vec::new();
        collect_toml(root, &mut files).map_err(|e| RuleError { file: root.display().to_string(), code: None, message: e.to_string() })?;
        files.sort();
        let mut texts = Vec::new();
        for p in &files {
            let text = std::fs::read_to_string(p)
                .map_err(|e| RuleError { file: p.display().to_string(), code: None, message: format!("cannot read: {e}") })?;
            texts.push((p.display().to_string(), text));
        }
        let borrowed: Vec<(&str, &str)> = texts.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
        RuleSet::from_files(&borrowed)
    }

    /// The built-in rules plus every rule under `path` (codes stay unique).
    pub fn builtin_with_dir(path: impl AsRef<Path>) -> Result<RuleSet, RuleError> {
        let mut set = RuleSet::builtin().clone();
        set.extend(RuleSet::load_dir(path)?)?;
        Ok(set)
    }

    /// Add the rules of `other`; a code both define is an error.
    pub fn extend(&mut self, other: RuleSet) -> Result<(), RuleError> {
        for r in other.rules {
            self.push(r)?;
        }
        Ok(())
    }

    fn push(&mut self, rule: Rule) -> Result<(), RuleError> {
        if let Some(first) = self.rules.iter().find(|r| r.code == rule.code) {
            return Err(RuleError {
                file: rule.file.clone(),
                code: Some(rule.code.clone()),
                message: format!("code {} is already used by {}", rule.code, first.file),
            });
        }
        self.rules.push(rule);
        Ok(())
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn get(&self, code: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.code.eq_ignore_ascii_case(code))
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Documentation of a rule or analysis code, for `cake explain`.
    pub fn doc(&self, code: &str) -> Option<CodeDoc> {
        self.get(code).map(Rule::code_doc)
    }

    /// Evaluate every predicate rule on every construct it applies to.
    pub fn evaluate(&self, facts: &ModuleFacts) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        for rule in &self.rules {
            let (Some(applies), Some(require)) = (&rule.applies_to, &rule.require) else { continue };
            for c in facts.of_kind(applies.kind) {
                if applies.op.as_ref().is_some_and(|op| c.op.as_deref() != Some(op.as_str())) {
                    continue;
                }
                if let Some(d) = check_one(rule, require, c, facts) {
                    out.push(d);
                }
            }
        }
        out
    }
}

fn collect_toml(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), RuleTextError> {
    let unreadable = |e: std::io::Error| RuleTextError::ReadDir { message: e.to_string() };
    let entries = std::fs::read_dir(dir).map_err(unreadable)?;
    for e in entries {
        let p = e.map_err(unreadable)?.path();
        if p.is_dir() {
            collect_toml(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "toml") {
            out.push(p);
        }
    }
    Ok(())
}

// ─── Evaluation ──────────────────────────────────────────────────────────────────────────────────

fn check_one(rule: &Rule, require: &Predicate, c: &FactSet, facts: &ModuleFacts) -> Option<Diagnostic> {
    let scope = facts.scope(c);
    if let Some(when) = &rule.when {
        match pred::holds(&when.expr, &scope) {
            Ok(Some(true)) => {}
            Ok(Some(false)) => return None,
            Ok(None) => return Some(coverage(rule, c, facts, &when.expr, "its precondition")),
            Err(e) => return Some(eval_error(rule, c, &e)),
        }
    }
    match pred::holds(&require.expr, &scope) {
        Ok(Some(true)) => None,
        Ok(Some(false)) => Some(finding(rule, require, c, facts)),
        Ok(None) => Some(coverage(rule, c, facts, &require.expr, "its requirement")),
        Err(e) => Some(eval_error(rule, c, &e)),
    }
}

fn finding(rule: &Rule, require: &Predicate, c: &FactSet, facts: &ModuleFacts) -> Diagnostic {
    let primary = c.span(&rule.primary).unwrap_or(c.decl);
    let mut d = Diagnostic {
        code: rule.code.clone(),
        severity: rule.severity,
        message: render(&rule.message, c, facts),
        primary: Label { span: primary, message: render(&rule.label, c, facts) },
        secondary: Vec::new(),
        notes: Vec::new(),
        help: rule.help.as_ref().map(|h| render(h, c, facts)),
        details: Vec::new(),
        follows: None,
    };
    add_secondary(&mut d, rule, c, facts);
    d.notes.push(format!("{} requires `{}`{}", rule.category.as_str(), require.text, values_note(&require.expr, c, facts)));
    d.notes.extend(rule.notes.iter().map(|n| render(n, c, facts)));
    d
}

fn add_secondary(d: &mut Diagnostic, rule: &Rule, c: &FactSet, facts: &ModuleFacts) {
    for s in &rule.secondary {
        if let Some(span) = c.span(&s.span) {
            if span != d.primary.span && !d.secondary.iter().any(|l| l.span == span) && span != Span::default() {
                d.secondary.push(Label { span, message: render(&s.label, c, facts) });
            }
        }
    }
}

fn coverage(rule: &Rule, c: &FactSet, facts: &ModuleFacts, expr: &PExpr, what: &str) -> Diagnostic {
    let primary = c.span(&rule.primary).unwrap_or(c.decl);
    let scope = facts.scope(c);
    let unknown: Vec<String> = mentioned(expr, &scope)
        .into_iter()
        .filter(|t| pred::eval(t, &scope).ok() == Some(Value::Unknown))
        .map(|t| format!("`{t}`"))
        .collect();
    let unknown = if unknown.is_empty() { "a fact it needs".to_string() } else { unknown.join(", ") };
    let mut d = Diagnostic::error(
        rule.coverage.clone(),
        format!("cannot decide {} ({}) for `{}`: {unknown} not known statically", rule.code, rule.name, c.name),
        primary,
        "not decided here",
    )
    .with_severity(Severity::CoverageLimit)
    .with_note(format!("{what} is `{}`", if what.contains("precondition") { rule.when.as_ref().map_or("", |w| w.text.as_str()) } else { rule.require.as_ref().map_or("", |r| r.text.as_str()) }))
    .with_note(format!("{} is neither passed nor failed: the verifier does not claim it holds", rule.code));
    if let Some(h) = &rule.help {
        d = d.with_help(render(h, c, facts));
    }
    add_secondary(&mut d, rule, c, facts);
    d
}

fn eval_error(rule: &Rule, c: &FactSet, err: &pred::EvalError) -> Diagnostic {
    Diagnostic::error(
        EVAL_ERROR_CODE,
        format!("verifier rule {} ({}) cannot be evaluated on `{}`: {err}", rule.code, rule.name, c.name),
        c.decl,
        "rule not evaluated here",
    )
    .with_severity(Severity::CoverageLimit)
    .with_help(format!("fix the rule in {}", rule.file))
}

/// ` (where a = 1, b = 2)` for the facts a predicate mentions.
fn values_note(expr: &PExpr, c: &FactSet, facts: &ModuleFacts) -> String {
    let scope = facts.scope(c);
    let parts: Vec<String> = mentioned(expr, &scope)
        .into_iter()
        .filter_map(|t| pred::eval(&t, &scope).ok().map(|v| format!("{t} = {v}")))
        .take(8)
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" (here {})", parts.join(", "))
    }
}

/// The fact terms a predicate mentions (bare words that name facts here, indexed facts),
/// deduplicated, in reading order.
fn mentioned(e: &PExpr, scope: &dyn pred::Facts) -> Vec<PExpr> {
    fn go(e: &PExpr, scope: &dyn pred::Facts, out: &mut Vec<PExpr>) {
        match e {
            PExpr::Int(_) => {}
            PExpr::Sym(s) => {
                if scope.symbol(s).is_some() && !out.contains(e) {
                    out.push(e.clone());
                }
            }
            PExpr::Fact { .. } => {
                if !out.contains(e) {
                    out.push(e.clone());
                }
            }
            PExpr::Not(x) | PExpr::Neg(x) => go(x, scope, out),
            PExpr::Bin { lhs, rhs, .. } => {
                go(lhs, scope, out);
                go(rhs, scope, out);
            }
            PExpr::In { value, set } => {
                go(value, scope, out);
                for s in set {
                    go(s, scope, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    go(e, scope, &mut out);
    out
}

/// Fill `{fact}` placeholders.
fn render(template: &str, c: &FactSet, facts: &ModuleFacts) -> String {
    let scope = facts.scope(c);
    let mut out = String::new();
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let ch = rest.as_bytes()[i];
        if rest[i + 1..].starts_with(ch as char) {
            out.push(ch as char);
            rest = &rest[i + 2..];
            continue;
        }
        if ch == b'}' {
            out.push('}');
            rest = &rest[i + 1..];
            continue;
        }
        let Some(j) = rest[i..].find('}') else {
            out.push_str(&rest[i..]);
            return out;
        };
        let inner = rest[i + 1..i + j].trim();
        let value = if inner == "name" {
            c.get("name").map_or_else(|| c.name.clone(), Value::to_string)
        } else {
            match pred::parse(inner).map(|e| pred::eval(&e, &scope)) {
                Ok(Ok(v)) => v.to_string(),
                _ => "?".to_string(),
            }
        };
        out.push_str(&value);
        rest = &rest[i + j + 1..];
    }
    out.push_str(rest);
    out
}

// ─── Loading and validation ──────────────────────────────────────────────────────────────────────

fn parse_rule(file: &str, text: &str, catalog: &Catalog) -> Result<Rule, RuleError> {
    let raw: RawRule = toml::from_str(text)
        .map_err(|e| RuleError { file: file.to_string(), code: None, message: e.to_string().trim_end().to_string() })?;
    let code = raw.code.trim().to_string();
    let err = |message: String| RuleError { file: file.to_string(), code: Some(code.clone()), message };
    if !(code.len() == 4 && code.starts_with('V') && code[1..].chars().all(|c| c.is_ascii_digit())) {
        return Err(err(format!("code `{code}` is not `V` followed by three digits")));
    }
    let stem = Path::new(file).file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if !stem.starts_with(&code) {
        return Err(err(format!("the file name must start with the code (`{code}-{}.toml`)", raw.name)));
    }
    if raw.name.is_empty() || !raw.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
        return Err(err(format!("name `{}` must be kebab-case (a-z, 0-9, -)", raw.name)));
    }
    let category = Category::parse(&raw.category).ok_or_else(|| {
        err(format!(
            "unknown category `{}`; the categories are: {}",
            raw.category,
            Category::ALL.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ")
        ))
    })?;
    // A file in a category folder must belong to it.
    if let Some(folder) = Path::new(file).parent().and_then(|p| p.file_name()).and_then(|s| s.to_str()) {
        if let Some(fc) = Category::parse(folder) {
            if fc != category {
                return Err(err(format!("it lies in folder `{folder}` but declares category `{}`", category.as_str())));
            }
        }
    }
    let kind = match raw.kind.as_deref() {
        None | Some("rule") => RuleKind::Rule,
        Some("analysis") => RuleKind::Analysis,
        Some(k) => return Err(err(format!("unknown kind `{k}`; use `rule` or `analysis`"))),
    };
    let severity = match raw.severity.as_str() {
        "error" => Severity::Error,
        "warning" => Severity::Warning,
        "hint" => Severity::Hint,
        "coverage-limit" if kind == RuleKind::Analysis => Severity::CoverageLimit,
        s => return Err(err(format!("unknown severity `{s}`; use error, warning or hint"))),
    };
    for (field, text) in [("doc.what", &raw.doc.what), ("doc.why", &raw.doc.why), ("doc.source", &raw.doc.source)] {
        if text.trim().is_empty() {
            return Err(err(format!("`{field}` must not be empty")));
        }
    }
    let coverage = raw.coverage.clone().unwrap_or_else(|| DEFAULT_COVERAGE_CODE.to_string());
    if !(coverage.len() == 4 && coverage.starts_with("V9") && coverage[1..].chars().all(|c| c.is_ascii_digit())) {
        return Err(err(format!("coverage code `{coverage}` must be a V9xx code")));
    }
    let secondary: Vec<SecondarySpan> = raw
        .secondary
        .iter()
        .map(|s| match s {
            RawSecondary::Key(k) => SecondarySpan { span: k.clone(), label: default_label(k) },
            RawSecondary::Full { span, label } => SecondarySpan { span: span.clone(), label: label.clone() },
        })
        .collect();

    if kind == RuleKind::Analysis {
        if raw.require.is_some() || raw.when.is_some() || raw.applies_to.is_some() {
            return Err(err("an `analysis` entry documents a Rust analysis: it has no applies_to, when or require".into()));
        }
        return Ok(Rule {
            code,
            name: raw.name,
            category,
            kind,
            severity,
            applies_to: None,
            when: None,
            require: None,
            message: raw.message.unwrap_or_default(),
            label: raw.label.unwrap_or_default(),
            primary: raw.primary.unwrap_or_else(|| "decl".into()),
            secondary,
            help: raw.help,
            notes: raw.notes,
            coverage,
            doc: raw.doc,
            file: file.to_string(),
        });
    }

    let applies_text = raw.applies_to.as_deref().ok_or_else(|| err("missing `applies_to`".into()))?;
    let applies = parse_applies(applies_text, catalog).map_err(|e| err(e.to_string()))?;
    let vocab = Vocab::new(&applies, catalog);
    let require_text = raw.require.as_deref().ok_or_else(|| err("missing `require` (or say `kind = \"analysis\"`)".into()))?;
    let require = vocab.predicate("require", require_text).map_err(|e| err(e.to_string()))?;
    let when = match raw.when.as_deref() {
        None => None,
        Some(t) => Some(vocab.predicate("when", t).map_err(|e| err(e.to_string()))?),
    };
    let message = raw.message.ok_or_else(|| err("missing `message`".into()))?;
    let label = raw.label.unwrap_or_else(|| "here".to_string());
    for (field, t) in [("message", Some(&message)), ("label", Some(&label)), ("help", raw.help.as_ref())]
        .into_iter()
        .chain(raw.notes.iter().map(|n| ("notes", Some(n))))
    {
        if let Some(t) = t {
            vocab.placeholders(field, t).map_err(|e| err(e.to_string()))?;
        }
    }
    for s in &secondary {
        vocab.placeholders("secondary label", &s.label).map_err(|e| err(e.to_string()))?;
    }
    let primary = raw.primary.unwrap_or_else(|| "decl".to_string());
    vocab.span_key("primary", &primary).map_err(|e| err(e.to_string()))?;
    for s in &secondary {
        vocab.span_key("secondary", &s.span).map_err(|e| err(e.to_string()))?;
    }
    Ok(Rule {
        code,
        name: raw.name,
        category,
        kind,
        severity,
        applies_to: Some(applies),
        when,
        require: Some(require),
        message,
        label,
        primary,
        secondary,
        help: raw.help,
        notes: raw.notes,
        coverage,
        doc: raw.doc,
        file: file.to_string(),
    })
}

fn default_label(key: &str) -> String {
    match key {
        "role" => "executed by this role".into(),
        "region" => "the shared region".into(),
        "producer" => "the producer role".into(),
        "consumer" => "the consumer role".into(),
        k => format!("{} here", k.replace(['_', ':'], " ")),
    }
}

fn parse_applies(text: &str, catalog: &Catalog) -> Result<AppliesTo, RuleTextError> {
    let (kind, op) = match text.split_once(':') {
        Some((k, op)) => (k, Some(op)),
        None => (text, None),
    };
    let kind = ConstructKind::parse(kind).ok_or_else(|| RuleTextError::UnknownKind { text: text.to_string() })?;
    let op = match (kind, op) {
        (ConstructKind::Call | ConstructKind::Arg, None | Some("*")) => None,
        (ConstructKind::Call | ConstructKind::Arg, Some(op)) => {
            if catalog.get(op).is_none() {
                return Err(RuleTextError::UnknownOp { text: text.to_string(), op: op.to_string() });
            }
            Some(op.to_string())
        }
        (_, None) => None,
        (_, Some(_)) => return Err(RuleTextError::OpOnKind { text: text.to_string() }),
    };
    Ok(AppliesTo { kind, op })
}

/// What a rule for one construct kind may name.
struct Vocab<'c> {
    applies: AppliesTo,
    catalog: &'c Catalog,
    /// Fact name → indexed?
    facts: BTreeMap<String, bool>,
    literals: BTreeSet<String>,
}

impl<'c> Vocab<'c> {
    fn new(applies: &AppliesTo, catalog: &'c Catalog) -> Vocab<'c> {
        let op = applies.op.as_deref().and_then(|o| catalog.get(o));
        let facts: BTreeMap<String, bool> =
            facts::vocabulary(applies.kind, op, catalog).into_iter().map(|(n, d)| (n, d.indexed)).collect();
        let mut literals: BTreeSet<String> = [
            "true", "false", "warp", "warpgroup", "thread", "in", "out", "inout", "read", "write", "readwrite", "none",
            "smem", "global", "frag", "scalar", "pipeline", "barrier", "roleref", "dtypename", "other", "async",
            "generic", "const", "expr", "elected", "block", "cluster",
        ]
        .into_iter()
        .map(str::to_string)
        .collect();
        literals.extend(crate::ir::DType::ALL.iter().map(|d| d.name().to_string()));
        for op in &catalog.ops {
            literals.insert(op.name.clone());
            literals.extend(op.params.iter().map(|p| p.name.clone()));
        }
        let targets = TargetTable::builtin();
        literals.extend(targets.names().into_iter().map(str::to_string));
        literals.extend(targets.features.keys().cloned());
        Vocab { applies: applies.clone(), catalog, facts, literals }
    }

    fn predicate(&self, field: &str, text: &str) -> Result<Predicate, RuleTextError> {
        let expr = pred::parse(text).map_err(|error| RuleTextError::Parse { field: field.into(), text: text.into(), error })?;
        self.check_expr(&expr, false).map_err(|word| RuleTextError::Word { field: field.into(), word })?;
        Ok(Predicate { text: text.to_string(), expr })
    }

    /// `facts_only`: bare words must be facts (message placeholders).
    fn check_expr(&self, e: &PExpr, facts_only: bool) -> Result<(), WordError> {
        match e {
            PExpr::Int(_) => Ok(()),
            PExpr::Sym(s) => match self.facts.get(s) {
                Some(false) => Ok(()),
                Some(true) => Err(WordError::NeedsIndex(s.clone())),
                None if s == "name" && facts_only => Ok(()),
                None if !facts_only && self.literals.contains(s) => Ok(()),
                None => Err(self.unknown_word(s)),
            },
            PExpr::Fact { name, args } => {
                match self.facts.get(name) {
                    Some(true) => {}
                    Some(false) => return Err(WordError::TakesNoIndex(name.clone())),
                    None => return Err(self.unknown_word(name)),
                }
                if args.len() != 1 {
                    return Err(WordError::OneArgument(name.clone()));
                }
                if name == "has" || name.ends_with("_has") {
                    return match &args[0] {
                        PExpr::Sym(f) if TargetTable::builtin().is_feature(f) => Ok(()),
                        a => Err(WordError::NotAFeature(a.to_string())),
                    };
                }
                self.check_expr(&args[0], false)
            }
            PExpr::Not(x) | PExpr::Neg(x) => self.check_expr(x, facts_only),
            PExpr::Bin { lhs, rhs, .. } => {
                self.check_expr(lhs, facts_only)?;
                self.check_expr(rhs, facts_only)
            }
            PExpr::In { value, set } => {
                self.check_expr(value, facts_only)?;
                set.iter().try_for_each(|s| self.check_expr(s, facts_only))
            }
        }
    }

    fn unknown_word(&self, s: &str) -> WordError {
        let near = crate::diag::closest(s, self.facts.keys().map(String::as_str)).map(str::to_string);
        WordError::Unknown { word: s.to_string(), applies: self.applies.to_string(), near }
    }

    fn placeholders(&self, field: &str, text: &str) -> Result<(), RuleTextError> {
        let mut rest = text;
        while let Some(i) = rest.find('{') {
            if rest[i + 1..].starts_with('{') {
                rest = &rest[i + 2..];
                continue;
            }
            let Some(j) = rest[i..].find('}') else {
                return Err(RuleTextError::UnclosedPlaceholder { field: field.into() });
            };
            let inner = &rest[i + 1..i + j];
            let e = pred::parse(inner)
                .map_err(|error| RuleTextError::PlaceholderParse { field: field.into(), inner: inner.into(), error })?;
            self.check_expr(&e, true)
                .map_err(|word| RuleTextError::PlaceholderWord { field: field.into(), inner: inner.into(), word })?;
            rest = &rest[i + j + 1..];
        }
        Ok(())
    }

    fn span_key(&self, field: &str, key: &str) -> Result<(), RuleTextError> {
        let kind = self.applies.kind;
        if kind.span_keys().contains(&key) {
            return Ok(());
        }
        if let Some(attr) = key.strip_prefix("attr:") {
            if kind.has_attr_spans() && !attr.is_empty() {
                return Ok(());
            }
        }
        if kind == ConstructKind::Call {
            if let Some(p) = key.strip_prefix("arg:").or_else(|| key.strip_prefix("root:")) {
                let ok = match self.applies.op.as_deref().and_then(|o| self.catalog.get(o)) {
                    Some(op) => op.param(p).is_some(),
                    None => self.catalog.ops.iter().any(|o| o.param(p).is_some()),
                };
                if ok {
                    return Ok(());
                }
                return Err(RuleTextError::SpanParam { field: field.into(), key: key.into(), param: p.into(), applies: self.applies.to_string() });
            }
        }
        let mut keys: Vec<String> = kind.span_keys().iter().map(|s| s.to_string()).collect();
        if kind.has_attr_spans() {
            keys.push("attr:<key>".into());
        }
        if kind == ConstructKind::Call {
            keys.push("arg:<param>".into());
            keys.push("root:<param>".into());
        }
        Err(RuleTextError::SpanKey { field: field.into(), key: key.into(), applies: self.applies.to_string(), spans: keys })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::check_source;
    use crate::target::TargetTable;

    const GEMM: &str = include_str!("../../../examples/gemm_bf16_ws.cake");

    fn rule(body: &str) -> Result<Rule, RuleError> {
        let text = format!(
            "code = \"V440\"\nname = \"probe\"\ncategory = \"schedule-semantics\"\nseverity = \"error\"\n{body}\n[doc]\nwhat = \"w\"\nwhy = \"y\"\nsource = \"s\"\n"
        );
        parse_rule("V440-probe.toml", &text, Catalog::builtin())
    }

    fn gemm_facts() -> ModuleFacts {
        let m = check_source(GEMM).module.expect("the GEMM example type-checks");
        let t = TargetTable::builtin().get(&m.target).expect("target");
        facts::compute(&m, &crate::layout::KernelLayout::compute(&m, t), t, Catalog::builtin())
    }

    #[test]
    fn applies_to_forms() {
        let c = Catalog::builtin();
        assert_eq!(parse_applies("call:*", c).unwrap(), AppliesTo { kind: ConstructKind::Call, op: None });
        assert_eq!(parse_applies("arg", c).unwrap(), AppliesTo { kind: ConstructKind::Arg, op: None });
        assert_eq!(parse_applies("call:wgmma", c).unwrap().op.as_deref(), Some("wgmma"));
        assert!(parse_applies("smem:wgmma", c).is_err());
        assert!(parse_applies("call:nosuch", c).is_err());
    }

    #[test]
    fn placeholders_and_braces_render() {
        let facts = gemm_facts();
        let a_s = facts.of_kind(ConstructKind::Smem).next().expect("a region");
        assert_eq!(render("{name}: {stages} × {stage_bytes} B = {stages * stage_bytes} {{B}}", a_s, &facts), "a_s: 4 × 16384 B = 65536 {B}");
        assert_eq!(render("on {target} ({target_smem_max}); dim(-1) = {dim(-1)}", a_s, &facts), "on sm_90a (232448); dim(-1) = 64");
    }

    #[test]
    fn bare_words_resolve_to_facts_and_literals_stay_literals() {
        let facts = gemm_facts();
        let r = rule("applies_to = \"arg:wgmma\"\nwhen = \"space == smem && dtype == bf16\"\nrequire = \"swizzle == 64\"\nmessage = \"{param}\"\nprimary = \"arg\"").unwrap();
        let found = RuleSet { rules: vec![r] }.evaluate(&facts);
        // a and b are 128B-swizzled bf16 shared operands (of every wgmma call); acc is a
        // fragment (space frag), for which the precondition is false.
        let params: BTreeSet<&str> = found.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(params.into_iter().collect::<Vec<_>>(), ["a", "b"]);
        assert!(found.iter().all(|d| d.severity == Severity::Error));
    }

    #[test]
    fn call_rules_see_prefixed_argument_facts() {
        let facts = gemm_facts();
        let r = rule("applies_to = \"call:tma_load\"\nrequire = \"dst_bytes == src_bytes && src_box(0) * src_box(1) * 2 == dst_bytes && bar_name == dst_stage_pipeline\"\nmessage = \"m\"").unwrap();
        assert!(RuleSet { rules: vec![r] }.evaluate(&facts).is_empty());
        // A fact of another op's parameters is undecidable here, not an error.
        let r = rule("applies_to = \"call:*\"\nrequire = \"acc_scope == warpgroup || op != wgmma\"\nmessage = \"m\"").unwrap();
        assert!(RuleSet { rules: vec![r] }.evaluate(&facts).is_empty());
    }

    #[test]
    fn analysis_entries_document_codes() {
        let r = parse_rule(
            "program-safety/V101-x.toml",
            "code = \"V101\"\nname = \"x\"\ncategory = \"program-safety\"\nkind = \"analysis\"\nseverity = \"error\"\n[doc]\nwhat = \"w\"\nwhy = \"y\"\nsource = \"s\"\n",
            Catalog::builtin(),
        )
        .unwrap();
        assert!(r.require.is_none() && r.applies_to.is_none());
        let set = RuleSet { rules: vec![r] };
        assert!(set.evaluate(&gemm_facts()).is_empty());
        let doc = set.doc("v101").expect("case-insensitive lookup");
        assert_eq!(doc.code, "V101");
        assert!(doc.explanation.contains("Source: s"));
        // An analysis entry with a predicate is a mistake.
        assert!(parse_rule(
            "V101-x.toml",
            "code = \"V101\"\nname = \"x\"\ncategory = \"program-safety\"\nkind = \"analysis\"\nseverity = \"error\"\nrequire = \"true\"\n[doc]\nwhat = \"w\"\nwhy = \"y\"\nsource = \"s\"\n",
            Catalog::builtin()
        )
        .is_err());
    }

    #[test]
    fn every_builtin_rule_file_is_in_its_category_folder() {
        assert!(RuleSet::builtin_problems().is_empty(), "{:?}", RuleSet::builtin_problems());
        for r in RuleSet::builtin().rules() {
            assert!(r.file.starts_with(&format!("rules/{}/{}-{}", r.category.as_str(), r.code, r.name)), "{}", r.file);
        }
    }
}

/// The documentation of any code the compiler reports: the diagnostics registry
/// (`compiler/diagnostics/*.toml`: syntax, types, lowering, CLI), then the built-in verifier rules
/// and analyses. This is what `cake explain CODE` prints.
pub fn documented(code: &str) -> Option<CodeDoc> {
    crate::codes::lookup(code).or_else(|| RuleSet::builtin().doc(code.trim()))
}

/// The category a finding of `code` belongs to, as JSON findings carry it: a verifier rule's
/// category (`program-safety`, `hardware-conformance`, `data-consistency`,
/// `schedule-semantics`) from `rules`, else the stage whose data file documents the code
/// (`syntax`, `types`, `lowering`, `cli`, ... from `compiler/diagnostics/<stage>.toml`), else
/// `undocumented`.
pub fn category_in(rules: &RuleSet, code: &str) -> String {
    if let Some(r) = rules.rules().iter().find(|r| r.code == code) {
        return r.category.as_str().to_string();
    }
    match crate::codes::lookup(code) {
        Some(doc) => doc.file.rsplit('/').next().unwrap_or(&doc.file).trim_end_matches(".toml").to_string(),
        None => "undocumented".to_string(),
    }
}

/// Every documented code, registry first, then the verifier's rules in code order.
pub fn all_documented() -> Vec<CodeDoc> {
    let mut docs: Vec<CodeDoc> = crate::codes::all().to_vec();
    let mut rules: Vec<CodeDoc> = RuleSet::builtin().rules().iter().map(Rule::code_doc).collect();
    rules.sort_by(|a, b| a.code.cmp(&b.code));
    docs.extend(rules);
    docs
}
