//! `cake-evolve-compiler`: the compiler-evolution engine's command line.
//!
//! Exit status: 0 done; 1 a proposal's gates failed (`accept`), or `propose` made a proposal
//! whose gates failed; 2 usage or I/O error.

use std::path::PathBuf;
use std::process::ExitCode;

use cake::corpus::Tier;
use cake_evolve::queue::{self, Kind, ProposeOptions, Status};
use cake_evolve::review::{self, Accepted};
use cake_evolve::sanitize;
use cake_evolve::Format;
use cake_merge_gates::GateOptions;
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(name = "cake-evolve-compiler", version, about = "Evolve the Cake compiler from run evidence: mine failures, propose rules / primitives / calibrations on git branches, gate them, review the queue")]
struct Cli {
    /// How results are printed: `human` (text) or `json` (JSON on standard output, errors too;
    /// `--format` is the old spelling).
    #[arg(long, global = true, value_enum, default_value_t = Format::Human, alias = "format")]
    message_format: Format,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum EvidenceCommand {
    /// One line per record of the store: id, kind, stage, class, program and the first
    /// failure's signature.
    List {
        /// The evidence store.
        #[arg(long, value_name = "DIR", default_value = cake_evolve::store::DEFAULT_STORE_DIR)]
        store: PathBuf,
    },
    /// Open one record: its signatures, the program lines its failure names, and the run's
    /// facts (`--message-format json`: the record's JSON).
    Show {
        /// The record id: 64 hex digits, or 8 or more of its first that no other record starts with.
        id: String,
        /// The evidence store.
        #[arg(long, value_name = "DIR", default_value = cake_evolve::store::DEFAULT_STORE_DIR)]
        store: PathBuf,
    },
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
    Analysis,
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

#[derive(clap::Args, Clone, Copy)]
struct LockArgs {
    /// Seconds to wait for another run's queue lock (`.git/cake-evolve/lock`) before giving up.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    lock_timeout: u64,
}

impl LockArgs {
    fn timeout(self) -> std::time::Duration {
        std::time::Duration::from_secs(self.lock_timeout)
    }
}

#[derive(Subcommand)]
enum QueueCommand {
    /// Re-create every missing or unreadable record of proposals/ from the record its
    /// `evolve/*` branch carries (after `git clean`, or on a fresh clone with the branches).
    Rebuild {
        #[command(flatten)]
        repo: RepoArgs,
        #[command(flatten)]
        lock: LockArgs,
    },
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
        /// Do not repeat the warnings of mining the evidence (a `mine` of the same store has just
        /// printed them).
        #[arg(long)]
        no_mine_warnings: bool,
        /// Where a misprediction bucket's implicated cost-model term gets its microbenchmark
        /// times: `auto` (time the term's benches from calibration/microbench/<target>/suite.toml
        /// on this machine's GPU when there is one), `records` (the bucket's runs only), or a
        /// saved suite run FILE (`calibrate --save-measurements`).
        #[arg(long, value_name = "auto|records|FILE", default_value = "auto")]
        term_benches: String,
        /// The `cake` binary that times the term's benches (default: beside this one, or $CAKE_BIN).
        #[arg(long, value_name = "PATH")]
        cake: Option<PathBuf>,
        #[command(flatten)]
        lock: LockArgs,
    },
    /// Write near-boundary variants of failing programs for a labelling batch: one integer
    /// literal changed at a time (or a TMA box too large turned), kept when it moves a fact the program shows outside every
    /// accepted corpus program (`<stem>--v<k>.cake`, its workload, `variants.json`). Run them
    /// on the GPU (`cake run --unsafe-skip-verify`) and import the records: `propose` reads
    /// their labels by program hash.
    Variants {
        /// The failing programs (`.cake`; a `<stem>.workload.toml` beside one is copied).
        #[arg(required = true)]
        programs: Vec<PathBuf>,
        #[command(flatten)]
        repo: RepoArgs,
        /// Variants per program.
        #[arg(long, value_name = "N", default_value_t = 6)]
        max: usize,
        /// Judge the variants against this checkout less these rules (repeatable; an ablation, as
        /// the seeded benchmark's classes make): a variant the base verifier rejects is left out.
        #[arg(long, value_name = "CODE")]
        ablate: Vec<String>,
        /// Output folder.
        #[arg(long, short = 'o', value_name = "DIR")]
        out: PathBuf,
    },
    /// Make an ablated base: a git repository (one commit on `main`) with this checkout's compiler
    /// data, corpus and calibration less the given rules — their files, negative cases and every
    /// expected finding. Run `cake --rules DIR/compiler/rules` or `cake-evolve-kernel --rules`
    /// against it to let the rules' bug class through, then `propose` and `accept` in it.
    Ablate {
        #[command(flatten)]
        repo: RepoArgs,
        /// A rule to leave out (repeatable).
        #[arg(long = "rule", value_name = "CODE", required = true)]
        rules: Vec<String>,
        /// The new repository's folder (must not exist).
        #[arg(long, short = 'o', value_name = "DIR")]
        out: PathBuf,
    },
    /// Run the seeded failure benchmark (evolution/benchmark/): per class, ablate its rules from
    /// this checkout's data into a scratch repository, propose from its training evidence, accept
    /// what passes the gates, and report classes learned, held-out programs caught, probes
    /// accepted, false positives over the corpus and examples, and rules the generalization gate
    /// rejected. Exit: 0 the targets hold, 1 they do not, 2 error.
    Bench {
        #[command(flatten)]
        repo: RepoArgs,
        /// The benchmark folder (default: evolution/benchmark of the checkout).
        #[arg(long, value_name = "DIR")]
        benchmark: Option<PathBuf>,
        /// Scratch folder for the ablated repositories (default: a temporary one, removed).
        #[arg(long, value_name = "DIR")]
        work: Option<PathBuf>,
        /// Only this class (repeatable).
        #[arg(long = "class", value_name = "NAME")]
        classes: Vec<String>,
        #[command(flatten)]
        gates: GateArgs,
        /// Breaks ties in the rule search (same seed, same report).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Print the report as JSON (the old spelling of `--message-format json`).
        #[arg(long, hide = true)]
        json: bool,
    },
    /// Maintain the queue folder.
    #[command(subcommand)]
    Queue(QueueCommand),
    /// Read the evidence store: `list` its records, `show` one.
    #[command(subcommand)]
    Evidence(EvidenceCommand),
    /// List the queue (`--message-format json`: every listed record).
    List {
        #[command(flatten)]
        repo: RepoArgs,
        /// Only proposals of this kind.
        #[arg(long, value_enum)]
        kind: Option<KindArg>,
        /// Only proposals in this state.
        #[arg(long, value_enum)]
        status: Option<StatusArg>,
    },
    /// Show one proposal: evidence, what was synthesized, the gate table and the diff.
    Show {
        /// The proposal id (`list` shows them).
        id: String,
        #[command(flatten)]
        repo: RepoArgs,
        /// Leave out the diff.
        #[arg(long)]
        no_diff: bool,
    },
    /// The queue in a browser: serve its pages on 127.0.0.1 (read-only; prints the URL), or
    /// write them as static HTML with --html DIR. Each proposal page shows its gate table, the
    /// evidence with the failing lines marked, the values around each constant, figures and the
    /// side-by-side diff, and the `accept` / `reject` commands to run.
    Review {
        #[command(flatten)]
        repo: RepoArgs,
        /// The evidence store whose records and programs the pages show.
        #[arg(long, value_name = "DIR", default_value = cake_evolve::store::DEFAULT_STORE_DIR)]
        evidence: PathBuf,
        /// Write the pages here (index.html, proposal/<id>.html) instead of serving them.
        #[arg(long, value_name = "DIR")]
        html: Option<PathBuf>,
        /// The port on 127.0.0.1 (default: any free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
    },
    /// Re-run the gates on current main merged with the proposal (as bors does); if they pass,
    /// merge it into main and record the acceptance.
    Accept {
        /// The proposal id (`list` shows them).
        id: String,
        #[command(flatten)]
        repo: RepoArgs,
        /// A note kept with the record and in the merge commit.
        #[arg(long, default_value = "")]
        note: String,
        #[command(flatten)]
        gates: GateArgs,
        #[command(flatten)]
        lock: LockArgs,
    },
    /// Reject a proposal; the reason is remembered and the bucket is not proposed again until
    /// new evidence arrives.
    Reject {
        /// The proposal id (`list` shows them).
        id: String,
        #[command(flatten)]
        repo: RepoArgs,
        /// Why (required).
        #[arg(long, required = true)]
        why: String,
        #[command(flatten)]
        lock: LockArgs,
    },
    /// Recalibrate the cost model of a target: run its microbenchmark suite written in Cake IR on
    /// this machine's GPU (calibration/microbench/<target>/suite.toml), fit each bench's
    /// parameters, judge the fit on GPU corpus cases timed in the same run (Spearman, MAPE, top-k
    /// recall before and after), and queue the new calibration/<target>.toml as a proposal.
    /// Without a GPU: --from-saved FILE (a run saved elsewhere with --save-measurements), or
    /// --measurements FILE (refit the op class with systematic error). Exit: 0 queued, 1 gates
    /// failed, 2 error, 3 no GPU.
    Calibrate {
        #[command(flatten)]
        repo: RepoArgs,
        /// The target whose cost model is fitted (`calibration/<target>.toml`).
        #[arg(long, default_value = "sm_90a")]
        target: String,
        /// The suite (default: calibration/microbench/<target>/suite.toml in the repository).
        #[arg(long, value_name = "FILE")]
        suite: Option<PathBuf>,
        /// Fit from a suite run saved earlier (by --save-measurements) instead of running now.
        #[arg(long, value_name = "FILE", conflicts_with = "measurements")]
        from_saved: Option<PathBuf>,
        /// Write the suite run (every timed run, JSON) to FILE.
        #[arg(long, value_name = "FILE")]
        save_measurements: Option<PathBuf>,
        /// Run and save only (with --save-measurements); no proposal.
        #[arg(long, requires = "save_measurements")]
        measure_only: bool,
        /// Instead of the suite: refit the op class with systematic error from these measurements
        /// (JSON: [{name, program (source), dims, measured_ms}]).
        #[arg(long, value_name = "FILE")]
        measurements: Option<PathBuf>,
        /// The `cake` binary that runs the programs (default: beside this one, or $CAKE_BIN).
        #[arg(long, value_name = "PATH")]
        cake: Option<PathBuf>,
        /// Wall-clock limit per run of one program, seconds.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
        /// Start no new run after this many seconds (what ran is kept and fitted).
        #[arg(long, default_value_t = 1200)]
        deadline: u64,
        /// Label of the fit (`fitted_on`); default: the run's date and GPU.
        #[arg(long, default_value = "")]
        fitted_on: String,
        #[command(flatten)]
        gates: GateArgs,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.message_format == Format::Json;
    JSON_ERRORS.store(json, std::sync::atomic::Ordering::Relaxed);
    if json && !prints_json(&cli.command) {
        return ExitCode::from(fail_coded("Q011", "`--message-format json`: this command prints text only", "`mine`, `import`, `bench`, `list`, `show` and `evidence` print JSON; what the others make is recorded in proposals/ (read it with `list --message-format json`)"));
    }
    let code = match cli.command {
        Command::Mine(a) => cake_evolve::mine::run_mine(a, cli.message_format),
        Command::Import(a) => cake_evolve::import::run_import(a, cli.message_format),
        Command::Propose { repo, evidence, seed, gates, no_gates, limit, min_programs, no_progress, no_mine_warnings, term_benches, cake, lock } => {
            let mut o = ProposeOptions::new(&repo.repo, evidence);
            o.term_benches = match term_benches.as_str() {
                "auto" if cake::corpus::tiers::gpu_present() => cake_evolve::term_refit::TermBenches::Gpu(cake),
                "auto" | "records" => cake_evolve::term_refit::TermBenches::Records,
                file => cake_evolve::term_refit::TermBenches::Saved(PathBuf::from(file)),
            };
            o.seed = seed;
            o.main = repo.main;
            o.gate = gates.options();
            o.run_gates = !no_gates;
            o.limit = limit;
            o.min_programs = min_programs;
            o.progress = !no_progress;
            o.mine_warnings = !no_mine_warnings;
            o.lock_timeout = lock.timeout();
            match queue::propose(&o) {
                Ok(s) => {
                    let proposed = s.proposed();
                    println!("propose: {} bucket(s) from the evidence, base {} of `{}`", s.buckets, &s.base[..12.min(s.base.len())], s.main);
                    for o in &s.outcomes {
                        println!("  {:<13} {:<10} {:<12} {}", o.bucket, o.what, o.proposal.clone().unwrap_or_default(), sanitize::line_bounded(&o.detail, 2000));
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
        Command::Ablate { repo, rules, out } => {
            let Some(root) = git_workdir(&repo.repo) else { return ExitCode::from(fail(&format!("{} is not inside a git checkout", repo.repo.display()))) };
            if out.exists() {
                return ExitCode::from(fail(&format!("{} exists: give a new folder for the ablated repository", out.display())));
            }
            match cake_evolve::benchmark::ablate::make_ablated_repo(&root, &out, &rules) {
                Ok((files, negatives)) => {
                    println!("ablated {}: {files} rule file(s) and {negatives} negative case(s) removed; the base is {}", rules.join(", "), out.display());
                    println!("its rules: {}", out.join("compiler/rules").display());
                    0
                }
                Err(e) => fail(&e),
            }
        }
        Command::Variants { programs, repo, max, ablate, out } => {
            let Some(mut root) = git_workdir(&repo.repo) else { return ExitCode::from(fail(&format!("{} is not inside a git checkout", repo.repo.display()))) };
            let scratch = match tempfile::tempdir() {
                Ok(t) => t,
                Err(e) => return ExitCode::from(fail(&format!("cannot make a scratch folder: {e}"))),
            };
            if !ablate.is_empty() {
                let dst = scratch.path().join("base");
                if let Err(e) = cake_evolve::benchmark::ablate::make_ablated_repo(&root, &dst, &ablate) {
                    return ExitCode::from(fail(&e));
                }
                root = dst;
            }
            let base = match cake_evolve::synth::Base::load(&root) {
                Ok(b) => b,
                Err(e) => return ExitCode::from(fail(&e)),
            };
            match cake_evolve::synth::variants::write_batch(&base, &programs, max, &out) {
                Ok(entries) => {
                    for e in &entries {
                        println!("{:<48} {} {}  ({})", e.file, sanitize::line_bounded(&e.parent_file, 200), e.variant.edit.describe(), e.variant.moves.join("; "));
                    }
                    println!("{} variant(s) of {} program(s) in {}", entries.len(), programs.len(), out.display());
                    0
                }
                Err(e) => fail(&e),
            }
        }
        Command::Bench { repo, benchmark, work, classes, gates, seed, json: old_json } => bench(&repo, benchmark, work, classes, &gates, seed, json || old_json),
        Command::Queue(QueueCommand::Rebuild { repo, lock }) => rebuild(&repo, lock),
        Command::Evidence(EvidenceCommand::List { store }) => evidence_list(&store, json),
        Command::Evidence(EvidenceCommand::Show { id, store }) => evidence_show(&store, &id, json),
        Command::List { repo, kind, status } => match git_workdir(&repo.repo) {
            Some(w) => {
                let all = scan_reporting(&queue::queue_dir(&w));
                let kind = kind.map(|k| match k {
                    KindArg::Rule => Kind::Rule,
                    KindArg::Primitive => Kind::Primitive,
                    KindArg::Calibration => Kind::Calibration,
                    KindArg::Analysis => Kind::Analysis,
                });
                let status = status.map(|s| match s {
                    StatusArg::Queued => Status::Queued,
                    StatusArg::Accepted => Status::Accepted,
                    StatusArg::Rejected => Status::Rejected,
                });
                let listed = review::filter(all, kind, status);
                if json {
                    println!("{}", serde_json::to_string_pretty(&listed).unwrap_or_default());
                } else {
                    print!("{}", review::list(&listed));
                }
                0
            }
            None => fail(&format!("{}: not inside a git repository with a working directory", repo.repo.display())),
        },
        Command::Show { id, repo, no_diff } => match git_workdir(&repo.repo).ok_or_else(|| "not inside a git repository".to_string()).and_then(|w| {
            let dir = queue::queue_dir(&w);
            scan_reporting(&dir);
            queue::find(&dir, &id)
        }) {
            Ok((_, r)) if json => {
                println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
                0
            }
            Ok((_, r)) => match review::show(&repo.repo, &r, !no_diff) {
                Ok(t) => {
                    print!("{t}");
                    0
                }
                Err(e) => fail(&e),
            },
            Err(e) => fail(&e),
        },
        Command::Review { repo, evidence, html, port } => review_pages(&repo, &evidence, html.as_deref(), port),
        Command::Accept { id, repo, note, gates, lock } => match review::accept_with_lock_timeout(&repo.repo, &id, &note, repo.main.as_deref(), gates.options(), lock.timeout()) {
            Ok(Accepted::Merged { commit, how }) => {
                println!("accepted {}: merged into main ({how}) as {commit}", sanitize::line(&id));
                // The gates it passed on main, from the record the accept just saved.
                let gates = git_workdir(&repo.repo).and_then(|w| queue::find(&queue::queue_dir(&w), &id).ok()).and_then(|(_, r)| r.review).map(|v| v.gates).unwrap_or_default();
                if !gates.is_empty() {
                    println!("\n{}", sanitize::text(&cake_merge_gates::GateReport::new(gates).table()));
                }
                0
            }
            Ok(Accepted::GatesFailed { table }) => {
                println!("not merged: the gates failed on current main\n\n{table}");
                1
            }
            Err(e) => fail(&e),
        },
        Command::Reject { id, repo, why, lock } => match review::reject_with_lock_timeout(&repo.repo, &id, &why, lock.timeout()) {
            Ok(r) => {
                println!("rejected {} ({}): {}\nbucket {} will not be proposed again unless new evidence arrives", r.id, sanitize::line(&r.title), sanitize::line(&why), r.bucket);
                0
            }
            Err(e) => fail(&e),
        },
        Command::Calibrate { repo, target, suite, from_saved, save_measurements, measure_only, measurements, cake, timeout, deadline, fitted_on, gates } => {
            let args = CalibrateArgs { repo, target, suite, from_saved, save_measurements, measure_only, cake, timeout, deadline, fitted_on, gates };
            match measurements {
                Some(file) => calibrate_from_measurements(&args, &file),
                None => calibrate_suite(&args),
            }
        }
    };
    ExitCode::from(code)
}

struct CalibrateArgs {
    repo: RepoArgs,
    target: String,
    suite: Option<PathBuf>,
    from_saved: Option<PathBuf>,
    save_measurements: Option<PathBuf>,
    measure_only: bool,
    cake: Option<PathBuf>,
    timeout: u64,
    deadline: u64,
    fitted_on: String,
    gates: GateArgs,
}

fn report_calibration(r: &queue::Record) -> u8 {
    println!("queued {} on {}: {}", r.id, r.branch, r.title);
    if let Some(c) = &r.calibration {
        for p in &c.params {
            println!("  {p}");
        }
        println!("  accuracy on {} GPU corpus measurements: Spearman {:.3} -> {:.3}, MAPE {:.1}% -> {:.1}%, top-{} recall {:.2} -> {:.2}", c.after.n, c.before.spearman, c.after.spearman, c.before.mape, c.after.mape, c.after.k, c.before.top_k_recall, c.after.top_k_recall);
    }
    println!("review with `cake-evolve-compiler show {}`", r.id);
    u8::from(r.gates_passed == Some(false))
}

fn calibrate_from_measurements(a: &CalibrateArgs, file: &std::path::Path) -> u8 {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => return fail(&format!("{}: {e}", file.display())),
    };
    let ms: Vec<cake_evolve::calibrate::Measurement> = match serde_json::from_str(&text) {
        Ok(m) => m,
        Err(e) => return fail(&format!("{}: not a measurement list: {e}", file.display())),
    };
    let label = if a.fitted_on.is_empty() { file.display().to_string() } else { a.fitted_on.clone() };
    match queue::propose_calibration(&a.repo.repo, a.repo.main.as_deref(), &a.target, &ms, &label, a.gates.options()) {
        Ok(r) => report_calibration(&r),
        Err(e) => fail(&e),
    }
}

fn calibrate_suite(a: &CalibrateArgs) -> u8 {
    use cake_evolve::microbench::{self, CakeRunner, RunSuiteError, SavedRun, Suite};
    let root = git_workdir(&a.repo.repo).unwrap_or_else(|| a.repo.repo.clone());
    let path = a.suite.clone().unwrap_or_else(|| Suite::default_path(&root, &a.target));
    let suite = match Suite::load(&path) {
        Ok(s) if s.target == a.target => s,
        Ok(s) => return fail(&format!("{}: a suite for {}, not --target {}", path.display(), s.target, a.target)),
        Err(e) => return fail(&e),
    };
    let run: SavedRun = if let Some(saved) = &a.from_saved {
        let parsed = std::fs::read_to_string(saved).map_err(|e| e.to_string()).and_then(|t| serde_json::from_str::<SavedRun>(&t).map_err(|e| format!("not a saved calibration run ({}): {e}", microbench::RUN_SCHEMA)));
        match parsed {
            Ok(r) if r.target == a.target => r,
            Ok(r) => return fail(&format!("{}: measured for {}, not --target {}", saved.display(), r.target, a.target)),
            Err(e) => return fail(&format!("{}: {e}", saved.display())),
        }
    } else {
        let exe = match CakeRunner::locate(a.cake.clone()) {
            Ok(p) => p,
            Err(e) => return fail(&e),
        };
        let runner = CakeRunner { exe, timeout_s: a.timeout, deadline: std::time::Duration::from_secs(a.deadline), started: std::time::Instant::now(), verbose: true };
        eprintln!("calibrate {}: {} bench(es) from {}", a.target, suite.benches.len(), path.display());
        match microbench::run_suite(&suite, &root.join("corpus"), &runner) {
            Ok(r) => r,
            Err(e @ RunSuiteError::NoGpu(_)) => {
                eprintln!("error[calibrate-no-gpu]: {e}");
                return 3;
            }
            Err(e) => return fail(&e.to_string()),
        }
    };
    if !run.failed.is_empty() {
        // A run gives a time to fit only when it passed: a wrong answer (`mismatch`: the output
        // did not match the oracle), an error, a hang or the deadline leaves it out.
        eprintln!(
            "{} run(s) of the {} not timed, so left out of the fit and its accuracy set: only a run whose output matches its oracle gives a time (`mismatch`: the output was outside the oracle's tolerance; `cake run PROGRAM --shape DIMS` shows the comparison)",
            run.failed.len(),
            if a.from_saved.is_some() { "saved run" } else { "suite" }
        );
    }
    for f in &run.failed {
        eprintln!("  not timed: {}", sanitize::line(f));
    }
    let per_bench: Vec<String> = microbench::runs_per_bench(&run).into_iter().map(|(b, n)| format!("{b} {n}")).collect();
    eprintln!("timed on {}: suite runs [{}], {} accuracy run(s)", run.gpu, per_bench.join(", "), run.accuracy.len());
    if let Some(out) = &a.save_measurements {
        let written = serde_json::to_vec_pretty(&run).map_err(|e| e.to_string()).and_then(|b| std::fs::write(out, b).map_err(|e| format!("{}: {e}", out.display())));
        if let Err(e) = written {
            return fail(&e);
        }
        eprintln!("saved the run to {}", out.display());
    }
    if a.measure_only {
        return 0;
    }
    let label = if a.fitted_on.is_empty() { format!("{} on {}", utc_date(run.created_unix), run.gpu) } else { a.fitted_on.clone() };
    if let Ok(Some(r)) = queue::decided_suite_calibration(&a.repo.repo, a.repo.main.as_deref(), &suite, &run, &label) {
        println!("not fitted: this run was fitted to the same calibration before and {} as {} ({}); nothing new to propose — measure again to refit", r.status.as_str(), r.id, r.title);
        return 0;
    }
    match queue::propose_suite_calibration(&a.repo.repo, a.repo.main.as_deref(), &suite, &run, &label, a.gates.options()) {
        Ok(r) => {
            if let Some(c) = &r.calibration {
                for f in &c.fits {
                    println!("  fit {} from bench `{}` ({} run(s)): mean |log error| {:.3} -> {:.3}{}", f.param, f.bench, f.runs, f.log_error_before, f.log_error_after, if f.at_bound { " (at the search bound)" } else { "" });
                }
            }
            report_calibration(&r)
        }
        Err(e) => fail(&e),
    }
}

/// `YYYY-MM-DD` (UTC) of a Unix time.
fn utc_date(unix: u64) -> String {
    // Days to civil date (H. Hinnant's algorithm).
    let z = (unix / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn bench(repo: &RepoArgs, benchmark: Option<PathBuf>, work: Option<PathBuf>, classes: Vec<String>, gates: &GateArgs, seed: u64, json: bool) -> u8 {
    let Some(checkout) = git_workdir(&repo.repo) else { return fail(&format!("{} is not inside a git checkout", repo.repo.display())) };
    // A scratch folder of our own is removed when `bench` ends (dropped with `_scratch`).
    let (work, _scratch) = match work {
        Some(w) => (w, None),
        None => match tempfile::tempdir() {
            Ok(t) => (t.path().to_path_buf(), Some(t)),
            Err(e) => return fail(&format!("cannot make a scratch folder: {e}")),
        },
    };
    let mut gate = gates.options();
    if gates.tiers.is_empty() {
        gate.tiers = vec![Tier::Static];
    }
    let opts = cake_evolve::benchmark::BenchOptions { benchmark: benchmark.unwrap_or_else(|| checkout.join("evolution/benchmark")), checkout, work, only: classes, gate, seed };
    match cake_evolve::benchmark::run(&opts, |m| eprintln!("{}", sanitize::line_bounded(m, 400))) {
        Ok(r) => {
            if json {
                println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
            } else {
                print!("{}", sanitize::text(&r.table()));
            }
            let (h, ht) = r.heldout();
            let ok = r.learned() * 8 >= 7 * r.classes.len() && h * 10 >= 9 * ht && r.false_positives() == 0;
            u8::from(!ok)
        }
        Err(e) => fail(&e),
    }
}

fn git_workdir(p: &std::path::Path) -> Option<PathBuf> {
    cake_evolve::git::open(p).ok().and_then(|r| r.workdir().map(|w| w.to_path_buf()))
}

/// `review`: write the pages to `html`, or serve them on 127.0.0.1:`port` until interrupted.
fn review_pages(repo: &RepoArgs, evidence: &std::path::Path, html: Option<&std::path::Path>, port: u16) -> u8 {
    let site = match cake_evolve::review_page::Site::new(&repo.repo, Some(evidence)) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    if let Some(dir) = html {
        return match site.write_static(dir) {
            Ok(files) => {
                println!("wrote {} page(s); open {}", files.len(), dir.join("index.html").display());
                0
            }
            Err(e) => fail(&e),
        };
    }
    let listener = match std::net::TcpListener::bind(("127.0.0.1", port)) {
        Ok(l) => l,
        Err(e) => return fail(&format!("cannot listen on 127.0.0.1:{port}: {e}; give another `--port`, or 0 for any free one")),
    };
    match listener.local_addr() {
        Ok(a) => println!("review pages on http://{a}/ (read-only; Ctrl-C stops)"),
        Err(e) => return fail(&format!("cannot read the listening address: {e}")),
    }
    match cake_evolve::review_page::server::serve(&site, &listener, None) {
        Ok(()) => 0,
        Err(e) => fail(&format!("the review server stopped: {e}")),
    }
}

/// The good records of the queue; each unreadable one is named on standard error and skipped.
fn scan_reporting(dir: &std::path::Path) -> Vec<queue::Record> {
    let scan = queue::scan(dir);
    for w in scan.warnings() {
        eprintln!("{w}");
    }
    scan.records
}

/// `queue rebuild`: under the queue lock, restore records from their branches.
fn rebuild(repo: &RepoArgs, lock: LockArgs) -> u8 {
    let done = cake_evolve::git::open(&repo.repo).and_then(|r| {
        let dir = queue::queue_dir(&cake_evolve::git::workdir(&r)?);
        let _held = cake_evolve::lock::QueueLock::acquire(&r, "queue rebuild", lock.timeout())?;
        queue::rebuild(&r, &dir).map(|b| (dir, b))
    });
    match done {
        Ok((dir, b)) => {
            for id in &b.restored {
                println!("restored {id} from its branch");
            }
            for s in &b.skipped {
                println!("skipped {s}");
            }
            println!("{} record(s) restored, {} already in {}, {} branch(es) skipped", b.restored.len(), b.kept.len(), sanitize::line(&dir.display().to_string()), b.skipped.len());
            0
        }
        Err(e) => fail(&e),
    }
}

/// Whether errors are printed as JSON on standard output (`--message-format json`).
static JSON_ERRORS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The commands with a JSON form of their output.
fn prints_json(c: &Command) -> bool {
    matches!(c, Command::Mine(_) | Command::Import(_) | Command::Bench { .. } | Command::List { .. } | Command::Show { .. } | Command::Evidence(_))
}

fn fail(msg: &str) -> u8 {
    if JSON_ERRORS.load(std::sync::atomic::Ordering::Relaxed) {
        println!("{}", serde_json::json!({ "severity": "error", "message": msg }));
        return 2;
    }
    // Errors quote evidence and records: escaped, newlines kept for the help line.
    eprintln!("error: {}", sanitize::text(msg));
    2
}

/// A coded error with its help line (as JSON with `--message-format json`); exit status 2.
fn fail_coded(code: &str, msg: &str, help: &str) -> u8 {
    if JSON_ERRORS.load(std::sync::atomic::Ordering::Relaxed) {
        println!("{}", serde_json::json!({ "code": code, "severity": "error", "message": msg, "help": help }));
    } else {
        eprintln!("error[{code}]: {}\n  = help: {help}", sanitize::text(msg));
    }
    2
}

fn store_fail(e: &cake_evolve::store::StoreError) -> u8 {
    if JSON_ERRORS.load(std::sync::atomic::Ordering::Relaxed) {
        println!("{}", cake_evolve::evidence::error_json(e));
    } else {
        eprintln!("error[{}]: {}: {}\n  = help: {}", e.code, sanitize::line(&e.path.display().to_string()), sanitize::text(&e.message), cake_evolve::evidence::help(e));
    }
    2
}

/// `evidence list`: a row per readable record; each unreadable one is a warning (human: on
/// standard error; JSON: in `problems`).
fn evidence_list(store: &std::path::Path, json: bool) -> u8 {
    let store = match cake_evolve::store::EvidenceStore::open_existing(store) {
        Ok(s) => s,
        Err(e) => return store_fail(&e),
    };
    let (rows, problems) = cake_evolve::evidence::list(&store);
    if json {
        let problems: Vec<serde_json::Value> = problems.iter().map(cake_evolve::evidence::error_json).collect();
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "records": rows, "problems": problems })).unwrap_or_default());
    } else {
        for p in &problems {
            eprintln!("warning[{}]: {}: {}", p.code, sanitize::line(&p.path.display().to_string()), sanitize::line(&p.message));
        }
        print!("{}", cake_evolve::evidence::render_list(&rows));
    }
    0
}

/// `evidence show ID`.
fn evidence_show(store: &std::path::Path, id: &str, json: bool) -> u8 {
    let opened = cake_evolve::store::EvidenceStore::open_existing(store).and_then(|s| cake_evolve::evidence::open(&s, id).map(|r| (s, r)));
    match opened {
        Ok((s, r)) if json => {
            println!("{}", serde_json::to_string_pretty(&cake_evolve::evidence::show_json(&s, &r)).unwrap_or_default());
            0
        }
        Ok((s, r)) => {
            print!("{}", cake_evolve::evidence::show_text(&s, &r));
            0
        }
        Err(e) => store_fail(&e),
    }
}
