//! `cake-evolve-compiler`: the compiler-evolution engine's command line.
//!
//! Exit status: 0 done; 1 a proposal's gates failed (`accept`), or `propose` made a proposal
//! whose gates failed; 2 usage or I/O error.

use std::path::PathBuf;
use std::process::ExitCode;

use cake::corpus::Tier;
use cake_evolve::queue::{self, Kind, ProposeOptions, Status};
use cake_evolve::review::{self, Accepted};
use cake_merge_gates::GateOptions;
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(name = "cake-evolve-compiler", version, about = "Evolve the Cake compiler from run evidence: mine failures, propose rules / primitives / calibrations on git branches, gate them, review the queue")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum TierArg {
    Static,
    Compile,
    Gpu,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum KindArg {
    Rule,
    Primitive,
    Calibration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum StatusArg {
    Queued,
    Accepted,
    Rejected,
}

#[derive(clap::Args, Clone)]
struct RepoArgs {
    /// A path inside the repository (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    repo: PathBuf,
    /// The main branch (default: main, else master, else HEAD's branch).
    #[arg(long, value_name = "BRANCH")]
    main: Option<String>,
}

#[derive(clap::Args, Clone)]
struct GateArgs {
    /// Corpus tiers the gates run (repeat; default: every tier — those this machine lacks are
    /// reported as skipped).
    #[arg(long = "tier", value_enum, value_name = "TIER")]
    tiers: Vec<TierArg>,
    /// Worker threads for the corpus gate (default: one per core).
    #[arg(long, short = 'j', value_name = "N", default_value_t = 0)]
    jobs: usize,
}

impl GateArgs {
    fn options(&self) -> GateOptions {
        let mut o = GateOptions { jobs: self.jobs, ..GateOptions::default() };
        if !self.tiers.is_empty() {
            let mut t: Vec<Tier> = self
                .tiers
                .iter()
                .map(|t| match t {
                    TierArg::Static => Tier::Static,
                    TierArg::Compile => Tier::Compile,
                    TierArg::Gpu => Tier::Gpu,
                })
                .collect();
            t.sort();
            t.dedup();
            o.tiers = t;
        }
        o
    }
}

#[derive(Subcommand)]
enum Command {
    /// Mine the evidence store into ranked failure buckets.
    Mine(cake_evolve::mine::MineArgs),
    /// Import a tool's output (ptxas log, sanitizer report, failure reports, run record) into
    /// the evidence store.
    Import(cake_evolve::import::ImportArgs),
    /// mine → propose → gate → queue: one proposal per bucket that calls for one, each a commit
    /// on `evolve/<kind>/<id>-<slug>`, gated in an isolated checkout, recorded in proposals/.
    /// Idempotent, deterministic under --seed, resumable.
    Propose {
        #[command(flatten)]
        repo: RepoArgs,
        /// The evidence store.
        #[arg(long, value_name = "DIR", default_value = cake_evolve::store::DEFAULT_STORE_DIR)]
        evidence: PathBuf,
        /// Breaks ties in the rule search (same seed, same proposals).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[command(flatten)]
        gates: GateArgs,
        /// Make the proposals without running their gates.
        #[arg(long)]
        no_gates: bool,
        /// Make at most N new proposals.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Programs an unknown op must appear in to be proposed as a primitive.
        #[arg(long, value_name = "N", default_value_t = 2)]
        min_programs: usize,
        /// Print plain lines instead of a progress bar.
        #[arg(long)]
        no_progress: bool,
    },
    /// List the queue.
    List {
        #[command(flatten)]
        repo: RepoArgs,
        #[arg(long, value_enum)]
        kind: Option<KindArg>,
        #[arg(long, value_enum)]
        status: Option<StatusArg>,
    },
    /// Show one proposal: evidence, what was synthesized, the gate table and the diff.
    Show {
        id: String,
        #[command(flatten)]
        repo: RepoArgs,
        /// Leave out the diff.
        #[arg(long)]
        no_diff: bool,
    },
    /// Re-run the gates on current main merged with the proposal (as bors does); if they pass,
    /// merge it into main and record the acceptance.
    Accept {
        id: String,
        #[command(flatten)]
        repo: RepoArgs,
        /// A note kept with the record and in the merge commit.
        #[arg(long, default_value = "")]
        note: String,
        #[command(flatten)]
        gates: GateArgs,
    },
    /// Reject a proposal; the reason is remembered and the bucket is not proposed again until
    /// new evidence arrives.
    Reject {
        id: String,
        #[command(flatten)]
        repo: RepoArgs,
        /// Why (required).
        #[arg(long, required = true)]
        why: String,
    },
    /// Refit the cost-model parameters of the op class with systematic error from measurements
    /// (JSON: [{name, program, dims, measured_ms}]) and queue the new calibration/<target>.toml.
    Calibrate {
        #[command(flatten)]
        repo: RepoArgs,
        #[arg(long, default_value = "sm_90a")]
        target: String,
        /// Measurements: a JSON array of {name, program (source), dims, measured_ms}.
        #[arg(long, value_name = "FILE")]
        measurements: PathBuf,
        /// Label of the fit (`fitted_on`), e.g. the date and the measurement run.
        #[arg(long, default_value = "")]
        fitted_on: String,
        #[command(flatten)]
        gates: GateArgs,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Mine(a) => cake_evolve::mine::run_mine(a),
        Command::Import(a) => cake_evolve::import::run_import(a),
        Command::Propose { repo, evidence, seed, gates, no_gates, limit, min_programs, no_progress } => {
            let mut o = ProposeOptions::new(&repo.repo, evidence);
            o.seed = seed;
            o.main = repo.main;
            o.gate = gates.options();
            o.run_gates = !no_gates;
            o.limit = limit;
            o.min_programs = min_programs;
            o.progress = !no_progress;
            match queue::propose(&o) {
                Ok(s) => {
                    let proposed = s.proposed();
                    println!("propose: {} bucket(s) from the evidence, base {} of `{}`", s.buckets, &s.base[..12.min(s.base.len())], s.main);
                    for o in &s.outcomes {
                        println!("  {:<13} {:<10} {:<12} {}", o.bucket, o.what, o.proposal.clone().unwrap_or_default(), o.detail);
                    }
                    println!("{} new or updated proposal(s); review with `cake-evolve-compiler list` / `show ID`", proposed.len());
                    let failed = match git_workdir(&o.repo) {
                        Some(w) => queue::load_all(&queue::queue_dir(&w)).unwrap_or_default().iter().any(|r| proposed.contains(&r.id) && r.gates_passed == Some(false)),
                        None => false,
                    };
                    u8::from(failed)
                }
                Err(e) => fail(&e),
            }
        }
        Command::List { repo, kind, status } => match git_workdir(&repo.repo) {
            Some(w) => match queue::load_all(&queue::queue_dir(&w)) {
                Ok(all) => {
                    let kind = kind.map(|k| match k {
                        KindArg::Rule => Kind::Rule,
                        KindArg::Primitive => Kind::Primitive,
                        KindArg::Calibration => Kind::Calibration,
                    });
                    let status = status.map(|s| match s {
                        StatusArg::Queued => Status::Queued,
                        StatusArg::Accepted => Status::Accepted,
                        StatusArg::Rejected => Status::Rejected,
                    });
                    print!("{}", review::list(&review::filter(all, kind, status)));
                    0
                }
                Err(e) => fail(&e),
            },
            None => fail(&format!("{}: not inside a git repository with a working directory", repo.repo.display())),
        },
        Command::Show { id, repo, no_diff } => match git_workdir(&repo.repo).ok_or_else(|| "not inside a git repository".to_string()).and_then(|w| queue::find(&queue::queue_dir(&w), &id)) {
            Ok((_, r)) => match review::show(&repo.repo, &r, !no_diff) {
                Ok(t) => {
                    print!("{t}");
                    0
                }
                Err(e) => fail(&e),
            },
            Err(e) => fail(&e),
        },
        Command::Accept { id, repo, note, gates } => match review::accept(&repo.repo, &id, &note, repo.main.as_deref(), gates.options()) {
            Ok(Accepted::Merged { commit, how }) => {
                println!("accepted {id}: merged into main ({how}) as {commit}");
                0
            }
            Ok(Accepted::GatesFailed { table }) => {
                println!("not merged: the gates failed on current main\n\n{table}");
                1
            }
            Err(e) => fail(&e),
        },
        Command::Reject { id, repo, why } => match review::reject(&repo.repo, &id, &why) {
            Ok(r) => {
                println!("rejected {} ({}): {why}\nbucket {} will not be proposed again unless new evidence arrives", r.id, r.title, r.bucket);
                0
            }
            Err(e) => fail(&e),
        },
        Command::Calibrate { repo, target, measurements, fitted_on, gates } => {
            let text = match std::fs::read_to_string(&measurements) {
                Ok(t) => t,
                Err(e) => return ExitCode::from(fail(&format!("{}: {e}", measurements.display()))),
            };
            let ms: Vec<cake_evolve::calibrate::Measurement> = match serde_json::from_str(&text) {
                Ok(m) => m,
                Err(e) => return ExitCode::from(fail(&format!("{}: not a measurement list: {e}", measurements.display()))),
            };
            let label = if fitted_on.is_empty() { measurements.display().to_string() } else { fitted_on };
            match queue::propose_calibration(&repo.repo, repo.main.as_deref(), &target, &ms, &label, gates.options()) {
                Ok(r) => {
                    println!("queued {} on {}: {}", r.id, r.branch, r.title);
                    u8::from(r.gates_passed == Some(false))
                }
                Err(e) => fail(&e),
            }
        }
    };
    ExitCode::from(code)
}

fn git_workdir(p: &std::path::Path) -> Option<PathBuf> {
    cake_evolve::git::open(p).ok().and_then(|r| r.workdir().map(|w| w.to_path_buf()))
}

fn fail(msg: &str) -> u8 {
    eprintln!("error: {msg}");
    2
}
