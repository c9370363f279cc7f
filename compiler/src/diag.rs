//! Diagnostics: one serializable type for every finding the compiler reports — syntax errors,
//! type errors, verifier findings, coverage limits — rendered rustc-style for people and as JSON
//! lines for machines (`--message-format json`).

use serde::{Deserialize, Serialize};

use crate::span::Span;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// Blocks the program (pre-compile gate).
    Error,
    /// Reported, does not block.
    Warning,
    /// A non-blocking optimization suggestion.
    Hint,
    /// An analysis could not decide; never counted as a pass.
    CoverageLimit,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Hint => "hint",
            Severity::CoverageLimit => "coverage-limit",
        }
    }
}

/// A marked span with a short message. The primary label is where the problem is; secondary
/// labels point at the declarations involved (the other role, the barrier, the buffer).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// Stable code, e.g. `E0101` (syntax), `E0201` (types), `V-SAFE-001` (verifier rules).
    pub code: String,
    pub severity: Severity,
    pub message: String,
    pub primary: Label,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secondary: Vec<Label>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
    /// Notes about the analysis itself (the dim binding a counterexample was found under):
    /// shown only with `cake check --verbose`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
    /// Set on a finding that follows from an earlier one (the same barrier's hang after its
    /// trip-count mismatch): hidden unless `cake check --all`, and gone once the cause is fixed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follows: Option<Cause>,
}

/// The finding another one follows from: its code and primary span.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cause {
    pub code: String,
    pub span: Span,
}

impl Diagnostic {
    pub fn error(code: impl Into<String>, message: impl Into<String>, span: Span, label: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code: code.into(),
            severity: Severity::Error,
            message: message.into(),
            primary: Label { span, message: label.into() },
            secondary: Vec::new(),
            notes: Vec::new(),
            help: None,
            details: Vec::new(),
            follows: None,
        }
    }

    pub fn with_severity(mut self, severity: Severity) -> Diagnostic {
        self.severity = severity;
        self
    }

    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Diagnostic {
        self.secondary.push(Label { span, message: message.into() });
        self
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Diagnostic {
        self.notes.push(note.into());
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Diagnostic {
        self.details.push(detail.into());
        self
    }

    /// Mark this finding as a consequence of `cause`.
    pub fn following(mut self, cause: &Diagnostic) -> Diagnostic {
        self.follows = Some(Cause { code: cause.code.clone(), span: cause.primary.span });
        self
    }

    pub fn is_follow_on(&self) -> bool {
        self.follows.is_some()
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// What a reader is shown of a list of findings: follow-on findings are left out unless `all`,
/// and each finding's details become notes only when `verbose`.
pub struct Shown {
    pub diagnostics: Vec<Diagnostic>,
    /// For each shown finding, how many of its follow-ons were left out.
    pub hidden_per_finding: Vec<usize>,
    /// Follow-on findings left out.
    pub hidden: usize,
}

pub fn shown(diags: &[Diagnostic], all: bool, verbose: bool) -> Shown {
    let mut out = Vec::with_capacity(diags.len());
    let mut left_out: Vec<&Cause> = Vec::new();
    for d in diags {
        if let (Some(cause), false) = (&d.follows, all) {
            left_out.push(cause);
            continue;
        }
        let mut d = d.clone();
        let details = std::mem::take(&mut d.details);
        if verbose {
            d.notes.extend(details);
        }
        out.push(d);
    }
    let hidden_per_finding =
        out.iter().map(|d| left_out.iter().filter(|c| c.code == d.code && c.span == d.primary.span).count()).collect();
    Shown { diagnostics: out, hidden_per_finding, hidden: left_out.len() }
}

/// The known name nearest to `name` by edit distance, when it is close enough to be a typo: the
/// "did you mean" of help lines.
pub fn closest<'n>(name: &str, candidates: impl Iterator<Item = &'n str>) -> Option<&'n str> {
    let limit = (name.len() / 3).max(1);
    candidates.map(|c| (edit_distance(name, c), c)).filter(|(d, _)| *d <= limit).min().map(|(_, c)| c)
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let sub = prev[j - 1] + usize::from(a[i - 1] != b[j - 1]);
            cur[j] = sub.min(prev[j] + 1).min(cur[j - 1] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
