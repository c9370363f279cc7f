//! `cake corpus gate|merge|list|show`: the command line of the corpus gate. `main.rs` only
//! forwards to [`main`].
//!
//! Exit status: 0 the gate passed; 1 it failed (a regression, or without a baseline any
//! failure); 2 usage or I/O error (a missing corpus or baseline, an unwritable output).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use super::gate::{self, GateConfig};
use super::report::{self, Report};
use super::results::{GateResults, Status};
use super::tiers::Frontend;
use super::{bless, Corpus, Selection, Tier};

#[derive(Args, Debug)]
pub struct CorpusArgs {
    #[command(subcommand)]
    pub command: CorpusCommand,
}

#[derive(Subcommand, Debug)]
pub enum CorpusCommand {
    /// Run the corpus gate: the selected tiers of the selected cases, classified against a
    /// baseline (regressed, fixed, same-pass, same-fail, spurious, skipped). Writes a results
    /// JSON and a markdown report; exits 1 on any regression (without a baseline: any failure).
    Gate(GateArgs),
    /// Join the results files of several shards (`--shard i/n` runs) into one, and optionally
    /// classify the union against a baseline.
    Merge(MergeArgs),
    /// List the families (with their description) or the cases of the corpus.
    List(ListArgs),
    /// Print one case's program (a template instance expanded) and, with --manifest, its
    /// effective manifest.
    Show(ShowArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TierArg {
    Static,
    Compile,
    Gpu,
}

impl From<TierArg> for Tier {
    fn from(t: TierArg) -> Tier {
        match t {
            TierArg::Static => Tier::Static,
            TierArg::Compile => Tier::Compile,
            TierArg::Gpu => Tier::Gpu,
        }
    }
}

#[derive(Args, Debug)]
pub struct GateArgs {
    /// The corpus folder (default: `corpus/` of the enclosing Cake checkout).
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// A tier to run; repeat for several (default: all three — those unavailable here are
    /// reported as skipped).
    #[arg(long = "tier", value_enum, value_name = "TIER")]
    pub tiers: Vec<TierArg>,
    /// Run only this family; repeat for several.
    #[arg(long = "family", value_name = "F")]
    pub families: Vec<String>,
    /// Run only this case id (`family/case`), or the cases starting with it when it ends in `*`;
    /// repeat for several.
    #[arg(long = "case", value_name = "ID")]
    pub cases: Vec<String>,
    /// Run the i-th of n shards (1-based), split by a stable hash of the case ids; join the
    /// shards' results with `cake corpus merge`.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    pub shard: Option<(u32, u32)>,
    /// Results file of an earlier run to classify against.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Rewrite the selected cases' expectations from what this run observed (review the git
    /// diff); the run then reports those results as passing.
    #[arg(long)]
    pub bless: bool,
    /// Worker threads (default: one per core).
    #[arg(long, short = 'j', value_name = "N", default_value_t = 0)]
    pub jobs: usize,
    /// Where to write the results JSON.
    #[arg(long, short = 'o', value_name = "FILE", default_value = "target/corpus/results.json")]
    pub out: PathBuf,
    /// Where to write the markdown report.
    #[arg(long, value_name = "FILE", default_value = "target/corpus/report.md")]
    pub report: PathBuf,
    /// Gate a proposed op catalog: load `*.toml` from DIR instead of the built-in catalog.
    #[arg(long, value_name = "DIR")]
    pub catalog: Option<PathBuf>,
    /// Gate a proposed verifier rule set: load every rule under DIR (`<category>/*.toml`) instead
    /// of the built-in rules.
    #[arg(long, value_name = "DIR", conflicts_with = "add_rules")]
    pub rules: Option<PathBuf>,
    /// Gate proposed verifier rules: the built-in rules plus every rule under DIR.
    #[arg(long, value_name = "DIR")]
    pub add_rules: Option<PathBuf>,
    /// Gate a proposed target table: this `targets.toml` instead of the built-in one.
    #[arg(long, value_name = "FILE")]
    pub targets: Option<PathBuf>,
    /// Time limit of one attempt of one tier, in seconds (default: static 30, compile 180, gpu
    /// 300 or the workload's `timeout_s`).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// Never draw the progress bar (it is drawn only when stderr is a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
    /// Write the results without durations and wall time, so that a committed baseline changes
    /// only where results change.
    #[arg(long)]
    pub no_timings: bool,
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Results files of the shards.
    #[arg(required = true, value_name = "FILE")]
    pub inputs: Vec<PathBuf>,
    /// Where to write the merged results.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: PathBuf,
    /// Classify the merged results against this baseline (exit 1 on a regression).
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Write the markdown report of the merged results here.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// The corpus folder, for the families' descriptions in the report.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// List the cases of this family only.
    #[arg(long = "family", value_name = "F")]
    pub families: Vec<String>,
    /// List every case (id and tiers) instead of the families.
    #[arg(long)]
    pub cases: bool,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// The case id, `family/case`.
    pub id: String,
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Print the effective manifest (family defaults merged with the instance) instead.
    #[arg(long)]
    pub manifest: bool,
}

fn parse_shard(s: &str) -> Result<(u32, u32), String> {
    let (i, n) = s.split_once('/').ok_or("write the shard as I/N, e.g. 2/4")?;
    let i: u32 = i.trim().parse().map_err(|_| format!("`{i}` is not a shard number"))?;
    let n: u32 = n.trim().parse().map_err(|_| format!("`{n}` is not a shard count"))?;
    if n == 0 || i == 0 || i > n {
        return Err(format!("shard {i}/{n}: need 1 <= I <= N"));
    }
    Ok((i, n))
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

/// `cake corpus ...` parsed from words (the first word is the program name, as in `std::env::args`),
/// for callers that drive the gate in-process (tests, the evolution engine's merge gates).
pub fn main_from_args<I, T>(args: I) -> Result<u8, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    #[derive(clap::Parser)]
    #[command(name = "cake corpus")]
    struct Wrapper {
        #[command(flatten)]
        args: CorpusArgs,
    }
    let w = <Wrapper as clap::Parser>::try_parse_from(args)?;
    Ok(main(w.args))
}

/// Run a `cake corpus` command; returns the exit status.
pub fn main(args: CorpusArgs) -> u8 {
    match args.command {
        CorpusCommand::Gate(g) => gate_cmd(g),
        CorpusCommand::Merge(m) => merge_cmd(m),
        CorpusCommand::List(l) => list_cmd(l),
        CorpusCommand::Show(s) => show_cmd(s),
    }
}

fn load(root: Option<PathBuf>) -> Result<Corpus, String> {
    let root = root.unwrap_or_else(default_root);
    Corpus::load(&root).map_err(|e| format!("cannot read the corpus at {}: {e}", root.display()))
}

fn fail(msg: &str) -> u8 {
    eprintln!("error: {msg}");
    2
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
) -> Result<Frontend, String> {
    let mut fe = Frontend::default();
    let set = match (rules, add_rules) {
        (Some(dir), _) => Some((
            crate::verify::RuleSet::load_dir(dir).map_err(|e| format!("--rules {}: {e}", dir.display()))?,
            format!("verifier rules from {}", dir.display()),
        )),
        (None, Some(dir)) => Some((
            crate::verify::RuleSet::builtin_with_dir(dir).map_err(|e| format!("--add-rules {}: {e}", dir.display()))?,
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
            let t = crate::target::TargetTable::load(p).map_err(|e| format!("--targets {}: {e}", p.display()))?;
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
        .map_err(|e| format!("--catalog {}: {e}", dir.display()))?;
        fe.catalog = Some(Arc::new(c));
        fe.description.push(format!("op catalog from {}", dir.display()));
    }
    fe.targets = table;
    Ok(fe)
}

fn gate_cmd(a: GateArgs) -> u8 {
    let corpus = match load(a.root.clone()) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let baseline = match &a.baseline {
        Some(p) => match GateResults::read(p) {
            Ok(b) => Some((p.display().to_string(), b)),
            Err(e) => return fail(&e),
        },
        None => None,
    };
    let fe = match frontend(a.catalog.as_deref(), a.targets.as_deref(), a.rules.as_deref(), a.add_rules.as_deref()) {
        Ok(f) => f,
        Err(e) => return fail(&e),
    };
    let mut tiers: Vec<Tier> = if a.tiers.is_empty() { Tier::ALL.to_vec() } else { a.tiers.iter().map(|t| Tier::from(*t)).collect() };
    tiers.sort();
    tiers.dedup();
    for f in &a.families {
        if corpus.family(f).is_none() {
            let names: Vec<&str> = corpus.families.iter().map(|f| f.name.as_str()).collect();
            return fail(&format!("no family `{f}` in {} (families: {})", corpus.root.display(), names.join(", ")));
        }
    }
    let mut cfg = GateConfig {
        tiers,
        selection: Selection { families: a.families.clone(), cases: a.cases.clone(), shard: a.shard },
        jobs: a.jobs,
        progress: !a.no_progress,
        frontend: fe,
        ..GateConfig::default()
    };
    if let Some(t) = a.timeout {
        let d = Duration::from_secs(t.max(1));
        (cfg.timeout_static, cfg.timeout_compile, cfg.timeout_gpu) = (d, d, d);
    }
    let mut results = gate::run(&corpus, &cfg);

    if a.bless {
        let selected: Vec<&super::Case> = corpus.cases.iter().filter(|c| cfg.selection.selects(&c.id, &c.family)).collect();
        match bless::bless(&selected, &results.results) {
            Ok(done) => {
                for b in &done {
                    println!("blessed {} [{}] in {}: {}", b.id, b.tier, b.file.display(), b.changes.join("; "));
                    if let Some(r) = results.results.iter_mut().find(|r| r.id == b.id && r.tier == b.tier) {
                        r.status = Status::Pass;
                        r.reason = format!("blessed: {}", b.changes.join("; "));
                    }
                }
                println!("bless: {} expectation(s) rewritten; review them with `git diff {}`", done.len(), corpus.root.display());
            }
            Err(e) => return fail(&format!("bless: {e}")),
        }
    }

    if a.no_timings {
        results.wall_s = 0.0;
        results.results.iter_mut().for_each(|r| r.duration_ms = 0.0);
    }
    finish(&results, baseline.as_ref().map(|(p, b)| (p.as_str(), b)), &cfg.selection, &descriptions(&corpus), &a.out, Some(&a.report))
}

/// Write results and report, print the summary and the blocking results; the exit status.
fn finish(
    results: &GateResults,
    baseline: Option<(&str, &GateResults)>,
    selection: &Selection,
    families: &BTreeMap<String, String>,
    out: &Path,
    report_path: Option<&Path>,
) -> u8 {
    let rep: Report = report::classify(results, baseline, selection);
    if let Err(e) = results.write(out) {
        return fail(&e);
    }
    if let Some(p) = report_path {
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Err(e) = std::fs::write(p, rep.markdown(results, families)) {
            return fail(&format!("cannot write {}: {e}", p.display()));
        }
    }
    for line in rep.blocking_lines() {
        println!("{line}");
    }
    let mut skipped: BTreeMap<(Tier, &str), usize> = BTreeMap::new();
    for r in results.results.iter().filter(|r| r.status == Status::Skipped) {
        *skipped.entry((r.tier, r.reason.as_str())).or_default() += 1;
    }
    for ((tier, why), n) in skipped {
        println!("skipped: {n} {tier} result(s): {why}");
    }
    println!("{}", rep.summary_line());
    println!("results: {}{}", out.display(), report_path.map(|p| format!(", report: {}", p.display())).unwrap_or_default());
    u8::from(rep.is_failure())
}

fn merge_cmd(m: MergeArgs) -> u8 {
    let mut parts = Vec::new();
    for p in &m.inputs {
        match GateResults::read(p) {
            Ok(r) => parts.push(r),
            Err(e) => return fail(&e),
        }
    }
    let merged = match GateResults::merge(parts) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    let baseline = match &m.baseline {
        Some(p) => match GateResults::read(p) {
            Ok(b) => Some((p.display().to_string(), b)),
            Err(e) => return fail(&e),
        },
        None => None,
    };
    let families =
        m.root.clone().or_else(|| Some(default_root())).and_then(|r| Corpus::load(r).ok()).map(|c| descriptions(&c)).unwrap_or_default();
    println!("merged {} results files: {} results", m.inputs.len(), merged.results.len());
    finish(&merged, baseline.as_ref().map(|(p, b)| (p.as_str(), b)), &Selection::default(), &families, &m.out, m.report.as_deref())
}

fn list_cmd(l: ListArgs) -> u8 {
    let corpus = match load(l.root) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let wanted = |f: &str| l.families.is_empty() || l.families.iter().any(|x| x == f);
    if l.cases || !l.families.is_empty() {
        for c in corpus.cases.iter().filter(|c| wanted(&c.family)) {
            let tiers: Vec<&str> = c.manifest.tiers.iter().map(|t| t.as_str()).collect();
            println!("{:<48} {:<8} {:<7} {}", c.id, c.manifest.target, c.manifest.expect.verdict.as_str(), tiers.join(","));
        }
    } else {
        let mut total = 0;
        for f in &corpus.families {
            let cases: Vec<_> = corpus.cases.iter().filter(|c| c.family == f.name).collect();
            let mut tiers: Vec<Tier> = cases.iter().flat_map(|c| c.manifest.tiers.iter().copied()).collect();
            tiers.sort();
            tiers.dedup();
            let t: Vec<&str> = tiers.iter().map(|t| t.as_str()).collect();
            total += cases.len();
            println!("{:<22} {:>4} cases  [{}]  {}", f.name, cases.len(), t.join(","), f.description);
        }
        println!("{} families, {total} cases", corpus.families.len());
    }
    for e in &corpus.errors {
        eprintln!("error: {}: {}", e.id, e.message);
    }
    u8::from(!corpus.errors.is_empty()) * 2
}

fn show_cmd(s: ShowArgs) -> u8 {
    let corpus = match load(s.root) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let Some(case) = corpus.case(&s.id) else { return fail(&format!("no case `{}`", s.id)) };
    if s.manifest {
        match toml::to_string_pretty(&case.manifest) {
            Ok(t) => print!("{t}"),
            Err(e) => return fail(&e.to_string()),
        }
    } else {
        print!("{}", case.source);
    }
    0
}
