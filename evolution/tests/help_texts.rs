//! Every `cake-evolve-compiler` subcommand has an about line and every argument a help text
//! (issue 16).

#[path = "../../compiler/tests/support/help_walk.rs"]
mod help_walk;

#[test]
fn every_cake_evolve_compiler_help_page_is_filled() {
    let problems = help_walk::help_problems(std::path::Path::new(env!("CARGO_BIN_EXE_cake-evolve-compiler")), "cake-evolve-compiler");
    assert!(problems.is_empty(), "empty help texts:\n{}", problems.join("\n"));
}
