//! The GPU runtime: runs a built kernel on the GPU against an oracle independent of Cake,
//! times it, and writes run records (evidence). See `README.md` beside this file for the
//! workload schema, the run-record format and the child-process protocol.
//!
//! - [`workload`]: the `*.workload.toml` spec (oracle, distributions, shapes, tolerance), its
//!   small parsers' and shape checks' errors in [`workload_errors`];
//! - [`rng`], [`convert`]: deterministic inputs and host-side number formats;
//! - [`tma`]: tensor-map description and validation;
//! - [`gpu`], [`cublas`]: the CUDA driver API and cuBLAS through cudarc (dynamically loaded);
//! - [`oracle`]: reference answers and comparisons, one file per oracle family;
//! - [`expr`]: the `elementwise` workload's expression language (parsed and evaluated in fp64);
//! - [`job`]: one run in a child process; [`isolate`]: spawning it with a timeout;
//! - [`record`]: content-addressed run records; [`harness`]: `cake run` / `cake bench`;
//! - [`rounds`]: the interleaved-rounds statistic of a ratio against a peer.

pub mod convert;
pub mod cublas;
pub mod error;
pub mod expr;
pub mod gpu;
pub mod harness;
pub mod isolate;
pub mod job;
pub mod oracle;
pub mod record;
pub mod rng;
pub mod rounds;
pub mod timing_lock;
pub mod tma;
pub mod workload;
pub mod workload_errors;
