//! The `generalization` gate of an evolved verifier rule: does the rule state a cause, or does it
//! memorize the programs it was learned from?
//!
//! A rule that memorizes a value (`smem_bytes != 133120`, a threshold put in the gap between
//! training values) catches the failure it saw and nothing else, and may reject valid kernels
//! later; the corpus gate cannot tell it from a real one. This gate checks, on the proposal's
//! tree (so `accept` re-checks against current main's data):
//!
//! 1. **no blacklist**: no `f != c` / `s != sym` (nor `!(f == c)`) in `when` or `require`, read
//!    with `cake::pred`. Only `f != 0` is allowed: it says "has an f", a presence test (the
//!    guards the search makes), not a memorized value;
//! 2. **grounded constants**: every integer literal of the rule (but the `0` of `a % b == 0` and
//!    of `f != 0`) has a recorded source, and the source holds in this tree: a target-table value
//!    (`compiler/targets.toml`, a `[[target]]`'s integer field), a catalog value (an integer of an
//!    op's `type_rule` in `compiler/catalog/`), or a boundary fitted from labelled variants (the
//!    variants are among the proposal's recorded ones, with the labels the fit says, and the
//!    constant lies between the passing and the failing value);
//! 3. **leave-one-out**: for each failing program the rule was learned from, the rule is learned
//!    again without it (the caller's `relearn`) and the relearned rule, loaded with the tree's
//!    other rules by the real rules engine, must still reject it. With one failing program this
//!    cannot be run, which fails the gate ("learned from one program");
//! 4. **held-out variants**: every recorded variant labelled failing is rejected (by the rule, or
//!    already by the tree's other rules), and no variant labelled passing gets the rule's finding;
//! 5. **examples**: the rule is silent on every `examples/*.cake` of the tree (the corpus gate
//!    already holds it silent on every accepted corpus program).
//!
//! Each failed check is one line naming the program, variant or constant. `merge-gates` cannot
//! depend on the evolution engine, so what the rule was learned from arrives as data
//! ([`Input`]) and relearning as a closure.

use std::collections::BTreeSet;
use std::path::Path;

use cake::catalog::Catalog;
use cake::pred::{PExpr, POp};
use cake::verify::RuleSet;
use serde::{Deserialize, Serialize};

use crate::{corpus_gate, GateResult, Tree};

pub const TITLE: &str = "the rule generalizes (no blacklist, grounded constants, leave-one-out, held-out variants, silent on examples)";

/// Where a constant of a synthesized rule comes from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Source {
    /// An integer field of a `[[target]]` of `compiler/targets.toml`.
    Target { target: String, key: String },
    /// An integer of a constraint (`type_rule`) of a catalog op.
    Catalog { file: String, op: String, rule: String },
    /// The boundary between the largest passing and the smallest failing value of the fact, both
    /// shown by labelled variants (`variants`: their ids).
    Fitted { pass: i64, fail: i64, variants: Vec<String> },
    /// Zero, the bound of a count or size that must be empty (`unwritten_elements <= 0`: no
    /// element left unwritten). It comes from the fact's meaning, not from data.
    None,
}

/// One constant of a rule and its source.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ConstantSource {
    pub value: i64,
    pub source: Source,
}

impl ConstantSource {
    /// `target table `smem_per_block_max` (sm_90a)`, for `show` and the rule's doc.
    pub fn describe(&self) -> String {
        match &self.source {
            Source::Target { target, key } => format!("target table `{key}` ({target})"),
            Source::None => "zero: none of what the fact counts".to_string(),
            Source::Catalog { file, op, rule } => format!("catalog `{op}` constraint `{rule}` ({file})"),
            Source::Fitted { pass, fail, variants } => {
                format!("fitted from labelled variants: {pass} passes, {fail} fails ({})", if variants.is_empty() { "no variant named".to_string() } else { variants.join(", ") })
            }
        }
    }
}

/// Every constant the tree's data grounds: each integer field of each `[[target]]` of the target
/// table (limited to `targets`, when given), and each non-zero integer of each catalog op's
/// constraints. What the synthesis may choose from, and what this gate re-checks against.
/// Integer fields of `compiler/targets.toml` that identify a target rather than limit it.
const IDENTIFIER_KEYS: &[&str] = &["sm", "ptx_isa_min"];

pub fn grounded_constants(tree: &Tree, targets: Option<&BTreeSet<String>>) -> Result<Vec<ConstantSource>, String> {
    let mut out = vec![ConstantSource { value: 0, source: Source::None }];
    let path = tree.targets();
    let text = if path.is_file() { std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))? } else { String::new() };
    let table: toml::Table = text.parse().map_err(|e| format!("{}: {e}", path.display()))?;
    for t in table.get("target").and_then(|t| t.as_array()).into_iter().flatten() {
        let Some(t) = t.as_table() else { continue };
        let Some(name) = t.get("name").and_then(|n| n.as_str()) else { continue };
        if targets.is_some_and(|s| !s.contains(name)) {
            continue;
        }
        for (key, v) in t {
            // A compute capability or an ISA version names a target; it bounds no quantity a
            // kernel's facts measure (a rule `a_inner_bytes >= 90` grounded in `sm = 90` is a
            // gap constant with a borrowed label).
            if IDENTIFIER_KEYS.contains(&key.as_str()) {
                continue;
            }
            if let Some(value) = v.as_integer() {
                out.push(ConstantSource { value, source: Source::Target { target: name.to_string(), key: key.clone() } });
            }
        }
    }
    let catalog = if tree.catalog().is_dir() { Catalog::load_dir(tree.catalog()).map_err(|e| format!("op catalog: {e}"))? } else { Catalog::builtin().clone() };
    for op in &catalog.ops {
        for rule in &op.type_rule {
            let Ok(e) = cake::pred::parse(rule) else { continue };
            let mut ints = Vec::new();
            literals(&e, &mut ints);
            for value in ints.into_iter().filter(|v| *v != 0).collect::<BTreeSet<i64>>() {
                out.push(ConstantSource {
                    value,
                    source: Source::Catalog { file: format!("compiler/catalog/{}.toml", op.class.as_str()), op: op.name.clone(), rule: rule.clone() },
                });
            }
        }
    }
    Ok(out)
}

/// Whether catalog constraint `rule` compares `value` with the operand fact `fact` — the name a
/// call or argument construct gives it: `dim(-1)` (an argument's) or `a_dim(-1)` (a call's, for
/// parameter `a`) for `dim(a, -1)`. A comparison (`==`, `<`, `<=`, …) or a `%` with the literal on
/// one side and the fact inside the other counts; a literal that bounds another quantity of the
/// same constraint (`dim(acc, 0) == 64` for `dim(-1)`) does not.
pub fn catalog_compares(rule: &str, value: i64, fact: &str) -> bool {
    let Ok(e) = cake::pred::parse(rule) else { return false };
    fn names(e: &PExpr, out: &mut Vec<String>) {
        match e {
            PExpr::Fact { name, args } => {
                let rest: Vec<String> = args.iter().skip(1).map(|a| match a {
                    PExpr::Int(i) => i.to_string(),
                    PExpr::Neg(x) => match &**x {
                        PExpr::Int(i) => format!("-{i}"),
                        _ => String::new(),
                    },
                    PExpr::Sym(s) => s.clone(),
                    _ => String::new(),
                }).collect();
                let call = if rest.is_empty() { name.clone() } else { format!("{name}({})", rest.join(", ")) };
                if let Some(PExpr::Sym(p)) = args.first() {
                    out.push(format!("{p}_{call}"));
                }
                out.push(call);
                args.iter().for_each(|a| names(a, out));
            }
            PExpr::Not(x) | PExpr::Neg(x) => names(x, out),
            PExpr::Bin { lhs, rhs, .. } => {
                names(lhs, out);
                names(rhs, out);
            }
            PExpr::In { value, set } => {
                names(value, out);
                set.iter().for_each(|a| names(a, out));
            }
            _ => {}
        }
    }
    fn walk(e: &PExpr, value: i64, fact: &str) -> bool {
        match e {
            PExpr::Bin { lhs, rhs, .. } => {
                let side = |lit: &PExpr, other: &PExpr| {
                    matches!(lit, PExpr::Int(i) if *i == value) && {
                        let mut n = Vec::new();
                        names(other, &mut n);
                        n.iter().any(|x| x == fact)
                    }
                };
                side(lhs, rhs) || side(rhs, lhs) || walk(lhs, value, fact) || walk(rhs, value, fact)
            }
            PExpr::Not(x) | PExpr::Neg(x) => walk(x, value, fact),
            _ => false,
        }
    }
    walk(&e, value, fact)
}

/// Every integer literal of `e`.
fn literals(e: &PExpr, out: &mut Vec<i64>) {
    match e {
        PExpr::Int(i) => out.push(*i),
        PExpr::Sym(_) => {}
        PExpr::Fact { args, .. } => args.iter().for_each(|a| literals(a, out)),
        PExpr::Not(x) | PExpr::Neg(x) => literals(x, out),
        PExpr::Bin { lhs, rhs, .. } => {
            literals(lhs, out);
            literals(rhs, out);
        }
        PExpr::In { value, set } => {
            literals(value, out);
            set.iter().for_each(|a| literals(a, out));
        }
    }
}

/// The constants of a rule predicate that need a source (the `0` of `a % b == 0` and of `f != 0`
/// states divisibility and presence, not a value), and its blacklist atoms (as text).
fn scan(e: &PExpr, constants: &mut Vec<i64>, blacklists: &mut Vec<String>) {
    let zero = |x: &PExpr| matches!(x, PExpr::Int(0));
    match e {
        // A bare word is a fact or a literal symbol, which the syntax does not tell apart: so
        // only `e != 0` is not a blacklist (the search makes no other `!=`).
        PExpr::Bin { op: POp::Ne, lhs, rhs } => {
            if !zero(lhs) && !zero(rhs) {
                blacklists.push(format!("{} != {}", show(lhs), show(rhs)));
            }
            for side in [lhs, rhs] {
                if !zero(side) {
                    scan(side, constants, blacklists);
                }
            }
        }
        PExpr::Not(x) if matches!(&**x, PExpr::Bin { op: POp::Eq, lhs, rhs } if !zero(lhs) && !zero(rhs)) => {
            blacklists.push(format!("!({})", show(x)));
            scan(x, constants, blacklists);
        }
        PExpr::Bin { op: POp::Eq, lhs, rhs } if zero(rhs) && matches!(&**lhs, PExpr::Bin { op: POp::Rem, .. }) => scan(lhs, constants, blacklists),
        PExpr::Int(i) => constants.push(*i),
        PExpr::Neg(x) => match &**x {
            PExpr::Int(i) => constants.push(-i),
            other => scan(other, constants, blacklists),
        },
        PExpr::Sym(_) => {}
        // An index argument (`dim(-1)`, `dim(0)`) picks a dimension; it is not a value.
        PExpr::Fact { .. } => {}
        PExpr::Not(x) => scan(x, constants, blacklists),
        PExpr::Bin { lhs, rhs, .. } => {
            scan(lhs, constants, blacklists);
            scan(rhs, constants, blacklists);
        }
        PExpr::In { value, set } => {
            scan(value, constants, blacklists);
            set.iter().for_each(|a| scan(a, constants, blacklists));
        }
    }
}

fn show(e: &PExpr) -> String {
    match e {
        PExpr::Int(i) => i.to_string(),
        PExpr::Sym(s) => s.clone(),
        PExpr::Fact { name, args } => format!("{name}({})", args.iter().map(show).collect::<Vec<_>>().join(", ")),
        PExpr::Not(x) => format!("!{}", show(x)),
        PExpr::Neg(x) => format!("-{}", show(x)),
        PExpr::Bin { op, lhs, rhs } => {
            let o = cake::pred::op_symbol(*op);
            format!("{} {o} {}", show(lhs), show(rhs))
        }
        PExpr::In { value, set } => format!("{} in [{}]", show(value), set.iter().map(show).collect::<Vec<_>>().join(", ")),
    }
}

/// A program the rule was learned from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// Its name in the reasons (content hash, kernel name).
    pub id: String,
    pub source: String,
}

/// A labelled variant of a failing program (generated near a boundary, labelled by the real
/// compiler or the GPU).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Variant {
    pub id: String,
    pub source: String,
    /// Labelled failing (the rule must reject it) or passing (it must not).
    pub fails: bool,
    /// Kept apart from fitting: the search never saw it, so the gate's check of it is a
    /// held-out test, not a restatement of the fit.
    #[serde(default)]
    pub held_out: bool,
}

/// What the gate is given about one rule proposal.
pub struct Input<'a> {
    /// The rule file, relative to the tree's root (`compiler/rules/<category>/<CODE>-<name>.toml`).
    pub rule_path: &'a str,
    /// The recorded source of each of the rule's constants.
    pub constants: &'a [ConstantSource],
    /// The failing programs the rule was learned from (and must explain).
    pub learned_from: &'a [Program],
    /// The recorded labelled variants.
    pub variants: &'a [Variant],
    /// The rule file learned again without `learned_from[i]`: `Ok(None)` when nothing is learned.
    pub relearn: &'a dyn Fn(usize) -> Result<Option<String>, String>,
}

/// Run the gate on the proposal's tree.
pub fn gate(tree: &Tree, input: &Input) -> GateResult {
    let mut reasons = Vec::new();
    let rule_file = tree.root.join(input.rule_path);
    let text = match std::fs::read_to_string(&rule_file) {
        Ok(t) => t,
        Err(e) => return GateResult::fail("generalization", TITLE, format!("not run: cannot read the rule file {}: {e}", input.rule_path), vec![]),
    };
    let parsed: toml::Table = match text.parse() {
        Ok(t) => t,
        Err(e) => return GateResult::fail("generalization", TITLE, format!("not run: {} is not TOML: {e}", input.rule_path), vec![]),
    };
    let code = parsed.get("code").and_then(|c| c.as_str()).unwrap_or_default().to_string();
    // 1, 2: the predicate itself.
    let mut constants = Vec::new();
    for key in ["when", "require"] {
        let Some(p) = parsed.get(key).and_then(|v| v.as_str()) else { continue };
        match cake::pred::parse(p) {
            Ok(e) => {
                let mut blacklists = Vec::new();
                scan(&e, &mut constants, &mut blacklists);
                reasons.extend(blacklists.into_iter().map(|b| format!("{key} `{p}`: `{b}` is a blacklist — it names a failing value instead of a cause")));
            }
            Err(e) => reasons.push(format!("{key} `{p}` does not parse: {e}")),
        }
    }
    let grounded = match grounded_constants(tree, None) {
        Ok(g) => g,
        Err(e) => return GateResult::fail("generalization", TITLE, format!("not run: the tree's data does not load: {e}"), vec![]),
    };
    let labels: std::collections::BTreeMap<&str, bool> = input.variants.iter().map(|v| (v.id.as_str(), v.fails)).collect();
    for c in constants.iter().collect::<BTreeSet<_>>() {
        let recorded: Vec<&ConstantSource> = input.constants.iter().filter(|s| s.value == *c).collect();
        if recorded.is_empty() {
            reasons.push(format!("constant {c} has no recorded source: it is not a target-table or catalog value, nor fitted from labelled variants (a gap between training values?)"));
            continue;
        }
        let problems: Vec<String> = recorded.iter().filter_map(|s| source_problem(s, &grounded, &labels)).collect();
        if problems.len() == recorded.len() {
            reasons.push(format!("constant {c}: {}", problems.join("; ")));
        }
    }
    // The tree's front end, and one with the rule file replaced.
    let fe = match corpus_gate::frontend_for(tree) {
        Ok(f) => f,
        Err(e) => return GateResult::fail("generalization", TITLE, format!("not run: the tree's data does not load: {e}"), vec![]),
    };
    let rejects = |fe: &cake::corpus::tiers::Frontend, source: &str, code: &str| -> (bool, bool) {
        let out = fe.check(source);
        (out.diagnostics.iter().any(|d| d.code == code && d.is_error()), out.diagnostics.iter().any(|d| d.is_error()))
    };
    // 3: leave-one-out.
    if input.learned_from.len() < 2 {
        reasons.push(format!(
            "learned from one program{}: leave-one-out cannot run, so nothing shows the rule catches a failure it did not see",
            input.learned_from.first().map(|p| format!(" ({})", p.id)).unwrap_or_default()
        ));
    } else {
        for (i, p) in input.learned_from.iter().enumerate() {
            match (input.relearn)(i) {
                Err(e) => reasons.push(format!("leave-one-out without {}: relearning failed: {e}", p.id)),
                Ok(None) => reasons.push(format!("leave-one-out: without {} no rule is learned from the others", p.id)),
                Ok(Some(relearned)) => match frontend_with_rule(tree, input.rule_path, &relearned) {
                    Err(e) => reasons.push(format!("leave-one-out without {}: the relearned rule does not load: {e}", p.id)),
                    Ok((fe2, code2)) => {
                        if !rejects(&fe2, &p.source, &code2).0 {
                            let req = relearned.parse::<toml::Table>().ok().and_then(|t| t.get("require").and_then(|r| r.as_str()).map(str::to_string)).unwrap_or_default();
                            reasons.push(format!("leave-one-out: the rule learned without {} (`{req}`) does not reject it", p.id));
                        }
                    }
                },
            }
        }
    }
    // 4: held-out variants.
    for v in input.variants {
        let (by_rule, rejected) = rejects(&fe, &v.source, &code);
        if v.fails && !rejected {
            reasons.push(format!("variant {} is labelled failing and the rule does not catch it", v.id));
        }
        if !v.fails && by_rule {
            reasons.push(format!("variant {} is labelled passing and the rule rejects it", v.id));
        }
    }
    // 5: the examples.
    let mut examples = 0;
    for path in example_files(&tree.root.join("examples")) {
        let Ok(source) = std::fs::read_to_string(&path) else { continue };
        examples += 1;
        if rejects(&fe, &source, &code).0 {
            let rel = path.strip_prefix(&tree.root).unwrap_or(&path).display().to_string();
            reasons.push(format!("the rule rejects example {rel}, a program that builds and runs"));
        }
    }
    let checked = format!(
        "{} constant(s), leave-one-out over {} program(s), {} variant(s), {examples} example(s)",
        constants.iter().collect::<BTreeSet<_>>().len(),
        input.learned_from.len(),
        input.variants.len()
    );
    if reasons.is_empty() {
        GateResult::pass("generalization", TITLE, format!("{code} generalizes: {checked}"))
    } else {
        GateResult::fail("generalization", TITLE, format!("{code}: {} problem(s) ({checked})", reasons.len()), reasons)
    }
}

/// Why a recorded source does not hold in this tree (`None`: it holds).
fn source_problem(s: &ConstantSource, grounded: &[ConstantSource], labels: &std::collections::BTreeMap<&str, bool>) -> Option<String> {
    match &s.source {
        Source::None => (s.value != 0).then(|| format!("recorded as zero, but it is {}", s.value)),
        Source::Target { target, key } => (!grounded.contains(s)).then(|| format!("recorded as target table `{key}` ({target}), which is not {} in compiler/targets.toml", s.value)),
        Source::Catalog { op, rule, .. } => (!grounded.iter().any(|g| g.value == s.value && matches!(&g.source, Source::Catalog { op: o, rule: r, .. } if o == op && r == rule)))
            .then(|| format!("recorded as catalog `{op}` constraint `{rule}`, which the catalog does not have with {}", s.value)),
        Source::Fitted { pass, fail, variants } => {
            let between = ((*pass).min(*fail)..=(*pass).max(*fail)).contains(&s.value) && s.value != *fail;
            if !between {
                return Some(format!("recorded as fitted between {pass} (passes) and {fail} (fails), which it is not"));
            }
            if variants.is_empty() {
                return Some("recorded as fitted, but names no labelled variant".to_string());
            }
            let unknown: Vec<&str> = variants.iter().map(String::as_str).filter(|v| !labels.contains_key(v)).collect();
            (!unknown.is_empty()).then(|| format!("recorded as fitted from variant(s) {} that the proposal does not record", unknown.join(", ")))
        }
    }
}

/// The tree's front end with the rule file at `rule_path` replaced by `text`, and that rule's code.
fn frontend_with_rule(tree: &Tree, rule_path: &str, text: &str) -> Result<(cake::corpus::tiers::Frontend, String), corpus_gate::TreeDataError> {
    let mut files = Vec::new();
    collect(&tree.rules(), &mut files);
    let own = tree.root.join(rule_path);
    let mut texts: Vec<(String, String)> = Vec::new();
    for p in files.into_iter().filter(|p| p.extension().is_some_and(|x| x == "toml") && *p != own) {
        let t = std::fs::read_to_string(&p).map_err(|e| corpus_gate::TreeDataError::ReadRule { path: p.clone(), message: e.to_string() })?;
        texts.push((p.display().to_string(), t));
    }
    texts.push((own.display().to_string(), text.to_string()));
    let borrowed: Vec<(&str, &str)> = texts.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let rules = RuleSet::from_files(&borrowed).map_err(corpus_gate::TreeDataError::ReplacedRules)?;
    let code = text.parse::<toml::Table>().ok().and_then(|t| t.get("code").and_then(|c| c.as_str()).map(str::to_string)).unwrap_or_default();
    let mut fe = corpus_gate::frontend_for(tree)?;
    let rules = std::sync::Arc::new(rules);
    fe.verifier = Some(std::sync::Arc::new(move |m, t| cake::verify::verify_with(m, t, &rules)));
    Ok((fe, code))
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// `examples/*.cake` (not the `broken/` folder: those are meant to fail).
fn example_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut v: Vec<_> = rd.flatten().map(|e| e.path()).filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "cake")).collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scanned(p: &str) -> (Vec<i64>, Vec<String>) {
        let (mut c, mut b) = (Vec::new(), Vec::new());
        scan(&cake::pred::parse(p).unwrap(), &mut c, &mut b);
        (c, b)
    }

    #[test]
    fn blacklists_and_constants_are_read_from_the_predicate() {
        assert_eq!(scanned("smem_bytes != 133120"), (vec![133120], vec!["smem_bytes != 133120".to_string()]));
        assert_eq!(scanned("dtype != f16").1, vec!["dtype != f16".to_string()]);
        assert_eq!(scanned("!(align == 2048)").1.len(), 1);
        // Divisibility and presence carry a 0 that is not a value.
        assert_eq!(scanned("dim(-1) % 8 == 0"), (vec![8], vec![]));
        assert_eq!(scanned("swizzle != 0"), (vec![], vec![]));
        assert_eq!(scanned("smem_bytes <= target_smem_max"), (vec![], vec![]));
        assert_eq!(scanned("align <= 1024 && stages >= 2"), (vec![1024, 2], vec![]));
    }
}
