//! Review of the queue: `list`, `show ID`, `accept ID`, `reject ID --why ...`.
//!
//! `accept` works like bors: the proposal's change is re-applied on the main branch as it is
//! now (its files, and its CHANGELOG line inserted into main's CHANGELOG), the gates are re-run
//! on that merged tree in an isolated checkout, and only if they pass does main move — a
//! fast-forward when main has not moved since the proposal was made, else a merge commit with
//! main and the proposal as parents. If the working copy is on main it is updated too, but only
//! when it has no uncommitted changes to tracked files (outside `proposals/`); otherwise nothing
//! is merged and the command says why. `reject` records the reason and the evidence it saw, so
//! `propose` leaves the bucket alone until new evidence arrives.
//!
//! `accept` and `reject` hold the queue lock (`lock.rs`) for their whole run. `accept` is
//! idempotent: a proposal whose commit is already on main (a crash between moving main and
//! saving the record) is recorded as merged where it was, with no second merge. What `list`
//! and `show` print comes from records shared through git and from evidence: it goes through
//! [`crate::sanitize`].

use std::path::Path;
use std::time::Duration;

use cake_merge_gates::GateOptions;
use similar::{ChangeTag, TextDiff};

use crate::gate::Gater;
use crate::git;
use crate::lock::{self, QueueLock};
use crate::queue::{self, Kind, Record, Review, Status};
use crate::{sanitize, synth};

/// `list`: one line per proposal.
pub fn list(records: &[Record]) -> String {
    let mut out = String::new();
    out.push_str(&format!("{:<12} {:<11} {:<9} {:<6} {}\n", "id", "kind", "status", "gates", "title"));
    for r in records {
        let gates = match r.gates_passed {
            Some(true) => "pass",
            Some(false) => "FAIL",
            None => "-",
        };
        out.push_str(&format!("{:<12} {:<11} {:<9} {:<6} {}  [{}]\n", r.id, r.kind.as_str(), r.status.as_str(), gates, sanitize::line(&r.title), sanitize::line(&r.branch)));
    }
    if records.is_empty() {
        out.push_str("(the queue is empty: run `cake-evolve-compiler propose`)\n");
    }
    out
}

/// A unified diff of one file (new files in full).
pub fn file_diff(path: &str, old: Option<&[u8]>, new: Option<&[u8]>) -> String {
    let old_t = old.map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
    let new_t = new.map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
    let (a, b) = (if old.is_some() { format!("a/{path}") } else { "/dev/null".into() }, if new.is_some() { format!("b/{path}") } else { "/dev/null".into() });
    let diff = TextDiff::from_lines(&old_t, &new_t);
    let mut out = String::new();
    out.push_str(&format!("--- {a}\n+++ {b}\n"));
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        out.push_str(&format!("{}\n", hunk.header()));
        for change in hunk.iter_changes() {
            let sign = match change.tag() {
                ChangeTag::Delete => '-',
                ChangeTag::Insert => '+',
                ChangeTag::Equal => ' ',
            };
            out.push(sign);
            out.push_str(change.value());
            if change.missing_newline() {
                out.push('\n');
            }
        }
    }
    out
}

/// `show`: the record, the evidence, the gate table and the diff.
pub fn show(repo_path: &Path, r: &Record, with_diff: bool) -> Result<String, String> {
    let mut out = String::new();
    out.push_str(&format!("proposal {} — {} ({})\n", r.id, r.title, r.kind.as_str()));
    out.push_str(&format!("status:    {}\n", r.status.as_str()));
    out.push_str(&format!("branch:    {}\n", r.branch));
    out.push_str(&format!("commit:    {} (base {})\n", r.commit, synth::short(&r.base)));
    out.push_str("\nevidence\n");
    out.push_str(&format!("  bucket:     {}\n  signature:  {}\n  construct:  {}\n", r.bucket, r.signature, r.construct));
    out.push_str(&format!("  records:    {} ({})\n", r.evidence.len(), r.evidence.iter().take(4).map(|e| synth::short(e)).collect::<Vec<_>>().join(", ")));
    out.push_str(&format!("  programs:   {} ({})\n", r.programs.len(), r.programs.iter().take(4).map(|e| synth::short(e)).collect::<Vec<_>>().join(", ")));
    if let Some(d) = &r.rule {
        out.push_str(&format!("\nrule {} `{}` ({})\n", d.code, d.name, d.category));
        out.push_str(&format!("  applies to: {}\n", d.applies_to));
        if let Some(w) = &d.when {
            out.push_str(&format!("  when:       {w}\n"));
        }
        out.push_str(&format!("  require:    {}   ({} form, level {})\n", d.require, d.form, d.level));
        out.push_str(&format!(
            "  separates:  {} failing program(s) violate it; all {} instance(s) in {} corpus program(s) satisfy it\n",
            d.failing_programs.len(),
            d.accepted_instances,
            d.accepted_programs
        ));
        // Where each constant comes from: a reviewer checks a rule's numbers against these.
        for c in &d.constants {
            out.push_str(&format!("  constant {}: {}\n", c.value, c.describe()));
        }
        if !d.variants.is_empty() {
            let fails = d.variants.iter().filter(|v| v.fails).count();
            out.push_str(&format!("  variants:   {} labelled ({} failing, {} passing): {}\n", d.variants.len(), fails, d.variants.len() - fails, d.variants.iter().take(6).map(|v| v.id.as_str()).collect::<Vec<_>>().join(", ")));
        }
    }
    if let Some(p) = &r.primitive {
        out.push_str(&format!("\nprimitive `{}` ({} op, {}), from {} call site(s) in {} program(s)\n", p.op, p.class, p.form, p.call_sites, p.programs));
        for m in &p.missing {
            out.push_str(&format!("  missing: {m}\n"));
        }
    }
    if let Some(a) = &r.analysis {
        out.push_str(&format!("\nnew fact `{}` of `{}` (a proposal for an analysis, not a rule)\n", a.fact, a.construct));
        out.push_str(&format!("  missing:    {}\n", a.quantity));
        out.push_str(&format!("  why:        {}\n", a.why));
        out.push_str(&format!("  separate:   {} failing program(s) ({}) from accepted corpus case(s) {}\n", a.failing_programs.len(), a.failing_programs.iter().map(|h| synth::short(h)).collect::<Vec<_>>().join(", "), a.passing_programs.join(", ")));
        for n in &a.nearest {
            out.push_str(&format!("  {n}\n"));
        }
        for s in &a.skipped_programs {
            out.push_str(&format!("  skipped: {s}\n"));
        }
        out.push_str(&format!("  skeleton:   {} (the analysis and its test, for a person to write)\n", a.skeleton));
    }
    if let Some(c) = &r.calibration {
        match (c.class_ratio, c.factor) {
            (Some(ratio), Some(factor)) => out.push_str(&format!("\ncalibration of {}: {} class, measured/predicted {ratio} → factor {factor}\n", c.target, c.class)),
            _ => out.push_str(&format!("\ncalibration of {}: {}\n", c.target, c.class)),
        }
        for p in &c.params {
            out.push_str(&format!("  {p}\n"));
        }
        for f in &c.fits {
            out.push_str(&format!(
                "  fit {:<28} from bench `{}` ({} run(s)): mean |log error| {:.3} → {:.3}{}\n",
                f.param,
                f.bench,
                f.runs,
                f.log_error_before,
                f.log_error_after,
                if f.at_bound { " (at the search bound: the model may not describe this bench)" } else { "" }
            ));
        }
        out.push_str(&format!("  accuracy   before: spearman {:.3}, MAPE {:.1}%, top-{} recall {:.2} (n = {})\n", c.before.spearman, c.before.mape, c.before.k, c.before.top_k_recall, c.before.n));
        out.push_str(&format!("             after:  spearman {:.3}, MAPE {:.1}%, top-{} recall {:.2}\n", c.after.spearman, c.after.mape, c.after.k, c.after.top_k_recall));
    }
    for n in &r.notes {
        out.push_str(&format!("  note: {n}\n"));
    }
    out.push_str("\ngates\n");
    if r.gates.is_empty() {
        out.push_str("  (not run)\n");
    } else {
        for line in r.gate_report().table().lines() {
            out.push_str(&format!("  {line}\n"));
        }
    }
    if let Some(v) = &r.review {
        out.push_str(&format!("\nreview: {} — {}\n", v.action.as_str(), v.note));
        if let Some(m) = &v.merged {
            out.push_str(&format!("  merged as {} ({})\n", m, v.how.clone().unwrap_or_default()));
        }
    }
    if with_diff {
        let repo = git::open(repo_path)?;
        let (base, commit) = (oid(&r.base)?, oid(&r.commit)?);
        out.push_str("\ndiff\n");
        for f in git::diff(&repo, base, commit)? {
            out.push_str(&file_diff(&f.path, f.old.as_deref(), f.new.as_deref()));
        }
    }
    // Every field above may hold text from evidence or a crafted record.
    Ok(sanitize::text_bounded(&out, usize::MAX))
}

fn oid(s: &str) -> Result<git2::Oid, String> {
    git2::Oid::from_str(s).map_err(|e| format!("`{s}` is not a commit id: {}", e.message()))
}

/// What `accept` did.
#[derive(Clone, Debug, PartialEq)]
pub enum Accepted {
    /// Merged: main moved to this commit.
    Merged { commit: String, how: String },
    /// The gates failed on current main: nothing merged (the record keeps the gate results).
    GatesFailed { table: String },
}

/// The repository, its queue folder and the still-queued proposal `id` (a decided one is an error).
/// The queue lock is taken first, then the record is read, so what is decided is current.
fn queued(repo_path: &Path, id: &str, command: &str, lock_timeout: Duration) -> Result<(git2::Repository, std::path::PathBuf, Record, QueueLock), String> {
    let repo = git::open(repo_path)?;
    let qdir = queue::queue_dir(&git::workdir(&repo)?);
    let held = QueueLock::acquire(&repo, command, lock_timeout)?;
    let (_, r) = queue::find(&qdir, id)?;
    if r.status != Status::Queued {
        return Err(format!("proposal {} is {}, not queued", r.id, r.status.as_str()));
    }
    Ok((repo, qdir, r, held))
}

/// The recorded merge of proposal `id` when it is accepted and that merge is on main.
fn accepted_already(repo_path: &Path, id: &str, main: Option<&str>) -> Result<Option<Accepted>, String> {
    let repo = git::open(repo_path)?;
    let qdir = queue::queue_dir(&git::workdir(&repo)?);
    let Ok((_, r)) = queue::find(&qdir, id) else { return Ok(None) };
    let Some(merged) = r.review.as_ref().filter(|_| r.status == Status::Accepted).and_then(|v| v.merged.clone()) else { return Ok(None) };
    let main = git::main_branch(&repo, main)?;
    let head = git::branch_commit(&repo, &main)?;
    let m = oid(&merged)?;
    let on_main = head == m || repo.graph_descendant_of(head, m).unwrap_or(false);
    Ok(on_main.then(|| Accepted::Merged { commit: merged, how: "already accepted".into() }))
}

/// `accept ID`: re-gate on current main, merge, record (waiting for the queue lock up to
/// [`lock::DEFAULT_TIMEOUT`]).
pub fn accept(repo_path: &Path, id: &str, note: &str, main: Option<&str>, opts: GateOptions) -> Result<Accepted, String> {
    accept_with_lock_timeout(repo_path, id, note, main, opts, lock::DEFAULT_TIMEOUT)
}

/// [`accept`], waiting up to `lock_timeout` for another run's queue lock.
pub fn accept_with_lock_timeout(repo_path: &Path, id: &str, note: &str, main: Option<&str>, opts: GateOptions, lock_timeout: Duration) -> Result<Accepted, String> {
    // Idempotent: an accept killed after recording its merge is done; running it again says so.
    if let Some(done) = accepted_already(repo_path, id, main)? {
        return Ok(done);
    }
    let (repo, qdir, mut r, _lock) = queued(repo_path, id, "accept", lock_timeout)?;
    let main = git::main_branch(&repo, main)?;
    let main_head = git::branch_commit(&repo, &main)?;
    // The proposal commit, beneath the record commit the branch carries.
    let branch_head = git::proposal_commit(&repo, &r.branch).ok_or_else(|| format!("the proposal's branch `{}` is gone", r.branch))?;
    if branch_head.to_string() != r.commit {
        return Err(format!("branch `{}` is at {}, not at the proposal's commit {}: it was changed after proposing", r.branch, branch_head, r.commit));
    }
    // Already on main (an earlier accept moved main, then stopped before saving the record):
    // record where it was merged instead of merging again.
    if let Some((merged, how)) = git::merged_at(&repo, main_head, branch_head) {
        r.status = Status::Accepted;
        r.gates_passed = Some(true);
        r.notes.push(format!("accept found the proposal already merged into `{main}` at {} (an earlier accept stopped before recording it)", synth::short(&merged.to_string())));
        r.review = Some(Review {
            action: Status::Accepted,
            note: note.to_string(),
            main: main_head.to_string(),
            merged: Some(merged.to_string()),
            how: Some(how.to_string()),
            evidence: r.evidence.clone(),
            gates: Vec::new(),
        });
        queue::publish(&repo, &qdir, &r)?;
        return Ok(Accepted::Merged { commit: merged.to_string(), how: how.to_string() });
    }
    let base = oid(&r.base)?;
    let mut gater = Gater::new(opts, &repo)?;
    // The candidate: fast-forward when main has not moved, else the change re-applied on main.
    let (candidate, how) = if main_head == base {
        (branch_head, "fast-forward".to_string())
    } else {
        let line = r.changelog.clone();
        let resolve = move |path: &str, onto: &str| -> Option<String> { (path == "CHANGELOG.md").then(|| synth::changelog_insert(onto, &line)) };
        let tree = match git::rebase_tree(&repo, base, branch_head, main_head, &resolve)? {
            Ok(t) => t,
            Err(conflicts) => {
                return Err(crate::records::QueueError::new(
                    "Q010",
                    repo_path.join(&conflicts[0]),
                    format!("the proposal and `{main}` both changed {} since {}: nothing was merged", conflicts.join(", "), synth::short(&r.base)),
                    format!("reject {} (`cake-evolve-compiler reject {} --why ...`) and run `propose` again on current `{main}`", r.id, r.id),
                )
                .into())
            }
        };
        let sig = git::user_signature(&repo);
        let msg = format!("Merge {} (accept proposal {}: {})\n\n{}", r.branch, r.id, r.title, if note.is_empty() { "Accepted with cake-evolve-compiler." } else { note });
        let merged = git::commit_tree(&repo, tree, &[main_head, branch_head], &msg, &sig)?;
        // Rules accepted since the proposal was made may fire on its negative cases, and its rule
        // on main's: those cases expect the findings of both (rederive.rs).
        let (base_dir, merged_dir) = (gater.checkout(&repo, base)?, gater.checkout(&repo, merged)?);
        let codes = crate::rederive::new_codes(&base_dir, &merged_dir)?;
        let rederived = crate::rederive::rederive(&merged_dir, &codes)?;
        if rederived.is_empty() {
            (merged, "merge commit".to_string())
        } else {
            let cases: Vec<&str> = rederived.iter().map(|d| d.case.as_str()).collect();
            let codes: Vec<&str> = codes.iter().map(String::as_str).collect();
            let why = format!("re-derived the expected findings of {} negative case(s) for the rules this merge brings together ({}): {}", cases.len(), codes.join(", "), cases.join(", "));
            let edits = rederived.iter().map(|d| (d.path.clone(), Some(d.text.clone().into_bytes()))).collect();
            let tree = git::tree_with(&repo, merged, &edits)?;
            r.notes.push(format!("accept {why}"));
            (git::commit_tree(&repo, tree, &[main_head, branch_head], &format!("{msg}\n\nThe merge {why}."), &sig)?, "merge commit".to_string())
        }
    };
    // Every gate, and for a rule the `generalization` gate, on the tree main would become.
    let report = gater.gate_record(&repo, main_head, candidate, &r)?;
    if !report.passed {
        r.gates_passed = Some(false);
        r.gates = report.gates.clone();
        r.notes.push(format!("accept refused: the gates failed on `{main}` at {}", synth::short(&main_head.to_string())));
        queue::publish(&repo, &qdir, &r)?;
        return Ok(Accepted::GatesFailed { table: report.table() });
    }
    git::advance_branch(&repo, &main, candidate, &format!("cake-evolve-compiler: accept {}", r.id))?;
    r.status = Status::Accepted;
    r.gates_passed = Some(true);
    r.review = Some(Review {
        action: Status::Accepted,
        note: note.to_string(),
        main: main_head.to_string(),
        merged: Some(candidate.to_string()),
        how: Some(how.clone()),
        evidence: r.evidence.clone(),
        gates: report.gates,
    });
    queue::publish(&repo, &qdir, &r)?;
    Ok(Accepted::Merged { commit: candidate.to_string(), how })
}

/// `reject ID --why ...`: remembered with the evidence it saw.
pub fn reject(repo_path: &Path, id: &str, why: &str) -> Result<Record, String> {
    reject_with_lock_timeout(repo_path, id, why, lock::DEFAULT_TIMEOUT)
}

/// [`reject`], waiting up to `lock_timeout` for another run's queue lock.
pub fn reject_with_lock_timeout(repo_path: &Path, id: &str, why: &str, lock_timeout: Duration) -> Result<Record, String> {
    if why.trim().is_empty() {
        return Err("say why (`--why ...`): the reason is kept with the record".into());
    }
    let (repo, qdir, mut r, _lock) = queued(repo_path, id, "reject", lock_timeout)?;
    let main = git::main_branch(&repo, None).ok().and_then(|m| git::branch_commit(&repo, &m).ok()).map(|c| c.to_string()).unwrap_or_default();
    r.status = Status::Rejected;
    r.review = Some(Review { action: Status::Rejected, note: why.trim().to_string(), main, merged: None, how: None, evidence: r.evidence.clone(), gates: Vec::new() });
    queue::publish(&repo, &qdir, &r)?;
    Ok(r)
}

/// Records of one kind or status, for `list --kind/--status`.
pub fn filter(records: Vec<Record>, kind: Option<Kind>, status: Option<Status>) -> Vec<Record> {
    records.into_iter().filter(|r| kind.is_none_or(|k| r.kind == k) && status.is_none_or(|s| r.status == s)).collect()
}
