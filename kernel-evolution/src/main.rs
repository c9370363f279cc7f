//! `cake-evolve-kernel`: the kernel-evolution loop (see the library docs and
//! kernel-evolution/README.md).
//!
//! Exit codes: 0 done; 1 a coded error (`K…`); 2 usage; 3 `run`/`resume` finished but the GPU
//! stage was skipped for every evaluation (no GPU), mirroring `cake run`.

use std::path::PathBuf;
use std::process::ExitCode;

use cake_evolve_kernel::db::Db;
use cake_evolve_kernel::error::KevoError;
use cake_evolve_kernel::pipeline::{self, Mode, Options};
use cake_evolve_kernel::report::{self, Data};
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(name = "cake-evolve-kernel", about = "Search Cake IR schedules against a workload contract: generate → gates → cost rank → GPU → evidence")]
struct Cli {
    /// How results are printed: `human` (text) or `json` (one JSON object on standard output,
    /// errors too; `--format` is the old spelling).
    #[arg(long, global = true, value_enum, default_value = "human", alias = "format")]
    message_format: Format,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum, PartialEq)]
enum Format {
    Human,
    Json,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the search (continuing a database made under the same contract and seed).
    Run {
        /// The workload contract (`.toml`: the seed program, its shapes, budgets and tactics).
        contract: PathBuf,
        /// The program database. Default: `.cake/kernel-evolution/<contract name>.sqlite`.
        #[arg(long)]
        db: Option<PathBuf>,
        /// Seed of the search (default: the contract's); the same seed makes the same candidates.
        #[arg(long)]
        seed: Option<u64>,
        /// GPU evaluations over the database's life (default: the contract's budget).
        #[arg(long)]
        budget_evals: Option<u32>,
        /// Wall-clock seconds of this invocation (default: the contract's `budget.wall_seconds`).
        #[arg(long)]
        wall_seconds: Option<u64>,
        /// Re-run the search from the database's recorded measurements (no GPU, nothing written
        /// but the run row): the same candidates and the same best.
        #[arg(long)]
        replay: bool,
        /// The evidence store failing candidates are routed to (`cake-evolve-compiler propose` mines it).
        #[arg(long, default_value = ".cake/evidence")]
        evidence: PathBuf,
        /// Scratch directory of the GPU stage. Default: beside the database.
        #[arg(long)]
        work: Option<PathBuf>,
        /// Gate candidates (and run them) with the verifier rules under DIR instead of those of
        /// the checkout around the current directory (or, outside one, the embedded rules). A
        /// database keeps the rule set it was searched under.
        #[arg(long, value_name = "DIR")]
        rules: Option<PathBuf>,
        /// Spread each generation's GPU evaluations over these GPUs, one worker per GPU
        /// (CUDA_VISIBLE_DEVICES): `all`, a count `N` (the first N), or ids `0,2,3`. Default: one
        /// worker on the environment's GPU. The candidates and verdicts do not depend on it.
        #[arg(long, value_name = "all|N|LIST")]
        gpus: Option<String>,
    },
    /// Continue the database's search after a crash, a kill or a spent wall-time budget.
    Resume {
        /// The workload contract the database was searched under.
        contract: PathBuf,
        /// The program database. Default: `.cake/kernel-evolution/<contract name>.sqlite`.
        #[arg(long)]
        db: Option<PathBuf>,
        /// GPU evaluations over the database's life (default: the contract's budget).
        #[arg(long)]
        budget_evals: Option<u32>,
        /// Wall-clock seconds of this invocation (default: the contract's `budget.wall_seconds`).
        #[arg(long)]
        wall_seconds: Option<u64>,
        /// The evidence store failing candidates are routed to.
        #[arg(long, default_value = ".cake/evidence")]
        evidence: PathBuf,
        /// Scratch directory of the GPU stage. Default: beside the database.
        #[arg(long)]
        work: Option<PathBuf>,
        /// The verifier rules to gate with (a database keeps the rule set it was searched under).
        #[arg(long, value_name = "DIR")]
        rules: Option<PathBuf>,
        /// Spread each generation's GPU evaluations over these GPUs, one worker per GPU
        /// (CUDA_VISIBLE_DEVICES): `all`, a count `N` (the first N), or ids `0,2,3`. Default: one
        /// worker on the environment's GPU. The candidates and verdicts do not depend on it.
        #[arg(long, value_name = "all|N|LIST")]
        gpus: Option<String>,
    },
    /// Counts and invocations of a database.
    Status {
        /// The program database.
        #[arg(long)]
        db: PathBuf,
    },
    /// Leaderboard, lineage of the best, gains per tactic, share filtered per gate, GPU time saved.
    Report {
        /// The program database.
        #[arg(long)]
        db: PathBuf,
        /// Also draw the best-so-far trajectory (over evaluations and GPU seconds) as an SVG.
        #[arg(long)]
        svg: Option<PathBuf>,
    },
    /// A Model Context Protocol server over stdio with the contract tools (contract_status,
    /// contract_submit); the compiler's tools are `cake mcp`'s.
    Mcp,
    /// The best candidate's program (canonical Cake IR) on stdout.
    Best {
        /// The program database.
        #[arg(long)]
        db: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let format = cli.message_format;
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            if format == Format::Json {
                println!("{}", serde_json::json!({ "code": e.code, "severity": "error", "subject": e.subject, "message": e.message, "help": e.help }));
            } else {
                eprintln!("{e}");
            }
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> Result<u8, KevoError> {
    let format = cli.message_format;
    if format == Format::Json && matches!(cli.cmd, Cmd::Mcp) {
        return Err(KevoError::new("K307", "--message-format", "`mcp` speaks JSON-RPC on stdio and has no other output format", "run `cake-evolve-kernel mcp` without `--message-format`"));
    }
    match cli.cmd {
        Cmd::Run { contract, db, seed, budget_evals, wall_seconds, replay, evidence, work, rules, gpus } => {
            let mode = if replay { Mode::Replay } else { Mode::Run };
            let gpus = if replay { Vec::new() } else { select_gpus(gpus.as_deref())? };
            search(Options { contract, db, seed, budget_evals, wall_seconds, mode, evidence, work, rules, gpus }, format)
        }
        Cmd::Resume { contract, db, budget_evals, wall_seconds, evidence, work, rules, gpus } => {
            let gpus = select_gpus(gpus.as_deref())?;
            search(Options { contract, db, seed: None, budget_evals, wall_seconds, mode: Mode::Resume, evidence, work, rules, gpus }, format)
        }
        Cmd::Status { db } => {
            let db = Db::open_existing(&db)?;
            let data = Data::load(&db)?;
            let runs = db.runs()?;
            let r = data.report();
            let v = serde_json::json!({
                "contract": db.meta("contract_name")?, "contract_hash": db.meta("contract_hash")?,
                "candidates": r["candidates"], "gates": r["gates"], "gpu_stage": r["gpu_stage"], "best": r["best"]["seq"],
                "evaluations": data.evaluations.len(), "budget_evals": runs.last().map(|r| r.budget_evals),
                "runs": runs,
            });
            if format == Format::Json {
                println!("{v}");
            } else {
                println!("contract {} ({})", v["contract"].as_str().unwrap_or(""), v["contract_hash"].as_str().unwrap_or(""));
                println!("candidates {}  gates {}  GPU stage {}", v["candidates"], v["gates"], v["gpu_stage"]);
                println!("GPU evaluations {} of a budget of {}", v["evaluations"], v["budget_evals"]);
                for r in &runs {
                    let note = if r.note.is_empty() { String::new() } else { format!(" ({})", r.note) };
                    println!("  run {}: {} --seed {} --budget-evals {}: {}{note}", r.id, r.mode, r.seed, r.budget_evals, r.state);
                }
            }
            Ok(0)
        }
        Cmd::Report { db, svg } => {
            let db = Db::open_existing(&db)?;
            let data = Data::load(&db)?;
            if let Some(path) = svg {
                report::write_svg(&path, &data.trajectory())?;
            }
            let r = data.report();
            if format == Format::Json {
                println!("{r}");
            } else {
                print!("{}", report::human(&r));
            }
            Ok(0)
        }
        Cmd::Mcp => {
            let stdin = std::io::stdin();
            cake_evolve_kernel::mcp::Server::new()
                .serve(stdin.lock(), std::io::stdout())
                .map_err(|e| KevoError::new("K305", "mcp", format!("stdio failed: {e}"), "the client closed its pipe; start the server from an MCP client"))?;
            Ok(0)
        }
        Cmd::Best { db } => {
            let dbh = Db::open_existing(&db)?;
            let data = Data::load(&dbh)?;
            let Some((seq, ms, measured)) = data.best() else {
                return Err(KevoError::new("K302", db.display().to_string(), "no candidate passed the gates", "run the search first (`cake-evolve-kernel run CONTRACT`)"));
            };
            let c = data.candidates.iter().find(|c| c.seq == seq).expect("best is a candidate");
            if format == Format::Json {
                println!("{}", serde_json::json!({ "seq": seq, "ms": ms, "measured": measured, "program_hash": c.program_hash, "program": c.program_text }));
            } else {
                eprintln!("best: #{seq}, {ms:.4} ms ({})", if measured { "measured at the headline" } else { "predicted; nothing was timed" });
                print!("{}", c.program_text);
            }
            Ok(0)
        }
    }
}

fn search(opts: Options, format: Format) -> Result<u8, KevoError> {
    let s = pipeline::execute(&opts)?;
    let skipped = s.evaluations > 0 && s.skipped == s.evaluations;
    if format == Format::Json {
        println!(
            "{}",
            serde_json::json!({
                "db": s.db, "seed": s.seed, "candidates": s.candidates, "new_candidates": s.new_candidates,
                "gate_rejected": s.gate_rejected, "evaluations": s.evaluations, "new_evaluations": s.new_evaluations,
                "passed": s.passed, "timed": s.timed, "failed": s.failed, "skipped": s.skipped, "gpu_stage_skipped": skipped,
                "best": s.best.map(|(seq, ms, measured)| serde_json::json!({ "seq": seq, "ms": ms, "measured": measured })),
                "stop": s.stop, "order": s.order,
                "llm": { "calls": s.llm_calls, "tokens": s.llm_tokens, "note": s.llm_note },
                "rules": s.rules, "rejected_by": s.rejected_by,
            })
        );
    } else {
        println!("database     {}", s.db.display());
        println!("{}", s.rules_note);
        println!("candidates   {} ({} new), {} rejected by the gates", s.candidates, s.new_candidates, s.gate_rejected);
        if !s.rejected_by.is_empty() {
            let by: Vec<String> = s.rejected_by.iter().map(|(code, n)| format!("{code} {n}")).collect();
            println!("             by code: {}", by.join(", "));
        }
        println!("GPU stage    {} evaluations ({} new): {} passed, {} timed at the headline only, {} failed, {} skipped", s.evaluations, s.new_evaluations, s.passed, s.timed, s.failed, s.skipped);
        if skipped {
            println!("             SKIPPED: no GPU here; nothing was timed or checked against the oracle");
        }
        match s.best {
            Some((seq, ms, true)) => println!("best         #{seq} {ms:.4} ms (measured)"),
            Some((seq, ms, false)) => println!("best         #{seq} {ms:.4} ms (predicted only)"),
            None => println!("best         none"),
        }
        println!("LLM proposer {}; {} call(s), {} token(s)", s.llm_note, s.llm_calls, s.llm_tokens);
        println!("stopped      {}", s.stop);
    }
    Ok(if skipped { 3 } else { 0 })
}

/// `--gpus all|N|LIST`: the CUDA_VISIBLE_DEVICES value of each evaluation worker, chosen as `cake
/// corpus gate --gpus` chooses them (the same parser and `nvidia-smi` query, the same coded errors
/// G011–G015): the GPU's UUID where nvidia-smi gives one, since CUDA numbers devices fastest-first
/// and nvidia-smi by PCI bus.
fn select_gpus(spec: Option<&str>) -> Result<Vec<String>, KevoError> {
    use cake::corpus::pool::{detect_gpus, GpuSpec};
    let Some(text) = spec else { return Ok(Vec::new()) };
    let as_kevo = |e: cake::corpus::error::CorpusError| KevoError::new(e.code(), "--gpus", e.to_string(), e.help().unwrap_or_else(|| "see `cake corpus gate --help`".into()));
    let present = detect_gpus();
    let listed = present.clone().unwrap_or_default();
    let ids = GpuSpec::parse(text).and_then(|s| s.select(present)).map_err(as_kevo)?;
    Ok(ids.into_iter().map(|i| listed.iter().find(|g| g.index == i).map_or_else(|| i.to_string(), |g| g.device.clone())).collect())
}
