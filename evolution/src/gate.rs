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
//!
//! A rule proposal is also judged by the `generalization` gate
//! (`cake_merge_gates::generalization_gate`), on the proposal's checkout, with what its record
//! says the rule was learned from: the failing programs, the labelled variants and the sources of
//! its constants. Its leave-one-out relearns the rule ([`crate::synth::relearn`]) on the tree of
//! the record's base commit — the data the rule was learned on — at `propose` and at `accept`
//! alike, so a rule accepted since on main cannot hide the programs from the search.
//!
//! A proposal for a new fact (`synth::analysis`) is judged by the `analysis` gate
//! (`cake_merge_gates::analysis_gate`), which fails until the compiler computes the fact.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use cake::corpus::results::GateResults;
use cake_merge_gates::generalization_gate::{self, Program};
use cake_merge_gates::{analysis_gate, corpus_gate, run_gates, GateOptions, GateReport, GateResult, Tree};
use git2::{Oid, Repository};

use crate::git;
use crate::records::Record;
use crate::synth::{self, BucketInfo};

/// Exports commits into temporary folders and runs the gates, caching base trees and their
/// corpus results.
pub struct Gater {
    pub opts: GateOptions,
    tmp: tempfile::TempDir,
    trees: HashMap<Oid, PathBuf>,
    baselines: HashMap<Oid, Option<Arc<GateResults>>>,
    /// The compiler data of base commits rules are relearned on (loaded once per commit).
    bases: HashMap<Oid, Arc<synth::Base>>,
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
        Ok(Gater { opts, tmp, trees: HashMap::new(), baselines: HashMap::new(), bases: HashMap::new() })
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
        self.gate_with(repo, base, head, None)
    }

    /// Gate the commit `head` of proposal `rec` against `base`: every gate, and for a rule
    /// the `generalization` gate too.
    pub fn gate_record(&mut self, repo: &Repository, base: Oid, head: Oid, rec: &Record) -> Result<GateReport, String> {
        self.gate_with(repo, base, head, Some(rec))
    }

    fn gate_with(&mut self, repo: &Repository, base: Oid, head: Oid, rec: Option<&Record>) -> Result<GateReport, String> {
        // The tree the rule was learned on, for relearning.
        let learn = match rec.filter(|r| r.rule.is_some()) {
            Some(r) => {
                let at = Oid::from_str(&r.base).map_err(|e| format!("record {}: base `{}` is not a commit id: {}", r.id, r.base, e.message()))?;
                Some(self.learn_base(repo, at)?)
            }
            None => None,
        };
        let base_dir = self.checkout(repo, base)?;
        let head_dir = self.checkout(repo, head)?;
        let changed = git::changed_paths(&git::diff(repo, base, head)?);
        if !self.baselines.contains_key(&base) {
            let r = corpus_gate::run_corpus(&Tree::new(&base_dir), &self.opts).ok().map(Arc::new);
            self.baselines.insert(base, r);
        }
        let mut opts = self.opts.clone();
        opts.baseline = self.baselines.get(&base).cloned().flatten();
        let mut report = run_gates(&head_dir, &base_dir, &changed, &opts);
        if let (Some(r), Some(learn)) = (rec, &learn) {
            let mut gates = report.gates;
            gates.push(generalization(&head_dir, learn, r));
            report = GateReport::new(gates);
        }
        if let Some(a) = rec.and_then(|r| r.analysis.as_ref()) {
            let mut gates = report.gates;
            gates.push(analysis_gate::gate(&analysis_gate::Input { fact: &a.fact, construct: &a.construct, why: &a.why, skeleton: &a.skeleton }));
            report = GateReport::new(gates);
        }
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

    fn learn_base(&mut self, repo: &Repository, at: Oid) -> Result<Arc<synth::Base>, String> {
        if let Some(b) = self.bases.get(&at) {
            return Ok(b.clone());
        }
        let dir = self.checkout(repo, at)?;
        let b = Arc::new(synth::Base::load(&dir).map_err(|e| format!("the compiler data of {} does not load: {e}", synth::short(&at.to_string())))?);
        self.bases.insert(at, b.clone());
        Ok(b)
    }
}

/// The `generalization` gate of rule proposal `r` on its checkout `tree`, relearning on `learn`.
pub fn generalization(tree: &std::path::Path, learn: &synth::Base, r: &Record) -> GateResult {
    let Some(d) = &r.rule else {
        return GateResult::na("generalization", generalization_gate::TITLE, "not a rule proposal");
    };
    let programs: Vec<synth::Program> = d.failing_programs.iter().zip(&d.failing_sources).map(|(h, s)| synth::Program { hash: h.clone(), source: s.clone() }).collect();
    if programs.len() != d.failing_programs.len() || programs.iter().any(|p| p.source.is_empty()) {
        return GateResult::fail(
            "generalization",
            generalization_gate::TITLE,
            "not run: the record does not keep the sources of the programs the rule was learned from",
            vec!["propose the bucket again with this version of cake-evolve-compiler (reject this proposal first)".into()],
        );
    }
    let named: Vec<Program> = programs.iter().map(|p| Program { id: format!("program {}", synth::short(&p.hash)), source: p.source.clone() }).collect();
    let bucket = BucketInfo {
        id: r.bucket.clone(),
        signature: r.signature.clone(),
        // Relearned on the rule's own construct (the bucket's may be the miner's `kernel` fallback,
        // which one program never gets past).
        construct: Some(d.applies_to.clone()),
        op: None,
        evidence_ids: r.evidence.clone(),
        program_hashes: r.programs.clone(),
        count: r.programs.len(),
        score: 0.0,
    };
    let relearn = |i: usize| synth::relearn(learn, &bucket, &programs, &d.variants, &d.code, r.seed, i);
    let path = d.rule_path();
    let input = generalization_gate::Input { rule_path: &path, constants: &d.constants, learned_from: &named, variants: &d.variants, relearn: &relearn };
    generalization_gate::gate(&Tree::new(tree), &input)
}
