//! Importers: turn what tools print into failure reports in the evidence store.
//!
//! * `ptxas` — a compile log: `ptxas error/warning/fatal` lines (too much shared or local data,
//!   `(C7508) … setmaxnreg ignored`, serialized wgmma, PTX syntax errors with their PTX line),
//!   the resource report's spills (`N bytes spill stores, M bytes spill loads`), NVRTC's
//!   `file(LINE): error: …` lines and Cake's own `error[L0xx]` / `error[N0xx]` build errors
//!   (lowering and NVRTC; verifier findings are not evidence of a failure and are skipped).
//! * `sanitizer` — compute-sanitizer output (memcheck, racecheck, synccheck, initcheck): one
//!   report per distinct error (class + location), with how many times it was printed; host
//!   backtraces are dropped; a CUDA API error (`Program hit CUDA_ERROR_… on CUDA API call`) is
//!   kept only when no device-side error explains it.
//! * `report` — failure reports in the JSON schema of `evolution/FAILURE_REPORT.md` (one object,
//!   an array, or one object per line), the program given inline, by hash, or by `--program`.
//! * `run` — a run record written elsewhere (`cake run --evidence DIR`), copied in unchanged.
//!
//! Every imported file is first stored verbatim under `files/` and each report names it
//! (`source_file`), so evidence can be traced back to the tool's own words.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use cake::runtime::record::RunRecord;
use regex::Regex;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::normalize::normalize;
use crate::store::{is_sha256, EvidenceStore, FailureReport, SpanKind, SpanRef, Stage, StoreError, StoredProgram};

/// What kind of file is imported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ImportKind {
    Ptxas,
    Sanitizer,
    Report,
    Run,
}

impl ImportKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ImportKind::Ptxas => "ptxas",
            ImportKind::Sanitizer => "sanitizer",
            ImportKind::Report => "report",
            ImportKind::Run => "run",
        }
    }
}

/// One failure a parser found, before it is tied to a program.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub tool: String,
    pub stage: Stage,
    pub class: String,
    pub message: String,
    pub span: Option<SpanRef>,
    pub extra: Map<String, Value>,
}

impl Event {
    fn new(tool: &str, stage: Stage, class: impl Into<String>, message: impl Into<String>) -> Event {
        Event { tool: tool.into(), stage, class: class.into(), message: message.into(), span: None, extra: Map::new() }
    }
}

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("importer regex"))
}

/// `text` as a class suffix: normalized (numbers, addresses, names out), lower case, words joined
/// by `_`, at most `words` words.
pub fn slug(text: &str, words: usize) -> String {
    let n = normalize(text);
    let cleaned: String = n.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { ' ' }).collect();
    let parts: Vec<&str> = cleaned.split_whitespace().filter(|w| !matches!(*w, "n" | "hex" | "path" | "sym" | "hash")).take(words).collect();
    if parts.is_empty() {
        "unknown".into()
    } else {
        parts.join("_")
    }
}

fn span_for_file(file: &str, line: u32, col: Option<u32>) -> SpanRef {
    let base = file.rsplit('/').next().unwrap_or(file).to_string();
    let kind = if base.ends_with(".cake") {
        SpanKind::Cake
    } else if base.ends_with(".ptx") {
        SpanKind::Ptx
    } else {
        SpanKind::Cuda
    };
    SpanRef { kind, line, col, file: Some(base) }
}

fn parse_hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim_start_matches("0x").trim_start_matches("0X"), 16).ok()
}

// ─── ptxas / NVRTC / build logs ──────────────────────────────────────────────────────────────────

/// Failures in a compile log: ptxas, NVRTC and Cake build errors (see the module docs).
pub fn parse_ptxas(text: &str) -> Vec<Event> {
    static PTXAS: OnceLock<Regex> = OnceLock::new();
    static NVRTC: OnceLock<Regex> = OnceLock::new();
    static CAKE: OnceLock<Regex> = OnceLock::new();
    static ARROW: OnceLock<Regex> = OnceLock::new();
    static CODE: OnceLock<Regex> = OnceLock::new();
    static TOO_MUCH: OnceLock<Regex> = OnceLock::new();
    static PROPS: OnceLock<Regex> = OnceLock::new();
    let ptxas = re(
        &PTXAS,
        r"^\s*ptxas(?:\s+(?P<file>[^,\s]+),\s*line\s+(?P<line>\d+);)?\s*(?P<sev>info|warning|error|fatal)\s*:\s*(?P<msg>.*?)\s*$",
    );
    let nvrtc = re(&NVRTC, r"^\s*(?P<file>[^\s()]+)\((?P<line>\d+)\):\s*(?P<sev>error|catastrophic error|warning)(?:\s*#[\w-]+)?\s*:\s*(?P<msg>.*?)\s*$");
    let cake = re(&CAKE, r"^\s*error\[(?P<code>[LN]\d{3})\]:\s*(?P<msg>.*?)\s*$");
    let arrow = re(&ARROW, r"^\s*-->\s*(?P<file>.+?):(?P<line>\d+):(?P<col>\d+)\s*$");
    let code_re = re(&CODE, r"^\((?P<code>C\d{3,5})\)\s*(?P<rest>.*)$");
    let too_much = re(&TOO_MUCH, r"uses too much (?P<what>shared|local|parameter|constant) data \((?P<used>0x[0-9a-fA-F]+) bytes, (?P<max>0x[0-9a-fA-F]+) max\)");
    let props = re(&PROPS, r"Function properties for (?P<f>\S+)");

    let mut events = Vec::new();
    let mut fatal = Vec::new();
    let mut function: Option<String> = None;
    let lines: Vec<&str> = text.lines().collect();
    for (i, raw) in lines.iter().enumerate() {
        let line = raw.trim_end();
        if let Some(c) = ptxas.captures(line) {
            let sev = &c["sev"];
            let msg = c["msg"].to_string();
            if let Some(p) = props.captures(&msg) {
                function = Some(p["f"].trim_matches('\'').to_string());
                continue;
            }
            let (code, rest) = match code_re.captures(&msg) {
                Some(cc) => (Some(cc["code"].to_string()), cc["rest"].to_string()),
                None => (None, msg.clone()),
            };
            if sev == "info" && code.is_none() {
                continue; // resource numbers, "Compiling entry function", compile time
            }
            let class = if let Some(t) = too_much.captures(&msg) {
                format!("ptxas.too_much_{}_data", &t["what"])
            } else if msg.contains("setmaxnreg ignored") {
                "ptxas.setmaxnreg_ignored".into()
            } else if msg.contains("wgmma.mma_async instructions are serialized") {
                "ptxas.wgmma_serialized".into()
            } else if let Some(code) = &code {
                format!("ptxas.{code}")
            } else {
                format!("ptxas.{sev}.{}", slug(&rest, 6))
            };
            let mut e = Event::new("ptxas", Stage::Compile, class, line.trim());
            e.extra.insert("severity".into(), json!(sev));
            if let Some(code) = code {
                e.extra.insert("ptxas_code".into(), json!(code));
            }
            if let Some(t) = too_much.captures(&msg) {
                if let (Some(used), Some(max)) = (parse_hex(&t["used"]), parse_hex(&t["max"])) {
                    e.extra.insert("used_bytes".into(), json!(used));
                    e.extra.insert("max_bytes".into(), json!(max));
                }
            }
            if let (Some(f), Some(l)) = (c.name("file"), c.name("line")) {
                e.span = l.as_str().parse().ok().map(|l| span_for_file(f.as_str(), l, None));
            }
            if sev == "fatal" {
                fatal.push(e);
            } else {
                events.push(e);
            }
        } else if line.contains("bytes stack frame") && line.contains("spill") {
            let nums: Vec<u64> = line
                .split(',')
                .map(|p| p.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0))
                .collect();
            let (stack, stores, loads) = (nums.first().copied().unwrap_or(0), nums.get(1).copied().unwrap_or(0), nums.get(2).copied().unwrap_or(0));
            if stores + loads > 0 {
                let mut e = Event::new("ptxas", Stage::Compile, "ptxas.spill", line.trim());
                e.extra.insert("stack_frame_bytes".into(), json!(stack));
                e.extra.insert("spill_store_bytes".into(), json!(stores));
                e.extra.insert("spill_load_bytes".into(), json!(loads));
                if let Some(f) = &function {
                    e.extra.insert("function".into(), json!(f));
                }
                events.push(e);
            }
        } else if let Some(c) = nvrtc.captures(line) {
            if &c["sev"] == "warning" {
                continue;
            }
            let mut e = Event::new("nvrtc", Stage::Compile, format!("nvrtc.error.{}", slug(&c["msg"], 6)), line.trim());
            e.span = c["line"].parse().ok().map(|l| span_for_file(&c["file"], l, None));
            events.push(e);
        } else if let Some(c) = cake.captures(line) {
            let code = c["code"].to_string();
            let stage = if code.starts_with('L') { Stage::Lower } else { Stage::Compile };
            let mut e = Event::new("cake", stage, format!("cake.{code}"), format!("error[{code}]: {}", &c["msg"]));
            if let Some(a) = lines.get(i + 1).and_then(|l| arrow.captures(l)) {
                e.span = a["line"].parse().ok().map(|l| span_for_file(&a["file"], l, a["col"].parse().ok()));
            }
            events.push(e);
        }
    }
    // "Ptx assembly aborted due to errors" only matters when nothing else explains the failure.
    if events.iter().all(|e| e.extra.get("severity").and_then(Value::as_str) != Some("error") && !e.class.starts_with("nvrtc.")) {
        events.extend(fatal);
    }
    dedup(events)
}

/// Collapse events with the same class, message and span into one with `occurrences`.
fn dedup(events: Vec<Event>) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    for e in events {
        let key = (e.class.clone(), normalize(&e.message), e.span.clone());
        if let Some(prev) = out.iter_mut().find(|p| (p.class.clone(), normalize(&p.message), p.span.clone()) == key) {
            let n = prev.extra.get("occurrences").and_then(Value::as_u64).unwrap_or(1) + 1;
            prev.extra.insert("occurrences".into(), json!(n));
        } else {
            out.push(e);
        }
    }
    out
}

// ─── compute-sanitizer ───────────────────────────────────────────────────────────────────────────

/// A compute-sanitizer error header → (tool, class). Unknown headers get a slug class.
fn sanitizer_class(header: &str) -> (String, String) {
    static ACCESS: OnceLock<Regex> = OnceLock::new();
    static RACE: OnceLock<Regex> = OnceLock::new();
    static HAZARD: OnceLock<Regex> = OnceLock::new();
    static API: OnceLock<Regex> = OnceLock::new();
    let access = re(&ACCESS, r"^(?P<init>Uninitialized )?(?:Invalid )?__(?P<space>global|shared|local)__ (?:memory )?(?P<op>read|write|atomic)");
    let race = re(&RACE, r"Race reported between (?P<a>\w+) access .* and (?P<b>\w+) access");
    let hazard = re(&HAZARD, r"Potential (?P<h>RAW|WAR|WAW) hazard");
    let api = re(&API, r"Program hit (?P<err>[A-Za-z_0-9]+)");
    let h = header.trim();
    if let Some(c) = access.captures(h) {
        let tool = if c.name("init").is_some() { "initcheck" } else { "memcheck" };
        let what = if c.name("init").is_some() { "uninitialized" } else { "invalid" };
        return (tool.into(), format!("{tool}.{what}_{}_{}", &c["space"], &c["op"]));
    }
    if let Some(c) = race.captures(h) {
        return ("racecheck".into(), format!("racecheck.race_{}_{}", c["a"].to_ascii_lowercase(), c["b"].to_ascii_lowercase()));
    }
    if let Some(c) = hazard.captures(h) {
        return ("racecheck".into(), format!("racecheck.hazard_{}", c["h"].to_ascii_lowercase()));
    }
    if h.starts_with("Barrier error") {
        let detail = h.split_once('.').map_or("", |(_, d)| d);
        return ("synccheck".into(), format!("synccheck.barrier_error.{}", slug(detail, 5)));
    }
    if let Some(c) = api.captures(h) {
        return ("memcheck".into(), format!("sanitizer.api.{}", &c["err"]));
    }
    if h.starts_with("Misaligned") || h.starts_with("Out-of-range") || h.starts_with("Invalid") || h.starts_with("Malloc") {
        return ("memcheck".into(), format!("memcheck.{}", slug(h, 6)));
    }
    ("sanitizer".into(), format!("sanitizer.{}", slug(h, 6)))
}

/// Failures in compute-sanitizer output (see the module docs).
pub fn parse_sanitizer(text: &str) -> Vec<Event> {
    static LOC_OLD: OnceLock<Regex> = OnceLock::new();
    static LOC_NEW: OnceLock<Regex> = OnceLock::new();
    static THREAD: OnceLock<Regex> = OnceLock::new();
    static ADDR: OnceLock<Regex> = OnceLock::new();
    // `at 0x1b0 in /tmp/k.cu:42:gemm_kernel` (older) and `at gemm_kernel+0x1b0 in /tmp/k.cu:42` (newer).
    let loc_old = re(&LOC_OLD, r"at (?:0x[0-9a-fA-F]+) in (?P<file>[^\s:]+):(?P<line>\d+):(?P<func>\S.*?)(?:\s+\[\d+ hazards?\])?\s*$");
    let loc_new = re(&LOC_NEW, r"at (?P<func>\S+?)\+0x[0-9a-fA-F]+(?: in (?P<file>[^\s:]+):(?P<line>\d+))?");
    let thread = re(&THREAD, r"by thread \((?P<t>\d+,\d+,\d+)\) in block \((?P<b>\d+,\d+,\d+)\)");
    let addr = re(&ADDR, r"^(?:Address|Access to) 0x[0-9a-fA-F]+ (?P<what>is .*)$");

    struct Block {
        header: String,
        details: Vec<String>,
        in_backtrace: bool,
    }
    let mut blocks: Vec<Block> = Vec::new();
    for raw in text.lines() {
        let Some(rest) = raw.trim_end().strip_prefix("=========") else { continue };
        let body = rest.trim_start_matches('=');
        let indent = body.len() - body.trim_start().len();
        let t = body.trim();
        if t.is_empty() {
            if let Some(b) = blocks.last_mut() {
                b.in_backtrace = true; // a blank line ends an error's details
            }
            continue;
        }
        let is_summary = t.starts_with("ERROR SUMMARY")
            || t.starts_with("RACECHECK SUMMARY")
            || t.starts_with("LEAK SUMMARY")
            || t.starts_with("COMPUTE-SANITIZER")
            || t.starts_with("Target application returned")
            || t.starts_with("This application");
        if indent <= 1 && !t.starts_with("Host Frame") && !t.starts_with("in ") && !t.starts_with("Saved host backtrace") {
            if is_summary {
                continue;
            }
            let header = t.trim_start_matches("Error:").trim_start_matches("ERROR:").trim_start_matches("WARN:").trim();
            // `WARN:(Warp Level Programming) Potential RAW hazard …`
            let header = header.strip_prefix("(Warp Level Programming)").map_or(header, str::trim);
            blocks.push(Block { header: header.to_string(), details: Vec::new(), in_backtrace: false });
            continue;
        }
        let Some(b) = blocks.last_mut() else { continue };
        if t.starts_with("Saved host backtrace") || t.starts_with("Host Frame") || t.starts_with("Device Frame") {
            b.in_backtrace = true;
        }
        if !b.in_backtrace {
            b.details.push(t.to_string());
        }
    }

    let mut events = Vec::new();
    for b in &blocks {
        // A race's second access is on the next line: classify the header with its details.
        let whole = std::iter::once(b.header.as_str()).chain(b.details.iter().map(String::as_str)).collect::<Vec<_>>().join(" ");
        let (tool, class) = sanitizer_class(&whole);
        let mut message = b.header.clone();
        let mut e = Event::new(&tool, Stage::Run, class, String::new());
        let mut locations = Vec::new();
        let all = std::iter::once(b.header.as_str()).chain(b.details.iter().map(String::as_str));
        for d in all {
            if let Some(c) = loc_old.captures(d) {
                locations.push((c["file"].to_string(), c["line"].parse::<u32>().ok(), c["func"].trim().to_string()));
            } else if let Some(c) = loc_new.captures(d) {
                locations.push((
                    c.name("file").map_or(String::new(), |m| m.as_str().to_string()),
                    c.name("line").and_then(|m| m.as_str().parse().ok()),
                    c["func"].to_string(),
                ));
            }
            if let Some(c) = thread.captures(d) {
                e.extra.entry("thread").or_insert(json!(format!("({})", &c["t"])));
                e.extra.entry("block").or_insert(json!(format!("({})", &c["b"])));
            }
            if let Some(c) = addr.captures(d) {
                message.push_str(&format!("; {d}"));
                e.extra.entry("address").or_insert(json!(c["what"].to_string()));
            } else if d.starts_with("and is ") || d.starts_with("Current Value") {
                e.extra.entry("detail").or_insert(json!(d));
            } else if d.starts_with("and ") && d.contains(" access ") {
                message.push_str(&format!(" {d}"));
            } else if d.starts_with("Write Thread") || d.starts_with("Read Thread") {
                let side = if d.starts_with("Write") { "write" } else { "read" };
                e.extra.entry(format!("{side}_access")).or_insert(json!(d));
            }
        }
        if let Some((file, Some(line), func)) = locations.iter().find(|(f, l, _)| !f.is_empty() && l.is_some()) {
            e.span = Some(span_for_file(file, *line, None));
            e.extra.insert("function".into(), json!(func));
        } else if let Some((_, _, func)) = locations.first() {
            e.extra.insert("function".into(), json!(func));
        }
        if locations.len() > 1 {
            let others: Vec<Value> =
                locations[1..]
                .iter()
                .map(|(f, l, func)| {
                    let base = f.rsplit('/').next().unwrap_or(f);
                    json!(format!("{}:{}:{}", base, l.map_or("?".into(), |l| l.to_string()), func))
                })
                .collect();
            e.extra.insert("other_locations".into(), Value::Array(others));
        }
        e.message = message;
        events.push(e);
    }
    let device_errors = events.iter().any(|e| !e.class.starts_with("sanitizer.api."));
    if device_errors {
        events.retain(|e| !e.class.starts_with("sanitizer.api."));
    }
    dedup(events)
}

// ─── Importing into the store ────────────────────────────────────────────────────────────────────

/// What an import needs besides the file.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// The program the file is about (required for ptxas and sanitizer logs).
    pub program: Option<PathBuf>,
    /// Overrides the program's target.
    pub target: Option<String>,
    /// The shape of the run the log came from.
    pub shapes: BTreeMap<String, i64>,
    /// GPU seconds the failing run cost.
    pub gpu_seconds: Option<f64>,
}

/// What an import stored.
#[derive(Clone, Debug, Serialize)]
pub struct ImportOutcome {
    pub kind: ImportKind,
    /// The imported file in `files/` (for a run record: the record id).
    pub file: String,
    /// The program, when one was given or found.
    pub program: Option<String>,
    /// Every record appended (or found already there).
    pub records: Vec<ImportedRecord>,
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ImportedRecord {
    pub id: String,
    pub class: String,
    pub new: bool,
}

/// An import failure: `I001` unreadable input, `I002` program missing or unusable, `I003`
/// malformed report or run record, or a store error. In a file of several reports, an error
/// after the first is `Partial`: it has the code of the error and names the reports stored
/// before it.
#[derive(Debug)]
pub enum ImportError {
    Input { code: &'static str, path: PathBuf, message: String },
    Store(StoreError),
    Partial { stored: Vec<ImportedRecord>, error: Box<ImportError> },
}

impl ImportError {
    fn input(code: &'static str, path: &Path, message: impl Into<String>) -> ImportError {
        ImportError::Input { code, path: path.to_path_buf(), message: message.into() }
    }

    pub fn code(&self) -> &'static str {
        match self {
            ImportError::Input { code, .. } => code,
            ImportError::Store(e) => e.code,
            ImportError::Partial { error, .. } => error.code(),
        }
    }
}

impl std::fmt::Display for ImportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImportError::Input { code, path, message } => write!(f, "[{code}] {}: {message}", path.display()),
            ImportError::Store(e) => write!(f, "{e}"),
            ImportError::Partial { stored, error } => {
                write!(f, "{error}\n  {} report(s) before it were stored:", stored.len())?;
                for (i, r) in stored.iter().enumerate() {
                    write!(f, "\n    report {} {} {}", i + 1, r.id.get(..12).unwrap_or(&r.id), r.class)?;
                }
                write!(f, "\n  help: fix the bad report and import the file again (the stored reports are found present, not added twice)")
            }
        }
    }
}

impl std::error::Error for ImportError {}

impl From<StoreError> for ImportError {
    fn from(e: StoreError) -> Self {
        ImportError::Store(e)
    }
}

fn load_program(store: &EvidenceStore, path: &Path) -> Result<StoredProgram, ImportError> {
    let source = std::fs::read_to_string(path).map_err(|e| ImportError::input("I002", path, format!("cannot read the program: {e}")))?;
    Ok(store.put_program(&source)?)
}

/// Import one file of `kind` into `store`.
pub fn import_file(store: &EvidenceStore, kind: ImportKind, file: &Path, opts: &ImportOptions) -> Result<ImportOutcome, ImportError> {
    let bytes = std::fs::read(file).map_err(|e| ImportError::input("I001", file, format!("cannot read: {e}")))?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let ext = if kind == ImportKind::Report { "json" } else { "log" };
    let program = opts.program.as_deref().map(|p| load_program(store, p)).transpose()?;
    let mut notes = Vec::new();
    if let Some(p) = &program {
        if !p.canonical {
            notes.push(format!("the program does not parse; stored verbatim as {}", p.sha256));
        }
    }

    match kind {
        ImportKind::Ptxas | ImportKind::Sanitizer => {
            let Some(prog) = &program else {
                return Err(ImportError::input("I002", file, format!("--program is required to import a {} log", kind.as_str())));
            };
            let Some(target) = opts.target.clone().or_else(|| prog.target.clone()) else {
                return Err(ImportError::input("I002", file, "the program's target is unknown (it does not parse): pass --target"));
            };
            let (file_id, _) = store.put_file(&bytes, ext)?;
            let events = if kind == ImportKind::Ptxas { parse_ptxas(&text) } else { parse_sanitizer(&text) };
            if events.is_empty() {
                notes.push(format!("no failure found in the {} log", kind.as_str()));
            }
            let mut records = Vec::new();
            for e in events {
                let mut r = FailureReport::new(&prog.sha256, &target, e.stage, &e.tool, &e.class, &e.message);
                r.program.name = prog.name.clone();
                r.program.path = opts.program.as_ref().map(|p| p.display().to_string());
                r.span = e.span;
                r.shapes = opts.shapes.clone();
                r.gpu_seconds = opts.gpu_seconds;
                r.source_file = Some(file_id.to_string());
                r.extra = e.extra;
                let a = store.append_detailed(r)?;
                records.push(ImportedRecord { id: a.id.to_string(), class: e.class, new: a.new });
            }
            Ok(ImportOutcome { kind, file: file_id.to_string(), program: program.map(|p| p.sha256), records, notes })
        }
        ImportKind::Report => {
            let docs = parse_report_documents(&text).map_err(|m| ImportError::input("I003", file, m))?;
            let (file_id, _) = store.put_file(&bytes, ext)?;
            let mut records = Vec::new();
            let mut program_sha = program.as_ref().map(|p| p.sha256.clone());
            for (i, doc) in docs.into_iter().enumerate() {
                match import_report(store, file, &file_id.to_string(), i, doc, opts, program.as_ref(), &mut notes, &mut program_sha) {
                    Ok(r) => records.push(r),
                    Err(e) if records.is_empty() => return Err(e),
                    // The reports before the bad one are in the store (appends are durable and
                    // idempotent): say which, so a fixed file can be imported again.
                    Err(e) => return Err(ImportError::Partial { stored: records, error: Box::new(e) }),
                }
            }
            Ok(ImportOutcome { kind, file: file_id.to_string(), program: program_sha, records, notes })
        }
        ImportKind::Run => {
            let rec: RunRecord =
                serde_json::from_str(&text).map_err(|e| ImportError::input("I003", file, format!("not a run record: {e}")))?;
            if let Some(p) = &program {
                if p.sha256 != rec.program.sha256 {
                    notes.push(format!("--program hashes to {}, the record names program {}", p.sha256, rec.program.sha256));
                }
            } else if is_sha256(&rec.program.sha256) && store.program(&rec.program.sha256)?.is_none() {
                notes.push(format!("program {} is not in the store: pass --program so mining can re-verify it", rec.program.sha256));
            }
            let class = rec.error.as_ref().map_or_else(|| rec.verdict.name().to_string(), |e| e.class.clone());
            // The record's own bytes are its content: no copy under files/.
            let a = store.append_run_bytes(&bytes)?;
            Ok(ImportOutcome {
                kind,
                file: a.id.to_string(),
                program: program.map(|p| p.sha256),
                records: vec![ImportedRecord { id: a.id.to_string(), class, new: a.new }],
                notes,
            })
        }
    }
}

/// One report of a multi-report file (`i` counts from 0), stored.
#[allow(clippy::too_many_arguments)]
fn import_report(
    store: &EvidenceStore,
    file: &Path,
    file_id: &str,
    i: usize,
    doc: Value,
    opts: &ImportOptions,
    program: Option<&StoredProgram>,
    notes: &mut Vec<String>,
    program_sha: &mut Option<String>,
) -> Result<ImportedRecord, ImportError> {
    let mut r: FailureReport = serde_json::from_value(doc)
        .map_err(|e| ImportError::input("I003", file, format!("report {}: not a failure report: {e}", i + 1)))?;
    if let Some(src) = r.program.source.take() {
        let p = store.put_program(&src)?;
        if !r.program.sha256.is_empty() && r.program.sha256 != p.sha256 {
            notes.push(format!(
                "report {}: program.sha256 {} is not the hash of its canonical source ({}); the source's hash is used",
                i + 1,
                r.program.sha256,
                p.sha256
            ));
        }
        r.program.sha256 = p.sha256.clone();
        r.program.name = r.program.name.or(p.name);
        *program_sha = Some(p.sha256);
    } else if r.program.sha256.is_empty() {
        let Some(p) = program else {
            return Err(ImportError::input("I002", file, format!("report {}: no program: give program.sha256, program.source or --program", i + 1)));
        };
        r.program.sha256 = p.sha256.clone();
        r.program.name = r.program.name.or(p.name.clone());
    } else if store.program(&r.program.sha256)?.is_none() {
        notes.push(format!("report {}: program {} is not in the store (mining cannot re-verify it)", i + 1, r.program.sha256));
    }
    if r.target.is_empty() {
        r.target = opts.target.clone().or_else(|| program.as_ref().and_then(|p| p.target.clone())).unwrap_or_default();
    }
    if r.shapes.is_empty() {
        r.shapes = opts.shapes.clone();
    }
    r.gpu_seconds = r.gpu_seconds.or(opts.gpu_seconds);
    r.source_file.get_or_insert_with(|| file_id.to_string());
    r.validate().map_err(|m| ImportError::input("I003", file, format!("report {}: {m}", i + 1)))?;
    let class = r.error_class.clone();
    let a = store.append_detailed(r)?;
    Ok(ImportedRecord { id: a.id.to_string(), class, new: a.new })
}

/// One JSON object, an array of them, or one object per line.
fn parse_report_documents(text: &str) -> Result<Vec<Value>, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) => Ok(items),
        Ok(v @ Value::Object(_)) => Ok(vec![v]),
        Ok(_) => Err("expected a JSON object or an array of objects".into()),
        Err(whole) => {
            let mut out = Vec::new();
            for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
                out.push(serde_json::from_str(line).map_err(|e| format!("not JSON ({whole}); as JSON lines, line {}: {e}", i + 1))?);
            }
            Ok(out)
        }
    }
}

// ─── CLI ─────────────────────────────────────────────────────────────────────────────────────────

/// `cake-evolve-compiler import --kind ptxas|sanitizer|report|run FILE --program P.cake`.
#[derive(clap::Args, Debug, Clone)]
pub struct ImportArgs {
    /// What FILE is: a compile log (`ptxas`), compute-sanitizer output (`sanitizer`), failure
    /// reports in the FAILURE_REPORT.md schema (`report`), or a run record (`run`).
    #[arg(long, value_enum)]
    pub kind: ImportKind,
    /// The file to import.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The program the file is about (required for ptxas and sanitizer logs); its canonical
    /// source is stored under programs/.
    #[arg(long, value_name = "P.cake")]
    pub program: Option<PathBuf>,
    /// The evidence store.
    #[arg(long, value_name = "DIR", default_value = crate::store::DEFAULT_STORE_DIR)]
    pub store: PathBuf,
    /// The target, when the program does not say (it does not parse).
    #[arg(long)]
    pub target: Option<String>,
    /// The shape of the failing run, `M=256,N=256,K=128`.
    #[arg(long, value_name = "DIMS")]
    pub shape: Option<String>,
    /// GPU seconds the failing run cost.
    #[arg(long, value_name = "S")]
    pub gpu_seconds: Option<f64>,
}

/// An error of `import`: text on standard error, or one JSON object on standard output; exit 2.
fn import_error(format: crate::Format, message: &str) -> u8 {
    match format {
        crate::Format::Json => println!("{}", serde_json::json!({ "severity": "error", "message": message })),
        crate::Format::Human => eprintln!("error: {}", crate::sanitize::text(message)),
    }
    2
}

/// Run `import`, printing one line per record (`human`) or the outcome as one object (`json`);
/// the exit status (0 imported, 2 usage, input or store error).
pub fn run_import(args: ImportArgs, format: crate::Format) -> u8 {
    let shapes = match args.shape.as_deref().map(|s| cake::shape::parse_all(&[s])).transpose() {
        Ok(s) => s.unwrap_or_default(),
        Err(m) => return import_error(format, &format!("--shape: {m}")),
    };
    let store = match EvidenceStore::open(&args.store) {
        Ok(s) => s,
        Err(e) => return import_error(format, &e.to_string()),
    };
    let opts = ImportOptions { program: args.program.clone(), target: args.target.clone(), shapes, gpu_seconds: args.gpu_seconds };
    match import_file(&store, args.kind, &args.file, &opts) {
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            // A closed pipe is not worth a panic: write errors are ignored.
            match format {
                crate::Format::Json => {
                    let _ = writeln!(stdout, "{}", serde_json::to_string(&out).unwrap_or_default());
                }
                crate::Format::Human => {
                    for r in &out.records {
                        let _ = writeln!(stdout, "{} {}  {}", if r.new { "added  " } else { "present" }, r.id.get(..12).unwrap_or(&r.id), crate::sanitize::line(&r.class));
                    }
                    for n in &out.notes {
                        eprintln!("note: {}", crate::sanitize::line(n));
                    }
                    eprintln!(
                        "imported {} ({}): {} record(s), {} new, into {}",
                        args.file.display(),
                        args.kind.as_str(),
                        out.records.len(),
                        out.records.iter().filter(|r| r.new).count(),
                        args.store.display()
                    );
                }
            }
            0
        }
        Err(e) => import_error(format, &e.to_string()),
    }
}
