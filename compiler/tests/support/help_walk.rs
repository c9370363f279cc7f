//! Walks a binary's `-h` pages: every subcommand (recursively) must have an about line, and every
//! argument and option a help text. Shared by the `help_texts` tests of the three binaries
//! (`#[path]`-included).

use std::path::Path;
use std::process::Command;

/// The `-h` page of `bin` with `args` (a subcommand path).
fn help_page(bin: &Path, args: &[String]) -> String {
    let out = Command::new(bin).args(args).arg("-h").env("COLUMNS", "200").output().expect("the binary runs");
    assert!(out.status.success(), "{} {} -h failed: {}", bin.display(), args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

/// The lines of a `Heading:` section of a help page, up to the next blank line.
fn section<'a>(page: &'a str, heading: &str) -> Vec<&'a str> {
    page.lines().skip_while(|l| *l != heading).skip(1).take_while(|l| !l.trim().is_empty()).collect()
}

/// The problems of one help page: a subcommand listed without an about line, an argument or
/// option without a help text (clap prints the name alone, or only `[default: …]`).
fn page_problems(page: &str, path: &str) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let mut subcommands = Vec::new();
    if page.lines().next().is_none_or(|l| l.trim().is_empty() || l.starts_with("Usage:")) {
        problems.push(format!("`{path}` has an empty about line"));
    }
    for line in section(page, "Commands:") {
        let entry = line.trim_start();
        let (name, about) = entry.split_once("  ").map_or((entry, ""), |(n, a)| (n, a.trim()));
        if about.is_empty() {
            problems.push(format!("`{path} {name}` is listed without an about line"));
        }
        if name != "help" {
            subcommands.push(name.to_string());
        }
    }
    for heading in ["Arguments:", "Options:"] {
        let lines = section(page, heading);
        for (i, line) in lines.iter().enumerate() {
            let entry = line.trim_start();
            // Continuation lines of a wrapped help text are indented further and name no argument.
            let names_arg = entry.starts_with('-') || entry.starts_with('<') || entry.starts_with('[');
            if !names_arg || line.len() - entry.len() > 6 {
                continue;
            }
            let help = entry.split_once("  ").map_or("", |(_, h)| h.trim());
            let without_brackets = help.split(" [").next().unwrap_or("").trim();
            let continued = lines.get(i + 1).is_some_and(|next| {
                let t = next.trim_start();
                next.len() - t.len() > 6 && !t.starts_with('-')
            });
            if (help.is_empty() || help.starts_with('[') || without_brackets.is_empty()) && !continued {
                problems.push(format!("`{path}`: `{}` has no help text", entry.split("  ").next().unwrap_or(entry)));
            }
        }
    }
    (problems, subcommands)
}

/// Every problem of `bin`'s help pages, its subcommands' recursively.
pub fn help_problems(bin: &Path, name: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    let mut pages = 0;
    while let Some(args) = todo.pop() {
        let page = help_page(bin, &args);
        pages += 1;
        let path = std::iter::once(name.to_string()).chain(args.iter().cloned()).collect::<Vec<_>>().join(" ");
        let (p, subs) = page_problems(&page, &path);
        problems.extend(p);
        for s in subs {
            let mut next = args.clone();
            next.push(s);
            todo.push(next);
        }
    }
    assert!(pages > 1, "{name}: no subcommands found in its help; the walker reads the `Commands:` section");
    problems
}

#[test]
fn the_walker_catches_an_empty_about_and_a_bare_option() {
    let page = "Does things\n\nUsage: x <COMMAND>\n\nCommands:\n  run   Run it\n  idle\n  help  Print this message\n\nOptions:\n      --seed <SEED>  [default: 0]\n      --db <DB>      The database\n  -h, --help         Print help\n";
    let (problems, subs) = page_problems(page, "x");
    assert_eq!(subs, ["run", "idle"]);
    assert_eq!(problems, ["`x idle` is listed without an about line", "`x`: `--seed <SEED>` has no help text"]);
    let (problems, _) = page_problems("Usage: x\n\nOptions:\n  -h, --help  Print help\n", "x");
    assert_eq!(problems, ["`x` has an empty about line"]);
}
