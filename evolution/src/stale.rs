//! Stale evidence: a recorded build failure (a lowering refusal `build_L0xx`, an NVRTC or ptxas
//! error) that the current compiler no longer reproduces. The program is checked, lowered and
//! compiled again with the checkout's front end (its rules, catalog and targets) through the
//! `cake` library — on the CPU, NVRTC only, nothing runs. A program that now builds taught the
//! compiler nothing it lacks today (the gap was closed), so its bucket proposes nothing; one the
//! verifier now rejects is caught, which the miner's verifier status already says. Without NVRTC
//! the failure cannot be re-checked, and the miner says so instead of guessing.

use cake::corpus::tiers::Frontend;
use cake::lower::LowerOptions;
use cake::nvrtc::BuildError;
use cake::target::TargetTable;

/// What the current compiler makes of a program whose build failed when it was recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recheck {
    /// It lowers and compiles now: the recorded failure is stale.
    Builds,
    /// It still fails to build, with this code (`L005`, `N002`, `P007`, …).
    Fails(String),
    /// The verifier (or the type checker) rejects it now, with these codes: caught.
    Caught(Vec<String>),
    /// It could not be re-checked, and why (no NVRTC, an unknown target).
    Unknown(String),
}

/// Check, lower and compile `source` with the front end `fe` (its targets, else the built-in ones).
pub fn recheck(source: &str, fe: &Frontend) -> Recheck {
    let out = fe.check(source);
    let Some(validated) = out.validated else {
        let mut codes: Vec<String> = out.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.code.clone()).collect();
        codes.sort();
        codes.dedup();
        return Recheck::Caught(codes);
    };
    let targets: &TargetTable = fe.targets.as_deref().unwrap_or_else(|| TargetTable::builtin());
    let Some(target) = targets.get(&validated.module().target) else {
        return Recheck::Unknown(format!("its target `{}` is not in the checkout's target table", validated.module().target));
    };
    match cake::nvrtc::build_with(&validated, target, &LowerOptions::with_source("program.cake", source)) {
        Ok(_) => Recheck::Builds,
        Err(BuildError::Toolchain { message }) => Recheck::Unknown(format!("NVRTC could not be loaded ({message})")),
        Err(e) => Recheck::Fails(e.code().to_string()),
    }
}
