//! Index consistency: the symbolic form of every global window's coordinates, the dims they
//! walk, and whether the operands that feed a store were read where the store writes.
//!
//! Each coordinate of a global access (`X[t.b, t.n * 128 :+ 128, dc * 64 :+ 64]`, in a `let`, a
//! `tma_load`, a `store`) becomes a polynomial over symbols: tile axes (`t.n`), loop variables
//! (`kt`), role ids (`mma.warpgroup`, `rows.warp`, lanes), dims and constants. Two checks follow.
//!
//! - **The dim a coordinate walks.** A tile axis walks the dims of its extent (`n = N / 128`
//!   walks N); a loop variable the dims of its bounds (`kt in 0..K / 64` walks K). An axis whose
//!   extent is a dim expression (`C: bf16[B, K, D]`, axis 1 is K) must be indexed by a
//!   coordinate that walks that dim, or none: one that walks only others (`C[t.b, t.n * 128 …]`
//!   walks N) reads the wrong rows for some tile.
//! - **Operands against the output they feed.** A flow-insensitive def-use slice (registers
//!   through `let` / assignment / written op arguments, shared memory through the ops that fill
//!   it, views through their region) gives the global reads each `store` depends on. For every
//!   dim the read and the stored tensor both index (the same extent, on one axis each), the two
//!   windows must overlap for every value of the symbols the store depends on: the same tile,
//!   the same group offset, the same warp's rows. Symbols only the read has (a producer warp, a
//!   loop the store is not in) range over the whole window they cover. Coordinates that walk a
//!   dim through a loop (chunks, the K loop) or add a dim (`g * M`) on one side only are
//!   compared exactly where both sides agree on them, and otherwise not at all (a reduction or
//!   contraction legitimately reads positions the output does not have).
//!
//! The results are tensor facts (`wrong_dim_accesses`, `operand_mismatches`, with text and
//! spans), so the rules that report them are data (V324, V325).

use std::collections::{BTreeMap, BTreeSet, HashMap};

mod passes;

use super::protocol::eval::show;
use crate::catalog::{Access as ParamAccess, Catalog};
use crate::ir::*;
use crate::span::Span;
use crate::syntax::ast::{BinOp, UnOp};

/// A symbol of a coordinate polynomial.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Sym {
    Tile(usize),
    /// A loop variable; loops with the same name and bounds are one symbol (the second pass of
    /// a row kernel walks the chunks the first did).
    Loop(usize),
    Unit(Handle<RoleDecl>, u8),
    /// `R.warp / c` and `R.warp % c` (a 2-D warp layout: rows by one, columns by the other).
    UnitDiv(Handle<RoleDecl>, u8, i64),
    UnitMod(Handle<RoleDecl>, u8, i64),
    Dim(Handle<DimDecl>),
}

/// `Σ coefficient · Π symbols`; the empty product is the constant term.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Poly(BTreeMap<Vec<Sym>, i64>);

impl Poly {
    fn constant(c: i64) -> Poly {
        let mut p = Poly::default();
        p.add_term(Vec::new(), c);
        p
    }

    fn sym(s: Sym) -> Poly {
        let mut p = Poly::default();
        p.add_term(vec![s], 1);
        p
    }

    fn add_term(&mut self, mono: Vec<Sym>, c: i64) {
        let e = self.0.entry(mono).or_insert(0);
        *e = e.saturating_add(c);
        self.0.retain(|_, v| *v != 0);
    }

    fn add(&self, o: &Poly, sign: i64) -> Poly {
        let mut p = self.clone();
        for (m, c) in &o.0 {
            p.add_term(m.clone(), c.saturating_mul(sign));
        }
        p
    }

    fn mul(&self, o: &Poly) -> Poly {
        let mut p = Poly::default();
        for (ma, ca) in &self.0 {
            for (mb, cb) in &o.0 {
                let mut m: Vec<Sym> = ma.iter().chain(mb).cloned().collect();
                m.sort();
                p.add_term(m, ca.saturating_mul(*cb));
            }
        }
        p
    }

    fn as_const(&self) -> Option<i64> {
        match self.0.len() {
            0 => Some(0),
            1 => self.0.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    fn syms(&self) -> BTreeSet<Sym> {
        self.0.keys().flatten().cloned().collect()
    }

    /// The part whose every monomial avoids `drop`, and the rest.
    fn split(&self, drop: &dyn Fn(&Sym) -> bool) -> (Poly, Poly) {
        let (mut keep, mut rest) = (Poly::default(), Poly::default());
        for (m, c) in &self.0 {
            if m.iter().any(drop) {
                rest.add_term(m.clone(), *c);
            } else {
                keep.add_term(m.clone(), *c);
            }
        }
        (keep, rest)
    }
}

/// One axis of a global access.
#[derive(Clone, Debug)]
struct Axis {
    /// `None`: the coordinate is not a polynomial the analysis forms (data, a division that does
    /// not fold, a stage index).
    start: Option<Poly>,
    /// Elements along the axis; `None` for `:` (the whole extent).
    len: Option<i64>,
    expr: Option<Handle<Expr>>,
}

struct GlobalAccess {
    /// A read of shared memory mapped back through the op that filled it (`x_s[dc, wg * 64 :+ 64]`
    /// filled from `X[t.b, t.n * 128 :+ 128, dc * 64 :+ 64]` reads rows `t.n * 128 + wg * 64`):
    /// not checked for its own dims (its fill was).
    derived: bool,
    tensor: Handle<TensorDecl>,
    axes: Vec<Axis>,
    role: Handle<RoleDecl>,
    /// Loops around the access, innermost last (their symbol ids).
    loops: Vec<usize>,
    span: Span,
}

struct LoopInfo {
    /// The variable's name (`kt`).
    var: String,
    /// `kt in 0..K / 64`: the symbol's identity, and how messages name the loop.
    name: String,
    lo: Option<Poly>,
    hi: Option<Poly>,
    span: Span,
}

/// What the analysis found for one tensor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TensorIndexing {
    /// Accesses of the tensor with an axis indexed by a coordinate that walks other dims.
    pub wrong_dim: u32,
    pub first_wrong_dim: Option<Finding>,
    /// Stores into the tensor whose feeding reads disagree on a shared dim.
    pub mismatches: u32,
    pub first_mismatch: Option<Finding>,
    /// Pairs of passes over the same chunks of the tensor with different trip counts.
    pub pass_disagreements: u32,
    pub first_pass_disagreement: Option<Finding>,
    /// Axes of the tensor its chunked reads leave partly unread.
    pub partly_read_axes: u32,
    pub first_partly_read: Option<Finding>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub what: String,
    pub at: Span,
    /// The declaration the coordinate's walk comes from (a tile space, a loop), or the read.
    pub related: Span,
}

/// Index facts of every tensor some statement accesses.
pub fn analyze(m: &Module) -> BTreeMap<Handle<TensorDecl>, TensorIndexing> {
    let mut a = Analysis::new(m);
    for (_, body) in m.bodies.iter() {
        a.block(&body.block, body.role, &mut Vec::new());
    }
    let mut out: BTreeMap<Handle<TensorDecl>, TensorIndexing> = BTreeMap::new();
    for acc in a.accesses.iter().filter(|x| !x.derived) {
        if let Some(f) = a.wrong_dim(acc) {
            let e = out.entry(acc.tensor).or_default();
            e.wrong_dim += 1;
            e.first_wrong_dim.get_or_insert(f);
        }
    }
    a.resolve_smem_reads();
    let store_ids: BTreeSet<usize> = a.stores.iter().map(|(id, _)| *id).collect();
    for (t, f) in a.pass_findings(&store_ids) {
        let e = out.entry(t).or_default();
        match f {
            passes::PassFinding::PassesDisagree(f) => {
                e.pass_disagreements += 1;
                e.first_pass_disagreement.get_or_insert(f);
            }
            passes::PassFinding::AxisPartlyRead(f) => {
                e.partly_read_axes += 1;
                e.first_partly_read.get_or_insert(f);
            }
        }
    }
    let stores = std::mem::take(&mut a.stores);
    for (store, deps) in &stores {
        if let Some(f) = a.store_mismatch(*store, &a.slice(deps), Pairing::Store) {
            let e = out.entry(a.accesses[*store].tensor).or_default();
            e.mismatches += 1;
            e.first_mismatch.get_or_insert(f);
        }
    }
    // The operands of one MMA agree on the dims they share (the same batch, the same K chunk).
    let mmas = std::mem::take(&mut a.mmas);
    for operands in &mmas {
        let sets: Vec<Vec<usize>> = operands.iter().map(|o| a.slice(o)).collect();
        for (i, first) in sets.iter().enumerate() {
            for second in &sets[i + 1..] {
                for &x in first {
                    if a.accesses[x].derived {
                        continue;
                    }
                    if let Some(f) = a.store_mismatch(x, second, Pairing::Operands) {
                        let e = out.entry(a.accesses[x].tensor).or_default();
                        e.mismatches += 1;
                        e.first_mismatch.get_or_insert(f);
                    }
                }
            }
        }
    }
    out
}

/// What a window is compared with: the store its reads feed, or another operand of its MMA.
#[derive(Clone, Copy)]
enum Pairing {
    Store,
    Operands,
}

/// How a read's window compares with the stored window along one dim.
enum Verdict {
    Agree,
    Disagree(String),
    NotCompared,
}

/// A storage node of the def-use graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Node {
    Local(Handle<Local>),
    Smem(Handle<SmemDecl>),
    /// A global read (an index into `accesses`).
    Read(usize),
    /// A read of a shared buffer's window (an index into `smem_reads`).
    SmemRead(usize),
}

/// A read of a shared-memory window, resolved to the global windows that filled it.
struct SmemRead {
    region: Handle<SmemDecl>,
    expr: Handle<Expr>,
    role: Handle<RoleDecl>,
    loops: Vec<usize>,
}

/// An op that copies a global window into a shared one (`tma_load`, `cp_async`).
struct Fill {
    region: Handle<SmemDecl>,
    dst: Handle<Expr>,
    src: usize,
}

struct Analysis<'m> {
    m: &'m Module,
    catalog: &'static Catalog,
    lets: HashMap<Handle<Local>, Handle<Expr>>,
    /// Loop variable → its symbol id.
    loop_of: HashMap<Handle<Local>, usize>,
    loops: Vec<LoopInfo>,
    accesses: Vec<GlobalAccess>,
    /// Access id of an index expression already recorded (one expression, one access).
    access_of: HashMap<Handle<Expr>, usize>,
    /// Each store: its access id and the nodes its value depends on.
    stores: Vec<(usize, Vec<Node>)>,
    /// The operands of each MMA: the nodes of each operand argument.
    mmas: Vec<Vec<Vec<Node>>>,
    smem_reads: Vec<SmemRead>,
    fills: Vec<Fill>,
    deps: BTreeMap<Node, BTreeSet<Node>>,
}

impl<'m> Analysis<'m> {
    fn new(m: &'m Module) -> Self {
        let mut lets = HashMap::new();
        for (_, s) in m.stmts.iter() {
            if let Stmt::Let { local, value } = s {
                lets.insert(*local, *value);
            }
        }
        Analysis {
            m,
            catalog: Catalog::builtin(),
            lets,
            loop_of: HashMap::new(),
            loops: Vec::new(),
            accesses: Vec::new(),
            access_of: HashMap::new(),
            stores: Vec::new(),
            mmas: Vec::new(),
            smem_reads: Vec::new(),
            fills: Vec::new(),
            deps: BTreeMap::new(),
        }
    }

    fn block(&mut self, b: &Block, role: Handle<RoleDecl>, loops: &mut Vec<usize>) {
        for s in &b.stmts {
            let span = *self.m.stmts.span(*s);
            match &self.m.stmts[*s] {
                Stmt::Let { local, value } => {
                    let refs = self.refs(*value, role, loops);
                    self.deps.entry(Node::Local(*local)).or_default().extend(refs);
                }
                Stmt::Assign { target, value } => {
                    let refs = self.refs(*value, role, loops);
                    if let Some(n) = self.root(*target) {
                        self.deps.entry(n).or_default().extend(refs);
                    }
                }
                Stmt::Op(c) => self.op(c, role, loops),
                Stmt::For { var, lo, hi, body, .. } => {
                    let id = self.loop_id(*var, *lo, *hi, span);
                    loops.push(id);
                    self.block(body, role, loops);
                    loops.pop();
                }
                Stmt::ForTiles { body, .. } => self.block(body, role, loops),
                Stmt::If { then_block, else_block, .. } => {
                    self.block(then_block, role, loops);
                    if let Some(e) = else_block {
                        self.block(e, role, loops);
                    }
                }
                Stmt::Reg(_) => {}
            }
        }
    }

    /// One symbol per (name, bounds): the loops of two passes over the same chunks agree.
    fn loop_id(&mut self, var: Handle<Local>, lo: Handle<Expr>, hi: Handle<Expr>, span: Span) -> usize {
        let name = self.m.locals[var].name.clone();
        let (lo_p, hi_p) = (self.poly(lo), self.poly(hi));
        let key = format!("{name} in {}..{}", show(self.m, lo), show(self.m, hi));
        let id = match self.loops.iter().position(|l| l.name == key) {
            Some(i) => i,
            None => {
                self.loops.push(LoopInfo { var: name, name: key, lo: lo_p, hi: hi_p, span });
                self.loops.len() - 1
            }
        };
        self.loop_of.insert(var, id);
        id
    }

    fn op(&mut self, c: &OpCall, role: Handle<RoleDecl>, loops: &[usize]) {
        let Some(def) = self.catalog.get(&c.op) else { return };
        let mut written: Vec<Handle<Expr>> = Vec::new();
        let mut read: Vec<Node> = Vec::new();
        let mut operands: Vec<Vec<Node>> = Vec::new();
        let mut global_src: Option<usize> = None;
        for (p, a) in def.params.iter().zip(&c.args) {
            let Some(a) = *a else { continue };
            let refs = match p.access {
                Some(ParamAccess::Write) => {
                    written.push(a);
                    continue;
                }
                Some(ParamAccess::Readwrite) => {
                    written.push(a);
                    self.refs(a, role, loops)
                }
                Some(ParamAccess::Read) => {
                    let r = self.refs(a, role, loops);
                    operands.push(r.clone());
                    r
                }
                None => self.refs(a, role, loops),
            };
            if matches!(self.m.exprs[a].ty, Type::Global { .. }) {
                global_src = refs.iter().find_map(|n| match n {
                    Node::Read(id) => Some(*id),
                    _ => None,
                });
            }
            read.extend(refs);
        }
        if def.class == crate::catalog::OpClass::Compute && operands.len() >= 2 {
            self.mmas.push(operands);
        }
        for w in written {
            if matches!(self.m.exprs[w].ty, Type::Global { .. }) {
                // A store: the global window is an access of its own, the sink of a slice.
                if let Some(id) = self.access(w, role, loops) {
                    self.stores.push((id, read.clone()));
                }
            } else if let Some(n) = self.root(w) {
                if let (Node::Smem(region), Some(src)) = (n, global_src) {
                    self.fills.push(Fill { region, dst: w, src });
                }
                self.deps.entry(n).or_default().extend(read.iter().copied());
            }
        }
    }

    /// The storage an lvalue names: a register, or the region of a shared buffer or view.
    fn root(&self, mut h: Handle<Expr>) -> Option<Node> {
        for _ in 0..64 {
            match &self.m.exprs[h].kind {
                ExprKind::Index { base, .. } => h = *base,
                ExprKind::Local(l) => match self.lets.get(l) {
                    // A name for a shared buffer or a window stands for that storage.
                    Some(v) if matches!(self.m.exprs[*v].ty, Type::Shared { .. } | Type::Global { .. }) => h = *v,
                    _ => return Some(Node::Local(*l)),
                },
                ExprKind::Smem(s) => return Some(Node::Smem(*s)),
                ExprKind::View(v) => return Some(Node::Smem(self.m.views[*v].region)),
                _ => return None,
            }
        }
        None
    }

    /// The storage and global reads the value of an expression depends on (not its indices:
    /// an address is not data).
    fn refs(&mut self, e: Handle<Expr>, role: Handle<RoleDecl>, loops: &[usize]) -> Vec<Node> {
        let mut out = Vec::new();
        self.refs_into(e, role, loops, &mut out, 0);
        out
    }

    fn refs_into(&mut self, e: Handle<Expr>, role: Handle<RoleDecl>, loops: &[usize], out: &mut Vec<Node>, depth: u32) {
        if depth > 64 {
            return;
        }
        let kind = self.m.exprs[e].kind.clone();
        match kind {
            ExprKind::Index { base, .. } => {
                if matches!(self.m.exprs[base].kind, ExprKind::Tensor(_)) {
                    if let Some(id) = self.access(e, role, loops) {
                        out.push(Node::Read(id));
                    }
                } else if let (Some(Node::Smem(region)), ExprKind::Smem(_)) = (self.root(e), &self.m.exprs[base].kind) {
                    self.smem_reads.push(SmemRead { region, expr: e, role, loops: loops.to_vec() });
                    out.push(Node::SmemRead(self.smem_reads.len() - 1));
                } else {
                    self.refs_into(base, role, loops, out, depth + 1);
                }
            }
            ExprKind::Tensor(_) => {
                if let Some(id) = self.access(e, role, loops) {
                    out.push(Node::Read(id));
                }
            }
            ExprKind::Local(l) => out.push(Node::Local(l)),
            ExprKind::Smem(s) => out.push(Node::Smem(s)),
            ExprKind::View(v) => out.push(Node::Smem(self.m.views[v].region)),
            ExprKind::Unary(_, x) => self.refs_into(x, role, loops, out, depth + 1),
            ExprKind::Binary(_, a, b) => {
                self.refs_into(a, role, loops, out, depth + 1);
                self.refs_into(b, role, loops, out, depth + 1);
            }
            ExprKind::Call(c) => {
                for a in c.args.iter().flatten() {
                    self.refs_into(*a, role, loops, out, depth + 1);
                }
            }
            _ => {}
        }
    }

    /// Record a global access (once per expression).
    fn access(&mut self, e: Handle<Expr>, role: Handle<RoleDecl>, loops: &[usize]) -> Option<usize> {
        if let Some(id) = self.access_of.get(&e) {
            return Some(*id);
        }
        let (tensor, items) = match &self.m.exprs[e].kind {
            ExprKind::Index { base, items } => match self.m.exprs[*base].kind {
                ExprKind::Tensor(t) => (t, items.clone()),
                _ => return None,
            },
            ExprKind::Tensor(t) => (*t, Vec::new()),
            _ => return None,
        };
        let rank = self.m.tensors[tensor].shape.len();
        let axes = (0..rank)
            .map(|d| match items.get(d) {
                Some(IndexItem::At(x)) => Axis { start: self.poly(*x), len: Some(1), expr: Some(*x) },
                Some(IndexItem::Window { start, len }) => Axis { start: self.poly(*start), len: Some(*len), expr: Some(*start) },
                Some(IndexItem::Full) | None => Axis { start: Some(Poly::default()), len: None, expr: None },
            })
            .collect();
        let span = *self.m.exprs.span(e);
        self.accesses.push(GlobalAccess { derived: false, tensor, axes, role, loops: loops.to_vec(), span });
        let id = self.accesses.len() - 1;
        self.access_of.insert(e, id);
        Some(id)
    }

    fn poly(&self, e: Handle<Expr>) -> Option<Poly> {
        self.poly_depth(e, 0)
    }

    fn poly_depth(&self, e: Handle<Expr>, depth: u32) -> Option<Poly> {
        if depth > 64 {
            return None;
        }
        if let Some(c) = self.m.const_value(e) {
            return Some(Poly::constant(c));
        }
        let p = |x: Handle<Expr>| self.poly_depth(x, depth + 1);
        match &self.m.exprs[e].kind {
            ExprKind::Int(v) => Some(Poly::constant(*v)),
            ExprKind::Dim(d) => Some(Poly::sym(Sym::Dim(*d))),
            ExprKind::Local(l) => match (self.loop_of.get(l), self.lets.get(l)) {
                (Some(id), _) => Some(Poly::sym(Sym::Loop(*id))),
                (None, Some(v)) if is_integer(&self.m.exprs[*v].ty) => p(*v),
                _ => None,
            },
            ExprKind::Field { base, field } => match (&self.m.exprs[*base].kind, field) {
                (ExprKind::Local(_), Field::TileAxis(a)) => Some(Poly::sym(Sym::Tile(*a))),
                (ExprKind::Role(r), Field::Warp) => Some(Poly::sym(Sym::Unit(*r, 0))),
                (ExprKind::Role(r), Field::Warpgroup) => Some(Poly::sym(Sym::Unit(*r, 1))),
                (ExprKind::Role(r), Field::Lane) => Some(Poly::sym(Sym::Unit(*r, 2))),
                _ => None,
            },
            ExprKind::Unary(UnOp::Neg, x) => Some(Poly::default().add(&p(*x)?, -1)),
            ExprKind::Binary(op, a, b) => {
                let (pa, pb) = (p(*a)?, p(*b)?);
                match op {
                    BinOp::Add => Some(pa.add(&pb, 1)),
                    BinOp::Sub => Some(pa.add(&pb, -1)),
                    BinOp::Mul => Some(pa.mul(&pb)),
                    BinOp::Div => {
                        let c = pb.as_const().filter(|c| *c > 0)?;
                        if pa.0.values().all(|v| v % c == 0) {
                            Some(Poly(pa.0.iter().map(|(m, v)| (m.clone(), v / c)).collect()))
                        } else {
                            unit_of(&pa).map(|(r, f)| Poly::sym(Sym::UnitDiv(r, f, c)))
                        }
                    }
                    BinOp::Rem => {
                        let c = pb.as_const().filter(|c| *c > 0)?;
                        unit_of(&pa).map(|(r, f)| Poly::sym(Sym::UnitMod(r, f, c)))
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The dims a symbol walks: a tile axis its extent's, a loop its bounds', a dim itself.
    fn walks(&self, s: &Sym, depth: u32) -> BTreeSet<Handle<DimDecl>> {
        let mut out = BTreeSet::new();
        if depth > 16 {
            return out;
        }
        match s {
            Sym::Tile(a) => {
                if let Some(g) = self.m.grid() {
                    if let Some(ax) = g.axes.get(*a) {
                        out.extend(ax.extent.dims());
                    }
                }
            }
            // A loop walks the dims its bounds name directly (`0..K / 64`); bounds that come
            // from a tile axis (a triangular `0..(t.m + 1) * 2`) say which dim only by convention.
            Sym::Loop(id) => {
                let l = &self.loops[*id];
                for p in [&l.lo, &l.hi].into_iter().flatten() {
                    for s in p.syms() {
                        match s {
                            Sym::Dim(d) => {
                                out.insert(d);
                            }
                            Sym::Loop(_) => out.extend(self.walks(&s, depth + 1)),
                            _ => {}
                        }
                    }
                }
            }
            Sym::Dim(d) => {
                out.insert(*d);
            }
            Sym::Unit(..) | Sym::UnitDiv(..) | Sym::UnitMod(..) => {}
        }
        out
    }

    fn poly_walks(&self, p: &Poly) -> BTreeSet<Handle<DimDecl>> {
        p.syms().iter().flat_map(|s| self.walks(s, 0)).collect()
    }

    /// Where a coordinate's walk comes from, for the message and the secondary span.
    fn walk_source(&self, p: &Poly, wrong: &BTreeSet<Handle<DimDecl>>) -> (String, Span) {
        for s in p.syms() {
            if self.walks(&s, 0).is_disjoint(wrong) {
                continue;
            }
            match s {
                Sym::Tile(a) => {
                    if let Some((h, g)) = self.m.grid.iter().next() {
                        if let Some(ax) = g.axes.get(a) {
                            return (format!("tile axis `{} = {}`", ax.name, super::facts::show_size(self.m, &ax.extent)), self.m.grid.span(h).item);
                        }
                    }
                }
                Sym::Loop(id) => {
                    let l = &self.loops[id];
                    return (format!("loop `{}`", l.name), l.span);
                }
                Sym::Dim(d) => return (format!("dim `{}`", self.m.dims[d].name), self.m.dims.span(d).item),
                Sym::Unit(..) | Sym::UnitDiv(..) | Sym::UnitMod(..) => {}
            }
        }
        ("its symbols".to_string(), Span::default())
    }

    /// An axis whose extent is a dim expression, indexed by a coordinate that walks only other
    /// dims.
    fn wrong_dim(&self, acc: &GlobalAccess) -> Option<Finding> {
        let td = &self.m.tensors[acc.tensor];
        for (d, (ax, size)) in acc.axes.iter().zip(&td.shape).enumerate() {
            let (Some(start), Some(expr)) = (&ax.start, ax.expr) else { continue };
            let extent: BTreeSet<Handle<DimDecl>> = size.dims().into_iter().collect();
            let walked = self.poly_walks(start);
            if extent.is_empty() || walked.is_empty() || !walked.is_disjoint(&extent) {
                continue;
            }
            let (source, related) = self.walk_source(start, &walked);
            let names = |s: &BTreeSet<Handle<DimDecl>>| s.iter().map(|d| self.m.dims[*d].name.clone()).collect::<Vec<_>>().join(", ");
            return Some(Finding {
                what: format!(
                    "axis {d} of `{}` has extent {}, but its index `{}` walks {} (through {source})",
                    td.name,
                    super::facts::show_size(self.m, size),
                    show(self.m, expr),
                    names(&walked)
                ),
                at: acc.span,
                related,
            });
        }
        None
    }

    /// Each shared-memory read depends on its region (everything written there) and on the
    /// global windows its fills map it to.
    fn resolve_smem_reads(&mut self) {
        for k in 0..self.smem_reads.len() {
            let region = self.smem_reads[k].region;
            let mut deps: BTreeSet<Node> = BTreeSet::from([Node::Smem(region)]);
            let fills: Vec<(Handle<Expr>, usize)> = self.fills.iter().filter(|f| f.region == region).map(|f| (f.dst, f.src)).collect();
            for (dst, src) in fills {
                if let Some(d) = self.compose(k, dst, src) {
                    self.accesses.push(d);
                    deps.insert(Node::Read(self.accesses.len() - 1));
                }
            }
            self.deps.insert(Node::SmemRead(k), deps);
        }
    }

    /// The global window a shared read covers, through one fill: the fill's global axes that
    /// are windows map, in order, onto the shared axes its destination leaves free; the read's
    /// offset along such an axis (relative to the destination's) moves the global window.
    fn compose(&self, k: usize, dst: Handle<Expr>, src: usize) -> Option<GlobalAccess> {
        let read = &self.smem_reads[k];
        let decl = &self.m.smem[read.region];
        let items_of = |e: Handle<Expr>| -> Option<Vec<IndexItem>> {
            match &self.m.exprs[e].kind {
                ExprKind::Index { base, items } if matches!(self.m.exprs[*base].kind, ExprKind::Smem(_)) => Some(items.clone()),
                ExprKind::Smem(_) => Some(Vec::new()),
                _ => None,
            }
        };
        let (di, ri) = (items_of(dst)?, items_of(read.expr)?);
        let mut extents: Vec<i64> = decl.shape.clone();
        if decl.stages > 1 || di.len().max(ri.len()) > extents.len() {
            extents.insert(0, i64::from(decl.stages));
        }
        if di.len() > extents.len() || ri.len() > extents.len() {
            return None;
        }
        // (start, len, a single index) per shared axis.
        let axis = |items: &[IndexItem], j: usize| -> (Option<Poly>, i64, bool) {
            match items.get(j) {
                Some(IndexItem::At(x)) => (self.poly(*x), 1, true),
                Some(IndexItem::Window { start, len }) => (self.poly(*start), *len, false),
                Some(IndexItem::Full) | None => (Some(Poly::default()), extents[j], false),
            }
        };
        let free: Vec<usize> = (0..extents.len()).filter(|j| !axis(&di, *j).2).collect();
        let g = &self.accesses[src];
        let mapped: Vec<usize> = (0..g.axes.len()).filter(|d| g.axes[*d].len != Some(1)).collect();
        if free.len() != mapped.len() {
            return None;
        }
        let mut axes = g.axes.clone();
        for (&j, &d) in free.iter().zip(&mapped) {
            let (ds, _, _) = axis(&di, j);
            let (rs, rlen, _) = axis(&ri, j);
            let start = match (&g.axes[d].start, ds, rs) {
                (Some(gs), Some(ds), Some(rs)) => Some(gs.add(&rs.add(&ds, -1), 1)),
                _ => None,
            };
            axes[d] = Axis { start, len: Some(rlen), expr: g.axes[d].expr };
        }
        Some(GlobalAccess { derived: true, tensor: g.tensor, axes, role: read.role, loops: read.loops.clone(), span: *self.m.exprs.span(read.expr) })
    }

    /// The global reads a store's value depends on, transitively.
    fn slice(&self, deps: &[Node]) -> Vec<usize> {
        let mut seen: BTreeSet<Node> = BTreeSet::new();
        let mut stack: Vec<Node> = deps.to_vec();
        let mut out = Vec::new();
        while let Some(n) = stack.pop() {
            if !seen.insert(n) {
                continue;
            }
            match n {
                Node::Read(id) => out.push(id),
                _ => {
                    if let Some(next) = self.deps.get(&n) {
                        stack.extend(next.iter().copied());
                    }
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// The first dim along which a feeding read misses the stored window. The finding points
    /// at the read when another read of that dim agrees with the store (the odd one out is the
    /// cause), and at the store when none does.
    fn store_mismatch(&self, store: usize, reads: &[usize], pairing: Pairing) -> Option<Finding> {
        let sa = &self.accesses[store];
        let st = &self.m.tensors[sa.tensor];
        for (sd, (sax, ssize)) in sa.axes.iter().zip(&st.shape).enumerate() {
            if ssize.as_const().is_some() || st.shape.iter().filter(|s| *s == ssize).count() != 1 {
                continue;
            }
            let Some(s0) = &sax.start else { continue };
            let (mut agree, mut first_bad) = (false, None);
            for &r in reads {
                let ra = &self.accesses[r];
                let rt = &self.m.tensors[ra.tensor];
                // The dim must name exactly one axis of the read too.
                let same: Vec<usize> = rt.shape.iter().enumerate().filter(|(_, s)| *s == ssize).map(|(i, _)| i).collect();
                let [rd] = same[..] else { continue };
                let rax = &ra.axes[rd];
                let (Some(r0), Some(sb), Some(rb)) = (&rax.start, sax.len, rax.len) else { continue };
                match self.disagree(sa, ra, s0, r0, sb, rb) {
                    Verdict::Agree => agree = true,
                    Verdict::Disagree(why) => {
                        first_bad.get_or_insert((r, rd, why));
                    }
                    Verdict::NotCompared => {}
                }
            }
            let Some((r, rd, why)) = first_bad else { continue };
            let ra = &self.accesses[r];
            let show_read = |acc: &GlobalAccess, ax: &Axis| match (acc.derived, &ax.start, ax.expr) {
                (true, Some(p), _) => format!("{} (through shared memory)", self.show_poly(p)),
                (_, _, Some(e)) => show(self.m, e),
                _ => ":".to_string(),
            };
            let show_axis = |ax: &Axis| show_read(sa, ax);
            let (ours, theirs) = (show_axis(sax), show_read(ra, &ra.axes[rd]));
            let (dim, other) = (super::facts::show_size(self.m, ssize), &self.m.tensors[ra.tensor].name);
            let what = match pairing {
                Pairing::Store => format!("`{}` is stored at `{ours}` along {dim} (axis {sd}), but `{other}`, which feeds it, is read at `{theirs}` (axis {rd}): {why}", st.name),
                Pairing::Operands => format!("`{}` and `{other}` are operands of one MMA, but along {dim} `{}` is read at `{ours}` (axis {sd}) and `{other}` at `{theirs}` (axis {rd}): {why}", st.name, st.name),
            };
            let (at, related) = if agree { (ra.span, sa.span) } else { (sa.span, ra.span) };
            return Some(Finding { what, at, related });
        }
        None
    }

    /// A polynomial in source-like form (`t.m * 128 + mma.warpgroup * 60`).
    fn show_poly(&self, p: &Poly) -> String {
        let sym = |s: &Sym| -> String {
            let unit = |r: &Handle<RoleDecl>, f: &u8| format!("{}.{}", self.m.roles[*r].name, ["warp", "warpgroup", "lane"][usize::from(*f).min(2)]);
            match s {
                Sym::Tile(a) => self.m.grid().and_then(|g| g.axes.get(*a)).map_or("t.?".to_string(), |ax| format!("t.{}", ax.name)),
                Sym::Loop(id) => self.loops[*id].var.clone(),
                Sym::Unit(r, f) => unit(r, f),
                Sym::UnitDiv(r, f, c) => format!("{} / {c}", unit(r, f)),
                Sym::UnitMod(r, f, c) => format!("{} % {c}", unit(r, f)),
                Sym::Dim(d) => self.m.dims[*d].name.clone(),
            }
        };
        let mut parts: Vec<String> = Vec::new();
        let mut constant = 0;
        for (mono, c) in &p.0 {
            if mono.is_empty() {
                constant = *c;
                continue;
            }
            let names: Vec<String> = mono.iter().map(sym).collect();
            parts.push(if *c == 1 { names.join(" * ") } else { format!("{} * {c}", names.join(" * ")) });
        }
        if constant != 0 || parts.is_empty() {
            parts.push(constant.to_string());
        }
        parts.join(" + ").replace("+ -", "- ")
    }

    /// `Some(why)` when the store window `[s0, s0 + sb)` misses the read window `[r0, r0 + rb)`
    /// for some value of the store's symbols.
    fn disagree(&self, store: &GlobalAccess, read: &GlobalAccess, s0: &Poly, r0: &Poly, sb: i64, rb: i64) -> Verdict {
        let loop_walks = |s: &Sym| matches!(s, Sym::Loop(_)) && !self.walks(s, 0).is_empty();
        // A dim or a dim-walking loop on either side (a chunk loop, a group offset `g * M`): only
        // comparable when both sides carry the same terms of it.
        let opaque = |s: &Sym| matches!(s, Sym::Dim(_)) || loop_walks(s);
        let (s_plain, s_walk) = s0.split(&opaque);
        let (r_plain, r_walk) = r0.split(&opaque);
        if s_walk != r_walk {
            let shared_dims = |p: &Poly| p.syms().iter().any(|s| matches!(s, Sym::Dim(_)));
            // A group offset on both sides that differs is a disagreement; a loop on one side only
            // is a reduction or contraction over it.
            if shared_dims(&s_walk) && shared_dims(&r_walk) {
                return Verdict::Disagree("their offsets along the dim differ by a multiple of a dim".to_string());
            }
            return Verdict::NotCompared;
        }
        // Symbols of the read the store does not depend on range over what the read covers.
        let store_syms = s_plain.syms();
        let read_only = |s: &Sym| {
            !store_syms.contains(s)
                && match s {
                    Sym::Unit(r, ..) | Sym::UnitDiv(r, ..) | Sym::UnitMod(r, ..) => *r != store.role,
                    Sym::Loop(id) => !store.loops.contains(id),
                    _ => false,
                }
        };
        let (r_fixed, r_free) = r_plain.split(&read_only);
        let Some((rmin, rmax)) = self.range(&r_free, read) else { return Verdict::NotCompared };
        let e = s_plain.add(&r_fixed, -1);
        if e.syms().iter().any(|s| matches!(s, Sym::Tile(_))) {
            return Verdict::Disagree("they differ by a tile offset: the operand comes from another tile".to_string());
        }
        // A read the storing warps index by their own id must use the store's stride: warp w
        // computes from the rows it reads and writes the rows it stores.
        let own_unit = |s: &Sym| matches!(s, Sym::Unit(r, ..) | Sym::UnitDiv(r, ..) | Sym::UnitMod(r, ..) if *r == store.role);
        if r_fixed.syms().iter().any(own_unit) && e.syms().iter().any(own_unit) {
            return Verdict::Disagree("the storing warps index the read by their id with another stride".to_string());
        }
        let Some((emin, emax)) = self.range(&e, store) else { return Verdict::NotCompared };
        let (lo, hi) = (rmin.saturating_sub(sb), rmax.saturating_add(rb));
        if emax >= hi || emin <= lo {
            let v = if emax >= hi { emax } else { emin };
            return Verdict::Disagree(format!("the first window starts {v} elements from the second, which covers {rb}"));
        }
        Verdict::Agree
    }

    /// The range of a polynomial over its symbols' ranges (role ids, constant-bound loops);
    /// `None` when a symbol has no known range.
    fn range(&self, p: &Poly, at: &GlobalAccess) -> Option<(i64, i64)> {
        let (mut lo, mut hi) = (0i64, 0i64);
        for (mono, c) in &p.0 {
            let (mut a, mut b) = (1i64, 1i64);
            for s in mono {
                let (x, y) = self.sym_range(s, at)?;
                let cands = [a.saturating_mul(x), a.saturating_mul(y), b.saturating_mul(x), b.saturating_mul(y)];
                a = *cands.iter().min()?;
                b = *cands.iter().max()?;
            }
            let (x, y) = (a.saturating_mul(*c), b.saturating_mul(*c));
            lo = lo.saturating_add(x.min(y));
            hi = hi.saturating_add(x.max(y));
        }
        Some((lo, hi))
    }

    fn sym_range(&self, s: &Sym, _at: &GlobalAccess) -> Option<(i64, i64)> {
        match s {
            Sym::Unit(r, f) => {
                let role = &self.m.roles[*r];
                let warps = i64::from(role.warps().len() as u32);
                Some(match f {
                    0 => (0, warps - 1),
                    1 => (0, (warps / 4).max(1) - 1),
                    _ => (0, 31),
                })
            }
            Sym::UnitDiv(r, f, c) => {
                let (_, hi) = self.sym_range(&Sym::Unit(*r, *f), _at)?;
                Some((0, hi / c))
            }
            Sym::UnitMod(r, f, c) => {
                let (_, hi) = self.sym_range(&Sym::Unit(*r, *f), _at)?;
                Some((0, hi.min(c - 1)))
            }
            Sym::Loop(id) => {
                let l = &self.loops[*id];
                let (lo, hi) = (l.lo.as_ref()?.as_const()?, l.hi.as_ref()?.as_const()?);
                (hi > lo).then_some((lo, hi - 1))
            }
            _ => None,
        }
    }
}

/// The role id a polynomial is exactly (`rows.warp`), if it is one.
fn unit_of(p: &Poly) -> Option<(Handle<RoleDecl>, u8)> {
    match p.0.iter().collect::<Vec<_>>()[..] {
        [(m, 1)] => match m[..] {
            [Sym::Unit(r, f)] => Some((r, f)),
            _ => None,
        },
        _ => None,
    }
}

fn is_integer(t: &Type) -> bool {
    match t {
        Type::Scalar(d) => d.is_int(),
        Type::Literal { float } => !float,
        _ => false,
    }
}

