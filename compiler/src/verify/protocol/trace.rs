//! Unrolling one role's body into a trace of protocol events under one concrete binding of the
//! dims (and a number of tiles per block). Loops run their concrete trip counts; an `if` whose
//! condition is known takes its branch. The role-local protocol state (a pipeline's stage and
//! phase counters, a barrier's per-role wait counter) is advanced here, because `P.stage` and the
//! derived parities depend only on the role's own history.
//!
//! What cannot be decided — a data-dependent `if` around protocol ops, a loop bound that is not
//! known, an op whose effects are not modelled, a stage index that cannot be evaluated — becomes
//! a coverage-limit finding, and the trace stops there (`complete = false`): everything before
//! is exact, nothing after is guessed.

use std::collections::HashMap;

use crate::catalog::{EffectAccess, OpDef, ParamKind, Proxy};
use crate::diag::{Diagnostic, Severity};
use crate::ir::*;

use super::code;
use super::eval::{eval, Env, Val, Why};
use super::model::{BufKey, Model, PipeKind, SyncObj};

/// One concrete binding of the dims.
#[derive(Clone, Debug)]
pub struct Binding {
    pub dims: Vec<i64>,
    /// Tiles one block walks (1 without `persistent`).
    pub tiles: u32,
}

impl Binding {
    pub fn describe(&self, m: &Module) -> String {
        let mut parts: Vec<String> = m.dims.iter().zip(&self.dims).map(|((_, d), v)| format!("{} = {v}", d.name)).collect();
        parts.push(format!("{} tile(s) per block", self.tiles));
        parts.join(", ")
    }
}

/// Bindings that satisfy every `multiple_of`, make each quotient by a constant exact, and give
/// loops over dims more trips than any pipeline or barrier has stages (so stage indices wrap
/// around and parities flip). Dims get different factors so that unrelated trip counts differ.
pub fn bindings(model: &Model) -> Vec<Binding> {
    let m = model.m;
    let ndims = m.dims.len();
    let mut base: Vec<i64> = m.dims.iter().map(|(_, d)| d.multiple_of.filter(|v| *v > 0).unwrap_or(1)).collect();
    // Divisors applied to expressions that mention a dim.
    for (h, e) in m.exprs.iter() {
        if let ExprKind::Binary(crate::syntax::ast::BinOp::Div | crate::syntax::ast::BinOp::Rem, a, b) = &e.kind {
            if let ExprKind::Int(c) = m.exprs[*b].kind {
                if c > 0 && c <= 1 << 16 {
                    let mut dims = Vec::new();
                    mentioned_dims(m, *a, &mut dims, 0);
                    for d in dims {
                        if let Some(v) = base.get_mut(d) {
                            *v = lcm_capped(*v, c);
                        }
                    }
                }
            }
        }
        let _ = h;
    }
    let mut sizes: Vec<&Size> = Vec::new();
    for (_, t) in m.tensors.iter() {
        sizes.extend(t.shape.iter());
    }
    if let Some(g) = m.grid() {
        sizes.extend(g.axes.iter().map(|a| &a.extent));
    }
    for s in sizes {
        size_divisors(s, &mut base);
    }
    let smax = model
        .m
        .pipelines
        .iter()
        .map(|(_, p)| p.stages)
        .chain(m.barriers.iter().map(|(_, b)| b.stages))
        .chain(m.smem.iter().map(|(_, s)| s.stages))
        .max()
        .unwrap_or(1)
        .clamp(2, 64) as i64;
    let t1 = if model.persistent { 3 } else { 1 };
    let t2 = if model.persistent { 2 } else { 1 };
    let b1 = Binding { dims: (0..ndims).map(|i| base[i].saturating_mul(2 * smax + 1 + i as i64)).collect(), tiles: t1 };
    let b2 = Binding { dims: (0..ndims).map(|i| base[i].saturating_mul(smax + 1 + 2 * i as i64)).collect(), tiles: t2 };
    vec![b1, b2]
}

fn lcm_capped(a: i64, b: i64) -> i64 {
    let g = {
        let (mut x, mut y) = (a.abs(), b.abs());
        while y != 0 {
            let t = x % y;
            x = y;
            y = t;
        }
        x.max(1)
    };
    let l = (a / g).saturating_mul(b);
    if l > 1 << 16 {
        a
    } else {
        l
    }
}

fn size_divisors(s: &Size, base: &mut [i64]) {
    if let Size::Bin(op, a, b) = s {
        if *op == SizeOp::Div {
            if let Size::Const(c) = **b {
                if c > 0 {
                    for d in a.dims() {
                        if let Some(v) = base.get_mut(d.index()) {
                            *v = lcm_capped(*v, c);
                        }
                    }
                }
            }
        }
        size_divisors(a, base);
        size_divisors(b, base);
    }
}

fn mentioned_dims(m: &Module, e: Handle<Expr>, out: &mut Vec<usize>, depth: u32) {
    if depth > 100 {
        return;
    }
    match &m.exprs[e].kind {
        ExprKind::Dim(d) => out.push(d.index()),
        ExprKind::Binary(_, a, b) => {
            mentioned_dims(m, *a, out, depth + 1);
            mentioned_dims(m, *b, out, depth + 1);
        }
        ExprKind::Unary(_, a) => mentioned_dims(m, *a, out, depth + 1),
        _ => {}
    }
}

fn grid_extents(model: &Model, b: &Binding) -> Vec<i64> {
    model.m.grid().map(|g| g.axes.iter().map(|a| a.extent.eval(&b.dims).unwrap_or(1).max(1)).collect()).unwrap_or_default()
}

/// How many tiles one block walks under a binding (the persistent loop's trip count).
pub fn tiles_walked(model: &Model, b: &Binding) -> i64 {
    let total: i64 = grid_extents(model, b).iter().copied().fold(1i64, |a, x| a.saturating_mul(x));
    i64::from(b.tiles).min(total.max(1))
}

/// Which stage(s) of a region an access touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StageSel {
    One(u32),
    All,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufSel {
    pub smem: Handle<SmemDecl>,
    pub stage: StageSel,
    /// The access is split by warp identity (each warp touches its own part).
    pub private: bool,
    /// The stage is selected by `P.stage` of a pipeline.
    pub by_pipe_stage: bool,
}

impl BufSel {
    pub fn keys(&self, model: &Model) -> Vec<BufKey> {
        match self.stage {
            StageSel::One(s) => vec![(self.smem, s)],
            StageSel::All => (0..model.slots(self.smem)).map(|s| (self.smem, s)).collect(),
        }
    }
}

/// How an asynchronous data access completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccKind {
    /// Synchronous (ld/st.shared, ldmatrix, stmatrix, reads inside expressions).
    Plain,
    /// Read by a wgmma; complete when a wgmma_wait covers its commit group.
    Wgmma,
    /// Written by cp.async; complete when cp_async_wait covers its group.
    CpAsync,
    /// Read by a TMA store; complete when tma_store_wait covers it.
    BulkStore,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Credit {
    /// A pipeline's full barrier, of the stage the producer holds (None: no stage held).
    Pipe { p: Handle<PipelineDecl>, stage: Option<u32> },
    /// An explicit barrier stage (an object index).
    Bar { obj: usize },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Ek {
    Acquire { p: Handle<PipelineDecl>, stage: u32, round: u32, tx: u64 },
    PWait { p: Handle<PipelineDecl>, stage: u32, round: u32 },
    /// `stage`: the oldest stage held (None: the role holds none).
    Release { p: Handle<PipelineDecl>, stage: Option<u32> },
    Arrive { obj: usize, arrivals: u32, tx: Option<u64> },
    /// `k`: how many times this role waited on this object before.
    BWait { obj: usize, parity: u8, derived: bool, k: u32 },
    Tma { dst: Option<BufSel>, bytes: u64, credit: Credit },
    Access { buf: BufSel, write: bool, proxy: Proxy, kind: AccKind },
    FragUse { local: Handle<Local>, write: bool },
    WgmmaIssue { acc: Option<Handle<Local>> },
    WgmmaCommit,
    WgmmaWait(u32),
    CpCommit,
    CpWait(u32),
    BulkWait(u32),
    Fence,
    /// `sync()`: every role of the block.
    Sync,
    /// `cluster_sync()`: every non-exited thread of the block (and of its cluster peers).
    ClusterSync,
    SyncRole,
}

impl Ek {
    /// The object a synchronizing event arrives on (for deadlock explanations).
    pub fn arrives_on(&self, model: &Model) -> Option<usize> {
        match self {
            Ek::Acquire { p, stage, .. } => model.obj(SyncObj::Full(*p, *stage)),
            Ek::Release { p, stage: Some(s) } => model.obj(SyncObj::Empty(*p, *s)),
            Ek::Arrive { obj, .. } => Some(*obj),
            Ek::Tma { credit: Credit::Pipe { p, stage: Some(s) }, .. } => model.obj(SyncObj::Full(*p, *s)),
            Ek::Tma { credit: Credit::Bar { obj }, .. } => Some(*obj),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Ev {
    pub kind: Ek,
    pub stmt: Handle<Stmt>,
}

#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub events: Vec<Ev>,
    /// False when the trace stopped at something the analysis cannot decide.
    pub complete: bool,
}

const MAX_EVENTS: usize = 300_000;
const MAX_STEPS: u64 = 3_000_000;

struct Gen<'a, 'm> {
    model: &'a Model<'m>,
    role: Handle<RoleDecl>,
    binding: &'a Binding,
    env: Env,
    events: Vec<Ev>,
    stopped: bool,
    steps: u64,
    cov: &'a mut Vec<Diagnostic>,
    // role-local protocol counters
    acquires: HashMap<Handle<PipelineDecl>, u32>,
    prod_stage: HashMap<Handle<PipelineDecl>, u32>,
    waits: HashMap<Handle<PipelineDecl>, u32>,
    held: HashMap<Handle<PipelineDecl>, std::collections::VecDeque<u32>>,
    cons_stage: HashMap<Handle<PipelineDecl>, u32>,
    last_acquire: HashMap<Handle<PipelineDecl>, usize>,
    bar_waits: HashMap<usize, u32>,
}

/// Generate the trace of one actor under one binding. Coverage limits go to `cov`.
pub fn generate(model: &Model, actor: usize, binding: &Binding, cov: &mut Vec<Diagnostic>) -> Trace {
    let (Some(role), Some(body)) = (model.actors.get(actor).copied(), model.body(actor)) else {
        return Trace { events: Vec::new(), complete: true };
    };
    let mut g = Gen {
        model,
        role,
        binding,
        env: Env { dims: binding.dims.clone(), ..Env::default() },
        events: Vec::new(),
        stopped: false,
        steps: 0,
        cov,
        acquires: HashMap::new(),
        prod_stage: HashMap::new(),
        waits: HashMap::new(),
        held: HashMap::new(),
        cons_stage: HashMap::new(),
        last_acquire: HashMap::new(),
        bar_waits: HashMap::new(),
    };
    g.block(body);
    Trace { events: g.events, complete: !g.stopped }
}

impl Gen<'_, '_> {
    fn m(&self) -> &Module {
        self.model.m
    }

    fn limit(&mut self, code: &str, stmt: Handle<Stmt>, message: String, help: &str) {
        let span = self.model.stmt_span(stmt);
        let role = self.model.role_name(self.role).to_string();
        let d = Diagnostic::error(code, message, span, "the protocol analysis stops here")
            .with_severity(Severity::CoverageLimit)
            .with_secondary(self.model.role_span(self.role), format!("in role `{role}`"))
            .with_note(format!("binding: {}", self.binding.describe(self.m())))
            .with_help(help.to_string());
        self.cov.push(d);
    }

    fn stop(&mut self, code: &str, stmt: Handle<Stmt>, message: String, help: &str) {
        self.limit(code, stmt, message, help);
        self.stopped = true;
    }

    fn push(&mut self, kind: Ek, stmt: Handle<Stmt>) {
        if self.stopped {
            return;
        }
        if self.events.len() >= MAX_EVENTS {
            let role = self.model.role_name(self.role).to_string();
            self.stop(
                code::SIM_LIMIT,
                stmt,
                format!("role `{role}` produces more than {MAX_EVENTS} protocol events under this binding; the analysis stops"),
                "the protocol analysis unrolls loops concretely; very long loops over small constants are not summarised",
            );
            return;
        }
        self.events.push(Ev { kind, stmt });
    }

    fn block(&mut self, b: &Block) {
        for s in &b.stmts {
            if self.stopped {
                return;
            }
            self.stmt(*s);
        }
    }

    fn stmt(&mut self, h: Handle<Stmt>) {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            let role = self.model.role_name(self.role).to_string();
            self.stop(
                code::SIM_LIMIT,
                h,
                format!("role `{role}` executes more than {MAX_STEPS} statements under this binding; the analysis stops"),
                "the protocol analysis unrolls loops concretely",
            );
            return;
        }
        let m = self.model.m;
        match &m.stmts[h] {
            Stmt::Reg(_) => {}
            Stmt::Let { local, value } => {
                self.reads(*value, h);
                if let Val::Int(v) = eval(m, &self.env, *value) {
                    self.env.ints.insert(*local, v);
                }
            }
            Stmt::Assign { target, value } => {
                self.reads(*value, h);
                let mut base = *target;
                while let ExprKind::Index { base: b, items } = &m.exprs[base].kind {
                    for it in items.clone() {
                        self.index_reads(&it, h);
                    }
                    base = *b;
                }
                if let ExprKind::Local(l) = m.exprs[base].kind {
                    if m.locals[l].kind == LocalKind::Reg {
                        self.push(Ek::FragUse { local: l, write: true }, h);
                    }
                }
            }
            Stmt::Op(call) => self.op(call, h),
            Stmt::For { var, lo, hi, body, .. } => {
                let (l, u) = (eval(m, &self.env, *lo), eval(m, &self.env, *hi));
                let (Val::Int(l), Val::Int(u)) = (l, u) else {
                    let bound = if l.int().is_none() { *lo } else { *hi };
                    self.stop(
                        code::UNBOUND_TRIP,
                        h,
                        format!("the trip count of this loop (`{}`) is not known at compile time", super::eval::show(m, bound)),
                        "loop bounds over dims, constants, loop variables and tile coordinates are simulated; bounds from scalars or memory are not",
                    );
                    return;
                };
                let mut i = l;
                while i < u {
                    if self.stopped {
                        break;
                    }
                    self.steps += 1;
                    if self.steps > MAX_STEPS {
                        let role = self.model.role_name(self.role).to_string();
                        self.stop(
                            code::SIM_LIMIT,
                            h,
                            format!("role `{role}` runs more than {MAX_STEPS} loop iterations and statements under this binding; the analysis stops"),
                            "the protocol analysis unrolls loops concretely",
                        );
                        break;
                    }
                    self.env.ints.insert(*var, i);
                    self.block(body);
                    i += 1;
                }
                self.env.ints.remove(var);
            }
            Stmt::ForTiles { var, body } => {
                let extents = grid_extents(self.model, self.binding);
                let n = tiles_walked(self.model, self.binding);
                for j in 0..n {
                    if self.stopped {
                        break;
                    }
                    // Row-major over the axes, last axis fastest.
                    let mut coords = vec![0i64; extents.len()];
                    let mut rest = j;
                    for (i, e) in extents.iter().enumerate().rev() {
                        coords[i] = rest % e;
                        rest /= e;
                    }
                    self.env.tiles.insert(*var, coords);
                    self.block(body);
                }
                self.env.tiles.remove(var);
            }
            Stmt::If { cond, then_block, else_block } => match eval(m, &self.env, *cond) {
                Val::Bool(true) => self.block(then_block),
                Val::Bool(false) => {
                    if let Some(e) = else_block {
                        self.block(e);
                    }
                }
                v => {
                    let relevant = self.block_has_protocol(then_block) || else_block.as_ref().is_some_and(|e| self.block_has_protocol(e));
                    if relevant {
                        let why = match v {
                            Val::Unknown(Why::Warp) => "depends on which warp executes it",
                            _ => "depends on run-time data",
                        };
                        self.stop(
                            code::DATA_DEPENDENT,
                            h,
                            format!("this condition (`{}`) {why}, and its branches contain barrier, pipeline or async-group operations", super::eval::show(m, *cond)),
                            "the analysis cannot know which branch runs; make the condition a function of dims, loop variables and tile coordinates, or move the synchronization out of the branch",
                        );
                    } else {
                        // No synchronization inside: both branches' memory and fragment uses are
                        // taken (an over-approximation that is safe for the local checks).
                        self.block(then_block);
                        if let Some(e) = else_block {
                            self.block(e);
                        }
                    }
                }
            },
        }
    }

    /// Whether a block contains an op with a synchronization or asynchronous effect.
    fn block_has_protocol(&self, b: &Block) -> bool {
        let m = self.model.m;
        b.stmts.iter().any(|s| match &m.stmts[*s] {
            Stmt::Op(call) => self.model.cat.get(&call.op).is_none_or(|d| {
                d.effects.iter().any(|e| e.is_async || !e.access.is_data())
            }),
            Stmt::For { body, .. } | Stmt::ForTiles { body, .. } => self.block_has_protocol(body),
            Stmt::If { then_block, else_block, .. } => {
                self.block_has_protocol(then_block) || else_block.as_ref().is_some_and(|e| self.block_has_protocol(e))
            }
            _ => false,
        })
    }

    /// Reads inside an expression: shared-memory windows and register fragments.
    fn reads(&mut self, e: Handle<Expr>, stmt: Handle<Stmt>) {
        self.reads_depth(e, stmt, 0)
    }

    fn reads_depth(&mut self, e: Handle<Expr>, stmt: Handle<Stmt>, depth: u32) {
        if depth > 100 || self.stopped {
            return;
        }
        let m = self.model.m;
        match &m.exprs[e].kind {
            ExprKind::Local(l) if m.locals[*l].kind == LocalKind::Reg => {
                self.push(Ek::FragUse { local: *l, write: false }, stmt);
            }
            ExprKind::Smem(_) | ExprKind::View(_) => {
                if let Some(buf) = self.buf(e, stmt) {
                    self.push(Ek::Access { buf, write: false, proxy: Proxy::Generic, kind: AccKind::Plain }, stmt);
                }
            }
            ExprKind::Index { base, items } => {
                let items = items.clone();
                for it in &items {
                    self.index_reads(it, stmt);
                }
                if self.model.smem_base(e).is_some() {
                    if let Some(buf) = self.buf(e, stmt) {
                        self.push(Ek::Access { buf, write: false, proxy: Proxy::Generic, kind: AccKind::Plain }, stmt);
                    }
                } else {
                    // A fragment or global window: only the fragment itself is a use.
                    let mut b = *base;
                    while let ExprKind::Index { base: bb, items } = &m.exprs[b].kind {
                        for it in items.clone() {
                            self.index_reads(&it, stmt);
                        }
                        b = *bb;
                    }
                    self.reads_depth(b, stmt, depth + 1);
                }
            }
            ExprKind::Call(c) => {
                let unmodelled = self.model.cat.get(&c.op).is_none_or(|d| d.effects.iter().any(|e| !e.access.is_data() || e.is_async));
                if unmodelled {
                    let op = c.op.clone();
                    self.limit(
                        code::UNMODELLED_OP,
                        stmt,
                        format!("expression op `{op}` has synchronization or asynchronous effects the protocol analysis does not model"),
                        "its effects are ignored by the protocol analysis",
                    );
                }
                for a in c.args.clone().into_iter().flatten() {
                    self.reads_depth(a, stmt, depth + 1);
                }
            }
            ExprKind::Unary(_, a) => self.reads_depth(*a, stmt, depth + 1),
            ExprKind::Binary(_, a, b) => {
                self.reads_depth(*a, stmt, depth + 1);
                self.reads_depth(*b, stmt, depth + 1);
            }
            ExprKind::Field { .. } => {}
            _ => {}
        }
    }

    fn index_reads(&mut self, it: &IndexItem, stmt: Handle<Stmt>) {
        match it {
            IndexItem::At(x) => self.reads(*x, stmt),
            IndexItem::Window { start, .. } => self.reads(*start, stmt),
            IndexItem::Full => {}
        }
    }

    /// Resolve a shared-memory expression to its region and stage.
    fn buf(&mut self, e: Handle<Expr>, stmt: Handle<Stmt>) -> Option<BufSel> {
        let m = self.model.m;
        // Walk to the base, remembering the index applied directly to it.
        let mut cur = e;
        let mut first_items: Option<Vec<IndexItem>> = None;
        let mut private = false;
        for _ in 0..64 {
            match &m.exprs[cur].kind {
                ExprKind::Index { base, items } => {
                    for it in items {
                        let x = match it {
                            IndexItem::At(x) => Some(*x),
                            IndexItem::Window { start, .. } => Some(*start),
                            IndexItem::Full => None,
                        };
                        if let Some(x) = x {
                            if eval(m, &self.env, x) == Val::Unknown(Why::Warp) {
                                private = true;
                            }
                        }
                    }
                    first_items = Some(items.clone());
                    cur = *base;
                }
                _ => break,
            }
        }
        let first = first_items.as_ref().and_then(|v| v.first().cloned());
        let by_pipe_stage = matches!(&first, Some(IndexItem::At(x)) if matches!(&m.exprs[*x].kind, ExprKind::Field { field: Field::Stage, .. }));
        let (smem, stage) = match &m.exprs[cur].kind {
            ExprKind::Smem(s) => {
                let d = &m.smem[*s];
                let slots = self.model.slots(*s);
                if slots <= 1 {
                    (*s, StageSel::One(0))
                } else {
                    let staged = d.stages > 1;
                    match first {
                        None | Some(IndexItem::Full) | Some(IndexItem::Window { .. }) => (*s, StageSel::All),
                        Some(IndexItem::At(x)) => match eval(m, &self.env, x) {
                            Val::Int(v) if v >= 0 && v < i64::from(slots) => (*s, StageSel::One(v as u32)),
                            Val::Int(v) => {
                                let name = d.name.clone();
                                self.limit(
                                    code::UNRESOLVED_INDEX,
                                    stmt,
                                    if staged {
                                        format!("stage index {v} of `{name}` is outside its {slots} stages")
                                    } else {
                                        format!("index {v} of `{name}` is outside its leading dimension of {slots}")
                                    },
                                    "index a staged region with a value in 0..stages (usually `P.stage`)",
                                );
                                return None;
                            }
                            Val::Unknown(Why::Warp) => (*s, StageSel::All),
                            Val::Unknown(Why::NoStage) => return None,
                            _ if !staged => (*s, StageSel::All),
                            _ => {
                                let name = d.name.clone();
                                let shown = super::eval::show(m, x);
                                self.limit(
                                    code::UNRESOLVED_INDEX,
                                    stmt,
                                    format!("the stage of `{name}` this statement touches (`{shown}`) cannot be evaluated"),
                                    "the access is left out of the protocol analysis; index stages with `P.stage`, loop variables or constants",
                                );
                                return None;
                            }
                        },
                    }
                }
            }
            ExprKind::View(v) => {
                let vd = &m.views[*v];
                let region = &m.smem[vd.region];
                let slots = self.model.slots(vd.region);
                if slots <= 1 {
                    (vd.region, StageSel::One(0))
                } else {
                    let sb = (region.total_bytes() / u64::from(slots)).max(1);
                    let st = u64::try_from(vd.offset).unwrap_or(0) / sb;
                    (vd.region, StageSel::One((st as u32).min(slots - 1)))
                }
            }
            _ => return None,
        };
        Some(BufSel { smem, stage, private, by_pipe_stage })
    }

    fn sync_ref(&mut self, e: Handle<Expr>, stmt: Handle<Stmt>) -> Option<SyncRef> {
        let m = self.model.m;
        match &m.exprs[e].kind {
            ExprKind::Pipeline(p) => Some(SyncRef::Pipe(*p)),
            ExprKind::Barrier(b) => {
                let d = &m.barriers[*b];
                if d.stages <= 1 {
                    self.model.obj(SyncObj::Bar(*b, 0)).map(SyncRef::Bar)
                } else {
                    let name = d.name.clone();
                    self.stop(
                        code::UNRESOLVED_INDEX,
                        stmt,
                        format!("barrier `{name}` has {} stages but is used without an index", d.stages),
                        "index a barrier array: `name[i]`",
                    );
                    None
                }
            }
            ExprKind::Index { base, items } => {
                let ExprKind::Barrier(b) = m.exprs[*base].kind else { return None };
                let d = &m.barriers[b];
                let Some(IndexItem::At(x)) = items.first() else { return None };
                match eval(m, &self.env, *x) {
                    Val::Int(v) if v >= 0 && v < i64::from(d.stages) => self.model.obj(SyncObj::Bar(b, v as u32)).map(SyncRef::Bar),
                    v => {
                        let name = d.name.clone();
                        let shown = super::eval::show(m, *x);
                        let what = match v {
                            Val::Int(v) => format!("index {v} of barrier `{name}` is outside its {} stages", d.stages),
                            _ => format!("the index of barrier `{name}` (`{shown}`) cannot be evaluated"),
                        };
                        self.stop(code::UNRESOLVED_INDEX, stmt, what, "index barrier arrays with loop variables, constants or `P.stage`");
                        None
                    }
                }
            }
            _ => None,
        }
    }

    fn op(&mut self, call: &OpCall, h: Handle<Stmt>) {
        let model = self.model;
        let m = model.m;
        let Some(def) = model.cat.get(&call.op) else {
            let op = call.op.clone();
            self.stop(code::UNMODELLED_OP, h, format!("op `{op}` is not in the catalog the analysis was built with"), "the analysis cannot know its effects");
            return;
        };
        let arg = |i: usize| call.args.get(i).copied().flatten();
        let mut waits: Vec<Ek> = Vec::new();
        let mut after: Vec<Ek> = Vec::new();
        let mut accesses: Vec<Ek> = Vec::new();
        let mut tma_credit: Option<Credit> = None;
        let mut unmodelled: Vec<String> = Vec::new();

        // Synchronization params.
        for (i, param) in def.params.iter().enumerate() {
            if !matches!(param.kind, ParamKind::Pipeline | ParamKind::Barrier | ParamKind::Sync) {
                continue;
            }
            let Some(e) = arg(i) else { continue };
            let Some(sref) = self.sync_ref(e, h) else {
                if self.stopped {
                    return;
                }
                continue;
            };
            match sref {
                SyncRef::Pipe(p) => match Model::pipe_kind(def, &param.name) {
                    Some(PipeKind::Acquire) => {
                        let stages = m.pipelines[p].stages.max(1);
                        let i = *self.acquires.get(&p).unwrap_or(&0);
                        self.acquires.insert(p, i.saturating_add(1));
                        let stage = i % stages;
                        self.prod_stage.insert(p, stage);
                        self.update_stage(p);
                        waits.push(Ek::Acquire { p, stage, round: i / stages, tx: 0 });
                    }
                    Some(PipeKind::Wait) => {
                        let stages = m.pipelines[p].stages.max(1);
                        let j = *self.waits.get(&p).unwrap_or(&0);
                        self.waits.insert(p, j.saturating_add(1));
                        let stage = j % stages;
                        self.held.entry(p).or_default().push_back(stage);
                        self.cons_stage.insert(p, stage);
                        self.update_stage(p);
                        waits.push(Ek::PWait { p, stage, round: j / stages });
                    }
                    Some(PipeKind::Release) => {
                        let stage = self.held.get_mut(&p).and_then(|q| q.pop_front());
                        after.push(Ek::Release { p, stage });
                    }
                    Some(PipeKind::Credit) => {
                        tma_credit = Some(Credit::Pipe { p, stage: self.prod_stage.get(&p).copied() });
                    }
                    None => unmodelled.push(format!("its effects on pipeline `{}`", m.pipelines[p].name)),
                },
                SyncRef::Bar(obj) => {
                    let effs: Vec<_> = def.effects_on(&param.name).collect();
                    let arrive = effs.iter().any(|e| e.access == EffectAccess::Arrive);
                    let expect = effs.iter().any(|e| e.access == EffectAccess::ExpectTx);
                    let wait = effs.iter().any(|e| e.access == EffectAccess::Wait);
                    let complete = effs.iter().any(|e| e.access == EffectAccess::CompleteTx);
                    if effs.iter().any(|e| {
                        !matches!(e.access, EffectAccess::Arrive | EffectAccess::ExpectTx | EffectAccess::Wait | EffectAccess::CompleteTx)
                    }) {
                        unmodelled.push(format!("its effects on barrier `{}`", model.obj_name(obj)));
                    }
                    if wait {
                        let k = *self.bar_waits.get(&obj).unwrap_or(&0);
                        self.bar_waits.insert(obj, k.saturating_add(1));
                        let parity_param = def.param_index("parity").and_then(arg);
                        let (parity, derived) = match parity_param {
                            Some(pe) => match eval(m, &self.env, pe) {
                                Val::Int(v) => ((v & 1) as u8, false),
                                _ => {
                                    let shown = super::eval::show(m, pe);
                                    self.stop(
                                        code::DATA_DEPENDENT,
                                        h,
                                        format!("the parity of this wait (`{shown}`) cannot be evaluated"),
                                        "compute parities from loop variables and constants, or use `wait(b)`, which derives them",
                                    );
                                    return;
                                }
                            },
                            None => ((k & 1) as u8, true),
                        };
                        waits.push(Ek::BWait { obj, parity, derived, k });
                    }
                    if arrive || expect {
                        let tx = if expect {
                            match def.param_index("bytes").and_then(arg).map(|x| eval(m, &self.env, x)) {
                                Some(Val::Int(v)) if v >= 0 => Some(v as u64),
                                _ => {
                                    self.stop(
                                        code::UNRESOLVED_INDEX,
                                        h,
                                        "the transaction byte count of this arrive cannot be evaluated".to_string(),
                                        "state byte counts as constant expressions",
                                    );
                                    return;
                                }
                            }
                        } else {
                            None
                        };
                        let arrivals = if arrive { model.arrivals_per_call(def, self.role) } else { 0 };
                        after.push(Ek::Arrive { obj, arrivals, tx });
                    }
                    if complete {
                        tma_credit = Some(Credit::Bar { obj });
                    }
                }
            }
        }

        // Data params.
        let async_kind = |d: &OpDef| -> Option<AccKind> {
            if d.effects.iter().any(|e| e.on == "@bulk_group" && e.access == EffectAccess::Commit) {
                Some(AccKind::BulkStore)
            } else if d.requires.iter().any(|r| r == "wgmma") {
                Some(AccKind::Wgmma)
            } else if d.requires.iter().any(|r| r == "cp_async") {
                Some(AccKind::CpAsync)
            } else {
                None
            }
        };
        let mut tma_dst: Option<(Option<BufSel>, u64)> = None;
        for (i, param) in def.params.iter().enumerate() {
            let Some(e) = arg(i) else { continue };
            match param.kind {
                ParamKind::Smem | ParamKind::Mem => {
                    if param.kind == ParamKind::Mem && !matches!(m.exprs[e].ty, Type::Shared { .. }) {
                        continue;
                    }
                    let effs: Vec<_> = def.effects_on(&param.name).filter(|e| e.access.is_data()).cloned().collect();
                    if effs.is_empty() {
                        continue;
                    }
                    // Index expressions may read registers or memory themselves.
                    self.index_expr_reads(e, h);
                    let buf = self.buf(e, h);
                    for eff in effs {
                        let write = eff.access.writes();
                        if tma_credit.is_some() && write && eff.is_async {
                            tma_dst = Some((buf, model.bytes_of(e).unwrap_or(0)));
                            continue;
                        }
                        let Some(buf) = buf else { continue };
                        let kind = if eff.is_async {
                            match async_kind(def) {
                                Some(k) => k,
                                None => {
                                    unmodelled.push(format!("its asynchronous access to `{}`", model.smem_name(buf.smem)));
                                    continue;
                                }
                            }
                        } else {
                            AccKind::Plain
                        };
                        if eff.access == EffectAccess::Readwrite {
                            accesses.push(Ek::Access { buf, write: false, proxy: eff.proxy, kind });
                        }
                        accesses.push(Ek::Access { buf, write, proxy: eff.proxy, kind });
                    }
                }
                ParamKind::Frag => {
                    let effs: Vec<_> = def.effects_on(&param.name).cloned().collect();
                    let mut base = e;
                    while let ExprKind::Index { base: b, .. } = &m.exprs[base].kind {
                        base = *b;
                    }
                    let local = match m.exprs[base].kind {
                        ExprKind::Local(l) if m.locals[l].kind == LocalKind::Reg => Some(l),
                        _ => None,
                    };
                    self.index_expr_reads(e, h);
                    if effs.iter().any(|x| x.is_async) {
                        accesses.push(Ek::WgmmaIssue { acc: local });
                    } else if let Some(l) = local {
                        let write = effs.iter().any(|x| x.access.writes());
                        accesses.push(Ek::FragUse { local: l, write });
                    }
                }
                ParamKind::Value | ParamKind::Float | ParamKind::Int => {
                    if matches!(param.kind, ParamKind::Int) && (param.name == "parity" || param.name == "bytes") {
                        continue;
                    }
                    // Evaluate reads in order with the op's other accesses.
                    let before = self.events.len();
                    self.reads(e, h);
                    let new: Vec<Ev> = self.events.drain(before..).collect();
                    accesses.extend(new.into_iter().map(|ev| ev.kind));
                }
                _ => {}
            }
        }

        // Implicit resources.
        let n_param = def.params.iter().position(|p| p.kind == ParamKind::ConstInt).and_then(arg);
        let n_val = n_param.map(|x| eval(m, &self.env, x).int().unwrap_or(0).clamp(0, 1 << 20) as u32).unwrap_or(0);
        let mut commits: Vec<Ek> = Vec::new();
        let mut block_sync = false;
        let mut cluster_sync = false;
        for eff in &def.effects {
            match (eff.on.as_str(), eff.access) {
                ("@wgmma_group", EffectAccess::Commit) => commits.push(Ek::WgmmaCommit),
                ("@wgmma_group", EffectAccess::Wait) => waits.push(Ek::WgmmaWait(n_val)),
                ("@cp_async_group", EffectAccess::Commit) => commits.push(Ek::CpCommit),
                ("@cp_async_group", EffectAccess::Wait) => waits.push(Ek::CpWait(n_val)),
                ("@bulk_group", EffectAccess::Commit) => {} // each TMA store is its own group
                ("@bulk_group", EffectAccess::Wait) => waits.push(Ek::BulkWait(n_val)),
                ("@smem", EffectAccess::Fence) if eff.proxy == Proxy::Async => after.push(Ek::Fence),
                ("@block", _) => block_sync = true,
                ("@cluster", _) => cluster_sync = true,
                ("@grid", _) => {} // ordering between grids: outside one block's protocol
                (on, acc) if on.starts_with('@') => unmodelled.push(format!("its `{}` effect on `{on}`", acc.as_str())),
                (on, acc) => {
                    // A role param (sync_role): synchronizes the role with itself.
                    if let Some(pi) = def.param_index(on) {
                        if def.params[pi].kind == ParamKind::Role && acc == EffectAccess::Wait {
                            after.push(Ek::SyncRole);
                        }
                    }
                }
            }
        }
        if block_sync {
            waits.push(Ek::Sync);
        } else if cluster_sync {
            waits.push(Ek::ClusterSync);
            if model.cluster > 1 {
                unmodelled.push("its synchronization with the other blocks of the cluster".to_string());
            }
        }
        unmodelled.dedup();
        if !unmodelled.is_empty() {
            let op = call.op.clone();
            self.limit(
                code::UNMODELLED_OP,
                h,
                format!("the protocol analysis does not model {} of `{op}`", unmodelled.join(", ")),
                "those effects are ignored by the protocol analysis",
            );
        }

        for k in waits {
            if let Ek::Acquire { p, .. } = k {
                self.last_acquire.insert(p, self.events.len());
            }
            self.push(k, h);
        }
        for k in accesses {
            self.push(k, h);
        }
        if let Some(credit) = tma_credit {
            let (dst, bytes) = tma_dst.unwrap_or((None, 0));
            if let Credit::Pipe { p, .. } = credit {
                // Add the bytes to the producer's last acquire of this pipeline.
                if let Some(ix) = self.last_acquire.get(&p).copied() {
                    if let Some(Ev { kind: Ek::Acquire { tx, .. }, .. }) = self.events.get_mut(ix) {
                        *tx = tx.saturating_add(bytes);
                    }
                }
            }
            self.push(Ek::Tma { dst, bytes, credit }, h);
        }
        for k in after {
            self.push(k, h);
        }
        for k in commits {
            self.push(k, h);
        }
    }

    fn index_expr_reads(&mut self, e: Handle<Expr>, h: Handle<Stmt>) {
        let m = self.model.m;
        let mut cur = e;
        for _ in 0..64 {
            match &m.exprs[cur].kind {
                ExprKind::Index { base, items } => {
                    for it in items.clone() {
                        self.index_reads(&it, h);
                    }
                    cur = *base;
                }
                _ => break,
            }
        }
    }

    fn update_stage(&mut self, p: Handle<PipelineDecl>) {
        let d = &self.model.m.pipelines[p];
        let s = if d.producer == self.role { self.prod_stage.get(&p) } else { self.cons_stage.get(&p) };
        if let Some(s) = s.copied() {
            self.env.stages.insert(p, s);
        }
    }
}

enum SyncRef {
    Pipe(Handle<PipelineDecl>),
    Bar(usize),
}
