//! Syntax tree of a `.cake` file, exactly as written (before name resolution and typing).
//!
//! The parser produces it, the printer (`cake fmt`) writes it back in canonical form, and the
//! type checker turns it into the typed IR (`crate::ir`). Comments are kept as trivia on the
//! item or statement they precede, so formatting never loses them.

use crate::span::Span;

/// A name with the bytes it was written at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// Comments attached to a node: whole-line comments before it, and one at the end of its line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trivia {
    /// Text of each `#` comment line before the node, without the `#` and one following space.
    pub leading: Vec<String>,
    /// Text of a `#` comment on the same line, after the node.
    pub trailing: Option<String>,
    /// True when at least one blank line separated this node from the previous one.
    pub blank_line_before: bool,
}

/// `kernel NAME target TARGET` followed by items.
#[derive(Clone, Debug, PartialEq)]
pub struct File {
    pub header_trivia: Trivia,
    pub kernel: Ident,
    pub target: Ident,
    pub items: Vec<Item>,
    /// Comments after the last item.
    pub end_comments: Vec<String>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    pub kind: ItemKind,
    pub trivia: Trivia,
    pub span: Span,
}

/// Access of a global tensor parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    In,
    Out,
    InOut,
}

impl Access {
    pub fn keyword(self) -> &'static str {
        match self {
            Access::In => "in",
            Access::Out => "out",
            Access::InOut => "inout",
        }
    }
}

/// `DTYPE[dim, dim, ...]`, e.g. `bf16[M, K]`. A scalar type is written with no brackets.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeExpr {
    pub dtype: Ident,
    /// `None` for a scalar (`f32`), `Some(dims)` for a tensor (`f32[64, 256]`).
    pub shape: Option<Vec<Expr>>,
    pub span: Span,
}

/// One trailing attribute of a declaration: `stages 4`, `swizzle 128B`, `persistent`,
/// `warpgroup 1..3`, `tma [128, 64]`, `producer load`.
#[derive(Clone, Debug, PartialEq)]
pub struct Attr {
    pub key: Ident,
    pub value: AttrValue,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    /// A key with no value (`persistent`). Only keys listed in [`FLAG_ATTRS`] are flags.
    Flag,
    /// A single expression (`4`, `128B`, `load`, `K / 64`).
    Expr(Expr),
    /// A half-open range `lo..hi` (`warpgroup 1..3`).
    Range(Expr, Expr),
    /// A bracketed list (`[128, 64]`, `[load, epilogue]`).
    List(Vec<Expr>, Span),
}

/// Attribute keys that take no value. Every other key is followed by exactly one value.
pub const FLAG_ATTRS: &[&str] = &["persistent"];

/// A named axis of a tile space: `m = M / 128`.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    pub name: Ident,
    pub extent: Expr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ItemKind {
    /// `dim M multiple_of 128` — a problem size bound at launch.
    Dim { name: Ident, attrs: Vec<Attr> },
    /// `const BK = 64` — a compile-time integer.
    Const { name: Ident, value: Expr },
    /// `scalar alpha: f32` — a scalar kernel argument.
    Scalar { name: Ident, ty: TypeExpr, attrs: Vec<Attr> },
    /// `in A: bf16[M, K] tma [128, 64] swizzle 128B` — a global tensor argument.
    Tensor { access: Access, name: Ident, ty: TypeExpr, attrs: Vec<Attr> },
    /// `grid tiles[m = M / 128, n = N / 256] persistent cluster [1, 1]`.
    Grid { name: Ident, axes: Vec<Axis>, attrs: Vec<Attr> },
    /// `smem a_s: bf16[128, 64] stages 4 swizzle 128B align 1024`.
    Smem { name: Ident, ty: TypeExpr, attrs: Vec<Attr> },
    /// `view c_s: bf16[128, 256] of a_s offset 0` — a typed window onto a shared region.
    View { name: Ident, ty: TypeExpr, attrs: Vec<Attr> },
    /// `role mma: warpgroup 1..3 regs 232`.
    Role { name: Ident, attrs: Vec<Attr> },
    /// `barrier done: count 1 producer mma consumer store` — an explicit mbarrier.
    Barrier { name: Ident, attrs: Vec<Attr> },
    /// `pipeline ab: stages 4 producer load consumer mma` — full/empty barrier pairs, derived.
    Pipeline { name: Ident, attrs: Vec<Attr> },
    /// `on mma { ... }` — the body a role runs.
    On { role: Ident, body: Block },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    /// Comments after the last statement, before `}`.
    pub end_comments: Vec<String>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub kind: StmtKind,
    pub trivia: Trivia,
    pub span: Span,
}

/// What a `for` loop walks.
#[derive(Clone, Debug, PartialEq)]
pub enum ForIter {
    /// `for kb in 0..K / 64`
    Range { lo: Expr, hi: Expr },
    /// `for t in tiles` — the grid's tile space (persistent or one tile per block).
    Tiles(Ident),
}

#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// `let x = expr` — an immutable value.
    Let { name: Ident, value: Expr },
    /// `reg acc: f32[64, 256] per warpgroup` — a register fragment.
    Reg { name: Ident, ty: TypeExpr, attrs: Vec<Attr> },
    /// `best = select(better, d, best)` — assign to a register fragment (or an element of one).
    Assign { target: Expr, value: Expr },
    /// `acquire(ab)` — an operation called for its effect.
    Call(Expr),
    /// `for VAR in ITER { ... }` with optional attributes (`unroll 2`).
    For { var: Ident, iter: ForIter, attrs: Vec<Attr>, body: Block },
    /// `if cond { ... } else { ... }`; `else if` is an `If` alone in the else block.
    If { cond: Expr, then_block: Block, else_block: Option<Block> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum BinOp {
    Mul,
    Div,
    Rem,
    Add,
    Sub,
    Shl,
    Shr,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }

    /// The operator applied to two compile-time integers: `None` for a non-arithmetic operator,
    /// overflow, division by zero or a shift out of range.
    pub fn fold_int(self, a: i64, b: i64) -> Option<i64> {
        match self {
            BinOp::Add => a.checked_add(b),
            BinOp::Sub => a.checked_sub(b),
            BinOp::Mul => a.checked_mul(b),
            BinOp::Div => a.checked_div(b),
            BinOp::Rem => a.checked_rem(b),
            BinOp::Shl => u32::try_from(b).ok().and_then(|b| a.checked_shl(b)),
            BinOp::Shr => u32::try_from(b).ok().and_then(|b| a.checked_shr(b)),
            _ => None,
        }
    }

    /// Binding strength: higher binds tighter. All binary operators are left-associative.
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::Eq | BinOp::Ne => 3,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 4,
            BinOp::Shl | BinOp::Shr => 5,
            BinOp::Add | BinOp::Sub => 6,
            BinOp::Mul | BinOp::Div | BinOp::Rem => 7,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum UnOp {
    Neg,
    Not,
}

/// One position inside `x[...]`.
#[derive(Clone, Debug, PartialEq)]
pub enum IndexItem {
    /// `i` — picks one position, dropping the dimension.
    At(Expr),
    /// `start :+ len` — a window of constant length `len` starting at `start`.
    Window { start: Expr, len: Expr },
    /// `:` — the whole dimension.
    Full(Span),
}

/// A call argument, positional (`acc`) or named (`axis=1`).
#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    pub name: Option<Ident>,
    pub value: Expr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// `42`, `0x40`, `1_024`
    Int(i64),
    /// `1.0`, `2.5e-3`, kept as written so printing round-trips exactly.
    Float(String),
    /// `128B` — a byte count (swizzle modes, sizes).
    Bytes(u64),
    /// `true` / `false`
    Bool(bool),
    /// `inf` — positive infinity (`-inf` is `Neg(inf)`).
    Inf,
    /// A name: a declaration, a loop variable, a local, or a dtype used as an argument.
    Name(Ident),
    /// `t.m`, `ab.stage`, `mma.warpgroup`
    Field { base: Box<Expr>, field: Ident },
    /// `A[t.m * 128 :+ 128, kb * 64 :+ 64]`
    Index { base: Box<Expr>, items: Vec<IndexItem> },
    /// `wgmma(acc, a, b)`, `min(d, axis=1)`
    Call { func: Ident, args: Vec<Arg> },
    Unary { op: UnOp, operand: Box<Expr> },
    Binary { op: BinOp, lhs: Box<Expr>, rhs: Box<Expr> },
    /// `(expr)` — kept so the printer can reproduce necessary grouping.
    Paren(Box<Expr>),
}
