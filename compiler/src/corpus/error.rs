//! Why a corpus command (`cake corpus gate|merge|list|show`) could not do its work: one coded
//! variant per cause (`G001`…`G010`, documented in `compiler/diagnostics/corpus.toml`), carrying the
//! paths and values at fault. The CLI prints `error: <Display>` and exits 2; in-process callers
//! (tests, MCP's `corpus_show`) match on the variant.

use std::path::PathBuf;

use super::Tier;

#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// G001: the corpus root cannot be listed.
    #[error("cannot read the corpus at {}: {message}", root.display())]
    ReadCorpus { root: PathBuf, message: String },
    /// G002: a results file (or a manifest to bless) cannot be read.
    #[error("cannot read {}: {message}", path.display())]
    Read { path: PathBuf, message: String },
    /// G003: a results file is not JSON of the results schema, or a manifest to bless is not TOML
    /// of the shape the loader accepted.
    #[error("{} is not a corpus results file: {message}", path.display())]
    NotResults { path: PathBuf, message: String },
    /// G004: a results file of another schema version.
    #[error("{} has schema `{found}`, expected `{expected}`", path.display())]
    Schema { path: PathBuf, found: String, expected: &'static str },
    /// G005: a results file, report, manifest or their directory cannot be written.
    #[error("cannot {what} {}: {message}", path.display())]
    Write { what: &'static str, path: PathBuf, message: String },
    /// G006: two shards disagree on one (case, tier).
    #[error("`{id}` ({tier}) appears in two inputs with different results (input #{input}); shards must not overlap")]
    Overlap { id: String, tier: Tier, input: usize },
    /// G007: `--rules`, `--add-rules`, `--targets` or `--catalog` names data that does not load.
    #[error("{flag} {}: {message}", path.display())]
    Frontend { flag: &'static str, path: PathBuf, message: String },
    /// G008: `--family F` names no family of the corpus.
    #[error("no family `{family}` in {} (families: {})", root.display(), known.join(", "))]
    UnknownFamily { family: String, root: PathBuf, known: Vec<String> },
    /// G009: no case has this id.
    #[error("no case `{id}`")]
    UnknownCase { id: String },
    /// G010: `--bless` could not rewrite a manifest (unreadable, unwritable, or not the shape the
    /// loader read); `message` names the file.
    #[error("bless: {message}")]
    Bless { path: PathBuf, message: String },
}

impl CorpusError {
    /// The stable code (`cake explain G001`).
    pub fn code(&self) -> &'static str {
        match self {
            CorpusError::ReadCorpus { .. } => "G001",
            CorpusError::Read { .. } => "G002",
            CorpusError::NotResults { .. } => "G003",
            CorpusError::Schema { .. } => "G004",
            CorpusError::Write { .. } => "G005",
            CorpusError::Overlap { .. } => "G006",
            CorpusError::Frontend { .. } => "G007",
            CorpusError::UnknownFamily { .. } => "G008",
            CorpusError::UnknownCase { .. } => "G009",
            CorpusError::Bless { .. } => "G010",
        }
    }

    pub(crate) fn write(what: &'static str, path: &std::path::Path, e: impl std::fmt::Display) -> CorpusError {
        CorpusError::Write { what, path: path.to_path_buf(), message: e.to_string() }
    }
}
