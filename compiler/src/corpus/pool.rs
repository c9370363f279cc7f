//! `cake corpus gate --gpus all|N|LIST`: the gate on several GPUs of one host, one worker process
//! per GPU (`CUDA_VISIBLE_DEVICES=<id>`), each a plain `cake corpus gate --case ...` over its part
//! of the cases; their results files are joined with [`GateResults::merge`], the same join
//! `cake corpus merge` makes of `--shard` runs. The cases are balanced by their recorded durations
//! (from `--baseline`, longest first onto the least-loaded GPU), or evenly without one.
//!
//! A worker that dies (killed by a signal, an exit status other than the gate's 0/1/2, or no
//! results file) has its cases run again on another GPU once one is free; the retried results
//! say so in their reason. Cases whose worker died on the retry too, or that have no other GPU
//! to go to, are recorded as spurious: a dead process says nothing about the compiler.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::error::CorpusError;
use super::results::{CaseResult, GateResults, Observed, Status};
use super::run::GateRequest;
use super::{Corpus, Tier};

/// Which GPUs `--gpus` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuSpec {
    /// Every GPU the host has.
    All,
    /// The first N of them.
    Count(u32),
    /// These ids (`nvidia-smi` indices), in this order.
    List(Vec<u32>),
}

impl GpuSpec {
    /// Parse `all`, `N` (a positive count) or `LIST` (ids, comma-separated: `0,2,3`). A single
    /// number is a count; a list of one id keeps its comma (`--gpus 3,`: the GPU with id 3).
    pub fn parse(text: &str) -> Result<GpuSpec, CorpusError> {
        let bad = |why: String| CorpusError::BadGpus { value: text.to_string(), why };
        let t = text.trim();
        if t.eq_ignore_ascii_case("all") {
            return Ok(GpuSpec::All);
        }
        if t.is_empty() {
            return Err(bad("it is empty".into()));
        }
        if !t.contains(',') {
            let n: u32 = t.parse().map_err(|_| bad(format!("`{t}` is neither `all`, a count nor a list of GPU ids")))?;
            if n == 0 {
                return Err(bad("a count of 0 GPUs runs nothing".into()));
            }
            return Ok(GpuSpec::Count(n));
        }
        let mut ids = Vec::new();
        for part in t.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let id: u32 = part.parse().map_err(|_| bad(format!("`{part}` is not a GPU id (a non-negative integer)")))?;
            if ids.contains(&id) {
                return Err(bad(format!("GPU {id} is listed twice")));
            }
            ids.push(id);
        }
        if ids.is_empty() {
            return Err(bad("the list names no GPU".into()));
        }
        Ok(GpuSpec::List(ids))
    }

    /// The GPU ids to use, given those the host has (`Err(why)`: they could not be listed).
    /// `all` and a count take the GPUs that are not busy; a busy GPU named in a list is an error.
    pub fn select(&self, present: Result<Vec<Gpu>, String>) -> Result<Vec<u32>, CorpusError> {
        let asked = self.to_string();
        let present = match present {
            Ok(p) if !p.is_empty() => p,
            Ok(_) => return Err(CorpusError::NoGpu { asked, why: "nvidia-smi lists no GPU".into() }),
            Err(why) => return Err(CorpusError::NoGpu { asked, why }),
        };
        let ids: Vec<u32> = present.iter().map(|g| g.index).collect();
        let free: Vec<u32> = present.iter().filter(|g| g.busy.is_none()).map(|g| g.index).collect();
        let busy = |which: &mut dyn Iterator<Item = &Gpu>| -> String {
            which.filter_map(|g| g.busy.as_ref().map(|b| format!("GPU {} {b}", g.index))).collect::<Vec<_>>().join("; ")
        };
        match self {
            GpuSpec::All if free.is_empty() => Err(CorpusError::GpuBusy { asked, busy: busy(&mut present.iter()) }),
            GpuSpec::All => Ok(free),
            GpuSpec::Count(n) if *n as usize > ids.len() => {
                Err(CorpusError::GpuMissing { asked, missing: format!("{n} GPUs asked for"), present: ids })
            }
            GpuSpec::Count(n) if *n as usize > free.len() => Err(CorpusError::GpuBusy { asked, busy: busy(&mut present.iter()) }),
            GpuSpec::Count(n) => Ok(free[..*n as usize].to_vec()),
            GpuSpec::List(list) => {
                if let Some(id) = list.iter().find(|id| !ids.contains(id)) {
                    return Err(CorpusError::GpuMissing { asked, missing: format!("no GPU {id}"), present: ids });
                }
                let taken = busy(&mut present.iter().filter(|g| list.contains(&g.index)));
                if taken.is_empty() { Ok(list.clone()) } else { Err(CorpusError::GpuBusy { asked, busy: taken }) }
            }
        }
    }
}

/// One GPU as `nvidia-smi` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gpu {
    /// nvidia-smi's index (what `--gpus LIST` names).
    pub index: u32,
    /// What a worker's CUDA_VISIBLE_DEVICES is set to: the GPU's UUID where nvidia-smi gives one
    /// (CUDA numbers devices fastest-first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, nvidia-smi by PCI
    /// bus, so an index could name another GPU), else the index.
    pub device: String,
    /// Why no worker can use it (`Some("is in Prohibited compute mode")`), or `None`.
    pub busy: Option<String>,
}

impl std::fmt::Display for GpuSpec {
    /// As written on the command line (`all`, `2`, `0,2`; one id: `3,`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuSpec::All => write!(f, "all"),
            GpuSpec::Count(n) => write!(f, "{n}"),
            GpuSpec::List(ids) if ids.len() == 1 => write!(f, "{},", ids[0]),
            GpuSpec::List(ids) => write!(f, "{}", ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")),
        }
    }
}

/// Run `nvidia-smi ARGS` (bounded: 30 s); its standard output, or why it gave none.
fn nvidia_smi(args: &[&str]) -> Result<String, String> {
    let mut child = Command::new("nvidia-smi")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run nvidia-smi ({e})"))?;
    let start = Instant::now();
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            return Err("nvidia-smi did not answer within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        let said = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
        let line = said.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("no output");
        return Err(format!("nvidia-smi failed ({}): {line}", out.status));
    }
    Ok(text)
}

/// The GPUs of this host, from `nvidia-smi --query-gpu=index,compute_mode,uuid` and, for those in
/// exclusive-process mode, `--query-compute-apps`: a GPU is busy when its compute mode is
/// Prohibited, or Exclusive_Process and a process already holds it (a worker could not create a
/// context there). A GPU in the default mode that others use is shared, not busy.
///
/// When CUDA_VISIBLE_DEVICES is set (a Slurm `--gres=gpu:N` allocation, or by hand), only the GPUs
/// it names (by index or UUID) are this run's.
pub fn detect_gpus() -> Result<Vec<Gpu>, String> {
    let all = detect_all_gpus()?;
    match std::env::var("CUDA_VISIBLE_DEVICES") {
        Ok(visible) => visible_only(all, &visible),
        Err(_) => Ok(all),
    }
}

/// The GPUs of `all` that CUDA_VISIBLE_DEVICES=`visible` names (by index or UUID, or a UUID's
/// prefix as CUDA accepts), in its order. CUDA stops at the first entry that names no device.
pub fn visible_only(all: Vec<Gpu>, visible: &str) -> Result<Vec<Gpu>, String> {
    let mut out: Vec<Gpu> = Vec::new();
    for entry in visible.split(',').map(str::trim) {
        let found = all.iter().find(|g| {
            g.index.to_string() == entry || (entry.len() > 4 && entry.starts_with("GPU-") && g.device.starts_with(entry))
        });
        match found {
            Some(g) if !out.contains(g) => out.push(g.clone()),
            Some(_) => {}
            None => break,
        }
    }
    if out.is_empty() {
        let listed: Vec<String> = all.iter().map(|g| g.index.to_string()).collect();
        return Err(format!("CUDA_VISIBLE_DEVICES={visible:?} names none of the GPUs nvidia-smi lists ({})", listed.join(", ")));
    }
    Ok(out)
}

fn detect_all_gpus() -> Result<Vec<Gpu>, String> {
    let text = nvidia_smi(&["--query-gpu=index,compute_mode,uuid", "--format=csv,noheader"])?;
    let mut rows = Vec::new();
    for l in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        let index = f[0].parse::<u32>().map_err(|_| format!("nvidia-smi printed `{l}`, not `index, compute_mode, uuid`"))?;
        rows.push((index, f.get(1).copied().unwrap_or("").to_string(), f.get(2).copied().unwrap_or("").to_string()));
    }
    let exclusive = rows.iter().any(|(_, mode, _)| mode.eq_ignore_ascii_case("Exclusive_Process"));
    let apps = if exclusive { nvidia_smi(&["--query-compute-apps=gpu_uuid,pid", "--format=csv,noheader"])? } else { String::new() };
    Ok(rows
        .into_iter()
        .map(|(index, mode, uuid)| {
            let holders: Vec<&str> = apps
                .lines()
                .filter_map(|l| l.split_once(','))
                .filter(|(u, _)| u.trim() == uuid)
                .map(|(_, pid)| pid.trim())
                .collect();
            let busy = if mode.eq_ignore_ascii_case("Prohibited") {
                Some("is in Prohibited compute mode".to_string())
            } else if mode.eq_ignore_ascii_case("Exclusive_Process") && !holders.is_empty() {
                Some(format!("is in Exclusive_Process mode and held by process {}", holders.join(", ")))
            } else {
                None
            };
            let device = if uuid.starts_with("GPU-") { uuid } else { index.to_string() };
            Gpu { index, device, busy }
        })
        .collect())
}

/// Split `items` (id, expected duration) over `workers`: longest first, each onto the worker with
/// the least expected time so far (ties: the lower worker). Each part keeps the items' order.
pub fn partition(items: &[(String, f64)], workers: usize) -> Vec<Vec<String>> {
    let workers = workers.max(1);
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| items[b].1.total_cmp(&items[a].1).then(a.cmp(&b)));
    let mut load = vec![0.0f64; workers];
    let mut owner = vec![0usize; items.len()];
    for i in order {
        let w = (0..workers).min_by(|&x, &y| load[x].total_cmp(&load[y]).then(x.cmp(&y))).unwrap_or(0);
        load[w] += items[i].1;
        owner[i] = w;
    }
    let mut parts = vec![Vec::new(); workers];
    for (i, (id, _)) in items.iter().enumerate() {
        parts[owner[i]].push(id.clone());
    }
    parts
}

/// The expected duration of each id: its recorded `duration_ms` summed over `tiers` in
/// `recorded`; ids it does not time get the mean of those it does (1 ms each when none are timed,
/// which splits by count).
pub fn durations(ids: &[String], tiers: &[Tier], recorded: Option<&GateResults>) -> Vec<(String, f64)> {
    let mut ms: BTreeMap<&str, f64> = BTreeMap::new();
    for r in recorded.map(|b| b.results.as_slice()).unwrap_or_default() {
        if tiers.contains(&r.tier) && r.duration_ms > 0.0 {
            *ms.entry(r.id.as_str()).or_default() += r.duration_ms;
        }
    }
    let known: Vec<f64> = ids.iter().filter_map(|id| ms.get(id.as_str()).copied()).collect();
    let fill = if known.is_empty() { 1.0 } else { known.iter().sum::<f64>() / known.len() as f64 };
    ids.iter().map(|id| (id.clone(), ms.get(id.as_str()).copied().unwrap_or(fill))).collect()
}

/// One worker process's part: the ids it runs and the GPU it ran on first (for a retry).
#[derive(Clone, Debug)]
struct Job {
    ids: Vec<String>,
    /// `Some((gpu, why))` when this is the retry of a worker that died on `gpu`.
    died_on: Option<(u32, String)>,
}

struct Running {
    gpu: u32,
    job: Job,
    child: Child,
    out: PathBuf,
    log: PathBuf,
}

impl Drop for Running {
    /// A worker still running when the pool gives up (an error, a panic) is stopped with it; for
    /// one already waited for, this does nothing.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// What the pool did, one line per worker (for the CLI to print).
pub type WorkerLines = Vec<String>;

/// The `cake corpus gate` arguments of a worker: the request's front end, tiers and limits, its
/// part of the cases, and its own results file.
fn worker_args(req: &GateRequest, root: &Path, ids: &[String], out: &Path, jobs: usize) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec!["corpus".into(), "gate".into(), "--root".into(), root.into()];
    for t in &req.tiers {
        a.extend(["--tier".into(), t.as_str().into()]);
    }
    for (flag, v) in [("--catalog", &req.catalog), ("--rules", &req.rules), ("--add-rules", &req.add_rules), ("--targets", &req.targets)] {
        if let Some(p) = v {
            a.extend([flag.into(), p.into()]);
        }
    }
    if let Some(t) = req.timeout {
        a.extend(["--timeout".into(), t.to_string().into()]);
    }
    if req.no_timings {
        a.push("--no-timings".into());
    }
    a.extend(["--jobs".into(), jobs.to_string().into(), "--no-progress".into(), "-o".into(), out.into(), "--report".into()]);
    a.push(out.with_extension("md").into());
    for id in ids {
        a.extend(["--case".into(), id.into()]);
    }
    a
}

fn describe(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("killed by signal {sig}");
        }
    }
    match status.code() {
        Some(c) => format!("exit status {c}"),
        None => status.to_string(),
    }
}

/// The last non-empty line of a worker's log.
fn last_line(log: &Path) -> String {
    fs::read_to_string(log).ok().and_then(|t| t.lines().rev().map(str::trim).find(|l| !l.is_empty()).map(str::to_string)).unwrap_or_default()
}

/// Run `req`'s cases on `devices` (nvidia-smi index, CUDA_VISIBLE_DEVICES value), one worker process (`worker`, a `cake` binary) per GPU, and return
/// the joined results (unclassified, unwritten) and one line per worker. `corpus` is the loaded
/// corpus at `root`; `recorded` times the cases for the balance.
pub fn run(
    req: &GateRequest,
    corpus: &Corpus,
    root: &Path,
    devices: &[(u32, String)],
    worker: &Path,
    recorded: Option<&GateResults>,
) -> Result<(GateResults, WorkerLines), CorpusError> {
    let start = Instant::now();
    let gpus: Vec<u32> = devices.iter().map(|(i, _)| *i).collect();
    let device_of = |gpu: u32| devices.iter().find(|(i, _)| *i == gpu).map_or_else(|| gpu.to_string(), |(_, d)| d.clone());
    let mut tiers: Vec<Tier> = if req.tiers.is_empty() { Tier::ALL.to_vec() } else { req.tiers.clone() };
    tiers.sort();
    tiers.dedup();
    let sel = &req.selection;
    // The selected cases, and the selected load errors (each becomes one error result of the
    // worker whose part holds its id, as in a single run).
    let mut ids: Vec<String> = corpus.cases.iter().filter(|c| sel.selects(&c.id, &c.family)).map(|c| c.id.clone()).collect();
    ids.extend(corpus.errors.iter().filter(|e| sel.selects(&e.id, &e.family)).map(|e| e.id.clone()));
    let parts = partition(&durations(&ids, &tiers, recorded), gpus.len());

    // Workers' files beside the results: results.json -> results.gpus/gpu-0.json.
    let stem = req.out.file_stem().map_or_else(|| "results".into(), |s| s.to_string_lossy().into_owned());
    let dir = req.out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).join(format!("{stem}.gpus"));
    fs::create_dir_all(&dir).map_err(|e| CorpusError::write("create", &dir, e))?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let jobs = if req.jobs > 0 { req.jobs } else { (cores / gpus.len()).max(1) };

    let spawn = |gpu: u32, job: Job, n: usize| -> Result<Running, CorpusError> {
        let name = match &job.died_on {
            None => format!("gpu-{gpu}"),
            Some((from, _)) => format!("gpu-{gpu}-retry-{n}-of-gpu-{from}"),
        };
        let (out, log) = (dir.join(format!("{name}.json")), dir.join(format!("{name}.log")));
        let _ = fs::remove_file(&out);
        let log_file = fs::File::create(&log).map_err(|e| CorpusError::write("create", &log, e))?;
        let err_file = log_file.try_clone().map_err(|e| CorpusError::write("create", &log, e))?;
        let child = Command::new(worker)
            .args(worker_args(req, root, &job.ids, &out, jobs))
            .env("CUDA_VISIBLE_DEVICES", device_of(gpu))
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(err_file)
            .spawn()
            .map_err(|e| CorpusError::Worker { gpu, message: format!("cannot start {}: {e}", worker.display()) })?;
        Ok(Running { gpu, job, child, out, log })
    };

    let mut lines = Vec::new();
    let mut running: Vec<Running> = Vec::new();
    let mut free: Vec<u32> = Vec::new();
    for (gpu, ids) in gpus.iter().zip(parts) {
        if ids.is_empty() {
            free.push(*gpu);
            lines.push(format!("gpu {gpu}: no cases"));
            continue;
        }
        running.push(spawn(*gpu, Job { ids, died_on: None }, 0)?);
    }
    let mut pending: Vec<Job> = Vec::new();
    let mut parts_done: Vec<GateResults> = Vec::new();
    let mut spurious: Vec<(Vec<String>, String)> = Vec::new();
    let mut retries = 0usize;
    while !running.is_empty() || !pending.is_empty() {
        // Start the retries on free GPUs other than the one they died on.
        let mut i = 0;
        while i < pending.len() {
            let from = pending[i].died_on.as_ref().map(|d| d.0);
            match free.iter().position(|g| Some(*g) != from) {
                Some(k) => {
                    let gpu = free.remove(k);
                    let job = pending.remove(i);
                    retries += 1;
                    running.push(spawn(gpu, job, retries)?);
                }
                None => i += 1,
            }
        }
        if running.is_empty() {
            // Nothing runs and no free GPU takes the rest: no other GPU is left.
            for job in pending.drain(..) {
                let (gpu, why) = job.died_on.clone().unwrap_or_default();
                spurious.push((job.ids, format!("the worker process on GPU {gpu} died ({why}) and no other GPU was left to retry on")));
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        let mut k = 0;
        while k < running.len() {
            let Some(status) = running[k].child.try_wait().map_err(|e| CorpusError::Worker { gpu: running[k].gpu, message: e.to_string() })? else {
                k += 1;
                continue;
            };
            let mut r = running.remove(k);
            let read = if matches!(status.code(), Some(0 | 1)) { GateResults::read(&r.out).ok() } else { None };
            if status.code() == Some(2) {
                // The gate refused its arguments or could not write: every worker would (the
                // others are stopped as `running` drops).
                return Err(CorpusError::Worker { gpu: r.gpu, message: format!("{} (log: {})", last_line(&r.log), r.log.display()) });
            }
            match read {
                Some(mut part) => {
                    lines.push(format!(
                        "gpu {}: {} cases in {:.1} s{}",
                        r.gpu,
                        r.job.ids.len(),
                        part.wall_s,
                        r.job.died_on.as_ref().map(|(g, _)| format!(" (the retry of GPU {g}'s)")).unwrap_or_default()
                    ));
                    if let Some((g, why)) = &r.job.died_on {
                        let note = format!("retried on GPU {}: the worker process on GPU {g} died ({why})", r.gpu);
                        for c in &mut part.results {
                            c.reason = if c.reason.is_empty() { note.clone() } else { format!("{}; {note}", c.reason) };
                            c.attempts += 1;
                        }
                    }
                    parts_done.push(part);
                    free.push(r.gpu);
                }
                None => {
                    let why = if status.success() || status.code() == Some(1) {
                        format!("{} without a readable results file", describe(status))
                    } else {
                        let l = last_line(&r.log);
                        if l.is_empty() { describe(status) } else { format!("{}: {l}", describe(status)) }
                    };
                    lines.push(format!("gpu {}: the worker died ({why}); log: {}", r.gpu, r.log.display()));
                    // The GPU is not used again.
                    let job = std::mem::replace(&mut r.job, Job { ids: Vec::new(), died_on: None });
                    match job.died_on {
                        None => pending.push(Job { ids: job.ids, died_on: Some((r.gpu, why)) }),
                        Some((g, first)) => spurious.push((
                            job.ids,
                            format!("the worker process died on GPU {g} ({first}) and again on the retry on GPU {} ({why})", r.gpu),
                        )),
                    }
                }
            }
        }
    }

    let mut merged = GateResults::merge(parts_done)?;
    // The dead workers' cases: one spurious result per (case, tier) a run would have recorded.
    let first_tier = *tiers.first().unwrap_or(&Tier::Static);
    for (ids, why) in spurious {
        for id in ids {
            let (family, its_tiers): (String, Vec<Tier>) = match corpus.case(&id) {
                Some(c) => (c.family.clone(), tiers.iter().copied().filter(|t| c.has_tier(*t)).collect()),
                None => (corpus.errors.iter().find(|e| e.id == id).map(|e| e.family.clone()).unwrap_or_default(), vec![first_tier]),
            };
            for tier in its_tiers {
                merged.results.push(CaseResult {
                    id: id.clone(),
                    family: family.clone(),
                    tier,
                    status: Status::Spurious,
                    reason: why.clone(),
                    duration_ms: 0.0,
                    attempts: 2,
                    observed: Observed::default(),
                });
            }
        }
    }
    merged.sort();
    merged.tiers = tiers;
    merged.shard = sel.shard.map(|(i, n)| format!("{i}/{n}"));
    merged.families = sel.families.clone();
    merged.case_filters = sel.cases.clone();
    let list: Vec<String> = devices.iter().map(|(i, d)| if *d == i.to_string() { d.clone() } else { format!("{i}={d}") }).collect();
    merged.environment.insert(
        "gpus".into(),
        format!("{} worker processes (CUDA_VISIBLE_DEVICES {}), balanced by {}", gpus.len(), list.join(", "), if recorded.is_some() { "the baseline's durations" } else { "case count" }),
    );
    merged.wall_s = if req.no_timings { 0.0 } else { (start.elapsed().as_secs_f64() * 1e3).round() / 1e3 };
    Ok((merged, lines))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_parse() {
        assert_eq!(GpuSpec::parse("all").unwrap(), GpuSpec::All);
        assert_eq!(GpuSpec::parse(" 2 ").unwrap(), GpuSpec::Count(2));
        assert_eq!(GpuSpec::parse("0,2").unwrap(), GpuSpec::List(vec![0, 2]));
        assert_eq!(GpuSpec::parse("3,").unwrap(), GpuSpec::List(vec![3]));
        for bad in ["", "0", "-1", "two", "0,x", "1,1", ","] {
            let e = GpuSpec::parse(bad).unwrap_err();
            assert_eq!(e.code(), "G011", "{bad}: {e}");
        }
    }

    #[test]
    fn gpus_select() {
        let gpu = |index: u32, busy: Option<&str>| Gpu { index, device: index.to_string(), busy: busy.map(str::to_string) };
        let present = || Ok((0..4).map(|i| gpu(i, None)).collect::<Vec<_>>());
        assert_eq!(GpuSpec::All.select(present()).unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(GpuSpec::Count(2).select(present()).unwrap(), vec![0, 1]);
        assert_eq!(GpuSpec::List(vec![3, 1]).select(present()).unwrap(), vec![3, 1]);
        assert_eq!(GpuSpec::Count(5).select(present()).unwrap_err().code(), "G013");
        assert_eq!(GpuSpec::List(vec![4]).select(present()).unwrap_err().code(), "G013");
        assert_eq!(GpuSpec::All.select(Ok(vec![])).unwrap_err().code(), "G012");
        assert_eq!(GpuSpec::All.select(Err("cannot run nvidia-smi".into())).unwrap_err().code(), "G012");
        assert_eq!(GpuSpec::List(vec![0]).select(Err("x".into())).unwrap_err().code(), "G012");
        // Busy GPUs: `all` and counts pass over them, a list naming one is refused.
        let some_busy = || Ok(vec![gpu(0, Some("is in Prohibited compute mode")), gpu(1, None), gpu(2, None)]);
        assert_eq!(GpuSpec::All.select(some_busy()).unwrap(), vec![1, 2]);
        assert_eq!(GpuSpec::Count(2).select(some_busy()).unwrap(), vec![1, 2]);
        assert_eq!(GpuSpec::Count(3).select(some_busy()).unwrap_err().code(), "G015");
        let e = GpuSpec::List(vec![2, 0]).select(some_busy()).unwrap_err();
        assert_eq!(e.code(), "G015");
        assert!(e.to_string().contains("GPU 0 is in Prohibited compute mode"), "{e}");
        assert_eq!(GpuSpec::All.select(Ok(vec![gpu(0, Some("x"))])).unwrap_err().code(), "G015");
    }

    #[test]
    fn cuda_visible_devices_restricts_the_gpus() {
        let all: Vec<Gpu> = (0..4).map(|i| Gpu { index: i, device: format!("GPU-{i}aaaa-uuid"), busy: None }).collect();
        let idx = |v: &str| visible_only(all.clone(), v).map(|g| g.iter().map(|g| g.index).collect::<Vec<_>>());
        assert_eq!(idx("2,3").unwrap(), vec![2, 3]);
        assert_eq!(idx("3,1").unwrap(), vec![3, 1]);
        assert_eq!(idx("GPU-2aaaa-uuid,GPU-0aaaa").unwrap(), vec![2, 0], "UUIDs and their prefixes");
        assert_eq!(idx("1,7,2").unwrap(), vec![1], "CUDA stops at the first entry naming no device");
        assert!(idx("").unwrap_err().contains("names none of the GPUs"));
        assert!(idx("-1").is_err());
    }

    #[test]
    fn partition_balances_durations() {
        let items: Vec<(String, f64)> = [("a", 10.0), ("b", 1.0), ("c", 6.0), ("d", 4.0), ("e", 1.0)].iter().map(|(i, d)| (i.to_string(), *d)).collect();
        let p = partition(&items, 2);
        // a (10) and c (6) first, d (4) joins c, then b and e take the lighter side in turn.
        assert_eq!(p, vec![vec!["a".to_string(), "b".to_string()], vec!["c".to_string(), "d".to_string(), "e".to_string()]]);
        // Every id once, whatever the worker count.
        for n in 1..7 {
            let mut all: Vec<String> = partition(&items, n).concat();
            all.sort();
            assert_eq!(all, ["a", "b", "c", "d", "e"]);
        }
        // Equal durations: equal counts.
        let even: Vec<(String, f64)> = (0..10).map(|i| (format!("c{i}"), 1.0)).collect();
        assert!(partition(&even, 3).iter().all(|p| p.len() == 3 || p.len() == 4));
    }

    #[test]
    fn durations_fill_unknown_with_the_mean() {
        let mut b = GateResults::new(vec![Tier::Gpu]);
        for (id, t, ms) in [("a", Tier::Gpu, 30.0), ("a", Tier::Static, 5.0), ("b", Tier::Gpu, 10.0)] {
            b.results.push(CaseResult {
                id: id.into(),
                family: "f".into(),
                tier: t,
                status: Status::Pass,
                reason: String::new(),
                duration_ms: ms,
                attempts: 1,
                observed: Observed::default(),
            });
        }
        let ids = vec!["a".to_string(), "b".into(), "c".into()];
        let d = durations(&ids, &[Tier::Gpu], Some(&b));
        assert_eq!(d, vec![("a".into(), 30.0), ("b".into(), 10.0), ("c".into(), 20.0)]);
        assert!(durations(&ids, &[Tier::Gpu], None).iter().all(|(_, ms)| *ms == 1.0));
    }
}
