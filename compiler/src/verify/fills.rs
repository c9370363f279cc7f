//! Shared-memory fills: the bytes of one stage each `tma_load` / `cp_async` writes, and sibling
//! fills of one stage whose bytes overlap.
//!
//! Fills that are statements of the same block and complete on the same pipeline or barrier (or,
//! for `cp_async`, on none) land in one stage at once: two boxes meant for the two halves of a
//! tile, a K slice and its neighbour. The destination's bytes, relative to its stage, come from
//! the view's offset and shape or from constant window indices of the region; a destination
//! indexed by a loop variable (`x_s[dc]`, one slot per iteration) or in a shape that is not one
//! contiguous range is left out. Two sibling fills whose ranges intersect overwrite each other:
//! one box of the tile never arrives where its readers look.
//!
//! The result is a fact of the region (`overlapping_fills`, with the text and both spans), so the
//! rule that reports it is data (V328).

use std::collections::BTreeMap;

use super::protocol::eval::show;
use crate::catalog::{Access as ParamAccess, Catalog};
use crate::ir::*;
use crate::span::Span;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegionFills {
    pub overlapping: u32,
    pub first: Option<FillOverlap>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FillOverlap {
    pub what: String,
    /// The cause: the second view's declaration when the fills go through two views (their
    /// offsets overlap), else the second fill.
    pub at: Span,
    /// The first view's declaration, or the first fill.
    pub other: Span,
}

struct Fill {
    region: Handle<SmemDecl>,
    /// The pipeline or barrier it completes on, as written (`ab`); empty for none.
    completes_on: String,
    dst: Handle<Expr>,
    bytes: Option<(u64, u64)>,
    span: Span,
    op: String,
}

/// Overlapping sibling fills, per region.
pub fn analyze(m: &Module) -> BTreeMap<Handle<SmemDecl>, RegionFills> {
    let mut out: BTreeMap<Handle<SmemDecl>, RegionFills> = BTreeMap::new();
    for (_, body) in m.bodies.iter() {
        block(m, &body.block, &mut out);
    }
    out
}

fn block(m: &Module, b: &Block, out: &mut BTreeMap<Handle<SmemDecl>, RegionFills>) {
    let mut fills: Vec<Fill> = Vec::new();
    for s in &b.stmts {
        match &m.stmts[*s] {
            Stmt::Op(c) => fills.extend(fill_of(m, c, *m.stmts.span(*s))),
            Stmt::For { body, .. } | Stmt::ForTiles { body, .. } => block(m, body, out),
            Stmt::If { then_block, else_block, .. } => {
                block(m, then_block, out);
                if let Some(e) = else_block {
                    block(m, e, out);
                }
            }
            _ => {}
        }
    }
    for (i, x) in fills.iter().enumerate() {
        for y in &fills[i + 1..] {
            let (Some((a0, a1)), Some((b0, b1))) = (x.bytes, y.bytes) else { continue };
            if x.region != y.region || x.completes_on != y.completes_on || a0.max(b0) >= a1.min(b1) {
                continue;
            }
            let e = out.entry(x.region).or_default();
            e.overlapping += 1;
            let region = &m.smem[x.region].name;
            let on = if x.completes_on.is_empty() { String::new() } else { format!(" (both complete on `{}`)", x.completes_on) };
            e.first.get_or_insert(FillOverlap {
                what: format!(
                    "`{}` into `{}` writes bytes {b0}..{b1} of a stage of `{region}`, and `{}` into `{}`{on} writes bytes {a0}..{a1}: bytes {}..{} of one stage receive two boxes",
                    y.op,
                    show(m, y.dst),
                    x.op,
                    show(m, x.dst),
                    a0.max(b0),
                    a1.min(b1)
                ),
                at: view_of(m, y.dst).filter(|v| Some(*v) != view_of(m, x.dst)).map_or(y.span, |v| m.views.span(v).item),
                other: match (view_of(m, x.dst), view_of(m, y.dst)) {
                    (Some(a), Some(b)) if a != b => m.views.span(a).item,
                    _ => x.span,
                },
            });
        }
    }
}

fn view_of(m: &Module, e: Handle<Expr>) -> Option<Handle<ViewDecl>> {
    let base = match &m.exprs[e].kind {
        ExprKind::Index { base, .. } => *base,
        _ => e,
    };
    match m.exprs[base].kind {
        ExprKind::View(v) => Some(v),
        _ => None,
    }
}

/// A statement that copies a global window into shared memory: its destination and completion.
fn fill_of(m: &Module, c: &OpCall, span: Span) -> Option<Fill> {
    let def = Catalog::builtin().get(&c.op)?;
    let mut dst = None;
    let mut reads_global = false;
    let mut completes_on = String::new();
    for (p, a) in def.params.iter().zip(&c.args) {
        let Some(a) = *a else { continue };
        match (&m.exprs[a].ty, p.access) {
            (Type::Shared { .. }, Some(ParamAccess::Write)) => dst = Some(a),
            (Type::Global { .. }, _) => reads_global = true,
            (Type::Pipeline(_) | Type::Barrier(_), _) => completes_on = show(m, a),
            _ => {}
        }
    }
    let dst = dst.filter(|_| reads_global)?;
    let (region, bytes) = dst_bytes(m, dst)?;
    Some(Fill { region, completes_on, dst, bytes, span, op: c.op.clone() })
}

/// The region a destination lies in, and its byte range within one stage when that is a
/// compile-time constant, contiguous range.
fn dst_bytes(m: &Module, e: Handle<Expr>) -> Option<(Handle<SmemDecl>, Option<(u64, u64)>)> {
    let (base, items) = match &m.exprs[e].kind {
        ExprKind::Index { base, items } => (*base, items.clone()),
        _ => (e, Vec::new()),
    };
    let (region, offset, shape, dtype, staged) = match &m.exprs[base].kind {
        ExprKind::Smem(s) => {
            let d = &m.smem[*s];
            (*s, 0u64, d.shape.clone(), d.dtype, d.stages > 1 || items.len() > d.shape.len())
        }
        ExprKind::View(v) => {
            let d = &m.views[*v];
            (d.region, u64::try_from(d.offset).ok()?, d.shape.clone(), d.dtype, false)
        }
        _ => return None,
    };
    let items = if staged { items.get(1..).unwrap_or_default().to_vec() } else { items };
    Some((region, box_bytes(m, &items, &shape, dtype.size_bytes()).map(|(a, z)| (offset + a, offset + z))))
}

/// `[first, end)` bytes of the box the constant items select in a row-major array, if it is one
/// contiguous range.
fn box_bytes(m: &Module, items: &[IndexItem], shape: &[i64], elem: u64) -> Option<(u64, u64)> {
    let mut lo: Vec<i64> = Vec::with_capacity(shape.len());
    let mut len: Vec<i64> = Vec::with_capacity(shape.len());
    for (d, extent) in shape.iter().enumerate() {
        match items.get(d) {
            Some(IndexItem::At(x)) => {
                lo.push(m.const_value(*x)?);
                len.push(1);
            }
            Some(IndexItem::Window { start, len: l }) => {
                lo.push(m.const_value(*start)?);
                len.push(*l);
            }
            Some(IndexItem::Full) | None => {
                lo.push(0);
                len.push(*extent);
            }
        }
    }
    // Contiguous: after the first axis that is not taken whole, only whole axes... read from
    // the inside: every axis inside the outermost partial one is whole.
    let first_partial_inner = (0..shape.len()).rev().find(|d| len[*d] != shape[*d]);
    if let Some(k) = first_partial_inner {
        if (0..k).any(|d| len[d] != 1) {
            return None;
        }
    }
    let mut stride = elem as i64;
    let (mut first, mut size) = (0i64, elem as i64);
    for d in (0..shape.len()).rev() {
        first = first.checked_add(lo[d].checked_mul(stride)?)?;
        size = size.checked_mul(len[d])?;
        stride = stride.checked_mul(shape[d])?;
    }
    let first = u64::try_from(first).ok()?;
    Some((first, first.checked_add(u64::try_from(size).ok()?)?))
}
