//! The example programs parse, print canonically, and survive print → parse unchanged.

use std::path::PathBuf;

use cake::syntax::{parse, print};

fn examples() -> Vec<(PathBuf, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples directory")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "cake"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "expected the example programs in {}", dir.display());
    files.into_iter().map(|p| (p.clone(), std::fs::read_to_string(&p).expect("readable example"))).collect()
}

#[test]
fn examples_parse() {
    for (path, src) in examples() {
        if let Err(errs) = parse(&src) {
            panic!("{} failed to parse: {errs:#?}", path.display());
        }
    }
}

#[test]
fn examples_are_already_canonical() {
    for (path, src) in examples() {
        let printed = print(&parse(&src).unwrap());
        if printed != src {
            let first = printed.lines().zip(src.lines()).position(|(a, b)| a != b);
            panic!("{} is not in canonical form; first differing line: {first:?}\n{printed}", path.display());
        }
    }
}

#[test]
fn print_is_idempotent_and_round_trips() {
    for (path, src) in examples() {
        let mut ast = parse(&src).unwrap();
        let once = print(&ast);
        let mut reparsed =
            parse(&once).unwrap_or_else(|e| panic!("{}: printed form does not parse: {e:#?}", path.display()));
        assert_eq!(print(&reparsed), once, "{}: print is not idempotent", path.display());
        ast.strip_spans();
        reparsed.strip_spans();
        assert_eq!(reparsed, ast, "{}: parse(print(ast)) != ast modulo spans", path.display());
    }
}
