//! A thin, checked layer over the CUDA driver API (cudarc `driver::sys` / `driver::result`,
//! dynamically loaded): device and context, memory, module and launch, events, tensor maps.
//!
//! Every failure is a [`RunError`] whose class is the driver's error name
//! (`CUDA_ERROR_ILLEGAL_ADDRESS`), with the stage that hit it in the message. A machine without
//! the driver library or without a device answers [`RunError::no_gpu`], never a panic: cudarc
//! panics when a library or symbol is missing, so entry points check for the library first and
//! run under [`guard`].

use std::ffi::{c_void, CString};
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys;
use serde::{Deserialize, Serialize};

use super::error::RunError;
use super::tma::{TensorMapArg, TensorMapSpec};

/// What the run records say about the GPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuInfo {
    pub name: String,
    pub ordinal: i32,
    /// Compute capability `[major, minor]`.
    pub cc: [u32; 2],
    pub sm_count: u32,
    pub l2_bytes: u64,
    /// Opt-in maximum of dynamic shared memory per block.
    pub smem_per_block_optin: u64,
    pub total_mem_bytes: u64,
    /// CUDA level of the driver (`cuDriverGetVersion`), `"13.0"`.
    pub driver_cuda: String,
    /// The kernel module's release (`/proc/driver/nvidia/version`), `"580.159.04"`, when readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_release: Option<String>,
}

impl GpuInfo {
    /// The real architecture of the device: `sm_90`.
    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.cc[0], self.cc[1])
    }
}

/// A driver error as a run error: class = the error's name.
pub fn cu_err(stage: &str, e: DriverError) -> RunError {
    let name = format!("{:?}", e.0);
    // SAFETY: cuGetErrorString only reads a static table; it is reached only after the library
    // loaded (any DriverError came from it).
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    RunError::new(
        name.clone(),
        format!("{stage}: {name}{}", if text.is_empty() { String::new() } else { format!(" ({text})") }),
    )
}

fn check(stage: &str, r: sys::CUresult) -> Result<(), RunError> {
    r.result().map_err(|e| cu_err(stage, e))
}

/// Run `f`, turning a panic (cudarc's missing library or symbol) into a coded error.
pub fn guard<T>(stage: &str, f: impl FnOnce() -> Result<T, RunError>) -> Result<T, RunError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            Err(RunError::new("driver_library", format!("{stage}: {msg}")))
        }
    }
}

/// Set once the GPU is hung (a wait timed out) or its context is dead (a sticky error): from
/// then on destructors make no driver calls — `cuMemFree` on memory a hung kernel still uses
/// would block forever — and the process leaves the clean-up to its exit.
static POISONED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn poison() {
    POISONED.store(true, std::sync::atomic::Ordering::SeqCst);
}

pub fn is_poisoned() -> bool {
    POISONED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Whether the CUDA driver library can be loaded at all.
pub fn driver_present() -> bool {
    // SAFETY: only dlopen probes.
    unsafe { sys::is_culib_present() }
}

/// The device, its primary context (shared with cuBLAS) and one stream.
pub struct Gpu {
    pub info: GpuInfo,
    dev: sys::CUdevice,
    pub stream: sys::CUstream,
}

impl Gpu {
    /// Open device `CAKE_GPU` (default 0).
    pub fn open() -> Result<Gpu, RunError> {
        if !driver_present() {
            return Err(RunError::no_gpu("the CUDA driver library (libcuda.so.1) was not found"));
        }
        let ordinal: i32 = std::env::var("CAKE_GPU").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
        guard("opening the GPU", || Self::open_inner(ordinal))
    }

    fn open_inner(ordinal: i32) -> Result<Gpu, RunError> {
        if let Err(e) = result::init() {
            return Err(match e.0 {
                sys::CUresult::CUDA_ERROR_NO_DEVICE => RunError::no_gpu("cuInit: CUDA_ERROR_NO_DEVICE"),
                _ => cu_err("cuInit", e),
            });
        }
        let count = result::device::get_count().map_err(|e| cu_err("cuDeviceGetCount", e))?;
        if count <= ordinal {
            return Err(RunError::no_gpu(format!("{count} CUDA device(s); device {ordinal} requested")));
        }
        let dev = result::device::get(ordinal).map_err(|e| cu_err("cuDeviceGet", e))?;
        // SAFETY: dev is a valid device; the primary context is released in Drop.
        let ctx = unsafe { result::primary_ctx::retain(dev) }.map_err(|e| cu_err("cuDevicePrimaryCtxRetain", e))?;
        unsafe { result::ctx::set_current(ctx) }.map_err(|e| cu_err("cuCtxSetCurrent", e))?;
        let stream =
            result::stream::create(result::stream::StreamKind::NonBlocking).map_err(|e| cu_err("cuStreamCreate", e))?;
        let attr = |a: sys::CUdevice_attribute| -> Result<i64, RunError> {
            // SAFETY: valid device and attribute.
            unsafe { result::device::get_attribute(dev, a) }
                .map(i64::from)
                .map_err(|e| cu_err("cuDeviceGetAttribute", e))
        };
        use sys::CUdevice_attribute::*;
        let mut version = 0i32;
        // SAFETY: out-pointer to a local.
        check("cuDriverGetVersion", unsafe { sys::cuDriverGetVersion(&mut version) })?;
        let info = GpuInfo {
            name: result::device::get_name(dev).map_err(|e| cu_err("cuDeviceGetName", e))?,
            ordinal,
            cc: [
                attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)? as u32,
                attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)? as u32,
            ],
            sm_count: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            l2_bytes: attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u64,
            smem_per_block_optin: attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u64,
            // SAFETY: valid device.
            total_mem_bytes: unsafe { result::device::total_mem(dev) }.map_err(|e| cu_err("cuDeviceTotalMem", e))?
                as u64,
            driver_cuda: format!("{}.{}", version / 1000, (version % 1000) / 10),
            driver_release: driver_release(),
        };
        Ok(Gpu { info, dev, stream })
    }

    /// The device's PCI location (domain, bus, device): one physical GPU, whatever ordinal
    /// `CUDA_VISIBLE_DEVICES` gives it in this process.
    pub fn pci_location(&self) -> Result<(i64, i64, i64), RunError> {
        use sys::CUdevice_attribute::*;
        let attr = |a: sys::CUdevice_attribute| -> Result<i64, RunError> {
            // SAFETY: valid device and attribute.
            unsafe { result::device::get_attribute(self.dev, a) }.map(i64::from).map_err(|e| cu_err("cuDeviceGetAttribute", e))
        };
        Ok((attr(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?, attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?, attr(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?))
    }

    pub fn alloc(&self, bytes: usize, what: &str) -> Result<DevBuf, RunError> {
        // SAFETY: plain allocation in the current context.
        let ptr = unsafe { result::malloc_sync(bytes.max(16)) }
            .map_err(|e| cu_err(&format!("allocating {bytes} B for {what}"), e))?;
        Ok(DevBuf { ptr, bytes })
    }

    pub fn upload(&self, buf: &DevBuf, data: &[u8], what: &str) -> Result<(), RunError> {
        assert!(data.len() <= buf.bytes.max(16));
        // SAFETY: the buffer holds at least data.len() bytes; synchronous copy.
        unsafe { result::memcpy_htod_sync(buf.ptr, data) }.map_err(|e| cu_err(&format!("uploading {what}"), e))
    }

    pub fn download(&self, buf: &DevBuf, what: &str) -> Result<Vec<u8>, RunError> {
        let mut out = vec![0u8; buf.bytes];
        // SAFETY: out has buf.bytes bytes; the stream was synchronized by the caller.
        unsafe { result::memcpy_dtoh_sync(&mut out, buf.ptr) }
            .map_err(|e| cu_err(&format!("downloading {what}"), e))?;
        Ok(out)
    }

    /// Set every byte of `buf` to `value`, in stream order.
    pub fn memset(&self, buf: &DevBuf, value: u8, what: &str) -> Result<(), RunError> {
        // SAFETY: in-bounds memset on our stream.
        unsafe { result::memset_d8_async(buf.ptr, value, buf.bytes, self.stream) }
            .map_err(|e| cu_err(&format!("memset of {what}"), e))
    }

    /// Load a cubin (or PTX, then JIT-compiled by the driver) and find `entry` in it.
    pub fn load_kernel(&self, image: &[u8], entry: &str) -> Result<Kernel, RunError> {
        let mut owned;
        let bytes: &[u8] = if image.starts_with(b"\x7fELF") || image.last() == Some(&0) {
            image
        } else {
            owned = image.to_vec();
            owned.push(0);
            &owned
        };
        // SAFETY: a complete image, alive for the call.
        let module = unsafe { result::module::load_data(bytes.as_ptr() as *const c_void) }
            .map_err(|e| cu_err("cuModuleLoadData", e))?;
        let name = CString::new(entry).map_err(|_| RunError::internal("entry name contains NUL"))?;
        // SAFETY: module is loaded.
        let func = unsafe { result::module::get_function(module, name) }
            .map_err(|e| cu_err(&format!("cuModuleGetFunction(`{entry}`)"), e))?;
        let attr = |a| {
            // SAFETY: valid function handle.
            unsafe { result::function::get_function_attribute(func, a) }.ok()
        };
        use sys::CUfunction_attribute::*;
        let facts = KernelFacts {
            num_regs: attr(CU_FUNC_ATTRIBUTE_NUM_REGS),
            static_smem_bytes: attr(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
            local_bytes: attr(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
            max_threads_per_block: attr(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
        };
        Ok(Kernel { module, func, facts })
    }

    /// Allow `bytes` of dynamic shared memory (needed above 48 KiB).
    pub fn set_max_dynamic_smem(&self, k: &Kernel, bytes: u32) -> Result<(), RunError> {
        // SAFETY: valid function handle.
        unsafe {
            result::function::set_function_attribute(
                k.func,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
        }
        .map_err(|e| cu_err(&format!("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES = {bytes})"), e))
    }

    /// Launch on the stream: `cuLaunchKernelEx` with a cluster attribute when the cluster has
    /// more than one block, else `cuLaunchKernel`.
    ///
    /// # Safety
    /// `params` must point at values matching the kernel's parameter list, alive until the
    /// launch call returns (the driver copies them).
    pub unsafe fn launch(&self, k: &Kernel, d: &LaunchDims, params: &mut [*mut c_void]) -> Result<(), RunError> {
        let stage = format!(
            "launching grid ({},{},{}) block ({},{},{}) smem {} B cluster ({},{},{})",
            d.grid[0],
            d.grid[1],
            d.grid[2],
            d.block[0],
            d.block[1],
            d.block[2],
            d.smem,
            d.cluster[0],
            d.cluster[1],
            d.cluster[2]
        );
        if d.cluster.iter().product::<u32>() > 1 {
            let mut value: sys::CUlaunchAttributeValue = MaybeUninit::zeroed().assume_init();
            value.clusterDim =
                sys::CUlaunchAttributeValue_union__bindgen_ty_1 { x: d.cluster[0], y: d.cluster[1], z: d.cluster[2] };
            let mut attr = sys::CUlaunchAttribute {
                id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
                pad: [0; 4],
                value,
            };
            let config = sys::CUlaunchConfig {
                gridDimX: d.grid[0],
                gridDimY: d.grid[1],
                gridDimZ: d.grid[2],
                blockDimX: d.block[0],
                blockDimY: d.block[1],
                blockDimZ: d.block[2],
                sharedMemBytes: d.smem,
                hStream: self.stream,
                attrs: &mut attr,
                numAttrs: 1,
            };
            check(&stage, sys::cuLaunchKernelEx(&config, k.func, params.as_mut_ptr(), std::ptr::null_mut()))
        } else {
            result::launch_kernel(
                k.func,
                (d.grid[0], d.grid[1], d.grid[2]),
                (d.block[0], d.block[1], d.block[2]),
                d.smem,
                self.stream,
                params,
            )
            .map_err(|e| cu_err(&stage, e))
        }
    }

    /// Wait for the stream, at most `timeout`: a kernel that never finishes (a barrier waiting
    /// for bytes that never arrive) is a `timeout` error, not a hung harness.
    pub fn wait(&self, stage: &str, timeout: Duration) -> Result<(), RunError> {
        let start = Instant::now();
        let mut nap = Duration::from_micros(20);
        loop {
            // SAFETY: valid stream.
            let r = unsafe { sys::cuStreamQuery(self.stream) };
            match r {
                sys::CUresult::CUDA_SUCCESS => return Ok(()),
                sys::CUresult::CUDA_ERROR_NOT_READY => {}
                _ => {
                    poison();
                    return check(stage, r);
                }
            }
            if start.elapsed() >= timeout {
                poison();
                return Err(RunError::new(
                    "timeout",
                    format!("{stage}: the GPU work did not finish within {:.1} s (a hang: e.g. a barrier waiting for arrivals or bytes that never come)", timeout.as_secs_f64()),
                ));
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(2));
        }
    }

    /// Wait for everything in the context, the legacy default stream included: a synchronous
    /// copy from pageable memory may return before its DMA has landed, so this runs between the
    /// uploads and the first launch.
    pub fn sync_all(&self, stage: &str) -> Result<(), RunError> {
        result::ctx::synchronize().map_err(|e| {
            poison();
            cu_err(stage, e)
        })
    }

    pub fn event(&self) -> Result<Event, RunError> {
        result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map(Event).map_err(|e| cu_err("cuEventCreate", e))
    }

    pub fn record(&self, e: &Event) -> Result<(), RunError> {
        // SAFETY: valid event and stream.
        unsafe { result::event::record(e.0, self.stream) }.map_err(|err| cu_err("cuEventRecord", err))
    }

    pub fn elapsed_ms(&self, a: &Event, b: &Event) -> Result<f64, RunError> {
        // SAFETY: both recorded on our stream, which was synchronized.
        unsafe { result::event::elapsed(a.0, b.0) }.map(f64::from).map_err(|e| cu_err("cuEventElapsedTime", e))
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        if is_poisoned() {
            return;
        }
        // SAFETY: handles from open(); errors (a context poisoned by a kernel fault) are ignored.
        unsafe {
            let _ = result::stream::destroy(self.stream);
            let _ = result::primary_ctx::release(self.dev);
        }
    }
}

fn driver_release() -> Option<String> {
    let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu ..."
    let line = text.lines().next()?;
    line.split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
        .map(str::to_string)
}

/// Device memory, freed on drop.
pub struct DevBuf {
    pub ptr: sys::CUdeviceptr,
    pub bytes: usize,
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        if is_poisoned() {
            return;
        }
        // SAFETY: allocated by malloc_sync; a failure (poisoned context) is ignored.
        unsafe {
            let _ = result::free_sync(self.ptr);
        }
    }
}

pub struct Event(sys::CUevent);

impl Drop for Event {
    fn drop(&mut self) {
        if is_poisoned() {
            return;
        }
        // SAFETY: created by cuEventCreate.
        unsafe {
            let _ = result::event::destroy(self.0);
        }
    }
}

/// Facts the driver reports about a loaded kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelFacts {
    pub num_regs: Option<i32>,
    pub static_smem_bytes: Option<i32>,
    pub local_bytes: Option<i32>,
    pub max_threads_per_block: Option<i32>,
}

pub struct Kernel {
    module: sys::CUmodule,
    pub func: sys::CUfunction,
    pub facts: KernelFacts,
}

impl Drop for Kernel {
    fn drop(&mut self) {
        if is_poisoned() {
            return;
        }
        // SAFETY: loaded by cuModuleLoadData.
        unsafe {
            let _ = result::module::unload(self.module);
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchDims {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub smem: u32,
    pub cluster: [u32; 3],
}

/// Validate, then encode a tiled tensor map for the tensor at `address`.
pub fn encode_tensor_map(
    spec: &TensorMapSpec,
    address: u64,
    l2_promotion: u32,
    oob_fill: u32,
) -> Result<TensorMapArg, RunError> {
    spec.validate(address)?;
    use sys::CUtensorMapDataType::*;
    let data_type = match super::tma::tensor_map_dtype(spec.dtype) {
        Some(0) => CU_TENSOR_MAP_DATA_TYPE_UINT8,
        Some(2) => CU_TENSOR_MAP_DATA_TYPE_UINT32,
        Some(3) => CU_TENSOR_MAP_DATA_TYPE_INT32,
        Some(5) => CU_TENSOR_MAP_DATA_TYPE_INT64,
        Some(6) => CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        Some(7) => CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        Some(9) => CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        _ => {
            return Err(RunError::new(
                "tma_dtype",
                format!("tensor map of `{}`: no data type for {}", spec.tensor, spec.dtype),
            ))
        }
    };
    use sys::CUtensorMapSwizzle::*;
    let swizzle = match spec.swizzle.cu_enum() {
        0 => CU_TENSOR_MAP_SWIZZLE_NONE,
        1 => CU_TENSOR_MAP_SWIZZLE_32B,
        2 => CU_TENSOR_MAP_SWIZZLE_64B,
        _ => CU_TENSOR_MAP_SWIZZLE_128B,
    };
    use sys::CUtensorMapL2promotion::*;
    let l2 = match l2_promotion {
        0 => CU_TENSOR_MAP_L2_PROMOTION_NONE,
        1 => CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
        2 => CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        _ => CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
    };
    let oob = if oob_fill == 1 {
        sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
    } else {
        sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
    };
    let mut map = MaybeUninit::<sys::CUtensorMap>::zeroed();
    let stage = format!(
        "cuTensorMapEncodeTiled(`{}`: dims {:?}, strides {:?} B, box {:?}, swizzle {}B)",
        spec.tensor,
        spec.global_dims,
        spec.global_strides,
        spec.box_dims,
        spec.swizzle.bytes()
    );
    guard(&stage, || {
        // SAFETY: every array has `rank` (strides: rank-1) entries, checked by validate(); the
        // output is a properly aligned CUtensorMap.
        let r = unsafe {
            sys::cuTensorMapEncodeTiled(
                map.as_mut_ptr(),
                data_type,
                spec.rank() as u32,
                address as *mut c_void,
                spec.global_dims.as_ptr(),
                spec.global_strides.as_ptr(),
                spec.box_dims.as_ptr(),
                spec.element_strides.as_ptr(),
                sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle,
                l2,
                oob,
            )
        };
        check(&stage, r)
    })?;
    // SAFETY: initialized by the successful call above.
    let map = unsafe { map.assume_init() };
    Ok(TensorMapArg { opaque: map.opaque })
}
