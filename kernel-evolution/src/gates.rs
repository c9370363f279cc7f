//! Stage 2, the hard gates: a candidate's text is parsed, type-checked and verified exactly as
//! `cake check` does, then every contract shape (and the headline) must be legal for it (each dim
//! bound, every `multiple_of` kept) and the workload must fit it. The first gate that fails names
//! the rejection; every finding is kept (the compiler's diagnostics, serialized) for the database
//! and the evidence store.

use cake::diag::Diagnostic;
use cake::runtime::workload::check_shape;
use cake::verify::{RuleSet, Validated};
use serde_json::{json, Value};

use crate::contract::{shape_text, Contract};

/// The gate a candidate stopped at, or `Passed`. Stored in the database by [`Gate::as_str`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    Parse,
    Typecheck,
    Verify,
    Shape,
    Passed,
}

impl Gate {
    pub fn as_str(self) -> &'static str {
        match self {
            Gate::Parse => "parse",
            Gate::Typecheck => "typecheck",
            Gate::Verify => "verify",
            Gate::Shape => "shape",
            Gate::Passed => "passed",
        }
    }

    /// The compiler's own gates (parse, type check, verifier): rejections worth routing as evidence.
    pub fn is_compiler(self) -> bool {
        matches!(self, Gate::Parse | Gate::Typecheck | Gate::Verify)
    }
}

/// What the gates made of one candidate.
pub struct GateResult {
    /// [`Gate::Passed`], or the gate that rejected it.
    pub gate: Gate,
    pub diagnostics: Vec<Diagnostic>,
    /// Why the shape gate refused it (empty otherwise).
    pub shape_problems: Vec<String>,
    pub validated: Option<Validated>,
}

impl GateResult {
    pub fn passed(&self) -> bool {
        self.gate == Gate::Passed
    }

    pub fn findings_json(&self) -> Value {
        json!({ "diagnostics": self.diagnostics, "shape_problems": self.shape_problems })
    }

    /// The first blocking problem: (class, message), for routing.
    pub fn first_problem(&self) -> Option<(String, String)> {
        if let Some(d) = self.diagnostics.iter().find(|d| d.is_error()) {
            return Some((d.code.clone(), d.message.clone()));
        }
        self.shape_problems.first().map(|p| ("shape".to_string(), p.clone()))
    }
}

/// The compiler's staged API decides the first three gates, verifying with `rules`: each stage's
/// error type names it.
pub fn run(text: &str, contract: &Contract, rules: &RuleSet) -> GateResult {
    let validated = cake::api::parse(text).map_err(cake::api::Error::from).and_then(|f| cake::api::check(f).map_err(Into::into)).and_then(|c| cake::api::verify_with(c, rules).map_err(Into::into));
    let (gate, diagnostics, validated) = match validated {
        Ok(v) => (Gate::Passed, v.findings.clone(), Some(v)),
        Err(e @ cake::api::Error::Parse(_)) => (Gate::Parse, e.diagnostics(), None),
        Err(e @ cake::api::Error::Check(_)) => (Gate::Typecheck, e.diagnostics(), None),
        Err(e) => (Gate::Verify, e.diagnostics(), None),
    };
    let mut result = GateResult { gate, diagnostics, shape_problems: Vec::new(), validated };
    if let Some(v) = &result.validated {
        let m = v.module();
        let w = &contract.file.workload;
        if let Err(e) = w.validate(m) {
            result.shape_problems.push(e.0);
        }
        for shape in w.shapes.iter().chain(std::iter::once(&w.headline)) {
            if let Err(e) = check_shape(m, shape) {
                result.shape_problems.push(format!("shape {}: {e}", shape_text(shape)));
            }
        }
        if !result.shape_problems.is_empty() {
            result.gate = Gate::Shape;
            result.validated = None;
        }
    }
    result
}
