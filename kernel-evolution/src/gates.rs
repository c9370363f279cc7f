//! Stage 2, the hard gates: a candidate's text is parsed, type-checked and verified exactly as
//! `cake check` does, then every contract shape (and the headline) must be legal for it (each dim
//! bound, every `multiple_of` kept) and the workload must fit it. The first gate that fails names
//! the rejection; every finding is kept (the compiler's diagnostics, serialized) for the database
//! and the evidence store.

use cake::diag::Diagnostic;
use cake::runtime::workload::check_shape;
use cake::verify::Validated;
use serde_json::{json, Value};

use crate::contract::{shape_text, Contract};

/// What the gates made of one candidate.
pub struct GateResult {
    /// `passed`, or the gate that rejected it: `parse`, `typecheck`, `verify`, `shape`.
    pub gate: &'static str,
    pub diagnostics: Vec<Diagnostic>,
    /// Why the shape gate refused it (empty otherwise).
    pub shape_problems: Vec<String>,
    pub validated: Option<Validated>,
}

impl GateResult {
    pub fn passed(&self) -> bool {
        self.gate == "passed"
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

pub fn run(text: &str, contract: &Contract) -> GateResult {
    let out = cake::check::check_source(text);
    let gate = if out.file.is_none() {
        "parse"
    } else if out.module.is_none() {
        "typecheck"
    } else if out.validated.is_none() {
        "verify"
    } else {
        "passed"
    };
    let mut result = GateResult { gate, diagnostics: out.diagnostics, shape_problems: Vec::new(), validated: out.validated };
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
            result.gate = "shape";
            result.validated = None;
        }
    }
    result
}
