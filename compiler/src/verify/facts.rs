//! Facts: what the verifier's rules (and, later, the evolution engine) may say about a program.
//!
//! Every construct of a module — the kernel, the tile space, each shared region and view, each
//! global tensor, role, pipeline and barrier, every op call site and every argument of a call —
//! gets one [`FactSet`]: its kind, a display name, a flat map *fact name → [`Value`]*, a few
//! integer-indexed facts (`dim(0)`, `box(-1)`), and named spans rules may point at (`decl`,
//! `name`, `attr:stages`, `arg:dst`, ...). A fact that cannot be decided statically (a shape that
//! depends on a `dim`, a loop bound known only at run time) is [`Value::Unknown`]; rules turn that
//! into a coverage-limit finding, never into a pass.
//!
//! The target's limits are facts of every construct (`target_smem_max`, `has(wgmma)`), and the
//! kernel's facts are readable everywhere with a `kernel_` prefix (`kernel_roles_with_regs`).
//! [`vocabulary`] lists, per construct kind, every fact with a one-line meaning: rule files are
//! validated against it, and a search over predicates can enumerate it ([`FactSet::iter`]).
//!
//! Call sites expose the facts of each bound argument with the parameter name as prefix
//! (`dst_swizzle`, `src_box(-1)`, `bar_producer`); argument constructs expose the same facts
//! unprefixed, plus `op`, `param` and the executing role's facts (`role`, `role_first_warp`, ...).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::catalog::{Access, Catalog, EffectAccess, OpDef, ParamKind, Proxy};
use crate::ir::*;
use super::coverage::Coverage;
use super::indexing::TensorIndexing;
use crate::layout::{gcd, known_multiple, size_multiple, smem_window, tma_smem_align, KernelLayout, RegionSlot, TxDerivation, ALIGN_MAX, TX_COUNT_MAX};
use crate::pred::{EvalError, Facts, Value};
use crate::span::Span;
use crate::syntax::ast::{BinOp, UnOp};
use crate::target::{TargetInfo, TargetTable};

// ─── Construct kinds ─────────────────────────────────────────────────────────────────────────────

/// What a fact set describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConstructKind {
    Kernel,
    Grid,
    Smem,
    View,
    Tensor,
    Role,
    Pipeline,
    Barrier,
    /// One op call site.
    Call,
    /// One argument of one call site.
    Arg,
}

impl ConstructKind {
    pub const ALL: [ConstructKind; 10] = [
        ConstructKind::Kernel,
        ConstructKind::Grid,
        ConstructKind::Smem,
        ConstructKind::View,
        ConstructKind::Tensor,
        ConstructKind::Role,
        ConstructKind::Pipeline,
        ConstructKind::Barrier,
        ConstructKind::Call,
        ConstructKind::Arg,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ConstructKind::Kernel => "kernel",
            ConstructKind::Grid => "grid",
            ConstructKind::Smem => "smem",
            ConstructKind::View => "view",
            ConstructKind::Tensor => "tensor",
            ConstructKind::Role => "role",
            ConstructKind::Pipeline => "pipeline",
            ConstructKind::Barrier => "barrier",
            ConstructKind::Call => "call",
            ConstructKind::Arg => "arg",
        }
    }

    pub fn parse(s: &str) -> Option<ConstructKind> {
        ConstructKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Span keys every construct of this kind has (besides `attr:<key>` for declarations and
    /// `arg:<param>` for calls).
    pub fn span_keys(self) -> &'static [&'static str] {
        match self {
            ConstructKind::Kernel => &["decl", "smem_largest", "smem_last", "role_first", "role_last", "regs_role", "grid", "inexact_dim"],
            ConstructKind::Grid => &["decl", "name"],
            ConstructKind::Smem => &["decl", "name", "fill_call", "view_atom_view", "fill_overlap_at", "fill_overlap_other", "unsynced_read_at", "unsynced_write_at"],
            ConstructKind::View => &["decl", "name", "region"],
            ConstructKind::Tensor => &["decl", "name", "grid", "first_writer", "unwritten_owner", "overlap_first", "overlap_second", "wrong_dim_at", "wrong_dim_source", "mismatch_at", "mismatch_other", "pass_at", "pass_other", "partly_read_at", "partly_read_loop"],
            ConstructKind::Role => &["decl", "name", "body", "overlap", "unit", "fed_role", "peer_writer"],
            ConstructKind::Pipeline => &["decl", "name", "producer", "consumer", "missing_body_role", "fill_region"],
            ConstructKind::Barrier => &["decl", "name", "missing_body_role"],
            ConstructKind::Call => &["decl", "call", "role", "body", "tx_cause"],
            ConstructKind::Arg => &["decl", "arg", "call", "role", "root", "region"],
        }
    }

    /// Whether spans `attr:<key>` exist (declarations).
    pub fn has_attr_spans(self) -> bool {
        matches!(
            self,
            ConstructKind::Grid
                | ConstructKind::Smem
                | ConstructKind::View
                | ConstructKind::Tensor
                | ConstructKind::Role
                | ConstructKind::Pipeline
                | ConstructKind::Barrier
        )
    }
}

// ─── Fact sets ───────────────────────────────────────────────────────────────────────────────────

/// The facts of one construct.
#[derive(Clone, Debug)]
pub struct FactSet {
    pub kind: ConstructKind,
    /// The construct's name in messages: `a_s`, `mma`, `tma_load`, `tma_load(dst)`.
    pub name: String,
    /// The op, for call and argument constructs.
    pub op: Option<String>,
    values: BTreeMap<String, Value>,
    lists: BTreeMap<String, Vec<Value>>,
    spans: BTreeMap<String, Span>,
    /// Where a rule points when it names a span this construct does not have.
    pub decl: Span,
    /// Attribute spans of a declaration (fallback: its name).
    attrs: Option<DeclSpans>,
}

impl FactSet {
    fn new(kind: ConstructKind, name: impl Into<String>, decl: Span) -> FactSet {
        let mut f = FactSet {
            kind,
            name: name.into(),
            op: None,
            values: BTreeMap::new(),
            lists: BTreeMap::new(),
            spans: BTreeMap::new(),
            decl,
            attrs: None,
        };
        f.spans.insert("decl".into(), decl);
        f
    }

    fn decl(kind: ConstructKind, name: &str, spans: &DeclSpans) -> FactSet {
        let mut f = FactSet::new(kind, name, spans.item);
        f.spans.insert("name".into(), spans.name);
        f.attrs = Some(spans.clone());
        f
    }

    fn set(&mut self, name: &str, v: impl IntoValue) {
        self.values.insert(name.to_string(), v.into_value());
    }

    fn set_list(&mut self, name: &str, v: Vec<Value>) {
        self.lists.insert(name.to_string(), v);
    }

    fn span_at(&mut self, key: &str, span: Span) {
        self.spans.insert(key.to_string(), span);
    }

    /// A nullary fact.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.values.get(name)
    }

    /// Whether `name` is an indexed fact here.
    pub fn is_indexed(&self, name: &str) -> bool {
        self.lists.contains_key(name)
    }

    /// An indexed fact: `dim(0)`; negative indices count from the end (`dim(-1)` is the innermost).
    /// An index out of range is `Unknown`.
    pub fn get_indexed(&self, name: &str, i: i64) -> Option<Value> {
        let list = self.lists.get(name)?;
        let i = if i < 0 { i + list.len() as i64 } else { i };
        Some(usize::try_from(i).ok().and_then(|i| list.get(i).cloned()).unwrap_or(Value::Unknown))
    }

    /// The span named `key`: `decl`, `name`, `attr:<key>`, `arg:<param>`, or a kind-specific one.
    pub fn span(&self, key: &str) -> Option<Span> {
        if let Some(s) = self.spans.get(key) {
            return Some(*s);
        }
        let attr = key.strip_prefix("attr:")?;
        let spans = self.attrs.as_ref()?;
        Some(spans.attr(attr))
    }

    /// Every fact of this construct, indexed facts flattened (`dim(0)`, `dim(1)`), in name order.
    pub fn iter(&self) -> impl Iterator<Item = (String, Value)> + '_ {
        let scalars = self.values.iter().map(|(k, v)| (k.clone(), v.clone()));
        let lists = self.lists.iter().flat_map(|(k, vs)| vs.iter().enumerate().map(move |(i, v)| (format!("{k}({i})"), v.clone())));
        scalars.chain(lists)
    }
}

trait IntoValue {
    fn into_value(self) -> Value;
}
impl IntoValue for Value {
    fn into_value(self) -> Value {
        self
    }
}
impl IntoValue for i64 {
    fn into_value(self) -> Value {
        Value::Int(self)
    }
}
impl IntoValue for u32 {
    fn into_value(self) -> Value {
        Value::Int(i64::from(self))
    }
}
impl IntoValue for u64 {
    fn into_value(self) -> Value {
        i64::try_from(self).map_or(Value::Unknown, Value::Int)
    }
}
impl IntoValue for usize {
    fn into_value(self) -> Value {
        i64::try_from(self).map_or(Value::Unknown, Value::Int)
    }
}
impl IntoValue for bool {
    fn into_value(self) -> Value {
        Value::Bool(self)
    }
}
impl IntoValue for &str {
    fn into_value(self) -> Value {
        Value::Sym(self.to_string())
    }
}
impl IntoValue for String {
    fn into_value(self) -> Value {
        Value::Sym(self)
    }
}
impl<T: IntoValue> IntoValue for Option<T> {
    fn into_value(self) -> Value {
        self.map_or(Value::Unknown, IntoValue::into_value)
    }
}

// ─── All facts of a module ───────────────────────────────────────────────────────────────────────

/// The facts of every construct of one module on one target.
#[derive(Clone, Debug)]
pub struct ModuleFacts {
    /// `target`, `target_*` facts; `has(feature)` answers from `features`.
    pub target: FactSet,
    pub features: BTreeSet<String>,
    pub kernel: FactSet,
    /// Every other construct, in a fixed order: grid, smem, views, tensors, roles, pipelines,
    /// barriers, then call sites (source order) each followed by its arguments.
    pub constructs: Vec<FactSet>,
}

impl ModuleFacts {
    /// The constructs of one kind (the kernel included for `Kernel`).
    pub fn of_kind(&self, kind: ConstructKind) -> impl Iterator<Item = &FactSet> {
        std::iter::once(&self.kernel).chain(self.constructs.iter()).filter(move |c| c.kind == kind)
    }

    /// Evaluation scope for one construct.
    pub fn scope<'a>(&'a self, own: &'a FactSet) -> Scope<'a> {
        Scope { own, facts: self }
    }

    /// Every target fact, `has(f)` for every feature of the built-in vocabulary.
    pub fn target_facts(&self) -> Vec<(String, Value)> {
        let mut out: Vec<(String, Value)> = self.target.iter().collect();
        for f in TargetTable::builtin().features.keys() {
            out.push((format!("has({f})"), Value::Bool(self.features.contains(f))));
        }
        out
    }
}

/// Answers facts for one construct: its own, then `target_*` / `has(...)`, then `kernel_*`.
pub struct Scope<'a> {
    pub own: &'a FactSet,
    pub facts: &'a ModuleFacts,
}

impl Scope<'_> {
    fn lookup(&self, name: &str) -> Option<Value> {
        if let Some(v) = self.own.get(name) {
            return Some(v.clone());
        }
        if name == "target" || name.starts_with("target_") {
            return self.facts.target.get(name).cloned();
        }
        if let Some(rest) = name.strip_prefix("kernel_") {
            return self.facts.kernel.get(rest).cloned();
        }
        None
    }

    /// Facts of calls and arguments that a parameter prefix names but this op lacks: Unknown
    /// (the rule's `when` should have excluded the op; validation checked the name exists).
    fn lenient(&self) -> bool {
        matches!(self.own.kind, ConstructKind::Call | ConstructKind::Arg)
    }
}

impl Facts for Scope<'_> {
    fn fact(&self, name: &str, args: &[Value]) -> Result<Value, EvalError> {
        match args {
            [] => match self.lookup(name) {
                Some(v) => Ok(v),
                None if self.lenient() => Ok(Value::Unknown),
                None => Err(EvalError::UnknownFact { scope: Some(self.own.kind.as_str().to_string()), name: name.to_string() }),
            },
            [Value::Sym(f)] if name == "has" => Ok(Value::Bool(self.facts.features.contains(f))),
            [Value::Unknown] => Ok(Value::Unknown),
            [Value::Int(i)] => {
                let own = self.own.get_indexed(name, *i);
                let kernel = name.strip_prefix("kernel_").and_then(|n| self.facts.kernel.get_indexed(n, *i));
                match own.or(kernel) {
                    Some(v) => Ok(v),
                    None if self.lenient() => Ok(Value::Unknown),
                    None => Err(EvalError::UnknownIndexedFact { scope: self.own.kind.as_str().to_string(), name: name.to_string() }),
                }
            }
            _ => Err(EvalError::Arguments { fact: name.to_string(), expects: "no arguments or one integer index" }),
        }
    }

    fn symbol(&self, name: &str) -> Option<Value> {
        match self.lookup(name) {
            Some(v) => Some(v),
            // A fact of the vocabulary this call or argument does not have (`swizzle` of a
            // register argument, `dst_bytes` of an op without `dst`): undecidable, not a literal.
            None if self.lenient() && is_call_fact_name(self.own.kind, name) => Some(Value::Unknown),
            None => None,
        }
    }
}

/// Whether `name` is in the call/argument vocabulary: a call fact, an argument fact, or (for calls)
/// `<param>_<argument fact>` (`dst_swizzle`).
fn is_call_fact_name(kind: ConstructKind, name: &str) -> bool {
    let plain = |n: &str| ARG_FACTS.iter().chain(ARG_ONLY_FACTS).chain(CALL_FACTS).any(|f| f.name == n);
    match kind {
        ConstructKind::Arg => plain(name),
        ConstructKind::Call => {
            plain(name)
                || ARG_FACTS.iter().any(|f| {
                    name.len() > f.name.len() + 1 && name.ends_with(f.name) && name.as_bytes()[name.len() - f.name.len() - 1] == b'_'
                })
        }
        _ => false,
    }
}

// ─── Vocabulary ──────────────────────────────────────────────────────────────────────────────────

/// One fact of the vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FactDef {
    pub name: &'static str,
    /// Written `name(i)`.
    pub indexed: bool,
    pub doc: &'static str,
}

const fn f(name: &'static str, doc: &'static str) -> FactDef {
    FactDef { name, indexed: false, doc }
}
const fn fi(name: &'static str, doc: &'static str) -> FactDef {
    FactDef { name, indexed: true, doc }
}

/// Facts of the target, readable from every construct.
pub const TARGET_FACTS: &[FactDef] = &[
    f("target", "the target's name (`sm_90a`)"),
    f("target_sm", "compute capability × 10"),
    f("target_smem_max", "bytes of shared memory one block may use (opt-in maximum)"),
    f("target_smem_per_sm", "bytes of shared memory per SM"),
    f("target_regs_per_sm", "32-bit registers per SM"),
    f("target_regs_per_thread_max", "registers one thread may use at launch"),
    f("target_max_threads_per_block", "threads one block may have"),
    f("target_max_threads_per_sm", "resident threads per SM"),
    f("target_max_cluster", "portable maximum blocks per cluster (1: no clusters)"),
    f("target_sm_count", "SMs of the reference SKU (unknown where not verified)"),
    fi("has", "`has(feature)`: whether the target has a feature of targets.toml's vocabulary"),
];

pub const KERNEL_FACTS: &[FactDef] = &[
    f("name", "the kernel's name"),
    f("smem_bytes", "dynamic shared memory the launch requests (the derived layout): smem_regions_bytes + smem_mbarrier_bytes + smem_base_slack"),
    f("smem_regions_bytes", "bytes up to the end of the last region, each region at its alignment (views alias their region)"),
    f("smem_mbarrier_bytes", "bytes of the derived mbarriers (2 × stages per pipeline, stages per barrier, 8 B each) and the padding that 8-aligns them"),
    f("smem_base_slack", "1024 when TMA or wgmma read shared memory (the kernel rounds the base up to 1024 B), else 0"),
    f("smem_regions", "number of shared regions"),
    f("inexact_divisions", "tile counts (grid axis extents) and loop trip counts `X / c` whose dim product X its `multiple_of` does not make a multiple of c"),
    f("inexact_division", "the first of them (`R / 8`; unknown: none)"),
    f("inexact_dim", "its dim"),
    f("inexact_dim_multiple", "what the dim product is provably a multiple of"),
    f("inexact_divisor", "the constant it is divided by"),
    f("threads_per_block", "threads per block: 32 × the highest warp any role uses"),
    f("warps", "warps per block"),
    f("roles", "number of roles"),
    f("roles_with_regs", "roles that declare a register budget (`regs`)"),
    f("idle_warps", "warps below the highest used one that belong to no role"),
    f("launch_regs", "registers per thread at launch: min(regs_per_thread_max, regs_per_sm / threads) rounded down to 8"),
    f("reg_pool", "registers the block holds at launch: threads_per_block × launch_regs"),
    f("regs_total", "Σ threads × regs over roles (launch_regs for roles without `regs` and idle warps)"),
    f("pipelines", "number of pipelines"),
    f("barriers", "number of barriers"),
    f("tensors", "number of tensor arguments"),
    f("has_grid", "whether a tile space is declared"),
    f("persistent", "whether the tile space is persistent"),
    f("cluster_size", "blocks per cluster (1 without a cluster)"),
];

pub const GRID_FACTS: &[FactDef] = &[
    f("name", "the tile space's name"),
    f("persistent", "`persistent`: each block loops over tiles"),
    f("axes", "number of axes"),
    f("cluster_size", "product of the cluster shape"),
    f("cluster_rank", "number of cluster dimensions"),
    fi("cluster", "cluster extent per dimension"),
    f("min_cluster", "smallest cluster extent"),
    f("roles_with_tile_loop", "roles whose body walks the tile space"),
    f("roles_without_tile_loop", "roles with a body that never walks the tile space"),
    f("axes_dividing_by_zero", "axes whose extent divides by a constant 0 (`M / 0`)"),
    f("zero_divided_axis", "the first such axis (unknown: none)"),
    f("cluster_divides_tiles", "every cluster extent provably divides its tile axis' count (true without a cluster)"),
    f("undivided_axis", "the first axis whose tile count a cluster extent does not provably divide (unknown: none)"),
    f("undivided_cluster", "that cluster extent"),
    f("undivided_axis_multiple", "what that axis' tile count is provably a multiple of"),
];

pub const SMEM_FACTS: &[FactDef] = &[
    f("name", "the region's name"),
    f("dtype", "element dtype"),
    f("elem_bytes", "bytes per element"),
    f("rank", "rank of one stage"),
    fi("dim", "extent of one stage's dimension i"),
    f("stages", "number of stages (1 without `stages`)"),
    f("stage_bytes", "bytes of one stage"),
    f("bytes", "bytes of all stages"),
    f("inner_bytes", "bytes of the innermost dimension (one row)"),
    f("swizzle", "swizzle span in bytes (0: none)"),
    f("swizzle_atom", "bytes after which the swizzle pattern repeats: 8 × span (1024 for 128B); 16 unswizzled"),
    f("align", "alignment in bytes: the declared one, else the layout's default (1024 swizzled, 128 unswizzled, raised to `view_atom`)"),
    f("align_declared", "whether `align` is written"),
    f("align_pow2", "whether the alignment is a power of two"),
    f("align_max", "the largest alignment the layout honours (1024: the 128B swizzle atom)"),
    f("offset", "byte offset in the block's shared memory (the derived layout: regions in order, each at its alignment)"),
    f("view_atom", "the largest swizzle atom (8 × span) of a swizzled view over the region; 0 without one"),
    f("view_atom_view", "the first view with that atom (unknown: none)"),
    f("views", "number of views onto the region"),
    f("overlapping_fills", "pairs of sibling fills (`tma_load` / `cp_async` statements of one block, completing on the same pipeline or barrier) whose constant destination bytes within one stage intersect"),
    f("unsynced_reads", "reads of the region by a role, generic or async, after a generic write (`store`, `stmatrix`) of the same role with no barrier of all its threads in between (`sync_role` of the role, `sync`, `cluster_sync`, a wait on an explicit barrier); loops walked twice, so loop-carried pairs count"),
    f("first_unsynced_read", "the first such read (unknown: none)"),
    f("first_overlapping_fills", "the first such pair, with both destinations and byte ranges (unknown: none)"),
    f("used", "whether any statement names it (or a view of it)"),
    f("reads", "accesses that read it, directly or through a view"),
    f("writes", "accesses that write it, directly or through a view"),
    f("async_writes", "writes through the async proxy (TMA)"),
    f("async_reads", "reads through the async proxy (wgmma, TMA store)"),
    f("fill_pipelines", "distinct pipelines whose tma_loads credit writes into it"),
    f("tma_loads", "TMA loads (`tma_load`: writes into shared memory through the async proxy) whose destination is the region or a view of it"),
    f("tma_fill_bytes", "bytes of one stage those TMA loads write, at most: Σ over them of the destination window's bytes, an index that varies counting every position its range covers (a whole dimension when the range is unknown) and the stage index of a staged region not counted; 0 without TMA loads (compare `stage_bytes`)"),
];

pub const VIEW_FACTS: &[FactDef] = &[
    f("name", "the view's name"),
    f("region", "the region it aliases"),
    f("dtype", "element dtype"),
    f("rank", "rank"),
    fi("dim", "extent of dimension i"),
    f("bytes", "bytes the view spans"),
    f("offset", "byte offset into the region"),
    f("end", "offset + bytes"),
    f("inner_bytes", "bytes of the innermost dimension"),
    f("swizzle", "the view's swizzle span (0: none)"),
    f("swizzle_atom", "8 × swizzle span; 16 unswizzled"),
    f("required_align", "alignment its offset needs: max(16, swizzle_atom)"),
    f("region_bytes", "bytes of the region (all stages)"),
    f("region_swizzle", "the region's swizzle span"),
    f("block_offset", "byte offset in the block's shared memory: its region's offset plus its own (the derived layout)"),
    f("used", "whether any statement names it"),
    f("reads", "accesses that read through the view"),
    f("writes", "accesses that write through the view"),
    f("region_reads", "accesses that read the region not through this view"),
    f("region_writes", "accesses that write the region not through this view"),
];

pub const TENSOR_FACTS: &[FactDef] = &[
    f("name", "the tensor's name"),
    f("stored", "whether a `store` or `tma_store` writes it (an `out` or `inout` tensor)"),
    f("unwritten_elements", "output coverage: elements of an `out` tensor no (tile, role, warp) stores, at the first allowed binding of the dims that leaves some (0: every element is written at every binding tried; unknown: a store could not be placed)"),
    f("overlap_elements", "output coverage: elements two different writers (tiles, roles, warps or warpgroups) both store (unknown: a store could not be placed)"),
    f("coverage_binding", "the binding of the dims those counts hold at (`R = 48, C = 5120`)"),
    f("store_instances", "distinct (writer, box) stores the coverage analysis placed at that binding"),
    f("first_hole", "the first box of elements no writer stores (`[8..16, 0..4096]`; unknown: none)"),
    f("first_overlap", "the first box two writers store, and who they are (unknown: none)"),
    f("wrong_dim_accesses", "index consistency: accesses of the tensor with an axis whose extent is a dim expression, indexed by a coordinate that walks only other dims (`C[t.b, t.n * 128 :+ 128, …]` for `C: bf16[B, K, D]` walks N through the tile axis `n = N / 128`)"),
    f("first_wrong_dim", "the first such axis: the tensor, the extent, the index and what it walks (unknown: none)"),
    f("operand_mismatches", "index consistency: stores into the tensor fed by a global read whose window along a dim both tensors index misses the stored window for some tile, warp or loop iteration (a batch, group offset, row or tile the output does not have); and reads of the tensor that feed an MMA whose other operand is read elsewhere along a dim they share (another batch, another K chunk)"),
    f("first_operand_mismatch", "the first such pair of windows, with both index expressions (unknown: none)"),
    f("pass_disagreements", "pass and chunk agreement: pairs of loops of one role that read the same chunks of the tensor (the same variable, stride, offset and window) from the same first chunk but with different trip counts"),
    f("first_pass_disagreement", "the first such pair of loops (unknown: none)"),
    f("partly_read_axes", "pass and chunk agreement: axes of the tensor that a role reads in chunks (`a · v + b :+ w`) but whose reads, together, leave part of the extent unread at an allowed binding of the dims"),
    f("first_partly_read", "the first such axis, with the unread elements and the loop (unknown: none)"),
    f("coverage_reason", "why the coverage could not be decided: the expression or bound the analysis could not evaluate (unknown: it was decided)"),
    f("writer_roles", "roles whose body stores into it (`store`, `tma_store`)"),
    f("first_writer_role", "the first of them, in declaration order (unknown: none)"),
    f("unwritten_owner", "a role without a body declared like one of its writer roles (same unit, same unit count): the role that would own the share of the tensor its peer's body does not write — the first suspect for `unwritten_elements` (unknown: none)"),
    f("has_unwritten_owner", "whether there is such a role"),
    f("access", "`in`, `out` or `inout`"),
    f("dtype", "element dtype"),
    f("elem_bytes", "bytes per element"),
    f("rank", "rank"),
    fi("dim", "extent of dimension i (unknown when it depends on a dim)"),
    fi("dim_multiple", "a number dimension i is known to be a multiple of (from `multiple_of`)"),
    f("has_tma", "whether it is a TMA operand (`tma [box]`)"),
    f("box_rank", "entries of the TMA box"),
    fi("box", "TMA box extent of dimension i"),
    f("max_box", "largest box extent"),
    f("min_box", "smallest box extent"),
    f("box_inner", "innermost box extent"),
    f("box_inner_bytes", "innermost box extent × element size"),
    f("box_bytes", "bytes of one box"),
    f("swizzle", "TMA swizzle span (0: none)"),
    f("strides_16b_aligned", "every global stride (bytes between consecutive indices of a non-innermost dim) is provably a multiple of 16; unknown when a dim without a fitting `multiple_of` decides it"),
    f("used", "whether any statement names it"),
    f("reads", "accesses that read it"),
    f("writes", "accesses that write it"),
    f("tma_loads", "tma_load calls reading it"),
    f("cp_async_src", "whether a cp_async reads it"),
];

pub const ROLE_FACTS: &[FactDef] = &[
    f("name", "the role's name"),
    f("unit", "`warp` or `warpgroup`"),
    f("first", "first index, in units"),
    f("count", "number of units"),
    f("first_warp", "index of the first warp"),
    f("warps", "number of warps"),
    f("threads", "number of threads"),
    f("regs", "register budget per thread (`regs`), unknown when not declared"),
    f("has_regs", "whether `regs` is declared"),
    f("has_body", "whether an `on` block gives its body"),
    f("has_tile_loop", "whether its body walks the tile space"),
    f("calls", "op calls in its body"),
    f("overlaps", "earlier-declared roles that share a warp with it"),
    f("produces", "pipelines it is the producer of"),
    f("consumes", "pipelines it is the consumer of"),
    f("consumer_regs_min", "the smallest register budget among the consumers of the pipelines it produces (unknown: none declares one)"),
    f("fed_role", "a consumer of its pipelines that declares a budget (unknown: none)"),
    f("writes_outputs", "output (`out` / `inout`) tensors its body stores into (`store`, `tma_store`); 0 for a producer, and for a role without a body"),
    f("output_stores", "`store` / `tma_store` calls of its body into output tensors"),
    f("peer_writer", "a role declared like it (same unit, same unit count) whose body stores into an output: the role whose share of the outputs this one mirrors (unknown: none)"),
];

pub const PIPELINE_FACTS: &[FactDef] = &[
    f("name", "the pipeline's name"),
    f("stages", "number of stages"),
    f("producer", "producer role"),
    f("consumer", "consumer role"),
    f("producer_has_body", "whether the producer role has a body"),
    f("consumer_has_body", "whether the consumer role has a body"),
    f("used", "whether any statement names it"),
    f("acquires", "acquire calls on it"),
    f("waits", "wait calls on it"),
    f("releases", "release calls on it"),
    f("tma_loads", "tma_load calls crediting it"),
    f("fills", "distinct shared regions its tma_loads write"),
    f("min_fill_stages", "fewest stages among the regions its tma_loads write (unknown: none)"),
    f("max_fill_stages", "most stages among the regions its tma_loads write (unknown: none)"),
    f("acquire_in_loop", "whether an acquire of it sits inside a counted `for` loop"),
    f("full_offset", "byte offset of its derived `full` mbarriers in shared memory"),
    f("empty_offset", "byte offset of its derived `empty` mbarriers in shared memory"),
    f("role_without_body", "its producer or consumer role that has no body (unknown: both have one)"),
];

pub const BARRIER_FACTS: &[FactDef] = &[
    f("name", "the barrier's name"),
    f("stages", "number of barriers in the array (1: a single barrier)"),
    f("count", "arrivals per phase"),
    f("producers", "number of producer roles"),
    f("consumers", "number of consumer roles"),
    f("producers_without_body", "producer roles that have no body"),
    f("consumers_without_body", "consumer roles that have no body"),
    f("role_without_body", "the first of its roles that has no body (unknown: all have one)"),
    f("used", "whether any statement names it"),
    f("waits", "wait calls on it"),
    f("arrives", "arrive / arrive_expect_tx calls on it"),
];

/// Facts of a call site (besides the per-parameter ones).
pub const CALL_FACTS: &[FactDef] = &[
    f("op", "the op's name"),
    f("issue", "who executes it (catalog `issue`: thread, warp, warpgroup, role, elected, block, cluster)"),
    f("role", "the executing role"),
    f("role_unit", "the executing role's unit"),
    f("role_first_warp", "the executing role's first warp index"),
    f("role_warps", "the executing role's warps"),
    f("role_threads", "the executing role's threads"),
    f("role_regs", "the executing role's register budget (unknown when not declared)"),
    f("loop_depth", "counted `for` loops around the call"),
    f("in_tile_loop", "whether the call is inside `for t in tiles`"),
    f("tx_bytes", "`acquire`: the transaction bytes its stage is armed with, the bytes of the tma_loads naming the pipeline up to the next acquire (unknown: not derivable, or not an acquire)"),
    f("tx_derivable", "`acquire`: whether those bytes follow from the program text (unknown: not an acquire)"),
    f("tx_max", "`acquire`: the most transaction bytes one mbarrier phase counts (2^20 − 1)"),
    f("tx_reason", "`acquire`: why the bytes cannot be derived (unknown: they can)"),
    f("stores_int_as_float", "`store`: whether the stored value is an integer converted to a float dtype (`cast(i, f16)`: an index, a count)"),
    f("stored_int_dtype", "`store`: the integer dtype converted (unknown: no such conversion)"),
    f("stored_int_max", "`store`: the largest integer the converted value can take, from constants, loop bounds, tile counts, reduced-axis extents and unit counts (compiler/src/verify/int_range.rs; unknown: it grows with the dims, or is not derivable)"),
    f("stored_int_grows", "`store`: whether that integer grows without bound as the dims do (a dim has no upper bound; unknown: not derivable)"),
    f("stored_int_bound", "`store`: the bound as text, for messages (`up to 127`, `that grow without bound with the dims`, `of a range it cannot derive`)"),
];

/// Facts of one argument; at a call site each is prefixed with the parameter name (`dst_bytes`).
pub const ARG_FACTS: &[FactDef] = &[
    f("space", "`smem`, `global`, `frag`, `scalar`, `pipeline`, `barrier`, `roleref`, `dtypename` or `other`"),
    f("access", "the catalog's access for this parameter: `read`, `write`, `readwrite` or `none`"),
    f("reads", "whether the op reads it"),
    f("writes", "whether the op writes it"),
    f("atomic", "whether the op's effect on it is an atomic read-modify-write (`atomic = true` in the catalog: `atomic_add`, `atomic_min`, `atomic_max`), which accumulates with other writers instead of racing and reads the prior contents"),
    f("proxy", "`async` or `generic` for data accesses, else `none`"),
    f("dtype", "element dtype"),
    f("exact_int_max", "the largest n such that every integer 0..=n is exact in the dtype: 2^p for a float of p significand bits (f16 2048, bf16 256, f32 2^24; `DType::exact_int_max`, IEEE 754-2008 §3.6), the maximum for an integer"),
    f("rank", "rank of the value or window"),
    fi("dim", "extent of dimension i of the value or window (unknown when symbolic)"),
    f("numel", "elements"),
    f("bytes", "bytes of the value or window"),
    f("value", "compile-time integer value"),
    f("scope", "fragment scope: `thread`, `warp`, `warpgroup`"),
    f("mma_operand", "fragment: how `mma_sync` takes it anywhere in the kernel, `a`, `b`, `both` or `none` (`layout::MmaSyncOperands`: the operand layout `ldmatrix` fills)"),
    f("root", "name of the declaration the argument reads from (region, view, tensor, pipeline, barrier, fragment)"),
    f("is_view", "whether the shared memory is named through a view"),
    f("region", "the underlying shared region"),
    f("region_stages", "stages of the underlying region"),
    f("swizzle", "swizzle span of the shared memory as named (of the view for a view); TMA swizzle of a global tensor"),
    f("swizzle_atom", "8 × swizzle span; 16 unswizzled"),
    f("region_swizzle", "swizzle span of the underlying region"),
    f("row_bytes", "bytes of one row (innermost dimension) of the region or view"),
    f("inner_bytes", "bytes of the window's innermost dimension"),
    f("in_bounds", "every index and window start provably stays inside its dimension (unknown when a bound is run-time)"),
    f("contiguous", "the window is one contiguous range of the buffer"),
    f("outer_offset_base", "constant part of the window's byte offset from the buffer start, over all but the innermost dimension"),
    f("outer_offset_step", "the variable part of that offset is a multiple of this (0: the offset is constant)"),
    f("stage_source", "how a staged region's stage is chosen: `pipeline` (`P.stage`), `const`, `expr` or `none`"),
    f("stage_pipeline", "the pipeline whose `.stage` selects the stage"),
    f("tensor", "the global tensor"),
    f("tensor_access", "`in`, `out` or `inout` of the global tensor"),
    f("has_tma", "whether the global tensor is a TMA operand"),
    fi("box", "TMA box extent of the global tensor's dimension i"),
    f("window_is_box", "the global window is exactly one TMA box (indexed dimensions have box extent 1)"),
    f("row_stride_multiple_bytes", "global: bytes the row stride (the innermost dimension's extent × element size) is provably a multiple of"),
    f("inner_start_multiple_bytes", "global: bytes the window's innermost start is provably a multiple of (0: it starts at 0)"),
    f("addr_align", "shared: the largest power of two up to 1024 the window's address is provably a multiple of (the derived layout's alignment of its region or view, and every index term)"),
    f("outer_terms_align", "shared: the largest power of two up to 1024 every index term but the innermost is provably a multiple of (the base not counted)"),
    f("inner_term_align", "shared: the same for the innermost index term"),
    f("tma_align", "shared: the alignment TMA needs of the window: its swizzle atom when swizzled, else 128"),
    f("kind", "`pipeline` or `barrier`"),
    f("name", "the pipeline's or barrier's name"),
    f("stages", "the pipeline's or barrier's stages"),
    f("producer", "the pipeline's producer role (a barrier's first producer)"),
    f("consumer", "the pipeline's consumer role (a barrier's first consumer)"),
    f("side", "the side of the pipeline or barrier the op acts on, from the catalog's effects on the argument: `producer` (waits for an empty stage, arrives on, arms or completes transactions on a full one; arrives on a barrier), `consumer` (waits for a full stage, hands a stage back; waits on a barrier), or `none`"),
    f("side_role", "the role declared on that side: the pipeline's producer or consumer (a barrier's first) (unknown: side `none`)"),
    f("role_is_producer", "whether the executing role is the pipeline's producer (one of a barrier's producers)"),
    f("role_is_consumer", "whether the executing role is the pipeline's consumer (one of a barrier's consumers)"),
    f("role_on_side", "whether the executing role is declared on the side the op acts on (unknown: side `none`)"),
];

/// Extra facts of an argument construct (besides [`ARG_FACTS`] and [`CALL_FACTS`]).
pub const ARG_ONLY_FACTS: &[FactDef] = &[f("param", "the parameter's name")];

/// Every fact of a construct kind, with its meaning. For `Call` with an op, its parameters'
/// prefixed facts; with `None` (any op), the prefixed facts of every catalog parameter name.
pub fn vocabulary(kind: ConstructKind, op: Option<&OpDef>, catalog: &Catalog) -> Vec<(String, FactDef)> {
    let plain = |defs: &[FactDef]| defs.iter().map(|d| (d.name.to_string(), *d)).collect::<Vec<_>>();
    let mut out = match kind {
        ConstructKind::Kernel => plain(KERNEL_FACTS),
        ConstructKind::Grid => plain(GRID_FACTS),
        ConstructKind::Smem => plain(SMEM_FACTS),
        ConstructKind::View => plain(VIEW_FACTS),
        ConstructKind::Tensor => plain(TENSOR_FACTS),
        ConstructKind::Role => plain(ROLE_FACTS),
        ConstructKind::Pipeline => plain(PIPELINE_FACTS),
        ConstructKind::Barrier => plain(BARRIER_FACTS),
        ConstructKind::Call => {
            let mut v = plain(CALL_FACTS);
            let params: BTreeSet<&str> = match op {
                Some(op) => op.params.iter().map(|p| p.name.as_str()).collect(),
                None => catalog.ops.iter().flat_map(|o| o.params.iter().map(|p| p.name.as_str())).collect(),
            };
            for p in params {
                for d in ARG_FACTS {
                    v.push((format!("{p}_{}", d.name), *d));
                }
            }
            v
        }
        ConstructKind::Arg => {
            let mut v = plain(ARG_FACTS);
            v.extend(plain(ARG_ONLY_FACTS));
            v.extend(plain(CALL_FACTS));
            v
        }
    };
    out.extend(plain(TARGET_FACTS));
    if kind != ConstructKind::Kernel {
        out.extend(KERNEL_FACTS.iter().map(|d| (format!("kernel_{}", d.name), *d)));
    }
    out
}

// ─── Computing facts ─────────────────────────────────────────────────────────────────────────────

/// Compute the facts of every construct of `m` for `target`.
pub fn compute(m: &Module, layout: &KernelLayout, target: &TargetInfo, catalog: &Catalog) -> ModuleFacts {
    let mut w = Walker::new(m, catalog);
    w.walk_bodies();
    let mut out = ModuleFacts {
        target: target_facts(target),
        features: target.features.iter().cloned().collect(),
        kernel: FactSet::new(ConstructKind::Kernel, m.name.clone(), Span::default()),
        constructs: Vec::new(),
    };
    out.kernel = kernel_facts(m, layout);
    if let Some((h, g)) = m.grid.iter().next() {
        out.constructs.push(grid_facts(m, g, m.grid.span(h), &w));
    }
    let fills = super::fills::analyze(m);
    let visibility = super::visibility::analyze(m);
    for (h, s) in m.smem.iter() {
        let mut f = smem_facts(m, h, s, layout.region(h), &w);
        fill_facts(fills.get(&h), &mut f);
        visibility_facts(visibility.get(&h), &mut f);
        out.constructs.push(f);
    }
    for (h, v) in m.views.iter() {
        out.constructs.push(view_facts(m, h, v, layout, &w));
    }
    let coverage = super::coverage::analyze(m);
    let indexing = super::indexing::analyze(m);
    for (h, t) in m.tensors.iter() {
        out.constructs.push(tensor_facts(m, h, t, coverage.get(&h), indexing.get(&h), &w));
    }
    for (h, r) in m.roles.iter() {
        out.constructs.push(role_facts(m, h, r, &w));
    }
    for (h, p) in m.pipelines.iter() {
        out.constructs.push(pipeline_facts(m, h, p, layout, &w));
    }
    for (h, b) in m.barriers.iter() {
        out.constructs.push(barrier_facts(m, h, b, &w));
    }
    let ranges = super::int_range::IntRanges::analyze(m);
    for site in &w.calls {
        let (mut call, args) = call_facts(m, catalog, site, layout, &w);
        stored_int_facts(m, site, &ranges, &w, &mut call);
        out.constructs.push(call);
        out.constructs.extend(args);
    }
    out
}

fn target_facts(t: &TargetInfo) -> FactSet {
    let mut f = FactSet::new(ConstructKind::Kernel, t.name.clone(), Span::default());
    f.set("target", t.name.as_str());
    f.set("target_sm", t.sm);
    f.set("target_smem_max", t.smem_per_block_max);
    f.set("target_smem_per_sm", t.smem_per_sm);
    f.set("target_regs_per_sm", t.regs_per_sm);
    f.set("target_regs_per_thread_max", t.regs_per_thread_max);
    f.set("target_max_threads_per_block", t.max_threads_per_block);
    f.set("target_max_threads_per_sm", t.max_threads_per_sm);
    f.set("target_max_cluster", t.max_cluster_size);
    f.set("target_sm_count", t.sm_count);
    f
}

/// A data access mode while walking expressions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Read,
    Write,
    ReadWrite,
    /// Named without touching data (`ab.stage`, a pipeline argument).
    Ref,
}

impl Mode {
    fn reads(self) -> bool {
        matches!(self, Mode::Read | Mode::ReadWrite)
    }
    fn writes(self) -> bool {
        matches!(self, Mode::Write | Mode::ReadWrite)
    }
}

/// Data accesses to one declaration.
#[derive(Clone, Default, Debug)]
struct Uses {
    refs: u32,
    reads: u32,
    writes: u32,
    async_reads: u32,
    async_writes: u32,
}

/// One op call found in a role body.
struct CallSite {
    /// The statement, for calls that are one (`acquire(p)`); None inside an expression.
    stmt: Option<Handle<Stmt>>,
    op: String,
    args: Vec<Option<Handle<Expr>>>,
    span: Span,
    role: Handle<RoleDecl>,
    body_span: Span,
    loop_depth: u32,
    in_tile_loop: bool,
}

struct Walker<'m> {
    m: &'m Module,
    catalog: &'m Catalog,
    calls: Vec<CallSite>,
    smem: Vec<Uses>,
    views: Vec<Uses>,
    tensors: Vec<Uses>,
    pipelines: Vec<Uses>,
    barriers: Vec<Uses>,
    /// Loop variable → (lo, hi) expressions; `let` local → its value.
    loop_bounds: HashMap<Handle<Local>, (Handle<Expr>, Handle<Expr>)>,
    lets: HashMap<Handle<Local>, Handle<Expr>>,
    tile_loop_roles: BTreeSet<Handle<RoleDecl>>,
    calls_per_role: HashMap<Handle<RoleDecl>, u32>,
    // Walk context.
    role: Option<(Handle<RoleDecl>, Span)>,
    loop_depth: u32,
    tile_depth: u32,
}

impl<'m> Walker<'m> {
    fn new(m: &'m Module, catalog: &'m Catalog) -> Walker<'m> {
        Walker {
            m,
            catalog,
            calls: Vec::new(),
            smem: vec![Uses::default(); m.smem.len()],
            views: vec![Uses::default(); m.views.len()],
            tensors: vec![Uses::default(); m.tensors.len()],
            pipelines: vec![Uses::default(); m.pipelines.len()],
            barriers: vec![Uses::default(); m.barriers.len()],
            loop_bounds: HashMap::new(),
            lets: HashMap::new(),
            tile_loop_roles: BTreeSet::new(),
            calls_per_role: HashMap::new(),
            role: None,
            loop_depth: 0,
            tile_depth: 0,
        }
    }

    fn walk_bodies(&mut self) {
        for (h, body) in self.m.bodies.iter() {
            self.role = Some((body.role, *self.m.bodies.span(h)));
            self.block(&body.block);
        }
        self.role = None;
    }

    fn block(&mut self, b: &Block) {
        for s in &b.stmts {
            self.stmt(*s);
        }
    }

    fn stmt(&mut self, h: Handle<Stmt>) {
        let m = self.m;
        match &m.stmts[h] {
            Stmt::Reg(_) => {}
            Stmt::Let { local, value } => {
                self.lets.insert(*local, *value);
                self.expr(*value, Mode::Read);
            }
            Stmt::Assign { target, value } => {
                self.expr(*target, Mode::Write);
                self.expr(*value, Mode::Read);
            }
            Stmt::Op(call) => self.call(call, Some(h), *m.stmts.span(h)),
            Stmt::For { var, lo, hi, body, .. } => {
                self.loop_bounds.insert(*var, (*lo, *hi));
                self.expr(*lo, Mode::Read);
                self.expr(*hi, Mode::Read);
                self.loop_depth += 1;
                self.block(body);
                self.loop_depth -= 1;
            }
            Stmt::ForTiles { body, .. } => {
                if let Some((r, _)) = self.role {
                    self.tile_loop_roles.insert(r);
                }
                self.tile_depth += 1;
                self.block(body);
                self.tile_depth -= 1;
            }
            Stmt::If { cond, then_block, else_block } => {
                self.expr(*cond, Mode::Read);
                self.block(then_block);
                if let Some(e) = else_block {
                    self.block(e);
                }
            }
        }
    }

    fn note(&mut self, root: Root, mode: Mode, proxy_async: bool) {
        let uses = match root {
            Root::Smem(s) => &mut self.smem[s.index()],
            Root::View(v) => &mut self.views[v.index()],
            Root::Tensor(t) => &mut self.tensors[t.index()],
            Root::Pipeline(p) => &mut self.pipelines[p.index()],
            Root::Barrier(b) => &mut self.barriers[b.index()],
        };
        uses.refs += 1;
        if mode.reads() {
            uses.reads += 1;
            uses.async_reads += u32::from(proxy_async);
        }
        if mode.writes() {
            uses.writes += 1;
            uses.async_writes += u32::from(proxy_async);
        }
    }

    fn expr(&mut self, h: Handle<Expr>, mode: Mode) {
        self.expr_p(h, mode, false);
    }

    fn expr_p(&mut self, h: Handle<Expr>, mode: Mode, proxy_async: bool) {
        let m = self.m;
        match &m.exprs[h].kind {
            ExprKind::Smem(s) => self.note(Root::Smem(*s), mode, proxy_async),
            ExprKind::View(v) => self.note(Root::View(*v), mode, proxy_async),
            ExprKind::Tensor(t) => self.note(Root::Tensor(*t), mode, proxy_async),
            ExprKind::Pipeline(p) => self.note(Root::Pipeline(*p), Mode::Ref, false),
            ExprKind::Barrier(b) => self.note(Root::Barrier(*b), Mode::Ref, false),
            ExprKind::Field { base, .. } => self.expr(*base, Mode::Ref),
            ExprKind::Index { base, items } => {
                self.expr_p(*base, mode, proxy_async);
                for it in items {
                    match it {
                        IndexItem::At(e) | IndexItem::Window { start: e, .. } => self.expr(*e, Mode::Read),
                        IndexItem::Full => {}
                    }
                }
            }
            ExprKind::Call(c) => self.call(c, None, *m.exprs.span(h)),
            ExprKind::Unary(_, x) => self.expr(*x, Mode::Read),
            ExprKind::Binary(_, a, b) => {
                self.expr(*a, Mode::Read);
                self.expr(*b, Mode::Read);
            }
            _ => {}
        }
    }

    fn call(&mut self, c: &OpCall, stmt: Option<Handle<Stmt>>, span: Span) {
        if let Some((role, body_span)) = self.role {
            *self.calls_per_role.entry(role).or_default() += 1;
            self.calls.push(CallSite {
                stmt,
                op: c.op.clone(),
                args: c.args.clone(),
                span,
                role,
                body_span,
                loop_depth: self.loop_depth,
                in_tile_loop: self.tile_depth > 0,
            });
        }
        let Some(op) = self.catalog.get(&c.op) else {
            for a in c.args.iter().flatten() {
                self.expr(*a, Mode::Read);
            }
            return;
        };
        for (p, a) in op.params.iter().zip(&c.args) {
            let Some(a) = a else { continue };
            self.expr_p(*a, param_mode(p), param_proxy(op, &p.name) == Proxy::Async);
        }
    }

    /// Output (`out` / `inout`) tensors each role's body stores into, with the store count.
    fn output_writes(&self) -> BTreeMap<Handle<RoleDecl>, (BTreeSet<Handle<TensorDecl>>, usize)> {
        let mut out: BTreeMap<Handle<RoleDecl>, (BTreeSet<Handle<TensorDecl>>, usize)> = BTreeMap::new();
        for site in self.calls.iter().filter(|c| c.op == "store" || c.op == "tma_store") {
            let Some(dst) = site.args.first().copied().flatten() else { continue };
            if let Some(Root::Tensor(t)) = root_of(self.m, &self.lets, dst) {
                if self.m.tensors[t].access != crate::syntax::ast::Access::In {
                    let e = out.entry(site.role).or_default();
                    e.0.insert(t);
                    e.1 += 1;
                }
            }
        }
        out
    }

    /// Every call crediting pipeline `p` through complete_tx, with the written regions.
    fn fills_of(&self, p: Handle<PipelineDecl>) -> Vec<(&CallSite, Handle<SmemDecl>)> {
        let mut out = Vec::new();
        for site in &self.calls {
            let Some(op) = self.catalog.get(&site.op) else { continue };
            if credited_pipeline(self.m, op, &site.args) != Some(p) {
                continue;
            }
            for (param, a) in op.params.iter().zip(&site.args) {
                let Some(a) = a else { continue };
                if param.access.is_some_and(|x| matches!(x, Access::Write | Access::Readwrite)) {
                    if let Some(r) = region_of(self.m, &self.lets, *a) {
                        out.push((site, r));
                    }
                }
            }
        }
        out
    }
}

/// How a call uses an argument: the catalog's access, else a read for value-like parameters
/// (`cast(x, ...)` reads `x`) and a mere reference for pipelines, barriers, roles and dtypes.
fn param_mode(p: &crate::catalog::ParamDef) -> Mode {
    match p.access {
        Some(Access::Read) => Mode::Read,
        Some(Access::Write) => Mode::Write,
        Some(Access::Readwrite) => Mode::ReadWrite,
        None if p.kind.is_data() || matches!(p.kind, ParamKind::Value | ParamKind::Int | ParamKind::ConstInt | ParamKind::Float) => Mode::Read,
        None => Mode::Ref,
    }
}

/// The proxy of a param's data effect, per the catalog.
fn param_proxy(op: &OpDef, param: &str) -> Proxy {
    op.effects.iter().find(|e| e.on == param && e.access.is_data()).map_or(Proxy::None, |e| e.proxy)
}

/// The pipeline a call credits bytes to (an argument with a `complete_tx` effect).
fn credited_pipeline(m: &Module, op: &OpDef, args: &[Option<Handle<Expr>>]) -> Option<Handle<PipelineDecl>> {
    let e = op.effects.iter().find(|e| e.access == EffectAccess::CompleteTx)?;
    let i = op.param_index(&e.on)?;
    match &m.exprs[args.get(i).copied().flatten()?].kind {
        ExprKind::Pipeline(p) => Some(*p),
        _ => None,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Root {
    Smem(Handle<SmemDecl>),
    View(Handle<ViewDecl>),
    Tensor(Handle<TensorDecl>),
    Pipeline(Handle<PipelineDecl>),
    Barrier(Handle<BarrierDecl>),
}

/// The declaration an argument expression names, under any indexing.
fn root_of(m: &Module, lets: &HashMap<Handle<Local>, Handle<Expr>>, mut h: Handle<Expr>) -> Option<Root> {
    for _ in 0..64 {
        match &m.exprs[h].kind {
            ExprKind::Index { base, .. } => h = *base,
            ExprKind::Local(l) if lets.contains_key(l) => h = lets[l],
            ExprKind::Smem(s) => return Some(Root::Smem(*s)),
            ExprKind::View(v) => return Some(Root::View(*v)),
            ExprKind::Tensor(t) => return Some(Root::Tensor(*t)),
            ExprKind::Pipeline(p) => return Some(Root::Pipeline(*p)),
            ExprKind::Barrier(b) => return Some(Root::Barrier(*b)),
            _ => return None,
        }
    }
    None
}

/// Follow `let` bindings: the expression a local names (`let x = X[...]` then `f(x)`).
fn resolve_let(lets: &HashMap<Handle<Local>, Handle<Expr>>, m: &Module, mut h: Handle<Expr>) -> Handle<Expr> {
    for _ in 0..64 {
        match &m.exprs[h].kind {
            ExprKind::Local(l) if lets.contains_key(l) => h = lets[l],
            _ => break,
        }
    }
    h
}

/// The shared region under an argument (through a view).
fn region_of(m: &Module, lets: &HashMap<Handle<Local>, Handle<Expr>>, h: Handle<Expr>) -> Option<Handle<SmemDecl>> {
    match root_of(m, lets, h)? {
        Root::Smem(s) => Some(s),
        Root::View(v) => Some(m.views[v].region),
        _ => None,
    }
}

fn swizzle_atom(sw: Swizzle) -> i64 {
    match sw {
        Swizzle::None => 16,
        s => i64::from(s.bytes()) * 8,
    }
}

fn kernel_facts(m: &Module, layout: &KernelLayout) -> FactSet {
    let mut f = FactSet::new(ConstructKind::Kernel, m.name.clone(), Span::default());
    let threads = layout.threads_per_block;
    f.set("name", m.name.as_str());
    f.set("smem_bytes", layout.smem_bytes);
    f.set("smem_regions_bytes", layout.regions_bytes);
    f.set("smem_mbarrier_bytes", layout.mbarrier_bytes);
    f.set("smem_base_slack", layout.base_slack);
    f.set("smem_regions", m.smem.len());
    inexact_division_facts(m, &mut f);
    f.set("threads_per_block", threads);
    f.set("warps", threads / 32);
    f.set("roles", m.roles.len());
    let with_regs = m.roles.iter().filter(|(_, r)| r.regs.is_some()).count();
    f.set("roles_with_regs", with_regs);
    let mut covered = BTreeSet::new();
    for (_, r) in m.roles.iter() {
        covered.extend(r.warps());
    }
    let idle = (threads / 32).saturating_sub(covered.iter().filter(|w| **w < threads / 32).count() as u32);
    f.set("idle_warps", idle);
    let launch_regs = (threads > 0).then_some(i64::from(layout.launch_regs));
    f.set("launch_regs", launch_regs);
    f.set("reg_pool", launch_regs.map(|l| l * i64::from(threads)));
    let total = launch_regs.map(|l| {
        let roles: i64 = m.roles.iter().map(|(_, r)| i64::from(r.threads()) * r.regs.map_or(l, i64::from)).sum();
        roles + i64::from(idle) * 32 * l
    });
    f.set("regs_total", total);
    f.set("pipelines", m.pipelines.len());
    f.set("barriers", m.barriers.len());
    f.set("tensors", m.tensors.len());
    let grid = m.grid();
    f.set("has_grid", grid.is_some());
    f.set("persistent", grid.is_some_and(|g| g.persistent));
    f.set("cluster_size", grid.map_or(1, |g| g.cluster.iter().product::<i64>()));
    // Spans.
    if let Some(h) = m.smem.handles().max_by_key(|h| (m.smem[*h].total_bytes(), std::cmp::Reverse(h.index()))) {
        f.span_at("smem_largest", m.smem.span(h).item);
    }
    if let Some(h) = m.smem.handles().last() {
        f.span_at("smem_last", m.smem.span(h).item);
    }
    if let Some(h) = m.roles.handles().next() {
        f.span_at("role_first", m.roles.span(h).item);
    }
    if let Some(h) = m.roles.handles().max_by_key(|h| (m.roles[*h].warps().end, std::cmp::Reverse(h.index()))) {
        f.span_at("role_last", m.roles.span(h).item);
    }
    let regs_role = m
        .roles
        .handles()
        .filter(|h| m.roles[*h].regs.is_some())
        .max_by_key(|h| (u64::from(m.roles[*h].threads()) * u64::from(m.roles[*h].regs.unwrap_or(0)), std::cmp::Reverse(h.index())));
    if let Some(h) = regs_role {
        f.span_at("regs_role", m.roles.span(h).attr("regs"));
    } else if let Some(h) = m.roles.handles().next() {
        f.span_at("regs_role", m.roles.span(h).item);
    }
    if let Some(h) = m.grid.handles().next() {
        f.span_at("grid", m.grid.span(h).item);
    }
    // The kernel has no span of its own in the IR: its `decl` is the first declaration.
    let first = [
        m.dims.handles().next().map(|h| m.dims.span(h).item),
        m.tensors.handles().next().map(|h| m.tensors.span(h).item),
        m.grid.handles().next().map(|h| m.grid.span(h).item),
        m.smem.handles().next().map(|h| m.smem.span(h).item),
        m.roles.handles().next().map(|h| m.roles.span(h).item),
    ]
    .into_iter()
    .flatten()
    .min_by_key(|s| s.start);
    if let Some(s) = first {
        f.decl = s;
        f.span_at("decl", s);
    }
    f
}

fn grid_facts(m: &Module, g: &GridDecl, spans: &DeclSpans, w: &Walker) -> FactSet {
    let mut f = FactSet::decl(ConstructKind::Grid, &g.name, spans);
    f.set("name", g.name.as_str());
    f.set("persistent", g.persistent);
    f.set("axes", g.axes.len());
    f.set("cluster_size", g.cluster.iter().product::<i64>());
    // Whether every cluster extent provably divides its tile axis' count (a cluster must tile
    // the grid exactly: the launch rejects a grid that is not a multiple of the cluster).
    let undivided = g.cluster.iter().zip(&g.axes).find(|(c, a)| **c > 1 && size_multiple(m, &a.extent) % **c != 0);
    f.set("cluster_divides_tiles", undivided.is_none());
    if let Some((c, a)) = undivided {
        f.set("undivided_axis", a.name.as_str());
        f.set("undivided_cluster", *c);
        f.set("undivided_axis_multiple", size_multiple(m, &a.extent));
    }
    f.set("cluster_rank", g.cluster.len());
    f.set_list("cluster", g.cluster.iter().map(|c| Value::Int(*c)).collect());
    f.set("min_cluster", g.cluster.iter().min().copied());
    let with_body: Vec<Handle<RoleDecl>> = m.bodies.iter().map(|(_, b)| b.role).collect();
    let looping = with_body.iter().filter(|r| w.tile_loop_roles.contains(r)).count();
    f.set("roles_with_tile_loop", looping);
    // An axis extent divided by a constant 0 (`M / 0`): no tile count exists.
    let zero_div = g.axes.iter().find(|a| divides_by_zero(&a.extent));
    f.set("axes_dividing_by_zero", g.axes.iter().filter(|a| divides_by_zero(&a.extent)).count());
    f.set("zero_divided_axis", zero_div.map(|a| a.name.clone()));
    f.set("roles_without_tile_loop", with_body.len() - looping);
    f
}

fn smem_facts(m: &Module, h: Handle<SmemDecl>, s: &SmemDecl, slot: &RegionSlot, w: &Walker) -> FactSet {
    let spans = m.smem.span(h);
    let mut f = FactSet::decl(ConstructKind::Smem, &s.name, spans);
    let e = s.dtype.size_bytes();
    f.set("name", s.name.as_str());
    f.set("dtype", s.dtype.name());
    f.set("elem_bytes", e);
    f.set("rank", s.shape.len());
    f.set_list("dim", s.shape.iter().map(|d| Value::Int(*d)).collect());
    f.set("stages", s.stages);
    f.set("stage_bytes", slot.stage_bytes);
    f.set("bytes", slot.bytes);
    f.set("inner_bytes", s.shape.last().map(|d| *d as u64 * e));
    f.set("swizzle", s.swizzle.bytes());
    f.set("swizzle_atom", swizzle_atom(s.swizzle));
    // A declared alignment is checked as written (V216); the layout places the region at
    // `align`, which is the declared value whenever that is valid.
    let align = s.align.map_or(slot.align, u64::from);
    f.set("align", align);
    f.set("align_declared", s.align.is_some());
    f.set("align_pow2", align.is_power_of_two());
    f.set("align_max", ALIGN_MAX);
    f.set("offset", slot.offset);
    f.set("view_atom", slot.view_atom);
    if let Some(v) = slot.view_atom_of {
        f.set("view_atom_view", m.views[v].name.as_str());
        f.span_at("view_atom_view", m.views.span(v).item);
    }
    let views: Vec<Handle<ViewDecl>> = m.views.iter().filter(|(_, v)| v.region == h).map(|(vh, _)| vh).collect();
    f.set("views", views.len());
    let mut u = w.smem[h.index()].clone();
    for v in &views {
        let vu = &w.views[v.index()];
        u.refs += vu.refs;
        u.reads += vu.reads;
        u.writes += vu.writes;
        u.async_reads += vu.async_reads;
        u.async_writes += vu.async_writes;
    }
    f.set("used", u.refs > 0);
    f.set("reads", u.reads);
    f.set("writes", u.writes);
    f.set("async_reads", u.async_reads);
    f.set("async_writes", u.async_writes);
    let mut pipes = BTreeSet::new();
    for (p, _) in m.pipelines.iter() {
        if let Some((site, _)) = w.fills_of(p).into_iter().find(|(_, r)| *r == h) {
            if pipes.is_empty() {
                f.span_at("fill_call", site.span);
            }
            pipes.insert(p);
        }
    }
    f.set("fill_pipelines", pipes.len());
    let (loads, fill) = tma_fill(m, h, w);
    f.set("tma_loads", loads);
    f.set("tma_fill_bytes", fill);
    f
}

/// The TMA loads into region `h` (calls writing a shared-memory parameter through the async
/// proxy — `tma_load` — whose destination is the region or a view of it) and an upper bound of
/// the bytes of one stage they write. Each load counts its destination window's bytes; along a
/// dimension indexed by an expression that varies (a loop variable, `role.warpgroup`, ...) it
/// counts every position the expression's range covers (`x_s[dc]` in `for dc in 0..2` writes
/// both halves), the whole dimension when that range is unknown. The stage index of a staged
/// region is not counted: every stage is filled alike. Loads of the same bytes add up (a bound,
/// not a union), so a shortfall against `stage_bytes` means part of the stage is never written
/// by TMA.
fn tma_fill(m: &Module, h: Handle<SmemDecl>, w: &Walker) -> (usize, u64) {
    let iv = Intervals { m, w };
    let (mut loads, mut total) = (0usize, 0u64);
    for site in &w.calls {
        let Some(op) = w.catalog.get(&site.op) else { continue };
        for (p, a) in op.params.iter().zip(&site.args) {
            let Some(a) = *a else { continue };
            if p.kind != ParamKind::Smem || !param_mode(p).writes() || param_proxy(op, &p.name) != Proxy::Async {
                continue;
            }
            // The destination's root: the region (its stage dimension first when staged) or a view.
            let (shape, dtype, staged) = match root_of(m, &w.lets, a) {
                Some(Root::Smem(s)) if s == h => {
                    let d = &m.smem[s];
                    let mut shape = d.shape.clone();
                    if d.stages > 1 {
                        shape.insert(0, i64::from(d.stages));
                    }
                    (shape, d.dtype, d.stages > 1)
                }
                Some(Root::View(v)) if m.views[v].region == h => (m.views[v].shape.clone(), m.views[v].dtype, false),
                _ => continue,
            };
            loads += 1;
            let skip = usize::from(staged);
            let covered: Vec<i64> = match selection(m, &w.lets, a, shape.len()) {
                Some(sel) => sel
                    .iter()
                    .zip(&shape)
                    .skip(skip)
                    .map(|(s, &extent)| {
                        let (start, len) = match s {
                            Sel::Full => return extent,
                            Sel::At(e) => (*e, 1),
                            Sel::Window(e, l) => (*e, *l),
                        };
                        if m.const_value(start).is_some() {
                            return len.min(extent);
                        }
                        match iv.of(start, 0) {
                            Iv { lo: Some(lo), hi: Some(hi) } if hi >= lo => hi.saturating_sub(lo).saturating_add(len).min(extent),
                            _ => extent,
                        }
                    })
                    .collect(),
                // A window of a window: assume it covers everything (an upper bound).
                None => shape[skip..].to_vec(),
            };
            let elems = covered.iter().fold(1i64, |acc, d| acc.saturating_mul((*d).max(0)));
            total = total.saturating_add((elems as u64).saturating_mul(dtype.size_bytes()));
        }
    }
    (loads, total)
}

fn view_facts(m: &Module, h: Handle<ViewDecl>, v: &ViewDecl, layout: &KernelLayout, w: &Walker) -> FactSet {
    let spans = m.views.span(h);
    let mut f = FactSet::decl(ConstructKind::View, &v.name, spans);
    let region = &m.smem[v.region];
    let slot = layout.view(h);
    let bytes = slot.bytes as i64;
    f.set("name", v.name.as_str());
    f.set("region", region.name.as_str());
    f.set("dtype", v.dtype.name());
    f.set("rank", v.shape.len());
    f.set_list("dim", v.shape.iter().map(|d| Value::Int(*d)).collect());
    f.set("bytes", bytes);
    f.set("offset", v.offset);
    f.set("end", v.offset.checked_add(bytes));
    f.set("inner_bytes", v.shape.last().map(|d| *d * v.dtype.size_bytes() as i64));
    f.set("swizzle", v.swizzle.bytes());
    f.set("swizzle_atom", swizzle_atom(v.swizzle));
    f.set("required_align", swizzle_atom(v.swizzle).max(16));
    f.set("region_bytes", layout.region(v.region).bytes);
    f.set("region_swizzle", region.swizzle.bytes());
    f.set("block_offset", slot.offset);
    let u = &w.views[h.index()];
    f.set("used", u.refs > 0);
    f.set("reads", u.reads);
    f.set("writes", u.writes);
    let mut other = w.smem[v.region.index()].clone();
    for (vh, ov) in m.views.iter() {
        if vh != h && ov.region == v.region {
            other.reads += w.views[vh.index()].reads;
            other.writes += w.views[vh.index()].writes;
        }
    }
    f.set("region_reads", other.reads);
    f.set("region_writes", other.writes);
    f.span_at("region", m.smem.span(v.region).item);
    f
}

fn tensor_facts(m: &Module, h: Handle<TensorDecl>, t: &TensorDecl, coverage: Option<&Coverage>, indexing: Option<&TensorIndexing>, w: &Walker) -> FactSet {
    let spans = m.tensors.span(h);
    let mut f = FactSet::decl(ConstructKind::Tensor, &t.name, spans);
    let e = t.dtype.size_bytes() as i64;
    f.set("name", t.name.as_str());
    f.set("access", t.access.keyword());
    f.set("dtype", t.dtype.name());
    f.set("elem_bytes", e);
    f.set("rank", t.shape.len());
    f.set_list("dim", t.shape.iter().map(|d| d.as_const().into_value()).collect());
    f.set_list("dim_multiple", t.shape.iter().map(|d| Value::Int(size_multiple(m, d))).collect());
    // Strides: dimension i steps over Π_{j>i} d_j elements.
    let mut aligned = Some(true);
    for i in 0..t.shape.len().saturating_sub(1) {
        let rest = &t.shape[i + 1..];
        let div = rest.iter().map(|d| size_multiple(m, d)).fold(1i64, |a, b| a.saturating_mul(b));
        if div.saturating_mul(e) % 16 == 0 {
            continue;
        }
        let exact: Option<i64> = rest.iter().map(Size::as_const).try_fold(1i64, |a, b| b.map(|b| a.saturating_mul(b)));
        match exact {
            Some(x) if x.saturating_mul(e) % 16 != 0 => {
                aligned = Some(false);
                break;
            }
            Some(_) => {}
            None => aligned = aligned.and(None),
        }
    }
    f.set("strides_16b_aligned", aligned);
    f.set("has_tma", t.tma.is_some());
    let b = t.tma.as_ref();
    f.set("box_rank", b.map(|b| b.box_dims.len()));
    f.set_list("box", b.map(|b| b.box_dims.iter().map(|d| Value::Int(*d)).collect()).unwrap_or_default());
    f.set("max_box", b.and_then(|b| b.box_dims.iter().max().copied()));
    f.set("min_box", b.and_then(|b| b.box_dims.iter().min().copied()));
    f.set("box_inner", b.and_then(|b| b.box_dims.last().copied()));
    f.set("box_inner_bytes", b.and_then(|b| b.box_dims.last().map(|d| d * e)));
    f.set("box_bytes", b.map(|b| b.box_dims.iter().product::<i64>() * e));
    f.set("swizzle", b.map_or(0, |b| b.swizzle.bytes()));
    let u = &w.tensors[h.index()];
    f.set("used", u.refs > 0);
    f.set("reads", u.reads);
    f.set("writes", u.writes);
    let uses_in = |op: &str| w.calls.iter().filter(|c| c.op == op && c.args.iter().flatten().any(|a| root_of(m, &w.lets, *a) == Some(Root::Tensor(h)))).count();
    output_coverage_facts(m, coverage, &mut f);
    index_facts(indexing, &mut f);
    f.set("tma_loads", uses_in("tma_load"));
    f.set("cp_async_src", uses_in("cp_async") > 0);
    // Which roles write it, and a role without a body declared like one of them: a forgotten
    // `on` block leaves that role's share (its warpgroups' rows) unwritten.
    let writes = w.output_writes();
    let writers: Vec<Handle<RoleDecl>> = writes.iter().filter(|(_, (ts, _))| ts.contains(&h)).map(|(r, _)| *r).collect();
    f.set("writer_roles", writers.len());
    f.set("first_writer_role", writers.first().map(|r| m.roles[*r].name.clone()));
    let owner = m.roles.iter().find(|(o, od)| {
        m.body_of(*o).is_none() && writers.iter().any(|wr| m.roles[*wr].unit == od.unit && m.roles[*wr].count == od.count)
    });
    f.set("unwritten_owner", owner.map(|(_, od)| od.name.clone()));
    f.set("has_unwritten_owner", owner.is_some());
    if let Some((o, _)) = owner {
        f.span_at("unwritten_owner", m.roles.span(o).item);
    }
    f
}

fn role_facts(m: &Module, h: Handle<RoleDecl>, r: &RoleDecl, w: &Walker) -> FactSet {
    let spans = m.roles.span(h);
    let mut f = FactSet::decl(ConstructKind::Role, &r.name, spans);
    let warps = r.warps();
    f.set("name", r.name.as_str());
    f.set("unit", unit_name(r.unit));
    f.set("first", r.first);
    f.set("count", r.count);
    f.set("first_warp", warps.start);
    f.set("warps", warps.len());
    f.set("threads", r.threads());
    f.set("regs", r.regs);
    f.set("has_regs", r.regs.is_some());
    let body = m.bodies.iter().find(|(_, b)| b.role == h).map(|(bh, _)| *m.bodies.span(bh));
    f.set("has_body", body.is_some());
    f.set("has_tile_loop", w.tile_loop_roles.contains(&h));
    f.set("calls", w.calls_per_role.get(&h).copied().unwrap_or(0));
    let earlier: Vec<Handle<RoleDecl>> =
        m.roles.iter().filter(|(o, od)| *o < h && od.warps().start < warps.end && warps.start < od.warps().end).map(|(o, _)| o).collect();
    f.set("overlaps", earlier.len());
    if let Some(o) = earlier.first() {
        f.span_at("overlap", m.roles.span(*o).item);
    }
    f.set("produces", m.pipelines.iter().filter(|(_, p)| p.producer == h).count());
    f.set("consumes", m.pipelines.iter().filter(|(_, p)| p.consumer == h).count());
    // The budgets of the roles this one feeds, to compare a producer's budget with theirs.
    let fed: Vec<u32> = m.pipelines.iter().filter(|(_, p)| p.producer == h).filter_map(|(_, p)| m.roles[p.consumer].regs).collect();
    f.set("consumer_regs_min", fed.iter().min().copied());
    if let Some((ph, p)) = m.pipelines.iter().find(|(_, p)| p.producer == h && m.roles[p.consumer].regs.is_some()) {
        f.set("fed_role", m.roles[p.consumer].name.as_str());
        f.span_at("fed_role", m.roles.span(p.consumer).attr("regs"));
        let _ = ph;
    }
    f.span_at("body", body.unwrap_or(spans.item));
    f.span_at("unit", spans.attr(unit_name(r.unit)));
    let writes = w.output_writes();
    let (tensors, stores) = writes.get(&h).map_or((0, 0), |(t, n)| (t.len(), *n));
    f.set("writes_outputs", tensors);
    f.set("output_stores", stores);
    let peer = m.roles.iter().find(|(o, od)| *o != h && od.unit == r.unit && od.count == r.count && writes.contains_key(o));
    f.set("peer_writer", peer.map(|(_, od)| od.name.clone()));
    if let Some((o, _)) = peer {
        f.span_at("peer_writer", m.roles.span(o).item);
    }
    f
}

fn unit_name(u: RoleUnit) -> &'static str {
    match u {
        RoleUnit::Warp => "warp",
        RoleUnit::Warpgroup => "warpgroup",
    }
}

fn pipeline_facts(m: &Module, h: Handle<PipelineDecl>, p: &PipelineDecl, layout: &KernelLayout, w: &Walker) -> FactSet {
    let spans = m.pipelines.span(h);
    let mut f = FactSet::decl(ConstructKind::Pipeline, &p.name, spans);
    let has_body = |r: Handle<RoleDecl>| m.body_of(r).is_some();
    f.set("name", p.name.as_str());
    f.set("stages", p.stages);
    f.set("producer", m.roles[p.producer].name.as_str());
    f.set("consumer", m.roles[p.consumer].name.as_str());
    f.set("producer_has_body", has_body(p.producer));
    f.set("consumer_has_body", has_body(p.consumer));
    f.set("used", w.pipelines[h.index()].refs > 0);
    let names_p = |c: &&CallSite| c.args.iter().flatten().any(|a| matches!(m.exprs[*a].kind, ExprKind::Pipeline(x) if x == h));
    let count = |op: &str| w.calls.iter().filter(|c| c.op == op).filter(names_p).count();
    f.set("acquires", count("acquire"));
    f.set("waits", count("wait"));
    f.set("releases", count("release"));
    f.set("acquire_in_loop", w.calls.iter().filter(|c| c.op == "acquire").filter(names_p).any(|c| c.loop_depth > 0));
    let slots = layout.pipeline(h);
    f.set("full_offset", slots.full);
    f.set("empty_offset", slots.empty);
    let fills = w.fills_of(h);
    let sites: BTreeSet<Span> = fills.iter().map(|(c, _)| c.span).collect();
    f.set("tma_loads", sites.len());
    let regions: BTreeSet<Handle<SmemDecl>> = fills.iter().map(|(_, r)| *r).collect();
    f.set("fills", regions.len());
    f.set("min_fill_stages", regions.iter().map(|r| m.smem[*r].stages).min());
    f.set("max_fill_stages", regions.iter().map(|r| m.smem[*r].stages).max());
    if let Some(r) = regions.iter().find(|r| m.smem[**r].stages != p.stages).or(regions.iter().next()) {
        f.span_at("fill_region", m.smem.span(*r).item);
    }
    f.span_at("producer", m.roles.span(p.producer).item);
    f.span_at("consumer", m.roles.span(p.consumer).item);
    let (missing, role) = if !has_body(p.producer) {
        (spans.attr("producer"), Some(p.producer))
    } else if !has_body(p.consumer) {
        (spans.attr("consumer"), Some(p.consumer))
    } else {
        (spans.name, None)
    };
    f.set("role_without_body", role.map(|r| m.roles[r].name.clone()));
    f.span_at("missing_body_role", missing);
    f
}

fn barrier_facts(m: &Module, h: Handle<BarrierDecl>, b: &BarrierDecl, w: &Walker) -> FactSet {
    let spans = m.barriers.span(h);
    let mut f = FactSet::decl(ConstructKind::Barrier, &b.name, spans);
    let no_body = |rs: &[Handle<RoleDecl>]| rs.iter().filter(|r| m.body_of(**r).is_none()).count();
    f.set("name", b.name.as_str());
    f.set("stages", b.stages);
    f.set("count", b.count);
    f.set("producers", b.producers.len());
    f.set("consumers", b.consumers.len());
    f.set("producers_without_body", no_body(&b.producers));
    f.set("consumers_without_body", no_body(&b.consumers));
    f.set("used", w.barriers[h.index()].refs > 0);
    let names_b = |c: &&CallSite| c.args.iter().flatten().any(|a| root_of(m, &w.lets, *a) == Some(Root::Barrier(h)));
    f.set("waits", w.calls.iter().filter(|c| c.op == "wait").filter(names_b).count());
    f.set("arrives", w.calls.iter().filter(|c| c.op == "arrive" || c.op == "arrive_expect_tx").filter(names_b).count());
    let first_without = |rs: &[Handle<RoleDecl>]| rs.iter().copied().find(|r| m.body_of(*r).is_none());
    let (missing, role) = match (first_without(&b.producers), first_without(&b.consumers)) {
        (Some(r), _) => (spans.attr("producer"), Some(r)),
        (None, Some(r)) => (spans.attr("consumer"), Some(r)),
        (None, None) => (spans.name, None),
    };
    f.set("role_without_body", role.map(|r| m.roles[r].name.clone()));
    f.span_at("missing_body_role", missing);
    f
}

// ─── Call sites and arguments ────────────────────────────────────────────────────────────────────

fn call_facts(m: &Module, catalog: &Catalog, site: &CallSite, layout: &KernelLayout, w: &Walker) -> (FactSet, Vec<FactSet>) {
    let role = &m.roles[site.role];
    let mut common: Vec<(&str, Value)> = vec![
        ("op", Value::Sym(site.op.clone())),
        ("role", Value::Sym(role.name.clone())),
        ("role_unit", Value::Sym(unit_name(role.unit).into())),
        ("role_first_warp", Value::Int(i64::from(role.warps().start))),
        ("role_warps", Value::Int(role.warps().len() as i64)),
        ("role_threads", Value::Int(i64::from(role.threads()))),
        ("role_regs", role.regs.into_value()),
        ("loop_depth", Value::Int(i64::from(site.loop_depth))),
        ("in_tile_loop", Value::Bool(site.in_tile_loop)),
    ];
    let op = catalog.get(&site.op);
    if let Some(op) = op {
        common.push(("issue", Value::Sym(format!("{:?}", op.issue).to_lowercase())));
    }
    let role_span = m.roles.span(site.role).item;
    let mut call = FactSet::new(ConstructKind::Call, site.op.clone(), site.span);
    call.op = Some(site.op.clone());
    for (k, v) in &common {
        call.set(k, v.clone());
    }
    call.span_at("call", site.span);
    call.span_at("role", role_span);
    call.span_at("body", site.body_span);
    if let Some(tx) = site.stmt.and_then(|st| layout.tx_of(st)) {
        call.set("tx_bytes", tx.bytes());
        call.set("tx_derivable", tx.bytes().is_some());
        call.set("tx_max", TX_COUNT_MAX);
        match tx {
            TxDerivation::Underivable { reason, span } => {
                call.set("tx_reason", *reason);
                call.span_at("tx_cause", *span);
            }
            TxDerivation::Bytes(_) => call.span_at("tx_cause", site.span),
        }
    }
    let mut args = Vec::new();
    let Some(op) = op else { return (call, args) };
    for (p, a) in op.params.iter().zip(&site.args) {
        let Some(a) = a else { continue };
        let arg_span = *m.exprs.span(*a);
        call.span_at(&format!("arg:{}", p.name), arg_span);
        let mut af = FactSet::new(ConstructKind::Arg, format!("{}({})", site.op, p.name), arg_span);
        af.op = Some(site.op.clone());
        for (k, v) in &common {
            af.set(k, v.clone());
        }
        af.set("param", p.name.as_str());
        af.span_at("arg", arg_span);
        af.span_at("call", site.span);
        af.span_at("role", role_span);
        arg_facts(m, op, p, *a, site.role, layout, w, &mut af);
        for (k, v) in af.values.iter() {
            if ARG_FACTS.iter().any(|d| d.name == k) {
                call.values.insert(format!("{}_{k}", p.name), v.clone());
            }
        }
        for (k, v) in af.lists.iter() {
            call.lists.insert(format!("{}_{k}", p.name), v.clone());
        }
        if let Some(s) = af.spans.get("root") {
            call.span_at(&format!("root:{}", p.name), *s);
        }
        args.push(af);
    }
    (call, args)
}

/// A `store` of an integer converted to a float (`store(Y[...], cast(idx, f16))`): how large the
/// integer gets, to compare with the destination dtype's exact-integer range (V330).
fn stored_int_facts(m: &Module, site: &CallSite, ranges: &super::int_range::IntRanges, w: &Walker, f: &mut FactSet) {
    use super::int_range::IntMax;
    if site.op != "store" {
        return;
    }
    let Some(src) = site.args.get(1).copied().flatten() else { return };
    let src = resolve_let(&w.lets, m, src);
    let inner = match &m.exprs[src].kind {
        ExprKind::Call(c) if c.op == "cast" => c.args.first().copied().flatten(),
        _ => None,
    };
    let int = inner.filter(|x| m.exprs[*x].ty.dtype().is_some_and(DType::is_int) && m.exprs[src].ty.dtype().is_some_and(DType::is_float));
    f.set("stores_int_as_float", int.is_some());
    let Some(x) = int else { return };
    f.set("stored_int_dtype", m.exprs[x].ty.dtype().map(DType::name));
    let max = ranges.max_of(x);
    let (value, grows, text) = match max {
        IntMax::Bounded(v) => (Some(v), Some(false), format!("up to {v}")),
        IntMax::GrowsWithDims => (None, Some(true), "that grow without bound with the dims".to_string()),
        IntMax::Unknown => (None, None, "of a range it cannot derive".to_string()),
    };
    f.set("stored_int_max", value);
    f.set("stored_int_grows", grows);
    f.set("stored_int_bound", text);
}

/// One dimension of an indexed buffer: how it is indexed.
#[derive(Clone, Copy)]
enum Sel {
    At(Handle<Expr>),
    Window(Handle<Expr>, i64),
    Full,
}

/// The index chain of an argument, flattened onto the root's dimensions (`None` when a nested
/// index cannot be mapped).
fn selection(m: &Module, lets: &HashMap<Handle<Local>, Handle<Expr>>, h: Handle<Expr>, rank: usize) -> Option<Vec<Sel>> {
    let mut chain = Vec::new();
    let mut cur = h;
    for _ in 0..64 {
        match &m.exprs[cur].kind {
            ExprKind::Index { base, items } => {
                chain.push(items);
                cur = *base;
            }
            ExprKind::Local(l) if lets.contains_key(l) => cur = lets[l],
            _ => break,
        }
    }
    let mut sel = vec![Sel::Full; rank];
    // Dims of the current window, as indices into the root's dims.
    let mut live: Vec<usize> = (0..rank).collect();
    for items in chain.into_iter().rev() {
        if items.len() > live.len() {
            return None;
        }
        let mut next = Vec::new();
        for (i, it) in items.iter().enumerate() {
            let d = live[i];
            match (it, sel[d]) {
                (IndexItem::Full, _) => next.push(d),
                (IndexItem::At(e), Sel::Full) => sel[d] = Sel::At(*e),
                (IndexItem::Window { start, len }, Sel::Full) => {
                    sel[d] = Sel::Window(*start, *len);
                    next.push(d);
                }
                // Indexing into a window of a window: not modelled.
                _ => return None,
            }
        }
        next.extend_from_slice(&live[items.len()..]);
        live = next;
    }
    Some(sel)
}

#[allow(clippy::too_many_arguments)]
fn arg_facts(m: &Module, op: &OpDef, p: &crate::catalog::ParamDef, a: Handle<Expr>, role: Handle<RoleDecl>, layout: &KernelLayout, w: &Walker, f: &mut FactSet) {
    // An argument bound with `let` is described by the expression it names.
    let a = resolve_let(&w.lets, m, a);
    let ty = &m.exprs[a].ty;
    let mode = param_mode(p);
    f.set("access", p.access.map_or(if mode.reads() { "read" } else { "none" }, Access::as_str));
    f.set("reads", mode.reads());
    f.set("writes", mode.writes());
    f.set("atomic", op.effects.iter().any(|e| e.on == p.name && e.atomic));
    f.set(
        "proxy",
        match param_proxy(op, &p.name) {
            Proxy::Async => "async",
            Proxy::Generic => "generic",
            Proxy::None => "none",
        },
    );
    let space = match ty {
        Type::Shared { .. } => "smem",
        Type::Global { .. } => "global",
        Type::Frag { .. } => "frag",
        Type::Scalar(_) | Type::Literal { .. } => "scalar",
        Type::Pipeline(_) => "pipeline",
        Type::Barrier(_) => "barrier",
        Type::Role(_) => "roleref",
        Type::DTypeName(_) => "dtypename",
        _ => "other",
    };
    f.set("space", space);
    if let Some(d) = ty.dtype() {
        f.set("dtype", d.name());
        f.set("exact_int_max", d.exact_int_max());
    } else if let Type::DTypeName(d) = ty {
        f.set("dtype", d.name());
    }
    let shape: Option<Vec<Option<i64>>> = match ty {
        Type::Global { shape, .. } => Some(shape.iter().map(Size::as_const).collect()),
        Type::Shared { shape, .. } | Type::Frag { shape, .. } => Some(shape.iter().map(|d| Some(*d)).collect()),
        Type::Scalar(_) | Type::Literal { .. } => Some(Vec::new()),
        _ => None,
    };
    if let Some(shape) = &shape {
        f.set("rank", shape.len());
        f.set_list("dim", shape.iter().map(|d| d.into_value()).collect());
        let numel: Option<i64> = shape.iter().try_fold(1i64, |acc, d| d.map(|d| acc.saturating_mul(d)));
        f.set("numel", numel);
        f.set("bytes", numel.and_then(|n| ty.dtype().map(|d| n * d.size_bytes() as i64)));
    }
    if let Type::Frag { scope: Some(s), .. } = ty {
        f.set("scope", s.name());
    }
    if let (Type::Frag { .. }, ExprKind::Local(l)) = (ty, &m.exprs[a].kind) {
        f.set("mma_operand", layout.mma_sync_operands.role_of(*l));
        // A fragment's declaration is its `reg` statement.
        f.set("root", m.locals[*l].name.as_str());
        f.span_at("root", *m.locals.span(*l));
    }
    if let Some(v) = m.const_value(a) {
        f.set("value", v);
    }
    let root = root_of(m, &w.lets, a);
    match root {
        Some(r @ (Root::Smem(_) | Root::View(_))) => {
            smem_arg(m, a, r, w, f);
            if let Some(win) = smem_window(m, layout, a) {
                f.set("addr_align", win.address_align());
                f.set("outer_terms_align", win.terms_align(false));
                f.set("inner_term_align", win.terms_align(true));
                f.set("tma_align", tma_smem_align(win.swizzle));
            }
        }
        Some(Root::Tensor(t)) => tensor_arg(m, &w.lets, a, t, f),
        Some(Root::Pipeline(ph)) => {
            let pd = &m.pipelines[ph];
            f.set("kind", "pipeline");
            f.set("name", pd.name.as_str());
            f.set("root", pd.name.as_str());
            f.set("stages", pd.stages);
            f.set("producer", m.roles[pd.producer].name.as_str());
            f.set("consumer", m.roles[pd.consumer].name.as_str());
            f.span_at("root", m.pipelines.span(ph).item);
            sync_side_facts(m, sync_side(op, &p.name, true), role, &[pd.producer], &[pd.consumer], f);
        }
        Some(Root::Barrier(bh)) => {
            let bd = &m.barriers[bh];
            f.set("kind", "barrier");
            f.set("name", bd.name.as_str());
            f.set("root", bd.name.as_str());
            f.set("stages", bd.stages);
            f.set("producer", bd.producers.first().map(|r| m.roles[*r].name.clone()));
            f.set("consumer", bd.consumers.first().map(|r| m.roles[*r].name.clone()));
            f.span_at("root", m.barriers.span(bh).item);
            sync_side_facts(m, sync_side(op, &p.name, false), role, &bd.producers, &bd.consumers, f);
        }
        None => {}
    }
}

/// The side of a pipeline (`pipeline`) or an explicit barrier an op acts on, from the catalog's
/// effects on parameter `param` — the same reading the lowering and the protocol analysis (V108)
/// make of who may call it: a pipeline's producer waits on the empty barrier and arrives, arms or
/// completes transactions on the full one; its consumer waits on the full one and arrives on the
/// empty one. A barrier's producers arrive (or complete transactions), its consumers wait. `None`
/// when the effects name no side, or both.
fn sync_side(op: &OpDef, param: &str, pipeline: bool) -> Option<&'static str> {
    use crate::catalog::PipeBarrier;
    let mut sides = BTreeSet::new();
    for e in op.effects_on(param) {
        let arrives = matches!(e.access, EffectAccess::Arrive | EffectAccess::ExpectTx | EffectAccess::CompleteTx);
        let side = match (pipeline, e.barrier, e.access) {
            (true, Some(PipeBarrier::Empty), EffectAccess::Wait) => Some("producer"),
            (true, Some(PipeBarrier::Full), EffectAccess::Wait) => Some("consumer"),
            (true, Some(PipeBarrier::Full), _) if arrives => Some("producer"),
            (true, Some(PipeBarrier::Empty), _) if arrives => Some("consumer"),
            (false, _, EffectAccess::Wait) => Some("consumer"),
            (false, _, _) if arrives => Some("producer"),
            _ => None,
        };
        sides.extend(side);
    }
    match sides.len() {
        1 => sides.into_iter().next(),
        _ => None,
    }
}

/// `side`, `side_role`, `role_is_producer`, `role_is_consumer`, `role_on_side` of a pipeline or
/// barrier argument executed by `role`.
fn sync_side_facts(m: &Module, side: Option<&str>, role: Handle<RoleDecl>, producers: &[Handle<RoleDecl>], consumers: &[Handle<RoleDecl>], f: &mut FactSet) {
    let (is_p, is_c) = (producers.contains(&role), consumers.contains(&role));
    f.set("side", side.unwrap_or("none"));
    f.set("role_is_producer", is_p);
    f.set("role_is_consumer", is_c);
    let on_side = match side {
        Some("producer") => Some((is_p, producers)),
        Some("consumer") => Some((is_c, consumers)),
        _ => None,
    };
    f.set("role_on_side", on_side.map(|(on, _)| on));
    f.set("side_role", on_side.and_then(|(_, rs)| rs.first()).map(|r| m.roles[*r].name.clone()));
}

fn smem_arg(m: &Module, a: Handle<Expr>, root: Root, w: &Walker, f: &mut FactSet) {
    let (region_h, dtype, root_shape, swizzle, name, root_span, is_view) = match root {
        Root::Smem(s) => {
            let d = &m.smem[s];
            let mut shape = d.shape.clone();
            if d.stages > 1 {
                shape.insert(0, i64::from(d.stages));
            }
            (s, d.dtype, shape, d.swizzle, d.name.clone(), m.smem.span(s).item, false)
        }
        Root::View(v) => {
            let d = &m.views[v];
            (d.region, d.dtype, d.shape.clone(), d.swizzle, d.name.clone(), m.views.span(v).item, true)
        }
        _ => return,
    };
    let region = &m.smem[region_h];
    let e = dtype.size_bytes() as i64;
    f.set("root", name.as_str());
    f.set("is_view", is_view);
    f.set("region", region.name.as_str());
    f.set("region_stages", region.stages);
    f.set("swizzle", swizzle.bytes());
    f.set("swizzle_atom", swizzle_atom(swizzle));
    f.set("region_swizzle", region.swizzle.bytes());
    f.set("row_bytes", root_shape.last().map(|d| d * e));
    f.span_at("root", root_span);
    f.span_at("region", m.smem.span(region_h).item);
    let shape_inner = match &m.exprs[a].ty {
        Type::Shared { shape, .. } => shape.last().copied(),
        _ => None,
    };
    f.set("inner_bytes", shape_inner.map(|d| d * e));

    let rank = root_shape.len();
    let Some(sel) = selection(m, &w.lets, a, rank) else {
        for k in ["in_bounds", "contiguous", "outer_offset_base", "outer_offset_step"] {
            f.set(k, Value::Unknown);
        }
        f.set("stage_source", "none");
        return;
    };
    // Element strides of the root, row-major.
    let mut strides = vec![1i64; rank];
    for i in (0..rank.saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(root_shape[i + 1]);
    }
    let iv = Intervals { m, w };
    let mut in_bounds = Some(true);
    let mut seen_wide = false;
    let mut contiguous = true;
    let (mut base, mut step) = (0i64, 0i64);
    for (d, s) in sel.iter().enumerate() {
        let extent = root_shape[d];
        let (start, len) = match s {
            Sel::At(e) => (Some(*e), 1),
            Sel::Window(e, l) => (Some(*e), *l),
            Sel::Full => (None, extent),
        };
        if let Some(x) = start {
            let r = iv.of(x, 0);
            let ok = match (r.lo, r.hi) {
                (Some(lo), _) if lo < 0 => Some(false),
                (_, Some(hi)) if hi.saturating_add(len) > extent => Some(false),
                (Some(_), Some(_)) => Some(true),
                _ => None,
            };
            in_bounds = match (in_bounds, ok) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            };
            if d + 1 < rank {
                let (b, st) = form(m, x, 0);
                let stride_bytes = strides[d].saturating_mul(e);
                base = base.saturating_add(b.saturating_mul(stride_bytes));
                step = gcd(step, st.saturating_mul(stride_bytes));
            }
        }
        // Contiguous: once a dimension selects more than one position, every later one is whole.
        if seen_wide && !matches!(s, Sel::Full) {
            contiguous = false;
        }
        if len > 1 {
            seen_wide = true;
        }
    }
    f.set("in_bounds", in_bounds);
    f.set("contiguous", contiguous);
    f.set("outer_offset_base", base);
    f.set("outer_offset_step", step);
    // How the stage of a staged region is chosen.
    let staged = matches!(root, Root::Smem(_)) && region.stages > 1;
    let (source, pipeline) = if !staged {
        ("none", None)
    } else {
        match sel.first() {
            Some(Sel::At(e)) => match &m.exprs[*e].kind {
                ExprKind::Field { base, field: Field::Stage } => match &m.exprs[*base].kind {
                    ExprKind::Pipeline(p) => ("pipeline", Some(m.pipelines[*p].name.clone())),
                    _ => ("expr", None),
                },
                _ if m.const_value(*e).is_some() => ("const", None),
                _ => ("expr", None),
            },
            _ => ("none", None),
        }
    };
    f.set("stage_source", source);
    f.set("stage_pipeline", pipeline);
}

fn tensor_arg(m: &Module, lets: &HashMap<Handle<Local>, Handle<Expr>>, a: Handle<Expr>, t: Handle<TensorDecl>, f: &mut FactSet) {
    let td = &m.tensors[t];
    f.set("root", td.name.as_str());
    f.set("tensor", td.name.as_str());
    f.set("tensor_access", td.access.keyword());
    f.set("has_tma", td.tma.is_some());
    f.set("swizzle", td.tma.as_ref().map_or(0, |b| b.swizzle.bytes()));
    f.set_list("box", td.tma.as_ref().map(|b| b.box_dims.iter().map(|d| Value::Int(*d)).collect()).unwrap_or_default());
    f.span_at("root", m.tensors.span(t).item);
    let window_is_box = td.tma.as_ref().map(|b| {
        let Some(sel) = selection(m, lets, a, td.shape.len()) else { return Value::Unknown };
        let mut ok = Some(true);
        for ((s, bx), dim) in sel.iter().zip(&b.box_dims).zip(&td.shape) {
            let this = match s {
                Sel::At(_) => Some(*bx == 1),
                Sel::Window(_, len) => Some(len == bx),
                Sel::Full => dim.as_const().map(|d| d == *bx),
            };
            ok = match (ok, this) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            };
        }
        ok.into_value()
    });
    f.set("window_is_box", window_is_box);
    // What 16-byte copies of the window's rows (cp.async) need provable: the row stride and the
    // innermost start, as multiples of bytes.
    let esize = td.dtype.size_bytes() as i64;
    if let Some(inner) = td.shape.last() {
        f.set("row_stride_multiple_bytes", size_multiple(m, inner).saturating_mul(esize));
    }
    if let Some(sel) = selection(m, lets, a, td.shape.len()) {
        let start = match sel.last() {
            Some(Sel::At(e) | Sel::Window(e, _)) => known_multiple(m, *e),
            Some(Sel::Full) | None => 0,
        };
        f.set("inner_start_multiple_bytes", start.saturating_mul(esize));
    }
}

/// Tile counts and loop trip counts that divide a dim by a constant its `multiple_of` does not
/// make exact: `R / 8` with `dim R multiple_of 4`. Only plain quotients of dims and constants
/// count — `(N + 63) / 64` rounds up on purpose.
fn inexact_division_facts(m: &Module, f: &mut FactSet) {
    let mut found: Vec<(String, Handle<DimDecl>, i64, i64)> = Vec::new();
    for axis in m.grid().map_or(&[][..], |g| &g.axes[..]) {
        size_divisions(&axis.extent, &mut |a, b| {
            if let (Some(c), Some(d)) = (b.as_const(), plain_dim_product(a)) {
                let k = size_multiple(m, a);
                if c > 0 && k % c != 0 {
                    found.push((format!("{} / {c}", show_size(m, a)), d, k, c));
                }
            }
        });
    }
    for (_, st) in m.stmts.iter() {
        if let Stmt::For { hi, .. } = st {
            if let ExprKind::Binary(BinOp::Div, a, b) = &m.exprs[*hi].kind {
                if let (Some(c), Some(d)) = (m.const_value(*b), plain_dim_expr(m, *a)) {
                    let k = known_multiple(m, *a);
                    if c > 0 && k % c != 0 {
                        found.push((format!("{} / {c}", super::protocol::eval::show(m, *a)), d, k, c));
                    }
                }
            }
        }
    }
    f.set("inexact_divisions", found.len());
    if let Some((what, d, k, c)) = found.first() {
        let dd = &m.dims[*d];
        f.set("inexact_division", what.as_str());
        f.set("inexact_dim", dd.name.as_str());
        f.set("inexact_dim_multiple", *k);
        f.set("inexact_divisor", *c);
        f.span_at("inexact_dim", m.dims.span(*d).attr("multiple_of"));
    }
}

/// The dim of a product of dims and constants with exactly one dim (`R`, `2 * R`), else None.
fn plain_dim_product(s: &Size) -> Option<Handle<DimDecl>> {
    match s {
        Size::Dim(d) => Some(*d),
        Size::Bin(SizeOp::Mul, a, b) => match (plain_dim_product(a), plain_dim_product(b), a.as_const(), b.as_const()) {
            (Some(d), None, _, Some(_)) | (None, Some(d), Some(_), _) => Some(d),
            _ => None,
        },
        _ => None,
    }
}

fn plain_dim_expr(m: &Module, e: Handle<Expr>) -> Option<Handle<DimDecl>> {
    match &m.exprs[e].kind {
        ExprKind::Dim(d) => Some(*d),
        ExprKind::Binary(BinOp::Mul, a, b) => match (plain_dim_expr(m, *a), plain_dim_expr(m, *b), m.const_value(*a), m.const_value(*b)) {
            (Some(d), None, _, Some(_)) | (None, Some(d), Some(_), _) => Some(d),
            _ => None,
        },
        _ => None,
    }
}

pub(super) fn show_size(m: &Module, s: &Size) -> String {
    match s {
        Size::Const(c) => c.to_string(),
        Size::Dim(d) => m.dims[*d].name.clone(),
        Size::Bin(op, a, b) => {
            let o = match op {
                SizeOp::Add => "+",
                SizeOp::Sub => "-",
                SizeOp::Mul => "*",
                SizeOp::Div => "/",
            };
            format!("{} {o} {}", show_size(m, a), show_size(m, b))
        }
    }
}

/// Every division `a / b` inside a size, outermost first.
fn size_divisions<'s>(s: &'s Size, f: &mut dyn FnMut(&'s Size, &'s Size)) {
    if let Size::Bin(op, a, b) = s {
        if *op == SizeOp::Div {
            f(a, b);
        }
        size_divisions(a, f);
        size_divisions(b, f);
    }
}

fn divides_by_zero(s: &Size) -> bool {
    let mut zero = false;
    size_divisions(s, &mut |_, b| zero |= b.as_const() == Some(0));
    zero
}

/// What the visibility analysis (`visibility.rs`) found for a region.
fn visibility_facts(v: Option<&super::visibility::RegionVisibility>, f: &mut FactSet) {
    f.set("unsynced_reads", v.map_or(0, |x| x.unsynced_reads));
    f.set("first_unsynced_read", v.and_then(|x| x.first.as_ref()).map(|o| o.what.clone()));
    if let Some(o) = v.and_then(|x| x.first.as_ref()) {
        f.span_at("unsynced_read_at", o.read);
        f.span_at("unsynced_write_at", o.write);
    }
}

/// What the fill analysis (`fills.rs`) found for a region.
fn fill_facts(fills: Option<&super::fills::RegionFills>, f: &mut FactSet) {
    f.set("overlapping_fills", fills.map_or(0, |x| x.overlapping));
    f.set("first_overlapping_fills", fills.and_then(|x| x.first.as_ref()).map(|o| o.what.clone()));
    if let Some(o) = fills.and_then(|x| x.first.as_ref()) {
        f.span_at("fill_overlap_at", o.at);
        f.span_at("fill_overlap_other", o.other);
    }
}

/// What the index-consistency analysis (`indexing.rs`) found for a tensor.
fn index_facts(ix: Option<&TensorIndexing>, f: &mut FactSet) {
    let d = TensorIndexing::default();
    let ix = ix.unwrap_or(&d);
    f.set("wrong_dim_accesses", ix.wrong_dim);
    f.set("first_wrong_dim", ix.first_wrong_dim.as_ref().map(|x| x.what.clone()));
    f.set("operand_mismatches", ix.mismatches);
    f.set("first_operand_mismatch", ix.first_mismatch.as_ref().map(|x| x.what.clone()));
    if let Some(x) = &ix.first_wrong_dim {
        f.span_at("wrong_dim_at", x.at);
        f.span_at("wrong_dim_source", x.related);
    }
    f.set("pass_disagreements", ix.pass_disagreements);
    f.set("first_pass_disagreement", ix.first_pass_disagreement.as_ref().map(|x| x.what.clone()));
    f.set("partly_read_axes", ix.partly_read_axes);
    f.set("first_partly_read", ix.first_partly_read.as_ref().map(|x| x.what.clone()));
    if let Some(x) = &ix.first_pass_disagreement {
        f.span_at("pass_at", x.at);
        f.span_at("pass_other", x.related);
    }
    if let Some(x) = &ix.first_partly_read {
        f.span_at("partly_read_at", x.at);
        f.span_at("partly_read_loop", x.related);
    }
    if let Some(x) = &ix.first_mismatch {
        f.span_at("mismatch_at", x.at);
        f.span_at("mismatch_other", x.related);
    }
}

/// What the output-coverage analysis (`coverage.rs`) found for a tensor stores write.
fn output_coverage_facts(m: &Module, coverage: Option<&Coverage>, f: &mut FactSet) {
    f.set("stored", coverage.is_some());
    if let Some(h) = m.grid.handles().next() {
        f.span_at("grid", m.grid.span(h).item);
    }
    match coverage {
        None => {}
        Some(Coverage::Undecided { reason, span }) => {
            f.set("unwritten_elements", Value::Unknown);
            f.set("overlap_elements", Value::Unknown);
            f.set("coverage_reason", reason.as_str());
            f.span_at("first_writer", *span);
            f.span_at("overlap_first", *span);
            f.span_at("overlap_second", *span);
        }
        Some(Coverage::Decided { unwritten, overlap, binding, first_hole, first_overlap, first_writer, stores }) => {
            f.set("unwritten_elements", *unwritten);
            f.set("overlap_elements", *overlap);
            f.set("coverage_binding", binding.as_str());
            f.set("store_instances", *stores);
            f.set("first_hole", first_hole.clone());
            f.set("first_overlap", first_overlap.as_ref().map(|o| o.what.clone()));
            // No store instance at all at this binding: the tile space is what leaves it empty.
            match (first_writer, m.grid.handles().next()) {
                (Some(s), _) => f.span_at("first_writer", *s),
                (None, Some(g)) => f.span_at("first_writer", m.grid.span(g).item),
                (None, None) => {}
            }
            if let Some(o) = first_overlap {
                f.span_at("overlap_first", o.first);
                f.span_at("overlap_second", o.second);
            }
        }
    }
}

/// An integer expression as `base + (a multiple of step)`; step 0 means exactly `base`.
fn form(m: &Module, h: Handle<Expr>, depth: u32) -> (i64, i64) {
    if let Some(c) = m.const_value(h) {
        return (c, 0);
    }
    if depth > 32 {
        return (0, 1);
    }
    match &m.exprs[h].kind {
        ExprKind::Binary(op, a, b) => {
            let ((ba, sa), (bb, sb)) = (form(m, *a, depth + 1), form(m, *b, depth + 1));
            match op {
                BinOp::Add => (ba.saturating_add(bb), gcd(sa, sb)),
                BinOp::Sub => (ba.saturating_sub(bb), gcd(sa, sb)),
                // (ba + A)(bb + B) = ba·bb + ba·B + bb·A + A·B
                BinOp::Mul => (ba.saturating_mul(bb), gcd(gcd(ba.saturating_mul(sb), bb.saturating_mul(sa)), sa.saturating_mul(sb))),
                BinOp::Shl => match m.const_value(*b).and_then(|s| u32::try_from(s).ok()).and_then(|s| 1i64.checked_shl(s)) {
                    Some(k) => (ba.saturating_mul(k), sa.saturating_mul(k)),
                    None => (0, 1),
                },
                _ => (0, 1),
            }
        }
        ExprKind::Unary(UnOp::Neg, x) => {
            let (b, s) = form(m, *x, depth + 1);
            (b.wrapping_neg(), s)
        }
        _ => (0, 1),
    }
}

use super::int_range::{mul, Iv, ANY};

struct Intervals<'a, 'm> {
    m: &'m Module,
    w: &'a Walker<'m>,
}

impl Intervals<'_, '_> {
    /// The values an integer expression may take (over-approximated).
    fn of(&self, h: Handle<Expr>, depth: u32) -> Iv {
        let m = self.m;
        if let Some(c) = m.const_value(h) {
            return Iv { lo: Some(c), hi: Some(c) };
        }
        if depth > 32 {
            return ANY;
        }
        let pt = |lo: i64, hi: i64| Iv { lo: Some(lo), hi: Some(hi) };
        match &m.exprs[h].kind {
            ExprKind::Dim(_) => Iv { lo: Some(1), hi: None },
            ExprKind::Local(l) => {
                if let Some((lo, hi)) = self.w.loop_bounds.get(l) {
                    let (lo, hi) = (self.of(*lo, depth + 1), self.of(*hi, depth + 1));
                    Iv { lo: lo.lo, hi: hi.hi.map(|x| x - 1) }
                } else if let Some(v) = self.w.lets.get(l) {
                    self.of(*v, depth + 1)
                } else {
                    ANY
                }
            }
            ExprKind::Field { base, field } => match (field, &m.exprs[*base].kind) {
                (Field::Stage, ExprKind::Pipeline(p)) => pt(0, i64::from(m.pipelines[*p].stages) - 1),
                (Field::TileAxis(_), _) => Iv { lo: Some(0), hi: None },
                (Field::Warpgroup, ExprKind::Role(r)) => {
                    let r = &m.roles[*r];
                    match r.unit {
                        RoleUnit::Warpgroup => pt(0, i64::from(r.count) - 1),
                        RoleUnit::Warp => pt(0, (i64::from(r.count) - 1) / 4),
                    }
                }
                (Field::Warp, ExprKind::Role(r)) => pt(0, m.roles[*r].warps().len() as i64 - 1),
                (Field::Lane, _) => pt(0, 31),
                _ => ANY,
            },
            ExprKind::Unary(UnOp::Neg, x) => {
                let r = self.of(*x, depth + 1);
                Iv { lo: r.hi.map(i64::wrapping_neg), hi: r.lo.map(i64::wrapping_neg) }
            }
            ExprKind::Binary(op, a, b) => {
                let (x, y) = (self.of(*a, depth + 1), self.of(*b, depth + 1));
                let add = |p: Option<i64>, q: Option<i64>| p.zip(q).and_then(|(p, q)| p.checked_add(q));
                let sub = |p: Option<i64>, q: Option<i64>| p.zip(q).and_then(|(p, q)| p.checked_sub(q));
                match op {
                    BinOp::Add => Iv { lo: add(x.lo, y.lo), hi: add(x.hi, y.hi) },
                    BinOp::Sub => Iv { lo: sub(x.lo, y.hi), hi: sub(x.hi, y.lo) },
                    BinOp::Mul => mul(x, y),
                    BinOp::Shl => match m.const_value(*b).and_then(|s| u32::try_from(s).ok()).and_then(|s| 1i64.checked_shl(s)) {
                        Some(k) => mul(x, pt(k, k)),
                        None => ANY,
                    },
                    BinOp::Div => match m.const_value(*b) {
                        Some(c) if c > 0 && x.lo.is_some_and(|l| l >= 0) => Iv { lo: x.lo.map(|l| l / c), hi: x.hi.map(|h| h / c) },
                        _ => ANY,
                    },
                    BinOp::Rem => match m.const_value(*b) {
                        Some(c) if c > 0 && x.lo.is_some_and(|l| l >= 0) => Iv { lo: Some(0), hi: Some(x.hi.map_or(c - 1, |h| h.min(c - 1))) },
                        Some(c) if c > 0 => pt(-(c - 1), c - 1),
                        _ => ANY,
                    },
                    _ => ANY,
                }
            }
            _ => ANY,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::check_source;

    const GEMM: &str = include_str!("../../../examples/gemm_bf16_ws.cake");
    const KMEANS: &str = include_str!("../../../examples/kmeans_assign.cake");
    const SM80: &str = include_str!("../../../examples/gemm_bf16_sm80.cake");

    /// (stage_bytes, tma_loads, tma_fill_bytes) of every shared region, by name.
    fn fills(src: &str) -> BTreeMap<String, (i64, i64, i64)> {
        let m = check_source(src).module.expect("the program type-checks");
        let t = TargetTable::builtin().get(&m.target).expect("target");
        let facts = compute(&m, &KernelLayout::compute(&m, t), t, Catalog::builtin());
        let int = |f: &FactSet, k: &str| match f.get(k) {
            Some(Value::Int(i)) => *i,
            other => panic!("{}: {k} = {other:?}", f.name),
        };
        facts.of_kind(ConstructKind::Smem).map(|f| (f.name.clone(), (int(f, "stage_bytes"), int(f, "tma_loads"), int(f, "tma_fill_bytes")))).collect()
    }

    fn edit(src: &str, edits: &[(&str, &str)]) -> String {
        edits.iter().fold(src.to_string(), |s, (from, to)| {
            assert!(s.contains(from), "`{from}` is in the program");
            s.replacen(from, to, 1)
        })
    }

    fn facts_of(src: &str) -> ModuleFacts {
        let m = check_source(src).module.expect("the program type-checks");
        let t = TargetTable::builtin().get(&m.target).expect("target");
        compute(&m, &KernelLayout::compute(&m, t), t, Catalog::builtin())
    }

    /// (op, side, role_on_side) of every pipeline argument, in source order.
    fn sides(src: &str) -> Vec<(String, Value, Value)> {
        let f = facts_of(src);
        f.of_kind(ConstructKind::Arg)
            .filter(|a| a.get("kind") == Some(&Value::Sym("pipeline".into())))
            .map(|a| (a.op.clone().unwrap_or_default(), a.get("side").cloned().unwrap(), a.get("role_on_side").cloned().unwrap()))
            .collect()
    }

    #[test]
    fn pipeline_ops_know_the_side_they_act_on() {
        let sym = |s: &str| Value::Sym(s.into());
        let ok = sides(GEMM);
        assert_eq!(ok.len(), 7, "acquire, two tma_loads, two waits, two releases: {ok:?}");
        assert!(ok.iter().all(|(_, _, on)| *on == Value::Bool(true)), "{ok:?}");
        for (op, side, _) in &ok {
            let want = if matches!(op.as_str(), "acquire" | "tma_load") { "producer" } else { "consumer" };
            assert_eq!(side, &sym(want), "{op}");
        }
        // Roles swapped: every pipeline operation runs on the wrong side.
        let swapped = sides(&edit(GEMM, &[("producer load consumer mma", "producer mma consumer load")]));
        assert_eq!(swapped.len(), ok.len());
        assert!(swapped.iter().all(|(_, _, on)| *on == Value::Bool(false)), "{swapped:?}");
        // The call sees its pipeline argument's facts under the parameter's name.
        let f = facts_of(GEMM);
        let acquire = f.of_kind(ConstructKind::Call).find(|c| c.op.as_deref() == Some("acquire")).unwrap();
        assert_eq!(acquire.get("p_role_is_producer"), Some(&Value::Bool(true)));
        assert_eq!(acquire.get("p_role_is_consumer"), Some(&Value::Bool(false)));
        assert_eq!(acquire.get("p_side_role"), Some(&sym("load")));
    }

    #[test]
    fn roles_and_outputs_relate() {
        let f = facts_of(GEMM);
        let role = |f: &ModuleFacts, n: &str, k: &str| f.of_kind(ConstructKind::Role).find(|r| r.name == n).and_then(|r| r.get(k).cloned()).unwrap();
        assert_eq!(role(&f, "load", "writes_outputs"), Value::Int(0));
        assert_eq!(role(&f, "mma", "writes_outputs"), Value::Int(1));
        assert_eq!(role(&f, "mma", "output_stores"), Value::Int(1));
        let c = f.of_kind(ConstructKind::Tensor).find(|t| t.name == "C").unwrap();
        assert_eq!(c.get("writer_roles"), Some(&Value::Int(1)));
        assert_eq!(c.get("first_writer_role"), Some(&Value::Sym("mma".into())));
        assert_eq!(c.get("has_unwritten_owner"), Some(&Value::Bool(false)));
        // The second consumer warpgroup declared as a role of its own, its `on` block forgotten:
        // rows 64..128 of every tile are written by nobody, and the facts name who owns them.
        let split = edit(GEMM, &[("role mma: warpgroup 1..3 regs 232", "role mma: warpgroup 1 regs 232\nrole mma_hi: warpgroup 2 regs 232")]);
        let f = facts_of(&split);
        let c = f.of_kind(ConstructKind::Tensor).find(|t| t.name == "C").unwrap();
        assert_eq!(c.get("unwritten_owner"), Some(&Value::Sym("mma_hi".into())));
        assert!(matches!(c.get("unwritten_elements"), Some(Value::Int(n)) if *n > 0), "{:?}", c.get("unwritten_elements"));
        assert_eq!(role(&f, "mma_hi", "peer_writer"), Value::Sym("mma".into()));
        assert_eq!(role(&f, "mma_hi", "writes_outputs"), Value::Int(0));
    }

    #[test]
    fn stored_integers_are_bounded_against_the_dtype() {
        let store = |src: &str| -> FactSet { facts_of(src).of_kind(ConstructKind::Call).find(|c| c.op.as_deref() == Some("store")).unwrap().clone() };
        // i32 output: no conversion.
        assert_eq!(store(KMEANS).get("stores_int_as_float"), Some(&Value::Bool(false)));
        // f16: the index reaches K - 1, and K has no upper bound.
        let f16 = edit(KMEANS, &[("out Idx: i32[B, N]", "out Idx: f16[B, N]"), ("64], best_i)", "64], cast(best_i, f16))")]);
        let s = store(&f16);
        assert_eq!(s.get("stores_int_as_float"), Some(&Value::Bool(true)));
        assert_eq!(s.get("stored_int_dtype"), Some(&Value::Sym("i32".into())));
        assert_eq!(s.get("stored_int_grows"), Some(&Value::Bool(true)));
        assert_eq!(s.get("stored_int_max"), Some(&Value::Unknown));
        assert_eq!(s.get("dst_exact_int_max"), Some(&Value::Int(2048)));
        // One centroid tile's local index: at most 127, exact in bf16 (256); 3 tiles on, 511 is not.
        let local = edit(
            KMEANS,
            &[("out Idx: i32[B, N]", "out Idx: bf16[B, N]"), ("64], best_i)", "64], cast(reduce_argmin(d, axis=1), bf16))")],
        );
        let s = store(&local);
        assert_eq!((s.get("stored_int_max"), s.get("stored_int_grows"), s.get("dst_exact_int_max")), (Some(&Value::Int(127)), Some(&Value::Bool(false)), Some(&Value::Int(256))));
        let shifted = edit(&local, &[("cast(reduce_argmin(d, axis=1), bf16)", "cast(reduce_argmin(d, axis=1) + 3 * 128, bf16)")]);
        assert_eq!(store(&shifted).get("stored_int_max"), Some(&Value::Int(511)));
    }

    #[test]
    fn exact_integer_ranges_follow_the_significand() {
        assert_eq!([DType::F16, DType::BF16, DType::F32, DType::F8E4M3, DType::F8E5M2].map(DType::exact_int_max), [2048, 256, 1 << 24, 16, 8]);
        assert_eq!(DType::I32.exact_int_max(), i64::from(i32::MAX));
    }

    #[test]
    fn tma_loads_fill_whole_stages_in_the_examples() {
        let g = fills(GEMM);
        assert_eq!(g["a_s"], (16384, 1, 16384));
        assert_eq!(g["b_s"], (32768, 1, 32768));
        // `x_s[xp.stage, dc]` and `c_s[cs.stage, dc]` inside `for dc in 0..2`: both halves.
        let k = fills(KMEANS);
        assert_eq!(k["x_s"], (32768, 1, 32768));
        assert_eq!(k["c_s"], (32768, 1, 32768));
        assert_eq!(k["cn_s"], (512, 1, 512));
        // Filled by cp.async, not TMA: nothing to compare.
        let s = fills(SM80);
        assert!(s.values().all(|(_, loads, fill)| *loads == 0 && *fill == 0), "{s:?}");
    }

    #[test]
    fn a_load_that_fills_half_the_stage_shows() {
        let half = edit(
            GEMM,
            &[("tma [128, 64]", "tma [64, 64]"), ("tma_load(a_s[ab.stage], A[t.m * 128 :+ 128,", "tma_load(a_s[ab.stage, 0 :+ 64], A[t.m * 128 :+ 64,")],
        );
        assert_eq!(fills(&half)["a_s"], (16384, 1, 8192));
        // Two loads of half each fill the stage.
        let two = edit(
            &half,
            &[(
                "tma_load(a_s[ab.stage, 0 :+ 64], A[t.m * 128 :+ 64, kb * 64 :+ 64], ab)",
                "tma_load(a_s[ab.stage, 0 :+ 64], A[t.m * 128 :+ 64, kb * 64 :+ 64], ab)\n            tma_load(a_s[ab.stage, 64 :+ 64], A[t.m * 128 + 64 :+ 64, kb * 64 :+ 64], ab)",
            )],
        );
        assert_eq!(fills(&two)["a_s"], (16384, 2, 16384));
        // A chunk loop over one of the two chunks of x_s writes half of it.
        let kmeans_half = edit(KMEANS, &[("for dc in 0..2 {\n            tma_load(x_s[xp.stage, dc]", "for dc in 0..1 {\n            tma_load(x_s[xp.stage, dc]")]);
        assert_eq!(fills(&kmeans_half)["x_s"], (32768, 1, 16384));
    }
}
