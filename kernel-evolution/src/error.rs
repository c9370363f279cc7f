//! Coded errors of kernel evolution. Every problem with input (a contract, a tactic file, a
//! database, the command line) is a [`KevoError`]: a stable code, the file or key it is about, a
//! message and a help line that says what to do. Nothing in this crate panics on bad input.
//!
//! Codes (documented in `kernel-evolution/CONTRACT.md` and `kernel-evolution/README.md`):
//! * `K001`–`K009` the contract (see [`crate::contract`]);
//! * `K101`–`K103` tactic files (see [`crate::tactic`]);
//! * `K201`–`K205` the program database (see [`crate::db`]);
//! * `K301`, `K302`, `K304`, `K305` running the loop (the `cake` binary, resume, replay, the MCP
//!   server's stdio).

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KevoError {
    pub code: &'static str,
    /// The file, and where useful the key, the problem is about (`contracts/x.toml: budget.gpu_evaluations`).
    pub subject: String,
    pub message: String,
    pub help: String,
}

impl KevoError {
    pub fn new(code: &'static str, subject: impl Into<String>, message: impl Into<String>, help: impl Into<String>) -> KevoError {
        KevoError { code, subject: subject.into(), message: message.into(), help: help.into() }
    }
}

impl fmt::Display for KevoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error[{}]: {}: {}\n  help: {}", self.code, self.subject, self.message, self.help)
    }
}

impl std::error::Error for KevoError {}

pub type Result<T> = std::result::Result<T, KevoError>;
