//! The cost model's hints (severity `hint`, codes C0xx): one file per hint, like Clippy's lints.
//!
//! [`super::model`] computes an estimate and then builds a [`HintCx`] — borrowed views of what it
//! computed on the way (the estimate itself, each role's work, the tile's critical path, the
//! operands' reuse) — and runs [`HINTS`] over it in order. A hint reads the context and returns the
//! diagnostics it finds; it computes nothing the estimate depends on, so adding or removing one
//! changes no predicted time.
//!
//! Every code in [`HINTS`] is documented in `compiler/diagnostics/lowering.toml` (what
//! `cake explain C00x` prints), and every documented C0xx code has a hint here (a unit test checks
//! both directions).

use crate::diag::Diagnostic;
use crate::ir::{Module, RoleDecl};
use crate::target::TargetInfo;

use super::model::{Operand, Split};
use super::walk::{MainLoop, RoleWork, Work};
use super::Estimate;

mod c001;
mod c002;
mod c003;
mod c004;
mod c005;
mod c006;
mod c007;

/// What the hints read: the estimate and the values the model computed on the way to it.
pub(super) struct HintCx<'a> {
    pub(super) m: &'a Module,
    pub(super) target: &'a TargetInfo,
    /// The finished estimate (predicted time, bottleneck, pipelines, occupancy); its `hints` and
    /// `notes` are still empty.
    pub(super) est: &'a Estimate,
    /// Each role's work (`walk::walk`), in role order.
    pub(super) roles: &'a [RoleWork],
    /// One group's own serial path through a piece of work of a role (the model's `own`).
    pub(super) own: &'a dyn Fn(&Work, &RoleDecl) -> Split,
    /// One group's issue time for the part of a piece of work it does not issue under its own
    /// MMAs (the model's `exposed_issue`).
    pub(super) exposed_issue: &'a dyn Fn(&Work, &RoleDecl) -> f64,
    /// Per role: its path through one tile and the bubbles on it.
    pub(super) paths: &'a [(Split, f64)],
    /// The longest role path of a tile and its bubbles.
    pub(super) path_tile: Split,
    pub(super) path_bubble: f64,
    /// Whether a role path (not a resource total) bounds the tile.
    pub(super) path_binds: bool,
    /// Per role: one main-loop iteration of the roles advancing with it (before bubbles).
    pub(super) t_nb: &'a [Split],
    /// Per role: the pipeline bubble per main-loop iteration.
    pub(super) bubble_iter: &'a [f64],
    /// The global operands and their reuse.
    pub(super) operands: &'a [Operand],
    /// Shared memory of one block, bytes.
    pub(super) smem: u64,
    /// Tiles in the grid.
    pub(super) tiles: f64,
    /// SMs of the target.
    pub(super) sms: f64,
    /// Tiles one block slot runs (the busiest block's, for a persistent grid).
    pub(super) n_tiles: f64,
    pub(super) persistent: bool,
    /// One tile's time before per-tile pipeline bubbles, ns.
    pub(super) tile_time_nb: f64,
    /// Tensor-core time of one tile summed over all roles, ns.
    pub(super) tile_tensor_ns: f64,
}

/// Milliseconds per nanosecond.
const MS: f64 = 1e-6;

impl HintCx<'_> {
    /// `x_ms` as a percentage of the predicted time.
    fn pct(&self, x_ms: f64) -> f64 {
        let predicted_ms = self.est.predicted_ms;
        if predicted_ms > 0.0 {
            100.0 * x_ms / predicted_ms
        } else {
            0.0
        }
    }

    /// Role `i` with its main loop, when that loop does tensor-core work (what C002 and C003
    /// look at).
    fn mma_role(&self, i: usize) -> Option<(&RoleWork, &MainLoop, &RoleDecl)> {
        let r = &self.roles[i];
        let ml = r.main.as_ref()?;
        if ml.iter.tensor_ns <= 0.0 {
            return None;
        }
        Some((r, ml, &self.m.roles[r.role]))
    }
}

/// ns → µs.
fn us(ns: f64) -> f64 {
    ns * 1e-3
}

/// How a hint runs.
#[derive(Clone, Copy)]
pub(super) enum Check {
    /// Once per kernel.
    Kernel(fn(&HintCx<'_>) -> Vec<Diagnostic>),
    /// Once per role (its index in [`HintCx::roles`]). Consecutive per-role hints run role by
    /// role, so one role's hints stay together in the output.
    Role(fn(&HintCx<'_>, usize) -> Option<Diagnostic>),
}

/// Every hint, by code, in the order the output lists them.
pub(super) const HINTS: &[(&str, Check)] = &[
    ("C001", Check::Kernel(c001::check)),
    ("C002", Check::Role(c002::check)),
    ("C003", Check::Role(c003::check)),
    // C004 and C005 exclude each other (C004 only where C005 does not apply).
    ("C005", Check::Kernel(c005::check)),
    ("C004", Check::Kernel(c004::check)),
    ("C007", Check::Kernel(c007::check)),
    ("C006", Check::Kernel(c006::check)),
];

/// Run every hint of [`HINTS`] over `cx`, in order.
pub(super) fn run(cx: &HintCx<'_>) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < HINTS.len() {
        match HINTS[i].1 {
            Check::Kernel(f) => {
                out.extend(f(cx));
                i += 1;
            }
            Check::Role(_) => {
                let end = HINTS[i..].iter().position(|(_, c)| !matches!(c, Check::Role(_))).map_or(HINTS.len(), |k| i + k);
                for role in 0..cx.roles.len() {
                    for (_, c) in &HINTS[i..end] {
                        if let Check::Role(f) = c {
                            out.extend(f(cx, role));
                        }
                    }
                }
                i = end;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The registry lists exactly the documented hint codes: a hint without a doc (for
    /// `cake explain`) or a documented C0xx code without a hint fails.
    #[test]
    fn registry_lists_exactly_the_documented_hint_codes() {
        let registered: Vec<&str> = HINTS.iter().map(|(code, _)| *code).collect();
        let unique: BTreeSet<&str> = registered.iter().copied().collect();
        assert_eq!(unique.len(), registered.len(), "a hint code is registered twice: {registered:?}");
        let documented: BTreeSet<&str> =
            crate::codes::all().iter().map(|d| d.code.as_str()).filter(|c| c.starts_with("C0")).collect();
        assert_eq!(unique, documented, "registered hints (left) vs C0xx codes documented in compiler/diagnostics (right)");
        for code in &registered {
            let doc = crate::codes::lookup(code).expect("documented");
            assert_eq!(doc.file, "lowering.toml", "{code} is documented in {}", doc.file);
        }
    }
}
