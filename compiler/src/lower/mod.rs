//! Lowering: verified IR → one readable CUDA C++ kernel with inline PTX, plus its launch contract.
//!
//! [`lower`] accepts only [`Validated`] modules, so unverified IR cannot be lowered by mistake
//! (`Validated::assume_verified_unsafe` is the named way around the verifier).
//!
//! # The generated kernel
//! * One `extern "C" __global__` function named after the kernel, `__launch_bounds__(threads, 1)`
//!   (the register cap at entry that `setmaxnreg` needs), no CUDA header included: the few
//!   helpers it calls are defined above it, one per PTX form.
//! * Roles are branches of one `if / else if` chain on the (warp-uniform) warp index; a role with
//!   `regs` starts with `setmaxnreg.{dec,inc}.sync.aligned.u32` (dec when the budget is below the
//!   launch cap `65536 / threads` rounded down to 8, inc above it).
//! * Shared memory is one `extern __shared__` buffer. When TMA or wgmma use it (they read swizzle
//!   patterns off absolute address bits) its base is rounded up to 1024 bytes at run time and the
//!   launch asks for 1024 bytes of slack; otherwise the swizzle is applied to offsets and the base
//!   is used as is. Regions follow in declaration order, each at its `align` (default 1024 when
//!   swizzled, else 128 — a TMA destination needs 128), then the mbarriers (8 bytes each).
//!   `LaunchSpec::smem_layout` lists the offsets.
//! * Pipelines: per stage a full and an empty mbarrier, initialised by thread 0 before the roles
//!   start (`fence.mbarrier_init` + `fence.proxy.async` + `__syncthreads`). The full barrier
//!   expects 1 arrival (the producer's `arrive.expect_tx`) plus the TMA bytes; the empty barrier
//!   expects **one arrival per consumer warpgroup** (per warp for a warp-unit consumer role):
//!   `release` is one elected thread per warpgroup (lane 0 of each warp for warp roles). When the
//!   consumer role also reads shared memory with ordinary loads, each warpgroup first meets on a
//!   named barrier so the elected arrival orders all of its threads' reads.
//! * Stage and phase are registers per role and pipeline: `acquire` / `wait` advance
//!   (`stage = (stage + 1) % stages`, the phase flips when it wraps; both start one step before
//!   stage 0 / phase 0); the producer waits on the empty barrier with parity `phase ^ 1` (a fresh
//!   barrier passes at once), the consumer on the full barrier with parity `phase`. `release`
//!   hands back stages in FIFO order with its own counter.
//! * `acquire` arms the full barrier with the bytes of every `tma_load` naming the pipeline up to
//!   the role's next `acquire` of it, derived statically (loops with constant trip counts
//!   multiply; anything else is refused with L004).
//! * Explicit barriers (`barrier B: stages N count C ...`) are N mbarriers initialised with C
//!   arrivals (module `barrier`): `arrive` = the role meets on its named barrier, then one elected
//!   thread arrives; `arrive_expect_tx` = one elected `arrive.expect_tx` with the bytes as written;
//!   `wait(B)` derives its parity per role and stage (the k-th wait waits for parity k % 2, kept
//!   as one bit per stage in `B_phase`); `wait_parity` takes it as written; `tma_load(.., B)`
//!   completes its bytes on B; `B[i]` selects stage i.
//! * A role whose body only issues elected work (acquire, tma_load, tma_store, arrive_expect_tx,
//!   and waits and arrivals on explicit barriers) runs on its first thread only; otherwise elected
//!   ops are guarded by `threadIdx.x == <first thread of the role>`.
//! * `for t in tiles` is `for (tile = blockIdx.x; tile < tiles; tile += gridDim.x)`, the axis
//!   indices decomposed with the last axis fastest — or, with `group G`, the last two axes walked
//!   in bands of G along the second-to-last (grouped rasterization, `GridSpec::rasterization`).
//! * `tma_store` is one elected `cp.async.bulk.tensor` shared → global per box (its own bulk
//!   group); `tma_store_wait(n)` = that thread's `cp.async.bulk.wait_group.read n`, then the role
//!   meets; a role that stores waits for all of them before it exits.
//! * Register fragments are C arrays indexed only by compile-time constants (fully unrolled
//!   loops); their thread layout is one of [`layout::Layout`]. An f16 accumulator of wgmma or
//!   mma_sync is held packed (two f16 per 32-bit register, as the instructions want it).
//! * Memory windows inside fragment expressions broadcast by NumPy rules (module `window`); a
//!   `let` of a window of an `in` tensor names it (each use reads it); a store of a value without
//!   a register layout is split round-robin over the threads that compute the same window.
//!
//! # Kernel parameter ABI (see [`ParamSpec`])
//! For each tensor in declaration order: its device pointer (`const T*` for `in`, `T*` otherwise),
//! followed, for a `tma` tensor, by `const __grid_constant__ CUtensorMap NAME_tmap`; then every
//! `dim` as `int`; then every `scalar` by value.
//!
//! # Source mapping
//! Every statement's code is preceded by `// cake: line L: <source line>` (with
//! [`LowerOptions::source`]; `// cake: bytes S..E` without), and [`Lowered::span_map`] maps every
//! generated line back to its statement's span. With [`LowerOptions::line_directives`] each such
//! line also gets a `#line L "file.cake"` so that NVRTC, ptxas and `-lineinfo` point at the
//! program.

pub mod launch;
mod barrier;
mod frag;
pub(crate) mod layout;
mod prelude;
pub mod registry;
mod sm80;
mod sm90;
mod window;
mod writer;

use std::collections::{BTreeSet, HashMap};

pub use launch::*;

use crate::diag::Diagnostic;
use crate::ir::*;
pub(crate) use crate::layout::size_multiple;
use crate::layout::KernelLayout;
use crate::ops::OpId;
use crate::span::Span;
use crate::syntax::ast::{BinOp, UnOp};
use crate::target::{TargetInfo, TargetTable};
use crate::verify::Validated;

use layout::Layout;
use prelude::Helper;
use writer::Writer;

/// A lowered kernel.
#[derive(Clone, Debug)]
pub struct Lowered {
    /// The CUDA C++ translation unit (deterministic: the same IR and options give the same bytes).
    pub cuda: String,
    /// The `extern "C"` entry symbol.
    pub entry: String,
    pub launch: LaunchSpec,
    /// (1-based CUDA line, span of the program construct it was lowered from).
    pub span_map: Vec<(u32, Span)>,
}

impl Lowered {
    /// The program span a CUDA line was lowered from.
    pub fn span_of_line(&self, line: u32) -> Option<Span> {
        self.span_map.iter().find(|(l, _)| *l == line).map(|(_, s)| *s)
    }
}

/// Why a module could not be lowered. `L001` and `L007` are "not supported yet"
/// ([`LowerStatus::NotSupportedYet`]); the others are limits the verifier's rules check first over
/// the shared layout, so only an unverified module (`assume_verified_unsafe`) gets them
/// (`tests/stage_consistency.rs` holds the lowering to that). Codes:
/// * `L001` construct not supported by the lowering yet (never emitted wrongly instead);
/// * `L002` block shape (threads per block);
/// * `L003` register budgets (`regs` / setmaxnreg);
/// * `L004` transaction bytes of an `acquire` cannot be derived statically;
/// * `L005` a TMA window that does not match the tensor's box;
/// * `L006` an operand address that cannot be proven aligned for its instruction;
/// * `L007` a fragment whose thread layout cannot be determined or does not match its use;
/// * `L008` a pipeline operation or `.stage` outside the pipeline's producer and consumer roles;
/// * `L009` a constant loop bound past the kernel's 32-bit `int`. A verified module can get this
///   one too: the verifier only stops its analysis of such a loop at its work bound (a coverage
///   limit, V955), and has no rule for the bound yet.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message} (at bytes {}..{})", span.start, span.end)]
pub struct LowerError {
    pub code: &'static str,
    pub message: String,
    pub span: Span,
    pub notes: Vec<String>,
    pub status: LowerStatus,
}

/// Why the lowering refused a program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LowerStatus {
    /// A construct the lowering cannot emit yet (`unsupported`, and every `L007`: no thread
    /// layout for a fragment use). Verified programs may hit these.
    NotSupportedYet,
    /// The program breaks a limit or contract. The verifier's rules over the shared layout cover
    /// these, so a verified program never gets one; an unverified one can.
    Refused,
}

impl LowerError {
    pub fn new(code: &'static str, message: impl Into<String>, span: Span) -> LowerError {
        let status = if code == "L007" { LowerStatus::NotSupportedYet } else { LowerStatus::Refused };
        LowerError { code, message: message.into(), span, notes: Vec::new(), status }
    }

    /// A fault of the derived register layouts (the verifier reports it as V230 / V231 first).
    pub(crate) fn from_fault(f: &crate::layout::regs::LayoutFault) -> LowerError {
        let mut e = LowerError { status: LowerStatus::NotSupportedYet, ..LowerError::new(f.lower_code, f.message.clone(), f.span) };
        e.notes.extend(f.note.clone());
        e
    }

    pub fn is_not_supported_yet(&self) -> bool {
        self.status == LowerStatus::NotSupportedYet
    }

    pub fn with_note(mut self, note: impl Into<String>) -> LowerError {
        self.notes.push(note.into());
        self
    }

    pub fn to_diagnostic(&self) -> Diagnostic {
        let mut d = Diagnostic::error(self.code, self.message.clone(), self.span, "cannot be lowered");
        for n in &self.notes {
            d = d.with_note(n.clone());
        }
        d
    }
}

fn unsupported(what: impl Into<String>, span: Span) -> LowerError {
    LowerError { status: LowerStatus::NotSupportedYet, ..LowerError::new("L001", format!("not supported by the lowering yet: {}", what.into()), span) }
}

/// A pipeline named outside the roles that track its stages: the type checker (E0322, `.stage`) and
/// the verifier (V418, the pipeline ops) reject it first, so only an unverified module gets here;
/// refused, never lowered with a stage index no role keeps.
fn outside_role(what: impl Into<String>, rule: &str, span: Span) -> LowerError {
    LowerError::new("L008", format!("{} ({rule} rejects this; the module was not verified)", what.into()), span)
}

/// The program text, for `// cake: line L` markers and `#line` directives.
#[derive(Clone, Copy, Debug)]
pub struct SourceRef<'a> {
    /// File name as it should appear in `#line` (`gemm_bf16_ws.cake`).
    pub name: &'a str,
    pub text: &'a str,
}

#[derive(Clone, Debug)]
pub struct LowerOptions<'a> {
    pub source: Option<SourceRef<'a>>,
    /// Precede each line lowered from a statement with `#line L "file.cake"` (needs `source`).
    pub line_directives: bool,
    /// The CUDA file's name (NVRTC program name; `#line` returns to it).
    pub cuda_name: String,
}

impl Default for LowerOptions<'_> {
    fn default() -> Self {
        LowerOptions { source: None, line_directives: false, cuda_name: "kernel.cu".to_string() }
    }
}

impl<'a> LowerOptions<'a> {
    /// Options with the program text (markers name `.cake` lines), no `#line`.
    pub fn with_source(name: &'a str, text: &'a str) -> LowerOptions<'a> {
        LowerOptions { source: Some(SourceRef { name, text }), ..LowerOptions::default() }
    }
}

/// Lower for the module's own target (from the built-in target table), without source text.
pub fn lower(v: &Validated) -> Result<Lowered, LowerError> {
    lower_with(v, &LowerOptions::default())
}

/// Lower for the module's own target with options.
pub fn lower_with(v: &Validated, opts: &LowerOptions<'_>) -> Result<Lowered, LowerError> {
    let m = v.module();
    let target = TargetTable::builtin()
        .get(&m.target)
        .ok_or_else(|| LowerError::new("L001", format!("unknown target `{}`", m.target), Span::default()))?;
    lower_for(v, target, opts)
}

/// Lower for an explicit target (compile-checking a program on another architecture). The
/// caller checks that the target has every op the program uses (`nvrtc::build` does).
pub fn lower_for(v: &Validated, target: &TargetInfo, opts: &LowerOptions<'_>) -> Result<Lowered, LowerError> {
    Lw::new(v.module(), v.layout(), target, opts).run()
}

// ---------------------------------------------------------------------------------------------
// Plans

/// A shared region, or a view of one (after all regions, in declaration order): each gets its own
/// 32-bit address constant.
struct RegionPlan {
    name: String,
    /// C name of the 32-bit shared address.
    addr: String,
    offset: u64,
    align: u64,
    /// What the address constant's comment says (type, stages, swizzle; for a view, its region).
    what: String,
}

struct PipePlan {
    full: String,
    empty: String,
    full_off: u64,
    empty_off: u64,
    stages: u32,
    /// Arrivals per phase on each empty barrier.
    empty_count: u32,
    /// Whether the consumer's unit is a warp (else a warpgroup).
    consumer_warps: bool,
}

/// An explicit barrier: `stages` mbarriers of 8 bytes from `off`, initialised with `count`.
struct BarPlan {
    /// C name of the first mbarrier's 32-bit shared address.
    addr: String,
    off: u64,
    count: u32,
}

/// Per-role, per-pipeline state variable names.
#[derive(Clone)]
struct PipeState {
    stage: String,
    phase: String,
    release: String,
}

struct RoleCx {
    h: Handle<RoleDecl>,
    /// The body runs on the role's first thread only.
    single_thread: bool,
    /// C condition selecting the role's elected thread.
    leader: String,
    /// The role reads shared memory with ordinary loads (so `release` meets on a named barrier).
    generic_smem_reads: bool,
    pipes: HashMap<Handle<PipelineDecl>, PipeState>,
    /// Per explicit barrier this role `wait`s on: the name of its phase bits (bit s: the parity
    /// of the role's next wait on stage s).
    bar_phase: HashMap<Handle<BarrierDecl>, String>,
    wgmma_accs: Vec<Handle<Local>>,
    /// Base id of the per-warpgroup named barriers used before a release.
    release_bar_base: u32,
}

pub(crate) struct Lw<'a> {
    m: &'a Module,
    layout: &'a KernelLayout,
    target: &'a TargetInfo,
    opts: &'a LowerOptions<'a>,
    w: Writer,
    helpers: BTreeSet<Helper>,
    user_names: BTreeSet<String>,
    regions: Vec<RegionPlan>,
    pipes: Vec<PipePlan>,
    bars: Vec<BarPlan>,
    smem_slots: Vec<SmemSlot>,
    layouts: HashMap<Handle<Local>, Layout>,
    /// f16 accumulators of wgmma / mma_sync: held packed, two f16 per 32-bit register (element i
    /// of the layout in register i / 2, the even element in the lower half).
    packed: std::collections::HashSet<Handle<Local>>,
    /// `let` names of read-only windows (and math on them): read where they are used.
    aliases: HashMap<Handle<Local>, Handle<Expr>>,
    /// Per `let` name of window math: the whole-held register fragments its value reads and the C
    /// arrays that keep their values at the `let` (see [`Lw::enter_alias`]).
    alias_snapshots: HashMap<Handle<Local>, Vec<(Handle<Local>, String)>>,
    /// `let` names of scalars (`let r = t.r * 8 + rows.warp * 2 + i`), with their values: which
    /// threads share a window indexed by one depends on what the value reads (`rows.warp`).
    scalar_lets: HashMap<Handle<Local>, Handle<Expr>>,
    /// Inside a layout-free store: the C temporaries holding the current element of each name.
    alias_temps: HashMap<Handle<Local>, String>,
    /// Inside a layout-free store or reduction: the C arrays of the reductions its value contains
    /// (each computed before the element loop, one value every thread holds).
    flat_reductions: Vec<(Handle<Expr>, String)>,
    /// Inside a vectorized element loop: the global windows loaded whole vectors at a time (C
    /// name of the vector register) and the loop's shape (see `Lw::begin_elements`).
    vector_reads: Vec<(Handle<Expr>, String)>,
    element_loop: Option<window::ElementLoop>,
    /// How many copies of the current statement unrolling the enclosing loops makes (1 outside
    /// unrolled loops): the element loops size their own unrolling by it.
    unrolled_copies: i64,
    local_names: HashMap<Handle<Local>, String>,
    scale_flags: HashMap<Handle<Local>, String>,
    tile_axes: HashMap<Handle<Local>, Vec<String>>,
    role: Option<RoleCx>,
    tmp: u32,
    /// wgmma.fence state: true when no register access happened since the last wgmma.
    wg_fenced: bool,
    /// Pipelines acquired in the enclosing blocks (for checking tma_load is covered).
    acquired: Vec<Vec<Handle<PipelineDecl>>>,
    /// Row extrema in scope: `let m = reduce_min(x, axis=1)` (or `reduce_max`) of a `let` fragment
    /// `x`, so that a later `reduce_argmin(x, axis=1)` (`reduce_argmax`) in the same or an inner
    /// block starts from `m` instead of reducing the row again. Entries leave with their block.
    row_extrema: Vec<frag::RowExtremum>,
    /// Tensors whose element strides the kernel needs.
    strides_needed: BTreeSet<usize>,
    tile_count: String,
    tile_extents: Vec<String>,
    thread_count: u32,
}

const CXX_RESERVED: &[&str] = &[
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char",
    "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr", "constinit",
    "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete", "do", "double",
    "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if",
    "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or",
    "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "requires", "return", "short", "signed",
    "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local", "throw",
    "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
    "wchar_t", "while", "xor", "xor_eq", "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "dim3", "min",
    "max", "float2", "float4", "int2", "int4", "uint2", "uint4", "main", "CUtensorMap",
];

/// A program identifier as a C identifier that cannot collide with C++ keywords, CUDA built-ins
/// or the compiler's own `cake_` names.
fn c_ident(name: &str) -> String {
    if CXX_RESERVED.contains(&name) || name.starts_with("cake_") || name.starts_with("__") || name.starts_with('_') {
        format!("u_{name}")
    } else {
        name.to_string()
    }
}

impl<'a> Lw<'a> {
    fn new(m: &'a Module, layout: &'a KernelLayout, target: &'a TargetInfo, opts: &'a LowerOptions<'a>) -> Lw<'a> {
        let mut user_names = BTreeSet::new();
        let mut add = |n: &str| {
            user_names.insert(c_ident(n));
        };
        m.dims.iter().for_each(|(_, d)| add(&d.name));
        m.consts.iter().for_each(|(_, d)| add(&d.name));
        m.scalars.iter().for_each(|(_, d)| add(&d.name));
        m.tensors.iter().for_each(|(_, d)| add(&d.name));
        m.smem.iter().for_each(|(_, d)| add(&d.name));
        m.views.iter().for_each(|(_, d)| add(&d.name));
        m.roles.iter().for_each(|(_, d)| add(&d.name));
        m.barriers.iter().for_each(|(_, d)| add(&d.name));
        m.pipelines.iter().for_each(|(_, d)| add(&d.name));
        m.locals.iter().for_each(|(_, d)| add(&d.name));
        for (_, g) in m.grid.iter() {
            add(&g.name);
            g.axes.iter().for_each(|a| add(&a.name));
        }
        Lw {
            m,
            layout,
            target,
            opts,
            w: Writer::default(),
            helpers: BTreeSet::new(),
            user_names,
            regions: Vec::new(),
            pipes: Vec::new(),
            bars: Vec::new(),
            smem_slots: Vec::new(),
            layouts: HashMap::new(),
            packed: std::collections::HashSet::new(),
            aliases: HashMap::new(),
            alias_snapshots: HashMap::new(),
            scalar_lets: HashMap::new(),
            alias_temps: HashMap::new(),
            flat_reductions: Vec::new(),
            vector_reads: Vec::new(),
            element_loop: None,
            unrolled_copies: 1,
            local_names: HashMap::new(),
            scale_flags: HashMap::new(),
            tile_axes: HashMap::new(),
            role: None,
            tmp: 0,
            wg_fenced: false,
            acquired: Vec::new(),
            row_extrema: Vec::new(),
            strides_needed: BTreeSet::new(),
            tile_count: String::new(),
            tile_extents: Vec::new(),
            thread_count: 0,
        }
    }

    /// A compiler-derived name: `candidate` unless a program identifier already has it.
    fn derived(&self, candidate: &str) -> String {
        let mut c = candidate.to_string();
        while self.user_names.contains(&c) {
            c.push('_');
        }
        c
    }

    fn fresh(&mut self, stem: &str) -> String {
        self.tmp += 1;
        format!("cake_{stem}{}", self.tmp)
    }

    fn need(&mut self, h: Helper) {
        self.helpers.insert(h);
    }

    /// The `cake_fence_regs` overload for a fragment's register type.
    fn need_fence_regs(&mut self, l: Handle<Local>) {
        self.need(if self.packed.contains(&l) { Helper::FenceRegsU32 } else { Helper::FenceRegs });
    }

    fn sm90(&self) -> bool {
        self.target.has("mbarrier_tx")
    }

    fn stmt_span(&self, s: Handle<Stmt>) -> Span {
        *self.m.stmts.span(s)
    }

    fn expr_span(&self, e: Handle<Expr>) -> Span {
        *self.m.exprs.span(e)
    }

    // -----------------------------------------------------------------------------------------
    // Driver

    fn run(mut self) -> Result<Lowered, LowerError> {
        let m = self.m;
        let entry = c_ident(&m.name);
        self.thread_count = m.threads_per_block();
        if self.thread_count == 0 {
            return Err(unsupported("a kernel without roles", Span::default()));
        }
        if self.thread_count > self.target.max_threads_per_block {
            return Err(LowerError::new(
                "L002",
                format!("{} threads per block exceed the target's {}", self.thread_count, self.target.max_threads_per_block),
                m.roles.iter().next().map(|(h, _)| m.roles.span(h).item).unwrap_or_default(),
            ));
        }
        self.check_unsupported_decls()?;
        self.plan_smem();
        self.plan_pipes()?;
        self.plan_grid();

        // The body first (it decides which helpers and strides are needed), then the prologue.
        self.roles()?;
        let body = std::mem::take(&mut self.w);
        self.prologue()?;
        let prologue = std::mem::take(&mut self.w);

        let signature = self.signature(&entry);
        let launch = self.launch_spec(&entry);

        let mut out = Writer::default();
        self.header(&mut out, &launch);
        // Helpers (fixed order). The tensor-map type first: helpers use it.
        if self.m.tensors.iter().any(|(_, t)| t.tma.is_some()) {
            self.helpers.insert(Helper::TensorMapType);
        }
        for h in &self.helpers {
            out.line(prelude::text(*h));
        }
        out.line(format!("extern \"C\" __global__ void __launch_bounds__({}, 1)", self.thread_count));
        out.line(format!("{entry}({})", signature.join(",\n    ")).replace("(\n", "("));
        out.open("{");
        let mut pro = prologue;
        let mut bod = body;
        indent_lines(&mut pro, 1);
        indent_lines(&mut bod, 1);
        out.append(pro);
        out.append(bod);
        out.close("}");
        let (cuda, span_map) = writer::render(&out.lines, self.opts);
        Ok(Lowered { cuda, entry, launch, span_map })
    }

    fn header(&self, out: &mut Writer, launch: &LaunchSpec) {
        let m = self.m;
        let file = self.opts.source.map(|s| format!(" from `{}`", s.name)).unwrap_or_default();
        let arch = if self.target.arch == m.target { String::new() } else { format!(", built for {}", self.target.arch) };
        out.line(format!("// Generated by cake{file}: kernel `{}`, target {}{arch}. Do not edit.", m.name, m.target));
        out.line(format!(
            "// Launch: {} threads per block, {} bytes of dynamic shared memory, grid {}.",
            launch.block_threads,
            launch.dynamic_smem_bytes,
            if launch.grid.persistent {
                format!("= one block per SM (persistent over {} tiles)", launch.grid.tiles_text)
            } else {
                format!("= {} blocks (one per tile)", launch.grid.tiles_text)
            }
        ));
        let params: Vec<String> = launch
            .params
            .iter()
            .map(|p| match p {
                ParamSpec::TensorPtr { name, dtype, .. } => format!("{name} ({dtype}*)"),
                ParamSpec::TensorMap { name, .. } => format!("{name} (CUtensorMap)"),
                ParamSpec::Dim { name, .. } => format!("{name} (int)"),
                ParamSpec::Scalar { name, dtype, .. } => format!("{name} ({dtype})"),
            })
            .collect();
        out.line(format!("// Parameters: {}.", params.join(", ")));
        out.line("// No CUDA header is included: the helpers below wrap one PTX form each.");
        out.blank();
    }

    fn check_unsupported_decls(&self) -> Result<(), LowerError> {
        let m = self.m;
        for (h, g) in m.grid.iter() {
            if g.cluster.iter().any(|c| *c != 1) {
                return Err(unsupported("clusters", m.grid.span(h).attr("cluster")));
            }
        }
        if m.grid.len() > 1 {
            let h = m.grid.handles().nth(1).expect("two grids");
            return Err(unsupported("more than one tile space", m.grid.span(h).item));
        }
        // Roles must not overlap (the dispatch is one if/else chain).
        let roles: Vec<_> = m.roles.iter().collect();
        for (i, (ha, a)) in roles.iter().enumerate() {
            for (_, b) in roles.iter().skip(i + 1) {
                let (ra, rb) = (a.warps(), b.warps());
                if ra.start < rb.end && rb.start < ra.end {
                    return Err(LowerError::new(
                        "L001",
                        format!("roles `{}` and `{}` share warps", a.name, b.name),
                        m.roles.span(*ha).item,
                    ));
                }
            }
        }
        Ok(())
    }

    /// Address constants of the regions and views, at the offsets of the derived layout.
    fn plan_smem(&mut self) {
        let (m, layout) = (self.m, self.layout);
        for (h, s) in m.smem.iter() {
            let slot = layout.region(h);
            let addr = self.derived(&format!("smem_{}", c_ident(&s.name)));
            self.smem_slots.push(SmemSlot { name: s.name.clone(), kind: "region".into(), offset: slot.offset, bytes: slot.bytes, align: slot.align });
            let shape: Vec<String> = s.shape.iter().map(|d| d.to_string()).collect();
            let mut what = format!("{}[{}]", s.dtype, shape.join(", "));
            if s.stages > 1 {
                what += &format!(" x {} stages of {} bytes", s.stages, slot.stage_bytes);
            }
            if s.swizzle != Swizzle::None {
                what += &format!(", swizzle {}B", s.swizzle.bytes());
            }
            self.regions.push(RegionPlan { name: s.name.clone(), addr, offset: slot.offset, align: slot.align, what });
        }
        for (vh, v) in m.views.iter() {
            let slot = layout.view(vh);
            let region = &m.smem[v.region];
            let shape: Vec<String> = v.shape.iter().map(|d| d.to_string()).collect();
            let mut what = format!("{}[{}], view of `{}` at byte {}", v.dtype, shape.join(", "), region.name, v.offset);
            if v.swizzle != Swizzle::None {
                what += &format!(", swizzle {}B", v.swizzle.bytes());
            }
            self.smem_slots.push(SmemSlot { name: v.name.clone(), kind: format!("view of {}", region.name), offset: slot.offset, bytes: slot.bytes, align: slot.align });
            let addr = self.derived(&format!("smem_{}", c_ident(&v.name)));
            self.regions.push(RegionPlan { name: v.name.clone(), addr, offset: slot.offset, align: slot.align, what });
        }
    }

    /// Address constants of the derived mbarriers, at the offsets of the derived layout.
    fn plan_pipes(&mut self) -> Result<(), LowerError> {
        let (m, layout) = (self.m, self.layout);
        for (h, p) in m.pipelines.iter() {
            if !self.target.has("mbarrier") {
                return Err(unsupported("pipelines on a target without mbarriers", m.pipelines.span(h).item));
            }
            let slot = layout.pipeline(h);
            let consumer_warps = m.roles[p.consumer].unit == RoleUnit::Warp;
            let name = c_ident(&p.name);
            let full = self.derived(&format!("{name}_full"));
            let empty = self.derived(&format!("{name}_empty"));
            let bytes = 8 * u64::from(p.stages);
            self.smem_slots.push(SmemSlot { name: format!("{}.full", p.name), kind: "mbarrier".into(), offset: slot.full, bytes, align: 8 });
            self.smem_slots.push(SmemSlot { name: format!("{}.empty", p.name), kind: "mbarrier".into(), offset: slot.empty, bytes, align: 8 });
            self.pipes.push(PipePlan {
                full,
                empty,
                full_off: slot.full,
                empty_off: slot.empty,
                stages: p.stages,
                empty_count: slot.empty_arrivals,
                consumer_warps,
            });
        }
        for ((h, b), slot) in m.barriers.iter().zip(&layout.barriers) {
            if !self.target.has("mbarrier") {
                return Err(unsupported("barriers on a target without mbarriers", m.barriers.span(h).item));
            }
            if b.stages > 32 {
                return Err(unsupported(format!("barrier `{}` with more than 32 stages", b.name), m.barriers.span(h).attr("stages")));
            }
            let addr = self.derived(&format!("{}_bar", c_ident(&b.name)));
            let bytes = 8 * u64::from(b.stages);
            self.smem_slots.push(SmemSlot { name: b.name.clone(), kind: "mbarrier".into(), offset: slot.offset, bytes, align: 8 });
            self.bars.push(BarPlan { addr, off: slot.offset, count: b.count });
        }
        Ok(())
    }

    /// Bytes of the shared-memory layout itself (regions and mbarriers, no base slack).
    fn layout_bytes(&self) -> u64 {
        self.layout.smem_bytes - self.layout.base_slack
    }

    fn plan_grid(&mut self) {
        // (`group` only reorders the walk; see the `ForTiles` lowering.)
        let Some(g) = self.m.grid() else {
            self.tile_count = "1".into();
            return;
        };
        let gname = c_ident(&g.name);
        self.tile_extents = g.axes.iter().map(|a| self.derived(&format!("{gname}_{}", c_ident(&a.name)))).collect();
        self.tile_count = self.derived(&format!("{gname}_count"));
    }

    fn signature(&self, _entry: &str) -> Vec<String> {
        let m = self.m;
        let mut params = Vec::new();
        for (_, t) in m.tensors.iter() {
            let cty = layout::mem_ctype(t.dtype);
            let name = c_ident(&t.name);
            let constness = if t.access == crate::syntax::ast::Access::In { "const " } else { "" };
            params.push(format!("{constness}{cty}* __restrict__ {name}"));
            if t.tma.is_some() {
                params.push(format!("const __grid_constant__ CUtensorMap {}", self.tmap_name(&t.name)));
            }
        }
        for (_, d) in m.dims.iter() {
            params.push(format!("const int {}", c_ident(&d.name)));
        }
        for (_, s) in m.scalars.iter() {
            let cty = match s.dtype {
                DType::BF16 | DType::F16 => "unsigned short",
                DType::Bool => "bool",
                d => layout::scalar_ctype(d).unwrap_or("unsigned char"),
            };
            params.push(format!("const {cty} {}", c_ident(&s.name)));
        }
        params
    }

    fn tmap_name(&self, tensor: &str) -> String {
        self.derived(&format!("{}_tmap", c_ident(tensor)))
    }

    fn prologue(&mut self) -> Result<(), LowerError> {
        let m = self.m;
        if self.layout_bytes() > 0 {
            self.need(Helper::SmemU32);
            if self.layout.base_slack > 0 {
                self.w.line(format!(
                    "// Shared memory: {} bytes laid out from a 1024-byte aligned base (the launch adds 1024 bytes of slack).",
                    self.layout_bytes()
                ));
                // Declared with a modest alignment on purpose: the round-up below must stay a
                // run-time computation (a 1024 declared here would let the compiler assume it).
                self.w.line("extern __shared__ __align__(16) unsigned char cake_smem_raw[];");
                self.w.line("unsigned char* const cake_smem = (unsigned char*)(((unsigned long long)cake_smem_raw + 1023ull) & ~1023ull);");
            } else {
                self.w.line(format!(
                    "// Shared memory: {} bytes; only ordinary loads and stores (and cp.async) touch it, which apply the swizzle to offsets themselves.",
                    self.layout_bytes()
                ));
                self.w.line("extern __shared__ __align__(16) unsigned char cake_smem_raw[];");
                self.w.line("unsigned char* const cake_smem = cake_smem_raw;");
            }
            self.w.line("const unsigned cake_smem_base = cake_smem_u32(cake_smem);");
            for r in &self.regions {
                self.w.line(format!("const unsigned {} = cake_smem_base + {}u;  // {}: {}, align {}", r.addr, r.offset, r.name, r.what, r.align));
            }
            for (i, (_, p)) in m.pipelines.iter().enumerate() {
                let pp = &self.pipes[i];
                self.w.line(format!(
                    "const unsigned {} = cake_smem_base + {}u;  // pipeline {}: {} full mbarriers",
                    pp.full, pp.full_off, p.name, p.stages
                ));
                self.w.line(format!(
                    "const unsigned {} = cake_smem_base + {}u;  // pipeline {}: {} empty mbarriers",
                    pp.empty, pp.empty_off, p.name, p.stages
                ));
            }
            for (i, (_, b)) in m.barriers.iter().enumerate() {
                let bp = &self.bars[i];
                let what = if b.stages > 1 { format!("{} mbarriers", b.stages) } else { "mbarrier".to_string() };
                self.w.line(format!("const unsigned {} = cake_smem_base + {}u;  // barrier {}: {what}", bp.addr, bp.off, b.name));
            }
        }
        self.w.line("// Warp identity (the shuffle makes the warp index visibly warp-uniform).");
        self.w.line("const int cake_warp = __shfl_sync(0xffffffffu, (int)(threadIdx.x / 32), 0);");
        self.w.line("const int cake_lane = (int)(threadIdx.x % 32);");
        if let Some(g) = m.grid() {
            let gspan = m.grid.span(m.grid.handles().next().expect("grid")).item;
            let prev = self.w.set_span(Some(gspan));
            let order = match g.group {
                Some(gs) if g.axes.len() >= 2 => format!("tile space, walked in bands of {gs} along `{}`", g.axes[g.axes.len() - 2].name),
                _ => "tile space, last axis fastest".to_string(),
            };
            self.w.marker(gspan, self.opts, &order);
            for (a, ext) in g.axes.iter().zip(self.tile_extents.clone()) {
                let e = size_c(m, &a.extent);
                self.w.line(format!("const int {ext} = {e};"));
            }
            let prod = if self.tile_extents.is_empty() { "1".to_string() } else { self.tile_extents.join(" * ") };
            self.w.line(format!("const int {} = {prod};", self.tile_count));
            self.w.set_span(prev);
        }
        for ti in self.strides_needed.clone() {
            let t = &m.tensors[m.tensors.handles().nth(ti).expect("tensor")];
            let name = c_ident(&t.name);
            for d in 0..t.shape.len().saturating_sub(1) {
                let prod: Vec<String> = t.shape[d + 1..].iter().map(|s| format!("(long long)({})", size_c(m, s))).collect();
                self.w.line(format!("const long long {} = {};  // elements between {name}[i, ...] and [i + 1, ...] on dim {d}", self.stride_name(ti, d), prod.join(" * ")));
            }
        }
        if !m.pipelines.is_empty() || !m.barriers.is_empty() {
            self.need(Helper::MbarInit);
            let what = match (m.pipelines.is_empty(), m.barriers.is_empty()) {
                (false, true) => "Pipeline barriers",
                (true, false) => "Barriers",
                _ => "Pipeline and explicit barriers",
            };
            self.w.line(format!("// {what}, initialised by one thread before any role starts."));
            self.w.open("if (threadIdx.x == 0) {");
            for (i, (h, p)) in m.pipelines.iter().enumerate() {
                let pp = &self.pipes[i];
                let span = m.pipelines.span(h).item;
                let prev = self.w.set_span(Some(span));
                self.w.marker(span, self.opts, "");
                let cons = &m.roles[p.consumer];
                self.w.line(format!(
                    "// full: 1 arrival (the producer's arrive.expect_tx) + the TMA bytes; empty: {} arrival{} (one elected thread per consumer {} of `{}`)",
                    pp.empty_count,
                    if pp.empty_count == 1 { "" } else { "s" },
                    if pp.consumer_warps { "warp" } else { "warpgroup" },
                    cons.name
                ));
                self.w.line("#pragma unroll");
                self.w.open(format!("for (int cake_s = 0; cake_s < {}; ++cake_s) {{", pp.stages));
                self.w.line(format!("cake_mbar_init({} + 8 * cake_s, 1);", pp.full));
                self.w.line(format!("cake_mbar_init({} + 8 * cake_s, {});", pp.empty, pp.empty_count));
                self.w.close("}");
                self.w.set_span(prev);
            }
            for (i, (h, b)) in m.barriers.iter().enumerate() {
                let (addr, count) = (self.bars[i].addr.clone(), self.bars[i].count);
                let span = m.barriers.span(h).item;
                let prev = self.w.set_span(Some(span));
                self.w.marker(span, self.opts, "");
                let arrivals = format!("{count} arrival{} per phase", if count == 1 { "" } else { "s" });
                if b.stages > 1 {
                    self.w.line("#pragma unroll");
                    self.w.line(format!(
                        "for (int cake_s = 0; cake_s < {}; ++cake_s) cake_mbar_init({addr} + 8 * cake_s, {count});  // {arrivals}",
                        b.stages
                    ));
                } else {
                    self.w.line(format!("cake_mbar_init({addr}, {count});  // {arrivals}"));
                }
                self.w.set_span(prev);
            }
            if self.sm90() {
                self.need(Helper::FenceMbarrierInit);
                self.need(Helper::FenceProxyAsync);
                self.w.line("cake_fence_mbarrier_init();");
                self.w.line("cake_fence_proxy_async();");
            }
            self.w.close("}");
            self.w.line("__syncthreads();");
        }
        Ok(())
    }

    fn stride_name(&self, tensor_index: usize, dim: usize) -> String {
        let t = &self.m.tensors[self.m.tensors.handles().nth(tensor_index).expect("tensor")];
        self.derived(&format!("{}_stride{dim}", c_ident(&t.name)))
    }

    // -----------------------------------------------------------------------------------------
    // Roles

    fn roles(&mut self) -> Result<(), LowerError> {
        let m = self.m;
        let mut roles: Vec<(Handle<RoleDecl>, &RoleDecl)> = m.roles.iter().collect();
        roles.sort_by_key(|(_, r)| r.warps().start);
        let launch_cap = self.layout.launch_regs;
        let single = roles.len() == 1 && roles[0].1.warps().start == 0;
        let mut release_bar_next = 1 + m.roles.len() as u32;
        for (k, (h, r)) in roles.iter().enumerate() {
            let span = m.roles.span(*h).item;
            let ws = r.warps();
            let cond = if ws.start == 0 { format!("cake_warp < {}", ws.end) } else { format!("cake_warp >= {} && cake_warp < {}", ws.start, ws.end) };
            let unit = match (r.unit, r.count) {
                (RoleUnit::Warpgroup, 1) => format!("warpgroup {}", r.first),
                (RoleUnit::Warpgroup, _) => format!("warpgroups {}..{}", r.first, r.first + r.count),
                (RoleUnit::Warp, 1) => format!("warp {}", r.first),
                (RoleUnit::Warp, _) => format!("warps {}..{}", r.first, r.first + r.count),
            };
            let prev = self.w.set_span(Some(span));
            if !single {
                let kw = if k == 0 { "if" } else { "} else if" };
                if k > 0 {
                    self.w.reopen(format!("{kw} ({cond}) {{"));
                } else {
                    self.w.open(format!("{kw} ({cond}) {{"));
                }
            }
            self.w.marker(span, self.opts, &format!("role `{}`: {unit}, {} threads", r.name, r.threads()));
            if let Some(regs) = r.regs {
                self.setmaxnreg(*h, r, regs, launch_cap)?;
            }
            let body = m.body_of(*h);
            if let Some(body) = body {
                let bspan = *m.bodies.span(m.bodies.handles().find(|b| m.bodies[*b].role == *h).expect("body"));
                let n_wg = (ws.end - ws.start).div_ceil(4);
                let release_bar_base = release_bar_next;
                if r.unit == RoleUnit::Warpgroup {
                    release_bar_next += n_wg;
                }
                self.role_body(*h, r, &body.block, bspan, release_bar_base)?;
            } else {
                self.w.line("// no body: the role's threads have nothing to do");
            }
            self.w.set_span(prev);
        }
        if !single && !roles.is_empty() {
            self.w.close("}");
        }
        if release_bar_next > 16 {
            return Err(LowerError::new("L001", "more than 16 named barriers needed", Span::default()));
        }
        Ok(())
    }

    fn setmaxnreg(&mut self, h: Handle<RoleDecl>, r: &RoleDecl, regs: u32, cap: u32) -> Result<(), LowerError> {
        let span = self.m.roles.span(h).attr("regs");
        if !self.target.has("setmaxnreg") {
            return Err(LowerError::new(
                "L003",
                format!("role `{}` has a register budget but target {} has no setmaxnreg", r.name, self.target.name),
                span,
            ));
        }
        if !(24..=256).contains(&regs) || regs % 8 != 0 {
            return Err(LowerError::new("L003", format!("register budget {regs} is not a multiple of 8 in 24..=256"), span));
        }
        let ws = r.warps();
        if ws.start % 4 != 0 || ws.end % 4 != 0 {
            return Err(LowerError::new(
                "L003",
                format!("role `{}` has a register budget but does not cover whole warpgroups (setmaxnreg is warpgroup-wide)", r.name),
                span,
            ));
        }
        if regs == cap {
            self.w.line(format!("// regs {regs}: the launch allocation already ({cap} per thread); no setmaxnreg"));
            return Ok(());
        }
        let (dir, what) = if regs < cap { ("dec", "give back") } else { ("inc", "take") };
        self.w.line(format!("// regs {regs}: {what} registers (launch cap {cap} per thread)"));
        self.w.line(format!("asm volatile(\"setmaxnreg.{dir}.sync.aligned.u32 {regs};\" ::: \"memory\");"));
        Ok(())
    }

    fn role_body(
        &mut self,
        h: Handle<RoleDecl>,
        r: &RoleDecl,
        block: &Block,
        _span: Span,
        release_bar_base: u32,
    ) -> Result<(), LowerError> {
        let m = self.m;
        let ws = r.warps();
        let single_thread = self.is_elected_only(block);
        let leader = if single_thread { "true".to_string() } else { format!("threadIdx.x == {}", ws.start * 32) };
        let mut generic_smem_reads = false;
        let mut wgmma_accs = Vec::new();
        let mut used_fields = BTreeSet::new();
        self.scan_block(block, &mut |lw: &Lw, s: &Stmt| {
            lw.stmt_exprs(s, &mut |e| {
                if let ExprKind::Index { base, .. } = &m.exprs[e].kind {
                    let _ = base;
                }
                if let ExprKind::Field { base, field } = &m.exprs[e].kind {
                    if let ExprKind::Role(rh) = m.exprs[*base].kind {
                        used_fields.insert((rh.index(), format!("{field:?}")));
                    }
                }
            });
            if let Stmt::Op(call) = s {
                if call.op == "wgmma" {
                    if let Some(Some(a)) = call.args.first() {
                        if let ExprKind::Local(l) = m.exprs[*a].kind {
                            if !wgmma_accs.contains(&l) {
                                wgmma_accs.push(l);
                            }
                        }
                    }
                }
            }
            if lw.stmt_reads_smem_generic(s) {
                generic_smem_reads = true;
            }
        });
        self.layouts_for_body(block)?;

        // Role fields used by the body.
        let rname = c_ident(&r.name);
        for (ri, f) in &used_fields {
            if *ri != h.index() {
                let other = &m.roles[m.roles.handles().nth(*ri).expect("role")];
                return Err(unsupported(format!("reading fields of role `{}` from role `{}`", other.name, r.name), m.roles.span(h).item));
            }
            let (name, value, what) = match f.as_str() {
                "Warpgroup" => (
                    self.derived(&format!("{rname}_warpgroup")),
                    format!("cake_warp / 4 - {}", ws.start / 4),
                    "warpgroup index within the role",
                ),
                "Warp" => (self.derived(&format!("{rname}_warp")), format!("cake_warp - {}", ws.start), "warp index within the role"),
                _ => (self.derived(&format!("{rname}_lane")), "cake_lane".to_string(), "lane"),
            };
            let value = value.replace(" - 0", "");
            self.w.line(format!("const int {name} = {value};  // {}.{}: {what}", r.name, f.to_lowercase()));
        }
        if used_fields.iter().any(|(_, f)| f == "Warpgroup") && r.unit == RoleUnit::Warp && (ws.start % 4 != 0 || ws.end % 4 != 0) {
            return Err(unsupported("`.warpgroup` of a warp role that does not cover whole warpgroups", m.roles.span(h).item));
        }

        if single_thread {
            let mut ops: Vec<String> = Vec::new();
            self.scan_block(block, &mut |_, s| {
                if let Stmt::Op(c) = s {
                    if !ops.contains(&c.op) {
                        ops.push(c.op.clone());
                    }
                }
            });
            self.w.line(format!("// Everything this role does is issued by one thread ({}): only the first runs the body.", ops.join(", ")));
            self.w.open(format!("if (cake_lane == 0 && cake_warp == {}) {{", ws.start));
        }
        // Pipeline state.
        let mut pipes = HashMap::new();
        for (ph, p) in m.pipelines.iter() {
            let producer = p.producer == h;
            let consumer = p.consumer == h;
            if !producer && !consumer {
                continue;
            }
            let pn = c_ident(&p.name);
            let st = PipeState {
                stage: self.derived(&format!("{pn}_stage")),
                phase: self.derived(&format!("{pn}_phase")),
                release: self.derived(&format!("{pn}_release")),
            };
            let role_kind = if producer { "producer" } else { "consumer" };
            self.w.line(format!(
                "int {} = {}; unsigned {} = 1u;  // {role_kind} position in pipeline {}: the first {} takes stage 0, phase 0",
                st.stage,
                p.stages - 1,
                st.phase,
                p.name,
                if producer { "acquire" } else { "wait" }
            ));
            if consumer {
                self.w.line(format!("int {} = 0;  // the stage the next release hands back (FIFO)", st.release));
            }
            pipes.insert(ph, st);
        }
        let bar_phase = self.barrier_state(block)?;
        // Tensor maps this role loads through: into the descriptor cache before the first copy.
        let mut maps: Vec<usize> = Vec::new();
        self.scan_block(block, &mut |lw, s| {
            if let Stmt::Op(c) = s {
                let map_arg = match c.op.as_str() {
                    "tma_load" => Some(1),
                    "tma_store" => Some(0),
                    _ => None,
                };
                if let Some(i) = map_arg {
                    if let Some(src) = c.args.get(i).copied().flatten() {
                        lw.walk_expr(src, &mut |e| {
                            if let ExprKind::Tensor(t) = lw.m.exprs[e].kind {
                                if !maps.contains(&t.index()) {
                                    maps.push(t.index());
                                }
                            }
                        });
                    }
                }
            }
        });
        if !maps.is_empty() {
            self.need(Helper::PrefetchTensorMap);
            let names: Vec<String> = maps
                .iter()
                .map(|i| {
                    let t = &m.tensors[m.tensors.handles().nth(*i).expect("tensor")];
                    format!("cake_prefetch_tensormap(&{});", self.tmap_name(&t.name))
                })
                .collect();
            if single_thread {
                self.w.line(names.join(" "));
            } else {
                self.w.line(format!("if ({leader}) {{ {} }}", names.join(" ")));
            }
        }
        self.role = Some(RoleCx { h, single_thread, leader: leader.clone(), generic_smem_reads, pipes, bar_phase, wgmma_accs, release_bar_base });
        self.wg_fenced = false;
        self.acquired = vec![Vec::new()];
        self.block(block)?;
        if crate::layout::block_has(self.m, block, &|c| c.op == "tma_store") {
            // The block must not exit while a TMA store may still read its shared memory.
            let call = "cake_tma_store_wait_all();  // every TMA store of this role has completed before the block exits";
            if single_thread {
                self.w.line(call);
            } else {
                self.w.line(format!("if ({leader}) {call}"));
            }
        }
        self.acquired.clear();
        self.role = None;
        if single_thread {
            self.w.close("}");
        }
        Ok(())
    }

    /// Whether a role body issues only elected work, so one thread can run it. Waits and
    /// arrivals on explicit barriers may accompany it: the role's other threads would have
    /// nothing to order.
    fn is_elected_only(&self, block: &Block) -> bool {
        block.stmts.iter().all(|s| match &self.m.stmts[*s] {
            Stmt::Op(c) => match c.op.as_str() {
                "acquire" | "tma_load" | "arrive_expect_tx" | "wait_parity" | "tma_store" | "tma_store_wait" => true,
                "wait" | "arrive" => c.args.first().copied().flatten().is_some_and(|e| self.is_barrier_expr(e)),
                _ => false,
            },
            Stmt::For { body, .. } | Stmt::ForTiles { body, .. } => self.is_elected_only(body),
            Stmt::If { then_block, else_block, .. } => {
                self.is_elected_only(then_block) && else_block.as_ref().is_none_or(|b| self.is_elected_only(b))
            }
            Stmt::Let { value, .. } => matches!(self.m.exprs[*value].ty, Type::Scalar(_) | Type::Literal { .. }),
            _ => false,
        }) && !block.stmts.is_empty()
    }

    fn scan_block(&self, block: &Block, f: &mut dyn FnMut(&Lw, &Stmt)) {
        for s in &block.stmts {
            let st = &self.m.stmts[*s];
            f(self, st);
            match st {
                Stmt::For { body, .. } | Stmt::ForTiles { body, .. } => self.scan_block(body, f),
                Stmt::If { then_block, else_block, .. } => {
                    self.scan_block(then_block, f);
                    if let Some(b) = else_block {
                        self.scan_block(b, f);
                    }
                }
                _ => {}
            }
        }
    }

    /// Every expression of a statement (not of nested blocks), recursively.
    fn stmt_exprs(&self, s: &Stmt, f: &mut dyn FnMut(Handle<Expr>)) {
        let mut roots = Vec::new();
        match s {
            Stmt::Reg(_) => {}
            Stmt::Let { value, .. } => roots.push(*value),
            Stmt::Assign { target, value } => roots.extend([*target, *value]),
            Stmt::Op(c) => roots.extend(c.args.iter().flatten().copied()),
            Stmt::For { lo, hi, .. } => roots.extend([*lo, *hi]),
            Stmt::ForTiles { .. } => {}
            Stmt::If { cond, .. } => roots.push(*cond),
        }
        for r in roots {
            self.walk_expr(r, f);
        }
    }

    fn walk_expr(&self, e: Handle<Expr>, f: &mut dyn FnMut(Handle<Expr>)) {
        crate::ir::walk_expr(self.m, e, f);
    }

    /// Whether a statement reads shared memory through ordinary loads (an expression over a
    /// shared window, or ldmatrix).
    fn stmt_reads_smem_generic(&self, s: &Stmt) -> bool {
        let m = self.m;
        match s {
            Stmt::Op(c) if matches!(c.op.as_str(), "wgmma" | "tma_load" | "cp_async" | "tma_store") => false,
            Stmt::Op(c) if c.op == "ldmatrix" => true,
            Stmt::Op(c) if c.op == "store" => c.args.get(1).copied().flatten().is_some_and(|a| self.expr_reads_smem(a)),
            _ => {
                let mut found = false;
                self.stmt_exprs(s, &mut |e| {
                    if matches!(m.exprs[e].ty, Type::Shared { .. }) && !self.is_smem_operand_position(s, e) {
                        found = true;
                    }
                });
                found
            }
        }
    }

    fn is_smem_operand_position(&self, s: &Stmt, e: Handle<Expr>) -> bool {
        // Shared-typed sub-expressions of a shared index (`a_s` in `a_s[i]`) are the same read.
        let _ = (s, e);
        false
    }

    fn expr_reads_smem(&self, e: Handle<Expr>) -> bool {
        let mut found = false;
        self.walk_expr(e, &mut |x| {
            if matches!(self.m.exprs[x].ty, Type::Shared { .. }) {
                found = true;
            }
        });
        found
    }

    // -----------------------------------------------------------------------------------------
    // Statements

    fn block(&mut self, block: &Block) -> Result<(), LowerError> {
        self.acquired.push(Vec::new());
        let extrema = self.row_extrema.len();
        for (i, s) in block.stmts.iter().enumerate() {
            self.stmt(*s, &block.stmts, i)?;
        }
        self.row_extrema.truncate(extrema);
        self.acquired.pop();
        Ok(())
    }

    fn stmt(&mut self, s: Handle<Stmt>, siblings: &[Handle<Stmt>], pos: usize) -> Result<(), LowerError> {
        let m = self.m;
        let span = self.stmt_span(s);
        let prev = self.w.set_span(Some(span));
        let st = &m.stmts[s];
        let wgmma_only_loop = matches!(st, Stmt::For { body, .. } if self.wgmma_only(body));
        if !matches!(st, Stmt::Op(c) if c.op == "wgmma" || c.op == "wgmma_commit") && !wgmma_only_loop {
            // Anything else may touch registers a following wgmma uses.
            self.wg_fenced = false;
        }
        match st {
            Stmt::Reg(l) => {
                self.w.marker(span, self.opts, "");
                self.declare_reg(*l, span)?;
            }
            Stmt::Let { local, value } => {
                self.w.marker(span, self.opts, "");
                self.let_stmt(*local, *value, span)?;
            }
            Stmt::Assign { target, value } => {
                self.w.marker(span, self.opts, "");
                self.assign_stmt(*target, *value, span)?;
            }
            Stmt::Op(call) => {
                self.w.marker(span, self.opts, "");
                self.op_stmt(call, span, siblings, pos)?;
            }
            Stmt::For { var, lo, hi, unroll, body } => {
                self.w.marker(span, self.opts, "");
                let name = self.local_name(*var);
                let lo_c = self.scalar(*lo)?;
                let hi_c = self.scalar(*hi)?;
                // The loop variable is a CUDA `int`: a constant bound past it would overflow it
                // at run time (undefined behaviour), so it is refused here.
                for (which, bound) in [("start", *lo), ("end", *hi)] {
                    if let Some(v) = self.m.const_value(bound).filter(|v| i32::try_from(*v).is_err()) {
                        return Err(LowerError::new(
                            "L009",
                            format!("the loop's {which} {v} is past the 32-bit `int` the kernel counts loops with ({}..={})", i32::MIN, i32::MAX),
                            self.expr_span(bound),
                        ));
                    }
                }
                let trips = match (self.m.const_value(*lo), self.m.const_value(*hi)) {
                    (Some(a), Some(b)) => b.checked_sub(a),
                    _ => None,
                };
                if wgmma_only_loop && !self.wg_fenced {
                    // A loop of nothing but wgmmas: one fence before it covers every iteration.
                    self.wgmma_fence_for(body);
                }
                match (unroll, trips) {
                    (Some(n), _) => self.w.line(format!("#pragma unroll {n}")),
                    (None, Some(t)) if t <= FULL_UNROLL_MAX_TRIPS => self.w.line("#pragma unroll"),
                    _ => {}
                }
                let copies = unrolled_copies(*unroll, trips);
                self.w.open(format!("for (int {name} = {lo_c}; {name} < {hi_c}; ++{name}) {{"));
                self.wg_fenced = wgmma_only_loop;
                let outer_copies = self.unrolled_copies;
                self.unrolled_copies = outer_copies.saturating_mul(copies);
                let body_result = self.block(body);
                self.unrolled_copies = outer_copies;
                body_result?;
                self.w.set_span(Some(span));
                self.w.close("}");
                self.wg_fenced = wgmma_only_loop;
            }
            Stmt::ForTiles { var, body } => {
                self.w.marker(span, self.opts, "");
                let Some(g) = m.grid() else {
                    return Err(unsupported("`for ... in tiles` without a tile space", span));
                };
                let t = self.local_name(*var);
                let tile = self.derived(&format!("{t}_index"));
                self.w.open(format!("for (int {tile} = blockIdx.x; {tile} < {}; {tile} += gridDim.x) {{", self.tile_count));
                let n = g.axes.len();
                let names: Vec<String> = g.axes.iter().map(|a| self.derived(&format!("{t}_{}", c_ident(&a.name)))).collect();
                let tname = m.locals[*var].name.clone();
                // Axes decomposed row-major (last axis fastest); with `group G` the last two axes
                // are walked in bands of G rows instead.
                let plain = if g.group.is_some() && n >= 2 { n - 2 } else { n };
                for (k, name) in names.iter().enumerate().take(plain) {
                    let div: Vec<String> = self.tile_extents[k + 1..n].to_vec();
                    let mut e = match div.len() {
                        0 => tile.clone(),
                        1 => format!("{tile} / {}", div[0]),
                        _ => format!("{tile} / ({})", div.join(" * ")),
                    };
                    if k > 0 {
                        e = format!("{e} % {}", self.tile_extents[k]);
                    }
                    self.w.line(format!("const int {name} = {e};  // {tname}.{}", g.axes[k].name));
                }
                if let (Some(gs), true) = (g.group, plain < n) {
                    let (r, c) = (n - 2, n - 1);
                    let (er, ec) = (self.tile_extents[r].clone(), self.tile_extents[c].clone());
                    let (ar, ac) = (&g.axes[r].name, &g.axes[c].name);
                    let plane = if n > 2 {
                        let p = self.derived(&format!("{t}_plane"));
                        self.w.line(format!("const int {p} = {tile} % ({er} * {ec});  // the tile's index inside its ({ar}, {ac}) plane"));
                        p
                    } else {
                        tile.clone()
                    };
                    let first = self.derived(&format!("{t}_band"));
                    let rows = self.derived(&format!("{t}_band_rows"));
                    let inner = self.derived(&format!("{t}_in_band"));
                    self.w.line(format!(
                        "// group {gs}: tiles in bands of {gs} along {ar}, {ar} fastest inside a band, so that blocks running at the same time share operand tiles in L2"
                    ));
                    self.w.line(format!("const int {first} = {plane} / ({gs} * {ec}) * {gs};  // the band's first {ar}"));
                    self.w.line(format!("const int {rows} = {er} - {first} < {gs} ? {er} - {first} : {gs};  // {ar} rows in this band (the last may be short)"));
                    self.w.line(format!("const int {inner} = {plane} - {first} * {ec};"));
                    self.w.line(format!("const int {} = {first} + {inner} % {rows};  // {tname}.{ar}", names[r]));
                    self.w.line(format!("const int {} = {inner} / {rows};  // {tname}.{ac}", names[c]));
                }
                self.tile_axes.insert(*var, names);
                self.wg_fenced = false;
                self.block(body)?;
                self.w.set_span(Some(span));
                self.w.close("}");
                self.wg_fenced = false;
            }
            Stmt::If { cond, then_block, else_block } => {
                self.w.marker(span, self.opts, "");
                let c = self.scalar(*cond)?;
                self.w.open(format!("if ({}) {{", strip_parens(&c)));
                self.block(then_block)?;
                self.w.set_span(Some(span));
                if let Some(b) = else_block {
                    self.w.reopen("} else {");
                    self.block(b)?;
                    self.w.set_span(Some(span));
                }
                self.w.close("}");
                self.wg_fenced = false;
            }
        }
        self.w.set_span(prev);
        Ok(())
    }

    fn wgmma_only(&self, body: &Block) -> bool {
        !body.stmts.is_empty() && body.stmts.iter().all(|s| matches!(&self.m.stmts[*s], Stmt::Op(c) if c.op == "wgmma"))
    }

    /// `wgmma.fence` (and the register fences) ahead of the wgmmas of `body`.
    fn wgmma_fence_for(&mut self, body: &Block) {
        let mut accs = Vec::new();
        for s in &body.stmts {
            if let Stmt::Op(c) = &self.m.stmts[*s] {
                if let Some(ExprKind::Local(l)) = c.args.first().copied().flatten().map(|a| self.m.exprs[a].kind.clone()) {
                    if !accs.contains(&l) {
                        accs.push(l);
                    }
                }
            }
        }
        self.need(Helper::WgmmaFence);
        for l in accs {
            self.need_fence_regs(l);
            let n = self.local_name(l);
            self.w.line(format!("cake_fence_regs({n});"));
        }
        self.w.line("cake_wgmma_fence();  // order earlier register writes before the asynchronous MMAs");
        self.wg_fenced = true;
    }

    // -----------------------------------------------------------------------------------------
    // The launch contract

    fn launch_spec(&self, entry: &str) -> LaunchSpec {
        let m = self.m;
        let mut params = Vec::new();
        let mut maps = Vec::new();
        for (_, t) in m.tensors.iter() {
            let shape: Vec<SizeExpr> = t.shape.iter().map(|s| SizeExpr::from_size(m, s)).collect();
            params.push(ParamSpec::TensorPtr {
                name: c_ident(&t.name),
                tensor: t.name.clone(),
                dtype: t.dtype.name().into(),
                access: t.access.keyword().into(),
                shape_text: shape.iter().map(|s| s.to_string()).collect(),
                shape: shape.clone(),
            });
            if let Some(tma) = &t.tma {
                let pname = self.tmap_name(&t.name);
                params.push(ParamSpec::TensorMap { name: pname.clone(), tensor: t.name.clone(), map: maps.len() });
                let dims: Vec<SizeExpr> = shape.iter().rev().cloned().collect();
                let esize = t.dtype.size_bytes() as i64;
                let mut strides = Vec::new();
                let mut acc = SizeExpr::Const(esize);
                for d in dims.iter().take(dims.len().saturating_sub(1)) {
                    acc = SizeExpr::product(acc, d.clone());
                    strides.push(acc.clone());
                }
                let box_dims: Vec<u32> = tma.box_dims.iter().rev().map(|b| *b as u32).collect();
                maps.push(TensorMapSpec {
                    tensor: t.name.clone(),
                    param: pname,
                    dtype: t.dtype.name().into(),
                    data_type: tensor_map_dtype(t.dtype),
                    rank: t.shape.len() as u32,
                    global_dims_text: dims.iter().map(|d| d.to_string()).collect(),
                    global_dims: dims,
                    global_strides_text: strides.iter().map(|d| d.to_string()).collect(),
                    global_strides_bytes: strides,
                    element_strides: vec![1; box_dims.len()],
                    box_bytes: tma.box_dims.iter().product::<i64>().max(0) as u64 * t.dtype.size_bytes(),
                    box_dims,
                    interleave: 0,
                    swizzle: match tma.swizzle {
                        Swizzle::None => 0,
                        Swizzle::B32 => 1,
                        Swizzle::B64 => 2,
                        Swizzle::B128 => 3,
                    },
                    swizzle_bytes: tma.swizzle.bytes(),
                    l2_promotion: 2,
                    oob_fill: 0,
                });
            }
        }
        for (_, d) in m.dims.iter() {
            params.push(ParamSpec::Dim { name: c_ident(&d.name), ctype: "int32".into() });
        }
        for (_, s) in m.scalars.iter() {
            let ctype = match s.dtype {
                DType::BF16 | DType::F16 => "uint16 (raw bits)".to_string(),
                d => layout::scalar_ctype(d).unwrap_or("uint8").to_string(),
            };
            params.push(ParamSpec::Scalar { name: c_ident(&s.name), dtype: s.dtype.name().into(), ctype });
        }
        let (grid, cluster) = match m.grid() {
            Some(g) => {
                let axes: Vec<GridAxisSpec> = g
                    .axes
                    .iter()
                    .map(|a| {
                        let e = SizeExpr::from_size(m, &a.extent);
                        GridAxisSpec { name: a.name.clone(), extent_text: e.to_string(), extent: e }
                    })
                    .collect();
                let tiles = axes.iter().fold(SizeExpr::Const(1), |acc, a| SizeExpr::product(acc, a.extent.clone()));
                let mut cl = [1u32; 3];
                for (i, c) in g.cluster.iter().take(3).enumerate() {
                    cl[i] = (*c).max(1) as u32;
                }
                (
                    GridSpec {
                        persistent: g.persistent,
                        tiles_text: tiles.to_string(),
                        tiles,
                        axes,
                        rasterization: if g.group.is_some() { "grouped".into() } else { "last_axis_fastest".into() },
                        group: g.group,
                    },
                    cl,
                )
            }
            None => (
                GridSpec {
                    persistent: false,
                    tiles: SizeExpr::Const(1),
                    tiles_text: "1".into(),
                    axes: Vec::new(),
                    rasterization: "last_axis_fastest".into(),
                    group: None,
                },
                [1, 1, 1],
            ),
        };
        let dynamic = u32::try_from(self.layout.smem_bytes).unwrap_or(u32::MAX);
        LaunchSpec {
            format: LAUNCH_FORMAT,
            kernel: m.name.clone(),
            entry: entry.to_string(),
            target: m.target.clone(),
            arch: self.target.arch.clone(),
            block_threads: self.thread_count,
            dynamic_smem_bytes: dynamic,
            needs_smem_opt_in: dynamic > 48 * 1024,
            cluster,
            grid,
            dims: m.dims.iter().map(|(_, d)| DimSpec { name: d.name.clone(), multiple_of: d.multiple_of }).collect(),
            params,
            tensor_maps: maps,
            smem_layout: self.smem_slots.clone(),
        }
    }

    /// A statement op: its registered handler (`registry.rs`), or a "not supported yet" refusal.
    fn op_stmt(&mut self, call: &OpCall, span: Span, siblings: &[Handle<Stmt>], pos: usize) -> Result<(), LowerError> {
        // A write at a data-dependent row (`store(Out[id, ...], v)`, a scatter) happens only
        // when the row is inside the tensor: the verifier cannot place it.
        let dst = call.args.first().copied().flatten().filter(|d| matches!(self.m.exprs[*d].ty, Type::Global { .. }));
        if let Some(d) = dst.filter(|_| matches!(call.op.as_str(), "store" | "atomic_add" | "atomic_min" | "atomic_max")) {
            let g = self.global_ref(d)?;
            let guards = self.data_guards(&g);
            if !guards.is_empty() {
                self.w.open(format!("if ({}) {{  // a data-dependent row: written only inside the tensor", guards.join(" && ")));
                let r = self.op_dispatch(call, span, siblings, pos);
                self.w.close("}");
                return r;
            }
        }
        self.op_dispatch(call, span, siblings, pos)
    }

    fn op_dispatch(&mut self, call: &OpCall, span: Span, siblings: &[Handle<Stmt>], pos: usize) -> Result<(), LowerError> {
        match OpId::from_name(&call.op).and_then(registry::lowering) {
            Some(registry::Lowering::Stmt(handler)) => handler(self, call, span, siblings, pos),
            Some(registry::Lowering::Expr) => Err(unsupported(format!("`{}` as a statement", call.op), span)),
            None => Err(unsupported(format!("the `{}` operation", call.op), span)),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Names and scalar expressions

    fn local_name(&mut self, l: Handle<Local>) -> String {
        if let Some(n) = self.local_names.get(&l) {
            return n.clone();
        }
        let n = c_ident(&self.m.locals[l].name);
        self.local_names.insert(l, n.clone());
        n
    }

    /// C code of a scalar (run-time value) expression.
    fn scalar(&mut self, e: Handle<Expr>) -> Result<String, LowerError> {
        let m = self.m;
        let span = self.expr_span(e);
        let ex = &m.exprs[e];
        Ok(match &ex.kind {
            ExprKind::Int(v) => {
                if i32::try_from(*v).is_ok() {
                    v.to_string()
                } else {
                    format!("{v}ll")
                }
            }
            ExprKind::Float(s) => float_literal(s),
            ExprKind::Bool(b) => b.to_string(),
            ExprKind::Inf => "__int_as_float(0x7f800000)".into(),
            ExprKind::Local(l) => match &m.locals[*l].kind {
                LocalKind::Tile => return Err(unsupported("a tile used as a value", span)),
                LocalKind::Reg | LocalKind::Let if self.layouts.contains_key(l) || m.locals[*l].kind == LocalKind::Reg => {
                    let lay = self.layouts.get(l).copied();
                    if matches!(lay, Some(Layout::Scalar | Layout::Uniform { n: 1 })) {
                        format!("{}[0]", self.local_name(*l))
                    } else {
                        return Err(LowerError::new("L007", format!("fragment `{}` used where a scalar is expected", m.locals[*l].name), span));
                    }
                }
                _ => self.local_name(*l),
            },
            ExprKind::Dim(d) => c_ident(&m.dims[*d].name),
            ExprKind::Scalar(s) => {
                let sd = &m.scalars[*s];
                match sd.dtype {
                    DType::BF16 => {
                        self.need(Helper::RoundBf16);
                        format!("__uint_as_float((unsigned){} << 16)", c_ident(&sd.name))
                    }
                    DType::F16 => return Err(unsupported("f16 scalar arguments", span)),
                    _ => c_ident(&sd.name),
                }
            }
            ExprKind::Field { base, field } => self.field(*base, field, span)?,
            // One element of a global tensor (`let id = Ids[r]`): a load, 0 outside the tensor.
            ExprKind::Index { base, .. } if matches!(m.exprs[*base].kind, ExprKind::Tensor(_)) && matches!(ex.ty, Type::Scalar(_)) => {
                self.window_elem(e, &[], span)?
            }
            ExprKind::Unary(op, a) => {
                let ca = self.scalar(*a)?;
                unary_c(*op, &ca, self.prec(*a))
            }
            ExprKind::Binary(op, a, b) => {
                let (ca, cb) = (self.scalar(*a)?, self.scalar(*b)?);
                binary_c(*op, &ca, self.prec(*a), &cb, self.prec(*b))
            }
            ExprKind::Call(call) => {
                let dtype = ex.ty.dtype();
                self.scalar_call(e, call, dtype, span)?
            }
            _ => return Err(unsupported(format!("this expression as a scalar value (type {})", ex.ty), span)),
        })
    }

    /// C precedence of the code `scalar`/`elem` produce for an expression (10: an atom).
    pub(crate) fn prec(&self, e: Handle<Expr>) -> u8 {
        match &self.m.exprs[e].kind {
            ExprKind::Binary(op, ..) => binop_prec(*op),
            ExprKind::Unary(..) => 9,
            _ => 10,
        }
    }

    fn field(&mut self, base: Handle<Expr>, field: &Field, span: Span) -> Result<String, LowerError> {
        let m = self.m;
        match (&m.exprs[base].kind, field) {
            (ExprKind::Pipeline(p), Field::Stage) => {
                let st = self
                    .role
                    .as_ref()
                    .and_then(|r| r.pipes.get(p))
                    .ok_or_else(|| outside_role(format!("`{}.stage` outside its producer or consumer", m.pipelines[*p].name), "E0322", span))?;
                Ok(st.stage.clone())
            }
            (ExprKind::Local(l), Field::TileAxis(k)) => self
                .tile_axes
                .get(l)
                .and_then(|v| v.get(*k).cloned())
                .ok_or_else(|| unsupported("a tile field outside its loop", span)),
            (ExprKind::Role(r), f) => {
                let rn = c_ident(&m.roles[*r].name);
                Ok(match f {
                    Field::Warpgroup => self.derived(&format!("{rn}_warpgroup")),
                    Field::Warp => self.derived(&format!("{rn}_warp")),
                    Field::Lane => self.derived(&format!("{rn}_lane")),
                    _ => return Err(unsupported("this role field", span)),
                })
            }
            _ => Err(unsupported("this field", span)),
        }
    }

    fn scalar_call(&mut self, e: Handle<Expr>, call: &OpCall, dtype: Option<DType>, span: Span) -> Result<String, LowerError> {
        if call.op.starts_with("reduce_") {
            // A reduction to one value (a row window's sum, say): computed here, before the
            // statement that uses it, unless the enclosing element loop computed it ahead.
            if let Some((_, t)) = self.flat_reductions.iter().find(|(x, _)| *x == e) {
                return Ok(format!("{t}[0]"));
            }
            let name = self.fresh("red");
            let mut temps = Vec::new();
            self.reduction(e, &name, &mut temps)?;
            return Ok(format!("{name}[0]"));
        }
        let args: Vec<Handle<Expr>> = call.args.iter().flatten().copied().collect();
        let mut a = Vec::new();
        for x in &args {
            if matches!(self.m.exprs[*x].ty, Type::DTypeName(_)) {
                continue;
            }
            a.push(self.scalar(*x)?);
        }
        let src_dtype = args.first().and_then(|x| self.m.exprs[*x].ty.dtype());
        self.math(&call.op, &a, dtype, src_dtype, span)
    }

    /// C code of an elementwise math op over element expressions `a`.
    fn math(&mut self, op: &str, a: &[String], dtype: Option<DType>, src: Option<DType>, span: Span) -> Result<String, LowerError> {
        let float = dtype.is_some_and(|d| d.is_float());
        Ok(match (op, a) {
            ("cast", [x]) => self.cast(x, src, dtype, span)?,
            ("select", [c, x, y]) => format!("({c} ? {x} : {y})"),
            ("min", [x, y]) if float => format!("fminf({x}, {y})"),
            ("max", [x, y]) if float => format!("fmaxf({x}, {y})"),
            ("min", [x, y]) => format!("({x} < {y} ? {x} : {y})"),
            ("max", [x, y]) => format!("({x} > {y} ? {x} : {y})"),
            ("abs", [x]) if float => format!("fabsf({x})"),
            ("abs", [x]) => format!("({x} < 0 ? -{x} : {x})"),
            ("exp", [x]) => format!("__expf({x})"),
            ("exp2", [x]) => format!("exp2f({x})"),
            ("log", [x]) => format!("__logf({x})"),
            ("sqrt", [x]) => format!("sqrtf({x})"),
            ("rsqrt", [x]) => format!("rsqrtf({x})"),
            ("fma", [x, y, z]) if dtype == Some(DType::F32) => format!("fmaf({x}, {y}, {z})"),
            _ => return Err(unsupported(format!("`{op}` here"), span)),
        })
    }

    fn cast(&mut self, x: &str, from: Option<DType>, to: Option<DType>, span: Span) -> Result<String, LowerError> {
        let (Some(from), Some(to)) = (from, to) else { return Err(unsupported("this cast", span)) };
        use DType::*;
        Ok(match (from, to) {
            (_, BF16) if from.is_float() || from.is_int() => {
                self.need(Helper::RoundBf16);
                self.need(Helper::PackBf16x2);
                let v = if from.is_int() { format!("(float)({x})") } else { x.to_string() };
                format!("cake_round_bf16({v})")
            }
            (_, F16) if from.is_float() || from.is_int() => {
                self.need(Helper::RoundF16);
                let v = if from.is_int() { format!("(float)({x})") } else { x.to_string() };
                format!("cake_round_f16({v})")
            }
            // Window elements of 16-bit and fp8 floats are widened to f32 where they are read.
            (F32 | BF16 | F16 | F8E4M3 | F8E5M2, F32) => x.to_string(),
            (F32 | BF16 | F16, I32) => format!("(int)({x})"),
            (F32 | BF16 | F16, U32) => format!("(unsigned)({x})"),
            (F32 | BF16 | F16, I64) => format!("(long long)({x})"),
            (I32 | U32 | I64, F32) => format!("(float)({x})"),
            (I32 | U32 | I64 | Bool, I32) => format!("(int)({x})"),
            (I32 | U32 | I64 | Bool, U32) => format!("(unsigned)({x})"),
            (I32 | U32 | I64 | Bool, I64) => format!("(long long)({x})"),
            (Bool, F32) => format!("({x} ? 1.0f : 0.0f)"),
            _ => return Err(unsupported(format!("cast from {from} to {to}"), span)),
        })
    }
}

fn indent_lines(w: &mut Writer, levels: usize) {
    let pad = "    ".repeat(levels);
    for l in &mut w.lines {
        if !l.text.is_empty() {
            l.text = format!("{pad}{}", l.text);
        }
    }
}

/// `CUtensorMapDataType` of a dtype.
fn tensor_map_dtype(d: DType) -> u32 {
    match d {
        DType::Bool | DType::F8E4M3 | DType::F8E5M2 => 0, // UINT8
        DType::BF16 => 9,
        DType::F16 => 6,
        DType::F32 => 7,
        DType::I32 => 3,
        DType::U32 => 2,
        DType::I64 => 5,
    }
}

fn binop_prec(op: BinOp) -> u8 {
    match op {
        BinOp::Mul | BinOp::Div | BinOp::Rem => 8,
        BinOp::Add | BinOp::Sub => 7,
        BinOp::Shl | BinOp::Shr => 6,
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 5,
        BinOp::Eq | BinOp::Ne => 4,
        BinOp::And => 3,
        BinOp::Or => 2,
    }
}

/// `a op b` with the parentheses C needs (left-associative; `&&` inside `||` kept explicit).
pub(crate) fn binary_c(op: BinOp, a: &str, pa: u8, b: &str, pb: u8) -> String {
    let p = binop_prec(op);
    let wrap_a = pa < p || (op == BinOp::Or && pa == 3);
    let wrap_b = pb <= p || (op == BinOp::Or && pb == 3);
    let a = if wrap_a { format!("({a})") } else { a.to_string() };
    let b = if wrap_b { format!("({b})") } else { b.to_string() };
    format!("{a} {} {b}", op.symbol())
}

pub(crate) fn unary_c(op: UnOp, a: &str, pa: u8) -> String {
    let sym = match op {
        UnOp::Neg => "-",
        UnOp::Not => "!",
    };
    if pa < 9 || a.starts_with('-') {
        format!("{sym}({a})")
    } else {
        format!("{sym}{a}")
    }
}

fn float_literal(s: &str) -> String {
    let s = s.replace('_', "");
    if s.contains('.') || s.contains('e') || s.contains('E') {
        format!("{s}f")
    } else {
        format!("{s}.0f")
    }
}

fn strip_parens(s: &str) -> &str {
    if s.starts_with('(') && s.ends_with(')') {
        // Only when the outer parentheses enclose everything.
        let inner = &s[1..s.len() - 1];
        let mut depth = 0i32;
        for c in inner.chars() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth < 0 {
                        return s;
                    }
                }
                _ => {}
            }
        }
        if depth == 0 {
            return inner;
        }
    }
    s
}

/// C code of a size over dims.
pub(crate) fn size_c(m: &Module, s: &Size) -> String {
    let e = SizeExpr::from_size(m, s);
    fn go(e: &SizeExpr) -> String {
        match e {
            SizeExpr::Const(c) => c.to_string(),
            SizeExpr::Dim(d) => c_ident(d),
            SizeExpr::Add(a, b) => format!("({} + {})", go(a), go(b)),
            SizeExpr::Sub(a, b) => format!("({} - {})", go(a), go(b)),
            SizeExpr::Mul(a, b) => format!("({} * {})", go(a), go(b)),
            SizeExpr::Div(a, b) => format!("({} / {})", go(a), go(b)),
        }
    }
    strip_parens(&go(&e)).to_string()
}

/// A counted loop with a constant trip count up to this is fully unrolled (`#pragma unroll`).
pub(crate) const FULL_UNROLL_MAX_TRIPS: i64 = 16;

/// Copies of its body a counted loop's unrolling makes: `unroll N`, or its constant trip count
/// when that is fully unrolled, else 1. The cost model counts unrolled copies the same way.
pub(crate) fn unrolled_copies(unroll: Option<u32>, trips: Option<i64>) -> i64 {
    match (unroll, trips) {
        (Some(n), _) => i64::from(n),
        (None, Some(t)) if t <= FULL_UNROLL_MAX_TRIPS => t.max(1),
        _ => 1,
    }
}

/// Elements per thread up to which a scalar element loop (one element per thread and step) is
/// unrolled whole (`#pragma unroll`); a longer one is left to the C compiler.
pub(crate) const SCALAR_FULL_UNROLL_MAX: i64 = 16;

/// Steps of a scalar element loop (`steps` per thread) whose loads are in flight together: all
/// of them up to [`SCALAR_FULL_UNROLL_MAX`] (the lowering unrolls it whole), else 4 — NVCC's own
/// unrolling of a counted loop with no pragma, as its SASS shows (cross-entropy-fwd's 126-step
/// row reductions at V = 128256 issue their `LDG.E.U16` in groups of 4). The cost model reads it.
pub(crate) fn scalar_loop_unroll(steps: i64) -> i64 {
    if steps <= SCALAR_FULL_UNROLL_MAX {
        steps.max(1)
    } else {
        4
    }
}

/// Steps of an element loop (`steps` in all) unrolled together: up to 4, so several loads per
/// window are in flight (on the H200 a 4-warps-per-SM rmsnorm went from 0.315 to 0.136 ms), but
/// no more than 8 vector copies with the `enclosing_copies` of unrolled loops around it: the
/// compiler hoists every copy's loads together (all 8 chunks of a chunked softmax row spilled).
/// The cost model reads the same number.
pub(crate) fn element_loop_unroll(steps: i64, enclosing_copies: i64) -> i64 {
    (8 / enclosing_copies.max(1)).clamp(1, 4).min(steps.max(1))
}

