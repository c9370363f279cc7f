//! C002 — epilogue not overlapped.
//!
//! Detects a role that does tensor-core work in its main loop and then, after the loop, runs the
//! tile's epilogue (elementwise work, stores, their latencies) in all its groups at once, on the
//! path that bounds the tile. Nothing else issues MMAs meanwhile, so the SM's tensor cores idle
//! for the whole epilogue of every tile; the hint fires when that exposed time is at least 2% of
//! the predicted time. Two consumer warpgroups that alternate tiles (ping-pong) overlap one's
//! epilogue with the other's MMAs.

use crate::diag::Diagnostic;
use crate::ir::RoleUnit;

use super::super::hint;
use super::{us, HintCx, MS};

pub(super) fn check(cx: &HintCx<'_>, i: usize) -> Option<Diagnostic> {
    let (r, _, role) = cx.mma_role(i)?;
    let m = cx.m;
    let rest = (cx.own)(&r.rest, role);
    let exposed = (rest.epilogue + rest.sync) * cx.n_tiles * MS;
    let on_path = cx.paths[i].0.total() + cx.paths[i].1 >= cx.path_tile.total() + cx.path_bubble - 1e-9;
    let fires = cx.path_binds && on_path && cx.pct(exposed) >= 2.0;
    if !fires {
        return None;
    }
    let mut d = hint(
        "C002",
        format!(
            "epilogue not overlapped: role `{}` spends {:.2} µs per tile after its main loop in all {} {}s at once, while the tensor cores idle ({:.1}% of the predicted time)",
            role.name,
            us(rest.total()),
            role.count,
            if role.unit == RoleUnit::Warpgroup { "warpgroup" } else { "warp" },
            cx.pct(exposed)
        ),
        m.roles.span(r.role).item,
        "every group of this role runs the epilogue at the same time",
    );
    if let Some(s) = r.rest.store_stmt {
        d = d.with_secondary(*m.stmts.span(s), "the epilogue's store");
    }
    Some(d.with_help(
        "alternate two consumer warpgroups (ping-pong): give each its own tiles and order their main loops, so one's epilogue overlaps the other's MMAs",
    ))
}
