//! Recursive-descent parser (stub; being written).
use super::ast::File;
use crate::diag::Diagnostic;

/// Parse a whole `.cake` file. On failure, returns every syntax error found (at least one).
pub fn parse(_source: &str) -> Result<File, Vec<Diagnostic>> {
    Err(vec![Diagnostic::error("E0100", "parser not yet written", crate::span::Span::default(), "")])
}
