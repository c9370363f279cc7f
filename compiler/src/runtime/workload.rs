//! Workload specs: `examples/NAME.workload.toml` beside `examples/NAME.cake` says how to run the
//! program — which oracle checks it, how its inputs are drawn, which inputs are derived from
//! others, the tolerance, the shapes to sweep and the headline shape. The schema is documented
//! in `compiler/src/runtime/README.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::expr::ElementExpr;
use super::oracle::{KeyMask, RowReduce, Tolerance};
use super::rng::Dist;
use crate::ir::{DType, Module};
use crate::syntax::ast::Access;

/// A shape: a value for every `dim` of the program.
pub use super::workload_errors::{DeriveError, DimExprError, ElementExprError, ShapeError};
pub use crate::shape::Shape;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// The kernel this workload is for (checked against the program's `kernel NAME`).
    #[serde(default)]
    pub kernel: Option<String>,
    /// `matmul_abt`, `grouped_matmul_abt`, `attention`, `kmeans_assign`, `kmeans_update`, `knn_tile_min`, `copy`, `transpose`,
    /// `softmax`, `row_reduce`, `rmsnorm`, `layernorm`, `elementwise`, `rotary`, `fp8_quant_row`, `fp8_quant_block`, `gemv` or `none` (run and
    /// time only).
    pub oracle: OracleName,
    /// Oracle role → tensor name (defaults: matmul_abt and grouped_matmul_abt a=A b=B c=C;
    /// attention q=Q k=K vt=VT o=O and the scalar scale=scale; kmeans_assign x=X c=C idx=Idx;
    /// kmeans_update xt=XT oh=OH icnt=ICNT ct=CT;
    /// copy and transpose input=A output=B; softmax x=X y=Y; row_reduce x=X out=Out; rmsnorm
    /// x=X w=W y=Y, and the scalar eps=eps; layernorm x=X w=W b=Bias y=Y eps=eps; elementwise
    /// x=X y=Y w=W z=Z; rotary x=X cos=COS sin=SIN y=Y; fp8_quant_row x=X q=Q s=S and the scalar
    /// min_scale=min_scale, fp8_quant_block the same; gemv w=W x=X y=Y).
    #[serde(default)]
    pub args: BTreeMap<String, String>,
    /// `row_reduce` only: which reduction of each row the kernel computes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reduce: Option<RowReduce>,
    /// `attention` only: which keys each query sees (`"causal"`: keys 0..=i; `{ sliding_window =
    /// W }`: keys i − W < j ≤ i); none: every key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<KeyMask>,
    /// `elementwise` only: Z = f(x, y, w), the expression the oracle evaluates per element
    /// ([`ElementExpr`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expr: Option<String>,
    /// Floating-point operations of one launch, an expression over dims (`2 * M * N * K`).
    #[serde(default)]
    pub flops: Option<String>,
    /// Seed of the input generator (default 1).
    #[serde(default)]
    pub seed: Option<u64>,
    /// The distributions a sweep (`cake run` without `--dist`) runs, in order.
    /// Default: the per-input distributions only (one run per shape).
    #[serde(default)]
    pub distributions: Vec<Dist>,
    /// Default baseline for `cake bench`: `cublas` or `none`.
    #[serde(default)]
    pub baseline: Option<String>,
    /// The shape `cake bench` uses when no `--shape` is given.
    pub headline: Shape,
    /// The shapes `cake run` sweeps when no `--shape` is given.
    pub shapes: Vec<Shape>,
    #[serde(default)]
    pub tolerance: Option<ToleranceSpec>,
    /// Per-input distribution (inputs not listed draw `normal`).
    #[serde(default)]
    pub inputs: BTreeMap<String, InputSpec>,
    /// Inputs computed on the host, from other inputs (`CN = "row_sqnorm(C)"`, possibly derived
    /// ones themselves) or from the seed alone (`OH = "one_hot()"`).
    #[serde(default)]
    pub derive: BTreeMap<String, String>,
    /// Values of the program's `scalar` arguments.
    #[serde(default)]
    pub scalars: BTreeMap<String, f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OracleName {
    MatmulAbt,
    KmeansAssign,
    /// B = A, element for element, exactly.
    Copy,
    /// B[j, i] = A[i, j], exactly.
    Transpose,
    /// Y = softmax of each row of X.
    Softmax,
    /// Out[r] = one reduction (the spec's `reduce`) of row r of X.
    RowReduce,
    /// Y = X · (mean(X²) + eps)^-½ · W, row by row.
    Rmsnorm,
    /// Y = (X − mean) · (var + eps)^-½ · W + B, row by row.
    Layernorm,
    /// Z[r, c] = f(X[r, c], Y[r, c], W[c]), f the spec's `expr`.
    Elementwise,
    /// Equal-size groups: C[g·MG + i, :] = A[g·MG + i, :]·B[g]ᵀ, A [G·MG, K], B [G, N, K].
    GroupedMatmulAbt,
    /// O[h] = softmax(scale · Q[h]·K[h]ᵀ)·V[h], V given transposed (VT [BH, HD, SK]).
    Attention,
    /// KNN first stage: per query and database tile, the minimum of ‖q‖² + ‖c‖² − 2·q·c (Dist)
    /// and its global database index (Idx).
    KnnTileMin,
    /// KMeans centroid update as a one-hot GEMM: CT[b] = XT[b]·OH[b]ᵀ·diag(ICNT[b]).
    KmeansUpdate,
    /// Rotary position embedding, rotate-half: each head's pairs (j, j + D/2) of X rotated by the
    /// token's COS/SIN [T, D/2] entries.
    Rotary,
    /// Per-row fp8 quantization: S[r] = max(absmax(X[r, :]) / QMAX, min_scale), Q = fp8(X / S).
    Fp8QuantRow,
    /// Per-block fp8 quantization: S[r, g] = max(absmax(X[r, G·g :+ G]) / QMAX, min_scale) for S
    /// [R, C / G] (G = 128: DeepSeek-V3's 1 × 128 groups), Q = fp8(X / S of the element's group).
    Fp8QuantBlock,
    /// Loss[r] = logsumexp(X[r, :]) − X[r, T[r]], Col the column index 0..V−1 (derived).
    CrossEntropy,
    /// DX = rstd · (DY·W − X·rstd²·mean(DY·W·X)), rstd = (mean(X²) + eps)^-½, row by row.
    RmsnormBwd,
    /// DX = rstd · (DY·W − mean(DY·W) − XHAT·mean(DY·W·XHAT)), XHAT = (X − mean)·rstd, rstd =
    /// (var + eps)^-½, row by row (the input gradient of LayerNorm).
    LayernormBwd,
    /// DX = Y · (DY − Σ DY·Y) row by row, Y the softmax output (the input gradient of softmax).
    SoftmaxBwd,
    /// DX[r, c] = (softmax(X[r, :])[c] − [c == T[r]]) · scale: the logits gradient of a weighted
    /// cross-entropy, Col the column index 0..V−1 (derived).
    CrossEntropyBwd,
    /// Vals[r, :], Idx[r, :] = the K largest values of X[r, :], descending, and their columns;
    /// Col the column index 0..E−1 (derived).
    Topk,
    /// Y[n] = Σ_k W[n, k]·X[k]: a row-major weight W [N, K] times one vector X [K] (decode GEMV).
    Gemv,
    /// Out[r, :] = E[Ids[r], :]: a row gather of a table E [V, H] by integer ids Ids [R], exactly.
    Embedding,
    /// SUMS[A[n], :] += X[n, :] and COUNTS[A[n]] += 1 for every point n (the KMeans centroid
    /// update by scatter-add), onto the initial SUMS [K, D] and COUNTS [K] / [K, 1] (`inout`).
    KmeansScatter,
    None,
}

/// The dtypes whose output poison (0xFF bytes) is NaN: an element the kernel never writes can
/// never equal a generated input value, so the exact oracles see it.
const POISON_IS_NAN: &[DType] = &[DType::BF16, DType::F16, DType::F32, DType::F8E4M3, DType::F8E5M2];

/// Index outputs (an arg-min): compared by value, decoded from the declared dtype
/// ([`crate::runtime::convert::decode_all_index`]). An index stored in a float holds exactly only
/// up to the dtype's exact-integer range (f16: 2048, bf16: 256): past it the decoded index names
/// another centroid, and the oracle reports the wrong answer. Poison (0xFF bytes) decodes as -1 or
/// NaN, outside every index range, so an unwritten element is caught in each of them.
const INDEX_OUT: &[DType] = &[DType::I32, DType::U32, DType::I64, DType::F32, DType::F16, DType::BF16];

/// The dtypes of the row kernels' tensors (f32 math on 16- and 32-bit floats).
const ROW_FLOATS: &[DType] = &[DType::BF16, DType::F16, DType::F32];

/// GEMM operands (`matmul_abt`, `grouped_matmul_abt`) and outputs.
const GEMM_IN: &[DType] = &[DType::BF16, DType::F16, DType::F32, DType::F8E4M3, DType::F8E5M2];
const GEMM_OUT: &[DType] = &[DType::BF16, DType::F16, DType::F32];

/// `kmeans_update`'s operands XT and OH: 16-bit floats, whose products are exact in f32 (what
/// [`Tolerance::KMEANS_UPDATE`] assumes).
const KMEANS_UPDATE_IN: &[DType] = &[DType::BF16, DType::F16];

/// `attention`'s tensors: the 16-bit formats its tolerances are set for (an f32 attention would
/// run its products as tf32, which they do not cover).
const ATTENTION_FLOATS: &[DType] = &[DType::BF16, DType::F16];

impl OracleName {
    pub fn name(self) -> &'static str {
        match self {
            OracleName::MatmulAbt => "matmul_abt",
            OracleName::KmeansAssign => "kmeans_assign",
            OracleName::Copy => "copy",
            OracleName::Transpose => "transpose",
            OracleName::Softmax => "softmax",
            OracleName::RowReduce => "row_reduce",
            OracleName::Rmsnorm => "rmsnorm",
            OracleName::Layernorm => "layernorm",
            OracleName::Elementwise => "elementwise",
            OracleName::GroupedMatmulAbt => "grouped_matmul_abt",
            OracleName::Attention => "attention",
            OracleName::KnnTileMin => "knn_tile_min",
            OracleName::KmeansUpdate => "kmeans_update",
            OracleName::Rotary => "rotary",
            OracleName::Fp8QuantRow => "fp8_quant_row",
            OracleName::Fp8QuantBlock => "fp8_quant_block",
            OracleName::CrossEntropy => "cross_entropy",
            OracleName::RmsnormBwd => "rmsnorm_bwd",
            OracleName::LayernormBwd => "layernorm_bwd",
            OracleName::SoftmaxBwd => "softmax_bwd",
            OracleName::CrossEntropyBwd => "cross_entropy_bwd",
            OracleName::Topk => "topk",
            OracleName::Gemv => "gemv",
            OracleName::Embedding => "embedding",
            OracleName::KmeansScatter => "kmeans_scatter",
            OracleName::None => "none",
        }
    }

    /// The oracle's tensor roles and their default tensor names.
    pub fn roles(self) -> &'static [(&'static str, &'static str)] {
        match self {
            OracleName::MatmulAbt | OracleName::GroupedMatmulAbt => &[("a", "A"), ("b", "B"), ("c", "C")],
            OracleName::KmeansAssign => &[("x", "X"), ("c", "C"), ("idx", "Idx")],
            OracleName::Copy | OracleName::Transpose => &[("input", "A"), ("output", "B")],
            OracleName::Softmax => &[("x", "X"), ("y", "Y")],
            OracleName::RowReduce => &[("x", "X"), ("out", "Out")],
            OracleName::Rmsnorm => &[("x", "X"), ("w", "W"), ("y", "Y")],
            OracleName::Layernorm => &[("x", "X"), ("w", "W"), ("b", "Bias"), ("y", "Y")],
            OracleName::Elementwise => &[("x", "X"), ("y", "Y"), ("w", "W"), ("z", "Z")],
            OracleName::Attention => &[("q", "Q"), ("k", "K"), ("vt", "VT"), ("o", "O")],
            OracleName::KnnTileMin => &[("q", "Q"), ("qn", "QN"), ("c", "C"), ("cn", "CN"), ("dist", "Dist"), ("idx", "Idx")],
            OracleName::KmeansUpdate => &[("xt", "XT"), ("oh", "OH"), ("icnt", "ICNT"), ("ct", "CT")],
            OracleName::Rotary => &[("x", "X"), ("cos", "COS"), ("sin", "SIN"), ("y", "Y")],
            OracleName::Fp8QuantRow | OracleName::Fp8QuantBlock => &[("x", "X"), ("q", "Q"), ("s", "S")],
            OracleName::CrossEntropy => &[("x", "X"), ("target", "T"), ("col", "Col"), ("loss", "Loss")],
            OracleName::RmsnormBwd | OracleName::LayernormBwd => &[("x", "X"), ("dy", "DY"), ("w", "W"), ("dx", "DX")],
            OracleName::SoftmaxBwd => &[("y", "Y"), ("dy", "DY"), ("dx", "DX")],
            OracleName::CrossEntropyBwd => &[("x", "X"), ("target", "T"), ("col", "Col"), ("dx", "DX")],
            OracleName::Topk => &[("x", "X"), ("col", "Col"), ("vals", "Vals"), ("idx", "Idx")],
            OracleName::Gemv => &[("w", "W"), ("x", "X"), ("y", "Y")],
            OracleName::Embedding => &[("ids", "Ids"), ("e", "E"), ("out", "Out")],
            OracleName::KmeansScatter => &[("x", "X"), ("assign", "A"), ("sums", "SUMS"), ("counts", "COUNTS")],
            OracleName::None => &[],
        }
    }

    /// The oracle's scalar roles (they name a `scalar` of the program, whose value the spec's
    /// `[scalars]` gives) and their default scalar names.
    pub fn scalar_roles(self) -> &'static [(&'static str, &'static str)] {
        match self {
            OracleName::Rmsnorm | OracleName::Layernorm | OracleName::RmsnormBwd | OracleName::LayernormBwd => {
                &[("eps", "eps")]
            }
            OracleName::Attention | OracleName::CrossEntropyBwd => &[("scale", "scale")],
            OracleName::Fp8QuantRow | OracleName::Fp8QuantBlock => &[("min_scale", "min_scale")],
            _ => &[],
        }
    }

    /// The role whose tensor the oracle checks (the kernel's result).
    pub fn output_role(self) -> Option<&'static str> {
        match self {
            OracleName::MatmulAbt | OracleName::GroupedMatmulAbt => Some("c"),
            OracleName::KmeansAssign => Some("idx"),
            OracleName::Copy | OracleName::Transpose => Some("output"),
            OracleName::Softmax | OracleName::Rmsnorm | OracleName::Layernorm | OracleName::Rotary | OracleName::Gemv => {
                Some("y")
            }
            OracleName::RowReduce => Some("out"),
            OracleName::Elementwise => Some("z"),
            OracleName::Attention => Some("o"),
            // Idx is checked too (by the same oracle, an i32 output: no `written` scan applies).
            OracleName::KnnTileMin => Some("dist"),
            OracleName::KmeansUpdate => Some("ct"),
            // S is checked too (by the same oracle: `fp8_quant_row.scale`).
            OracleName::Fp8QuantRow | OracleName::Fp8QuantBlock => Some("q"),
            OracleName::CrossEntropy => Some("loss"),
            OracleName::RmsnormBwd | OracleName::LayernormBwd | OracleName::SoftmaxBwd | OracleName::CrossEntropyBwd => {
                Some("dx")
            }
            // Idx is checked too (by the same oracle: `topk.idx`).
            OracleName::Topk => Some("vals"),
            OracleName::Embedding => Some("out"),
            // COUNTS is checked too (by the same oracle: `kmeans_scatter.counts`).
            OracleName::KmeansScatter => Some("sums"),
            OracleName::None => None,
        }
    }

    /// Exact oracles (`copy`, `transpose`): every element equals its reference bit for bit; no
    /// tolerance applies.
    pub fn is_exact(self) -> bool {
        matches!(self, OracleName::Copy | OracleName::Transpose)
    }

    /// Oracles that define every output element from the inputs alone and compare all of them
    /// (the exact ones, `embedding` and the row kernels'): their output is poisoned before the
    /// launch even when the kernel declares it `inout`, so an element the kernel never writes fails.
    pub fn checks_every_element(self) -> bool {
        self.is_exact() || self.is_row_kernel() || self == OracleName::Embedding
    }

    /// The row kernels' oracles (`softmax`, `row_reduce`, `rmsnorm`, `layernorm`, `rotary`,
    /// `fp8_quant_row`, and `elementwise` over rows [R, C]; `gemv`, one dot product per row of W):
    /// fp64 references of every element, tolerances by output dtype (`fp8_quant_row`: half an fp8
    /// step per element).
    pub fn is_row_kernel(self) -> bool {
        matches!(
            self,
            OracleName::Softmax
                | OracleName::RowReduce
                | OracleName::Rmsnorm
                | OracleName::Layernorm
                | OracleName::Elementwise
                | OracleName::Rotary
                | OracleName::Fp8QuantRow
                | OracleName::Fp8QuantBlock
                | OracleName::RmsnormBwd
                | OracleName::LayernormBwd
                | OracleName::SoftmaxBwd
                | OracleName::Gemv
        )
    }

    /// Whether `cake bench --baseline cublas` has a peer GEMM to time for this oracle (equal-size
    /// groups are a strided batch to cuBLAS).
    pub fn has_cublas_peer(self) -> bool {
        matches!(self, OracleName::MatmulAbt | OracleName::KmeansAssign | OracleName::GroupedMatmulAbt)
    }

    /// Oracles whose roles must each name a tensor of their own (no operand read twice).
    pub fn distinct_roles(self) -> bool {
        matches!(
            self,
            OracleName::GroupedMatmulAbt
                | OracleName::Attention
                | OracleName::KnnTileMin
                | OracleName::KmeansUpdate
                | OracleName::Rotary
                | OracleName::Fp8QuantRow
                | OracleName::Fp8QuantBlock
                | OracleName::CrossEntropy
                | OracleName::Gemv
                | OracleName::CrossEntropyBwd
                | OracleName::Topk
                | OracleName::Embedding
                | OracleName::KmeansScatter
        )
    }

    /// The tolerance when the spec gives none. The row kernels', `grouped_matmul_abt`'s and
    /// `attention`'s follow the dtype of their output tensor ([`Tolerance::for_row_output`],
    /// [`Tolerance::for_gemm_output`], [`Tolerance::for_attention_output`]; bf16's, the loosest,
    /// when it is not known). `matmul_abt` keeps [`Tolerance::MATMUL_BF16`] for every output dtype
    /// (its f16-accumulator corpus instances need it).
    pub fn default_tolerance(self, output: Option<DType>) -> Tolerance {
        match self {
            OracleName::KmeansAssign => Tolerance::KMEANS,
            OracleName::KnnTileMin => Tolerance::KNN,
            OracleName::KmeansUpdate => Tolerance::KMEANS_UPDATE,
            OracleName::CrossEntropy => Tolerance::CROSS_ENTROPY,
            OracleName::CrossEntropyBwd => crate::runtime::oracle::cross_entropy_bwd_tolerance(output.unwrap_or(DType::BF16)),
            OracleName::Topk | OracleName::Embedding => Tolerance::EXACT,
            OracleName::KmeansScatter => crate::runtime::oracle::SCATTER_ADD,
            OracleName::Copy | OracleName::Transpose => Tolerance::EXACT,
            OracleName::Fp8QuantRow | OracleName::Fp8QuantBlock => Tolerance::FP8_QUANT,
            o if o.is_row_kernel() => Tolerance::for_row_output(output.unwrap_or(DType::BF16)),
            OracleName::GroupedMatmulAbt => Tolerance::for_gemm_output(output.unwrap_or(DType::BF16)),
            OracleName::Attention => Tolerance::for_attention_output(output.unwrap_or(DType::BF16)),
            _ => Tolerance::MATMUL_BF16,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToleranceSpec {
    pub rtol: Option<f64>,
    pub atol: Option<f64>,
    pub samples: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    #[serde(default = "default_dist")]
    pub dist: Dist,
    /// Multiplies every value (default 1).
    #[serde(default)]
    pub scale: Option<f64>,
    /// Added to every value after the scale, before the rounding to the tensor's dtype (default
    /// 0): `dist = "uniform", scale = 0.5, offset = 1.0` draws from [0.5, 1.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<f64>,
}

fn default_dist() -> Dist {
    Dist::Normal
}

/// A derived input's recipe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "fn")]
pub enum Derive {
    /// Sum of squares over the innermost axis of `of` (shape = `of`'s shape without it).
    RowSqnorm { of: String },
    /// `one_hot()`, from the seed alone: for every leading index and column, exactly one 1 over
    /// the second-to-last axis (drawn uniformly), 0 elsewhere (rank ≥ 2).
    OneHot,
    /// 1 / (sum over the innermost axis of `of`), 0 for a row summing to 0 (shape = `of`'s
    /// shape without it): `inv_row_sum(OH)` is 1/count per cluster.
    InvRowSum { of: String },
    /// `column_index()`, from nothing: 0, 1, …, n − 1 along the innermost axis (rank ≥ 1), the
    /// column numbers a compare-and-select matches against an index (cross-entropy's target).
    ColumnIndex,
}

impl Derive {
    pub const KNOWN: &'static str = "row_sqnorm(T), inv_row_sum(T), one_hot(), column_index()";

    pub fn parse(text: &str) -> Result<Derive, DeriveError> {
        let t = text.trim();
        let text = || t.to_string();
        let (f, rest) = t.split_once('(').ok_or_else(|| DeriveError::NoCall { text: text() })?;
        let arg = rest.strip_suffix(')').ok_or_else(|| DeriveError::Unclosed { text: text() })?.trim();
        let f = f.trim();
        if f == "one_hot" {
            return if arg.is_empty() { Ok(Derive::OneHot) } else { Err(DeriveError::OneHotArgument { text: text() }) };
        }
        if f == "column_index" {
            return if arg.is_empty() { Ok(Derive::ColumnIndex) } else { Err(DeriveError::ColumnIndexArgument { text: text() }) };
        }
        if arg.is_empty() || !arg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(DeriveError::BadArgument { text: text() });
        }
        match f {
            "row_sqnorm" => Ok(Derive::RowSqnorm { of: arg.to_string() }),
            "inv_row_sum" => Ok(Derive::InvRowSum { of: arg.to_string() }),
            other => Err(DeriveError::UnknownFunction { text: text(), function: other.to_string(), known: Derive::KNOWN }),
        }
    }

    /// The tensor the recipe reads (`None` for a source-free recipe such as `one_hot()`).
    pub fn source(&self) -> Option<&str> {
        match self {
            Derive::RowSqnorm { of } | Derive::InvRowSum { of } => Some(of),
            Derive::OneHot | Derive::ColumnIndex => None,
        }
    }
}

impl std::fmt::Display for Derive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Derive::RowSqnorm { of } => write!(f, "row_sqnorm({of})"),
            Derive::InvRowSum { of } => write!(f, "inv_row_sum({of})"),
            Derive::OneHot => f.write_str("one_hot()"),
            Derive::ColumnIndex => f.write_str("column_index()"),
        }
    }
}

/// A workload spec that failed to load or does not fit the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadError(pub String);

impl std::fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WorkloadError {}

fn err(msg: impl Into<String>) -> WorkloadError {
    WorkloadError(msg.into())
}

/// `examples/x.cake` → `examples/x.workload.toml`.
pub fn default_path(program: &Path) -> PathBuf {
    let stem = program.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    program.with_file_name(format!("{stem}.workload.toml"))
}

impl WorkloadSpec {
    pub fn from_toml_str(file: &str, text: &str) -> Result<WorkloadSpec, WorkloadError> {
        toml::from_str(text).map_err(|e| err(format!("{file}: {}", e.to_string().trim_end())))
    }

    pub fn load(path: &Path) -> Result<WorkloadSpec, WorkloadError> {
        let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read {}: {e}", path.display())))?;
        WorkloadSpec::from_toml_str(&path.display().to_string(), &text)
    }

    /// The tolerance of the check, the spec's own over the oracle's default for an output of
    /// dtype `output`.
    pub fn tolerance(&self, output: Option<DType>) -> Tolerance {
        let d = self.oracle.default_tolerance(output);
        let t = self.tolerance.unwrap_or_default();
        Tolerance {
            rtol: t.rtol.unwrap_or(d.rtol),
            atol: t.atol.unwrap_or(d.atol),
            samples: t.samples.unwrap_or(d.samples),
        }
    }

    /// Oracle role → tensor (or, for a scalar role, scalar) name, with defaults filled in.
    pub fn role(&self, role: &str) -> String {
        self.args.get(role).cloned().unwrap_or_else(|| {
            self.oracle
                .roles()
                .iter()
                .chain(self.oracle.scalar_roles())
                .find(|(r, _)| *r == role)
                .map_or_else(String::new, |(_, t)| t.to_string())
        })
    }

    pub fn derived(&self) -> Result<BTreeMap<String, Derive>, WorkloadError> {
        self.derive
            .iter()
            .map(|(k, v)| Derive::parse(v).map(|d| (k.clone(), d)).map_err(|e| err(format!("derive.{k}: {e}"))))
            .collect()
    }

    /// The derived inputs in the order they are computed: each after the derived input it reads
    /// (a topological order; among the ready ones, name order, so derived inputs whose sources
    /// are all filled inputs come in name order as they always did). A cycle (`A` from `B`, `B`
    /// from `A`, or `A` from itself) is an error coded `[derive_cycle]`.
    pub fn derive_order(&self) -> Result<Vec<(String, Derive)>, WorkloadError> {
        let mut pending = self.derived()?;
        let mut order: Vec<(String, Derive)> = Vec::with_capacity(pending.len());
        while !pending.is_empty() {
            // Ready: the source is not derived, or was computed already.
            let ready: Vec<String> = pending
                .iter()
                .filter(|(_, d)| d.source().is_none_or(|s| !pending.contains_key(s)))
                .map(|(n, _)| n.clone())
                .collect();
            if ready.is_empty() {
                // Every pending recipe reads a pending one: follow sources from the first to a
                // repeat to name one cycle.
                let mut path: Vec<String> = vec![pending.keys().next().expect("not empty").clone()];
                loop {
                    let next = pending[path.last().expect("not empty")].source().expect("pending has a source").to_string();
                    if let Some(at) = path.iter().position(|p| *p == next) {
                        let mut cycle: Vec<String> = path[at..].iter().map(|p| format!("`{p}`")).collect();
                        cycle.push(format!("`{next}`"));
                        return Err(err(format!(
                            "derive: {} is a cycle: every derived input must come from the seed or from inputs computed before it [derive_cycle]",
                            cycle.join(" ← ")
                        )));
                    }
                    path.push(next);
                }
            }
            for name in ready {
                let d = pending.remove(&name).expect("listed above");
                order.push((name, d));
            }
        }
        Ok(order)
    }

    /// Check the spec against the program: kernel name, oracle roles (tensor exists, dtype and
    /// rank fit, inputs are filled and outputs written; scalar roles name a float scalar with a
    /// value), the oracle's options, inputs and derived inputs, scalars, shapes (and, for the
    /// oracles that relate shapes — `copy`, `transpose` and the row kernels' — that the role
    /// tensors' shapes fit at each of them).
    pub fn validate(&self, m: &Module) -> Result<(), WorkloadError> {
        if let Some(k) = &self.kernel {
            if *k != m.name {
                return Err(err(format!("the workload is for kernel `{k}`, the program is `{}`", m.name)));
            }
        }
        let tensor = |name: &str| m.tensors.iter().map(|(_, t)| t).find(|t| t.name == name);
        for role in self.args.keys() {
            let mut all_roles = self.oracle.roles().iter().chain(self.oracle.scalar_roles());
            if !all_roles.any(|(r, _)| r == role) {
                let known: Vec<&str> =
                    self.oracle.roles().iter().chain(self.oracle.scalar_roles()).map(|(r, _)| *r).collect();
                return Err(err(format!(
                    "args.{role}: oracle `{}` has no role `{role}` (roles: {})",
                    self.oracle.name(),
                    known.join(", ")
                )));
            }
        }
        // Role checks: (role, lowest and highest rank, dtypes allowed, is the output).
        let wants: &[(&str, (usize, usize), &[DType], bool)] = match self.oracle {
            OracleName::MatmulAbt => &[("a", (2, 3), GEMM_IN, false), ("b", (2, 3), GEMM_IN, false), ("c", (2, 3), GEMM_OUT, true)],
            OracleName::GroupedMatmulAbt => {
                &[("a", (2, 2), GEMM_IN, false), ("b", (3, 3), GEMM_IN, false), ("c", (2, 2), GEMM_OUT, true)]
            }
            OracleName::Attention => &[
                ("q", (3, 3), ATTENTION_FLOATS, false),
                ("k", (3, 3), ATTENTION_FLOATS, false),
                ("vt", (3, 3), ATTENTION_FLOATS, false),
                ("o", (3, 3), ATTENTION_FLOATS, true),
            ],
            OracleName::KmeansAssign => &[
                ("x", (3, 3), &[DType::BF16, DType::F16, DType::F32], false),
                ("c", (3, 3), &[DType::BF16, DType::F16, DType::F32], false),
                ("idx", (2, 2), INDEX_OUT, true),
            ],
            OracleName::KnnTileMin => &[
                ("q", (3, 3), &[DType::BF16, DType::F16, DType::F32], false),
                ("qn", (2, 2), &[DType::F32], false),
                ("c", (3, 3), &[DType::BF16, DType::F16, DType::F32], false),
                ("cn", (2, 2), &[DType::F32], false),
                ("dist", (3, 3), &[DType::F32], true),
                ("idx", (3, 3), INDEX_OUT, true),
            ],
            OracleName::KmeansUpdate => &[
                ("xt", (3, 3), KMEANS_UPDATE_IN, false),
                ("oh", (3, 3), KMEANS_UPDATE_IN, false),
                ("icnt", (2, 2), &[DType::F32], false),
                ("ct", (3, 3), &[DType::F32], true),
            ],
            OracleName::CrossEntropy => &[
                ("x", (2, 2), ROW_FLOATS, false),
                ("target", (1, 1), &[DType::I32], false),
                ("col", (1, 1), &[DType::I32], false),
                ("loss", (1, 1), &[DType::F32], true),
            ],
            OracleName::RmsnormBwd | OracleName::LayernormBwd => &[
                ("x", (2, 2), ROW_FLOATS, false),
                ("dy", (2, 2), ROW_FLOATS, false),
                ("w", (1, 1), ROW_FLOATS, false),
                ("dx", (2, 2), ROW_FLOATS, true),
            ],
            OracleName::SoftmaxBwd => &[
                ("y", (2, 2), ROW_FLOATS, false),
                ("dy", (2, 2), ROW_FLOATS, false),
                ("dx", (2, 2), ROW_FLOATS, true),
            ],
            OracleName::CrossEntropyBwd => &[
                ("x", (2, 2), ROW_FLOATS, false),
                ("target", (1, 1), &[DType::I32], false),
                ("col", (1, 1), &[DType::I32], false),
                ("dx", (2, 2), ROW_FLOATS, true),
            ],
            OracleName::Topk => &[
                ("x", (2, 2), ROW_FLOATS, false),
                ("col", (1, 1), &[DType::I32], false),
                ("vals", (2, 2), ROW_FLOATS, true),
                ("idx", (2, 2), &[DType::I32], true),
            ],
            OracleName::Gemv => &[
                ("w", (2, 2), ROW_FLOATS, false),
                ("x", (1, 1), ROW_FLOATS, false),
                ("y", (1, 1), ROW_FLOATS, true),
            ],
            OracleName::Embedding => &[
                ("ids", (1, 1), &[DType::I32], false),
                ("e", (2, 2), ROW_FLOATS, false),
                ("out", (2, 2), ROW_FLOATS, true),
            ],
            OracleName::KmeansScatter => &[
                ("x", (2, 2), ROW_FLOATS, false),
                ("assign", (1, 1), &[DType::I32], false),
                ("sums", (2, 2), &[DType::F32], true),
                ("counts", (1, 2), &[DType::I32], true),
            ],
            OracleName::Copy => &[("input", (1, 5), POISON_IS_NAN, false), ("output", (1, 5), POISON_IS_NAN, true)],
            OracleName::Transpose => &[("input", (2, 2), POISON_IS_NAN, false), ("output", (2, 2), POISON_IS_NAN, true)],
            OracleName::Softmax => &[("x", (2, 2), ROW_FLOATS, false), ("y", (2, 2), ROW_FLOATS, true)],
            OracleName::RowReduce => &[("x", (2, 2), ROW_FLOATS, false), ("out", (1, 1), ROW_FLOATS, true)],
            OracleName::Rmsnorm => &[
                ("x", (2, 2), ROW_FLOATS, false),
                ("w", (1, 1), ROW_FLOATS, false),
                ("y", (2, 2), ROW_FLOATS, true),
            ],
            OracleName::Layernorm => &[
                ("x", (2, 2), ROW_FLOATS, false),
                ("w", (1, 1), ROW_FLOATS, false),
                ("b", (1, 1), ROW_FLOATS, false),
                ("y", (2, 2), ROW_FLOATS, true),
            ],
            OracleName::Elementwise => &[
                ("x", (2, 2), ROW_FLOATS, false),
                ("y", (2, 2), ROW_FLOATS, false),
                ("w", (1, 1), &[DType::F32], false),
                ("z", (2, 2), ROW_FLOATS, true),
            ],
            OracleName::Rotary => &[
                ("x", (2, 2), ROW_FLOATS, false),
                ("cos", (2, 2), ROW_FLOATS, false),
                ("sin", (2, 2), ROW_FLOATS, false),
                ("y", (2, 2), ROW_FLOATS, true),
            ],
            OracleName::Fp8QuantRow => &[
                ("x", (2, 2), ROW_FLOATS, false),
                ("q", (2, 2), &[DType::F8E4M3, DType::F8E5M2], true),
                ("s", (1, 1), &[DType::F32], true),
            ],
            OracleName::Fp8QuantBlock => &[
                ("x", (2, 2), ROW_FLOATS, false),
                ("q", (2, 2), &[DType::F8E4M3, DType::F8E5M2], true),
                ("s", (2, 2), &[DType::F32], true),
            ],
            OracleName::None => &[],
        };
        for &(role, (lo, hi), dtypes, output) in wants {
            let name = self.role(role);
            let t = tensor(&name).ok_or_else(|| {
                err(format!(
                    "oracle `{}` role `{role}` names tensor `{name}`, which the program does not declare",
                    self.oracle.name()
                ))
            })?;
            if !(lo..=hi).contains(&t.shape.len()) {
                let expected = if lo == hi { format!("{lo}") } else { format!("{lo} to {hi}") };
                return Err(err(format!(
                    "oracle role `{role}`: tensor `{name}` has rank {}, expected {expected}",
                    t.shape.len()
                )));
            }
            if !dtypes.contains(&t.dtype) {
                let why = if self.oracle.is_exact() && t.dtype.is_int() {
                    " (its output poison, -1, is a value the generator draws, so an unwritten element could pass)"
                } else {
                    ""
                };
                let allowed: Vec<&str> = dtypes.iter().map(|d| d.name()).collect();
                return Err(err(format!(
                    "W001: oracle role `{role}`: tensor `{name}` is {}, which the oracle does not support{why}; declare it as one of {} or pick an oracle for {} (`cake explain W001`)",
                    t.dtype,
                    allowed.join(", "),
                    t.dtype
                )));
            }
            if output && t.access == Access::In {
                return Err(err(format!(
                    "oracle role `{role}`: tensor `{name}` is declared `in`, but the oracle reads it as the output"
                )));
            }
            if !output && t.access == Access::Out {
                return Err(err(format!(
                    "oracle role `{role}`: tensor `{name}` is declared `out`, but the oracle reads it as an input (only `in`/`inout` tensors are filled)"
                )));
            }
        }
        if let Some(out_role) = self.oracle.output_role() {
            let out = self.role(out_role);
            for (role, _) in self.oracle.roles().iter().filter(|(r, _)| *r != out_role) {
                if self.role(role) == out {
                    return Err(err(format!(
                        "oracle `{}`: roles `{role}` and `{out_role}` both name tensor `{out}`; the output must be a tensor of its own",
                        self.oracle.name()
                    )));
                }
            }
        }
        if self.oracle.distinct_roles() {
            let roles = self.oracle.roles();
            for (i, (r1, _)) in roles.iter().enumerate() {
                for (r2, _) in &roles[i + 1..] {
                    let (t1, t2) = (self.role(r1), self.role(r2));
                    if t1 == t2 {
                        return Err(err(format!(
                            "oracle `{}`: roles `{r1}` and `{r2}` both name tensor `{t1}`; each role needs a tensor of its own",
                            self.oracle.name()
                        )));
                    }
                }
            }
        }
        if self.oracle == OracleName::MatmulAbt {
            let ranks: Vec<(String, usize)> = ["a", "b", "c"]
                .iter()
                .map(|r| (self.role(r), tensor(&self.role(r)).map_or(0, |t| t.shape.len())))
                .collect();
            if ranks.iter().any(|(_, n)| *n != ranks[0].1) {
                let list: Vec<String> = ranks.iter().map(|(t, n)| format!("`{t}` rank {n}")).collect();
                return Err(err(format!(
                    "oracle `matmul_abt`: A, B and C share one rank (2, or 3 with a leading batch dim); here {}",
                    list.join(", ")
                )));
            }
        }
        if self.oracle == OracleName::Elementwise {
            // x and y are distinct operands of the graph: one tensor in both roles would test a
            // kernel that reads one input twice.
            let (x, y) = (self.role("x"), self.role("y"));
            if x == y {
                return Err(err(format!(
                    "oracle `elementwise`: roles `x` and `y` both name tensor `{x}`; each role needs a tensor of its own"
                )));
            }
        }
        if self.oracle.is_exact() {
            let (input, output) = (self.role("input"), self.role("output"));
            let (a, b) = (tensor(&input).expect("checked above"), tensor(&output).expect("checked above"));
            if a.dtype != b.dtype {
                return Err(err(format!(
                    "oracle `{}`: input `{input}` is {} but output `{output}` is {}; moving data keeps the dtype",
                    self.oracle.name(),
                    a.dtype,
                    b.dtype
                )));
            }
            if a.shape.len() != b.shape.len() {
                return Err(err(format!(
                    "oracle `{}`: input `{input}` has rank {} but output `{output}` rank {}",
                    self.oracle.name(),
                    a.shape.len(),
                    b.shape.len()
                )));
            }
            if self.tolerance.is_some() {
                return Err(err(format!(
                    "tolerance: oracle `{}` compares every element exactly; a tolerance does not apply",
                    self.oracle.name()
                )));
            }
        }
        if let (true, Some(out_role)) = (self.oracle.checks_every_element(), self.oracle.output_role()) {
            let output = self.role(out_role);
            if self.inputs.contains_key(&output) || self.derive.contains_key(&output) {
                return Err(err(format!(
                    "oracle `{}`: output `{output}` is poisoned before the launch, so [inputs] and [derive] cannot fill it",
                    self.oracle.name()
                )));
            }
        }
        self.validate_row_kernel(m)?;
        self.validate_scalar_roles(m)?;
        self.validate_derived_roles()?;
        if self.oracle == OracleName::KmeansScatter {
            // The oracle adds onto the initial SUMS and COUNTS: both are filled, so both `inout`.
            for role in ["sums", "counts"] {
                let name = self.role(role);
                if tensor(&name).is_some_and(|t| t.access != Access::InOut) {
                    return Err(err(format!(
                        "oracle `kmeans_scatter` role `{role}`: tensor `{name}` must be `inout`: the kernel adds into it, and the oracle checks the sum onto its initial values"
                    )));
                }
            }
        }
        if self.oracle == OracleName::Embedding {
            // Out's rows are copies of E's: one dtype, or the exact comparison means nothing.
            let (e, out) = (self.role("e"), self.role("out"));
            let (te, to) = (tensor(&e).expect("checked above"), tensor(&out).expect("checked above"));
            if te.dtype != to.dtype {
                return Err(err(format!(
                    "oracle `embedding`: table `{e}` is {} but output `{out}` is {}; a gathered row keeps its dtype",
                    te.dtype, to.dtype
                )));
            }
        }
        if self.oracle == OracleName::Attention {
            let dtypes: Vec<(String, DType)> = ["q", "k", "vt", "o"]
                .iter()
                .filter_map(|r| tensor(&self.role(r)).map(|t| (self.role(r), t.dtype)))
                .collect();
            if dtypes.iter().any(|(_, d)| *d != dtypes[0].1) {
                let list: Vec<String> = dtypes.iter().map(|(t, d)| format!("`{t}` {d}")).collect();
                return Err(err(format!("oracle `attention`: Q, K, VT and O share one dtype; here {}", list.join(", "))));
            }
        }
        for name in self.inputs.keys() {
            let t =
                tensor(name).ok_or_else(|| err(format!("inputs.{name}: the program declares no tensor `{name}`")))?;
            if t.access == Access::Out {
                return Err(err(format!(
                    "inputs.{name}: tensor `{name}` is `out`; only `in`/`inout` tensors are filled"
                )));
            }
            let spec = &self.inputs[name];
            for (key, v) in [("scale", spec.scale), ("offset", spec.offset)] {
                if v.is_some_and(|v| !v.is_finite()) {
                    return Err(err(format!("inputs.{name}.{key}: must be a finite number")));
                }
            }
        }
        for (name, d) in self.derived()? {
            let t =
                tensor(&name).ok_or_else(|| err(format!("derive.{name}: the program declares no tensor `{name}`")))?;
            if t.access == Access::Out {
                return Err(err(format!("derive.{name}: tensor `{name}` is `out`")));
            }
            if self.inputs.contains_key(&name) {
                return Err(err(format!("`{name}` is both in [inputs] and in [derive]")));
            }
            let Some(of) = d.source() else {
                if d == Derive::ColumnIndex {
                    continue;
                }
                // one_hot(): a 1 over the second-to-last axis per column.
                if t.shape.len() < 2 {
                    return Err(err(format!(
                        "derive.{name}: one_hot() puts one 1 per column over the second-to-last axis, so `{name}` needs rank 2 or more (it has rank {})",
                        t.shape.len()
                    )));
                }
                continue;
            };
            let src = tensor(of).ok_or_else(|| err(format!("derive.{name}: no tensor `{of}`")))?;
            if src.access == Access::Out {
                return Err(err(format!("derive.{name}: `{of}` is `out`; a derived input reads a filled or derived input")));
            }
            if src.shape.len() != t.shape.len() + 1 || src.shape[..t.shape.len()] != t.shape[..] {
                return Err(err(format!(
                    "derive.{name}: {d} drops the innermost axis, so `{name}` must have the shape of `{of}` without its last dimension"
                )));
            }
            if matches!(d, Derive::InvRowSum { .. }) && !t.dtype.is_float() {
                return Err(err(format!("derive.{name}: {d} is a reciprocal; `{name}` is {}, it needs a float dtype", t.dtype)));
            }
        }
        self.derive_order()?;
        for (_, s) in m.scalars.iter() {
            if !self.scalars.contains_key(&s.name) {
                return Err(err(format!("scalars: no value for the program's scalar `{}`", s.name)));
            }
        }
        if self.shapes.is_empty() {
            return Err(err("shapes: at least one shape is needed"));
        }
        check_shape(m, &self.headline).map_err(|e| err(format!("headline: {e}")))?;
        self.check_oracle_shapes(m, &self.headline).map_err(|e| err(format!("headline: {e}")))?;
        for (i, s) in self.shapes.iter().enumerate() {
            check_shape(m, s).map_err(|e| err(format!("shapes[{i}]: {e}")))?;
            self.check_oracle_shapes(m, s).map_err(|e| err(format!("shapes[{i}]: {e}")))?;
        }
        if let Some(f) = &self.flops {
            eval_expr(f, &self.headline).map_err(|e| err(format!("flops: {e}")))?;
        }
        if let Some(b) = &self.baseline {
            Baseline::parse(b).ok_or_else(|| err(format!("baseline: `{b}` is not `cublas` or `none`")))?;
        }
        Ok(())
    }

    /// The row kernels' own checks, after the role checks: `reduce` is given exactly for
    /// `row_reduce`, `expr` exactly for `elementwise` (and parses), `mask` only for `attention`; a full check samples nothing; softmax keeps X's dtype; `eps` names a float
    /// scalar of the program with a finite, non-negative value.
    fn validate_row_kernel(&self, m: &Module) -> Result<(), WorkloadError> {
        let o = self.oracle.name();
        match (self.oracle, self.reduce) {
            (OracleName::RowReduce, None) => {
                let kinds: Vec<&str> = RowReduce::ALL.iter().map(|r| r.name()).collect();
                return Err(err(format!("reduce: oracle `row_reduce` needs `reduce = \"KIND\"` ({})", kinds.join(", "))));
            }
            (OracleName::RowReduce, Some(_)) | (_, None) => {}
            (_, Some(r)) => {
                return Err(err(format!(
                    "reduce = \"{}\": only oracle `row_reduce` takes `reduce`; this workload's oracle is `{o}`",
                    r.name()
                )))
            }
        }
        if self.mask == Some(KeyMask::SlidingWindow(0)) {
            return Err(err("mask = { sliding_window = 0 }: a query must see at least itself; give the window in keys, 1 or more".to_string()));
        }
        if let (Some(mk), false) = (self.mask, self.oracle == OracleName::Attention) {
            return Err(err(format!("mask ({}): only oracle `attention` takes `mask`; this workload's oracle is `{o}`", mk.name())));
        }
        match (self.oracle, &self.expr) {
            (OracleName::Elementwise, None) => {
                return Err(err(
                    "expr: oracle `elementwise` needs `expr = \"...\"`, Z as a function of x, y and w (e.g. \"fma(w, x, y)\")",
                ));
            }
            (OracleName::Elementwise, Some(_)) | (_, None) => {}
            (_, Some(e)) => {
                return Err(err(format!(
                    "expr = \"{e}\": only oracle `elementwise` takes `expr`; this workload's oracle is `{o}`"
                )))
            }
        }
        if let Some(e) = &self.expr {
            self.element_expr().map_err(|m| err(format!("expr = \"{e}\": {m}")))?;
        }
        if !self.oracle.is_row_kernel() {
            return Ok(());
        }
        if self.tolerance.is_some_and(|t| t.samples.is_some()) {
            return Err(err(format!("tolerance.samples: oracle `{o}` compares every element; nothing is sampled")));
        }
        let tensor = |name: &str| m.tensors.iter().map(|(_, t)| t).find(|t| t.name == name);
        if self.oracle == OracleName::Softmax {
            let (x, y) = (self.role("x"), self.role("y"));
            if let (Some(xt), Some(yt)) = (tensor(&x), tensor(&y)) {
                if xt.dtype != yt.dtype {
                    return Err(err(format!(
                        "oracle `softmax`: input `{x}` is {} but output `{y}` is {}; the softmax keeps the dtype",
                        xt.dtype, yt.dtype
                    )));
                }
            }
        }
        Ok(())
    }

    /// Roles whose tensor an oracle needs derived by a given recipe: `knn_tile_min`'s `qn` and `cn`
    /// are the squared norms of `q`'s and `c`'s rows (its distances and tolerance mean ‖q − c‖²).
    fn validate_derived_roles(&self) -> Result<(), WorkloadError> {
        // (role, its recipe, what the oracle takes it for).
        let needs: Vec<(&str, Derive, String)> = match self.oracle {
            OracleName::KnnTileMin => ["q", "c"]
                .iter()
                .zip(["qn", "cn"])
                .map(|(of, role)| {
                    let src = self.role(of);
                    (role, Derive::RowSqnorm { of: src.clone() }, format!("the squared norms of `{src}`'s rows"))
                })
                .collect(),
            OracleName::KmeansUpdate => vec![
                ("oh", Derive::OneHot, "the assignment, exactly one 1 per point (column)".to_string()),
                (
                    "icnt",
                    Derive::InvRowSum { of: self.role("oh") },
                    format!("1/count of each cluster of `{}` (0 when empty)", self.role("oh")),
                ),
            ],
            OracleName::CrossEntropy | OracleName::CrossEntropyBwd => vec![(
                "col",
                Derive::ColumnIndex,
                "the column numbers 0..V−1 the kernel matches the targets against".to_string(),
            )],
            OracleName::Topk => vec![(
                "col",
                Derive::ColumnIndex,
                "the column numbers 0..E−1 the kernel orders equal values and reports indices by".to_string(),
            )],
            _ => Vec::new(),
        };
        let derived = self.derived()?;
        for (role, want, meaning) in needs {
            let name = self.role(role);
            if derived.get(&name) != Some(&want) {
                return Err(err(format!(
                    "oracle `{}` role `{role}`: `{name}` must be derived as {want} (`[derive] {name} = \"{want}\"`): the oracle reads it as {meaning}",
                    self.oracle.name()
                )));
            }
        }
        Ok(())
    }

    /// The oracle's scalar roles (`eps`, `scale`): each names a float `scalar` of the program
    /// with a value in `[scalars]` that the oracle can use (`eps`: finite and ≥ 0; `scale`:
    /// finite and not 0, or every softmax row would be uniform and Q unchecked).
    fn validate_scalar_roles(&self, m: &Module) -> Result<(), WorkloadError> {
        let o = self.oracle.name();
        for &(role, _) in self.oracle.scalar_roles() {
            let name = self.role(role);
            let s = m.scalars.iter().map(|(_, s)| s).find(|s| s.name == name).ok_or_else(|| {
                err(format!(
                    "oracle `{o}` role `{role}` names scalar `{name}`, which the program does not declare (e.g. `scalar {name}: f32`)"
                ))
            })?;
            if !s.dtype.is_float() {
                return Err(err(format!("oracle role `{role}`: scalar `{name}` is {}; the oracle needs a float", s.dtype)));
            }
            let v = self
                .scalars
                .get(&name)
                .ok_or_else(|| err(format!("scalars: no value for `{name}` (oracle `{o}` role `{role}`)")))?;
            if role == "scale" {
                if !v.is_finite() || *v == 0.0 {
                    return Err(err(format!(
                        "scalars.{name} = {v}: oracle `{o}` role `{role}` needs a finite value other than 0 (0 makes every softmax row uniform)"
                    )));
                }
            } else if !v.is_finite() || *v < 0.0 {
                return Err(err(format!("scalars.{name} = {v}: oracle `{o}` role `{role}` needs a finite value ≥ 0")));
            }
        }
        Ok(())
    }

    /// The shapes an oracle relates, at one shape that [`check_shape`] accepted: `copy`: the
    /// output has the input's shape; `transpose`: A[R, C] and B[C, R]; `softmax`, `rmsnorm`,
    /// `layernorm`: Y has X's shape [R, C] and W, B are [C]; `row_reduce`: Out is [R];
    /// `elementwise`: Y and Z have X's shape [R, C] and W is [C].
    fn check_oracle_shapes(&self, m: &Module, shape: &Shape) -> Result<(), ShapeError> {
        if matches!(
            self.oracle,
            OracleName::MatmulAbt
                | OracleName::GroupedMatmulAbt
                | OracleName::Attention
                | OracleName::KnnTileMin
                | OracleName::KmeansUpdate
        ) {
            return self.check_product_shapes(m, shape);
        }
        let (from, relations): (&str, &[&str]) = match self.oracle {
            OracleName::Copy | OracleName::Transpose => ("input", &["output"]),
            OracleName::Softmax => ("x", &["y"]),
            OracleName::RowReduce => ("x", &["out"]),
            OracleName::Rmsnorm => ("x", &["w", "y"]),
            OracleName::Layernorm => ("x", &["w", "b", "y"]),
            OracleName::Elementwise => ("x", &["y", "w", "z"]),
            OracleName::Rotary => ("x", &["y"]),
            OracleName::Fp8QuantRow | OracleName::Fp8QuantBlock => ("x", &["q", "s"]),
            OracleName::RmsnormBwd | OracleName::LayernormBwd => ("x", &["dy", "w", "dx"]),
            OracleName::SoftmaxBwd => ("y", &["dy", "dx"]),
            OracleName::CrossEntropy => ("x", &["target", "col", "loss"]),
            OracleName::CrossEntropyBwd => ("x", &["target", "col", "dx"]),
            OracleName::Topk => ("x", &["col"]),
            OracleName::Gemv => ("w", &["x", "y"]),
            OracleName::Embedding => ("out", &["ids"]),
            OracleName::KmeansScatter => ("x", &["assign"]),
            _ => return Ok(()),
        };
        let dims: Vec<i64> = m.dims.iter().map(|(_, d)| shape.get(&d.name).copied().unwrap_or(0)).collect();
        let concrete = |name: &str| -> Result<Vec<i64>, ShapeError> {
            let t = m.tensors.iter().map(|(_, t)| t).find(|t| t.name == name).ok_or_else(|| ShapeError::NoTensor { tensor: name.to_string() })?;
            t.shape.iter().map(|s| s.eval(&dims).ok_or_else(|| ShapeError::Overflow { tensor: name.to_string() })).collect()
        };
        // "input `A`" for the data movers, "`X` (role `x`)" for the others.
        let label = |role: &str, name: &str| {
            if self.oracle.is_exact() {
                format!("{role} `{name}`")
            } else {
                format!("`{name}` (role `{role}`)")
            }
        };
        let input = self.role(from);
        let a = concrete(&input)?;
        for &role in relations {
            let name = self.role(role);
            let b = concrete(&name)?;
            let want: Vec<i64> = match (self.oracle, role) {
                (OracleName::Transpose, _) => a.iter().rev().copied().collect(),
                // fp8_quant_block: S is [R, C / G] for a group size G that divides C (the
                // kernel's S fixes G); expected [R, C / 128] when it has no such shape.
                (OracleName::Fp8QuantBlock, "s") => match (&a[..], &b[..]) {
                    ([r, c], [_, g]) if *g > 0 && c % g == 0 => vec![*r, *g],
                    ([r, c], _) => vec![*r, c / 128],
                    _ => a.clone(),
                },
                // gemv: X is a row of W ([K]), Y a column ([N]).
                (OracleName::Gemv, "x") => a.get(1..).map(<[i64]>::to_vec).unwrap_or_default(),
                (OracleName::Gemv, _) => a.get(..1).map(<[i64]>::to_vec).unwrap_or_default(),
                // embedding: Ids is one id per row of Out ([R]).
                (OracleName::Embedding, "ids") => a.get(..1).map(<[i64]>::to_vec).unwrap_or_default(),
                // kmeans_scatter: A is one cluster id per point of X ([N]).
                (OracleName::KmeansScatter, "assign") => a.get(..1).map(<[i64]>::to_vec).unwrap_or_default(),
                (_, "w" | "b" | "col") => a.get(1..).map(<[i64]>::to_vec).unwrap_or_default(),
                (OracleName::RowReduce | OracleName::CrossEntropy, _)
                | (OracleName::Fp8QuantRow, "s")
                | (OracleName::CrossEntropyBwd, "target") => {
                    a.get(..1).map(<[i64]>::to_vec).unwrap_or_default()
                }
                _ => a.clone(),
            };
            if b != want {
                return Err(ShapeError::Relation {
                    oracle: self.oracle.name(),
                    from: label(from, &input),
                    from_shape: a,
                    to: label(role, &name),
                    want: format!("{want:?}"),
                    got: b,
                });
            }
        }
        if self.oracle == OracleName::KmeansScatter {
            // SUMS is [K, D] with K ≥ 1 rows of X's width D; COUNTS is [K] or [K, 1].
            let (sums, counts) = (self.role("sums"), self.role("counts"));
            let (bs, bc) = (concrete(&sums)?, concrete(&counts)?);
            let k = bs.first().copied().unwrap_or(0);
            if !(bs.len() == 2 && k >= 1 && a.get(1) == Some(&bs[1])) {
                return Err(ShapeError::Relation {
                    oracle: self.oracle.name(),
                    from: label(from, &input),
                    from_shape: a.clone(),
                    to: label("sums", &sums),
                    want: format!("[K, {}] with K ≥ 1", a.get(1).copied().unwrap_or(0)),
                    got: bs,
                });
            }
            if !(bc == [k] || bc == [k, 1]) {
                return Err(ShapeError::Relation {
                    oracle: self.oracle.name(),
                    from: label("sums", &sums),
                    from_shape: bs,
                    to: label("counts", &counts),
                    want: format!("[{k}] or [{k}, 1]"),
                    got: bc,
                });
            }
        }
        if self.oracle == OracleName::Embedding {
            // E is [V, H] with V ≥ 1 rows of Out's width H.
            let name = self.role("e");
            let b = concrete(&name)?;
            let fits = b.len() == 2 && b[0] >= 1 && a.get(1) == Some(&b[1]);
            if !fits {
                return Err(ShapeError::Relation {
                    oracle: self.oracle.name(),
                    from: label(from, &input),
                    from_shape: a.clone(),
                    to: label("e", &name),
                    want: format!("[V, {}] with V ≥ 1", a.get(1).copied().unwrap_or(0)),
                    got: b,
                });
            }
        }
        if self.oracle == OracleName::Topk {
            // Vals and Idx are [R, K]: K of the E columns of each of X's rows.
            for role in ["vals", "idx"] {
                let name = self.role(role);
                let b = concrete(&name)?;
                let fits = b.len() == 2 && b[0] == a[0] && b[1] >= 1 && a.get(1).is_some_and(|&e| b[1] <= e);
                if !fits {
                    return Err(ShapeError::Relation {
                        oracle: self.oracle.name(),
                        from: label(from, &input),
                        from_shape: a.clone(),
                        to: label(role, &name),
                        want: format!("[{}, K] with 1 ≤ K ≤ {}", a[0], a.get(1).copied().unwrap_or(0)),
                        got: b,
                    });
                }
            }
            let (vals, idx) = (concrete(&self.role("vals"))?, concrete(&self.role("idx"))?);
            if vals != idx {
                return Err(ShapeError::Relation {
                    oracle: self.oracle.name(),
                    from: label("vals", &self.role("vals")),
                    from_shape: vals.clone(),
                    to: label("idx", &self.role("idx")),
                    want: format!("{vals:?}"),
                    got: idx,
                });
            }
        }
        if self.oracle == OracleName::Rotary {
            // COS and SIN are [T, D/2]: one angle per token and pair, D the head_dim, which must
            // split X's row of H·D values into whole heads.
            let (cos, sin) = (self.role("cos"), self.role("sin"));
            let tc = concrete(&cos)?;
            let fits = tc.len() == 2 && tc[0] == a[0] && tc[1] > 0 && a.get(1).is_some_and(|&c| c % (2 * tc[1]) == 0);
            if !fits {
                return Err(ShapeError::Relation {
                    oracle: self.oracle.name(),
                    from: label("x", &input),
                    from_shape: a.clone(),
                    to: label("cos", &cos),
                    want: format!("[{}, D/2] with the head_dim D dividing {}", a[0], a.get(1).copied().unwrap_or(0)),
                    got: tc,
                });
            }
            let ts = concrete(&sin)?;
            if ts != tc {
                return Err(ShapeError::Relation {
                    oracle: self.oracle.name(),
                    from: label("cos", &cos),
                    from_shape: tc.clone(),
                    to: label("sin", &sin),
                    want: format!("{tc:?}"),
                    got: ts,
                });
            }
        }
        Ok(())
    }

    /// The shapes of the product oracles at one shape: `matmul_abt`: A [M, K], B [N, K], C [M, N]
    /// (or all three with one leading batch dim); `grouped_matmul_abt`: A [G·MG, K], B [G, N, K],
    /// C [G·MG, N]; `attention`: Q [BH, SQ, HD], K [BH, SK, HD], VT [BH, HD, SK], O [BH, SQ, HD].
    fn check_product_shapes(&self, m: &Module, shape: &Shape) -> Result<(), ShapeError> {
        let o = self.oracle.name();
        let dims: Vec<i64> = m.dims.iter().map(|(_, d)| shape.get(&d.name).copied().unwrap_or(0)).collect();
        let concrete = |role: &str| -> Result<(String, Vec<i64>), ShapeError> {
            let name = self.role(role);
            let t = m.tensors.iter().map(|(_, t)| t).find(|t| t.name == name).ok_or_else(|| ShapeError::NoTensor { tensor: name.clone() })?;
            let s = t.shape.iter().map(|s| s.eval(&dims).ok_or_else(|| ShapeError::Overflow { tensor: name.clone() })).collect::<Result<_, _>>()?;
            Ok((name, s))
        };
        // `want` with `None` for a free extent (shown as `_`).
        let expect = |from: &str, role: &str, want: &[Option<i64>]| -> Result<Vec<i64>, ShapeError> {
            let (fname, fshape) = concrete(from)?;
            let (name, got) = concrete(role)?;
            let fits = got.len() == want.len() && got.iter().zip(want).all(|(g, w)| w.is_none_or(|w| *g == w));
            if !fits {
                let shown: Vec<String> = want.iter().map(|w| w.map_or_else(|| "_".to_string(), |v| v.to_string())).collect();
                return Err(ShapeError::Relation {
                    oracle: o,
                    from: format!("`{fname}` (role `{from}`)"),
                    from_shape: fshape,
                    to: format!("`{name}` (role `{role}`)"),
                    want: format!("[{}]", shown.join(", ")),
                    got,
                });
            }
            Ok(got)
        };
        match self.oracle {
            OracleName::MatmulAbt => {
                let (_, a) = concrete("a")?;
                let (lead, mk) = a.split_at(a.len().saturating_sub(2));
                let [mm, k] = mk[..] else { return Err(ShapeError::Rank { oracle: o, what: "A", shape: a }) };
                let with = |x: &[Option<i64>]| lead.iter().map(|&v| Some(v)).chain(x.iter().copied()).collect::<Vec<_>>();
                let b = expect("a", "b", &with(&[None, Some(k)]))?;
                let n = b[b.len() - 2];
                expect("b", "c", &with(&[Some(mm), Some(n)]))?;
            }
            OracleName::GroupedMatmulAbt => {
                let (_, a) = concrete("a")?;
                let (bname, b) = concrete("b")?;
                let (rows, k) = (a[0], a[1]);
                expect("a", "b", &[None, None, Some(k)])?;
                let (g, n) = (b[0], b[1]);
                if g <= 0 || rows % g != 0 {
                    let why = format!(
                        "`{bname}` (role `b`) holds G = {g} groups, so the {rows} rows of `{}` (role `a`) must split into {g} equal groups",
                        self.role("a")
                    );
                    return Err(ShapeError::Split { oracle: o, why });
                }
                expect("b", "c", &[Some(rows), Some(n)]).map_err(|e| ShapeError::Because { inner: Box::new(e), why: "C has A's rows and B's N" })?;
            }
            OracleName::Attention => {
                let (_, q) = concrete("q")?;
                let (h, sq, hd) = (q[0], q[1], q[2]);
                let kk = expect("q", "k", &[Some(h), None, Some(hd)])?;
                expect("k", "vt", &[Some(h), Some(hd), Some(kk[1])])?;
                expect("q", "o", &[Some(h), Some(sq), Some(hd)])?;
            }
            OracleName::KnnTileMin => {
                let (_, q) = concrete("q")?;
                let (b, nq, d) = (q[0], q[1], q[2]);
                let c = expect("q", "c", &[Some(b), None, Some(d)])?;
                let k = c[1];
                expect("q", "qn", &[Some(b), Some(nq)])?;
                expect("c", "cn", &[Some(b), Some(k)])?;
                let dist = expect("q", "dist", &[Some(b), Some(nq), None])?;
                let tiles = dist[2];
                if tiles <= 0 || k % tiles != 0 {
                    let why = format!(
                        "`{}` (role `dist`) holds {tiles} tiles per query, which must split the K = {k} vectors of `{}` (role `c`) into equal tiles",
                        self.role("dist"),
                        self.role("c")
                    );
                    return Err(ShapeError::Split { oracle: o, why });
                }
                expect("dist", "idx", &[Some(b), Some(nq), Some(tiles)])?;
            }
            OracleName::KmeansUpdate => {
                let (_, xt) = concrete("xt")?;
                let (b, d, n) = (xt[0], xt[1], xt[2]);
                let oh = expect("xt", "oh", &[Some(b), None, Some(n)])?;
                let k = oh[1];
                expect("oh", "icnt", &[Some(b), Some(k)])?;
                expect("oh", "ct", &[Some(b), Some(d), Some(k)]).map_err(|e| ShapeError::Because { inner: Box::new(e), why: "CT has XT's D and OH's K" })?;
            }
            _ => {}
        }
        Ok(())
    }

    /// The distribution of every filled input (derived ones excluded), with `dist` overriding.
    pub fn input_dists(&self, m: &Module, dist: Option<Dist>) -> BTreeMap<String, (Dist, f64)> {
        m.tensors
            .iter()
            .map(|(_, t)| t)
            .filter(|t| t.access != Access::Out && !self.derive.contains_key(&t.name))
            .filter(|t| {
                let output = self.oracle.output_role().map(|r| self.role(r));
                !(self.oracle.checks_every_element() && Some(&t.name) == output.as_ref())
            })
            .map(|t| {
                let spec = self.inputs.get(&t.name);
                let d = dist.or(spec.map(|s| s.dist)).unwrap_or(Dist::Normal);
                (t.name.clone(), (d, spec.and_then(|s| s.scale).unwrap_or(1.0)))
            })
            .collect()
    }

    /// The `elementwise` oracle's expression, parsed: an error when the spec has no `expr` or it
    /// does not parse.
    pub fn element_expr(&self) -> Result<ElementExpr, ElementExprError> {
        let text = self.expr.as_deref().ok_or(ElementExprError::Missing)?;
        Ok(ElementExpr::parse(text)?)
    }

    pub fn flops_at(&self, shape: &Shape) -> Option<f64> {
        self.flops.as_ref().and_then(|f| eval_expr(f, shape).ok())
    }
}

/// Baselines `cake bench` can time in the same run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Baseline {
    None,
    Cublas,
}

impl Baseline {
    pub fn parse(s: &str) -> Option<Baseline> {
        match s {
            "none" => Some(Baseline::None),
            "cublas" => Some(Baseline::Cublas),
            _ => None,
        }
    }
}

/// A shape must bind every dim of the program (and nothing else) to a positive value that
/// respects its `multiple_of`.
pub fn check_shape(m: &Module, shape: &Shape) -> Result<(), ShapeError> {
    for (_, d) in m.dims.iter() {
        let dim = || d.name.clone();
        let value = *shape.get(&d.name).ok_or_else(|| ShapeError::MissingDim { dim: dim() })?;
        if value <= 0 {
            return Err(ShapeError::NotPositive { dim: dim(), value });
        }
        if value > i64::from(i32::MAX) {
            return Err(ShapeError::TooLarge { dim: dim(), value });
        }
        if let Some(multiple) = d.multiple_of {
            if multiple > 0 && value % multiple != 0 {
                return Err(ShapeError::NotMultiple { dim: dim(), value, multiple });
            }
        }
    }
    for k in shape.keys() {
        if !m.dims.iter().any(|(_, d)| d.name == *k) {
            let known = m.dims.iter().map(|(_, d)| d.name.clone()).collect();
            return Err(ShapeError::UnknownDim { dim: k.clone(), known });
        }
    }
    Ok(())
}

pub use crate::shape::parse as parse_shape;

/// `M=8192,N=8192,K=8192` in dim-name order.
pub fn shape_label(shape: &Shape) -> String {
    shape.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// Evaluate an arithmetic expression over dims: integers, names, `+ - * /`, parentheses.
pub fn eval_expr(text: &str, vars: &Shape) -> Result<f64, DimExprError> {
    #[derive(Debug, Clone, PartialEq)]
    enum Tok {
        Num(f64),
        Name(String),
        Op(char),
    }
    let mut toks = Vec::new();
    let cs: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '.' || cs[i] == '_') {
                i += 1;
            }
            let s: String = cs[start..i].iter().filter(|c| **c != '_').collect();
            toks.push(Tok::Num(s.parse().map_err(|_| DimExprError::BadNumber { text: s.clone() })?));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '_') {
                i += 1;
            }
            toks.push(Tok::Name(cs[start..i].iter().collect()));
        } else if "+-*/()".contains(c) {
            toks.push(Tok::Op(c));
            i += 1;
        } else {
            return Err(DimExprError::UnexpectedChar { found: c, text: text.to_string() });
        }
    }
    struct P<'a> {
        t: Vec<Tok>,
        i: usize,
        vars: &'a Shape,
    }
    impl P<'_> {
        fn peek(&self) -> Option<&Tok> {
            self.t.get(self.i)
        }
        fn sum(&mut self) -> Result<f64, DimExprError> {
            let mut v = self.prod()?;
            while let Some(Tok::Op(c @ ('+' | '-'))) = self.peek().cloned() {
                self.i += 1;
                let r = self.prod()?;
                v = if c == '+' { v + r } else { v - r };
            }
            Ok(v)
        }
        fn prod(&mut self) -> Result<f64, DimExprError> {
            let mut v = self.atom()?;
            while let Some(Tok::Op(c @ ('*' | '/'))) = self.peek().cloned() {
                self.i += 1;
                let r = self.atom()?;
                v = if c == '*' { v * r } else { v / r };
            }
            Ok(v)
        }
        fn atom(&mut self) -> Result<f64, DimExprError> {
            let t = self.peek().cloned();
            self.i += 1;
            match t {
                Some(Tok::Num(n)) => Ok(n),
                Some(Tok::Name(n)) => self.vars.get(&n).map(|v| *v as f64).ok_or(DimExprError::UnknownDim { dim: n }),
                Some(Tok::Op('(')) => {
                    let v = self.sum()?;
                    match self.peek() {
                        Some(Tok::Op(')')) => {
                            self.i += 1;
                            Ok(v)
                        }
                        _ => Err(DimExprError::Unclosed),
                    }
                }
                Some(Tok::Op('-')) => Ok(-self.atom()?),
                other => Err(DimExprError::UnexpectedToken { found: format!("{other:?}") }),
            }
        }
    }
    let mut p = P { t: toks, i: 0, vars };
    let v = p.sum()?;
    if p.i != p.t.len() {
        return Err(DimExprError::Trailing { text: text.to_string() });
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse() {
        let s = parse_shape("M=8192,N=8_192, K=64").unwrap();
        assert_eq!(s["M"], 8192);
        assert_eq!(s["N"], 8192);
        assert_eq!(shape_label(&s), "K=64,M=8192,N=8192");
        assert!(parse_shape("M=1,M=2").is_err());
        assert!(parse_shape("M").is_err());
        assert!(parse_shape("M=x").is_err());
    }

    #[test]
    fn expressions_evaluate() {
        let s = parse_shape("M=2,N=3,K=4").unwrap();
        assert_eq!(eval_expr("2 * M * N * K", &s).unwrap(), 48.0);
        assert_eq!(eval_expr("(M + N) * 2 - K / 2", &s).unwrap(), 8.0);
        assert!(eval_expr("2 * Q", &s).is_err());
        assert!(eval_expr("2 *", &s).is_err());
    }

    #[test]
    fn derive_parses() {
        assert_eq!(Derive::parse("row_sqnorm(C)").unwrap(), Derive::RowSqnorm { of: "C".into() });
        assert!(Derive::parse("colnorm(C)").is_err());
        assert!(Derive::parse("row_sqnorm(C").is_err());
    }
}

#[cfg(test)]
mod validation_tests {
    use super::*;

    const PROGRAM: &str = "kernel k target sm_90a\n\ndim M multiple_of 128\ndim K multiple_of 64\n\nin X: bf16[M, K]\nin XN: f32[M]\nout Y: f32[M]\n\ngrid tiles[m = M / 128]\n\nrole all: warp 0..4\n\non all {\n    for t in tiles {\n    }\n}\n";

    fn module() -> Module {
        let out = crate::check::check_source(PROGRAM);
        out.module.unwrap_or_else(|| panic!("{:?}", out.diagnostics))
    }

    fn spec(extra: &str) -> Result<(), WorkloadError> {
        let text =
            format!("oracle = \"none\"\nheadline = {{ M = 256, K = 64 }}\nshapes = [{{ M = 128, K = 64 }}]\n{extra}");
        WorkloadSpec::from_toml_str("t.toml", &text)?.validate(&module())
    }

    #[test]
    fn a_good_spec_validates() {
        spec(
            "flops = \"2 * M * K\"\n[derive]\nXN = \"row_sqnorm(X)\"\n[inputs]\nX = { dist = \"ties\", scale = 2.0 }\n",
        )
        .unwrap();
    }

    #[test]
    fn misfits_are_named() {
        let e = |extra: &str| spec(extra).unwrap_err().0;
        assert!(e("[inputs]\nQ = { dist = \"normal\" }\n").contains("no tensor `Q`"));
        assert!(e("[inputs]\nY = { dist = \"normal\" }\n").contains("is `out`"));
        assert!(e("[derive]\nX = \"row_sqnorm(XN)\"\n").contains("without its last dimension"));
        assert!(e("[derive]\nXN = \"colnorm(X)\"\n").contains("unknown function"));
        assert!(e("flops = \"2 * Q\"\n").contains("unknown dim `Q`"));
        assert!(e("baseline = \"torch\"\n").contains("not `cublas` or `none`"));
        assert!(e("kernel = \"other\"\n").contains("for kernel `other`"));
        let bad_shape = WorkloadSpec::from_toml_str(
            "t.toml",
            "oracle = \"none\"\nheadline = { M = 100, K = 64 }\nshapes = [{ M = 128, K = 64 }]\n",
        )
        .unwrap()
        .validate(&module())
        .unwrap_err()
        .0;
        assert!(bad_shape.contains("headline: dim `M` = 100 is not a multiple of 128"), "{bad_shape}");
        let unknown =
            WorkloadSpec::from_toml_str("t.toml", "oracle = \"none\"\nheadline = {}\nshapes = []\nbogus = 1\n")
                .unwrap_err()
                .0;
        assert!(unknown.contains("bogus"), "{unknown}");
        let wrong_role = WorkloadSpec::from_toml_str(
            "t.toml",
            "oracle = \"matmul_abt\"\nheadline = { M = 128, K = 64 }\nshapes = [{ M = 128, K = 64 }]\n",
        )
        .unwrap()
        .validate(&module())
        .unwrap_err()
        .0;
        assert!(wrong_role.contains("role `a` names tensor `A`"), "{wrong_role}");
    }

    #[test]
    fn the_dist_override_applies_to_filled_inputs_only() {
        let w = WorkloadSpec::from_toml_str(
            "t.toml",
            "oracle = \"none\"\nheadline = { M = 128, K = 64 }\nshapes = [{ M = 128, K = 64 }]\n[derive]\nXN = \"row_sqnorm(X)\"\n[inputs]\nX = { dist = \"ties\" }\n",
        )
        .unwrap();
        let m = module();
        let d = w.input_dists(&m, None);
        assert_eq!(d.keys().collect::<Vec<_>>(), vec!["X"]);
        assert_eq!(d["X"].0, Dist::Ties);
        assert_eq!(w.input_dists(&m, Some(Dist::Uniform))["X"].0, Dist::Uniform);
    }
}

#[cfg(test)]
mod exact_oracle_tests {
    use super::*;

    const PROGRAM: &str = "kernel k target sm_90a\n\ndim R multiple_of 64\ndim C multiple_of 64\n\nin A: bf16[R, C]\nout B: bf16[R, C]\nout BT: bf16[C, R]\ninout D: bf16[R, C]\nout F: f32[R, C]\nin A3: bf16[R, C, 64]\nout B3: bf16[R, C, 64]\nin I: i32[R, C]\nout J: i32[R, C]\n\ngrid tiles[r = R / 64]\n\nrole all: warp 0..4\n\non all {\n    for t in tiles {\n    }\n}\n";

    fn module() -> Module {
        let out = crate::check::check_source(PROGRAM);
        out.module.unwrap_or_else(|| panic!("{:?}", out.diagnostics))
    }

    /// A spec for `oracle` with the headline R=128, C=64 (not square) and a square shape.
    fn spec(oracle: &str, extra: &str) -> Result<(), WorkloadError> {
        let text = format!(
            "oracle = \"{oracle}\"\nheadline = {{ R = 128, C = 64 }}\nshapes = [{{ R = 64, C = 64 }}]\n{extra}"
        );
        WorkloadSpec::from_toml_str("t.toml", &text)?.validate(&module())
    }

    #[test]
    fn copy_and_transpose_specs_validate() {
        spec("copy", "").unwrap();
        spec("copy", "args = { input = \"A3\", output = \"B3\" }\n").unwrap();
        spec("copy", "args = { output = \"D\" }\n").unwrap();
        spec("transpose", "args = { output = \"BT\" }\n").unwrap();
        let w = WorkloadSpec::from_toml_str(
            "t.toml",
            "oracle = \"transpose\"\nheadline = { R = 64, C = 64 }\nshapes = [{ R = 64, C = 64 }]\n",
        )
        .unwrap();
        assert_eq!((w.role("input"), w.role("output")), ("A".to_string(), "B".to_string()));
        assert_eq!(w.tolerance(None), Tolerance::EXACT);
        assert_eq!(OracleName::Copy.name(), "copy");
        assert_eq!(OracleName::Transpose.output_role(), Some("output"));
        assert!(!OracleName::Copy.has_cublas_peer() && !OracleName::Transpose.has_cublas_peer());
    }

    #[test]
    fn misfits_of_copy_and_transpose_are_named() {
        let e = |oracle: &str, extra: &str| spec(oracle, extra).unwrap_err().0;
        let m = e("transpose", "");
        assert!(m.contains("headline: oracle `transpose`: input `A` is [128, 64], so output `B` must be [64, 128], but it is [128, 64]"), "{m}");
        let m = e("copy", "args = { output = \"BT\" }\n");
        assert!(m.contains("headline: oracle `copy`: input `A` is [128, 64], so output `BT` must be [128, 64]"), "{m}");
        let m = e("copy", "args = { output = \"F\" }\n");
        assert!(m.contains("input `A` is bf16 but output `F` is f32"), "{m}");
        let m = e("copy", "args = { output = \"B3\" }\n");
        assert!(m.contains("input `A` has rank 2 but output `B3` rank 3"), "{m}");
        let m = e("transpose", "args = { input = \"A3\", output = \"B3\" }\n");
        assert!(m.contains("role `input`: tensor `A3` has rank 3, expected 2"), "{m}");
        let m = e("copy", "args = { input = \"I\", output = \"J\" }\n");
        assert!(m.contains("tensor `I` is i32, which the oracle does not support (its output poison"), "{m}");
        let m = e("copy", "args = { input = \"B\", output = \"D\" }\n");
        assert!(m.contains("role `input`: tensor `B` is declared `out`"), "{m}");
        let m = e("copy", "args = { output = \"A\" }\n");
        assert!(m.contains("role `output`: tensor `A` is declared `in`"), "{m}");
        let m = e("copy", "args = { input = \"D\", output = \"D\" }\n");
        assert!(m.contains("roles `input` and `output` both name tensor `D`"), "{m}");
        let m = e("copy", "args = { output = \"D\" }\n[inputs]\nD = { dist = \"ties\" }\n");
        assert!(m.contains("output `D` is poisoned before the launch"), "{m}");
        let m = e("copy", "[tolerance]\natol = 0.01\n");
        assert!(m.contains("compares every element exactly"), "{m}");
        let m = e("copy", "args = { a = \"A\" }\n");
        assert!(m.contains("oracle `copy` has no role `a` (roles: input, output)"), "{m}");
        let m = e("transpose", "args = { output = \"Q\" }\n");
        assert!(m.contains("role `output` names tensor `Q`, which the program does not declare"), "{m}");
    }

    #[test]
    fn an_inout_output_of_copy_is_not_filled() {
        let w = WorkloadSpec::from_toml_str(
            "t.toml",
            "oracle = \"copy\"\nargs = { output = \"D\" }\nheadline = { R = 64, C = 64 }\nshapes = [{ R = 64, C = 64 }]\n",
        )
        .unwrap();
        let d = w.input_dists(&module(), None);
        assert!(d.contains_key("A") && !d.contains_key("D"), "{d:?}");
        // Under another oracle an inout tensor is filled.
        let n = WorkloadSpec { oracle: OracleName::None, args: BTreeMap::new(), ..w };
        assert!(n.input_dists(&module(), None).contains_key("D"));
    }
}

#[cfg(test)]
mod row_oracle_tests {
    use super::*;

    const PROGRAM: &str = "kernel k target sm_90a\n\ndim R multiple_of 32\ndim C multiple_of 64\n\nscalar eps: f32\nscalar n: i32\n\nin X: bf16[R, C]\nin Xf: f32[R, C]\nin X3: bf16[R, C, 4]\nin Xi: i32[R, C]\nout Y: bf16[R, C]\nout Yf: f32[R, C]\nout YT: bf16[C, R]\nout Y8: f8e4m3[R, C]\ninout D: bf16[R, C]\nin W: f32[C]\nin Bias: f32[C]\nin WR: f32[R]\nin Wb: bf16[C]\nout Out: f32[R]\nout OutC: f32[C]\nout Out2: f32[R, C]\n\ngrid tiles[r = R / 32]\n\nrole all: warp 0..4\n\non all {\n    for t in tiles {\n    }\n}\n";

    fn module() -> Module {
        let out = crate::check::check_source(PROGRAM);
        out.module.unwrap_or_else(|| panic!("{:?}", out.diagnostics))
    }

    /// A spec for `oracle` at R=64, C=128 (headline) and R=32, C=64, with `eps` (and `n`) given.
    fn parse(oracle: &str, extra: &str) -> Result<WorkloadSpec, WorkloadError> {
        let text = format!(
            "oracle = \"{oracle}\"\nheadline = {{ R = 64, C = 128 }}\nshapes = [{{ R = 32, C = 64 }}]\n{extra}\n[scalars]\neps = 1e-5\nn = 3\n"
        );
        WorkloadSpec::from_toml_str("t.toml", &text)
    }

    fn spec(oracle: &str, extra: &str) -> Result<(), WorkloadError> {
        parse(oracle, extra)?.validate(&module())
    }

    #[test]
    fn row_kernel_specs_validate() {
        spec("softmax", "").unwrap();
        spec("softmax", "args = { x = \"Xf\", y = \"Yf\" }").unwrap();
        spec("softmax", "args = { y = \"D\" }").unwrap();
        for kind in RowReduce::ALL {
            spec("row_reduce", &format!("reduce = \"{}\"", kind.name())).unwrap();
        }
        spec("row_reduce", "reduce = \"max\"\nargs = { x = \"Xf\" }").unwrap();
        spec("rmsnorm", "").unwrap();
        spec("rmsnorm", "args = { w = \"Wb\", y = \"Yf\" }").unwrap();
        spec("layernorm", "").unwrap();
        spec("layernorm", "args = { b = \"W\" }\n[tolerance]\nrtol = 1e-2").unwrap();
        let w = parse("row_reduce", "reduce = \"absmax\"").unwrap();
        assert_eq!(w.reduce, Some(RowReduce::Absmax));
        assert_eq!((w.role("x"), w.role("out")), ("X".to_string(), "Out".to_string()));
        let w = parse("layernorm", "").unwrap();
        assert_eq!((w.role("b"), w.role("eps")), ("Bias".to_string(), "eps".to_string()));
        assert!(OracleName::Layernorm.checks_every_element() && !OracleName::Layernorm.is_exact());
        assert!(!OracleName::Softmax.has_cublas_peer());
    }

    #[test]
    fn the_tolerance_follows_the_output_dtype() {
        let w = parse("softmax", "").unwrap();
        assert_eq!(w.tolerance(Some(DType::BF16)), Tolerance::ROW_BF16);
        assert_eq!(w.tolerance(Some(DType::F16)), Tolerance::ROW_F16);
        assert_eq!(w.tolerance(Some(DType::F32)), Tolerance::ROW_F32);
        let w = parse("rmsnorm", "[tolerance]\natol = 0.5").unwrap();
        assert_eq!(w.tolerance(Some(DType::F32)), Tolerance { atol: 0.5, ..Tolerance::ROW_F32 });
    }

    #[test]
    fn misfits_of_the_row_kernels_are_named() {
        let e = |oracle: &str, extra: &str| spec(oracle, extra).unwrap_err().0;
        // A role names no tensor.
        let m = e("softmax", "args = { y = \"Q\" }");
        assert!(m.contains("oracle `softmax` role `y` names tensor `Q`, which the program does not declare"), "{m}");
        let m = e("layernorm", "args = { b = \"B\" }");
        assert!(m.contains("role `b` names tensor `B`, which the program does not declare"), "{m}");
        // Rank.
        let m = e("softmax", "args = { x = \"X3\" }");
        assert!(m.contains("role `x`: tensor `X3` has rank 3, expected 2"), "{m}");
        let m = e("row_reduce", "reduce = \"sum\"\nargs = { out = \"Out2\" }");
        assert!(m.contains("role `out`: tensor `Out2` has rank 2, expected 1"), "{m}");
        let m = e("rmsnorm", "args = { w = \"X\" }");
        assert!(m.contains("role `w`: tensor `X` has rank 2, expected 1"), "{m}");
        // Dtype.
        let m = e("rmsnorm", "args = { x = \"Xi\" }");
        assert!(m.contains("role `x`: tensor `Xi` is i32, which the oracle does not support"), "{m}");
        let m = e("softmax", "args = { y = \"Y8\" }");
        assert!(m.contains("role `y`: tensor `Y8` is f8e4m3, which the oracle does not support"), "{m}");
        let m = e("softmax", "args = { y = \"Yf\" }");
        assert!(m.contains("oracle `softmax`: input `X` is bf16 but output `Yf` is f32"), "{m}");
        // Access: the output declared `in`, an input declared `out`, one tensor in two roles.
        let m = e("layernorm", "args = { y = \"Xf\" }");
        assert!(m.contains("role `y`: tensor `Xf` is declared `in`, but the oracle reads it as the output"), "{m}");
        let m = e("rmsnorm", "args = { x = \"Yf\", y = \"Y\" }");
        assert!(m.contains("role `x`: tensor `Yf` is declared `out`"), "{m}");
        let m = e("softmax", "args = { x = \"D\", y = \"D\" }");
        assert!(m.contains("roles `x` and `y` both name tensor `D`"), "{m}");
        let m = e("softmax", "args = { y = \"D\" }\n[inputs]\nD = { dist = \"ties\" }");
        assert!(m.contains("output `D` is poisoned before the launch"), "{m}");
        // Shapes, at every workload shape.
        let m = e("softmax", "args = { y = \"YT\" }");
        assert!(m.contains("headline: oracle `softmax`: `X` (role `x`) is [64, 128], so `YT` (role `y`) must be [64, 128], but it is [128, 64]"), "{m}");
        let m = e("rmsnorm", "args = { w = \"WR\" }");
        assert!(m.contains("so `WR` (role `w`) must be [128], but it is [64]"), "{m}");
        let m = e("row_reduce", "reduce = \"sum\"\nargs = { out = \"OutC\" }");
        assert!(m.contains("so `OutC` (role `out`) must be [64], but it is [128]"), "{m}");
        // The reduction: needed by row_reduce, known, refused elsewhere.
        let m = e("row_reduce", "");
        assert!(m.contains("oracle `row_reduce` needs `reduce = \"KIND\"` (sum, mean, max, min, sqnorm, l2norm, absmax)"), "{m}");
        let m = parse("row_reduce", "reduce = \"median\"").unwrap_err().0;
        assert!(m.contains("median"), "{m}");
        let m = e("softmax", "reduce = \"sum\"");
        assert!(m.contains("only oracle `row_reduce` takes `reduce`"), "{m}");
        // The key mask: attention's alone, and a known one.
        let m = e("softmax", "mask = \"causal\"");
        assert!(m.contains("mask (causal): only oracle `attention` takes `mask`; this workload's oracle is `softmax`"), "{m}");
        let m = parse("attention", "mask = \"sliding\"").unwrap_err().0;
        assert!(m.contains("sliding"), "{m}");
        assert_eq!(parse("attention", "mask = \"causal\"\nargs = { k = \"Kt\" }").unwrap().mask, Some(KeyMask::Causal));
        let w = parse("attention", "mask = { sliding_window = 1024 }\nargs = { k = \"Kt\" }").unwrap();
        assert_eq!(w.mask, Some(KeyMask::SlidingWindow(1024)));
        // eps: a float scalar of the program, with a usable value.
        let m = e("rmsnorm", "args = { eps = \"epsilon\" }");
        assert!(m.contains("role `eps` names scalar `epsilon`, which the program does not declare"), "{m}");
        let m = e("layernorm", "args = { eps = \"n\" }");
        assert!(m.contains("scalar `n` is i32; the oracle needs a float"), "{m}");
        let no_eps = WorkloadSpec::from_toml_str(
            "t.toml",
            "oracle = \"rmsnorm\"\nheadline = { R = 64, C = 128 }\nshapes = [{ R = 32, C = 64 }]\n[scalars]\nn = 1\n",
        )
        .unwrap()
        .validate(&module())
        .unwrap_err()
        .0;
        assert!(no_eps.contains("scalars: no value for `eps`"), "{no_eps}");
        let negative = WorkloadSpec::from_toml_str(
            "t.toml",
            "oracle = \"layernorm\"\nheadline = { R = 64, C = 128 }\nshapes = [{ R = 32, C = 64 }]\n[scalars]\neps = -1e-5\nn = 1\n",
        )
        .unwrap()
        .validate(&module())
        .unwrap_err()
        .0;
        assert!(negative.contains("scalars.eps = -0.00001: oracle `layernorm` role `eps` needs a finite value ≥ 0"), "{negative}");
        // Roles of other oracles; sampling a full check.
        let m = e("softmax", "args = { out = \"Out\" }");
        assert!(m.contains("oracle `softmax` has no role `out` (roles: x, y)"), "{m}");
        let m = e("rmsnorm", "args = { b = \"Bias\" }");
        assert!(m.contains("(roles: x, w, y, eps)"), "{m}");
        let m = e("layernorm", "[tolerance]\nsamples = 64");
        assert!(m.contains("tolerance.samples: oracle `layernorm` compares every element"), "{m}");
    }

    #[test]
    fn an_inout_output_of_a_row_kernel_is_not_filled() {
        let w = parse("softmax", "args = { y = \"D\" }").unwrap();
        let d = w.input_dists(&module(), None);
        assert!(d.contains_key("X") && !d.contains_key("D"), "{d:?}");
    }
}

#[cfg(test)]
mod gemv_fp8_block_oracle_tests {
    use super::*;

    const PROGRAM: &str = "kernel k target sm_90a\n\ndim N multiple_of 32\ndim K multiple_of 128\n\nscalar min_scale: f32\n\nin W: bf16[N, K]\nin X: f32[K]\nout Y: f32[N]\nout YK: f32[K]\nout Q: f8e4m3[N, K]\nout S: f32[N, K / 128]\nout S64: f32[N, K / 64]\nout S3: f32[N, 3]\nout SR: f32[N]\n\ngrid tiles[r = N / 32]\n\nrole all: warp 0..4\n\non all {\n    for t in tiles {\n    }\n}\n";

    /// A spec for `oracle` at N=64, K=256 (headline) and N=32, K=128, with `min_scale` given.
    fn spec(oracle: &str, extra: &str) -> Result<WorkloadSpec, WorkloadError> {
        let text = format!(
            "oracle = \"{oracle}\"\nheadline = {{ N = 64, K = 256 }}\nshapes = [{{ N = 32, K = 128 }}]\n{extra}\n[scalars]\nmin_scale = 1e-6\n"
        );
        let w = WorkloadSpec::from_toml_str("t.toml", &text)?;
        let out = crate::check::check_source(PROGRAM);
        w.validate(&out.module.unwrap_or_else(|| panic!("{:?}", out.diagnostics)))?;
        Ok(w)
    }

    #[test]
    fn gemv_relates_w_x_and_y() {
        let w = spec("gemv", "").unwrap();
        assert_eq!((w.role("w"), w.role("x"), w.role("y")), ("W".to_string(), "X".to_string(), "Y".to_string()));
        assert_eq!(w.tolerance(Some(DType::F32)), Tolerance::ROW_F32);
        assert_eq!(w.tolerance(Some(DType::BF16)), Tolerance::ROW_BF16);
        assert!(OracleName::Gemv.checks_every_element() && !OracleName::Gemv.has_cublas_peer());
        let m = spec("gemv", "args = { y = \"YK\" }").unwrap_err().0;
        assert!(m.contains("oracle `gemv`: `W` (role `w`) is [64, 256], so `YK` (role `y`) must be [64], but it is [256]"), "{m}");
        let m = spec("gemv", "args = { x = \"Y\", y = \"YK\" }").unwrap_err().0;
        assert!(m.contains("role `x`: tensor `Y` is declared `out`"), "{m}");
        let m = spec("gemv", "[tolerance]\nsamples = 8").unwrap_err().0;
        assert!(m.contains("tolerance.samples: oracle `gemv` compares every element"), "{m}");
    }

    #[test]
    fn fp8_quant_block_takes_s_of_one_scale_per_group() {
        let w = spec("fp8_quant_block", "args = { x = \"W\" }").unwrap();
        assert_eq!((w.role("q"), w.role("s"), w.role("min_scale")), ("Q".to_string(), "S".to_string(), "min_scale".to_string()));
        assert_eq!(w.tolerance(Some(DType::F8E4M3)), Tolerance::FP8_QUANT);
        // Groups of 64: the group size is the kernel's, read off S.
        spec("fp8_quant_block", "args = { x = \"W\", s = \"S64\" }").unwrap();
        // 3 groups do not divide a row of 256; one scale per row is fp8_quant_row's S.
        let m = spec("fp8_quant_block", "args = { x = \"W\", s = \"S3\" }").unwrap_err().0;
        assert!(m.contains("so `S3` (role `s`) must be [64, 2], but it is [64, 3]"), "{m}");
        let m = spec("fp8_quant_block", "args = { x = \"W\", s = \"SR\" }").unwrap_err().0;
        assert!(m.contains("role `s`: tensor `SR` has rank 1, expected 2"), "{m}");
        spec("fp8_quant_row", "args = { x = \"W\", s = \"SR\" }").unwrap();
        let m = spec("fp8_quant_row", "args = { x = \"W\" }").unwrap_err().0;
        assert!(m.contains("role `s`: tensor `S` has rank 2, expected 1"), "{m}");
    }
}

#[cfg(test)]
mod elementwise_oracle_tests {
    use super::*;

    const PROGRAM: &str = "kernel k target sm_90a\n\ndim R multiple_of 32\ndim C multiple_of 64\n\nin X: bf16[R, C]\nin Y: bf16[R, C]\nin Yh: f16[R, C]\nin YT: bf16[C, R]\nin Xi: i32[R, C]\nin W: f32[C]\nin Wb: bf16[C]\nin WR: f32[R]\nout Z: bf16[R, C]\nout Zf: f32[R, C]\nout Z8: f8e4m3[R, C]\nout Out: f32[R]\n\ngrid tiles[r = R / 32]\n\nrole all: warp 0..4\n\non all {\n    for t in tiles {\n    }\n}\n";

    fn module() -> Module {
        let out = crate::check::check_source(PROGRAM);
        out.module.unwrap_or_else(|| panic!("{:?}", out.diagnostics))
    }

    fn parse(oracle: &str, extra: &str) -> Result<WorkloadSpec, WorkloadError> {
        let text = format!("oracle = \"{oracle}\"\nheadline = {{ R = 64, C = 128 }}\nshapes = [{{ R = 32, C = 64 }}]\n{extra}\n");
        WorkloadSpec::from_toml_str("t.toml", &text)
    }

    fn spec(oracle: &str, extra: &str) -> Result<(), WorkloadError> {
        parse(oracle, extra)?.validate(&module())
    }

    #[test]
    fn elementwise_specs_validate() {
        spec("elementwise", "expr = \"fma(w, x, y)\"").unwrap();
        spec("elementwise", "expr = \"x * rsqrt(y * y + w)\"\nargs = { y = \"Yh\", z = \"Zf\" }").unwrap();
        spec("elementwise", "expr = \"x\"\n[inputs]\nW = { dist = \"uniform\", scale = 0.5, offset = 1.0 }").unwrap();
        let w = parse("elementwise", "expr = \"select(x + y > 0.0, x + y, 0.01 * (x + y)) * w\"").unwrap();
        assert_eq!(
            ["x", "y", "w", "z"].map(|r| w.role(r)),
            ["X", "Y", "W", "Z"].map(String::from),
            "the default tensor names"
        );
        assert_eq!(w.element_expr().unwrap().eval(1.0, 2.0, 3.0), 9.0);
        assert_eq!(w.tolerance(Some(DType::BF16)), Tolerance::ROW_BF16);
        assert_eq!(w.tolerance(Some(DType::F32)), Tolerance::ROW_F32);
        assert!(OracleName::Elementwise.checks_every_element() && !OracleName::Elementwise.has_cublas_peer());
        assert_eq!(OracleName::Elementwise.output_role(), Some("z"));
        // Z is poisoned, never filled; X, Y and W are.
        let d = w.input_dists(&module(), None);
        assert!(d.contains_key("X") && d.contains_key("Y") && d.contains_key("W") && !d.contains_key("Z"), "{d:?}");
    }

    #[test]
    fn misfits_of_elementwise_are_named() {
        let e = |extra: &str| spec("elementwise", &format!("expr = \"x + y * w\"\n{extra}")).unwrap_err().0;
        // The expression: required, parsed (coded errors), refused by other oracles.
        let m = spec("elementwise", "").unwrap_err().0;
        assert!(m.contains("expr: oracle `elementwise` needs `expr = \"...\"`"), "{m}");
        let m = spec("elementwise", "expr = \"x + q\"").unwrap_err().0;
        assert!(m.contains("expr = \"x + q\": column 5: unknown name `q`") && m.contains("[unknown_name]"), "{m}");
        let m = spec("elementwise", "expr = \"fma(x, y\"").unwrap_err().0;
        assert!(m.contains("[syntax]"), "{m}");
        let m = spec("elementwise", "expr = \"x > y\"").unwrap_err().0;
        assert!(m.contains("[type]"), "{m}");
        let m = spec("row_reduce", "reduce = \"sum\"\nexpr = \"x\"\nargs = { out = \"Out\" }").unwrap_err().0;
        assert!(m.contains("only oracle `elementwise` takes `expr`; this workload's oracle is `row_reduce`"), "{m}");
        let m = spec("elementwise", "expr = \"x\"\nreduce = \"sum\"").unwrap_err().0;
        assert!(m.contains("only oracle `row_reduce` takes `reduce`"), "{m}");
        // Ranks and dtypes: W is an f32 vector.
        let m = e("args = { w = \"Wb\" }");
        assert!(m.contains("role `w`: tensor `Wb` is bf16, which the oracle does not support"), "{m}");
        let m = e("args = { w = \"Y\" }");
        assert!(m.contains("role `w`: tensor `Y` has rank 2, expected 1"), "{m}");
        let m = e("args = { x = \"Xi\" }");
        assert!(m.contains("role `x`: tensor `Xi` is i32"), "{m}");
        let m = e("args = { z = \"Z8\" }");
        assert!(m.contains("role `z`: tensor `Z8` is f8e4m3"), "{m}");
        let m = e("args = { z = \"Out\" }");
        assert!(m.contains("role `z`: tensor `Out` has rank 1, expected 2"), "{m}");
        // Access and distinct tensors.
        let m = e("args = { z = \"Y\" }");
        assert!(m.contains("role `z`: tensor `Y` is declared `in`"), "{m}");
        let m = e("args = { y = \"Z\" }");
        assert!(m.contains("role `y`: tensor `Z` is declared `out`"), "{m}");
        let m = e("args = { y = \"X\" }");
        assert!(m.contains("roles `x` and `y` both name tensor `X`"), "{m}");
        let m = e("[inputs]\nZ = { dist = \"ties\" }");
        assert!(m.contains("oracle `elementwise`: output `Z` is poisoned before the launch"), "{m}");
        // Shapes, at every workload shape.
        let m = e("args = { y = \"YT\" }");
        assert!(m.contains("headline: oracle `elementwise`: `X` (role `x`) is [64, 128], so `YT` (role `y`) must be [64, 128], but it is [128, 64]"), "{m}");
        let m = e("args = { w = \"WR\" }");
        assert!(m.contains("so `WR` (role `w`) must be [128], but it is [64]"), "{m}");
        // Everything is compared; nothing is sampled. Unknown roles.
        let m = e("[tolerance]\nsamples = 8");
        assert!(m.contains("tolerance.samples: oracle `elementwise` compares every element"), "{m}");
        let m = e("args = { out = \"Z\" }");
        assert!(m.contains("oracle `elementwise` has no role `out` (roles: x, y, w, z)"), "{m}");
        let m = e("[inputs]\nW = { dist = \"uniform\", offset = nan }");
        assert!(m.contains("inputs.W.offset: must be a finite number"), "{m}");
    }
}

#[cfg(test)]
mod product_oracle_tests {
    use super::*;

    const PROGRAM: &str = "kernel k target sm_90a\n\ndim BATCH\ndim G\ndim M multiple_of 64\ndim N multiple_of 64\ndim K multiple_of 64\ndim D multiple_of 64\n\nscalar scale: f32\nscalar n: i32\n\nin A: bf16[BATCH, M, K]\nin B: bf16[BATCH, N, K]\nout C: bf16[BATCH, M, N]\nout CT: bf16[BATCH, N, M]\nin B1: bf16[N, K]\nin BK: bf16[BATCH, N, D]\nin A2: bf16[M, K]\nin B2: bf16[N, K]\nout C2: bf16[M, N]\nin AG: bf16[G * M, K]\nin BG: bf16[G, N, K]\nout CG: bf16[G * M, N]\nout CGh: f16[G * M, N]\nin AM: bf16[M, K]\nout CM: bf16[M, N]\nin Q: bf16[BATCH, M, D]\nin Kt: bf16[BATCH, N, D]\nin VT: bf16[BATCH, D, N]\nin V: bf16[BATCH, N, D]\nout O: bf16[BATCH, M, D]\nout Oh: f16[BATCH, M, D]\nout Of: f32[BATCH, M, D]\nin Qh: f16[BATCH, M, D]\n\ngrid tiles[r = M / 64]\n\nrole all: warp 0..4\n\non all {\n    for t in tiles {\n    }\n}\n";

    fn module() -> Module {
        let out = crate::check::check_source(PROGRAM);
        out.module.unwrap_or_else(|| panic!("{:?}", out.diagnostics))
    }

    /// A spec for `oracle` at a headline and one small shape in which M ≠ N ≠ K ≠ D and G = 3.
    fn parse(oracle: &str, extra: &str) -> Result<WorkloadSpec, WorkloadError> {
        let text = format!(
            "oracle = \"{oracle}\"\nheadline = {{ BATCH = 4, G = 3, M = 256, N = 128, K = 64, D = 192 }}\nshapes = [{{ BATCH = 2, G = 2, M = 64, N = 128, K = 192, D = 64 }}]\n{extra}\n[scalars]\nscale = 0.125\nn = 3\n"
        );
        WorkloadSpec::from_toml_str("t.toml", &text)
    }

    fn spec(oracle: &str, extra: &str) -> Result<(), WorkloadError> {
        parse(oracle, extra)?.validate(&module())
    }

    #[test]
    fn product_specs_validate() {
        // matmul_abt with a leading batch dim (the defaults A, B, C) and without.
        spec("matmul_abt", "").unwrap();
        spec("matmul_abt", "args = { a = \"A2\", b = \"B2\", c = \"C2\" }").unwrap();
        let w = parse("grouped_matmul_abt", "args = { a = \"AG\", b = \"BG\", c = \"CG\" }").unwrap();
        w.validate(&module()).unwrap();
        assert_eq!(w.tolerance(Some(DType::BF16)), Tolerance::MATMUL_BF16);
        assert_eq!(w.tolerance(Some(DType::F16)), Tolerance::MATMUL_F16);
        spec("grouped_matmul_abt", "args = { a = \"AG\", b = \"BG\", c = \"CGh\" }").unwrap();
        let w = parse("attention", "args = { k = \"Kt\" }").unwrap();
        w.validate(&module()).unwrap();
        assert_eq!(["q", "k", "vt", "o", "scale"].map(|r| w.role(r)), ["Q", "Kt", "VT", "O", "scale"].map(String::from));
        assert_eq!(w.tolerance(Some(DType::BF16)), Tolerance::ATTENTION_BF16);
        assert_eq!(w.tolerance(Some(DType::F16)), Tolerance::ATTENTION_F16);
        assert_eq!(OracleName::Attention.output_role(), Some("o"));
        assert!(!OracleName::Attention.has_cublas_peer() && OracleName::GroupedMatmulAbt.has_cublas_peer());
        assert!(!OracleName::Attention.checks_every_element() && !OracleName::GroupedMatmulAbt.checks_every_element());
        // The samples are the spec's to set.
        spec("attention", "args = { k = \"Kt\" }\n[tolerance]\nsamples = 8").unwrap();
        // matmul_abt's default stays MATMUL_BF16 for every output dtype.
        assert_eq!(parse("matmul_abt", "").unwrap().tolerance(Some(DType::F16)), Tolerance::MATMUL_BF16);
    }

    #[test]
    fn misfits_of_the_product_oracles_are_named() {
        let e = |oracle: &str, extra: &str| spec(oracle, extra).unwrap_err().0;
        // matmul_abt: one rank for all three, the batch and K shared, C = [BATCH, M, N].
        let m = e("matmul_abt", "args = { b = \"B1\" }");
        assert!(m.contains("oracle `matmul_abt`: A, B and C share one rank (2, or 3 with a leading batch dim); here `A` rank 3, `B1` rank 2, `C` rank 3"), "{m}");
        let m = e("matmul_abt", "args = { b = \"BK\" }");
        assert!(m.contains("headline: oracle `matmul_abt`: `A` (role `a`) is [4, 256, 64], so `BK` (role `b`) must be [4, _, 64], but it is [4, 128, 192]"), "{m}");
        let m = e("matmul_abt", "args = { c = \"CT\" }");
        assert!(m.contains("headline: oracle `matmul_abt`: `B` (role `b`) is [4, 128, 64], so `CT` (role `c`) must be [4, 256, 128], but it is [4, 128, 256]"), "{m}");
        let m = e("matmul_abt", "args = { c = \"A\" }");
        assert!(m.contains("role `c`: tensor `A` is declared `in`"), "{m}");
        let m = e("matmul_abt", "args = { a = \"C\" }");
        assert!(m.contains("role `a`: tensor `C` is declared `out`"), "{m}");
        // grouped_matmul_abt: ranks, dtypes, groups that split A's rows, C's shape, distinct roles.
        let g = |args: &str| e("grouped_matmul_abt", &format!("args = {{ {args} }}"));
        let m = g("a = \"A\", b = \"BG\", c = \"CG\"");
        assert!(m.contains("role `a`: tensor `A` has rank 3, expected 2"), "{m}");
        let m = g("a = \"AG\", b = \"B2\", c = \"CG\"");
        assert!(m.contains("role `b`: tensor `B2` has rank 2, expected 3"), "{m}");
        let m = g("a = \"AM\", b = \"BG\", c = \"CM\"");
        assert!(m.contains("headline: oracle `grouped_matmul_abt`: `BG` (role `b`) holds G = 3 groups, so the 256 rows of `AM` (role `a`) must split into 3 equal groups"), "{m}");
        let m = g("a = \"AG\", b = \"BG\", c = \"C2\"");
        assert!(m.contains("headline: oracle `grouped_matmul_abt`: `BG` (role `b`) is [3, 128, 64], so `C2` (role `c`) must be [768, 128], but it is [256, 128]"), "{m}");
        let m = g("a = \"AG\", b = \"AG\", c = \"CG\"");
        assert!(m.contains("role `b`: tensor `AG` has rank 2, expected 3"), "{m}");
        let m = g("a = \"AG\", b = \"BG\", c = \"AG\"");
        assert!(m.contains("role `c`: tensor `AG` is declared `in`"), "{m}");
        // attention: roles, ranks, dtypes, shapes, one tensor per role, scale.
        let a = |extra: &str| e("attention", &format!("args = {{ k = \"Kt\"{extra} }}"));
        let m = a(", vt = \"V\"");
        assert!(m.contains("headline: oracle `attention`: `Kt` (role `k`) is [4, 128, 192], so `V` (role `vt`) must be [4, 192, 128], but it is [4, 128, 192]"), "{m}");
        let m = a(", o = \"C\"");
        assert!(m.contains("oracle `attention`: `Q` (role `q`) is [4, 256, 192], so `C` (role `o`) must be [4, 256, 192], but it is [4, 256, 128]"), "{m}");
        let m = e("attention", "args = { k = \"B\" }");
        assert!(m.contains("so `B` (role `k`) must be [4, _, 192], but it is [4, 128, 64]"), "{m}");
        let m = a(", vt = \"Kt\"");
        assert!(m.contains("oracle `attention`: roles `k` and `vt` both name tensor `Kt`; each role needs a tensor of its own"), "{m}");
        let m = a(", o = \"Of\"");
        assert!(m.contains("role `o`: tensor `Of` is f32, which the oracle does not support"), "{m}");
        let m = a(", o = \"Oh\"");
        assert!(m.contains("oracle `attention`: Q, K, VT and O share one dtype; here `Q` bf16, `Kt` bf16, `VT` bf16, `Oh` f16"), "{m}");
        let m = a(", q = \"A2\"");
        assert!(m.contains("role `q`: tensor `A2` has rank 2, expected 3"), "{m}");
        let m = a(", o = \"Q\"");
        assert!(m.contains("role `o`: tensor `Q` is declared `in`"), "{m}");
        let m = e("attention", "mask = { sliding_window = 0 }\nargs = { k = \"Kt\" }");
        assert!(m.contains("a query must see at least itself"), "{m}");
        let m = e("attention", "");
        assert!(m.contains("oracle `attention` role `k` names tensor `K`, which the program does not declare"), "{m}");
        let m = a(", scale = \"s\"");
        assert!(m.contains("role `scale` names scalar `s`, which the program does not declare"), "{m}");
        let m = a(", scale = \"n\"");
        assert!(m.contains("scalar `n` is i32; the oracle needs a float"), "{m}");
        let zero = WorkloadSpec::from_toml_str(
            "t.toml",
            "oracle = \"attention\"\nargs = { k = \"Kt\" }\nheadline = { BATCH = 1, G = 1, M = 64, N = 64, K = 64, D = 64 }\nshapes = [{ BATCH = 1, G = 1, M = 64, N = 64, K = 64, D = 64 }]\n[scalars]\nscale = 0.0\nn = 1\n",
        )
        .unwrap()
        .validate(&module())
        .unwrap_err()
        .0;
        assert!(zero.contains("scalars.scale = 0: oracle `attention` role `scale` needs a finite value other than 0"), "{zero}");
        let m = a(", out = \"O\"");
        assert!(m.contains("oracle `attention` has no role `out` (roles: q, k, vt, o, scale)"), "{m}");
    }
}

#[cfg(test)]
mod knn_oracle_tests {
    use super::*;

    const PROGRAM: &str = "kernel k target sm_90a\n\ndim B\ndim NQ multiple_of 64\ndim K multiple_of 128\nconst D = 64\n\nin Q: bf16[B, NQ, D]\nin QN: f32[B, NQ]\nin C: bf16[B, K, D]\nin CN: f32[B, K]\nin CNb: bf16[B, K]\nin C2: bf16[B, K, 128]\nout Dist: f32[B, NQ, K / 128]\nout Idx: i32[B, NQ, K / 128]\nout Dist3: f32[B, NQ, 3]\nout IdxW: i32[B, NQ, K / 64]\nout DistH: f16[B, NQ, K / 128]\nout IdxH: f16[B, NQ, K / 128]\nout Idx8: f8e4m3[B, NQ, K / 128]\nin Din: f32[B, NQ, K / 128]\n\ngrid tiles[b = B, q = NQ / 64]\n\nrole all: warp 0..4\n\non all {\n    for t in tiles {\n    }\n}\n";

    fn module() -> Module {
        let out = crate::check::check_source(PROGRAM);
        out.module.unwrap_or_else(|| panic!("{:?}", out.diagnostics))
    }

    fn spec(extra: &str, derive: &str) -> Result<(), WorkloadError> {
        let text = format!("oracle = \"knn_tile_min\"\nheadline = {{ B = 2, NQ = 256, K = 1024 }}\nshapes = [{{ B = 1, NQ = 64, K = 384 }}]\n{extra}\n[derive]\n{derive}\n");
        WorkloadSpec::from_toml_str("t.toml", &text)?.validate(&module())
    }

    const NORMS: &str = "QN = \"row_sqnorm(Q)\"\nCN = \"row_sqnorm(C)\"";

    #[test]
    fn knn_specs_validate() {
        spec("", NORMS).unwrap();
        let w = WorkloadSpec::from_toml_str("t.toml", "oracle = \"knn_tile_min\"\nheadline = {}\nshapes = []\n").unwrap();
        assert_eq!(["q", "qn", "c", "cn", "dist", "idx"].map(|r| w.role(r)), ["Q", "QN", "C", "CN", "Dist", "Idx"].map(String::from));
        assert_eq!(w.tolerance(Some(DType::F32)), Tolerance::KNN);
        assert!(!OracleName::KnnTileMin.has_cublas_peer() && !OracleName::KnnTileMin.checks_every_element());
    }

    #[test]
    fn misfits_of_knn_are_named() {
        let e = |extra: &str| spec(extra, NORMS).unwrap_err().0;
        let m = e("args = { dist = \"Dist3\" }");
        assert!(m.contains("headline: oracle `knn_tile_min`: `Dist3` (role `dist`) holds 3 tiles per query, which must split the K = 1024 vectors of `C` (role `c`) into equal tiles"), "{m}");
        let m = e("args = { idx = \"IdxW\" }");
        assert!(m.contains("headline: oracle `knn_tile_min`: `Dist` (role `dist`) is [2, 256, 8], so `IdxW` (role `idx`) must be [2, 256, 8], but it is [2, 256, 16]"), "{m}");
        let m = spec("args = { c = \"C2\" }", "QN = \"row_sqnorm(Q)\"\nCN = \"row_sqnorm(C2)\"").unwrap_err().0;
        assert!(m.contains("so `C2` (role `c`) must be [2, _, 64], but it is [2, 1024, 128]"), "{m}");
        let m = e("args = { dist = \"DistH\" }");
        assert!(m.contains("role `dist`: tensor `DistH` is f16, which the oracle does not support"), "{m}");
        let m = e("args = { cn = \"CNb\" }");
        assert!(m.contains("role `cn`: tensor `CNb` is bf16"), "{m}");
        // An index output is decoded by its dtype: f16 runs (and answers wrongly past 2048);
        // an fp8 index (exact only up to 16) is refused with the dtypes that work.
        spec("args = { idx = \"IdxH\" }", NORMS).unwrap();
        let m = e("args = { idx = \"Idx8\" }");
        assert!(m.starts_with("W001: oracle role `idx`: tensor `Idx8` is f8e4m3, which the oracle does not support; declare it as one of i32, u32, i64, f32, f16, bf16"), "{m}");
        let m = e("args = { dist = \"QN\" }");
        assert!(m.contains("role `dist`: tensor `QN` has rank 2, expected 3"), "{m}");
        let m = e("args = { qn = \"Dist\" }");
        assert!(m.contains("role `qn`: tensor `Dist` has rank 3, expected 2"), "{m}");
        let m = e("args = { dist = \"Din\" }");
        assert!(m.contains("role `dist`: tensor `Din` is declared `in`"), "{m}");
        let m = spec("args = { c = \"Q\" }", "QN = \"row_sqnorm(Q)\"\nCN = \"row_sqnorm(Q)\"").unwrap_err().0;
        assert!(m.contains("roles `q` and `c` both name tensor `Q`; each role needs a tensor of its own"), "{m}");
        // The norms are the rows' squared norms, derived.
        let m = spec("", "QN = \"row_sqnorm(Q)\"").unwrap_err().0;
        assert!(m.contains("oracle `knn_tile_min` role `cn`: `CN` must be derived as row_sqnorm(C)"), "{m}");
        let m = spec("", "QN = \"row_sqnorm(Q)\"\nCN = \"row_sqnorm(C2)\"").unwrap_err().0;
        assert!(m.contains("without its last dimension") || m.contains("must be derived as row_sqnorm(C)"), "{m}");
        let m = e("args = { out = \"Dist\" }");
        assert!(m.contains("oracle `knn_tile_min` has no role `out` (roles: q, qn, c, cn, dist, idx)"), "{m}");
    }
}

#[cfg(test)]
mod kmeans_update_oracle_tests {
    use super::*;

    const PROGRAM: &str = "kernel k target sm_90a\n\ndim B\ndim N multiple_of 64\ndim K multiple_of 64\ndim D multiple_of 64\n\nin XT: bf16[B, D, N]\nin OH: bf16[B, K, N]\nin ICNT: f32[B, K]\nout CT: f32[B, D, K]\nin XTf: f32[B, D, N]\nin X2: bf16[D, N]\nin OHt: bf16[B, N, K]\nin OHd: bf16[B, K, D]\nin ICb: bf16[B, K]\nin ICi: i32[B, K]\nin IC1: f32[K]\nout CTb: bf16[B, D, K]\nout CTk: f32[B, K, D]\nin CTin: f32[B, D, K]\nin S: f32[B, K]\n\ngrid tiles[b = B, d = D / 64, k = K / 64]\n\nrole all: warp 0..4\n\non all {\n    for t in tiles {\n    }\n}\n";

    fn module() -> Module {
        let out = crate::check::check_source(PROGRAM);
        out.module.unwrap_or_else(|| panic!("{:?}", out.diagnostics))
    }

    fn parse(extra: &str, derive: &str) -> Result<WorkloadSpec, WorkloadError> {
        // The headline has D ≠ K ≠ N.
        let text = format!(
            "oracle = \"kmeans_update\"\nheadline = {{ B = 2, N = 1024, K = 128, D = 192 }}\nshapes = [{{ B = 1, N = 256, K = 64, D = 64 }}]\n{extra}\n[derive]\n{derive}\n"
        );
        WorkloadSpec::from_toml_str("t.toml", &text)
    }

    fn spec(extra: &str, derive: &str) -> Result<(), WorkloadError> {
        parse(extra, derive)?.validate(&module())
    }

    const DERIVE: &str = "OH = \"one_hot()\"\nICNT = \"inv_row_sum(OH)\"";

    #[test]
    fn kmeans_update_specs_validate() {
        spec("", DERIVE).unwrap();
        let w = parse("", DERIVE).unwrap();
        assert_eq!(["xt", "oh", "icnt", "ct"].map(|r| w.role(r)), ["XT", "OH", "ICNT", "CT"].map(String::from));
        assert_eq!(w.tolerance(Some(DType::F32)), Tolerance::KMEANS_UPDATE);
        assert_eq!(OracleName::KmeansUpdate.output_role(), Some("ct"));
        assert!(!OracleName::KmeansUpdate.has_cublas_peer() && !OracleName::KmeansUpdate.checks_every_element());
        // OH is computed before ICNT, which reads it, though `ICNT` sorts first.
        let order: Vec<String> = w.derive_order().unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(order, ["OH", "ICNT"]);
        // The derived tensors are not drawn.
        let dists = w.input_dists(&module(), None);
        assert!(dists.contains_key("XT") && !dists.contains_key("OH") && !dists.contains_key("ICNT"));
    }

    #[test]
    fn misfits_of_kmeans_update_are_named() {
        let e = |extra: &str| spec(extra, DERIVE).unwrap_err().0;
        // Ranks and dtypes.
        let m = e("args = { xt = \"X2\" }");
        assert!(m.contains("role `xt`: tensor `X2` has rank 2, expected 3"), "{m}");
        let m = e("args = { xt = \"XTf\" }");
        assert!(m.contains("role `xt`: tensor `XTf` is f32, which the oracle does not support"), "{m}");
        let m = e("args = { ct = \"CTb\" }");
        assert!(m.contains("role `ct`: tensor `CTb` is bf16"), "{m}");
        let m = spec("args = { icnt = \"ICb\" }", "OH = \"one_hot()\"\nICb = \"inv_row_sum(OH)\"").unwrap_err().0;
        assert!(m.contains("role `icnt`: tensor `ICb` is bf16"), "{m}");
        let m = spec("args = { icnt = \"IC1\" }", "OH = \"one_hot()\"\nIC1 = \"inv_row_sum(OH)\"").unwrap_err().0;
        assert!(m.contains("role `icnt`: tensor `IC1` has rank 1, expected 2"), "{m}");
        // Access and one tensor per role.
        let m = e("args = { ct = \"CTin\" }");
        assert!(m.contains("role `ct`: tensor `CTin` is declared `in`"), "{m}");
        let m = e("args = { xt = \"OH\" }");
        assert!(m.contains("roles `xt` and `oh` both name tensor `OH`; each role needs a tensor of its own"), "{m}");
        // Shapes at every workload shape.
        let m = spec("args = { oh = \"OHd\" }", "OHd = \"one_hot()\"\nICNT = \"inv_row_sum(OHd)\"").unwrap_err().0;
        assert!(m.contains("headline: oracle `kmeans_update`: `XT` (role `xt`) is [2, 192, 1024], so `OHd` (role `oh`) must be [2, _, 1024], but it is [2, 128, 192]"), "{m}");
        // OH given points-major ([B, N, K]): its 1/count would be per point, not per cluster.
        let m = spec("args = { oh = \"OHt\" }", "OHt = \"one_hot()\"\nICNT = \"inv_row_sum(OHt)\"").unwrap_err().0;
        assert!(m.contains("derive.ICNT: inv_row_sum(OHt) drops the innermost axis, so `ICNT` must have the shape of `OHt` without its last dimension"), "{m}");
        let m = e("args = { ct = \"CTk\" }");
        assert!(m.contains("headline: oracle `kmeans_update`: `OH` (role `oh`) is [2, 128, 1024], so `CTk` (role `ct`) must be [2, 192, 128], but it is [2, 128, 192] (CT has XT's D and OH's K)"), "{m}");
        // OH must be one_hot(), ICNT inv_row_sum(OH): the check reads ICNT as 1/count of OH.
        let m = spec("", "ICNT = \"inv_row_sum(OH)\"").unwrap_err().0;
        assert!(m.contains("oracle `kmeans_update` role `oh`: `OH` must be derived as one_hot() (`[derive] OH = \"one_hot()\"`)"), "{m}");
        let m = spec("", "OH = \"one_hot()\"").unwrap_err().0;
        assert!(m.contains("oracle `kmeans_update` role `icnt`: `ICNT` must be derived as inv_row_sum(OH)"), "{m}");
        let m = spec("", "OH = \"one_hot()\"\nS = \"inv_row_sum(OH)\"\nICNT = \"row_sqnorm(OH)\"").unwrap_err().0;
        assert!(m.contains("`ICNT` must be derived as inv_row_sum(OH)"), "{m}");
        let m = e("args = { out = \"CT\" }");
        assert!(m.contains("oracle `kmeans_update` has no role `out` (roles: xt, oh, icnt, ct)"), "{m}");
    }

    #[test]
    fn derive_recipes_parse_and_fit() {
        assert_eq!(Derive::parse(" one_hot( ) ").unwrap(), Derive::OneHot);
        assert_eq!(Derive::parse("inv_row_sum(OH)").unwrap(), Derive::InvRowSum { of: "OH".into() });
        assert_eq!(Derive::parse("inv_row_sum(OH)").unwrap().to_string(), "inv_row_sum(OH)");
        assert_eq!(Derive::OneHot.source(), None);
        let m = Derive::parse("one_hot(X)").unwrap_err().to_string();
        assert!(m.contains("one_hot() takes no argument"), "{m}");
        let m = Derive::parse("inv_row_sum()").unwrap_err().to_string();
        assert!(m.contains("the argument must be one tensor name"), "{m}");
        let m = Derive::parse("count(OH)").unwrap_err().to_string();
        assert!(m.contains("unknown function `count` (known: row_sqnorm(T), inv_row_sum(T), one_hot(), column_index())"), "{m}");
        assert_eq!(Derive::parse("column_index()").unwrap(), Derive::ColumnIndex);
        assert_eq!(Derive::ColumnIndex.to_string(), "column_index()");
        let m = Derive::parse("column_index(X)").unwrap_err().to_string();
        assert!(m.contains("column_index() takes no argument"), "{m}");
        // one_hot() needs rank ≥ 2; inv_row_sum drops the innermost axis and needs a float.
        let m = spec("", "OH = \"one_hot()\"\nICNT = \"inv_row_sum(OH)\"\nIC1 = \"one_hot()\"").unwrap_err().0;
        assert!(m.contains("derive.IC1: one_hot() puts one 1 per column over the second-to-last axis, so `IC1` needs rank 2 or more (it has rank 1)"), "{m}");
        let m = spec("", "OH = \"one_hot()\"\nICNT = \"inv_row_sum(OH)\"\nICi = \"inv_row_sum(OH)\"").unwrap_err().0;
        assert!(m.contains("derive.ICi: inv_row_sum(OH) is a reciprocal; `ICi` is i32, it needs a float dtype"), "{m}");
        let m = spec("", "OH = \"one_hot()\"\nICNT = \"inv_row_sum(OH)\"\nS = \"inv_row_sum(XT)\"").unwrap_err().0;
        assert!(m.contains("derive.S: inv_row_sum(XT) drops the innermost axis, so `S` must have the shape of `XT` without its last dimension"), "{m}");
        let m = spec("", "OH = \"one_hot()\"\nICNT = \"inv_row_sum(OH)\"\nS = \"inv_row_sum(CT)\"").unwrap_err().0;
        assert!(m.contains("derive.S: `CT` is `out`"), "{m}");
    }

    #[test]
    fn derived_inputs_come_after_their_sources_and_cycles_are_named() {
        // Name order where no derived input reads another (every existing workload): unchanged.
        let w = parse("", "QN = \"row_sqnorm(XT)\"\nCN = \"row_sqnorm(OH)\"\nAN = \"row_sqnorm(X2)\"").unwrap();
        let names = |w: &WorkloadSpec| w.derive_order().unwrap().into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        assert_eq!(names(&w), ["AN", "CN", "QN"]);
        // A chain against name order: Z from the seed, then M from Z, then A from M.
        let w = parse("", "A = \"inv_row_sum(M)\"\nM = \"row_sqnorm(Z)\"\nZ = \"one_hot()\"\nB = \"row_sqnorm(XT)\"").unwrap();
        assert_eq!(names(&w), ["B", "Z", "M", "A"]);
        // Cycles, of two and of one, are coded errors that name the cycle.
        let w = parse("", "P = \"inv_row_sum(Q)\"\nQ = \"row_sqnorm(P)\"\nR = \"one_hot()\"").unwrap();
        let m = w.derive_order().unwrap_err().0;
        assert!(m.contains("derive: `P` ← `Q` ← `P` is a cycle") && m.ends_with("[derive_cycle]"), "{m}");
        let w = parse("", "S = \"inv_row_sum(S)\"").unwrap();
        let m = w.derive_order().unwrap_err().0;
        assert!(m.contains("derive: `S` ← `S` is a cycle") && m.ends_with("[derive_cycle]"), "{m}");
        // In validate() a cycle cannot pass the shape checks (every recipe with a source drops
        // an axis, so ranks fall along a chain); the shape is what it names.
        let m = spec("", "OH = \"one_hot()\"\nICNT = \"inv_row_sum(OH)\"\nS = \"inv_row_sum(S)\"").unwrap_err().0;
        assert!(m.contains("derive.S: inv_row_sum(S) drops the innermost axis"), "{m}");
    }
}

#[cfg(test)]
mod embedding_oracle_tests {
    use super::*;

    const PROGRAM: &str = "kernel k target sm_90a\n\ndim R multiple_of 8\nconst V = 1000\nconst H = 256\n\nin Ids: i32[R]\nin IdsF: f32[R]\nin Ids2: i32[H]\nin E: bf16[V, H]\nout Out: bf16[R, H]\nout O32: f32[R, H]\nout OW: bf16[R, 128]\n\ngrid tiles[r = R / 8]\n\nrole all: warp 0..4\n\non all {\n    for t in tiles {\n    }\n}\n";

    fn spec(extra: &str) -> Result<WorkloadSpec, WorkloadError> {
        let text = format!("oracle = \"embedding\"\nheadline = {{ R = 64 }}\nshapes = [{{ R = 32 }}]\n{extra}\n");
        let w = WorkloadSpec::from_toml_str("t.toml", &text)?;
        let out = crate::check::check_source(PROGRAM);
        w.validate(&out.module.unwrap_or_else(|| panic!("{:?}", out.diagnostics)))?;
        Ok(w)
    }

    #[test]
    fn embedding_relates_ids_table_and_out() {
        let w = spec("[inputs]\nIds = { dist = \"uniform\", scale = 499.5, offset = 499.5 }").unwrap();
        assert_eq!((w.role("ids"), w.role("e"), w.role("out")), ("Ids".to_string(), "E".to_string(), "Out".to_string()));
        assert_eq!(OracleName::Embedding.name(), "embedding");
        assert_eq!(w.tolerance(Some(DType::BF16)), Tolerance::EXACT);
        assert!(OracleName::Embedding.checks_every_element() && OracleName::Embedding.distinct_roles());
        assert!(!OracleName::Embedding.is_row_kernel() && !OracleName::Embedding.has_cublas_peer());
        let m = spec("args = { out = \"O32\" }").unwrap_err().0;
        assert!(m.contains("oracle `embedding`: table `E` is bf16 but output `O32` is f32"), "{m}");
        let m = spec("args = { out = \"OW\" }").unwrap_err().0;
        assert!(m.contains("`E` (role `e`) must be [V, 128] with V ≥ 1, but it is [1000, 256]"), "{m}");
        let m = spec("args = { ids = \"Ids2\" }").unwrap_err().0;
        assert!(m.contains("`Out` (role `out`) is [64, 256], so `Ids2` (role `ids`) must be [64], but it is [256]"), "{m}");
        let m = spec("args = { ids = \"IdsF\" }").unwrap_err().0;
        assert!(m.contains("W001: oracle role `ids`: tensor `IdsF` is f32"), "{m}");
        let m = spec("args = { ids = \"E\" }").unwrap_err().0;
        assert!(m.contains("role `ids`: tensor `E` has rank 2, expected 1"), "{m}");
        let m = spec("[inputs]\nOut = { dist = \"uniform\" }").unwrap_err().0;
        assert!(m.contains("output `Out` is poisoned before the launch"), "{m}");
    }
}

#[cfg(test)]
mod kmeans_scatter_oracle_tests {
    use super::*;

    const PROGRAM: &str = "kernel k target sm_90a\n\ndim N multiple_of 8\nconst D = 128\nconst K = 64\n\nin X: bf16[N, D]\nin A: i32[N]\nin AF: f32[N]\ninout SUMS: f32[K, D]\ninout COUNTS: i32[K, 1]\ninout C1: i32[K]\ninout C2: i32[32]\nout SO: f32[K, D]\ninout SW: f32[K, 64]\n\ngrid tiles[n = N / 8]\n\nrole all: warp 0..4\n\non all {\n    for t in tiles {\n    }\n}\n";

    fn spec(extra: &str) -> Result<WorkloadSpec, WorkloadError> {
        let text = format!("oracle = \"kmeans_scatter\"\nheadline = {{ N = 64 }}\nshapes = [{{ N = 32 }}]\n{extra}\n");
        let w = WorkloadSpec::from_toml_str("t.toml", &text)?;
        let out = crate::check::check_source(PROGRAM);
        w.validate(&out.module.unwrap_or_else(|| panic!("{:?}", out.diagnostics)))?;
        Ok(w)
    }

    #[test]
    fn kmeans_scatter_relates_points_ids_sums_and_counts() {
        let w = spec("[inputs]\nA = { dist = \"uniform\", scale = 31.5, offset = 31.5 }").unwrap();
        assert_eq!((w.role("x"), w.role("assign"), w.role("sums"), w.role("counts")), ("X".into(), "A".into(), "SUMS".into(), "COUNTS".into()));
        assert_eq!(w.tolerance(None), crate::runtime::oracle::SCATTER_ADD);
        // The kernel adds onto SUMS and COUNTS: they are filled, never poisoned.
        assert!(!OracleName::KmeansScatter.checks_every_element() && OracleName::KmeansScatter.distinct_roles());
        assert!(spec("args = { counts = \"C1\" }").is_ok(), "COUNTS may be [K]");
        let m = spec("args = { sums = \"SO\" }").unwrap_err().0;
        assert!(m.contains("tensor `SO` must be `inout`"), "{m}");
        let m = spec("args = { sums = \"SW\" }").unwrap_err().0;
        assert!(m.contains("`SW` (role `sums`) must be [K, 128] with K ≥ 1, but it is [64, 64]"), "{m}");
        let m = spec("args = { counts = \"C2\" }").unwrap_err().0;
        assert!(m.contains("`C2` (role `counts`) must be [64] or [64, 1], but it is [32]"), "{m}");
        let m = spec("args = { assign = \"AF\" }").unwrap_err().0;
        assert!(m.contains("W001: oracle role `assign`: tensor `AF` is f32"), "{m}");
    }
}
