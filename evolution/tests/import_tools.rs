//! Importers over real-looking tool output.
//!
//! NOTE: the ptxas, NVRTC and compute-sanitizer texts below are WRITTEN FROM KNOWLEDGE of those
//! tools' output formats (ptxas 12.x/13.x `--verbose`, compute-sanitizer 2023–2025 memcheck,
//! racecheck and synccheck reports, including both the older `at 0x… in file:line:func` and the
//! newer `at func+0x… in file:line` location lines); they are not captured from a run. Addresses,
//! thread indices and paths are made up.

#[path = "support/records.rs"]
mod records;

use cake_evolve::import::{import_file, parse_ptxas, parse_sanitizer, ImportKind, ImportOptions};
use cake_evolve::store::{EvidenceStore, Record, SpanKind, Stage};

const PTXAS_LOG: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'gemm_bf16_ws' for 'sm_90a'
ptxas info    : Function properties for gemm_bf16_ws
    128 bytes stack frame, 96 bytes spill stores, 112 bytes spill loads
ptxas info    : (C7508) Potential Performance Loss: setmaxnreg ignored; unable to determine register count at entry
ptxas info    : Used 168 registers, used 1 barriers, 128 bytes cumulative stack size, 560 bytes cmem[0]
ptxas info    : Compile time = 212.418 ms
";

const PTXAS_SMEM: &str = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z11tile_kernelPKfPf' for 'sm_90a'
ptxas error   : Entry function '_Z11tile_kernelPKfPf' uses too much shared data (0x3c000 bytes, 0x38c00 max)
ptxas fatal   : Ptx assembly aborted due to errors
";

const PTXAS_WGMMA: &str = "\
ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient register resources for the wgmma pipeline in the function 'attn_fwd'
ptxas /tmp/tmpxft_00001a2b_00000000-6_kernel.ptx, line 412; error   : Arguments mismatch for instruction 'mbarrier'
ptxas fatal   : Ptx assembly aborted due to errors
";

const NVRTC_LOG: &str = "\
kernel.cu(118): error: identifier \"cake_wait_parity\" is undefined
      cake_wait_parity(full, kb);
      ^

kernel.cu(54): warning #177-D: variable \"unused\" was declared but never referenced

1 error detected in the compilation of \"kernel.cu\".
";

const CAKE_BUILD_LOG: &str = "\
error[V201]: the kernel needs 245760 B of shared memory; sm_90a allows 232448 B per block
  --> smem_gemm_s5.cake:16:1
error[L002]: shared memory needs 246864 bytes (245840 + 1024 for aligning the base), over the target's 232448 per block
  --> smem_gemm_s5.cake:16:1
   |
16 | smem b_s: bf16[256, 64] stages 5 swizzle 128B align 1024
   | ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ cannot be lowered
";

const MEMCHECK: &str = "\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at 0x1b70 in /tmp/cake-run-8812/kernel.cu:231:gemm_bf16_ws
=========     by thread (127,0,0) in block (3,0,0)
=========     Address 0x7f31c6400100 is out of bounds
=========     and is 257 bytes after the nearest allocation at 0x7f31c6000000 of size 4194304 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========     Host Frame: [0x2f2c45]
=========                in /lib/x86_64-linux-gnu/libcuda.so.1
=========     Host Frame:cake::runtime::gpu::launch [0x4a1f20]
=========                in /opt/cake/cake-device
=========
========= Invalid __global__ write of size 4 bytes
=========     at 0x1b70 in /tmp/cake-run-8812/kernel.cu:231:gemm_bf16_ws
=========     by thread (126,0,0) in block (3,0,0)
=========     Address 0x7f31c64000fc is out of bounds
=========     and is 253 bytes after the nearest allocation at 0x7f31c6000000 of size 4194304 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========     Host Frame: [0x2f2c45]
=========                in /lib/x86_64-linux-gnu/libcuda.so.1
=========
========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) due to \"unspecified launch failure\" on CUDA API call to cuStreamSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========     Host Frame: [0x33a1b5]
=========                in /lib/x86_64-linux-gnu/libcuda.so.1
=========
========= ERROR SUMMARY: 3 errors
";

/// The same failure in another run: other addresses, threads, blocks, temp dir, and the newer
/// location format.
const MEMCHECK_OTHER_RUN: &str = "\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at gemm_bf16_ws+0x1b70 in /tmp/cake-run-40417/kernel.cu:231
=========     by thread (3,0,0) in block (17,0,0)
=========     Address 0x7fe000a00008 is out of bounds
=========     and is 9 bytes after the nearest allocation at 0x7fe000600000 of size 4194304 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========     Host Frame: [0x2f2c45]
=========                in /lib/x86_64-linux-gnu/libcuda.so.1
=========
========= ERROR SUMMARY: 1 error
";

const RACECHECK: &str = "\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at 0x9d0 in /tmp/cake-run-77/kernel.cu:188:attn_fwd
=========     and Read access at 0xa40 in /tmp/cake-run-77/kernel.cu:196:attn_fwd [2048 hazards]
=========
========= WARN:(Warp Level Programming) Potential RAW hazard detected at __shared__ 0x1800 in block (0,0,0) :
=========     Write Thread (31,0,0) at 0x00000170 in /tmp/cake-run-77/kernel.cu:188:attn_fwd
=========     Read Thread (0,0,0) at 0x000001b0 in /tmp/cake-run-77/kernel.cu:196:attn_fwd
=========     Current Value : 0, Incoming Value : 0
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
";

const SYNCCHECK: &str = "\
========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in warp
=========     at 0x3a0 in /tmp/cake-run-5/kernel.cu:77:kmeans_assign
=========     by thread (5,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
";

#[test]
fn ptxas_resource_warnings_and_spills() {
    let ev = parse_ptxas(PTXAS_LOG);
    let classes: Vec<&str> = ev.iter().map(|e| e.class.as_str()).collect();
    assert_eq!(classes, ["ptxas.spill", "ptxas.setmaxnreg_ignored"]);
    assert!(ev.iter().all(|e| e.stage == Stage::Compile && e.tool == "ptxas"));
    assert_eq!(ev[0].extra["spill_store_bytes"], 96);
    assert_eq!(ev[0].extra["spill_load_bytes"], 112);
    assert_eq!(ev[0].extra["function"], "gemm_bf16_ws");
    assert_eq!(ev[1].extra["ptxas_code"], "C7508");
}

#[test]
fn ptxas_errors_drop_the_consequential_fatal_line() {
    let ev = parse_ptxas(PTXAS_SMEM);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0].class, "ptxas.too_much_shared_data");
    assert_eq!(ev[0].extra["used_bytes"], 0x3c000);
    assert_eq!(ev[0].extra["max_bytes"], 0x38c00);

    let ev = parse_ptxas(PTXAS_WGMMA);
    let classes: Vec<&str> = ev.iter().map(|e| e.class.as_str()).collect();
    assert_eq!(classes, ["ptxas.wgmma_serialized", "ptxas.error.arguments_mismatch_for_instruction"]);
    let span = ev[1].span.as_ref().unwrap();
    assert_eq!((span.kind, span.line), (SpanKind::Ptx, 412));

    // Alone, the fatal line is the failure.
    let ev = parse_ptxas("ptxas fatal   : Unresolved extern function 'cake_helper'\n");
    assert_eq!(ev.len(), 1);
    assert!(ev[0].class.starts_with("ptxas.fatal."), "{}", ev[0].class);
}

#[test]
fn nvrtc_and_cake_build_errors() {
    let ev = parse_ptxas(NVRTC_LOG);
    assert_eq!(ev.len(), 1, "warnings are not failures: {ev:?}");
    assert_eq!(ev[0].class, "nvrtc.error.identifier_is_undefined");
    let span = ev[0].span.as_ref().unwrap();
    assert_eq!((span.kind, span.line, span.file.as_deref()), (SpanKind::Cuda, 118, Some("kernel.cu")));

    // Verifier findings are not build failures; lowering errors are, with their .cake position.
    let ev = parse_ptxas(CAKE_BUILD_LOG);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!((ev[0].class.as_str(), ev[0].stage), ("cake.L002", Stage::Lower));
    let span = ev[0].span.as_ref().unwrap();
    assert_eq!((span.kind, span.line, span.col), (SpanKind::Cake, 16, Some(1)));
}

#[test]
fn memcheck_reports_collapse_repeats_and_drop_explained_api_errors() {
    let ev = parse_sanitizer(MEMCHECK);
    assert_eq!(ev.len(), 1, "two threads, one failure; the API error is a consequence: {ev:?}");
    let e = &ev[0];
    assert_eq!((e.tool.as_str(), e.class.as_str(), e.stage), ("memcheck", "memcheck.invalid_global_write", Stage::Run));
    assert_eq!(e.extra["occurrences"], 2);
    assert_eq!(e.extra["thread"], "(127,0,0)");
    assert_eq!(e.extra["block"], "(3,0,0)");
    assert_eq!(e.extra["function"], "gemm_bf16_ws");
    assert!(e.message.contains("Address 0x7f31c6400100 is out of bounds"), "{}", e.message);
    assert!(!e.message.contains("Host Frame"));
    let span = e.span.as_ref().unwrap();
    assert_eq!((span.kind, span.line, span.file.as_deref()), (SpanKind::Cuda, 231, Some("kernel.cu")));

    // Alone, the API error is the failure.
    let api_only = "========= Program hit CUDA_ERROR_ILLEGAL_ADDRESS (error 700) due to \"an illegal memory access was encountered\" on CUDA API call to cuCtxSynchronize.\n========= ERROR SUMMARY: 1 error\n";
    let ev = parse_sanitizer(api_only);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].class, "sanitizer.api.CUDA_ERROR_ILLEGAL_ADDRESS");
}

#[test]
fn racecheck_and_synccheck() {
    let ev = parse_sanitizer(RACECHECK);
    let classes: Vec<&str> = ev.iter().map(|e| e.class.as_str()).collect();
    assert_eq!(classes, ["racecheck.race_write_read", "racecheck.hazard_raw"]);
    assert_eq!(ev[0].span.as_ref().unwrap().line, 188);
    assert_eq!(ev[0].extra["other_locations"][0], "kernel.cu:196:attn_fwd");
    assert!(ev[1].extra.contains_key("write_access") && ev[1].extra.contains_key("read_access"));

    let ev = parse_sanitizer(SYNCCHECK);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].tool, "synccheck");
    assert_eq!(ev[0].class, "synccheck.barrier_error.divergent_thread_s_in_warp");
    assert_eq!(ev[0].span.as_ref().unwrap().line, 77);

    assert!(parse_sanitizer("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n").is_empty());
    assert!(parse_sanitizer("").is_empty());
}

#[test]
fn two_sanitizer_reports_differing_only_in_addresses_and_threads_share_a_signature() {
    let a = parse_sanitizer(MEMCHECK);
    let b = parse_sanitizer(MEMCHECK_OTHER_RUN);
    assert_eq!(a.len(), 1);
    assert_eq!(b.len(), 1);
    assert_ne!(a[0].message, b[0].message);
    assert_eq!(a[0].class, b[0].class);
    assert_eq!(cake_evolve::mine::normalize(&a[0].message), cake_evolve::mine::normalize(&b[0].message));
    assert_eq!(
        cake_evolve::mine::normalize(&a[0].message),
        "Invalid __global__ write of size <n> bytes; Address <hex> is out of bounds"
    );
    assert_eq!(a[0].span, b[0].span);
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const PROGRAM: &str = include_str!("../../examples/gemm_bf16_ws.cake");

#[test]
fn import_into_the_store_keeps_the_file_and_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let store = EvidenceStore::open(dir.path().join("ev")).unwrap();
    let prog = write(dir.path(), "gemm.cake", PROGRAM);
    let log = write(dir.path(), "memcheck.log", MEMCHECK);
    let opts = ImportOptions { program: Some(prog.clone()), shapes: [("M".to_string(), 256)].into_iter().collect(), ..Default::default() };
    let out = import_file(&store, ImportKind::Sanitizer, &log, &opts).unwrap();
    assert_eq!(out.records.len(), 1);
    assert!(out.records[0].new);
    // The verbatim file, the canonical program, the report pointing at both.
    assert_eq!(store.file(&cake_evolve::store::Id::parse(&out.file).unwrap()).unwrap().unwrap(), MEMCHECK.as_bytes());
    let sha = out.program.clone().unwrap();
    assert!(store.program(&sha).unwrap().is_some());
    let rec = store.get(&out.records[0].id).unwrap();
    let Record::Failure(f) = rec.record else { panic!("a failure report") };
    assert_eq!(f.program.sha256, sha);
    assert_eq!(f.program.name.as_deref(), Some("gemm_bf16_ws"));
    assert_eq!(f.target, "sm_90a");
    assert_eq!(f.source_file.as_deref(), Some(out.file.as_str()));
    assert_eq!(f.shapes["M"], 256);

    // Importing the same file again changes nothing.
    let again = import_file(&store, ImportKind::Sanitizer, &log, &opts).unwrap();
    assert_eq!(again.records[0].id, out.records[0].id);
    assert!(!again.records[0].new);

    // A log without --program is refused with a code.
    let err = import_file(&store, ImportKind::Ptxas, &log, &ImportOptions::default()).unwrap_err();
    assert_eq!(err.code(), "I002");
    let err = import_file(&store, ImportKind::Ptxas, &dir.path().join("missing.log"), &opts).unwrap_err();
    assert_eq!(err.code(), "I001");
}

#[test]
fn import_reports_in_the_documented_schema() {
    let dir = tempfile::tempdir().unwrap();
    let store = EvidenceStore::open(dir.path().join("ev")).unwrap();
    // The example of FAILURE_REPORT.md, with a real program inline.
    let report = serde_json::json!({
        "schema": "cake.failure-report/1",
        "program": { "source": PROGRAM, "path": "examples/gemm_bf16_ws.cake" },
        "target": "sm_90a",
        "stage": "run",
        "tool": "compute-sanitizer",
        "error_class": "memcheck.invalid_global_write",
        "message": "Invalid __global__ write of size 16 bytes; Address 0x7f3a2c001000 is out of bounds",
        "span": { "kind": "cuda", "line": 118, "file": "kernel.cu" },
        "shapes": { "M": 256, "N": 512, "K": 192 },
        "gpu_seconds": 2.5,
        "extra": { "thread": "(31,0,0)", "block": "(7,0,0)" }
    });
    let one = write(dir.path(), "one.json", &report.to_string());
    let out = import_file(&store, ImportKind::Report, &one, &ImportOptions::default()).unwrap();
    assert_eq!(out.records.len(), 1);
    let Record::Failure(f) = store.get(&out.records[0].id).unwrap().record else { panic!() };
    assert!(f.program.source.is_none(), "the source moved to programs/");
    assert_eq!(store.program(&f.program.sha256).unwrap().as_deref(), Some(PROGRAM));

    // JSON lines, program by --program, target from the program.
    let mut r2 = report.clone();
    r2["program"] = serde_json::json!({});
    r2["target"] = serde_json::json!("");
    r2["error_class"] = serde_json::json!("timeout");
    let lines = format!("{}\n{}\n", r2, report);
    let many = write(dir.path(), "many.jsonl", &lines);
    let prog = write(dir.path(), "p.cake", PROGRAM);
    let out = import_file(&store, ImportKind::Report, &many, &ImportOptions { program: Some(prog), ..Default::default() }).unwrap();
    assert_eq!(out.records.len(), 2);
    let Record::Failure(f) = store.get(&out.records[0].id).unwrap().record else { panic!() };
    assert_eq!(f.target, "sm_90a");

    // Malformed reports are refused with I003, naming what is wrong.
    let bad = write(dir.path(), "bad.json", "{\"schema\": \"cake.failure-report/1\", \"stage\": \"later\"}");
    let err = import_file(&store, ImportKind::Report, &bad, &ImportOptions::default()).unwrap_err();
    assert_eq!(err.code(), "I003");
}

/// A file of several reports that fails at the third says which two were stored before it (issue
/// 15: the import stopped at the bad report and said nothing of the others).
#[test]
fn a_multi_report_import_names_the_reports_stored_before_the_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = EvidenceStore::open(dir.path().join("ev")).unwrap();
    let report = |class: &str| {
        serde_json::json!({
            "schema": "cake.failure-report/1",
            "program": { "source": PROGRAM },
            "target": "sm_90a",
            "stage": "run",
            "tool": "cake",
            "error_class": class,
            "message": "wrong answer",
        })
    };
    let bad = serde_json::json!({ "schema": "cake.failure-report/1", "stage": "later" });
    let file = write(dir.path(), "three.json", &serde_json::json!([report("run/a"), report("run/b"), bad]).to_string());
    let err = import_file(&store, ImportKind::Report, &file, &ImportOptions::default()).unwrap_err();
    assert_eq!(err.code(), "I003", "{err}");
    let text = err.to_string();
    assert!(text.contains("report 3"), "the bad report is named: {text}");
    assert!(text.contains("2 report(s) before it were stored") && text.contains("run/a") && text.contains("run/b"), "{text}");
    let stored: Vec<_> = store.scan().records.into_iter().filter(|s| matches!(s.record, Record::Failure(_))).collect();
    assert_eq!(stored.len(), 2, "{text}");
    for s in &stored {
        assert!(text.contains(s.id.to_string().get(..12).unwrap()), "stored record {} is named: {text}", s.id);
    }
}

#[test]
fn import_run_records_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let store = EvidenceStore::open(dir.path().join("ev")).unwrap();
    let prog = write(dir.path(), "p.cake", PROGRAM);
    let sha = store.put_program(PROGRAM).unwrap().sha256;
    let mut rec = records::run_record("gemm_bf16_ws", &sha, "timeout", Some(("timeout", "no result after 10.0 s (last stage: launch)")), 5);
    rec.shape = [("M".to_string(), 256)].into();
    // As the runtime writes it, into another evidence root.
    let (path, _) = cake::runtime::record::write_record(&dir.path().join("elsewhere"), &rec).unwrap();
    let out = import_file(&store, ImportKind::Run, &path, &ImportOptions { program: Some(prog), ..Default::default() }).unwrap();
    assert_eq!(out.records[0].id, path.file_stem().unwrap().to_str().unwrap());
    assert_eq!(out.records[0].class, "timeout");
    assert_eq!(std::fs::read(dir.path().join("ev/runs").join(path.file_name().unwrap())).unwrap(), std::fs::read(&path).unwrap());
    assert!(!dir.path().join("ev/files").exists(), "a run record is not copied to files/");
}
