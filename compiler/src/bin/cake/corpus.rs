//! `cake corpus gate|merge|list|show`: the command line of the corpus gate. Its flags become a
//! `cake::corpus::run` request; this module prints what the library returns and picks the exit
//! status.
//!
//! Exit status: 0 the gate passed; 1 it failed (a regression, or without a baseline any
//! failure); 2 usage or I/O error (a missing corpus or baseline, an unwritable output).
//!
//! With `--message-format json` standard output carries one JSON document per command (errors
//! too, as `{"code", "severity", "message"}`); the summary for people goes to standard error.

use std::path::PathBuf;

use cake::corpus::run::{self, GateRequest, GateRun, MergeRequest};
use cake::corpus::{CorpusError, Selection, Tier};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;

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
    /// Run on several GPUs of this host: `all`, a count (`2`: the first two) or ids (`0,2`; one
    /// id: `3,`), as `nvidia-smi -L` numbers them, within an already-set CUDA_VISIBLE_DEVICES.
    /// One worker process per GPU (CUDA_VISIBLE_DEVICES = its UUID), the cases balanced by their durations in --baseline; a dead
    /// worker's cases are retried on another GPU. Combines with --shard (hosts × GPUs)
    #[arg(long, value_name = "all|N|LIST", conflicts_with = "bless")]
    pub gpus: Option<String>,
    /// Results file of an earlier run to classify against.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Rewrite the selected cases' expectations from what this run observed (review the git
    /// diff); the run then reports those results as passing.
    #[arg(long)]
    pub bless: bool,
    /// Worker threads (default: one per core). On the gpu tier the jobs overlap compiling and
    /// checking, but time their kernels one at a time per GPU (a file lock in the temporary
    /// directory), so the recorded times are not contended.
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
    /// The corpus folder (default: `corpus/` of the enclosing Cake checkout).
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
    /// The corpus folder (default: `corpus/` of the enclosing Cake checkout).
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


/// Run a `cake corpus` command (`json`: `--message-format json`); returns the exit status.
pub fn main(args: CorpusArgs, json: bool) -> u8 {
    let done = match args.command {
        CorpusCommand::Gate(g) => gate_cmd(g, json),
        CorpusCommand::Merge(m) => merge_cmd(m, json),
        CorpusCommand::List(l) => list_cmd(l, json),
        CorpusCommand::Show(s) => show_cmd(s, json),
    };
    match done {
        Ok(status) => status,
        Err(e) if json => {
            let mut v = json!({ "code": e.code(), "severity": "error", "message": e.to_string() });
            if let Some(h) = e.help() {
                v["help"] = json!(h);
            }
            println!("{v}");
            2
        }
        Err(e) => {
            eprintln!("error[{}]: {e}", e.code());
            if let Some(h) = e.help() {
                eprintln!("  = help: {h}");
            }
            2
        }
    }
}

fn gate_cmd(a: GateArgs, json: bool) -> Result<u8, CorpusError> {
    let gpus = a.gpus.as_deref().map(cake::corpus::pool::GpuSpec::parse).transpose()?;
    let req = GateRequest {
        root: a.root,
        tiers: a.tiers.iter().map(|t| Tier::from(*t)).collect(),
        selection: Selection { families: a.families, cases: a.cases, shard: a.shard },
        baseline: a.baseline,
        bless: a.bless,
        jobs: a.jobs,
        out: a.out,
        report: a.report,
        catalog: a.catalog,
        rules: a.rules,
        add_rules: a.add_rules,
        targets: a.targets,
        timeout: a.timeout,
        // The bar is drawn only where someone watches.
        progress: !a.no_progress && std::io::IsTerminal::is_terminal(&std::io::stderr()),
        no_timings: a.no_timings,
    };
    let run = match &gpus {
        None => run::gate(&req)?,
        Some(spec) => {
            // The workers are this binary unless CAKE_CORPUS_WORKER names another (a wrapper that
            // sets limits or a container, or a test's).
            let worker = std::env::var_os("CAKE_CORPUS_WORKER")
                .map(PathBuf::from)
                .or_else(|| std::env::current_exe().ok())
                .unwrap_or_else(|| PathBuf::from("cake"));
            let run = run::gate_gpus(&req, spec, cake::corpus::pool::detect_gpus(), &worker)?;
            for line in &run.workers {
                eprintln!("{line}");
            }
            run
        }
    };
    if req.bless && !json {
        for b in &run.blessed {
            println!("blessed {} [{}] in {}: {}", b.id, b.tier, b.file.display(), b.changes.join("; "));
        }
        let root = req.root.clone().unwrap_or_else(run::default_root);
        println!("bless: {} expectation(s) rewritten; review them with `git diff {}`", run.blessed.len(), root.display());
    }
    Ok(if json { finish_json(&run, None) } else { finish(&run) })
}

/// The run as one JSON object on stdout (the summary line on stderr, for people); the exit
/// status. `merged`: the number of results files a `merge` joined.
fn finish_json(run: &GateRun, merged: Option<usize>) -> u8 {
    let counts: serde_json::Map<String, serde_json::Value> = cake::corpus::report::Class::ALL
        .iter()
        .map(|c| (c.as_str().to_string(), json!(run.report.count(*c))))
        .collect();
    let blocking: Vec<_> = run
        .report
        .items
        .iter()
        .filter(|i| i.class.is_blocking())
        .map(|i| json!({ "class": i.class.as_str(), "id": i.result.id, "tier": i.result.tier, "reason": i.result.reason }))
        .collect();
    let skipped: Vec<_> = run.skipped.iter().map(|(tier, why, n)| json!({ "tier": tier, "reason": why, "count": n })).collect();
    let blessed: Vec<_> = run.blessed.iter().map(|b| json!({ "id": b.id, "tier": b.tier, "file": b.file, "changes": b.changes })).collect();
    let mut v = json!({
        "passed": !run.is_failure(),
        "results": run.report.items.len(),
        "counts": counts,
        "blocking": blocking,
        "missing": run.report.missing,
        "skipped": skipped,
        "blessed": blessed,
        "baseline": run.report.baseline,
        "results_file": run.out,
        "report_file": run.report_path,
    });
    if let Some(n) = merged {
        v["merged_inputs"] = json!(n);
    }
    println!("{v}");
    eprintln!("{}", run.report.summary_line());
    u8::from(run.is_failure())
}

/// Print the blocking results, the skips and the summary; the exit status.
fn finish(run: &GateRun) -> u8 {
    for line in run.report.blocking_lines() {
        println!("{line}");
    }
    for (tier, why, n) in &run.skipped {
        println!("skipped: {n} {tier} result(s): {why}");
    }
    println!("{}", run.report.summary_line());
    println!(
        "results: {}{}",
        run.out.display(),
        run.report_path.as_ref().map(|p| format!(", report: {}", p.display())).unwrap_or_default()
    );
    u8::from(run.is_failure())
}

fn merge_cmd(m: MergeArgs, json: bool) -> Result<u8, CorpusError> {
    let req = MergeRequest { inputs: m.inputs, out: m.out, baseline: m.baseline, report: m.report, root: m.root };
    let run = run::merge(&req)?;
    if json {
        return Ok(finish_json(&run, Some(req.inputs.len())));
    }
    println!("merged {} results files: {} results", req.inputs.len(), run.results.results.len());
    Ok(finish(&run))
}

fn list_cmd(l: ListArgs, json: bool) -> Result<u8, CorpusError> {
    let corpus = run::load(l.root.as_deref())?;
    let wanted = |f: &str| l.families.is_empty() || l.families.iter().any(|x| x == f);
    let errors: Vec<_> = corpus.errors.iter().map(|e| json!({ "id": e.id, "message": e.message })).collect();
    if json && (l.cases || !l.families.is_empty()) {
        let cases: Vec<_> = corpus
            .cases
            .iter()
            .filter(|c| wanted(&c.family))
            .map(|c| json!({ "id": c.id, "family": c.family, "target": c.manifest.target, "verdict": c.manifest.expect.verdict.as_str(), "tiers": c.manifest.tiers }))
            .collect();
        println!("{}", json!({ "cases": cases, "errors": errors }));
    } else if json {
        let families: Vec<_> = corpus
            .families
            .iter()
            .map(|f| json!({ "name": f.name, "cases": corpus.cases.iter().filter(|c| c.family == f.name).count(), "description": f.description }))
            .collect();
        println!("{}", json!({ "families": families, "errors": errors }));
    } else if l.cases || !l.families.is_empty() {
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
    if !json {
        for e in &corpus.errors {
            eprintln!("error: {}: {}", e.id, e.message);
        }
    }
    Ok(u8::from(!corpus.errors.is_empty()) * 2)
}

fn show_cmd(s: ShowArgs, json: bool) -> Result<u8, CorpusError> {
    let corpus = run::load(s.root.as_deref())?;
    let Some(case) = corpus.case(&s.id) else { return Err(CorpusError::UnknownCase { id: s.id }) };
    if json {
        println!("{}", json!({ "id": case.id, "family": case.family, "manifest": case.manifest, "source": case.source }));
    } else if s.manifest {
        match toml::to_string_pretty(&case.manifest) {
            Ok(t) => print!("{t}"),
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(2);
            }
        }
    } else {
        print!("{}", case.source);
    }
    Ok(0)
}
