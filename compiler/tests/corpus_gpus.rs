//! `cake corpus gate --gpus all|N|LIST` (issue 20, items 1 and 4): the worker pool, on a machine
//! without GPUs. A stand-in `nvidia-smi` on PATH lists the GPU ids the test chooses, and
//! `CAKE_CORPUS_WORKER` names a wrapper around the real `cake` that records each worker's
//! `CUDA_VISIBLE_DEVICES` and arguments (and, where the test asks, kills itself). The cases run
//! the static tier, which needs no GPU; the gpu tier goes through the same pool, but no GPU run is
//! made here. Checked: the pool's joined results equal a single run's; the cases are split
//! between the workers by the baseline's durations, each worker sees only its GPU; a dead worker's
//! cases are retried on another GPU, and those whose worker dies on the retry too are spurious;
//! bad `--gpus` values, missing and busy GPUs are coded errors (G011–G013, G015) with a help line.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const CAKE: &str = env!("CARGO_BIN_EXE_cake");
const CASES: [&str; 4] = ["--family", "softmax", "--family", "verifier-negative"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

struct Host {
    dir: tempfile::TempDir,
}

impl Host {
    /// A scratch directory whose `bin/nvidia-smi` prints `smi` (its exit status `smi_status`) and
    /// whose `worker` wraps cake: it logs "CUDA_VISIBLE_DEVICES ARGS..." to `workers.log`, and
    /// kills itself when `die` (a shell condition) holds.
    fn new(smi: &str, smi_status: u8, die: &str) -> Host {
        Host::with_apps(smi, "", smi_status, die)
    }

    /// As [`Host::new`], and `nvidia-smi --query-compute-apps` prints `apps`.
    fn with_apps(smi: &str, apps: &str, smi_status: u8, die: &str) -> Host {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir(d.join("bin")).unwrap();
        let exec = |p: PathBuf, text: String| {
            fs::write(&p, text).unwrap();
            fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        };
        exec(d.join("bin/nvidia-smi"), format!("#!/bin/sh\ncase \"$*\" in *compute-apps*) printf '%s' '{apps}' ;; *) printf '%s' '{smi}' ;; esac\nexit {smi_status}\n"));
        exec(
            d.join("worker"),
            format!(
                "#!/bin/bash\necho \"$CUDA_VISIBLE_DEVICES $*\" >> '{log}'\nif {die}; then kill -9 $$; fi\nexec '{CAKE}' \"$@\"\n",
                log = d.join("workers.log").display()
            ),
        );
        Host { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `cake corpus gate --tier static CASES --no-timings -o NAME.json ...` on this host.
    fn gate(&self, name: &str, extra: &[&str]) -> Output {
        self.gate_visible(name, extra, None)
    }

    /// As [`Host::gate`], with CUDA_VISIBLE_DEVICES set to `visible` (unset for `None`).
    fn gate_visible(&self, name: &str, extra: &[&str], visible: Option<&str>) -> Output {
        let path = format!("{}:{}", self.path("bin").display(), std::env::var("PATH").unwrap_or_default());
        Command::new(CAKE)
            .args(["corpus", "gate", "--root"])
            .arg(repo().join("corpus"))
            .args(["--tier", "static", "--no-timings", "--no-progress"])
            .args(CASES)
            .arg("-o")
            .arg(self.path(&format!("{name}.json")))
            .arg("--report")
            .arg(self.path(&format!("{name}.md")))
            .args(extra)
            .env("PATH", path)
            .env("CAKE_CORPUS_WORKER", self.path("worker"))
            .env_remove("CUDA_VISIBLE_DEVICES")
            .envs(visible.map(|v| ("CUDA_VISIBLE_DEVICES", v)))
            .output()
            .expect("run cake")
    }

    fn results(&self, name: &str) -> Value {
        serde_json::from_str(&fs::read_to_string(self.path(&format!("{name}.json"))).unwrap()).unwrap()
    }

    /// The workers' log: (CUDA_VISIBLE_DEVICES, the case ids it was given), in start order.
    fn workers(&self) -> Vec<(String, Vec<String>)> {
        let log = fs::read_to_string(self.path("workers.log")).unwrap_or_default();
        log.lines()
            .map(|l| {
                let words: Vec<&str> = l.split(' ').collect();
                let ids = words.windows(2).filter(|w| w[0] == "--case").map(|w| w[1].to_string()).collect();
                (words[0].to_string(), ids)
            })
            .collect()
    }
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn ids_of(v: &Value) -> Vec<String> {
    let mut ids: Vec<String> = v["results"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
    ids.dedup();
    ids
}

#[test]
fn the_pool_joins_to_the_single_run_and_balances_by_duration() {
    let host = Host::new("0\n1\n2\n", 0, "false");
    // A single run, with its timings: the baseline the pool balances by.
    let single = Command::new(CAKE)
        .args(["corpus", "gate", "--root"])
        .arg(repo().join("corpus"))
        .args(["--tier", "static", "--no-progress"])
        .args(CASES)
        .arg("-o")
        .arg(host.path("timed.json"))
        .arg("--report")
        .arg(host.path("timed.md"))
        .output()
        .unwrap();
    assert!(single.status.success(), "{}", text(&single));
    let plain = host.gate("single", &[]);
    assert!(plain.status.success(), "{}", text(&plain));

    let baseline = host.path("timed.json");
    let o = host.gate("pool", &["--gpus", "0,2", "--baseline", baseline.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (pool, single) = (host.results("pool"), host.results("single"));
    assert_eq!(pool["results"], single["results"], "the pool's results are the single run's");
    assert_eq!(pool["tiers"], single["tiers"]);
    assert_eq!(pool["families"], single["families"]);
    assert!(pool["environment"]["gpus"].as_str().unwrap().contains("2 worker processes"), "{}", pool["environment"]);

    // Two workers, one per GPU asked for (0 and 2, not 1), the cases split without overlap.
    let workers = host.workers();
    let mut gpus: Vec<&str> = workers.iter().map(|(g, _)| g.as_str()).collect();
    gpus.sort();
    assert_eq!(gpus, ["0", "2"], "{workers:?}");
    let mut all: Vec<String> = workers.iter().flat_map(|(_, ids)| ids.clone()).collect();
    all.sort();
    assert_eq!(all, ids_of(&single), "every case once");
    // The split follows the baseline's durations (longest first onto the lighter worker).
    let timed = host.results("timed");
    let ms = |id: &str| -> f64 { timed["results"].as_array().unwrap().iter().filter(|r| r["id"] == id).map(|r| r["duration_ms"].as_f64().unwrap()).sum() };
    let loads: Vec<f64> = workers.iter().map(|(_, ids)| ids.iter().map(|i| ms(i)).sum()).collect();
    let longest = all.iter().map(|i| ms(i)).fold(0.0, f64::max);
    assert!((loads[0] - loads[1]).abs() <= longest + 1e-9, "balanced within the longest case: {loads:?} (longest {longest})");
    // The human summary names the workers.
    assert!(text(&o).contains("gpu 0: ") && text(&o).contains("gpu 2: "), "{}", text(&o));
}

#[test]
fn all_and_a_count_take_the_hosts_gpus() {
    let host = Host::new("0\n1\n", 0, "false");
    let o = host.gate("all", &["--gpus", "all"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let mut gpus: Vec<String> = host.workers().into_iter().map(|(g, _)| g).collect();
    gpus.sort();
    assert_eq!(gpus, ["0", "1"]);
    fs::remove_file(host.path("workers.log")).unwrap();
    let o = host.gate("one", &["--gpus", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let gpus: Vec<String> = host.workers().into_iter().map(|(g, _)| g).collect();
    assert_eq!(gpus, ["0"], "--gpus 1 is one GPU, the first");
    assert_eq!(host.results("one")["results"], host.results("all")["results"]);
}

#[test]
fn a_dead_workers_cases_are_retried_on_another_gpu() {
    // The worker on GPU 0 is killed (SIGKILL) at its start; GPU 1 runs its cases after its own.
    let host = Host::new("0\n1\n", 0, r#"[ "$CUDA_VISIBLE_DEVICES" = 0 ]"#);
    let single = host.gate("single", &[]);
    assert!(single.status.success(), "{}", text(&single));
    let o = host.gate("pool", &["--gpus", "all"]);
    assert_eq!(o.status.code(), Some(0), "a dead worker is not a failed gate:\n{}", text(&o));
    let workers = host.workers();
    assert_eq!(workers.len(), 3, "GPU 0, GPU 1, then GPU 0's cases on GPU 1: {workers:?}");
    assert_eq!((workers[2].0.as_str(), &workers[2].1), ("1", &workers.iter().find(|w| w.0 == "0").unwrap().1));
    let (pool, single) = (host.results("pool"), host.results("single"));
    let (p, s) = (pool["results"].as_array().unwrap(), single["results"].as_array().unwrap());
    assert_eq!(p.len(), s.len());
    let retried: Vec<&String> = workers[2].1.iter().collect();
    for (a, b) in p.iter().zip(s) {
        assert_eq!((&a["id"], &a["tier"], &a["status"], &a["observed"]), (&b["id"], &b["tier"], &b["status"], &b["observed"]));
        let is_retried = retried.iter().any(|id| a["id"] == id.as_str());
        assert_eq!(
            a["reason"].as_str().unwrap().contains("retried on GPU 1: the worker process on GPU 0 died (killed by signal 9)"),
            is_retried,
            "{a}"
        );
        if !is_retried {
            assert_eq!(a, b);
        }
    }
    assert!(text(&o).contains("gpu 0: the worker died (killed by signal 9)"), "{}", text(&o));
}

#[test]
fn cases_whose_worker_dies_twice_are_spurious() {
    // Any worker given this case dies, on every GPU: its part is spurious, the others pass.
    let list = Command::new(CAKE).args(["corpus", "list", "--root"]).arg(repo().join("corpus")).args(["--family", "softmax", "--cases", "--message-format", "json"]).output().unwrap();
    let list: Value = serde_json::from_slice(&list.stdout).unwrap();
    let killer = list["cases"][0]["id"].as_str().unwrap().to_string();
    let host = Host::new("0\n1\n2\n", 0, &format!(r#"[[ " $* " == *" {killer} "* ]]"#));
    let single = host.gate("single", &[]);
    assert!(single.status.success(), "{}", text(&single));
    let o = host.gate("pool", &["--gpus", "all"]);
    assert_eq!(o.status.code(), Some(0), "spurious results do not fail the gate:\n{}", text(&o));
    let workers = host.workers();
    assert_eq!(workers.len(), 4, "three workers, then the dead one's retry: {workers:?}");
    let doomed = &workers.iter().find(|(_, ids)| ids.contains(&killer)).unwrap().1;
    assert_eq!(&workers[3].1, doomed, "the retry runs the same cases");
    assert_ne!(workers[3].0, workers.iter().find(|(_, ids)| ids == doomed).unwrap().0, "on another GPU");
    let (pool, single) = (host.results("pool"), host.results("single"));
    let (p, s) = (pool["results"].as_array().unwrap(), single["results"].as_array().unwrap());
    assert_eq!(p.len(), s.len(), "one result per (case, tier), as in a single run");
    for (a, b) in p.iter().zip(s) {
        assert_eq!((&a["id"], &a["tier"]), (&b["id"], &b["tier"]));
        if doomed.iter().any(|id| a["id"] == id.as_str()) {
            assert_eq!(a["status"], "spurious", "{a}");
            assert!(a["reason"].as_str().unwrap().contains("and again on the retry on GPU"), "{a}");
            assert_eq!(a["attempts"], 2);
        } else {
            assert_eq!(a, b);
        }
    }
    let md = fs::read_to_string(host.path("pool.md")).unwrap();
    assert!(md.to_lowercase().contains("spurious"), "{md}");
}

#[test]
fn bad_gpu_selections_are_coded_errors() {
    let two = Host::new("0\n1\n", 0, "false");
    for (gpus, code, says) in [
        ("0", "G011", "a count of 0 GPUs runs nothing"),
        ("two", "G011", "neither `all`, a count nor a list of GPU ids"),
        ("1,1", "G011", "GPU 1 is listed twice"),
        ("0,-1", "G011", "`-1` is not a GPU id"),
        ("3", "G013", "3 GPUs asked for; this host has GPU 0, 1"),
        ("0,5", "G013", "no GPU 5; this host has GPU 0, 1"),
    ] {
        let o = two.gate("bad", &["--gpus", gpus]);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(o.status.code(), Some(2), "--gpus {gpus}: {}", text(&o));
        assert!(err.contains(&format!("error[{code}]")) && err.contains(says), "--gpus {gpus}: {err}");
        assert!(err.contains("= help: "), "--gpus {gpus} has a help line: {err}");
    }
    // No GPU: nvidia-smi lists none, or fails as it does on a machine without the driver.
    for host in [Host::new("", 0, "false"), Host::new("No devices were found\n", 6, "false")] {
        let o = host.gate("none", &["--gpus", "all"]);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(err.contains("error[G012]: --gpus all: no GPU found") && err.contains("= help: "), "{err}");
    }
    // Busy GPUs: Prohibited, or Exclusive_Process and held by a process. `all` passes over them.
    let busy = Host::with_apps("0, Exclusive_Process, GPU-a\n1, Default, GPU-b\n2, Prohibited, GPU-c\n", "GPU-a, 4242\n", 0, "false");
    for (gpus, says) in [
        ("0,1", "busy: GPU 0 is in Exclusive_Process mode and held by process 4242"),
        ("2,", "busy: GPU 2 is in Prohibited compute mode"),
        ("2", "busy: GPU 0 is in Exclusive_Process mode and held by process 4242; GPU 2 is in Prohibited compute mode"),
    ] {
        let o = busy.gate("bad", &["--gpus", gpus]);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(o.status.code(), Some(2), "--gpus {gpus}: {}", text(&o));
        assert!(err.contains("error[G015]") && err.contains(says) && err.contains("= help: "), "--gpus {gpus}: {err}");
    }
    assert!(busy.workers().is_empty(), "no worker started for a refused selection");
    let o = busy.gate("free", &["--gpus", "all"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let gpus: Vec<String> = busy.workers().into_iter().map(|(g, _)| g).collect();
    assert_eq!(gpus, ["GPU-b"], "only the free GPU (by its UUID)");
    assert!(text(&o).contains("gpu 0: not used, it is in Exclusive_Process mode and held by process 4242"), "{}", text(&o));
    // Exclusive_Process with no process on it is free.
    let idle = Host::with_apps("0, Exclusive_Process, GPU-a\n", "", 0, "false");
    let o = idle.gate("idle", &["--gpus", "0,"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // JSON: the code, the message and the help.
    let o = two.gate("bad", &["--gpus", "7,", "--message-format", "json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    assert_eq!(v["code"], "G013");
    assert!(v["help"].as_str().unwrap().contains("nvidia-smi -L"), "{v}");
    // --bless rewrites manifests from one process.
    let o = two.gate("bad", &["--gpus", "all", "--bless"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(two.workers().is_empty(), "no worker started for a refused selection");
}

#[test]
fn workers_get_the_gpus_uuid_and_cuda_visible_devices_restricts_them() {
    // nvidia-smi gives UUIDs: each worker's CUDA_VISIBLE_DEVICES is its GPU's UUID (CUDA's own
    // numbering may differ from nvidia-smi's).
    let host = Host::new("0, Default, GPU-aaaa\n1, Default, GPU-bbbb\n2, Default, GPU-cccc\n", 0, "false");
    let o = host.gate("uuid", &["--gpus", "0,2"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let mut seen: Vec<String> = host.workers().into_iter().map(|(g, _)| g).collect();
    seen.sort();
    assert_eq!(seen, ["GPU-aaaa", "GPU-cccc"]);
    // A CUDA_VISIBLE_DEVICES already set (a Slurm GPU allocation) bounds `all` and the ids.
    fs::remove_file(host.path("workers.log")).unwrap();
    let o = host.gate_visible("visible", &["--gpus", "all"], Some("2,GPU-bbbb"));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let mut seen: Vec<String> = host.workers().into_iter().map(|(g, _)| g).collect();
    seen.sort();
    assert_eq!(seen, ["GPU-bbbb", "GPU-cccc"]);
    let o = host.gate_visible("visible", &["--gpus", "0,"], Some("1,2"));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("error[G013]: --gpus 0,: no GPU 0; this host has GPU 1, 2"), "{}", text(&o));
    let o = host.gate_visible("visible", &["--gpus", "all"], Some(""));
    assert!(String::from_utf8_lossy(&o.stderr).contains("error[G012]") && String::from_utf8_lossy(&o.stderr).contains("names none of the GPUs"), "{}", text(&o));
}
