//! Error-code documentation: what `cake explain CODE` prints.
//!
//! Each stage documents its own codes in a data file `compiler/diagnostics/*.toml` (`cli.toml` for
//! the command line's I/O errors, `syntax.toml` for the parser, `types.toml` for the checker,
//! later one per verifier rule family). Every file is a list of entries:
//!
//! ```toml
//! [[code]]
//! code = "E0001"
//! title = "a file could not be read"
//! explanation = """
//! What went wrong, why it is wrong, how to fix it.
//! """
//! example = """
//! cake check missing.cake
//! """
//! ```
//!
//! `build.rs` embeds every file of that directory at build time; adding a file needs no Rust
//! change. Codes are unique across all files (a unit test checks it).

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

include!(concat!(env!("OUT_DIR"), "/embedded_diagnostics.rs"));

/// The documentation of one diagnostic code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeDoc {
    /// `E0001`, `E0201`, `V-SAFE-001`, ...
    pub code: String,
    /// One line: what the diagnostic is about.
    pub title: String,
    /// Why it is a problem and how to fix it (several paragraphs allowed).
    pub explanation: String,
    /// A small program (or command) that triggers it; may be empty.
    #[serde(default)]
    pub example: String,
    /// The data file it came from (`syntax.toml`), filled in when loaded.
    #[serde(default, skip_deserializing)]
    pub file: String,
}

#[derive(Deserialize)]
struct DocFile {
    #[serde(default)]
    code: Vec<CodeDoc>,
}

struct Registry {
    docs: Vec<CodeDoc>,
    problems: Vec<String>,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| load(DIAGNOSTIC_DOCS))
}

/// Parse the embedded files. A malformed file or a duplicate code is recorded as a problem (and
/// the rest still loads); the unit tests require there be none.
fn load(files: &[(&str, &str)]) -> Registry {
    let mut docs: Vec<CodeDoc> = Vec::new();
    let mut problems = Vec::new();
    for (name, text) in files {
        match toml::from_str::<DocFile>(text) {
            Ok(parsed) => {
                for mut doc in parsed.code {
                    doc.code = doc.code.trim().to_string();
                    doc.file = (*name).to_string();
                    if let Some(first) = docs.iter().find(|d| d.code.eq_ignore_ascii_case(&doc.code)) {
                        problems
                            .push(format!("code {} is documented twice: in {} and in {}", doc.code, first.file, name));
                        continue;
                    }
                    docs.push(doc);
                }
            }
            Err(e) => problems.push(format!("{name}: {e}")),
        }
    }
    docs.sort_by(|a, b| a.code.cmp(&b.code));
    Registry { docs, problems }
}

/// Every documented code, sorted by code.
pub fn all() -> &'static [CodeDoc] {
    &registry().docs
}

/// The documentation of `code` (case-insensitive: `e0101` finds `E0101`).
pub fn lookup(code: &str) -> Option<CodeDoc> {
    let code = code.trim();
    all().iter().find(|d| d.code.eq_ignore_ascii_case(code)).cloned()
}

/// Malformed files and duplicate codes found while loading (empty when all is well).
pub fn problems() -> &'static [String] {
    &registry().problems
}

/// The embedded data files themselves: (file name, contents).
pub fn embedded_files() -> &'static [(&'static str, &'static str)] {
    DIAGNOSTIC_DOCS
}

/// The text `cake explain CODE` prints.
pub fn format_doc(doc: &CodeDoc) -> String {
    let mut s = format!("{}: {}\n", doc.code, doc.title.trim());
    let explanation = doc.explanation.trim();
    if !explanation.is_empty() {
        s.push('\n');
        s.push_str(explanation);
        s.push('\n');
    }
    let example = doc.example.trim_matches('\n');
    if !example.trim().is_empty() {
        s.push_str("\nExample:\n\n");
        for line in example.lines() {
            if line.is_empty() {
                s.push('\n');
            } else {
                s.push_str("    ");
                s.push_str(line);
                s.push('\n');
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Every file parses, and every code in any file appears exactly once across all files.
    #[test]
    fn codes_are_unique_across_all_files() {
        let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, text) in embedded_files() {
            let parsed: DocFile =
                toml::from_str(text).unwrap_or_else(|e| panic!("diagnostics/{name} is malformed: {e}"));
            for doc in parsed.code {
                seen.entry(doc.code.trim().to_ascii_uppercase()).or_default().push((*name).to_string());
            }
        }
        let dups: Vec<String> = seen
            .iter()
            .filter(|(_, files)| files.len() > 1)
            .map(|(code, files)| format!("{code} in {}", files.join(", ")))
            .collect();
        assert!(dups.is_empty(), "duplicate diagnostic codes: {dups:?}");
        assert!(problems().is_empty(), "{:?}", problems());
    }

    #[test]
    fn entries_are_complete() {
        for doc in all() {
            assert!(
                !doc.code.is_empty()
                    && doc.code.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-'),
                "{}: bad code {:?} (use e.g. E0101 or V-SAFE-001)",
                doc.file,
                doc.code
            );
            assert!(!doc.title.trim().is_empty(), "{} ({}): empty title", doc.code, doc.file);
            assert!(!doc.explanation.trim().is_empty(), "{} ({}): empty explanation", doc.code, doc.file);
        }
    }

    #[test]
    fn cli_codes_are_documented_and_found() {
        for code in ["E0001", "E0002", "E0003", "E0004", "E0005"] {
            assert!(lookup(code).is_some(), "{code} missing from diagnostics/cli.toml");
        }
        assert_eq!(lookup("e0001").map(|d| d.code), Some("E0001".to_string()));
        assert!(lookup("E9999").is_none());
        let text = format_doc(&lookup("E0002").unwrap());
        assert!(text.starts_with("E0002: "), "{text}");
    }

    #[test]
    fn load_reports_duplicates_and_bad_files() {
        let a = "[[code]]\ncode = \"X1\"\ntitle = \"t\"\nexplanation = \"e\"\n";
        let r = load(&[("a.toml", a), ("b.toml", a), ("c.toml", "[[code]\n")]);
        assert_eq!(r.docs.len(), 1);
        assert_eq!(r.problems.len(), 2, "{:?}", r.problems);
    }
}
