//! CUDA C++ → cubin through NVRTC, and the ptxas resource report.
//!
//! NVRTC is reached through `cudarc` with dynamic loading, so the crate builds where no CUDA is
//! installed; the library is looked up when the first compile runs:
//! 1. `CAKE_NVRTC_LIB` (full path of `libnvrtc.so.<major>`, written into `.toolchain/cuda/env.sh`
//!    by `scripts/setup-cuda-toolchain.sh`): that file and the `libnvrtc-builtins.so.*` beside it
//!    are loaded by path with `RTLD_GLOBAL`, so that the loader's later look-ups by name (cudarc
//!    asks for `libnvrtc.so.13`, NVRTC itself for `libnvrtc-builtins.so.13.0`) find the objects
//!    already loaded, whatever `LD_LIBRARY_PATH` says;
//! 2. otherwise cudarc's own search by name (`LD_LIBRARY_PATH`, the system's library paths).
//!
//! A missing library is the coded error [`N001`](BuildError::Toolchain), never a panic.
//!
//! The program is compiled with `--gpu-architecture=<target arch>` (from `targets.toml`),
//! `-std=c++17`, `-lineinfo` and `--ptxas-options=-v`; the log's ptxas lines are parsed into a
//! [`PtxasReport`], and notable facts (spills, stack frames, registers over a role's `regs`
//! budget, ignored `setmaxnreg`, serialized wgmma) become [`Diagnostic`]s attributed to roles.

use std::ffi::{c_char, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::diag::{Diagnostic, Severity};
use crate::ir::Module;
use crate::lower::{self, LaunchSpec, LowerError, LowerOptions, Lowered};
use crate::span::Span;
use crate::target::TargetInfo;
use crate::verify::Validated;

/// Environment variable naming the NVRTC library file.
pub const NVRTC_LIB_ENV: &str = "CAKE_NVRTC_LIB";

/// A cubin and what the compiler said about it.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub cubin: Vec<u8>,
    /// NVRTC's program log (warnings, the ptxas report).
    pub log: String,
    pub report: PtxasReport,
    /// The NVRTC version that compiled it, `(major, minor)`.
    pub nvrtc_version: (i32, i32),
}

/// The ptxas resource report of one entry function (`--ptxas-options=-v`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtxasReport {
    /// The entry function the numbers belong to.
    pub function: String,
    /// The architecture ptxas compiled for (`sm_90a`).
    pub arch: String,
    /// Registers per thread at launch.
    pub registers: Option<u32>,
    /// Named barriers used.
    pub barriers: Option<u32>,
    /// Bytes of per-thread stack frame (local memory).
    pub stack_frame_bytes: u64,
    /// Bytes of register spill stores / loads.
    pub spill_store_bytes: u64,
    pub spill_load_bytes: u64,
    /// Static shared memory in bytes (dynamic shared memory is not in the report).
    pub smem_bytes: u64,
    /// Constant bank 0 bytes (kernel parameters and driver constants).
    pub cmem0_bytes: u64,
    /// `ptxas warning` / `ptxas info` lines that are not resource numbers, verbatim.
    pub warnings: Vec<String>,
}

impl PtxasReport {
    pub fn spills(&self) -> u64 {
        self.spill_store_bytes + self.spill_load_bytes
    }
}

/// Everything `cake build` produces for one kernel.
#[derive(Clone, Debug)]
pub struct Built {
    pub entry: String,
    pub cuda: String,
    pub cubin: Vec<u8>,
    pub launch: LaunchSpec,
    pub report: PtxasReport,
    /// Facts from the compile worth showing (spills, register budgets, ignored setmaxnreg).
    pub diagnostics: Vec<Diagnostic>,
    pub log: String,
    pub span_map: Vec<(u32, Span)>,
    pub nvrtc_version: (i32, i32),
}

/// Why a build failed.
#[derive(Clone, Debug, thiserror::Error)]
pub enum BuildError {
    /// The lowering refused the program (an `L0xx` code).
    #[error(transparent)]
    Lower(#[from] LowerError),
    /// The program uses an op the chosen target lacks (`N004`).
    #[error("N004: {message}")]
    Target { message: String, span: Span },
    /// NVRTC could not be loaded (`N001`).
    #[error("N001: {message}; run `scripts/setup-cuda-toolchain.sh` (then `. .toolchain/cuda/env.sh`) or set {NVRTC_LIB_ENV}")]
    Toolchain { message: String },
    /// NVRTC rejected the generated CUDA (`N002`): the log, and where it points in the program.
    #[error("N002: NVRTC rejected the generated CUDA:\n{log}")]
    Compile { log: String, diagnostics: Vec<Diagnostic> },
    /// An NVRTC call failed in an unexpected way (`N003`).
    #[error("N003: {call} failed: {message}")]
    Nvrtc { call: &'static str, message: String },
}

impl BuildError {
    pub fn code(&self) -> &'static str {
        match self {
            BuildError::Lower(e) => e.code,
            BuildError::Toolchain { .. } => "N001",
            BuildError::Compile { .. } if self.is_register_allocation() => "P007",
            BuildError::Compile { .. } => "N002",
            BuildError::Nvrtc { .. } => "N003",
            BuildError::Target { .. } => "N004",
        }
    }

    /// ptxas could not allocate registers for an instruction under the kernel's register cap
    /// (C7602, "Insufficient registers"): a build finding about allocation, like spills (P001),
    /// not a lowering bug. The verifier checks declared budgets, not allocation.
    pub fn is_register_allocation(&self) -> bool {
        matches!(self, BuildError::Compile { log, .. } if log.contains("C7602") || log.contains("Insufficient registers"))
    }

    /// The error as diagnostics (located where possible).
    pub fn to_diagnostics(&self) -> Vec<Diagnostic> {
        match self {
            BuildError::Compile { log, .. } if self.is_register_allocation() => {
                let line = log.lines().find(|l| l.contains("Insufficient registers")).unwrap_or("ptxas: insufficient registers").trim();
                vec![Diagnostic::error("P007", "ptxas could not allocate the registers an instruction needs under the kernel's register cap", Span::default(), "")
                    .with_note(line.to_string())
                    .with_help("raise the `regs` budget of the role that holds the largest fragments (ptxas names the count it needs), or shrink them")]
            }
            BuildError::Lower(e) => vec![e.to_diagnostic()],
            BuildError::Target { message, span } => {
                vec![Diagnostic::error("N004", message.clone(), *span, "not available on this target")]
            }
            BuildError::Toolchain { message } => vec![Diagnostic::error("N001", message.clone(), Span::default(), "")
                .with_help("run `scripts/setup-cuda-toolchain.sh` and `. .toolchain/cuda/env.sh`, or set CAKE_NVRTC_LIB to the full path of libnvrtc.so.13")],
            BuildError::Compile { diagnostics, log } => {
                if diagnostics.is_empty() {
                    vec![Diagnostic::error("N002", "NVRTC rejected the generated CUDA", Span::default(), "")
                        .with_note(log.clone())]
                } else {
                    diagnostics.clone()
                }
            }
            BuildError::Nvrtc { call, message } => {
                vec![Diagnostic::error("N003", format!("{call} failed: {message}"), Span::default(), "")]
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Loading NVRTC

/// Make NVRTC loadable: preload `CAKE_NVRTC_LIB` (and its builtins) when set, then ask cudarc
/// whether it finds the library. Runs once per process.
pub fn ensure_nvrtc() -> Result<(), BuildError> {
    static STATE: OnceLock<Result<(), BuildError>> = OnceLock::new();
    STATE.get_or_init(load_nvrtc).clone()
}

fn load_error(message: String) -> BuildError {
    BuildError::Toolchain { message }
}

fn load_nvrtc() -> Result<(), BuildError> {
    if let Some(path) = std::env::var_os(NVRTC_LIB_ENV).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            return Err(load_error(format!("{NVRTC_LIB_ENV}={} does not name a file", path.display())));
        }
        // NVRTC loads its builtins library by name at compile time: preload it from the same
        // directory so that look-up succeeds without LD_LIBRARY_PATH.
        if let Some(dir) = path.parent() {
            for builtins in builtins_candidates(dir) {
                if preload(&builtins).is_ok() {
                    break;
                }
            }
        }
        preload(&path).map_err(|e| load_error(format!("cannot load {} ({NVRTC_LIB_ENV}): {e}", path.display())))?;
    }
    // SAFETY: only probes `dlopen` on cudarc's candidate names.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(load_error("the NVRTC library (libnvrtc.so.13) was not found".to_string()))
    }
}

fn builtins_candidates(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("libnvrtc-builtins.so") || n.starts_with("libnvrtc-builtins.dll"))
                })
                .collect()
        })
        .unwrap_or_default();
    // Prefer the plain builtins over the `.alt` variant, deterministically.
    found.sort();
    found
}

#[cfg(unix)]
fn preload(path: &Path) -> Result<(), libloading::Error> {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    // SAFETY: loading NVIDIA's NVRTC libraries runs their initialisers, which have no
    // preconditions; the handle is leaked on purpose so the library stays loaded.
    let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_GLOBAL) }?;
    std::mem::forget(lib);
    Ok(())
}

#[cfg(not(unix))]
fn preload(path: &Path) -> Result<(), libloading::Error> {
    // SAFETY: as above.
    let lib = unsafe { libloading::Library::new(path) }?;
    std::mem::forget(lib);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Compiling

/// The NVRTC options for one architecture (`sm_90a`).
pub fn nvrtc_options(arch: &str) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "-std=c++17".to_string(),
        "-lineinfo".to_string(),
        "--ptxas-options=-v".to_string(),
    ]
}

/// Compile one CUDA C++ translation unit to a cubin for `arch`. `name` is the program name
/// NVRTC uses in messages (`kernel.cu`).
pub fn compile(cuda: &str, name: &str, arch: &str) -> Result<Compiled, BuildError> {
    ensure_nvrtc()?;
    // cudarc's lazy symbol loading panics if a symbol is missing from the library; keep that a
    // coded error too.
    match std::panic::catch_unwind(|| compile_loaded(cuda, name, arch)) {
        Ok(r) => r,
        Err(_) => Err(load_error("the NVRTC library lacks a required entry point (is it older than CUDA 12?)".into())),
    }
}

struct Program(cudarc::nvrtc::sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the handle came from nvrtcCreateProgram and is destroyed once.
        unsafe {
            let _ = cudarc::nvrtc::sys::nvrtcDestroyProgram(&mut self.0);
        }
    }
}

fn check(call: &'static str, r: cudarc::nvrtc::sys::nvrtcResult) -> Result<(), BuildError> {
    use cudarc::nvrtc::sys::*;
    if r == nvrtcResult::NVRTC_SUCCESS {
        return Ok(());
    }
    // SAFETY: nvrtcGetErrorString returns a static C string for every result code.
    let message = unsafe {
        let p = nvrtcGetErrorString(r);
        if p.is_null() {
            format!("{r:?}")
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    };
    Err(BuildError::Nvrtc { call, message })
}

fn compile_loaded(cuda: &str, name: &str, arch: &str) -> Result<Compiled, BuildError> {
    use cudarc::nvrtc::sys::*;
    let src = CString::new(cuda).map_err(|_| BuildError::Nvrtc { call: "nvrtcCreateProgram", message: "source contains NUL".into() })?;
    let cname = CString::new(name).unwrap_or_else(|_| CString::new("kernel.cu").expect("no NUL"));
    let options: Vec<CString> =
        nvrtc_options(arch).into_iter().map(|o| CString::new(o).expect("options have no NUL")).collect();
    let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();

    let mut version = (0, 0);
    // SAFETY: plain FFI calls with valid pointers; every buffer outlives the call that uses it.
    unsafe {
        check("nvrtcVersion", nvrtcVersion(&mut version.0, &mut version.1))?;
        let mut raw: nvrtcProgram = std::ptr::null_mut();
        check(
            "nvrtcCreateProgram",
            nvrtcCreateProgram(&mut raw, src.as_ptr(), cname.as_ptr(), 0, std::ptr::null(), std::ptr::null()),
        )?;
        let prog = Program(raw);
        let compiled = nvrtcCompileProgram(prog.0, option_ptrs.len() as i32, option_ptrs.as_ptr());

        let mut log_size = 0usize;
        check("nvrtcGetProgramLogSize", nvrtcGetProgramLogSize(prog.0, &mut log_size))?;
        let mut log_buf = vec![0u8; log_size.max(1)];
        check("nvrtcGetProgramLog", nvrtcGetProgramLog(prog.0, log_buf.as_mut_ptr() as *mut c_char))?;
        let log = String::from_utf8_lossy(log_buf.split(|b| *b == 0).next().unwrap_or(&[])).into_owned();

        if compiled == nvrtcResult::NVRTC_ERROR_COMPILATION {
            return Err(BuildError::Compile { log, diagnostics: Vec::new() });
        }
        check("nvrtcCompileProgram", compiled)?;

        let mut size = 0usize;
        check("nvrtcGetCUBINSize", nvrtcGetCUBINSize(prog.0, &mut size))?;
        let mut cubin = vec![0u8; size];
        if size > 0 {
            check("nvrtcGetCUBIN", nvrtcGetCUBIN(prog.0, cubin.as_mut_ptr() as *mut c_char))?;
        }
        if cubin.is_empty() {
            return Err(BuildError::Nvrtc {
                call: "nvrtcGetCUBIN",
                message: format!("no cubin was produced (is `{arch}` a real architecture, not compute_XX?)"),
            });
        }
        let report = parse_ptxas_report(&log);
        Ok(Compiled { cubin, log, report, nvrtc_version: version })
    }
}

// ---------------------------------------------------------------------------------------------
// The ptxas report

/// Parse the `ptxas info` / `ptxas warning` lines of an NVRTC log (one entry function; with
/// several, the last one's numbers win and every warning is kept).
pub fn parse_ptxas_report(log: &str) -> PtxasReport {
    let mut r = PtxasReport::default();
    for raw in log.lines() {
        let line = raw.trim();
        if let Some(rest) = line.strip_prefix("ptxas info") {
            let rest = rest.trim_start().trim_start_matches(':').trim();
            if let Some(f) = rest.strip_prefix("Compiling entry function") {
                // Compiling entry function 'NAME' for 'sm_90a'
                let quoted: Vec<&str> = f.split('\'').collect();
                if quoted.len() >= 4 {
                    r.function = quoted[1].to_string();
                    r.arch = quoted[3].to_string();
                }
            } else if rest.starts_with("Function properties for") {
                // numbers follow on the next line
            } else if rest.starts_with("Used ") {
                for part in rest.split(',') {
                    let part = part.trim();
                    let n = first_number(part);
                    if part.contains("registers") {
                        r.registers = n.map(|v| v as u32);
                    } else if part.contains("barriers") {
                        r.barriers = n.map(|v| v as u32);
                    } else if part.contains("bytes smem") {
                        r.smem_bytes = n.unwrap_or(0);
                    } else if part.contains("cmem[0]") {
                        r.cmem0_bytes = n.unwrap_or(0);
                    }
                }
            } else if !rest.is_empty() && !rest.contains("bytes gmem") && !rest.starts_with("Compile time") {
                r.warnings.push(line.to_string());
            }
        } else if line.contains("bytes stack frame") {
            // `0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads`
            for part in line.split(',') {
                let part = part.trim();
                let n = first_number(part).unwrap_or(0);
                if part.contains("stack frame") {
                    r.stack_frame_bytes = n;
                } else if part.contains("spill stores") {
                    r.spill_store_bytes = n;
                } else if part.contains("spill loads") {
                    r.spill_load_bytes = n;
                }
            }
        } else if line.starts_with("ptxas warning") || line.starts_with("ptxas error") || line.starts_with("ptxas fatal") {
            r.warnings.push(line.to_string());
        }
    }
    r
}

/// The first run of digits in `s`.
fn first_number(s: &str) -> Option<u64> {
    let digits: String = s.chars().skip_while(|c| !c.is_ascii_digit()).take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Turn the notable facts of a report into diagnostics about the program: spills and stack
/// frames (attributed to the roles when the kernel has several), registers over a role's
/// `regs` budget, ptxas ignoring `setmaxnreg` (C7508) or serializing wgmma.
pub fn report_diagnostics(m: &Module, report: &PtxasReport) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let roles: Vec<_> = m.roles.iter().collect();
    let role_span = |h| m.roles.span(h).item;
    let first_span = roles.first().map(|(h, _)| role_span(*h)).unwrap_or_default();
    let role_names = |pred: &dyn Fn(&crate::ir::RoleDecl) -> bool| -> Vec<String> {
        roles.iter().filter(|(_, r)| pred(r)).map(|(_, r)| format!("`{}`", r.name)).collect()
    };

    if report.spills() > 0 {
        // Spills come from the roles with the most live registers: those with the largest budget
        // (or, without budgets, every role).
        let max_regs = roles.iter().filter_map(|(_, r)| r.regs).max();
        let (span, who) = match max_regs {
            Some(max) => {
                let h = roles.iter().find(|(_, r)| r.regs == Some(max)).map(|(h, _)| *h);
                (h.map(role_span).unwrap_or(first_span), role_names(&|r| r.regs == Some(max)))
            }
            None => (first_span, role_names(&|_| true)),
        };
        let place = if roles.len() > 1 && !who.is_empty() { format!(" in the {} role", who.join(", ")) } else { String::new() };
        out.push(
            Diagnostic::error(
                "P001",
                format!(
                    "register spills{place}: {} bytes stored, {} bytes loaded per thread",
                    report.spill_store_bytes, report.spill_load_bytes
                ),
                span,
                "spills here",
            )
            .with_severity(Severity::Warning)
            .with_note(format!("ptxas: {} registers per thread at launch", report.registers.unwrap_or(0)))
            .with_help("give the role more registers (`regs`), shrink its fragments, or split its work"),
        );
    } else if report.stack_frame_bytes > 0 {
        out.push(
            Diagnostic::error(
                "P005",
                format!("{} bytes of stack frame (local memory) per thread", report.stack_frame_bytes),
                first_span,
                "",
            )
            .with_severity(Severity::Warning)
            .with_note("a register array indexed at run time, or a large local, lives in local memory"),
        );
    }
    if let Some(used) = report.registers {
        for (h, r) in &roles {
            if let Some(budget) = r.regs {
                // At launch every warp holds `used` registers; a role whose budget is below that
                // only gets there through setmaxnreg.dec, which is fine; a budget above the
                // target maximum cannot be met.
                if budget > 255 {
                    out.push(
                        Diagnostic::error("P002", format!("role `{}` asks for {budget} registers; at most 255 exist", r.name), role_span(*h), "")
                            .with_severity(Severity::Warning),
                    );
                }
            }
        }
        let _ = used;
    }
    for w in &report.warnings {
        if w.contains("C7508") || w.to_ascii_lowercase().contains("setmaxnreg") {
            let span = roles.iter().find(|(_, r)| r.regs.is_some()).map(|(h, _)| role_span(*h)).unwrap_or(first_span);
            out.push(
                Diagnostic::error("P003", "ptxas ignored the roles' register budgets (setmaxnreg)", span, "`regs` has no effect")
                    .with_severity(Severity::Warning)
                    .with_note(w.clone())
                    .with_help("setmaxnreg needs a register cap at entry (__launch_bounds__(threads, 1)) and each warpgroup in one branch of the role dispatch"),
            );
        } else if w.contains("wgmma") && (w.contains("serializ") || w.contains("C7510") || w.contains("C7515")) {
            out.push(
                Diagnostic::error("P004", "ptxas serialized the wgmma instructions (no overlap of tensor-core work)", first_span, "")
                    .with_severity(Severity::Warning)
                    .with_note(w.clone()),
            );
        } else if w.starts_with("ptxas warning") {
            out.push(
                Diagnostic::error("P006", "ptxas warning", first_span, "")
                    .with_severity(Severity::Warning)
                    .with_note(w.clone()),
            );
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// build

/// Lower a validated module and compile it for `target` (its `arch`). Every op the program uses
/// must exist on `target`.
pub fn build(v: &Validated, target: &TargetInfo) -> Result<Built, BuildError> {
    build_with(v, target, &LowerOptions::default())
}

/// [`build`] with lowering options (source text for `// cake: line` markers, `#line`).
pub fn build_with(v: &Validated, target: &TargetInfo, opts: &LowerOptions<'_>) -> Result<Built, BuildError> {
    check_target(v.module(), target)?;
    let lowered: Lowered = lower::lower_for(v, target, opts)?;
    let compiled = match compile(&lowered.cuda, &opts.cuda_name, &target.arch) {
        Ok(c) => c,
        Err(BuildError::Compile { log, .. }) => {
            let diagnostics = compile_log_diagnostics(&log, &opts.cuda_name, &lowered);
            return Err(BuildError::Compile { log, diagnostics });
        }
        Err(e) => return Err(e),
    };
    let diagnostics = report_diagnostics(v.module(), &compiled.report);
    Ok(Built {
        entry: lowered.entry,
        cuda: lowered.cuda,
        cubin: compiled.cubin,
        launch: lowered.launch,
        report: compiled.report,
        diagnostics,
        log: compiled.log,
        span_map: lowered.span_map,
        nvrtc_version: compiled.nvrtc_version,
    })
}

/// Every op the module calls must be available on `target` (no silent step-down).
fn check_target(m: &Module, target: &TargetInfo) -> Result<(), BuildError> {
    let catalog = crate::catalog::Catalog::builtin();
    for (h, s) in m.stmts.iter() {
        if let crate::ir::Stmt::Op(call) = s {
            if let Some(op) = catalog.get(&call.op) {
                let missing = op.missing_on(target);
                if !missing.is_empty() {
                    return Err(BuildError::Target {
                        message: format!("`{}` needs {} which target `{}` lacks", call.op, missing.join(", "), target.name),
                        span: *m.stmts.span(h),
                    });
                }
            }
        }
    }
    for (h, e) in m.exprs.iter() {
        if let crate::ir::ExprKind::Call(call) = &e.kind {
            if let Some(op) = catalog.get(&call.op) {
                let missing = op.missing_on(target);
                if !missing.is_empty() {
                    return Err(BuildError::Target {
                        message: format!("`{}` needs {} which target `{}` lacks", call.op, missing.join(", "), target.name),
                        span: *m.exprs.span(h),
                    });
                }
            }
        }
    }
    Ok(())
}

/// NVRTC error lines (`kernel.cu(123): error: ...`) mapped back to program spans.
fn compile_log_diagnostics(log: &str, cuda_name: &str, lowered: &Lowered) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for line in log.lines() {
        let Some(rest) = line.strip_prefix(cuda_name) else { continue };
        let Some(rest) = rest.strip_prefix('(') else { continue };
        let Some((num, msg)) = rest.split_once(')') else { continue };
        let Ok(n) = num.parse::<u32>() else { continue };
        if !msg.contains("error") {
            continue;
        }
        let span = lowered.span_map.iter().find(|(l, _)| *l == n).map(|(_, s)| *s).unwrap_or_default();
        out.push(
            Diagnostic::error("N002", format!("NVRTC rejected the generated CUDA: {}", msg.trim_start_matches(':').trim()), span, "lowered from here")
                .with_note(format!("{cuda_name} line {n}"))
                .with_help("this is a bug in the lowering; please report it with the program"),
        );
    }
    out
}

/// Write `kernel.cu`, `kernel.cubin`, `launch.json` and `ptxas.json` into `dir` (created if
/// needed).
pub fn write_build_dir(built: &Built, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("kernel.cu"), &built.cuda)?;
    std::fs::write(dir.join("kernel.cubin"), &built.cubin)?;
    let launch = serde_json::to_string_pretty(&built.launch).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("launch.json"), launch + "\n")?;
    let report = serde_json::to_string_pretty(&built.report).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("ptxas.json"), report + "\n")?;
    Ok(())
}
