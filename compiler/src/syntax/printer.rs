//! Canonical printer (stub; being written).
use super::ast::File;

/// Print a file in canonical form (what `cake fmt` writes).
pub fn print(_file: &File) -> String {
    String::new()
}
