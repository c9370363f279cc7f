//! `cake-evolve-compiler review`: the queue as web pages, served on 127.0.0.1 ([`server`]) or
//! written as static files (`--html DIR`, [`Site::write_static`]). Read-only: accept and reject
//! stay commands, which each proposal page prints to copy. The pages are the index (the queue)
//! and one per proposal: the gate table, what was synthesized with the values around each
//! constant, the figures ([`figures`]), the evidence with the failing lines marked
//! ([`evidence`]), the facts a rule reads on failing and accepted programs ([`values`]) and the
//! side-by-side diff ([`html`]).

pub mod evidence;
pub mod figures;
pub mod html;
pub mod server;
pub mod values;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::queue::{self, Record};
use crate::store::EvidenceStore;
use crate::{git, records};

/// Where the pages come from: a checkout's queue and, if given, an evidence store. Each page is
/// made from the files as they are when it is asked for.
pub struct Site {
    repo: PathBuf,
    evidence: Option<PathBuf>,
    /// The checkout's corpus facts, loaded on the first rule page (a few seconds) and kept.
    base: OnceLock<Result<crate::synth::rule::Base, String>>,
}

impl Site {
    /// The site of the checkout containing `repo`; `evidence` is the store to show records from
    /// (a folder that is not a store is reported on each page, not an error).
    pub fn new(repo: &Path, evidence: Option<&Path>) -> Result<Site, String> {
        git::open(repo)?;
        Ok(Site { repo: repo.to_path_buf(), evidence: evidence.map(Path::to_path_buf), base: OnceLock::new() })
    }

    fn queue(&self) -> Result<(git2::Repository, queue::QueueScan), String> {
        let repo = git::open(&self.repo)?;
        let scan = queue::scan(&queue::queue_dir(&git::workdir(&repo)?));
        Ok((repo, scan))
    }

    /// The queue page.
    pub fn index(&self) -> Result<String, String> {
        let (_, scan) = self.queue()?;
        Ok(html::index(&scan.records, &scan.warnings()))
    }

    /// The page of proposal `id` (a full, valid id); `None` when the queue has no such record.
    pub fn proposal(&self, id: &str) -> Result<Option<String>, String> {
        if !records::is_valid_id(id) {
            return Ok(None);
        }
        let (repo, scan) = self.queue()?;
        let Some(r) = scan.records.iter().find(|r| r.id == id) else { return Ok(None) };
        Ok(Some(self.render(&repo, r)?))
    }

    fn render(&self, repo: &git2::Repository, r: &Record) -> Result<String, String> {
        let oid = |s: &str| git2::Oid::from_str(s).map_err(|e| format!("`{s}` is not a commit id: {}", e.message()));
        let store = self.evidence.as_ref().and_then(|d| EvidenceStore::open_existing(d).ok());
        let mut ev = evidence::gather(repo, store.as_ref(), r);
        // A record whose commits this clone lacks (a copied record, a pruned branch) still shows.
        let diff = match oid(&r.base).and_then(|b| Ok((b, oid(&r.commit)?))).and_then(|(b, c)| git::diff(repo, b, c)) {
            Ok(d) => d,
            Err(e) => {
                ev.notes.push(format!("the diff is not shown: {e}"));
                Vec::new()
            }
        };
        let plots = figures::figures(r, &diff);
        let mut facts = None;
        if let Some(d) = &r.rule {
            let base = self.base.get_or_init(|| crate::synth::rule::Base::load(git::workdir(repo)?));
            // The lines the rule's own findings marked, per failing program shown.
            let lines: Vec<Vec<usize>> = ev.programs.iter().map(|m| m.findings.iter().filter(|f| f.code == d.code).map(|f| f.line).collect()).collect();
            match base.as_ref().map_err(String::clone).and_then(|b| values::fact_values(b, d, &lines)) {
                Ok(v) => facts = Some(v),
                Err(e) => ev.notes.push(format!("the facts around the rule are not shown: {e}")),
            }
        }
        Ok(html::proposal(r, &html::Extras { diff: &diff, evidence: &ev, plots: &plots, facts: facts.as_ref() }))
    }

    /// Write `index.html` and `proposal/<id>.html` for every record under `dir`; returns the
    /// files written.
    pub fn write_static(&self, dir: &Path) -> Result<Vec<PathBuf>, String> {
        let (repo, scan) = self.queue()?;
        let pages = dir.join("proposal");
        std::fs::create_dir_all(&pages).map_err(|e| format!("{}: cannot create: {e}", pages.display()))?;
        let mut written = Vec::new();
        let mut write = |path: PathBuf, text: String| -> Result<(), String> {
            std::fs::write(&path, text).map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
            written.push(path);
            Ok(())
        };
        write(dir.join("index.html"), html::index(&scan.records, &scan.warnings()))?;
        for r in &scan.records {
            // Ids were validated when the record was read (records::validate): a safe file name.
            write(pages.join(format!("{}.html", r.id)), self.render(&repo, r)?)?;
        }
        Ok(written)
    }
}
