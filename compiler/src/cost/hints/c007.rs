//! C007 — too few warps per SM for a streaming kernel.
//!
//! Detects a persistent grid (one block per SM) of fewer than [`MIN_STREAMING_WARPS_PER_SM`]
//! warps in a kernel without tensor-core work or pipelines — thread-level loads only, as in row
//! reductions, normalizations and elementwise graphs — with more tiles than SMs. Such a kernel
//! spends its time on memory latency, which only many warps with loads in flight cover; one small
//! block per SM leaves most of it exposed. Pipelined kernels are left out: their TMA / cp.async
//! copies stay in flight whatever their warp count. Measured on the H200: a 4-warp persistent
//! RMSNorm took 0.144 ms, the same rows with 8-warp blocks, several resident per SM, 0.094 ms
//! (benchmarks/RESULTS.md). Dropping `persistent` (one block per tile, several resident per SM)
//! or giving the block more warps covers the latency.

use crate::diag::Diagnostic;

use super::super::hint;
use super::HintCx;

/// Warps per SM below which a kernel without tensor-core work is reported as unable to cover
/// memory latency with a persistent grid.
const MIN_STREAMING_WARPS_PER_SM: u32 = 8;

pub(super) fn check(cx: &HintCx<'_>) -> Vec<Diagnostic> {
    let m = cx.m;
    let Some((gh, _)) = m.grid.iter().next() else { return Vec::new() };
    let warps = cx.est.occupancy.threads_per_block / 32;
    let streaming = cx.persistent && cx.tile_tensor_ns <= 0.0 && m.pipelines.is_empty();
    let few_warps = streaming && warps < MIN_STREAMING_WARPS_PER_SM && cx.tiles > cx.sms;
    if !few_warps {
        return Vec::new();
    }
    let span = m.grid.span(gh).attr("persistent");
    vec![hint(
        "C007",
        format!("a persistent grid runs one block of {warps} warps per SM: too few loads in flight to cover memory latency in a kernel without tensor-core work"),
        span,
        "one block per SM",
    )
    .with_help(format!(
        "drop `persistent` (one block per tile, several resident per SM), or give the block at least {MIN_STREAMING_WARPS_PER_SM} warps"
    ))]
}
