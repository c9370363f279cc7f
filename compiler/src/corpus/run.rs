//! One `cake corpus gate` or `cake corpus merge` invocation as a library call: load the corpus,
//! the baseline and the proposed front end, run (or join) the results, bless, classify, and write
//! the results JSON and the markdown report. Returns what happened ([`GateRun`]) or a coded
//! [`CorpusError`]; printing it and choosing the exit status is the CLI's (`compiler/src/bin/cake/corpus.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::bless::{self, Blessed};
use super::error::CorpusError;
use super::gate::{self, GateConfig};
use super::pool::{self, GpuSpec};
use super::report::{self, Report};
use super::results::{GateResults, Status};
use super::tiers::Frontend;
use super::{Corpus, Selection, Tier};

/// What `cake corpus gate` was asked to do (its flags, typed).
#[derive(Clone, Debug)]
pub struct GateRequest {
    /// The corpus folder; `None`: [`default_root`].
    pub root: Option<PathBuf>,
    /// Empty: every tier.
    pub tiers: Vec<Tier>,
    pub selection: Selection,
    pub baseline: Option<PathBuf>,
    pub bless: bool,
    /// Worker threads; 0: one per core.
    pub jobs: usize,
    pub out: PathBuf,
    pub report: PathBuf,
    pub catalog: Option<PathBuf>,
    pub rules: Option<PathBuf>,
    pub add_rules: Option<PathBuf>,
    pub targets: Option<PathBuf>,
    /// One limit for every tier's attempt, in seconds.
    pub timeout: Option<u64>,
    pub progress: bool,
    pub no_timings: bool,
}

impl Default for GateRequest {
    /// The CLI's defaults: every tier, all cases, results under `target/corpus/`.
    fn default() -> GateRequest {
        GateRequest {
            root: None,
            tiers: Vec::new(),
            selection: Selection::default(),
            baseline: None,
            bless: false,
            jobs: 0,
            out: PathBuf::from("target/corpus/results.json"),
            report: PathBuf::from("target/corpus/report.md"),
            catalog: None,
            rules: None,
            add_rules: None,
            targets: None,
            timeout: None,
            progress: false,
            no_timings: false,
        }
    }
}

/// What `cake corpus merge` was asked to do.
#[derive(Clone, Debug)]
pub struct MergeRequest {
    pub inputs: Vec<PathBuf>,
    pub out: PathBuf,
    pub baseline: Option<PathBuf>,
    pub report: Option<PathBuf>,
    pub root: Option<PathBuf>,
}

/// A finished gate or merge: its results (written to `out`), their classification, and what
/// `--bless` rewrote.
#[derive(Debug)]
pub struct GateRun {
    pub results: GateResults,
    pub report: Report,
    pub blessed: Vec<Blessed>,
    /// Skipped results per (tier, reason), with their count.
    pub skipped: Vec<(Tier, String, usize)>,
    pub out: PathBuf,
    pub report_path: Option<PathBuf>,
    /// `--gpus`: one line per worker process (its GPU, its cases, or how it died).
    pub workers: Vec<String>,
}

impl GateRun {
    /// A regression (or, without a baseline, any failure): the gate fails.
    pub fn is_failure(&self) -> bool {
        self.report.is_failure()
    }
}

/// `corpus/` of the enclosing checkout: the first ancestor of the working directory that has
/// both `corpus/` and `compiler/`; else `./corpus`.
pub fn default_root() -> PathBuf {
    if let Ok(cwd) = std::env::current_dir() {
        for dir in cwd.ancestors() {
            if dir.join("corpus").is_dir() && dir.join("compiler").is_dir() {
                return dir.join("corpus");
            }
        }
    }
    PathBuf::from("corpus")
}

/// The corpus at `root` (default: [`default_root`]).
pub fn load(root: Option<&Path>) -> Result<Corpus, CorpusError> {
    let root = root.map_or_else(default_root, Path::to_path_buf);
    Corpus::load(&root).map_err(|e| CorpusError::ReadCorpus { root, message: e.to_string() })
}

fn descriptions(corpus: &Corpus) -> BTreeMap<String, String> {
    corpus.families.iter().map(|f| (f.name.clone(), f.description.clone())).collect()
}

/// Build the front end from `--catalog` / `--targets` / `--rules` / `--add-rules`.
pub fn frontend(
    catalog: Option<&Path>,
    targets: Option<&Path>,
    rules: Option<&Path>,
    add_rules: Option<&Path>,
) -> Result<Frontend, CorpusError> {
    let failed = |flag: &'static str, path: &Path, e: &dyn std::fmt::Display| CorpusError::Frontend {
        flag,
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut fe = Frontend::default();
    let set = match (rules, add_rules) {
        (Some(dir), _) => Some((
            crate::verify::RuleSet::load_dir(dir).map_err(|e| failed("--rules", dir, &e))?,
            format!("verifier rules from {}", dir.display()),
        )),
        (None, Some(dir)) => Some((
            crate::verify::RuleSet::builtin_with_dir(dir).map_err(|e| failed("--add-rules", dir, &e))?,
            format!("built-in verifier rules plus {}", dir.display()),
        )),
        (None, None) => None,
    };
    if let Some((set, what)) = set {
        let set = Arc::new(set);
        fe.verifier = Some(Arc::new(move |m, t: &crate::target::TargetInfo| crate::verify::verify_with(m, t, &set)));
        fe.description.push(what);
    }
    let table = match targets {
        Some(p) => {
            let t = crate::target::TargetTable::load(p).map_err(|e| failed("--targets", p, &e))?;
            fe.description.push(format!("targets from {}", p.display()));
            Some(Arc::new(t))
        }
        None => None,
    };
    if let Some(dir) = catalog {
        let c = match &table {
            Some(t) => crate::catalog::Catalog::load_dir_with(dir, t),
            None => crate::catalog::Catalog::load_dir(dir),
        }
        .map_err(|e| failed("--catalog", dir, &e))?;
        fe.catalog = Some(Arc::new(c));
        fe.description.push(format!("op catalog from {}", dir.display()));
    }
    fe.targets = table;
    Ok(fe)
}

fn read_baseline(path: Option<&Path>) -> Result<Option<(String, GateResults)>, CorpusError> {
    path.map(|p| GateResults::read(p).map(|b| (p.display().to_string(), b))).transpose()
}

/// `cake corpus gate`: run the selected tiers of the selected cases, bless if asked, classify
/// against the baseline and write the results and the report.
pub fn gate(req: &GateRequest) -> Result<GateRun, CorpusError> {
    let corpus = load(req.root.as_deref())?;
    let baseline = read_baseline(req.baseline.as_deref())?;
    let fe = frontend(req.catalog.as_deref(), req.targets.as_deref(), req.rules.as_deref(), req.add_rules.as_deref())?;
    let mut tiers: Vec<Tier> = if req.tiers.is_empty() { Tier::ALL.to_vec() } else { req.tiers.clone() };
    tiers.sort();
    tiers.dedup();
    known_families(&corpus, &req.selection)?;
    let mut cfg = GateConfig {
        tiers,
        selection: req.selection.clone(),
        jobs: req.jobs,
        progress: req.progress,
        frontend: fe,
        ..GateConfig::default()
    };
    if let Some(t) = req.timeout {
        let d = Duration::from_secs(t.max(1));
        (cfg.timeout_static, cfg.timeout_compile, cfg.timeout_gpu) = (d, d, d);
    }
    let mut results = gate::run(&corpus, &cfg);

    let mut blessed = Vec::new();
    if req.bless {
        let selected: Vec<&super::Case> = corpus.cases.iter().filter(|c| cfg.selection.selects(&c.id, &c.family)).collect();
        blessed = bless::bless(&selected, &results.results)?;
        for b in &blessed {
            if let Some(r) = results.results.iter_mut().find(|r| r.id == b.id && r.tier == b.tier) {
                r.status = Status::Pass;
                r.reason = format!("blessed: {}", b.changes.join("; "));
            }
        }
    }

    if req.no_timings {
        results.wall_s = 0.0;
        results.results.iter_mut().for_each(|r| r.duration_ms = 0.0);
    }
    let baseline = baseline.as_ref().map(|(p, b)| (p.as_str(), b));
    let mut run = finish(results, baseline, &cfg.selection, &descriptions(&corpus), &req.out, Some(&req.report))?;
    run.blessed = blessed;
    Ok(run)
}

/// `--family F` must name a family of the corpus.
fn known_families(corpus: &Corpus, selection: &Selection) -> Result<(), CorpusError> {
    for f in &selection.families {
        if corpus.family(f).is_none() {
            let known = corpus.families.iter().map(|f| f.name.clone()).collect();
            return Err(CorpusError::UnknownFamily { family: f.clone(), root: corpus.root.clone(), known });
        }
    }
    Ok(())
}

/// `cake corpus gate --gpus SPEC`: the request's cases on the GPUs `gpus` selects from `present`
/// (the host's GPU ids, or why they could not be listed), one `worker` process (a `cake` binary)
/// per GPU ([`super::pool`]); the joined results are classified and written as [`gate`] does.
pub fn gate_gpus(req: &GateRequest, gpus: &GpuSpec, present: Result<Vec<pool::Gpu>, String>, worker: &Path) -> Result<GateRun, CorpusError> {
    if req.bless {
        return Err(CorpusError::BadGpus {
            value: gpus.to_string(),
            why: "--bless rewrites the manifests from one process: bless without --gpus".into(),
        });
    }
    let passed_over: Vec<String> = match &present {
        Ok(p) => p.iter().filter_map(|g| g.busy.as_ref().map(|b| format!("gpu {}: not used, it {b}", g.index))).collect(),
        Err(_) => Vec::new(),
    };
    let devices: Vec<(u32, String)> = present.as_ref().map(|p| p.iter().map(|g| (g.index, g.device.clone())).collect()).unwrap_or_default();
    let ids = gpus.select(present)?;
    let devices: Vec<(u32, String)> =
        ids.iter().map(|i| devices.iter().find(|(j, _)| j == i).cloned().unwrap_or_else(|| (*i, i.to_string()))).collect();
    let corpus = load(req.root.as_deref())?;
    let baseline = read_baseline(req.baseline.as_deref())?;
    // A front end that does not load is reported once, here, not by every worker.
    frontend(req.catalog.as_deref(), req.targets.as_deref(), req.rules.as_deref(), req.add_rules.as_deref())?;
    known_families(&corpus, &req.selection)?;
    let (results, workers) = pool::run(req, &corpus, &corpus.root, &devices, worker, baseline.as_ref().map(|(_, b)| b))?;
    let baseline = baseline.as_ref().map(|(p, b)| (p.as_str(), b));
    let mut run = finish(results, baseline, &req.selection, &descriptions(&corpus), &req.out, Some(&req.report))?;
    run.workers = passed_over.into_iter().filter(|_| !matches!(gpus, GpuSpec::List(_))).chain(workers).collect();
    Ok(run)
}

/// `cake corpus merge`: join shard results, classify the union against the baseline, write it.
pub fn merge(req: &MergeRequest) -> Result<GateRun, CorpusError> {
    let parts = req.inputs.iter().map(|p| GateResults::read(p)).collect::<Result<Vec<_>, _>>()?;
    let merged = GateResults::merge(parts)?;
    let baseline = read_baseline(req.baseline.as_deref())?;
    // The descriptions only label the report: a corpus that does not load leaves them out.
    let root = req.root.clone().unwrap_or_else(default_root);
    let families = Corpus::load(root).ok().map(|c| descriptions(&c)).unwrap_or_default();
    let baseline = baseline.as_ref().map(|(p, b)| (p.as_str(), b));
    finish(merged, baseline, &Selection::default(), &families, &req.out, req.report.as_deref())
}

/// Classify, write the results and the report.
fn finish(
    results: GateResults,
    baseline: Option<(&str, &GateResults)>,
    selection: &Selection,
    families: &BTreeMap<String, String>,
    out: &Path,
    report_path: Option<&Path>,
) -> Result<GateRun, CorpusError> {
    let rep: Report = report::classify(&results, baseline, selection);
    results.write(out)?;
    if let Some(p) = report_path {
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            // A directory that cannot be made shows up as the write error below.
            let _ = std::fs::create_dir_all(dir);
        }
        // The per-family figure beside the report, embedded by its file name.
        let at = super::family_plot::path_for(p);
        let plot = match super::family_plot::svg(&rep).map_err(|e| CorpusError::write("draw", &at, e))? {
            Some(svg) => {
                std::fs::write(&at, svg).map_err(|e| CorpusError::write("write", &at, e))?;
                at.file_name().map(|n| n.to_string_lossy().into_owned())
            }
            None => None,
        };
        std::fs::write(p, rep.markdown(&results, families, plot.as_deref())).map_err(|e| CorpusError::write("write", p, e))?;
    }
    let mut skipped: BTreeMap<(Tier, &str), usize> = BTreeMap::new();
    for r in results.results.iter().filter(|r| r.status == Status::Skipped) {
        *skipped.entry((r.tier, r.reason.as_str())).or_default() += 1;
    }
    let skipped = skipped.into_iter().map(|((t, why), n)| (t, why.to_string(), n)).collect();
    Ok(GateRun {
        report: rep,
        blessed: Vec::new(),
        skipped,
        out: out.to_path_buf(),
        report_path: report_path.map(Path::to_path_buf),
        results,
        workers: Vec::new(),
    })
}
