//! The `cake` command line: `cake check`, `cake fmt`, `cake explain` here; the other
//! subcommands (`cost`, `lower`, `build`, `run`, `bench`, `corpus`, `mcp`, the hidden child) in
//! the modules beside this file. This binary is the only place that prints or picks an exit
//! status: the `cake` library returns reports and typed errors.
//!
//! Exit status: 0 clean; 1 findings (an error-severity diagnostic, or `fmt --check` found a file
//! to reformat); 2 usage or I/O error (bad arguments, a file missing, unreadable, not UTF-8, not
//! writable). Human diagnostics go to stderr; with `--message-format json`, stdout carries one
//! JSON object per diagnostic and nothing else.

use std::fs;
use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cake::diag::{Diagnostic, Severity};
use cake::render;
use cake::span::{line_col, Span};
use clap::{Parser, Subcommand, ValueEnum};

mod child;
mod corpus;
mod cost;
mod mcp;
mod run;

#[derive(Parser)]
#[command(
    name = "cake",
    version,
    about = "Cake IR: check (types + verifier), format, explain, lower, build, cost, run and bench GPU kernel schedule programs (.cake files)",
    after_help = "Exit status: 0 clean, 1 findings, 2 usage or I/O error."
)]
struct Cli {
    /// How diagnostics are printed: `human` (rustc style, on stderr) or `json` (one JSON object
    /// per diagnostic and line, on stdout; `--format` is another spelling).
    #[arg(long, global = true, value_enum, default_value_t = MessageFormat::Human, alias = "format")]
    message_format: MessageFormat,

    /// When to color human output: `auto` colors when stderr is a terminal (and NO_COLOR is unset).
    #[arg(long, global = true, value_enum, default_value_t = ColorWhen::Auto)]
    color: ColorWhen,

    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum MessageFormat {
    Human,
    Json,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ColorWhen {
    Auto,
    Always,
    Never,
}

#[derive(Subcommand)]
enum Command {
    /// Parse, type-check and verify .cake files (`-` reads standard input).
    Check {
        /// The programs to check (`-` reads standard input).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Verify with the rules under DIR (`<category>/*.toml`) instead of those of the checkout
        /// around the current directory (or, outside a checkout, the rules built into `cake`).
        #[arg(long, value_name = "DIR")]
        rules: Option<PathBuf>,
        /// Also show the findings that follow from an earlier one (a barrier's hang after its
        /// trip-count mismatch); by default each mistake is reported once, at its cause.
        #[arg(long)]
        all: bool,
        /// Also show the analyses' internal notes (the dim binding a counterexample was found under).
        #[arg(long)]
        verbose: bool,
    },
    /// Rewrite .cake files in canonical format (`-` formats standard input to standard output).
    Fmt {
        /// Rewrite nothing; print a diff of each file that would change and exit 1 if any would.
        #[arg(long)]
        check: bool,
        /// The programs to format in place (`-` formats standard input to standard output).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// The kernel corpus: `gate` (run tiers, classify against a baseline), `merge` (join shard
    /// results), `list`, `show`.
    Corpus(corpus::CorpusArgs),
    /// Predict a program's time at a shape and name its bottleneck (`cake cost FILE --shape
    /// M=8192,N=8192,K=8192`); the target must be calibrated (`calibration/<target>.toml`).
    Cost(cost::CostArgs),
    /// Run a program on the GPU over shapes × input distributions, check every output against
    /// its workload's oracle, time it, and write a run record per run (`.cake/evidence/runs/`).
    /// Exit: 0 all passed, 1 a run failed or the program has errors, 2 usage, 3 no GPU (skipped).
    Run(run::RunArgs),
    /// Time a program at its workload's headline shape against a baseline (cuBLAS for GEMM)
    /// measured in the same run; checks the output too and writes run records.
    Bench(run::BenchArgs),
    /// Print the CUDA C++ (with inline PTX) a program lowers to.
    Lower(run::LowerArgs),
    /// Lower and compile with NVRTC: write kernel.cu, kernel.cubin, launch.json and ptxas.json.
    Build(run::BuildArgs),
    /// Serve the compiler to agents over the Model Context Protocol (stdio, JSON-RPC).
    ///
    /// `cake mcp` reads newline-delimited JSON-RPC messages on standard input and answers on
    /// standard output (logs go to standard error), until the client closes standard input.
    /// Register it with an MCP client as a stdio server whose command is `cake` with the
    /// argument `mcp`, started in the Cake checkout: file arguments must lie inside the
    /// server's working directory.
    ///
    /// Tools: check, explain, cost, lower, build, run, bench, corpus_show. Programs are passed
    /// inline as `program` (preferred) or as a `path`. Answers are JSON: findings exactly as
    /// `--message-format json` prints them; a refused input is a tool error with a code (M001
    /// too large, M002 control characters, M003 outside the working directory, M004 bad
    /// arguments, E0001 unreadable file; `cake explain M001`) and a help line. run and bench
    /// spawn `cake run` / `cake bench` as child processes with a time limit; without a GPU they
    /// answer status `skipped` ("no GPU").
    Mcp,
    /// (internal) Execute one run job in this process; `cake run` / `cake bench` spawn it.
    #[command(name = "__run-child", hide = true)]
    RunChild(child::RunChildArgs),
    /// (internal) Print this machine's GPU as JSON.
    #[command(name = "__probe-gpu", hide = true)]
    ProbeGpu,
    /// Explain a diagnostic code (`cake explain E0101`) or an operation of the op catalog
    /// (`cake explain wgmma`).
    Explain {
        /// The diagnostic code or operation name to explain.
        #[arg(required_unless_present_any = ["list", "ops"], conflicts_with_all = ["list", "ops"], value_name = "CODE")]
        code: Option<String>,
        /// List every documented code with its title.
        #[arg(long, conflicts_with = "ops")]
        list: bool,
        /// List every operation of the op catalog (name, class, form, summary).
        #[arg(long)]
        ops: bool,
        /// With `--ops`: the whole op reference as markdown (what `compiler/OPS.md` holds).
        #[arg(long, requires = "ops")]
        markdown: bool,
    },
}

/// The outcome of a command, ordered by severity: the worst one decides the exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Status {
    Clean = 0,
    Findings = 1,
    Failure = 2,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let color = match cli.color {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    };
    let mut out = Reporter::new(cli.message_format, color);
    if cli.message_format == MessageFormat::Json {
        if let Some(name) = text_only_command(&cli.command) {
            let d = Diagnostic::error("E0007", format!("`cake {name}` has no JSON output"), Span::default(), "").with_help(
                "drop `--message-format json`; `build`, `run` and `bench` write their results as JSON files (launch.json, ptxas.json, run records)",
            );
            out.unlocated("<command line>", &d);
            return ExitCode::from(Status::Failure as u8);
        }
    }
    let status = match cli.command {
        Command::Check { files, rules, all, verbose } => check(&mut out, &files, rules.as_deref(), Shown { all, verbose }),
        Command::Fmt { check, files } => fmt(&mut out, &files, check),
        Command::Explain { code, list, ops, markdown } => {
            if ops {
                explain_ops(cli.message_format, markdown)
            } else {
                explain(cli.message_format, code.as_deref(), list)
            }
        }
        Command::Lower(args) => return ExitCode::from(run::lower(args, color)),
        Command::Build(args) => return ExitCode::from(run::build(args, color)),
        Command::Run(args) => return ExitCode::from(run::run(args, color)),
        Command::Bench(args) => return ExitCode::from(run::bench(args, color)),
        Command::RunChild(args) => return ExitCode::from(child::run_child(args)),
        Command::ProbeGpu => return ExitCode::from(child::probe_gpu()),
        Command::Mcp => return ExitCode::from(mcp::main()),
        Command::Corpus(args) => return ExitCode::from(corpus::main(args, cli.message_format == MessageFormat::Json)),
        Command::Cost(args) => {
            return ExitCode::from(cost::main(args, cli.message_format == MessageFormat::Json, color))
        }
    };
    ExitCode::from(status as u8)
}

/// The name of a command whose output has no JSON form (`--message-format json` is E0007 there).
fn text_only_command(c: &Command) -> Option<&'static str> {
    match c {
        Command::Lower(_) => Some("lower"),
        Command::Build(_) => Some("build"),
        Command::Run(_) => Some("run"),
        Command::Bench(_) => Some("bench"),
        Command::Mcp => Some("mcp"),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// cake check

/// Which findings `cake check` shows (`--all`, `--verbose`).
#[derive(Clone, Copy)]
struct Shown {
    all: bool,
    verbose: bool,
}

fn check(out: &mut Reporter, files: &[PathBuf], rules: Option<&Path>, show: Shown) -> Status {
    let active = match cake::rule_source::ActiveRules::resolve(rules) {
        Ok(a) => a,
        Err(d) => {
            out.unlocated(&rules.map_or_else(|| "compiler/rules".to_string(), |p| p.display().to_string()), &d);
            return Status::Failure;
        }
    };
    // Always on stderr, so JSON consumers keep a clean stdout and people see which set judged.
    let _ = writeln!(io::stderr(), "note: {}", active.describe());
    out.rules = Some(active.to_json().to_string());
    out.rule_set = Some(active.set.clone());
    let mut status = Status::Clean;
    for path in files {
        let name = display_name(path);
        let source = match read_source(path, &name) {
            Ok(s) => s,
            Err(d) => {
                out.unlocated(&name, &d);
                status = status.max(Status::Failure);
                continue;
            }
        };
        let result = cake::check::check_source_with(&source, &active.set);
        let mut shown = cake::diag::shown(&result.diagnostics, show.all, show.verbose);
        for d in shown.diagnostics.iter_mut().filter(|_| out.format == MessageFormat::Human) {
            if let Some(cause) = &d.follows {
                let (line, col) = line_col(&source, render::clamp_span(&source, cause.span).start);
                d.notes.push(format!("this follows from [{}] at {name}:{line}:{col}; fixing that one removes it", cause.code));
            }
        }
        out.located_shown(&name, &source, &shown.diagnostics, &shown.hidden_per_finding);
        out.hidden += shown.hidden;
        if result.diagnostics.iter().any(Diagnostic::is_error) {
            status = status.max(Status::Findings);
        }
    }
    if out.hidden > 0 {
        out.human_stderr(&format!(
            "note: {} follow-on {} hidden; --all shows {}\n",
            out.hidden,
            plural(out.hidden, "finding", "findings"),
            if out.hidden == 1 { "it" } else { "them" }
        ));
    }
    out.summary();
    status
}

// ---------------------------------------------------------------------------------------------
// cake fmt

fn fmt(out: &mut Reporter, files: &[PathBuf], check_only: bool) -> Status {
    let mut status = Status::Clean;
    let mut would_change = 0usize;
    for path in files {
        let name = display_name(path);
        let source = match read_source(path, &name) {
            Ok(s) => s,
            Err(d) => {
                out.unlocated(&name, &d);
                status = status.max(Status::Failure);
                continue;
            }
        };
        let file = match cake::syntax::parse(&source) {
            Ok(f) => f,
            Err(diags) => {
                out.located(&name, &source, &diags);
                status = status.max(Status::Findings);
                continue;
            }
        };
        let formatted = cake::syntax::print(&file);

        // Never write text we cannot read back or that lost a comment: a printer bug must not
        // destroy a file.
        if let Err(diags) = cake::syntax::parse(&formatted) {
            out.unlocated(&name, &reparse_failure(&name, &formatted, &diags));
            status = status.max(Status::Failure);
            continue;
        }
        if comments(&source) != comments(&formatted) {
            let d = Diagnostic::error(
                "E0004",
                format!(
                    "internal error: formatting `{name}` would lose or change a comment; the file is left unchanged"
                ),
                Span::default(),
                "",
            )
            .with_help("this is a bug in `cake fmt`; please report it with the input file");
            out.unlocated(&name, &d);
            status = status.max(Status::Failure);
            continue;
        }

        let is_stdin = is_stdin(path);
        if check_only {
            if formatted != source {
                would_change += 1;
                status = status.max(Status::Findings);
                out.not_formatted(&name, &source, &formatted);
            }
        } else if is_stdin {
            out.stdout(&formatted);
        } else if formatted != source {
            if let Err(e) = write_atomically(path, &formatted) {
                let d = Diagnostic::error("E0003", format!("cannot write `{name}`: {e}"), Span::default(), "")
                    .with_note(format!("`{name}` is unchanged"))
                    .with_help("check that the file's directory is writable and the disk is not full");
                out.unlocated(&name, &d);
                status = status.max(Status::Failure);
            }
        }
    }
    if check_only && would_change > 0 {
        out.human_stderr(&format!(
            "{would_change} {} would be reformatted; run `cake fmt` on {} to rewrite\n",
            plural(would_change, "file", "files"),
            if would_change == 1 { "it" } else { "them" }
        ));
    }
    if out.errors > 0 {
        out.summary();
    }
    status
}

fn reparse_failure(name: &str, formatted: &str, diags: &[Diagnostic]) -> Diagnostic {
    let mut d = Diagnostic::error(
        "E0004",
        format!("internal error: the formatted text of `{name}` does not parse; the file is left unchanged"),
        Span::default(),
        "",
    );
    for inner in diags.iter().take(3) {
        let r = render::clamp_span(formatted, inner.primary.span);
        let (line, col) = line_col(formatted, r.start);
        d = d.with_note(format!("in the formatted text at {line}:{col}: [{}] {}", inner.code, inner.message));
    }
    d.with_help("this is a bug in `cake fmt`; please report it with the input file")
}

/// The text of every `#` comment (Cake has no string literals, so `#` always starts one), trimmed
/// and sorted: formatting may move comments and re-indent them, never drop or edit them.
fn comments(text: &str) -> Vec<&str> {
    let mut out: Vec<&str> =
        text.lines().filter_map(|l| l.split_once('#')).map(|(_, c)| c.trim()).filter(|c| !c.is_empty()).collect();
    out.sort_unstable();
    out
}

/// Replace `path` by `contents` without a window where the file is missing or half-written:
/// write a temporary file in the same directory, flush it to disk, then rename it over the
/// original (atomic on POSIX). On any failure the original is untouched and the temporary removed.
fn write_atomically(path: &Path, contents: &str) -> io::Result<()> {
    // Write through symbolic links rather than replacing the link with a regular file.
    let target = fs::canonicalize(path)?;
    let dir = target.parent().ok_or_else(|| io::Error::other("the file has no parent directory"))?;
    let file_name = target.file_name().ok_or_else(|| io::Error::other("not a file path"))?;
    let permissions = fs::metadata(&target)?.permissions();

    let mut attempt = 0u32;
    let (tmp_path, mut tmp) = loop {
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(file_name);
        tmp_name.push(format!(".cake-fmt-{}-{attempt}.tmp", std::process::id()));
        let candidate = dir.join(tmp_name);
        match fs::OpenOptions::new().write(true).create_new(true).open(&candidate) {
            Ok(f) => break (candidate, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => attempt += 1,
            Err(e) => return Err(e),
        }
    };
    let result = (|| {
        tmp.write_all(contents.as_bytes())?;
        tmp.sync_all()?;
        drop(tmp);
        fs::set_permissions(&tmp_path, permissions)?;
        fs::rename(&tmp_path, &target)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp_path);
    }
    result
}

/// A unified diff from the file's text to the formatted text.
fn unified_diff(name: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(name, &format!("{name} (formatted)"))
        .to_string()
}

/// The span of the first line of `old` that formatting changes (for the E0005 diagnostic).
fn first_difference(old: &str, new: &str) -> Span {
    let diff = similar::TextDiff::from_lines(old, new);
    let first_line =
        diff.ops().iter().find(|op| op.tag() != similar::DiffTag::Equal).map_or(0, |op| op.old_range().start);
    let mut offset = 0usize;
    for (i, line) in old.split_inclusive('\n').enumerate() {
        if i == first_line {
            let text = line.trim_end_matches(['\n', '\r']);
            return Span::new(offset, offset + text.len());
        }
        offset += line.len();
    }
    Span::new(old.len(), old.len())
}

// ---------------------------------------------------------------------------------------------
// cake explain

/// `cake explain --ops [--markdown]`: the op catalog, one line per op (JSON: the catalog entries).
fn explain_ops(format: MessageFormat, markdown: bool) -> Status {
    let catalog = cake::catalog::Catalog::builtin();
    let text = if markdown {
        cake::op_reference::markdown(catalog, cake::target::TargetTable::builtin())
    } else {
        match format {
            MessageFormat::Human => cake::op_reference::list(catalog).into_iter().map(|l| l + "\n").collect(),
            MessageFormat::Json => catalog.ops.iter().map(|op| serde_json::to_string(op).unwrap_or_default() + "\n").collect(),
        }
    };
    let _ = io::stdout().lock().write_all(text.as_bytes());
    Status::Clean
}

fn explain(format: MessageFormat, code: Option<&str>, list: bool) -> Status {
    let stdout = io::stdout();
    let mut stdout = stdout.lock();
    if list {
        for doc in cake::verify::rules::all_documented() {
            let line = match format {
                MessageFormat::Human => format!("{:<12} {}", doc.code, doc.title.trim()),
                MessageFormat::Json => {
                    serde_json::json!({ "code": doc.code, "title": doc.title.trim(), "file": doc.file }).to_string()
                }
            };
            let _ = writeln!(stdout, "{line}");
        }
        return Status::Clean;
    }
    let code = code.unwrap_or_default();
    if let Some((_, text)) = cake::explain::explain(code, format == MessageFormat::Json) {
        let _ = stdout.write_all(text.as_bytes());
        return Status::Clean;
    }
    let _ = writeln!(
        io::stderr(),
        "error: `{code}` is neither a documented diagnostic code nor an operation of the op catalog\n  \
         = help: {}",
        cake::explain::UNKNOWN_HELP
    );
    Status::Failure
}

// ---------------------------------------------------------------------------------------------
// Reading sources

fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

fn display_name(path: &Path) -> String {
    if is_stdin(path) {
        "<stdin>".to_string()
    } else {
        path.display().to_string()
    }
}

/// Read a whole source file (or standard input for `-`) as UTF-8. Failures become E0001 / E0002
/// diagnostics naming the file and what to do.
fn read_source(path: &Path, name: &str) -> Result<String, Box<Diagnostic>> {
    let bytes = if is_stdin(path) {
        let mut buf = Vec::new();
        io::stdin().lock().read_to_end(&mut buf).map(|_| buf)
    } else {
        fs::read(path)
    };
    let bytes = bytes.map_err(|e| {
        let help = match e.kind() {
            io::ErrorKind::NotFound => "check the path; `cake` takes paths of `.cake` files, or `-` for standard input",
            io::ErrorKind::PermissionDenied => {
                "check the file's permissions (the current user must be able to read it)"
            }
            _ if path.is_dir() => "pass the `.cake` files inside the directory, e.g. `cake check dir/*.cake`",
            _ => "check that the path names a readable `.cake` file",
        };
        Box::new(Diagnostic::error("E0001", format!("cannot read `{name}`: {e}"), Span::default(), "").with_help(help))
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let prefix = std::str::from_utf8(&bytes[..valid]).unwrap_or("");
        let (line, col) = line_col(prefix, prefix.len());
        let bad = bytes.get(valid).map_or(String::new(), |b| format!(" (0x{b:02X})"));
        Box::new(
            Diagnostic::error("E0002", format!("`{name}` is not valid UTF-8"), Span::default(), "")
                .with_note(format!("the first invalid byte{bad} is at line {line}, column {col} (byte offset {valid})"))
                .with_help("Cake sources are UTF-8 text; re-save the file as UTF-8 (e.g. `iconv -f LATIN1 -t UTF-8`)"),
        )
    })
}

// ---------------------------------------------------------------------------------------------
// Output

/// Prints diagnostics in the chosen format and counts them for the summary line. Write errors
/// (a closed pipe) are ignored: there is nobody left to tell.
struct Reporter {
    format: MessageFormat,
    color: bool,
    errors: usize,
    warnings: usize,
    hints: usize,
    coverage_limits: usize,
    /// Follow-on findings left out (`cake check` without `--all`).
    hidden: usize,
    /// The `rules` field `cake check` adds to each JSON diagnostic (which rule set judged it).
    rules: Option<String>,
    /// The rule set that judged, for each JSON diagnostic's `category` (default: the built-in).
    rule_set: Option<std::sync::Arc<cake::verify::RuleSet>>,
}

impl Reporter {
    fn new(format: MessageFormat, color: bool) -> Reporter {
        Reporter { format, color, errors: 0, warnings: 0, hints: 0, coverage_limits: 0, hidden: 0, rules: None, rule_set: None }
    }

    fn count(&mut self, d: &Diagnostic) {
        match d.severity {
            Severity::Error => self.errors += 1,
            Severity::Warning => self.warnings += 1,
            Severity::Hint => self.hints += 1,
            Severity::CoverageLimit => self.coverage_limits += 1,
        }
    }

    /// Diagnostics with spans into `source`.
    fn located(&mut self, name: &str, source: &str, diags: &[Diagnostic]) {
        self.located_shown(name, source, diags, &[]);
    }

    /// [`Reporter::located`] where `hidden[i]` follow-ons of `diags[i]` were left out.
    fn located_shown(&mut self, name: &str, source: &str, diags: &[Diagnostic], hidden: &[usize]) {
        diags.iter().for_each(|d| self.count(d));
        match self.format {
            MessageFormat::Human => {
                let text = render::render_human(name, source, diags, self.color);
                let _ = io::stderr().write_all(text.as_bytes());
            }
            MessageFormat::Json => {
                let rules = self.rule_set.as_deref().unwrap_or(cake::verify::RuleSet::builtin());
                let lines = render::render_json_lines_shown(name, source, diags, hidden, rules);
                self.stdout(&self.with_rules_field(lines));
            }
        }
    }

    /// A diagnostic about a whole file (could not be read or written).
    fn unlocated(&mut self, name: &str, d: &Diagnostic) {
        self.count(d);
        match self.format {
            MessageFormat::Human => {
                let _ = io::stderr().write_all(render::render_human_unlocated(d, self.color).as_bytes());
            }
            MessageFormat::Json => self.stdout(&self.with_rules_field(format!("{}\n", render::render_json_line_unlocated(name, d)))),
        }
    }

    /// Each JSON line (an object) with the `rules` field appended, when a rule set was chosen.
    fn with_rules_field(&self, lines: String) -> String {
        let Some(rules) = &self.rules else { return lines };
        lines
            .lines()
            .map(|l| match l.strip_suffix('}') {
                Some(body) => format!("{body},\"rules\":{rules}}}\n"),
                None => format!("{l}\n"),
            })
            .collect()
    }

    /// `fmt --check` found a difference: a diff on stdout (human) or an E0005 line (JSON).
    fn not_formatted(&mut self, name: &str, source: &str, formatted: &str) {
        let diff = unified_diff(name, source, formatted);
        match self.format {
            MessageFormat::Human => self.stdout(&format!("would reformat {name}\n{diff}")),
            MessageFormat::Json => {
                let d = Diagnostic::error(
                    "E0005",
                    format!("`{name}` is not in canonical format"),
                    first_difference(source, formatted),
                    "first line `cake fmt` would change",
                )
                .with_note(diff)
                .with_help(format!("run `cake fmt {name}` to rewrite it"));
                self.located(name, source, std::slice::from_ref(&d));
            }
        }
    }

    fn stdout(&self, text: &str) {
        let mut out = io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    /// Text for people only: on stderr, and only in human mode.
    fn human_stderr(&self, text: &str) {
        if self.format == MessageFormat::Human {
            let _ = io::stderr().write_all(text.as_bytes());
        }
    }

    /// `2 errors, 1 warning` (plus hints and coverage limits when there are any), human mode only.
    fn summary(&self) {
        let mut parts = vec![
            format!("{} {}", self.errors, plural(self.errors, "error", "errors")),
            format!("{} {}", self.warnings, plural(self.warnings, "warning", "warnings")),
        ];
        if self.hints > 0 {
            parts.push(format!("{} {}", self.hints, plural(self.hints, "hint", "hints")));
        }
        if self.coverage_limits > 0 {
            parts.push(format!(
                "{} {}",
                self.coverage_limits,
                plural(self.coverage_limits, "coverage limit", "coverage limits")
            ));
        }
        self.human_stderr(&format!("{}\n", parts.join(", ")));
    }
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}
