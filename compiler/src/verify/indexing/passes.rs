//! Pass and chunk agreement: the chunks the loops of a role read along an axis of a tensor.
//!
//! A read whose coordinate along an axis is `a · v + b` for a loop variable `v` (and nothing
//! else: no tile, warp or dim term) walks that axis in chunks. Two checks, per (tensor, axis,
//! role):
//! - **Passes agree.** Two loops with the same variable name that read the same chunks (the same
//!   `a`, `b` and window length) from the same first chunk must have the same trip count: the
//!   statistics pass of a softmax and its writing pass cover one row.
//! - **The axis is covered.** The union of every read of the axis (chunked loops, whole-axis
//!   reads, fixed windows), at allowed bindings of the dims, is the whole extent: a reduction
//!   loop one chunk short, or windows at half their length apart, leave part of each row unread.
//!   Groups with a read the analysis cannot place (a tile- or warp-dependent start, a bound
//!   that is not a compile-time function of the dims) are not judged, nor an axis whose extent
//!   is a dim that some chunk loop's bounds do not name (`for dc in 0..2` over `D`: the program
//!   assumes D's value rather than reading too little).

use super::*;

/// A chunked read: `a · loop + b :+ len`.
struct Chunk {
    access: usize,
    loop_id: usize,
    a: i64,
    b: i64,
    len: i64,
}

pub(super) enum PassFinding {
    PassesDisagree(Finding),
    AxisPartlyRead(Finding),
}

impl Analysis<'_> {
    pub(super) fn pass_findings(&self, stores: &BTreeSet<usize>) -> Vec<(Handle<TensorDecl>, PassFinding)> {
        let mut groups: BTreeMap<(Handle<TensorDecl>, usize, Handle<RoleDecl>), Vec<usize>> = BTreeMap::new();
        for (id, acc) in self.accesses.iter().enumerate() {
            if acc.derived || stores.contains(&id) {
                continue;
            }
            for d in 0..acc.axes.len() {
                groups.entry((acc.tensor, d, acc.role)).or_default().push(id);
            }
        }
        let mut out = Vec::new();
        for ((tensor, d, _), ids) in &groups {
            let chunks: Vec<Chunk> = ids.iter().filter_map(|id| self.chunk(*id, *d)).collect();
            if chunks.is_empty() {
                continue;
            }
            if let Some(f) = self.passes_disagree(*tensor, *d, &chunks) {
                out.push((*tensor, PassFinding::PassesDisagree(f)));
            } else if let Some(f) = self.axis_partly_read(*tensor, *d, ids, &chunks) {
                out.push((*tensor, PassFinding::AxisPartlyRead(f)));
            }
        }
        out
    }

    fn chunk(&self, id: usize, d: usize) -> Option<Chunk> {
        let ax = &self.accesses[id].axes[d];
        let (p, len) = (ax.start.as_ref()?, ax.len?);
        let mut found: Option<(usize, i64)> = None;
        let mut b = 0;
        for (mono, c) in &p.0 {
            match mono[..] {
                [] => b = *c,
                [Sym::Loop(l)] if found.is_none() && *c > 0 => found = Some((l, *c)),
                _ => return None,
            }
        }
        let (loop_id, a) = found?;
        Some(Chunk { access: id, loop_id, a, b, len })
    }

    fn passes_disagree(&self, tensor: Handle<TensorDecl>, d: usize, chunks: &[Chunk]) -> Option<Finding> {
        for (i, x) in chunks.iter().enumerate() {
            for y in &chunks[i + 1..] {
                let (lx, ly) = (&self.loops[x.loop_id], &self.loops[y.loop_id]);
                let same_lattice = (x.a, x.b, x.len) == (y.a, y.b, y.len) && lx.var == ly.var;
                if x.loop_id == y.loop_id || !same_lattice || lx.lo.is_none() || lx.lo != ly.lo || lx.hi == ly.hi {
                    continue;
                }
                return Some(Finding {
                    what: format!(
                        "the loops `{}` and `{}` read the same {}-element chunks of `{}` along axis {d} from the same first chunk, but for different trip counts: one pass covers chunks the other does not",
                        lx.name, ly.name, x.len, self.m.tensors[tensor].name
                    ),
                    at: ly.span,
                    related: lx.span,
                });
            }
        }
        None
    }

    fn axis_partly_read(&self, tensor: Handle<TensorDecl>, d: usize, ids: &[usize], chunks: &[Chunk]) -> Option<Finding> {
        let td = &self.m.tensors[tensor];
        // An extent that is a dim is judged only against loops whose bounds walk it: a loop of
        // constant trip count over a free dim assumes the dim's value (an assumption the program
        // does not state, not a short loop).
        let extent_dims: BTreeSet<Handle<DimDecl>> = td.shape[d].dims().into_iter().collect();
        if !extent_dims.is_empty() && chunks.iter().any(|c| self.walks(&Sym::Loop(c.loop_id), 0).is_disjoint(&extent_dims)) {
            return None;
        }
        for dims in [1, 3].map(|k| crate::verify::coverage::dims_at(self.m, &|_| k)) {
            let extent = td.shape[d].eval(&dims)?;
            let mut spans: Vec<(i64, i64)> = Vec::new();
            for id in ids {
                let ax = &self.accesses[*id].axes[d];
                if let Some(c) = chunks.iter().find(|c| c.access == *id) {
                    let l = &self.loops[c.loop_id];
                    let (lo, hi) = (eval_poly(l.lo.as_ref()?, &dims)?, eval_poly(l.hi.as_ref()?, &dims)?);
                    if hi <= lo {
                        continue;
                    }
                    // Saturating: a program's constants may be absurd, and this must not panic.
                    let at = |v: i64| c.b.saturating_add(c.a.saturating_mul(v));
                    if c.a > c.len {
                        // Gaps between chunks: each chunk is its own span.
                        for v in lo..hi.min(lo.saturating_add(4096)) {
                            spans.push((at(v), at(v).saturating_add(c.len)));
                        }
                    } else {
                        spans.push((at(lo), at(hi - 1).saturating_add(c.len)));
                    }
                    continue;
                }
                match (&ax.start, ax.len) {
                    (Some(p), None) if p.0.is_empty() => spans.push((0, extent)),
                    (Some(p), Some(len)) => spans.push((p.as_const()?, p.as_const()?.saturating_add(len))),
                    _ => return None,
                }
            }
            let covered = union_covers(&mut spans, extent);
            if let Some((a, z)) = covered {
                let c = &chunks[0];
                let l = &self.loops[c.loop_id];
                let binding: Vec<String> = self.m.dims.iter().zip(&dims).map(|((_, dd), v)| format!("{} = {v}", dd.name)).collect();
                return Some(Finding {
                    what: format!(
                        "the reads of `{}` along axis {d} (extent {extent}{}) leave elements {a}..{z} unread: the loop `{}` reads {}-element chunks {} apart",
                        td.name,
                        if binding.is_empty() { String::new() } else { format!(" at {}", binding.join(", ")) },
                        l.name,
                        c.len,
                        c.a
                    ),
                    at: self.accesses[c.access].span,
                    related: l.span,
                });
            }
        }
        None
    }
}

/// The first gap `[a, z)` the spans leave in `[0, extent)`, if any.
fn union_covers(spans: &mut [(i64, i64)], extent: i64) -> Option<(i64, i64)> {
    spans.sort_unstable();
    let mut reach = 0;
    for (a, z) in spans.iter() {
        if *a > reach && reach < extent {
            return Some((reach, (*a).min(extent)));
        }
        reach = reach.max(*z);
    }
    (reach < extent).then_some((reach, extent))
}


/// A polynomial over dims only, at a binding.
fn eval_poly(p: &Poly, dims: &[i64]) -> Option<i64> {
    let mut total: i64 = 0;
    for (mono, c) in &p.0 {
        let mut v = *c;
        for s in mono {
            match s {
                Sym::Dim(d) => v = v.checked_mul(*dims.get(d.index())?)?,
                _ => return None,
            }
        }
        total = total.checked_add(v)?;
    }
    Some(total)
}
