//! Which ops the lowering emits, and how: one handler per op identity ([`OpId`]).
//!
//! A statement op has a handler that writes its CUDA; an expression op is lowered where its
//! expression is evaluated (fragment math, reductions, element loops). An op with no entry here
//! is "not supported by the lowering yet" (L001), which the catalog test
//! (`every_op_has_a_lowering_and_a_cost_for_every_target_it_claims`) turns into a failure and the
//! merge gate `lowering` reports for a proposed op.

use super::prelude::Helper;
use super::window::atomic::AtomicKind;
use super::{unsupported, Lw, LowerError};
use crate::ir::{Handle, OpCall, Stmt};
use crate::ops::OpId;
use crate::span::Span;

/// The argument `i` of a call, or a refusal naming the op.
fn arg(call: &OpCall, i: usize, span: Span) -> Result<Handle<crate::ir::Expr>, LowerError> {
    call.args.get(i).copied().flatten().ok_or_else(|| LowerError::new("L001", format!("`{}` is missing an argument", call.op), span))
}

/// Writes one statement op: the call, its span, the enclosing block and the call's position.
pub(crate) type StmtHandler = fn(&mut Lw<'_>, &OpCall, Span, &[Handle<Stmt>], usize) -> Result<(), LowerError>;

#[derive(Clone, Copy)]
pub(crate) enum Lowering {
    Stmt(StmtHandler),
    /// Lowered where the expression is used.
    Expr,
}

pub(crate) fn lowering(op: OpId) -> Option<Lowering> {
    use Lowering::{Expr, Stmt};
    use OpId::*;
    let h: StmtHandler = match op {
        Acquire => |lw, c, sp, sib, pos| lw.acquire(arg(c, 0, sp)?, sp, sib, pos),
        Wait => |lw, c, sp, _, _| {
            let target = arg(c, 0, sp)?;
            if lw.is_barrier_expr(target) {
                lw.bar_wait(target, None, sp)
            } else {
                lw.wait(target, sp)
            }
        },
        WaitParity => |lw, c, sp, _, _| lw.bar_wait(arg(c, 0, sp)?, Some(arg(c, 1, sp)?), sp),
        Arrive => |lw, c, sp, _, _| lw.bar_arrive(arg(c, 0, sp)?, sp),
        ArriveExpectTx => |lw, c, sp, _, _| lw.bar_arrive_expect_tx(arg(c, 0, sp)?, arg(c, 1, sp)?, sp),
        Release => |lw, c, sp, _, _| lw.release(arg(c, 0, sp)?, sp),
        TmaLoad => |lw, c, sp, _, _| lw.tma_load(arg(c, 0, sp)?, arg(c, 1, sp)?, arg(c, 2, sp)?, sp),
        TmaStore => |lw, c, sp, _, _| lw.tma_store(arg(c, 0, sp)?, arg(c, 1, sp)?, sp),
        TmaStoreWait => |lw, c, sp, _, _| lw.tma_store_wait(arg(c, 0, sp)?, sp),
        Wgmma => |lw, c, sp, _, _| lw.wgmma(arg(c, 0, sp)?, arg(c, 1, sp)?, arg(c, 2, sp)?, sp),
        WgmmaCommit => |lw, _, _, _, _| {
            lw.need(Helper::WgmmaCommit);
            lw.w.line("cake_wgmma_commit();");
            Ok(())
        },
        WgmmaWait => |lw, c, sp, _, _| lw.wgmma_wait(arg(c, 0, sp)?, sp),
        Zero => |lw, c, sp, sib, pos| lw.zero(arg(c, 0, sp)?, sp, sib, pos),
        Fill => |lw, c, sp, _, _| lw.fill(arg(c, 0, sp)?, arg(c, 1, sp)?, sp),
        Store => |lw, c, sp, _, _| lw.store(arg(c, 0, sp)?, arg(c, 1, sp)?, sp),
        AtomicAdd => |lw, c, sp, _, _| lw.atomic(AtomicKind::Add, arg(c, 0, sp)?, arg(c, 1, sp)?, sp),
        AtomicMin => |lw, c, sp, _, _| lw.atomic(AtomicKind::Min, arg(c, 0, sp)?, arg(c, 1, sp)?, sp),
        AtomicMax => |lw, c, sp, _, _| lw.atomic(AtomicKind::Max, arg(c, 0, sp)?, arg(c, 1, sp)?, sp),
        // The fragment's elements stored one by one: the op's meaning (a generic-proxy write of a
        // 16-bit fragment into a shared tile); the stmatrix instruction itself is an
        // optimization the lowering does not emit yet.
        Stmatrix => |lw, c, sp, _, _| lw.store(arg(c, 0, sp)?, arg(c, 1, sp)?, sp),
        CpAsync => |lw, c, sp, _, _| lw.cp_async(arg(c, 0, sp)?, arg(c, 1, sp)?, sp),
        CpAsyncCommit => |lw, _, _, _, _| {
            lw.need(Helper::CpAsyncCommit);
            lw.w.line("cake_cp_async_commit();");
            Ok(())
        },
        CpAsyncWait => |lw, c, sp, _, _| {
            let n = lw.m.const_value(arg(c, 0, sp)?).ok_or_else(|| LowerError::new("L001", "cp_async_wait needs a constant", sp))?;
            lw.need(Helper::CpAsyncWait);
            lw.w.line(format!("cake_cp_async_wait<{n}>();"));
            Ok(())
        },
        Ldmatrix => |lw, c, sp, _, _| lw.ldmatrix(arg(c, 0, sp)?, arg(c, 1, sp)?, sp),
        MmaSync => |lw, c, sp, _, _| lw.mma_sync(arg(c, 0, sp)?, arg(c, 1, sp)?, arg(c, 2, sp)?, sp),
        Sync => |lw, _, _, _, _| {
            lw.w.line("__syncthreads();");
            Ok(())
        },
        SyncRole => |lw, _, sp, _, _| {
            let role = lw.role.as_ref().map(|r| r.h).ok_or_else(|| unsupported("sync_role outside a role", sp))?;
            let r = &lw.m.roles[role];
            if r.threads() == 32 {
                lw.w.line("__syncwarp();");
            } else {
                lw.need(Helper::NamedBarrier);
                lw.w.line(format!("cake_named_barrier({}, {});  // named barrier of role `{}`", 1 + role.index(), r.threads(), r.name));
            }
            Ok(())
        },
        ClusterSync => |lw, _, _, _, _| {
            lw.w.line("asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;\" ::: \"memory\");");
            Ok(())
        },
        FenceProxyAsync => |lw, _, _, _, _| {
            lw.need(Helper::FenceProxyAsync);
            lw.w.line("cake_fence_proxy_async();");
            Ok(())
        },
        GriddepWait => |lw, _, _, _, _| {
            lw.w.line("asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");");
            Ok(())
        },
        GriddepLaunchDependents => |lw, _, _, _, _| {
            lw.w.line("asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");");
            Ok(())
        },
        Cast | Exp | Exp2 | Log | Sqrt | Rsqrt | Abs | Min | Max | Select | Iota | Fma | ReduceMin | ReduceMax | ReduceSum | ReduceArgmin
        | ReduceArgmax => return Some(Expr),
    };
    Some(Stmt(h))
}

/// Whether the lowering emits `op` (on every target whose features the catalog requires).
pub fn lowers(op: OpId) -> bool {
    lowering(op).is_some()
}

/// [`lowers`] for a catalog name; false for a name without an identity.
pub fn lowers_name(name: &str) -> bool {
    OpId::from_name(name).is_some_and(lowers)
}
