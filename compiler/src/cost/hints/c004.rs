//! C004 — tail wave.
//!
//! Detects a persistent grid whose tiles do not divide evenly over the SMs (one block per SM):
//! the busiest block runs `ceil(tiles / SMs)` rounds, and in the last round only the remainder of
//! the SMs have a tile while the others idle. The hint fires when the tail's efficiency (mean
//! over busiest tiles per block) is below 90% and the idle share of the tail costs at least 3% of
//! the predicted time. A tile shape that gives a multiple of the SM count, or splitting the last
//! round's tiles (stream-K), fills the tail. Where the grid has too few tiles for the SMs at all,
//! C005 applies instead.

use crate::diag::Diagnostic;

use super::super::hint;
use super::{c005, HintCx, MS};

pub(super) fn check(cx: &HintCx<'_>) -> Vec<Diagnostic> {
    let Some((gh, _)) = cx.m.grid.iter().next() else { return Vec::new() };
    if c005::too_few_tiles(cx) {
        return Vec::new();
    }
    let tail_efficiency = cx.est.occupancy.tail_efficiency;
    let uneven = cx.persistent && tail_efficiency < 0.9;
    if !uneven {
        return Vec::new();
    }
    let (tiles, sms, n_tiles) = (cx.tiles, cx.sms, cx.n_tiles);
    let lost = (1.0 - tail_efficiency) * cx.tile_time_nb * n_tiles * MS;
    let costly = cx.pct(lost) >= 3.0;
    if !costly {
        return Vec::new();
    }
    let last = tiles - (n_tiles - 1.0) * sms;
    vec![hint(
        "C004",
        format!(
            "tail wave: {tiles} tiles over {sms} blocks take {n_tiles} rounds and the last keeps {last} of {sms} SMs busy ({:.1}% of the predicted time lost)",
            cx.pct(lost)
        ),
        cx.m.grid.span(gh).item,
        "tiles do not divide evenly over the SMs",
    )
    .with_help("choose a tile shape that gives a multiple of the SM count, or split the last round's tiles (stream-K)")]
}
