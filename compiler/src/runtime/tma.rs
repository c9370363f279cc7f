//! TMA tensor maps: the host-side description, its validation, and (on a GPU) its encoding
//! through `cuTensorMapEncodeTiled`.
//!
//! Validation runs before the driver sees anything and answers with a coded [`TmaError`], so a
//! bad descriptor is evidence with a stable name instead of a bare `CUDA_ERROR_INVALID_VALUE`.
//! The limits are the driver's documented ones (`cuTensorMapEncodeTiled`, CUDA 12/13): rank 1..=5; global address 16-B aligned; every global stride a
//! multiple of 16 B and < 2^40; global dims in 1..=2^32; box dims in 1..=256; the inner box row
//! (box[0] × element size) a multiple of 16 B and, with a swizzle, at most the swizzle span;
//! element strides in 1..=8.

use serde::{Deserialize, Serialize};

use crate::ir::{DType, Swizzle};

/// A tensor map for one tensor argument, without its device address. All per-dimension lists
/// are innermost (contiguous) dimension first, the driver's order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorMapSpec {
    pub tensor: String,
    #[serde(with = "super::convert::dtype_serde")]
    pub dtype: DType,
    /// Extent of each dimension, innermost first.
    pub global_dims: Vec<u64>,
    /// Byte stride of dimensions 1..rank (innermost-first order; the innermost stride is the
    /// element size and is not passed), `rank - 1` entries.
    pub global_strides: Vec<u64>,
    /// Box extent per dimension, innermost first.
    pub box_dims: Vec<u32>,
    /// Traversal stride per dimension (1 = dense), innermost first.
    pub element_strides: Vec<u32>,
    pub swizzle: SwizzleSer,
}

/// `Swizzle` with serde (the IR's enum serializes but does not deserialize).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SwizzleSer {
    None,
    #[serde(rename = "32B")]
    B32,
    #[serde(rename = "64B")]
    B64,
    #[serde(rename = "128B")]
    B128,
}

impl From<Swizzle> for SwizzleSer {
    fn from(s: Swizzle) -> Self {
        match s {
            Swizzle::None => SwizzleSer::None,
            Swizzle::B32 => SwizzleSer::B32,
            Swizzle::B64 => SwizzleSer::B64,
            Swizzle::B128 => SwizzleSer::B128,
        }
    }
}

impl SwizzleSer {
    pub fn bytes(self) -> u64 {
        match self {
            SwizzleSer::None => 0,
            SwizzleSer::B32 => 32,
            SwizzleSer::B64 => 64,
            SwizzleSer::B128 => 128,
        }
    }

    /// The `CUtensorMapSwizzle` value (NONE=0, 32B=1, 64B=2, 128B=3 — the opposite order of the
    /// wgmma descriptor's encoding).
    pub fn cu_enum(self) -> u32 {
        match self {
            SwizzleSer::None => 0,
            SwizzleSer::B32 => 1,
            SwizzleSer::B64 => 2,
            SwizzleSer::B128 => 3,
        }
    }
}

impl TensorMapSpec {
    /// A dense row-major tensor `shape` (outermost first, as declared) with a box `box_outer_first`
    /// (outermost first, as written in `tma [..]`).
    pub fn dense(
        tensor: &str,
        dtype: DType,
        shape: &[u64],
        box_outer_first: &[u64],
        swizzle: Swizzle,
    ) -> TensorMapSpec {
        let global_dims: Vec<u64> = shape.iter().rev().copied().collect();
        let mut global_strides = Vec::new();
        let mut stride = dtype.size_bytes();
        for d in global_dims.iter().take(global_dims.len().saturating_sub(1)) {
            stride = stride.saturating_mul(*d);
            global_strides.push(stride);
        }
        TensorMapSpec {
            tensor: tensor.to_string(),
            dtype,
            global_dims,
            global_strides,
            box_dims: box_outer_first.iter().rev().map(|&b| u32::try_from(b).unwrap_or(u32::MAX)).collect(),
            element_strides: vec![1; shape.len()],
            swizzle: swizzle.into(),
        }
    }

    pub fn rank(&self) -> usize {
        self.global_dims.len()
    }

    /// Check every documented limit of `cuTensorMapEncodeTiled` for a map at `address`.
    pub fn validate(&self, address: u64) -> Result<(), TmaError> {
        let t = self.tensor.clone();
        let rank = self.rank();
        if !(1..=5).contains(&rank) {
            return Err(TmaError::Rank { tensor: t, rank });
        }
        if self.box_dims.len() != rank || self.element_strides.len() != rank || self.global_strides.len() + 1 != rank {
            return Err(TmaError::Inconsistent {
                tensor: t,
                detail: format!(
                    "rank {rank} but {} box dims, {} element strides, {} global strides (want {})",
                    self.box_dims.len(),
                    self.element_strides.len(),
                    self.global_strides.len(),
                    rank - 1
                ),
            });
        }
        if !address.is_multiple_of(16) {
            return Err(TmaError::AddressAlign { tensor: t, address });
        }
        for (i, &d) in self.global_dims.iter().enumerate() {
            if d == 0 || d > 1 << 32 {
                return Err(TmaError::GlobalDim { tensor: t, dim: i, value: d });
            }
        }
        for (i, &s) in self.global_strides.iter().enumerate() {
            if !s.is_multiple_of(16) {
                return Err(TmaError::StrideAlign { tensor: t, dim: i + 1, stride: s });
            }
            if s >= 1 << 40 {
                return Err(TmaError::StrideRange { tensor: t, dim: i + 1, stride: s });
            }
        }
        for (i, &b) in self.box_dims.iter().enumerate() {
            if b == 0 || b > 256 {
                return Err(TmaError::BoxDim { tensor: t, dim: i, value: b });
            }
        }
        for (i, &e) in self.element_strides.iter().enumerate() {
            if e == 0 || e > 8 {
                return Err(TmaError::ElementStride { tensor: t, dim: i, value: e });
            }
        }
        let inner = u64::from(self.box_dims[0]) * self.dtype.size_bytes();
        if !inner.is_multiple_of(16) {
            return Err(TmaError::InnerBoxBytes { tensor: t, bytes: inner });
        }
        let span = self.swizzle.bytes();
        if span != 0 && inner > span {
            return Err(TmaError::SwizzleSpan { tensor: t, bytes: inner, span });
        }
        if tensor_map_dtype(self.dtype).is_none() {
            return Err(TmaError::DType { tensor: t, dtype: self.dtype });
        }
        Ok(())
    }
}

/// The `CUtensorMapDataType` value for a dtype (fp8 and bool travel as UINT8).
pub fn tensor_map_dtype(d: DType) -> Option<u32> {
    Some(match d {
        DType::Bool | DType::F8E4M3 | DType::F8E5M2 => 0, // UINT8
        DType::U32 => 2,
        DType::I32 => 3,
        DType::I64 => 5,
        DType::F16 => 6,
        DType::F32 => 7,
        DType::BF16 => 9,
    })
}

/// A tensor map that the driver would refuse (or that would silently misbehave).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TmaError {
    Rank { tensor: String, rank: usize },
    Inconsistent { tensor: String, detail: String },
    AddressAlign { tensor: String, address: u64 },
    GlobalDim { tensor: String, dim: usize, value: u64 },
    StrideAlign { tensor: String, dim: usize, stride: u64 },
    StrideRange { tensor: String, dim: usize, stride: u64 },
    BoxDim { tensor: String, dim: usize, value: u32 },
    ElementStride { tensor: String, dim: usize, value: u32 },
    InnerBoxBytes { tensor: String, bytes: u64 },
    SwizzleSpan { tensor: String, bytes: u64, span: u64 },
    DType { tensor: String, dtype: DType },
}

impl TmaError {
    /// The stable error class written to run records.
    pub fn code(&self) -> &'static str {
        match self {
            TmaError::Rank { .. } => "tma_rank",
            TmaError::Inconsistent { .. } => "tma_inconsistent",
            TmaError::AddressAlign { .. } => "tma_address_align",
            TmaError::GlobalDim { .. } => "tma_global_dim",
            TmaError::StrideAlign { .. } => "tma_stride_align",
            TmaError::StrideRange { .. } => "tma_stride_range",
            TmaError::BoxDim { .. } => "tma_box_dim",
            TmaError::ElementStride { .. } => "tma_element_stride",
            TmaError::InnerBoxBytes { .. } => "tma_inner_box_bytes",
            TmaError::SwizzleSpan { .. } => "tma_swizzle_span",
            TmaError::DType { .. } => "tma_dtype",
        }
    }
}

impl std::fmt::Display for TmaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TmaError::Rank { tensor, rank } => write!(f, "tensor map of `{tensor}`: rank {rank} is outside 1..=5"),
            TmaError::Inconsistent { tensor, detail } => write!(f, "tensor map of `{tensor}`: {detail}"),
            TmaError::AddressAlign { tensor, address } => {
                write!(f, "tensor map of `{tensor}`: global address {address:#x} is not 16-byte aligned")
            }
            TmaError::GlobalDim { tensor, dim, value } => {
                write!(f, "tensor map of `{tensor}`: global dim {dim} (innermost first) is {value}, outside 1..=2^32")
            }
            TmaError::StrideAlign { tensor, dim, stride } => write!(
                f,
                "tensor map of `{tensor}`: global stride of dim {dim} (innermost first) is {stride} B, not a multiple of 16 B \
                 (the row of the next-inner dims must be 16-B aligned)"
            ),
            TmaError::StrideRange { tensor, dim, stride } => {
                write!(f, "tensor map of `{tensor}`: global stride of dim {dim} is {stride} B, not below 2^40")
            }
            TmaError::BoxDim { tensor, dim, value } => {
                write!(f, "tensor map of `{tensor}`: box dim {dim} (innermost first) is {value}, outside 1..=256")
            }
            TmaError::ElementStride { tensor, dim, value } => {
                write!(f, "tensor map of `{tensor}`: element stride {value} of dim {dim} is outside 1..=8")
            }
            TmaError::InnerBoxBytes { tensor, bytes } => {
                write!(f, "tensor map of `{tensor}`: the inner box row is {bytes} B, not a multiple of 16 B")
            }
            TmaError::SwizzleSpan { tensor, bytes, span } => write!(
                f,
                "tensor map of `{tensor}`: the inner box row is {bytes} B, more than the {span} B swizzle span"
            ),
            TmaError::DType { tensor, dtype } => write!(f, "tensor map of `{tensor}`: dtype {dtype} has no TMA data type"),
        }
    }
}

impl std::error::Error for TmaError {}

/// A `CUtensorMap` as a kernel parameter: 128 opaque bytes, 64-byte aligned, passed by value
/// (the kernel declares it `const __grid_constant__ CUtensorMap`).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorMapArg {
    pub opaque: [u64; 16],
}

const _: () = assert!(std::mem::size_of::<TensorMapArg>() == 128);
const _: () = assert!(std::mem::align_of::<TensorMapArg>() == 64);

#[cfg(test)]
mod tests {
    use super::*;

    fn gemm_a() -> TensorMapSpec {
        TensorMapSpec::dense("A", DType::BF16, &[8192, 8192], &[128, 64], Swizzle::B128)
    }

    #[test]
    fn dense_layout_is_innermost_first() {
        let m = gemm_a();
        assert_eq!(m.global_dims, vec![8192, 8192]);
        assert_eq!(m.global_strides, vec![8192 * 2]);
        assert_eq!(m.box_dims, vec![64, 128]);
        assert_eq!(m.validate(0x7f00_0000_0000), Ok(()));
        let x = TensorMapSpec::dense("X", DType::BF16, &[32, 65536, 128], &[1, 128, 64], Swizzle::B128);
        assert_eq!(x.global_dims, vec![128, 65536, 32]);
        assert_eq!(x.global_strides, vec![256, 256 * 65536]);
        assert_eq!(x.box_dims, vec![64, 128, 1]);
        assert_eq!(x.validate(0), Ok(()));
        let cn = TensorMapSpec::dense("CN", DType::F32, &[32, 1024], &[1, 128], Swizzle::None);
        assert_eq!(cn.validate(0), Ok(()));
    }

    #[test]
    fn every_limit_has_its_code() {
        let codes = |m: &TensorMapSpec, addr: u64| m.validate(addr).err().map(|e| e.code());
        assert_eq!(codes(&gemm_a(), 8), Some("tma_address_align"));

        let mut m = gemm_a();
        m.global_dims = vec![8, 8, 8, 8, 8, 8];
        assert_eq!(codes(&m, 0), Some("tma_rank"));

        // K = 100 bf16 → row stride 200 B.
        let m = TensorMapSpec::dense("A", DType::BF16, &[128, 100], &[128, 64], Swizzle::B128);
        assert_eq!(codes(&m, 0), Some("tma_stride_align"));

        let mut m = gemm_a();
        m.global_strides = vec![1 << 40];
        assert_eq!(codes(&m, 0), Some("tma_stride_range"));

        let m = TensorMapSpec::dense("A", DType::BF16, &[8192, 8192], &[512, 64], Swizzle::B128);
        assert_eq!(codes(&m, 0), Some("tma_box_dim"));

        // 4 bf16 = 8 B inner row.
        let m = TensorMapSpec::dense("A", DType::BF16, &[8192, 8192], &[128, 4], Swizzle::None);
        assert_eq!(codes(&m, 0), Some("tma_inner_box_bytes"));

        // 128 bf16 = 256 B inner row with a 128 B swizzle.
        let m = TensorMapSpec::dense("A", DType::BF16, &[8192, 8192], &[128, 128], Swizzle::B128);
        let e = m.validate(0).unwrap_err();
        assert_eq!(e.code(), "tma_swizzle_span");
        assert!(e.to_string().contains("256 B, more than the 128 B swizzle span"), "{e}");

        let mut m = gemm_a();
        m.element_strides = vec![1, 9];
        assert_eq!(codes(&m, 0), Some("tma_element_stride"));

        let mut m = gemm_a();
        m.global_dims = vec![0, 8];
        assert_eq!(codes(&m, 0), Some("tma_global_dim"));

        let mut m = gemm_a();
        m.box_dims = vec![64];
        assert_eq!(codes(&m, 0), Some("tma_inconsistent"));
    }

    #[test]
    fn swizzle_enum_is_the_tensor_map_order() {
        assert_eq!(SwizzleSer::from(Swizzle::B128).cu_enum(), 3);
        assert_eq!(SwizzleSer::from(Swizzle::B32).cu_enum(), 1);
        assert_eq!(serde_json::to_string(&SwizzleSer::B128).unwrap(), "\"128B\"");
    }
}
