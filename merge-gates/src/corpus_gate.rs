//! The corpus gate over a tree's data, in-process: the `cake` corpus gate
//! (`cake::corpus::gate`) run with the tree's rules, catalog and target table as the front end
//! and the tree's `corpus/` as the cases; the proposal's results are classified against the base
//! tree's results (regressed, new-fail → the gate fails).

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use cake::catalog::Catalog;
use cake::corpus::gate::{self as cgate, GateConfig};
use cake::corpus::report::{classify, Class};
use cake::corpus::results::GateResults;
use cake::corpus::tiers::{CompileBackend, CompileError, Frontend, PtxasFacts};
use cake::corpus::{Case, Corpus, Selection};
use cake::target::TargetTable;
use cake::verify::{RuleSet, Validated};

use crate::report::GateResult;
use crate::{GateOptions, Tree};

/// A tree's compiler data that does not load: the gates that need it fail, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum TreeDataError {
    #[error("{}: {message}", path.display())]
    Targets { path: std::path::PathBuf, message: String },
    #[error("op catalog: {message}")]
    Catalog { message: String },
    #[error("verifier rules: {0}")]
    Rules(#[from] cake::verify::rules::RuleError),
    #[error("cannot read the corpus at {}: {message}", path.display())]
    Corpus { path: std::path::PathBuf, message: String },
    #[error("{}: {message}", path.display())]
    ReadRule { path: std::path::PathBuf, message: String },
    /// The tree's rules with one file replaced (the generalization gate's relearned rule).
    #[error("{0}")]
    ReplacedRules(cake::verify::rules::RuleError),
}

// Callers in the evolution engine still carry `String` errors; `?` there keeps the message.
impl From<TreeDataError> for String {
    fn from(e: TreeDataError) -> String {
        e.to_string()
    }
}

/// What the corpus gate is, in the gate table.
pub const TITLE: &str = "corpus gate, every tier this machine has";

/// The front end a tree's data defines: its target table, its op catalog and **all** of its
/// verifier rules (the tree's `compiler/rules` replaces the rules built into this binary, so a
/// proposal's added rule, and only the tree's rules, are evaluated).
pub fn frontend_for(tree: &Tree) -> Result<Frontend, TreeDataError> {
    let mut fe = Frontend::default();
    let targets_path = tree.targets();
    let targets = if targets_path.is_file() {
        let t = TargetTable::load(&targets_path).map_err(|e| TreeDataError::Targets { path: targets_path.clone(), message: e.to_string() })?;
        fe.description.push(format!("targets from {}", targets_path.display()));
        Some(Arc::new(t))
    } else {
        None
    };
    if tree.catalog().is_dir() {
        let c = match &targets {
            Some(t) => Catalog::load_dir_with(tree.catalog(), t),
            None => Catalog::load_dir(tree.catalog()),
        }
        .map_err(|e| TreeDataError::Catalog { message: e.to_string() })?;
        fe.catalog = Some(Arc::new(c));
        fe.description.push(format!("op catalog from {}", tree.catalog().display()));
    }
    fe.targets = targets;
    if tree.rules().is_dir() {
        let rules = RuleSet::load_dir(tree.rules())?;
        fe.description.push(format!("verifier rules from {} ({} files)", tree.rules().display(), rules.len()));
        let rules = Arc::new(rules);
        fe.verifier = Some(Arc::new(move |m, t| cake::verify::verify_with(m, t, &rules)));
    }
    Ok(fe)
}

/// Run the corpus of `tree` with the tree's front end; `Err` when the data does not load.
pub fn run_corpus(tree: &Tree, opts: &GateOptions) -> Result<GateResults, TreeDataError> {
    let fe = frontend_for(tree)?;
    let corpus = Corpus::load(tree.corpus()).map_err(|e| TreeDataError::Corpus { path: tree.corpus(), message: e.to_string() })?;
    let cfg = GateConfig {
        tiers: opts.tiers.clone(),
        selection: Selection::default(),
        jobs: opts.jobs,
        progress: false,
        frontend: fe,
        compile: opts.compile.clone(),
        gpu: opts.gpu.clone(),
        ..GateConfig::default()
    };
    Ok(cgate::run(&corpus, &cfg))
}

/// The `corpus` gate: the proposal's corpus results, classified against the base's.
pub fn gate(proposal: &Tree, base: &Tree, opts: &GateOptions) -> GateResult {
    const NAME: &str = "corpus";
    let baseline = match &opts.baseline {
        Some(b) => (**b).clone(),
        None => match run_corpus(base, opts) {
            Ok(r) => r,
            Err(e) => return GateResult::fail(NAME, TITLE, format!("the base tree's data does not load: {e}"), vec![]),
        },
    };
    let current = match run_corpus(proposal, opts) {
        Ok(r) => r,
        Err(e) => return GateResult::fail(NAME, TITLE, format!("the proposal's data does not load: {e}"), vec![]),
    };
    judge(&current, &baseline)
}

/// Classify `current` against `baseline` and turn the report into a gate result: every
/// regressed or new-fail result, and every baseline case that disappeared, is a detail line
/// naming the case, the tier and why.
pub fn judge(current: &GateResults, baseline: &GateResults) -> GateResult {
    const NAME: &str = "corpus";
    let rep = classify(current, Some(("base", baseline)), &Selection::default());
    let mut details = Vec::new();
    for item in rep.items.iter().filter(|i| i.class.is_blocking()) {
        let r = &item.result;
        details.push(format!("{} [{}] {}: {}", r.id, r.tier, item.class.as_str(), if r.reason.is_empty() { r.status.as_str() } else { &r.reason }));
    }
    for (id, tier) in &rep.missing {
        details.push(format!("{id} [{tier}] missing: the base has this case, the proposal does not (a proposal must not remove corpus cases)"));
    }
    let counts: Vec<String> = Class::ALL.iter().filter(|c| rep.count(**c) > 0).map(|c| format!("{} {}", rep.count(*c), c.as_str())).collect();
    let mut skipped: Vec<String> = current
        .environment
        .iter()
        .filter(|(_, v)| v.starts_with("skipped"))
        .map(|(k, v)| format!("{k} tier {v}"))
        .collect();
    skipped.sort();
    let mut summary = counts.join(", ");
    if !skipped.is_empty() {
        summary.push_str(&format!(" ({})", skipped.join("; ")));
    }
    if details.is_empty() {
        GateResult::pass(NAME, TITLE, summary)
    } else {
        GateResult::fail(NAME, TITLE, format!("{} blocking result(s): {summary}", details.len()), details)
    }
}

/// A compile backend that remembers results by program, so the base tree and every proposal on
/// it compile each distinct validated program once (a data-only rule proposal does not change
/// what a program lowers to). Timeouts are not remembered.
pub struct CachedCompile {
    inner: Arc<dyn CompileBackend>,
    cache: Mutex<HashMap<CompileKey, Result<PtxasFacts, CompileError>>>,
}

/// (case id, program text, hash of the validated module).
type CompileKey = (String, String, u64);

impl CachedCompile {
    pub fn new(inner: Arc<dyn CompileBackend>) -> CachedCompile {
        CachedCompile { inner, cache: Mutex::new(HashMap::new()) }
    }
}

impl CompileBackend for CachedCompile {
    fn availability(&self) -> cake::corpus::tiers::Availability {
        self.inner.availability()
    }

    fn compile(&self, validated: &Validated, case: &Case) -> Result<PtxasFacts, CompileError> {
        let mut h = DefaultHasher::new();
        format!("{:?}", validated.module()).hash(&mut h);
        let key = (case.id.clone(), case.source.clone(), h.finish());
        if let Some(r) = self.cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return r;
        }
        let r = self.inner.compile(validated, case);
        if !matches!(r, Err(CompileError::Timeout(_))) {
            if let Ok(mut c) = self.cache.lock() {
                c.insert(key, r.clone());
            }
        }
        r
    }
}
