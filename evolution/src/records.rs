//! The review queue's records: `proposals/<id>.toml`, one per proposal, and the same record
//! committed on the proposal's own branch (a "record commit" on top of the proposal commit), so
//! the queue can be rebuilt from branches alone. Kept apart from the `propose` pipeline
//! (`queue.rs`), which fills it.
//!
//! Nothing read from a record is trusted: an id must be `[rpca]-<8 hex digits>` (what
//! [`proposal_id`] makes), a record must sit in the file its id names, and its branch must be
//! `evolve/<kind>/<id>…`. A record breaking this is reported by name and skipped; the others
//! are still served. Records are replaced atomically ([`crate::durable::write_atomic`]).
//!
//! # Errors
//! Every problem is a [`QueueError`] with a stable code, the file and a help line:
//! * `Q001` a proposal id that is not `[rpca]-<8 hex digits>` (in a record or on the command line);
//! * `Q002` a record file that cannot be read or is not a proposal record;
//! * `Q003` a record whose id does not match its file name, or whose branch or commits are not
//!   its own;
//! * `Q004` a record cannot be written (file or branch);
//! * `Q005` the queue lock is held by another run (see `lock.rs`);
//! * `Q006` a name from evidence, a draft or an LLM that cannot be used in a path or a branch;
//! * `Q007` no such proposal, or an ambiguous prefix;
//! * `Q008` (a note) a record missing or unreadable, re-created from its branch;
//! * `Q009` (a note) a bucket whose failure text holds control characters;
//! * `Q010` `accept` cannot re-apply a proposal on main: both changed the same file (named).

use std::fmt;
use std::path::{Path, PathBuf};

use cake_merge_gates::{GateReport, GateResult};
use git2::{Oid, Repository};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::calibrate::CalibrationDraft;
use crate::synth::{AnalysisDraft, PrimitiveDraft, RuleDraft};
use crate::{durable, git, sanitize};

// ─── Errors ──────────────────────────────────────────────────────────────────────────────────────

/// A coded queue problem about one file, with what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueError {
    pub code: &'static str,
    pub path: PathBuf,
    pub message: String,
    pub help: String,
}

impl QueueError {
    pub fn new(code: &'static str, path: impl Into<PathBuf>, message: impl Into<String>, help: impl Into<String>) -> QueueError {
        QueueError { code, path: path.into(), message: message.into(), help: help.into() }
    }
}

impl fmt::Display for QueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The path and message may hold text from a crafted file: escaped before printing.
        write!(f, "[{}] {}: {}\n  help: {}", self.code, sanitize::line(&self.path.display().to_string()), sanitize::line(&self.message), self.help)
    }
}

impl std::error::Error for QueueError {}

impl From<QueueError> for String {
    fn from(e: QueueError) -> String {
        e.to_string()
    }
}

// ─── Records ─────────────────────────────────────────────────────────────────────────────────────

/// The read limit of a record file: the largest in `proposals/` is 23 KB, and what a record
/// quotes from drafts is bounded (notes 4,000 characters, code 64 KiB), so 4 MiB is ample.
pub const MAX_RECORD_BYTES: u64 = 4 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Rule,
    Primitive,
    Calibration,
    /// A new verifier fact or analysis: no predicate over today's facts separates the bucket.
    Analysis,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Rule => "rule",
            Kind::Primitive => "primitive",
            Kind::Calibration => "calibration",
            Kind::Analysis => "analysis",
        }
    }
    fn prefix(self) -> &'static str {
        match self {
            Kind::Rule => "r",
            Kind::Primitive => "p",
            Kind::Calibration => "c",
            Kind::Analysis => "a",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Queued,
    Accepted,
    Rejected,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Queued => "queued",
            Status::Accepted => "accepted",
            Status::Rejected => "rejected",
        }
    }
}

/// A review decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Review {
    /// `accepted` or `rejected`.
    pub action: Status,
    /// The reviewer's note (`--why` of a rejection).
    pub note: String,
    /// The main branch commit it was reviewed against.
    pub main: String,
    /// The commit main moved to (accepted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<String>,
    /// `fast-forward` or `merge commit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub how: Option<String>,
    /// The evidence ids the decision saw (a rejected bucket is proposed again only with others).
    pub evidence: Vec<String>,
    /// The gates re-run on current main at acceptance.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<GateResult>,
}

/// One proposal: `proposals/<id>.toml`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub id: String,
    pub kind: Kind,
    pub status: Status,
    pub title: String,
    pub branch: String,
    pub base: String,
    pub commit: String,
    pub bucket: String,
    pub signature: String,
    pub construct: String,
    pub evidence: Vec<String>,
    pub programs: Vec<String>,
    pub seed: u64,
    pub changelog: String,
    /// `None` until the gates ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gates_passed: Option<bool>,
    pub created_by: String,
    /// For a rule that widens an accepted one: the accepted proposal's id (its rule file is
    /// replaced by this one's; `widen.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub widens: Option<String>,
    /// Notes on how it was made (skipped programs, LLM drafting, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<RuleDraft>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primitive: Option<PrimitiveDraft>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<CalibrationDraft>,
    /// A proposal for a new fact: what is missing and what it must separate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analysis: Option<AnalysisDraft>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<GateResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<Review>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Review>,
}

impl Record {
    pub fn gate_report(&self) -> GateReport {
        GateReport::new(self.gates.clone())
    }
}

/// The queue folder of a working directory.
pub fn queue_dir(workdir: &Path) -> PathBuf {
    workdir.join("proposals")
}

/// The id of the proposal of `kind` for `key` (a bucket id, or an op name for primitives).
pub fn proposal_id(kind: Kind, key: &str) -> String {
    let h = Sha256::digest(format!("{}\n{key}", kind.as_str()).as_bytes());
    let hex: String = h.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("{}-{hex}", kind.prefix())
}

/// Whether `id` is exactly what [`proposal_id`] makes: `r-`, `p-`, `c-` or `a-` and 8 lower-case hex
/// digits.
pub fn is_valid_id(id: &str) -> bool {
    let b = id.as_bytes();
    b.len() == 10 && matches!(b[0], b'r' | b'p' | b'c' | b'a') && b[1] == b'-' && b[2..].iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

/// The file of record `id` in `dir`; an id that is not valid is `Q001` (it would name a file
/// outside the queue).
pub fn record_path(dir: &Path, id: &str) -> Result<PathBuf, QueueError> {
    if !is_valid_id(id) {
        return Err(QueueError::new(
            "Q001",
            dir,
            format!("`{id}` is not a proposal id (r-, p- or c- and 8 hex digits)"),
            "a record with this id was crafted or damaged; nothing was written — delete the file, or run `cake-evolve-compiler queue rebuild` to restore the queue from its branches",
        ));
    }
    Ok(dir.join(format!("{id}.toml")))
}

/// The branch of a record must be its own: `evolve/<kind>/<id>` then nothing or `-<slug>`.
fn branch_is_own(r: &Record) -> bool {
    let own = format!("evolve/{}/{}", r.kind.as_str(), r.id);
    let Some(rest) = r.branch.strip_prefix(&own) else { return false };
    let slug_ok = rest.is_empty() || rest.strip_prefix('-').is_some_and(sanitize::is_safe_name);
    slug_ok && git2::Reference::is_valid_name(&format!("refs/heads/{}", r.branch))
}

fn is_commit_id(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|c| c.is_ascii_hexdigit())
}

/// Check what a record says about itself against where it was found (`file_id`: the id its
/// file name gives, when read from a file).
pub fn validate(r: &Record, path: &Path, file_id: Option<&str>) -> Result<(), QueueError> {
    if !is_valid_id(&r.id) {
        return Err(QueueError::new(
            "Q001",
            path,
            format!("the record's id `{}` is not a proposal id (r-, p- or c- and 8 hex digits)", sanitize::line_bounded(&r.id, 40)),
            "the record was crafted or damaged: it is skipped; delete it, or run `cake-evolve-compiler queue rebuild` to restore it from its branch",
        ));
    }
    if let Some(f) = file_id {
        if f != r.id {
            return Err(QueueError::new(
                "Q003",
                path,
                format!("the record says it is `{}` but its file is named `{f}.toml`", r.id),
                "a record must be in `proposals/<id>.toml`: it is skipped; rename or delete it, or run `cake-evolve-compiler queue rebuild`",
            ));
        }
    }
    if !branch_is_own(r) {
        return Err(QueueError::new(
            "Q003",
            path,
            format!("the record's branch `{}` is not `evolve/{}/{}-…`", sanitize::line_bounded(&r.branch, 120), r.kind.as_str(), r.id),
            "a record may only name its own proposal branch: it is skipped; delete it, or run `cake-evolve-compiler queue rebuild`",
        ));
    }
    if !is_commit_id(&r.base) || !is_commit_id(&r.commit) {
        return Err(QueueError::new("Q003", path, "the record's `base` or `commit` is not a 40-digit commit id", "the record is damaged: it is skipped; run `cake-evolve-compiler queue rebuild`"));
    }
    Ok(())
}

/// The good records of a queue folder and the problems met reading it.
#[derive(Debug, Default)]
pub struct QueueScan {
    /// Sorted by id.
    pub records: Vec<Record>,
    pub problems: Vec<QueueError>,
}

impl QueueScan {
    /// The problems as coded warning lines.
    pub fn warnings(&self) -> Vec<String> {
        self.problems.iter().map(|p| format!("warning{}", p)).collect()
    }
}

/// Read every `*.toml` of the queue folder: bad files are reported by name and skipped (one
/// unreadable record never hides the others). Only regular files are opened (a FIFO named like
/// a record would block).
pub fn scan(dir: &Path) -> QueueScan {
    let mut out = QueueScan::default();
    let Ok(rd) = std::fs::read_dir(dir) else { return out };
    let mut paths: Vec<PathBuf> = rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "toml")).collect();
    paths.sort();
    for p in paths {
        match load(&p) {
            Ok(r) => out.records.push(r),
            Err(e) => out.problems.push(e),
        }
    }
    out.records.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// Every good record of the queue, sorted by id (see [`scan`] for the problems).
pub fn load_all(dir: &Path) -> Result<Vec<Record>, String> {
    Ok(scan(dir).records)
}

/// One record file, checked ([`validate`]).
pub fn load(path: &Path) -> Result<Record, QueueError> {
    let unreadable = |m: String| QueueError::new("Q002", path, m, "the record is skipped; fix or delete the file, or run `cake-evolve-compiler queue rebuild` to restore it from its branch");
    // Only a regular file within the limit: not a symlink out of the queue, not a FIFO (it would block).
    let bytes = cake::store::read_regular(path, MAX_RECORD_BYTES).map_err(|e| unreadable(e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|_| unreadable("not UTF-8 text".into()))?;
    let r = parse(&text).map_err(|e| unreadable(format!("not a proposal record: {e}")))?;
    let file_id = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    validate(&r, path, file_id.as_deref())?;
    Ok(r)
}

fn parse(text: &str) -> Result<Record, String> {
    toml::from_str(text).map_err(|e| e.to_string())
}

/// Find a record by id (or a unique prefix).
pub fn find(dir: &Path, id: &str) -> Result<(PathBuf, Record), String> {
    if id.is_empty() || id.len() > 10 || !id.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-') {
        return Err(record_path(dir, id).err().map(String::from).unwrap_or_default());
    }
    let scan = scan(dir);
    let hits: Vec<&Record> = scan.records.iter().filter(|r| r.id == id || r.id.starts_with(id)).collect();
    match hits.as_slice() {
        [r] => Ok((dir.join(format!("{}.toml", r.id)), (*r).clone())),
        [] => {
            // The proposal may be in a record that could not be read: say so, not "no proposal".
            let unreadable: Vec<String> = scan.problems.iter().filter(|p| p.path.file_stem().is_some_and(|s| s.to_string_lossy().starts_with(id))).map(|p| p.to_string()).collect();
            if unreadable.is_empty() {
                Err(QueueError::new("Q007", dir, format!("no proposal `{id}`"), "`cake-evolve-compiler list` shows the queue").into())
            } else {
                Err(unreadable.join("\n"))
            }
        }
        _ => Err(QueueError::new("Q007", dir, format!("`{id}` matches several proposals: {}", hits.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join(", ")), "give more of the id").into()),
    }
}

/// The record as written: a comment line, then TOML.
pub fn render(r: &Record) -> Result<String, String> {
    let text = toml::to_string_pretty(r).map_err(|e| format!("cannot write the record {}: {e}", r.id))?;
    Ok(format!("# Proposal record written by cake-evolve-compiler; review with `cake-evolve-compiler show {}`.\n{text}", r.id))
}

/// Write `proposals/<id>.toml` atomically. The file name comes from the validated id, so the
/// write stays in the queue folder whatever the record says.
pub fn save(dir: &Path, r: &Record) -> Result<PathBuf, String> {
    let path = record_path(dir, &r.id)?;
    validate(r, &path, None)?;
    std::fs::create_dir_all(dir).map_err(|e| QueueError::new("Q004", dir, format!("cannot create: {e}"), "check the permissions of proposals/"))?;
    let text = render(r)?;
    durable::write_atomic(&path, text.as_bytes()).map_err(|e| QueueError::new("Q004", &path, format!("cannot write: {e}"), "check the permissions and free space of proposals/"))?;
    Ok(path)
}

/// The path of a record inside a proposal branch's tree.
pub fn tree_path(id: &str) -> String {
    format!("proposals/{id}.toml")
}

/// Save the record in the queue folder and on its branch: the branch becomes the proposal
/// commit plus one record commit holding `proposals/<id>.toml` (replaced at every save), so the
/// queue can be rebuilt from branches ([`rebuild`]). A branch that is gone keeps none.
pub fn publish(repo: &Repository, dir: &Path, r: &Record) -> Result<PathBuf, String> {
    let path = save(dir, r)?;
    let commit = Oid::from_str(&r.commit).map_err(|e| e.message().to_string())?;
    if git::branch_target(repo, &r.branch).is_some() {
        let text = render(r)?;
        git::commit_record(repo, &r.branch, commit, &tree_path(&r.id), text.as_bytes(), &r.id)
            .map_err(|e| QueueError::new("Q004", &path, format!("cannot commit the record on `{}`: {e}", r.branch), "the record file is saved; run the command again to commit it on its branch"))?;
    }
    Ok(path)
}

/// The record a proposal branch carries, checked against the branch (`None`: the branch has no
/// record commit, as branches made before records were committed).
pub fn from_branch(repo: &Repository, branch: &str) -> Result<Option<Record>, QueueError> {
    let at = PathBuf::from(format!("refs/heads/{branch}"));
    let Some((proposal, head)) = git::record_commit(repo, branch) else { return Ok(None) };
    let Some(id) = branch.split('/').nth(2).and_then(|s| s.get(..10)) else { return Ok(None) };
    let bad = |m: String| QueueError::new("Q003", &at, m, "the branch's record was crafted or damaged: delete the branch or propose again");
    let text = git::read_text(repo, head, &tree_path(id)).map_err(&bad)?.ok_or_else(|| bad(format!("the record commit has no {}", tree_path(id))))?;
    let r = parse(&text).map_err(|e| bad(format!("not a proposal record: {e}")))?;
    validate(&r, &at, Some(id))?;
    if r.branch != branch || r.commit != proposal.to_string() {
        return Err(bad(format!("the record names branch `{}` at {}, not this branch at {proposal}", sanitize::line_bounded(&r.branch, 120), r.commit)));
    }
    Ok(Some(r))
}

/// What [`rebuild`] did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Rebuilt {
    /// Records written from their branch (missing or unreadable here).
    pub restored: Vec<String>,
    /// Records already here and readable, left as they are.
    pub kept: Vec<String>,
    /// Branches without a usable record, and why.
    pub skipped: Vec<String>,
}

/// Re-create every missing or unreadable record of the queue from the record its proposal
/// branch carries. A readable record in the folder is kept (it is the newer one: it is
/// written before the branch).
pub fn rebuild(repo: &Repository, dir: &Path) -> Result<Rebuilt, String> {
    let here = scan(dir);
    let mut out = Rebuilt::default();
    for branch in git::branches_under(repo, "evolve/")? {
        match from_branch(repo, &branch) {
            Ok(Some(r)) => {
                if here.records.iter().any(|h| h.id == r.id) {
                    out.kept.push(r.id);
                } else {
                    save(dir, &r)?;
                    out.restored.push(r.id);
                }
            }
            Ok(None) => out.skipped.push(format!("{}: no record commit (made before records were committed on branches)", sanitize::line(&branch))),
            Err(e) => out.skipped.push(e.to_string()),
        }
    }
    Ok(out)
}
