//! The seeded failure benchmark of compiler evolution (issue 12, `evolution/benchmark/`): does
//! the engine learn rules that generalize, or does it memorize?
//!
//! Each class is a bug class whose verifier rules are removed from the base (an ablation); its
//! programs were run on the H200 with the verifier bypassed and the run records imported into the
//! class's evidence stores (`scripts/device-evolution-bench.sh`). For each class the pipeline is:
//!
//! 1. [`ablate::make_ablated_repo`]: a git repository of this checkout's data, less the class's rules;
//! 2. `propose` (mine → synthesize → gates, the generalization gate among them) from the class's
//!    training evidence only, with its boundary variants' labels;
//! 3. `accept` every proposal whose gates passed (the gates run again on accept);
//! 4. [`evaluate`]: the accepted rules, read from the ablated repository's rule files (no
//!    rebuild), on the held-out programs (caught = rejected with an accepted rule's code, before
//!    compilation), on the probe set of legal programs just inside the boundary (all must be
//!    accepted), and on every accepted corpus program and example (false positives).
//!
//! Held-out and probe programs are never shown to the engine: they are not in the training store.

pub mod ablate;
pub mod classes;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use cake_merge_gates::{GateOptions, Tree};
use serde::{Deserialize, Serialize};

use crate::queue::{self, ProposeOptions, Status};
use crate::review::{self, Accepted};
pub use classes::{load_classes, Class};

/// What one class came to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassOutcome {
    pub name: String,
    pub ablate: Vec<String>,
    pub gpu: bool,
    /// Proposals made: `id code: when => require (gates passed | failed: gates)`.
    pub proposals: Vec<String>,
    /// Codes of the accepted rules.
    pub accepted: Vec<String>,
    /// Rule proposals whose generalization gate failed.
    pub rejected_by_generalization: Vec<String>,
    /// Buckets skipped, with the reason.
    pub skipped: Vec<String>,
    pub train: Tally,
    pub heldout: Tally,
    pub probe: Tally,
    /// Accepted corpus programs and examples an accepted rule fires on.
    pub false_positives: Vec<String>,
    /// Every training program rejected by an accepted rule.
    pub learned: bool,
}

/// Programs of one set: how many, how many the accepted rules reject (for probes: accept), and
/// which not.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    pub total: usize,
    pub hit: usize,
    pub missed: Vec<String>,
}

/// The whole benchmark.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    pub classes: Vec<ClassOutcome>,
}

impl BenchReport {
    pub fn learned(&self) -> usize {
        self.classes.iter().filter(|c| c.learned).count()
    }
    pub fn heldout(&self) -> (usize, usize) {
        (self.classes.iter().map(|c| c.heldout.hit).sum(), self.classes.iter().map(|c| c.heldout.total).sum())
    }
    pub fn probes(&self) -> (usize, usize) {
        (self.classes.iter().map(|c| c.probe.hit).sum(), self.classes.iter().map(|c| c.probe.total).sum())
    }
    pub fn false_positives(&self) -> usize {
        self.classes.iter().map(|c| c.false_positives.len()).sum()
    }
    pub fn rejected_by_generalization(&self) -> usize {
        self.classes.iter().map(|c| c.rejected_by_generalization.len()).sum()
    }

    /// The report as a table (one line per class, then the totals and the targets).
    pub fn table(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!("{:<22} {:<16} {:>7} {:>9} {:>7} {:>4} {:>4}  accepted\n", "class", "ablates", "train", "held-out", "probes", "FP", "gen-"));
        for c in &self.classes {
            let t = |x: &Tally| format!("{}/{}", x.hit, x.total);
            s.push_str(&format!(
                "{:<22} {:<16} {:>7} {:>9} {:>7} {:>4} {:>4}  {}\n",
                c.name,
                c.ablate.join(","),
                t(&c.train),
                t(&c.heldout),
                t(&c.probe),
                c.false_positives.len(),
                c.rejected_by_generalization.len(),
                if c.accepted.is_empty() { "-".to_string() } else { c.accepted.join(",") }
            ));
        }
        let (h, ht) = self.heldout();
        let (p, pt) = self.probes();
        s.push_str(&format!(
            "classes learned {}/{} (target >= 7/8); held-out caught {h}/{ht} ({:.0}%, target >= 90%); false positives {} (target 0); probes accepted {p}/{pt}; rules rejected by the generalization gate {}\n",
            self.learned(),
            self.classes.len(),
            if ht == 0 { 0.0 } else { 100.0 * h as f64 / ht as f64 },
            self.false_positives(),
            self.rejected_by_generalization()
        ));
        s
    }
}

/// How to run the benchmark.
#[derive(Clone)]
pub struct BenchOptions {
    /// The checkout whose compiler data is ablated (its rules, catalog, targets, corpus).
    pub checkout: PathBuf,
    /// The benchmark folder (`evolution/benchmark`).
    pub benchmark: PathBuf,
    /// Where the ablated repositories go (one per class).
    pub work: PathBuf,
    /// Only these classes (empty: all).
    pub only: Vec<String>,
    pub gate: GateOptions,
    pub seed: u64,
}

/// Run every class.
pub fn run(opts: &BenchOptions, mut progress: impl FnMut(&str)) -> Result<BenchReport, String> {
    let classes = load_classes(&opts.benchmark)?;
    let mut report = BenchReport::default();
    for class in classes.iter().filter(|c| opts.only.is_empty() || opts.only.contains(&c.name)) {
        progress(&format!("class {} (ablates {})", class.name, class.ablate.join(", ")));
        report.classes.push(run_class(opts, class, &mut progress)?);
    }
    Ok(report)
}

/// One class: ablate, propose from its training evidence, accept what passes, evaluate.
pub fn run_class(opts: &BenchOptions, class: &Class, progress: &mut impl FnMut(&str)) -> Result<ClassOutcome, String> {
    let repo = opts.work.join(&class.name);
    if repo.exists() {
        std::fs::remove_dir_all(&repo).map_err(|e| format!("cannot clear {}: {e}", repo.display()))?;
    }
    ablate::make_ablated_repo(&opts.checkout, &repo, &class.ablate)?;
    let dir = opts.benchmark.join(&class.name);
    let mut out = ClassOutcome { name: class.name.clone(), ablate: class.ablate.clone(), gpu: class.gpu, ..ClassOutcome::default() };
    let train_store = dir.join("evidence/train");
    if !train_store.is_dir() {
        return Err(format!("E802: class `{}` has no training evidence at {}: run scripts/device-evolution-bench.sh on the H200 and unpack its stores", class.name, train_store.display()));
    }
    let mut p = ProposeOptions::new(&repo, &train_store);
    p.seed = opts.seed;
    p.gate = opts.gate.clone();
    p.progress = false;
    p.quiet = true;
    p.llm = None;
    let labels = dir.join("evidence/variants");
    if labels.is_dir() {
        p.labels = Some(labels);
    }
    let summary = queue::propose(&p)?;
    for o in &summary.outcomes {
        if o.what == "skipped" {
            out.skipped.push(format!("{}: {}", o.bucket, o.detail));
        }
    }
    let qdir = queue::queue_dir(&repo);
    let records = queue::load_all(&qdir).unwrap_or_default();
    for r in records.iter().filter(|r| r.kind == queue::Kind::Rule && r.status == Status::Queued) {
        let Some(d) = &r.rule else { continue };
        let failed: Vec<&str> = r.gates.iter().filter(|g| g.status == cake_merge_gates::GateStatus::Fail).map(|g| g.gate.as_str()).collect();
        out.proposals.push(format!(
            "{} {}: {}{} ({})",
            r.id,
            d.code,
            d.when.as_ref().map(|w| format!("{w} => ")).unwrap_or_default(),
            d.require,
            if failed.is_empty() { "gates passed".to_string() } else { format!("failed: {}", failed.join(", ")) }
        ));
        if failed.contains(&"generalization") {
            out.rejected_by_generalization.push(format!("{} {}", d.code, d.require));
        }
        if r.gates_passed == Some(true) {
            progress(&format!("  accept {} {}: {}", r.id, d.code, d.require));
            match review::accept(&repo, &r.id, "seeded benchmark", None, opts.gate.clone())? {
                Accepted::Merged { .. } => out.accepted.push(d.code.clone()),
                Accepted::GatesFailed { .. } => out.proposals.push(format!("{}: gates failed again on accept", r.id)),
            }
        }
    }
    let accepted: BTreeSet<String> = out.accepted.iter().cloned().collect();
    let tree = Tree::new(&repo);
    let fe = cake_merge_gates::corpus_gate::frontend_for(&tree)?;
    let rejects = |source: &str| -> bool {
        fe.check(source).diagnostics.iter().any(|d| d.severity == cake::diag::Severity::Error && accepted.contains(d.code.as_str()))
    };
    out.train = tally(&dir.join("train"), |s| rejects(s))?;
    out.heldout = tally(&dir.join("heldout"), |s| rejects(s))?;
    out.probe = tally(&dir.join("probe"), |s| !rejects(s))?;
    out.learned = !accepted.is_empty() && out.train.total > 0 && out.train.hit == out.train.total;
    if !accepted.is_empty() {
        out.false_positives = false_positives(&opts.checkout, &fe, &accepted)?;
    }
    Ok(out)
}

fn cake_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "cake")).collect()).unwrap_or_default();
    v.sort();
    v
}

fn tally(dir: &Path, hit: impl Fn(&str) -> bool) -> Result<Tally, String> {
    let mut t = Tally::default();
    for p in cake_files(dir) {
        let src = std::fs::read_to_string(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        t.total += 1;
        if hit(&src) {
            t.hit += 1;
        } else {
            t.missed.push(p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default());
        }
    }
    Ok(t)
}

/// Accepted corpus programs and examples of `checkout` that a rule of `accepted` fires on.
fn false_positives(checkout: &Path, fe: &cake::corpus::tiers::Frontend, accepted: &BTreeSet<String>) -> Result<Vec<String>, String> {
    let corpus = cake::corpus::Corpus::load(checkout.join("corpus")).map_err(|e| format!("cannot read the corpus: {e}"))?;
    let mut out = Vec::new();
    let fires = |src: &str| fe.check(src).diagnostics.iter().any(|d| accepted.contains(d.code.as_str()));
    for case in corpus.cases.iter().filter(|c| c.manifest.expect.verdict == cake::corpus::Verdict::Accept) {
        if fires(&case.source) {
            out.push(case.id.clone());
        }
    }
    for p in cake_files(&checkout.join("examples")) {
        if let Ok(src) = std::fs::read_to_string(&p) {
            if fires(&src) {
                out.push(format!("examples/{}", p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()));
            }
        }
    }
    Ok(out)
}
