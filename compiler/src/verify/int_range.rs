//! Integer value ranges: the values an integer expression of a role body can take, for the facts
//! that compare a stored value with the storage dtype (an arg-min index converted to f16 is exact
//! only up to 2048, to bf16 up to 256: V330).
//!
//! An interval per expression, over-approximated: constants, loop variables (their bounds), `let`
//! locals (their value), `reg` fragments (the union of everything written into them: `fill`,
//! `zero`, assignments — a fragment that feeds its own update, `best = select(c, i, best)`,
//! contributes nothing new), `reduce_argmin` / `reduce_argmax` (an index of the reduced axis),
//! `select`, tile coordinates (the tile count of their axis), the role's unit indices and lanes,
//! and `+ − × / % <<`. Anything else (a value loaded from memory, a lane shuffle) is unbounded.
//!
//! A dim has no upper bound (`dim K multiple_of 128` allows every multiple), so a value built from
//! one grows without bound as the dim does: [`IntRanges::max_of`] tells that apart from a value
//! it cannot bound at all by evaluating once more with every dim at [`DIM_PROBE`].

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use crate::ir::*;
use crate::syntax::ast::{BinOp, UnOp};

/// The value every dim takes in the second evaluation of [`IntRanges::max_of`]: any finite value
/// tells "bounded once the dims are" from "not bounded at all"; 2^30 keeps products of a few dims
/// and tile sizes inside i64.
pub const DIM_PROBE: i64 = 1 << 30;

/// The largest value an integer expression can take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntMax {
    /// At most this, at every allowed shape.
    Bounded(i64),
    /// Bounded at every shape, but growing with the dims past any bound.
    GrowsWithDims,
    /// Not derivable (a value loaded from memory, an op the analysis does not model).
    Unknown,
}

/// How a `reg` fragment is written.
#[derive(Clone, Copy)]
enum Write {
    Value(Handle<Expr>),
    Zero,
    Unknown,
}

/// The integer ranges of one module's expressions.
pub struct IntRanges<'m> {
    m: &'m Module,
    loops: HashMap<Handle<Local>, (Handle<Expr>, Handle<Expr>)>,
    lets: HashMap<Handle<Local>, Handle<Expr>>,
    writes: HashMap<Handle<Local>, Vec<Write>>,
    /// Fragments being evaluated (a self-referencing update adds nothing).
    visiting: RefCell<HashSet<Handle<Local>>>,
}

/// A closed interval with optional bounds (also the verifier facts' interval arithmetic).
#[derive(Clone, Copy, Debug)]
pub(super) struct Iv {
    pub(super) lo: Option<i64>,
    pub(super) hi: Option<i64>,
}

pub(super) const ANY: Iv = Iv { lo: None, hi: None };

pub(super) fn pt(lo: i64, hi: i64) -> Iv {
    Iv { lo: Some(lo), hi: Some(hi) }
}

fn union(a: Option<Iv>, b: Option<Iv>) -> Option<Iv> {
    match (a, b) {
        (Some(a), Some(b)) => Some(Iv { lo: a.lo.zip(b.lo).map(|(x, y)| x.min(y)), hi: a.hi.zip(b.hi).map(|(x, y)| x.max(y)) }),
        (a, None) => a,
        (None, b) => b,
    }
}

impl<'m> IntRanges<'m> {
    pub fn analyze(m: &'m Module) -> IntRanges<'m> {
        let mut r = IntRanges { m, loops: HashMap::new(), lets: HashMap::new(), writes: HashMap::new(), visiting: RefCell::new(HashSet::new()) };
        for (_, body) in m.bodies.iter() {
            r.block(&body.block);
        }
        r
    }

    fn block(&mut self, b: &Block) {
        let m = self.m;
        for s in &b.stmts {
            match &m.stmts[*s] {
                Stmt::Let { local, value } => {
                    self.lets.insert(*local, *value);
                }
                Stmt::Assign { target, value } => {
                    if let Some(l) = self.local_of(*target) {
                        self.writes.entry(l).or_default().push(Write::Value(*value));
                    }
                }
                Stmt::Op(call) => self.op_writes(call),
                Stmt::For { var, lo, hi, body, .. } => {
                    self.loops.insert(*var, (*lo, *hi));
                    self.block(body);
                }
                Stmt::ForTiles { body, .. } => self.block(body),
                Stmt::If { then_block, else_block, .. } => {
                    self.block(then_block);
                    if let Some(e) = else_block {
                        self.block(e);
                    }
                }
                Stmt::Reg(_) => {}
            }
        }
    }

    fn local_of(&self, e: Handle<Expr>) -> Option<Handle<Local>> {
        match &self.m.exprs[e].kind {
            ExprKind::Local(l) => Some(*l),
            ExprKind::Index { base, .. } => self.local_of(*base),
            _ => None,
        }
    }

    /// `fill(x, v)` writes v, `zero(x)` 0; any other op writing a fragment, a value not modelled.
    fn op_writes(&mut self, call: &OpCall) {
        let Some(a0) = call.args.first().copied().flatten() else { return };
        let Some(l) = self.local_of(a0) else { return };
        let w = match call.op.as_str() {
            "fill" => call.args.get(1).copied().flatten().map_or(Write::Unknown, Write::Value),
            "zero" => Write::Zero,
            _ if self.m.exprs[a0].ty.dtype().is_some_and(DType::is_int) => Write::Unknown,
            _ => return,
        };
        self.writes.entry(l).or_default().push(w);
    }

    /// The largest value of integer expression `e`.
    pub fn max_of(&self, e: Handle<Expr>) -> IntMax {
        if let Some(hi) = self.of(e, None, 0).and_then(|iv| iv.hi) {
            return IntMax::Bounded(hi);
        }
        match self.of(e, Some(DIM_PROBE), 0).and_then(|iv| iv.hi) {
            Some(_) => IntMax::GrowsWithDims,
            None => IntMax::Unknown,
        }
    }

    /// The interval of `e` with every dim in `1..=dim_hi` (unbounded for `None`); `None` for a
    /// fragment that is only written from itself (no value of its own).
    fn of(&self, h: Handle<Expr>, dim_hi: Option<i64>, depth: u32) -> Option<Iv> {
        let m = self.m;
        if let Some(c) = m.const_value(h) {
            return Some(pt(c, c));
        }
        if depth > 48 {
            return Some(ANY);
        }
        let of = |e: Handle<Expr>| self.of(e, dim_hi, depth + 1);
        let iv = match &m.exprs[h].kind {
            ExprKind::Int(v) => pt(*v, *v),
            ExprKind::Dim(_) => Iv { lo: Some(1), hi: dim_hi },
            ExprKind::Local(l) => return self.local(*l, dim_hi, depth),
            ExprKind::Field { base, field } => match (field, &m.exprs[*base].kind) {
                (Field::Stage, ExprKind::Pipeline(p)) => pt(0, i64::from(m.pipelines[*p].stages) - 1),
                (Field::TileAxis(k), _) => {
                    let extent = m.grid.iter().next().and_then(|(_, g)| g.axes.get(*k)).map(|a| self.size(&a.extent, dim_hi));
                    Iv { lo: Some(0), hi: extent.and_then(|e| e.hi).map(|h| h - 1) }
                }
                (Field::Warpgroup, ExprKind::Role(r)) => {
                    let r = &m.roles[*r];
                    match r.unit {
                        RoleUnit::Warpgroup => pt(0, i64::from(r.count) - 1),
                        RoleUnit::Warp => pt(0, (i64::from(r.count) - 1) / 4),
                    }
                }
                (Field::Warp, ExprKind::Role(r)) => pt(0, m.roles[*r].warps().len() as i64 - 1),
                (Field::Lane, _) => pt(0, 31),
                _ => ANY,
            },
            ExprKind::Call(c) => return self.call(c, dim_hi, depth),
            ExprKind::Unary(UnOp::Neg, x) => {
                let r = of(*x)?;
                Iv { lo: r.hi.map(i64::wrapping_neg), hi: r.lo.map(i64::wrapping_neg) }
            }
            ExprKind::Binary(op, a, b) => {
                let (x, y) = (of(*a)?, of(*b)?);
                binary(*op, x, y, m.const_value(*b))
            }
            _ => ANY,
        };
        Some(iv)
    }

    fn local(&self, l: Handle<Local>, dim_hi: Option<i64>, depth: u32) -> Option<Iv> {
        if let Some((lo, hi)) = self.loops.get(&l) {
            let (lo, hi) = (self.of(*lo, dim_hi, depth + 1)?, self.of(*hi, dim_hi, depth + 1)?);
            return Some(Iv { lo: lo.lo, hi: hi.hi.map(|x| x - 1) });
        }
        if let Some(v) = self.lets.get(&l) {
            return self.of(*v, dim_hi, depth + 1);
        }
        let Some(writes) = self.writes.get(&l) else { return Some(ANY) };
        if !self.visiting.borrow_mut().insert(l) {
            return None;
        }
        let mut acc: Option<Iv> = None;
        for w in writes {
            let iv = match w {
                Write::Value(e) => self.of(*e, dim_hi, depth + 1),
                Write::Zero => Some(pt(0, 0)),
                Write::Unknown => Some(ANY),
            };
            acc = union(acc, iv);
        }
        self.visiting.borrow_mut().remove(&l);
        acc
    }

    fn call(&self, c: &OpCall, dim_hi: Option<i64>, depth: u32) -> Option<Iv> {
        let m = self.m;
        let arg = |i: usize| c.args.get(i).copied().flatten();
        match c.op.as_str() {
            // An index along the axis: of the reduced one, or each element's own position.
            "reduce_argmin" | "reduce_argmax" | "iota" => {
                let (x, axis) = (arg(0)?, arg(1).and_then(|a| m.const_value(a)));
                let shape = m.exprs[x].ty.const_shape();
                let n = axis.and_then(|a| usize::try_from(a).ok()).and_then(|a| shape.as_ref()?.get(a).copied());
                Some(n.map_or(ANY, |n| pt(0, n - 1)))
            }
            "select" => {
                let (a, b) = (arg(1)?, arg(2)?);
                union(self.of(a, dim_hi, depth + 1), self.of(b, dim_hi, depth + 1))
            }
            "cast" => match arg(0) {
                Some(x) if m.exprs[x].ty.dtype().is_some_and(DType::is_int) => self.of(x, dim_hi, depth + 1),
                _ => Some(ANY),
            },
            _ => Some(ANY),
        }
    }

    fn size(&self, s: &Size, dim_hi: Option<i64>) -> Iv {
        match s {
            Size::Const(c) => pt(*c, *c),
            Size::Dim(_) => Iv { lo: Some(1), hi: dim_hi },
            Size::Bin(op, a, b) => {
                let (x, y) = (self.size(a, dim_hi), self.size(b, dim_hi));
                let op = match op {
                    SizeOp::Add => BinOp::Add,
                    SizeOp::Sub => BinOp::Sub,
                    SizeOp::Mul => BinOp::Mul,
                    SizeOp::Div => BinOp::Div,
                };
                binary(op, x, y, b.as_const())
            }
        }
    }
}

fn binary(op: BinOp, x: Iv, y: Iv, c: Option<i64>) -> Iv {
    let add = |p: Option<i64>, q: Option<i64>| p.zip(q).and_then(|(p, q)| p.checked_add(q));
    let sub = |p: Option<i64>, q: Option<i64>| p.zip(q).and_then(|(p, q)| p.checked_sub(q));
    match op {
        BinOp::Add => Iv { lo: add(x.lo, y.lo), hi: add(x.hi, y.hi) },
        BinOp::Sub => Iv { lo: sub(x.lo, y.hi), hi: sub(x.hi, y.lo) },
        BinOp::Mul => mul(x, y),
        BinOp::Shl => match c.and_then(|s| u32::try_from(s).ok()).and_then(|s| 1i64.checked_shl(s)) {
            Some(k) => mul(x, pt(k, k)),
            None => ANY,
        },
        BinOp::Div => match c {
            Some(c) if c > 0 && x.lo.is_some_and(|l| l >= 0) => Iv { lo: x.lo.map(|l| l / c), hi: x.hi.map(|h| h / c) },
            _ => ANY,
        },
        BinOp::Rem => match c {
            Some(c) if c > 0 && x.lo.is_some_and(|l| l >= 0) => Iv { lo: Some(0), hi: Some(x.hi.map_or(c - 1, |h| h.min(c - 1))) },
            Some(c) if c > 0 => pt(-(c - 1), c - 1),
            _ => ANY,
        },
        _ => ANY,
    }
}

pub(super) fn mul(x: Iv, y: Iv) -> Iv {
    if let (Some(a), Some(b), Some(c), Some(d)) = (x.lo, x.hi, y.lo, y.hi) {
        let ps = [a.checked_mul(c), a.checked_mul(d), b.checked_mul(c), b.checked_mul(d)];
        if ps.iter().all(Option::is_some) {
            let ps: Vec<i64> = ps.into_iter().flatten().collect();
            return Iv { lo: ps.iter().min().copied(), hi: ps.iter().max().copied() };
        }
        return ANY;
    }
    if x.lo.is_some_and(|l| l >= 0) && y.lo.is_some_and(|l| l >= 0) {
        let hi = x.hi.zip(y.hi).and_then(|(p, q)| p.checked_mul(q));
        return Iv { lo: x.lo.zip(y.lo).and_then(|(p, q)| p.checked_mul(q)), hi };
    }
    ANY
}
