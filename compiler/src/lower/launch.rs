//! The launch contract: what the GPU runtime needs to launch a lowered kernel, written as
//! `launch.json` beside the cubin.
//!
//! Sizes that depend on the problem (`dim`s) are [`SizeExpr`] trees over dim names, serialized
//! as small JSON objects (`{"div": [{"dim": "M"}, {"const": 128}]}`); the runtime evaluates them
//! with the dims' values ([`SizeExpr::eval`]). Every expression also comes as text for people.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ir::{Module, Size, SizeOp};

/// Version of the `launch.json` shape; bumped on any incompatible change.
pub const LAUNCH_FORMAT: u32 = 1;

/// A size over the kernel's dims. Integer arithmetic; `div` truncates (sizes are non-negative).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SizeExpr {
    Const(i64),
    Dim(String),
    Add(Box<SizeExpr>, Box<SizeExpr>),
    Sub(Box<SizeExpr>, Box<SizeExpr>),
    Mul(Box<SizeExpr>, Box<SizeExpr>),
    Div(Box<SizeExpr>, Box<SizeExpr>),
}

impl SizeExpr {
    pub fn from_size(m: &Module, s: &Size) -> SizeExpr {
        match s {
            Size::Const(c) => SizeExpr::Const(*c),
            Size::Dim(d) => SizeExpr::Dim(m.dims[*d].name.clone()),
            Size::Bin(op, a, b) => {
                let (a, b) = (Box::new(SizeExpr::from_size(m, a)), Box::new(SizeExpr::from_size(m, b)));
                match op {
                    SizeOp::Add => SizeExpr::Add(a, b),
                    SizeOp::Sub => SizeExpr::Sub(a, b),
                    SizeOp::Mul => SizeExpr::Mul(a, b),
                    SizeOp::Div => SizeExpr::Div(a, b),
                }
            }
        }
    }

    /// `a * b`, folding constants and unit factors.
    pub fn product(a: SizeExpr, b: SizeExpr) -> SizeExpr {
        match (&a, &b) {
            (SizeExpr::Const(1), _) => b,
            (_, SizeExpr::Const(1)) => a,
            (SizeExpr::Const(x), SizeExpr::Const(y)) => SizeExpr::Const(x * y),
            _ => SizeExpr::Mul(Box::new(a), Box::new(b)),
        }
    }

    /// Evaluate with the dims' values (by name).
    pub fn eval(&self, dims: &BTreeMap<String, i64>) -> Result<i64, SizeError> {
        let overflow = || SizeError::Overflow { expr: self.to_string() };
        Ok(match self {
            SizeExpr::Const(c) => *c,
            SizeExpr::Dim(d) => *dims.get(d).ok_or_else(|| SizeError::MissingDim { dim: d.clone() })?,
            SizeExpr::Add(a, b) => a.eval(dims)?.checked_add(b.eval(dims)?).ok_or_else(overflow)?,
            SizeExpr::Sub(a, b) => a.eval(dims)?.checked_sub(b.eval(dims)?).ok_or_else(overflow)?,
            SizeExpr::Mul(a, b) => a.eval(dims)?.checked_mul(b.eval(dims)?).ok_or_else(overflow)?,
            SizeExpr::Div(a, b) => {
                let d = b.eval(dims)?;
                if d == 0 {
                    return Err(SizeError::DivisionByZero { expr: self.to_string() });
                }
                a.eval(dims)? / d
            }
        })
    }

    fn prec(&self) -> u8 {
        match self {
            SizeExpr::Const(_) | SizeExpr::Dim(_) => 3,
            SizeExpr::Mul(..) | SizeExpr::Div(..) => 2,
            SizeExpr::Add(..) | SizeExpr::Sub(..) => 1,
        }
    }

    /// The expression as C (for the kernel's own copies of launch-time sizes).
    pub fn to_c(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for SizeExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (op, a, b) = match self {
            SizeExpr::Const(c) => return write!(f, "{c}"),
            SizeExpr::Dim(d) => return write!(f, "{d}"),
            SizeExpr::Add(a, b) => ("+", a, b),
            SizeExpr::Sub(a, b) => ("-", a, b),
            SizeExpr::Mul(a, b) => ("*", a, b),
            SizeExpr::Div(a, b) => ("/", a, b),
        };
        let p = self.prec();
        if a.prec() < p {
            write!(f, "({a})")?;
        } else {
            write!(f, "{a}")?;
        }
        write!(f, " {op} ")?;
        // Left-associative: the right operand needs parentheses at equal precedence.
        if b.prec() <= p {
            write!(f, "({b})")
        } else {
            write!(f, "{b}")
        }
    }
}

/// Everything needed to launch the kernel. See the module documentation of `crate::lower` for
/// the parameter ABI.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchSpec {
    /// [`LAUNCH_FORMAT`].
    pub format: u32,
    /// The kernel's name in the program.
    pub kernel: String,
    /// The `extern "C"` entry symbol in the cubin.
    pub entry: String,
    /// Program target (`sm_90a`) and the architecture the cubin was built for.
    pub target: String,
    pub arch: String,
    /// Threads per block (1-D: `blockDim = (block_threads, 1, 1)`).
    pub block_threads: u32,
    /// Dynamic shared memory per block in bytes (the `sharedMemBytes` launch argument). Above
    /// 48 KiB the runtime must first raise `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
    pub dynamic_smem_bytes: u32,
    /// `dynamic_smem_bytes > 49152`.
    pub needs_smem_opt_in: bool,
    /// Cluster shape (x, y, z); `[1, 1, 1]` launches without a cluster attribute.
    pub cluster: [u32; 3],
    pub grid: GridSpec,
    /// The problem-size parameters, in declaration order.
    pub dims: Vec<DimSpec>,
    /// Kernel parameters in ABI order.
    pub params: Vec<ParamSpec>,
    /// One entry per `tma` tensor, in declaration order (`ParamSpec::TensorMap::map` indexes it).
    pub tensor_maps: Vec<TensorMapSpec>,
    /// Where each shared-memory object lives (offsets from the 1024-aligned base), for debugging.
    pub smem_layout: Vec<SmemSlot>,
}

/// The grid rule. Launch `grid = (blocks, 1, 1)` with `blocks = sm_count` (the device's
/// multiprocessor count, read at launch) when `persistent`, else `blocks = tiles` evaluated with
/// the dims. Each block walks tiles `blockIdx.x, blockIdx.x + gridDim.x, ...` below `tiles`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GridSpec {
    pub persistent: bool,
    /// Number of tiles: the product of the tile-space axis extents.
    pub tiles: SizeExpr,
    pub tiles_text: String,
    /// The tile-space axes in declaration order.
    pub axes: Vec<GridAxisSpec>,
    /// How a linear tile index becomes axis indices: `"last_axis_fastest"` (row-major over the
    /// axes as declared: for `tiles[m, n]`, `n = tile % extent(n)`, `m = tile / extent(n)`), or
    /// `"grouped"` (`group` below: the last two axes `[.., r, c]` are walked in bands of `group`
    /// values of `r`, `r` fastest inside a band; earlier axes vary slowest).
    pub rasterization: String,
    /// The band height of `"grouped"` rasterization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GridAxisSpec {
    pub name: String,
    pub extent: SizeExpr,
    pub extent_text: String,
}

impl GridSpec {
    /// `gridDim.x` for the given dims and device multiprocessor count.
    pub fn blocks(&self, dims: &BTreeMap<String, i64>, sm_count: u32) -> Result<u32, SizeError> {
        if self.persistent {
            return Ok(sm_count);
        }
        let t = self.tiles.eval(dims)?;
        u32::try_from(t).map_err(|_| SizeError::GridOutOfRange { blocks: t })
    }
}

/// Why a launch-time size has no value at the given dims; a run reports it as a `shape` error
/// (pass dims the program declares, small enough for 64-bit sizes and a `u32` grid).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("no value for dim `{dim}`")]
    MissingDim { dim: String },
    #[error("`{expr}` overflows 64 bits")]
    Overflow { expr: String },
    #[error("division by zero in `{expr}`")]
    DivisionByZero { expr: String },
    #[error("grid of {blocks} blocks is out of range")]
    GridOutOfRange { blocks: i64 },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DimSpec {
    pub name: String,
    /// The declared `multiple_of` (the runtime should reject values that are not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiple_of: Option<i64>,
}

/// One kernel parameter. ABI order: for each tensor in declaration order its device pointer,
/// immediately followed (for `tma` tensors) by its `CUtensorMap`; then each `dim` as a 32-bit
/// signed integer; then each `scalar` by value in its dtype.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ParamSpec {
    /// A raw device pointer (8 bytes) to the tensor's first element; contiguous row-major
    /// (innermost dimension last in `shape`).
    TensorPtr { name: String, tensor: String, dtype: String, access: String, shape: Vec<SizeExpr>, shape_text: Vec<String> },
    /// A `CUtensorMap` (128 bytes, 64-byte aligned) passed by value as
    /// `const __grid_constant__ CUtensorMap`; `map` indexes `LaunchSpec::tensor_maps`.
    TensorMap { name: String, tensor: String, map: usize },
    /// A dim as `int32`.
    Dim { name: String, ctype: String },
    /// A scalar argument by value.
    Scalar { name: String, dtype: String, ctype: String },
}

/// How to build one tensor map with `cuTensorMapEncodeTiled`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorMapSpec {
    pub tensor: String,
    /// The kernel parameter that carries it.
    pub param: String,
    pub dtype: String,
    /// `CUtensorMapDataType` (UINT8 = 0, UINT16 = 1, UINT32 = 2, INT32 = 3, UINT64 = 4,
    /// INT64 = 5, FLOAT16 = 6, FLOAT32 = 7, FLOAT64 = 8, BFLOAT16 = 9).
    pub data_type: u32,
    pub rank: u32,
    /// `globalDim`, innermost dimension first, in elements.
    pub global_dims: Vec<SizeExpr>,
    pub global_dims_text: Vec<String>,
    /// `globalStrides`: the byte strides of dimensions 1..rank, innermost-first order (rank - 1
    /// entries; dimension 0 is contiguous).
    pub global_strides_bytes: Vec<SizeExpr>,
    pub global_strides_text: Vec<String>,
    /// `boxDim`, innermost first, in elements.
    pub box_dims: Vec<u32>,
    /// `elementStrides`, innermost first (all 1).
    pub element_strides: Vec<u32>,
    /// `CUtensorMapInterleave`: NONE = 0.
    pub interleave: u32,
    /// `CUtensorMapSwizzle`: NONE = 0, 32B = 1, 64B = 2, 128B = 3. (The wgmma descriptor encodes
    /// swizzle in the opposite order: 1 = 128B, 2 = 64B, 3 = 32B.)
    pub swizzle: u32,
    pub swizzle_bytes: u32,
    /// `CUtensorMapL2promotion`: NONE = 0, 64B = 1, 128B = 2, 256B = 3.
    pub l2_promotion: u32,
    /// `CUtensorMapFloatOOBfill`: NONE = 0 (out-of-bounds elements read as zero).
    pub oob_fill: u32,
    /// Bytes one box delivers to shared memory (what `expect_tx` counts per load).
    pub box_bytes: u64,
}

/// One object in dynamic shared memory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmemSlot {
    pub name: String,
    /// `region`, `mbarrier`, `view of REGION` (bytes of that region under another type).
    pub kind: String,
    pub offset: u64,
    pub bytes: u64,
    pub align: u64,
}
