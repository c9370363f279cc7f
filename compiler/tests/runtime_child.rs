//! Child-process isolation through the real `cake` binary with fake jobs (`Job::fake`): a child
//! that sleeps is a `timeout`, one that dies is a crash named after its exit or signal, a
//! written result is passed through; and a real job on a machine without a GPU is `skipped`.
//! No GPU needed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cake::runtime::isolate::{run_isolated, work_dir};
use cake::runtime::job::{Fake, Job, JobResult, Verdict, JOB_FORMAT};
use cake::runtime::oracle::Tolerance;
use cake::runtime::workload::{parse_shape, Baseline, WorkloadSpec};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

fn exe() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_cake"))
}

fn job(fake: Option<Fake>) -> (Job, PathBuf) {
    let src = std::fs::read_to_string(examples().join("gemm_bf16_ws.cake")).unwrap();
    let v = cake::check::check_source(&src).validated.expect("the example verifies");
    let launch = cake::lower::lower(&v).expect("the example lowers").launch;
    let workload = WorkloadSpec::load(&examples().join("gemm_bf16_ws.workload.toml")).unwrap();
    let dir = work_dir().unwrap();
    let job = Job {
        format: JOB_FORMAT,
        cubin: dir.join("missing.cubin"),
        launch,
        shape: parse_shape("M=128,N=256,K=64").unwrap(),
        workload,
        dist: None,
        seed: 1,
        warmup: 0,
        repeats: 1,
        rounds: 1,
        baseline: Baseline::None,
        cublas_check: false,
        kernel_timeout_s: 5.0,
        l2_flush_bytes: 1 << 20,
        result: dir.join("result.json"),
        fake,
    };
    (job, dir)
}

#[test]
fn a_hung_child_is_a_timeout_and_the_harness_carries_on() {
    let (j, dir) = job(Some(Fake::Sleep { seconds: 60.0 }));
    let t0 = Instant::now();
    let r = run_isolated(exe(), &j, Duration::from_millis(1500));
    assert!(t0.elapsed() < Duration::from_secs(20), "took {:?}", t0.elapsed());
    assert_eq!(r.verdict, Verdict::Timeout, "{r:?}");
    let e = r.error.as_ref().unwrap();
    assert_eq!(e.class, "timeout");
    assert_eq!(r.stage, "launch (correctness)");
    assert!(e.message.contains("never finished"), "{}", e.message);

    // The next job runs normally.
    let mut canned = JobResult::empty();
    canned.verdict = Verdict::Pass;
    canned.stage = "done".into();
    let (j2, dir2) = job(Some(Fake::Answer { result: Box::new(canned.clone()) }));
    assert_eq!(run_isolated(exe(), &j2, Duration::from_secs(30)), canned);
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(dir2);
}

#[test]
fn a_mismatch_with_an_unwritten_element_is_read_back_as_a_mismatch() {
    // An unwritten element puts NaN into the check report, which JSON writes as `null`; the
    // parent must still read the child's result (it used to find none and call it a crash).
    let want = [1.0f32, 2.0, 3.0, 4.0];
    let got = [1.0f32, f32::NAN, 3.0, 4.0];
    let mut canned = JobResult::empty();
    canned.verdict = Verdict::Mismatch;
    canned.stage = "done".into();
    canned.checks.push(cake::runtime::oracle::compare_full("cublas", &got, &want, &[2, 2], Tolerance::MATMUL_BF16));
    let (j, dir) = job(Some(Fake::Answer { result: Box::new(canned) }));
    let r = run_isolated(exe(), &j, Duration::from_secs(30));
    assert_eq!(r.verdict, Verdict::Mismatch, "{r:?}");
    assert!(r.error.is_none(), "{r:?}");
    assert_eq!(r.checks.len(), 1);
    assert!(!r.checks[0].passed);
    assert_eq!(r.checks[0].first_bad[0].index, vec![0, 1]);
    assert!(r.checks[0].first_bad[0].got.is_nan());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_crashed_child_is_named_after_its_exit() {
    let (j, dir) = job(Some(Fake::Exit { code: 101 }));
    let r = run_isolated(exe(), &j, Duration::from_secs(30));
    assert_eq!(r.verdict, Verdict::Error);
    assert_eq!(r.error.as_ref().unwrap().class, "child_crashed");
    assert!(r.error.as_ref().unwrap().message.contains("status 101"));

    let (j, dir2) = job(Some(Fake::Abort));
    let r = run_isolated(exe(), &j, Duration::from_secs(30));
    assert_eq!(r.verdict, Verdict::Error);
    assert_eq!(r.error.as_ref().unwrap().class, "SIGABRT");
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(dir2);
}

#[test]
fn a_real_job_without_a_gpu_is_skipped() {
    let (j, dir) = job(None);
    let r = run_isolated(exe(), &j, Duration::from_secs(60));
    match r.verdict {
        Verdict::Skipped => {
            let e = r.error.as_ref().unwrap();
            assert_eq!(e.class, "no_gpu");
            assert!(e.message.starts_with("no GPU: "), "{}", e.message);
            // Right only where scripts/test.sh found no GPU either (it exports CAKE_TEST_GPU).
            assert!(std::env::var("CAKE_TEST_GPU").map_or(true, |v| v != "1"), "the child found no GPU, but scripts/test.sh found one");
        }
        // On a GPU machine the job gets past the GPU and fails on the missing cubin.
        _ => {
            assert!(r.gpu.is_some(), "{r:?}");
            assert_eq!(r.error.as_ref().unwrap().class, "io", "{r:?}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_example_tensor_maps_meet_the_driver_limits_at_every_workload_shape() {
    for name in ["gemm_bf16_ws", "kmeans_assign"] {
        let src = std::fs::read_to_string(examples().join(format!("{name}.cake"))).unwrap();
        let v = cake::check::check_source(&src).validated.expect("the example verifies");
        let launch = cake::lower::lower(&v).expect("the example lowers").launch;
        let w = WorkloadSpec::load(&examples().join(format!("{name}.workload.toml"))).unwrap();
        w.validate(v.module()).unwrap();
        for shape in w.shapes.iter().chain(std::iter::once(&w.headline)) {
            let maps = cake::runtime::job::concrete_tensor_maps(&launch, shape).unwrap();
            assert!(!maps.is_empty());
            for m in maps {
                // cudaMalloc returns 256-byte aligned pointers.
                m.validate(0x7f00_0000_0000).unwrap_or_else(|e| panic!("{name} at {shape:?}: {e}"));
            }
        }
    }
}
