//! The schedule walk: each role's body, statement by statement, with loop trip counts evaluated
//! at the given dims, accumulated into per-role [`Work`] — what one block does per block start
//! (`cta`), per tile outside its main loop (`rest`), and per iteration of its main loop (`main`).
//!
//! Work is counted in the units the parameters speak: FLOPs and tensor-core nanoseconds,
//! thread-level operations per functional unit (ALU slots, SFU, shuffles, load/store
//! instructions), bytes read from and written to global memory (with which tile axes each read
//! depends on, for the reuse analysis), and the latencies and barrier costs on the role's own path.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::ir::*;
use crate::layout::{self, KernelLayout};
use crate::target::TargetInfo;
use crate::ops::OpId::{self, *};
use crate::syntax::ast::{BinOp, UnOp};

use super::calibration::{Calibration, P};

/// Evaluation context shared by the walk and the model.
pub(crate) struct Ctx<'a> {
    pub m: &'a Module,
    /// The verifier's derived layout (shared memory, launch shape).
    pub layout: &'a KernelLayout,
    /// The target's hardware table (shared-memory banks).
    pub target: &'a TargetInfo,
    pub cal: &'a Calibration,
    /// Dim values by dim handle index.
    pub dims: Vec<i64>,
    /// Tile-space axis extents (empty without a tile space).
    pub tile_extents: Vec<i64>,
    /// Parameters read so far (bit set over `P`).
    pub used: Cell<u64>,
    /// Coverage notes: constructs the model could not cost exactly.
    pub notes: RefCell<BTreeSet<String>>,
}

impl Ctx<'_> {
    /// A parameter's value, remembering that it was used.
    pub fn p(&self, p: P) -> f64 {
        self.used.set(self.used.get() | 1 << p as u64);
        self.cal.get(p)
    }

    pub fn note(&self, text: impl Into<String>) {
        self.notes.borrow_mut().insert(text.into());
    }

    /// Tensor rate of one SM for an operand dtype, FLOP per ns: the raw rate, times the
    /// sustained fraction when the operands stream in through a pipeline during the MMAs
    /// (`streamed`): TMA writes then share shared memory with the wgmma reads, and the SM runs
    /// at a full kernel's power draw. MMAs over resident operands run at the raw rate.
    pub fn tensor_rate_sm(&self, dtype: DType, streamed: bool) -> f64 {
        let rate = match dtype {
            DType::F8E4M3 | DType::F8E5M2 => self.p(P::TensorFp8FlopsPerS),
            _ => self.p(P::TensorBf16FlopsPerS),
        };
        let sustained = if streamed { self.p(P::TensorSustainedFraction) } else { 1.0 };
        rate * sustained / self.p(P::SmCount) * 1e-9
    }
}

/// A global read: which tensor, which tile axes its window depends on (bit i = axis i), bytes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Read {
    pub tensor: usize,
    pub mask: u32,
    pub bytes: f64,
}

/// Per-pipeline counts inside one piece of work.
#[derive(Clone, Debug, Default)]
pub(crate) struct PipeCount {
    pub acquires: f64,
    pub waits: f64,
    pub releases: f64,
    pub tma_bytes: f64,
    pub tma_loads: f64,
    /// Shared regions the pipeline's loads write.
    pub regions: BTreeSet<Handle<SmemDecl>>,
    /// Reads that name this pipeline (for their miss ratio).
    pub reads: Vec<Read>,
}

/// Per-barrier counts of an explicit barrier inside one piece of work: `wait` / `wait_parity`
/// calls, and arrivals (`arrive`, `arrive_expect_tx`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct BarCount {
    pub waits: f64,
    pub arrives: f64,
}

/// Work of one role in one scope (per block, per tile, or per main-loop iteration).
#[derive(Clone, Debug, Default)]
pub(crate) struct Work {
    pub flops: f64,
    /// Tensor-core occupancy of the SM by all groups of the role, ns.
    pub tensor_ns: f64,
    /// One group's own tensor time, ns.
    pub tensor_own_ns: f64,
    /// Thread-level operations, whole role.
    pub alu: f64,
    pub sfu: f64,
    pub shfl: f64,
    pub lsu: f64,
    /// Exposed latencies on the role's own path (wgmma drains, synchronous global loads), ns.
    pub latency_ns: f64,
    /// Element loops' round trips to DRAM on one group's path, and the bytes (reads and the
    /// stored window, whole role) those loops move: each trip waits `row_trip_latency_ns` plus
    /// its share of the DRAM time of every resident tile's bytes (`model.rs`, `Model::row_queue_ns`).
    pub row_trips: f64,
    pub row_bytes: f64,
    /// Latency of dependent reduction chains on one group's path (each thread folds its
    /// elements one after another), ns, and the ALU slots those chains issue.
    pub chain_ns: f64,
    pub chain_alu: f64,
    /// The part of `alu`/`sfu`/`shfl`/`lsu`/`chain_*` issued while this group's committed wgmma
    /// groups are still running (after `wgmma_commit`, before `wgmma_wait(0)`): it can hide
    /// behind them on the group's own path.
    pub under_mma: Box<Issue>,
    /// Barrier costs on the role's own path, ns.
    pub sync_ns: f64,
    /// Elected-thread issue time (TMA), ns.
    pub issue_ns: f64,
    pub reads: Vec<Read>,
    /// Bytes written to global memory (useful) and the L2 traffic they cause.
    pub write_bytes: f64,
    pub write_l2_bytes: f64,
    pub pipes: Vec<PipeCount>,
    /// Explicit barriers (by declaration index): this role's waits and arrivals on each.
    pub bars: Vec<BarCount>,
    pub cp_async_bytes: f64,
    /// Prefetch depth of cp.async (stages of the destination region − 1), max seen.
    pub cp_async_depth: u32,
    pub cp_async_waits: f64,
    /// First `wgmma_wait(0)` and first global `store` statement (hint anchors).
    pub wgmma_wait0_stmt: Option<Handle<Stmt>>,
    pub store_stmt: Option<Handle<Stmt>>,
}

/// Thread-level issue work (a subset of [`Work`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Issue {
    pub alu: f64,
    pub sfu: f64,
    pub shfl: f64,
    pub lsu: f64,
    pub chain_ns: f64,
    pub chain_alu: f64,
}

impl Issue {
    pub fn of(w: &Work) -> Issue {
        Issue { alu: w.alu, sfu: w.sfu, shfl: w.shfl, lsu: w.lsu, chain_ns: w.chain_ns, chain_alu: w.chain_alu }
    }

    /// `self += f × (a − b)`.
    fn add_diff(&mut self, a: &Issue, b: &Issue, f: f64) {
        self.alu += f * (a.alu - b.alu);
        self.sfu += f * (a.sfu - b.sfu);
        self.shfl += f * (a.shfl - b.shfl);
        self.lsu += f * (a.lsu - b.lsu);
        self.chain_ns += f * (a.chain_ns - b.chain_ns);
        self.chain_alu += f * (a.chain_alu - b.chain_alu);
    }
}

pub(crate) fn add_read(reads: &mut Vec<Read>, r: Read) {
    match reads.iter_mut().find(|x| x.tensor == r.tensor && x.mask == r.mask) {
        Some(x) => x.bytes += r.bytes,
        None => reads.push(r),
    }
}

impl Work {
    fn new(pipelines: usize, barriers: usize) -> Work {
        Work { pipes: vec![PipeCount::default(); pipelines], bars: vec![BarCount::default(); barriers], ..Work::default() }
    }

    /// `self += f × other`.
    pub fn add_scaled(&mut self, o: &Work, f: f64) {
        self.flops += f * o.flops;
        self.tensor_ns += f * o.tensor_ns;
        self.tensor_own_ns += f * o.tensor_own_ns;
        self.alu += f * o.alu;
        self.sfu += f * o.sfu;
        self.shfl += f * o.shfl;
        self.lsu += f * o.lsu;
        self.latency_ns += f * o.latency_ns;
        self.row_trips += f * o.row_trips;
        self.row_bytes += f * o.row_bytes;
        self.chain_ns += f * o.chain_ns;
        self.chain_alu += f * o.chain_alu;
        self.under_mma.add_diff(&o.under_mma, &Issue::default(), f);
        self.sync_ns += f * o.sync_ns;
        self.issue_ns += f * o.issue_ns;
        for r in &o.reads {
            add_read(&mut self.reads, Read { bytes: f * r.bytes, ..r.clone() });
        }
        self.write_bytes += f * o.write_bytes;
        self.write_l2_bytes += f * o.write_l2_bytes;
        if self.pipes.len() < o.pipes.len() {
            self.pipes.resize(o.pipes.len(), PipeCount::default());
        }
        if self.bars.len() < o.bars.len() {
            self.bars.resize(o.bars.len(), BarCount::default());
        }
        for (a, b) in self.bars.iter_mut().zip(&o.bars) {
            a.waits += f * b.waits;
            a.arrives += f * b.arrives;
        }
        for (a, b) in self.pipes.iter_mut().zip(&o.pipes) {
            a.acquires += f * b.acquires;
            a.waits += f * b.waits;
            a.releases += f * b.releases;
            a.tma_bytes += f * b.tma_bytes;
            a.tma_loads += f * b.tma_loads;
            a.regions.extend(b.regions.iter().copied());
            for r in &b.reads {
                add_read(&mut a.reads, Read { bytes: f * r.bytes, ..r.clone() });
            }
        }
        self.cp_async_bytes += f * o.cp_async_bytes;
        self.cp_async_depth = self.cp_async_depth.max(o.cp_async_depth);
        self.cp_async_waits += f * o.cp_async_waits;
        self.wgmma_wait0_stmt = self.wgmma_wait0_stmt.or(o.wgmma_wait0_stmt);
        self.store_stmt = self.store_stmt.or(o.store_stmt);
    }
}

/// The main loop of a role: the loop whose iterations hand off pipeline stages (or, without
/// pipelines, the loop that runs the tensor-core work).
#[derive(Clone, Debug)]
pub(crate) struct MainLoop {
    pub stmt: Handle<Stmt>,
    /// Iterations per tile.
    pub iters: f64,
    /// Work of one iteration.
    pub iter: Work,
}

/// Everything one role does.
#[derive(Clone, Debug)]
pub(crate) struct RoleWork {
    pub role: Handle<RoleDecl>,
    /// Per block, outside the tile loop.
    pub cta: Work,
    /// Per tile, outside the main loop.
    pub rest: Work,
    pub main: Option<MainLoop>,
    pub has_tile_loop: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dest {
    Cta,
    Rest,
    Main,
}

struct Walker<'a, 'c> {
    ctx: &'c Ctx<'a>,
    role: &'a RoleDecl,
    role_h: Handle<RoleDecl>,
    main_stmt: Option<Handle<Stmt>>,
    /// Whether the main loop hands off pipeline stages (its operands stream in), rather than
    /// only running the tensor-core work.
    main_streams: bool,
    rw: RoleWork,
    /// Representative values of loop variables (their mean over the loop).
    env: HashMap<Handle<Local>, f64>,
    /// Enclosing counted loops: (variable, lo, hi).
    loops: Vec<(Handle<Local>, f64, f64)>,
    /// Locals used as wgmma accumulators in this role (their zero() is folded into scale_d).
    wgmma_accs: BTreeSet<Handle<Local>>,
    /// Committed wgmma groups of this group still running (no `wgmma_wait(0)` since).
    mma_in_flight: bool,
    /// Row extremes already reduced, (value, axis, max?): an arg-reduction of the same value
    /// reuses them, as the lowering does.
    reduced_extremes: BTreeSet<(Handle<Local>, i64, bool)>,
    /// `let` names and their values (a name of a window is read where it is used).
    let_values: HashMap<Handle<Local>, Handle<Expr>>,
    /// Global windows an element loop has already read, by [`Walker::window_key`] (a later loop
    /// over the same row finds it in L1 or L2): the window's bytes per block, and the enclosing
    /// loops whose variables it reads, with their trip counts.
    windows_read: BTreeMap<String, (f64, Vec<(Handle<Local>, f64)>)>,
    /// Windows of the element loop being walked that it re-reads from L1 ([`Walker::l1_rereads`]):
    /// they move no L2 or DRAM bytes.
    l1_windows: Vec<Handle<Expr>>,
    /// Iterations of the innermost constant loop Cake leaves rolled whose element-loop round
    /// trips the C compiler's unrolling overlaps (1 outside such loops).
    compiler_unrolled: f64,
    /// Bytes of the TMA stores one execution of the current body issued since its last
    /// `tma_store_wait(0)` (one elected thread stores each window).
    stores_in_flight_bytes: f64,
    /// Copies of the current statement that unrolling the enclosing loops makes (as lowered:
    /// constant trip counts up to 16, or `unroll N`).
    unrolled_copies: f64,
    /// Elements per lane and access of the element loop whose value is being walked
    /// ([`layout::element_vector`]; `None` outside one: a 16-byte access).
    loop_vector: Option<u32>,
}


/// Walk every role with a body.
pub(crate) fn walk(ctx: &Ctx<'_>) -> Vec<RoleWork> {
    let m = ctx.m;
    let mut out = Vec::new();
    for (rh, role) in m.roles.iter() {
        let Some(body) = m.body_of(rh) else { continue };
        let mut wgmma_accs = BTreeSet::new();
        collect_wgmma_accs(m, &body.block, &mut wgmma_accs);
        let mut w = Walker {
            ctx,
            role,
            role_h: rh,
            main_stmt: None,
            main_streams: false,
            rw: RoleWork {
                role: rh,
                cta: Work::new(m.pipelines.len(), m.barriers.len()),
                rest: Work::new(m.pipelines.len(), m.barriers.len()),
                main: None,
                has_tile_loop: false,
            },
            env: HashMap::new(),
            loops: Vec::new(),
            wgmma_accs,
            mma_in_flight: false,
            reduced_extremes: BTreeSet::new(),
            let_values: HashMap::new(),
            windows_read: BTreeMap::new(),
            l1_windows: Vec::new(),
            unrolled_copies: 1.0,
            stores_in_flight_bytes: 0.0,
            compiler_unrolled: 1.0,
            loop_vector: None,
        };
        (w.main_stmt, w.main_streams) = w.find_main(&body.block);
        w.block(&body.block, 1.0, Dest::Cta);
        out.push(w.rw);
    }
    out
}

fn collect_wgmma_accs(m: &Module, b: &Block, out: &mut BTreeSet<Handle<Local>>) {
    for &s in &b.stmts {
        match &m.stmts[s] {
            Stmt::Op(c) if c.op == "wgmma" => {
                if let Some(Some(a)) = c.args.first() {
                    if let ExprKind::Local(l) = m.exprs[*a].kind {
                        out.insert(l);
                    }
                }
            }
            Stmt::For { body, .. } | Stmt::ForTiles { body, .. } => collect_wgmma_accs(m, body, out),
            Stmt::If { then_block, else_block, .. } => {
                collect_wgmma_accs(m, then_block, out);
                if let Some(e) = else_block {
                    collect_wgmma_accs(m, e, out);
                }
            }
            _ => {}
        }
    }
}

fn prod(shape: &[i64]) -> f64 {
    shape.iter().map(|&d| d.max(0) as f64).product()
}

impl<'a> Walker<'a, '_> {
    fn m(&self) -> &'a Module {
        self.ctx.m
    }

    // ---- main-loop detection -------------------------------------------------------------

    /// The outermost counted loop that hands off pipeline stages; without pipeline ops in the
    /// body, the outermost counted loop with tensor-core work or a cp.async wait. Among several,
    /// the one with the most iterations.
    /// The main loop, and whether it hands off pipeline stages.
    fn find_main(&self, b: &Block) -> (Option<Handle<Stmt>>, bool) {
        let mut found = Vec::new();
        self.find_loops(b, &|s| matches!(s, "acquire" | "wait"), &mut found, true);
        let streams = !found.is_empty();
        if found.is_empty() {
            self.find_loops(b, &|s| matches!(s, "wgmma" | "mma_sync" | "cp_async_wait"), &mut found, false);
        }
        let main = found
            .into_iter()
            .map(|h| (h, self.static_trip(h)))
            .fold(None, |best: Option<(Handle<Stmt>, f64)>, (h, t)| match best {
                Some((_, bt)) if bt >= t => best,
                _ => Some((h, t)),
            })
            .map(|(h, _)| h);
        (main, streams)
    }

    fn find_loops(&self, b: &Block, pred: &dyn Fn(&str) -> bool, out: &mut Vec<Handle<Stmt>>, pipeline_only: bool) {
        for &s in &b.stmts {
            match &self.m().stmts[s] {
                Stmt::For { body, .. } if self.contains(body, pred, pipeline_only) => out.push(s),
                Stmt::ForTiles { body, .. } => self.find_loops(body, pred, out, pipeline_only),
                Stmt::If { then_block, else_block, .. } => {
                    self.find_loops(then_block, pred, out, pipeline_only);
                    if let Some(e) = else_block {
                        self.find_loops(e, pred, out, pipeline_only);
                    }
                }
                _ => {}
            }
        }
    }

    fn contains(&self, b: &Block, pred: &dyn Fn(&str) -> bool, pipeline_only: bool) -> bool {
        let m = self.m();
        b.stmts.iter().any(|&s| match &m.stmts[s] {
            Stmt::Op(c) => {
                pred(&c.op)
                    && (!pipeline_only
                        || c.args.first().copied().flatten().is_some_and(|a| matches!(m.exprs[a].ty, Type::Pipeline(_))))
            }
            Stmt::For { body, .. } | Stmt::ForTiles { body, .. } => self.contains(body, pred, pipeline_only),
            Stmt::If { then_block, else_block, .. } => {
                self.contains(then_block, pred, pipeline_only)
                    || else_block.as_ref().is_some_and(|e| self.contains(e, pred, pipeline_only))
            }
            _ => false,
        })
    }

    fn static_trip(&self, h: Handle<Stmt>) -> f64 {
        match &self.m().stmts[h] {
            Stmt::For { lo, hi, .. } => match (self.eval(*lo), self.eval(*hi)) {
                (Some(l), Some(h)) => (h - l).max(0.0),
                _ => 1.0,
            },
            _ => 1.0,
        }
    }

    // ---- statements ----------------------------------------------------------------------

    fn work(&mut self, dest: Dest) -> &mut Work {
        match dest {
            Dest::Cta => &mut self.rw.cta,
            Dest::Rest => &mut self.rw.rest,
            Dest::Main => &mut self.rw.main.as_mut().expect("main loop entered").iter,
        }
    }

    fn block(&mut self, b: &'a Block, mult: f64, dest: Dest) {
        for &s in &b.stmts {
            self.stmt(s, mult, dest);
        }
    }

    fn stmt(&mut self, h: Handle<Stmt>, mult: f64, dest: Dest) {
        // Elementwise work issued while this group's MMAs run is recorded as such as well.
        let leaf = match &self.m().stmts[h] {
            Stmt::Let { .. } | Stmt::Assign { .. } => true,
            Stmt::Op(c) => !c.op.starts_with("wgmma"),
            _ => false,
        };
        let before = (leaf && self.mma_in_flight).then(|| Issue::of(self.work(dest)));
        self.stmt_work(h, mult, dest);
        if let Some(b) = before {
            let w = self.work(dest);
            let now = Issue::of(w);
            w.under_mma.add_diff(&now, &b, 1.0);
        }
    }

    fn stmt_work(&mut self, h: Handle<Stmt>, mult: f64, dest: Dest) {
        let m = self.m();
        match &m.stmts[h] {
            Stmt::Reg(_) => {}
            Stmt::Let { local, value } => {
                self.let_values.insert(*local, *value);
                let elems = self.elem_ops(&m.exprs[*value].ty);
                // A `let` of a global window is a name, read where it is used (the element loop
                // of the use waits for it): its bytes count here, its latency there.
                let names_window = match &m.exprs[*value].ty {
                    Type::Global { .. } => true,
                    // As `lower/frag.rs` aliases it: a value of windows and scalars only (no
                    // register operand, no reduction) has no layout of its own.
                    Type::Frag { .. } => !self.element_windows(*value).is_empty() && self.only_windows_and_scalars(*value),
                    _ => false,
                };
                let latency = self.work(dest).latency_ns;
                // Its bytes come from L1 when the uses re-read a row held there.
                let in_l1 = if names_window { self.l1_rereads(&self.element_windows(*value)) } else { Vec::new() };
                let outer_l1 = std::mem::replace(&mut self.l1_windows, in_l1);
                self.value(*value, mult, dest, elems);
                self.l1_windows = outer_l1;
                if names_window {
                    self.work(dest).latency_ns = latency;
                }
            }
            Stmt::Assign { target, value } => {
                if let ExprKind::Local(l) = m.exprs[*target].kind {
                    self.reduced_extremes.retain(|k| k.0 != l);
                }
                let elems = self.elem_ops(&m.exprs[*value].ty);
                self.value(*value, mult, dest, elems);
            }
            Stmt::Op(call) => self.op(h, call, mult, dest),
            Stmt::For { var, lo, hi, body, unroll } => {
                let (l, u) = (self.eval(*lo), self.eval(*hi));
                let trips = self.m().const_value(*lo).zip(self.m().const_value(*hi)).map(|(a, b)| b - a);
                let copies = crate::lower::unrolled_copies(*unroll, trips) as f64;
                let outer_copies = self.unrolled_copies;
                self.unrolled_copies *= copies;
                // A constant loop Cake leaves rolled is unrolled by the C compiler, which overlaps
                // the memory round trips of that many iterations.
                let outer_overlap = self.compiler_unrolled;
                if copies <= 1.0 && unroll.is_none() {
                    if let Some(t) = trips.filter(|&t| t > 1) {
                        self.compiler_unrolled = (t as f64).min(self.ctx.p(P::RowTripsInFlight)).max(1.0);
                    }
                }
                let (l, trip) = match (l, u) {
                    (Some(l), Some(u)) => (l, (u - l).max(0.0)),
                    _ => {
                        self.ctx.note(format!(
                            "a loop bound of role `{}` is not known statically: its body is counted once per entry",
                            self.role.name
                        ));
                        (0.0, 1.0)
                    }
                };
                self.env.insert(*var, l + (trip - 1.0).max(0.0) / 2.0);
                self.loops.push((*var, l, l + trip));
                if Some(h) == self.main_stmt && dest != Dest::Main {
                    let mut iter = Work::new(m.pipelines.len(), m.barriers.len());
                    if let Some(prev) = self.rw.main.take() {
                        // The same main loop reached twice (e.g. two tile loops): merge.
                        iter.add_scaled(&prev.iter, 1.0);
                    }
                    self.rw.main = Some(MainLoop { stmt: h, iters: mult * trip, iter });
                    self.block(body, 1.0, Dest::Main);
                } else {
                    self.block(body, mult * trip, dest);
                }
                self.loops.pop();
                self.env.remove(var);
                self.unrolled_copies = outer_copies;
                self.compiler_unrolled = outer_overlap;
            }
            Stmt::ForTiles { body, .. } => {
                self.rw.has_tile_loop = true;
                let dest = if dest == Dest::Cta { Dest::Rest } else { dest };
                let mult = if dest == Dest::Rest { 1.0 } else { mult };
                self.block(body, mult, dest);
            }
            Stmt::If { cond, then_block, else_block } => {
                let p = self.probability(*cond);
                if p > 0.0 {
                    self.block(then_block, mult * p, dest);
                }
                if let Some(e) = else_block {
                    if p < 1.0 {
                        self.block(e, mult * (1.0 - p), dest);
                    }
                }
            }
        }
    }

    fn arg(call: &OpCall, i: usize) -> Option<Handle<Expr>> {
        call.args.get(i).copied().flatten()
    }

    fn op(&mut self, sh: Handle<Stmt>, call: &OpCall, mult: f64, dest: Dest) {
        let m = self.m();
        let ctx = self.ctx;
        let ty = |i: usize| Self::arg(call, i).map(|e| &m.exprs[e].ty);
        let shape = |i: usize| ty(i).and_then(Type::const_shape).unwrap_or_default();
        let threads = f64::from(self.role.threads().max(1));
        let Some(op) = OpId::from_name(&call.op) else {
            ctx.note(format!("operation `{}` is not in the cost model: counted as free", call.op));
            return;
        };
        match op {
            Wgmma => {
                let dtype = ty(1).and_then(Type::dtype).unwrap_or(DType::BF16);
                let (a, b) = (shape(1), shape(2));
                let k = a.get(1).copied().unwrap_or(0) as f64;
                let n = b.first().copied().unwrap_or(0) as f64;
                let flops = 2.0 * 64.0 * n * k;
                let bytes = (64.0 * k + n * k) * dtype.size_bytes() as f64;
                let streamed = dest == Dest::Main && self.main_streams;
                let per = (flops / ctx.tensor_rate_sm(dtype, streamed)).max(bytes / ctx.p(P::SmemReadBytesPerSPerSm) * 1e9);
                let groups = (threads / 128.0).max(1.0);
                let w = self.work(dest);
                w.flops += mult * flops * groups;
                w.tensor_ns += mult * per * groups;
                w.tensor_own_ns += mult * per;
            }
            MmaSync => {
                let (acc, a) = (shape(0), shape(1));
                let (mm, nn) = (acc.first().copied().unwrap_or(0) as f64, acc.get(1).copied().unwrap_or(0) as f64);
                let k = a.get(1).copied().unwrap_or(0) as f64;
                let flops = 2.0 * mm * nn * k;
                let rate =
                    ctx.p(P::MmaSyncFlopsPerS) * ctx.p(P::TensorSustainedFraction) / ctx.p(P::SmCount) * 1e-9;
                let per = flops / rate;
                let warps = (threads / 32.0).max(1.0);
                let w = self.work(dest);
                w.flops += mult * flops * warps;
                w.tensor_ns += mult * per * warps;
                // One warp drives one of the SM's four sub-partition tensor cores.
                w.tensor_own_ns += mult * per * 4.0_f64.min(warps);
            }
            WgmmaCommit => self.mma_in_flight = true,
            CpAsyncCommit | GriddepWait | GriddepLaunchDependents => {}
            ArriveExpectTx => {
                if let Some(b) = Self::arg(call, 0).and_then(|a| self.barrier_of(a)) {
                    self.work(dest).bars[b].arrives += mult;
                }
            }
            WgmmaWait => {
                let n = Self::arg(call, 0).and_then(|e| self.eval(e)).unwrap_or(0.0);
                if n == 0.0 {
                    self.mma_in_flight = false;
                    let lat = ctx.p(P::WgmmaWaitLatencyNs);
                    let w = self.work(dest);
                    w.latency_ns += mult * lat;
                    w.wgmma_wait0_stmt.get_or_insert(sh);
                }
            }
            Zero => {
                let folded = Self::arg(call, 0)
                    .is_some_and(|e| matches!(m.exprs[e].kind, ExprKind::Local(l) if self.wgmma_accs.contains(&l)));
                if !folded {
                    let e = ty(0).map_or(0.0, |t| self.elem_ops(t));
                    self.work(dest).alu += mult * e;
                }
            }
            Fill => {
                let e = ty(0).map_or(0.0, |t| self.elem_ops(t));
                self.work(dest).alu += mult * e;
            }
            TmaLoad => {
                let issue = ctx.p(P::TmaIssueNs);
                let (Some(dst), Some(src)) = (Self::arg(call, 0), Self::arg(call, 1)) else { return };
                let read = self.global_read(src);
                let region = self.smem_region(dst);
                let pipe = Self::arg(call, 2).and_then(|e| match m.exprs[e].ty {
                    Type::Pipeline(p) => Some(p.index()),
                    _ => None,
                });
                let w = self.work(dest);
                w.issue_ns += mult * issue;
                if let Some(r) = read {
                    let r = Read { bytes: mult * r.bytes, ..r };
                    if let Some(p) = pipe {
                        let pc = &mut w.pipes[p];
                        pc.tma_bytes += r.bytes;
                        pc.tma_loads += mult;
                        pc.regions.extend(region);
                        add_read(&mut pc.reads, r.clone());
                    }
                    add_read(&mut w.reads, r);
                }
            }
            TmaStore => {
                let issue = ctx.p(P::TmaIssueNs);
                let (window, groups) = Self::arg(call, 0).map_or((0.0, 1.0), |e| (self.window_bytes(e), self.group_mult(e)));
                let bytes = window * groups;
                self.stores_in_flight_bytes += window;
                let w = self.work(dest);
                w.issue_ns += mult * issue;
                w.write_bytes += mult * bytes;
                w.write_l2_bytes += mult * bytes;
                w.store_stmt.get_or_insert(sh);
            }
            // Waiting for no store to be in flight exposes the store's read of shared memory on
            // the role's path (the elected thread waits; the role's barrier after it holds the
            // rest). A wait for N > 0 leaves the newest stores running under later work.
            TmaStoreWait => {
                if Self::arg(call, 0).and_then(|e| self.eval(e)) == Some(0.0) {
                    let bytes = std::mem::take(&mut self.stores_in_flight_bytes);
                    let lat = ctx.p(P::TmaStoreWaitNs) + bytes / ctx.p(P::TmaStoreReadBytesPerSPerSm) * 1e9;
                    self.work(dest).latency_ns += mult * lat;
                }
            }
            CpAsync => {
                let (Some(dst), Some(src)) = (Self::arg(call, 0), Self::arg(call, 1)) else { return };
                let read = self.global_read(src);
                let depth = self.smem_region(dst).map_or(1, |r| m.smem[r].stages.saturating_sub(1).max(1));
                let w = self.work(dest);
                if let Some(r) = read {
                    w.lsu += mult * r.bytes / 16.0;
                    w.cp_async_bytes += mult * r.bytes;
                    add_read(&mut w.reads, Read { bytes: mult * r.bytes, ..r });
                }
                w.cp_async_depth = w.cp_async_depth.max(depth);
            }
            CpAsyncWait => self.work(dest).cp_async_waits += mult,
            Ldmatrix => {
                // Each warp loads its own window: 16 bytes per lane-instruction.
                let bytes = Self::arg(call, 1).map_or(0.0, |e| self.shared_bytes(e));
                let warps = (threads / 32.0).max(1.0);
                self.work(dest).lsu += mult * bytes / 16.0 * warps;
            }
            Stmatrix => {
                if let Some(src) = Self::arg(call, 1) {
                    let e = self.elem_ops(&m.exprs[src].ty);
                    let size = m.exprs[src].ty.dtype().map_or(2, DType::size_bytes) as f64;
                    self.value(src, mult, dest, e);
                    self.work(dest).lsu += mult * e * size / 16.0;
                }
            }
            Store => {
                let (Some(dst), Some(src)) = (Self::arg(call, 0), Self::arg(call, 1)) else { return };
                let src_elems = self.elem_ops(&m.exprs[src].ty);
                let global_dst = matches!(m.exprs[dst].ty, Type::Global { .. });
                // A value computed element by element from row windows of the stored size is
                // written as it is read, in the element loop's vectors (a 16-byte piece per lane
                // and step where every window allows it, else one element).
                let elements = self.window_elements(dst);
                let windows = self.element_windows(src);
                let elementwise = global_dst && windows.iter().any(|&w| self.window_elements(w) == elements);
                let vector = elementwise.then(|| self.element_vector(elements, src, Some(dst)));
                let outer_vector = self.loop_vector;
                self.loop_vector = vector.or(outer_vector);
                let in_l1 = if vector.is_some() { self.l1_rereads(&windows) } else { Vec::new() };
                let outer_l1 = std::mem::replace(&mut self.l1_windows, in_l1);
                self.value(src, mult, dest, src_elems);
                self.l1_windows = outer_l1;
                self.loop_vector = outer_vector;
                match &m.exprs[dst].ty {
                    Type::Global { .. } => {
                        let bytes = self.window_bytes(dst) * self.group_mult(dst);
                        // Whole sectors per warp when written as read; `store_sector_efficiency`
                        // describes register fragments (an accumulator's scattered 4-byte stores).
                        let lsu = match vector {
                            Some(v) => {
                                self.element_loop_latency(windows, Some(dst), src, elements, v, mult, dest);
                                bytes / self.access_bytes(dst, v)
                            }
                            None => bytes / 4.0,
                        };
                        let eff = if elementwise { 1.0 } else { ctx.p(P::StoreSectorEfficiency) };
                        let w = self.work(dest);
                        w.write_bytes += mult * bytes;
                        w.write_l2_bytes += mult * bytes / eff;
                        w.lsu += mult * lsu;
                        w.store_stmt.get_or_insert(sh);
                    }
                    t => {
                        let size = t.dtype().map_or(4, DType::size_bytes) as f64;
                        self.work(dest).lsu += mult * src_elems * size / 4.0;
                        if matches!(t, Type::Shared { .. }) {
                            self.shared_element_loop(dst, src, mult, dest);
                        }
                    }
                }
            }
            AtomicAdd | AtomicMin | AtomicMax => {
                // One `red.global` per element, issued element by element (never vectorised) and
                // performed at L2: the window's bytes are written to L2 (a warp's reductions to
                // consecutive elements share sectors), and every element is one LSU instruction
                // per thread that holds it — the atomic unit's throughput, not the bytes, bounds a
                // reduction-heavy epilogue.
                let (Some(dst), Some(src)) = (Self::arg(call, 0), Self::arg(call, 1)) else { return };
                let src_elems = self.elem_ops(&m.exprs[src].ty);
                self.value(src, mult, dest, src_elems);
                if matches!(m.exprs[dst].ty, Type::Global { .. }) {
                    let bytes = self.window_bytes(dst) * self.group_mult(dst);
                    let size = m.exprs[dst].ty.dtype().map_or(4, DType::size_bytes) as f64;
                    let w = self.work(dest);
                    w.write_bytes += mult * bytes;
                    w.write_l2_bytes += mult * bytes;
                    w.lsu += mult * bytes / size;
                    w.store_stmt.get_or_insert(sh);
                }
            }
            Acquire | Wait | Release => {
                let Some(a) = Self::arg(call, 0) else { return };
                match m.exprs[a].ty {
                    Type::Pipeline(p) => {
                        // The producer's serial cost per acquire (its wait on the empty barrier
                        // returning, arrive.expect_tx): one stage per that long at best.
                        let acquire = if call.op == "acquire" { ctx.p(P::PipelineAcquireNs) } else { 0.0 };
                        let w = self.work(dest);
                        w.issue_ns += mult * acquire;
                        let pc = &mut w.pipes[p.index()];
                        match call.op.as_str() {
                            "acquire" => pc.acquires += mult,
                            "wait" => pc.waits += mult,
                            _ => pc.releases += mult,
                        }
                    }
                    _ => {
                        if call.op == "wait" {
                            let lat = ctx.p(P::MbarrierHandoffNs);
                            let b = self.barrier_of(a);
                            let w = self.work(dest);
                            w.sync_ns += mult * lat;
                            if let Some(b) = b {
                                w.bars[b].waits += mult;
                            }
                        }
                    }
                }
            }
            // The role meet before an arrival, and sync_role, are a named barrier (`bar.sync`) for
            // a role of several warps and `__syncwarp()` for a one-warp role (counted as free).
            Arrive | SyncRole => {
                if self.role.threads() > 32 {
                    let c = ctx.p(P::BarSyncNs);
                    self.work(dest).sync_ns += mult * c;
                }
                if call.op == "arrive" {
                    if let Some(b) = Self::arg(call, 0).and_then(|a| self.barrier_of(a)) {
                        self.work(dest).bars[b].arrives += mult;
                    }
                }
            }
            Sync => {
                let c = ctx.p(P::BarSyncNs);
                self.work(dest).sync_ns += mult * c;
            }
            WaitParity => {
                let c = ctx.p(P::MbarrierHandoffNs);
                let b = Self::arg(call, 0).and_then(|a| self.barrier_of(a));
                let w = self.work(dest);
                w.sync_ns += mult * c;
                if let Some(b) = b {
                    w.bars[b].waits += mult;
                }
            }
            FenceProxyAsync => {
                let c = ctx.p(P::FenceProxyAsyncNs);
                self.work(dest).sync_ns += mult * c;
            }
            ClusterSync => {
                let c = ctx.p(P::ClusterSyncNs);
                self.work(dest).sync_ns += mult * c;
            }
            Cast | Exp | Exp2 | Log | Sqrt | Rsqrt | Abs | Min | Max | Select | Iota | Fma | ReduceMin | ReduceMax | ReduceSum | ReduceArgmin
            | ReduceArgmax => {
                ctx.note(format!("expression operation `{op}` used as a statement is not in the cost model: counted as free"));
                for &a in call.args.iter().flatten() {
                    if matches!(m.exprs[a].ty, Type::Frag { .. }) {
                        let e = self.elem_ops(&m.exprs[a].ty);
                        self.value(a, mult, dest, e);
                    }
                }
            }
        }
    }

    // ---- expressions ---------------------------------------------------------------------

    /// Cost of evaluating a value expression. `ctx_elems`: thread-level elements of the
    /// computation that consumes it (bounds the loads of a broadcast shared operand).
    fn value(&mut self, e: Handle<Expr>, mult: f64, dest: Dest, ctx_elems: f64) {
        let m = self.m();
        let ctx = self.ctx;
        let expr = &m.exprs[e];
        match &expr.kind {
            ExprKind::Index { .. } | ExprKind::Smem(_) | ExprKind::View(_) | ExprKind::Tensor(_) => match &expr.ty {
                Type::Shared { dtype, shape, .. } => {
                    let per_role = prod(shape) * f64::from(self.role.threads());
                    let loads = per_role.min(ctx_elems.max(1.0)) * dtype.size_bytes() as f64 / 8.0;
                    self.work(dest).lsu += mult * loads;
                }
                Type::Global { .. } => {
                    let lat = ctx.p(P::LoadLatencyNs);
                    if let Some(r) = self.global_read(e) {
                        let access = self.loop_vector.map_or(layout::ELEMENT_ACCESS_BYTES as f64, |v| self.access_bytes(e, v));
                        let cached = self.l1_windows.contains(&e);
                        let w = self.work(dest);
                        w.lsu += mult * r.bytes / access;
                        w.latency_ns += mult * lat;
                        if !cached {
                            add_read(&mut w.reads, Read { bytes: mult * r.bytes, ..r });
                        }
                    }
                }
                _ => {}
            },
            ExprKind::Binary(op, a, b) => {
                let (a, b) = (*a, *b);
                let mut own = self.elem_ops(&expr.ty);
                if matches!(op, BinOp::Div | BinOp::Rem) && expr.ty.dtype().is_some_and(DType::is_int) {
                    own *= 8.0; // integer division is a multi-instruction sequence
                } else if *op == BinOp::Div && expr.ty.dtype().is_some_and(DType::is_float) {
                    own *= ctx.p(P::DivAluSlots); // so is an IEEE float division
                }
                self.work(dest).alu += mult * own;
                // a*b ± c contracts into one FMA: the multiply costs nothing of its own.
                let fused = |x: Handle<Expr>| {
                    matches!(op, BinOp::Add | BinOp::Sub)
                        && matches!(m.exprs[x].kind, ExprKind::Binary(BinOp::Mul, ..))
                        && m.exprs[x].ty.dtype().is_some_and(DType::is_float)
                };
                for x in [a, b] {
                    if fused(x) {
                        if let ExprKind::Binary(_, p, q) = m.exprs[x].kind {
                            self.value(p, mult, dest, ctx_elems);
                            self.value(q, mult, dest, ctx_elems);
                        }
                    } else {
                        self.value(x, mult, dest, ctx_elems);
                    }
                }
            }
            ExprKind::Unary(op, a) => {
                let own = match op {
                    UnOp::Neg | UnOp::Not => self.elem_ops(&expr.ty),
                };
                self.work(dest).alu += mult * own;
                self.value(*a, mult, dest, ctx_elems);
            }
            ExprKind::Call(call) => self.math(e, call, mult, dest),
            _ => {}
        }
    }

    fn math(&mut self, e: Handle<Expr>, call: &OpCall, mult: f64, dest: Dest) {
        let m = self.m();
        let ctx = self.ctx;
        let out = self.elem_ops(&m.exprs[e].ty);
        let arg0 = Self::arg(call, 0);
        let input = arg0.map_or(0.0, |a| self.elem_ops(&m.exprs[a].ty));
        // The element loop a reduction to one value folds its operand in, once known, and the
        // windows it re-reads from L1.
        let mut reduced_vector: Option<u32> = None;
        let mut reduced_l1: Option<Vec<Handle<Expr>>> = None;
        let Some(op) = OpId::from_name(&call.op) else {
            ctx.note(format!("operation `{}` is not in the cost model: counted as free", call.op));
            return;
        };
        match op {
            Cast => {
                let c = ctx.p(P::CastAluSlots);
                self.work(dest).alu += mult * out * c;
            }
            Exp | Log => {
                let w = self.work(dest);
                w.sfu += mult * out;
                w.alu += mult * out;
            }
            Exp2 | Rsqrt => self.work(dest).sfu += mult * out,
            Sqrt => {
                let c = ctx.p(P::SqrtAluSlots);
                let w = self.work(dest);
                w.sfu += mult * out;
                w.alu += mult * out * c;
            }
            Abs | Min | Max | Select | Iota | Fma => self.work(dest).alu += mult * out,
            ReduceMin | ReduceMax | ReduceSum | ReduceArgmin | ReduceArgmax => {
                let (rank, numel_out) = match (&arg0.map(|a| &m.exprs[a].ty), &m.exprs[e].ty) {
                    (Some(Type::Frag { shape, .. }), Type::Frag { shape: o, .. }) => (shape.len(), prod(o)),
                    _ => (1, 1.0),
                };
                let axis = Self::arg(call, 1).and_then(|a| self.eval(a)).unwrap_or(rank as f64 - 1.0);
                // Along the last axis of an MMA accumulator a row lives in the 4 lanes of a quad
                // (2 butterfly steps); other axes span the warp (5 steps) — an approximation.
                let lanes: f64 = if axis as usize + 1 == rank { 4.0 } else { 32.0 };
                if lanes > 4.0 {
                    ctx.note(format!(
                        "`{}` along axis {} is costed as a full-warp butterfly (its shared-memory exchange is not modeled)",
                        call.op, axis
                    ));
                }
                // A reduction to one value (a row window, as lowered by lower/window.rs): each warp
                // reduces its own row, every lane folding its share in order, then a 5-step
                // butterfly; every lane ends with the result.
                let to_one_value = !matches!(m.exprs[e].ty, Type::Frag { .. });
                let (groups, lanes) = if to_one_value { (self.groups(Scope::Warp), 32.0) } else { (self.groups_of(&m.exprs[e].ty), lanes) };
                let rows = numel_out * lanes * groups;
                let steps = lanes.log2();
                let group_threads = match &m.exprs[e].ty {
                    Type::Frag { scope, .. } => f64::from(scope.unwrap_or(self.unit_scope()).threads()),
                    _ => 32.0,
                };
                let rows_per_thread = (rows / groups / group_threads).max(1.0);
                // Elements of one row in one thread, and the depth of the tree that folds them.
                let per_row = (input / groups / group_threads / rows_per_thread).max(1.0);
                let depth = per_row.log2().ceil();
                let latency = ctx.p(P::ReduceStepLatencyNs);
                // As lowered (lower/frag.rs): min/max fold each thread's elements as a pairwise
                // tree, then a quad/warp butterfly; a thread's rows interleave. A sum keeps its
                // sequential order (its rounding). An arg-reduction finds the row extreme that
                // way (or reuses `let m = reduce_min(d)` of the same value), then the smallest
                // column holding it: a compare-and-select per element, an integer-min tree and
                // its butterfly.
                let (op, arg) = (call.op.as_str(), matches!(call.op.as_str(), "reduce_argmin" | "reduce_argmax"));
                let key = arg0.and_then(|a| match m.exprs[a].kind {
                    ExprKind::Local(l) => Some((l, axis as i64, matches!(op, "reduce_max" | "reduce_argmax"))),
                    _ => None,
                });
                let extreme_done = arg && key.is_some_and(|k| self.reduced_extremes.contains(&k));
                let (mut alu, mut shfl, mut chain, mut chain_alu) = (0.0, 0.0, 0.0, 0.0);
                if op == "reduce_sum" {
                    alu += input + rows * steps;
                    shfl += rows * steps;
                    chain += (per_row + steps) * latency;
                    chain_alu += input;
                } else if !extreme_done {
                    alu += input + rows * steps;
                    shfl += rows * steps;
                    chain += (depth + steps) * latency;
                    chain_alu += input;
                }
                if arg {
                    let slots = ctx.p(P::ArgIndexAluSlots);
                    alu += input * slots + rows * steps;
                    shfl += rows * steps;
                    chain += (1.0 + depth + steps) * latency;
                    chain_alu += input * slots;
                } else if let Some(k) = key {
                    self.reduced_extremes.insert(k);
                }
                let w = self.work(dest);
                w.alu += mult * alu;
                w.shfl += mult * shfl;
                w.chain_ns += mult * chain;
                w.chain_alu += mult * chain_alu;
                if to_one_value {
                    if let Some(x) = arg0 {
                        let elements = match &m.exprs[x].ty {
                            Type::Frag { shape, .. } => prod(shape),
                            _ => self.window_elements(x),
                        };
                        let windows = self.element_windows(x);
                        let vector = self.element_vector(elements, x, None);
                        reduced_l1 = Some(self.l1_rereads(&windows));
                        self.element_loop_latency(windows, None, x, elements, vector, mult, dest);
                        reduced_vector = Some(vector);
                    }
                }
            }
            Wgmma | WgmmaCommit | WgmmaWait | MmaSync | Zero | Fill | GriddepWait | GriddepLaunchDependents | TmaLoad | TmaStore | TmaStoreWait | CpAsync | CpAsyncCommit | CpAsyncWait | Ldmatrix | Stmatrix | Store | AtomicAdd | AtomicMin | AtomicMax | Acquire | Wait | Release | Arrive | ArriveExpectTx | WaitParity | Sync | SyncRole | FenceProxyAsync | ClusterSync => ctx.note(format!("statement operation `{op}` used in an expression is not in the cost model: counted as free")),
        }
        let outer_vector = self.loop_vector;
        self.loop_vector = reduced_vector.or(outer_vector);
        let outer_l1 = match reduced_l1 {
            Some(l1) => std::mem::replace(&mut self.l1_windows, l1),
            None => self.l1_windows.clone(),
        };
        for &a in call.args.iter().flatten() {
            let t = &m.exprs[a].ty;
            if matches!(t, Type::Frag { .. } | Type::Shared { .. } | Type::Global { .. }) || self.holds_reduction(a) {
                self.value(a, mult, dest, input.max(out));
            }
        }
        self.l1_windows = outer_l1;
        self.loop_vector = outer_vector;
    }

    // ---- helpers -------------------------------------------------------------------------

    /// Thread-level element operations one elementwise op over a value of type `t` costs,
    /// summed over the role's groups. Scalars cost nothing (index arithmetic is hoisted).
    fn elem_ops(&self, t: &Type) -> f64 {
        match t {
            Type::Frag { shape, scope, .. } => {
                let s = scope.unwrap_or(self.unit_scope());
                prod(shape).max(f64::from(s.threads())) * self.groups(s)
            }
            _ => 0.0,
        }
    }

    fn groups_of(&self, t: &Type) -> f64 {
        match t {
            Type::Frag { scope, .. } => self.groups(scope.unwrap_or(self.unit_scope())),
            _ => 1.0,
        }
    }

    fn groups(&self, s: Scope) -> f64 {
        (f64::from(self.role.threads()) / f64::from(s.threads())).max(1.0)
    }

    fn unit_scope(&self) -> Scope {
        match self.role.unit {
            RoleUnit::Warp => Scope::Warp,
            RoleUnit::Warpgroup => Scope::Warpgroup,
        }
    }

    /// Bytes of a constant-shape global or shared window.
    fn window_bytes(&self, e: Handle<Expr>) -> f64 {
        let t = &self.m().exprs[e].ty;
        match (t.const_shape(), t.dtype()) {
            (Some(s), Some(d)) => prod(&s) * d.size_bytes() as f64,
            _ => {
                self.ctx.note("a global window of symbolic shape is counted as empty".to_string());
                0.0
            }
        }
    }

    fn shared_bytes(&self, e: Handle<Expr>) -> f64 {
        match &self.m().exprs[e].ty {
            Type::Shared { dtype, shape, .. } => prod(shape) * dtype.size_bytes() as f64,
            _ => 0.0,
        }
    }

    /// A global window read: its tensor, the tile axes it depends on, and its bytes over all of
    /// the role's groups (a window indexed by the group id is one window per group).
    fn global_read(&self, e: Handle<Expr>) -> Option<Read> {
        let tensor = self.tensor_of(e)?;
        Some(Read { tensor, mask: self.tile_mask(e), bytes: self.window_bytes(e) * self.group_mult(e) })
    }

    /// The explicit barrier an argument names (`done`, `full[kb % 2]`), by declaration index.
    fn barrier_of(&self, e: Handle<Expr>) -> Option<usize> {
        match self.m().exprs[e].ty {
            Type::Barrier(b) => Some(b.index()),
            _ => None,
        }
    }

    fn tensor_of(&self, e: Handle<Expr>) -> Option<usize> {
        match &self.m().exprs[e].ty {
            Type::Global { tensor, .. } => Some(tensor.index()),
            _ => None,
        }
    }

    fn smem_region(&self, e: Handle<Expr>) -> Option<Handle<SmemDecl>> {
        self.m().smem_region(e)
    }

    /// The tile axes a window depends on (bit i = axis i).
    fn tile_mask(&self, e: Handle<Expr>) -> u32 {
        let mut mask = 0u32;
        self.tile_axes(e, &mut mask);
        mask
    }

    fn tile_axes(&self, e: Handle<Expr>, mask: &mut u32) {
        self.visit(e, &mut |k| {
            if let ExprKind::Field { field: Field::TileAxis(i), .. } = k {
                if *i < 32 {
                    *mask |= 1 << i;
                }
            }
        });
    }

    /// How many copies of a window the role's groups touch: one per warpgroup (warp) when the
    /// window is indexed by this role's `.warpgroup` (`.warp`), else one.
    fn group_mult(&self, e: Handle<Expr>) -> f64 {
        let m = self.m();
        let mut f = 1.0f64;
        let threads = f64::from(self.role.threads());
        let role_h = self.role_h;
        self.visit(e, &mut |k| {
            if let ExprKind::Field { base, field } = k {
                if matches!(m.exprs[*base].kind, ExprKind::Role(r) if r == role_h) {
                    match field {
                        Field::Warpgroup => f = f.max(threads / 128.0),
                        Field::Warp => f = f.max(threads / 32.0),
                        _ => {}
                    }
                }
            }
        });
        f.max(1.0)
    }

    /// Elements of a constant-shape window (unknown extents count as 1).
    fn window_elements(&self, e: Handle<Expr>) -> f64 {
        match &self.m().exprs[e].ty {
            Type::Global { shape, .. } => shape.iter().map(|s| s.as_const().unwrap_or(1) as f64).product(),
            Type::Shared { shape, .. } | Type::Frag { shape, .. } => prod(shape),
            _ => 1.0,
        }
    }

    /// The global windows a value without a register layout reads where it is used: windows in
    /// it and in the `let` names it reads (not inside reductions, computed ahead).
    fn element_windows(&self, e: Handle<Expr>) -> Vec<Handle<Expr>> {
        self.value_windows(e, |t| matches!(t, Type::Global { .. }))
    }

    /// The windows of the kind `want` accepts that a value reads where it is used, through the
    /// `let` names it reads and not inside reductions (computed ahead), each once.
    fn value_windows(&self, e: Handle<Expr>, want: fn(&Type) -> bool) -> Vec<Handle<Expr>> {
        let m = self.m();
        let mut out = Vec::new();
        let mut stack = vec![e];
        while let Some(x) = stack.pop() {
            let ex = &m.exprs[x];
            match &ex.kind {
                ExprKind::Local(l) => {
                    if let Some(&v) = self.let_values.get(l) {
                        stack.push(v);
                    }
                    continue;
                }
                ExprKind::Call(c) if c.op.starts_with("reduce_") => continue,
                _ => {}
            }
            if want(&ex.ty) {
                if !out.contains(&x) {
                    out.push(x);
                }
                continue;
            }
            match &ex.kind {
                ExprKind::Unary(_, a) => stack.push(*a),
                ExprKind::Binary(_, a, b) => stack.extend([*a, *b]),
                ExprKind::Call(c) => stack.extend(c.args.iter().flatten().copied()),
                _ => {}
            }
        }
        out
    }

    /// Whether a value reads only global windows, constants, scalars and names of such values:
    /// no register fragment and no reduction.
    fn only_windows_and_scalars(&self, e: Handle<Expr>) -> bool {
        let m = self.m();
        let ex = &m.exprs[e];
        if matches!(ex.ty, Type::Global { .. } | Type::Scalar(_) | Type::Literal { .. } | Type::DTypeName(_)) {
            return true;
        }
        match &ex.kind {
            ExprKind::Local(l) => self.let_values.get(l).is_some_and(|&v| self.only_windows_and_scalars(v)),
            ExprKind::Call(c) if c.op.starts_with("reduce_") => false,
            ExprKind::Unary(_, a) => self.only_windows_and_scalars(*a),
            ExprKind::Binary(_, a, b) => self.only_windows_and_scalars(*a) && self.only_windows_and_scalars(*b),
            ExprKind::Call(c) => c.args.iter().flatten().all(|&a| self.only_windows_and_scalars(a)),
            _ => false,
        }
    }

    /// Elements per lane and step of the element loop that computes `value` over `elements`
    /// (into `dst`, a store's destination): the lowering's own choice, [`layout::element_vector`],
    /// over every window the value reads (global or shared) and the destination, split over a
    /// warp's lanes.
    fn element_vector(&self, elements: f64, value: Handle<Expr>, dst: Option<Handle<Expr>>) -> u32 {
        let mut windows = self.value_windows(value, |t| matches!(t, Type::Global { .. } | Type::Shared { .. }));
        windows.extend(dst);
        layout::element_vector(self.m(), elements as i64, 32, &windows)
    }

    /// Bytes of one lane's access to `window` in an element loop of `vector` elements per step.
    fn access_bytes(&self, window: Handle<Expr>, vector: u32) -> f64 {
        let size = self.m().exprs[window].ty.dtype().map_or(4, DType::size_bytes);
        (f64::from(vector) * size as f64).max(1.0)
    }

    /// The exposed memory latency of an element loop over `elements` that reads `windows` (from
    /// [`Walker::element_windows`]) to compute `value` (a row store into `dst`, or a row
    /// reduction, as lowered by `lower/window.rs`): a warp's lanes take `vector` elements each per
    /// step, and the steps the loop unrolls together ([`crate::lower::element_loop_unroll`], or
    /// the C compiler's own unrolling of a scalar loop, [`crate::lower::scalar_loop_unroll`])
    /// are in flight at once, so each group of steps waits for one memory round trip: to DRAM for
    /// a window no earlier loop read (`row_trip_latency_ns` and its share of the queue behind every
    /// resident tile's bytes, see `Work::row_trips`), to L1 or L2 for a re-read of the same row
    /// ([`Walker::l1_rereads`]). Copies of the loop made by unrolling the loops around it overlap
    /// their trips when each copy is one group of steps. An IEEE
    /// division in the value puts `div_latency_ns` per element on each lane's path and makes the
    /// steps serial (its slow-path branch keeps the compiler from hoisting later steps' loads).
    #[allow(clippy::too_many_arguments)]
    fn element_loop_latency(&mut self, windows: Vec<Handle<Expr>>, dst: Option<Handle<Expr>>, value: Handle<Expr>, elements: f64, vector: u32, mult: f64, dest: Dest) {
        if windows.is_empty() || elements <= 0.0 {
            return;
        }
        let divisions = self.float_divisions(value);
        let steps = (elements / (32.0 * f64::from(vector))).ceil().max(1.0);
        let unroll = if divisions > 0.0 {
            1
        } else if vector > 1 {
            crate::lower::element_loop_unroll(steps as i64, self.unrolled_copies as i64)
        } else {
            crate::lower::scalar_loop_unroll(steps as i64)
        } as f64;
        // The copies of this loop that unrolling the loops around it makes issue their loads
        // together (the compiler hoists them: rotary-embedding's 16 unrolled heads issue all
        // their loads before the first use), unless a division's branch keeps them apart.
        let copies = if divisions > 0.0 || steps > unroll { 1.0 } else { self.unrolled_copies.max(1.0) };
        let round_trips = (steps / unroll).ceil() / (self.compiler_unrolled * copies);
        // From DRAM: windows of this tile no earlier loop read. One the same for every tile (a
        // weight row) stays in L2 after the first tile.
        let from_dram: Vec<Handle<Expr>> =
            windows.iter().copied().filter(|&w| self.reread_footprint(w).is_none() && self.tile_mask(w) != 0).collect();
        let first_read = !from_dram.is_empty();
        // The stored window joins the DRAM queue too (its writes share the bandwidth).
        let bytes: f64 = from_dram.iter().chain(dst.iter()).map(|&w| self.window_bytes(w) * self.group_mult(w)).sum();
        let l2_trip = if self.l1_rereads(&windows).is_empty() { self.ctx.p(P::LoadLatencyNs) } else { self.ctx.p(P::L1HitLatencyNs) };
        for w in windows {
            let key = self.window_key(w);
            if !self.windows_read.contains_key(&key) {
                let mut vars = Vec::new();
                self.visit(w, &mut |k| {
                    if let ExprKind::Local(l) = k {
                        vars.push(*l);
                    }
                });
                let loops = self.loops.iter().filter(|(v, ..)| vars.contains(v)).map(|&(v, lo, hi)| (v, (hi - lo).max(1.0))).collect();
                self.windows_read.insert(key, (self.window_bytes(w) * self.group_mult(w), loops));
            }
        }
        let division_path = divisions * (elements / 32.0).ceil() * self.ctx.p(P::DivLatencyNs);
        let w = self.work(dest);
        w.latency_ns += mult * division_path;
        w.row_bytes += mult * bytes;
        if first_read {
            w.row_trips += mult * round_trips;
        } else {
            w.latency_ns += mult * round_trips * l2_trip;
        }
    }

    /// A window's structure as a key: the same row read by two statements (a softmax's passes,
    /// each with its own loop over the row's chunks) has one key. `let` names stand for their
    /// values, and the variable of an enclosing counted loop for its range, so the chunk `c` of
    /// one pass and the chunk `c` of the next over the same range match.
    fn window_key(&self, e: Handle<Expr>) -> String {
        let m = self.m();
        let key = |x: Handle<Expr>| self.window_key(x);
        match &m.exprs[e].kind {
            ExprKind::Local(l) => match (self.let_values.get(l), self.loops.iter().find(|(v, ..)| v == l)) {
                (Some(&v), _) => key(v),
                (None, Some((_, lo, hi))) => format!("loop[{lo},{hi})"),
                (None, None) => format!("local{}", l.index()),
            },
            ExprKind::Field { base, field } => format!("{}.{field:?}", key(*base)),
            ExprKind::Index { base, items } => {
                let items: Vec<String> = items
                    .iter()
                    .map(|i| match i {
                        IndexItem::At(x) => key(*x),
                        IndexItem::Window { start, len } => format!("{}:+{len}", key(*start)),
                        IndexItem::Full => ":".into(),
                    })
                    .collect();
                format!("{}[{}]", key(*base), items.join(","))
            }
            ExprKind::Call(c) => format!("{}({})", c.op, c.args.iter().map(|a| a.map_or_else(|| "_".into(), key)).collect::<Vec<_>>().join(",")),
            ExprKind::Unary(op, a) => format!("({op:?} {})", key(*a)),
            ExprKind::Binary(op, a, b) => format!("({op:?} {} {})", key(*a), key(*b)),
            k => format!("{k:?}"),
        }
    }

    /// Bytes per block a re-read of `window` needs L1 to hold since an earlier element loop
    /// read it: the window times the iterations of that loop's enclosing loops over its
    /// variables which have ended since (the chunks of a row's first pass). `None`: not read
    /// before.
    fn reread_footprint(&self, window: Handle<Expr>) -> Option<f64> {
        let (bytes, loops) = self.windows_read.get(&self.window_key(window))?;
        let ended: f64 = loops.iter().filter(|(v, _)| !self.loops.iter().any(|(x, ..)| x == v)).map(|(_, t)| t).product();
        Some(bytes * ended)
    }

    /// The windows of an element loop it re-reads from L1: all of its re-reads when they, with
    /// the windows it reads for the first time (streamed through L1 beside them), fit in the L1
    /// beside the block's shared memory; none otherwise (they come from L2).
    fn l1_rereads(&self, windows: &[Handle<Expr>]) -> Vec<Handle<Expr>> {
        let mut held = 0.0;
        let mut rereads = Vec::new();
        for &w in windows {
            match self.reread_footprint(w) {
                Some(f) => {
                    held += f;
                    rereads.push(w);
                }
                None => held += self.window_bytes(w) * self.group_mult(w),
            }
        }
        let room = self.ctx.p(P::L1BytesPerSm) - self.ctx.layout.smem_bytes as f64;
        if held <= room { rereads } else { Vec::new() }
    }

    /// Floating-point divisions per element of a value computed element by element (through the
    /// `let` names it reads, not inside reductions, which are computed ahead).
    fn float_divisions(&self, e: Handle<Expr>) -> f64 {
        let m = self.m();
        let ex = &m.exprs[e];
        match &ex.kind {
            ExprKind::Local(l) => self.let_values.get(l).map_or(0.0, |&v| self.float_divisions(v)),
            ExprKind::Call(c) if c.op.starts_with("reduce_") => 0.0,
            ExprKind::Binary(op, a, b) => {
                // A division of scalars (`reduce_sum(x) / C`) is computed once, not per element.
                let per_element = matches!(ex.ty, Type::Frag { .. } | Type::Global { .. } | Type::Shared { .. });
                let own = f64::from(u8::from(*op == BinOp::Div && per_element && ex.ty.dtype().is_some_and(DType::is_float)));
                own + self.float_divisions(*a) + self.float_divisions(*b)
            }
            ExprKind::Unary(_, a) => self.float_divisions(*a),
            ExprKind::Call(c) => c.args.iter().flatten().map(|&a| self.float_divisions(a)).sum(),
            _ => 0.0,
        }
    }

    /// The serial path of a shared → shared element loop (`store(out_s[j, :], in_s[s, :, j])`,
    /// lowered by `lower/window.rs` round-robin over the role's threads): each execution waits for
    /// its shared loads before it stores (one dependent step; the unrolled elements of one thread
    /// overlap), and a warp access whose lanes hit different words of one bank is replayed once
    /// per extra word (the worst window of the statement, per element of a thread).
    fn shared_element_loop(&mut self, dst: Handle<Expr>, src: Handle<Expr>, mult: f64, dest: Dest) {
        let elements = self.window_elements(dst);
        let threads = f64::from(self.role.threads().max(1));
        let per_thread = (elements / threads).ceil().max(1.0);
        let lanes = elements.min(32.0) as u64;
        let mut windows = vec![dst];
        windows.extend(self.value_windows(src, |t| matches!(t, Type::Shared { .. })));
        let ways = windows.iter().map(|&w| self.smem_conflict_ways(w, lanes)).max().unwrap_or(1);
        let step = self.ctx.p(P::SmemElementStepNs);
        let replay = if ways > 1 { self.ctx.p(P::SmemConflictReplayNs) * (ways - 1) as f64 * per_thread } else { 0.0 };
        self.work(dest).latency_ns += mult * (step + replay);
    }

    /// Bank-conflict ways of one warp access to a shared window whose consecutive elements lie
    /// `stride` bytes apart ([`layout::smem_lane_stride`]), `lanes` lanes active: lanes whose
    /// words differ but share a bank are served one after another. Swizzled or unknown strides
    /// count as conflict-free.
    fn smem_conflict_ways(&self, window: Handle<Expr>, lanes: u64) -> u64 {
        let banks = u64::from(self.ctx.target.smem_banks.max(1));
        let bank_bytes = u64::from(self.ctx.target.smem_bank_bytes.max(1));
        let Some(stride) = layout::smem_lane_stride(self.m(), window) else { return 1 };
        if stride < bank_bytes || lanes <= 1 {
            return 1;
        }
        // Lanes i and i + banks / gcd(words, banks) hit the same bank: gcd(words, banks) words
        // of one bank among the warp's lanes, at most one per lane.
        let words = stride / bank_bytes;
        let g = layout::gcd(words as i64, banks as i64).max(1) as u64;
        g.min(lanes)
    }

    /// Whether a scalar expression itself (not through `let` names, walked where they are bound)
    /// reduces a row: `reduce_max(abs(x), axis=0) / 448.0` reads the row, a scalar like it does not.
    fn holds_reduction(&self, e: Handle<Expr>) -> bool {
        match &self.m().exprs[e].kind {
            ExprKind::Call(c) => c.op.starts_with("reduce_") || c.args.iter().flatten().any(|&a| self.holds_reduction(a)),
            ExprKind::Unary(_, a) => self.holds_reduction(*a),
            ExprKind::Binary(_, a, b) => self.holds_reduction(*a) || self.holds_reduction(*b),
            _ => false,
        }
    }

    fn visit(&self, e: Handle<Expr>, f: &mut dyn FnMut(&ExprKind)) {
        let m = self.m();
        let k = &m.exprs[e].kind;
        f(k);
        match k {
            // A `let` name stands for its value: a window indexed by `let r = t.r * 8 + w.warp`
            // depends on the tile axis and the warp as the value does.
            ExprKind::Local(l) => {
                if let Some(&v) = self.let_values.get(l) {
                    self.visit(v, f);
                }
            }
            ExprKind::Field { base, .. } => self.visit(*base, f),
            ExprKind::Index { base, items } => {
                self.visit(*base, f);
                for it in items {
                    match it {
                        IndexItem::At(x) => self.visit(*x, f),
                        IndexItem::Window { start, .. } => self.visit(*start, f),
                        IndexItem::Full => {}
                    }
                }
            }
            ExprKind::Call(c) => {
                for &a in c.args.iter().flatten() {
                    self.visit(a, f);
                }
            }
            ExprKind::Unary(_, a) => self.visit(*a, f),
            ExprKind::Binary(_, a, b) => {
                self.visit(*a, f);
                self.visit(*b, f);
            }
            _ => {}
        }
    }

    // ---- static evaluation ---------------------------------------------------------------

    /// Evaluate an integer/boolean expression with dims, loop variables at their mean values and
    /// tile indices at the mean of their axis.
    fn eval(&self, e: Handle<Expr>) -> Option<f64> {
        let m = self.m();
        Some(match &m.exprs[e].kind {
            ExprKind::Int(i) => *i as f64,
            ExprKind::Float(s) => s.parse().ok()?,
            ExprKind::Bool(b) => f64::from(u8::from(*b)),
            ExprKind::Dim(d) => *self.ctx.dims.get(d.index())? as f64,
            ExprKind::Local(l) => *self.env.get(l)?,
            ExprKind::Field { field: Field::TileAxis(i), .. } => {
                (*self.ctx.tile_extents.get(*i)? as f64 - 1.0).max(0.0) / 2.0
            }
            ExprKind::Field { field: Field::Warpgroup, .. } => (f64::from(self.role.threads()) / 128.0 - 1.0).max(0.0) / 2.0,
            ExprKind::Field { field: Field::Warp, .. } => (f64::from(self.role.threads()) / 32.0 - 1.0).max(0.0) / 2.0,
            ExprKind::Unary(UnOp::Neg, a) => -self.eval(*a)?,
            ExprKind::Unary(UnOp::Not, a) => f64::from(u8::from(self.eval(*a)? == 0.0)),
            ExprKind::Binary(op, a, b) => {
                let (x, y) = (self.eval(*a)?, self.eval(*b)?);
                let int = x.fract() == 0.0 && y.fract() == 0.0;
                let t = |c: bool| f64::from(u8::from(c));
                match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div if y == 0.0 => return None,
                    BinOp::Div if int => (x / y).trunc(),
                    BinOp::Div => x / y,
                    BinOp::Rem if y == 0.0 => return None,
                    BinOp::Rem => x % y,
                    BinOp::Shl => x * 2f64.powf(y),
                    BinOp::Shr => (x / 2f64.powf(y)).floor(),
                    BinOp::Lt => t(x < y),
                    BinOp::Le => t(x <= y),
                    BinOp::Gt => t(x > y),
                    BinOp::Ge => t(x >= y),
                    BinOp::Eq => t(x == y),
                    BinOp::Ne => t(x != y),
                    BinOp::And => t(x != 0.0 && y != 0.0),
                    BinOp::Or => t(x != 0.0 || y != 0.0),
                }
            }
            // A loop bound clamped by `max` / `min` (a sliding window's first key tile): at the
            // mean tile, like the rest.
            ExprKind::Call(c) if matches!(c.op.as_str(), "min" | "max") && c.args.len() == 2 => {
                let (x, y) = (self.eval(c.args[0]?)?, self.eval(c.args[1]?)?);
                if c.op == "min" {
                    x.min(y)
                } else {
                    x.max(y)
                }
            }
            _ => return None,
        })
    }

    /// Fraction of executions in which `cond` holds: exact over the innermost enclosing loop
    /// variable it mentions (enumerated, up to 2^16 values), else its static value, else ½.
    fn probability(&mut self, cond: Handle<Expr>) -> f64 {
        let mut vars = Vec::new();
        self.visit(cond, &mut |k| {
            if let ExprKind::Local(l) = k {
                vars.push(*l);
            }
        });
        let innermost = self.loops.iter().rev().find(|(v, _, _)| vars.contains(v)).copied();
        if let Some((var, lo, hi)) = innermost {
            let n = (hi - lo).max(0.0);
            if (1.0..=65536.0).contains(&n) {
                let saved = self.env.get(&var).copied();
                let mut hits = 0.0;
                let mut known = true;
                for i in 0..n as u64 {
                    self.env.insert(var, lo + i as f64);
                    match self.eval(cond) {
                        Some(v) if v != 0.0 => hits += 1.0,
                        Some(_) => {}
                        None => {
                            known = false;
                            break;
                        }
                    }
                }
                if let Some(s) = saved {
                    self.env.insert(var, s);
                }
                if known {
                    return hits / n;
                }
            }
        } else if let Some(v) = self.eval(cond) {
            return if v != 0.0 { 1.0 } else { 0.0 };
        }
        self.ctx.note("a condition could not be evaluated statically: each branch is weighted ½".to_string());
        0.5
    }
}
