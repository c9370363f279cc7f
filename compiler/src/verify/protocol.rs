//! Barrier and pipeline protocol analysis (stub; being built out).

use crate::diag::Diagnostic;
use crate::ir::Module;
use crate::target::TargetInfo;

/// Run the protocol analysis over every role of `module`.
pub fn analyze(module: &Module, target: &TargetInfo) -> Vec<Diagnostic> {
    let _ = (module, target);
    Vec::new()
}
