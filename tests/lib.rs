//! Shared code of the workspace-level tests: the fuzz campaign (`fuzz`), driven by the
//! `cake-fuzz` binary and, with a bounded budget, by the `fuzz_campaign` test.

pub mod fuzz;
