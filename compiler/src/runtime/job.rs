//! One run of one kernel at one shape, as a self-contained JSON job that a child process
//! executes (`cake __run-child --job FILE`): open the GPU, generate and upload inputs, encode
//! tensor maps, load the cubin, launch, check against the oracle (and cuBLAS), time, and write a
//! [`JobResult`] to the job's `result` path. The parent ([`super::isolate`]) turns a child that
//! hangs or dies into a result too.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::convert;
use super::cublas::Cublas;
use super::error::RunError;
use super::gpu::{encode_tensor_map, DevBuf, Gpu, GpuInfo, KernelFacts, LaunchDims};
use super::oracle::{self, CheckReport};
use super::rng::{Dist, Rng};
use super::rounds::Rounds;
use super::timing_lock::{self, TimingLock};
use super::tma::{SwizzleSer, TensorMapArg, TensorMapSpec};
use super::workload::{Baseline, Derive, OracleName, Shape, WorkloadSpec};
use crate::ir::DType;
use crate::lower::{LaunchSpec, ParamSpec};

pub const JOB_FORMAT: u32 = 1;

/// Elements per generator stream: inputs are the same whatever the thread count.
pub const GEN_CHUNK: usize = 1 << 16;

/// Default size of the buffer written before every timed sample to flush the L2 (60 MB on H200).
pub const L2_FLUSH_BYTES: u64 = 256 << 20;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Job {
    pub format: u32,
    /// The cubin (or PTX) to load.
    pub cubin: PathBuf,
    pub launch: LaunchSpec,
    pub shape: Shape,
    pub workload: WorkloadSpec,
    /// Overrides every filled input's distribution.
    pub dist: Option<Dist>,
    pub seed: u64,
    pub warmup: u32,
    /// Timed samples per round.
    pub repeats: u32,
    /// Interleaved rounds of kernel and peer when a peer is timed (`rounds.rs`); one otherwise.
    #[serde(default = "one_round")]
    pub rounds: u32,
    pub baseline: Baseline,
    /// Compare the whole output with cuBLAS (matmul_abt only).
    pub cublas_check: bool,
    /// How long one wait for the GPU may take before the run counts as hung.
    pub kernel_timeout_s: f64,
    pub l2_flush_bytes: u64,
    /// Where the child writes its [`JobResult`].
    pub result: PathBuf,
    /// Test hook: behave like a child that sleeps, crashes or answers a canned result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fake: Option<Fake>,
}

fn one_round() -> u32 {
    1
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fake {
    /// Print a stage line, then sleep (a hung kernel).
    Sleep { seconds: f64 },
    /// Exit with this code and write nothing (a crash).
    Exit { code: i32 },
    /// Abort (SIGABRT).
    Abort,
    /// Write this result.
    Answer { result: Box<JobResult> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Mismatch,
    Error,
    Timeout,
    Skipped,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Mismatch => "mismatch",
            Verdict::Error => "error",
            Verdict::Timeout => "timeout",
            Verdict::Skipped => "skipped",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Times {
    pub median_ms: f64,
    pub min_ms: f64,
    pub p90_ms: f64,
    pub mean_ms: f64,
    pub repeats: u32,
    pub warmup: u32,
    /// Bytes written before each sample to flush the L2 (not timed).
    pub l2_flush_bytes: u64,
    pub samples_ms: Vec<f64>,
}

impl Times {
    pub fn from_samples(samples: Vec<f64>, warmup: u32, l2_flush_bytes: u64) -> Option<Times> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.clone();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median = super::rounds::median_of_sorted(&s);
        // Nearest-rank p90.
        let p90 = s[((0.9 * n as f64).ceil() as usize).clamp(1, n) - 1];
        Some(Times {
            median_ms: median,
            min_ms: s[0],
            p90_ms: p90,
            mean_ms: s.iter().sum::<f64>() / n as f64,
            repeats: n as u32,
            warmup,
            l2_flush_bytes,
            samples_ms: samples,
        })
    }
}

/// One tensor as allocated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorFacts {
    pub name: String,
    pub dtype: String,
    pub shape: Vec<u64>,
    pub bytes: u64,
    /// `input` (with its distribution), `derived` (with its recipe) or `output` (poisoned).
    pub role: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaunchFacts {
    pub entry: String,
    pub dims: LaunchDims,
    /// What the driver says about the loaded kernel.
    pub kernel: KernelFacts,
    /// The tensor maps as encoded (concrete dims, strides, boxes).
    pub tensor_maps: Vec<TensorMapSpec>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BaselineResult {
    pub name: String,
    pub times: Times,
    /// Per-round medians of the kernel and the peer, timed in interleaved rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<Rounds>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobResult {
    pub verdict: Verdict,
    pub error: Option<RunError>,
    /// The last stage the child reached.
    pub stage: String,
    pub gpu: Option<GpuInfo>,
    pub launch: Option<LaunchFacts>,
    pub tensors: Vec<TensorFacts>,
    pub checks: Vec<CheckReport>,
    pub times: Option<Times>,
    pub baseline: Option<BaselineResult>,
    pub notes: Vec<String>,
}

impl JobResult {
    pub fn empty() -> JobResult {
        JobResult {
            verdict: Verdict::Error,
            error: None,
            stage: "start".into(),
            gpu: None,
            launch: None,
            tensors: Vec::new(),
            checks: Vec::new(),
            times: None,
            baseline: None,
            notes: Vec::new(),
        }
    }

    /// A result for an error, with the verdict its class implies.
    pub fn from_error(e: RunError, stage: &str) -> JobResult {
        let mut r = JobResult::empty();
        r.stage = stage.into();
        r.verdict = verdict_of_error(&e);
        r.error = Some(e);
        r
    }
}

pub fn verdict_of_error(e: &RunError) -> Verdict {
    if e.is_no_gpu() {
        Verdict::Skipped
    } else if e.class == "timeout" {
        Verdict::Timeout
    } else {
        Verdict::Error
    }
}

/// The line prefix the parent reads to learn a hung child's last stage.
pub const STAGE_PREFIX: &str = "cake-child: stage ";

fn stage(res: &mut JobResult, on: &mut dyn FnMut(ChildEvent<'_>), name: &str) {
    res.stage = name.to_string();
    on(ChildEvent::Stage(name));
}

/// What a running job reports as it goes: the child prints each on stderr, where the parent reads
/// a hung child's last stage ([`STAGE_PREFIX`]) and a failure's log line.
#[derive(Clone, Copy, Debug)]
pub enum ChildEvent<'a> {
    /// A stage starts.
    Stage(&'a str),
    /// The run failed with this error during this stage (the result records it too).
    Failed(&'a RunError, &'a str),
}

/// Why a job file could not be read or a result written (the child then exits 2 and the parent
/// reports `child_crashed` with the child's stderr).
#[derive(Debug, thiserror::Error)]
pub enum JobFileError {
    #[error("cannot read job {}: {message}", path.display())]
    ReadJob { path: PathBuf, message: String },
    #[error("cannot write {}: {message}", path.display())]
    WriteResult { path: PathBuf, message: String },
    #[error("cannot rename to {}: {message}", path.display())]
    RenameResult { path: PathBuf, message: String },
}

/// The job file the parent wrote.
pub fn read_job(path: &Path) -> Result<Job, JobFileError> {
    std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|message| JobFileError::ReadJob { path: path.to_path_buf(), message })
}

/// Run one (real) job in this process: open the GPU, build the inputs, launch, check, time. A
/// runtime panic becomes an `internal` error of the result, never an unwinding child.
pub fn execute(job: &Job, on: &mut dyn FnMut(ChildEvent<'_>)) -> JobResult {
    let mut res = JobResult::empty();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_job(job, &mut res, on)));
    match outcome {
        Ok(Ok(())) => {
            res.verdict = if res.checks.iter().all(|c| c.passed) { Verdict::Pass } else { Verdict::Mismatch };
        }
        Ok(Err(e)) => {
            on(ChildEvent::Failed(&e, &res.stage));
            res.verdict = verdict_of_error(&e);
            res.error = Some(e);
        }
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            res.verdict = Verdict::Error;
            res.error = Some(RunError::internal(format!("the runtime panicked during {}: {msg}", res.stage)));
        }
    }
    res
}

/// Write atomically: a reader never sees half a result.
pub fn write_result(path: &Path, res: &JobResult) -> Result<(), JobFileError> {
    let text = serde_json::to_string_pretty(res).map_err(|e| JobFileError::WriteResult { path: path.to_path_buf(), message: e.to_string() })?;
    let tmp = path.with_extension("json.partial");
    std::fs::write(&tmp, text + "\n").map_err(|e| JobFileError::WriteResult { path: tmp.clone(), message: e.to_string() })?;
    std::fs::rename(&tmp, path).map_err(|e| JobFileError::RenameResult { path: path.to_path_buf(), message: e.to_string() })
}

/// One tensor of the kernel, concrete.
struct Tensor {
    name: String,
    dtype: DType,
    shape: Vec<u64>,
    access: String,
    buf: Option<DevBuf>,
    /// Host values (decoded from the stored dtype) of inputs, for oracles and derivations.
    host: Option<Vec<f32>>,
}

impl Tensor {
    /// What the run record says of this tensor once allocated.
    fn facts(&self, role: &str, fill: String) -> TensorFacts {
        TensorFacts { name: self.name.clone(), dtype: self.dtype.name().into(), shape: self.shape.clone(), bytes: self.bytes(), role: role.into(), fill: Some(fill) }
    }

    fn elems(&self) -> u64 {
        self.shape.iter().product()
    }
    fn bytes(&self) -> u64 {
        self.elems() * self.dtype.size_bytes()
    }
}

/// Generate `len` values of `dist` for tensor number `index`, stored as `dtype` bytes, in parallel.
pub fn generate(dtype: DType, len: usize, dist: Dist, scale: f64, seed: u64, index: u64) -> Vec<u8> {
    generate_shifted(dtype, len, dist, scale, 0.0, seed, index)
}

/// [`generate`], with `offset` added to every value after the scale, before the rounding.
pub fn generate_shifted(dtype: DType, len: usize, dist: Dist, scale: f64, offset: f64, seed: u64, index: u64) -> Vec<u8> {
    let w = dtype.size_bytes() as usize;
    let mut bytes = vec![0u8; len * w];
    let chunks: Vec<(usize, &mut [u8])> = bytes.chunks_mut(GEN_CHUNK * w).enumerate().collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).max(1);
    let per = chunks.len().div_ceil(threads).max(1);
    let mut groups: Vec<Vec<(usize, &mut [u8])>> = Vec::new();
    let mut it = chunks.into_iter().peekable();
    while it.peek().is_some() {
        groups.push(it.by_ref().take(per).collect());
    }
    std::thread::scope(|s| {
        for group in groups {
            s.spawn(move || {
                let mut vals = vec![0f64; GEN_CHUNK];
                for (ci, out) in group {
                    let n = out.len() / w;
                    let mut rng = Rng::stream(seed, index, ci as u64);
                    dist.fill(&mut rng, scale, &mut vals[..n]);
                    if offset != 0.0 {
                        vals[..n].iter_mut().for_each(|v| *v += offset);
                    }
                    for (v, o) in vals[..n].iter().zip(out.chunks_exact_mut(w)) {
                        convert::store(dtype, *v, o);
                    }
                }
            });
        }
    });
    bytes
}

/// The bytes of a derived input of `dtype` and `shape` (row-major), computed on the host in fp64
/// and rounded to `dtype`: `row_sqnorm` and `inv_row_sum` from their source's values as uploaded
/// (`source`: values and shape), `one_hot()` from (`seed`, `index`: the tensor's position in the
/// ABI order, as for generated inputs). An error when the source is missing or the sizes disagree.
pub fn derive_bytes(
    d: &Derive,
    dtype: DType,
    shape: &[u64],
    source: Option<(&[f32], &[u64])>,
    seed: u64,
    index: u64,
) -> Result<Vec<u8>, String> {
    let elems: u64 = shape.iter().product();
    let from_rows = |f: fn(&[f64], usize) -> Vec<f64>| -> Result<Vec<f64>, String> {
        let (vals, sshape) = source.ok_or_else(|| format!("{d} has no source values"))?;
        let inner = *sshape.last().unwrap_or(&1) as usize;
        let vals: Vec<f64> = vals.iter().map(|&v| f64::from(v)).collect();
        Ok(f(&vals, inner))
    };
    let out = match d {
        Derive::RowSqnorm { .. } => from_rows(oracle::row_sqnorm)?,
        Derive::InvRowSum { .. } => from_rows(oracle::inv_row_sum)?,
        Derive::OneHot => oracle::one_hot(shape, seed, index).ok_or_else(|| format!("one_hot() needs rank 2 or more, not {shape:?}"))?,
        Derive::ColumnIndex => oracle::column_index(shape),
    };
    if out.len() as u64 != elems {
        return Err(format!("{} values for a tensor of {elems} elements", out.len()));
    }
    let w = dtype.size_bytes() as usize;
    let mut bytes = vec![0u8; out.len() * w];
    for (v, o) in out.iter().zip(bytes.chunks_exact_mut(w)) {
        convert::store(dtype, *v, o);
    }
    Ok(bytes)
}

fn eval(e: &crate::lower::SizeExpr, shape: &Shape, what: &str) -> Result<u64, RunError> {
    let v = e.eval(shape).map_err(|m| RunError::new("shape", format!("{what}: {m}")))?;
    u64::try_from(v).map_err(|_| RunError::new("shape", format!("{what} = {v} is negative")))
}

/// One tensor parameter at a concrete shape: (name, dtype, shape, access keyword).
pub type ConcreteTensor = (String, DType, Vec<u64>, String);

/// The concrete (dtype, shape) of every tensor parameter of a launch spec at `shape`, in ABI order.
pub fn concrete_tensors(launch: &LaunchSpec, shape: &Shape) -> Result<Vec<ConcreteTensor>, RunError> {
    let mut out = Vec::new();
    for p in &launch.params {
        if let ParamSpec::TensorPtr { tensor, dtype, access, shape: dims, .. } = p {
            let d = DType::parse(dtype)
                .ok_or_else(|| RunError::new("launch_spec", format!("tensor `{tensor}`: unknown dtype `{dtype}`")))?;
            let dims =
                dims.iter().map(|e| eval(e, shape, &format!("shape of `{tensor}`"))).collect::<Result<Vec<_>, _>>()?;
            out.push((tensor.clone(), d, dims, access.clone()));
        }
    }
    Ok(out)
}

/// Concrete tensor maps of a launch spec at `shape`, cross-checked against the dense row-major
/// layout of their tensors (a disagreement is a lowering bug, reported rather than launched).
/// Validation against the driver's limits is separate ([`TensorMapSpec::validate`]).
pub fn concrete_tensor_maps(launch: &LaunchSpec, shape: &Shape) -> Result<Vec<TensorMapSpec>, RunError> {
    let tensors = concrete_tensors(launch, shape)?;
    let mut out = Vec::new();
    for m in &launch.tensor_maps {
        let (name, dtype, tshape, _) = tensors.iter().find(|t| t.0 == m.tensor).ok_or_else(|| {
            RunError::new("launch_spec", format!("tensor map for `{}`, which has no pointer parameter", m.tensor))
        })?;
        let dims = m
            .global_dims
            .iter()
            .map(|e| eval(e, shape, &format!("global dim of `{}`", m.tensor)))
            .collect::<Result<Vec<_>, _>>()?;
        let strides = m
            .global_strides_bytes
            .iter()
            .map(|e| eval(e, shape, &format!("global stride of `{}`", m.tensor)))
            .collect::<Result<Vec<_>, _>>()?;
        let swizzle = match m.swizzle {
            0 => SwizzleSer::None,
            1 => SwizzleSer::B32,
            2 => SwizzleSer::B64,
            3 => SwizzleSer::B128,
            s => return Err(RunError::new("launch_spec", format!("tensor map of `{}`: swizzle enum {s}", m.tensor))),
        };
        if super::tma::tensor_map_dtype(*dtype) != Some(m.data_type) {
            return Err(RunError::new(
                "launch_spec",
                format!(
                    "tensor map of `{}`: data type {} does not match the tensor's dtype {dtype}",
                    m.tensor, m.data_type
                ),
            ));
        }
        let spec = TensorMapSpec {
            tensor: m.tensor.clone(),
            dtype: *dtype,
            global_dims: dims,
            global_strides: strides,
            box_dims: m.box_dims.clone(),
            element_strides: m.element_strides.clone(),
            swizzle,
        };
        let dense = TensorMapSpec::dense(name, *dtype, tshape, &[], crate::ir::Swizzle::None);
        if spec.global_dims != dense.global_dims {
            return Err(RunError::new(
                "launch_spec",
                format!(
                    "tensor map of `{}`: global dims {:?} (innermost first) disagree with the tensor's shape {:?}",
                    m.tensor, spec.global_dims, tshape
                ),
            ));
        }
        if spec.global_strides != dense.global_strides {
            return Err(RunError::new(
                "launch_spec",
                format!(
                    "tensor map of `{}`: strides {:?} B disagree with a dense row-major {:?} {dtype} ({:?} B)",
                    m.tensor, spec.global_strides, tshape, dense.global_strides
                ),
            ));
        }
        if m.interleave != 0 {
            return Err(RunError::new(
                "launch_spec",
                format!("tensor map of `{}`: interleaved maps are not supported", m.tensor),
            ));
        }
        out.push(spec);
    }
    Ok(out)
}

/// Storage for one kernel parameter (the largest is a 128-byte, 64-aligned tensor map).
#[repr(C, align(64))]
struct ParamSlot([u8; 128]);

fn param_bytes<T: Copy>(v: &T) -> Box<ParamSlot> {
    let mut slot = Box::new(ParamSlot([0; 128]));
    let n = std::mem::size_of::<T>();
    assert!(n <= 128);
    // SAFETY: T is Copy plain data of n ≤ 128 bytes; the slot is 64-aligned.
    unsafe { std::ptr::copy_nonoverlapping(v as *const T as *const u8, slot.0.as_mut_ptr(), n) };
    slot
}

fn run_job(job: &Job, res: &mut JobResult, on: &mut dyn FnMut(ChildEvent<'_>)) -> Result<(), RunError> {
    if job.format != JOB_FORMAT {
        return Err(RunError::internal(format!("job format {} (this binary reads {JOB_FORMAT})", job.format)));
    }
    stage(res, on, "open GPU");
    let gpu = Gpu::open()?;
    res.gpu = Some(gpu.info.clone());
    let timeout = Duration::from_secs_f64(job.kernel_timeout_s.max(0.1));

    // ---- tensors, in ABI order
    stage(res, on, "prepare tensors");
    let mut tensors: Vec<Tensor> = concrete_tensors(&job.launch, &job.shape)?
        .into_iter()
        .map(|(name, dtype, shape, access)| Tensor { name, dtype, shape, access, buf: None, host: None })
        .collect();
    let wl = &job.workload;
    // Derived inputs in dependency order (each after the derived input it reads).
    let derived = wl.derive_order().map_err(|e| RunError::new("workload", e.to_string()))?;
    let seed = job.seed;
    // The output of an oracle that checks every element (copy, transpose, the row kernels') is
    // poisoned even when `inout`: every one of its elements must be written, and generated values
    // could match by chance.
    let poisoned_output =
        wl.oracle.output_role().filter(|_| wl.oracle.checks_every_element()).map(|r| wl.role(r));
    // Inputs first (derived ones after their sources).
    for (ti, t) in tensors.iter_mut().enumerate() {
        if t.access == "out" || wl.derive.contains_key(&t.name) || poisoned_output.as_ref() == Some(&t.name) {
            continue;
        }
        let spec = wl.inputs.get(&t.name);
        let dist = job.dist.or(spec.map(|s| s.dist)).unwrap_or(Dist::Normal);
        let scale = spec.and_then(|s| s.scale).unwrap_or(1.0);
        let offset = spec.and_then(|s| s.offset).unwrap_or(0.0);
        stage(res, on, &format!("generate `{}` ({dist})", t.name));
        let bytes = generate_shifted(t.dtype, t.elems() as usize, dist, scale, offset, seed, ti as u64);
        t.host = Some(convert::decode_all_f32(t.dtype, &bytes));
        let buf = gpu.alloc(bytes.len(), &t.name)?;
        gpu.upload(&buf, &bytes, &t.name)?;
        t.buf = Some(buf);
        let mut fill = if scale == 1.0 { dist.name().to_string() } else { format!("{dist}*{scale}") };
        if offset != 0.0 {
            fill = format!("{fill}+{offset}");
        }
        res.tensors.push(t.facts("input", fill));
    }
    for (name, d) in &derived {
        stage(res, on, &format!("derive `{name}`"));
        let src = match d.source() {
            None => None,
            Some(of) => {
                let s = tensors
                    .iter()
                    .find(|t| t.name == *of)
                    .ok_or_else(|| RunError::new("workload", format!("derive.{name}: no tensor `{of}`")))?;
                let host = s.host.as_deref().ok_or_else(|| {
                    RunError::new("workload", format!("derive.{name}: `{of}` is not a filled or derived input"))
                })?;
                Some((host, s.shape.as_slice()))
            }
        };
        let (ti, t) = tensors
            .iter()
            .enumerate()
            .find(|(_, t)| t.name == *name)
            .ok_or_else(|| RunError::new("workload", format!("derive: no tensor `{name}`")))?;
        let bytes = derive_bytes(d, t.dtype, &t.shape, src, seed, ti as u64)
            .map_err(|e| RunError::new("workload", format!("derive.{name}: {e}")))?;
        let t = &mut tensors[ti];
        t.host = Some(convert::decode_all_f32(t.dtype, &bytes));
        let buf = gpu.alloc(bytes.len(), name)?;
        gpu.upload(&buf, &bytes, name)?;
        t.buf = Some(buf);
        res.tensors.push(t.facts("derived", d.to_string()));
    }
    for t in tensors.iter_mut().filter(|t| t.buf.is_none()) {
        // Outputs: poisoned with 0xFF bytes (NaN for floats, fp8 included; -1 for signed ints), so
        // unwritten elements show.
        let buf = gpu.alloc(t.bytes() as usize, &t.name)?;
        gpu.memset(&buf, 0xFF, &t.name)?;
        t.buf = Some(buf);
        res.tensors.push(t.facts("output", "poison 0xFF".into()));
    }

    gpu.sync_all("uploading inputs")?;

    // ---- tensor maps and parameters
    stage(res, on, "encode tensor maps");
    let map_specs = concrete_tensor_maps(&job.launch, &job.shape)?;
    let mut maps: Vec<TensorMapArg> = Vec::new();
    for spec in &map_specs {
        let t = tensors.iter().find(|t| t.name == spec.tensor).expect("checked by concrete_tensor_maps");
        let lm = job.launch.tensor_maps.iter().find(|m| m.tensor == spec.tensor).expect("same list");
        maps.push(encode_tensor_map(spec, t.buf.as_ref().expect("allocated").ptr, lm.l2_promotion, lm.oob_fill)?);
    }
    let mut slots: Vec<Box<ParamSlot>> = Vec::new();
    for p in &job.launch.params {
        slots.push(match p {
            ParamSpec::TensorPtr { tensor, .. } => {
                let t = tensors.iter().find(|t| t.name == *tensor).expect("collected above");
                param_bytes(&t.buf.as_ref().expect("allocated").ptr)
            }
            ParamSpec::TensorMap { tensor, map, .. } => {
                let i = *map;
                let m = maps.get(i).ok_or_else(|| {
                    RunError::new("launch_spec", format!("tensor map index {i} of `{tensor}` out of range"))
                })?;
                param_bytes(m)
            }
            ParamSpec::Dim { name, .. } => {
                let v =
                    *job.shape.get(name).ok_or_else(|| RunError::new("shape", format!("no value for dim `{name}`")))?;
                let v =
                    i32::try_from(v).map_err(|_| RunError::new("shape", format!("dim `{name}` = {v} exceeds i32")))?;
                param_bytes(&v)
            }
            ParamSpec::Scalar { name, dtype, .. } => {
                let v = *wl
                    .scalars
                    .get(name)
                    .ok_or_else(|| RunError::new("workload", format!("no value for scalar `{name}`")))?;
                let d = DType::parse(dtype)
                    .ok_or_else(|| RunError::new("launch_spec", format!("scalar `{name}`: unknown dtype `{dtype}`")))?;
                let mut b = [0u8; 8];
                convert::store(d, v, &mut b[..d.size_bytes() as usize]);
                param_bytes(&b)
            }
        });
    }
    let mut ptrs: Vec<*mut c_void> = slots.iter_mut().map(|s| s.0.as_mut_ptr() as *mut c_void).collect();

    // ---- grid and kernel
    stage(res, on, "load kernel");
    let l = &job.launch;
    let mut blocks =
        l.grid.blocks(&job.shape, gpu.info.sm_count).map_err(|e| RunError::new("shape", format!("grid: {e}")))?;
    let cx = l.cluster[0].max(1);
    if l.cluster[1] > 1 || l.cluster[2] > 1 {
        return Err(RunError::new("launch_spec", format!("cluster {:?} on a 1-D grid", l.cluster)));
    }
    if l.grid.persistent {
        blocks -= blocks % cx;
    } else if blocks % cx != 0 {
        return Err(RunError::new(
            "grid_cluster",
            format!("{blocks} blocks is not a multiple of the cluster size {cx}"),
        ));
    }
    if blocks == 0 {
        return Err(RunError::new("shape", "the grid has no blocks (no tiles at this shape)"));
    }
    let dims = LaunchDims {
        grid: [blocks, 1, 1],
        block: [l.block_threads, 1, 1],
        smem: l.dynamic_smem_bytes,
        cluster: [cx, 1, 1],
    };
    let image = std::fs::read(&job.cubin)
        .map_err(|e| RunError::new("io", format!("cannot read {}: {e}", job.cubin.display())))?;
    let kernel = gpu.load_kernel(&image, &l.entry)?;
    if u64::from(l.dynamic_smem_bytes) > gpu.info.smem_per_block_optin {
        return Err(RunError::new(
            "smem_too_large",
            format!(
                "{} B of dynamic shared memory; the device allows {} B per block",
                l.dynamic_smem_bytes, gpu.info.smem_per_block_optin
            ),
        ));
    }
    if l.dynamic_smem_bytes > 48 * 1024 || l.needs_smem_opt_in {
        gpu.set_max_dynamic_smem(&kernel, l.dynamic_smem_bytes)?;
    }
    res.launch = Some(LaunchFacts {
        entry: l.entry.clone(),
        dims,
        kernel: kernel.facts.clone(),
        tensor_maps: map_specs.clone(),
    });

    // ---- correctness launch
    stage(res, on, "launch (correctness)");
    // SAFETY: ptrs point into `slots`, laid out in the launch spec's ABI order.
    unsafe { gpu.launch(&kernel, &dims, &mut ptrs)? };
    gpu.wait("launch (correctness)", timeout)?;

    stage(res, on, "check");
    let mut rng = Rng::stream(seed, 0xC0FFEE, 0);
    let find = |name: &str| tensors.iter().find(|t| t.name == name);
    let tol = wl.tolerance(wl.oracle.output_role().and_then(|r| find(&wl.role(r))).map(|t| t.dtype));
    let mut downloaded: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for t in tensors.iter().filter(|t| t.access != "in") {
        downloaded.insert(t.name.clone(), gpu.download(t.buf.as_ref().expect("allocated"), &t.name)?);
    }
    match wl.oracle {
        OracleName::MatmulAbt | OracleName::GroupedMatmulAbt => {
            let name = wl.oracle.name();
            let (a, b, c) = (find(&wl.role("a")), find(&wl.role("b")), find(&wl.role("c")));
            let (Some(a), Some(b), Some(c)) = (a, b, c) else {
                return Err(RunError::new("workload", format!("{name}: a role names no tensor of the kernel")));
            };
            let (batch, m, n, k) = gemm_dims(wl.oracle, a, b, c)?;
            let Some(bytes) = downloaded.get(&c.name) else {
                return Err(RunError::new("workload", format!("{name}: `{}` is declared `in`, not an output", c.name)));
            };
            let got = convert::decode_all_f32(c.dtype, bytes);
            let (Some(ah), Some(bh)) = (a.host.as_ref(), b.host.as_ref()) else {
                return Err(RunError::new("workload", format!("{name}: A and B must be filled inputs")));
            };
            res.checks.push(match (wl.oracle, c.shape.len()) {
                (OracleName::GroupedMatmulAbt, _) => oracle::grouped_matmul_abt(ah, bh, &got, batch, m, n, k, tol, &mut rng),
                (_, 3) => oracle::matmul_abt_batched(ah, bh, &got, batch, m, n, k, tol, &mut rng),
                _ => oracle::matmul_abt(ah, bh, &got, m, n, k, tol, &mut rng),
            });
            let same = a.dtype == b.dtype && b.dtype == c.dtype;
            if job.cublas_check && same {
                stage(res, on, "check against cuBLAS");
                match Cublas::new(gpu.stream) {
                    Ok(cb) => {
                        let cref = gpu.alloc(c.bytes() as usize, "cuBLAS C")?;
                        gpu.memset(&cref, 0xFF, "cuBLAS C")?;
                        // One GEMM, or a strided batch (equal groups are one to cuBLAS too).
                        cb.gemm_abt_batched(
                            a.dtype,
                            a.buf.as_ref().unwrap().ptr,
                            b.buf.as_ref().unwrap().ptr,
                            cref.ptr,
                            m,
                            n,
                            k,
                            batch,
                        )?;
                        gpu.wait("cuBLAS GEMM", timeout)?;
                        let want = convert::decode_all_f32(c.dtype, &gpu.download(&cref, "cuBLAS C")?);
                        res.checks.push(oracle::compare_full("cublas", &got, &want, &c.shape, tol));
                    }
                    Err(e) => res.notes.push(format!("full comparison with cuBLAS skipped: {e}")),
                }
            } else if job.cublas_check {
                res.notes.push("full comparison with cuBLAS skipped: A, B and C differ in dtype".into());
            }
        }
        OracleName::Attention => res.checks.push(check_attention(job, &tensors, &downloaded, tol, &mut rng)?),
        OracleName::KmeansAssign => {
            let (x, c, idx) = (find(&wl.role("x")), find(&wl.role("c")), find(&wl.role("idx")));
            let (Some(x), Some(c), Some(idx)) = (x, c, idx) else {
                return Err(RunError::new("workload", "kmeans_assign: a role names no tensor of the kernel"));
            };
            let (b, n, d, k) = (x.shape[0], x.shape[1], x.shape[2], c.shape[1]);
            if c.shape != [b, k, d] || idx.shape != [b, n] {
                return Err(RunError::new(
                    "workload",
                    format!("kmeans_assign: shapes X{:?} C{:?} Idx{:?} do not fit", x.shape, c.shape, idx.shape),
                ));
            }
            let got = convert::decode_all_index(idx.dtype, &downloaded[&idx.name]);
            res.checks.push(oracle::kmeans_assign(
                x.host.as_ref().expect("input"),
                c.host.as_ref().expect("input"),
                &got,
                b,
                n,
                k,
                d,
                tol,
                &mut rng,
            ));
        }
        OracleName::KnnTileMin => res.checks.extend(check_knn(job, &tensors, &downloaded, tol, &mut rng)?),
        OracleName::KmeansUpdate => res.checks.push(check_kmeans_update(job, &tensors, &downloaded, tol, &mut rng)?),
        OracleName::Rotary => res.checks.push(check_rotary(job, &tensors, &downloaded, tol)?),
        OracleName::Fp8QuantRow | OracleName::Fp8QuantBlock => {
            res.checks.extend(check_fp8_quant(job, &tensors, &downloaded, tol)?)
        }
        OracleName::Gemv => res.checks.push(check_gemv(job, &tensors, &downloaded, tol)?),
        OracleName::Copy | OracleName::Transpose => {
            let name = wl.oracle.name();
            let (a, b) = (find(&wl.role("input")), find(&wl.role("output")));
            let (Some(a), Some(b)) = (a, b) else {
                return Err(RunError::new("workload", format!("{name}: a role names no tensor of the kernel")));
            };
            let want_shape: Vec<u64> = match wl.oracle {
                OracleName::Transpose if a.shape.len() == 2 => vec![a.shape[1], a.shape[0]],
                OracleName::Transpose => {
                    return Err(RunError::new("workload", format!("transpose: A{:?} is not a matrix", a.shape)))
                }
                _ => a.shape.clone(),
            };
            if b.shape != want_shape || a.dtype != b.dtype {
                return Err(RunError::new(
                    "workload",
                    format!(
                        "{name}: {} {}{:?} and {} {}{:?} do not fit B = {}",
                        a.name,
                        a.dtype,
                        a.shape,
                        b.name,
                        b.dtype,
                        b.shape,
                        if wl.oracle == OracleName::Transpose { "Aᵀ" } else { "A" }
                    ),
                ));
            }
            let Some(ah) = a.host.as_ref() else {
                return Err(RunError::new("workload", format!("{name}: `{}` is not a filled input", a.name)));
            };
            let Some(bytes) = downloaded.get(&b.name) else {
                return Err(RunError::new("workload", format!("{name}: `{}` is declared `in`, not an output", b.name)));
            };
            let got = convert::decode_all_f32(b.dtype, bytes);
            res.checks.push(match wl.oracle {
                OracleName::Transpose => oracle::transpose(ah, &got, a.shape[0], a.shape[1]),
                _ => oracle::copy(ah, &got, &b.shape),
            });
        }
        OracleName::CrossEntropy => res.checks.push(check_cross_entropy(job, &tensors, &downloaded, tol, &mut rng)?),
        OracleName::CrossEntropyBwd => {
            res.checks.push(check_cross_entropy_bwd(job, &tensors, &downloaded, tol, &mut rng)?)
        }
        OracleName::Topk => res.checks.extend(check_topk(job, &tensors, &downloaded)?),
        OracleName::Embedding => res.checks.push(check_embedding(job, &tensors, &downloaded)?),
        OracleName::KmeansScatter => res.checks.extend(check_kmeans_scatter(job, &tensors, &downloaded)?),
        OracleName::Softmax
        | OracleName::RowReduce
        | OracleName::Rmsnorm
        | OracleName::Layernorm
        | OracleName::Elementwise
        | OracleName::RmsnormBwd
        | OracleName::LayernormBwd
        | OracleName::SoftmaxBwd => {
            res.checks.push(check_row_kernel(job, &tensors, &downloaded, tol)?)
        }
        OracleName::None => {
            res.notes.push("no oracle: outputs checked for unwritten (non-finite) elements only".into())
        }
    }
    // Every other float output must be fully written (the oracles check their own).
    let oracle_out = wl.oracle.output_role().map(|r| wl.role(r));
    for t in tensors.iter().filter(|t| t.access != "in" && t.dtype.is_float() && Some(&t.name) != oracle_out.as_ref()) {
        let v = convert::decode_all_f32(t.dtype, &downloaded[&t.name]);
        let nonfinite = v.iter().filter(|x| !x.is_finite()).count() as u64;
        let first = v.iter().position(|x| !x.is_finite());
        res.checks.push(CheckReport {
            oracle: "written".into(),
            tolerance: tol,
            checked: v.len() as u64,
            mismatches: 0,
            nonfinite,
            first_bad: first
                .map(|i| oracle::BadElement {
                    index: oracle::unflatten(i as u64, &t.shape),
                    got: f64::from(v[i]),
                    want: f64::NAN,
                    note: Some(format!("`{}` not written or non-finite", t.name)),
                })
                .into_iter()
                .collect(),
            max_abs_err: 0.0,
            max_err_over_tol: 0.0,
            rel_l2_err: 0.0,
            ties_accepted: 0,
            passed: nonfinite == 0,
        });
    }
    drop(downloaded);

    // ---- timing
    if job.repeats > 0 {
        stage(res, on, "timing");
        // Other jobs on this GPU wait while this one times (and it waits for them).
        let _timing = match gpu.pci_location().map_err(|e| e.to_string()).and_then(|pci| TimingLock::acquire(&timing_lock::lock_path(pci))) {
            Ok(lock) => {
                if lock.waited > std::time::Duration::from_millis(100) {
                    res.notes.push(format!("waited {:.1} s for another process's timing on this GPU", lock.waited.as_secs_f64()));
                }
                Some(lock)
            }
            Err(e) => {
                res.notes.push(format!("timed without the GPU timing lock ({e}): another process may have run on the GPU meanwhile"));
                None
            }
        };
        let flush = gpu.alloc(job.l2_flush_bytes as usize, "L2 flush buffer")?;
        let mut kernel_launch = |g: &Gpu| {
            // SAFETY: as for the correctness launch.
            unsafe { g.launch(&kernel, &dims, &mut ptrs) }
        };
        // The peer GEMM: the workload's own (matmul), or kmeans assign's distance GEMM X·Cᵀ alone
        // — B GEMMs of N×K×D in one strided-batched call, no argmin: a ceiling.
        let peer = if job.baseline == Baseline::Cublas {
            match wl.oracle {
                OracleName::MatmulAbt | OracleName::GroupedMatmulAbt => {
                    let (a, b, c) = (find(&wl.role("a")).unwrap(), find(&wl.role("b")).unwrap(), find(&wl.role("c")).unwrap());
                    let (batch, m, n, k) = gemm_dims(wl.oracle, a, b, c)?;
                    let name = if wl.oracle == OracleName::GroupedMatmulAbt {
                        "cublas strided-batched GEMM (the equal groups)"
                    } else {
                        "cublas"
                    };
                    Some((a, b, batch, m, n, k, name))
                }
                OracleName::KmeansAssign => {
                    let (x, c) = (find(&wl.role("x")).unwrap(), find(&wl.role("c")).unwrap());
                    Some((x, c, x.shape[0], x.shape[1], c.shape[1], x.shape[2], "cublas distance GEMM X·Cᵀ (no argmin)"))
                }
                _ => {
                    res.notes.push(format!("baseline cublas has no peer GEMM for the {} oracle; no baseline timed", wl.oracle.name()));
                    None
                }
            }
        } else {
            None
        };
        let cublas = match peer {
            Some(_) => match Cublas::new(gpu.stream) {
                Ok(cb) => Some(cb),
                Err(e) => {
                    res.notes.push(format!("baseline cublas not timed: {e}"));
                    None
                }
            },
            None => None,
        };
        match (peer, cublas) {
            (Some((a, b, batch, m, n, k, name)), Some(cb)) => {
                stage(res, on, "timing with cuBLAS, interleaved");
                let bytes = batch * m * n * crate::runtime::convert::element_bytes(a.dtype) as u64;
                let cref = gpu.alloc(bytes as usize, "cuBLAS C")?;
                let (ap, bp, cp) = (a.buf.as_ref().unwrap().ptr, b.buf.as_ref().unwrap().ptr, cref.ptr);
                // Kernel, peer, kernel, peer, …: `repeats` samples each per round (rounds.rs).
                let (mut kernel_rounds, mut peer_rounds) = (Vec::new(), Vec::new());
                for _ in 0..job.rounds.max(1) {
                    kernel_rounds.push(time_samples(&gpu, &flush, job.warmup, job.repeats, timeout, "kernel", &mut kernel_launch)?);
                    peer_rounds.push(time_samples(&gpu, &flush, job.warmup, job.repeats, timeout, "cuBLAS", |_| cb.gemm_abt_batched(a.dtype, ap, bp, cp, m, n, k, batch))?);
                }
                res.times = Times::from_samples(kernel_rounds.concat(), job.warmup, job.l2_flush_bytes);
                if let Some(times) = Times::from_samples(peer_rounds.concat(), job.warmup, job.l2_flush_bytes) {
                    let rounds = Rounds::from_samples(&kernel_rounds, &peer_rounds);
                    res.baseline = Some(BaselineResult { name: name.into(), times, rounds });
                }
            }
            _ => {
                let samples = time_samples(&gpu, &flush, job.warmup, job.repeats, timeout, "kernel", &mut kernel_launch)?;
                res.times = Times::from_samples(samples, job.warmup, job.l2_flush_bytes);
            }
        }
    }
    stage(res, on, "done");
    Ok(())
}

/// `knn_tile_min`'s check: the role tensors' shapes are checked again against the launch (Q
/// [B, NQ, D], QN [B, NQ], C [B, K, D], CN [B, K], Dist and Idx [B, NQ, T] with T dividing K),
/// then sampled queries are compared with fp64 over every tile, from the inputs as uploaded.
fn check_knn(
    job: &Job,
    tensors: &[Tensor],
    downloaded: &BTreeMap<String, Vec<u8>>,
    tol: oracle::Tolerance,
    rng: &mut Rng,
) -> Result<[CheckReport; 2], RunError> {
    let wl = &job.workload;
    let get = |role: &str| role_tensor(wl, tensors, role);
    let (q, qn, c, cn, dist, idx) = (get("q")?, get("qn")?, get("c")?, get("cn")?, get("dist")?, get("idx")?);
    let fits = q.shape.len() == 3 && c.shape.len() == 3 && dist.shape.len() == 3 && {
        let (b, nq, d, k, t) = (q.shape[0], q.shape[1], q.shape[2], c.shape[1], dist.shape[2]);
        c.shape == [b, k, d]
            && qn.shape == [b, nq]
            && cn.shape == [b, k]
            && dist.shape[..2] == [b, nq]
            && t > 0
            && k % t == 0
            && idx.shape == dist.shape
    };
    if !fits {
        return Err(RunError::new(
            "workload",
            format!(
                "knn_tile_min: shapes Q{:?} QN{:?} C{:?} CN{:?} Dist{:?} Idx{:?} do not fit",
                q.shape, qn.shape, c.shape, cn.shape, dist.shape, idx.shape
            ),
        ));
    }
    fn host(t: &Tensor) -> Result<&[f32], RunError> {
        t.host.as_deref().ok_or_else(|| RunError::new("workload", format!("knn_tile_min: `{}` is not a filled or derived input", t.name)))
    }
    let out = |t: &Tensor| {
        downloaded
            .get(&t.name)
            .ok_or_else(|| RunError::new("workload", format!("knn_tile_min: `{}` is declared `in`, not an output", t.name)))
    };
    let got_dist = convert::decode_all_f32(dist.dtype, out(dist)?);
    let got_idx = convert::decode_all_index(idx.dtype, out(idx)?);
    let (b, nq, d, k, t) = (q.shape[0], q.shape[1], q.shape[2], c.shape[1], dist.shape[2]);
    Ok(oracle::knn_tile_min(host(q)?, host(qn)?, host(c)?, host(cn)?, &got_dist, &got_idx, b, nq, k, d, t, tol, rng))
}

/// `kmeans_update`'s check: the role tensors' shapes are checked again against the launch (XT
/// [B, D, N], OH [B, K, N], ICNT [B, K], CT [B, D, K]), then sampled rows and columns of every
/// batch entry are compared with fp64 from the inputs as uploaded (ICNT as the kernel reads it).
fn check_kmeans_update(
    job: &Job,
    tensors: &[Tensor],
    downloaded: &BTreeMap<String, Vec<u8>>,
    tol: oracle::Tolerance,
    rng: &mut Rng,
) -> Result<CheckReport, RunError> {
    let wl = &job.workload;
    let bad = |m: String| RunError::new("workload", format!("kmeans_update: {m}"));
    let get = |role: &str| role_tensor(wl, tensors, role);
    let (xt, oh, icnt, ct) = (get("xt")?, get("oh")?, get("icnt")?, get("ct")?);
    let fits = xt.shape.len() == 3 && oh.shape.len() == 3 && {
        let (b, d, n, k) = (xt.shape[0], xt.shape[1], xt.shape[2], oh.shape[1]);
        oh.shape == [b, k, n] && icnt.shape == [b, k] && ct.shape == [b, d, k]
    };
    if !fits {
        return Err(bad(format!(
            "shapes XT{:?} OH{:?} ICNT{:?} CT{:?} do not fit",
            xt.shape, oh.shape, icnt.shape, ct.shape
        )));
    }
    fn host(t: &Tensor) -> Result<&[f32], RunError> {
        t.host.as_deref().ok_or_else(|| {
            RunError::new("workload", format!("kmeans_update: `{}` is not a filled or derived input", t.name))
        })
    }
    let bytes = downloaded.get(&ct.name).ok_or_else(|| bad(format!("`{}` is declared `in`, not an output", ct.name)))?;
    let got = convert::decode_all_f32(ct.dtype, bytes);
    let (b, d, n, k) = (xt.shape[0], xt.shape[1], xt.shape[2], oh.shape[1]);
    Ok(oracle::kmeans_update(host(xt)?, host(oh)?, host(icnt)?, &got, b, d, k, n, tol, rng))
}

/// `cross_entropy`'s check: the role tensors' shapes are checked again against the launch (X
/// [R, V], T [R], Col [V], Loss [R]), then sampled rows are compared with fp64 from the logits and
/// targets as uploaded (the oracle rejects a target outside [0, V)).
fn check_cross_entropy(
    job: &Job,
    tensors: &[Tensor],
    downloaded: &BTreeMap<String, Vec<u8>>,
    tol: oracle::Tolerance,
    rng: &mut Rng,
) -> Result<CheckReport, RunError> {
    let wl = &job.workload;
    let bad = |m: String| RunError::new("workload", format!("cross_entropy: {m}"));
    let get = |role: &str| role_tensor(wl, tensors, role);
    let (x, target, col, loss) = (get("x")?, get("target")?, get("col")?, get("loss")?);
    let fits = x.shape.len() == 2 && {
        let (r, v) = (x.shape[0], x.shape[1]);
        target.shape == [r] && col.shape == [v] && loss.shape == [r]
    };
    if !fits {
        return Err(bad(format!("shapes X{:?} T{:?} Col{:?} Loss{:?} do not fit", x.shape, target.shape, col.shape, loss.shape)));
    }
    fn host(t: &Tensor) -> Result<&[f32], RunError> {
        t.host.as_deref().ok_or_else(|| RunError::new("workload", format!("cross_entropy: `{}` is not a filled input", t.name)))
    }
    let bytes = downloaded.get(&loss.name).ok_or_else(|| bad(format!("`{}` is declared `in`, not an output", loss.name)))?;
    let got = convert::decode_all_f32(loss.dtype, bytes);
    oracle::cross_entropy(host(x)?, host(target)?, &got, x.shape[0], x.shape[1], tol, rng).map_err(bad)
}

/// `cross_entropy_bwd`'s check: the role tensors' shapes are checked again against the launch (X
/// [R, V], T [R], Col [V], DX [R, V]), then sampled rows of DX are compared with fp64 from the
/// logits, targets and `scale` as the kernel received them (the oracle rejects a target outside
/// [0, V)); every element of DX is scanned for unwritten values.
fn check_cross_entropy_bwd(
    job: &Job,
    tensors: &[Tensor],
    downloaded: &BTreeMap<String, Vec<u8>>,
    tol: oracle::Tolerance,
    rng: &mut Rng,
) -> Result<CheckReport, RunError> {
    let wl = &job.workload;
    let bad = |m: String| RunError::new("workload", format!("cross_entropy_bwd: {m}"));
    let get = |role: &str| role_tensor(wl, tensors, role);
    let (x, target, col, dx) = (get("x")?, get("target")?, get("col")?, get("dx")?);
    let fits = x.shape.len() == 2 && {
        let (r, v) = (x.shape[0], x.shape[1]);
        target.shape == [r] && col.shape == [v] && dx.shape == [r, v]
    };
    if !fits {
        return Err(bad(format!("shapes X{:?} T{:?} Col{:?} DX{:?} do not fit", x.shape, target.shape, col.shape, dx.shape)));
    }
    fn host(t: &Tensor) -> Result<&[f32], RunError> {
        t.host.as_deref().ok_or_else(|| RunError::new("workload", format!("cross_entropy_bwd: `{}` is not a filled input", t.name)))
    }
    let scale = scalar_as_received(job, "scale")?;
    let bytes = downloaded.get(&dx.name).ok_or_else(|| bad(format!("`{}` is declared `in`, not an output", dx.name)))?;
    let got = convert::decode_all_f32(dx.dtype, bytes);
    oracle::cross_entropy_bwd(host(x)?, host(target)?, &got, x.shape[0], x.shape[1], scale, tol, rng).map_err(bad)
}

/// `topk`'s check: X [R, E], Col [E], Vals and Idx [R, K] checked again against the launch (and
/// Vals of X's dtype: the values are copies), then every row: the values exactly, the indices by
/// what they point at. Two reports, `topk` (Vals) and `topk.idx`.
fn check_topk(job: &Job, tensors: &[Tensor], downloaded: &BTreeMap<String, Vec<u8>>) -> Result<[CheckReport; 2], RunError> {
    let wl = &job.workload;
    let bad = |m: String| RunError::new("workload", format!("topk: {m}"));
    let get = |role: &str| role_tensor(wl, tensors, role);
    let (x, col, vals, idx) = (get("x")?, get("col")?, get("vals")?, get("idx")?);
    let fits = x.shape.len() == 2 && vals.shape.len() == 2 && {
        let (r, e, k) = (x.shape[0], x.shape[1], vals.shape[1]);
        col.shape == [e] && vals.shape[0] == r && (1..=e).contains(&k) && idx.shape == vals.shape
    };
    if !fits {
        return Err(bad(format!("shapes X{:?} Col{:?} Vals{:?} Idx{:?} do not fit", x.shape, col.shape, vals.shape, idx.shape)));
    }
    if vals.dtype != x.dtype {
        return Err(bad(format!("`{}` is {} but `{}` is {}: the values are copies of X's", vals.name, vals.dtype, x.name, x.dtype)));
    }
    let xh = x.host.as_deref().ok_or_else(|| bad(format!("`{}` is not a filled input", x.name)))?;
    let out = |t: &Tensor| downloaded.get(&t.name).ok_or_else(|| bad(format!("`{}` is declared `in`, not an output", t.name)));
    let got_vals = convert::decode_all_f32(vals.dtype, out(vals)?);
    let got_idx = convert::decode_all_index(idx.dtype, out(idx)?);
    Ok(oracle::topk(xh, &got_vals, &got_idx, x.shape[0], x.shape[1], vals.shape[1]))
}

/// `embedding`'s check: Ids [R], E [V, H] and Out [R, H] checked again against the launch (and
/// Out of E's dtype: its rows are copies), then every element of Out exactly against the row of E
/// its id names, from the ids and table as uploaded (the oracle rejects an id outside [0, V)).
fn check_embedding(job: &Job, tensors: &[Tensor], downloaded: &BTreeMap<String, Vec<u8>>) -> Result<CheckReport, RunError> {
    let wl = &job.workload;
    let bad = |m: String| RunError::new("workload", format!("embedding: {m}"));
    let get = |role: &str| role_tensor(wl, tensors, role);
    let (ids, e, out) = (get("ids")?, get("e")?, get("out")?);
    let fits = e.shape.len() == 2 && out.shape.len() == 2 && {
        let (r, v, h) = (out.shape[0], e.shape[0], e.shape[1]);
        ids.shape == [r] && out.shape[1] == h && v >= 1
    };
    if !fits {
        return Err(bad(format!("shapes Ids{:?} E{:?} Out{:?} do not fit", ids.shape, e.shape, out.shape)));
    }
    if out.dtype != e.dtype {
        return Err(bad(format!("`{}` is {} but `{}` is {}: the rows are copies of E's", out.name, out.dtype, e.name, e.dtype)));
    }
    fn host(t: &Tensor) -> Result<&[f32], RunError> {
        t.host.as_deref().ok_or_else(|| RunError::new("workload", format!("embedding: `{}` is not a filled input", t.name)))
    }
    let bytes = downloaded.get(&out.name).ok_or_else(|| bad(format!("`{}` is declared `in`, not an output", out.name)))?;
    let got = convert::decode_all_f32(out.dtype, bytes);
    oracle::embedding(host(ids)?, host(e)?, &got, out.shape[0], e.shape[0], e.shape[1]).map_err(bad)
}

/// `kmeans_scatter`'s check: X [N, D], A [N], SUMS [K, D] and COUNTS [K] or [K, 1] checked again
/// against the launch, then SUMS and COUNTS as downloaded against the fp64 scatter-add of X by A
/// onto their values as uploaded (both `inout`, filled by the workload).
fn check_kmeans_scatter(job: &Job, tensors: &[Tensor], downloaded: &BTreeMap<String, Vec<u8>>) -> Result<[CheckReport; 2], RunError> {
    let wl = &job.workload;
    let bad = |m: String| RunError::new("workload", format!("kmeans_scatter: {m}"));
    let get = |role: &str| role_tensor(wl, tensors, role);
    let (x, assign, sums, counts) = (get("x")?, get("assign")?, get("sums")?, get("counts")?);
    let fits = x.shape.len() == 2 && sums.shape.len() == 2 && {
        let (n, d, k) = (x.shape[0], x.shape[1], sums.shape[0]);
        assign.shape == [n] && sums.shape[1] == d && (counts.shape == [k] || counts.shape == [k, 1]) && k >= 1
    };
    if !fits {
        return Err(bad(format!("shapes X{:?} A{:?} SUMS{:?} COUNTS{:?} do not fit", x.shape, assign.shape, sums.shape, counts.shape)));
    }
    fn host(t: &Tensor) -> Result<&[f32], RunError> {
        t.host.as_deref().ok_or_else(|| RunError::new("workload", format!("kmeans_scatter: `{}` is not filled (declare it `inout`)", t.name)))
    }
    let out = |t: &Tensor| downloaded.get(&t.name).ok_or_else(|| bad(format!("`{}` is declared `in`, not an output", t.name)));
    let got_sums = convert::decode_all_f32(sums.dtype, out(sums)?);
    let got_counts = convert::decode_all_index(counts.dtype, out(counts)?);
    oracle::kmeans_scatter(host(x)?, host(assign)?, host(sums)?, host(counts)?, &got_sums, &got_counts, x.shape[0], x.shape[1], sums.shape[0])
        .map_err(bad)
}

/// The row kernels' check (`softmax`, `row_reduce`, `rmsnorm`, `layernorm`, `elementwise` and the backward norms and softmax): the role tensors'
/// shapes are checked again here (the spec was validated against the program, not against the
/// launch spec), then every output element is compared with the fp64 reference computed from the
/// inputs as uploaded (their values rounded to their dtypes) and `eps` as the kernel receives it
/// (rounded to its scalar's dtype).
fn check_row_kernel(
    job: &Job,
    tensors: &[Tensor],
    downloaded: &BTreeMap<String, Vec<u8>>,
    tol: oracle::Tolerance,
) -> Result<CheckReport, RunError> {
    let wl = &job.workload;
    let name = wl.oracle.name();
    let bad = |m: String| RunError::new("workload", format!("{name}: {m}"));
    let find = |role: &str| role_tensor(wl, tensors, role);
    let input = |role: &str| -> Result<&[f32], RunError> {
        let t = find(role)?;
        t.host.as_deref().ok_or_else(|| bad(format!("`{}` (role `{role}`) is not a filled input", t.name)))
    };
    // The leading [R, C] input: softmax_bwd's is Y (the forward output), every other's X.
    let lead = if wl.oracle == OracleName::SoftmaxBwd { "y" } else { "x" };
    let x = find(lead)?;
    let [rows, cols] = x.shape[..] else {
        return Err(bad(format!("`{}` is {:?}, not a matrix", x.name, x.shape)));
    };
    let out = find(wl.oracle.output_role().ok_or_else(|| bad("no output role".into()))?)?;
    let want_out: Vec<u64> = if wl.oracle == OracleName::RowReduce { vec![rows] } else { vec![rows, cols] };
    if out.shape != want_out {
        return Err(bad(format!("`{}` is {:?}, not {want_out:?}", out.name, out.shape)));
    }
    // The other inputs: W and B are [C]; elementwise's Y is X's [R, C].
    for role in wl.oracle.roles().iter().map(|(r, _)| *r).filter(|r| *r != lead && Some(*r) != wl.oracle.output_role()) {
        let t = find(role)?;
        let want: Vec<u64> = if ["w", "b"].contains(&role) { vec![cols] } else { vec![rows, cols] };
        if t.shape != want {
            return Err(bad(format!("`{}` (role `{role}`) is {:?}, not {want:?}", t.name, t.shape)));
        }
    }
    let bytes = downloaded
        .get(&out.name)
        .ok_or_else(|| bad(format!("`{}` is declared `in`, not an output", out.name)))?;
    let got = convert::decode_all_f32(out.dtype, bytes);
    let eps = || scalar_as_received(job, "eps");
    let xh = input(lead)?;
    Ok(match wl.oracle {
        OracleName::Softmax => oracle::softmax(xh, &got, rows, cols, tol),
        OracleName::RowReduce => {
            let op = wl.reduce.ok_or_else(|| bad("the workload names no `reduce`".into()))?;
            oracle::row_reduce(op, xh, &got, rows, cols, tol)
        }
        OracleName::Rmsnorm => oracle::rmsnorm(xh, input("w")?, &got, rows, cols, eps()?, tol),
        OracleName::Layernorm => oracle::layernorm(xh, input("w")?, input("b")?, &got, rows, cols, eps()?, tol),
        OracleName::RmsnormBwd => oracle::rmsnorm_bwd(xh, input("dy")?, input("w")?, &got, rows, cols, eps()?, tol),
        OracleName::LayernormBwd => oracle::layernorm_bwd(xh, input("dy")?, input("w")?, &got, rows, cols, eps()?, tol),
        OracleName::SoftmaxBwd => oracle::softmax_bwd(xh, input("dy")?, &got, rows, cols, tol),
        OracleName::Elementwise => {
            let expr = wl.element_expr().map_err(|e| bad(format!("expr: {e}")))?;
            oracle::elementwise(&expr, xh, input("y")?, input("w")?, &got, rows, cols, tol)
        }
        other => return Err(bad(format!("`{}` is not a row kernel's oracle", other.name()))),
    })
}

/// `rotary`'s check: the role tensors' shapes are checked again against the launch (X and Y
/// [T, H·D], COS and SIN [T, D/2] with D dividing H·D), then every element of Y is compared
/// with the fp64 rotation of X by the tables as uploaded.
fn check_rotary(
    job: &Job,
    tensors: &[Tensor],
    downloaded: &BTreeMap<String, Vec<u8>>,
    tol: oracle::Tolerance,
) -> Result<CheckReport, RunError> {
    let wl = &job.workload;
    let bad = |m: String| RunError::new("workload", format!("rotary: {m}"));
    let get = |role: &str| role_tensor(wl, tensors, role);
    let (x, cos, sin, y) = (get("x")?, get("cos")?, get("sin")?, get("y")?);
    let fits = x.shape.len() == 2 && cos.shape.len() == 2 && {
        let (t, c, half) = (x.shape[0], x.shape[1], cos.shape[1]);
        cos.shape[0] == t && half > 0 && c % (2 * half) == 0 && sin.shape == cos.shape && y.shape == x.shape
    };
    if !fits {
        return Err(bad(format!("shapes X{:?} COS{:?} SIN{:?} Y{:?} do not fit", x.shape, cos.shape, sin.shape, y.shape)));
    }
    fn host(t: &Tensor) -> Result<&[f32], RunError> {
        t.host.as_deref().ok_or_else(|| RunError::new("workload", format!("rotary: `{}` is not a filled input", t.name)))
    }
    let bytes = downloaded.get(&y.name).ok_or_else(|| bad(format!("`{}` is declared `in`, not an output", y.name)))?;
    let got = convert::decode_all_f32(y.dtype, bytes);
    Ok(oracle::rotary(host(x)?, host(cos)?, host(sin)?, &got, x.shape[0], x.shape[1], cos.shape[1], tol))
}

/// `fp8_quant_row`'s and `fp8_quant_block`'s checks: the role tensors' shapes are checked again
/// against the launch (X and Q [R, C], Q fp8; S [R] per row, or [R, C / G] per group of G columns,
/// G dividing C), then every scale and every quantized element is compared with fp64 from X as
/// uploaded and `min_scale` as the kernel receives it.
fn check_fp8_quant(
    job: &Job,
    tensors: &[Tensor],
    downloaded: &BTreeMap<String, Vec<u8>>,
    tol: oracle::Tolerance,
) -> Result<[CheckReport; 2], RunError> {
    let wl = &job.workload;
    let name = wl.oracle.name();
    let bad = |m: String| RunError::new("workload", format!("{name}: {m}"));
    let get = |role: &str| role_tensor(wl, tensors, role);
    let (x, q, s) = (get("x")?, get("q")?, get("s")?);
    // The scales per row: 1, or the number of groups (a divisor of C) for `fp8_quant_block`.
    let groups = match (wl.oracle, &s.shape[..]) {
        (OracleName::Fp8QuantBlock, [r, g]) if x.shape.len() == 2 && *r == x.shape[0] && *g > 0 && x.shape[1] % g == 0 => Some(*g),
        (OracleName::Fp8QuantRow, [r]) if x.shape.len() == 2 && *r == x.shape[0] => Some(1),
        _ => None,
    };
    let (Some(groups), true) = (groups, q.shape == x.shape) else {
        return Err(bad(format!("shapes X{:?} Q{:?} S{:?} do not fit", x.shape, q.shape, s.shape)));
    };
    let format = oracle::fp8_format(q.dtype).ok_or_else(|| bad(format!("`{}` is {}, not an fp8 dtype", q.name, q.dtype)))?;
    let xh = x.host.as_deref().ok_or_else(|| bad(format!("`{}` is not a filled input", x.name)))?;
    let out = |t: &Tensor| {
        downloaded.get(&t.name).ok_or_else(|| bad(format!("`{}` is declared `in`, not an output", t.name)))
    };
    let (got_q, got_s) = (convert::decode_all_f32(q.dtype, out(q)?), convert::decode_all_f32(s.dtype, out(s)?));
    let min_scale = scalar_as_received(job, "min_scale")?;
    let (rows, cols) = (x.shape[0], x.shape[1]);
    Ok(match wl.oracle {
        OracleName::Fp8QuantBlock => {
            oracle::fp8_quant_block(xh, &got_q, &got_s, rows, cols, cols / groups, format, min_scale, tol)
        }
        _ => oracle::fp8_quant_row(xh, &got_q, &got_s, rows, cols, format, min_scale, tol),
    })
}

/// `gemv`'s check: the role tensors' shapes are checked again against the launch (W [N, K], X
/// [K], Y [N]), then every element of Y is compared with the fp64 product of W and X as uploaded.
fn check_gemv(
    job: &Job,
    tensors: &[Tensor],
    downloaded: &BTreeMap<String, Vec<u8>>,
    tol: oracle::Tolerance,
) -> Result<CheckReport, RunError> {
    let wl = &job.workload;
    let bad = |m: String| RunError::new("workload", format!("gemv: {m}"));
    let get = |role: &str| role_tensor(wl, tensors, role);
    let (w, x, y) = (get("w")?, get("x")?, get("y")?);
    if w.shape.len() != 2 || x.shape[..] != w.shape[1..] || y.shape[..] != w.shape[..1] {
        return Err(bad(format!("shapes W{:?} X{:?} Y{:?} do not fit", w.shape, x.shape, y.shape)));
    }
    fn host(t: &Tensor) -> Result<&[f32], RunError> {
        t.host.as_deref().ok_or_else(|| RunError::new("workload", format!("gemv: `{}` is not a filled input", t.name)))
    }
    let bytes = downloaded.get(&y.name).ok_or_else(|| bad(format!("`{}` is declared `in`, not an output", y.name)))?;
    let got = convert::decode_all_f32(y.dtype, bytes);
    Ok(oracle::gemv(host(w)?, host(x)?, &got, w.shape[0], w.shape[1], tol))
}

/// The kernel tensor an oracle role names (a coded error when the kernel has none: the spec was
/// validated against the program, the tensors come from the launch).
fn role_tensor<'t>(wl: &WorkloadSpec, tensors: &'t [Tensor], role: &str) -> Result<&'t Tensor, RunError> {
    let name = wl.role(role);
    tensors.iter().find(|t| t.name == name).ok_or_else(|| {
        RunError::new("workload", format!("{}: role `{role}` names no tensor of the kernel (`{name}`)", wl.oracle.name()))
    })
}

/// The value of the scalar in oracle role `role` as the kernel receives it: the workload's value
/// rounded to the scalar parameter's dtype, as the launch stores it.
fn scalar_as_received(job: &Job, role: &str) -> Result<f64, RunError> {
    let wl = &job.workload;
    let bad = |m: String| RunError::new("workload", format!("{}: {m}", wl.oracle.name()));
    let s = wl.role(role);
    let v = *wl.scalars.get(&s).ok_or_else(|| bad(format!("no value for scalar `{s}`")))?;
    let dtype = job
        .launch
        .params
        .iter()
        .find_map(|p| match p {
            ParamSpec::Scalar { name, dtype, .. } if *name == s => DType::parse(dtype),
            _ => None,
        })
        .filter(|d| d.is_float())
        .ok_or_else(|| bad(format!("the kernel has no float scalar parameter `{s}`")))?;
    let mut b = [0u8; 8];
    let w = dtype.size_bytes() as usize;
    convert::store(dtype, v, &mut b[..w]);
    Ok(convert::load(dtype, &b[..w]))
}

/// The GEMM oracles' operands as a strided batch (batch, M, N, K), from the launch's tensors:
/// `matmul_abt` A [M, K], B [N, K], C [M, N] (batch 1) or the three with one leading batch dim;
/// `grouped_matmul_abt` A [G·MG, K], B [G, N, K], C [G·MG, N] (batch G, M = MG). The spec was
/// validated against the program; this checks the shapes the launch computed.
fn gemm_dims(oracle: OracleName, a: &Tensor, b: &Tensor, c: &Tensor) -> Result<(u64, u64, u64, u64), RunError> {
    let misfit = || {
        RunError::new(
            "workload",
            format!(
                "{}: shapes A{:?} B{:?} C{:?} do not fit {}",
                oracle.name(),
                a.shape,
                b.shape,
                c.shape,
                if oracle == OracleName::GroupedMatmulAbt { "C[g·MG + i] = A[g·MG + i]·B[g]ᵀ" } else { "C = A·Bᵀ" }
            ),
        )
    };
    let dims = match (oracle, &a.shape[..], &b.shape[..]) {
        (OracleName::GroupedMatmulAbt, &[rows, k], &[g, n, kb]) if g > 0 && rows % g == 0 && kb == k => {
            (c.shape == [rows, n]).then_some((g, rows / g, n, k))
        }
        (OracleName::MatmulAbt, &[m, k], &[n, kb]) if kb == k => (c.shape == [m, n]).then_some((1, m, n, k)),
        (OracleName::MatmulAbt, &[bt, m, k], &[bb, n, kb]) if kb == k && bb == bt => {
            (c.shape == [bt, m, n]).then_some((bt, m, n, k))
        }
        _ => None,
    };
    dims.ok_or_else(misfit)
}

/// `attention`'s check: Q [BH, SQ, HD], K [BH, SK, HD], VT [BH, HD, SK] and O [BH, SQ, HD] (checked
/// again against the launch's shapes), `scale` as the kernel receives it; sampled query rows of
/// every (batch·head) against fp64.
fn check_attention(
    job: &Job,
    tensors: &[Tensor],
    downloaded: &BTreeMap<String, Vec<u8>>,
    tol: oracle::Tolerance,
    rng: &mut Rng,
) -> Result<CheckReport, RunError> {
    let wl = &job.workload;
    let bad = |m: String| RunError::new("workload", format!("attention: {m}"));
    let find = |role: &str| role_tensor(wl, tensors, role);
    let (q, k, vt, o) = (find("q")?, find("k")?, find("vt")?, find("o")?);
    let (&[bh, sq, hd], &[_, sk, _]) = (&q.shape[..], &k.shape[..]) else {
        return Err(bad(format!("Q{:?} and K{:?} are not [BH, S, HD]", q.shape, k.shape)));
    };
    if k.shape != [bh, sk, hd] || vt.shape != [bh, hd, sk] || o.shape != [bh, sq, hd] {
        return Err(bad(format!(
            "shapes Q{:?} K{:?} VT{:?} O{:?} do not fit O = softmax(scale·Q·Kᵀ)·V with VT = Vᵀ",
            q.shape, k.shape, vt.shape, o.shape
        )));
    }
    fn input(t: &Tensor) -> Result<&[f32], RunError> {
        t.host.as_deref().ok_or_else(|| RunError::new("workload", format!("attention: `{}` is not a filled input", t.name)))
    }
    let bytes = downloaded.get(&o.name).ok_or_else(|| bad(format!("`{}` is declared `in`, not an output", o.name)))?;
    let got = convert::decode_all_f32(o.dtype, bytes);
    let scale = scalar_as_received(job, "scale")?;
    Ok(oracle::attention(input(q)?, input(k)?, input(vt)?, &got, bh, sq, sk, hd, scale, wl.mask, tol, rng))
}

/// Warm up, then time `repeats` runs of `launch`, each after writing the flush buffer (outside
/// the timed region), with CUDA events.
fn time_samples(
    gpu: &Gpu,
    flush: &DevBuf,
    warmup: u32,
    repeats: u32,
    timeout: Duration,
    what: &str,
    mut launch: impl FnMut(&Gpu) -> Result<(), RunError>,
) -> Result<Vec<f64>, RunError> {
    for _ in 0..warmup {
        launch(gpu)?;
    }
    gpu.wait(&format!("warm-up of {what}"), timeout * (warmup + 1))?;
    let mut events = Vec::new();
    for i in 0..repeats {
        gpu.memset(flush, i as u8, "L2 flush buffer")?;
        let (start, end) = (gpu.event()?, gpu.event()?);
        gpu.record(&start)?;
        launch(gpu)?;
        gpu.record(&end)?;
        events.push((start, end));
    }
    gpu.wait(&format!("timed runs of {what}"), timeout * (repeats + 1))?;
    events.iter().map(|(a, b)| gpu.elapsed_ms(a, b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_thread_independent() {
        let a = generate(DType::BF16, 300_000, Dist::Normal, 1.0, 5, 1);
        let b = generate(DType::BF16, 300_000, Dist::Normal, 1.0, 5, 1);
        assert_eq!(a, b);
        assert_ne!(a, generate(DType::BF16, 300_000, Dist::Normal, 1.0, 6, 1));
        assert_ne!(a, generate(DType::BF16, 300_000, Dist::Normal, 1.0, 5, 2));
        // Chunk-by-chunk: the first chunk does not depend on the length (thread split).
        let short = generate(DType::BF16, GEN_CHUNK, Dist::Normal, 1.0, 5, 1);
        assert_eq!(&a[..short.len()], &short[..]);
        let f = convert::decode_all_f32(DType::BF16, &a);
        let mean = f.iter().map(|&v| f64::from(v)).sum::<f64>() / f.len() as f64;
        assert!(mean.abs() < 0.01);
    }

    #[test]
    fn derived_inputs_are_computed_from_their_sources_or_the_seed() {
        // row_sqnorm: the fp64 sum of squares of each row as uploaded, rounded to the dtype —
        // what every existing workload's derived norms have always been.
        let src: Vec<f32> = convert::decode_all_f32(DType::BF16, &generate(DType::BF16, 6 * 64, Dist::Normal, 1.0, 3, 0));
        let want: Vec<f64> = src.chunks(64).map(|r| r.iter().map(|&v| f64::from(v) * f64::from(v)).sum()).collect();
        let got = derive_bytes(&Derive::RowSqnorm { of: "C".into() }, DType::F32, &[2, 3], Some((&src, &[2, 3, 64])), 1, 4).unwrap();
        assert_eq!(convert::decode_all_f32(DType::F32, &got), want.iter().map(|&v| v as f32).collect::<Vec<_>>());
        // one_hot(): one 1 per column over K, from (seed, tensor index); inv_row_sum of it is
        // 1/count per cluster, 0 for an empty one.
        let oh = derive_bytes(&Derive::OneHot, DType::BF16, &[2, 8, 64], None, 1, 5).unwrap();
        assert_eq!(oh, derive_bytes(&Derive::OneHot, DType::BF16, &[2, 8, 64], None, 1, 5).unwrap());
        assert_ne!(oh, derive_bytes(&Derive::OneHot, DType::BF16, &[2, 8, 64], None, 2, 5).unwrap());
        assert_ne!(oh, derive_bytes(&Derive::OneHot, DType::BF16, &[2, 8, 64], None, 1, 6).unwrap());
        let ohf = convert::decode_all_f32(DType::BF16, &oh);
        for b in 0..2 {
            for n in 0..64 {
                let ones = (0..8).filter(|&k| ohf[(b * 8 + k) * 64 + n] == 1.0).count();
                let zeros = (0..8).filter(|&k| ohf[(b * 8 + k) * 64 + n] == 0.0).count();
                assert_eq!((ones, zeros), (1, 7), "point {n} of entry {b}");
            }
        }
        let inv = derive_bytes(&Derive::InvRowSum { of: "OH".into() }, DType::F32, &[2, 8], Some((&ohf, &[2, 8, 64])), 1, 6).unwrap();
        let inv = convert::decode_all_f32(DType::F32, &inv);
        for (r, &v) in inv.iter().enumerate() {
            let count = ohf[r * 64..(r + 1) * 64].iter().filter(|&&x| x == 1.0).count();
            let want = if count == 0 { 0.0 } else { (1.0 / count as f64) as f32 };
            assert_eq!(v, want, "cluster {r} of {count} points");
        }
        // Misfits are errors, not panics.
        let e = derive_bytes(&Derive::InvRowSum { of: "OH".into() }, DType::F32, &[2, 8], None, 1, 6).unwrap_err();
        assert!(e.contains("inv_row_sum(OH) has no source values"), "{e}");
        let e = derive_bytes(&Derive::InvRowSum { of: "OH".into() }, DType::F32, &[2, 4], Some((&ohf, &[2, 8, 64])), 1, 6).unwrap_err();
        assert!(e.contains("16 values for a tensor of 8 elements"), "{e}");
        let e = derive_bytes(&Derive::OneHot, DType::BF16, &[64], None, 1, 5).unwrap_err();
        assert!(e.contains("one_hot() needs rank 2 or more"), "{e}");
    }

    #[test]
    fn ties_are_exact_in_every_dtype() {
        for d in [DType::BF16, DType::F16, DType::F8E4M3, DType::F8E5M2, DType::F32, DType::I32] {
            let v = generate(d, 1000, Dist::Ties, 1.0, 1, 0);
            let f = convert::decode_all_f32(d, &v);
            for x in f {
                let ok = if d == DType::I32 {
                    [-1.0, 0.0, 1.0].contains(&x)
                } else {
                    [-1.0, -0.5, 0.0, 0.5, 1.0].contains(&x)
                };
                assert!(ok, "{d}: {x}");
            }
        }
    }

    #[test]
    fn times_statistics() {
        let t = Times::from_samples(vec![5.0, 1.0, 3.0, 2.0, 4.0, 10.0, 6.0, 7.0, 8.0, 9.0], 2, 1).unwrap();
        assert_eq!(t.median_ms, 5.5);
        assert_eq!(t.min_ms, 1.0);
        assert_eq!(t.p90_ms, 9.0);
        assert_eq!(t.samples_ms.len(), 10);
        let t = Times::from_samples(vec![3.0], 0, 0).unwrap();
        assert_eq!((t.median_ms, t.p90_ms), (3.0, 3.0));
        assert!(Times::from_samples(vec![], 0, 0).is_none());
    }
}
