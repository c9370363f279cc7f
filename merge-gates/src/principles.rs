//! The principle gates, P1–P8 of Cake IR's design (paper, Appendix B), plus the `data-only`,
//! `schema` and `lowering` gates. Each is checked mechanically where it can be and otherwise
//! flagged for the reviewer with what to look at:
//!
//! | gate | checks |
//! |---|---|
//! | `data-only` | every changed path is data the in-process gate can judge (no Rust, no Cargo.toml) |
//! | `schema` | the tree's target table, op catalog, verifier rules and calibration files load |
//! | `P1` ergonomic | a new op has an `example` call (mechanical); whether it reads like array code is flagged |
//! | `P2` performance-transparent | a new op has a `lowering` note (mechanical); the mapping itself is flagged |
//! | `P3` canonical | no second spelling: a new op's name (normalized, token-permuted) or signature shape equals no existing op's; a new rule's check equals no existing rule's |
//! | `P4` statically typed | every op has a non-empty `type_rule` whose constraints parse; a rule's predicate validates against its construct's facts |
//! | `P5` analysis-friendly | every op declares `effects` (or `pure = true` with `effects = []`), each on a real param or implicit resource |
//! | `P6` test-gated | the corpus gate is green and every new error rule has a negative corpus case expecting its code |
//! | `P7` analysis-consistent | every effect of a new op has a shape (resource kind, access, proxy) the verifier's analyses already model |
//! | `P8` hardware-grounded | every op has a `hardware` note; every new rule has `doc.why` and `doc.source` |
//! | `lowering` | every new op has a lowering in the compiler (`compiler/src/lower/`); a data-only proposal cannot bring one |

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use cake::catalog::{Catalog, IMPLICIT_RESOURCES};
use cake::corpus::{Corpus, Tier, Verdict};
use cake::target::TargetTable;
use cake::verify::RuleSet;

use crate::report::{GateResult, GateStatus};
use crate::{is_data_path, Change, ChangedPath, Tree};

// ─── Raw data of a tree ──────────────────────────────────────────────────────────────────────────

/// One `[[op]]` entry as written (so a gate can judge an entry the loader would refuse).
#[derive(Clone, Debug, PartialEq)]
pub struct RawOp {
    pub name: String,
    pub file: String,
    pub table: toml::Table,
}

impl RawOp {
    fn str(&self, key: &str) -> Option<&str> {
        self.table.get(key).and_then(|v| v.as_str())
    }
    fn nonempty(&self, key: &str) -> bool {
        self.str(key).is_some_and(|s| !s.trim().is_empty())
    }
    fn params(&self) -> Vec<(String, String)> {
        self.table
            .get("params")
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|p| p.as_table())
                    .map(|p| {
                        let s = |k: &str| p.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
                        (s("name"), s("kind"))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
    fn effects(&self) -> Option<Vec<toml::Table>> {
        self.table.get("effects").and_then(|v| v.as_array()).map(|a| a.iter().filter_map(|e| e.as_table().cloned()).collect())
    }
    /// (resource kind, access, proxy, async, barrier) of each effect; the resource kind is the
    /// param's kind (`smem`, `pipeline`, ...) or the implicit resource (`@wgmma_group`).
    fn effect_shapes(&self) -> Vec<EffectShape> {
        let params = self.params();
        self.effects()
            .unwrap_or_default()
            .iter()
            .map(|e| {
                let s = |k: &str| e.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
                let on = s("on");
                let resource = if on.starts_with('@') { on.clone() } else { params.iter().find(|(n, _)| *n == on).map(|(_, k)| k.clone()).unwrap_or_else(|| format!("?{on}")) };
                EffectShape {
                    on,
                    resource,
                    access: s("access"),
                    proxy: { let p = s("proxy"); if p.is_empty() { "none".into() } else { p } },
                    barrier: s("barrier"),
                }
            })
            .collect()
    }
    /// The op's shape without its name: class, form, issue, param kinds, effect shapes, targets.
    fn signature(&self) -> String {
        let kinds: Vec<String> = self.params().into_iter().map(|(_, k)| k).collect();
        let mut effects: Vec<String> = self.effect_shapes().iter().map(|e| e.key()).collect();
        effects.sort();
        let req = self.table.get("requires").map(|v| v.to_string()).unwrap_or_default();
        format!(
            "class={} form={} issue={} params=[{}] effects=[{}] requires={req} result={}",
            self.str("class").unwrap_or(""),
            self.str("form").unwrap_or(""),
            self.str("issue").unwrap_or(""),
            kinds.join(","),
            effects.join(";"),
            self.str("result").unwrap_or("none")
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct EffectShape {
    pub on: String,
    pub resource: String,
    pub access: String,
    pub proxy: String,
    pub barrier: String,
}

impl EffectShape {
    fn key(&self) -> String {
        format!("{}:{}:{}:{}", self.resource, self.access, self.proxy, self.barrier)
    }
    fn describe(&self) -> String {
        let mut s = format!("`{}` on `{}` ({})", self.access, self.on, self.resource);
        if self.proxy != "none" {
            s.push_str(&format!(", {} proxy", self.proxy));
        }
        if !self.barrier.is_empty() {
            s.push_str(&format!(", {} barrier", self.barrier));
        }
        s
    }
}

/// Every `[[op]]` of a catalog folder, as written (unparseable files are skipped here; the
/// `schema` gate reports them).
pub fn raw_ops(dir: &Path) -> Vec<RawOp> {
    let mut out = Vec::new();
    for path in toml_files(dir, false) {
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let Ok(table) = text.parse::<toml::Table>() else { continue };
        let file = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        for op in table.get("op").and_then(|v| v.as_array()).into_iter().flatten() {
            if let Some(t) = op.as_table() {
                let name = t.get("name").and_then(|v| v.as_str()).unwrap_or("").to_string();
                out.push(RawOp { name, file: file.clone(), table: t.clone() });
            }
        }
    }
    out
}

/// One verifier rule file as written.
#[derive(Clone, Debug, PartialEq)]
pub struct RawRule {
    /// Relative to the repository root.
    pub path: String,
    pub table: toml::Table,
}

impl RawRule {
    fn str(&self, key: &str) -> &str {
        self.table.get(key).and_then(|v| v.as_str()).unwrap_or("")
    }
    pub fn code(&self) -> &str {
        self.str("code")
    }
    fn doc(&self, key: &str) -> &str {
        self.table.get("doc").and_then(|d| d.get(key)).and_then(|v| v.as_str()).unwrap_or("")
    }
    fn is_predicate_rule(&self) -> bool {
        self.str("kind") != "analysis" && !self.str("require").is_empty()
    }
    /// What the rule checks, normalized: construct, precondition, requirement.
    fn check_key(&self) -> String {
        let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        format!("{} | {} | {}", self.str("applies_to"), norm(self.str("when")), norm(self.str("require")))
    }
}

fn toml_files(dir: &Path, recursive: bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return out };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() && recursive {
            out.extend(toml_files(&p, true));
        } else if p.is_file() && p.extension().is_some_and(|x| x == "toml") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// What the principle gates look at: both trees' raw catalogs and rules, and what changed.
pub struct Context {
    pub proposal: Tree,
    pub base: Tree,
    pub changed: Vec<ChangedPath>,
    pub ops: Vec<RawOp>,
    pub base_ops: Vec<RawOp>,
    /// Ops added or changed by the proposal.
    pub new_ops: Vec<RawOp>,
    pub rules: Vec<RawRule>,
    pub base_rules: Vec<RawRule>,
    /// Rule files added or changed by the proposal.
    pub new_rules: Vec<RawRule>,
}

impl Context {
    pub fn new(proposal: &Tree, base: &Tree, changed: &[ChangedPath]) -> Context {
        let ops = raw_ops(&proposal.catalog());
        let base_ops = raw_ops(&base.catalog());
        let new_ops: Vec<RawOp> = ops.iter().filter(|o| !base_ops.iter().any(|b| b.name == o.name && b.table == o.table)).cloned().collect();
        let rules = raw_rules(&proposal.root);
        let base_rules = raw_rules(&base.root);
        let changed_rule_paths: BTreeSet<&str> =
            changed.iter().filter(|c| c.change != Change::Deleted && c.path.starts_with("compiler/rules/")).map(|c| c.path.as_str()).collect();
        let new_rules = rules.iter().filter(|r| changed_rule_paths.contains(r.path.as_str())).cloned().collect();
        Context { proposal: proposal.clone(), base: base.clone(), changed: changed.to_vec(), ops, base_ops, new_ops, rules, base_rules, new_rules }
    }

    fn is_op_change(&self) -> bool {
        !self.new_ops.is_empty() || self.changed.iter().any(|c| c.path.starts_with("compiler/catalog/") && c.path.ends_with(".toml"))
    }
}

fn raw_rules(root: &Path) -> Vec<RawRule> {
    let dir = root.join("compiler/rules");
    toml_files(&dir, true)
        .into_iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(&p).ok()?;
            let table = text.parse::<toml::Table>().ok()?;
            let rel = p.strip_prefix(root).ok()?.to_string_lossy().replace('\\', "/");
            Some(RawRule { path: rel, table })
        })
        .collect()
}

// ─── data-only, schema ───────────────────────────────────────────────────────────────────────────

/// Every changed path is data the in-process gate judges; anything else (Rust, Cargo files, build
/// scripts) would need the worktree built with cargo, which is not supported yet.
pub fn data_only(changed: &[ChangedPath]) -> GateResult {
    const T: &str = "the change is data the compiler loads at run time";
    let code: Vec<String> = changed.iter().filter(|c| !is_data_path(&c.path)).map(|c| format!("{} ({:?})", c.path, c.change).to_lowercase()).collect();
    if code.is_empty() {
        GateResult::pass("data-only", T, format!("{} changed path(s), all rules / catalog / targets / calibration / corpus / docs", changed.len()))
    } else {
        GateResult::fail(
            "data-only",
            T,
            "not supported yet: the proposal changes code, so gating it needs a cargo build of its worktree, which the gates do not do; the in-process gate would judge the current compiler instead",
            code,
        )
    }
}

/// The tree's data loads: target table, op catalog, verifier rules, calibration files.
pub fn schema(tree: &Tree) -> GateResult {
    const T: &str = "targets, catalog, rules and calibration load";
    let mut problems = Vec::new();
    let mut counts = Vec::new();
    let targets = if tree.targets().is_file() {
        match TargetTable::load(tree.targets()) {
            Ok(t) => Some(t),
            Err(e) => {
                problems.push(format!("compiler/targets.toml: {e}"));
                None
            }
        }
    } else {
        None
    };
    if tree.catalog().is_dir() {
        let c = match &targets {
            Some(t) => Catalog::load_dir_with(tree.catalog(), t),
            None => Catalog::load_dir(tree.catalog()),
        };
        match c {
            Ok(c) => counts.push(format!("{} ops", c.ops.len())),
            Err(e) => problems.push(format!("op catalog: {e}")),
        }
    }
    if tree.rules().is_dir() {
        match RuleSet::load_dir(tree.rules()) {
            Ok(r) => counts.push(format!("{} rules", r.len())),
            Err(e) => problems.push(format!("verifier rules: {e}")),
        }
    }
    let mut cal = 0;
    for p in toml_files(&tree.calibration(), true) {
        match std::fs::read_to_string(&p).map_err(|e| e.to_string()).and_then(|t| t.parse::<toml::Table>().map_err(|e| e.to_string())) {
            Ok(_) => cal += 1,
            Err(e) => problems.push(format!("{}: {e}", p.display())),
        }
    }
    counts.push(format!("{cal} calibration files"));
    if problems.is_empty() {
        GateResult::pass("schema", T, counts.join(", "))
    } else {
        GateResult::fail("schema", T, format!("{} file(s) do not load", problems.len()), problems)
    }
}

// ─── P1–P8 ───────────────────────────────────────────────────────────────────────────────────────

/// P1 ergonomic: mechanically, a new op shows an `example` call; whether it reads like array code
/// (no destination-passing or grid bookkeeping it could avoid) is for the reviewer.
pub fn p1(ctx: &Context) -> GateResult {
    const T: &str = "ergonomic: reads like array code";
    if ctx.new_ops.is_empty() {
        return GateResult::na("P1", T, "no op or syntax change (a verifier rule adds no syntax)");
    }
    let mut missing = Vec::new();
    let mut review = Vec::new();
    for op in &ctx.new_ops {
        match op.str("example") {
            Some(ex) if ex.contains(&format!("{}(", op.name)) => review.push(format!("`{}`: example `{ex}` — does it read like NumPy/PyTorch code?", op.name)),
            _ => missing.push(format!("`{}` has no `example` that calls it", op.name)),
        }
    }
    if !missing.is_empty() {
        return GateResult::fail("P1", T, "a new op must show how it is written", missing);
    }
    GateResult::flag("P1", T, "not mechanically decidable: reviewer, read the examples", review)
}

/// P2 performance-transparent: a new op states its lowering; the mapping is for the reviewer.
pub fn p2(ctx: &Context) -> GateResult {
    const T: &str = "performance-transparent: lowering inspectable";
    if ctx.new_ops.is_empty() {
        return GateResult::na("P2", T, "no op change: a verifier rule changes no lowering");
    }
    let mut missing = Vec::new();
    let mut review = Vec::new();
    for op in &ctx.new_ops {
        if op.nonempty("lowering") {
            review.push(format!("`{}` lowers to: {}", op.name, op.str("lowering").unwrap_or("").trim()));
        } else {
            missing.push(format!("`{}` has no `lowering` note", op.name));
        }
    }
    if !missing.is_empty() {
        return GateResult::fail("P2", T, "a new op must say what it lowers to", missing);
    }
    GateResult::flag("P2", T, "the hardware mapping is stated; reviewer, check it is the whole story", review)
}

/// Lower-case, without `_`, `-` and digits: `tma_load2`, `tmaLoad`, `TMA-load` → `tmaload`.
fn normalized(name: &str) -> String {
    name.chars().filter(|c| c.is_ascii_alphabetic()).map(|c| c.to_ascii_lowercase()).collect()
}

fn tokens(name: &str) -> BTreeSet<String> {
    name.split(['_', '-']).filter(|t| !t.is_empty()).map(|t| t.trim_end_matches(|c: char| c.is_ascii_digit()).to_ascii_lowercase()).collect()
}

/// P3 canonical: no second spelling of an existing op (same normalized name, same tokens in
/// another order, or the same signature shape under another name), no second copy of an
/// existing rule's check.
pub fn p3(ctx: &Context) -> GateResult {
    const T: &str = "canonical: no second spelling";
    let mut dup = Vec::new();
    for op in &ctx.new_ops {
        for b in ctx.base_ops.iter().filter(|b| b.name != op.name) {
            if normalized(&b.name) == normalized(&op.name) {
                dup.push(format!("`{}` is a second spelling of the existing op `{}` (same name up to case, `_` and digits)", op.name, b.name));
            } else if tokens(&b.name) == tokens(&op.name) {
                dup.push(format!("`{}` is a second spelling of the existing op `{}` (the same words in another order)", op.name, b.name));
            } else if b.signature() == op.signature() {
                dup.push(format!("`{}` has the same signature, effects and targets as the existing op `{}`: {}", op.name, b.name, op.signature()));
            }
        }
        let same_name = ctx.ops.iter().filter(|o| o.name == op.name).count();
        if same_name > 1 {
            dup.push(format!("`{}` is defined {same_name} times", op.name));
        }
    }
    for r in &ctx.new_rules {
        if !r.is_predicate_rule() {
            continue;
        }
        for b in ctx.base_rules.iter().filter(|b| b.path != r.path && b.is_predicate_rule()) {
            if b.check_key() == r.check_key() {
                dup.push(format!("rule {} checks exactly what {} checks ({})", r.code(), b.code(), r.check_key()));
            }
        }
        for b in ctx.rules.iter().filter(|b| b.path != r.path) {
            if b.code() == r.code() {
                dup.push(format!("rule code {} is used by both {} and {}", r.code(), r.path, b.path));
            }
            if b.str("name") == r.str("name") {
                dup.push(format!("rule name `{}` is used by both {} and {}", r.str("name"), r.path, b.path));
            }
        }
    }
    dup.sort();
    dup.dedup();
    if ctx.new_ops.is_empty() && ctx.new_rules.is_empty() {
        return GateResult::na("P3", T, "no op or rule change");
    }
    if dup.is_empty() {
        GateResult::pass("P3", T, format!("{} new op(s), {} new rule(s): none duplicates an existing one", ctx.new_ops.len(), ctx.new_rules.len()))
    } else {
        GateResult::fail("P3", T, "a second spelling of something that exists", dup)
    }
}

/// P4 statically typed: every op of the proposal's catalog has a type rule whose constraints
/// parse; a new rule's predicate validates against its construct's facts (by loading it).
pub fn p4(ctx: &Context) -> GateResult {
    const T: &str = "statically typed: every op has a type rule";
    let mut bad = Vec::new();
    for op in &ctx.ops {
        match op.table.get("type_rule").and_then(|v| v.as_array()) {
            None => bad.push(format!("`{}` ({}) has no `type_rule`", op.name, op.file)),
            Some(a) if a.is_empty() => bad.push(format!("`{}` ({}) has an empty `type_rule`", op.name, op.file)),
            Some(a) => {
                for c in a {
                    // A constraint is a string, or `{ rule = "...", help = "..." }`.
                    match c.as_str().or_else(|| c.get("rule").and_then(|r| r.as_str())) {
                        Some(s) => {
                            if let Err(e) = cake::pred::parse(s) {
                                bad.push(format!("`{}`: type rule `{s}` does not parse: {e}", op.name));
                            }
                        }
                        None => bad.push(format!("`{}`: a type rule entry is neither a string nor a table with a `rule`", op.name)),
                    }
                }
            }
        }
    }
    let rules_ok = ctx.new_rules.is_empty() || RuleSet::load_dir(ctx.proposal.rules()).is_ok();
    if !rules_ok {
        bad.push("a new rule's predicate does not validate against its construct's facts (see `schema`)".into());
    }
    if bad.is_empty() {
        GateResult::pass("P4", T, format!("{} op(s), each with a type rule that parses{}", ctx.ops.len(), if ctx.new_rules.is_empty() { String::new() } else { format!("; {} new rule(s) typed against their facts", ctx.new_rules.len()) }))
    } else {
        GateResult::fail("P4", T, "an op without a (valid) type rule", bad)
    }
}

/// P5 analysis-friendly: every op declares its effects (or says `pure = true` with
/// `effects = []` on an expression), each on a real param or implicit resource.
pub fn p5(ctx: &Context) -> GateResult {
    const T: &str = "analysis-friendly: every op declares effects";
    let mut bad = Vec::new();
    for op in &ctx.ops {
        let pure = op.table.get("pure").and_then(|v| v.as_bool()).unwrap_or(false);
        let Some(effects) = op.effects() else {
            bad.push(format!("`{}` ({}) declares no `effects` (write them, or `pure = true` with `effects = []`)", op.name, op.file));
            continue;
        };
        if effects.is_empty() && !pure {
            bad.push(format!("`{}` has `effects = []` but is not `pure = true`", op.name));
        }
        let params: BTreeSet<String> = op.params().into_iter().map(|(n, _)| n).collect();
        for e in &effects {
            let on = e.get("on").and_then(|v| v.as_str()).unwrap_or("");
            if on.starts_with('@') {
                if !IMPLICIT_RESOURCES.contains(&on) {
                    bad.push(format!("`{}`: effect on unknown resource `{on}`", op.name));
                }
            } else if !params.contains(on) {
                bad.push(format!("`{}`: effect on `{on}`, which is not a param", op.name));
            }
            if e.get("access").and_then(|v| v.as_str()).is_none() {
                bad.push(format!("`{}`: an effect on `{on}` has no `access`", op.name));
            }
        }
    }
    if bad.is_empty() {
        GateResult::pass("P5", T, format!("{} op(s) declare their effects", ctx.ops.len()))
    } else {
        GateResult::fail("P5", T, "an op the analyses cannot see into", bad)
    }
}

/// P6 test-gated: the corpus gate is green, and every new error rule comes with a negative
/// corpus case that expects its code.
pub fn p6(ctx: &Context, corpus_green: bool, corpus_summary: &str) -> GateResult {
    const T: &str = "test-gated: corpus green, rules have negative cases";
    let mut bad = Vec::new();
    if !corpus_green {
        bad.push(format!("the corpus gate is not green: {corpus_summary}"));
    }
    let new_codes: Vec<&str> = ctx.new_rules.iter().filter(|r| r.is_predicate_rule() && r.str("severity") == "error").map(|r| r.code()).collect();
    if !new_codes.is_empty() {
        let expected: BTreeSet<String> = match Corpus::load(ctx.proposal.corpus()) {
            Ok(c) => c
                .cases
                .iter()
                .filter(|c| c.has_tier(Tier::Static) && c.manifest.expect.verdict == Verdict::Reject)
                .flat_map(|c| c.manifest.expect.findings.iter().map(|f| f.code.clone()))
                .collect(),
            Err(_) => BTreeSet::new(),
        };
        for code in &new_codes {
            if !expected.contains(*code) {
                bad.push(format!("rule {code} has no negative corpus case (a static-tier case with verdict reject expecting {code})"));
            }
        }
    }
    if bad.is_empty() {
        let cases = if new_codes.is_empty() { String::new() } else { format!("; new rule(s) {} each have a negative case", new_codes.join(", ")) };
        GateResult::pass("P6", T, format!("corpus gate green{cases}"))
    } else {
        GateResult::fail("P6", T, "not test-gated", bad)
    }
}

/// The effect shapes the verifier's analyses model: every shape an op of the base catalog uses
/// (the analyses are written against those), plus the families the protocol analysis handles by
/// effect rather than by op.
fn known_shapes(ctx: &Context) -> BTreeSet<String> {
    let mut known: BTreeSet<String> = ctx.base_ops.iter().flat_map(|o| o.effect_shapes()).map(|e| e.key()).collect();
    for data in ["frag", "smem", "global", "mem", "value"] {
        for access in ["read", "write", "readwrite"] {
            for proxy in ["generic", "async"] {
                known.insert(format!("{data}:{access}:{proxy}:"));
            }
        }
    }
    for sync in ["pipeline", "barrier", "sync"] {
        for access in ["arrive", "wait", "expect_tx", "complete_tx"] {
            for barrier in ["", "full", "empty"] {
                known.insert(format!("{sync}:{access}:none:{barrier}"));
            }
        }
    }
    known
}

/// P7 analysis-consistent: a changed op's effects all have shapes the analyses already model;
/// a new kind of effect needs its analysis written (Rust) in the same change.
pub fn p7(ctx: &Context) -> GateResult {
    const T: &str = "analysis-consistent: analyses know every effect";
    if !ctx.is_op_change() {
        if ctx.new_rules.is_empty() {
            return GateResult::na("P7", T, "no op or analysis change");
        }
        return GateResult::pass("P7", T, "a verifier rule is itself an analysis change; its negative cases are checked by P6");
    }
    let known = known_shapes(ctx);
    let mut bad = Vec::new();
    for op in &ctx.new_ops {
        for e in op.effect_shapes() {
            if e.resource.starts_with('?') {
                continue; // P5 reports effects on unknown params
            }
            if !known.contains(&e.key()) {
                bad.push(format!("`{}`: effect {} is a shape no analysis models; it needs its analysis (Rust) in the same change", op.name, e.describe()));
            }
        }
    }
    if bad.is_empty() {
        GateResult::pass("P7", T, format!("{} new/changed op(s): every effect has a shape the verifier models", ctx.new_ops.len()))
    } else {
        GateResult::fail("P7", T, "an op change without its analysis change", bad)
    }
}

/// P8 hardware-grounded: every op documents its hardware behaviour; every new rule says why the
/// hardware needs it and where that fact comes from.
pub fn p8(ctx: &Context) -> GateResult {
    const T: &str = "hardware-grounded: hardware documented";
    let mut bad = Vec::new();
    for op in &ctx.ops {
        if !op.nonempty("hardware") {
            bad.push(format!("`{}` ({}) has no `hardware` note", op.name, op.file));
        }
    }
    // A new or changed op states, for each constraint of its type rule, the fix a failing
    // program needs (`{ rule = "...", help = "..." }`); the trivial `"true"` needs none.
    for op in &ctx.new_ops {
        for c in op.table.get("type_rule").and_then(|v| v.as_array()).into_iter().flatten() {
            let rule = c.as_str().or_else(|| c.get("rule").and_then(|r| r.as_str())).unwrap_or("");
            let help = c.get("help").and_then(|h| h.as_str()).unwrap_or("");
            if rule.trim() != "true" && help.trim().is_empty() {
                bad.push(format!("`{}` ({}): type rule `{rule}` has no `help` saying the fix", op.name, op.file));
            }
        }
    }
    for r in &ctx.new_rules {
        for key in ["why", "source"] {
            if r.doc(key).trim().is_empty() {
                bad.push(format!("rule {} ({}) has no `doc.{key}`", r.code(), r.path));
            }
        }
    }
    if bad.is_empty() {
        GateResult::pass("P8", T, format!("{} op(s) and {} new rule(s) documented", ctx.ops.len(), ctx.new_rules.len()))
    } else {
        GateResult::fail("P8", T, "undocumented hardware behaviour", bad)
    }
}

/// `lowering`: every new op is lowered by the compiler. Lowering is Rust (`compiler/src/lower/`),
/// so a data-only proposal of a new op fails here, saying so, until someone writes it.
pub fn lowering(ctx: &Context) -> GateResult {
    const T: &str = "every new op has a lowering";
    let added: Vec<&RawOp> = ctx.new_ops.iter().filter(|o| !ctx.base_ops.iter().any(|b| b.name == o.name)).collect();
    if added.is_empty() {
        return GateResult::na("lowering", T, "no new op");
    }
    let drafts: Vec<&str> = ctx.changed.iter().filter(|c| c.path.ends_with(".rs")).map(|c| c.path.as_str()).collect();
    let mut bad = Vec::new();
    for op in &added {
        // The lowering's handler registry (a data-only proposal runs the same Rust as this build).
        if cake::lower::registry::lowers_name(&op.name) && drafts.is_empty() {
            continue;
        }
        if drafts.is_empty() {
            bad.push(format!(
                "`{}` has no lowering: lowering is Rust code in compiler/src/lower/, and this proposal is data only (no lowering could be produced; set CAKE_LLM_BASE_URL to have one drafted)",
                op.name
            ));
        } else {
            bad.push(format!(
                "`{}`: a lowering was drafted ({}), but it is Rust: gating it needs a cargo build of the worktree, which is not supported yet — a person must review, build and test it",
                op.name,
                drafts.join(", ")
            ));
        }
    }
    if bad.is_empty() {
        GateResult::pass("lowering", T, format!("{} new op(s), each lowered", added.len()))
    } else {
        GateResult::fail("lowering", T, "a new op the compiler cannot lower", bad)
    }
}

/// Names of the principle gates in report order.
pub const GATES: &[&str] = &["data-only", "schema", "corpus", "P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "lowering"];

/// Quick lookup used by tests and the CLI: the status of gate `name` in `gates`.
pub fn status_of(gates: &[GateResult], name: &str) -> Option<GateStatus> {
    gates.iter().find(|g| g.gate == name).map(|g| g.status)
}
