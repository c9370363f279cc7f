//! The typed errors of the workload spec's small parsers and shape checks (re-exported by
//! [`super::workload`]): a `--shape` or workload shape the program cannot take, a `derive` recipe
//! or `flops` expression that does not parse, an `elementwise` spec without its expression. Each
//! message names the value at fault; callers wrap it with the field it came from.

/// A shape the program cannot take (`cake run --shape`, a workload's `shapes` / `headline`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("no value for dim `{dim}`")]
    MissingDim { dim: String },
    #[error("dim `{dim}` = {value} must be positive")]
    NotPositive { dim: String, value: i64 },
    #[error("dim `{dim}` = {value} does not fit the kernel's i32 dim parameter")]
    TooLarge { dim: String, value: i64 },
    #[error("dim `{dim}` = {value} is not a multiple of {multiple} (`dim {dim} multiple_of {multiple}`)")]
    NotMultiple { dim: String, value: i64, multiple: i64 },
    #[error("the program has no dim `{dim}` (dims: {})", known.join(", "))]
    UnknownDim { dim: String, known: Vec<String> },
    /// The oracle's tensors do not have the shapes it relates at this shape.
    #[error("oracle `{oracle}`: {from} is {from_shape:?}, so {to} must be {want}, but it is {got:?}")]
    Relation { oracle: &'static str, from: String, from_shape: Vec<i64>, to: String, want: String, got: Vec<i64> },
    /// A relation with the reason the oracle relates those extents.
    #[error("{inner} ({why})")]
    Because { inner: Box<ShapeError>, why: &'static str },
    #[error("oracle `{oracle}`: {what} is {shape:?}")]
    Rank { oracle: &'static str, what: &'static str, shape: Vec<i64> },
    /// An extent that must split another into equal parts (groups, tiles) does not.
    #[error("oracle `{oracle}`: {why}")]
    Split { oracle: &'static str, why: String },
    #[error("no tensor `{tensor}`")]
    NoTensor { tensor: String },
    #[error("the shape of `{tensor}` overflows")]
    Overflow { tensor: String },
}

/// A `derive` recipe that does not parse (`FUNCTION(TENSOR)`, `one_hot()` or `column_index()`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeriveError {
    #[error("`{text}`: expected `FUNCTION(TENSOR)` or `FUNCTION()`")]
    NoCall { text: String },
    #[error("`{text}`: missing `)`")]
    Unclosed { text: String },
    #[error("`{text}`: one_hot() takes no argument (it draws from the seed)")]
    OneHotArgument { text: String },
    #[error("`{text}`: column_index() takes no argument (it numbers the innermost axis)")]
    ColumnIndexArgument { text: String },
    #[error("`{text}`: the argument must be one tensor name")]
    BadArgument { text: String },
    #[error("`{text}`: unknown function `{function}` (known: {known})")]
    UnknownFunction { text: String, function: String, known: &'static str },
}

/// A dim expression (`flops`) that does not evaluate: integers, dim names, `+ - * /`, parentheses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DimExprError {
    #[error("bad number `{text}`")]
    BadNumber { text: String },
    #[error("unexpected `{found}` in `{text}`")]
    UnexpectedChar { found: char, text: String },
    #[error("unknown dim `{dim}`")]
    UnknownDim { dim: String },
    #[error("missing `)`")]
    Unclosed,
    #[error("unexpected {found}")]
    UnexpectedToken { found: String },
    #[error("trailing input in `{text}`")]
    Trailing { text: String },
}

/// The `elementwise` oracle's expression is missing or does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ElementExprError {
    #[error("the workload has no `expr`")]
    Missing,
    #[error("{0}")]
    Parse(#[from] super::expr::ExprError),
}
