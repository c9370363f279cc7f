//! The kernel's derived layout: the hardware facts of a checked module, computed once.
//!
//! Like naga's `proc::Layouter`, this is a side table over the IR that every later stage reads
//! instead of working the facts out again: the verifier's rules (as facts), the cost model
//! (occupancy) and the lowering (addresses, transaction counts, the launch contract). The
//! computation never fails and never panics: sizes saturate, an alignment that cannot be laid
//! out is normalised, and a transaction count that cannot be derived says why. The verifier's
//! rules turn those cases into findings, so a module that verifies lays out exactly as computed.
//!
//! The shared-memory block is laid out in declaration order:
//! 1. every region at its alignment ([`RegionSlot::align`]);
//! 2. views alias their region, at the region's offset plus their own;
//! 3. the derived mbarriers, 8 bytes each, 8-aligned after the last region: per pipeline its
//!    `full` then its `empty` barriers (one per stage), then every explicit barrier's stages;
//! 4. when the async proxy (TMA, wgmma) reads swizzle patterns off absolute address bits, the
//!    launch asks for 1024 bytes more so the kernel can round its base up to 1024.

use std::collections::BTreeMap;

pub mod regs;

use crate::ir::{Block, Expr, ExprKind, Handle, IndexItem, Module, OpCall, PipelineDecl, Size, SizeOp, SmemDecl, Stmt, Swizzle, Type, ViewDecl};
use crate::syntax::ast::{BinOp, UnOp};
use crate::span::Span;
use crate::target::TargetInfo;

/// Largest transaction count one mbarrier phase holds (PTX ISA, `mbarrier.expect_tx`: the
/// tx-count is a 20-bit field).
pub const TX_COUNT_MAX: u64 = (1 << 20) - 1;

/// Largest alignment the layout honours: the biggest swizzle atom (128B swizzle × 8 rows).
pub const ALIGN_MAX: u64 = 1024;

/// Bytes the launch adds so the kernel can round the dynamic shared-memory base up to
/// [`ALIGN_MAX`] (the runtime only guarantees 16).
pub const BASE_ALIGN_SLACK: u64 = ALIGN_MAX;

/// Where a shared region lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionSlot {
    /// Byte offset from the (aligned) base of the block.
    pub offset: u64,
    /// The alignment the region is placed at: the declared `align` (at least 16), else the
    /// default — 1024 for swizzled regions, 128 (a TMA destination's alignment) for the others —
    /// raised to the largest swizzle atom of a view over it.
    pub align: u64,
    /// Bytes of one stage and of all stages.
    pub stage_bytes: u64,
    pub bytes: u64,
    /// The largest swizzle atom of a swizzled view over this region (0: none), and that view.
    pub view_atom: u64,
    pub view_atom_of: Option<Handle<ViewDecl>>,
}

/// Where a view lives (inside its region).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewSlot {
    pub offset: u64,
    /// What the view's address is known to be a multiple of: its region's alignment, or less
    /// when its offset is less aligned.
    pub align: u64,
    pub bytes: u64,
}

/// The derived `full` and `empty` mbarriers of a pipeline (one per stage each).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineSlots {
    pub full: u64,
    pub empty: u64,
    pub stages: u32,
    /// Arrivals that release a stage: one elected thread per consumer unit.
    pub empty_arrivals: u32,
}

/// An explicit barrier's mbarriers (one per stage).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BarrierSlot {
    pub offset: u64,
    pub stages: u32,
}

/// The transaction bytes an `acquire(p)` arms its stage with: the bytes of the `tma_load`s
/// naming `p` that follow it, up to the next `acquire(p)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxDerivation {
    Bytes(u64),
    /// Why the count cannot be derived from the program text, and where.
    Underivable {
        reason: &'static str,
        span: Span,
    },
}

impl TxDerivation {
    pub fn bytes(&self) -> Option<u64> {
        match self {
            TxDerivation::Bytes(b) => Some(*b),
            TxDerivation::Underivable { .. } => None,
        }
    }
}

/// The derived layout of one module on its target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelLayout {
    /// By region handle index.
    pub regions: Vec<RegionSlot>,
    /// By view handle index.
    pub views: Vec<ViewSlot>,
    /// By pipeline handle index.
    pub pipelines: Vec<PipelineSlots>,
    /// By barrier handle index.
    pub barriers: Vec<BarrierSlot>,
    /// Bytes up to the end of the last region (alignment padding included).
    pub regions_bytes: u64,
    /// Bytes of the derived mbarriers, and the padding that 8-aligns them.
    pub mbarrier_bytes: u64,
    /// [`BASE_ALIGN_SLACK`] when the async proxy reads swizzled shared memory, else 0.
    pub base_slack: u64,
    /// Dynamic shared memory the launch requests: regions + mbarriers + base slack (0 when the
    /// kernel uses none).
    pub smem_bytes: u64,
    /// Threads of one block: up to the last warp a role covers.
    pub threads_per_block: u32,
    /// Registers per thread that `__launch_bounds__(threads, 1)` leaves each thread at entry
    /// (what `setmaxnreg` moves from), rounded down to 8.
    pub launch_regs: u32,
    /// Per `acquire` statement.
    pub acquire_tx: BTreeMap<Handle<Stmt>, TxDerivation>,
    /// The fragments `mma_sync` takes as A and B operands.
    pub mma_sync_operands: MmaSyncOperands,
    /// Every register fragment's and fragment value's thread layout, and the `reg`s and `let`s
    /// without one (V230, V231).
    pub registers: regs::RegisterLayouts,
}

impl KernelLayout {
    pub fn compute(m: &Module, target: &TargetInfo) -> KernelLayout {
        let mut regions = Vec::with_capacity(m.smem.len());
        let mut off = 0u64;
        for (h, s) in m.smem.iter() {
            let (view_atom, view_atom_of) = largest_view_atom(m, h);
            let align = region_align(s, view_atom);
            off = round_up(off, align);
            let (stage_bytes, bytes) = (s.stage_bytes(), s.total_bytes());
            regions.push(RegionSlot {
                offset: off,
                align,
                stage_bytes,
                bytes,
                view_atom,
                view_atom_of,
            });
            off = off.saturating_add(bytes);
        }
        let regions_bytes = off;
        let views = m
            .views
            .iter()
            .map(|(_, v)| {
                let region = &regions[v.region.index()];
                let rel = v.offset.max(0) as u64;
                let align = if rel == 0 {
                    region.align
                } else {
                    region.align.min(1 << rel.trailing_zeros())
                };
                ViewSlot {
                    offset: region.offset.saturating_add(rel),
                    align,
                    bytes: view_bytes(v),
                }
            })
            .collect();
        let mut off = round_up(regions_bytes, 8);
        let mut pipelines = Vec::with_capacity(m.pipelines.len());
        for (_, p) in m.pipelines.iter() {
            let bytes = 8 * u64::from(p.stages);
            let consumer = &m.roles[p.consumer];
            pipelines.push(PipelineSlots {
                full: off,
                empty: off.saturating_add(bytes),
                stages: p.stages,
                empty_arrivals: consumer.count,
            });
            off = off.saturating_add(2 * bytes);
        }
        let mut barriers = Vec::with_capacity(m.barriers.len());
        for (_, b) in m.barriers.iter() {
            barriers.push(BarrierSlot {
                offset: off,
                stages: b.stages,
            });
            off = off.saturating_add(8 * u64::from(b.stages));
        }
        let mbarrier_bytes = off - regions_bytes;
        let base_slack = if off > 0 && uses_async_proxy(m) {
            BASE_ALIGN_SLACK
        } else {
            0
        };
        let threads_per_block = m.threads_per_block();
        let mma_sync_operands = MmaSyncOperands::of(m);
        KernelLayout {
            regions,
            views,
            pipelines,
            barriers,
            regions_bytes,
            mbarrier_bytes,
            base_slack,
            smem_bytes: off.saturating_add(base_slack),
            threads_per_block,
            launch_regs: launch_regs(target, threads_per_block),
            acquire_tx: acquire_tx(m),
            registers: regs::RegisterLayouts::derive(m, &mma_sync_operands),
            mma_sync_operands,
        }
    }

    pub fn region(&self, h: Handle<SmemDecl>) -> &RegionSlot {
        &self.regions[h.index()]
    }

    pub fn view(&self, h: Handle<ViewDecl>) -> &ViewSlot {
        &self.views[h.index()]
    }

    pub fn pipeline(&self, h: Handle<PipelineDecl>) -> &PipelineSlots {
        &self.pipelines[h.index()]
    }

    /// The transaction bytes of an `acquire` statement (None for any other statement).
    pub fn tx_of(&self, acquire: Handle<Stmt>) -> Option<&TxDerivation> {
        self.acquire_tx.get(&acquire)
    }
}

fn round_up(x: u64, align: u64) -> u64 {
    x.div_ceil(align.max(1)).saturating_mul(align.max(1))
}

/// The alignment a region is placed at (see [`RegionSlot::align`]). A declared alignment that
/// is not a power of two up to [`ALIGN_MAX`] is rejected by the verifier (V216); it is laid out
/// at the next one so the layout stays computable.
pub fn region_align(s: &SmemDecl, view_atom: u64) -> u64 {
    let default = if s.swizzle == Swizzle::None {
        128
    } else {
        ALIGN_MAX
    }
    .max(view_atom);
    let declared = s.align.map_or(default, u64::from).max(16);
    declared
        .checked_next_power_of_two()
        .unwrap_or(ALIGN_MAX)
        .min(ALIGN_MAX)
}

/// Bytes of one swizzle atom (8 rows of the swizzle span), 0 without swizzle.
pub fn swizzle_atom(s: Swizzle) -> u64 {
    8 * u64::from(s.bytes())
}

fn largest_view_atom(m: &Module, region: Handle<SmemDecl>) -> (u64, Option<Handle<ViewDecl>>) {
    // The first view with the largest atom is the one a finding names.
    m.views
        .iter()
        .filter(|(_, v)| v.region == region && v.swizzle != Swizzle::None)
        .fold((0, None), |best, (vh, v)| {
            let atom = swizzle_atom(v.swizzle);
            if atom > best.0 {
                (atom, Some(vh))
            } else {
                best
            }
        })
}

fn elements(shape: &[i64]) -> u64 {
    shape
        .iter()
        .fold(1u64, |acc, d| acc.saturating_mul((*d).max(0) as u64))
}

pub fn view_bytes(v: &ViewDecl) -> u64 {
    elements(&v.shape).saturating_mul(v.dtype.size_bytes())
}

/// Whether TMA or wgmma (the async proxy) touches shared memory: they read swizzle patterns off
/// absolute address bits, so the base must be 1024-aligned.
fn uses_async_proxy(m: &Module) -> bool {
    m.stmts.iter().any(|(_, s)| matches!(s, Stmt::Op(c) if matches!(c.op.as_str(), "tma_load" | "tma_store" | "wgmma")))
}

/// Registers per thread at entry under `__launch_bounds__(threads, 1)`: the register file shared
/// by the block's threads, capped by the per-thread maximum, rounded down to 8.
pub fn launch_regs(target: &TargetInfo, threads: u32) -> u32 {
    (target.regs_per_sm / threads.max(1)).min(target.regs_per_thread_max) / 8 * 8
}

/// The fragment locals `mma_sync` takes as its A operand (`a`) and its B operand (`b`) anywhere in
/// the kernel. Their register layouts are those operands' (what `ldmatrix` fills), so the lowering
/// lays the fragments out from this, and the verifier's `mma_operand` fact reads it: an `ldmatrix`
/// into a fragment neither operand takes has no layout to fill.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MmaSyncOperands {
    pub a: std::collections::BTreeSet<Handle<crate::ir::Local>>,
    pub b: std::collections::BTreeSet<Handle<crate::ir::Local>>,
}

impl MmaSyncOperands {
    pub fn of(m: &Module) -> MmaSyncOperands {
        let mut out = MmaSyncOperands::default();
        for (_, s) in m.stmts.iter() {
            let Stmt::Op(c) = s else { continue };
            if c.op != "mma_sync" {
                continue;
            }
            for (i, set) in [(1usize, &mut out.a), (2, &mut out.b)] {
                if let Some(Some(x)) = c.args.get(i) {
                    if let ExprKind::Local(l) = m.exprs[*x].kind {
                        set.insert(l);
                    }
                }
            }
        }
        out
    }

    /// `a`, `b`, `both` or `none`: how `mma_sync` takes the fragment `l`.
    pub fn role_of(&self, l: Handle<crate::ir::Local>) -> &'static str {
        match (self.a.contains(&l), self.b.contains(&l)) {
            (true, true) => "both",
            (true, false) => "a",
            (false, true) => "b",
            (false, false) => "none",
        }
    }
}

/// Registers per thread that a block of statements' declared fragments (`reg NAME: T[..] per
/// SCOPE`) hold: each fragment's bytes over its scope's threads, in whole 32-bit registers. What
/// ptxas allocates beyond them (addresses, indices, loop state) is not counted here.
pub fn fragment_regs_per_thread(m: &Module, block: &Block) -> u64 {
    let mut regs = 0;
    for &h in &block.stmts {
        match &m.stmts[h] {
            Stmt::Reg(local) => {
                if let Type::Frag { dtype, shape, scope } = &m.locals[*local].ty {
                    let elems: i64 = shape.iter().product();
                    let lanes = u64::from(scope.map_or(1, |s| s.threads()));
                    regs += (elems.max(0) as u64 * dtype.size_bytes()).div_ceil(lanes).div_ceil(4);
                }
            }
            Stmt::For { body, .. } | Stmt::ForTiles { body, .. } => regs += fragment_regs_per_thread(m, body),
            Stmt::If { then_block, else_block, .. } => {
                regs += fragment_regs_per_thread(m, then_block).max(else_block.as_ref().map_or(0, |b| fragment_regs_per_thread(m, b)));
            }
            _ => {}
        }
    }
    regs
}

/// The transaction bytes of every `acquire` in every role body.
fn acquire_tx(m: &Module) -> BTreeMap<Handle<Stmt>, TxDerivation> {
    let mut out = BTreeMap::new();
    for (_, body) in m.bodies.iter() {
        collect_acquires(m, &body.block, &mut out);
    }
    out
}

fn collect_acquires(m: &Module, b: &Block, out: &mut BTreeMap<Handle<Stmt>, TxDerivation>) {
    for (pos, s) in b.stmts.iter().enumerate() {
        match &m.stmts[*s] {
            Stmt::Op(c) if c.op == "acquire" => {
                if let Some(p) = pipeline_arg(m, c, 0) {
                    out.insert(*s, tx_after(m, p, &b.stmts[pos + 1..], 1));
                }
            }
            Stmt::For { body, .. } | Stmt::ForTiles { body, .. } => collect_acquires(m, body, out),
            Stmt::If {
                then_block,
                else_block,
                ..
            } => {
                collect_acquires(m, then_block, out);
                if let Some(e) = else_block {
                    collect_acquires(m, e, out);
                }
            }
            _ => {}
        }
    }
}

fn pipeline_arg(m: &Module, c: &OpCall, i: usize) -> Option<Handle<PipelineDecl>> {
    match m.exprs[c.args.get(i).copied().flatten()?].kind {
        ExprKind::Pipeline(p) => Some(p),
        _ => None,
    }
}

fn is_load_into(m: &Module, c: &OpCall, p: Handle<PipelineDecl>) -> bool {
    c.op == "tma_load" && pipeline_arg(m, c, 2) == Some(p)
}

fn is_acquire_of(m: &Module, c: &OpCall, p: Handle<PipelineDecl>) -> bool {
    c.op == "acquire" && pipeline_arg(m, c, 0) == Some(p)
}

/// Whether a call in `b` (or a block nested in it) satisfies `f`.
pub(crate) fn block_has(m: &Module, b: &Block, f: &dyn Fn(&OpCall) -> bool) -> bool {
    b.stmts.iter().any(|s| match &m.stmts[*s] {
        Stmt::Op(c) => f(c),
        Stmt::For { body, .. } | Stmt::ForTiles { body, .. } => block_has(m, body, f),
        Stmt::If {
            then_block,
            else_block,
            ..
        } => block_has(m, then_block, f) || else_block.as_ref().is_some_and(|e| block_has(m, e, f)),
        _ => false,
    })
}

/// Bytes one `tma_load` destination receives: its (constant) shape times its element size.
pub fn tma_destination_bytes(m: &Module, dst: Handle<Expr>) -> u64 {
    let ty = &m.exprs[dst].ty;
    ty.const_shape()
        .map_or(0, |s| elements(&s))
        .saturating_mul(ty.dtype().map_or(0, |d| d.size_bytes()))
}

/// Bytes the `tma_load`s naming `p` bring in, in `rest` (times `mult`), up to the next
/// `acquire(p)`.
fn tx_after(m: &Module, p: Handle<PipelineDecl>, rest: &[Handle<Stmt>], mult: u64) -> TxDerivation {
    let underivable = |reason, s: &Handle<Stmt>| TxDerivation::Underivable {
        reason,
        span: *m.stmts.span(*s),
    };
    let mut total = 0u64;
    for s in rest {
        match &m.stmts[*s] {
            Stmt::Op(c) if is_acquire_of(m, c, p) => return TxDerivation::Bytes(total),
            Stmt::Op(c) if is_load_into(m, c, p) => {
                if let Some(dst) = c.args.first().copied().flatten() {
                    total =
                        total.saturating_add(tma_destination_bytes(m, dst).saturating_mul(mult));
                }
            }
            Stmt::For { lo, hi, body, .. } => {
                if block_has(m, body, &|c| is_acquire_of(m, c, p)) {
                    // The loop's own acquires take over; loads before the first one would be
                    // split between two stages.
                    return match tx_after(m, p, &body.stmts, 1) {
                        TxDerivation::Bytes(0) => TxDerivation::Bytes(total),
                        TxDerivation::Bytes(_) => underivable("tma_loads before the acquire inside this loop cannot be attributed to one stage", s),
                        u => u,
                    };
                }
                if block_has(m, body, &|c| is_load_into(m, c, p)) {
                    let Some(n) = m
                        .const_value(*lo)
                        .zip(m.const_value(*hi))
                        .map(|(a, b)| b.saturating_sub(a).max(0) as u64)
                    else {
                        return underivable("tma_loads in a loop with a run-time trip count", s);
                    };
                    match tx_after(m, p, &body.stmts, mult.saturating_mul(n)) {
                        TxDerivation::Bytes(b) => total = total.saturating_add(b),
                        u => return u,
                    }
                }
            }
            Stmt::ForTiles { body, .. } => {
                if block_has(m, body, &|c| is_acquire_of(m, c, p)) {
                    return TxDerivation::Bytes(total);
                }
                if block_has(m, body, &|c| is_load_into(m, c, p)) {
                    return underivable("tma_loads in the tile loop after the acquire", s);
                }
            }
            Stmt::If {
                then_block,
                else_block,
                ..
            } => {
                let touches = |b: &Block| {
                    block_has(m, b, &|c| is_load_into(m, c, p) || is_acquire_of(m, c, p))
                };
                if touches(then_block) || else_block.as_ref().is_some_and(touches) {
                    return underivable("a conditional tma_load or acquire", s);
                }
            }
            _ => {}
        }
    }
    TxDerivation::Bytes(total)
}

// ─── Divisibility and address alignment (read by the verifier's facts and the lowering) ────────

/// A number every value of `e` is a multiple of (0: always zero): literals, dims (their
/// `multiple_of`), and products, shifts, sums and differences of those.
pub fn known_multiple(m: &Module, e: Handle<Expr>) -> i64 {
    match &m.exprs[e].kind {
        ExprKind::Int(v) => v.saturating_abs(),
        ExprKind::Dim(d) => m.dims[*d].multiple_of.unwrap_or(1).saturating_abs(),
        ExprKind::Unary(UnOp::Neg, a) => known_multiple(m, *a),
        ExprKind::Binary(BinOp::Mul, a, b) => known_multiple(m, *a).saturating_mul(known_multiple(m, *b)),
        ExprKind::Binary(BinOp::Shl, a, b) => match m.const_value(*b) {
            Some(s) if (0..40).contains(&s) => known_multiple(m, *a).saturating_mul(1 << s),
            _ => 1,
        },
        ExprKind::Binary(BinOp::Add | BinOp::Sub, a, b) => gcd(known_multiple(m, *a), known_multiple(m, *b)),
        _ => 1,
    }
}

/// A number a size is known to be a multiple of (0: the size is 0).
pub fn size_multiple(m: &Module, s: &Size) -> i64 {
    match s {
        Size::Const(c) => c.saturating_abs(),
        Size::Dim(d) => m.dims[*d].multiple_of.unwrap_or(1).saturating_abs(),
        Size::Bin(SizeOp::Mul, a, b) => size_multiple(m, a).saturating_mul(size_multiple(m, b)),
        Size::Bin(SizeOp::Add | SizeOp::Sub, a, b) => gcd(size_multiple(m, a), size_multiple(m, b)),
        Size::Bin(SizeOp::Div, a, b) => match (a.as_const(), b.as_const()) {
            (Some(p), Some(q)) if q != 0 => (p / q).saturating_abs(),
            // (k·q·x) / q is a multiple of k.
            (None, Some(q)) if q != 0 && size_multiple(m, a) % q == 0 => (size_multiple(m, a) / q).saturating_abs(),
            _ => 1,
        },
    }
}

/// Bytes one lane loads or stores per step of a vectorized element loop (one `ld.global.v4`).
pub const ELEMENT_ACCESS_BYTES: u64 = 16;

/// Elements per thread and step of an element loop over `len` elements (a 1-D window) split over
/// `threads`, touching `windows` (every window it reads, and its destination): the widest access
/// (up to [`ELEMENT_ACCESS_BYTES`]) that every one of them can make as one aligned vector load or
/// store. Each must be a global window of bf16, f16, f32, i32 or u32 along its tensor's
/// innermost dimension over exactly `len`, from a start and with row
/// strides that are provable multiples of the vector, and `len` must split into whole vectors
/// over the threads; anything else (a shared window, a broadcast, an fp8 or 8-byte dtype, a
/// ragged extent) keeps one element per step. The lowering emits the loop this way and the cost
/// model counts its steps from the same number.
pub fn element_vector(m: &Module, len: i64, threads: u32, windows: &[Handle<Expr>]) -> u32 {
    use crate::ir::{DType, Type};
    if windows.is_empty() {
        return 1;
    }
    let mut width = ELEMENT_ACCESS_BYTES;
    for &e in windows {
        let Type::Global { dtype, .. } = m.exprs[e].ty else { return 1 };
        if !matches!(dtype, DType::BF16 | DType::F16 | DType::F32 | DType::I32 | DType::U32) {
            return 1;
        }
        width = width.min(ELEMENT_ACCESS_BYTES / dtype.size_bytes());
    }
    let v = width as i64;
    if v < 2 || len % (v * i64::from(threads)) != 0 {
        return 1;
    }
    for &e in windows {
        let (base, items): (Handle<Expr>, &[IndexItem]) = match &m.exprs[e].kind {
            ExprKind::Index { base, items } => (*base, items),
            ExprKind::Tensor(_) => (e, &[]),
            _ => return 1,
        };
        let ExprKind::Tensor(t) = m.exprs[base].kind else { return 1 };
        let td = &m.tensors[t];
        let rank = td.shape.len();
        // Per dimension: (start multiple, window length); `None` for an indexed dimension.
        let mut dims: Vec<(i64, Option<i64>)> = Vec::with_capacity(rank);
        for (d, extent) in td.shape.iter().enumerate() {
            dims.push(match items.get(d) {
                Some(IndexItem::At(x)) => (known_multiple(m, *x), None),
                Some(IndexItem::Window { start, len }) => (known_multiple(m, *start), Some(*len)),
                Some(IndexItem::Full) | None => match extent.as_const() {
                    Some(c) => (0, Some(c)),
                    None => return 1,
                },
            });
        }
        let windowed: Vec<usize> = dims.iter().enumerate().filter(|(_, d)| d.1.is_some()).map(|(i, _)| i).collect();
        // A start on the vector grid, and an extent on it too: a vector lies wholly inside the
        // row or wholly outside (so one bounds check per vector is exact).
        if rank == 0
            || windowed != [rank - 1]
            || dims[rank - 1].1 != Some(len)
            || dims[rank - 1].0 % v != 0
            || size_multiple(m, &td.shape[rank - 1]) % v != 0
        {
            return 1;
        }
        for (d, &(start_mult, _)) in dims.iter().enumerate().take(rank - 1) {
            let stride_mult = td.shape[d + 1..].iter().fold(1i64, |acc, s| acc.saturating_mul(size_multiple(m, s)));
            if start_mult != 0 && start_mult.saturating_mul(stride_mult) % v != 0 && stride_mult % v != 0 {
                return 1;
            }
        }
    }
    v as u32
}

pub fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    i64::try_from(a).unwrap_or(i64::MAX)
}

/// One byte-offset term of a shared-memory window: `stride × (an index that is a multiple of
/// mult)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetTerm {
    pub stride: u64,
    /// 0: the index is always zero.
    pub mult: i64,
    pub innermost: bool,
}

impl OffsetTerm {
    /// Whether every value of the term is a multiple of `align`.
    pub fn aligned(&self, align: u64) -> bool {
        self.mult == 0 || (self.mult as u64).saturating_mul(self.stride) % align == 0 || self.stride % align == 0
    }
}

/// Where a shared-memory window starts, for the verifier's alignment facts: its address
/// constant's alignment and the offset terms of its indices, computed as the lowering's
/// `smem_ref` computes them (same strides, `known_multiple`, layout alignment).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmemWindow {
    /// What the region's (or view's) address constant is known to be a multiple of.
    pub base_align: u64,
    /// Per dimension (the stage dimension first for a staged region), in order: `Some(term)` for
    /// an indexed one, `None` for a dimension taken whole.
    pub terms: Vec<Option<OffsetTerm>>,
    pub swizzle: Swizzle,
}

impl SmemWindow {
    /// Whether the window's address is provably a multiple of `align`: the base and every
    /// offset term (innermost terms skipped when asked).
    pub fn aligned(&self, align: u64, skip_innermost: bool) -> bool {
        self.base_align % align == 0 && self.terms.iter().flatten().filter(|t| !(skip_innermost && t.innermost)).all(|t| t.aligned(align))
    }

    /// The largest power of two up to [`ALIGN_MAX`] the address is provably a multiple of.
    pub fn address_align(&self) -> u64 {
        let mut a = ALIGN_MAX;
        while a > 1 && !self.aligned(a, false) {
            a /= 2;
        }
        a
    }

    /// The largest power of two up to [`ALIGN_MAX`] every offset term matching `innermost` is a
    /// multiple of (the base not counted).
    pub fn terms_align(&self, innermost: bool) -> u64 {
        let mut a = ALIGN_MAX;
        while a > 1 && !self.terms.iter().flatten().filter(|t| t.innermost == innermost).all(|t| t.aligned(a)) {
            a /= 2;
        }
        a
    }
}

/// The window a shared-memory expression (`a_s[st, r :+ 64]`, `c_v`) names, or None for
/// anything else (or more indices than dimensions).
pub fn smem_window(m: &Module, layout: &KernelLayout, e: Handle<Expr>) -> Option<SmemWindow> {
    let (base, items): (Handle<Expr>, &[IndexItem]) = match &m.exprs[e].kind {
        ExprKind::Index { base, items } => (*base, items),
        ExprKind::Smem(_) | ExprKind::View(_) => (e, &[]),
        _ => return None,
    };
    let (dtype, shape, stages, swizzle, base_align) = match m.exprs[base].kind {
        ExprKind::Smem(h) => {
            let s = &m.smem[h];
            (s.dtype, &s.shape, s.stages, s.swizzle, layout.region(h).align)
        }
        ExprKind::View(h) => {
            let v = &m.views[h];
            (v.dtype, &v.shape, 1, v.swizzle, layout.view(h).align)
        }
        _ => return None,
    };
    let esize = dtype.size_bytes();
    let mut extents = Vec::new();
    let mut strides = Vec::new();
    if stages > 1 {
        extents.push(i64::from(stages));
        strides.push(elements(shape).saturating_mul(esize));
    }
    for (i, &extent) in shape.iter().enumerate() {
        extents.push(extent);
        strides.push(elements(&shape[i + 1..]).saturating_mul(esize));
    }
    if items.len() > extents.len() || extents.is_empty() {
        return None;
    }
    let last = extents.len() - 1;
    let terms = (0..extents.len())
        .map(|d| match items.get(d) {
            Some(IndexItem::At(x)) | Some(IndexItem::Window { start: x, .. }) => {
                Some(OffsetTerm { stride: strides[d], mult: known_multiple(m, *x), innermost: d == last })
            }
            Some(IndexItem::Full) | None => None,
        })
        .collect();
    Some(SmemWindow { base_align, terms, swizzle })
}

/// The byte distance between consecutive elements of a shared-memory window in the order an
/// element loop walks it (round-robin over the threads, the innermost dimension the window spans
/// fastest), as the lowering's `smem_ref` addresses it: the stride of the last dimension taken
/// whole or as a window of several elements. None for anything that is not a window of a region
/// or view, or a window of one element. Swizzled layouts permute 16-byte chunks, so their
/// stride is not one number: None as well.
pub fn smem_lane_stride(m: &Module, e: Handle<Expr>) -> Option<u64> {
    let (base, items): (Handle<Expr>, &[IndexItem]) = match &m.exprs[e].kind {
        ExprKind::Index { base, items } => (*base, items),
        ExprKind::Smem(_) | ExprKind::View(_) => (e, &[]),
        _ => return None,
    };
    let (dtype, shape, stages, swizzle) = match m.exprs[base].kind {
        ExprKind::Smem(h) => (m.smem[h].dtype, &m.smem[h].shape, m.smem[h].stages, m.smem[h].swizzle),
        ExprKind::View(h) => (m.views[h].dtype, &m.views[h].shape, 1, m.views[h].swizzle),
        _ => return None,
    };
    if swizzle != Swizzle::None {
        return None;
    }
    // Indices of a staged region start with the stage (as in `smem_window`), which never varies
    // within a window.
    let items = if stages > 1 && !items.is_empty() { &items[1..] } else { items };
    (0..shape.len()).rev().find_map(|d| {
        let spans = match items.get(d) {
            None | Some(IndexItem::Full) => shape[d] > 1,
            Some(IndexItem::Window { len, .. }) => *len > 1,
            Some(IndexItem::At(_)) => false,
        };
        spans.then(|| elements(&shape[d + 1..]).saturating_mul(dtype.size_bytes()))
    })
}

/// The alignment TMA needs of a shared-memory window: its swizzle atom when swizzled, else 128.
pub fn tma_smem_align(s: Swizzle) -> u64 {
    if s == Swizzle::None {
        128
    } else {
        swizzle_atom(s)
    }
}
