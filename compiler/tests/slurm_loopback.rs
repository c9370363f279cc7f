//! The corpus gate across hosts through Slurm (issue 20), run for real on a one-node Slurm cluster
//! on loopback that the test starts itself: munged with a fresh key, slurmctld and slurmd from
//! Debian's `slurm-wlm` (22.05), all in a temporary directory, as processes the test owns and stops
//! at the end (also when it fails: [`Cluster`]'s `Drop`).
//!
//! `scripts/slurm/corpus-gate.sh` submits `scripts/slurm/corpus-gate.sbatch` as a 3-task array
//! (static and compile tiers of three families, one `cake corpus gate --shard I/3` per task) and
//! the dependent merge job (`scripts/slurm/corpus-merge.sbatch`); the merged results must equal an
//! unsharded `cake corpus gate` of the same cases: the same (case, tier) records with the same
//! statuses, reasons and observations (both run with `--no-timings`).
//!
//! The test needs Slurm and munge (`needs_slurm_`) and, for the compile tier, the CUDA toolchain
//! (`needs_toolchain_`): `scripts/test.sh` installs `slurm-wlm` and `munge` where apt-get can, and
//! leaves the test out, counted skipped, where either resource is missing. Run without them, it
//! fails. Every wait is bounded; a timeout fails the test with the daemons' log tails.

use std::cell::RefCell;
use std::fs;
use std::io::Read;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

const CAKE: &str = env!("CARGO_BIN_EXE_cake");
/// The cases: two kernel families with both tiers, and the verifier's negative programs (static).
const GATE_ARGS: &str = "--family softmax --family rmsnorm --family verifier-negative --no-timings";
const SHARDS: usize = 3;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("compiler/ is inside the repository").to_path_buf()
}

/// `name` on PATH, or the test fails: a test that runs without its resource must not pass.
fn tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("`{name}` not found on PATH: this test needs Slurm and munge (Debian: apt-get install slurm-wlm munge; scripts/test.sh installs them or skips it)")
        })
}

/// Run `cmd` to completion within `limit`; kill it and fail the test past that.
fn run_bounded(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    // Read both pipes on threads so a chatty child cannot block on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for a child") {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} ran past {limit:?}; killed");
        }
        sleep(Duration::from_millis(50));
    };
    Output { status, stdout: t_out.join().unwrap(), stderr: t_err.join().unwrap() }
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A free TCP port on loopback (bound, then released for the daemon to take).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("bind a loopback port").port()
}

fn tail(path: &Path, lines: usize) -> String {
    let t = fs::read_to_string(path).unwrap_or_else(|e| format!("({e})"));
    let v: Vec<&str> = t.lines().collect();
    v[v.len().saturating_sub(lines)..].join("\n")
}

/// A one-node Slurm cluster on loopback: its directory, config and daemons. Dropping it cancels
/// its jobs and stops the daemons (SIGTERM, then SIGKILL after a few seconds).
struct Cluster {
    dir: tempfile::TempDir,
    conf: PathBuf,
    /// In a RefCell so that a wait can notice an exited daemon while the ready check borrows the
    /// cluster.
    daemons: RefCell<Vec<(&'static str, Child)>>,
}

impl Cluster {
    fn start() -> Cluster {
        let (munged, slurmctld, slurmd) = (tool("munged"), tool("slurmctld"), tool("slurmd"));
        for t in ["sbatch", "squeue", "scontrol", "sinfo", "scancel"] {
            tool(t);
        }
        let dir = tempfile::Builder::new().prefix("cake-slurm-").tempdir_in("/tmp").expect("a temporary directory");
        let d = dir.path().to_path_buf();
        // munged checks its directories: the socket's must be reachable by everyone, the key's private.
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
        for (sub, mode) in [("key", 0o700), ("sock", 0o755), ("state", 0o755), ("spool", 0o755), ("log", 0o755)] {
            fs::create_dir(d.join(sub)).unwrap();
            fs::set_permissions(d.join(sub), fs::Permissions::from_mode(mode)).unwrap();
        }
        let mut key = vec![0u8; 1024];
        fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut key)).expect("read /dev/urandom");
        let key_file = d.join("key/munge.key");
        fs::write(&key_file, &key).unwrap();
        fs::set_permissions(&key_file, fs::Permissions::from_mode(0o400)).unwrap();
        let socket = d.join("sock/munge.socket");

        let cluster = Cluster { conf: d.join("slurm.conf"), dir, daemons: RefCell::new(Vec::new()) };
        let log = |name: &str| fs::File::create(d.join("log").join(name)).unwrap();
        let m = Command::new(munged)
            .arg("--foreground")
            .arg(format!("--key-file={}", key_file.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", d.join("sock/munged.pid").display()))
            .arg(format!("--log-file={}", d.join("log/munged.log").display()))
            .arg(format!("--seed-file={}", d.join("key/munged.seed").display()))
            .stdin(Stdio::null())
            .stdout(log("munged.out"))
            .stderr(log("munged.err"))
            .spawn()
            .expect("start munged");
        cluster.daemons.borrow_mut().push(("munged", m));
        cluster.wait_for("munged's socket", Duration::from_secs(20), || socket.exists());

        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let conf = format!(
            "# Written by compiler/tests/slurm_loopback.rs: one node on loopback, state in {d}.\n\
             ClusterName=cakeloop\n\
             SlurmctldHost=localhost(127.0.0.1)\n\
             SlurmctldPort={ctld}\n\
             SlurmdPort={slurmd}\n\
             SlurmUser=root\n\
             SlurmdUser=root\n\
             AuthType=auth/munge\n\
             CredType=cred/munge\n\
             AuthInfo=socket={socket}\n\
             StateSaveLocation={d}/state\n\
             SlurmdSpoolDir={d}/spool\n\
             SlurmctldPidFile={d}/state/slurmctld.pid\n\
             SlurmdPidFile={d}/spool/slurmd.pid\n\
             SlurmctldLogFile={d}/log/slurmctld.log\n\
             SlurmdLogFile={d}/log/slurmd.log\n\
             ProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\n\
             JobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\n\
             SelectType=select/cons_tres\n\
             SelectTypeParameters=CR_CPU\n\
             MpiDefault=none\n\
             ReturnToService=2\n\
             MessageTimeout=10\n\
             MinJobAge=600\n\
             NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN\n\
             PartitionName=loop Nodes=localhost Default=YES MaxTime=60 State=UP\n",
            d = d.display(),
            ctld = free_port(),
            slurmd = free_port(),
            socket = socket.display(),
        );
        fs::write(&cluster.conf, conf).unwrap();

        let c = Command::new(slurmctld)
            .args(["-D", "-i", "-f"])
            .arg(&cluster.conf)
            .env("SLURM_CONF", &cluster.conf)
            .stdin(Stdio::null())
            .stdout(log("slurmctld.out"))
            .stderr(log("slurmctld.err"))
            .spawn()
            .expect("start slurmctld");
        cluster.daemons.borrow_mut().push(("slurmctld", c));
        cluster.wait_for("slurmctld to answer", Duration::from_secs(30), || {
            cluster.slurm("scontrol", &["ping"]).status.success()
        });
        let s = Command::new(slurmd)
            .args(["-D", "-N", "localhost", "-f"])
            .arg(&cluster.conf)
            .env("SLURM_CONF", &cluster.conf)
            .stdin(Stdio::null())
            .stdout(log("slurmd.out"))
            .stderr(log("slurmd.err"))
            .spawn()
            .expect("start slurmd");
        cluster.daemons.borrow_mut().push(("slurmd", s));
        cluster.wait_for("the node to be idle", Duration::from_secs(60), || {
            text(&cluster.slurm("sinfo", &["-h", "-n", "localhost", "-o", "%T"])).trim() == "idle"
        });
        cluster
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A Slurm client command against this cluster (bounded: 30 s).
    fn slurm(&self, cmd: &str, args: &[&str]) -> Output {
        run_bounded(Command::new(cmd).args(args).env("SLURM_CONF", &self.conf), Duration::from_secs(30))
    }

    /// Poll `ready` every 250 ms; fail with the daemons' logs after `limit`, or at once when a
    /// daemon has exited.
    fn wait_for(&self, what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
        let start = Instant::now();
        loop {
            if ready() {
                return;
            }
            for (name, child) in self.daemons.borrow_mut().iter_mut() {
                if let Ok(Some(st)) = child.try_wait() {
                    panic!("waiting for {what}: {name} exited ({st})\n{}", self.logs());
                }
            }
            if start.elapsed() > limit {
                panic!("waiting for {what}: not within {limit:?}\n{}", self.logs());
            }
            sleep(Duration::from_millis(250));
        }
    }

    /// The last lines of every log of the cluster and its jobs.
    fn logs(&self) -> String {
        let mut s = String::new();
        for dir in [self.path().join("log"), self.path().join("out")] {
            let mut files: Vec<PathBuf> = fs::read_dir(&dir).into_iter().flatten().flatten().map(|e| e.path()).collect();
            files.sort();
            for f in files.iter().filter(|f| f.extension().is_some_and(|e| e == "log" || e == "out" || e == "err")) {
                s.push_str(&format!("==> {} <==\n{}\n", f.display(), tail(f, 15)));
            }
        }
        s
    }

    /// `scontrol -o show job ID`'s `JobState=` of every job (or array task) it lists.
    fn job_states(&self, id: &str) -> Vec<String> {
        let o = self.slurm("scontrol", &["-o", "show", "job", id]);
        text(&o)
            .lines()
            .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("JobState=")).map(str::to_string))
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Cancel what still runs, so no job step outlives its slurmd.
        let ids = run_bounded(Command::new("squeue").args(["-h", "-o", "%A"]).env("SLURM_CONF", &self.conf), Duration::from_secs(15));
        let ids: Vec<String> = String::from_utf8_lossy(&ids.stdout).split_whitespace().map(str::to_string).collect();
        if !ids.is_empty() {
            let _ = run_bounded(Command::new("scancel").args(&ids).env("SLURM_CONF", &self.conf), Duration::from_secs(15));
            sleep(Duration::from_secs(2));
        }
        for (_, child) in self.daemons.get_mut().iter_mut().rev() {
            // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped yet.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let start = Instant::now();
            while matches!(child.try_wait(), Ok(None)) && start.elapsed() < Duration::from_secs(5) {
                sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn read_json(path: &Path) -> Value {
    let t = fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&t).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

#[test]
fn needs_slurm_needs_toolchain_array_job_merge_equals_the_unsharded_gate() {
    let t0 = Instant::now();
    let cluster = Cluster::start();
    eprintln!("slurm loopback cluster up in {:.1}s ({})", t0.elapsed().as_secs_f64(), cluster.path().display());
    let out = cluster.path().join("out");

    // Submit the array and the dependent merge, as a user would.
    let mut submit = Command::new("bash");
    submit
        .arg(repo().join("scripts/slurm/corpus-gate.sh"))
        .env("SLURM_CONF", &cluster.conf)
        .env("CAKE", CAKE)
        .env("CAKE_ROOT", repo())
        .env("CAKE_SHARDS", SHARDS.to_string())
        .env("CAKE_TIERS", "static,compile")
        .env("CAKE_GATE_ARGS", GATE_ARGS)
        .env("CAKE_OUT_DIR", &out)
        .env_remove("CAKE_BASELINE")
        .env_remove("CAKE_SLURM_WAIT")
        .env_remove("CAKE_SBATCH_ARGS");
    let o = run_bounded(&mut submit, Duration::from_secs(60));
    let said = text(&o);
    assert!(o.status.success(), "corpus-gate.sh failed:\n{said}\n{}", cluster.logs());
    let job = |label: &str| {
        said.lines()
            .find_map(|l| l.strip_prefix(label)?.split(':').next().map(|s| s.trim().to_string()))
            .unwrap_or_else(|| panic!("corpus-gate.sh did not print `{label}N:`:\n{said}"))
    };
    let (array, merge) = (job("array job "), job("merge job "));

    // Wait for the merge job (it starts after every array task) to end.
    let terminal = |s: &str| !matches!(s, "PENDING" | "RUNNING" | "CONFIGURING" | "COMPLETING" | "REQUEUED" | "RESIZING" | "SUSPENDED");
    let limit = Duration::from_secs(480);
    let mut merge_state = String::new();
    cluster.wait_for("the merge job to finish", limit, || {
        merge_state = cluster.job_states(&merge).first().cloned().unwrap_or_default();
        !merge_state.is_empty() && terminal(&merge_state)
    });
    let array_states = cluster.job_states(&array);
    eprintln!("array job {array}: {array_states:?}; merge job {merge}: {merge_state} ({:.1}s)", t0.elapsed().as_secs_f64());
    assert_eq!(array_states.len(), SHARDS, "one array task per shard: {array_states:?}\n{}", cluster.logs());
    assert!(array_states.iter().all(|s| s == "COMPLETED"), "array tasks: {array_states:?}\n{}", cluster.logs());
    assert_eq!(merge_state, "COMPLETED", "merge job {merge}\n{}", cluster.logs());

    // Each shard ran its part of the cases, none twice.
    let mut sharded = 0;
    for i in 1..=SHARDS {
        let s = read_json(&out.join(format!("shard-{i}-of-{SHARDS}.json")));
        assert_eq!(s["shard"], format!("{i}/{SHARDS}"));
        let n = s["results"].as_array().map_or(0, Vec::len);
        assert!(n > 0, "shard {i}/{SHARDS} ran no case");
        sharded += n;
    }

    // The unsharded run of the same cases, outside Slurm.
    let full = cluster.path().join("unsharded.json");
    let mut gate = Command::new(CAKE);
    gate.args(["corpus", "gate", "--root"])
        .arg(repo().join("corpus"))
        .args(["--tier", "static", "--tier", "compile", "--no-progress", "-o"])
        .arg(&full)
        .arg("--report")
        .arg(cluster.path().join("unsharded.md"))
        .args(GATE_ARGS.split_whitespace());
    let o = run_bounded(&mut gate, Duration::from_secs(300));
    assert!(matches!(o.status.code(), Some(0 | 1)), "the unsharded gate did not run:\n{}", text(&o));

    let (merged, full) = (read_json(&out.join("merged.json")), read_json(&full));
    let results = full["results"].as_array().expect("results");
    assert_eq!(sharded, results.len(), "the shards together ran every case once");
    for tier in ["static", "compile"] {
        let of_tier: Vec<&Value> = results.iter().filter(|r| r["tier"] == tier).collect();
        assert!(!of_tier.is_empty(), "the unsharded run has {tier} results");
        let skipped: Vec<&Value> = of_tier.iter().copied().filter(|r| r["status"] == "skipped").collect();
        assert!(skipped.is_empty(), "{tier} tier skipped (the compile tier needs the CUDA toolchain: . .toolchain/cuda/env.sh): {}", skipped[0]["reason"]);
    }
    assert_eq!(merged["tiers"], full["tiers"]);
    assert_eq!(merged["families"], full["families"]);
    if merged["results"] != full["results"] {
        let m = merged["results"].as_array().unwrap();
        let first = m.iter().zip(results).find(|(a, b)| a != b);
        panic!("merged ({} results) differs from the unsharded run ({}); first difference: {first:#?}", m.len(), results.len());
    }
    eprintln!("{} results: merged = unsharded ({:.1}s in all)", results.len(), t0.elapsed().as_secs_f64());
}

/// Bad settings are refused before anything is submitted, with exit 2 and a line saying what to do
/// (no Slurm needed: these checks come first).
#[test]
fn slurm_scripts_refuse_bad_settings() {
    let script = |name: &str, env: &[(&str, &str)]| {
        let mut c = Command::new("bash");
        c.arg(repo().join("scripts/slurm").join(name)).env("CAKE", CAKE).env("CAKE_ROOT", repo());
        for v in ["SLURM_ARRAY_TASK_ID", "CAKE_SHARDS", "CAKE_TIERS", "CAKE_GATE_ARGS", "CAKE_BASELINE", "CAKE_OUT_DIR"] {
            c.env_remove(v);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        run_bounded(&mut c, Duration::from_secs(30))
    };
    let out = tempfile::tempdir().unwrap();
    let out = out.path().to_str().unwrap();
    for (name, env, says) in [
        ("corpus-gate.sh", vec![("CAKE_SHARDS", "three")], "CAKE_SHARDS must be a positive integer"),
        ("corpus-gate.sh", vec![("CAKE_SHARDS", "0")], "CAKE_SHARDS must be a positive integer"),
        ("corpus-gate.sh", vec![("CAKE_TIERS", "static,gpus")], "unknown tier 'gpus'"),
        ("corpus-gate.sh", vec![("CAKE_GATE_ARGS", "--family softmax --shard 1/2")], "must not hold --shard"),
        ("corpus-gate.sh", vec![("CAKE", "/nonexistent/cake")], "no cake binary at /nonexistent/cake"),
        ("corpus-gate.sh", vec![("CAKE_BASELINE", "/nonexistent.json")], "CAKE_BASELINE=/nonexistent.json does not exist"),
        ("corpus-gate.sbatch", vec![("CAKE_OUT_DIR", out)], "not an array task"),
        (
            "corpus-gate.sbatch",
            vec![
                ("SLURM_ARRAY_TASK_ID", "3"),
                ("SLURM_ARRAY_TASK_MIN", "1"),
                ("SLURM_ARRAY_TASK_MAX", "5"),
                ("SLURM_ARRAY_TASK_COUNT", "3"),
                ("SLURM_ARRAY_TASK_STEP", "2"),
                ("CAKE_OUT_DIR", out),
            ],
            "one contiguous range with step 1",
        ),
        ("corpus-merge.sbatch", vec![("CAKE_OUT_DIR", out), ("CAKE_SHARDS", "2")], "2 of 2 shard results missing"),
        ("corpus-merge.sbatch", vec![("CAKE_OUT_DIR", out)], "set CAKE_SHARDS"),
    ] {
        let o = script(name, &env);
        let said = text(&o);
        assert_eq!(o.status.code(), Some(2), "{name} {env:?}: {said}");
        assert!(said.contains(says), "{name} {env:?} should say `{says}`:\n{said}");
    }
}
