//! Counterexample-guided boundary variants (issue 12, item 2).
//!
//! The engine has the real compiler and, where there is one, the GPU as a labelling oracle. From
//! each failing program it makes **near-boundary variants**: one integer literal changed at a
//! time (`stages 6` → 5, 7, 3, 12; `regs 100` → 96, 104; a box 64 → 32, 128), each re-parsed and
//! type-checked; and a TMA box whose largest extent exceeds every accepted box's turned (that
//! extent exchanged with each other one), so a bound learned along one dimension meets another.
//! It keeps the variants that move an *implicated* quantity: a fact of the program
//! whose value lies outside what every accepted corpus program shows (outside the accepted range,
//! or not divisible by a power of two every accepted value is a multiple of). The variants are
//! then labelled — by a run record of their canonical hash in an evidence store (a GPU run on the
//! H200: pass, or the failure it showed; or a build failure), never by guessing — and a rule's
//! boundary is fitted to those labels, not to the gap between training values.
//!
//! Variants are deterministic: the same program and base give the same variants (and hashes), so
//! a batch labelled on the GPU once is found again by every later run on the CPU.

use std::collections::{BTreeMap, BTreeSet};

use cake::corpus::tiers::Frontend;
use cake::ir::Module;
use cake::pred::Value;
use cake::runtime::job::Verdict;
use cake::verify::{ConstructKind, ModuleFacts};
use serde::{Deserialize, Serialize};

use super::search::{instances, FactMap};
use crate::store::{EvidenceStore, Record};

/// Boundary variants made of each failing program (the benchmark's labelling batch has as many).
pub const PER_PROGRAM: usize = 6;

/// Construct kinds whose facts can implicate a quantity (calls are covered through the
/// declarations they name; arguments only for a bucket on an argument, [`AcceptedRanges::with_arguments`]).
const KINDS: [ConstructKind; 8] =
    [ConstructKind::Kernel, ConstructKind::Grid, ConstructKind::Smem, ConstructKind::View, ConstructKind::Tensor, ConstructKind::Role, ConstructKind::Pipeline, ConstructKind::Barrier];

/// Declaration keywords: their literals come first (shapes, stages, budgets, boxes, alignments).
const DECLARATIONS: [&str; 11] = ["dim", "in", "out", "inout", "grid", "smem", "view", "role", "pipeline", "barrier", "const"];

/// One edit of a program: one literal, or every literal that follows the same keyword with the
/// same value (`stages 6` on each buffer and on the pipeline, which must agree), or two extents of
/// a TMA box exchanged (`exchange`: `tma [8, 8192]` → `tma [8192, 8]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edit {
    /// 1-based lines of the parent program it changes.
    pub lines: Vec<usize>,
    pub from: i64,
    pub to: i64,
    /// The keyword before the literal, for a joint edit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyword: Option<String>,
    /// `from` and `to` are two extents of one TMA box, exchanged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exchange: bool,
    /// The first edited line.
    pub text: String,
}

impl Edit {
    pub fn describe(&self) -> String {
        let lines = self.lines.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(", ");
        match &self.keyword {
            _ if self.exchange => format!("line {lines}: the box extents {} and {} exchanged", self.from, self.to),
            Some(k) => format!("`{k} {}` -> `{k} {}` on lines {lines}", self.from, self.to),
            None => format!("line {lines}: {} -> {}", self.from, self.to),
        }
    }
}

/// A variant of a failing program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Variant {
    /// SHA-256 of the canonical source (the evidence store's program key).
    pub hash: String,
    /// The failing program it was made from (its hash).
    pub parent: String,
    pub edit: Edit,
    /// The implicated facts it moves: `kind.fact: parent → variant`.
    pub moves: Vec<String>,
    #[serde(skip)]
    pub source: String,
}

/// What the labelling oracle says of a variant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "label", rename_all = "snake_case")]
pub enum Label {
    /// Every run passed its oracle.
    Passes { evidence: Vec<String> },
    /// A run failed (verdict or error class: `mismatch`, `timeout`, `build_N002`, a CUDA error).
    Fails { how: String, evidence: Vec<String> },
    /// No run record of it: not labelled (it is not used).
    Unlabelled,
}

impl Label {
    /// `Some(true)`: fails; `Some(false)`: passes.
    pub fn fails(&self) -> Option<bool> {
        match self {
            Label::Passes { .. } => Some(false),
            Label::Fails { .. } => Some(true),
            Label::Unlabelled => None,
        }
    }
}

/// A variant with its label.
#[derive(Clone, Debug)]
pub struct Labelled {
    pub variant: Variant,
    pub label: Label,
}

/// The canonical hash of a source (`None`: it does not parse).
pub fn canonical_hash(source: &str) -> Option<String> {
    let file = cake::syntax::parse(source).ok()?;
    Some(cake::runtime::record::sha256_hex(cake::syntax::print(&file).as_bytes()))
}

/// What accepted programs show, per (construct kind, fact): the range of integer values and the
/// largest power of two (up to 1024) every value is a multiple of.
#[derive(Clone, Debug, Default)]
pub struct AcceptedRanges {
    ranges: BTreeMap<(ConstructKind, String), (i64, i64, i64)>,
    kinds: Vec<ConstructKind>,
}

/// The construct's own facts of each instance of `kind` (not the kernel's or the target's), an
/// argument's named `<op>.<fact>`.
fn own_facts(facts: &ModuleFacts, kind: ConstructKind) -> Vec<FactMap> {
    let own = |m: FactMap, prefix: &str| -> FactMap { m.into_iter().filter(|(k, _)| !k.starts_with("kernel_") && !k.starts_with("target")).map(|(k, v)| (format!("{prefix}{k}"), v)).collect() };
    if kind != ConstructKind::Arg {
        return instances(facts, kind, None).into_iter().map(|(m, _)| own(m, "")).collect();
    }
    let ops: BTreeSet<String> = facts.of_kind(kind).filter_map(|c| c.op.clone()).collect();
    ops.iter().flat_map(|op| instances(facts, kind, Some(op)).into_iter().map(move |(m, _)| (op.clone(), m))).map(|(op, m)| own(m, &format!("{op}."))).collect()
}

fn pow2_divisor(x: i64) -> i64 {
    if x == 0 {
        return 1024;
    }
    let mut d = 1;
    while d < 1024 && x % (d * 2) == 0 {
        d *= 2;
    }
    d
}

impl AcceptedRanges {
    pub fn of<'a>(accepted: impl IntoIterator<Item = &'a ModuleFacts>) -> AcceptedRanges {
        Self::over(accepted, KINDS.to_vec())
    }

    /// [`AcceptedRanges::of`], with the facts of every op's arguments too (keyed by the op): for a
    /// bucket on an argument (`arg:wgmma`), whose failing quantity is the operand's own
    /// (`wgmma.row_bytes`), not a declaration's.
    pub fn with_arguments<'a>(accepted: impl IntoIterator<Item = &'a ModuleFacts>) -> AcceptedRanges {
        Self::over(accepted, KINDS.iter().copied().chain([ConstructKind::Arg]).collect())
    }

    fn over<'a>(accepted: impl IntoIterator<Item = &'a ModuleFacts>, kinds: Vec<ConstructKind>) -> AcceptedRanges {
        let mut ranges: BTreeMap<(ConstructKind, String), (i64, i64, i64)> = BTreeMap::new();
        for facts in accepted {
            for &kind in &kinds {
                for inst in own_facts(facts, kind) {
                    for (k, v) in inst {
                        if let Value::Int(x) = v {
                            let e = ranges.entry((kind, k)).or_insert((x, x, pow2_divisor(x)));
                            e.0 = e.0.min(x);
                            e.1 = e.1.max(x);
                            e.2 = e.2.min(pow2_divisor(x));
                        }
                    }
                }
            }
        }
        AcceptedRanges { ranges, kinds }
    }

    /// The facts of a program outside what the accepted programs show: (kind, fact, its values).
    pub fn implicated(&self, facts: &ModuleFacts) -> BTreeMap<(ConstructKind, String), Vec<i64>> {
        let mut out: BTreeMap<(ConstructKind, String), Vec<i64>> = BTreeMap::new();
        for &kind in &self.kinds {
            for inst in own_facts(facts, kind) {
                for (k, v) in inst {
                    let Value::Int(x) = v else { continue };
                    let Some(&(lo, hi, div)) = self.ranges.get(&(kind, k.clone())) else { continue };
                    if x < lo || x > hi || (div > 1 && x % div != 0) {
                        out.entry((kind, k)).or_default().push(x);
                    }
                }
            }
        }
        out
    }
}

/// The integer literals of a line outside its comment: (byte start, byte end, value).
fn literals(line: &str) -> Vec<(usize, usize, i64)> {
    let code = line.split('#').next().unwrap_or("");
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b'.')) {
            let s = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            // `128B` (a swizzle) and `1e3` are not plain integers.
            if i < b.len() && (b[i].is_ascii_alphabetic() || b[i] == b'_' || b[i] == b'.') {
                continue;
            }
            if let Ok(v) = code[s..i].parse::<i64>() {
                out.push((s, i, v));
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Values near `v`, nearest first: ±1; the multiples of the smallest power of two that `v` is
/// not a multiple of, below and above it (100 → 96, 104: a divisibility boundary is crossed
/// both ways); ±8 (the steps of register budgets and counts); then halving and doubling (tiles,
/// boxes, alignments).
fn neighbours_of(v: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let d = [2i64, 4, 8, 16, 32, 64, 128, 256, 512, 1024].into_iter().find(|d| v % d != 0);
    let (down, up) = match d {
        Some(d) => (v - v.rem_euclid(d), v - v.rem_euclid(d) + d),
        None => (v - 1, v + 1),
    };
    for c in [v - 1, v + 1, down, up, v - 8, v + 8, v / 2, v.saturating_mul(2)] {
        if c > 0 && c != v && !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// The word before a literal (`stages` in `stages 6`), when the literal follows one directly.
fn keyword_before(line: &str, start: usize) -> Option<String> {
    let head = line[..start].trim_end();
    if head.len() == line[..start].len() {
        return None;
    }
    let w: String = head.chars().rev().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<Vec<_>>().into_iter().rev().collect();
    (!w.is_empty() && w.chars().next().is_some_and(|c| c.is_ascii_alphabetic())).then_some(w)
}

/// Every variant of `source` by one edit — a single literal (declaration lines first, then the
/// rest, in line order), then each keyword's literals of one value jointly — that type-checks
/// under `frontend`, deduplicated by canonical hash.
pub fn single_literal_variants(source: &str, frontend: &Frontend) -> Vec<(Variant, Module)> {
    let Some(parent) = canonical_hash(source) else { return Vec::new() };
    let lines: Vec<&str> = source.lines().collect();
    let is_decl = |l: &str| DECLARATIONS.contains(&l.split_whitespace().next().unwrap_or(""));
    let order: Vec<usize> = (0..lines.len()).filter(|i| is_decl(lines[*i])).chain((0..lines.len()).filter(|i| !is_decl(lines[*i]))).collect();
    // Each edit: (line, start, end) of the literals it replaces, their value, the keyword.
    let mut edits: Vec<(Vec<(usize, usize, usize)>, i64, Option<String>)> = Vec::new();
    let mut joint: BTreeMap<(String, i64), Vec<(usize, usize, usize)>> = BTreeMap::new();
    for &i in &order {
        if lines[i].trim_start().starts_with("kernel ") {
            continue;
        }
        for (s, e, v) in literals(lines[i]) {
            edits.push((vec![(i, s, e)], v, None));
            if is_decl(lines[i]) {
                if let Some(k) = keyword_before(lines[i], s) {
                    joint.entry((k, v)).or_default().push((i, s, e));
                }
            }
        }
    }
    for ((k, v), at) in joint {
        if at.len() > 1 {
            edits.push((at, v, Some(k)));
        }
    }
    let mut seen = BTreeSet::from([parent.clone()]);
    let mut out = Vec::new();
    // One variant: each (line, start, end) replaced by its value, right to left within a line so
    // earlier offsets stay valid.
    let mut make = |at: &[(usize, usize, usize, i64)], edit: Edit| {
        let mut src: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        let mut sorted = at.to_vec();
        sorted.sort_by(|a, b| (a.0, std::cmp::Reverse(a.1)).cmp(&(b.0, std::cmp::Reverse(b.1))));
        for (i, s, e, to) in sorted {
            src[i] = format!("{}{to}{}", &src[i][..s], &src[i][e..]);
        }
        let mut variant_source = src.join("\n");
        variant_source.push('\n');
        let Some(hash) = canonical_hash(&variant_source) else { return };
        if !seen.insert(hash.clone()) {
            return;
        }
        let Some(module) = frontend.check(&variant_source).module else { return };
        let text = src[at[0].0].clone();
        out.push((Variant { hash, parent: parent.clone(), edit: Edit { text, ..edit }, moves: Vec::new(), source: variant_source }, module));
    };
    for (at, v, keyword) in edits {
        for to in neighbours_of(v) {
            let mut edited: Vec<usize> = at.iter().map(|(i, _, _)| i + 1).collect();
            edited.dedup();
            let with: Vec<(usize, usize, usize, i64)> = at.iter().map(|&(i, s, e)| (i, s, e, to)).collect();
            make(&with, Edit { lines: edited, from: v, to, keyword: keyword.clone(), exchange: false, text: String::new() });
        }
    }
    // A TMA box turned: its largest extent exchanged with each other one, so a bound learned from
    // boxes too large in one dimension meets a box too large in another.
    for &i in &order {
        let Some(open) = lines[i].find("tma [") else { continue };
        let close = lines[i][open..].find(']').map_or(lines[i].len(), |c| open + c);
        let dims: Vec<(usize, usize, i64)> = literals(lines[i]).into_iter().filter(|(s, _, _)| *s > open && *s < close).collect();
        let Some(&(ms, me, max)) = dims.iter().max_by_key(|(s, _, v)| (*v, std::cmp::Reverse(*s))) else { continue };
        for &(s, e, v) in dims.iter().filter(|d| d.2 != max) {
            make(&[(i, ms, me, v), (i, s, e, max)], Edit { lines: vec![i + 1], from: max, to: v, keyword: Some("tma".into()), exchange: true, text: String::new() });
        }
    }
    out
}

/// Up to `max` variants of a failing program that move one of its implicated facts, the smallest
/// relative move first (the variants nearest the boundary), each with the facts it moves.
pub fn boundary_variants(source: &str, frontend: &Frontend, ranges: &AcceptedRanges, facts_of: impl Fn(&Module) -> Option<ModuleFacts>, max: usize) -> Vec<(Variant, ModuleFacts)> {
    let Some(module) = frontend.check(source).module else { return Vec::new() };
    let Some(parent_facts) = facts_of(&module) else { return Vec::new() };
    let implicated = ranges.implicated(&parent_facts);
    if implicated.is_empty() {
        return Vec::new();
    }
    let parent_values = values_of(&parent_facts, &implicated);
    let mut scored: Vec<(bool, f64, usize, Variant, ModuleFacts)> = Vec::new();
    // A box turned (its largest extent exchanged with another) is made only of a box whose
    // largest extent exceeds every accepted box's: it moves that extent into another dimension.
    let box_max = ranges.ranges.get(&(ConstructKind::Tensor, "max_box".to_string())).map_or(i64::MAX, |r| r.1);
    for (n, (mut v, m)) in single_literal_variants(source, frontend).into_iter().enumerate() {
        if v.edit.exchange && v.edit.from <= box_max {
            continue;
        }
        // A variant the current verifier already rejects carries no news for a new rule.
        if frontend.check(&v.source).validated.is_none() {
            continue;
        }
        let Some(f) = facts_of(&m) else { continue };
        let values = values_of(&f, &implicated);
        let mut moves = Vec::new();
        // Variants that move an implicated value itself come first (`regs 8` of the role whose
        // budget is out of range, not the other role's), then by the relative size of the move.
        let mut moves_implicated = false;
        let mut rel = f64::INFINITY;
        for (key, before) in &parent_values {
            let after = values.get(key).cloned().unwrap_or_default();
            if &after != before {
                moves.push(format!("{}.{}: {} → {}", key.0.as_str(), key.1, list(before), list(&after)));
                let count = |v: &[i64], x: i64| v.iter().filter(|y| **y == x).count();
                moves_implicated |= implicated[key].iter().any(|x| count(&after, *x) < count(before, *x));
                let (b, a): (i64, i64) = if after.len() == before.len() {
                    (before.iter().map(|x| x.abs()).sum(), before.iter().zip(&after).map(|(x, y)| (x - y).abs()).sum())
                } else {
                    (1, 1)
                };
                rel = rel.min(a as f64 / (b as f64).max(1.0));
            }
        }
        if moves.is_empty() {
            continue;
        }
        v.moves = moves;
        scored.push((!moves_implicated, rel, n, v, f));
    }
    scored.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)));
    // A turned box shows whether the bound holds on every dimension, which no move along one
    // dimension can: it takes the last place when nearer moves fill the others.
    let turned = scored.iter().position(|(far, _, _, v, _)| !*far && v.edit.exchange);
    if let Some(k) = turned.filter(|k| max > 0 && *k >= max) {
        let t = scored.remove(k);
        scored.insert(max - 1, t);
    }
    scored.into_iter().take(max).map(|(_, _, _, v, f)| (v, f)).collect()
}

fn values_of(facts: &ModuleFacts, keys: &BTreeMap<(ConstructKind, String), Vec<i64>>) -> BTreeMap<(ConstructKind, String), Vec<i64>> {
    let mut out = BTreeMap::new();
    for (kind, fact) in keys.keys() {
        let mut vs: Vec<i64> = own_facts(facts, *kind).iter().filter_map(|m| match m.get(fact) {
            Some(Value::Int(x)) => Some(*x),
            _ => None,
        }).collect();
        vs.sort_unstable();
        out.insert((*kind, fact.clone()), vs);
    }
    out
}

fn list(v: &[i64]) -> String {
    match v {
        [x] => x.to_string(),
        _ => format!("[{}]", v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")),
    }
}

/// The labels of every program a store has run records of, read once.
#[derive(Clone, Debug, Default)]
pub struct LabelIndex {
    labels: BTreeMap<String, Label>,
}

impl LabelIndex {
    /// Add the labels of another store (a failing label wins over a passing one).
    pub fn extend(&mut self, other: LabelIndex) {
        for (hash, label) in other.labels {
            match self.labels.get(&hash) {
                Some(Label::Fails { .. }) => {}
                Some(Label::Passes { .. }) if label.fails() != Some(true) => {}
                _ => {
                    self.labels.insert(hash, label);
                }
            }
        }
    }

    /// A failing run (any verdict but pass and skipped; a build failure) labels its program
    /// failing; runs that all passed label it passing; a program with neither is unlabelled.
    pub fn of(store: &EvidenceStore) -> LabelIndex {
        let mut labels: BTreeMap<String, Label> = BTreeMap::new();
        for s in store.scan().records {
            let Record::Run(r) = &s.record else { continue };
            let id = s.id.as_str().to_string();
            let entry = labels.entry(r.program.sha256.clone()).or_insert(Label::Unlabelled);
            match (r.verdict, &mut *entry) {
                (Verdict::Skipped, _) | (Verdict::Pass, Label::Fails { .. }) => {}
                (Verdict::Pass, Label::Passes { evidence }) => evidence.push(id),
                (Verdict::Pass, Label::Unlabelled) => *entry = Label::Passes { evidence: vec![id] },
                (_, Label::Fails { evidence, .. }) => evidence.push(id),
                (v, _) => {
                    let how = r.error.as_ref().map(|e| e.class.clone()).unwrap_or_else(|| v.name().to_string());
                    *entry = Label::Fails { how, evidence: vec![id] };
                }
            }
        }
        LabelIndex { labels }
    }

    pub fn get(&self, hash: &str) -> Label {
        self.labels.get(hash).cloned().unwrap_or(Label::Unlabelled)
    }
}

/// The labelled boundary variants of a bucket's failing programs: each program's variants
/// ([`boundary_variants`], at most `max`), labelled from `labels` (a store of their runs);
/// unlabelled ones are left out. `held_out` says whether a variant is kept apart from fitting
/// (for the generalization gate): by its hash, about half of them, the same on every run.
///
/// A variant the lowering refuses with the bucket's own code and message reproduces its failure
/// and is labelled failing, even where the lowering calls the construct not supported yet
/// ([`super::reported::reproduces`]).
pub fn labelled_variants(base: &super::Base, sources: &[&str], labels: &LabelIndex, max: usize, bucket: &super::BucketInfo) -> Vec<Labelled> {
    let accepted = base.corpus_facts.iter().flatten();
    let ranges = if bucket.construct.as_deref().is_some_and(|c| c.starts_with("arg:")) { AcceptedRanges::with_arguments(accepted) } else { AcceptedRanges::of(accepted) };
    let signature = bucket.signature.as_str();
    let facts_of = |m: &Module| base.targets.get(&m.target).map(|t| cake::verify::module_facts(m, t));
    let mut out = Vec::new();
    for src in sources {
        for (variant, _) in boundary_variants(src, &base.frontend, &ranges, facts_of, max) {
            let label = match labels.get(&variant.hash) {
                Label::Unlabelled => label_by_lowering(base, &variant, signature),
                l => l,
            };
            if label != Label::Unlabelled {
                out.push(Labelled { variant, label });
            }
        }
    }
    out
}

/// The label the CPU can give without a run: the lowering (with the verifier bypassed, as a run
/// of a broken program is) refusing the variant labels it failing (`build_L003`), and so does a
/// "not supported yet" refusal that reproduces the bucket's own failure (`signature`); another
/// such refusal says nothing of the bucket's class, and a variant that lowers stays unlabelled —
/// only a GPU run can say it passes.
fn label_by_lowering(base: &super::Base, v: &Variant, signature: &str) -> Label {
    let Some(module) = base.frontend.check(&v.source).module else { return Label::Unlabelled };
    let unverified = cake::verify::Validated::assume_verified_unsafe(module);
    match cake::lower::lower_with(&unverified, &cake::lower::LowerOptions::with_source("variant.cake", &v.source)) {
        Err(e) if !e.is_not_supported_yet() => Label::Fails { how: format!("build_{}", e.code), evidence: Vec::new() },
        Err(e) if super::reported::reproduces(signature, e.code, &e.message) => Label::Fails { how: format!("build_{} (the bucket's failure)", e.code), evidence: Vec::new() },
        _ => Label::Unlabelled,
    }
}

/// The variants as the rule search and the generalization gate take them: passing or failing,
/// and held out from fitting or not.
pub fn for_gate(labelled: &[Labelled]) -> Vec<cake_merge_gates::generalization_gate::Variant> {
    labelled
        .iter()
        .filter_map(|l| {
            let fails = l.label.fails()?;
            Some(cake_merge_gates::generalization_gate::Variant { id: l.variant.hash.clone(), source: l.variant.source.clone(), fails, held_out: held_out(&l.variant) })
        })
        .collect()
}

/// Whether a variant is held out from fitting (odd last hex digit of its hash).
pub fn held_out(v: &Variant) -> bool {
    v.hash.chars().last().and_then(|c| c.to_digit(16)).is_some_and(|d| d % 2 == 1)
}

/// One variant written by [`write_batch`] (`variants.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchEntry {
    /// The variant's file, relative to the batch folder.
    pub file: String,
    /// The failing program it was made from, as given.
    pub parent_file: String,
    #[serde(flatten)]
    pub variant: Variant,
}

/// Write up to `max` boundary variants of each failing program into `out` for a labelling batch
/// (a GPU run on another machine): `<stem>--v<k>.cake` with a header naming the edit, the
/// parent's workload beside it (`<stem>--v<k>.workload.toml`, when the parent has one), and
/// `variants.json` listing them all. `base` gives the accepted corpus (the implicated facts) and
/// the front end. Deterministic.
pub fn write_batch(base: &super::Base, programs: &[std::path::PathBuf], max: usize, out: &std::path::Path) -> Result<Vec<BatchEntry>, String> {
    let ranges = AcceptedRanges::of(base.corpus_facts.iter().flatten());
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut entries = Vec::new();
    for p in programs {
        let text = std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        // The canonical form, as the evidence store keeps the program and the engine sees it: the
        // variants (and their hashes) are then exactly those `propose` makes.
        let source = cake::syntax::parse(&text).map(|f| cake::syntax::print(&f)).map_err(|_| format!("{}: does not parse", p.display()))?;
        let stem = p.file_name().and_then(|f| f.to_str()).and_then(|f| f.strip_suffix(".cake")).ok_or_else(|| format!("{}: not a `.cake` file", p.display()))?;
        let workload = p.with_file_name(format!("{stem}.workload.toml"));
        let facts_of = |m: &Module| base.targets.get(&m.target).map(|t| cake::verify::module_facts(m, t));
        for (k, (v, _)) in boundary_variants(&source, &base.frontend, &ranges, facts_of, max).into_iter().enumerate() {
            let file = format!("{stem}--v{}.cake", k + 1);
            // Written as made (no header of its own: a comment would change its hash); what it is
            // is in variants.json.
            std::fs::write(out.join(&file), &v.source).map_err(|e| format!("cannot write {file}: {e}"))?;
            if workload.is_file() {
                std::fs::copy(&workload, out.join(format!("{stem}--v{}.workload.toml", k + 1))).map_err(|e| format!("cannot copy {}: {e}", workload.display()))?;
            }
            entries.push(BatchEntry { file, parent_file: p.display().to_string(), variant: v });
        }
    }
    let json = serde_json::to_string_pretty(&entries).map_err(|e| e.to_string())?;
    std::fs::write(out.join("variants.json"), json + "\n").map_err(|e| format!("cannot write variants.json: {e}"))?;
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_skip_identifiers_swizzles_and_comments() {
        let l = "smem a_s: bf16[128, 64] stages 4 swizzle 128B align 1024  # 2 stages";
        let v: Vec<i64> = literals(l).into_iter().map(|x| x.2).collect();
        assert_eq!(v, vec![128, 64, 4, 1024]);
        assert!(literals("role w2: warp 0 regs 40").iter().map(|x| x.2).eq([0, 40]));
    }

    #[test]
    fn neighbours_step_near_first() {
        assert_eq!(neighbours_of(100), vec![99, 101, 96, 104, 92, 108, 50, 200]);
        assert_eq!(neighbours_of(264), vec![263, 265, 256, 272, 132, 528]);
        assert_eq!(neighbours_of(1), vec![2, 9]);
    }

    #[test]
    fn variants_of_an_example_type_check_and_are_deterministic() {
        let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/gemm_bf16_ws.cake")).unwrap();
        let fe = Frontend::default();
        let a = single_literal_variants(&src, &fe);
        let b = single_literal_variants(&src, &fe);
        assert!(a.len() > 10, "{}", a.len());
        assert_eq!(a.iter().map(|v| &v.0.hash).collect::<Vec<_>>(), b.iter().map(|v| &v.0.hash).collect::<Vec<_>>());
        // Declaration lines come first.
        assert!(a[0].0.edit.text.starts_with("dim "), "{:?}", a[0].0.edit);
        assert!(a.iter().all(|(v, _)| v.hash != v.parent));
    }

    #[test]
    fn a_box_too_wide_is_also_turned_so_another_dimension_is_too_large() {
        // The seeded benchmark's elementwise program with a box over a whole row (8192 wide):
        // among its nearest moves, the box turned (8192 rows of 8) is kept, so a bound on the
        // inner extent alone cannot pass the variants.
        let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/benchmark/tma-box-range/train/elementwise--x-box-whole-row.cake")).unwrap();
        let src = cake::syntax::print(&cake::syntax::parse(&src).unwrap());
        let fe = Frontend::default();
        let t = cake::target::TargetTable::builtin();
        let facts = |m: &Module| t.get(&m.target).map(|tg| cake::verify::module_facts(m, tg));
        let base = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/gemm_bf16_ws.cake")).unwrap();
        let ranges = AcceptedRanges::of([&facts(&fe.check(&base).module.unwrap()).unwrap()]);
        let all = single_literal_variants(&src, &fe);
        let turned: Vec<&Variant> = all.iter().map(|(v, _)| v).filter(|v| v.edit.exchange).collect();
        assert_eq!(turned.len(), 1, "{turned:?}");
        assert!(turned[0].source.contains("tma [8192, 8]") && turned[0].edit.describe().contains("exchanged"), "{:?}", turned[0].edit);
        // The full verifier rejects the box over 256 (V211); judged without it, the turned box is kept.
        let files = cake::verify::RuleSet::builtin_files();
        let kept_files: Vec<(&str, &str)> = files.iter().filter(|(p, _)| !p.contains("V211-")).map(|(p, t)| (p.as_str(), *t)).collect();
        let rules = cake::verify::RuleSet::from_files(&kept_files).unwrap();
        let mut ablated = fe.clone();
        let rules = std::sync::Arc::new(rules);
        ablated.verifier = Some(std::sync::Arc::new(move |m, t| cake::verify::verify_with(m, t, &rules)));
        let kept = boundary_variants(&src, &ablated, &ranges, facts, PER_PROGRAM);
        assert_eq!(kept.len(), PER_PROGRAM);
        assert!(kept.iter().any(|(v, _)| v.edit.exchange), "{:?}", kept.iter().map(|(v, _)| v.edit.describe()).collect::<Vec<_>>());
    }

    #[test]
    fn a_stage_count_over_the_accepted_range_is_implicated_and_varied() {
        let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/gemm_bf16_ws.cake")).unwrap();
        let fe = Frontend::default();
        let t = cake::target::TargetTable::builtin();
        let facts = |m: &Module| t.get(&m.target).map(|tg| cake::verify::module_facts(m, tg));
        let accepted = facts(&fe.check(&src).module.unwrap()).unwrap();
        let ranges = AcceptedRanges::of([&accepted]);
        let big = src.replace("stages 4 swizzle 128B align 1024\nsmem b_s: bf16[256, 64] stages 4", "stages 6 swizzle 128B align 1024\nsmem b_s: bf16[256, 64] stages 6").replace("pipeline ab: stages 4", "pipeline ab: stages 6");
        let vs = boundary_variants(&big, &fe, &ranges, facts, 8);
        assert!(!vs.is_empty());
        assert!(vs.iter().all(|(v, _)| !v.moves.is_empty()));
        // The stage count of both buffers and the pipeline, jointly (one alone breaks V401); with
        // every rule in force (V201 too), 5 and 7 stages are rejected already and left out.
        assert!(vs.iter().any(|(v, _)| v.edit.keyword.as_deref() == Some("stages") && v.edit.lines.len() == 3 && v.edit.to == 4), "{:?}", vs.iter().map(|v| &v.0.edit).collect::<Vec<_>>());
        assert!(vs.iter().all(|(v, _)| fe.check(&v.source).validated.is_some()));
    }
}
