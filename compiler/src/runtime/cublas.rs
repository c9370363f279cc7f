//! cuBLAS (cudarc `cublas::sys`, dynamically loaded): the GEMM oracle and speed baseline.
//!
//! `C = A·Bᵀ` with row-major A[M,K], B[N,K], C[M,N] is, in cuBLAS's column-major terms,
//! `Cᵀ (N×M, ld N) = op(B) · op(A)` with B read as K×N (ld K) transposed and A as K×M (ld K)
//! untransposed: `cublasGemmEx(T, N, m=N, n=M, k=K, B, ldb=K, A, lda=K, C, ldc=N)` — the "TN"
//! layout cuBLAS is fastest at. bf16 in, fp32 compute (`CUBLAS_COMPUTE_32F`), bf16 out.

use std::ffi::{c_void, CStr};

use cudarc::cublas::sys as cb;
use cudarc::driver::sys;

use super::error::RunError;
use super::gpu::guard;

pub struct Cublas {
    handle: cb::cublasHandle_t,
}

fn status(stage: &str, s: cb::cublasStatus_t) -> Result<(), RunError> {
    if s == cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        return Ok(());
    }
    let name = format!("{s:?}");
    // SAFETY: returns a static string.
    let text = unsafe {
        let p = cb::cublasGetStatusString(s);
        if p.is_null() {
            String::new()
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    };
    Err(RunError::new(name.clone(), format!("{stage}: {name} ({text})")))
}

/// The cuBLAS element type of a dtype this oracle supports.
fn data_type(d: crate::ir::DType) -> Option<cb::cudaDataType> {
    use crate::ir::DType;
    Some(match d {
        DType::BF16 => cb::cudaDataType::CUDA_R_16BF,
        DType::F16 => cb::cudaDataType::CUDA_R_16F,
        DType::F32 => cb::cudaDataType::CUDA_R_32F,
        _ => return None,
    })
}

impl Cublas {
    /// A handle bound to `stream` (in the current, primary context). `cublas_unavailable` when
    /// the library cannot be loaded.
    pub fn new(stream: sys::CUstream) -> Result<Cublas, RunError> {
        // SAFETY: dlopen probe only.
        if !unsafe { cb::is_culib_present() } {
            return Err(RunError::new(
                "cublas_unavailable",
                "libcublas.so.13 was not found (put the CUDA toolkit's lib64 or the nvidia-cublas wheel's lib on LD_LIBRARY_PATH)",
            ));
        }
        guard("cublasCreate", || {
            let mut handle: cb::cublasHandle_t = std::ptr::null_mut();
            // SAFETY: out-pointer to a local; stream is a live driver stream (same ABI type).
            unsafe {
                status("cublasCreate", cb::cublasCreate_v2(&mut handle))?;
                let c = Cublas { handle };
                status("cublasSetStream", cb::cublasSetStream_v2(c.handle, stream as cb::cudaStream_t))?;
                Ok(c)
            }
        })
    }

    /// Enqueue C[M,N] = A[M,K]·B[N,K]ᵀ (row-major, all of `dtype`, fp32 accumulation).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_abt(&self, dtype: crate::ir::DType, a: u64, b: u64, c: u64, m: u64, n: u64, k: u64) -> Result<(), RunError> {
        self.gemm_abt_batched(dtype, a, b, c, m, n, k, 1)
    }

    /// `batch` independent C_i = A_i·B_iᵀ, the operands of each one after the other (strides
    /// M·K, N·K, M·N elements). One batch is `cublasGemmEx`, more `cublasGemmStridedBatchedEx`.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_abt_batched(&self, dtype: crate::ir::DType, a: u64, b: u64, c: u64, m: u64, n: u64, k: u64, batch: u64) -> Result<(), RunError> {
        let t = data_type(dtype)
            .ok_or_else(|| RunError::new("cublas_unsupported", format!("no cuBLAS GEMM for {dtype}")))?;
        let to_i32 = |v: u64, what: &str| {
            i32::try_from(v).map_err(|_| RunError::new("cublas_unsupported", format!("{what} = {v} exceeds i32")))
        };
        let (mi, ni, ki, bi) = (to_i32(m, "M")?, to_i32(n, "N")?, to_i32(k, "K")?, to_i32(batch, "batch")?);
        let alpha = 1.0f32;
        let beta = 0.0f32;
        let (op_t, op_n) = (cb::cublasOperation_t::CUBLAS_OP_T, cb::cublasOperation_t::CUBLAS_OP_N);
        let (alpha_p, beta_p) = (&alpha as *const f32 as *const c_void, &beta as *const f32 as *const c_void);
        let (compute, algo) = (cb::cublasComputeType_t::CUBLAS_COMPUTE_32F, cb::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT);
        let what = if batch == 1 { "cublasGemmEx" } else { "cublasGemmStridedBatchedEx" };
        guard(what, || {
            // SAFETY: device pointers hold batch·M·K, batch·N·K and batch·M·N elements (the
            // caller allocated them from the same shapes); scalars live on the host for the call.
            unsafe {
                status(
                    what,
                    if batch == 1 {
                        cb::cublasGemmEx(self.handle, op_t, op_n, ni, mi, ki, alpha_p, b as *const c_void, t, ki, a as *const c_void, t, ki, beta_p, c as *mut c_void, t, ni, compute, algo)
                    } else {
                        let (sa, sb, sc) = ((m * k) as i64, (n * k) as i64, (m * n) as i64);
                        cb::cublasGemmStridedBatchedEx(
                            self.handle, op_t, op_n, ni, mi, ki, alpha_p, b as *const c_void, t, ki, sb, a as *const c_void, t, ki, sa, beta_p,
                            c as *mut c_void, t, ni, sc, bi, compute, algo,
                        )
                    },
                )
            }
        })
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        // SAFETY: created by cublasCreate.
        unsafe {
            let _ = cb::cublasDestroy_v2(self.handle);
        }
    }
}
