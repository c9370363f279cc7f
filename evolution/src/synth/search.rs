//! The predicate search: the verifier's facts of each construct instance as rows, and the
//! simplest predicate that holds on every accepted row and fails on a row of every failing
//! program (see the module docs of `synth`).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use cake::catalog::Catalog;
use cake::pred::Value;
use cake::target::TargetTable;
use cake::verify::{ConstructKind, FactSet, ModuleFacts};
use cake_merge_gates::generalization_gate::{ConstantSource, Source};
use serde::{Deserialize, Serialize};

use super::primary_span_key;

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
/// instances; the labelled variants; and the constants a rule may use.
#[derive(Clone, Debug, Default)]
pub struct SearchInput {
    pub accepted: Vec<FactMap>,
    pub failing: Vec<Vec<FactMap>>,
    /// Variants of the failing programs labelled by the real compiler (or the GPU). A passing
    /// variant's instances are accepted instances (the rule must hold on them); a failing
    /// variant's bound a threshold from the failing side. Together they fit a boundary
    /// ([`Source::Fitted`]) where no target or catalog value lies between them.
    pub labelled: Vec<Labelled>,
    /// The constants the data grounds (target table, catalog:
    /// [`cake_merge_gates::generalization_gate::grounded_constants`]). A threshold, divisor or
    /// constant is one of these or fitted from `labelled`; a value in the gap between training
    /// values is never generated.
    pub grounding: Vec<ConstantSource>,
    /// The facts that measure what the failure itself reports (elements never written:
    /// `unwritten_elements`). A predicate naming one of them comes first, at any level: it
    /// states the cause, where a simpler one over another fact only happens to separate the
    /// training programs.
    pub reported: Vec<String>,
    /// The construct is an op's call or argument: a catalog constant grounds only the facts its
    /// constraint compares it with (`dim(a, 0) == 64` grounds `dim(0)` of `a`, not `dim(-1)`).
    pub operand_facts: bool,
}

/// One labelled variant program: its instances of the construct searched.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Labelled {
    pub variant: String,
    pub fails: bool,
    pub instances: Vec<FactMap>,
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
    /// Where each of its constants comes from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constants: Vec<ConstantSource>,
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
    /// Per accepted row, the labelled variant it comes from (`None`: a corpus instance).
    acc_variant: Vec<Option<usize>>,
    /// The failing labelled variants: (index into `variants`, rows).
    lab_fail: Vec<(usize, Vec<Vec<V>>)>,
    variants: Vec<String>,
    grounding: Vec<ConstantSource>,
    /// Boundaries fitted from labelled variants during the search (atoms point into it).
    fits: RefCell<Vec<ConstantSource>>,
    /// The facts of [`SearchInput::reported`] the table has.
    reported: Vec<usize>,
    operand_facts: bool,
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
        // A fact unknown on some accepted instances is kept when a boolean fact, or a symbol
        // fact's value, says exactly where it is known (`regs` is known where `has_regs` holds; a
        // wgmma operand's `row_bytes` where `space == smem`): it can only be used under that
        // guard, where every accepted instance knows it.
        let known = |inst: &FactMap, k: &str, t: Ty| match (inst.get(k), t) {
            (Some(Value::Int(_)), Ty::Int) | (Some(Value::Bool(_)), Ty::Bool) => true,
            (Some(Value::Sym(s)), Ty::Sym) => literals.contains(s),
            _ => false,
        };
        let mut partial: BTreeMap<String, Ty> = BTreeMap::new();
        for inst in &input.accepted {
            for (k, v) in inst {
                let t = match v {
                    Value::Int(_) => Ty::Int,
                    Value::Bool(_) => Ty::Bool,
                    _ => continue,
                };
                partial.entry(k.clone()).or_insert(t);
            }
        }
        for inst in &input.accepted {
            types.retain(|k, t| known(inst, k, *t));
        }
        let bools: Vec<&String> = types.iter().filter(|(_, t)| **t == Ty::Bool).map(|(k, _)| k).collect();
        let mut sym_values: Vec<(&String, &Value)> = Vec::new();
        for (k, _) in types.iter().filter(|(_, t)| **t == Ty::Sym) {
            for v in input.accepted.iter().filter_map(|i| i.get(k.as_str())) {
                if !sym_values.contains(&(k, v)) {
                    sym_values.push((k, v));
                }
            }
        }
        let guarded_known: Vec<(String, Ty)> = partial
            .into_iter()
            .filter(|(k, t)| !types.contains_key(k) && input.accepted.iter().any(|i| known(i, k, *t)))
            .filter(|(k, t)| {
                bools.iter().any(|g| input.accepted.iter().all(|i| known(i, k, *t) == (i.get(g.as_str()) == Some(&Value::Bool(true)))))
                    || sym_values.iter().any(|(g, v)| input.accepted.iter().all(|i| known(i, k, *t) == (i.get(g.as_str()) == Some(*v))))
            })
            .collect();
        types.extend(guarded_known);
        let names: Vec<String> = types.keys().cloned().collect();
        let tys: Vec<Ty> = names.iter().map(|n| types[n]).collect();
        let order = names
            .iter()
            .map(|n| {
                let place = if n.starts_with("target") { 2 } else if n.starts_with("kernel_") { 1 } else { 0 };
                // Unseeded, a fact of one dimension (`box(-1)`) comes after the aggregates
                // (`max_box`): a rule over the aggregate says it of every dimension.
                let h = if seed == 0 {
                    u64::from(n.contains('('))
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
        let mut accepted: Vec<Vec<V>> = input.accepted.iter().map(|m| row(m, &mut syms)).collect();
        let mut acc_variant = vec![None; accepted.len()];
        let mut lab_fail = Vec::new();
        for (i, l) in input.labelled.iter().enumerate() {
            let rows: Vec<Vec<V>> = l.instances.iter().map(|m| row(m, &mut syms)).collect();
            if l.fails {
                lab_fail.push((i, rows));
            } else {
                acc_variant.extend(rows.iter().map(|_| Some(i)));
                accepted.extend(rows);
            }
        }
        let failing = input.failing.iter().map(|p| p.iter().map(|m| row(m, &mut syms)).collect()).collect();
        let variants = input.labelled.iter().map(|l| l.variant.clone()).collect();
        let reported = input.reported.iter().filter_map(|r| names.iter().position(|n| n == r)).collect();
        Table { names, types: tys, order, syms, accepted, failing, acc_variant, lab_fail, variants, grounding: input.grounding.clone(), fits: RefCell::new(Vec::new()), reported, operand_facts: input.operand_facts }
    }

    /// The source of an atom's constant.
    fn source(&self, s: Src) -> ConstantSource {
        match s {
            Src::G(i) => self.grounding[i as usize].clone(),
            Src::F(i) => self.fits.borrow()[i as usize].clone(),
        }
    }

    /// A grounded constant in `[lo, hi]`: a target-table value before a catalog value, then the
    /// highest (`high`) or lowest value.
    /// Whether grounded constant `g` may bound fact `f`: a target value any, a catalog value on an
    /// operand only the facts its constraint compares it with.
    fn may_ground(&self, g: &ConstantSource, f: usize) -> bool {
        match &g.source {
            Source::Catalog { rule, .. } if self.operand_facts => cake_merge_gates::generalization_gate::catalog_compares(rule, g.value, &self.names[f]),
            _ => true,
        }
    }

    fn grounded_in(&self, f: usize, lo: i64, hi: i64, high: bool) -> Option<(i64, Src)> {
        let class = |s: &ConstantSource| match s.source {
            Source::None | Source::Target { .. } => 0,
            Source::Catalog { .. } => 1,
            Source::Fitted { .. } => 2,
        };
        self.grounding
            .iter()
            .enumerate()
            .filter(|(_, g)| g.value >= lo && g.value <= hi && class(g) < 2 && self.may_ground(g, f))
            // Nearest the wanted end first (a target value that is smaller only by coincidence —
            // `max_cluster_size` 8 for a register floor — must not win over a closer one), then
            // target before catalog.
            .min_by_key(|(i, g)| (if high { -g.value } else { g.value }, class(g), *i))
            .map(|(i, g)| (g.value, Src::G(i as u32)))
    }

    fn fit(&self, value: i64, pass: i64, fail: i64, ids: BTreeSet<usize>) -> Src {
        let variants = ids.into_iter().map(|i| self.variants[i].clone()).collect();
        let mut fits = self.fits.borrow_mut();
        let c = ConstantSource { value, source: Source::Fitted { pass, fail, variants } };
        let i = fits.iter().position(|x| *x == c).unwrap_or_else(|| {
            fits.push(c);
            fits.len() - 1
        });
        Src::F(i as u32)
    }

    fn facts_of(&self, ty: Ty) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.names.len()).filter(|i| self.types[*i] == ty).collect();
        v.sort_by(|a, b| self.order[*a].cmp(&self.order[*b]));
        v
    }
}

/// Where an atom's constant comes from: a grounded constant of the table, or a fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Src {
    G(u32),
    F(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Atom {
    Bool { f: usize, want: bool },
    /// `a == b` (le = false) or `a <= b` (le = true), two facts of the construct.
    Pair { a: usize, b: usize, le: bool },
    /// `a <= b`: a construct fact under a related kernel or target limit.
    Limit { a: usize, b: usize },
    ModPair { a: usize, b: usize },
    Le { f: usize, c: i64, src: Src },
    Ge { f: usize, c: i64, src: Src },
    Mod { f: usize, c: i64, src: Src },
    Eq { f: usize, c: i64, src: Src },
    SymEq { f: usize, s: u32 },
    /// `f != 0`: only as a guard (the construct has an `f`), never a requirement.
    NonZero { f: usize },
}

impl Atom {
    fn rank(&self) -> u32 {
        match self {
            Atom::Bool { .. } => 0,
            // A bound by a kernel or target limit (`smem_bytes <= target_smem_max`).
            Atom::Limit { .. } => 1,
            Atom::Le { .. } => 2,
            Atom::Ge { .. } => 3,
            Atom::Mod { .. } => 4,
            Atom::Pair { le: false, .. } => 5,
            Atom::Pair { le: true, .. } => 6,
            Atom::ModPair { .. } => 7,
            Atom::Eq { .. } => 7,
            Atom::SymEq { .. } => 8,
            Atom::NonZero { .. } => 9,
        }
    }

    fn form(&self) -> &'static str {
        match self {
            Atom::Bool { .. } => "boolean fact",
            Atom::Pair { le: false, .. } => "relation ==",
            Atom::Pair { le: true, .. } => "relation <=",
            Atom::Limit { .. } => "bound by a limit",
            Atom::ModPair { .. } => "relation %",
            Atom::Le { .. } => "threshold <=",
            Atom::Ge { .. } => "threshold >=",
            Atom::Mod { .. } => "divisibility",
            Atom::Eq { .. } | Atom::SymEq { .. } => "constant",
            Atom::NonZero { .. } => "presence",
        }
    }

    fn facts(&self) -> Vec<usize> {
        match *self {
            Atom::Pair { a, b, .. } | Atom::ModPair { a, b } | Atom::Limit { a, b } => vec![a, b],
            Atom::Bool { f, .. } | Atom::Le { f, .. } | Atom::Ge { f, .. } | Atom::Mod { f, .. } | Atom::Eq { f, .. } | Atom::SymEq { f, .. } | Atom::NonZero { f } => vec![f],
        }
    }

    fn src(&self) -> Option<Src> {
        match *self {
            Atom::Le { src, .. } | Atom::Ge { src, .. } | Atom::Mod { src, .. } | Atom::Eq { src, .. } => Some(src),
            _ => None,
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
            Atom::Limit { a, b } => match (row[a], row[b]) {
                (V::I(x), V::I(y)) => Some(x <= y),
                _ => None,
            },
            Atom::ModPair { a, b } => match (row[a], row[b]) {
                (V::I(_), V::I(0)) => None,
                (V::I(x), V::I(y)) => Some(x.wrapping_rem(y) == 0),
                _ => None,
            },
            Atom::Le { f, c, .. } => int(row[f]).map(|x| x <= c),
            Atom::Ge { f, c, .. } => int(row[f]).map(|x| x >= c),
            Atom::Mod { f, c, .. } => int(row[f]).map(|x| x.wrapping_rem(c) == 0),
            Atom::Eq { f, c, .. } => int(row[f]).map(|x| x == c),
            Atom::NonZero { f } => int(row[f]).map(|x| x != 0),
            Atom::SymEq { f, s } => match row[f] {
                V::S(x) => Some(x == s),
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
            Atom::Limit { a, b } => format!("{} <= {}", n(a), n(b)),
            Atom::ModPair { a, b } => format!("{} % {} == 0", n(a), n(b)),
            Atom::Le { f, c, .. } => format!("{} <= {c}", n(f)),
            Atom::Ge { f, c, .. } => format!("{} >= {c}", n(f)),
            Atom::Mod { f, c, .. } => format!("{} % {c} == 0", n(f)),
            Atom::Eq { f, c, .. } => format!("{} == {c}", n(f)),
            Atom::NonZero { f } => format!("{} != 0", n(f)),
            Atom::SymEq { f, s } => format!("{} == {}", n(f), t.syms[s as usize]),
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

    /// The failing variants' nearest values of `f` beyond the accepted ones: the smallest above
    /// `max_a` (per variant, its largest value) and the largest below `min_a` (its smallest),
    /// each with the variants that show it.
    #[allow(clippy::type_complexity)]
    fn labelled_bounds(&self, f: usize, min_a: i64, max_a: i64) -> (Option<(i64, Vec<usize>)>, Option<(i64, Vec<usize>)>) {
        let (mut hi, mut lo): (Option<(i64, Vec<usize>)>, Option<(i64, Vec<usize>)>) = (None, None);
        for (i, rows) in &self.t.lab_fail {
            let vals: Vec<i64> = rows.iter().filter_map(|r| int(r[f])).collect();
            if let Some(m) = vals.iter().max().copied().filter(|m| *m > max_a) {
                match &mut hi {
                    Some((h, ids)) if *h == m => ids.push(*i),
                    Some((h, _)) if *h < m => {}
                    _ => hi = Some((m, vec![*i])),
                }
            }
            if let Some(m) = vals.iter().min().copied().filter(|m| *m < min_a) {
                match &mut lo {
                    Some((l, ids)) if *l == m => ids.push(*i),
                    Some((l, _)) if *l > m => {}
                    _ => lo = Some((m, vec![*i])),
                }
            }
        }
        (hi, lo)
    }

    /// The passing variants with an instance whose `f` is `value` (`None`: none).
    fn labelled_at(&self, f: usize, value: i64) -> Option<BTreeSet<usize>> {
        let ids: BTreeSet<usize> = self.t.accepted.iter().zip(&self.t.acc_variant).filter(|(r, v)| v.is_some() && r[f] == V::I(value)).filter_map(|(_, v)| *v).collect();
        (!ids.is_empty()).then_some(ids)
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
                    let le = Atom::Limit { a, b };
                    if !all_eq && self.holds_on_accepted(&le) {
                        out.push(le);
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
            // Thresholds: the constant lies between the accepted values and the failing ones (of
            // the failing programs, when separating, and of the failing variants); it is a
            // target-table or catalog value there, else the boundary the labelled variants fit.
            let (lab_hi, lab_lo) = self.labelled_bounds(f, min_a, max_a);
            // Each side's bound on its own: programs that break the other side (a budget under
            // its floor) must not hide the failing variants above the ceiling.
            let hi = if sep_ok { fail.iter().map(|v| *v.iter().max().unwrap_or(&i64::MIN)).min() } else { None }.filter(|h| *h > max_a);
            let hi = [hi, lab_hi.as_ref().map(|(h, _)| *h)].into_iter().flatten().min();
            let lo = if sep_ok { fail.iter().map(|v| *v.iter().min().unwrap_or(&i64::MAX)).max() } else { None }.filter(|l| *l < min_a);
            let lo = [lo, lab_lo.as_ref().map(|(l, _)| *l)].into_iter().flatten().max();
            let le = match hi {
                // Every accepted instance counts none: the bound is zero (a count that must be
                // empty), not a target or catalog number that happens to lie in the gap.
                Some(_) if min_a == 0 && max_a == 0 => self.t.grounded_in(f, 0, 0, true),
                Some(h) => self.t.grounded_in(f, max_a, h - 1, true),
                None => self.t.grounded_in(f, max_a, i64::MAX, false),
            }
            .or_else(|| {
                let (h, fail_ids) = lab_hi.filter(|(h, _)| hi == Some(*h))?;
                let pass_ids = self.labelled_at(f, max_a)?;
                Some((max_a, self.t.fit(max_a, max_a, h, pass_ids.into_iter().chain(fail_ids).collect())))
            });
            let ge = match lo {
                Some(l) => self.t.grounded_in(f, l + 1, min_a, false),
                None => self.t.grounded_in(f, i64::MIN, min_a, true),
            }
            .or_else(|| {
                let (l, fail_ids) = lab_lo.filter(|(l, _)| lo == Some(*l))?;
                let pass_ids = self.labelled_at(f, min_a)?;
                Some((min_a, self.t.fit(min_a, min_a, l, pass_ids.into_iter().chain(fail_ids).collect())))
            });
            // A constant fact: thresholds only where they separate (else `== c` says it).
            if let Some((c, src)) = le.filter(|_| !constant || hi.is_some()) {
                out.push(Atom::Le { f, c, src });
            }
            if let Some((c, src)) = ge.filter(|_| !constant || lo.is_some()) {
                out.push(Atom::Ge { f, c, src });
            }
            // Divisibility by a grounded constant: the smallest that separates, else the largest.
            if acc.iter().any(|x| *x != 0) {
                let mut divides: Vec<(i64, Src)> = Vec::new();
                for (i, g) in self.t.grounding.iter().enumerate() {
                    if g.value >= 2 && acc.iter().all(|x| x % g.value == 0) && !divides.iter().any(|(c, _)| *c == g.value) && self.t.may_ground(g, f) {
                        divides.push((g.value, Src::G(i as u32)));
                    }
                }
                divides.sort_by_key(|(c, _)| *c);
                let pick = if separate { divides.iter().copied().find(|(c, _)| fail.iter().all(|v| v.iter().any(|x| x % c != 0))).or(divides.last().copied()) } else { divides.last().copied() };
                if let Some((c, src)) = pick {
                    out.push(Atom::Mod { f, c, src });
                }
            }
            if constant {
                if let Some((c, src)) = self.t.grounded_in(f, min_a, min_a, true) {
                    out.push(Atom::Eq { f, c, src });
                }
            }
        }
        for f in t.facts_of(Ty::Sym) {
            let vals: BTreeSet<u32> = self.accepted.iter().filter_map(|r| if let V::S(s) = r[f] { Some(s) } else { None }).collect();
            if vals.len() == 1 {
                out.push(Atom::SymEq { f, s: *vals.iter().next().unwrap_or(&0) });
            }
        }
        out.retain(|a| self.holds_on_accepted(a));
        out.sort_by_key(|a| a.key(t));
        out.dedup();
        self.stronger_bounds_first(&mut out);
        out
    }

    /// Of two bounds by one constant on facts of one place, the bound on the fact that is at
    /// least as large on every instance seen (accepted and failing) and larger on some comes
    /// first (for `>=`, at most as large): `max_box <= 256` says `box_inner <= 256` and more —
    /// the bound of every dimension, not only of the one the training programs broke.
    fn stronger_bounds_first(&self, atoms: &mut Vec<Atom>) {
        let rows: Vec<&[V]> = self.accepted.iter().copied().chain(self.failing.iter().flatten().copied()).collect();
        let place = |f: usize| self.t.order[f].0;
        let bounds = |f: usize, g: usize, le: bool| -> bool {
            let mut strict = false;
            for r in &rows {
                match (int(r[f]), int(r[g])) {
                    (Some(x), Some(y)) if (le && x < y) || (!le && x > y) => return false,
                    (Some(x), Some(y)) => strict |= x != y,
                    (None, None) => {}
                    _ => return false,
                }
            }
            strict
        };
        let stronger = |a: &Atom, b: &Atom| match (*a, *b) {
            (Atom::Le { f, c, .. }, Atom::Le { f: g, c: d, .. }) => c == d && place(f) == place(g) && bounds(f, g, true),
            (Atom::Ge { f, c, .. }, Atom::Ge { f: g, c: d, .. }) => c == d && place(f) == place(g) && bounds(f, g, false),
            _ => false,
        };
        // One pass of insertion: each atom moves before the first earlier one it is stronger than.
        for j in 1..atoms.len() {
            if let Some(i) = (0..j).find(|i| stronger(&atoms[j], &atoms[*i])) {
                let a = atoms.remove(j);
                atoms.insert(i, a);
            }
        }
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
            guards.push(Atom::NonZero { f });
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
/// predicates the search knows (an atom with its constant nearest the accepted boundary, a
/// conjunction of two invariants, an invariant under a guard) is
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
    for g in guards(&t, &all) {
        let Some(sub) = all.guarded(&g) else { continue };
        widest.extend(sub.invariants(false).iter().map(|a| sub.violated(a)));
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
    if !t.reported.is_empty() {
        let named = search_view_where(t, view, max, &|a: &Atom| a.facts().iter().any(|f| t.reported.contains(f)));
        if !named.is_empty() {
            return named;
        }
    }
    search_view_where(t, view, max, &|_| true)
}

/// The search, keeping only requirements with an atom `keep` accepts.
fn search_view_where<'t>(t: &'t Table, view: &View<'t>, max: usize, keep: &dyn Fn(&Atom) -> bool) -> Vec<Candidate> {
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
        let mut constants: Vec<ConstantSource> = Vec::new();
        for src in when.into_iter().chain(req.iter().copied()).filter_map(|a| a.src()) {
            let c = t.source(src);
            if !constants.contains(&c) {
                constants.push(c);
            }
        }
        Candidate { when: when.map(|w| w.text(t)), require: req.iter().map(|a| a.text(t)).collect::<Vec<_>>().join(" && "), level, form, facts, constants }
    };
    // Level 1.
    let level1: Vec<Candidate> = view.invariants(true).iter().filter(|a| keep(a) && view.separates(a)).take(max).map(|a| cand(None, &[a], 1)).collect();
    if !level1.is_empty() {
        return level1;
    }
    // Level 2: conjunctions of two invariants (set cover of the failing programs) ...
    let n = view.failing.len();
    let inv: Vec<(Atom, Vec<bool>)> = view.invariants(false).into_iter().map(|a| (a, view.violated(&a))).filter(|(_, v)| v.iter().any(|x| *x)).collect();
    let mut scored: Vec<(u32, usize, Candidate)> = Vec::new();
    for i in 0..inv.len() {
        for j in i + 1..inv.len() {
            if (0..n).all(|k| inv[i].1[k] || inv[j].1[k]) && (keep(&inv[i].0) || keep(&inv[j].0)) {
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
        if let Some(b) = sub.invariants(true).into_iter().find(|b| keep(b) && sub.separates(b)) {
            scored.push((g.rank() + b.rank(), 1, cand(Some(g), &[&b], 2)));
            continue;
        }
        // Two invariants under the guard, when one does not cover every failing program (a
        // budget both under its floor and over its ceiling).
        let inv: Vec<(Atom, Vec<bool>)> = sub.invariants(true).into_iter().map(|a| (a, sub.violated(&a))).filter(|(_, v)| v.iter().any(|x| *x)).collect();
        'pair: for i in 0..inv.len() {
            for j in i + 1..inv.len() {
                if (0..sub.failing.len()).all(|k| inv[i].1[k] || inv[j].1[k]) && (keep(&inv[i].0) || keep(&inv[j].0)) {
                    let (a, b) = (&inv[i].0, &inv[j].0);
                    scored.push((g.rank() + a.rank() + b.rank(), 2, cand(Some(g), &[a, b], 2)));
                    break 'pair;
                }
            }
        }
    }
    scored.sort_by_key(|x| (x.0, x.1));
    scored.into_iter().take(max).map(|(_, _, c)| c).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fm(pairs: &[(&str, Value)]) -> FactMap {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    fn target(value: i64, key: &str) -> ConstantSource {
        ConstantSource { value, source: Source::Target { target: "sm_90a".into(), key: key.into() } }
    }

    fn catalog(value: i64) -> ConstantSource {
        ConstantSource { value, source: Source::Catalog { file: "compiler/catalog/memory.toml".into(), op: "cp_async".into(), rule: format!("bytes(dst) % {value} == 0") } }
    }

    /// Constants as a target table and catalog would ground them: 8, 16, 256 and 1024.
    fn grounding() -> Vec<ConstantSource> {
        vec![catalog(8), catalog(16), target(256, "max_box"), target(1024, "max_threads_per_block")]
    }

    fn input(accepted: Vec<FactMap>, failing: Vec<Vec<FactMap>>) -> SearchInput {
        SearchInput { accepted, failing, labelled: vec![], grounding: grounding(), reported: vec![], operand_facts: false }
    }

    #[test]
    fn threshold_takes_a_grounded_constant_between_accepted_and_failing() {
        let acc = (0..4).map(|i| fm(&[("box", Value::Int(64 << (i % 2))), ("n", Value::Int(3))])).collect();
        let c = search(&input(acc, vec![vec![fm(&[("box", Value::Int(512)), ("n", Value::Int(3))])]]), 0, 4);
        assert_eq!(c[0].require, "box <= 256", "{c:?}");
        assert_eq!(c[0].constants, vec![target(256, "max_box")]);
    }

    #[test]
    fn no_threshold_in_the_gap_between_training_values() {
        // Nothing grounds a constant in [128, 511]: no threshold is made up there, and no
        // blacklist of the failing value either.
        let acc: Vec<FactMap> = (0..4).map(|i| fm(&[("box", Value::Int(64 << (i % 2)))])).collect();
        let failing = vec![vec![fm(&[("box", Value::Int(512))])]];
        let none = SearchInput { accepted: acc.clone(), failing: failing.clone(), labelled: vec![], grounding: vec![], reported: vec![], operand_facts: false };
        assert_eq!(search(&none, 0, 8), vec![]);
        // Labelled variants fit the boundary: 300 passes, 320 fails.
        let lab = |v: &str, fails: bool, x: i64| Labelled { variant: v.into(), fails, instances: vec![fm(&[("box", Value::Int(x))])] };
        let fitted = SearchInput { accepted: acc, failing, labelled: vec![lab("v-pass", false, 300), lab("v-fail", true, 320)], grounding: vec![], reported: vec![], operand_facts: false };
        let c = search(&fitted, 0, 8);
        assert_eq!(c[0].require, "box <= 300", "{c:?}");
        assert_eq!(c[0].constants, vec![ConstantSource { value: 300, source: Source::Fitted { pass: 300, fail: 320, variants: vec!["v-pass".into(), "v-fail".into()] } }]);
    }

    #[test]
    fn a_bound_on_every_dimension_comes_before_the_bound_on_one() {
        // Every failing box overflows its inner dimension (so the inner and the largest extent
        // are equal there); accepted boxes are taller than wide at times. `max_box <= 256`
        // bounds every dimension and comes first, though `box_inner` sorts before it by name.
        let b = |inner: i64, outer: i64| fm(&[("box_inner", Value::Int(inner)), ("max_box", Value::Int(inner.max(outer)))]);
        let acc = vec![b(64, 128), b(64, 64), b(128, 256)];
        let c = search(&input(acc, vec![vec![b(512, 8)], vec![b(8192, 1)]]), 0, 4);
        assert_eq!(c[0].require, "max_box <= 256", "{c:?}");
        assert_eq!(c[1].require, "box_inner <= 256", "{c:?}");
    }

    #[test]
    fn the_reported_quantity_comes_before_a_simpler_predicate() {
        // Outputs left unwritten, two of three also with an inexact tile division: the kernel's
        // division count separates all three at level 1 here only because of the third's
        // value, yet the failure reports elements never written, so the (guarded) bound on
        // `unwritten_elements` comes first.
        let zero = ConstantSource { value: 0, source: Source::None };
        let row = |stored: bool, unwritten: Option<i64>, div: i64| {
            let mut m = fm(&[("stored", Value::Bool(stored)), ("kernel_inexact_divisions", Value::Int(div))]);
            m.insert("unwritten_elements".into(), unwritten.map_or(Value::Unknown, Value::Int));
            m
        };
        let acc = vec![row(true, Some(0), 0), row(false, None, 0), row(true, Some(0), 0)];
        let failing = vec![vec![row(true, Some(4096), 1)], vec![row(true, Some(64), 2)], vec![row(true, Some(2048), 1)]];
        let base = SearchInput { accepted: acc, failing, labelled: vec![], grounding: vec![zero], reported: vec![], operand_facts: false };
        assert_eq!(search(&base, 0, 1)[0].require, "kernel_inexact_divisions <= 0");
        let c = search(&SearchInput { reported: vec!["unwritten_elements".into()], ..base }, 0, 1);
        assert_eq!((c[0].when.as_deref(), c[0].require.as_str()), (Some("stored"), "unwritten_elements <= 0"), "{c:?}");
    }

    #[test]
    fn a_fact_known_where_a_symbol_has_one_value_is_used_under_that_guard() {
        // A wgmma operand's `row_bytes` and `swizzle` are known in shared memory only (the
        // accumulator has neither); the failure reports both. The relation is found under
        // `space == smem`, not a threshold on a fact every instance has (`bytes`).
        let op = |space: &str, rows: Option<i64>, swizzle: Option<i64>, bytes: i64| {
            let mut m = fm(&[("space", Value::Sym(space.into())), ("bytes", Value::Int(bytes))]);
            m.insert("row_bytes".into(), rows.map_or(Value::Unknown, Value::Int));
            m.insert("swizzle".into(), swizzle.map_or(Value::Unknown, Value::Int));
            m
        };
        let acc = vec![op("frag", None, None, 65536), op("smem", Some(128), Some(128), 16384), op("smem", Some(64), Some(64), 8192)];
        let failing = vec![vec![op("frag", None, None, 65536), op("smem", Some(64), Some(128), 4096)], vec![op("smem", Some(256), Some(128), 32768)]];
        let base = SearchInput { accepted: acc, failing, labelled: vec![], grounding: grounding(), reported: vec!["row_bytes".into(), "swizzle".into()], operand_facts: true };
        let c = search(&base, 0, 1);
        assert_eq!((c[0].when.as_deref(), c[0].require.as_str()), (Some("space == smem"), "row_bytes == swizzle"), "{c:?}");
    }

    #[test]
    fn a_count_every_accepted_instance_has_at_zero_is_bounded_by_zero() {
        // Elements left unwritten: none on every accepted output, thousands on the failing ones.
        // 256 and 1024 are grounded and lie in the gap; the bound is still zero (a count that
        // must be empty), so a program leaving 16 elements unwritten is caught too.
        let zero = ConstantSource { value: 0, source: Source::None };
        let acc: Vec<FactMap> = (0..4).map(|_| fm(&[("unwritten_elements", Value::Int(0))])).collect();
        let failing = vec![vec![fm(&[("unwritten_elements", Value::Int(4096))])], vec![fm(&[("unwritten_elements", Value::Int(2048))])]];
        let mut grounding = grounding();
        grounding.insert(0, zero.clone());
        let c = search(&SearchInput { accepted: acc, failing, labelled: vec![], grounding, reported: vec![], operand_facts: false }, 0, 4);
        assert_eq!(c[0].require, "unwritten_elements <= 0", "{c:?}");
        assert_eq!(c[0].constants, vec![zero]);
    }

    #[test]
    fn relations_come_before_constants() {
        let acc = vec![fm(&[("a", Value::Int(16)), ("b", Value::Int(16))]), fm(&[("a", Value::Int(32)), ("b", Value::Int(32))])];
        assert_eq!(search(&input(acc, vec![vec![fm(&[("a", Value::Int(16)), ("b", Value::Int(32))])]]), 0, 1)[0].require, "a == b");
    }

    #[test]
    fn divisibility_picks_the_smallest_separating_grounded_divisor() {
        let acc = vec![fm(&[("n", Value::Int(64))]), fm(&[("n", Value::Int(128))]), fm(&[("n", Value::Int(256))])];
        let c = search(&input(acc, vec![vec![fm(&[("n", Value::Int(100))])], vec![fm(&[("n", Value::Int(200))])]]), 0, 8);
        // 100 and 200 lie inside the accepted range; `% 8` holds on both, `% 16` fails on both.
        assert_eq!(c[0].require, "n % 16 == 0", "{c:?}");
        assert_eq!(c[0].constants, vec![catalog(16)]);
    }

    #[test]
    fn guarded_rule_when_no_single_atom_separates() {
        // Swizzled regions need align % atom == 0; unswizzled ones do not care.
        let mk = |sw: i64, align: i64, atom: i64| fm(&[("swizzle", Value::Int(sw)), ("align", Value::Int(align)), ("swizzle_atom", Value::Int(atom))]);
        let acc = vec![mk(128, 1024, 1024), mk(0, 16, 16), mk(0, 128, 16), mk(64, 512, 512), mk(0, 8, 16)];
        let c = search(&input(acc, vec![vec![mk(128, 128, 1024)], vec![mk(64, 128, 512)]]), 0, 4);
        assert!(!c.is_empty());
        // A single relation separates here (align >= ... no: align % swizzle_atom fails for 8 % 16).
        assert!(c[0].level >= 1);
    }

    #[test]
    fn seed_changes_ties_deterministically() {
        let acc = vec![fm(&[("p", Value::Int(1)), ("q", Value::Int(1))]), fm(&[("p", Value::Int(2)), ("q", Value::Int(2))])];
        let input = input(acc, vec![vec![fm(&[("p", Value::Int(9)), ("q", Value::Int(9))])]]);
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
        let input = input(accepted_regions(), failing);
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
        let input = input(accepted_regions(), failing);
        let full = search(&input, 0, 8);
        assert!(!full.is_empty());
        assert_eq!(search_subset(&input, 0, 8, 2), Some(SubsetResult { explained: vec![0, 1], candidates: full }));
    }

    #[test]
    fn subset_search_needs_at_least_min_programs() {
        // One program is separable, the other two look like the corpus.
        let failing = vec![vec![region(16384, 8192, 128)], vec![region(16384, 16384, 128)], vec![region(8192, 0, 64)]];
        let input = input(accepted_regions(), failing);
        assert_eq!(search_subset(&input, 0, 8, 2), None);
        let one = search_subset(&input, 0, 8, 1).expect("one program alone separates");
        assert_eq!(one.explained, vec![0]);
        // Fewer failing programs than the minimum: nothing to search.
        assert_eq!(search_subset(&self::input(accepted_regions(), vec![vec![region(16384, 8192, 128)]]), 0, 8, 2), None);
    }

    #[test]
    fn subset_search_prefers_more_programs_over_a_simpler_predicate() {
        // Three causes, one fact each: no two-atom predicate covers all six programs; `a` and
        // `b` together cover the five of the two largest groups (level 2), `b` alone only three.
        let row = |a: i64, b: i64, c: i64| fm(&[("a", Value::Int(a)), ("b", Value::Int(b)), ("c", Value::Int(c))]);
        let accepted = vec![row(1, 1, 2), row(2, 2, 1), row(1, 2, 2), row(2, 1, 1)];
        let failing = vec![vec![row(9, 1, 2)], vec![row(9, 2, 1)], vec![row(1, 9, 2)], vec![row(2, 9, 1)], vec![row(1, 9, 1)], vec![row(2, 1, 9)]];
        let input = SearchInput { accepted, failing, labelled: vec![], grounding: vec![catalog(2)], reported: vec![], operand_facts: false };
        assert!(search(&input, 0, 8).is_empty(), "{:?}", search(&input, 0, 8));
        let r = search_subset(&input, 0, 8, 2).expect("a part separates");
        assert_eq!(r.explained, vec![0, 1, 2, 3, 4], "{r:?}");
        assert_eq!(r.candidates[0].level, 2);
        assert_eq!(r.candidates[0].require, "a <= 2 && b <= 2", "{r:?}");
    }

}

#[cfg(test)]
mod guarded_range_tests {
    use super::*;

    fn fm(pairs: &[(&str, Value)]) -> FactMap {
        pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    /// A budget known only where `has_regs` holds, broken on both sides by different programs:
    /// one guarded rule with two thresholds covers them all.
    #[test]
    fn a_range_under_a_guard_is_two_thresholds() {
        let role = |regs: Option<i64>| match regs {
            Some(r) => fm(&[("has_regs", Value::Bool(true)), ("regs", Value::Int(r))]),
            None => fm(&[("has_regs", Value::Bool(false)), ("regs", Value::Unknown)]),
        };
        let accepted = vec![role(Some(40)), role(Some(232)), role(Some(32)), role(Some(240)), role(None), role(None)];
        let failing = vec![vec![role(Some(8)), role(Some(240))], vec![role(Some(40)), role(Some(272))]];
        let grounding = vec![
            ConstantSource { value: 32, source: Source::Catalog { file: "c.toml".into(), op: "x".into(), rule: "a % 32 == 0".into() } },
            ConstantSource { value: 256, source: Source::Catalog { file: "c.toml".into(), op: "x".into(), rule: "a <= 256".into() } },
        ];
        let c = search(&SearchInput { accepted, failing, labelled: vec![], grounding, reported: vec![], operand_facts: false }, 0, 4);
        assert!(!c.is_empty());
        assert_eq!(c[0].when.as_deref(), Some("has_regs"), "{c:?}");
        assert!(c[0].require.contains("regs >= 32") && c[0].require.contains("regs <= 256"), "{c:?}");
    }
}
