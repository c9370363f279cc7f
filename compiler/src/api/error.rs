//! The typed errors of the staged API, one per stage, nested in [`Error`].
//!
//! Front-end stages (parse, check, verify) fail with every diagnostic they found, so a caller
//! can render them exactly as `cake check` does; their `code()` is the first error's code and
//! their Display names it, its place and what to do. Later stages keep their own types
//! (`CostError`, `LowerError`, `BuildError`, `HarnessError`), which already carry codes.

use crate::cost::CostError;
use crate::diag::Diagnostic;
use crate::lower::LowerError;
use crate::nvrtc::BuildError;
use crate::runtime::harness::HarnessError;

/// `code: message (at bytes a..b); N errors in all; help: ...` for the first error of a stage.
fn first_error(stage: &str, diagnostics: &[Diagnostic]) -> String {
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let Some(d) = diagnostics.iter().find(|d| d.is_error()) else {
        return format!("{stage} reported no error diagnostic (internal error); run `cake check` on the file for its findings");
    };
    let help = d.help.clone().unwrap_or_else(|| format!("`cake explain {}` says what it means and how to fix it", d.code));
    let more = if errors > 1 { format!("; {errors} errors in all") } else { String::new() };
    format!("{}: {} (at bytes {}..{}){more}; help: {help}", d.code, d.message, d.primary.span.start, d.primary.span.end)
}

fn first_code(diagnostics: &[Diagnostic]) -> &str {
    diagnostics.iter().find(|d| d.is_error()).map_or("E0000", |d| d.code.as_str())
}

/// The text does not parse (`E01xx`). Holds every syntax diagnostic.
#[derive(Clone, Debug, thiserror::Error)]
#[error("the program does not parse: {}", first_error("the parser", .diagnostics))]
pub struct ParseError {
    pub diagnostics: Vec<Diagnostic>,
}

/// The syntax tree does not type-check (`E02xx` names, `E03xx` types and ops, `E04xx` targets).
#[derive(Clone, Debug, thiserror::Error)]
pub enum CheckError {
    /// Type errors: every finding of the checker (errors and the warnings beside them).
    #[error("the program does not type-check: {}", first_error("the checker", .diagnostics))]
    Types { diagnostics: Vec<Diagnostic> },
    /// The module names a target the built-in table lacks (the checker reports `E04xx` first,
    /// so this only happens with a caller's own table).
    #[error("E0401: target `{target}` is not in the target table; help: use a target of `compiler/targets.toml` (`sm_90a`, `sm_80`, ...)")]
    UnknownTarget { target: String },
}

/// The verifier rejected the module: every finding of the type checker and the verifier.
#[derive(Clone, Debug, thiserror::Error)]
#[error("the verifier rejected the program: {}", first_error("the verifier", .findings))]
pub struct VerifyError {
    pub findings: Vec<Diagnostic>,
}

/// Any stage's error: what [`crate::api`]'s chained calls return.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error(transparent)]
    Check(#[from] CheckError),
    #[error(transparent)]
    Verify(#[from] VerifyError),
    /// A calibration file given by path does not load (`C105`), before any program is costed.
    #[error("cannot use the calibration file: {0}")]
    Calibration(CostError),
    #[error(transparent)]
    Cost(#[from] CostError),
    #[error(transparent)]
    Lower(#[from] LowerError),
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error(transparent)]
    Run(#[from] HarnessError),
}

impl ParseError {
    pub fn code(&self) -> &str {
        first_code(&self.diagnostics)
    }
}

impl CheckError {
    pub fn code(&self) -> &str {
        match self {
            CheckError::Types { diagnostics } => first_code(diagnostics),
            CheckError::UnknownTarget { .. } => "E0401",
        }
    }

    /// The findings as diagnostics (the unknown target has no span: it is the caller's table).
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        match self {
            CheckError::Types { diagnostics } => diagnostics.clone(),
            CheckError::UnknownTarget { .. } => {
                vec![Diagnostic::error("E0401", self.to_string(), crate::span::Span::default(), "")]
            }
        }
    }
}

impl VerifyError {
    pub fn code(&self) -> &str {
        first_code(&self.findings)
    }
}

impl Error {
    /// The stable code of the first error (`E0101`, `V201`, `C101`, `L001`, `N002`, `R003`, ...).
    pub fn code(&self) -> String {
        match self {
            Error::Parse(e) => e.code().to_string(),
            Error::Check(e) => e.code().to_string(),
            Error::Verify(e) => e.code().to_string(),
            Error::Calibration(e) | Error::Cost(e) => e.code().to_string(),
            Error::Lower(e) => e.code.to_string(),
            Error::Build(e) => e.code().to_string(),
            Error::Run(e) => e.code().to_string(),
        }
    }

    /// The error as diagnostics whose spans point into the program's source (front-end
    /// findings, cost, lowering and build errors); see [`Error::is_located`].
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        match self {
            Error::Parse(e) => e.diagnostics.clone(),
            Error::Check(e) => e.diagnostics(),
            Error::Verify(e) => e.findings.clone(),
            Error::Calibration(e) | Error::Cost(e) => vec![e.to_diagnostic()],
            Error::Lower(e) => vec![e.to_diagnostic()],
            Error::Build(e) => e.to_diagnostics(),
            Error::Run(e) => e.diagnostics(),
        }
    }

    /// Whether the spans of [`Error::diagnostics`] point into the program (a calibration file
    /// or a run's usage error is about something else).
    pub fn is_located(&self) -> bool {
        match self {
            Error::Calibration(_) => false,
            Error::Run(e) => matches!(e, HarnessError::Findings { .. } | HarnessError::Build { .. }),
            _ => true,
        }
    }

    /// Whether the program itself is at fault (findings: exit 1), rather than the caller's
    /// arguments, files or calibration (usage: exit 2).
    pub fn is_finding(&self) -> bool {
        match self {
            Error::Parse(_) | Error::Check(_) | Error::Verify(_) | Error::Lower(_) | Error::Build(_) => true,
            Error::Calibration(_) => false,
            Error::Cost(e) => !matches!(e, CostError::MissingDims { .. } | CostError::BadDim { .. } | CostError::BadCalibration(_)),
            Error::Run(e) => !e.is_usage(),
        }
    }
}
