//! C001 — add a pipeline stage.
//!
//! Detects a pipeline whose stages do not cover the round trip of one hand-off: the producer's
//! hand-offs, its TMA issue and latency for one stage, and the consumer's hold of that stage.
//! While fewer stages than `round trip / interval` are in flight, the consumer waits for data
//! each hand-off (the model's bubble); the hint fires when those stalls cost at least 2% of the
//! predicted time. Another stage hides the latency if shared memory allows it, so the help says
//! how many bytes the extra stage of each of the pipeline's regions costs and whether the block
//! still fits the target's per-block shared-memory limit.

use std::collections::BTreeSet;

use crate::diag::Diagnostic;

use super::super::hint;
use super::{us, HintCx, MS};

pub(super) fn check(cx: &HintCx<'_>) -> Vec<Diagnostic> {
    let (m, target) = (cx.m, cx.target);
    let mut hints = Vec::new();
    for f in &cx.est.pipelines {
        let per_tile = f.bubble_ns_per_handoff * f.handoffs_per_tile;
        let lost_ms = per_tile * cx.n_tiles * MS;
        if cx.pct(lost_ms) < 2.0 {
            continue;
        }
        let Some((ph, p)) = m.pipelines.iter().find(|(_, p)| p.name == f.pipeline) else { continue };
        let need = f.stages_needed.max(p.stages + 1);
        let mut extra = 0u64;
        let mut regions = BTreeSet::new();
        for r in cx.roles {
            for w in std::iter::once(&r.rest).chain(std::iter::once(&r.cta)).chain(r.main.iter().map(|ml| &ml.iter)) {
                if let Some(pc) = w.pipes.get(ph.index()) {
                    regions.extend(pc.regions.iter().copied());
                }
            }
        }
        for &rh in &regions {
            let s = &m.smem[rh];
            extra += s.stage_bytes() * u64::from(need.saturating_sub(s.stages));
        }
        let fits = cx.smem + extra <= u64::from(target.smem_per_block_max);
        let names: Vec<String> = regions.iter().map(|&rh| format!("`{}`", m.smem[rh].name)).collect();
        let mut d = hint(
            "C001",
            format!(
                "pipeline `{}`: {} stage{} cover{} {:.2} µs of its {:.2} µs round trip; the consumer stalls {:.2} µs per hand-off ({:.1}% of the predicted time)",
                p.name,
                p.stages,
                if p.stages == 1 { "" } else { "s" },
                if p.stages == 1 { "s" } else { "" },
                us(f.interval_ns * f64::from(p.stages)),
                us(f.round_trip_ns),
                us(f.bubble_ns_per_handoff),
                cx.pct(lost_ms)
            ),
            m.pipelines.span(ph).attr("stages"),
            "stages below latency / issue interval",
        )
        .with_note(format!(
            "round trip = hand-offs + TMA issue and latency ({:.0} B per stage) + the consumer's hold of {:.2} µs",
            f.bytes_per_stage,
            us(f.interval_ns)
        ));
        d = if fits {
            d.with_help(format!(
                "add a stage: `stages {need}`{}",
                if names.is_empty() {
                    String::new()
                } else {
                    format!(" (and on {}: +{} B of shared memory, {} of {} B)", names.join(", "), extra, cx.smem + extra, target.smem_per_block_max)
                }
            ))
        } else {
            d.with_help(format!(
                "add a stage — but `stages {need}` needs {} B of shared memory, over the {} B limit: shrink the stage (box) or the tile first",
                cx.smem + extra,
                target.smem_per_block_max
            ))
        };
        hints.push(d);
    }
    hints
}
