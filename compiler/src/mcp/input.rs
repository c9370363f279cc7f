//! Validating what an MCP client sends before any compiler stage sees it: program text (inline or
//! a path), other text arguments, and paths. Every refusal is a coded diagnostic with a help line
//! (`M0xx`, documented in `compiler/diagnostics/mcp.toml`; a file that cannot be read or is not
//! UTF-8 gets the CLI's own `E0001` / `E0002`).
//!
//! Paths are confined to the server's working directory: an agent driving the server may read
//! and write only inside the checkout it was started in.

use std::io;
use std::path::{Component, Path, PathBuf};

use crate::diag::Diagnostic;
use crate::span::{line_col, Span};

/// The largest program accepted, inline or from a file. The corpus's largest program is a few
/// kilobytes; anything near this limit is not a hand-written schedule.
pub const MAX_PROGRAM_BYTES: usize = 256 * 1024;
/// The largest workload spec (TOML) accepted inline or from a file.
pub const MAX_WORKLOAD_BYTES: usize = 64 * 1024;
/// The largest value of any other text argument (a path, a shape, a code, a case id).
pub const MAX_ARG_BYTES: usize = 4096;

/// A refused tool call: one coded diagnostic about the input (not about a place in a program).
#[derive(Clone, Debug)]
pub struct InputError {
    /// What the diagnostic is about: the argument or file name.
    pub subject: String,
    pub diagnostic: Box<Diagnostic>,
}

impl InputError {
    pub fn new(subject: impl Into<String>, code: &str, message: impl Into<String>, help: impl Into<String>) -> InputError {
        InputError {
            subject: subject.into(),
            diagnostic: Box::new(Diagnostic::error(code, message, Span::default(), "").with_help(help)),
        }
    }

    fn with_note(mut self, note: impl Into<String>) -> InputError {
        self.diagnostic.notes.push(note.into());
        self
    }
}

/// A program to work on: its display name (the path, or `<inline>`), its text, and its path when
/// it came from a file.
#[derive(Clone, Debug)]
pub struct Program {
    pub name: String,
    pub source: String,
    pub path: Option<PathBuf>,
}

/// The name findings carry for a program passed inline.
pub const INLINE_NAME: &str = "<inline>";

/// The directory the server may read and write in: its working directory, canonical.
#[derive(Clone, Debug)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    pub fn current() -> io::Result<Workspace> {
        Ok(Workspace { root: std::env::current_dir()?.canonicalize()? })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `path` (relative to the root, or absolute) as an absolute path inside the root, without
    /// requiring that it exist. Refuses a path that leaves the root lexically (`..`, another
    /// absolute path) or through a symbolic link of an ancestor that exists.
    pub fn confine(&self, arg: &str, path: &str) -> Result<PathBuf, InputError> {
        let path = text(arg, path, MAX_ARG_BYTES)?;
        if path.trim().is_empty() {
            return Err(InputError::new(
                arg,
                "M004",
                format!("`{arg}` is empty"),
                "give a path relative to the server's working directory",
            ));
        }
        let mut out = self.root.clone();
        for c in Path::new(path).components() {
            match c {
                Component::Prefix(_) | Component::RootDir => out = PathBuf::from(c.as_os_str()),
                Component::CurDir => {}
                Component::ParentDir => {
                    out.pop();
                }
                Component::Normal(p) => out.push(p),
            }
        }
        let outside = || {
            InputError::new(
                arg,
                "M003",
                format!("`{arg}` names `{path}`, which is outside the server's working directory"),
                format!(
                    "give a path inside {} (relative paths are taken from there), or pass the program's text inline as `program`",
                    self.root.display()
                ),
            )
        };
        if !out.starts_with(&self.root) {
            return Err(outside());
        }
        // The nearest existing ancestor decides where the path really goes (a symbolic link
        // inside the root may point out of it).
        let mut existing = out.as_path();
        loop {
            if let Ok(real) = existing.canonicalize() {
                if !real.starts_with(&self.root) {
                    return Err(outside());
                }
                break;
            }
            match existing.parent() {
                Some(p) => existing = p,
                None => break,
            }
        }
        Ok(out)
    }

    /// Read a text file named by argument `arg`, at most `max` bytes, as UTF-8.
    pub fn read(&self, arg: &str, path: &str, max: usize) -> Result<(PathBuf, String), InputError> {
        let full = self.confine(arg, path)?;
        let read_error = |e: io::Error| {
            let help = match e.kind() {
                io::ErrorKind::NotFound => {
                    "check the path (relative to the server's working directory), or pass the text inline"
                }
                io::ErrorKind::PermissionDenied => "check the file's permissions (the server's user must be able to read it)",
                _ if full.is_dir() => "name a file, not a directory",
                _ => "check that the path names a readable text file",
            };
            InputError::new(path, "E0001", format!("cannot read `{path}`: {e}"), help)
        };
        let len = std::fs::metadata(&full).map_err(read_error)?.len();
        if full.is_dir() {
            return Err(read_error(io::Error::other("it is a directory")));
        }
        if len > max as u64 {
            return Err(too_large(path, len as usize, max));
        }
        let bytes = std::fs::read(&full).map_err(read_error)?;
        let source = String::from_utf8(bytes).map_err(|e| {
            let valid = e.utf8_error().valid_up_to();
            InputError::new(
                path,
                "E0002",
                format!("`{path}` is not valid UTF-8"),
                "Cake sources are UTF-8 text; re-save the file as UTF-8",
            )
            .with_note(format!("the first invalid byte is at byte offset {valid}"))
        })?;
        Ok((full, source))
    }

    /// The program of a tool call: `program` (its text) or `path` (a `.cake` file), exactly one.
    pub fn program(&self, program: Option<&str>, path: Option<&str>) -> Result<Program, InputError> {
        match (program, path) {
            (Some(text), None) => {
                if text.len() > MAX_PROGRAM_BYTES {
                    return Err(too_large("program", text.len(), MAX_PROGRAM_BYTES));
                }
                let source = source_text("program", text)?;
                Ok(Program { name: INLINE_NAME.to_string(), source: source.to_string(), path: None })
            }
            (None, Some(p)) => {
                let (full, source) = self.read("path", p, MAX_PROGRAM_BYTES)?;
                source_text(p, &source)?;
                Ok(Program { name: p.to_string(), source, path: Some(full) })
            }
            (Some(_), Some(_)) => Err(InputError::new(
                "program",
                "M004",
                "both `program` and `path` were given",
                "give the program once: its text as `program` (preferred), or a file as `path`",
            )),
            (None, None) => Err(InputError::new(
                "program",
                "M004",
                "no program: neither `program` nor `path` was given",
                "pass the program's text as `program` (preferred), or a `.cake` file as `path`",
            )),
        }
    }
}

fn too_large(subject: &str, len: usize, max: usize) -> InputError {
    InputError::new(
        subject,
        "M001",
        format!("`{subject}` is {len} bytes; the server accepts at most {max}"),
        "a Cake program is one kernel of a few kilobytes; pass the program itself, not generated or concatenated text",
    )
}

/// Program or workload text: any character but control characters other than tab and line
/// breaks (they are never part of Cake text and usually mean binary or mangled input).
fn source_text<'t>(subject: &str, text: &'t str) -> Result<&'t str, InputError> {
    match text.char_indices().find(|(_, c)| c.is_control() && !matches!(c, '\n' | '\r' | '\t')) {
        None => Ok(text),
        Some((at, c)) => {
            let (line, col) = line_col(text, at);
            Err(control_character(subject, c).with_note(format!("the first one is at line {line}, column {col}")))
        }
    }
}

/// A one-line argument (a path, shape, code, id): no control characters at all, at most `max`
/// bytes.
pub fn text<'t>(subject: &str, value: &'t str, max: usize) -> Result<&'t str, InputError> {
    if value.len() > max {
        return Err(too_large(subject, value.len(), max));
    }
    match value.chars().find(|c| c.is_control()) {
        None => Ok(value),
        Some(c) => Err(control_character(subject, c)),
    }
}

/// Workload text passed inline: like program text, with its own size limit.
pub fn workload_text(value: &str) -> Result<&str, InputError> {
    if value.len() > MAX_WORKLOAD_BYTES {
        return Err(too_large("workload", value.len(), MAX_WORKLOAD_BYTES));
    }
    source_text("workload", value)
}

fn control_character(subject: &str, c: char) -> InputError {
    InputError::new(
        subject,
        "M002",
        format!("`{subject}` contains the control character U+{:04X}", u32::from(c)),
        "send plain text: tabs and line breaks are the only control characters accepted",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> Workspace {
        Workspace::current().unwrap()
    }

    #[test]
    fn paths_stay_inside_the_root() {
        let ws = ws();
        assert!(ws.confine("path", "src/lib.rs").unwrap().starts_with(ws.root()));
        assert!(ws.confine("path", "./a/../b").unwrap().starts_with(ws.root()));
        for p in ["../x.cake", "/etc/passwd", "a/../../x"] {
            assert_eq!(ws.confine("path", p).unwrap_err().diagnostic.code, "M003", "{p}");
        }
        assert_eq!(ws.confine("path", "").unwrap_err().diagnostic.code, "M004");
        assert_eq!(ws.confine("path", "a\u{0}b").unwrap_err().diagnostic.code, "M002");
    }

    #[test]
    fn programs_are_validated() {
        let ws = ws();
        let ok = ws.program(Some("kernel k target sm_90a\n\tx\r\n"), None).unwrap();
        assert_eq!(ok.name, INLINE_NAME);
        let e = ws.program(Some("kernel k\u{1b}[31m"), None).unwrap_err();
        assert_eq!(e.diagnostic.code, "M002");
        assert!(e.diagnostic.notes[0].contains("line 1, column 9"), "{:?}", e.diagnostic.notes);
        let big = "#".repeat(MAX_PROGRAM_BYTES + 1);
        assert_eq!(ws.program(Some(&big), None).unwrap_err().diagnostic.code, "M001");
        assert_eq!(ws.program(None, None).unwrap_err().diagnostic.code, "M004");
        assert_eq!(ws.program(Some("x"), Some("y")).unwrap_err().diagnostic.code, "M004");
        assert_eq!(ws.program(None, Some("no/such/file.cake")).unwrap_err().diagnostic.code, "E0001");
        assert_eq!(ws.program(None, Some("src")).unwrap_err().diagnostic.code, "E0001");
    }
}
