//! Every `cake` subcommand has an about line and every argument a help text (issue 16).

#[path = "support/help_walk.rs"]
mod help_walk;

#[test]
fn every_cake_help_page_is_filled() {
    let problems = help_walk::help_problems(std::path::Path::new(env!("CARGO_BIN_EXE_cake")), "cake");
    assert!(problems.is_empty(), "empty help texts:\n{}", problems.join("\n"));
}
