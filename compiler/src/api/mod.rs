//! The compiler as a typed, staged library API:
//!
//! ```text
//! parse(&str) -> ast::File            ParseError   (E01xx)
//!   check(file) -> Checked            CheckError   (E02xx-E04xx)
//!     verify(checked) -> Validated    VerifyError  (V..., every finding)
//!       cost(&v, cal, dims)           CostError    (C10x)
//!       lower(&v, opts)               LowerError   (L00x; `status`: NotSupportedYet | Refused)
//!       build(&v, target, opts)       BuildError   (N00x, P007)
//!   run(opts, ...) -> Vec<Outcome>    HarnessError (R00x usage; findings; build)
//! ```
//!
//! Each stage takes the previous stage's value, so a signature shows what it depends on, and
//! fails with its own `thiserror` enum; [`Error`] nests them all, for callers that chain stages
//! with `?` ([`validate`], [`cost_source`]). Every error has a `code()` and its findings as
//! diagnostics, which the CLI and the MCP server render; this module prints nothing.

pub mod error;

use std::collections::BTreeMap;
use std::path::Path;

pub use error::{CheckError, Error, ParseError, VerifyError};

use crate::catalog::Catalog;
use crate::cost::{Calibration, CostError, Estimate};
use crate::diag::Diagnostic;
use crate::ir::Module;
use crate::lower::{LowerError, LowerOptions, Lowered};
use crate::nvrtc::{BuildError, Built};
use crate::runtime::harness::{self, HarnessError, Outcome, Prelude};
use crate::syntax::ast;
use crate::target::{TargetInfo, TargetTable};
use crate::verify::{RuleSet, Validated};

/// A type-checked module and the non-blocking findings of the checker.
#[derive(Clone, Debug)]
pub struct Checked {
    pub file: ast::File,
    pub module: Module,
    /// Warnings and hints of the type checker (errors make [`check`] fail).
    pub findings: Vec<Diagnostic>,
}

/// Parse a source text into its syntax tree.
pub fn parse(source: &str) -> Result<ast::File, ParseError> {
    crate::syntax::parse(source).map_err(|diagnostics| ParseError { diagnostics })
}

/// Type-check a syntax tree against the built-in op catalog and target table.
pub fn check(file: ast::File) -> Result<Checked, CheckError> {
    check_with(file, Catalog::builtin(), TargetTable::builtin())
}

/// [`check`] with a given catalog and target table.
pub fn check_with(file: ast::File, catalog: &Catalog, targets: &TargetTable) -> Result<Checked, CheckError> {
    let (module, diagnostics) = crate::check::check_file(&file, catalog, targets);
    let Some(module) = module else { return Err(CheckError::Types { diagnostics }) };
    if targets.get(&module.target).is_none() {
        return Err(CheckError::UnknownTarget { target: module.target });
    }
    Ok(Checked { file, module, findings: diagnostics })
}

/// The target a checked module names, from the built-in table.
pub fn target_of(module: &Module) -> Result<&'static TargetInfo, CheckError> {
    TargetTable::builtin().get(&module.target).ok_or_else(|| CheckError::UnknownTarget { target: module.target.clone() })
}

/// Run the verifier with the built-in rules.
pub fn verify(checked: Checked) -> Result<Validated, VerifyError> {
    verify_with(checked, RuleSet::builtin())
}

/// Run the verifier with a given rule set (the built-in rules plus a directory, a proposal's
/// rules). The findings, on success and on failure, start with the checker's own.
pub fn verify_with(checked: Checked, rules: &RuleSet) -> Result<Validated, VerifyError> {
    let target = match target_of(&checked.module) {
        Ok(t) => t,
        Err(e) => return Err(VerifyError { findings: e.diagnostics() }),
    };
    let out = crate::verify::verify_with(checked.module, target, rules);
    let mut findings = checked.findings;
    findings.extend(out.findings);
    match out.validated {
        Some(mut v) => {
            v.findings = findings;
            Ok(v)
        }
        None => Err(VerifyError { findings }),
    }
}

/// Parse, check and verify a source text: what `cake check` does, as one typed call.
pub fn validate(source: &str) -> Result<Validated, Error> {
    Ok(verify(check(parse(source)?)?)?)
}

/// The cost model's estimate at `dims` with a calibration.
pub fn cost(v: &Validated, calibration: &Calibration, dims: &BTreeMap<String, i64>) -> Result<Estimate, CostError> {
    crate::cost::estimate(v, calibration, dims)
}

/// Check `source` and estimate it at `dims` with the calibration file at `calibration` (default:
/// the built-in one of the program's target). `cake cost` and the MCP `cost` tool both call it.
pub fn cost_source(source: &str, dims: &BTreeMap<String, i64>, calibration: Option<&Path>) -> Result<Estimate, Error> {
    let v = validate(source)?;
    match calibration {
        Some(path) => {
            let cal = Calibration::load(path).map_err(|e| Error::Calibration(CostError::BadCalibration(e)))?;
            Ok(cost(&v, &cal, dims)?)
        }
        None => Ok(cost(&v, crate::cost::builtin_calibration(&v.module().target)?, dims)?),
    }
}

/// Lower a validated program to CUDA C++.
pub fn lower(v: &Validated, opts: &LowerOptions<'_>) -> Result<Lowered, LowerError> {
    crate::lower::lower_with(v, opts)
}

/// Lower and compile with NVRTC for `target` (its `arch` may be changed to build for another
/// architecture).
pub fn build(v: &Validated, target: &TargetInfo, opts: &LowerOptions<'_>) -> Result<Built, BuildError> {
    crate::nvrtc::build_with(v, target, opts)
}

/// Check, build and run a program file on the GPU over its workload's shapes (in child
/// processes), writing a run record per run. `on_prelude` is called once before the first run
/// (GPU, architecture, non-blocking findings), `on_run` after each.
pub fn run(
    opts: &harness::Options,
    on_prelude: &mut dyn FnMut(&Prelude),
    on_run: &mut dyn FnMut(&Outcome),
) -> Result<Vec<Outcome>, HarnessError> {
    harness::run(opts, on_prelude, on_run)
}

#[cfg(test)]
mod tests;
