//! Register layouts: how every register fragment and every fragment-shaped value is spread over
//! the threads that hold it — one derivation that the verifier (V230, V231) and the lowering read,
//! so that `cake check` accepts exactly the fragments `cake lower` can place.
//!
//! Every layout here is a view of the tensor-core accumulator layout (PTX ISA: wgmma `m64nNk16`
//! D fragment, mma.sync `m16n8k16` C/D fragment), which are the same per warp:
//!
//! * [`Layout::Acc`] — a `[16·m_tiles, 8·n_tiles]` tile per warp (per warpgroup: 64 rows, warp w
//!   of the group owning rows 16w..16w+15). Register `i` of a thread holds
//!   `row = base + 16·(i / 4 / n_tiles) + lane / 4 + 8·((i % 4) / 2)`,
//!   `col = 8·((i / 4) % n_tiles) + 2·(lane % 4) + i % 2`, where `base` is `16·(warp % 4)` for a
//!   warpgroup fragment and 0 for a warp fragment. A 64×N f32 wgmma accumulator is N/2 registers.
//! * [`Layout::Rows`] — a row vector of an accumulator (the result of a reduction over axis 1):
//!   register `i` holds `row = base + 16·(i / 2) + lane / 4 + 8·(i % 2)`; the four lanes of a quad
//!   hold the same values.
//! * [`Layout::MmaA`] / [`Layout::MmaB`] — mma.sync operand fragments of 16-bit elements, packed
//!   two per 32-bit register: A `[16·m_tiles, 16·k_tiles]` has 4 registers per (m, k) tile, B
//!   `[8·n_tiles, 16·k_tiles]` (K-major, our `b[N, K]`) has 2 per (n, k) tile.
//! * [`Layout::Scalar`] — a rank-0 fragment: one value per thread.
//! * [`Layout::Uniform`] — a small fragment (at most [`UNIFORM_MAX`] elements) held whole by every
//!   thread of its scope, element `i` (row-major) in register `i`: a per-thread array, or per-warp
//!   running state (a row's max and sum) that warp-wide reductions give every lane alike.
//!
//! A value made from memory windows (and math on them) has no register layout: it is computed
//! element by element where it is used. A `let` naming such a value is recomputed at every use,
//! which is sound only when nothing it reads can change while the name is in scope and nothing in
//! it is costly to repeat ([`WindowLetBlocker`]).

use std::collections::BTreeMap;

use crate::ir::{walk_expr, DType, Expr, ExprKind, Handle, IndexItem, Local, LocalKind, Module, Scope, Stmt, Type};
use crate::span::Span;
use crate::syntax::ast::Access;

use super::{known_multiple, MmaSyncOperands};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    Acc { m_tiles: u32, n_tiles: u32, wg: bool },
    Rows { m_tiles: u32, wg: bool },
    MmaA { m_tiles: u32, k_tiles: u32 },
    MmaB { n_tiles: u32, k_tiles: u32 },
    Scalar,
    Uniform { n: u32 },
}

/// The most elements a [`Layout::Uniform`] fragment holds (registers per thread).
pub const UNIFORM_MAX: i64 = 32;

impl Layout {
    /// Registers (array elements) per thread.
    pub fn regs(self) -> u32 {
        match self {
            Layout::Acc { m_tiles, n_tiles, .. } => m_tiles * n_tiles * 4,
            Layout::Rows { m_tiles, .. } => m_tiles * 2,
            Layout::MmaA { m_tiles, k_tiles } => m_tiles * k_tiles * 4,
            Layout::MmaB { n_tiles, k_tiles } => n_tiles * k_tiles * 2,
            Layout::Scalar => 1,
            Layout::Uniform { n } => n,
        }
    }

    /// Elements per register: 2 for the packed mma operand layouts.
    pub fn packed(self) -> bool {
        matches!(self, Layout::MmaA { .. } | Layout::MmaB { .. })
    }

    /// The shape the layout holds (per warp or warpgroup).
    pub fn shape(self) -> Vec<i64> {
        match self {
            Layout::Acc { m_tiles, n_tiles, wg } => {
                vec![if wg { 64 } else { 16 * m_tiles as i64 }, 8 * n_tiles as i64]
            }
            Layout::Rows { m_tiles, wg } => vec![if wg { 64 } else { 16 * m_tiles as i64 }],
            Layout::MmaA { m_tiles, k_tiles } => vec![16 * m_tiles as i64, 16 * k_tiles as i64],
            Layout::MmaB { n_tiles, k_tiles } => vec![8 * n_tiles as i64, 16 * k_tiles as i64],
            Layout::Scalar => vec![],
            Layout::Uniform { n } => vec![i64::from(n)],
        }
    }

    /// Whether every thread holds every element (so any element is a register of any thread).
    pub fn whole_in_each_thread(self) -> bool {
        matches!(self, Layout::Scalar | Layout::Uniform { .. })
    }

    pub fn describe(self) -> String {
        match self {
            Layout::Acc { n_tiles, wg: true, .. } => {
                format!("wgmma m64n{} accumulator layout, {} registers per thread", 8 * n_tiles, self.regs())
            }
            Layout::Acc { m_tiles, n_tiles, wg: false } => format!(
                "mma.sync accumulator layout ({}×{} tiles of 16×8), {} registers per thread",
                m_tiles,
                n_tiles,
                self.regs()
            ),
            Layout::Rows { wg, .. } => format!(
                "row vector of the {} accumulator layout, {} registers per thread (replicated over each lane quad)",
                if wg { "wgmma" } else { "mma.sync" },
                self.regs()
            ),
            Layout::MmaA { m_tiles, k_tiles } => {
                format!("mma.sync A operand layout ({m_tiles}×{k_tiles} tiles of 16×16), {} packed registers", self.regs())
            }
            Layout::MmaB { n_tiles, k_tiles } => {
                format!("mma.sync B operand layout ({n_tiles}×{k_tiles} tiles of 8×16), {} packed registers", self.regs())
            }
            Layout::Scalar => "one value per thread".into(),
            Layout::Uniform { n } => format!("the whole fragment in every thread of its scope, {n} registers"),
        }
    }

    /// The row base of the thread's warp inside the fragment (C expression).
    fn base(wg: bool) -> &'static str {
        if wg {
            "16 * (cake_warp % 4) + "
        } else {
            ""
        }
    }

    /// C expression: the row (axis 0) of register `i` (a C expression, constant after unrolling).
    pub fn row(self, i: &str) -> Option<String> {
        match self {
            Layout::Acc { n_tiles, wg, .. } => Some(format!(
                "{}16 * (({i}) / 4 / {n_tiles}) + cake_lane / 4 + 8 * ((({i}) % 4) / 2)",
                Self::base(wg)
            )),
            Layout::Rows { wg, .. } => Some(format!("{}16 * (({i}) / 2) + cake_lane / 4 + 8 * (({i}) % 2)", Self::base(wg))),
            _ => None,
        }
    }

    /// C expression: the column (axis 1) of register `i`.
    pub fn col(self, i: &str) -> Option<String> {
        match self {
            Layout::Acc { n_tiles, .. } => Some(format!("8 * ((({i}) / 4) % {n_tiles}) + 2 * (cake_lane % 4) + ({i}) % 2")),
            _ => None,
        }
    }

    /// C expression: the position along `axis` of register `i` (what `iota` gives): an
    /// accumulator's row or column, a row vector's row, a whole-held 1-D fragment's index.
    pub fn coord(self, axis: i64, i: &str) -> Option<String> {
        match (self, axis) {
            (Layout::Acc { .. } | Layout::Rows { .. }, 0) => self.row(i),
            (Layout::Acc { .. }, 1) => self.col(i),
            (Layout::Uniform { .. }, 0) => Some(format!("({i})")),
            _ => None,
        }
    }

    /// The column of register `i` split as `register part + lane part` (C expressions): the first
    /// depends on the register alone (a constant after unrolling), the second on the lane alone
    /// (the same for every register of a thread). Their sum is [`Layout::col`].
    pub fn col_parts(self, i: &str) -> Option<(String, &'static str)> {
        match self {
            Layout::Acc { n_tiles, .. } => Some((format!("8 * ((({i}) / 4) % {n_tiles}) + ({i}) % 2"), "2 * (cake_lane % 4)")),
            _ => None,
        }
    }

    /// The layout of a reduction over `axis`.
    pub fn reduced(self, axis: i64) -> Option<Layout> {
        match (self, axis) {
            (Layout::Acc { m_tiles, wg, .. }, 1) => Some(Layout::Rows { m_tiles, wg }),
            _ => None,
        }
    }
}

/// Why a fragment or a value has no register layout the lowering can place. `lower_code` is what
/// the lowering reports for it (`L007` no layout, `L001` a construct it does not emit); the
/// verifier reports the same fault as V230 or V231 before any lowering runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutFault {
    pub lower_code: &'static str,
    /// The cause: the declaration, the sub-expression or the read that has no layout.
    pub span: Span,
    pub message: String,
    pub note: Option<String>,
    /// Set for a `let` of window math that cannot be recomputed at its uses.
    pub blocker: Option<WindowLetBlocker>,
}

impl LayoutFault {
    fn new(lower_code: &'static str, span: Span, message: impl Into<String>) -> LayoutFault {
        LayoutFault { lower_code, span, message: message.into(), note: None, blocker: None }
    }

    fn with_note(mut self, note: impl Into<String>) -> LayoutFault {
        self.note = Some(note.into());
        self
    }
}

/// What keeps a `let` of window math (a value without a register layout, recomputed at each use)
/// from being recomputed soundly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowLetBlocker {
    /// A reduction would run again at every use (for every element).
    Reduction,
    /// Shared memory may be refilled (a pipeline stage, a TMA load) while the name is in scope.
    SharedMemory,
    /// An `out` or `inout` tensor may be written while the name is in scope.
    WritableTensor(Handle<crate::ir::TensorDecl>),
    /// A register fragment not held whole by each thread (so not copied at the `let`).
    DistributedRegister(Handle<Local>),
}

/// The register layouts of one module: every `reg` fragment's, every fragment-shaped
/// expression's (`None`: window math, computed where used), and the faults of `reg`s and `let`s
/// that have none the lowering can place.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegisterLayouts {
    regs: BTreeMap<Handle<Local>, Result<Layout, LayoutFault>>,
    /// By expression handle index.
    values: Vec<Result<Option<Layout>, LayoutFault>>,
    /// Per `let` whose value cannot be named: the fault, at the cause.
    let_faults: BTreeMap<Handle<Local>, LayoutFault>,
    /// Faults of values used directly as statement operands (an assignment's value, an op's
    /// argument), once per cause, leaving out those a `reg` or `let` already reports.
    operand_faults: Vec<(Handle<Stmt>, LayoutFault)>,
}

impl RegisterLayouts {
    pub fn derive(m: &Module, mma_ops: &MmaSyncOperands) -> RegisterLayouts {
        let mut lets = BTreeMap::new();
        let mut regs = BTreeMap::new();
        for (_, s) in m.stmts.iter() {
            match s {
                Stmt::Let { local, value } => {
                    lets.insert(*local, *value);
                }
                Stmt::Reg(l) => {
                    regs.insert(*l, reg_layout(m, mma_ops, *l));
                }
                _ => {}
            }
        }
        let mut d = Derive { m, lets: &lets, regs: &regs, memo: vec![None; m.exprs.len()] };
        for e in m.exprs.handles() {
            let _ = d.value(e);
        }
        let values: Vec<_> = d.memo.into_iter().map(|v| v.expect("every expression derived")).collect();
        let mut out = RegisterLayouts { regs, values, let_faults: BTreeMap::new(), operand_faults: Vec::new() };
        for (&l, &value) in &lets {
            if let Some(f) = out.let_fault_of(m, l, value) {
                out.let_faults.insert(l, f);
            }
        }
        out.operand_faults = out.operand_faults_of(m);
        out
    }

    /// The fault of every fragment value a statement uses directly (the lowering places it by its
    /// layout), unless a `reg` or `let` fault already names the same cause.
    fn operand_faults_of(&self, m: &Module) -> Vec<(Handle<Stmt>, LayoutFault)> {
        let mut seen: Vec<Span> = self.faults().map(|(_, f)| f.span).collect();
        let mut out = Vec::new();
        for (h, s) in m.stmts.iter() {
            let operands: Vec<Handle<Expr>> = match s {
                Stmt::Assign { value, .. } => vec![*value],
                Stmt::Op(call) => call.args.iter().flatten().copied().collect(),
                _ => continue,
            };
            for e in operands {
                if let Err(f) = self.value(e) {
                    if !seen.contains(&f.span) {
                        seen.push(f.span);
                        out.push((h, f));
                    }
                }
            }
        }
        out
    }

    /// Faults of values used directly as statement operands, with the statement.
    pub fn operand_faults(&self) -> impl Iterator<Item = &(Handle<Stmt>, LayoutFault)> {
        self.operand_faults.iter()
    }

    /// The layout of `reg` fragment `l`.
    pub fn reg(&self, l: Handle<Local>) -> Option<&Result<Layout, LayoutFault>> {
        self.regs.get(&l)
    }

    /// The register layout of a fragment-shaped expression (`None`: window math, or not a
    /// fragment).
    pub fn value(&self, e: Handle<Expr>) -> Result<Option<Layout>, LayoutFault> {
        self.values.get(e.index()).cloned().unwrap_or(Ok(None))
    }

    /// Why the `let` of `l` cannot be lowered, if it cannot.
    pub fn let_fault(&self, l: Handle<Local>) -> Option<&LayoutFault> {
        self.let_faults.get(&l)
    }

    /// Every fault, once each: the `reg`s without a layout (at their declaration) and the `let`s
    /// whose value has none (at the cause).
    pub fn faults(&self) -> impl Iterator<Item = (Handle<Local>, &LayoutFault)> {
        let regs = self.regs.iter().filter_map(|(l, r)| r.as_ref().err().map(|f| (*l, f)));
        regs.chain(self.let_faults.iter().map(|(l, f)| (*l, f)))
    }

    fn let_fault_of(&self, m: &Module, l: Handle<Local>, value: Handle<Expr>) -> Option<LayoutFault> {
        let span = *m.exprs.span(value);
        match &m.exprs[value].ty {
            // A scalar has a place in every thread, unless it reduces a fragment the lowering
            // cannot reduce.
            Type::Scalar(_) | Type::Literal { .. } => self.value(value).err(),
            Type::Frag { .. } => match self.value(value) {
                Err(f) => Some(f),
                Ok(Some(_)) => None,
                Ok(None) => self.window_let_blocker(m, value),
            },
            Type::Global { .. } => self.window_let_blocker(m, value),
            other => Some(LayoutFault::new("L001", span, format!("not supported by the lowering yet: `let` of a {other}")).with_note(format!(
                "`let` names scalars, register values and windows of global tensors; `{}` is a {other}",
                m.locals[l].name
            ))),
        }
    }

    /// The first read in `value` (a `let` of window math, recomputed at each use) that makes
    /// recomputing it unsound or costly.
    fn window_let_blocker(&self, m: &Module, value: Handle<Expr>) -> Option<LayoutFault> {
        let mut found: Option<(Handle<Expr>, WindowLetBlocker)> = None;
        walk_expr(m, value, &mut |x| {
            if found.is_some() {
                return;
            }
            let b = match &m.exprs[x].kind {
                ExprKind::Smem(_) | ExprKind::View(_) => Some(WindowLetBlocker::SharedMemory),
                ExprKind::Call(c) if c.op.starts_with("reduce_") => Some(WindowLetBlocker::Reduction),
                // The window (`X[r, :]`) rather than the bare name: the read that repeats.
                ExprKind::Index { base, .. } => match m.exprs[*base].kind {
                    ExprKind::Tensor(t) if m.tensors[t].access != Access::In => Some(WindowLetBlocker::WritableTensor(t)),
                    _ => None,
                },
                ExprKind::Tensor(t) if m.tensors[*t].access != Access::In => Some(WindowLetBlocker::WritableTensor(*t)),
                ExprKind::Local(r) => {
                    let local = &m.locals[*r];
                    let lay = match local.kind {
                        LocalKind::Reg => self.regs.get(r).and_then(|x| x.as_ref().ok().copied()),
                        _ => self.value(x).ok().flatten(),
                    };
                    let whole = lay.is_some_and(Layout::whole_in_each_thread);
                    // A `let` of window math is itself recomputed (no layout); scalars are values.
                    let distributed = match local.kind {
                        LocalKind::Reg => !whole,
                        LocalKind::Let => lay.is_some() && !whole,
                        LocalKind::LoopVar | LocalKind::Tile => false,
                    };
                    distributed.then_some(WindowLetBlocker::DistributedRegister(*r))
                }
                _ => None,
            };
            if let Some(b) = b {
                found = Some((x, b));
            }
        });
        let (x, b) = found?;
        let what = match b {
            WindowLetBlocker::Reduction => "contains a reduction, which would run again at every use".to_string(),
            WindowLetBlocker::SharedMemory => "reads shared memory, which may be refilled while the name is in scope".to_string(),
            WindowLetBlocker::WritableTensor(t) => {
                let t = &m.tensors[t];
                format!("reads `{}`, declared `{}`, which may be written while the name is in scope", t.name, access_name(t.access))
            }
            WindowLetBlocker::DistributedRegister(r) => {
                format!("reads `{}`, a register fragment its threads do not each hold whole", m.locals[r].name)
            }
        };
        let mut f = LayoutFault::new("L007", *m.exprs.span(x), format!("a `let` of window math is recomputed at each use, and this one {what}"))
            .with_note("only windows of `in` tensors (never written while the kernel runs), scalars and register fragments every thread holds whole can be named by `let` without a register layout");
        f.blocker = Some(b);
        Some(f)
    }
}

fn access_name(a: Access) -> &'static str {
    match a {
        Access::In => "in",
        Access::Out => "out",
        Access::InOut => "inout",
    }
}

/// The layout of `reg` fragment `l`, from its declared shape and scope and how `mma_sync` takes
/// it.
fn reg_layout(m: &Module, mma_ops: &MmaSyncOperands, l: Handle<Local>) -> Result<Layout, LayoutFault> {
    let local = &m.locals[l];
    let span = *m.locals.span(l);
    let Type::Frag { dtype, shape, scope } = &local.ty else {
        return Err(LayoutFault::new("L007", span, format!("`{}` is not a register fragment", local.name)));
    };
    let bad = |why: &str| {
        LayoutFault::new("L007", span, format!("no thread layout for fragment `{}`: {dtype}{shape:?} per {}", local.name, scope.map_or("?", |s| s.name())))
            .with_note(why)
    };
    let lay = match (scope, shape.as_slice()) {
        (_, []) => Layout::Scalar,
        (Some(Scope::Warpgroup), [64, n]) if n % 8 == 0 && (8..=256).contains(n) => Layout::Acc { m_tiles: 1, n_tiles: (*n / 8) as u32, wg: true },
        (Some(Scope::Warpgroup), [64]) => Layout::Rows { m_tiles: 1, wg: true },
        (Some(Scope::Warp), [r, c]) if mma_ops.a.contains(&l) => {
            if r % 16 != 0 || c % 16 != 0 {
                return Err(bad("an mma.sync A operand needs multiples of 16 rows and 16 columns"));
            }
            Layout::MmaA { m_tiles: (*r / 16) as u32, k_tiles: (*c / 16) as u32 }
        }
        (Some(Scope::Warp), [r, c]) if mma_ops.b.contains(&l) => {
            if r % 8 != 0 || c % 16 != 0 {
                return Err(bad("an mma.sync B operand needs multiples of 8 rows and 16 columns"));
            }
            Layout::MmaB { n_tiles: (*r / 8) as u32, k_tiles: (*c / 16) as u32 }
        }
        (Some(Scope::Warp), [r, c]) if r % 16 == 0 && c % 8 == 0 => Layout::Acc { m_tiles: (*r / 16) as u32, n_tiles: (*c / 8) as u32, wg: false },
        (Some(Scope::Warp), [r]) if r % 16 == 0 => Layout::Rows { m_tiles: (*r / 16) as u32, wg: false },
        // Small per-thread arrays and per-warp running state: every thread holds it all.
        (None | Some(Scope::Thread) | Some(Scope::Warp), dims) if (1..=UNIFORM_MAX).contains(&dims.iter().product::<i64>()) => {
            Layout::Uniform { n: dims.iter().product::<i64>() as u32 }
        }
        _ => {
            return Err(bad(
                "the lowering knows the wgmma/mma.sync accumulator, row-vector and operand layouts, and whole small fragments (per thread or warp, at most 32 elements)",
            ))
        }
    };
    if mma_ops.a.contains(&l) && mma_ops.b.contains(&l) {
        return Err(bad("used as both the A and the B operand of mma_sync"));
    }
    // Registers hold 32-bit values: 16-bit floats widened to f32, or two packed per register in
    // the mma operand layouts; fp8 values live only in memory and wgmma operands.
    let representable = if lay.packed() { matches!(dtype, DType::BF16 | DType::F16) } else { !matches!(dtype, DType::F8E4M3 | DType::F8E5M2) };
    if !representable {
        return Err(bad("no register representation for this dtype"));
    }
    Ok(lay)
}

/// The derivation of expression layouts, memoized by expression.
struct Derive<'a> {
    m: &'a Module,
    lets: &'a BTreeMap<Handle<Local>, Handle<Expr>>,
    regs: &'a BTreeMap<Handle<Local>, Result<Layout, LayoutFault>>,
    memo: Vec<Option<Result<Option<Layout>, LayoutFault>>>,
}

impl Derive<'_> {
    fn value(&mut self, e: Handle<Expr>) -> Result<Option<Layout>, LayoutFault> {
        if let Some(done) = &self.memo[e.index()] {
            return done.clone();
        }
        let v = self.compute(e);
        self.memo[e.index()] = Some(v.clone());
        v
    }

    fn compute(&mut self, e: Handle<Expr>) -> Result<Option<Layout>, LayoutFault> {
        let m = self.m;
        let span = *m.exprs.span(e);
        let ex = &m.exprs[e];
        if let (ExprKind::Call(c), false) = (&ex.kind, matches!(ex.ty, Type::Frag { .. })) {
            // A reduction to one value: from window math the threads split and combine it; from
            // a fragment with a register layout only if that layout reduces (an accumulator's
            // rows), which never gives one value (a `select` of a 1-element row window with a
            // whole-held `f32[1]` has that layout, and the lowering has no reduction of it).
            if let Some(x) = c.args.first().copied().flatten().filter(|_| c.op.starts_with("reduce_")) {
                if let Some(lx) = self.value(x)? {
                    return Err(LayoutFault::new("L007", span, format!("`{}` to one value: its operand has a register layout the lowering does not reduce ({})", c.op, lx.describe()))
                        .with_note("a reduction to one value is lowered from window math (split over the lanes) or from an accumulator's rows; compute the operand from windows, or reduce a `reg` of the accumulator layout"));
                }
            }
        }
        let Type::Frag { shape, .. } = &ex.ty else { return Ok(None) };
        let unsupported = |what: String| LayoutFault::new("L001", span, format!("not supported by the lowering yet: {what}"));
        // Operands in one thread layout (scalars broadcast into any). A layout whose threads each
        // hold the whole fragment keeps only values of its own size: a larger value made from it
        // and windows has no register layout (it is computed element by element where used).
        let elements: i64 = shape.iter().product();
        let merge = |ls: Vec<Option<Layout>>| -> Result<Option<Layout>, LayoutFault> {
            let mut out: Option<Layout> = None;
            let mut scalar = false;
            for l in ls.into_iter().flatten() {
                if l == Layout::Scalar {
                    scalar = true;
                    continue;
                }
                match out {
                    None => out = Some(l),
                    Some(o) if o == l => {}
                    Some(o) => {
                        return Err(LayoutFault::new(
                            "L007",
                            span,
                            format!("operands have different thread layouts ({} and {})", o.describe(), l.describe()),
                        ))
                    }
                }
            }
            let out = out.or(scalar.then_some(Layout::Scalar));
            Ok(out.filter(|l| !l.whole_in_each_thread() || i64::from(l.regs()) == elements))
        };
        Ok(match &ex.kind {
            ExprKind::Local(l) => match m.locals[*l].kind {
                LocalKind::Reg => Some(self.regs.get(l).cloned().unwrap_or_else(|| {
                    Err(LayoutFault::new("L007", span, format!("fragment `{}` has no known layout", m.locals[*l].name)))
                })?),
                LocalKind::Let => match self.lets.get(l) {
                    Some(v) => self.value(*v)?,
                    None => return Err(LayoutFault::new("L007", span, format!("fragment `{}` has no known layout", m.locals[*l].name))),
                },
                LocalKind::LoopVar | LocalKind::Tile => {
                    return Err(LayoutFault::new("L007", span, format!("fragment `{}` has no known layout", m.locals[*l].name)))
                }
            },
            ExprKind::Index { base, items } => {
                let full = self.value(*base)?.ok_or_else(|| unsupported("indexing this value".into()))?;
                Some(frag_window_layout(m, full, items, span)?)
            }
            ExprKind::Unary(_, a) => self.value(*a)?,
            ExprKind::Binary(_, a, b) => {
                let (la, lb) = (self.value(*a)?, self.value(*b)?);
                merge(vec![la, lb])?
            }
            ExprKind::Call(c) if c.op.starts_with("reduce_") => {
                let x = c.args.first().copied().flatten().ok_or_else(|| LayoutFault::new("L001", span, "not supported by the lowering yet: reduce without operand"))?;
                let axis = c.args.get(1).copied().flatten().and_then(|a| m.const_value(a)).unwrap_or(-1);
                let Some(lx) = self.value(x)? else {
                    // A value without a register layout (windows, and math on them): the threads
                    // that read it split it and combine their parts, so each ends with the result.
                    return Ok(Some(Layout::Scalar));
                };
                Some(lx.reduced(axis).ok_or_else(|| {
                    unsupported(format!("reduction over axis {axis} of the {}", lx.describe()))
                        .with_note("only axis 1 of an accumulator (a row reduction inside each lane quad) is lowered")
                })?)
            }
            ExprKind::Call(c) => {
                let mut ls = Vec::new();
                for a in c.args.iter().flatten() {
                    ls.push(self.value(*a)?);
                }
                merge(ls)?
            }
            _ => return Err(unsupported(format!("this fragment expression ({})", ex.ty))),
        })
    }
}

/// The layout of a window of a fragment in layout `full`: whole accumulator tiles only.
fn frag_window_layout(m: &Module, full: Layout, items: &[IndexItem], span: Span) -> Result<Layout, LayoutFault> {
    let Layout::Acc { mut m_tiles, mut n_tiles, wg } = full else {
        return Err(LayoutFault::new("L001", span, format!("not supported by the lowering yet: a window of the {}", full.describe())));
    };
    for (d, it) in items.iter().enumerate() {
        match (d, it) {
            (_, IndexItem::Full) => {}
            (0, IndexItem::Window { start, len }) if !wg && len % 16 == 0 && known_multiple(m, *start) % 16 == 0 => {
                m_tiles = (*len / 16) as u32;
            }
            (1, IndexItem::Window { start, len }) if len % 8 == 0 && known_multiple(m, *start) % 8 == 0 => {
                n_tiles = (*len / 8) as u32;
            }
            _ => {
                return Err(LayoutFault::new(
                    "L007",
                    span,
                    "a fragment window must cover whole accumulator tiles (16-row tiles of a warp fragment, 8-column tiles), with starts that are provably multiples of them",
                )
                .with_note("a warpgroup fragment keeps all of its 64 rows"))
            }
        }
    }
    Ok(Layout::Acc { m_tiles, n_tiles, wg })
}
