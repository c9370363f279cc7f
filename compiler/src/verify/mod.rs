//! The verifier: the four pre-compile gates (program safety, hardware conformance, data
//! consistency, schedule semantics) over the typed IR.
//!
//! Two kinds of checks produce findings of one type:
//! - **rules as data** (`compiler/rules/<category>/*.toml`): a predicate over facts the compiler
//!   computes for each construct (`facts.rs`), interpreted by `rules.rs`. The evolution engine
//!   adds rules by writing such files;
//! - **analyses in Rust** (`protocol.rs`): the barrier and pipeline protocol simulation, which
//!   needs more than a predicate.
//!
//! A module that passes every gate becomes [`Validated`]; lowering accepts nothing else.

pub mod coverage;
pub mod facts;
pub mod fills;
pub mod indexing;
pub mod int_range;
pub mod protocol;
pub mod register_layout;
pub mod rule_text_error;
pub mod rules;
pub mod visibility;

use crate::catalog::Catalog;
use crate::diag::Diagnostic;
use crate::ir::Module;
use crate::layout::KernelLayout;
use crate::target::{TargetInfo, TargetTable};

pub use facts::{ConstructKind, FactSet, ModuleFacts};
pub use rules::{Rule, RuleError, RuleSet};

/// A module that passed the verifier's pre-compile gates on its target. Only the verifier (or
/// the explicitly named [`Validated::assume_verified_unsafe`]) constructs one.
#[derive(Clone, Debug)]
pub struct Validated {
    module: Module,
    /// The derived layout the verifier's rules checked; the cost model and the lowering read it.
    layout: KernelLayout,
    /// Findings that did not block (warnings, hints, coverage limits).
    pub findings: Vec<Diagnostic>,
    /// True when the verifier was bypassed.
    pub unverified: bool,
}

impl Validated {
    pub fn module(&self) -> &Module {
        &self.module
    }

    pub fn layout(&self) -> &KernelLayout {
        &self.layout
    }

    /// Skip the verifier. For running deliberately broken programs through the harness (to
    /// record how they fail on the GPU); the run record says the program was unverified.
    /// The layout is computed for the module's target (a target the built-in table lacks lays
    /// out with sm_90a's register file).
    pub fn assume_verified_unsafe(module: Module) -> Validated {
        let table = TargetTable::builtin();
        let target = table.get(&module.target).or_else(|| table.get("sm_90a")).expect("the built-in target table has sm_90a");
        let layout = KernelLayout::compute(&module, target);
        Validated { module, layout, findings: Vec::new(), unverified: true }
    }
}

/// What the verifier says about one module.
pub struct VerifyOutput {
    pub findings: Vec<Diagnostic>,
    /// Present when no finding is an error.
    pub validated: Option<Validated>,
}

/// Run every gate on a type-checked module for its target, with the built-in rules.
pub fn verify(module: Module, target: &TargetInfo) -> VerifyOutput {
    verify_with(module, target, RuleSet::builtin())
}

/// Run every gate with a given rule set (the built-in rules plus a directory, a proposal's
/// rules, ...): compute the facts, evaluate every rule, run the protocol analysis, merge.
/// Findings are sorted by primary span, then code.
pub fn verify_with(module: Module, target: &TargetInfo, rules: &RuleSet) -> VerifyOutput {
    let layout = KernelLayout::compute(&module, target);
    let facts = facts::compute(&module, &layout, target, Catalog::builtin());
    let mut findings = rules.evaluate(&facts);
    findings.extend(protocol::analyze(&module, target));
    findings.extend(register_layout::analyze(&module, &layout));
    findings.sort_by(|a, b| {
        (a.primary.span.start, a.primary.span.end, &a.code, &a.message).cmp(&(b.primary.span.start, b.primary.span.end, &b.code, &b.message))
    });
    findings.dedup_by(|a, b| a.code == b.code && a.primary.span == b.primary.span && a.message == b.message);
    let blocked = findings.iter().any(Diagnostic::is_error);
    let validated = (!blocked).then(|| Validated { module, layout, findings: findings.clone(), unverified: false });
    VerifyOutput { findings, validated }
}

/// The facts the rules see for a module (for `cake facts`-style tooling and the evolution engine).
pub fn module_facts(module: &Module, target: &TargetInfo) -> ModuleFacts {
    facts::compute(module, &KernelLayout::compute(module, target), target, Catalog::builtin())
}
