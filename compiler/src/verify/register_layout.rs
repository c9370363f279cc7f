//! The register-layout analysis: every `reg` fragment and every `let` has a thread layout the
//! lowering can place, read off the one derived layout (`layout::regs`) the lowering uses, so that
//! `cake check` refuses what `cake lower` would (it reported these as L007 / L001 before).
//!
//! * V230 fragment-without-register-layout: a `reg` whose shape and scope have no layout, or a
//!   value whose operands' layouts disagree or that indexes a fragment off its tiles — named by a
//!   `let`, or used directly as a statement's operand (a `store`'s source, an assignment's value).
//! * V231 window-let-recomputed: a `let` of window math (no register layout: recomputed at each
//!   use) that reads something that may change while the name is in scope, or a reduction.

use crate::diag::Diagnostic;
use crate::ir::{LocalKind, Module};
use crate::layout::regs::WindowLetBlocker;
use crate::layout::KernelLayout;

pub const FRAGMENT_WITHOUT_LAYOUT: &str = "V230";
pub const WINDOW_LET_RECOMPUTED: &str = "V231";

pub fn analyze(m: &Module, layout: &KernelLayout) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (l, f) in layout.registers.faults() {
        let local = &m.locals[l];
        let decl = *m.locals.span(l);
        let d = match f.blocker {
            Some(b) => {
                let help = match b {
                    WindowLetBlocker::Reduction => format!(
                        "name the reduction itself (`let s = reduce_sum(...)`, a value every lane holds) and use that name in `{}`",
                        local.name
                    ),
                    WindowLetBlocker::SharedMemory => {
                        format!("read the shared window where `{}` is used, or into a register fragment first", local.name)
                    }
                    WindowLetBlocker::WritableTensor(t) => format!(
                        "declare `{}` as `in` if the kernel never writes it, or read the window where `{}` is used",
                        m.tensors[t].name, local.name
                    ),
                    WindowLetBlocker::DistributedRegister(r) => {
                        format!("compute `{}` into a register fragment with the layout of `{}`", local.name, m.locals[r].name)
                    }
                };
                let mut d = Diagnostic::error(WINDOW_LET_RECOMPUTED, f.message.clone(), f.span, "read again at every use of the name")
                    .with_secondary(decl, format!("`{}` names window math here (no register layout)", local.name))
                    .with_help(help);
                if let WindowLetBlocker::WritableTensor(t) = b {
                    d = d.with_secondary(m.tensors.span(t).item, "declared here");
                }
                d
            }
            None => {
                let what = if local.kind == LocalKind::Reg { "fragment declared here" } else { "named here" };
                let mut d = Diagnostic::error(FRAGMENT_WITHOUT_LAYOUT, f.message.clone(), f.span, "no thread layout");
                if f.span != decl {
                    d = d.with_secondary(decl, what);
                }
                d.with_help(
                    "use a shape and scope with a register layout: a wgmma accumulator (64×N per warpgroup), an mma.sync tile (16·m × 8·n per warp) or its row vector, an mma.sync operand, or at most 32 elements every thread of the scope holds whole",
                )
            }
        };
        out.push(match &f.note {
            Some(n) => d.with_note(n.clone()),
            None => d,
        });
    }
    for (stmt, f) in layout.registers.operand_faults() {
        let at = *m.stmts.span(*stmt);
        let mut d = Diagnostic::error(FRAGMENT_WITHOUT_LAYOUT, f.message.clone(), f.span, "no thread layout");
        if at != f.span {
            d = d.with_secondary(at, "used by this statement");
        }
        d = d.with_help(
            "give every operand of one expression the same register layout: compute the value into a `reg` of the layout it needs first, or index fragments on whole accumulator tiles",
        );
        out.push(match &f.note {
            Some(n) => d.with_note(n.clone()),
            None => d,
        });
    }
    out
}
