//! The orchestration of `run`, `resume` and `run --replay`: generations of generate → gates →
//! rank → evaluate → route, over the program database.
//!
//! The search is a pure function of the seed, the contract, the tactics and the outcomes of the
//! GPU stage, so resuming is re-running: each generated candidate is looked up in the database by
//! its generation order (`seq`); a recorded one is taken as recorded (gates, prediction, and its
//! evaluation when it has one) and only what is missing is computed. A process killed at any
//! point loses at most the step in flight, and nothing finished is evaluated again. `--replay`
//! does the same with the GPU stage read from the database only, and stops where the record ends.
//! A recorded candidate that differs from what is generated now (other tactics, another
//! compiler) is `K304`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

use cake::rule_source::{ActiveRules, RulesOrigin};
use serde_json::json;

use crate::contract::{sha256_hex, Contract};
use crate::db::{now_ms, CandidateRow, Db, EvaluationRow, LlmCallRow};
use crate::error::{KevoError, Result};
use crate::evaluate::{find_cake, Evaluator};
use crate::generate;
use crate::llm::{self, LlmConfig};
use crate::rng::SplitMix64;
use crate::route::Router;
use crate::search::Archive;
use crate::tactic::{self, Tactic};
use crate::{gates, rank};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Run,
    Resume,
    Replay,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Run => "run",
            Mode::Resume => "resume",
            Mode::Replay => "replay",
        }
    }
}

pub struct Options {
    pub contract: PathBuf,
    pub db: Option<PathBuf>,
    pub seed: Option<u64>,
    pub budget_evals: Option<u32>,
    /// Overrides the contract's `budget.wall_seconds` for this invocation.
    pub wall_seconds: Option<u64>,
    pub mode: Mode,
    pub evidence: PathBuf,
    pub work: Option<PathBuf>,
    /// `--rules DIR`: the verifier rules candidates are gated (and run) with.
    pub rules: Option<PathBuf>,
    /// `--gpus`: the GPUs a generation's evaluations are spread over (their CUDA_VISIBLE_DEVICES
    /// values, UUIDs where nvidia-smi gives them; one worker each); empty: one worker on the
    /// environment's GPU.
    pub gpus: Vec<String>,
}

#[derive(Debug, Default)]
pub struct Summary {
    pub db: PathBuf,
    pub seed: u64,
    pub candidates: usize,
    pub new_candidates: usize,
    pub gate_rejected: usize,
    pub evaluations: usize,
    pub new_evaluations: usize,
    pub passed: usize,
    /// Checked and timed at the headline only (`sweep = "improvements"`).
    pub timed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub best: Option<(i64, f64, bool)>,
    pub stop: String,
    /// `seq` of every candidate in generation order (for determinism checks).
    pub order: Vec<String>,
    /// LLM proposer: calls (recorded and new) and the tokens they cost; why it is off, if it is.
    pub llm_calls: usize,
    pub llm_tokens: u64,
    pub llm_note: String,
    /// The rule set the gates used: `{origin, dir, count, fingerprint}`, and its `rules:` line.
    pub rules: serde_json::Value,
    pub rules_note: String,
    /// Candidates rejected by the compiler's gates, per first error code.
    pub rejected_by: BTreeMap<String, usize>,
}

pub fn default_db(contract: &Contract) -> PathBuf {
    PathBuf::from(".cake/kernel-evolution").join(format!("{}.sqlite", contract.file.name))
}

pub fn compiler_commit() -> String {
    let t = cake::runtime::record::ToolInfo::current();
    match t.git_commit {
        Some(c) => format!("cake {} {}", t.version, c),
        None => format!("cake {}", t.version),
    }
}

struct Loop<'a> {
    contract: &'a Contract,
    tactics: Vec<Tactic>,
    db: Db,
    recorded: BTreeMap<i64, CandidateRow>,
    evaluations: HashMap<i64, EvaluationRow>,
    evaluator: Option<Evaluator<'a>>,
    router: Option<Router>,
    mode: Mode,
    commit: String,
    summary: Summary,
    seen: HashSet<String>,
    texts: HashMap<i64, String>,
    llm: Option<LlmConfig>,
    llm_calls: BTreeMap<i64, LlmCallRow>,
    llm_budget: u64,
    /// The generations that already have recorded candidates: no live LLM call is made for them
    /// (the recorded order would no longer be the one generated).
    recorded_generations: HashSet<i64>,
    rules: ActiveRules,
    /// CUDA_VISIBLE_DEVICES of each evaluation worker (empty: one worker, the environment's GPU).
    gpus: Vec<String>,
}

pub fn execute(opts: &Options) -> Result<Summary> {
    // A zero budget is refused before anything is opened or written (the contract's own budget
    // is checked when it loads).
    if opts.budget_evals == Some(0) {
        return Err(KevoError::new("K004", "--budget-evals", "the budget allows no GPU evaluation", "give `--budget-evals` of at least 1"));
    }
    if opts.wall_seconds == Some(0) {
        return Err(KevoError::new("K004", "--wall-seconds", "the budget allows no wall time", "give `--wall-seconds` of at least 1"));
    }
    let contract = Contract::load(&opts.contract)?;
    let rules = ActiveRules::resolve(opts.rules.as_deref()).map_err(|d| {
        KevoError::new("K306", opts.rules.as_ref().map_or("compiler/rules".to_string(), |p| p.display().to_string()), d.message.clone(), d.help.clone().unwrap_or_default())
    })?;
    let fingerprint = rules_fingerprint(&rules.set);
    let tactics = tactic::load_dir(&contract.tactics_dir())?;
    let db_path = opts.db.clone().unwrap_or_else(|| default_db(&contract));
    if opts.mode != Mode::Run && !db_path.is_file() {
        return Err(KevoError::new("K302", db_path.display().to_string(), format!("no database to {}", opts.mode.as_str()), "start with `cake-evolve-kernel run CONTRACT --db PATH`"));
    }
    let text = std::fs::read_to_string(&contract.path).unwrap_or_default();
    // One writer a database; held until this function returns.
    let _lock = crate::db::lock(&db_path)?;
    let db = Db::open_for(&db_path, &contract.hash, &contract.file.name, &text)?;
    db.bind_rules(&fingerprint, &rules.describe())?;
    let recorded: BTreeMap<i64, CandidateRow> = db.candidates()?.into_iter().map(|c| (c.seq, c)).collect();
    let llm_calls: BTreeMap<i64, LlmCallRow> = db.llm_calls()?.into_iter().map(|c| (c.generation, c)).collect();
    let recorded_generations: HashSet<i64> = recorded.values().map(|c| c.generation).collect();
    let llm_budget = contract.file.budget.llm_tokens;
    let (llm, llm_note) = match (opts.mode, LlmConfig::from_env(), llm_budget) {
        (Mode::Replay, _, _) => (None, "replay: recorded LLM answers only".to_string()),
        (_, _, 0) => (None, "off: budget.llm_tokens is 0".to_string()),
        (_, None, _) => (None, format!("off: {} is not set", cake_evolve::llm::ENV_BASE_URL)),
        (_, Some(cfg), _) => {
            let note = format!("on: {} ({})", cfg.endpoint(), cfg.model);
            (Some(cfg), note)
        }
    };
    let evaluations: HashMap<i64, EvaluationRow> = db.evaluations()?.into_iter().map(|e| (e.seq, e)).collect();
    let first_seed = db.first_seed()?;
    let seed = match (opts.mode, first_seed, opts.seed) {
        (Mode::Run, Some(s), Some(n)) if s != n && !recorded.is_empty() => {
            return Err(KevoError::new(
                "K304",
                db_path.display().to_string(),
                format!("the database holds a search under --seed {s}, not {n}"),
                "`resume` it, or give a new `--db` for another seed",
            ))
        }
        (Mode::Run, _, Some(n)) => n,
        (Mode::Run, Some(s), None) => s,
        (Mode::Run, None, None) => 1,
        (_, Some(s), _) => s,
        (_, None, _) => {
            return Err(KevoError::new("K302", db_path.display().to_string(), "the database has no recorded run", "start with `cake-evolve-kernel run CONTRACT --db PATH`"));
        }
    };
    let work = opts.work.clone().unwrap_or_else(|| db_path.with_extension("work"));
    let evaluator = match opts.mode {
        Mode::Replay => None,
        _ => Some(Evaluator { contract: &contract, cake: find_cake()?, work, input_seed: seed, peer_times: Default::default(), rules_dir: rules_dir(&rules) }),
    };
    let router = match opts.mode {
        Mode::Replay => None,
        _ => Some(Router::open(&opts.evidence, &contract.hash)?),
    };
    // `resume` and `--replay` keep the budget the search was started with unless told otherwise.
    let budget = match (opts.budget_evals, opts.mode) {
        (Some(b), _) => b,
        (None, Mode::Run) => contract.file.budget.gpu_evaluations,
        (None, _) => db.last_budget()?.unwrap_or(contract.file.budget.gpu_evaluations),
    };
    let run_id = db.begin_run(opts.mode.as_str(), seed, budget)?;
    let mut lp = Loop {
        contract: &contract,
        tactics,
        db,
        recorded,
        evaluations,
        evaluator,
        router,
        mode: opts.mode,
        commit: compiler_commit(),
        summary: Summary {
            db: db_path,
            seed,
            llm_note,
            rules: {
                let mut j = rules.to_json();
                j["fingerprint"] = json!(fingerprint);
                j
            },
            rules_note: rules.describe(),
            ..Summary::default()
        },
        rules,
        seen: HashSet::new(),
        texts: HashMap::new(),
        llm,
        llm_calls,
        llm_budget,
        recorded_generations,
        gpus: opts.gpus.clone(),
    };
    let wall = opts.wall_seconds.unwrap_or(contract.file.budget.wall_seconds);
    let result = lp.search(seed, budget, wall);
    match &result {
        Ok(()) => lp.db.end_run(run_id, "finished", &lp.summary.stop)?,
        Err(e) => lp.db.end_run(run_id, "error", &e.to_string())?,
    }
    result.map(|()| lp.summary)
}

impl Loop<'_> {
    fn search(&mut self, seed: u64, budget: u32, wall: u64) -> Result<()> {
        let started = Instant::now();
        let mut rng = SplitMix64::new(seed);
        let mut archive = Archive::default();
        // Every candidate that may still be a parent (passed the gates, did not fail), by score.
        let mut scores: BTreeMap<i64, f64> = BTreeMap::new();
        let mut seq: i64 = 0;
        let mut evaluated: u32 = 0;
        let per_gen = self.contract.file.search.candidates_per_generation as usize;
        let gpu_per_gen = self.contract.file.search.gpu_per_generation as usize;
        let mut generation: i64 = 0;
        loop {
            // Stage 1: generate (generation 0: the contract's seeds).
            let mut proposals: Vec<(generate::Proposal, Vec<i64>)> = Vec::new();
            if generation == 0 {
                for s in &self.contract.seeds {
                    let hash = sha256_hex(s.source.as_bytes());
                    let params = json!({ "path": s.rel });
                    proposals.push((generate::Proposal { text: s.source.clone(), hash, tactic: "seed".into(), params }, Vec::new()));
                }
            } else {
                // The LLM proposer first (one call a generation, from the fastest elite), then the tactics.
                if let Some(p) = self.llm_proposal(generation, &archive)? {
                    proposals.push(p);
                }
                // Up to four draws per wanted candidate: a drawn parent may have no fresh move left.
                let mut attempts = 0;
                while proposals.len() < per_gen && attempts < 4 * per_gen {
                    attempts += 1;
                    let Some(parent) = archive.pick_parent(&mut rng) else { break };
                    let parent_text = self.texts.get(&parent).cloned().unwrap_or_default();
                    let mut seen = self.seen.clone();
                    seen.extend(proposals.iter().map(|(p, _)| p.hash.clone()));
                    if let Some(p) = generate::propose(&parent_text, &self.tactics, &mut rng, &seen) {
                        proposals.push((p, vec![parent]));
                    }
                }
                // The elites' neighbourhoods are spent: widen to every candidate that passed the
                // gates and did not fail on the GPU, fastest first, so the search walks on through
                // points no cell keeps (a step that is slower alone but opens a faster one).
                if proposals.len() < per_gen {
                    let mut pool: Vec<(f64, i64)> = scores.iter().map(|(s, v)| (*v, *s)).collect();
                    pool.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                    for (_, parent) in pool {
                        if proposals.len() >= per_gen {
                            break;
                        }
                        let parent_text = self.texts.get(&parent).cloned().unwrap_or_default();
                        let mut seen = self.seen.clone();
                        seen.extend(proposals.iter().map(|(p, _)| p.hash.clone()));
                        if let Some(p) = generate::propose(&parent_text, &self.tactics, &mut rng, &seen) {
                            proposals.push((p, vec![parent]));
                        }
                    }
                }
            }
            if proposals.is_empty() {
                self.summary.stop = if archive.cells().is_empty() {
                    "no candidate to rewrite: every seed failed (gates or GPU)".into()
                } else {
                    "search space exhausted: no elite has a move to a new program".into()
                };
                return Ok(());
            }
            // Stages 2 and 3: gates and rank, recorded one candidate per transaction.
            let mut passed: Vec<(i64, f64, String)> = Vec::new();
            for (p, parents) in proposals {
                if !self.seen.insert(p.hash.clone()) {
                    continue;
                }
                let row = match self.recorded.get(&seq) {
                    Some(r) if r.program_hash == p.hash => r.clone(),
                    Some(r) => {
                        return Err(KevoError::new(
                            "K304",
                            self.summary.db.display().to_string(),
                            format!("candidate #{seq} was recorded as {} ({}), this search generates {} ({})", short(&r.program_hash), r.tactic, short(&p.hash), p.tactic),
                            "the tactics, the contract's seeds or the compiler changed since the database was made: give a new `--db`",
                        ))
                    }
                    None if self.mode == Mode::Replay => {
                        self.summary.stop = format!("end of the recorded search (candidate #{seq})");
                        return Ok(());
                    }
                    None => {
                        let row = self.gate_and_rank(seq, generation, &p, parents)?;
                        self.db.insert_candidate(&row)?;
                        self.summary.new_candidates += 1;
                        row
                    }
                };
                self.summary.candidates += 1;
                self.summary.order.push(format!("{}:{}:{}", row.seq, row.tactic, short(&row.program_hash)));
                self.texts.insert(row.seq, row.program_text.clone());
                if row.gate == "passed" {
                    passed.push((row.seq, row.predicted_ms.unwrap_or(f64::INFINITY), row.cell.clone().unwrap_or_default()));
                } else {
                    self.summary.gate_rejected += 1;
                    *self.summary.rejected_by.entry(rejection_code(&row)).or_default() += 1;
                }
                seq += 1;
            }
            // Stage 4: the cost model's best of this generation go to the GPU (every seed does).
            passed.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            let take = if generation == 0 { passed.len() } else { gpu_per_gen };
            // The generation's new evaluations run as one batch over the GPU workers, each judged
            // against the best of the earlier generations, so the candidates and verdicts are the
            // same on one GPU as on several; they are ranked below in candidate order.
            let mut batch: BTreeMap<i64, EvaluationRow> = BTreeMap::new();
            if self.mode != Mode::Replay && started.elapsed().as_secs() < wall {
                let mut n = evaluated;
                let mut todo = Vec::new();
                for (i, (cseq, _, _)) in passed.iter().enumerate() {
                    if i < take && n < budget {
                        if !self.evaluations.contains_key(cseq) {
                            todo.push(*cseq);
                        }
                        n += 1;
                    }
                }
                batch = self.evaluate_batch(&todo)?;
            }
            for (i, (cseq, predicted, cell)) in passed.iter().enumerate() {
                let mut outcome: Option<EvaluationRow> = None;
                if i < take && evaluated < budget {
                    if let Some(e) = self.evaluations.get(cseq) {
                        outcome = Some(e.clone());
                    } else if self.mode == Mode::Replay {
                        self.summary.stop = format!("end of the recorded measurements (candidate #{cseq})");
                        return Ok(());
                    } else if let Some(row) = batch.remove(cseq) {
                        outcome = Some(row);
                    } else {
                        self.summary.stop = format!("wall-time budget ({wall} s) spent; `resume` continues");
                        return Ok(());
                    }
                    evaluated += 1;
                }
                let (score, measured) = match &outcome {
                    Some(e) if e.status == "passed" => (e.headline_ms.unwrap_or(f64::INFINITY), true),
                    // Timed but not swept: a parent by its time, never the best.
                    Some(e) if e.status == "timed" => (e.headline_ms.unwrap_or(f64::INFINITY), true),
                    Some(e) if e.status == "failed" || e.status == "error" => (f64::INFINITY, false),
                    _ => (*predicted, false),
                };
                if let Some(e) = &outcome {
                    self.summary.evaluations += 1;
                    match e.status.as_str() {
                        "passed" => self.summary.passed += 1,
                        "timed" => self.summary.timed += 1,
                        "skipped" => self.summary.skipped += 1,
                        _ => self.summary.failed += 1,
                    }
                }
                archive.offer(cell, *cseq, score, measured);
                if score.is_finite() {
                    scores.insert(*cseq, score);
                }
                if outcome.as_ref().is_some_and(|e| e.status == "timed") {
                    continue;
                }
                let better = match self.summary.best {
                    None => score.is_finite(),
                    Some((_, b, bm)) => (measured && !bm && score.is_finite()) || (measured == bm && score < b),
                };
                if better {
                    self.summary.best = Some((*cseq, score, measured));
                }
            }
            if evaluated >= budget {
                self.summary.stop = format!("GPU-evaluation budget ({budget}) spent");
                return Ok(());
            }
            generation += 1;
        }
    }

    /// The LLM's candidate for this generation: the recorded answer when there is one, else (when
    /// the proposer is on, tokens remain and the generation is new) a live call, recorded.
    fn llm_proposal(&mut self, generation: i64, archive: &Archive) -> Result<Option<(generate::Proposal, Vec<i64>)>> {
        let call = match self.llm_calls.get(&generation) {
            Some(c) => c.clone(),
            None => {
                let Some(cfg) = self.llm.clone() else { return Ok(None) };
                if self.summary.llm_tokens >= self.llm_budget || self.recorded_generations.contains(&generation) {
                    return Ok(None);
                }
                let Some(parent) = archive.cells().values().min_by(|a, b| a.score_ms.total_cmp(&b.score_ms).then(a.seq.cmp(&b.seq))).map(|e| e.seq) else {
                    return Ok(None);
                };
                let row = self.recorded.get(&parent).cloned();
                let text = self.texts.get(&parent).cloned().unwrap_or_default();
                let ev = self.evaluations.get(&parent).map(|e| json!({ "status": e.status, "headline_ms": e.headline_ms, "peers": e.peers }));
                let null = serde_json::Value::Null;
                let findings = row.as_ref().map(|r| &r.findings).unwrap_or(&null);
                let ctx = llm::Context {
                    program: &text,
                    findings,
                    predicted_ms: row.as_ref().and_then(|r| r.predicted_ms),
                    bottleneck: row.as_ref().and_then(|r| r.bottleneck.as_deref()),
                    evaluation: ev,
                };
                let answer = llm::ask(&cfg, self.contract, &ctx);
                // Canonical form when it parses; otherwise verbatim, for the parse gate to reject.
                let program = answer.program.map(|p| cake::syntax::parse(&p).map(|f| cake::syntax::print(&f)).unwrap_or(p));
                let (outcome, message, program_text) = match program {
                    Ok(p) if self.seen.contains(&sha256_hex(p.as_bytes())) => ("duplicate", "a program already in the database".to_string(), Some(p)),
                    Ok(p) => ("candidate", String::new(), Some(p)),
                    Err(e) => ("error", e, None),
                };
                let c = LlmCallRow { generation, parent, outcome: outcome.into(), message, program_text, tokens: answer.tokens as i64 };
                self.db.put_llm_call(&c)?;
                self.llm_calls.insert(generation, c.clone());
                c
            }
        };
        self.summary.llm_calls += 1;
        self.summary.llm_tokens += call.tokens.max(0) as u64;
        match (call.outcome.as_str(), call.program_text) {
            ("candidate", Some(text)) => {
                let hash = sha256_hex(text.as_bytes());
                let params = json!({ "model": self.llm.as_ref().map(|c| c.model.clone()), "tokens": call.tokens });
                Ok(Some((generate::Proposal { text, hash, tactic: "llm".into(), params }, vec![call.parent])))
            }
            _ => Ok(None),
        }
    }

    fn gate_and_rank(&mut self, seq: i64, generation: i64, p: &generate::Proposal, parents: Vec<i64>) -> Result<CandidateRow> {
        let g = gates::run(&p.text, self.contract, &self.rules.set);
        let mut row = CandidateRow {
            seq,
            generation,
            program_hash: p.hash.clone(),
            program_text: p.text.clone(),
            parents,
            tactic: p.tactic.clone(),
            params: p.params.clone(),
            gate: g.gate.as_str().to_string(),
            findings: g.findings_json(),
            predicted_ms: None,
            bottleneck: None,
            cell: None,
            contract_hash: self.contract.hash.clone(),
            compiler_commit: self.commit.clone(),
            created_unix_ms: now_ms(),
        };
        if let Some(v) = &g.validated {
            match rank::predict(v, self.contract) {
                Ok(pr) => {
                    row.predicted_ms = Some(pr.predicted_ms);
                    row.bottleneck = Some(pr.bottleneck.clone());
                    row.cell = Some(pr.cell.clone());
                    if let Some(o) = row.findings.as_object_mut() {
                        o.insert("cost".into(), json!({ "hints": pr.hints, "smem_bytes": pr.smem_bytes, "threads": pr.threads }));
                    }
                }
                Err((code, msg)) => {
                    row.gate = "cost".into();
                    if let Some(o) = row.findings.as_object_mut() {
                        o.insert("cost_error".into(), json!({ "code": code, "message": msg }));
                    }
                }
            }
        }
        // Stage 5 for gate rejections: findings into the evidence store.
        if let Some(r) = &self.router {
            r.gate_rejection(&p.text, &self.contract.file.target, &g)?;
        }
        Ok(row)
    }

    /// Evaluate `seqs` on the GPU workers: each worker takes the next candidate, on its own GPU,
    /// and this thread routes and commits each evaluation as it finishes (one transaction each, so
    /// a kill loses only the evaluations in flight, which `resume` makes again). A candidate whose
    /// `cake` child died (a signal, not its wall limit) is tried once more on another worker; dying
    /// again, it is an `error` (the harness's, never the candidate's failure).
    fn evaluate_batch(&mut self, seqs: &[i64]) -> Result<BTreeMap<i64, EvaluationRow>> {
        let Loop { evaluator, db, router, evaluations, texts, summary, commit, gpus, .. } = self;
        let evaluator = evaluator.as_ref().expect("live modes have an evaluator");
        let best_passed = evaluations.values().filter(|e| e.status == "passed").filter_map(|e| e.headline_ms).min_by(|a, b| a.total_cmp(b));
        let workers: Vec<Option<&str>> = if gpus.is_empty() { vec![None] } else { gpus.iter().map(|g| Some(g.as_str())).collect() };
        let jobs: Vec<(i64, String, String)> = seqs
            .iter()
            .map(|seq| {
                let text = texts.get(seq).cloned().unwrap_or_default();
                let hash = sha256_hex(text.as_bytes());
                (*seq, text, hash)
            })
            .collect();
        let queue = std::sync::Mutex::new(jobs.iter().map(|j| (j, 0u8)).collect::<std::collections::VecDeque<_>>());
        let stop = std::sync::atomic::AtomicBool::new(false);
        let (tx, rx) = std::sync::mpsc::channel::<(u8, Result<crate::evaluate::Evaluation>)>();
        let mut done: BTreeMap<i64, EvaluationRow> = BTreeMap::new();
        let mut failure: Option<KevoError> = None;
        let mut record = |tries: u8, ev: Result<crate::evaluate::Evaluation>| -> Result<()> {
            let mut ev = ev?;
            if ev.died {
                ev.row.status = "error".into();
                if let Some(notes) = ev.row.verdicts.get_mut("notes").and_then(|n| n.as_array_mut()) {
                    notes.push(json!(format!("the `cake` child died (a signal) {} time(s): the harness's trouble, not the candidate's", tries + 1)));
                }
            }
            let text = texts.get(&ev.row.seq).cloned().unwrap_or_default();
            // Route before committing: a kill in between routes again on resume (idempotent).
            if let Some(r) = router.as_ref() {
                r.gpu_records(&text, &ev.record_files)?;
            }
            db.put_evaluation(&ev.row)?;
            evaluations.insert(ev.row.seq, ev.row.clone());
            summary.new_evaluations += 1;
            done.insert(ev.row.seq, ev.row);
            Ok(())
        };
        std::thread::scope(|scope| {
            let n = workers.len();
            for gpu in &workers {
                let (queue, stop, tx, commit) = (&queue, &stop, tx.clone(), &*commit);
                scope.spawn(move || loop {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let Some((job, tries)) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front() else { break };
                    let (seq, text, hash) = job;
                    let ev = evaluator.evaluate(*seq, text, hash, commit, best_passed, *gpu);
                    if matches!(&ev, Ok(e) if e.died && tries == 0 && n > 1) {
                        // This GPU's worker stops for the generation; a live one takes the candidate.
                        queue.lock().unwrap_or_else(|e| e.into_inner()).push_back((job, 1));
                        break;
                    }
                    if tx.send((tries, ev)).is_err() {
                        break;
                    }
                });
            }
            drop(tx);
            for (tries, ev) in rx {
                if failure.is_none() {
                    if let Err(e) = record(tries, ev) {
                        failure = Some(e);
                        stop.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }
        });
        if let Some(e) = failure {
            return Err(e);
        }
        // Jobs left in the queue had no live worker (every GPU's died): evaluate them here.
        for (job, tries) in queue.into_inner().unwrap_or_else(|e| e.into_inner()) {
            let (seq, text, hash) = job;
            record(tries, evaluator.evaluate(*seq, text, hash, commit, best_passed, workers[0]))?;
        }
        Ok(done)
    }
}

/// The code a candidate was rejected with: its first error finding's, the cost model's, or the
/// gate's name (a shape rejection).
fn rejection_code(row: &CandidateRow) -> String {
    let first_error = row.findings["diagnostics"].as_array().and_then(|ds| ds.iter().find(|d| d["severity"] == "error")).and_then(|d| d["code"].as_str());
    let cost = row.findings["cost_error"]["code"].as_str();
    first_error.or(cost).unwrap_or(&row.gate).to_string()
}

/// A rule set's identity: its codes and predicates. Two sets with the same fingerprint judge
/// every program alike, whatever directory they were read from.
pub fn rules_fingerprint(set: &cake::verify::RuleSet) -> String {
    let mut text = String::new();
    for r in set.rules() {
        text.push_str(&format!("{} {:?} {:?} {:?}\n", r.code, r.applies_to, r.when, r.require));
    }
    sha256_hex(text.as_bytes())
}

/// The directory the GPU stage's `cake` calls are given as `--rules`, so they verify as the gates
/// did; `None` for the embedded set (the child then runs in the same directory, outside a checkout).
fn rules_dir(rules: &ActiveRules) -> Option<PathBuf> {
    let dir = match &rules.origin {
        RulesOrigin::Flag(d) => d.clone(),
        RulesOrigin::Checkout(root) => root.join("compiler/rules"),
        RulesOrigin::Embedded => return None,
    };
    Some(std::fs::canonicalize(&dir).unwrap_or(dir))
}

fn short(h: &str) -> &str {
    &h[..h.len().min(12)]
}
