//! Why a corpus command (`cake corpus gate|merge|list|show`) could not do its work: one coded
//! variant per cause (`G001`…`G015`, documented in `compiler/diagnostics/corpus.toml`), carrying the
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
    /// G011: `--gpus` is not `all`, a positive count or a list of GPU ids.
    #[error("--gpus {value:?}: {why}")]
    BadGpus { value: String, why: String },
    /// G012: `--gpus` asks for GPUs and the host lists none (or they cannot be listed).
    #[error("--gpus {asked}: no GPU found: {why}")]
    NoGpu { asked: String, why: String },
    /// G013: `--gpus` names a GPU the host does not have, or more GPUs than it has.
    #[error("--gpus {asked}: {missing}; this host has GPU {}", present.iter().map(u32::to_string).collect::<Vec<_>>().join(", "))]
    GpuMissing { asked: String, missing: String, present: Vec<u32> },
    /// G015: the GPUs `--gpus` asks for are busy (Prohibited compute mode, or Exclusive_Process
    /// and held by another process).
    #[error("--gpus {asked}: busy: {busy}")]
    GpuBusy { asked: String, busy: String },
    /// G014: a `--gpus` worker process could not start, or stopped on a usage or I/O error.
    #[error("the worker process for GPU {gpu} failed: {message}")]
    Worker { gpu: u32, message: String },
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
            CorpusError::BadGpus { .. } => "G011",
            CorpusError::NoGpu { .. } => "G012",
            CorpusError::GpuMissing { .. } => "G013",
            CorpusError::Worker { .. } => "G014",
            CorpusError::GpuBusy { .. } => "G015",
        }
    }

    /// What to do about it, where there is more to say than the message (the CLI prints it as
    /// `= help:`).
    pub fn help(&self) -> Option<String> {
        match self {
            CorpusError::BadGpus { .. } => Some("write `--gpus all`, a count (`--gpus 2`: the first two GPUs) or GPU ids (`--gpus 0,2`; one id: `--gpus 3,`)".into()),
            CorpusError::NoGpu { .. } => Some("`nvidia-smi -L` lists the GPUs; without one, run the static and compile tiers without --gpus (or the gpu tier on a GPU host)".into()),
            CorpusError::GpuMissing { present, .. } => Some(format!(
                "use --gpus all, a count up to {}, or ids from `nvidia-smi -L`; CUDA_VISIBLE_DEVICES does not renumber what nvidia-smi lists",
                present.len()
            )),
            CorpusError::GpuBusy { .. } => Some("name other GPUs (`--gpus 1,3`; `nvidia-smi` shows each one's compute mode and processes), or wait until the process holding it ends".into()),
            CorpusError::Worker { .. } => Some("the worker's log (named in the message) has its whole output; the same arguments without --gpus show the error directly".into()),
            _ => None,
        }
    }

    pub(crate) fn write(what: &'static str, path: &std::path::Path, e: impl std::fmt::Display) -> CorpusError {
        CorpusError::Write { what, path: path.to_path_buf(), message: e.to_string() }
    }
}
