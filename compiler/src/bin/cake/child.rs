//! The hidden `cake __run-child --job FILE` and `cake __probe-gpu` commands: the processes
//! `cake run` / `cake bench` (and `cake-evolve-kernel`) spawn, so that a kernel that hangs or
//! crashes the driver takes down a child, not the caller. The protocol is
//! `compiler/src/runtime/README.md`'s: stage lines and failures on stderr, the result in the job's
//! `result` file, exit 0 once it is written (2 when the job or the result file fails).

use std::path::PathBuf;
use std::time::Duration;

use cake::runtime::job::{self, ChildEvent, Fake, STAGE_PREFIX};

#[derive(clap::Args, Debug, Clone)]
pub struct RunChildArgs {
    /// The job file written by the parent.
    #[arg(long, value_name = "FILE")]
    pub job: PathBuf,
}

/// Execute one job; the exit status.
pub fn run_child(args: RunChildArgs) -> u8 {
    let job = match job::read_job(&args.job) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("cake __run-child: {e}");
            return 2;
        }
    };
    if let Some(f) = &job.fake {
        return match f {
            Fake::Sleep { seconds } => {
                eprintln!("{STAGE_PREFIX}launch (correctness)");
                std::thread::sleep(Duration::from_secs_f64(*seconds));
                0
            }
            Fake::Exit { code } => (*code).clamp(0, 255) as u8,
            Fake::Abort => std::process::abort(),
            Fake::Answer { result } => written(job::write_result(&job.result, result)),
        };
    }
    let res = job::execute(&job, &mut |event| match event {
        ChildEvent::Stage(name) => eprintln!("{STAGE_PREFIX}{name}"),
        ChildEvent::Failed(e, stage) => eprintln!("cake-child: {} during {stage}: {}", e.class, e.message),
    });
    let status = written(job::write_result(&job.result, &res));
    if status == 0 && cake::runtime::gpu::is_poisoned() {
        // The GPU is hung or its context dead; the driver's exit handlers may block on it. The
        // result is written: leave without them (the parent kills the group if even this hangs).
        fast_exit(0);
    }
    status
}

fn written(r: Result<(), job::JobFileError>) -> u8 {
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("cake __run-child: {e}");
            2
        }
    }
}

#[cfg(unix)]
fn fast_exit(code: i32) -> ! {
    extern "C" {
        fn _exit(code: i32) -> !;
    }
    use std::io::Write;
    let _ = std::io::stderr().flush();
    let _ = std::io::stdout().flush();
    // SAFETY: _exit(2) ends the process without running atexit handlers.
    unsafe { _exit(code) }
}

#[cfg(not(unix))]
fn fast_exit(code: i32) -> ! {
    std::process::exit(code)
}

/// `cake __probe-gpu`: this machine's GPU (or why there is none) as one JSON line.
pub fn probe_gpu() -> u8 {
    println!("{}", serde_json::to_string(&cake::runtime::isolate::probe_here()).unwrap_or_default());
    0
}
