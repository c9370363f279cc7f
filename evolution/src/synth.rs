//! Proposal synthesis: from a bucket of failing programs to a change written as data.
//!
//! # Verifier rules (Daikon-style invariants, decision stumps)
//! For the bucket's construct kind (`call:tma_load`, `smem`, `pipeline`, ...) the engine computes
//! the verifier's facts (`cake::verify::facts`) of every instance of that construct in every
//! failing program that the current verifier *accepts* (the implicated instances), and of every
//! instance in every corpus program the corpus expects to be accepted. (A new rule may also fire
//! on negative corpus cases — they are rejected anyway — and the proposal then adds the new
//! finding to their expectations.) It then searches the predicate
//! language for the simplest predicate that **holds on every corpus instance** (an invariant of
//! the accepted data) and that **every failing program violates** (on at least one implicated
//! instance). Candidates, simplest first:
//!
//! 1. one atom, in this order of forms: a boolean fact (`has_tma`, `!used`); a threshold
//!    (`f <= c`, `f >= c`, the constant at the accepted boundary, rounded to a power of two
//!    where one fits between the accepted and the failing values); a divisibility (`f % c == 0`,
//!    the smallest power of two that separates); a relation between two facts (`a == b`,
//!    `a <= b`, `a % b == 0`; a kernel or target fact only as the bound of `<=`, and only when
//!    both name the same thing, as `smem_bytes <= target_smem_max` do); a constant (`f == c`,
//!    `s == sym`); and last a blacklist (`f != c`, `s != sym`);
//! 2. two atoms: a conjunction of two invariants (`a && b`) or a guarded invariant
//!    (`when = g`, `require = b`: the rule fires where `g` holds and `b` does not).
//!
//! Thresholds and divisibility come before relations because a small corpus is full of
//! coincidental relations between facts that happen to share values (powers of two), and before
//! constants and blacklists because they generalize to held-out programs (a blacklist `f != 3`
//! only memorizes the failing value). Ties within a form
//! are broken by the fact's place (the construct's own facts, then `kernel_*`, then `target_*`)
//! and then by name — or, under a non-zero seed, by a seeded hash of the name, so a different seed
//! explores a different but equally simple rule, deterministically. Only facts decidable on
//! every corpus instance are used (an unknown would be a coverage-limit finding on an accepted
//! program). Every chosen candidate is then checked with the real rules engine: the rule file is
//! loaded by `RuleSet::from_files`, fires on every failing program, and is silent on every corpus
//! program; the first candidate that passes is the proposal.
//!
//! A bucket on a call (`call:cp_async`) whose own facts separate nothing is searched again over
//! the declarations its arguments name — the `tensor`s of its global arguments, then the `smem`
//! regions of its shared ones: a cp.async fails because of the row stride of the tensor it copies
//! from, a fact of the tensor, not of the call.
//!
//! When no predicate separates *every* failing program of a bucket (a wrong answer whose cause no
//! fact shows — a wrong data mapping — beside programs whose cause the facts do show), the engine
//! proposes the predicate that separates the largest subset of at least two of them
//! ([`search_subset`]), across the bucket's constructs (for a `kernel`-attributed bucket, the
//! miner's fallback, every construct kind of its programs). The draft names the programs it
//! explains and those it leaves unexplained, and commits only the explained ones as negative
//! cases.
//!
//! # Primitives
//! A bucket of "unknown operation `X`" findings (E0301) across two or more programs drafts a
//! catalog entry for `X` from its call sites: form (statement or expression), parameters (kinds
//! inferred from what the arguments name), a type rule, effects, and — only when an LLM drafted
//! them (`crate::llm`) — the hardware note and the lowering. Without them the entry is still
//! written and queued; its gates fail and say what is missing.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::path::PathBuf;

use cake::catalog::Catalog;
use cake::corpus::tiers::Frontend;
use cake::corpus::Corpus;
use cake::diag::Severity;
use cake::ir::Module;
use cake::pred::Value;
use cake::span::line_col;
use cake::target::TargetTable;
use cake::verify::{ConstructKind, FactSet, ModuleFacts, RuleSet};
use cake_merge_gates::Tree;
use serde::{Deserialize, Serialize};

// ─── Inputs ──────────────────────────────────────────────────────────────────────────────────────

/// What the engine needs to know about a mined bucket (the miner's `Bucket`, decoupled).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BucketInfo {
    pub id: String,
    /// The normalized failure signature.
    pub signature: String,
    /// The construct the failure maps to: `call:tma_load`, `smem`, `pipeline`, ... (`None`:
    /// unknown — the search then tries every construct kind).
    pub construct: Option<String>,
    pub op: Option<String>,
    pub evidence_ids: Vec<String>,
    pub program_hashes: Vec<String>,
    pub count: usize,
    pub score: f64,
}

/// One failing program of a bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// Content hash (the evidence store's key).
    pub hash: String,
    pub source: String,
}

/// The facts of one construct instance: fact name (`dim(0)`, `kernel_warps`, `target_smem_max`)
/// → value.
pub type FactMap = BTreeMap<String, Value>;

/// Facts that name things of one program (declarations, roles): never part of a rule.
const IDENTITY_FACTS: &[&str] = &["name", "role", "region", "root", "tensor", "producer", "consumer", "stage_pipeline", "param", "op", "target", "kernel_name"];

fn is_identity(name: &str) -> bool {
    IDENTITY_FACTS.contains(&name)
        || ["_name", "_root", "_region", "_tensor", "_producer", "_consumer", "_stage_pipeline"].iter().any(|s| name.ends_with(s))
}

/// The instances of `kind` (of `op`, for calls and arguments) in one module's facts.
pub fn instances(facts: &ModuleFacts, kind: ConstructKind, op: Option<&str>) -> Vec<(FactMap, cake::span::Span)> {
    facts
        .of_kind(kind)
        .filter(|c| op.is_none() || c.op.as_deref() == op)
        .map(|c| (fact_map(facts, c), c.span(primary_span_key(kind)).unwrap_or(c.decl)))
        .collect()
}

fn fact_map(facts: &ModuleFacts, c: &FactSet) -> FactMap {
    let mut m = FactMap::new();
    let mut indexed = BTreeSet::new();
    for (k, v) in c.iter() {
        if let Some((name, _)) = k.split_once('(') {
            indexed.insert(name.to_string());
        }
        m.insert(k, v);
    }
    // `dim(-1)`: the innermost, whatever the rank.
    for name in indexed {
        if let Some(v) = c.get_indexed(&name, -1) {
            m.insert(format!("{name}(-1)"), v);
        }
    }
    if c.kind != ConstructKind::Kernel {
        for (k, v) in facts.kernel.iter() {
            if !k.contains('(') {
                m.insert(format!("kernel_{k}"), v);
            }
        }
    }
    for (k, v) in facts.target.iter() {
        if matches!(v, Value::Int(_)) {
            m.insert(k, v);
        }
    }
    m.retain(|k, _| !is_identity(k));
    m
}

/// Parse `call:tma_load` / `smem` into the kind and the op.
pub fn parse_construct(s: &str) -> Option<(ConstructKind, Option<String>)> {
    match s.split_once(':') {
        Some((k, op)) => {
            let kind = ConstructKind::parse(k)?;
            Some((kind, (op != "*").then(|| op.to_string())))
        }
        None => ConstructKind::parse(s).map(|k| (k, None)),
    }
}

fn construct_text(kind: ConstructKind, op: Option<&str>) -> String {
    match (kind, op) {
        (ConstructKind::Call | ConstructKind::Arg, Some(op)) => format!("{}:{op}", kind.as_str()),
        (ConstructKind::Call | ConstructKind::Arg, None) => format!("{}:*", kind.as_str()),
        (k, _) => k.as_str().to_string(),
    }
}

/// Where a rule on this kind of construct points.
pub fn primary_span_key(kind: ConstructKind) -> &'static str {
    match kind {
        ConstructKind::Call => "call",
        ConstructKind::Arg => "arg",
        ConstructKind::Kernel => "decl",
        _ => "name",
    }
}

/// Words the rules engine accepts as literals (mirrors its validation; a candidate naming any
/// other symbol is not generated).
pub fn literal_words() -> BTreeSet<String> {
    let mut w: BTreeSet<String> = [
        "true", "false", "warp", "warpgroup", "thread", "in", "out", "inout", "read", "write", "readwrite", "none", "smem",
        "global", "frag", "scalar", "pipeline", "barrier", "roleref", "dtypename", "other", "async", "generic", "const",
        "expr", "elected", "block", "cluster",
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    w.extend(cake::ir::DType::ALL.iter().map(|d| d.name().to_string()));
    let t = TargetTable::builtin();
    w.extend(t.names().into_iter().map(str::to_string));
    w.extend(t.features.keys().cloned());
    for op in &Catalog::builtin().ops {
        w.insert(op.name.clone());
        w.extend(op.params.iter().map(|p| p.name.clone()));
    }
    w
}

// ─── The search ──────────────────────────────────────────────────────────────────────────────────

/// What the search looks at: the corpus instances and, per failing program, its implicated
/// instances.
#[derive(Clone, Debug, Default)]
pub struct SearchInput {
    pub accepted: Vec<FactMap>,
    pub failing: Vec<Vec<FactMap>>,
}

/// A predicate the search proposes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// The precondition of a guarded rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    pub require: String,
    /// 1: one atom; 2: two atoms (conjunction or guard).
    pub level: u8,
    /// The forms of its atoms (`relation <=`, `threshold >=`, ...).
    pub form: String,
    /// The facts it names.
    pub facts: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum V {
    U,
    I(i64),
    B(bool),
    S(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Int,
    Bool,
    Sym,
}

/// Instances as dense rows over a fixed fact order.
struct Table {
    names: Vec<String>,
    types: Vec<Ty>,
    /// Order key of each fact (place, then name or seeded hash).
    order: Vec<(u8, u64, String)>,
    syms: Vec<String>,
    accepted: Vec<Vec<V>>,
    failing: Vec<Vec<Vec<V>>>,
}

impl Table {
    fn build(input: &SearchInput, seed: u64, literals: &BTreeSet<String>) -> Table {
        // Facts known (same type) on every accepted instance.
        let mut types: BTreeMap<String, Ty> = BTreeMap::new();
        if let Some(first) = input.accepted.first() {
            for (k, v) in first {
                let t = match v {
                    Value::Int(_) => Ty::Int,
                    Value::Bool(_) => Ty::Bool,
                    Value::Sym(_) => Ty::Sym,
                    Value::Unknown => continue,
                };
                types.insert(k.clone(), t);
            }
        }
        for inst in &input.accepted {
            types.retain(|k, t| match (inst.get(k), *t) {
                (Some(Value::Int(_)), Ty::Int) | (Some(Value::Bool(_)), Ty::Bool) => true,
                (Some(Value::Sym(s)), Ty::Sym) => literals.contains(s),
                _ => false,
            });
        }
        let names: Vec<String> = types.keys().cloned().collect();
        let tys: Vec<Ty> = names.iter().map(|n| types[n]).collect();
        let order = names
            .iter()
            .map(|n| {
                let place = if n.starts_with("target") { 2 } else if n.starts_with("kernel_") { 1 } else { 0 };
                let h = if seed == 0 {
                    0
                } else {
                    let mut h = std::collections::hash_map::DefaultHasher::new();
                    (seed, n).hash(&mut h);
                    h.finish()
                };
                (place, h, n.clone())
            })
            .collect();
        let mut syms: Vec<String> = Vec::new();
        let row = |m: &FactMap, syms: &mut Vec<String>| -> Vec<V> {
            names
                .iter()
                .zip(&tys)
                .map(|(n, t)| match (m.get(n), t) {
                    (Some(Value::Int(i)), Ty::Int) => V::I(*i),
                    (Some(Value::Bool(b)), Ty::Bool) => V::B(*b),
                    (Some(Value::Sym(s)), Ty::Sym) => {
                        let id = match syms.iter().position(|x| x == s) {
                            Some(i) => i,
                            None => {
                                syms.push(s.clone());
                                syms.len() - 1
                            }
                        };
                        V::S(id as u32)
                    }
                    _ => V::U,
                })
                .collect()
        };
        let accepted = input.accepted.iter().map(|m| row(m, &mut syms)).collect();
        let failing = input.failing.iter().map(|p| p.iter().map(|m| row(m, &mut syms)).collect()).collect();
        Table { names, types: tys, order, syms, accepted, failing }
    }

    fn facts_of(&self, ty: Ty) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.names.len()).filter(|i| self.types[*i] == ty).collect();
        v.sort_by(|a, b| self.order[*a].cmp(&self.order[*b]));
        v
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Atom {
    Bool { f: usize, want: bool },
    /// `a == b` (le = false) or `a <= b` (le = true).
    Pair { a: usize, b: usize, le: bool },
    ModPair { a: usize, b: usize },
    /// `a + c <= b`: a construct fact with headroom `c` under a kernel or target limit.
    PairOff { a: usize, b: usize, c: i64 },
    Le { f: usize, c: i64 },
    Ge { f: usize, c: i64 },
    Mod { f: usize, c: i64 },
    Eq { f: usize, c: i64 },
    SymEq { f: usize, s: u32 },
    Ne { f: usize, c: i64 },
    SymNe { f: usize, s: u32 },
}

impl Atom {
    fn rank(&self) -> u32 {
        match self {
            Atom::Bool { .. } => 0,
            // A bound by a kernel or target limit (`smem_bytes + 1024 <= target_smem_max`).
            Atom::PairOff { .. } => 1,
            Atom::Le { .. } => 2,
            Atom::Ge { .. } => 3,
            Atom::Mod { .. } => 4,
            Atom::Pair { le: false, .. } => 5,
            Atom::Pair { le: true, .. } => 6,
            Atom::ModPair { .. } => 7,
            Atom::Eq { .. } => 7,
            Atom::SymEq { .. } => 8,
            Atom::Ne { .. } => 9,
            Atom::SymNe { .. } => 10,
        }
    }

    fn form(&self) -> &'static str {
        match self {
            Atom::Bool { .. } => "boolean fact",
            Atom::Pair { le: false, .. } => "relation ==",
            Atom::Pair { le: true, .. } => "relation <=",
            Atom::ModPair { .. } => "relation %",
            Atom::PairOff { .. } => "relation with headroom",
            Atom::Le { .. } => "threshold <=",
            Atom::Ge { .. } => "threshold >=",
            Atom::Mod { .. } => "divisibility",
            Atom::Eq { .. } | Atom::SymEq { .. } => "constant",
            Atom::Ne { .. } | Atom::SymNe { .. } => "blacklist",
        }
    }

    fn facts(&self) -> Vec<usize> {
        match *self {
            Atom::Pair { a, b, .. } | Atom::ModPair { a, b } | Atom::PairOff { a, b, .. } => vec![a, b],
            Atom::Bool { f, .. } | Atom::Le { f, .. } | Atom::Ge { f, .. } | Atom::Mod { f, .. } | Atom::Eq { f, .. } | Atom::SymEq { f, .. } | Atom::Ne { f, .. } | Atom::SymNe { f, .. } => vec![f],
        }
    }

    /// Three-valued, exactly as `cake::pred` evaluates the printed predicate.
    fn eval(&self, row: &[V]) -> Option<bool> {
        match *self {
            Atom::Bool { f, want } => match row[f] {
                V::B(b) => Some(b == want),
                _ => None,
            },
            Atom::Pair { a, b, le } => match (row[a], row[b]) {
                (V::I(x), V::I(y)) => Some(if le { x <= y } else { x == y }),
                _ => None,
            },
            Atom::ModPair { a, b } => match (row[a], row[b]) {
                (V::I(_), V::I(0)) => None,
                (V::I(x), V::I(y)) => Some(x.wrapping_rem(y) == 0),
                _ => None,
            },
            Atom::PairOff { a, b, c } => match (row[a], row[b]) {
                (V::I(x), V::I(y)) => Some(x.wrapping_add(c) <= y),
                _ => None,
            },
            Atom::Le { f, c } => int(row[f]).map(|x| x <= c),
            Atom::Ge { f, c } => int(row[f]).map(|x| x >= c),
            Atom::Mod { f, c } => int(row[f]).map(|x| x.wrapping_rem(c) == 0),
            Atom::Eq { f, c } => int(row[f]).map(|x| x == c),
            Atom::Ne { f, c } => int(row[f]).map(|x| x != c),
            Atom::SymEq { f, s } => match row[f] {
                V::S(x) => Some(x == s),
                _ => None,
            },
            Atom::SymNe { f, s } => match row[f] {
                V::S(x) => Some(x != s),
                _ => None,
            },
        }
    }

    fn text(&self, t: &Table) -> String {
        let n = |i: usize| t.names[i].as_str();
        match *self {
            Atom::Bool { f, want: true } => n(f).to_string(),
            Atom::Bool { f, want: false } => format!("!{}", n(f)),
            Atom::Pair { a, b, le } => format!("{} {} {}", n(a), if le { "<=" } else { "==" }, n(b)),
            Atom::ModPair { a, b } => format!("{} % {} == 0", n(a), n(b)),
            Atom::PairOff { a, b, c } => format!("{} + {c} <= {}", n(a), n(b)),
            Atom::Le { f, c } => format!("{} <= {c}", n(f)),
            Atom::Ge { f, c } => format!("{} >= {c}", n(f)),
            Atom::Mod { f, c } => format!("{} % {c} == 0", n(f)),
            Atom::Eq { f, c } => format!("{} == {c}", n(f)),
            Atom::Ne { f, c } => format!("{} != {c}", n(f)),
            Atom::SymEq { f, s } => format!("{} == {}", n(f), t.syms[s as usize]),
            Atom::SymNe { f, s } => format!("{} != {}", n(f), t.syms[s as usize]),
        }
    }

    /// Sort key: form, then the facts' order.
    fn key(&self, t: &Table) -> (u32, Vec<(u8, u64, String)>) {
        (self.rank(), self.facts().into_iter().map(|f| t.order[f].clone()).collect())
    }
}

/// Whether a construct fact and a kernel / target fact speak of the same thing (share a word
/// other than `kernel`, `target`, `max`, `min`, `per`): `smem_bytes` and `target_smem_max` do,
/// `align` and `target_max_threads_per_block` do not.
fn related(a: &str, b: &str) -> bool {
    const GENERIC: &[&str] = &["kernel", "target", "max", "min", "per", "has", "count", "sm"];
    let words = |s: &str| -> BTreeSet<String> {
        s.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty() && !GENERIC.contains(w) && !w.chars().all(|c| c.is_ascii_digit())).map(str::to_string).collect()
    };
    !words(a).is_disjoint(&words(b))
}

fn int(v: V) -> Option<i64> {
    match v {
        V::I(x) => Some(x),
        _ => None,
    }
}

const POW2: [i64; 10] = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

fn largest_pow2_in(lo: i64, hi: i64) -> Option<i64> {
    POW2.iter().rev().copied().chain([1]).find(|p| *p >= lo && *p <= hi)
}

fn smallest_pow2_in(lo: i64, hi: i64) -> Option<i64> {
    [1].into_iter().chain(POW2).find(|p| *p >= lo && *p <= hi)
}

/// Subsets of the table the search runs on (all of it, or the part a guard selects).
struct View<'t> {
    t: &'t Table,
    accepted: Vec<&'t [V]>,
    /// Per failing program, its instances in scope.
    failing: Vec<Vec<&'t [V]>>,
}

impl<'t> View<'t> {
    fn all(t: &'t Table) -> View<'t> {
        View { t, accepted: t.accepted.iter().map(|r| r.as_slice()).collect(), failing: t.failing.iter().map(|p| p.iter().map(|r| r.as_slice()).collect()).collect() }
    }

    fn holds_on_accepted(&self, a: &Atom) -> bool {
        self.accepted.iter().all(|r| a.eval(r) == Some(true))
    }

    /// Failing programs (indices) with an instance that violates `a`.
    fn violated(&self, a: &Atom) -> Vec<bool> {
        self.failing.iter().map(|p| p.iter().any(|r| a.eval(r) == Some(false))).collect()
    }

    fn separates(&self, a: &Atom) -> bool {
        !self.failing.is_empty() && self.holds_on_accepted(a) && self.violated(a).iter().all(|v| *v)
    }

    fn ints(&self, f: usize) -> (Vec<i64>, Vec<Vec<i64>>) {
        let acc = self.accepted.iter().filter_map(|r| int(r[f])).collect();
        let fail = self.failing.iter().map(|p| p.iter().filter_map(|r| int(r[f])).collect()).collect();
        (acc, fail)
    }

    /// The invariants of the accepted instances. With `separate`, constants are chosen to
    /// separate the failing programs where possible (level 1); without, at the accepted boundary
    /// (most violations, for combining).
    fn invariants(&self, separate: bool) -> Vec<Atom> {
        let t = self.t;
        let mut out = Vec::new();
        if self.accepted.is_empty() {
            return out;
        }
        for f in t.facts_of(Ty::Bool) {
            let first = self.accepted[0][f];
            if let V::B(b) = first {
                let a = Atom::Bool { f, want: b };
                if self.holds_on_accepted(&a) {
                    out.push(a);
                }
            }
        }
        let ints = t.facts_of(Ty::Int);
        let own: Vec<usize> = ints.iter().copied().filter(|f| t.order[*f].0 <= 1).collect();
        for &a in &own {
            for &b in &ints {
                if a == b || t.order[b].0 <= t.order[a].0 && t.order[a].0 == 1 {
                    continue;
                }
                let other_is_program_fact = t.order[b].0 != 0;
                if other_is_program_fact && !related(&t.names[a], &t.names[b]) {
                    continue;
                }
                let all_eq = self.accepted.iter().all(|r| r[a] == r[b]);
                if other_is_program_fact {
                    // Kernel and target facts bound a construct's fact (`bytes <= target_smem_max`);
                    // equalities and divisibility by them are coincidences.
                    let le = Atom::Pair { a, b, le: true };
                    if !all_eq && self.holds_on_accepted(&le) {
                        out.push(le);
                        // Headroom under the limit: `a + c <= b`, c the smallest power of two
                        // above every failing program's headroom (or the accepted boundary).
                        let gap = |r: &[V]| -> Option<i64> { Some(int(r[b])? - int(r[a])?) };
                        let min_acc = self.accepted.iter().filter_map(|r| gap(r)).min();
                        let lo = if separate && !self.failing.is_empty() {
                            self.failing.iter().map(|p| p.iter().filter_map(|r| gap(r)).min()).collect::<Option<Vec<i64>>>().and_then(|v| v.into_iter().max())
                        } else {
                            None
                        };
                        if let Some(m) = min_acc.filter(|m| *m > 0) {
                            let c = match lo {
                                Some(l) if l >= 0 && l < m => smallest_pow2_in(l + 1, m).unwrap_or(l + 1),
                                _ => m,
                            };
                            out.push(Atom::PairOff { a, b, c });
                        }
                    }
                    continue;
                }
                if t.order[a].0 != 0 {
                    continue;
                }
                if all_eq {
                    if t.order[a] < t.order[b] {
                        out.push(Atom::Pair { a, b, le: false });
                    }
                    continue;
                }
                let le = Atom::Pair { a, b, le: true };
                if self.holds_on_accepted(&le) {
                    out.push(le);
                }
                let m = Atom::ModPair { a, b };
                let trivial = self.accepted.iter().all(|r| r[b] == V::I(1));
                if !trivial && self.holds_on_accepted(&m) {
                    out.push(m);
                }
            }
            // Reverse relations with kernel/target facts on the left are not construct facts.
        }
        for &f in &ints {
            let (acc, fail) = self.ints(f);
            if acc.len() != self.accepted.len() || acc.is_empty() {
                continue;
            }
            let (min_a, max_a) = (*acc.iter().min().unwrap_or(&0), *acc.iter().max().unwrap_or(&0));
            let constant = min_a == max_a;
            let sep_ok = separate && fail.iter().all(|v| !v.is_empty());
            // Thresholds.
            let hi = if sep_ok { fail.iter().map(|v| *v.iter().max().unwrap_or(&i64::MIN)).min() } else { None };
            let c_le = match hi {
                Some(h) if h > max_a => largest_pow2_in(max_a, h - 1).unwrap_or(max_a),
                _ => max_a,
            };
            let lo = if sep_ok { fail.iter().map(|v| *v.iter().min().unwrap_or(&i64::MAX)).max() } else { None };
            let c_ge = match lo {
                Some(l) if l < min_a => smallest_pow2_in(l + 1, min_a).unwrap_or(min_a),
                _ => min_a,
            };
            if !constant {
                out.push(Atom::Le { f, c: c_le });
                out.push(Atom::Ge { f, c: c_ge });
            } else {
                // A constant fact: thresholds only where they separate (else `== c` says it).
                if hi.is_some_and(|h| h > max_a) {
                    out.push(Atom::Le { f, c: c_le });
                }
                if lo.is_some_and(|l| l < min_a) {
                    out.push(Atom::Ge { f, c: c_ge });
                }
            }
            // Divisibility.
            if acc.iter().any(|x| *x != 0) {
                let divides: Vec<i64> = POW2.iter().copied().filter(|c| acc.iter().all(|x| x % c == 0)).collect();
                let pick = if separate {
                    divides.iter().copied().find(|c| fail.iter().all(|v| v.iter().any(|x| x % c != 0))).or(divides.last().copied())
                } else {
                    divides.last().copied()
                };
                if let Some(c) = pick {
                    out.push(Atom::Mod { f, c });
                }
            }
            if constant {
                out.push(Atom::Eq { f, c: min_a });
            }
            // Blacklist: a value every failing program shows and no accepted instance has.
            if separate && !fail.is_empty() {
                let acc_set: BTreeSet<i64> = acc.iter().copied().collect();
                let mut common: Option<BTreeSet<i64>> = None;
                for v in &fail {
                    let s: BTreeSet<i64> = v.iter().copied().filter(|x| !acc_set.contains(x)).collect();
                    common = Some(match common {
                        None => s,
                        Some(c) => c.intersection(&s).copied().collect(),
                    });
                }
                if let Some(c) = common.and_then(|c| c.into_iter().next()) {
                    out.push(Atom::Ne { f, c });
                }
            }
        }
        for f in t.facts_of(Ty::Sym) {
            let vals: BTreeSet<u32> = self.accepted.iter().filter_map(|r| if let V::S(s) = r[f] { Some(s) } else { None }).collect();
            if vals.len() == 1 {
                out.push(Atom::SymEq { f, s: *vals.iter().next().unwrap_or(&0) });
            }
            if separate {
                let mut common: Option<BTreeSet<u32>> = None;
                for p in &self.failing {
                    let s: BTreeSet<u32> = p.iter().filter_map(|r| if let V::S(s) = r[f] { Some(s) } else { None }).filter(|s| !vals.contains(s)).collect();
                    common = Some(match common {
                        None => s,
                        Some(c) => c.intersection(&s).copied().collect(),
                    });
                }
                if let Some(s) = common.and_then(|c| c.into_iter().next()) {
                    out.push(Atom::SymNe { f, s });
                }
            }
        }
        out.retain(|a| self.holds_on_accepted(a));
        out.sort_by_key(|a| a.key(t));
        out.dedup();
        out
    }
}

/// The preconditions a guarded rule may have: a boolean fact either way, a construct's own
/// integer fact being non-zero, a symbol fact equal to a value a failing program shows.
fn guards(t: &Table, view: &View) -> Vec<Atom> {
    let mut guards: Vec<Atom> = Vec::new();
    for f in t.facts_of(Ty::Bool) {
        guards.push(Atom::Bool { f, want: true });
        guards.push(Atom::Bool { f, want: false });
    }
    for f in t.facts_of(Ty::Int) {
        if t.order[f].0 == 0 {
            guards.push(Atom::Ne { f, c: 0 });
        }
    }
    for f in t.facts_of(Ty::Sym) {
        let vals: BTreeSet<u32> = view.failing.iter().flatten().filter_map(|r| if let V::S(s) = r[f] { Some(s) } else { None }).collect();
        for s in vals {
            guards.push(Atom::SymEq { f, s });
        }
    }
    guards
}

impl<'t> View<'t> {
    /// The part of the data guard `g` selects: `None` when `g` is undecidable on an accepted
    /// instance, or selects no accepted instance, or all of them (it would guard nothing).
    fn guarded(&self, g: &Atom) -> Option<View<'t>> {
        if !self.accepted.iter().all(|r| g.eval(r).is_some()) {
            return None;
        }
        let sub = View {
            t: self.t,
            accepted: self.accepted.iter().copied().filter(|r| g.eval(r) == Some(true)).collect(),
            failing: self.failing.iter().map(|p| p.iter().copied().filter(|r| g.eval(r) == Some(true)).collect()).collect(),
        };
        (!sub.accepted.is_empty() && sub.accepted.len() != self.accepted.len()).then_some(sub)
    }

    /// Per value of a fact that no accepted instance has (what a blacklist `f != c` names): the
    /// failing programs with an instance showing it.
    fn novel_values(&self) -> Vec<Vec<bool>> {
        let t = self.t;
        let mut out = Vec::new();
        for f in t.facts_of(Ty::Int).into_iter().chain(t.facts_of(Ty::Sym)) {
            let acc: BTreeSet<V> = self.accepted.iter().map(|r| r[f]).collect();
            let mut novel: BTreeMap<V, Vec<bool>> = BTreeMap::new();
            for (i, p) in self.failing.iter().enumerate() {
                for r in p {
                    if matches!(r[f], V::I(_) | V::S(_)) && !acc.contains(&r[f]) {
                        novel.entry(r[f]).or_insert_with(|| vec![false; self.failing.len()])[i] = true;
                    }
                }
            }
            out.extend(novel.into_values());
        }
        out
    }
}

/// Why no rule could be synthesized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SynthError {
    NoFailingInstances(Vec<String>),
    NoAcceptedInstances(String),
    NoSeparatingPredicate(String),
    /// Neither all failing programs nor any two or more of them are separated, over any of
    /// these constructs.
    NoPartialPredicate(Vec<String>),
    Invalid(String),
}

impl std::fmt::Display for SynthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SynthError::NoFailingInstances(why) => write!(f, "no failing program is usable: {}", why.join("; ")),
            SynthError::NoAcceptedInstances(k) => write!(f, "the corpus has no instance of `{k}` to learn what is accepted"),
            SynthError::NoSeparatingPredicate(k) => write!(f, "no predicate of up to two atoms over the facts of `{k}` separates the failing programs from the corpus"),
            SynthError::NoPartialPredicate(k) => write!(
                f,
                "no predicate of up to two atoms separates the failing programs, or any two or more of them, from the corpus over the facts of {}",
                if k.len() > 3 { format!("any of {} constructs (`{}`, ...)", k.len(), k[..3].join("`, `")) } else { format!("`{}`", k.join("`, `")) }
            ),
            SynthError::Invalid(m) => write!(f, "{m}"),
        }
    }
}

/// Every candidate of the simplest level that has any, best first (at most `max`); level 2 is
/// searched only when level 1 has none.
pub fn search(input: &SearchInput, seed: u64, max: usize) -> Vec<Candidate> {
    let literals = literal_words();
    let t = Table::build(input, seed, &literals);
    search_view(&t, &View::all(&t), max)
}

/// At most this many subsets of the failing programs are searched by [`search_subset`].
pub const MAX_SUBSETS: usize = 64;

/// What [`search_subset`] found: the failing programs (indices into the input) the candidates
/// explain — each of them violates every candidate — and the candidates, best first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubsetResult {
    pub explained: Vec<usize>,
    pub candidates: Vec<Candidate>,
}

/// The predicates that separate the **largest subset** of the failing programs (at least `min`
/// of them) from the accepted instances, for a bucket where no predicate separates them all (a
/// wrong answer can have a cause no fact shows — a wrong data mapping — beside one the facts
/// do show). Every candidate still holds on every accepted instance.
///
/// When [`search`] separates every program, that is the answer. Otherwise each family of
/// predicates the search knows (an atom with its constant at the accepted boundary, a value no
/// accepted instance has, a conjunction of two invariants, an invariant under a guard) is
/// evaluated at its widest: the failing programs it can explain at most. A predicate that
/// separates a set of programs belongs to a family whose widest set contains that set, and that
/// widest set is itself separable, so the largest of these sets is the largest separable subset.
/// The sets are then searched from the largest down, each exactly as [`search`] searches a whole
/// bucket (its constants chosen between the accepted values and the subset's); among the
/// separable sets of the largest size, the simplest candidate wins (level, then the sets' order:
/// lexicographic over program indices). Deterministic under the seed; at most [`MAX_SUBSETS`]
/// sets are searched.
pub fn search_subset(input: &SearchInput, seed: u64, max: usize, min: usize) -> Option<SubsetResult> {
    let min = min.max(1);
    let n = input.failing.len();
    if n < min {
        return None;
    }
    let literals = literal_words();
    let t = Table::build(input, seed, &literals);
    let all = View::all(&t);
    let full = search_view(&t, &all, max);
    if !full.is_empty() {
        return Some(SubsetResult { explained: (0..n).collect(), candidates: full });
    }
    // The widest set of programs each family of predicates explains.
    let mut widest: BTreeSet<Vec<bool>> = BTreeSet::new();
    let inv: Vec<Vec<bool>> = all.invariants(false).iter().map(|a| all.violated(a)).filter(|v| v.iter().any(|x| *x)).collect();
    for (i, a) in inv.iter().enumerate() {
        widest.insert(a.clone());
        for b in &inv[i + 1..] {
            widest.insert(a.iter().zip(b).map(|(x, y)| *x || *y).collect());
        }
    }
    widest.extend(all.novel_values());
    for g in guards(&t, &all) {
        let Some(sub) = all.guarded(&g) else { continue };
        widest.extend(sub.invariants(false).iter().map(|a| sub.violated(a)));
        widest.extend(sub.novel_values());
    }
    let mut sets: Vec<Vec<usize>> =
        widest.into_iter().map(|v| v.iter().enumerate().filter(|(_, x)| **x).map(|(i, _)| i).collect::<Vec<usize>>()).filter(|s| s.len() >= min && s.len() < n).collect();
    sets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    let mut best: Option<SubsetResult> = None;
    for idx in sets.into_iter().take(MAX_SUBSETS) {
        if best.as_ref().is_some_and(|b| idx.len() < b.explained.len()) {
            break;
        }
        let view = View { t: &t, accepted: all.accepted.clone(), failing: idx.iter().map(|i| all.failing[*i].clone()).collect() };
        let cands = search_view(&t, &view, max);
        let Some(first) = cands.first() else { continue };
        if best.as_ref().is_none_or(|b| first.level < b.candidates[0].level) {
            best = Some(SubsetResult { explained: idx, candidates: cands });
        }
    }
    best
}

fn search_view<'t>(t: &'t Table, view: &View<'t>, max: usize) -> Vec<Candidate> {
    let cand = |when: Option<&Atom>, req: &[&Atom], level: u8| -> Candidate {
        let mut facts: Vec<String> = Vec::new();
        for a in when.into_iter().chain(req.iter().copied()) {
            for f in a.facts() {
                if !facts.contains(&t.names[f]) {
                    facts.push(t.names[f].clone());
                }
            }
        }
        let form = when.map(|w| format!("guard {} → ", w.form())).unwrap_or_default() + &req.iter().map(|a| a.form()).collect::<Vec<_>>().join(" && ");
        Candidate { when: when.map(|w| w.text(t)), require: req.iter().map(|a| a.text(t)).collect::<Vec<_>>().join(" && "), level, form, facts }
    };
    // Level 1.
    let level1: Vec<Candidate> = view.invariants(true).iter().filter(|a| view.separates(a)).take(max).map(|a| cand(None, &[a], 1)).collect();
    if !level1.is_empty() {
        return level1;
    }
    // Level 2: conjunctions of two invariants (set cover of the failing programs) ...
    let n = view.failing.len();
    let inv: Vec<(Atom, Vec<bool>)> = view.invariants(false).into_iter().map(|a| (a, view.violated(&a))).filter(|(_, v)| v.iter().any(|x| *x)).collect();
    let mut scored: Vec<(u32, usize, Candidate)> = Vec::new();
    for i in 0..inv.len() {
        for j in i + 1..inv.len() {
            if (0..n).all(|k| inv[i].1[k] || inv[j].1[k]) {
                let (a, b) = (&inv[i].0, &inv[j].0);
                scored.push((a.rank() + b.rank(), 0, cand(None, &[a, b], 2)));
            }
        }
    }
    // ... and guarded invariants: `when g` selects part of the data, `require b` holds on the
    // accepted part and fails on an instance of every failing program inside it.
    for g in &guards(t, view) {
        let Some(sub) = view.guarded(g) else { continue };
        if sub.failing.iter().any(|p| p.is_empty()) {
            continue;
        }
        if let Some(b) = sub.invariants(true).into_iter().find(|b| sub.separates(b)) {
            scored.push((g.rank() + b.rank(), 1, cand(Some(g), &[&b], 2)));
        }
    }
    scored.sort_by_key(|x| (x.0, x.1));
    scored.into_iter().take(max).map(|(_, _, c)| c).collect()
}

// ─── From a bucket to a rule proposal ────────────────────────────────────────────────────────────

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
        Ok(Base { tree, frontend, rules, rule_files, targets, corpus_modules, corpus_facts, negatives, corpus_cases: corpus.cases.len() })
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
    /// Files to commit: (path relative to the repository root, contents).
    #[serde(skip)]
    pub files: Vec<(String, String)>,
    pub changelog: String,
}

/// Programs committed as negative corpus cases, at most.
pub const MAX_NEGATIVE_CASES: usize = 4;

/// Search a rule for `bucket` over `programs` (its failing programs) against `base`.
pub fn draft_rule(base: &Base, bucket: &BucketInfo, programs: &[Program], code: &str, seed: u64) -> Result<RuleDraft, SynthError> {
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
        match draft_for_construct(base, bucket, &usable, &skipped, kind, op.as_deref(), code, seed, Explain::All) {
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
                if let Ok(mut d) = draft_for_construct(base, bucket, &usable, &skipped, kind, None, code, seed, Explain::All) {
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
            match draft_for_construct(base, bucket, &usable, &skipped, kind, op.as_deref(), code, seed, Explain::Largest { min: 2 }) {
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
        let mut attempt = draft_for_construct(base, bucket, usable, &skipped, ConstructKind::Kernel, None, code, seed, explain);
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
            let stem = if n == 1 { format!("{code}-{name}") } else { format!("{code}-{name}-{n}") };
            let header = format!(
                "# {code} ({name}): evolved negative case — failing program {} of evidence bucket {}.\n# {}\n",
                short(&p.hash),
                bucket.id,
                one_line(&bucket.signature, 150)
            );
            let program = format!("{header}{}", p.source);
            let out = fe.check(&program);
            let mut findings = cake::corpus::tiers::findings_at(&program, &out.diagnostics, Severity::Error);
            findings.sort();
            let target = out.module.as_ref().map(|m| m.target.clone()).unwrap_or_else(|| "sm_90a".into());
            let list = findings.iter().map(|f| format!("{{ code = \"{}\", line = {}, column = {} }}", f.code, f.line, f.column)).collect::<Vec<_>>().join(", ");
            let manifest = format!(
                "program = \"{stem}.cake\"\ntarget = \"{target}\"\ntiers = [\"static\"]\nnote = \"evolved by cake-evolve-compiler: failing program {} of bucket {} (evidence {})\"\n\n[expect]\nverdict = \"reject\"\nfindings = [{list}]\n",
                p.hash,
                bucket.id,
                toml_escape(&bucket.evidence_ids.iter().take(6).cloned().collect::<Vec<_>>().join(", "))
            );
            files.push((format!("corpus/verifier-negative/{stem}.cake"), program));
            files.push((format!("corpus/verifier-negative/{stem}.toml"), manifest));
        }
        let changelog = format!(
            "- Evolved verifier rule {code} `{name}` ({category}): on every `{construct}`{} require `{}`; from evidence bucket {} ({}).",
            cand.when.as_ref().map(|w| format!(" where `{w}`")).unwrap_or_default(),
            cand.require,
            bucket.id,
            if unexplained.is_empty() {
                format!("{} failing programs", failing_used.len())
            } else {
                format!(
                    "explains {} of its {} failing programs, not {}",
                    failing_used.len(),
                    failing_used.len() + unexplained.len(),
                    unexplained.iter().map(|(_, k)| format!("`{k}`")).collect::<Vec<_>>().join(", ")
                )
            }
        );
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
                if cand.form.contains("blacklist") || cand.form.contains("constant") {
                    s.push(format!("review: the predicate is a {} — it names the failing or accepted value itself and may not generalize", cand.form));
                }
                s
            },
            accepted_programs,
            accepted_instances: input.accepted.len(),
            files,
            changelog,
        });
    }
    Err(SynthError::Invalid(format!("every candidate failed validation: {}", problems.join("; "))))
}

/// Rewrite the single-line `findings = [...]` of a manifest's `[expect]` (`None` when there is
/// no such line).
fn set_findings(manifest: &str, findings: &[cake::corpus::FindingSpec]) -> Option<String> {
    let list = findings.iter().map(|f| format!("{{ code = \"{}\", line = {}, column = {} }}", f.code, f.line, f.column)).collect::<Vec<_>>().join(", ");
    let mut done = false;
    let mut out = Vec::new();
    let mut in_expect = false;
    for line in manifest.lines() {
        let t = line.trim_start();
        if t.starts_with('[') {
            in_expect = t.starts_with("[expect]");
        }
        if in_expect && !done && t.starts_with("findings") && t.trim_end().ends_with(']') && t.matches('[').count() == t.matches(']').count() {
            out.push(format!("findings = [{list}]"));
            done = true;
        } else {
            out.push(line.to_string());
        }
    }
    done.then(|| out.join("\n") + "\n")
}

/// The base front end with another rule set.
pub fn with_rules(base: &Base, rules: &RuleSet) -> Frontend {
    let mut fe = base.frontend.clone();
    let rules = std::sync::Arc::new(rules.clone());
    fe.verifier = Some(std::sync::Arc::new(move |m, t| cake::verify::verify_with(m, t, &rules)));
    fe
}

/// `wgmma-b-dim-0-multiple-of-16`.
pub fn rule_name(construct: &str, c: &Candidate) -> String {
    let head = construct.split(':').next_back().unwrap_or(construct).replace('*', "call");
    let mut words: Vec<String> = vec![head];
    let describe = |atom: &str| -> String {
        let t = atom.trim();
        let word = |s: &str| s.replace(" + ", " plus ").replace(['(', ')'], " ").replace('-', "minus ").split([' ', '_']).filter(|w| !w.is_empty()).collect::<Vec<_>>().join("-");
        if let Some(rest) = t.strip_prefix('!') {
            return format!("not-{}", word(rest));
        }
        for (op, w) in [(" % ", "multiple-of"), (" <= ", "at-most"), (" >= ", "at-least"), (" == ", "equals"), (" != ", "not")] {
            if let Some((l, r)) = t.split_once(op) {
                let r = r.trim_end_matches(" == 0");
                return format!("{}-{w}-{}", word(l), word(r));
            }
        }
        word(t)
    };
    if let Some(w) = &c.when {
        words.push(format!("if-{}", describe(w)));
    }
    for atom in c.require.split(" && ") {
        words.push(describe(atom));
    }
    let mut s = words.join("-").to_ascii_lowercase();
    s.retain(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-');
    while s.contains("--") {
        s = s.replace("--", "-");
    }
    let mut s = s.trim_matches('-').to_string();
    if s.len() > 60 {
        s.truncate(60);
        s = s.trim_end_matches('-').to_string();
    }
    s
}

fn toml_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', " ")
}

/// Braces are placeholders in rule messages: double them.
fn brace_escape(s: &str) -> String {
    s.replace('{', "{{").replace('}', "}}")
}

fn one_line(s: &str, max: usize) -> String {
    let s: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > max {
        format!("{}…", s.chars().take(max).collect::<String>())
    } else {
        s
    }
}

pub fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

#[allow(clippy::too_many_arguments)]
fn rule_toml(
    code: &str,
    name: &str,
    category: &str,
    construct: &str,
    c: &Candidate,
    bucket: &BucketInfo,
    failing: usize,
    unexplained: &[(String, String)],
    accepted_programs: usize,
    accepted_instances: usize,
    example: &str,
) -> String {
    let sig = one_line(&bucket.signature, 200);
    let evidence = bucket.evidence_ids.iter().take(8).map(|e| short(e).to_string()).collect::<Vec<_>>().join(", ");
    let more = if bucket.evidence_ids.len() > 8 { format!(" and {} more", bucket.evidence_ids.len() - 8) } else { String::new() };
    let when = c.when.as_ref().map(|w| format!("when = \"{}\"\n", toml_escape(w))).unwrap_or_default();
    let mut s = String::new();
    s.push_str(&format!("# Evolved by cake-evolve-compiler from evidence bucket {} — review before trusting it.\n", bucket.id));
    s.push_str(&format!("code = \"{code}\"\nname = \"{name}\"\ncategory = \"{category}\"\nseverity = \"error\"\napplies_to = \"{construct}\"\n{when}require = \"{}\"\n", toml_escape(&c.require)));
    let which = if unexplained.is_empty() { "every program".to_string() } else { format!("{failing} of the {} programs", failing + unexplained.len()) };
    s.push_str(&format!(
        "message = \"`{{name}}` violates `{}`, which {which} of evidence bucket {} that failed after compilation violated\"\n",
        toml_escape(&brace_escape(&c.require)),
        toml_escape(&bucket.id)
    ));
    s.push_str("label = \"fails the evolved rule\"\n");
    s.push_str(&format!("primary = \"{}\"\n", primary_span_key(parse_construct(construct).map(|(k, _)| k).unwrap_or(ConstructKind::Kernel))));
    s.push_str(&format!(
        "help = \"{}\"\n",
        toml_escape(&brace_escape(&format!("change the program so that `{}` holds: in the evidence, programs where it did not failed with: {}", c.require, one_line(&sig, 120))))
    ));
    s.push_str(&format!("notes = [\"{}\"]\n", toml_escape(&brace_escape(&format!("synthesized ({} form, level {}) from bucket {}; evidence {evidence}{more}", c.form, c.level, bucket.id)))));
    s.push_str("\n[doc]\n");
    let scope = c.when.as_ref().map(|w| format!(" where `{w}`")).unwrap_or_default();
    s.push_str(&format!(
        "what = \"{}\"\n",
        toml_escape(&format!("Evolved rule: every `{construct}`{scope} satisfies `{}`.", c.require))
    ));
    s.push_str(&format!(
        "why = \"\"\"{}\"\"\"\n",
        format!(
            "Mined from run evidence: {failing} failing program(s) of bucket {} failed with `{}`. Every one of them violates `{}` on a `{construct}`, while all {accepted_instances} instance(s) of `{construct}` in the {accepted_programs} corpus program(s) that have one satisfy it. The predicate is the simplest of the rule language that separates the two ({} form); the hardware reason behind it is for the reviewer to confirm.{}",
            bucket.id,
            sig.replace("\"\"\"", "'''"),
            c.require,
            c.form,
            unexplained_text(failing, unexplained)
        )
        .replace('\\', "\\\\")
    ));
    s.push_str(&format!("example = \"\"\"{}\"\"\"\n", example.replace('\\', "\\\\").replace("\"\"\"", "'''")));
    s.push_str(&format!(
        "source = \"{}\"\n",
        toml_escape(&format!("cake-evolve-compiler evidence bucket {} (evidence {evidence}{more}); negative cases corpus/verifier-negative/{code}-{name}*.cake", bucket.id))
    ));
    s
}

/// What a rule's doc says of the failing programs it leaves unexplained ("" when none).
fn unexplained_text(explained: usize, unexplained: &[(String, String)]) -> String {
    if unexplained.is_empty() {
        return String::new();
    }
    let list = unexplained.iter().map(|(h, k)| format!("{} (kernel `{k}`)", short(h))).collect::<Vec<_>>().join(", ");
    format!(
        " No predicate separates every failing program of the bucket: this one explains {explained} of its {} failing programs and leaves unexplained {list}, which satisfy it: their wrong result has a cause no fact of the verifier shows (a wrong data mapping, say), and they are not among the rule's negative cases.",
        explained + unexplained.len()
    )
}

// ─── Primitives ──────────────────────────────────────────────────────────────────────────────────

/// The op name an "unknown operation" signature names (`unknown operation `foo``), if any.
pub fn unknown_op(signature: &str) -> Option<String> {
    let lower = signature.to_ascii_lowercase();
    let i = lower.find("unknown operation")?;
    let rest = &signature[i..];
    let start = rest.find('`')? + 1;
    let end = rest[start..].find('`')? + start;
    let name = &rest[start..end];
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')).then(|| name.to_string())
}

/// One call site of the missing op.
#[derive(Clone, Debug, PartialEq, Eq)]
struct CallSite {
    statement: bool,
    /// (named?, kind guessed from the argument)
    args: Vec<(Option<String>, String)>,
    text: String,
}

/// A drafted catalog entry for a missing op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrimitiveDraft {
    pub op: String,
    pub class: String,
    pub form: String,
    /// The catalog file it goes into (`compiler/catalog/memory.toml`).
    pub file: String,
    /// The `[[op]]` entry as TOML.
    pub entry: String,
    pub call_sites: usize,
    pub programs: usize,
    pub example: String,
    /// Present only when drafted (by an LLM): the hardware note and lowering note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lowering: Option<String>,
    /// What is still missing for the gates, in words.
    pub missing: Vec<String>,
}

fn class_for(name: &str) -> &'static str {
    let has = |w: &[&str]| w.iter().any(|x| name.contains(x));
    if has(&["mma", "gemm", "dot"]) {
        "compute"
    } else if has(&["load", "store", "copy", "tma", "gather", "scatter", "prefetch", "ldmatrix", "stmatrix"]) {
        "memory"
    } else if has(&["sync", "barrier", "arrive", "wait", "fence", "commit", "acquire", "release"]) {
        "sync"
    } else {
        "math"
    }
}

/// Kinds of the names a program declares (tensor → global, smem/view → smem, reg/let → frag,
/// pipeline, barrier, role, dim/const → int).
fn declared_kinds(file: &cake::syntax::ast::File) -> BTreeMap<String, &'static str> {
    use cake::syntax::ast::{ItemKind, StmtKind};
    let mut k = BTreeMap::new();
    fn walk(stmts: &[cake::syntax::ast::Stmt], k: &mut BTreeMap<String, &'static str>) {
        for s in stmts {
            match &s.kind {
                StmtKind::Reg { name, .. } | StmtKind::Let { name, .. } => {
                    k.insert(name.name.clone(), "frag");
                }
                StmtKind::For { body, .. } => walk(&body.stmts, k),
                StmtKind::If { then_block, else_block, .. } => {
                    walk(&then_block.stmts, k);
                    if let Some(e) = else_block {
                        walk(&e.stmts, k);
                    }
                }
                _ => {}
            }
        }
    }
    for item in &file.items {
        match &item.kind {
            ItemKind::Tensor { name, .. } => {
                k.insert(name.name.clone(), "global");
            }
            ItemKind::Smem { name, .. } | ItemKind::View { name, .. } => {
                k.insert(name.name.clone(), "smem");
            }
            ItemKind::Pipeline { name, .. } => {
                k.insert(name.name.clone(), "pipeline");
            }
            ItemKind::Barrier { name, .. } => {
                k.insert(name.name.clone(), "barrier");
            }
            ItemKind::Role { name, .. } => {
                k.insert(name.name.clone(), "role");
            }
            ItemKind::Dim { name, .. } | ItemKind::Const { name, .. } => {
                k.insert(name.name.clone(), "int");
            }
            ItemKind::Scalar { name, .. } => {
                k.insert(name.name.clone(), "value");
            }
            ItemKind::On { body, .. } => walk(&body.stmts, &mut k),
            _ => {}
        }
    }
    k
}

fn arg_kind(e: &cake::syntax::ast::Expr, kinds: &BTreeMap<String, &'static str>) -> &'static str {
    use cake::syntax::ast::ExprKind;
    match &e.kind {
        ExprKind::Int(_) | ExprKind::Bytes(_) => "const_int",
        ExprKind::Float(_) | ExprKind::Inf => "float",
        ExprKind::Bool(_) => "value",
        ExprKind::Name(id) => {
            if cake::ir::DType::ALL.iter().any(|d| d.name() == id.name) {
                "dtype"
            } else {
                kinds.get(&id.name).copied().unwrap_or("value")
            }
        }
        ExprKind::Index { base, .. } | ExprKind::Paren(base) => arg_kind(base, kinds),
        ExprKind::Field { .. } => "int",
        _ => "value",
    }
}

fn call_sites(source: &str, op: &str) -> Vec<CallSite> {
    use cake::syntax::ast::{Expr, ExprKind, ItemKind, Stmt, StmtKind};
    let Ok(file) = cake::syntax::parse(source) else { return Vec::new() };
    let kinds = declared_kinds(&file);
    let mut out = Vec::new();
    fn expr(e: &Expr, statement: bool, op: &str, source: &str, kinds: &BTreeMap<String, &'static str>, out: &mut Vec<CallSite>) {
        match &e.kind {
            ExprKind::Call { func, args } => {
                if func.name == op {
                    let text = source.get(e.span.range()).unwrap_or("").to_string();
                    out.push(CallSite { statement, args: args.iter().map(|a| (a.name.as_ref().map(|n| n.name.clone()), arg_kind(&a.value, kinds).to_string())).collect(), text });
                }
                for a in args {
                    expr(&a.value, false, op, source, kinds, out);
                }
            }
            ExprKind::Field { base, .. } | ExprKind::Paren(base) => expr(base, false, op, source, kinds, out),
            ExprKind::Index { base, .. } => expr(base, false, op, source, kinds, out),
            ExprKind::Unary { operand, .. } => expr(operand, false, op, source, kinds, out),
            ExprKind::Binary { lhs, rhs, .. } => {
                expr(lhs, false, op, source, kinds, out);
                expr(rhs, false, op, source, kinds, out);
            }
            _ => {}
        }
    }
    fn stmts(ss: &[Stmt], op: &str, source: &str, kinds: &BTreeMap<String, &'static str>, out: &mut Vec<CallSite>) {
        for s in ss {
            match &s.kind {
                StmtKind::Call(e) => expr(e, true, op, source, kinds, out),
                StmtKind::Let { value, .. } => expr(value, false, op, source, kinds, out),
                StmtKind::Assign { target, value } => {
                    expr(target, false, op, source, kinds, out);
                    expr(value, false, op, source, kinds, out);
                }
                StmtKind::For { body, .. } => stmts(&body.stmts, op, source, kinds, out),
                StmtKind::If { cond, then_block, else_block } => {
                    expr(cond, false, op, source, kinds, out);
                    stmts(&then_block.stmts, op, source, kinds, out);
                    if let Some(e) = else_block {
                        stmts(&e.stmts, op, source, kinds, out);
                    }
                }
                StmtKind::Reg { .. } => {}
            }
        }
    }
    for item in &file.items {
        if let ItemKind::On { body, .. } = &item.kind {
            stmts(&body.stmts, op, source, &kinds, &mut out);
        }
    }
    out
}

/// Draft the catalog entry for `op` from the programs that call it. `hardware` and `lowering`
/// are the drafted notes (from an LLM), when there are any.
pub fn draft_primitive(op: &str, programs: &[Program], hardware: Option<String>, lowering: Option<String>) -> Result<PrimitiveDraft, String> {
    let mut sites = Vec::new();
    let mut progs = 0;
    for p in programs {
        let s = call_sites(&p.source, op);
        if !s.is_empty() {
            progs += 1;
        }
        sites.extend(s);
    }
    if sites.is_empty() {
        return Err(format!("no program of the bucket calls `{op}`"));
    }
    let statement = sites.iter().filter(|s| s.statement).count() * 2 >= sites.len();
    let form = if statement { "stmt" } else { "expr" };
    let class = class_for(op);
    // Params: the positional arity most call sites use; kinds by majority; named args as named params.
    let mut positional: Vec<BTreeMap<String, usize>> = Vec::new();
    let mut named: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for s in &sites {
        let mut i = 0;
        for (name, kind) in &s.args {
            match name {
                Some(n) => *named.entry(n.clone()).or_default().entry(kind.clone()).or_default() += 1,
                None => {
                    if positional.len() <= i {
                        positional.push(BTreeMap::new());
                    }
                    *positional[i].entry(kind.clone()).or_default() += 1;
                    i += 1;
                }
            }
        }
    }
    let majority = |m: &BTreeMap<String, usize>| m.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(|(k, _)| k.clone()).unwrap_or_else(|| "value".into());
    let names = ["dst", "src", "a", "b", "c", "d"];
    let mut params: Vec<(String, String, bool)> = Vec::new();
    for (i, m) in positional.iter().enumerate() {
        let kind = majority(m);
        let name = if form == "stmt" { names.get(i).map(|s| s.to_string()).unwrap_or(format!("arg{i}")) } else { ["x", "y", "z", "w"].get(i).map(|s| s.to_string()).unwrap_or(format!("arg{i}")) };
        params.push((name, kind, false));
    }
    for (n, m) in &named {
        params.push((n.clone(), majority(m), true));
    }
    let is_data = |k: &str| matches!(k, "frag" | "smem" | "global" | "mem");
    let has_facts = |k: &str| !matches!(k, "pipeline" | "barrier" | "sync" | "role" | "int");
    // Type rule: the data params agree on dtype; else rank facts; else `true`.
    let data: Vec<&(String, String, bool)> = params.iter().filter(|p| is_data(&p.1) || p.1 == "value").collect();
    let mut type_rule: Vec<String> = Vec::new();
    if data.len() >= 2 {
        type_rule.push(format!("dtype({}) == dtype({})", data[0].0, data[1].0));
    }
    if let Some(p) = data.first() {
        type_rule.push(format!("rank({}) >= 1", p.0));
    }
    if type_rule.is_empty() {
        if let Some(p) = params.iter().find(|p| has_facts(&p.1)) {
            type_rule.push(match p.1.as_str() {
                "const_int" => format!("value({}) >= 0", p.0),
                "dtype" => format!("{} in [f32, f16, bf16, f8e4m3, f8e5m2, i32, u32, i64, bool]", p.0),
                _ => format!("rank({}) >= 0", p.0),
            });
        } else {
            type_rule.push("true".into());
        }
    }
    // Effects: statement ops write their first data param and read the others; expressions are pure.
    let mut effects = Vec::new();
    let mut access: BTreeMap<String, &str> = BTreeMap::new();
    if form == "stmt" {
        let mut first = true;
        for (n, k, _) in &params {
            if is_data(k) {
                let a = if first { "write" } else { "read" };
                first = false;
                effects.push(format!("{{ on = \"{n}\", access = \"{a}\", proxy = \"generic\" }}"));
                access.insert(n.clone(), a);
            } else if matches!(k.as_str(), "pipeline" | "barrier" | "sync") {
                effects.push(format!("{{ on = \"{n}\", access = \"wait\" }}"));
            }
        }
        if effects.is_empty() {
            effects.push("{ on = \"@block\", access = \"wait\" }".to_string());
        }
    }
    let result = if form == "expr" { data.first().map(|p| format!("same({})", p.0)).unwrap_or_else(|| "same(x)".into()) } else { "none".into() };
    let example = sites.iter().map(|s| s.text.split_whitespace().collect::<Vec<_>>().join(" ")).find(|t| !t.is_empty()).unwrap_or_default();
    let mut t = String::new();
    t.push_str(&format!(
        "\n# Drafted by cake-evolve-compiler from {} call site(s) in {progs} program(s) that used `{op}` before the catalog had it.\n",
        sites.len()
    ));
    t.push_str("[[op]]\n");
    t.push_str(&format!("name = \"{op}\"\nclass = \"{class}\"\nform = \"{form}\"\n"));
    t.push_str(&format!("summary = \"{}\"\n", toml_escape(&format!("(drafted) the operation programs wrote as `{example}`"))));
    t.push_str("requires = []\nissue = \"thread\"\n");
    t.push_str("params = [\n");
    for (n, k, named) in &params {
        let acc = access.get(n).map(|a| format!(", access = \"{a}\"")).unwrap_or_default();
        let nm = if *named { ", named = true" } else { "" };
        t.push_str(&format!("  {{ name = \"{n}\", kind = \"{k}\"{acc}{nm} }},\n"));
    }
    t.push_str("]\n");
    t.push_str(&format!("type_rule = [{}]\n", type_rule.iter().map(|r| format!("\"{r}\"")).collect::<Vec<_>>().join(", ")));
    t.push_str(&format!("result = \"{result}\"\n"));
    if form == "expr" {
        t.push_str("pure = true\neffects = []\n");
    } else {
        t.push_str(&format!("effects = [\n{}]\n", effects.iter().map(|e| format!("  {e},\n")).collect::<String>()));
    }
    let mut missing = Vec::new();
    match &lowering {
        Some(l) => t.push_str(&format!("lowering = \"\"\"{}\"\"\"\n", l.replace('\\', "\\\\").replace("\"\"\"", "'''"))),
        None => {
            t.push_str("lowering = \"\"\n");
            missing.push("lowering: the engine cannot write one (no LLM configured, or it gave none)".to_string());
        }
    }
    match &hardware {
        Some(h) => t.push_str(&format!("hardware = \"\"\"{}\"\"\"\n", h.replace('\\', "\\\\").replace("\"\"\"", "'''"))),
        None => {
            t.push_str("hardware = \"\"\n");
            missing.push("hardware: what the op does on the hardware is not known to the engine (P8)".to_string());
        }
    }
    if example.contains(&format!("{op}(")) {
        t.push_str(&format!("example = \"{}\"\n", toml_escape(&example)));
    }
    Ok(PrimitiveDraft {
        op: op.to_string(),
        class: class.to_string(),
        form: form.to_string(),
        file: format!("compiler/catalog/{class}.toml"),
        entry: t,
        call_sites: sites.len(),
        programs: progs,
        example,
        hardware,
        lowering,
        missing,
    })
}

// ─── CHANGELOG ───────────────────────────────────────────────────────────────────────────────────

/// Insert `line` into a Keep-a-Changelog file: under `## [Unreleased]` → `### Added` (both
/// created when missing), after the section's last entry. Inserting a line already present is a
/// no-op.
pub fn changelog_insert(text: &str, line: &str) -> String {
    if text.lines().any(|l| l.trim_end() == line.trim_end()) {
        return text.to_string();
    }
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let unreleased = lines.iter().position(|l| l.trim_start().starts_with("## [Unreleased]"));
    let Some(u) = unreleased else {
        // No Unreleased section: put one after the title block.
        let at = lines.iter().position(|l| l.starts_with("## ")).unwrap_or(lines.len());
        let block = vec!["## [Unreleased]".to_string(), String::new(), "### Added".to_string(), line.to_string(), String::new()];
        lines.splice(at..at, block);
        return lines.join("\n") + "\n";
    };
    let end = lines.iter().enumerate().skip(u + 1).find(|(_, l)| l.starts_with("## ")).map(|(i, _)| i).unwrap_or(lines.len());
    let added = (u + 1..end).find(|i| lines[*i].trim() == "### Added");
    match added {
        Some(a) => {
            let section_end = (a + 1..end).find(|i| lines[*i].starts_with("### ")).unwrap_or(end);
            // After the last non-blank line of the section.
            let mut at = section_end;
            while at > a + 1 && lines[at - 1].trim().is_empty() {
                at -= 1;
            }
            lines.insert(at, line.to_string());
        }
        None => {
            lines.splice(u + 1..u + 1, vec![String::new(), "### Added".to_string(), line.to_string()]);
        }
    }
    lines.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fm(pairs: &[(&str, Value)]) -> FactMap {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    #[test]
    fn threshold_rounds_to_a_power_of_two_between_accepted_and_failing() {
        let acc = (0..4).map(|i| fm(&[("box", Value::Int(64 << (i % 2))), ("n", Value::Int(3))])).collect();
        let input = SearchInput { accepted: acc, failing: vec![vec![fm(&[("box", Value::Int(512)), ("n", Value::Int(3))])]] };
        let c = search(&input, 0, 4);
        assert_eq!(c[0].require, "box <= 256", "{c:?}");
    }

    #[test]
    fn relations_come_before_constants() {
        let acc = vec![fm(&[("a", Value::Int(16)), ("b", Value::Int(16))]), fm(&[("a", Value::Int(32)), ("b", Value::Int(32))])];
        let input = SearchInput { accepted: acc, failing: vec![vec![fm(&[("a", Value::Int(16)), ("b", Value::Int(32))])]] };
        assert_eq!(search(&input, 0, 1)[0].require, "a == b");
    }

    #[test]
    fn divisibility_picks_the_smallest_separating_power() {
        let acc = vec![fm(&[("n", Value::Int(64))]), fm(&[("n", Value::Int(128))]), fm(&[("n", Value::Int(256))])];
        let input = SearchInput { accepted: acc, failing: vec![vec![fm(&[("n", Value::Int(100))])], vec![fm(&[("n", Value::Int(200))])]] };
        let c = search(&input, 0, 8);
        // 100 fails `<= c` only above 256 (no), `>= 64`: 100 >= 64 (no); `% 16`: 100 and 200 both fail.
        assert!(c.iter().any(|x| x.require == "n % 16 == 0"), "{c:?}");
        assert_eq!(c[0].require, "n % 16 == 0");
    }

    #[test]
    fn guarded_rule_when_no_single_atom_separates() {
        // Swizzled regions need align % atom == 0; unswizzled ones do not care.
        let mk = |sw: i64, align: i64, atom: i64| fm(&[("swizzle", Value::Int(sw)), ("align", Value::Int(align)), ("swizzle_atom", Value::Int(atom))]);
        let acc = vec![mk(128, 1024, 1024), mk(0, 16, 16), mk(0, 128, 16), mk(64, 512, 512), mk(0, 8, 16)];
        let input = SearchInput { accepted: acc, failing: vec![vec![mk(128, 128, 1024)], vec![mk(64, 128, 512)]] };
        let c = search(&input, 0, 4);
        assert!(!c.is_empty());
        // A single relation separates here (align >= ... no: align % swizzle_atom fails for 8 % 16).
        assert!(c[0].level >= 1);
    }

    #[test]
    fn seed_changes_ties_deterministically() {
        let acc = vec![fm(&[("p", Value::Int(1)), ("q", Value::Int(1))]), fm(&[("p", Value::Int(2)), ("q", Value::Int(2))])];
        let input = SearchInput { accepted: acc, failing: vec![vec![fm(&[("p", Value::Int(9)), ("q", Value::Int(9))])]] };
        let a = search(&input, 7, 8);
        let b = search(&input, 7, 8);
        assert_eq!(a, b);
    }

    /// Shared regions as the facts describe them: bytes a stage has, bytes the TMA loads write.
    fn region(stage: i64, fill: i64, dim0: i64) -> FactMap {
        fm(&[("stage_bytes", Value::Int(stage)), ("tma_fill_bytes", Value::Int(fill)), ("dim(0)", Value::Int(dim0))])
    }

    /// Accepted: regions fully filled by TMA, and regions TMA does not write (cp.async, stores).
    fn accepted_regions() -> Vec<FactMap> {
        vec![region(16384, 16384, 128), region(32768, 32768, 256), region(8192, 0, 64), region(512, 512, 128), region(24576, 0, 192)]
    }

    #[test]
    fn subset_search_explains_the_largest_separable_part_of_a_bucket() {
        // Two programs whose TMA loads fill half a stage, and one (a wrong mapping) whose regions
        // look like the corpus's.
        let failing = vec![
            vec![region(16384, 8192, 128), region(32768, 32768, 256)],
            vec![region(16384, 16384, 128), region(32768, 16384, 256)],
            vec![region(16384, 16384, 128), region(32768, 32768, 256)],
        ];
        let input = SearchInput { accepted: accepted_regions(), failing };
        assert!(search(&input, 0, 8).is_empty(), "nothing separates all three");
        let r = search_subset(&input, 0, 8, 2).expect("two of them are separable");
        assert_eq!(r.explained, vec![0, 1]);
        assert_eq!(r.candidates[0].require, "tma_fill_bytes % stage_bytes == 0", "{:?}", r.candidates);
        assert_eq!(r.candidates[0].level, 1);
        // Deterministic, also under a seed.
        assert_eq!(search_subset(&input, 0, 8, 2), Some(r));
        assert_eq!(search_subset(&input, 7, 8, 2), search_subset(&input, 7, 8, 2));
    }

    #[test]
    fn subset_search_is_the_full_search_when_every_program_separates() {
        let failing = vec![vec![region(16384, 8192, 128)], vec![region(32768, 16384, 256)]];
        let input = SearchInput { accepted: accepted_regions(), failing };
        let full = search(&input, 0, 8);
        assert!(!full.is_empty());
        assert_eq!(search_subset(&input, 0, 8, 2), Some(SubsetResult { explained: vec![0, 1], candidates: full }));
    }

    #[test]
    fn subset_search_needs_at_least_min_programs() {
        // One program is separable, the other two look like the corpus.
        let failing = vec![vec![region(16384, 8192, 128)], vec![region(16384, 16384, 128)], vec![region(8192, 0, 64)]];
        let input = SearchInput { accepted: accepted_regions(), failing };
        assert_eq!(search_subset(&input, 0, 8, 2), None);
        let one = search_subset(&input, 0, 8, 1).expect("one program alone separates");
        assert_eq!(one.explained, vec![0]);
        // Fewer failing programs than the minimum: nothing to search.
        assert_eq!(search_subset(&SearchInput { accepted: accepted_regions(), failing: vec![vec![region(16384, 8192, 128)]] }, 0, 8, 2), None);
    }

    #[test]
    fn subset_search_prefers_more_programs_over_a_simpler_predicate() {
        // Three causes, one fact each: no two-atom predicate covers all six programs; `a` and
        // `b` together cover the five of the two largest groups (level 2), `b` alone only three.
        let row = |a: i64, b: i64, c: i64| fm(&[("a", Value::Int(a)), ("b", Value::Int(b)), ("c", Value::Int(c))]);
        let accepted = vec![row(1, 1, 2), row(2, 2, 1), row(1, 2, 2), row(2, 1, 1)];
        let failing = vec![vec![row(9, 1, 2)], vec![row(9, 2, 1)], vec![row(1, 9, 2)], vec![row(2, 9, 1)], vec![row(1, 9, 1)], vec![row(2, 1, 9)]];
        let input = SearchInput { accepted, failing };
        assert!(search(&input, 0, 8).is_empty(), "{:?}", search(&input, 0, 8));
        let r = search_subset(&input, 0, 8, 2).expect("a part separates");
        assert_eq!(r.explained, vec![0, 1, 2, 3, 4], "{r:?}");
        assert_eq!(r.candidates[0].level, 2);
        assert_eq!(r.candidates[0].require, "a <= 2 && b <= 2", "{r:?}");
    }

    #[test]
    fn changelog_goes_under_unreleased_added() {
        let t = "# Changelog\n\n## [Unreleased]\n\n### Added\n- one\n- two\n\n### Fixed\n- x\n\n## [0.1.0]\n- old\n";
        let out = changelog_insert(t, "- three");
        assert!(out.contains("- two\n- three\n\n### Fixed"), "{out}");
        assert_eq!(changelog_insert(&out, "- three"), out);
        let none = changelog_insert("# Changelog\n", "- a");
        assert!(none.contains("## [Unreleased]\n\n### Added\n- a"), "{none}");
    }

    #[test]
    fn unknown_op_from_signature() {
        assert_eq!(unknown_op("E0301 unknown operation `tma_store_async`").as_deref(), Some("tma_store_async"));
        assert_eq!(unknown_op("E0201 something else"), None);
    }

    #[test]
    fn rule_names_are_kebab_case() {
        let c = Candidate { when: None, require: "b_dim(0) % 16 == 0".into(), level: 1, form: String::new(), facts: vec![] };
        assert_eq!(rule_name("call:wgmma", &c), "wgmma-b-dim-0-multiple-of-16");
        let g = Candidate { when: Some("swizzle != 0".into()), require: "align % swizzle_atom == 0".into(), level: 2, form: String::new(), facts: vec![] };
        assert_eq!(rule_name("smem", &g), "smem-if-swizzle-not-0-align-multiple-of-swizzle-atom");
    }
}
