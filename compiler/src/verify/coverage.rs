//! Output coverage and ownership: which elements of each output tensor every writer stores.
//!
//! A writer is one (tile, role, unit) of the grid: every tile of the tile space, every role with
//! a body, and every warp or warpgroup of the role (the scope of the stored fragment decides
//! which: a warpgroup fragment is written once per warpgroup). The analysis walks each writer's
//! body under a few bindings of the dims that satisfy every `multiple_of` — allowed shapes, not
//! only convenient ones: each dim at 1×, 3× and an odd multiple of its `multiple_of` — with the
//! loops unrolled, and collects the box every `store` / `tma_store` into global memory writes
//! (clipped to the tensor: the lowering guards every store with the tensor's bounds). Then, per
//! tensor, exactly on a grid compressed to the boxes' edges:
//! - elements of an `out` tensor no writer stores (a tile space too small for its tiles, a row
//!   or chunk left out);
//! - elements two different writers store (two warps, two roles or two tiles on the same rows).
//!   One writer storing a box again (each iteration of a loop, say) is not a conflict.
//!
//! The results are facts of the tensor (`unwritten_elements`, `overlap_elements`, with the
//! binding and the first offending box as text, and spans of the writers), so the rules that
//! report them are data (V320, V321) and the evolution engine can write more. A store the walk
//! cannot place — an index that depends on run-time data or a lane, a loop or a tile space past
//! the work bound — leaves the facts unknown, which the rules report as a coverage limit: never
//! a silent pass.

use std::collections::{BTreeMap, BTreeSet};

use super::protocol::eval::{eval, Env, Val};
use crate::catalog::IssueScope;
use crate::ir::*;
use crate::syntax::ast::Access;
use crate::span::Span;

/// Store instances one binding may produce before the analysis gives up (a coverage limit).
const MAX_BOXES: usize = 200_000;
/// Cells of the compressed grid of one tensor.
const MAX_CELLS: usize = 4_000_000;
/// Tiles of the tile space under one binding.
const MAX_TILES: usize = 100_000;
/// Loop iterations one writer's walk may take (the protocol trace's bound, `trace::MAX_STEPS`):
/// a loop that stores nothing on most iterations (an inner loop of zero trips) would otherwise
/// be walked for as long as its trip count says, 2^63 - 1 in the fuzz campaign's hang.
const MAX_STEPS: u64 = 3_000_000;

/// What the analysis found for one output tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Coverage {
    Decided {
        unwritten: u64,
        overlap: u64,
        /// The binding of the first problem (or of the last binding when there is none).
        binding: String,
        first_hole: Option<String>,
        first_overlap: Option<Overlap>,
        /// A store into the tensor (for spans).
        first_writer: Option<Span>,
        stores: usize,
    },
    /// Why not: the expression or bound the walk could not evaluate, and where.
    Undecided { reason: String, span: Span },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overlap {
    pub what: String,
    pub first: Span,
    pub second: Span,
}

/// One store instance: the writer, the box, the statement.
struct Written {
    writer: Writer,
    lo: Vec<i64>,
    hi: Vec<i64>,
    span: Span,
}

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Writer {
    tile: Vec<i64>,
    role: usize,
    /// The index of the unit that owns the stored value (warp, warpgroup), within the role.
    unit: i64,
    unit_kind: &'static str,
}

impl Writer {
    fn describe(&self, m: &Module) -> String {
        let role = m.roles.iter().nth(self.role).map_or("?", |(_, r)| r.name.as_str());
        let tile: Vec<String> = self.tile.iter().map(|t| t.to_string()).collect();
        format!("tile ({}) role `{role}` {} {}", tile.join(", "), self.unit_kind, self.unit)
    }
}

/// The coverage of every `out` / `inout` tensor that some statement stores into.
pub fn analyze(m: &Module) -> BTreeMap<Handle<TensorDecl>, Coverage> {
    let stored: BTreeSet<Handle<TensorDecl>> = store_targets(m);
    let mut out: BTreeMap<Handle<TensorDecl>, Coverage> = BTreeMap::new();
    if stored.is_empty() {
        return out;
    }
    for dims in bindings(m) {
        let run = match walk_binding(m, &dims) {
            Ok(r) => r,
            Err((reason, span)) => {
                for t in &stored {
                    out.insert(*t, Coverage::Undecided { reason: reason.clone(), span });
                }
                return out;
            }
        };
        let binding = describe_binding(m, &dims);
        for t in &stored {
            if matches!(out.get(t), Some(Coverage::Undecided { .. })) {
                continue;
            }
            if matches!(out.get(t), Some(Coverage::Decided { unwritten, overlap, .. }) if *unwritten > 0 || *overlap > 0) {
                continue; // the first binding with a problem is the one reported
            }
            let boxes: Vec<&Written> = run.iter().filter(|(tt, _)| tt == t).map(|(_, w)| w).collect();
            let c = judge(m, *t, &dims, &boxes, &binding);
            out.insert(*t, c);
        }
    }
    out
}

/// Who stores an element of an output: the role, its unit (warp or warpgroup, or `instance` for
/// an elected store), the tile and the store statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    pub role: String,
    pub unit_kind: &'static str,
    pub unit: i64,
    pub tile: Vec<i64>,
    pub store: Span,
}

/// The owners of each element of `indices` (outermost first) of tensor `t` with the dims bound to
/// `dims` (declaration order; a run's shape): every writer whose store box contains it, in the
/// walk's order — empty for an element no writer stores. The same walk as [`analyze`], so the
/// verifier's coverage and the attribution of a wrong answer agree; `Err` with the reason where
/// the walk cannot place a store at that binding (a run-time index, a tile space past the bound).
pub fn owners(m: &Module, dims: &[i64], t: Handle<TensorDecl>, indices: &[Vec<i64>]) -> Result<Vec<Vec<Owner>>, String> {
    let run = walk_binding(m, dims).map_err(|(reason, _)| reason)?;
    let boxes: Vec<&Written> = run.iter().filter(|(tt, _)| *tt == t).map(|(_, w)| w).collect();
    let role_name = |i: usize| m.roles.iter().nth(i).map_or_else(String::new, |(_, r)| r.name.clone());
    Ok(indices
        .iter()
        .map(|ix| {
            boxes
                .iter()
                .filter(|w| ix.len() == w.lo.len() && ix.iter().zip(w.lo.iter().zip(&w.hi)).all(|(x, (lo, hi))| lo <= x && x < hi))
                .map(|w| Owner { role: role_name(w.writer.role), unit_kind: w.writer.unit_kind, unit: w.writer.unit, tile: w.writer.tile.clone(), store: w.span })
                .collect()
        })
        .collect())
}

fn store_targets(m: &Module) -> BTreeSet<Handle<TensorDecl>> {
    let mut out = BTreeSet::new();
    for (_, s) in m.stmts.iter() {
        if let Stmt::Op(c) = s {
            if let Some(t) = store_dst(m, c).and_then(|d| tensor_of(m, d)) {
                if m.tensors[t].access != Access::In {
                    out.insert(t);
                }
            }
        }
    }
    out
}

/// The global destination of a store statement.
fn store_dst(m: &Module, c: &OpCall) -> Option<Handle<Expr>> {
    match c.op.as_str() {
        "store" | "tma_store" => {
            let d = c.args.first().copied().flatten()?;
            matches!(m.exprs[d].ty, Type::Global { .. }).then_some(d)
        }
        _ => None,
    }
}

fn tensor_of(m: &Module, mut e: Handle<Expr>) -> Option<Handle<TensorDecl>> {
    for _ in 0..16 {
        match &m.exprs[e].kind {
            ExprKind::Tensor(t) => return Some(*t),
            ExprKind::Index { base, .. } => e = *base,
            _ => return None,
        }
    }
    None
}

/// Dims at allowed values: each `multiple_of` (or 1) times 1, times 3, and times an odd number
/// that grows with the dim's position (5, 7, 9, ...), so a chunk or tile that only divides
/// convenient shapes is caught.
fn bindings(m: &Module) -> Vec<Vec<i64>> {
    vec![dims_at(m, &|_| 1), dims_at(m, &|_| 3), dims_at(m, &|i| 5 + 2 * i as i64)]
}

/// An allowed binding of the dims: dim i at `k(i)` times its `multiple_of` (or 1), capped so
/// the walks stay bounded.
pub(crate) fn dims_at(m: &Module, k: &dyn Fn(usize) -> i64) -> Vec<i64> {
    m.dims.iter().enumerate().map(|(i, (_, d))| d.multiple_of.filter(|v| *v > 0).unwrap_or(1).saturating_mul(k(i)).min(1 << 24)).collect()
}

fn describe_binding(m: &Module, dims: &[i64]) -> String {
    m.dims.iter().zip(dims).map(|((_, d), v)| format!("{} = {v}", d.name)).collect::<Vec<_>>().join(", ")
}

type Fail = (String, Span);

/// Every store instance of one binding, by tensor.
fn walk_binding(m: &Module, dims: &[i64]) -> Result<Vec<(Handle<TensorDecl>, Written)>, Fail> {
    let tiles = tile_coords(m, dims)?;
    let mut out = Vec::new();
    for (_, body) in m.bodies.iter() {
        let role = &m.roles[body.role];
        let role_index = body.role.index();
        // One walk per warp of the role: warp w of a warpgroup role is warpgroup w / 4.
        for warp in 0..i64::from(role.warps().len() as u32) {
            let fields = vec![
                (body.role, Field::Warp, warp),
                (body.role, Field::Warpgroup, warp / 4),
            ];
            let env = Env { dims: dims.to_vec(), role_fields: fields, ..Env::default() };
            let mut w = Walk { m, tiles: &tiles, role: role_index, unit: role.unit, warp, out: &mut out, tile: Vec::new(), steps: 0 };
            w.block(&body.block, env)?;
        }
    }
    Ok(out)
}

fn tile_coords(m: &Module, dims: &[i64]) -> Result<Vec<Vec<i64>>, Fail> {
    let Some((h, g)) = m.grid.iter().next() else { return Ok(vec![Vec::new()]) };
    let mut extents = Vec::new();
    for a in &g.axes {
        match a.extent.eval(dims) {
            Some(e) => extents.push(e.max(0)),
            None => return Err((format!("the extent of tile axis `{}` at {}", a.name, describe_binding(m, dims)), m.grid.span(h).item)),
        }
    }
    let total = extents.iter().try_fold(1usize, |acc, e| acc.checked_mul(*e as usize)).unwrap_or(usize::MAX);
    if total > MAX_TILES {
        return Err((format!("{total} tiles at {} (more than the analysis walks)", describe_binding(m, dims)), m.grid.span(h).item));
    }
    let mut out = vec![Vec::new()];
    for e in extents {
        out = out.into_iter().flat_map(|p| (0..e).map(move |i| [p.clone(), vec![i]].concat())).collect();
    }
    Ok(out)
}

struct Walk<'a> {
    m: &'a Module,
    tiles: &'a [Vec<i64>],
    role: usize,
    unit: RoleUnit,
    warp: i64,
    tile: Vec<i64>,
    out: &'a mut Vec<(Handle<TensorDecl>, Written)>,
    /// Loop iterations walked so far (bounded by [`MAX_STEPS`]).
    steps: u64,
}

impl Walk<'_> {
    fn block(&mut self, b: &Block, mut env: Env) -> Result<(), Fail> {
        for s in &b.stmts {
            let span = *self.m.stmts.span(*s);
            match &self.m.stmts[*s] {
                Stmt::Let { local, value } => {
                    if let Val::Int(v) = eval(self.m, &env, *value) {
                        env.ints.insert(*local, v);
                    }
                }
                Stmt::Op(c) => self.store(c, &env, span)?,
                Stmt::For { var, lo, hi, body, .. } => {
                    // Only loops that hold a store are unrolled.
                    if !self.has_store(body) {
                        continue;
                    }
                    let (Val::Int(a), Val::Int(b)) = (eval(self.m, &env, *lo), eval(self.m, &env, *hi)) else {
                        return Err((format!("the bounds of loop `{}`", self.m.locals[*var].name), span));
                    };
                    for i in a..b {
                        self.steps += 1;
                        if self.steps > MAX_STEPS {
                            return Err((format!("more than {MAX_STEPS} loop iterations (more than the analysis walks)"), span));
                        }
                        let mut inner = env.clone();
                        inner.ints.insert(*var, i);
                        self.block(body, inner)?;
                        if self.out.len() > MAX_BOXES {
                            return Err(("more store instances than the analysis walks".to_string(), span));
                        }
                    }
                }
                Stmt::ForTiles { var, body } => {
                    if !self.has_store(body) {
                        continue;
                    }
                    for t in self.tiles {
                        let mut inner = env.clone();
                        inner.tiles.insert(*var, t.clone());
                        let saved = std::mem::replace(&mut self.tile, t.clone());
                        self.block(body, inner)?;
                        self.tile = saved;
                    }
                }
                Stmt::If { cond, then_block, else_block } => {
                    let has = self.has_store(then_block) || else_block.as_ref().is_some_and(|e| self.has_store(e));
                    if !has {
                        continue;
                    }
                    match eval(self.m, &env, *cond) {
                        Val::Bool(true) => self.block(then_block, env.clone())?,
                        Val::Bool(false) => {
                            if let Some(e) = else_block {
                                self.block(e, env.clone())?;
                            }
                        }
                        _ => return Err((format!("the condition `{}` around a store", super::protocol::eval::show(self.m, *cond)), span)),
                    }
                }
                Stmt::Reg(_) | Stmt::Assign { .. } => {}
            }
        }
        Ok(())
    }

    fn has_store(&self, b: &Block) -> bool {
        b.stmts.iter().any(|s| match &self.m.stmts[*s] {
            Stmt::Op(c) => store_dst(self.m, c).is_some(),
            Stmt::For { body, .. } | Stmt::ForTiles { body, .. } => self.has_store(body),
            Stmt::If { then_block, else_block, .. } => self.has_store(then_block) || else_block.as_ref().is_some_and(|e| self.has_store(e)),
            _ => false,
        })
    }

    fn store(&mut self, c: &OpCall, env: &Env, span: Span) -> Result<(), Fail> {
        let m = self.m;
        let Some(dst) = store_dst(m, c) else { return Ok(()) };
        let Some(t) = tensor_of(m, dst) else { return Ok(()) };
        let td = &m.tensors[t];
        let rank = td.shape.len();
        let items: Vec<IndexItem> = match &m.exprs[dst].kind {
            ExprKind::Index { items, .. } => items.clone(),
            _ => Vec::new(),
        };
        let (mut lo, mut hi) = (Vec::with_capacity(rank), Vec::with_capacity(rank));
        for (d, size) in td.shape.iter().enumerate() {
            // A size that evaluates negative (`M - 2 * M`) holds nothing.
            let extent = size.eval(&env.dims).unwrap_or(0).max(0);
            let (a, b) = match items.get(d) {
                Some(IndexItem::At(x)) => {
                    let v = self.int(*x, env, span)?;
                    // An index at i64::MAX is past every tensor: clamped below, never overflowing.
                    (v, v.saturating_add(1))
                }
                Some(IndexItem::Window { start, len }) => {
                    let v = self.int(*start, env, span)?;
                    (v, v.saturating_add(*len))
                }
                Some(IndexItem::Full) | None => (0, extent),
            };
            // The lowering guards every element with the tensor's bounds.
            lo.push(a.clamp(0, extent));
            hi.push(b.clamp(0, extent));
        }
        // The unit that owns the stored value: a warpgroup fragment is one write per warpgroup.
        let scope = c.args.get(1).copied().flatten().and_then(|v| match &m.exprs[v].ty {
            Type::Frag { scope, .. } => *scope,
            _ => None,
        });
        // An op the catalog issues from one elected thread (tma_store) is one write per role:
        // the role's first warp issues it.
        let elected = crate::catalog::Catalog::builtin().get(&c.op).is_some_and(|op| op.issue == IssueScope::Elected);
        if elected && self.warp != 0 {
            return Ok(());
        }
        let (unit, unit_kind) = match (elected, scope, self.unit) {
            (true, ..) => (0, "instance"),
            (false, Some(Scope::Warpgroup), _) | (false, None, RoleUnit::Warpgroup) => (self.warp / 4, "warpgroup"),
            _ => (self.warp, "warp"),
        };
        let writer = Writer { tile: self.tile.clone(), role: self.role, unit, unit_kind };
        self.out.push((t, Written { writer, lo, hi, span }));
        Ok(())
    }

    fn int(&self, e: Handle<Expr>, env: &Env, span: Span) -> Result<i64, Fail> {
        match eval(self.m, env, e) {
            Val::Int(v) => Ok(v),
            _ => Err((format!("the store index `{}`", super::protocol::eval::show(self.m, e)), span)),
        }
    }
}

/// Holes and overlaps of one tensor's boxes, exactly, on the grid of the boxes' edges.
fn judge(m: &Module, t: Handle<TensorDecl>, dims: &[i64], boxes: &[&Written], binding: &str) -> Coverage {
    let td = &m.tensors[t];
    let extents: Vec<i64> = td.shape.iter().map(|s| s.eval(dims).unwrap_or(0).max(0)).collect();
    let rank = extents.len();
    // One writer storing the same box twice is one write.
    let mut unique: Vec<&Written> = Vec::new();
    let mut seen: BTreeSet<(&Writer, &[i64], &[i64])> = BTreeSet::new();
    for b in boxes {
        if b.lo.iter().zip(&b.hi).any(|(a, z)| a >= z) {
            continue;
        }
        if seen.insert((&b.writer, &b.lo, &b.hi)) {
            unique.push(b);
        }
    }
    let mut edges: Vec<Vec<i64>> = (0..rank).map(|d| vec![0, extents[d]]).collect();
    for b in &unique {
        for (d, e) in edges.iter_mut().enumerate() {
            e.push(b.lo[d]);
            e.push(b.hi[d]);
        }
    }
    for e in &mut edges {
        e.sort_unstable();
        e.dedup();
    }
    let sizes: Vec<usize> = edges.iter().map(|e| e.len().saturating_sub(1)).collect();
    let cells = sizes.iter().try_fold(1usize, |a, s| a.checked_mul(*s)).unwrap_or(usize::MAX);
    if cells > MAX_CELLS {
        return Coverage::Undecided { reason: format!("{cells} distinct regions of `{}` at {binding}", td.name), span: m.tensors.span(t).item };
    }
    let index = |d: usize, v: i64| edges[d].binary_search(&v).unwrap_or_else(|i| i);
    // Per cell: the first box that writes it, and whether a box of another writer does too.
    let mut first = vec![u32::MAX; cells];
    let mut shared = vec![false; cells];
    let mut first_overlap: Option<Overlap> = None;
    for (wi, b) in unique.iter().enumerate() {
        let ranges: Vec<(usize, usize)> = (0..rank).map(|d| (index(d, b.lo[d]), index(d, b.hi[d]))).collect();
        for_each_cell(&ranges, &sizes, &mut |c| {
            if first[c] == u32::MAX {
                first[c] = wi as u32;
                return;
            }
            let a = unique[first[c] as usize];
            if a.writer != b.writer && !shared[c] {
                shared[c] = true;
                if first_overlap.is_none() {
                    first_overlap = Some(Overlap {
                        what: format!("{} of `{}` is written by {} and by {}", show_box(&cell_box(c, &sizes, &edges)), td.name, a.writer.describe(m), b.writer.describe(m)),
                        first: a.span,
                        second: b.span,
                    });
                }
            }
        });
    }
    let volume = |c: usize| -> u64 { cell_box(c, &sizes, &edges).iter().map(|(a, b)| (b - a) as u64).product() };
    let (mut unwritten, mut overlap, mut first_hole) = (0u64, 0u64, None);
    for c in 0..cells {
        if first[c] == u32::MAX {
            unwritten = unwritten.saturating_add(volume(c));
            if first_hole.is_none() {
                first_hole = Some(show_box(&cell_box(c, &sizes, &edges)));
            }
        } else if shared[c] {
            overlap = overlap.saturating_add(volume(c));
        }
    }
    if td.access != Access::Out {
        unwritten = 0; // an `inout` tensor keeps what is not stored
        first_hole = None;
    }
    Coverage::Decided { unwritten, overlap, binding: binding.to_string(), first_hole, first_overlap, first_writer: boxes.first().map(|b| b.span), stores: unique.len() }
}

fn for_each_cell(ranges: &[(usize, usize)], sizes: &[usize], f: &mut dyn FnMut(usize)) {
    fn rec(d: usize, base: usize, ranges: &[(usize, usize)], sizes: &[usize], f: &mut dyn FnMut(usize)) {
        if d == ranges.len() {
            f(base);
            return;
        }
        for i in ranges[d].0..ranges[d].1 {
            rec(d + 1, base * sizes[d] + i, ranges, sizes, f);
        }
    }
    rec(0, 0, ranges, sizes, f);
}

fn cell_box(mut c: usize, sizes: &[usize], edges: &[Vec<i64>]) -> Vec<(i64, i64)> {
    let mut out = vec![(0, 0); sizes.len()];
    for d in (0..sizes.len()).rev() {
        let i = c % sizes[d].max(1);
        c /= sizes[d].max(1);
        out[d] = (edges[d][i], edges[d][i + 1]);
    }
    out
}

fn show_box(b: &[(i64, i64)]) -> String {
    let parts: Vec<String> = b.iter().map(|(a, z)| if z - a == 1 { a.to_string() } else { format!("{a}..{z}") }).collect();
    format!("[{}]", parts.join(", "))
}
