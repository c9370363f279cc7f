//! The predicate search: the verifier's facts of each construct instance as rows, and the
//! simplest predicate that holds on every accepted row and fails on a row of every failing
//! program (see the module docs of `synth`).

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use cake::catalog::Catalog;
use cake::pred::Value;
use cake::target::TargetTable;
use cake::verify::{ConstructKind, FactSet, ModuleFacts};
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

}
