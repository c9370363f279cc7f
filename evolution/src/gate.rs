//! Gating a proposal commit in an isolated checkout.
//!
//! A proposal is data (a rule file, a catalog entry, a calibration file, corpus cases, a
//! CHANGELOG line), and the compiler reads rules, the catalog and the target table from
//! directories at run time. So the gates do not build anything: each commit (the proposal, and
//! the commit it is compared with) is exported from the object database into its own temporary
//! folder — never the user's working copy — and `cake_merge_gates::run_gates` runs the current
//! `cake` library in-process over that folder's `compiler/rules`, `compiler/catalog`,
//! `compiler/targets.toml` and `corpus/`. A proposal that changes Rust would need its worktree
//! built with cargo; that is not supported yet, and its `data-only` gate fails saying so.
//!
//! The base tree's corpus results are computed once per base commit and reused for every
//! proposal on it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use cake::corpus::results::GateResults;
use cake_merge_gates::{corpus_gate, run_gates, GateOptions, GateReport, Tree};
use git2::{Oid, Repository};

use crate::git;

/// Exports commits into temporary folders and runs the gates, caching base trees and their
/// corpus results.
pub struct Gater {
    pub opts: GateOptions,
    tmp: tempfile::TempDir,
    trees: HashMap<Oid, PathBuf>,
    baselines: HashMap<Oid, Option<Arc<GateResults>>>,
}

/// Where gate checkouts live: `<git common dir>/cake-evolve/tmp/`, beside the queue lock, so a
/// killed gate's checkout is found and reclaimed by the next run instead of staying in $TMPDIR.
pub fn checkouts_dir(repo: &Repository) -> PathBuf {
    repo.commondir().join("cake-evolve").join("tmp")
}

impl Gater {
    /// Callers hold the queue lock (propose, accept, calibrate), so every checkout left under
    /// [`checkouts_dir`] belongs to a run that died: it is removed first.
    pub fn new(opts: GateOptions, repo: &Repository) -> Result<Gater, String> {
        let root = checkouts_dir(repo);
        if let Ok(entries) = std::fs::read_dir(&root) {
            for e in entries.flatten() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        std::fs::create_dir_all(&root).map_err(|e| format!("{}: cannot create the gate checkouts folder: {e}", root.display()))?;
        let tmp = tempfile::Builder::new()
            .prefix("gate-")
            .tempdir_in(&root)
            .map_err(|e| format!("{}: cannot create a gate checkout folder: {e}", root.display()))?;
        Ok(Gater { opts, tmp, trees: HashMap::new(), baselines: HashMap::new() })
    }

    /// An isolated checkout of `commit` (exported once).
    pub fn checkout(&mut self, repo: &Repository, commit: Oid) -> Result<PathBuf, String> {
        if let Some(p) = self.trees.get(&commit) {
            return Ok(p.clone());
        }
        let dir = self.tmp.path().join(commit.to_string());
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        git::export_tree(repo, commit, &dir)?;
        self.trees.insert(commit, dir.clone());
        Ok(dir)
    }

    /// Gate `head` against `base` (both commits of `repo`).
    pub fn gate(&mut self, repo: &Repository, base: Oid, head: Oid) -> Result<GateReport, String> {
        let base_dir = self.checkout(repo, base)?;
        let head_dir = self.checkout(repo, head)?;
        let changed = git::changed_paths(&git::diff(repo, base, head)?);
        if !self.baselines.contains_key(&base) {
            let r = corpus_gate::run_corpus(&Tree::new(&base_dir), &self.opts).ok().map(Arc::new);
            self.baselines.insert(base, r);
        }
        let mut opts = self.opts.clone();
        opts.baseline = self.baselines.get(&base).cloned().flatten();
        let report = run_gates(&head_dir, &base_dir, &changed, &opts);
        // The proposal's checkout is not needed again (its base is).
        if let Some(dir) = self.trees.remove(&head) {
            if head != base && !self.baselines.contains_key(&head) {
                let _ = std::fs::remove_dir_all(dir);
            } else {
                self.trees.insert(head, dir);
            }
        }
        Ok(report)
    }
}
