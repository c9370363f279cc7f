//! A program through the pipeline for the lowering tests: checked and verified (the verifier must
//! accept it), lowered, or built with NVRTC. Shared by `lower_atomics`, `lower_gather` and
//! `lower_masks` (`#[path]`-included; each uses what it needs).
#![allow(dead_code)]

use cake::lower::{self, LowerOptions, Lowered};
use cake::nvrtc::{self, Built};
use cake::target::TargetTable;
use cake::verify::Validated;

/// Type-checked and verified: the program must be accepted by the verifier.
pub fn validated(src: &str) -> Validated {
    let out = cake::check::check_source(src);
    let module = out.module.unwrap_or_else(|| panic!("does not type-check: {:#?}", out.diagnostics));
    let target = TargetTable::builtin().get(&module.target).expect("known target").clone();
    let v = cake::verify::verify(module, &target);
    v.validated.unwrap_or_else(|| panic!("the verifier rejects it: {:#?}", v.findings))
}

pub fn lowered(src: &str, file: &str) -> Lowered {
    lower::lower_with(&validated(src), &LowerOptions::with_source(file, src)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Lowered and compiled with NVRTC for the program's target (the toolchain must be present).
pub fn build(src: &str, file: &str) -> Built {
    nvrtc::ensure_nvrtc().unwrap_or_else(|e| panic!("no CUDA toolchain: {e}"));
    let v = validated(src);
    let t = TargetTable::builtin().get(&v.module().target).expect("known target");
    nvrtc::build_with(&v, t, &LowerOptions::with_source(file, src)).unwrap_or_else(|e| panic!("{file}: {e}"))
}
