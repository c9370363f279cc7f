//! Committed docs cite only files that exist: every repo path named in a markdown file (in
//! backticks or as a link target) and in a verifier rule's TOML (its `[doc]` sources) resolves,
//! relative to the repository root or to a directory above the citing file.
//!
//! What counts as a path, kept simple: a token of path characters that ends in a known file
//! extension and either names a `.md` file or has a first component that exists (so shorthand such
//! as `wgmma_n64/n128.cake` is not read as a path). Placeholders (`<CODE>`, `*`, `$X`), absolute
//! paths and URLs, and generated locations (`target/`, `.toolchain/`, `.git/`) are not checked.

use std::fs;
use std::path::{Path, PathBuf};

/// Mentions of files that no longer exist, kept on purpose: (citing file, path).
const HISTORICAL: &[(&str, &str)] = &[
    // "(... `scripts/calibration-measurements.py`, since replaced by `calibrate`'s own run)".
    ("benchmarks/RESULTS.md", "scripts/calibration-measurements.py"),
];

const EXTENSIONS: &[&str] = &["md", "toml", "rs", "cake", "sh", "json", "py", "yml", "yaml", "txt"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is inside the repository").to_path_buf()
}

/// The markdown files and rule TOMLs under `dir`, skipping build outputs and dot-directories.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" {
                walk(&path, out);
            }
        } else if name.ends_with(".md") || (name.ends_with(".toml") && path.components().any(|c| c.as_os_str() == "rules")) {
            out.push(path);
        }
    }
}

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/')
}

/// The candidate paths in `text`: backticked spans and link targets of markdown, every token of
/// path characters in TOML.
fn candidates(text: &str, markdown: bool) -> Vec<String> {
    let mut out = Vec::new();
    if markdown {
        for (i, part) in text.split('`').enumerate() {
            if i % 2 == 1 {
                out.push(part.to_string());
            }
        }
        for part in text.split("](").skip(1) {
            out.push(part.split([')', '#', ' ']).next().unwrap_or_default().to_string());
        }
    } else {
        out.extend(text.split(|c: char| !is_path_char(c)).map(str::to_string));
    }
    out
}

/// Whether `token` is a path this test checks (see the module doc), resolved from `bases`.
fn is_checked_path(token: &str, bases: &[PathBuf]) -> bool {
    let ext_ok = token.rsplit_once('.').is_some_and(|(stem, ext)| !stem.is_empty() && EXTENSIONS.contains(&ext));
    if !ext_ok || !token.chars().all(is_path_char) || token.starts_with('/') || token.contains("..") {
        return false;
    }
    if ["target/", ".toolchain/", ".git/"].iter().any(|p| token.starts_with(p)) {
        return false;
    }
    match token.split_once('/') {
        None => token.ends_with(".md"),
        Some((first, _)) => bases.iter().any(|b| b.join(first).exists()),
    }
}

#[test]
fn docs_cite_only_files_that_exist() {
    let root = repo();
    let mut files = Vec::new();
    walk(&root, &mut files);
    assert!(files.iter().any(|f| f.ends_with("README.md")), "no docs found under {}", root.display());
    assert!(files.iter().any(|f| f.extension().is_some_and(|e| e == "toml")), "no rule files found");
    let mut missing = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{rel}: {e}"));
        // The repository root and every directory from the root down to the citing file.
        let bases: Vec<PathBuf> = file.ancestors().skip(1).take_while(|a| a.starts_with(&root)).map(Path::to_path_buf).collect();
        for token in candidates(&text, rel.ends_with(".md")) {
            let token = token.trim_end_matches(['.', ',', ';', ':']);
            if !is_checked_path(token, &bases) || HISTORICAL.contains(&(rel.as_str(), token)) {
                continue;
            }
            if !bases.iter().any(|b| b.join(token).exists()) {
                missing.push(format!("{rel}: `{token}`"));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(missing.is_empty(), "docs cite files that do not exist:\n{}", missing.join("\n"));
}

#[test]
fn the_check_finds_a_missing_design_doc() {
    let root = repo();
    let bases = vec![root.join("compiler/rules/program-safety"), root.join("compiler/rules"), root.join("compiler"), root.clone()];
    let toml = candidates("source = \"DESIGN.md §5 (coverage limits); compiler/targets.toml; wgmma_n64/n128.cake\"", false);
    let checked: Vec<&String> = toml.iter().filter(|t| is_checked_path(t, &bases)).collect();
    assert_eq!(checked, ["DESIGN.md", "compiler/targets.toml"]);
    assert!(!bases.iter().any(|b| b.join("DESIGN.md").exists()));
    assert!(bases.iter().any(|b| b.join("LANGUAGE.md").exists()), "a bare name resolves from a directory above");
    let md = candidates("see `scripts/test.sh`, [the rules](compiler/rules/README.md#schema) and `<CODE>-*.cake`", true);
    assert_eq!(md, ["scripts/test.sh", "<CODE>-*.cake", "compiler/rules/README.md"]);
}
