//! The evidence store: a directory of append-only, content-addressed records that everything the
//! harness learns about programs is written into, and that mining reads.
//!
//! # Layout
//! ```text
//! <store>/                      default `.cake/evidence` (`--store DIR`)
//!   runs/<sha256>.json          run records of `cake run` / `cake bench` (schema `cake.run-record/1`,
//!                               type `cake::runtime::record::RunRecord`, written by the runtime or
//!                               by [`EvidenceStore::append`] — the same bytes either way)
//!   failures/<sha256>.json      failure reports (schema `cake.failure-report/1`, [`FailureReport`],
//!                               documented in `evolution/FAILURE_REPORT.md`)
//!   programs/<sha256>.cake      program sources, canonical form (`cake fmt` output); the name is the
//!                               SHA-256 of the text, the `program.sha256` of every record about it
//!   files/<sha256>.<ext>        imported files verbatim (ptxas logs, sanitizer output, reports), so
//!                               a failure report can always be traced back to what a tool printed
//! ```
//! Every file's name is the SHA-256 of its bytes. A record's bytes are canonical: run records are
//! the runtime's pretty JSON of its struct (plus a newline), failure reports pretty JSON with
//! object keys sorted at every level (plus a newline). So appending the same content twice gives
//! the same id and writes nothing; an existing file is never rewritten, moved or deleted.
//!
//! # Errors
//! Every problem is a [`StoreError`] with a stable code and the file it is about:
//! * `S001` the store path is unusable (exists but is not a directory, cannot be created);
//! * `S002` a file cannot be read (I/O error);
//! * `S003` a record file is not a valid record (not JSON, or fields missing / of the wrong type);
//! * `S004` content does not match its address: the file's bytes do not hash to its name (it was
//!   edited or truncated), or a different file already sits at the address being written;
//! * `S005` a file that does not belong in a record directory (name not `<sha256>.json`) or a
//!   record of an unsupported schema;
//! * `S006` a write failed;
//! * `S007` no record with that id (or an ambiguous id prefix);
//! * `S008` a record given to `append` is invalid (a failure report without program hash, …);
//! * `S009` a command that only reads a store was given a path where none exists;
//! * `S010` a file or record folder that is not a regular file or folder (a symlink, which could
//!   lead out of the store, a FIFO, which would block): never opened;
//! * `S011` a file past the read limit of its kind (`cake::store::read_limit`): not read.
//!
//! Reading never panics and never stops at a bad file: [`EvidenceStore::scan`] returns the good
//! records and the problems; [`EvidenceStore::iter`] yields both, in a fixed order (runs, then
//! failures, each by id).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use cake::runtime::record::RunRecord;
use cake::store::sha256_hex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Default store directory (the runtime's default evidence root).
pub const DEFAULT_STORE_DIR: &str = cake::runtime::record::DEFAULT_EVIDENCE_DIR;

/// Schema name of failure reports (`FailureReport::schema`).
pub const FAILURE_SCHEMA: &str = "cake.failure-report/1";
/// Schema family of run records accepted (the runtime's `RECORD_SCHEMA` is `cake.run-record/1`).
pub const RUN_SCHEMA_PREFIX: &str = "cake.run-record/";

pub use cake::store::{FAILURES_DIR, FILES_DIR, PROGRAMS_DIR, RUNS_DIR};

// ─── Ids ─────────────────────────────────────────────────────────────────────────────────────────

/// A record's content address: 64 lowercase hex digits (SHA-256 of the file's bytes).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Id(String);

impl Id {
    /// `s` as an id when it is 64 lowercase hex digits.
    pub fn parse(s: &str) -> Option<Id> {
        is_sha256(s).then(|| Id(s.to_string()))
    }

    /// The id of some bytes.
    pub fn of_bytes(bytes: &[u8]) -> Id {
        Id(sha256_hex(bytes))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 12 hex digits, for tables.
    pub fn short(&self) -> &str {
        &self.0[..12]
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub use cake::store::is_sha256;

// ─── Failure reports ─────────────────────────────────────────────────────────────────────────────

/// Where in the pipeline a failure happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// The verifier (or the type checker) rejected the program.
    Verify,
    /// The lowering refused it (`L0xx`).
    Lower,
    /// NVRTC / ptxas: compile errors, and notable compile facts (spills, ignored setmaxnreg).
    Compile,
    /// On the GPU: faults, hangs, wrong answers, sanitizer findings, timing.
    Run,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Verify => "verify",
            Stage::Lower => "lower",
            Stage::Compile => "compile",
            Stage::Run => "run",
        }
    }

    pub fn parse(s: &str) -> Option<Stage> {
        [Stage::Verify, Stage::Lower, Stage::Compile, Stage::Run].into_iter().find(|k| k.as_str() == s)
    }
}

/// Which program a record is about. In the store only `sha256` (plus optional labels) is kept;
/// an incoming report may carry the `source` instead, which `append` moves to `programs/`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgramRef {
    /// SHA-256 of the canonical source (`programs/<sha256>.cake`). Empty in an incoming report
    /// that gives `source` instead.
    #[serde(default)]
    pub sha256: String,
    /// `kernel NAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The path the program was read from (a label only; the store keys on the hash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The program text (incoming reports only; never stored inside a record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// What a span position refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpanKind {
    /// A line of the `.cake` program (for example through the lowering's `#line` marks).
    Cake,
    /// A line of the generated CUDA C++ (mapped back through the lowering's span map).
    Cuda,
    /// A line of PTX (kept, not mapped).
    Ptx,
}

/// A source position named by a tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpanRef {
    pub kind: SpanKind,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, when the tool gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub col: Option<u32>,
    /// The file name as the tool printed it (a label; paths are not trusted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// One failure of one program, as reported by a tool or written by hand. Schema documented in
/// `evolution/FAILURE_REPORT.md`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailureReport {
    /// Always [`FAILURE_SCHEMA`].
    pub schema: String,
    pub program: ProgramRef,
    /// The program's target (`sm_90a`); an importer fills it from the program when empty.
    #[serde(default)]
    pub target: String,
    pub stage: Stage,
    /// The tool that reported it: `ptxas`, `nvrtc`, `compute-sanitizer`, `cake`, `oracle`, `manual`.
    pub tool: String,
    /// A stable class: `ptxas.too_much_shared_data`, `memcheck.invalid_global_read`,
    /// `CUDA_ERROR_ILLEGAL_ADDRESS`, `timeout`, `mismatch`, … (see FAILURE_REPORT.md).
    pub error_class: String,
    /// The tool's message, verbatim (mining normalizes it).
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<SpanRef>,
    /// The shape (`dim` values) of the failing run, when there was one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub shapes: BTreeMap<String, i64>,
    /// GPU seconds the failure cost (wall time of the failed run, the timeout of a hang).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_seconds: Option<f64>,
    /// The imported file this report was parsed from (`files/<sha256>.*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_file: Option<String>,
    /// Anything else (tool-specific numbers, the thread and block, occurrences, predicted and
    /// measured times `predicted_ms` / `measured_ms`, a `mismatch` index list, …).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, Value>,
}

impl FailureReport {
    /// A report with the required fields; the rest empty.
    pub fn new(
        program_sha256: impl Into<String>,
        target: impl Into<String>,
        stage: Stage,
        tool: impl Into<String>,
        error_class: impl Into<String>,
        message: impl Into<String>,
    ) -> FailureReport {
        FailureReport {
            schema: FAILURE_SCHEMA.to_string(),
            program: ProgramRef { sha256: program_sha256.into(), ..ProgramRef::default() },
            target: target.into(),
            stage,
            tool: tool.into(),
            error_class: error_class.into(),
            message: message.into(),
            span: None,
            shapes: BTreeMap::new(),
            gpu_seconds: None,
            source_file: None,
            extra: serde_json::Map::new(),
        }
    }

    /// Problems that make the report unfit for the store (`S008`), or none.
    pub fn validate(&self) -> Result<(), String> {
        if self.schema != FAILURE_SCHEMA {
            return Err(format!("`schema` is `{}`, expected `{FAILURE_SCHEMA}`", self.schema));
        }
        if !is_sha256(&self.program.sha256) {
            return Err(format!(
                "`program.sha256` must be the 64-hex-digit SHA-256 of the canonical program (got `{}`); give `program.source` or --program instead",
                self.program.sha256
            ));
        }
        if self.program.source.is_some() {
            return Err("`program.source` must be moved to programs/ before the report is stored".into());
        }
        if self.error_class.trim().is_empty() {
            return Err("`error_class` is empty".into());
        }
        if self.target.trim().is_empty() {
            return Err("`target` is empty (and no program gave one)".into());
        }
        if self.tool.trim().is_empty() {
            return Err("`tool` is empty".into());
        }
        if let Some(s) = self.gpu_seconds {
            if !(s.is_finite() && s >= 0.0) {
                return Err(format!("`gpu_seconds` must be a finite number ≥ 0 (got {s})"));
            }
        }
        if let Some(f) = &self.source_file {
            if !is_sha256(f) {
                return Err(format!("`source_file` must be the SHA-256 of a file in files/ (got `{f}`)"));
            }
        }
        Ok(())
    }
}

// ─── Records ─────────────────────────────────────────────────────────────────────────────────────

/// What kind of record a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordKind {
    Run,
    Failure,
}

impl RecordKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RecordKind::Run => "run",
            RecordKind::Failure => "failure",
        }
    }

    fn dir(self) -> &'static str {
        match self {
            RecordKind::Run => RUNS_DIR,
            RecordKind::Failure => FAILURES_DIR,
        }
    }
}

/// A record of the store.
#[derive(Clone, Debug, PartialEq)]
pub enum Record {
    /// A run record, the runtime's own type (shared, not duplicated).
    Run(Box<RunRecord>),
    Failure(Box<FailureReport>),
}

impl Record {
    pub fn kind(&self) -> RecordKind {
        match self {
            Record::Run(_) => RecordKind::Run,
            Record::Failure(_) => RecordKind::Failure,
        }
    }

    /// SHA-256 of the program the record is about.
    pub fn program_sha256(&self) -> &str {
        match self {
            Record::Run(r) => &r.program.sha256,
            Record::Failure(f) => &f.program.sha256,
        }
    }

    /// The record's canonical bytes (its content address is their SHA-256).
    pub fn canonical_bytes(&self) -> Result<Vec<u8>, String> {
        match self {
            // Exactly what `cake::runtime::record::write_record` writes.
            Record::Run(r) => Ok(cake::runtime::record::canonical_bytes(r)),
            Record::Failure(f) => {
                let v = serde_json::to_value(f.as_ref()).map_err(|e| e.to_string())?;
                Ok(canonical_json(&v).into_bytes())
            }
        }
    }
}

impl From<RunRecord> for Record {
    fn from(r: RunRecord) -> Record {
        Record::Run(Box::new(r))
    }
}

impl From<FailureReport> for Record {
    fn from(f: FailureReport) -> Record {
        Record::Failure(Box::new(f))
    }
}

/// A record read back from the store.
#[derive(Clone, Debug, PartialEq)]
pub struct Stored {
    pub id: Id,
    pub path: PathBuf,
    pub record: Record,
}

impl Stored {
    pub fn kind(&self) -> RecordKind {
        self.record.kind()
    }
}

/// JSON with object keys sorted at every level, two-space indentation (serde_json's pretty
/// layout), and a final newline: the canonical bytes of a failure report.
pub fn canonical_json(v: &Value) -> String {
    fn write(v: &Value, indent: usize, out: &mut String) {
        match v {
            Value::Array(items) if !items.is_empty() => {
                out.push_str("[\n");
                for (i, item) in items.iter().enumerate() {
                    out.push_str(&"  ".repeat(indent + 1));
                    write(item, indent + 1, out);
                    out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
                }
                out.push_str(&"  ".repeat(indent));
                out.push(']');
            }
            Value::Object(map) if !map.is_empty() => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push_str("{\n");
                for (i, k) in keys.iter().enumerate() {
                    out.push_str(&"  ".repeat(indent + 1));
                    out.push_str(&serde_json::to_string(k).unwrap_or_else(|_| "\"\"".into()));
                    out.push_str(": ");
                    write(&map[*k], indent + 1, out);
                    out.push_str(if i + 1 < keys.len() { ",\n" } else { "\n" });
                }
                out.push_str(&"  ".repeat(indent));
                out.push('}');
            }
            // Scalars, `[]` and `{}`: serde_json's compact text (never fails for a Value).
            other => out.push_str(&serde_json::to_string(other).unwrap_or_else(|_| "null".into())),
        }
    }
    let mut out = String::new();
    write(v, 0, &mut out);
    out.push('\n');
    out
}

// ─── Errors ──────────────────────────────────────────────────────────────────────────────────────

/// A coded store problem about one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreError {
    pub code: &'static str,
    pub path: PathBuf,
    pub message: String,
}

impl StoreError {
    pub fn new(code: &'static str, path: impl Into<PathBuf>, message: impl Into<String>) -> StoreError {
        StoreError { code, path: path.into(), message: message.into() }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}: {}", self.code, self.path.display(), self.message)
    }
}

impl std::error::Error for StoreError {}

/// The compiler's store layer (hashing, atomic writes, checked reads) reports with the same codes.
impl From<cake::store::BlobError> for StoreError {
    fn from(e: cake::store::BlobError) -> StoreError {
        use cake::store::BlobError as B;
        let message = match &e {
            B::CreateDir { source, .. } => format!("cannot create: {source}"),
            B::Write { source, .. } => format!("cannot write: {source}"),
            B::Read { source, .. } => format!("cannot read: {source}"),
            B::Mismatch { actual, .. } => format!(
                "content does not match its name (SHA-256 is {actual}): the file was changed after it was written; it is skipped and left as it is"
            ),
            B::Conflict { .. } => "a different file already sits at this content address (it was changed after it was written); it is left as it is and nothing was written".to_string(),
            B::NotRegular { what, .. } => format!("{what}, not a regular file: not opened, skipped (the store holds only regular files; remove it)"),
            B::TooLarge { size, limit, .. } => format!("{size} bytes, past the read limit of {limit} bytes for this kind of file: not read, skipped"),
        };
        StoreError::new(e.code(), e.path(), message)
    }
}

fn write_blob(dir: &Path, bytes: &[u8], ext: &str) -> Result<(PathBuf, bool), StoreError> {
    Ok(cake::store::put(dir, bytes, ext)?)
}

/// A stored file of the `kind` folder, within that kind's read limit, checked against its name.
fn read_checked(path: &Path, expected: &str, kind: &str) -> Result<Vec<u8>, StoreError> {
    Ok(cake::store::read_checked(path, expected, cake::store::read_limit(kind))?)
}

// ─── The store ───────────────────────────────────────────────────────────────────────────────────

/// What `append` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Appended {
    pub id: Id,
    pub path: PathBuf,
    /// False when the same content was already stored (nothing was written).
    pub new: bool,
}

/// A program source in the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredProgram {
    /// SHA-256 of the stored text (`programs/<sha256>.cake`).
    pub sha256: String,
    pub path: PathBuf,
    /// `kernel NAME` and `target T`, when the text parsed.
    pub name: Option<String>,
    pub target: Option<String>,
    /// True when the text parsed and is stored in canonical form; false when it did not parse and
    /// is stored verbatim.
    pub canonical: bool,
    pub new: bool,
}

/// Every good record and every problem met while reading.
#[derive(Debug, Default)]
pub struct Scan {
    pub records: Vec<Stored>,
    pub problems: Vec<StoreError>,
}

/// The evidence store at one directory.
#[derive(Clone, Debug)]
pub struct EvidenceStore {
    root: PathBuf,
}

impl EvidenceStore {
    /// Open the store at `dir`. The directory need not exist yet (it is created by the first
    /// write); a path that exists and is not a directory is `S001`.
    pub fn open(dir: impl AsRef<Path>) -> Result<EvidenceStore, StoreError> {
        let root = dir.as_ref().to_path_buf();
        if root.exists() && !root.is_dir() {
            return Err(StoreError::new("S001", &root, "exists and is not a directory"));
        }
        Ok(EvidenceStore { root })
    }

    /// [`open`](Self::open) for commands that only read: a path where no store exists is `S009`
    /// (mining an empty, mistyped path would report 0 buckets and succeed).
    pub fn open_existing(dir: impl AsRef<Path>) -> Result<EvidenceStore, StoreError> {
        let root = dir.as_ref();
        if !root.exists() {
            return Err(StoreError::new("S009", root, "no evidence store here: check the path, or import evidence into it first (`cake-evolve-compiler import`)"));
        }
        Self::open(root)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn dir(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// Append a record; the same content gives the same id and writes nothing. A failure report
    /// is validated first (`S008`).
    pub fn append(&self, record: impl Into<Record>) -> Result<Id, StoreError> {
        self.append_detailed(record).map(|a| a.id)
    }

    /// [`append`](Self::append), also saying where the record is and whether it was new.
    pub fn append_detailed(&self, record: impl Into<Record>) -> Result<Appended, StoreError> {
        let record = record.into();
        let kind = record.kind();
        let dir = self.dir(kind.dir());
        if let Record::Failure(f) = &record {
            f.validate().map_err(|m| StoreError::new("S008", &dir, format!("invalid failure report: {m}")))?;
        }
        if let Record::Run(r) = &record {
            if !r.schema.starts_with(RUN_SCHEMA_PREFIX) {
                return Err(StoreError::new("S008", &dir, format!("run record schema `{}` is not `{RUN_SCHEMA_PREFIX}*`", r.schema)));
            }
        }
        let bytes = record.canonical_bytes().map_err(|m| StoreError::new("S008", &dir, format!("cannot serialize: {m}")))?;
        let (path, new) = write_blob(&dir, &bytes, "json")?;
        Ok(Appended { id: Id::of_bytes(&bytes), path, new })
    }

    /// Append a run record given as the bytes the runtime wrote (`cake run --evidence DIR`),
    /// kept byte for byte so its id stays the runtime's file name. The bytes must parse as a run
    /// record (`S008` otherwise).
    pub fn append_run_bytes(&self, bytes: &[u8]) -> Result<Appended, StoreError> {
        let dir = self.dir(RUNS_DIR);
        let r: RunRecord =
            serde_json::from_slice(bytes).map_err(|e| StoreError::new("S008", &dir, format!("not a valid run record: {e}")))?;
        if !r.schema.starts_with(RUN_SCHEMA_PREFIX) {
            return Err(StoreError::new("S008", &dir, format!("run record schema `{}` is not `{RUN_SCHEMA_PREFIX}*`", r.schema)));
        }
        let (path, new) = write_blob(&dir, bytes, "json")?;
        Ok(Appended { id: Id::of_bytes(bytes), path, new })
    }

    /// Store a program's source under `programs/`, in canonical form when it parses (its name is
    /// then the `program.sha256` of run records), verbatim otherwise.
    pub fn put_program(&self, source: &str) -> Result<StoredProgram, StoreError> {
        let (text, name, target, canonical) = match cake::syntax::parse(source) {
            Ok(file) => (cake::syntax::print(&file), Some(file.kernel.name.clone()), Some(file.target.name.clone()), true),
            Err(_) => (source.to_string(), None, None, false),
        };
        let (path, new) = write_blob(&self.dir(PROGRAMS_DIR), text.as_bytes(), "cake")?;
        Ok(StoredProgram { sha256: sha256_hex(text.as_bytes()), path, name, target, canonical, new })
    }

    /// The stored source of a program (`None` when the store does not have it). A file whose
    /// bytes do not hash to its name is `S004`.
    pub fn program(&self, sha256: &str) -> Result<Option<String>, StoreError> {
        if !is_sha256(sha256) {
            return Err(StoreError::new("S007", self.dir(PROGRAMS_DIR), format!("`{sha256}` is not a SHA-256")));
        }
        let path = self.dir(PROGRAMS_DIR).join(format!("{sha256}.cake"));
        // Not `exists()`: that follows a symlink (read_checked refuses one, with S010).
        if path.symlink_metadata().is_err() {
            return Ok(None);
        }
        let bytes = read_checked(&path, sha256, PROGRAMS_DIR)?;
        String::from_utf8(bytes).map(Some).map_err(|_| StoreError::new("S003", &path, "program source is not UTF-8"))
    }

    /// The hashes of every stored program, sorted.
    pub fn programs(&self) -> Result<Vec<String>, StoreError> {
        Ok(list_dir(&self.dir(PROGRAMS_DIR))?
            .into_iter()
            .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).filter(|s| is_sha256(s)).map(str::to_string))
            .collect())
    }

    /// Store an imported file verbatim under `files/<sha256>.<ext>`.
    pub fn put_file(&self, bytes: &[u8], ext: &str) -> Result<(Id, bool), StoreError> {
        let ext = sanitize_ext(ext);
        let (_, new) = write_blob(&self.dir(FILES_DIR), bytes, &ext)?;
        Ok((Id::of_bytes(bytes), new))
    }

    /// An imported file's bytes.
    pub fn file(&self, id: &Id) -> Result<Option<Vec<u8>>, StoreError> {
        let dir = self.dir(FILES_DIR);
        for p in list_dir(&dir)? {
            if p.file_name().and_then(|n| n.to_str()).and_then(|n| n.split('.').next()) == Some(id.as_str()) {
                return read_checked(&p, id.as_str(), FILES_DIR).map(Some);
            }
        }
        Ok(None)
    }

    /// Every record file, in a fixed order (runs, then failures; each by id), read lazily: good
    /// records as `Ok`, unreadable or corrupt ones as a coded `Err` naming the file. A problem
    /// with a whole directory is one `Err`.
    pub fn iter(&self) -> impl Iterator<Item = Result<Stored, StoreError>> + '_ {
        [RecordKind::Run, RecordKind::Failure].into_iter().flat_map(move |kind| {
            let dir = self.dir(kind.dir());
            let entries: Vec<Result<PathBuf, StoreError>> = match list_dir(&dir) {
                Ok(paths) => paths.into_iter().map(Ok).collect(),
                Err(e) => vec![Err(e)],
            };
            entries.into_iter().map(move |p| p.and_then(|p| read_record(kind, &p)))
        })
    }

    /// Read everything: the good records, and each problem once (to print as a warning).
    pub fn scan(&self) -> Scan {
        let mut scan = Scan::default();
        for item in self.iter() {
            match item {
                Ok(s) => scan.records.push(s),
                Err(e) => scan.problems.push(e),
            }
        }
        scan
    }

    /// The record with this id, or a unique id prefix of at least 8 digits.
    pub fn get(&self, id: &str) -> Result<Stored, StoreError> {
        let id = id.trim().to_ascii_lowercase();
        if id.len() < 8 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StoreError::new("S007", &self.root, format!("`{id}` is not a record id (64 hex digits, or a prefix of at least 8)")));
        }
        let mut found = Vec::new();
        for kind in [RecordKind::Run, RecordKind::Failure] {
            for p in list_dir(&self.dir(kind.dir()))? {
                if p.file_stem().and_then(|s| s.to_str()).is_some_and(|s| s.starts_with(&id)) {
                    found.push((kind, p));
                }
            }
        }
        match found.len() {
            0 => Err(StoreError::new("S007", &self.root, format!("no record `{id}`"))),
            1 => {
                let (kind, p) = found.remove(0);
                read_record(kind, &p)
            }
            n => {
                let named: Vec<String> = found.iter().take(4).filter_map(|(_, p)| p.file_stem().map(|s| s.to_string_lossy().chars().take(16).collect())).collect();
                let more = if n > named.len() { format!(", and {} more", n - named.len()) } else { String::new() };
                Err(StoreError::new("S007", &self.root, format!("`{id}` is ambiguous: {n} records start with it ({}…{more})", named.join("…, "))))
            }
        }
    }
}

fn sanitize_ext(ext: &str) -> String {
    let e: String = ext.trim_start_matches('.').chars().filter(|c| c.is_ascii_alphanumeric()).take(8).collect::<String>().to_ascii_lowercase();
    if e.is_empty() {
        "txt".into()
    } else {
        e
    }
}

/// The entries of a record directory that are not temporary files (names starting with `.`),
/// sorted by name. A missing directory is empty.
fn list_dir(dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    match dir.symlink_metadata() {
        Err(_) => return Ok(Vec::new()),
        // A symlinked record folder would lead the readers out of the store.
        Ok(m) if !m.is_dir() => return Err(StoreError::new("S010", dir, "a record folder that is a symbolic link or a file, not a folder: not read (the store holds only regular folders and files)")),
        Ok(_) => {}
    }
    let rd = std::fs::read_dir(dir).map_err(|e| StoreError::new("S002", dir, format!("cannot list: {e}")))?;
    let mut out = Vec::new();
    for e in rd {
        let e = e.map_err(|e| StoreError::new("S002", dir, format!("cannot list: {e}")))?;
        let name = e.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        out.push(e.path());
    }
    out.sort();
    Ok(out)
}

fn read_record(kind: RecordKind, path: &Path) -> Result<Stored, StoreError> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let Some(stem) = name.strip_suffix(".json").filter(|s| is_sha256(s)) else {
        return Err(StoreError::new("S005", path, "not a record file (records are named <sha256>.json); skipped"));
    };
    let id = Id(stem.to_string());
    if path.is_dir() {
        return Err(StoreError::new("S005", path, "a directory where a record file should be; skipped"));
    }
    let bytes = read_checked(path, stem, kind.dir())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| StoreError::new("S003", path, format!("not valid JSON: {e}")))?;
    let schema = value.get("schema").and_then(Value::as_str).unwrap_or("").to_string();
    let record = match kind {
        RecordKind::Run => {
            if !schema.starts_with(RUN_SCHEMA_PREFIX) {
                return Err(StoreError::new("S005", path, format!("schema `{schema}` is not a run record schema ({RUN_SCHEMA_PREFIX}*)")));
            }
            let r: RunRecord = serde_json::from_value(value).map_err(|e| StoreError::new("S003", path, format!("not a valid run record: {e}")))?;
            Record::Run(Box::new(r))
        }
        RecordKind::Failure => {
            if schema != FAILURE_SCHEMA {
                return Err(StoreError::new("S005", path, format!("schema `{schema}` is not `{FAILURE_SCHEMA}`")));
            }
            let f: FailureReport =
                serde_json::from_value(value).map_err(|e| StoreError::new("S003", path, format!("not a valid failure report: {e}")))?;
            Record::Failure(Box::new(f))
        }
    };
    Ok(Stored { id, path: path.to_path_buf(), record })
}
