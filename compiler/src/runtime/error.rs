//! Errors of a run, each with a stable class name (the run record's `error.class`).
//!
//! Classes: CUDA driver errors by their driver name (`CUDA_ERROR_ILLEGAL_ADDRESS`,
//! `CUDA_ERROR_MISALIGNED_ADDRESS`, `CUDA_ERROR_LAUNCH_FAILED`, ...); cuBLAS errors by theirs
//! (`CUBLAS_STATUS_...`); TMA validation failures by their `tma_*` code; and the harness's own:
//! `no_gpu`, `timeout`, `child_crashed`, `workload`, `shape`, `build`, `arch`, `smem_too_large`,
//! `out_of_memory`, `io`, `internal`.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunError {
    pub class: String,
    pub message: String,
}

pub const NO_GPU: &str = "no_gpu";

impl RunError {
    pub fn new(class: impl Into<String>, message: impl Into<String>) -> RunError {
        RunError { class: class.into(), message: message.into() }
    }

    /// No driver library, no device: callers turn this into a skip. The message starts with
    /// "no GPU: ".
    pub fn no_gpu(why: impl std::fmt::Display) -> RunError {
        RunError::new(NO_GPU, format!("no GPU: {why}"))
    }

    pub fn is_no_gpu(&self) -> bool {
        self.class == NO_GPU
    }

    pub fn internal(message: impl Into<String>) -> RunError {
        RunError::new("internal", message)
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{}] {}", self.class, self.message)
    }
}

impl std::error::Error for RunError {}

impl From<super::tma::TmaError> for RunError {
    fn from(e: super::tma::TmaError) -> Self {
        RunError::new(e.code(), e.to_string())
    }
}
