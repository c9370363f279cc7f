//! C005 — fewer tiles than SMs.
//!
//! Detects a grid with fewer tiles than three quarters of the target's SMs at the given dims. A
//! block runs on one SM, so with fewer tiles than SMs the SMs without a tile have nothing to do
//! for the whole kernel, however fast each tile runs. Smaller tiles, or splitting the reduction
//! axis across blocks (split-K), give every SM work.

use crate::diag::Diagnostic;

use super::super::hint;
use super::HintCx;

/// Too few tiles for the SMs (C004 looks at the tail wave only when this is false).
pub(super) fn too_few_tiles(cx: &HintCx<'_>) -> bool {
    cx.tiles < 0.75 * cx.sms
}

pub(super) fn check(cx: &HintCx<'_>) -> Vec<Diagnostic> {
    let Some((gh, _)) = cx.m.grid.iter().next() else { return Vec::new() };
    if !too_few_tiles(cx) {
        return Vec::new();
    }
    let (tiles, sms) = (cx.tiles, cx.sms);
    vec![hint(
        "C005",
        format!("only {tiles} tiles for {sms} SMs: {} SMs stay idle", sms - tiles),
        cx.m.grid.span(gh).item,
        "too few tiles at these dims",
    )
    .with_help("use smaller tiles or split the reduction axis across blocks")]
}
