//! The review queue (`proposals/<id>.toml`, one record per proposal) and `propose`, which fills
//! it: mine → propose → gate → queue, in one command.
//!
//! # Records
//! ```toml
//! id = "r-5f2c9a1e"                 # r- rule, p- primitive, c- calibration, a- analysis; from kind + bucket + predicate (or op)
//! kind = "rule"                     # rule | primitive | calibration | analysis
//! status = "queued"                 # queued | accepted | rejected
//! title = "V600 tma-load-dst-bytes-at-most-16384"
//! branch = "evolve/rule/r-5f2c9a1e-tma-load-dst-bytes-at-most-16384"
//! base = "<commit the branch starts from>"
//! commit = "<the proposal commit>"
//! bucket = "<mined bucket id>"
//! signature = "run/CUDA_ERROR_ILLEGAL_ADDRESS: ..."
//! construct = "call:tma_load"
//! evidence = ["<record id>", ...]   # the evidence the proposal was made from
//! programs = ["<program sha256>", ...]
//! seed = 0
//! changelog = "- Evolved verifier rule V600 ..."
//! gates_passed = true
//! created_by = "cake-evolve-compiler 0.1.0"
//! [rule]                            # or [primitive] / [calibration] / [analysis]: what was synthesized
//! [[gates]]                         # one per gate: gate, title, status, summary, details
//! [review]                          # after accept / reject: action, note, main, merged, evidence
//! [[history]]                       # earlier reviews (a rejected bucket proposed again)
//! ```
//!
//! # `propose`
//! Idempotent: the same evidence gives the same proposals (ids from kind + bucket, and for a rule
//! its predicate, so two different predicates never share an id; commits made
//! with a fixed identity and the base commit's time, so even the commit ids repeat), and a bucket
//! that already has a queued or accepted proposal is skipped. A rejected bucket is skipped
//! unless it has evidence ids the rejection did not see. Deterministic under `--seed` (the seed
//! breaks ties in the rule search). Resumable: the run's plan and each bucket's progress are kept
//! in `.git/cake-evolve/propose-state.json`; a re-run with the same evidence, base and seed skips
//! what is done.

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use cake_merge_gates::GateOptions;
use git2::{Oid, Repository};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::calibrate::{CalibrationDraft, Measurement};
use crate::microbench::{SavedRun, Suite, RUN_SCHEMA};
use crate::gate::Gater;
use crate::git;
use crate::llm::{self, LlmConfig};
use crate::lock::{self, QueueLock};
use crate::mine::{self, Bucket};
use crate::store::{EvidenceStore, Stage};
use crate::synth::{self, Base, BucketInfo, Program};
use crate::{durable, sanitize};

// ─── Records ─────────────────────────────────────────────────────────────────────────────────────

// The record type and its load / save live in `records.rs`; re-exported for the callers of
// `queue::`.
pub use crate::records::{find, is_valid_id, load, load_all, proposal_id, publish, queue_dir, rebuild, record_path, save, scan, Kind, QueueError, QueueScan, Rebuilt, Record, Review, Status};

// ─── propose ─────────────────────────────────────────────────────────────────────────────────────

/// What `propose` runs with.
#[derive(Clone)]
pub struct ProposeOptions {
    /// A path inside the repository.
    pub repo: PathBuf,
    /// The evidence store.
    pub evidence: PathBuf,
    pub seed: u64,
    /// The main branch (default: main, else master, else HEAD's branch).
    pub main: Option<String>,
    pub gate: GateOptions,
    /// Run the gates (on by default).
    pub run_gates: bool,
    /// Propose at most this many (new) proposals.
    pub limit: Option<usize>,
    /// An unknown op must recur in this many programs to be proposed as a primitive.
    pub min_programs: usize,
    pub llm: Option<LlmConfig>,
    /// Draw a progress bar (when stderr is a terminal) or print plain lines.
    pub progress: bool,
    /// Plain progress lines go here too (tests collect them).
    pub quiet: bool,
    /// Print the warnings of mining the evidence (off when a `mine` of the same store has just
    /// printed them, as the main job does).
    pub mine_warnings: bool,
    /// How long to wait for another run's queue lock (`--lock-timeout`).
    pub lock_timeout: std::time::Duration,
    /// An evidence store of labelled boundary variants (`--labels`): run records of the
    /// variants `synth::variants` makes of each failing program, looked up by program hash.
    pub labels: Option<PathBuf>,
    /// Where a misprediction bucket's implicated term gets its microbenchmark times
    /// (`--term-benches`; default here: the bucket's runs only).
    pub term_benches: crate::term_refit::TermBenches,
}

impl ProposeOptions {
    pub fn new(repo: impl Into<PathBuf>, evidence: impl Into<PathBuf>) -> ProposeOptions {
        ProposeOptions {
            repo: repo.into(),
            evidence: evidence.into(),
            seed: 0,
            main: None,
            gate: GateOptions::default(),
            run_gates: true,
            limit: None,
            min_programs: 2,
            llm: LlmConfig::from_env(),
            progress: true,
            quiet: false,
            mine_warnings: true,
            lock_timeout: lock::DEFAULT_TIMEOUT,
            labels: None,
            term_benches: Default::default(),
        }
    }
}

/// What happened to one bucket.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub bucket: String,
    /// `proposed`, `unchanged`, `skipped`, `resumed`.
    pub what: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposal: Option<String>,
    pub detail: String,
}

/// The result of one `propose` run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProposeSummary {
    pub base: String,
    pub main: String,
    pub buckets: usize,
    pub outcomes: Vec<Outcome>,
    /// Coded warnings and notes: unreadable records skipped, records re-created from branches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl ProposeSummary {
    /// Ids of the proposals this run created or updated.
    pub fn proposed(&self) -> Vec<String> {
        self.outcomes.iter().filter(|o| o.what == "proposed").filter_map(|o| o.proposal.clone()).collect()
    }
}

/// The run's progress file (`.git/cake-evolve/propose-state.json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub base: String,
    pub seed: u64,
    /// SHA-256 over the buckets' ids and evidence ids: the evidence this plan is for.
    pub evidence: String,
    /// Bucket ids in the order they are handled.
    pub plan: Vec<String>,
    /// Outcomes of the buckets done so far.
    pub done: BTreeMap<String, Outcome>,
}

fn state_path(repo: &Repository) -> PathBuf {
    repo.path().join("cake-evolve").join("propose-state.json")
}

fn load_state(repo: &Repository) -> Option<State> {
    std::fs::read_to_string(state_path(repo)).ok().and_then(|t| serde_json::from_str(&t).ok())
}

fn save_state(repo: &Repository, s: &State) -> Result<(), String> {
    let p = state_path(repo);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    let text = serde_json::to_string_pretty(s).map_err(|e| e.to_string())?;
    // A crash never leaves half a state file.
    durable::write_atomic(&p, text.as_bytes()).map_err(|e| format!("{}: {e}", p.display()))
}

fn fingerprint(buckets: &[Bucket]) -> String {
    let mut h = Sha256::new();
    for b in buckets {
        h.update(b.id.as_bytes());
        for e in &b.evidence_ids {
            h.update(e.as_bytes());
        }
        h.update(b"\n");
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// How `propose` reports progress: a bar on a terminal, plain lines elsewhere.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    quiet: bool,
    total: usize,
    n: usize,
}

impl Progress {
    fn new(total: usize, fancy: bool, quiet: bool) -> Progress {
        let bar = (fancy && !quiet && std::io::stderr().is_terminal()).then(|| {
            let b = indicatif::ProgressBar::with_draw_target(Some(total as u64), indicatif::ProgressDrawTarget::stderr());
            if let Ok(s) = indicatif::ProgressStyle::with_template("{prefix:>8} [{bar:30}] {pos}/{len} {wide_msg}") {
                b.set_style(s.progress_chars("=> "));
            }
            b.set_prefix("propose");
            b
        });
        Progress { bar, quiet, total, n: 0 }
    }
    fn step(&mut self, msg: &str) {
        match &self.bar {
            Some(b) => b.set_message(sanitize::line(msg)),
            None if !self.quiet => eprintln!("[{}/{}] {}", self.n + 1, self.total, sanitize::line(msg)),
            None => {}
        }
    }
    fn done(&mut self, o: &Outcome) {
        self.n += 1;
        let line = sanitize::line(&format!("bucket {}: {}{} — {}", o.bucket, o.what, o.proposal.as_ref().map(|p| format!(" {p}")).unwrap_or_default(), o.detail));
        match &self.bar {
            Some(b) => {
                b.println(line);
                b.inc(1);
            }
            None if !self.quiet => eprintln!("[{}/{}] {line}", self.n, self.total),
            None => {}
        }
    }
    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// The mined bucket as the synthesizer sees it.
pub fn bucket_info(b: &Bucket) -> BucketInfo {
    let construct = if b.construct_kind.is_empty() {
        None
    } else if b.op.is_empty() {
        Some(b.construct_kind.clone())
    } else {
        Some(format!("{}:{}", b.construct_kind, b.op))
    };
    BucketInfo {
        id: b.id.clone(),
        signature: b.signature.clone(),
        construct,
        op: (!b.op.is_empty()).then(|| b.op.clone()),
        evidence_ids: b.evidence_ids.clone(),
        program_hashes: b.program_hashes.clone(),
        count: b.count,
        score: b.score,
    }
}

/// What a bucket calls for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    Rule,
    /// Unknown ops (E0301) in the bucket's programs.
    Primitive,
    Calibration,
    Skip(String),
}

pub fn plan_for(b: &Bucket) -> Plan {
    let unknown_op = b.class.contains("E0301") || b.signature.to_ascii_lowercase().contains("unknown operation");
    if unknown_op {
        return Plan::Primitive;
    }
    let ratio = b.signature.contains("predicted") || b.class.contains("ratio") || b.class.contains("mispredict");
    if ratio {
        return Plan::Calibration;
    }
    if b.is_stale() {
        return Plan::Skip(format!(
            "stale: the current compiler lowers and compiles every program of the bucket ({}): the recorded build failure no longer reproduces, nothing to learn",
            b.stale_programs.iter().map(|p| synth::short(p)).collect::<Vec<_>>().join(", ")
        ));
    }
    if b.stage == Stage::Verify {
        return Plan::Skip("the verifier already rejects these programs: nothing to add".into());
    }
    if b.program_hashes.len() == b.verifier.rejected && b.verifier.rejected > 0 {
        return Plan::Skip(format!("the verifier already rejects every program of the bucket ({})", b.verifier.codes.join(", ")));
    }
    Plan::Rule
}

/// The id of a rule proposal: its bucket and its predicate (construct, guard, requirement), so
/// two proposals with different predicates never share an id (nor a record or a branch), while
/// the same evidence on the same base still gives the same id.
pub fn rule_proposal_id(bucket: &str, applies_to: &str, when: Option<&str>, require: &str) -> String {
    proposal_id(Kind::Rule, &format!("{bucket}\n{applies_to}\nwhen {}\nrequire {require}", when.unwrap_or("")))
}

/// The record that decides what happens to a bucket: its accepted proposal, else its queued
/// one, else the rejected one (records of one bucket differ by predicate).
fn bucket_record<'a>(records: &'a BTreeMap<String, Record>, kind: Kind, bucket: &str) -> Option<&'a Record> {
    let of = |s: Status| records.values().filter(move |r| r.kind == kind && r.bucket == bucket && r.status == s);
    // Of accepted ones, the rule in force: the one no accepted proposal widened.
    let widened: BTreeSet<&str> = of(Status::Accepted).filter_map(|r| r.widens.as_deref()).collect();
    of(Status::Accepted).filter(|r| !widened.contains(r.id.as_str())).last().or_else(|| of(Status::Queued).last()).or_else(|| of(Status::Rejected).last())
}

/// Whether an existing record for this key means "leave the bucket alone", and why.
fn settled(existing: Option<&Record>, evidence: &[String]) -> Option<String> {
    let r = existing?;
    match r.status {
        Status::Accepted => Some(format!("accepted as {} ({})", r.id, r.review.as_ref().and_then(|v| v.merged.clone()).map(|m| format!("merged {}", synth::short(&m))).unwrap_or_default())),
        Status::Rejected => {
            let seen: BTreeSet<&String> = r.review.as_ref().map(|v| v.evidence.iter().collect()).unwrap_or_default();
            let new: Vec<&String> = evidence.iter().filter(|e| !seen.contains(e)).collect();
            if new.is_empty() {
                Some(format!("rejected as {}: {} (no evidence since)", r.id, r.review.as_ref().map(|v| v.note.as_str()).unwrap_or("")))
            } else {
                None
            }
        }
        Status::Queued => {
            let same: BTreeSet<&String> = r.evidence.iter().collect();
            let now: BTreeSet<&String> = evidence.iter().collect();
            (same == now && r.gates_passed.is_some()).then(|| format!("already queued as {}", r.id))
        }
    }
}

/// mine → propose → gate → queue.
pub fn propose(opts: &ProposeOptions) -> Result<ProposeSummary, String> {
    let repo = git::open(&opts.repo)?;
    let workdir = git::workdir(&repo)?;
    let qdir = queue_dir(&workdir);
    let main = git::main_branch(&repo, opts.main.as_deref())?;
    let base = git::branch_commit(&repo, &main)?;
    let store = EvidenceStore::open_existing(&opts.evidence).map_err(|e| e.to_string())?;
    // Everything below reads and writes the queue, the state and the rule codes: one run at a time.
    let _lock = QueueLock::acquire(&repo, "propose", opts.lock_timeout)?;
    // Judge the evidence with the rules of the checkout being evolved, not the ones built in.
    let fe = cake_merge_gates::corpus_gate::frontend_for(&cake_merge_gates::Tree::new(&workdir)).map_err(|e| format!("the checkout's compiler data at {} does not load: {e}", workdir.display()))?;
    let report = mine::mine_report_with(&store, &fe);
    if !opts.quiet && opts.mine_warnings {
        for w in &report.warnings {
            eprintln!("{}", sanitize::line(w));
        }
    }
    // Text from failure reports reaches rule files, commits and terminals: escaped once here.
    let buckets: Vec<Bucket> = report.buckets.into_iter().map(sanitized_bucket).collect();
    let mut warnings = Vec::new();
    // Records lost from the folder (`git clean`) come back from the branches that carry them.
    let rebuilt = rebuild(&repo, &qdir)?;
    for id in &rebuilt.restored {
        warnings.push(format!("note[Q008]: the record of {id} was missing or unreadable in {}: re-created from its branch", qdir.display()));
    }
    let scanned = scan(&qdir);
    warnings.extend(scanned.warnings());
    if !opts.quiet {
        for w in &warnings {
            eprintln!("{w}");
        }
    }
    let mut records: BTreeMap<String, Record> = scanned.records.into_iter().map(|r| (r.id.clone(), r)).collect();

    // Resume: the same evidence, base and seed continue the plan where it stopped — but only
    // what still exists: a bucket whose proposal has no record or no branch any more is redone.
    let fp = fingerprint(&buckets);
    let mut state = match load_state(&repo) {
        Some(s) if s.base == base.to_string() && s.seed == opts.seed && s.evidence == fp => s,
        _ => State { base: base.to_string(), seed: opts.seed, evidence: fp, plan: buckets.iter().map(|b| b.id.clone()).collect(), done: BTreeMap::new() },
    };
    state.done.retain(|_, o| match (&o.proposal, o.what.as_str()) {
        (Some(id), "proposed") => records.get(id).is_some_and(|r| git::branch_target(&repo, &r.branch).is_some()),
        _ => true,
    });

    // The labels of boundary variants: the runs of the evidence and of the label store, read once.
    let mut labels = synth::variants::LabelIndex::of(&store);
    if let Some(dir) = &opts.labels {
        let extra = EvidenceStore::open_existing(dir).map_err(|e| format!("the label store {}: {e}", dir.display()))?;
        labels.extend(synth::variants::LabelIndex::of(&extra));
    }
    let mut gater = Gater::new(opts.gate.clone(), &repo)?;
    let base_dir = gater.checkout(&repo, base)?;
    let base_data = Base::load(&base_dir)?;
    let base_changelog = git::read_text(&repo, base, "CHANGELOG.md")?.unwrap_or_else(|| "# Changelog\n".into());
    let mut taken: BTreeSet<String> = records.values().filter(|r| r.status != Status::Rejected).filter_map(|r| r.rule.as_ref().map(|d| d.code.clone())).collect();

    let mut summary = ProposeSummary { base: base.to_string(), main: main.clone(), buckets: buckets.len(), outcomes: Vec::new(), warnings };
    let mut progress = Progress::new(buckets.len(), opts.progress, opts.quiet);
    let mut made = 0usize;
    for b in &buckets {
        if let Some(o) = state.done.get(&b.id) {
            let mut o = o.clone();
            if o.what == "proposed" {
                o.what = "resumed".into();
                o.detail = format!("done in an earlier run: {}", o.detail);
            }
            progress.done(&o);
            summary.outcomes.push(o);
            continue;
        }
        if opts.limit.is_some_and(|l| made >= l) {
            let o = Outcome { bucket: b.id.clone(), what: "skipped".into(), proposal: None, detail: "the --limit was reached".into() };
            progress.done(&o);
            summary.outcomes.push(o);
            continue;
        }
        progress.step(&format!("bucket {} ({} programs): {}", b.id, b.program_hashes.len(), one_line(&b.signature, 60)));
        let outcomes = match plan_for(b) {
            Plan::Skip(why) => vec![Outcome { bucket: b.id.clone(), what: "skipped".into(), proposal: None, detail: why }],
            Plan::Calibration => propose_store_calibration(&repo, &mut gater, opts, &qdir, base, b, &store, &mut records)?,
            Plan::Rule => vec![propose_rule(&repo, &mut gater, opts, &qdir, base, &base_data, &base_changelog, b, &store, &labels, &mut records, &mut taken)?],
            Plan::Primitive => propose_primitives(&repo, &mut gater, opts, &qdir, base, &base_changelog, b, &store, &mut records)?,
        };
        for o in outcomes {
            if o.what == "proposed" {
                made += 1;
            }
            progress.done(&o);
            state.done.insert(o.bucket.clone(), o.clone());
            summary.outcomes.push(o);
        }
        save_state(&repo, &state)?;
    }
    progress.finish();
    Ok(summary)
}

/// A mined bucket with its external text escaped and bounded ([`sanitize`]): what the rule
/// files, commits and records are made from.
fn sanitized_bucket(mut b: Bucket) -> Bucket {
    b.signature = sanitize::line_bounded(&b.signature, 1000);
    b.class = sanitize::line(&b.class);
    b.construct_kind = sanitize::line(&b.construct_kind);
    b.op = sanitize::line(&b.op);
    b
}

fn one_line(s: &str, max: usize) -> String {
    let s: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > max {
        format!("{}…", s.chars().take(max).collect::<String>())
    } else {
        s
    }
}

fn programs_of(store: &EvidenceStore, hashes: &[String]) -> (Vec<Program>, Vec<String>) {
    let mut out = Vec::new();
    let mut missing = Vec::new();
    for h in hashes {
        match store.program(h) {
            Ok(Some(source)) => out.push(Program { hash: h.clone(), source }),
            _ => missing.push(h.clone()),
        }
    }
    (out, missing)
}

fn created_by() -> String {
    format!("cake-evolve-compiler {}", env!("CARGO_PKG_VERSION"))
}

/// Queue a new record, then (with `opts.run_gates`) gate its commit and record the results.
/// The record is saved before gating, so an interrupted run keeps the proposal. Returns the
/// gates' one-line summary, or "gates not run".
fn save_and_gate(
    repo: &Repository,
    gater: &mut Gater,
    opts: &ProposeOptions,
    qdir: &Path,
    base: Oid,
    commit: Oid,
    rec: &mut Record,
) -> Result<String, String> {
    publish(repo, qdir, rec)?;
    if !opts.run_gates {
        return Ok("gates not run".into());
    }
    let report = gater.gate_record(repo, base, commit, rec)?;
    rec.gates_passed = Some(report.passed);
    rec.gates = report.gates.clone();
    publish(repo, qdir, rec)?;
    Ok(report.summary_line())
}

#[allow(clippy::too_many_arguments)]
fn propose_rule(
    repo: &Repository,
    gater: &mut Gater,
    opts: &ProposeOptions,
    qdir: &Path,
    base: Oid,
    base_data: &Base,
    base_changelog: &str,
    b: &Bucket,
    store: &EvidenceStore,
    labels: &synth::variants::LabelIndex,
    records: &mut BTreeMap<String, Record>,
    taken: &mut BTreeSet<String>,
) -> Result<Outcome, String> {
    let out = |what: &str, proposal: Option<String>, detail: String| Outcome { bucket: b.id.clone(), what: what.into(), proposal, detail };
    // The id names the predicate too, so the bucket's decided proposal is found by its bucket.
    let decided = bucket_record(records, Kind::Rule, &b.id).cloned();
    // Programs that build today are stale evidence: they teach the rule nothing.
    let mut info = bucket_info(b);
    info.program_hashes.retain(|p| !b.stale_programs.contains(p));
    let (programs, missing) = programs_of(store, &info.program_hashes);
    // An accepted bucket is reopened only to widen its rule: evidence since shows programs the
    // rule misses (widen.rs).
    let accepted = decided.clone().filter(|r| r.status == Status::Accepted).and_then(|r| r.rule.as_ref().map(|d| d.code.clone()).map(|c| (r, c)));
    let widening = match &accepted {
        Some((acc, code)) => {
            let missed = crate::widen::missed(acc, code, base_data, &programs);
            let prior = records.values().filter(|r| r.widens.as_deref() == Some(acc.id.as_str())).last();
            if let Some(why) = if missed.is_empty() { settled(Some(acc), &b.evidence_ids) } else { settled(prior, &b.evidence_ids) } {
                return Ok(out("unchanged", Some(acc.id.clone()), why));
            }
            let (wbase, old_file) = crate::widen::base_without(base_data, code)?;
            Some((acc.clone(), missed, wbase, old_file))
        }
        None => {
            if let Some(why) = settled(decided.as_ref(), &b.evidence_ids) {
                return Ok(out("unchanged", decided.map(|r| r.id), why));
            }
            None
        }
    };
    if programs.is_empty() {
        return Ok(out("skipped", None, format!("none of the bucket's {} programs is in the store", missing.len())));
    }
    // Keep the code an earlier proposal of this bucket had; else the next free one.
    let code = match decided.as_ref().and_then(|r| r.rule.as_ref()).map(|d| d.code.clone()) {
        Some(c) => c,
        None => synth::next_code(&base_data.codes(), taken).ok_or("no free code left in V600–V699 for evolved rules")?,
    };
    let search_base = widening.as_ref().map_or(base_data, |(_, _, wbase, _)| wbase);
    // Boundary variants of the failing programs, labelled by the runs of the label store and the
    // evidence (or by the lowering when it refuses one); about half are held out for the gate.
    let sources: Vec<&str> = programs.iter().map(|p| p.source.as_str()).collect();
    let variants = synth::variants::for_gate(&synth::variants::labelled_variants(search_base, &sources, labels, synth::variants::PER_PROGRAM, &info));
    let draft = match synth::draft_rule_with(search_base, &info, &programs, &variants, &code, opts.seed) {
        Ok(d) => d,
        // The predicate language cannot express the separation: propose the missing fact, never
        // a near-miss predicate (a widening keeps its accepted rule and is reported skipped).
        Err(e @ (synth::SynthError::NoSeparatingPredicate(_) | synth::SynthError::NoPartialPredicate(_))) if widening.is_none() => {
            return propose_analysis(repo, gater, opts, qdir, base, base_data, base_changelog, b, &info, &programs, &sanitize::line(&e.to_string()), records);
        }
        // Said in the outcome, so a bucket that cannot be learned is never dropped silently.
        Err(e) => return Ok(out("skipped", None, sanitize::line(&format!("cannot become a rule: {e}")))),
    };
    if let Some((acc, missed, _, _)) = &widening {
        if !draft.failing_programs.iter().any(|p| missed.contains(p)) {
            let names = missed.iter().map(|h| synth::short(h)).collect::<Vec<_>>().join(", ");
            return Ok(out("skipped", Some(acc.id.clone()), format!("accepted as {}, whose {code} misses programs {names}; no wider predicate explains them with the programs it catches", acc.id)));
        }
    }
    taken.insert(code.clone());
    let id = rule_proposal_id(&b.id, &draft.applies_to, draft.when.as_deref(), &draft.require);
    let branch = format!("evolve/rule/{id}-{}", sanitize::slug(&draft.name));
    let mut edits: BTreeMap<String, Option<Vec<u8>>> = draft.files.iter().map(|(p, t)| (p.clone(), Some(t.clone().into_bytes()))).collect();
    // The widened rule replaces the accepted one's file.
    if let Some((_, _, _, Some(old))) = &widening {
        if !edits.contains_key(old) {
            edits.insert(old.clone(), None);
        }
    }
    edits.insert("CHANGELOG.md".into(), Some(synth::changelog_insert(base_changelog, &draft.changelog).into_bytes()));
    let explained = if draft.unexplained_programs.is_empty() {
        format!("{} failing programs", draft.failing_programs.len())
    } else {
        format!(
            "explains {} of its {} failing programs; not explained: {}",
            draft.failing_programs.len(),
            draft.failing_programs.len() + draft.unexplained_programs.len(),
            draft.unexplained_programs.iter().map(|h| synth::short(h)).collect::<Vec<_>>().join(", ")
        )
    };
    let message = format!(
        "evolve: verifier rule {} {}\n\nRequire `{}` on every `{}`{}.\nSynthesized by cake-evolve-compiler from evidence bucket {} ({explained}).\nProposal {id}.",
        draft.code,
        draft.name,
        draft.require,
        draft.applies_to,
        draft.when.as_ref().map(|w| format!(" where `{w}`")).unwrap_or_default(),
        b.id,
    );
    let previous = records.get(&id).cloned();
    let commit = git::commit_on_branch(repo, base, &branch, &edits, &message)?;
    let mut notes: Vec<String> = draft
        .skipped_programs
        .iter()
        .map(|s| if s.split(':').next().is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit())) { format!("program {s}") } else { s.clone() })
        .collect();
    notes.extend(missing.iter().map(|m| format!("program {} is not in the evidence store", synth::short(m))));
    if let Some((acc, missed, _, _)) = &widening {
        let old = acc.rule.as_ref().map_or(String::new(), |d| d.require.clone());
        notes.push(format!("widens {}: its rule `{old}` misses {} program(s) of the bucket ({}); this rule replaces it", acc.id, missed.len(), missed.iter().map(|h| synth::short(h)).collect::<Vec<_>>().join(", ")));
    }
    let widens = widening.as_ref().map(|(acc, ..)| acc.id.clone());
    let mut rec = Record {
        id: id.clone(),
        kind: Kind::Rule,
        status: Status::Queued,
        title: match &widens {
            Some(w) => format!("{} {} (widens {w})", draft.code, draft.name),
            None => format!("{} {}", draft.code, draft.name),
        },
        branch,
        base: base.to_string(),
        commit: commit.to_string(),
        bucket: b.id.clone(),
        signature: b.signature.clone(),
        construct: draft.applies_to.clone(),
        evidence: b.evidence_ids.clone(),
        programs: b.program_hashes.clone(),
        seed: opts.seed,
        changelog: draft.changelog.clone(),
        gates_passed: None,
        created_by: created_by(),
        widens,
        notes,
        rule: Some(draft.clone()),
        primitive: None,
        calibration: None,
        analysis: None,
        gates: Vec::new(),
        review: None,
        history: previous.map(|p| p.history.into_iter().chain(p.review).collect()).unwrap_or_default(),
    };
    let gates = save_and_gate(repo, gater, opts, qdir, base, commit, &mut rec)?;
    let detail = format!("{} requires `{}` on `{}`; {gates}", draft.code, draft.require, draft.applies_to);
    records.insert(id.clone(), rec);
    // New evidence gave the bucket another predicate: the old queued proposal (same code) is
    // withdrawn, so the queue never offers two rules with one code.
    if let Some(mut old) = decided.filter(|r| r.status == Status::Queued && r.id != id) {
        old.status = Status::Rejected;
        old.review = Some(crate::records::Review {
            action: Status::Rejected,
            note: format!("superseded by {id}: evidence since gave the bucket the predicate `{}`", draft.require),
            main: base.to_string(),
            merged: None,
            how: None,
            evidence: old.evidence.clone(),
            gates: Vec::new(),
        });
        publish(repo, qdir, &old)?;
        records.insert(old.id.clone(), old);
    }
    Ok(out("proposed", Some(id), detail))
}

/// A bucket no predicate over today's facts separates: a proposal for the missing fact
/// (`synth::analysis`) on `evolve/analysis/<id>-<fact>`, queued with the gates that say why it
/// cannot be accepted yet (`analysis`, and `data-only` for its Rust).
#[allow(clippy::too_many_arguments)]
fn propose_analysis(
    repo: &Repository,
    gater: &mut Gater,
    opts: &ProposeOptions,
    qdir: &Path,
    base: Oid,
    base_data: &Base,
    base_changelog: &str,
    b: &Bucket,
    info: &BucketInfo,
    programs: &[Program],
    why: &str,
    records: &mut BTreeMap<String, Record>,
) -> Result<Outcome, String> {
    let id = proposal_id(Kind::Analysis, &b.id);
    let out = |what: &str, proposal: Option<String>, detail: String| Outcome { bucket: b.id.clone(), what: what.into(), proposal, detail };
    if let Some(why) = settled(bucket_record(records, Kind::Analysis, &b.id), &b.evidence_ids) {
        return Ok(out("unchanged", Some(id), why));
    }
    let mut draft = match synth::draft_analysis(base_data, info, programs, why, &id) {
        Ok(d) => d,
        Err(e) => return Ok(out("skipped", None, sanitize::line(&format!("cannot become a rule: {why}; nor a proposal for a fact: {e}")))),
    };
    let mut notes = vec![format!("not a rule: {why}")];
    if let Some(cfg) = &opts.llm {
        let sources: Vec<&str> = programs.iter().filter(|p| draft.failing_programs.contains(&p.hash)).map(|p| p.source.as_str()).collect();
        match synth::analysis::llm_draft(cfg, &draft, &sources) {
            Ok(rust) => {
                // LLM output is external text: escaped and bounded before it is committed.
                let path = format!("compiler/src/verify/evolved/{}-llm.rs", draft.fact);
                let text = format!("// The analysis `{}`, drafted by an LLM for proposal {id}. Not wired in, not built: review it against the skeleton's test.\n\n{}", draft.fact, sanitize::text_bounded(&rust, 64 * 1024));
                draft.files.push((path, text));
                notes.push(format!("analysis drafted by the LLM at {} (model {}): review it", cfg.base_url, cfg.model));
            }
            Err(e) => notes.push(sanitize::line(&format!("LLM drafting failed: {e}"))),
        }
    } else {
        notes.push(format!("no LLM configured ({} unset): the analysis is left for a person", llm::ENV_BASE_URL));
    }
    let mut edits: BTreeMap<String, Option<Vec<u8>>> = draft.files.iter().map(|(p, t)| (p.clone(), Some(t.clone().into_bytes()))).collect();
    let changelog = format!(
        "- Proposed verifier fact `{}` of `{}` (a draft analysis, not a rule): no predicate over today's facts separates the {} failing programs of evidence bucket {}.",
        draft.fact,
        draft.construct,
        draft.failing_programs.len(),
        b.id
    );
    edits.insert("CHANGELOG.md".into(), Some(synth::changelog_insert(base_changelog, &changelog).into_bytes()));
    let branch = format!("evolve/analysis/{id}-{}", sanitize::slug(&draft.fact.replace('_', "-")));
    let message = format!(
        "evolve: proposal for the verifier fact `{}` of `{}`\n\nNo predicate over today's facts separates the {} failing programs of evidence bucket {} ({why}).\nA draft for a person: the missing quantity, the programs it must separate, a skeleton analysis and test.\nProposal {id}.",
        draft.fact,
        draft.construct,
        draft.failing_programs.len(),
        b.id
    );
    let commit = git::commit_on_branch(repo, base, &branch, &edits, &message)?;
    let previous = records.get(&id).cloned();
    let mut rec = Record {
        id: id.clone(),
        kind: Kind::Analysis,
        status: Status::Queued,
        title: format!("fact {} of {}", draft.fact, draft.construct),
        branch,
        base: base.to_string(),
        commit: commit.to_string(),
        bucket: b.id.clone(),
        signature: b.signature.clone(),
        construct: draft.construct.clone(),
        evidence: b.evidence_ids.clone(),
        programs: b.program_hashes.clone(),
        seed: opts.seed,
        changelog,
        gates_passed: None,
        created_by: created_by(),
        widens: None,
        notes,
        rule: None,
        primitive: None,
        calibration: None,
        analysis: Some(draft.clone()),
        gates: Vec::new(),
        review: None,
        history: previous.map(|p| p.history.into_iter().chain(p.review).collect()).unwrap_or_default(),
    };
    let gates = save_and_gate(repo, gater, opts, qdir, base, commit, &mut rec)?;
    records.insert(id.clone(), rec);
    Ok(out("proposed", Some(id), format!("no rule ({why}); proposes the fact `{}` of `{}`; {gates}", draft.fact, draft.construct)))
}

/// The unknown ops (E0301) a program calls.
fn unknown_ops(source: &str) -> BTreeSet<String> {
    let out = cake::check::check_source(source);
    out.diagnostics.iter().filter(|d| d.code == "E0301").filter_map(|d| synth::unknown_op(&d.message)).collect()
}

#[allow(clippy::too_many_arguments)]
fn propose_primitives(
    repo: &Repository,
    gater: &mut Gater,
    opts: &ProposeOptions,
    qdir: &Path,
    base: Oid,
    base_changelog: &str,
    b: &Bucket,
    store: &EvidenceStore,
    records: &mut BTreeMap<String, Record>,
) -> Result<Vec<Outcome>, String> {
    let (programs, _) = programs_of(store, &b.program_hashes);
    let mut by_op: BTreeMap<String, Vec<Program>> = BTreeMap::new();
    for p in &programs {
        for op in unknown_ops(&p.source) {
            by_op.entry(op).or_default().push(p.clone());
        }
    }
    let mut outcomes = Vec::new();
    if by_op.is_empty() {
        outcomes.push(Outcome { bucket: b.id.clone(), what: "skipped".into(), proposal: None, detail: "no program of the bucket calls an unknown op today".into() });
    }
    for (op, progs) in by_op {
        let id = proposal_id(Kind::Primitive, &op);
        let out = |what: &str, detail: String| Outcome { bucket: b.id.clone(), what: what.into(), proposal: Some(id.clone()), detail };
        if progs.len() < opts.min_programs {
            outcomes.push(Outcome { bucket: b.id.clone(), what: "skipped".into(), proposal: None, detail: format!("`{op}` is called by {} program(s); a primitive needs {}", progs.len(), opts.min_programs) });
            continue;
        }
        if cake::catalog::Catalog::builtin().get(&op).is_some() {
            continue;
        }
        let evidence = b.evidence_ids.clone();
        if let Some(why) = settled(records.get(&id), &evidence) {
            outcomes.push(out("unchanged", why));
            continue;
        }
        let mut notes = Vec::new();
        let first = synth::draft_primitive(&op, &progs, None, None)?;
        let mut draft = first.clone();
        let mut rust: Option<String> = None;
        if let Some(cfg) = &opts.llm {
            let sites: Vec<String> = progs.iter().flat_map(|p| p.source.lines().filter(|l| l.contains(&format!("{op}("))).map(|l| l.trim().to_string()).collect::<Vec<_>>()).collect();
            match llm::draft(cfg, &op, &first.entry, &sites) {
                Ok(d) => {
                    // LLM output is external text: escaped and bounded before it is committed.
                    draft = synth::draft_primitive(&op, &progs, Some(sanitize::text_bounded(&d.hardware, 4000)), Some(sanitize::text_bounded(&d.lowering, 4000)))?;
                    if !d.rust.trim().is_empty() {
                        rust = Some(sanitize::text_bounded(&d.rust, 64 * 1024));
                    }
                    notes.push(format!("hardware and lowering notes drafted by the LLM at {} (model {}): review them", cfg.base_url, cfg.model));
                }
                Err(e) => notes.push(sanitize::line(&format!("LLM drafting failed: {e}"))),
            }
        } else {
            notes.push(format!("no LLM configured ({} unset): hardware note and lowering left for a person", llm::ENV_BASE_URL));
        }
        let catalog_file = git::read_text(repo, base, &draft.file)?.unwrap_or_default();
        let mut edits: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
        edits.insert(draft.file.clone(), Some(format!("{}{}", catalog_file, draft.entry).into_bytes()));
        if let Some(code) = &rust {
            edits.insert(
                format!("compiler/src/lower/evolved/{op}.rs"),
                Some(format!("// Lowering of `{op}`, drafted by an LLM for proposal {id}. Not wired in, not built: review, integrate into\n// compiler/src/lower/mod.rs, and test it before merging.\n\n{code}\n").into_bytes()),
            );
        }
        let changelog = format!("- Evolved primitive `{op}` ({} op, {}): drafted from {} programs that called it (evidence bucket {}).", draft.class, draft.form, progs.len(), b.id);
        edits.insert("CHANGELOG.md".into(), Some(synth::changelog_insert(base_changelog, &changelog).into_bytes()));
        let branch = format!("evolve/primitive/{id}-{}", sanitize::slug(&op.replace('_', "-")));
        let message = format!("evolve: primitive `{op}`\n\nA catalog entry drafted from {} call sites in {} programs (evidence bucket {}).\nProposal {id}.", draft.call_sites, progs.len(), b.id);
        let commit = git::commit_on_branch(repo, base, &branch, &edits, &message)?;
        let previous = records.get(&id).cloned();
        let mut rec = Record {
            id: id.clone(),
            kind: Kind::Primitive,
            status: Status::Queued,
            title: format!("primitive {op}"),
            branch,
            base: base.to_string(),
            commit: commit.to_string(),
            bucket: b.id.clone(),
            signature: b.signature.clone(),
            construct: format!("call:{op}"),
            evidence,
            programs: progs.iter().map(|p| p.hash.clone()).collect(),
            seed: opts.seed,
            changelog,
            gates_passed: None,
            created_by: created_by(),
            widens: None,
            notes,
            rule: None,
            primitive: Some(draft.clone()),
            calibration: None,
            analysis: None,
            gates: Vec::new(),
            review: None,
            history: previous.map(|p| p.history.into_iter().chain(p.review).collect()).unwrap_or_default(),
        };
        let gates = save_and_gate(repo, gater, opts, qdir, base, commit, &mut rec)?;
        let detail = format!("catalog entry for `{op}`; {gates}");
        records.insert(id.clone(), rec);
        outcomes.push(out("proposed", detail));
    }
    Ok(outcomes)
}

/// What a calibration proposal commits besides the calibration file, and how it is labelled.
struct CalibrationChange<'a> {
    target: &'a str,
    draft: CalibrationDraft,
    new_text: String,
    /// Identifies the measurement set (the proposal id derives from it).
    key: String,
    /// Measurement names: the record's evidence.
    evidence: Vec<String>,
    /// Extra files committed with the calibration (the measurement run).
    files: Vec<(String, Vec<u8>)>,
    /// Bucket and signature for the record.
    bucket: Option<String>,
    signature: String,
    changelog: String,
    title: String,
}

/// Commit a calibration change on `evolve/calibration/<id>-<target>`, gate it and queue it.
fn queue_calibration(repo: &Repository, gater: &mut Gater, qdir: &Path, base: Oid, c: CalibrationChange<'_>, run_gates: bool) -> Result<Record, String> {
    let id = proposal_id(Kind::Calibration, &format!("{}\n{}", c.target, c.key));
    // The same measurements, already decided: never overwrite the decision.
    if let Ok((_, old)) = find(qdir, &id) {
        if old.id == id && old.status != Status::Queued {
            return Err(format!(
                "the same measurements were fitted before and {} as {id}{}: nothing new to propose (measure again to refit)",
                old.status.as_str(),
                old.review.as_ref().and_then(|r| r.merged.as_deref()).map(|m| format!(" (merged {})", synth::short(m))).unwrap_or_default()
            ));
        }
    }
    if !sanitize::is_safe_name(c.target) {
        return Err(unsafe_target(c.target));
    }
    let path = format!("calibration/{}.toml", c.target);
    let base_changelog = git::read_text(repo, base, "CHANGELOG.md")?.unwrap_or_else(|| "# Changelog\n".into());
    let mut edits: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
    edits.insert(path, Some(c.new_text.into_bytes()));
    edits.insert("CHANGELOG.md".into(), Some(synth::changelog_insert(&base_changelog, &c.changelog).into_bytes()));
    for (p, bytes) in c.files {
        edits.insert(p, Some(bytes));
    }
    let branch = format!("evolve/calibration/{id}-{}", c.target);
    let message = format!("evolve: {}\n\n{}\nProposal {id}.", c.title, c.changelog);
    let commit = git::commit_on_branch(repo, base, &branch, &edits, &message)?;
    let mut rec = Record {
        id: id.clone(),
        kind: Kind::Calibration,
        status: Status::Queued,
        title: c.title,
        branch,
        base: base.to_string(),
        commit: commit.to_string(),
        bucket: c.bucket.unwrap_or_else(|| c.key.chars().take(12).collect()),
        signature: c.signature,
        construct: format!("calibration:{}", c.target),
        evidence: c.evidence,
        programs: Vec::new(),
        seed: 0,
        changelog: c.changelog,
        gates_passed: None,
        created_by: created_by(),
        widens: None,
        notes: c.draft.skipped.iter().map(|s| format!("measurement skipped: {s}")).collect(),
        rule: None,
        primitive: None,
        calibration: Some(c.draft),
        analysis: None,
        gates: Vec::new(),
        review: None,
        history: Vec::new(),
    };
    publish(repo, qdir, &rec)?;
    if run_gates {
        let report = gater.gate(repo, base, commit)?;
        rec.gates_passed = Some(report.passed);
        rec.gates = report.gates;
        publish(repo, qdir, &rec)?;
    }
    Ok(rec)
}

/// `Q006`: a target name (from evidence or the command line) that cannot be a file name.
fn unsafe_target(target: &str) -> String {
    QueueError::new(
        "Q006",
        format!("calibration/{}.toml", sanitize::line_bounded(target, 60)),
        format!("`{}` is not a target name (letters, digits, `.`, `_`, `-`)", sanitize::line_bounded(target, 60)),
        "the name came from a run record or the command line; nothing was written",
    )
    .to_string()
}

/// A hash of a measurement set: names and times.
fn measurement_key<'a>(ms: impl IntoIterator<Item = &'a Measurement>) -> String {
    let mut h = Sha256::new();
    for m in ms {
        h.update(m.name.as_bytes());
        h.update(m.measured_ms.to_bits().to_le_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The program part of a store measurement's name (`NAME SHORTHASH @ SHAPE`): its short hash.
fn measurement_program(name: &str) -> Option<&str> {
    name.split(" @ ").next()?.rsplit(' ').next()
}

/// A term refit as a queued change: the committed run holds the times the term was fitted on
/// (its bench's runs, or the bucket's and the other fit runs as bench `refit`) and the held-out
/// runs that judge it.
#[allow(clippy::too_many_arguments)]
fn term_refit_change<'a>(target: &'a str, draft: CalibrationDraft, new_text: String, imp: &crate::term_refit::Implicated, fit: &[Measurement], held_out: &[Measurement], why_unmeasured: &str, bucket: String) -> CalibrationChange<'a> {
    let changed = draft.params.join(", ");
    let (suite, source): (Vec<crate::microbench::BenchMeasurement>, String) = match &imp.bench {
        Some(b) => (
            b.runs.iter().map(|m| crate::microbench::BenchMeasurement { bench: b.bench.clone(), m: m.clone() }).collect(),
            format!("microbenchmark {} ({} runs on {})", b.bench, b.runs.len(), b.gpu),
        ),
        None => (
            fit.iter().map(|m| crate::microbench::BenchMeasurement { bench: "refit".into(), m: m.clone() }).collect(),
            format!("the bucket's and the store's other timed runs ({} runs; {})", fit.len(), why_unmeasured.trim_end_matches('.')),
        ),
    };
    let changelog = format!(
        "- Recalibrated {target} `{}`, the term misprediction bucket {bucket} implicates (its runs off by ×{} measured/predicted, elasticity {:+.2}), from {source}: {changed}; on {} held-out runs MAPE {:.1}% → {:.1}%, Spearman {:.3} → {:.3}.",
        imp.param, imp.bucket_ratio, imp.elasticity, draft.after.n, draft.before.mape, draft.after.mape, draft.before.spearman, draft.after.spearman
    );
    let mut h = Sha256::new();
    h.update(measurement_key(suite.iter().map(|b| &b.m).chain(held_out)).as_bytes());
    h.update(imp.param.as_bytes());
    let key: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let run = SavedRun {
        schema: RUN_SCHEMA.into(),
        target: target.into(),
        gpu: source.clone(),
        created_unix: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        suite,
        accuracy: held_out.to_vec(),
        failed: Vec::new(),
    };
    let files = serde_json::to_vec_pretty(&run).map(|b| vec![(format!("calibration/runs/{target}-{}.json", &key[..12]), b)]).unwrap_or_default();
    CalibrationChange {
        target,
        title: format!("recalibrate {target}: {changed}"),
        signature: format!("cost model: bucket {bucket}'s runs off by ×{} (median measured/predicted), implicating `{}` (elasticity {:+.2}; candidates {})", imp.bucket_ratio, imp.param, imp.elasticity, imp.candidates.iter().map(|(n, e)| format!("{n} {e:+.2}")).collect::<Vec<_>>().join(", ")),
        key,
        evidence: run.suite.iter().map(|m| m.m.name.clone()).chain(held_out.iter().map(|m| m.name.clone())).collect::<BTreeSet<_>>().into_iter().collect(),
        files,
        bucket: Some(bucket),
        changelog,
        draft,
        new_text,
    }
}

/// A class refit as a queued change. `fitted` are the runs the refit used, `judged` the runs its
/// accuracy is judged on (the same runs for `calibrate --measurements`; held-out ones for a
/// refit from the evidence store): both are committed, `judged` as the run's accuracy set.
#[allow(clippy::too_many_arguments)]
fn class_refit_change<'a>(target: &'a str, draft: CalibrationDraft, new_text: String, fitted: &[Measurement], judged: &[Measurement], bucket: Option<String>, source: &str) -> CalibrationChange<'a> {
    let (ratio, factor) = (draft.class_ratio.unwrap_or(1.0), draft.factor.unwrap_or(1.0));
    let changelog = format!(
        "- Recalibrated {target} {} parameters (×{factor} time, from {source}): MAPE {:.1}% → {:.1}%, Spearman {:.3} → {:.3} over {} measurements.",
        draft.class, draft.before.mape, draft.after.mape, draft.before.spearman, draft.after.spearman, draft.after.n
    );
    let key = measurement_key(fitted.iter().chain(judged));
    // The measurements go with the proposal, so the `accuracy` gate can judge it on them. Runs the
    // refit used but is not judged on are kept as the run's suite (bench `refit`).
    let judged_names: BTreeSet<&str> = judged.iter().map(|m| m.name.as_str()).collect();
    let run = SavedRun {
        schema: RUN_SCHEMA.into(),
        target: target.into(),
        gpu: source.into(),
        created_unix: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        suite: fitted
            .iter()
            .filter(|m| !judged_names.contains(m.name.as_str()))
            .map(|m| crate::microbench::BenchMeasurement { bench: "refit".into(), m: m.clone() })
            .collect(),
        accuracy: judged.to_vec(),
        failed: Vec::new(),
    };
    let files = serde_json::to_vec_pretty(&run).map(|b| vec![(format!("calibration/runs/{target}-{}.json", &key[..12]), b)]).unwrap_or_default();
    CalibrationChange {
        target,
        title: format!("recalibrate {target}: {} ×{factor}", draft.class),
        signature: format!("cost model: {} predictions off by ×{ratio} (median measured/predicted)", draft.class),
        key,
        evidence: fitted.iter().chain(judged).map(|m| m.name.clone()).collect::<BTreeSet<_>>().into_iter().collect(),
        files,
        bucket,
        changelog,
        draft,
        new_text,
    }
}

/// `calibrate --measurements`: refit the class with systematic error and queue the new
/// `calibration/<target>.toml` as a proposal on `evolve/calibration/<id>-<target>`, gated like
/// any other.
pub fn propose_calibration(repo_path: &Path, main: Option<&str>, target: &str, measurements: &[Measurement], fitted_on: &str, gate: GateOptions) -> Result<Record, String> {
    let (repo, qdir, base, text) = calibration_base(repo_path, main, target)?;
    let _lock = QueueLock::acquire(&repo, "calibrate", lock::DEFAULT_TIMEOUT)?;
    let (draft, new_text) = crate::calibrate::propose_calibration(target, &text, measurements, fitted_on, None)?;
    let change = class_refit_change(target, draft, new_text, measurements, measurements, None, "measurements");
    queue_calibration(&repo, &mut Gater::new(gate, &repo)?, &qdir, base, change, true)
}

/// `calibrate` (the suite): the parameters fitted from a microbenchmark run, judged on its
/// accuracy set, queued with the run itself committed as `calibration/runs/<target>-<hash>.json`
/// so the fit can be reproduced from the branch.
pub fn propose_suite_calibration(repo_path: &Path, main: Option<&str>, suite: &Suite, run: &SavedRun, fitted_on: &str, gate: GateOptions) -> Result<Record, String> {
    let target = suite.target.as_str();
    let (repo, qdir, base, text) = calibration_base(repo_path, main, target)?;
    let _lock = QueueLock::acquire(&repo, "calibrate", lock::DEFAULT_TIMEOUT)?;
    let (draft, new_text) = crate::microbench::fit_suite(suite, &text, run, fitted_on)?;
    let key = suite_fit_key(run, &new_text);
    let run_path = format!("calibration/runs/{target}-{}.json", &key[..12]);
    let run_json = serde_json::to_vec_pretty(run).map_err(|e| e.to_string())?;
    let fitted: Vec<String> = draft.fits.iter().map(|f| f.param.clone()).collect();
    let changelog = format!(
        "- Recalibrated {target} from the Cake IR microbenchmark suite ({} runs on {}): {}; on {} GPU corpus measurements MAPE {:.1}% → {:.1}%, Spearman {:.3} → {:.3} (run: `{run_path}`).",
        run.suite.len(),
        run.gpu,
        fitted.join(", "),
        draft.after.n,
        draft.before.mape,
        draft.after.mape,
        draft.before.spearman,
        draft.after.spearman
    );
    let change = CalibrationChange {
        target,
        title: format!("recalibrate {target} from microbenchmarks: {}", fitted.join(", ")),
        signature: format!("microbenchmark suite {} on {}", suite.path.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default(), run.gpu),
        key,
        evidence: run.suite.iter().map(|b| b.m.name.clone()).chain(run.accuracy.iter().map(|m| m.name.clone())).collect(),
        files: vec![(run_path, run_json)],
        bucket: None,
        changelog,
        draft,
        new_text,
    };
    queue_calibration(&repo, &mut Gater::new(gate, &repo)?, &qdir, base, change, true)
}

/// A suite fit's identity: its measurements and the calibration it fits from them. The same run
/// fitted again by the same cost model gives the same calibration, so the same proposal; a
/// changed model (or base calibration) fits the same run to a new one, a new proposal.
fn suite_fit_key(run: &SavedRun, fitted: &str) -> String {
    let mut h = Sha256::new();
    h.update(measurement_key(run.suite.iter().map(|b| &b.m).chain(&run.accuracy)).as_bytes());
    h.update(fitted.as_bytes());
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The decided (accepted or rejected) calibration proposal this run fits to, by the current cost
/// model from `main`'s calibration, if any.
pub fn decided_suite_calibration(repo_path: &Path, main: Option<&str>, suite: &Suite, run: &SavedRun, fitted_on: &str) -> Result<Option<Record>, String> {
    let (_, qdir, _, text) = calibration_base(repo_path, main, &suite.target)?;
    let (_, new_text) = crate::microbench::fit_suite(suite, &text, run, fitted_on)?;
    let id = proposal_id(Kind::Calibration, &format!("{}\n{}", run.target, suite_fit_key(run, &new_text)));
    Ok(find(&qdir, &id).ok().map(|(_, r)| r).filter(|r| r.id == id && r.status != Status::Queued))
}

fn calibration_base(repo_path: &Path, main: Option<&str>, target: &str) -> Result<(Repository, PathBuf, Oid, String), String> {
    if !sanitize::is_safe_name(target) {
        return Err(unsafe_target(target));
    }
    let repo = git::open(repo_path)?;
    let qdir = queue_dir(&git::workdir(&repo)?);
    let main = git::main_branch(&repo, main)?;
    let base = git::branch_commit(&repo, &main)?;
    let path = format!("calibration/{target}.toml");
    let text = git::read_text(&repo, base, &path)?.ok_or_else(|| format!("`{main}` has no {path}: the target is not calibrated, nothing to refit"))?;
    Ok((repo, qdir, base, text))
}

/// Timed passing runs of `target` in the store whose program is stored, as measurements (the
/// newest run per program and shape): what a misprediction bucket is refitted on — all of them,
/// not only the bucket's, so a refit cannot buy one class's accuracy with another's.
pub fn store_measurements(store: &EvidenceStore, target: &str) -> Vec<Measurement> {
    let mut newest: BTreeMap<(String, String), (u64, Measurement)> = BTreeMap::new();
    for rec in store.scan().records {
        let crate::store::Record::Run(r) = &rec.record else { continue };
        let Some(t) = &r.times_ms else { continue };
        if r.verdict != cake::runtime::job::Verdict::Pass || r.program.target != target || !(t.median_ms > 0.0) {
            continue;
        }
        let Ok(Some(source)) = store.program(&r.program.sha256) else { continue };
        let shape: String = r.shape.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
        let m = Measurement { name: format!("{} {} @ {shape}", r.program.name, synth::short(&r.program.sha256)), program: source, dims: r.shape.clone(), measured_ms: t.median_ms };
        let key = (r.program.sha256.clone(), shape);
        if newest.get(&key).is_none_or(|(at, _)| r.created_unix_ms > *at) {
            newest.insert(key, (r.created_unix_ms, m));
        }
    }
    newest.into_values().map(|(_, m)| m).collect()
}

/// The bottleneck class a `cost_model.misprediction` bucket names (its detail ends in `, <class>
/// bound`, as `mine` writes it).
fn bucket_class(b: &Bucket) -> Option<cake::cost::Bottleneck> {
    let class = b.signature.rsplit(", ").next()?.strip_suffix(" bound")?;
    cake::cost::Bottleneck::ALL.into_iter().find(|c| c.as_str() == class)
}

/// A `cost_model.misprediction` bucket: refit the bucket's bottleneck class on the store's timed
/// runs of the bucket's targets.
#[allow(clippy::too_many_arguments)]
fn propose_store_calibration(repo: &Repository, gater: &mut Gater, opts: &ProposeOptions, qdir: &Path, base: Oid, b: &Bucket, store: &EvidenceStore, records: &mut BTreeMap<String, Record>) -> Result<Vec<Outcome>, String> {
    let out = |what: &str, proposal: Option<String>, detail: String| Outcome { bucket: b.id.clone(), what: what.into(), proposal, detail };
    let mut outcomes = Vec::new();
    for target in &b.targets {
        if !sanitize::is_safe_name(target) {
            outcomes.push(out("skipped", None, unsafe_target(target).replace('\n', " ")));
            continue;
        }
        let path = format!("calibration/{target}.toml");
        let Some(text) = git::read_text(repo, base, &path)? else {
            outcomes.push(out("skipped", None, format!("{target} is not calibrated ({path} missing): nothing to refit")));
            continue;
        };
        // Refit on two programs in three; the third judges the refit (here and in the accuracy
        // gate, from the committed run) and takes no part in it.
        let ms = store_measurements(store, target);
        let (fit, held_out) = crate::calibrate::split_held_out(&ms);
        let label = format!("evidence store {} ({} timed runs, {} held out), bucket {}", opts.evidence.display(), fit.len(), held_out.len(), b.id);
        // The term the bucket's runs implicate, refitted alone; a class refit where no one term
        // explains them.
        let bucket_programs: BTreeSet<&str> = b.program_hashes.iter().map(|h| synth::short(h)).collect();
        let (members, rest): (Vec<Measurement>, Vec<Measurement>) = fit.iter().cloned().partition(|m| measurement_program(&m.name).is_some_and(|p| bucket_programs.contains(p)));
        let root = git::workdir(repo)?;
        let why_unmeasured = std::cell::RefCell::new(BTreeMap::new());
        let bench_for = |param: &str| match crate::term_refit::bench_runs(&opts.term_benches, &root, target, param) {
            Ok(b) => Some(b),
            Err(e) => {
                why_unmeasured.borrow_mut().insert(param.to_string(), e);
                None
            }
        };
        // The suite's measured bench runs, which neither a term refit nor a class refit may throw off.
        let measured_benches = crate::term_refit::suite_runs(&root, target);
        let current = match cake::cost::Calibration::from_toml_str(&path, &text) {
            Ok(c) => c,
            Err(e) => {
                outcomes.push(out("skipped", None, format!("{target}: {e}")));
                continue;
            }
        };
        let guard = crate::term_refit::BenchGuard::new(target, &current, &measured_benches);
        let term = crate::term_refit::implicate(target, &text, &members, &rest, &guard, &bench_for).and_then(|imp| {
            let (draft, new_text) = crate::term_refit::refit_term(target, &text, &imp, &fit, &held_out, &label).map_err(|e| format!("the bucket implicates `{}`, but {e}", imp.param))?;
            let unmeasured = why_unmeasured.borrow().get(&imp.param).cloned().unwrap_or_default();
            Ok(term_refit_change(target, draft, new_text, &imp, &fit, &held_out, &unmeasured, b.id.clone()))
        });
        let change = match term {
            Ok(c) => c,
            Err(term_err) => {
                // The class refit meets the same microbenchmarks as a term refit.
                let guarded = |new_text: &str| -> Result<(), String> {
                    let new = cake::cost::Calibration::from_toml_str(&path, new_text).map_err(|e| e.to_string())?;
                    match guard.thrown_off(&new) {
                        Some((g, grew)) => Err(format!("it throws microbenchmark `{g}` off (a run's |log error| grows by {grew:.3})")),
                        None => Ok(()),
                    }
                };
                let refit = crate::calibrate::propose_calibration(target, &text, &fit, &label, bucket_class(b))
                    .and_then(|(draft, new_text)| guarded(&new_text).map(|()| (draft, new_text)))
                    .and_then(|(draft, new_text)| crate::calibrate::judge_held_out(target, &text, draft, &new_text, &held_out).map(|d| (d, new_text)));
                match refit {
                    Ok((draft, new_text)) => class_refit_change(target, draft, new_text, &fit, &held_out, Some(b.id.clone()), "timed runs in the evidence store"),
                    Err(e) => {
                        outcomes.push(out("skipped", None, format!("{target}: {term_err}; a class refit: {e}")));
                        continue;
                    }
                }
            }
        };
        let id = proposal_id(Kind::Calibration, &format!("{target}\n{}", change.key));
        if let Some(why) = records.get(&id).and_then(|r| settled(Some(r), &r.evidence.clone())) {
            outcomes.push(out("skipped", Some(id), why));
            continue;
        }
        let rec = queue_calibration(repo, gater, qdir, base, change, opts.run_gates)?;
        let detail = match rec.gates_passed {
            Some(true) => format!("{}: gates passed", rec.title),
            Some(false) => format!("{}: gates FAILED", rec.title),
            None => format!("{}: gates not run", rec.title),
        };
        records.insert(id.clone(), rec);
        outcomes.push(out("proposed", Some(id), detail));
    }
    Ok(outcomes)
}
