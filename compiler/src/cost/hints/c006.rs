//! C006 — memory-bound with little reuse.
//!
//! Detects a kernel whose bottleneck is memory and one of whose global operands comes from DRAM
//! more than 1.5 times as often as its concurrent readers would need (its distinct windows do
//! not stay in L2 between the blocks that read them), while fewer than 8 concurrently running
//! blocks share each window. Every block then pulls its own copy through DRAM; the operand with
//! the most DRAM traffic is named. Walking the tiles in bands (`group G` on the tile space) so
//! that concurrent blocks share windows, a larger tile along the axis that reuses the operand, or
//! multicasting it through a cluster raises L2 reuse.

use crate::diag::Diagnostic;

use super::super::{hint, Bottleneck};
use super::HintCx;

pub(super) fn check(cx: &HintCx<'_>) -> Vec<Diagnostic> {
    let m = cx.m;
    if cx.est.bottleneck != Bottleneck::Memory {
        return Vec::new();
    }
    let Some(o) = cx
        .operands
        .iter()
        .filter(|o| o.requested > 0.0 && o.dram > 1.5 * (o.requested / o.readers.max(1.0)).min(o.dram) && o.readers < 8.0)
        .max_by(|a, b| a.dram.total_cmp(&b.dram))
    else {
        return Vec::new();
    };
    let Some((th, t)) = m.tensors.iter().nth(o.tensor) else { return Vec::new() };
    vec![hint(
        "C006",
        format!(
            "memory-bound: `{}` is read from DRAM {:.2} GB over the kernel; each window is shared by only {:.1} concurrently running blocks",
            t.name,
            o.dram * 1e-9,
            o.readers
        ),
        m.tensors.span(th).name,
        "little reuse across concurrent tiles",
    )
    .with_help("walk the tiles in bands so that concurrent blocks share this operand's windows (`group G` on the tile space), enlarge the tile along the axis that reuses it, or multicast it through a cluster")]
}
