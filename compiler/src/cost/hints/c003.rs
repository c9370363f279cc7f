//! C003 — MMAs wait for in-loop epilogue work.
//!
//! Detects a main loop whose iteration is bounded by one group's own serial path, where a
//! `wgmma_wait(0)` drains the group's MMAs and the group then does elementwise or reduction work
//! on the accumulator (at least a quarter of that path, not counting what it issues under its next
//! MMAs) before it issues the next MMAs. The
//! tensor cores idle for that work every iteration; the hint fires when they idle at least 5% of
//! the loop. Issuing the next iteration's MMAs first (two accumulators, `wgmma_wait(1)`)
//! overlaps the two. When dependent reduction chains (`reduce_argmin` / `reduce_argmax` steps,
//! which do not overlap) make up half the work or more, a note says so.

use crate::diag::Diagnostic;
use crate::ir::RoleUnit;

use super::super::hint;
use super::{us, HintCx};

pub(super) fn check(cx: &HintCx<'_>, i: usize) -> Option<Diagnostic> {
    let (_, ml, role) = cx.mma_role(i)?;
    let m = cx.m;
    let own = (cx.own)(&ml.iter, role);
    let loop_tensor = ml.iter.tensor_ns;
    let t = cx.t_nb[i].total();
    // The work between the wait and the next MMAs, not what the group issues under them: a
    // software-pipelined loop whose epilogue simply outlasts its MMAs gets no advice to pipeline.
    let exposed = (cx.exposed_issue)(&ml.iter, role).min(own.epilogue);
    let own_path_binds = own.total() >= t - 1e-9 && exposed >= 0.25 * own.total() && own.tensor > 0.0 && t > 0.0;
    if !own_path_binds {
        return None;
    }
    let idle = 1.0 - loop_tensor / (t + cx.bubble_iter[i]);
    let tensor_cores_idle = idle >= 0.05;
    if !tensor_cores_idle {
        return None;
    }
    let span = *ml.iter.wgmma_wait0_stmt.map_or_else(|| m.stmts.span(ml.stmt), |s| m.stmts.span(s));
    let chain = ml.iter.chain_ns;
    let mut d = hint(
        "C003",
        format!(
            "the MMAs of role `{}` wait for its elementwise work: each iteration a {} waits for its own MMAs ({:.2} µs) and then works {:.2} µs before issuing the next, so the tensor cores idle {:.0}% of the main loop",
            role.name,
            if role.unit == RoleUnit::Warpgroup { "warpgroup" } else { "warp" },
            us(own.tensor),
            us(exposed),
            100.0 * idle
        ),
        span,
        "the next MMAs are issued only after this wait and the work below it",
    );
    if chain >= 0.5 * exposed {
        d = d.with_note(format!(
            "{:.2} µs of that is the latency of dependent reduction chains: each thread folds its elements one after another (`reduce_argmin` / `reduce_argmax` steps do not overlap)",
            us(chain)
        ));
    }
    Some(d.with_help(
        "issue the next iteration's MMAs before this iteration's epilogue (two accumulators, `wgmma_wait(1)`), add consumer warpgroups, or give each thread fewer elements to fold per iteration",
    ))
}
