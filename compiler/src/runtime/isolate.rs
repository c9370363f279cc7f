//! Child-process isolation: every run happens in a child process (`cake __run-child`) in its own
//! process group, with a wall-clock timeout. A hang becomes a `timeout` result (the whole group
//! is killed), a crash a `child_crashed` (or signal-named) result with the tail of its stderr;
//! the harness always carries on with the next shape or candidate.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::error::RunError;
use super::gpu::GpuInfo;
use super::job::{Job, JobResult, Verdict, STAGE_PREFIX};

/// How a child ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChildStatus {
    Exited(i32),
    Signaled(i32),
    /// Still running at the deadline: its process group was killed.
    TimedOut,
}

#[derive(Clone, Debug)]
pub struct ChildOutcome {
    pub status: ChildStatus,
    /// The last [`TAIL_BYTES`] of each stream.
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

pub const TAIL_BYTES: usize = 16 * 1024;

#[cfg(unix)]
fn kill_group(pid: u32) {
    extern "C" {
        fn kill(pid: i32, sig: i32) -> i32;
    }
    const SIGKILL: i32 = 9;
    // SAFETY: kill(2) on our own child's process group (negative pid); ESRCH when it is gone.
    unsafe {
        kill(-(pid as i32), SIGKILL);
    }
}

fn tail(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(TAIL_BYTES);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

/// Run `cmd` in a new process group; after `timeout`, SIGKILL the whole group.
pub fn run_with_timeout(mut cmd: Command, timeout: Duration) -> std::io::Result<ChildOutcome> {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn()?;
    let pid = child.id();
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 8192];
            loop {
                match r.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        buf.extend_from_slice(&chunk[..n]);
                        if buf.len() > 4 * TAIL_BYTES {
                            buf.drain(..buf.len() - TAIL_BYTES);
                        }
                    }
                }
            }
            buf
        })
    };
    let out_t = reader(Box::new(child.stdout.take().expect("piped")));
    let err_t = reader(Box::new(child.stderr.take().expect("piped")));
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if start.elapsed() >= timeout {
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // Kill the group in both cases: on timeout the child and everything it started; after a
    // normal exit, any stray grandchild still holding the pipes.
    #[cfg(unix)]
    kill_group(pid);
    #[cfg(not(unix))]
    let _ = (pid, child.kill());
    let status = match status {
        Some(s) => {
            #[cfg(unix)]
            {
                use std::os::unix::process::ExitStatusExt;
                match (s.code(), s.signal()) {
                    (Some(c), _) => ChildStatus::Exited(c),
                    (None, Some(sig)) => ChildStatus::Signaled(sig),
                    (None, None) => ChildStatus::Exited(-1),
                }
            }
            #[cfg(not(unix))]
            ChildStatus::Exited(s.code().unwrap_or(-1))
        }
        None => {
            let _ = child.wait();
            ChildStatus::TimedOut
        }
    };
    let stdout = tail(&out_t.join().unwrap_or_default());
    let stderr = tail(&err_t.join().unwrap_or_default());
    Ok(ChildOutcome { status, stdout, stderr, elapsed: start.elapsed() })
}

pub fn signal_name(sig: i32) -> String {
    match sig {
        1 => "SIGHUP".into(),
        2 => "SIGINT".into(),
        4 => "SIGILL".into(),
        6 => "SIGABRT".into(),
        7 => "SIGBUS".into(),
        8 => "SIGFPE".into(),
        9 => "SIGKILL".into(),
        11 => "SIGSEGV".into(),
        13 => "SIGPIPE".into(),
        15 => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

/// The last stage a child announced on stderr.
pub fn last_stage(stderr: &str) -> Option<String> {
    stderr.lines().rev().find_map(|l| l.strip_prefix(STAGE_PREFIX)).map(|s| s.trim().to_string())
}

fn stderr_tail(stderr: &str, lines: usize) -> String {
    let v: Vec<&str> = stderr.lines().filter(|l| !l.starts_with(STAGE_PREFIX)).collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// Turn a child's outcome and the result file it may have written into a result.
pub fn interpret(outcome: std::io::Result<ChildOutcome>, result_path: &Path, timeout: Duration) -> JobResult {
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            return JobResult::from_error(RunError::new("io", format!("cannot start the child process: {e}")), "spawn")
        }
    };
    let written: Option<JobResult> =
        std::fs::read_to_string(result_path).ok().and_then(|t| serde_json::from_str(&t).ok());
    let stage = last_stage(&outcome.stderr).unwrap_or_else(|| "start".into());
    match (written, &outcome.status) {
        (Some(mut r), ChildStatus::TimedOut) => {
            r.notes.push(format!(
                "the child wrote its result but did not exit within {:.0} s; its process group was killed",
                timeout.as_secs_f64()
            ));
            r
        }
        (Some(r), _) => r,
        (None, ChildStatus::TimedOut) => {
            let mut r = JobResult::from_error(
                RunError::new(
                    "timeout",
                    format!(
                        "no result after {:.1} s (last stage: {stage}); the child's process group was killed{}",
                        timeout.as_secs_f64(),
                        if stage.starts_with("launch") || stage.starts_with("timing") {
                            " — the kernel never finished (a hang: e.g. a barrier waiting for arrivals or transaction bytes that never come)"
                        } else {
                            ""
                        }
                    ),
                ),
                &stage,
            );
            r.verdict = Verdict::Timeout;
            r
        }
        (None, ChildStatus::Exited(code)) => JobResult::from_error(
            RunError::new(
                "child_crashed",
                format!(
                    "the child exited with status {code} without a result (last stage: {stage}); stderr:\n{}",
                    stderr_tail(&outcome.stderr, 20)
                ),
            ),
            &stage,
        ),
        (None, ChildStatus::Signaled(sig)) => JobResult::from_error(
            RunError::new(
                signal_name(*sig),
                format!(
                    "the child was killed by {} (last stage: {stage}); stderr:\n{}",
                    signal_name(*sig),
                    stderr_tail(&outcome.stderr, 20)
                ),
            ),
            &stage,
        ),
    }
}

/// Run `job` in a child process of `exe` (`exe __run-child --job FILE`), writing the job next
/// to `job.result`.
pub fn run_isolated(exe: &Path, job: &Job, timeout: Duration) -> JobResult {
    let job_path = job.result.with_file_name("job.json");
    let _ = std::fs::remove_file(&job.result);
    if let Err(e) = serde_json::to_string(job)
        .map_err(|e| e.to_string())
        .and_then(|t| std::fs::write(&job_path, t).map_err(|e| e.to_string()))
    {
        return JobResult::from_error(
            RunError::new("io", format!("cannot write {}: {e}", job_path.display())),
            "write job",
        );
    }
    let mut cmd = Command::new(exe);
    cmd.arg("__run-child").arg("--job").arg(&job_path);
    interpret(run_with_timeout(cmd, timeout), &job.result, timeout)
}

/// Ask a child (`exe __probe-gpu`) which GPU this machine has, so that the parent never touches
/// the driver itself.
pub fn probe_gpu(exe: &Path, timeout: Duration) -> Result<GpuInfo, RunError> {
    let mut cmd = Command::new(exe);
    cmd.arg("__probe-gpu");
    let o = run_with_timeout(cmd, timeout)
        .map_err(|e| RunError::new("io", format!("cannot start `{} __probe-gpu`: {e}", exe.display())))?;
    if o.status == ChildStatus::TimedOut {
        return Err(RunError::new(
            "timeout",
            format!("the GPU probe did not answer within {:.0} s", timeout.as_secs_f64()),
        ));
    }
    let line = o.stdout.lines().rev().find(|l| l.trim_start().starts_with('{')).unwrap_or("");
    let v: ProbeAnswer = serde_json::from_str(line).map_err(|_| {
        RunError::new(
            "child_crashed",
            format!("the GPU probe ended with {:?} and no answer; stderr:\n{}", o.status, stderr_tail(&o.stderr, 20)),
        )
    })?;
    match v {
        ProbeAnswer { gpu: Some(g), .. } => Ok(g),
        ProbeAnswer { error: Some(e), .. } => Err(e),
        _ => Err(RunError::internal("empty GPU probe answer")),
    }
}

/// What `cake __probe-gpu` answers, as one JSON line on stdout.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct ProbeAnswer {
    pub gpu: Option<GpuInfo>,
    pub error: Option<RunError>,
}

/// Open this machine's GPU in this process (the hidden `cake __probe-gpu` does, so that a driver
/// that hangs or crashes takes the child down, not the caller).
pub fn probe_here() -> ProbeAnswer {
    match super::gpu::Gpu::open() {
        Ok(g) => ProbeAnswer { gpu: Some(g.info.clone()), error: None },
        Err(e) => ProbeAnswer { gpu: None, error: Some(e) },
    }
}

/// A fresh, private work directory for one harness invocation.
pub fn work_dir() -> std::io::Result<PathBuf> {
    let base = std::env::temp_dir();
    for attempt in 0..1000u32 {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let dir = base.join(format!("cake-run-{}-{nanos:x}-{attempt}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free work directory name"))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c").arg(script);
        c
    }

    #[test]
    fn a_sleeping_child_times_out_and_its_group_dies() {
        let marker = std::env::temp_dir().join(format!("cake-isolate-test-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        // The grandchild would create the marker after 2 s if it survived the group kill.
        let script = format!(
            "(sleep 2; touch {}) & echo started; echo '{STAGE_PREFIX}launch (correctness)' >&2; sleep 30",
            marker.display()
        );
        let t0 = Instant::now();
        let o = run_with_timeout(sh(&script), Duration::from_millis(500)).unwrap();
        assert_eq!(o.status, ChildStatus::TimedOut);
        assert!(t0.elapsed() < Duration::from_secs(10), "returned after {:?}", t0.elapsed());
        assert!(o.stdout.contains("started"));
        std::thread::sleep(Duration::from_millis(2500));
        assert!(!marker.exists(), "the grandchild survived the process-group kill");

        let r = interpret(Ok(o), Path::new("/nonexistent/result.json"), Duration::from_millis(500));
        assert_eq!(r.verdict, Verdict::Timeout);
        let e = r.error.unwrap();
        assert_eq!(e.class, "timeout");
        assert!(e.message.contains("last stage: launch (correctness)"), "{}", e.message);
        assert!(e.message.contains("hang"), "{}", e.message);
    }

    #[test]
    fn exit_codes_and_signals_are_reported() {
        let o = run_with_timeout(sh("echo oops >&2; exit 3"), Duration::from_secs(10)).unwrap();
        assert_eq!(o.status, ChildStatus::Exited(3));
        let r = interpret(Ok(o), Path::new("/nonexistent/result.json"), Duration::from_secs(10));
        assert_eq!(r.verdict, Verdict::Error);
        let e = r.error.unwrap();
        assert_eq!(e.class, "child_crashed");
        assert!(e.message.contains("oops"));

        let o = run_with_timeout(sh("kill -SEGV $$"), Duration::from_secs(10)).unwrap();
        assert_eq!(o.status, ChildStatus::Signaled(11));
        let r = interpret(Ok(o), Path::new("/nonexistent/result.json"), Duration::from_secs(10));
        assert_eq!(r.error.unwrap().class, "SIGSEGV");
    }

    #[test]
    fn a_written_result_wins() {
        let dir = work_dir().unwrap();
        let path = dir.join("result.json");
        let mut res = JobResult::empty();
        res.verdict = Verdict::Pass;
        res.stage = "done".into();
        super::super::job::write_result(&path, &res).unwrap();
        let o = run_with_timeout(sh("exit 0"), Duration::from_secs(10)).unwrap();
        assert_eq!(interpret(Ok(o), &path, Duration::from_secs(10)), res);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn stages_are_read_from_stderr() {
        let s = format!("noise\n{STAGE_PREFIX}open GPU\n{STAGE_PREFIX}timing\nmore noise\n");
        assert_eq!(last_stage(&s).as_deref(), Some("timing"));
        assert_eq!(last_stage("nothing"), None);
    }
}
