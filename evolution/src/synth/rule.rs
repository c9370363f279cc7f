//! From a bucket to a rule proposal: the base tree's compiler data, the constructs a bucket is
//! searched over, and each candidate of the search validated with the real rules engine.

use std::collections::BTreeSet;
use std::path::PathBuf;

use cake::corpus::tiers::Frontend;
use cake::corpus::Corpus;
use cake::diag::Severity;
use cake::ir::Module;
use cake::pred::Value;
use cake::span::line_col;
use cake::target::TargetTable;
use cake::verify::{ConstructKind, ModuleFacts, RuleSet};
use cake_merge_gates::generalization_gate::{grounded_constants, ConstantSource, Variant};
use cake_merge_gates::Tree;
use serde::{Deserialize, Serialize};

use super::rule_file::{changelog_line, negative_case, rule_name, rule_toml, set_findings};
use super::search::{instances, search, search_subset, FactMap, Labelled, SearchInput};
use super::{construct_text, parse_construct, short, BucketInfo, Program, SynthError};

/// The base tree's compiler data, loaded once per base commit.
pub struct Base {
    pub tree: Tree,
    pub frontend: Frontend,
    pub rules: RuleSet,
    /// Rule files as (path relative to the repository root, contents).
    pub rule_files: Vec<(String, String)>,
    pub targets: TargetTable,
    /// Every corpus case the corpus expects to be **accepted** whose program type-checks:
    /// (case id, module). A new rule must hold on all of them.
    pub corpus_modules: Vec<(String, Module)>,
    /// The facts of each of `corpus_modules` (same order; `None`: its target is unknown),
    /// computed once: every construct kind the search tries reads them.
    pub corpus_facts: Vec<Option<ModuleFacts>>,
    /// Negative corpus cases (verdict reject) whose program type-checks. A new rule may fire on
    /// them too (they are rejected anyway); the proposal then updates their expected findings.
    pub negatives: Vec<Negative>,
    pub corpus_cases: usize,
    /// The constants the tree's target table and catalog ground (what a rule's thresholds,
    /// divisors and constants may be, besides boundaries fitted from labelled variants).
    pub grounding: Vec<ConstantSource>,
}

/// A negative corpus case.
#[derive(Clone, Debug)]
pub struct Negative {
    pub id: String,
    pub module: Module,
    pub source: String,
    /// For a plain case: its manifest (path relative to the repository root, text), which a
    /// proposal can update. `None` for template instances (a rule must stay silent on those).
    pub manifest: Option<(String, String)>,
}

impl Base {
    pub fn load(root: impl Into<PathBuf>) -> Result<Base, String> {
        let tree = Tree::new(root);
        let frontend = cake_merge_gates::corpus_gate::frontend_for(&tree)?;
        let rules = RuleSet::load_dir(tree.rules()).map_err(|e| e.to_string())?;
        let mut rule_files = Vec::new();
        collect_files(&tree.rules(), &mut rule_files);
        let rule_files = rule_files
            .into_iter()
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .filter_map(|p| {
                let text = std::fs::read_to_string(&p).ok()?;
                let rel = p.strip_prefix(&tree.root).ok()?.to_string_lossy().replace('\\', "/");
                Some((rel, text))
            })
            .collect();
        let targets = if tree.targets().is_file() { TargetTable::load(tree.targets()).map_err(|e| e.to_string())? } else { TargetTable::builtin().clone() };
        let corpus = Corpus::load(tree.corpus()).map_err(|e| format!("cannot read the corpus: {e}"))?;
        let mut corpus_modules = Vec::new();
        let mut negatives = Vec::new();
        for case in &corpus.cases {
            let Some(m) = frontend.check(&case.source).module else { continue };
            if case.manifest.expect.verdict == cake::corpus::Verdict::Accept {
                corpus_modules.push((case.id.clone(), m));
            } else {
                let manifest = match &case.origin {
                    cake::corpus::Origin::Plain { manifest, .. } => {
                        let rel = manifest.strip_prefix(&tree.root).ok().map(|p| p.to_string_lossy().replace('\\', "/"));
                        rel.and_then(|r| std::fs::read_to_string(manifest).ok().map(|t| (r, t)))
                    }
                    cake::corpus::Origin::Instance { .. } => None,
                };
                negatives.push(Negative { id: case.id.clone(), module: m, source: case.source.clone(), manifest });
            }
        }
        let corpus_facts = corpus_modules.iter().map(|(_, m)| targets.get(&m.target).map(|t| cake::verify::module_facts(m, t))).collect();
        let grounding = grounded_constants(&tree, None)?;
        Ok(Base { tree, frontend, rules, rule_files, targets, corpus_modules, corpus_facts, negatives, corpus_cases: corpus.cases.len(), grounding })
    }

    fn facts(&self, m: &Module) -> Option<ModuleFacts> {
        self.targets.get(&m.target).map(|t| cake::verify::module_facts(m, t))
    }

    /// Codes of the rule files.
    pub fn codes(&self) -> BTreeSet<String> {
        self.rules.rules().iter().map(|r| r.code.clone()).collect()
    }
}

fn collect_files(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect_files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// The range of codes reserved for evolved rules (see `evolution/README.md`).
pub const EVOLVED_CODES: std::ops::RangeInclusive<u32> = 600..=699;

/// The next free evolved code: not used by a rule of the base, nor by `taken` (codes of other
/// queued or accepted proposals).
pub fn next_code(base_codes: &BTreeSet<String>, taken: &BTreeSet<String>) -> Option<String> {
    EVOLVED_CODES.map(|n| format!("V{n}")).find(|c| !base_codes.contains(c) && !taken.contains(c))
}

/// The category folder a rule on this construct belongs to.
pub fn category_for(kind: ConstructKind) -> &'static str {
    match kind {
        ConstructKind::Smem | ConstructKind::View | ConstructKind::Tensor | ConstructKind::Arg => "data-consistency",
        ConstructKind::Pipeline | ConstructKind::Barrier => "schedule-semantics",
        ConstructKind::Kernel | ConstructKind::Grid | ConstructKind::Role | ConstructKind::Call => "hardware-conformance",
    }
}

/// A synthesized verifier rule with everything its proposal commits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuleDraft {
    pub code: String,
    pub name: String,
    pub category: String,
    pub applies_to: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    pub require: String,
    pub level: u8,
    pub form: String,
    /// Failing programs the rule explains (content hashes): each violates it on an instance.
    pub failing_programs: Vec<String>,
    /// Failing programs the rule does not explain (content hashes): no predicate separated every
    /// failing program, and these satisfy the one that separates the largest part of the bucket
    /// (`failing_programs`). Also named, with the reason, in `skipped_programs`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unexplained_programs: Vec<String>,
    /// Failing programs left out, with the reason (does not type-check, already rejected, not
    /// explained, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_programs: Vec<String>,
    pub accepted_programs: usize,
    pub accepted_instances: usize,
    /// Where each constant of the predicate comes from (target table, catalog, fitted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constants: Vec<ConstantSource>,
    /// The sources of `failing_programs` (same order), so the `generalization` gate can learn
    /// the rule again without each of them, also at `accept`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing_sources: Vec<String>,
    /// The labelled variants the search saw (evidence; the gate checks every one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<Variant>,
    /// Files to commit: (path relative to the repository root, contents).
    #[serde(skip)]
    pub files: Vec<(String, String)>,
    pub changelog: String,
}

/// Programs committed as negative corpus cases, at most.
pub const MAX_NEGATIVE_CASES: usize = 4;

impl RuleDraft {
    /// The rule file, relative to the repository root.
    pub fn rule_path(&self) -> String {
        format!("compiler/rules/{}/{}-{}.toml", self.category, self.code, self.name)
    }
}

/// Search a rule for `bucket` over `programs` (its failing programs) against `base`.
pub fn draft_rule(base: &Base, bucket: &BucketInfo, programs: &[Program], code: &str, seed: u64) -> Result<RuleDraft, SynthError> {
    draft_rule_with(base, bucket, programs, &[], code, seed)
}

/// The rule file learned again from `programs` without `programs[excluded]` (with the same
/// variants, code and seed): what the `generalization` gate's leave-one-out runs. `bucket`'s
/// construct is the rule's (`applies_to`): the question is whether the others teach the same
/// kind of rule, not whether a one-program bucket reaches the subset search. `Ok(None)`:
/// nothing separates the others.
pub fn relearn(base: &Base, bucket: &BucketInfo, programs: &[Program], variants: &[Variant], code: &str, seed: u64, excluded: usize) -> Result<Option<String>, String> {
    let rest: Vec<Program> = programs.iter().enumerate().filter(|(i, _)| *i != excluded).map(|(_, p)| p.clone()).collect();
    match draft_rule_with(base, bucket, &rest, variants, code, seed) {
        Ok(d) => Ok(d.files.into_iter().next().map(|(_, text)| text)),
        Err(SynthError::Invalid(e)) => Err(e),
        Err(_) => Ok(None),
    }
}

/// [`draft_rule`] with labelled variants of the failing programs (passing ones join the
/// accepted instances; failing ones bound thresholds and fit boundaries).
pub fn draft_rule_with(base: &Base, bucket: &BucketInfo, programs: &[Program], variants: &[Variant], code: &str, seed: u64) -> Result<RuleDraft, SynthError> {
    let mut d = draft_rule_inner(base, bucket, programs, variants, code, seed)?;
    d.variants = variants.to_vec();
    let by_hash: std::collections::BTreeMap<&str, &str> = programs.iter().map(|p| (p.hash.as_str(), p.source.as_str())).collect();
    d.failing_sources = d.failing_programs.iter().map(|h| by_hash.get(h.as_str()).map(|s| s.to_string()).unwrap_or_default()).collect();
    Ok(d)
}

fn draft_rule_inner(base: &Base, bucket: &BucketInfo, programs: &[Program], variants: &[Variant], code: &str, seed: u64) -> Result<RuleDraft, SynthError> {
    // The failing programs the current verifier accepts.
    let mut usable: Vec<(&Program, Module)> = Vec::new();
    let mut skipped = Vec::new();
    for p in programs {
        let out = base.frontend.check(&p.source);
        match (out.module, out.validated) {
            (None, _) => {
                let first = out.diagnostics.iter().find(|d| d.is_error()).map(|d| format!("{}: {}", d.code, d.message)).unwrap_or_default();
                skipped.push(format!("{}: does not type-check ({first})", short(&p.hash)));
            }
            (Some(_), None) => {
                let codes: BTreeSet<&str> = out.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.code.as_str()).collect();
                skipped.push(format!("{}: already rejected by the verifier ({})", short(&p.hash), codes.into_iter().collect::<Vec<_>>().join(", ")));
            }
            (Some(m), Some(_)) => usable.push((p, m)),
        }
    }
    if usable.is_empty() {
        return Err(SynthError::NoFailingInstances(skipped));
    }
    // Which constructs to search: the bucket's, else every kind present in the failing programs.
    let bucket_construct = bucket.construct.as_deref().and_then(parse_construct);
    let constructs: Vec<(ConstructKind, Option<String>)> = match &bucket_construct {
        Some((k, op)) => vec![(*k, op.clone().or_else(|| if matches!(k, ConstructKind::Call | ConstructKind::Arg) { bucket.op.clone() } else { None }))],
        None => every_construct(base, &usable),
    };
    let mut last_err = SynthError::NoSeparatingPredicate(bucket.construct.clone().unwrap_or_else(|| "any construct".into()));
    let mut best: Option<(u8, RuleDraft)> = None;
    for (kind, op) in constructs.clone() {
        match draft_for_construct(base, bucket, &usable, &skipped, variants, kind, op.as_deref(), code, seed, Explain::All) {
            Ok(d) => {
                let better = best.as_ref().is_none_or(|(lvl, _)| d.level < *lvl);
                if better {
                    best = Some((d.level, d));
                }
                if best.as_ref().is_some_and(|(l, _)| *l == 1) {
                    break;
                }
            }
            Err(e) => last_err = e,
        }
    }
    // A call fails because of what it is applied to: when no predicate over the call's own facts
    // separates (its facts say nothing about, say, the row stride of the tensor it copies from),
    // search the declarations its arguments name — the tensors of its global arguments, the
    // regions of its shared ones.
    if best.is_none() {
        if let Some((ConstructKind::Call, Some(op))) = bucket.construct.as_deref().and_then(parse_construct) {
            for kind in argument_roots(base, &usable, &op) {
                if let Ok(mut d) = draft_for_construct(base, bucket, &usable, &skipped, variants, kind, None, code, seed, Explain::All) {
                    d.skipped_programs.push(format!(
                        "no predicate over the facts of `call:{op}` separates the failing programs: the rule is on the `{}` its arguments name",
                        kind.as_str()
                    ));
                    best = Some((d.level, d));
                    break;
                }
            }
        }
    }
    // No predicate separates every failing program: explain the largest part of the bucket that
    // one predicate does (at least two programs), and say which programs it leaves unexplained —
    // a wrong answer can have a cause no fact of the verifier shows (a wrong data mapping) beside
    // one the facts do show. A bucket attributed to the kernel (the miner's fallback when nothing
    // locates the failure) is searched over every construct kind of its programs; a call's over
    // the call and the declarations its arguments name.
    if best.is_none() && usable.len() >= 2 {
        let mut wide = constructs;
        match &bucket_construct {
            Some((ConstructKind::Kernel, _)) => wide.extend(every_construct(base, &usable).into_iter().filter(|(k, _)| *k != ConstructKind::Kernel)),
            Some((ConstructKind::Call, Some(op))) => wide.extend(argument_roots(base, &usable, op).into_iter().map(|k| (k, None))),
            _ => {}
        }
        // The most programs explained, then the simplest predicate, then the construct's place.
        let mut partial: Option<RuleDraft> = None;
        let mut searched = Vec::new();
        let mut invalid = None;
        for (kind, op) in wide {
            searched.push(construct_text(kind, op.as_deref()));
            match draft_for_construct(base, bucket, &usable, &skipped, variants, kind, op.as_deref(), code, seed, Explain::Largest { min: 2 }) {
                Ok(d) => {
                    let better = partial.as_ref().is_none_or(|p| (d.failing_programs.len(), std::cmp::Reverse(d.level)) > (p.failing_programs.len(), std::cmp::Reverse(p.level)));
                    if better {
                        partial = Some(d);
                    }
                }
                Err(e @ SynthError::Invalid(_)) => invalid = Some(e),
                Err(_) => {}
            }
        }
        match partial {
            Some(d) => best = Some((d.level, d)),
            // Keep a more telling reason of the full search (no corpus instance, say).
            None if matches!(last_err, SynthError::NoSeparatingPredicate(_)) => last_err = invalid.unwrap_or(SynthError::NoPartialPredicate(searched)),
            None => {}
        }
    }
    best.map(|(_, d)| d).ok_or(last_err)
}

/// What a failure's signature reports (its detail) and the fact of a construct that measures
/// it: the search prefers a predicate over that fact (issue 12, item 1). `never written`: the
/// miner found no writer of the wrong elements through the verifier's output ownership walk
/// (`attribute.rs`), the walk whose count is the tensor's `unwritten_elements`.
const REPORTED: &[(&str, ConstructKind, &str)] = &[(crate::mine::NEVER_WRITTEN, ConstructKind::Tensor, "unwritten_elements")];

/// The facts of `kind` that measure what `signature` reports ([`REPORTED`]).
pub fn reported_facts(signature: &str, kind: ConstructKind) -> Vec<String> {
    let detail = signature.split_once(": ").map_or("", |(_, d)| d);
    REPORTED.iter().filter(|(what, k, _)| *k == kind && detail == *what).map(|(_, _, f)| f.to_string()).collect()
}

/// The facts of `kind` (of `op`) that the lowering's refusal of the failing programs reports
/// ([`super::reported`]): for a bucket of lowering refusals, each failing program is lowered
/// again, and where the refusal is the bucket's own, the facts its message names with their
/// values are reported. Facts reported in every such program, in name order.
fn refusal_reported(base: &Base, bucket: &BucketInfo, failing: &[&(&Program, Module)], kind: ConstructKind, op: Option<&str>) -> Vec<String> {
    if !super::reported::is_lowering_refusal(&bucket.signature) {
        return Vec::new();
    }
    let mut common: Option<BTreeSet<String>> = None;
    for (p, m) in failing {
        let Some((code, message)) = super::reported::lowering_refusal(&base.frontend, &p.source) else { continue };
        if !super::reported::reproduces(&bucket.signature, &code, &message) {
            continue;
        }
        let Some(f) = base.facts(m) else { continue };
        let named: BTreeSet<String> = instances(&f, kind, op).iter().flat_map(|(i, _)| super::reported::reported_in(&message, i)).collect();
        common = Some(match common {
            None => named,
            Some(c) => c.intersection(&named).cloned().collect(),
        });
    }
    common.unwrap_or_default().into_iter().collect()
}

/// Every construct kind but calls and arguments, then calls of every op the failing programs
/// call.
fn every_construct(base: &Base, usable: &[(&Program, Module)]) -> Vec<(ConstructKind, Option<String>)> {
    let mut v: Vec<(ConstructKind, Option<String>)> = ConstructKind::ALL.iter().filter(|k| !matches!(k, ConstructKind::Call | ConstructKind::Arg)).map(|k| (*k, None)).collect();
    let mut ops: BTreeSet<String> = BTreeSet::new();
    for (_, m) in usable {
        if let Some(f) = base.facts(m) {
            ops.extend(f.of_kind(ConstructKind::Call).filter_map(|c| c.op.clone()));
        }
    }
    v.extend(ops.into_iter().map(|op| (ConstructKind::Call, Some(op))));
    v
}

/// Which failing programs a rule must explain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Explain {
    /// Every failing program that has the construct.
    All,
    /// The largest subset one predicate separates, of at least `min` programs ([`search_subset`]).
    Largest { min: usize },
}

/// The kinds of declaration the arguments of `op`'s calls in the failing programs are rooted at
/// (`tensor` for global arguments, `smem` for shared ones), in that order.
fn argument_roots(base: &Base, usable: &[(&Program, Module)], op: &str) -> Vec<ConstructKind> {
    let mut spaces: BTreeSet<String> = BTreeSet::new();
    for (_, m) in usable {
        let Some(f) = base.facts(m) else { continue };
        for a in f.of_kind(ConstructKind::Arg).filter(|a| a.op.as_deref() == Some(op)) {
            if let Some(Value::Sym(s)) = a.get("space") {
                spaces.insert(s.clone());
            }
        }
    }
    [("global", ConstructKind::Tensor), ("smem", ConstructKind::Smem)].into_iter().filter(|(s, _)| spaces.contains(*s)).map(|(_, k)| k).collect()
}

#[allow(clippy::too_many_arguments)]
fn draft_for_construct(
    base: &Base,
    bucket: &BucketInfo,
    usable: &[(&Program, Module)],
    skipped: &[String],
    variants: &[Variant],
    kind: ConstructKind,
    op: Option<&str>,
    code: &str,
    seed: u64,
    explain: Explain,
) -> Result<RuleDraft, SynthError> {
    let construct = construct_text(kind, op);
    let mut input = SearchInput::default();
    let mut failing_used: Vec<&(&Program, Module)> = Vec::new();
    let mut skipped: Vec<String> = skipped.to_vec();
    for pm in usable {
        let Some(f) = base.facts(&pm.1) else { continue };
        let inst: Vec<FactMap> = instances(&f, kind, op).into_iter().map(|(m, _)| m).collect();
        if inst.is_empty() {
            skipped.push(format!("{}: has no `{construct}`", short(&pm.0.hash)));
            continue;
        }
        input.failing.push(inst);
        failing_used.push(pm);
    }
    if input.failing.is_empty() {
        return Err(SynthError::NoFailingInstances(skipped));
    }
    let mut accepted_programs = 0;
    for f in base.corpus_facts.iter().flatten() {
        let inst = instances(f, kind, op);
        if !inst.is_empty() {
            accepted_programs += 1;
        }
        input.accepted.extend(inst.into_iter().map(|(m, _)| m));
    }
    if input.accepted.is_empty() {
        return Err(SynthError::NoAcceptedInstances(construct));
    }
    input.reported = reported_facts(&bucket.signature, kind);
    for f in refusal_reported(base, bucket, &failing_used, kind, op) {
        if !input.reported.contains(&f) {
            input.reported.push(f);
        }
    }
    input.operand_facts = matches!(kind, ConstructKind::Call | ConstructKind::Arg);
    // Constants of the failing programs' targets; variants as the real compiler labelled them.
    let targets: BTreeSet<&str> = failing_used.iter().map(|pm| pm.1.target.as_str()).collect();
    input.grounding = base.grounding.iter().filter(|g| !matches!(&g.source, cake_merge_gates::generalization_gate::Source::Target { target, .. } if !targets.contains(target.as_str()))).cloned().collect();
    for v in variants.iter().filter(|v| !v.held_out) {
        let Some(m) = base.frontend.check(&v.source).module else { continue };
        let Some(f) = base.facts(&m) else { continue };
        let inst: Vec<FactMap> = instances(&f, kind, op).into_iter().map(|(m, _)| m).collect();
        if !inst.is_empty() {
            input.labelled.push(Labelled { variant: v.id.clone(), fails: v.fails, instances: inst });
        }
    }
    // The failing programs the rule explains, and those it leaves unexplained (with the kernel's
    // name, for the reviewer).
    let mut unexplained: Vec<(String, String)> = Vec::new();
    let candidates = match explain {
        Explain::All => search(&input, seed, 16),
        Explain::Largest { min } => match search_subset(&input, seed, 16, min) {
            Some(r) => {
                let keep: BTreeSet<usize> = r.explained.iter().copied().collect();
                unexplained = failing_used.iter().enumerate().filter(|(i, _)| !keep.contains(i)).map(|(_, pm)| (pm.0.hash.clone(), pm.1.name.clone())).collect();
                failing_used = failing_used.iter().enumerate().filter(|(i, _)| keep.contains(i)).map(|(_, pm)| *pm).collect();
                r.candidates
            }
            None => Vec::new(),
        },
    };
    if candidates.is_empty() {
        return Err(SynthError::NoSeparatingPredicate(construct));
    }
    // A predicate over kernel and target facts only is a rule about the kernel: check it once
    // per program, on the kernel, instead of once per construct.
    if kind != ConstructKind::Kernel && candidates[0].facts.iter().all(|f| f.starts_with("kernel_") || f.starts_with("target")) {
        let mut attempt = draft_for_construct(base, bucket, usable, &skipped, variants, ConstructKind::Kernel, None, code, seed, explain);
        if let Ok(d) = &mut attempt {
            d.skipped_programs.push(format!("the separating predicate names only kernel facts: the rule is on the kernel, not on `{construct}`"));
        }
        if attempt.is_ok() {
            return attempt;
        }
    }
    let category = category_for(kind);
    let mut problems = Vec::new();
    for cand in candidates {
        let name = rule_name(&construct, &cand);
        let path = format!("compiler/rules/{category}/{code}-{name}.toml");
        let text = rule_toml(code, &name, category, &construct, &cand, bucket, failing_used.len(), &unexplained, accepted_programs, input.accepted.len(), "");
        // Validate with the real engine: loads, fires on every failing program, silent on the corpus.
        let new_rule = match RuleSet::from_files(&[(path.as_str(), text.as_str())]) {
            Ok(r) => r,
            Err(e) => {
                problems.push(format!("`{}`: {e}", cand.require));
                continue;
            }
        };
        let mut all = base.rules.clone();
        if let Err(e) = all.extend(new_rule) {
            return Err(SynthError::Invalid(e.to_string()));
        }
        let fires = |m: &Module| -> (bool, bool) {
            let Some(t) = base.targets.get(&m.target) else { return (false, false) };
            let out = cake::verify::verify_with(m.clone(), t, &all);
            let hit = out.findings.iter().any(|d| d.code == code && d.severity == Severity::Error);
            let any = out.findings.iter().any(|d| d.code == code || d.message.contains(code));
            (hit, any)
        };
        if let Some((p, _)) = failing_used.iter().find(|(_, m)| !fires(m).0) {
            problems.push(format!("`{}` does not fire on {} with the rules engine", cand.require, short(&p.hash)));
            continue;
        }
        if let Some((id, _)) = base.corpus_modules.iter().find(|(_, m)| fires(m).1) {
            problems.push(format!("`{}` reports on corpus case {id} with the rules engine", cand.require));
            continue;
        }
        // The doc's example: the line of the first failing program the rule reports.
        let example = failing_used.first().and_then(|(p, m)| {
            let t = base.targets.get(&m.target)?;
            let out = cake::verify::verify_with(m.clone(), t, &all);
            let d = out.findings.iter().find(|d| d.code == code)?;
            let (line, _) = line_col(&p.source, (d.primary.span.start as usize).min(p.source.len()));
            p.source.lines().nth(line.saturating_sub(1)).map(|l| l.trim().to_string())
        });
        let text = rule_toml(code, &name, category, &construct, &cand, bucket, failing_used.len(), &unexplained, accepted_programs, input.accepted.len(), &example.unwrap_or_default());
        // Existing negative cases it also fires on get the new finding in their expectations.
        let fe = with_rules(base, &all);
        let mut updated: Vec<(String, String)> = Vec::new();
        let mut blocked = None;
        for n in base.negatives.iter().filter(|n| fires(&n.module).1) {
            let out = fe.check(&n.source);
            let errors = cake::corpus::tiers::findings_at(&n.source, &out.diagnostics, Severity::Error);
            match n.manifest.as_ref().and_then(|(path, text)| set_findings(text, &errors).map(|t| (path.clone(), t))) {
                Some(u) => updated.push(u),
                None => {
                    blocked = Some(n.id.clone());
                    break;
                }
            }
        }
        if let Some(id) = blocked {
            problems.push(format!("`{}` fires on negative case {id}, whose expectations the engine cannot rewrite", cand.require));
            continue;
        }
        // Negative cases: the failing programs, each with the findings the new verifier reports.
        let mut files = vec![(path.clone(), text.clone())];
        files.extend(updated);
        let mut seen_sources = BTreeSet::new();
        let mut used: Vec<&(&Program, Module)> = failing_used.clone();
        used.sort_by(|a, b| a.0.hash.cmp(&b.0.hash));
        let mut n = 0;
        for (p, _) in used {
            if n == MAX_NEGATIVE_CASES || !seen_sources.insert(p.source.trim().to_string()) {
                continue;
            }
            n += 1;
            files.extend(negative_case(code, &name, n, p, bucket, &fe));
        }
        let changelog = changelog_line(code, &name, category, &construct, &cand, bucket, failing_used.len(), &unexplained);
        return Ok(RuleDraft {
            code: code.to_string(),
            name,
            category: category.to_string(),
            applies_to: construct,
            when: cand.when,
            require: cand.require,
            level: cand.level,
            form: cand.form.clone(),
            failing_programs: failing_used.iter().map(|(p, _)| p.hash.clone()).collect(),
            unexplained_programs: unexplained.iter().map(|(h, _)| h.clone()).collect(),
            skipped_programs: {
                let mut s = skipped;
                if !unexplained.is_empty() {
                    let named = |v: Vec<(&str, &str)>| v.into_iter().map(|(h, k)| format!("{} (kernel `{k}`)", short(h))).collect::<Vec<_>>().join(", ");
                    s.push(format!(
                        "no predicate separates every failing program of the bucket: the rule explains {} of {} — {}",
                        failing_used.len(),
                        failing_used.len() + unexplained.len(),
                        named(failing_used.iter().map(|(p, m)| (p.hash.as_str(), m.name.as_str())).collect())
                    ));
                    for (h, k) in &unexplained {
                        s.push(format!(
                            "{}: not explained — no predicate that separates the explained programs from the corpus also separates kernel `{k}` (its failure may have a cause no fact shows); not among the negative cases",
                            short(h)
                        ));
                    }
                }
                s
            },
            accepted_programs,
            accepted_instances: input.accepted.len(),
            constants: cand.constants.clone(),
            failing_sources: Vec::new(),
            variants: Vec::new(),
            files,
            changelog,
        });
    }
    Err(SynthError::Invalid(format!("every candidate failed validation: {}", problems.join("; "))))
}


/// The base front end with another rule set.
pub fn with_rules(base: &Base, rules: &RuleSet) -> Frontend {
    let mut fe = base.frontend.clone();
    let rules = std::sync::Arc::new(rules.clone());
    fe.verifier = Some(std::sync::Arc::new(move |m, t| cake::verify::verify_with(m, t, &rules)));
    fe
}
