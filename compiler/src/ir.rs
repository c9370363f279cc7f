//! The typed IR: one checked kernel, with declarations, statements and expressions held in
//! arenas and addressed by typed handles. Spans live beside the nodes (in each arena's side
//! table), not in them, so two programs that differ only in layout or comments compare equal —
//! that is how `cake fmt` is checked to preserve meaning.

use std::fmt;
use std::marker::PhantomData;

use serde::Serialize;

use crate::span::Span;
use crate::syntax::ast::{Access, BinOp, UnOp};

/// A typed index into an [`Arena`].
pub struct Handle<T> {
    index: u32,
    _marker: PhantomData<fn() -> T>,
}

impl<T> Handle<T> {
    pub fn index(self) -> usize {
        self.index as usize
    }
}

impl<T> Clone for Handle<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Handle<T> {}
impl<T> PartialEq for Handle<T> {
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index
    }
}
impl<T> Eq for Handle<T> {}
impl<T> std::hash::Hash for Handle<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.index.hash(state)
    }
}
impl<T> PartialOrd for Handle<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Handle<T> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.index.cmp(&other.index)
    }
}
impl<T> fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.index)
    }
}
impl<T> Serialize for Handle<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.index)
    }
}

/// Nodes of one kind, with a side table `S` (spans, by default) per node.
/// Equality compares the nodes only, never the side table.
#[derive(Clone)]
pub struct Arena<T, S = Span> {
    items: Vec<T>,
    side: Vec<S>,
}

impl<T, S> Default for Arena<T, S> {
    fn default() -> Self {
        Arena { items: Vec::new(), side: Vec::new() }
    }
}

impl<T, S> Arena<T, S> {
    pub fn append(&mut self, item: T, side: S) -> Handle<T> {
        let index = u32::try_from(self.items.len()).expect("arena holds fewer than 2^32 nodes");
        self.items.push(item);
        self.side.push(side);
        Handle { index, _marker: PhantomData }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The side-table entry (span) of a node.
    pub fn span(&self, h: Handle<T>) -> &S {
        &self.side[h.index()]
    }

    pub fn iter(&self) -> impl Iterator<Item = (Handle<T>, &T)> {
        self.items.iter().enumerate().map(|(i, t)| (Handle { index: i as u32, _marker: PhantomData }, t))
    }

    pub fn handles(&self) -> impl Iterator<Item = Handle<T>> + '_ {
        (0..self.items.len() as u32).map(|index| Handle { index, _marker: PhantomData })
    }

    pub fn get_mut(&mut self, h: Handle<T>) -> &mut T {
        &mut self.items[h.index()]
    }
}

impl<T, S> std::ops::Index<Handle<T>> for Arena<T, S> {
    type Output = T;
    fn index(&self, h: Handle<T>) -> &T {
        &self.items[h.index()]
    }
}

impl<T: PartialEq, S> PartialEq for Arena<T, S> {
    fn eq(&self, other: &Self) -> bool {
        self.items == other.items
    }
}

impl<T: fmt::Debug, S> fmt::Debug for Arena<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.items.iter()).finish()
    }
}

impl<T: Serialize, S> Serialize for Arena<T, S> {
    fn serialize<Ser: serde::Serializer>(&self, s: Ser) -> Result<Ser::Ok, Ser::Error> {
        self.items.serialize(s)
    }
}

/// Spans of a declaration: the whole line, its name, and each attribute by key.
#[derive(Clone, Debug, Default)]
pub struct DeclSpans {
    pub item: Span,
    pub name: Span,
    pub attrs: Vec<(String, Span)>,
}

impl DeclSpans {
    /// The span of attribute `key`, or of the name when the attribute was not written.
    pub fn attr(&self, key: &str) -> Span {
        self.attrs.iter().find(|(k, _)| k == key).map_or(self.name, |(_, s)| *s)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    Bool,
    I32,
    U32,
    I64,
    F32,
    F16,
    BF16,
    F8E4M3,
    F8E5M2,
}

impl DType {
    pub const ALL: [DType; 9] =
        [DType::Bool, DType::I32, DType::U32, DType::I64, DType::F32, DType::F16, DType::BF16, DType::F8E4M3, DType::F8E5M2];

    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F8E4M3 => "f8e4m3",
            DType::F8E5M2 => "f8e5m2",
        }
    }

    pub fn parse(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Storage size in bytes (`bool` is stored as one byte).
    pub fn size_bytes(self) -> u64 {
        match self {
            DType::Bool | DType::F8E4M3 | DType::F8E5M2 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 => 8,
        }
    }

    pub fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::U32 | DType::I64)
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2)
    }

    /// Significand bits of a float format, the implicit leading bit included (p): IEEE 754-2008
    /// §3.6 (binary32: 24, binary16: 11), bfloat16 (8: binary32's exponent, 7 stored bits), OCP
    /// 8-bit floating point specification 1.0 (E4M3: 4, E5M2: 3). `None` for integers and bool.
    pub fn significand_bits(self) -> Option<u32> {
        match self {
            DType::F32 => Some(24),
            DType::F16 => Some(11),
            DType::BF16 => Some(8),
            DType::F8E4M3 => Some(4),
            DType::F8E5M2 => Some(3),
            DType::Bool | DType::I32 | DType::U32 | DType::I64 => None,
        }
    }

    /// The largest n such that every integer 0..=n is exactly representable: 2^p for a float
    /// (2^p + 1 already rounds: f16 2048, bf16 256, f32 2^24), the type's maximum for an integer.
    pub fn exact_int_max(self) -> i64 {
        match self {
            DType::Bool => 1,
            DType::I32 => i64::from(i32::MAX),
            DType::U32 => i64::from(u32::MAX),
            DType::I64 => i64::MAX,
            _ => 1i64 << self.significand_bits().unwrap_or(0),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which group of threads holds a register fragment together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Thread,
    Warp,
    Warpgroup,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Thread => "thread",
            Scope::Warp => "warp",
            Scope::Warpgroup => "warpgroup",
        }
    }

    pub fn threads(self) -> u32 {
        match self {
            Scope::Thread => 1,
            Scope::Warp => 32,
            Scope::Warpgroup => 128,
        }
    }
}

/// A size known at compile time or derived from `dim`s bound at launch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Size {
    Const(i64),
    Dim(Handle<DimDecl>),
    Bin(SizeOp, Box<Size>, Box<Size>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum SizeOp {
    Add,
    Sub,
    Mul,
    Div,
}

impl Size {
    pub fn as_const(&self) -> Option<i64> {
        match self {
            Size::Const(c) => Some(*c),
            _ => None,
        }
    }

    /// The dims the size names, in order of appearance (with repeats).
    pub fn dims(&self) -> Vec<Handle<DimDecl>> {
        fn go(s: &Size, out: &mut Vec<Handle<DimDecl>>) {
            match s {
                Size::Const(_) => {}
                Size::Dim(d) => out.push(*d),
                Size::Bin(_, a, b) => {
                    go(a, out);
                    go(b, out);
                }
            }
        }
        let mut out = Vec::new();
        go(self, &mut out);
        out
    }

    /// Evaluate with the given values for dims (`dims[i]` is the value of the i-th dim).
    pub fn eval(&self, dims: &[i64]) -> Option<i64> {
        match self {
            Size::Const(c) => Some(*c),
            Size::Dim(d) => dims.get(d.index()).copied(),
            Size::Bin(op, a, b) => {
                let (a, b) = (a.eval(dims)?, b.eval(dims)?);
                match op {
                    SizeOp::Add => a.checked_add(b),
                    SizeOp::Sub => a.checked_sub(b),
                    SizeOp::Mul => a.checked_mul(b),
                    SizeOp::Div => a.checked_div(b),
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Swizzle {
    None,
    B32,
    B64,
    B128,
}

impl Swizzle {
    pub fn bytes(self) -> u32 {
        match self {
            Swizzle::None => 0,
            Swizzle::B32 => 32,
            Swizzle::B64 => 64,
            Swizzle::B128 => 128,
        }
    }

    pub fn from_bytes(b: u64) -> Option<Swizzle> {
        Some(match b {
            32 => Swizzle::B32,
            64 => Swizzle::B64,
            128 => Swizzle::B128,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DimDecl {
    pub name: String,
    pub multiple_of: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConstDecl {
    pub name: String,
    pub value: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScalarDecl {
    pub name: String,
    pub dtype: DType,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Tma {
    /// Box extent per dimension, outermost first.
    pub box_dims: Vec<i64>,
    pub swizzle: Swizzle,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TensorDecl {
    pub name: String,
    #[serde(serialize_with = "ser_access")]
    pub access: Access,
    pub dtype: DType,
    pub shape: Vec<Size>,
    pub tma: Option<Tma>,
}

fn ser_access<S: serde::Serializer>(a: &Access, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(a.keyword())
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GridAxis {
    pub name: String,
    pub extent: Size,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GridDecl {
    pub name: String,
    pub axes: Vec<GridAxis>,
    pub persistent: bool,
    /// `group G`: tiles are walked in bands of G along the second-to-last axis (that axis
    /// fastest inside a band), so that blocks running at the same time share operand tiles in L2.
    /// `None`: row-major, last axis fastest.
    pub group: Option<u32>,
    /// Cluster shape; `[1]`-like when not declared.
    pub cluster: Vec<i64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SmemDecl {
    pub name: String,
    pub dtype: DType,
    /// Shape of one stage.
    pub shape: Vec<i64>,
    pub stages: u32,
    pub swizzle: Swizzle,
    /// Requested alignment in bytes (`None`: the default for its swizzle).
    pub align: Option<u32>,
}

impl SmemDecl {
    /// Saturating, so an absurd shape cannot overflow (the verifier rejects it by size).
    pub fn stage_bytes(&self) -> u64 {
        self.shape.iter().fold(1u64, |acc, d| acc.saturating_mul((*d).max(0) as u64)).saturating_mul(self.dtype.size_bytes())
    }

    pub fn total_bytes(&self) -> u64 {
        self.stage_bytes().saturating_mul(u64::from(self.stages))
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ViewDecl {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub region: Handle<SmemDecl>,
    pub offset: i64,
    pub swizzle: Swizzle,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RoleUnit {
    Warp,
    Warpgroup,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RoleDecl {
    pub name: String,
    pub unit: RoleUnit,
    /// First warp or warpgroup index, and how many.
    pub first: u32,
    pub count: u32,
    /// Register budget per thread, when declared.
    pub regs: Option<u32>,
}

impl RoleDecl {
    /// The warps this role occupies, half-open.
    pub fn warps(&self) -> std::ops::Range<u32> {
        let per = match self.unit {
            RoleUnit::Warp => 1,
            RoleUnit::Warpgroup => 4,
        };
        self.first * per..(self.first + self.count) * per
    }

    pub fn threads(&self) -> u32 {
        self.warps().len() as u32 * 32
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BarrierDecl {
    pub name: String,
    pub stages: u32,
    /// Arrivals that complete one phase.
    pub count: u32,
    pub producers: Vec<Handle<RoleDecl>>,
    pub consumers: Vec<Handle<RoleDecl>>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PipelineDecl {
    pub name: String,
    pub stages: u32,
    pub producer: Handle<RoleDecl>,
    pub consumer: Handle<RoleDecl>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Body {
    pub role: Handle<RoleDecl>,
    pub block: Block,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum LocalKind {
    /// `let`
    Let,
    /// `reg NAME: TYPE per SCOPE`
    Reg,
    /// `for i in lo..hi`
    LoopVar,
    /// `for t in tiles`
    Tile,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Local {
    pub name: String,
    pub kind: LocalKind,
    pub ty: Type,
}

/// Types of expressions and locals.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Type {
    /// A run-time scalar.
    Scalar(DType),
    /// An untyped numeric literal that takes the dtype of its context (`2.0`, `128`, `inf`).
    Literal { float: bool },
    /// A register-resident tensor value. Declared fragments carry their scope; values computed
    /// from them (`let d = ...`) carry the scope of their operands when it is unique.
    Frag { dtype: DType, shape: Vec<i64>, scope: Option<Scope> },
    /// A global tensor, whole (shape may be symbolic) or a window of it (constant shape).
    Global { tensor: Handle<TensorDecl>, dtype: DType, shape: Vec<Size>, window: bool },
    /// Shared memory: a region, a view, one stage, or a window of one.
    Shared { dtype: DType, shape: Vec<i64>, swizzle: Swizzle },
    Pipeline(Handle<PipelineDecl>),
    Barrier(Handle<BarrierDecl>),
    Role(Handle<RoleDecl>),
    /// The tile space itself (`tiles`).
    Tiles,
    /// A tile of the tile space (`t` in `for t in tiles`).
    Tile,
    /// A dtype used as an argument (`cast(x, bf16)`).
    DTypeName(DType),
    /// A statement-form op's result: nothing.
    Unit,
    /// An expression that failed to check. Never present in a module the checker returns;
    /// it stops one mistake from cascading into many findings.
    Error,
}

impl Type {
    /// The element dtype of a value-like type.
    pub fn dtype(&self) -> Option<DType> {
        match self {
            Type::Scalar(d) | Type::Frag { dtype: d, .. } | Type::Global { dtype: d, .. } | Type::Shared { dtype: d, .. } => Some(*d),
            _ => None,
        }
    }

    /// The constant shape of a tensor-like type (`[]` for scalars).
    pub fn const_shape(&self) -> Option<Vec<i64>> {
        match self {
            Type::Scalar(_) | Type::Literal { .. } => Some(Vec::new()),
            Type::Frag { shape, .. } | Type::Shared { shape, .. } => Some(shape.clone()),
            Type::Global { shape, .. } => shape.iter().map(Size::as_const).collect(),
            _ => None,
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn dims(f: &mut fmt::Formatter<'_>, shape: &[i64]) -> fmt::Result {
            let s: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
            write!(f, "[{}]", s.join(", "))
        }
        match self {
            Type::Scalar(d) => write!(f, "{d}"),
            Type::Literal { float: true } => write!(f, "float literal"),
            Type::Literal { float: false } => write!(f, "integer literal"),
            Type::Frag { dtype, shape, scope } => {
                write!(f, "register {dtype}")?;
                dims(f, shape)?;
                if let Some(s) = scope {
                    write!(f, " per {}", s.name())?;
                }
                Ok(())
            }
            Type::Global { dtype, shape, window, .. } => {
                write!(f, "global {dtype}")?;
                match shape.iter().map(Size::as_const).collect::<Option<Vec<_>>>() {
                    Some(c) => dims(f, &c)?,
                    None => write!(f, "[{} dims]", shape.len())?,
                }
                if *window {
                    write!(f, " window")?;
                }
                Ok(())
            }
            Type::Shared { dtype, shape, .. } => {
                write!(f, "shared {dtype}")?;
                dims(f, shape)
            }
            Type::Pipeline(_) => write!(f, "pipeline"),
            Type::Barrier(_) => write!(f, "barrier"),
            Type::Role(_) => write!(f, "role"),
            Type::Tiles => write!(f, "tile space"),
            Type::Tile => write!(f, "tile"),
            Type::DTypeName(d) => write!(f, "dtype `{d}`"),
            Type::Unit => write!(f, "nothing"),
            Type::Error => write!(f, "(error)"),
        }
    }
}

/// A field read on a declared resource.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Field {
    /// `p.stage` of a pipeline or barrier array
    Stage,
    /// `t.AXIS` of a tile: the axis index in the grid declaration
    TileAxis(usize),
    /// `R.warpgroup`, `R.warp`, `R.lane`
    Warpgroup,
    Warp,
    Lane,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum IndexItem {
    At(Handle<Expr>),
    Window { start: Handle<Expr>, len: i64 },
    Full,
}

/// A resolved catalog op: its name (the catalog key) and the arguments in parameter order,
/// with `None` for an omitted optional parameter.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpCall {
    pub op: String,
    pub args: Vec<Option<Handle<Expr>>>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum ExprKind {
    Int(i64),
    /// The literal as written (so equality is exact and printing round-trips).
    Float(String),
    Bool(bool),
    Inf,
    Local(Handle<Local>),
    Dim(Handle<DimDecl>),
    Scalar(Handle<ScalarDecl>),
    Tensor(Handle<TensorDecl>),
    Smem(Handle<SmemDecl>),
    View(Handle<ViewDecl>),
    Pipeline(Handle<PipelineDecl>),
    Barrier(Handle<BarrierDecl>),
    Role(Handle<RoleDecl>),
    Tiles,
    DTypeName(DType),
    Field { base: Handle<Expr>, field: Field },
    Index { base: Handle<Expr>, items: Vec<IndexItem> },
    Call(OpCall),
    Unary(UnOp, Handle<Expr>),
    Binary(BinOp, Handle<Expr>, Handle<Expr>),
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Expr {
    pub kind: ExprKind,
    pub ty: Type,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Block {
    pub stmts: Vec<Handle<Stmt>>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Stmt {
    Reg(Handle<Local>),
    Let { local: Handle<Local>, value: Handle<Expr> },
    Assign { target: Handle<Expr>, value: Handle<Expr> },
    Op(OpCall),
    For { var: Handle<Local>, lo: Handle<Expr>, hi: Handle<Expr>, unroll: Option<u32>, body: Block },
    ForTiles { var: Handle<Local>, body: Block },
    If { cond: Handle<Expr>, then_block: Block, else_block: Option<Block> },
}

/// One checked kernel.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Module {
    pub name: String,
    pub target: String,
    pub dims: Arena<DimDecl, DeclSpans>,
    pub consts: Arena<ConstDecl, DeclSpans>,
    pub scalars: Arena<ScalarDecl, DeclSpans>,
    pub tensors: Arena<TensorDecl, DeclSpans>,
    pub grid: Arena<GridDecl, DeclSpans>,
    pub smem: Arena<SmemDecl, DeclSpans>,
    pub views: Arena<ViewDecl, DeclSpans>,
    pub roles: Arena<RoleDecl, DeclSpans>,
    pub barriers: Arena<BarrierDecl, DeclSpans>,
    pub pipelines: Arena<PipelineDecl, DeclSpans>,
    pub bodies: Arena<Body>,
    pub locals: Arena<Local>,
    pub stmts: Arena<Stmt>,
    pub exprs: Arena<Expr>,
}

impl Module {
    /// The compile-time integer value of an expression (literals, folded constants and integer
    /// arithmetic on them), when it has one.
    pub fn const_value(&self, h: Handle<Expr>) -> Option<i64> {
        match &self.exprs[h].kind {
            ExprKind::Int(i) => Some(*i),
            ExprKind::Unary(UnOp::Neg, x) => self.const_value(*x).map(i64::wrapping_neg),
            ExprKind::Binary(op, a, b) => {
                op.fold_int(self.const_value(*a)?, self.const_value(*b)?)
            }
            _ => None,
        }
    }

    /// The shared region behind a (possibly indexed) shared-memory expression: a region, a
    /// view of one, or a window of either.
    pub fn smem_region(&self, mut e: Handle<Expr>) -> Option<Handle<SmemDecl>> {
        for _ in 0..64 {
            match &self.exprs[e].kind {
                ExprKind::Index { base, .. } => e = *base,
                ExprKind::Smem(s) => return Some(*s),
                ExprKind::View(v) => return Some(self.views[*v].region),
                _ => return None,
            }
        }
        None
    }

    /// The tile space, when declared.
    pub fn grid(&self) -> Option<&GridDecl> {
        self.grid.iter().next().map(|(_, g)| g)
    }

    /// The body of a role, when it has one.
    pub fn body_of(&self, role: Handle<RoleDecl>) -> Option<&Body> {
        self.bodies.iter().map(|(_, b)| b).find(|b| b.role == role)
    }

    /// Threads per block: enough for the highest warp any role uses.
    pub fn threads_per_block(&self) -> u32 {
        self.roles.iter().map(|(_, r)| r.warps().end).max().unwrap_or(0) * 32
    }
}

/// Whether `v` reads one place of a global tensor: `Ids[r :+ 1]`, `Ids[r]` (an index into a
/// tensor argument).
pub fn is_global_read(m: &Module, v: Handle<Expr>) -> bool {
    tensor_of_read(m, v).is_some()
}

/// The tensor an index expression `T[...]` reads.
pub fn tensor_of_read(m: &Module, v: Handle<Expr>) -> Option<Handle<TensorDecl>> {
    match &m.exprs[v].kind {
        ExprKind::Index { base, .. } => match m.exprs[*base].kind {
            ExprKind::Tensor(t) => Some(t),
            _ => None,
        },
        _ => None,
    }
}

/// A data-dependent index (`E[id, ...]`, LANGUAGE.md): `e` is a `let` name bound to one element
/// read from an `in` tensor (`let id = Ids[r :+ 1]`); returns the name and its value. The
/// checker admits such a name in an index only bare, picking one position of a global tensor
/// (E0325); the verifier treats its value as unknown, the lowering loads it once at the `let`
/// and guards every access it indexes.
pub fn data_index(m: &Module, e: Handle<Expr>) -> Option<(Handle<Local>, Handle<Expr>)> {
    let ExprKind::Local(l) = m.exprs[e].kind else {
        return None;
    };
    if m.locals[l].kind != LocalKind::Let || !matches!(m.locals[l].ty, Type::Scalar(_) | Type::Global { .. }) {
        return None;
    }
    m.stmts.iter().find_map(|(_, s)| match s {
        Stmt::Let { local, value } if *local == l && is_global_read(m, *value) => Some((l, *value)),
        _ => None,
    })
}

/// Whether a `let` name is used as a data-dependent index somewhere in the module.
pub fn is_data_index_local(m: &Module, l: Handle<Local>) -> bool {
    m.exprs.iter().any(|(_, x)| match &x.kind {
        ExprKind::Index { base, items } => {
            matches!(m.exprs[*base].ty, Type::Global { .. })
                && items.iter().any(|i| matches!(i, IndexItem::At(a) if matches!(m.exprs[*a].kind, ExprKind::Local(k) if k == l)))
        }
        _ => false,
    }) && m.stmts.iter().any(|(_, s)| matches!(s, Stmt::Let { local, value } if *local == l && is_global_read(m, *value)))
}

/// Visit `e` and every expression inside it (pre-order): operands, index items and window starts.
pub fn walk_expr(m: &Module, e: Handle<Expr>, f: &mut dyn FnMut(Handle<Expr>)) {
    f(e);
    match &m.exprs[e].kind {
        ExprKind::Field { base, .. } => walk_expr(m, *base, f),
        ExprKind::Index { base, items } => {
            walk_expr(m, *base, f);
            for it in items {
                match it {
                    IndexItem::At(x) => walk_expr(m, *x, f),
                    IndexItem::Window { start, .. } => walk_expr(m, *start, f),
                    IndexItem::Full => {}
                }
            }
        }
        ExprKind::Call(c) => c.args.iter().flatten().for_each(|a| walk_expr(m, *a, f)),
        ExprKind::Unary(_, a) => walk_expr(m, *a, f),
        ExprKind::Binary(_, a, b) => {
            walk_expr(m, *a, f);
            walk_expr(m, *b, f);
        }
        _ => {}
    }
}
