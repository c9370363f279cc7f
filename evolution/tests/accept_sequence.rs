//! Accepting proposals one after another: a rule accepted earlier that also fires on a later
//! proposal's negative cases does not fail that proposal's corpus gate forever — `accept`
//! re-derives those cases' expected findings on the merged tree (`rederive.rs`).

#[path = "propose_fixture.rs"]
mod fixture;

use std::path::Path;

use cake_evolve::queue::{self, ProposeOptions, Status};
use cake_evolve::review::{self, Accepted};
use cake_merge_gates::GateOptions;
use fixture::*;

fn commit_file(repo: &git2::Repository, dir: &Path, path: &str, text: &str, msg: &str) {
    let p = dir.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
    let mut index = repo.index().unwrap();
    index.add_path(Path::new(path)).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    let sig = repo.signature().unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, msg, &tree, &[&head]).unwrap();
}

#[test]
fn accept_rederives_negative_cases_an_earlier_accepted_rule_also_fires_on() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("repo");
    let evidence = tmp.path().join("evidence");
    let repo = make_repo(&dir);
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("evidence/bundle"), &evidence, &[]);
    let mut o = ProposeOptions::new(&dir, &evidence);
    o.gate = GateOptions::static_only();
    o.progress = false;
    o.quiet = true;
    o.llm = None;
    let s = queue::propose(&o).unwrap();
    let id = s.proposed().into_iter().next().unwrap_or_else(|| panic!("{:?}", s.outcomes));
    let (_, r) = queue::find(&dir.join("proposals"), &id).unwrap();
    let d = r.rule.clone().unwrap();

    // An earlier accepted rule lands on main first: the same requirement under a guard every
    // stage meets (a second spelling P3 would refuse otherwise), so it fires on every negative
    // case the proposal commits and on nothing main's corpus accepts.
    let commit = git2::Oid::from_str(&r.commit).unwrap();
    let rel = format!("compiler/rules/{}/{}-{}.toml", d.category, d.code, d.name);
    let text = cake_evolve::git::read_text(&repo, commit, &rel).unwrap().unwrap();
    let earlier = text.replace(&format!("code = \"{}\"", d.code), "code = \"V699\"").replace(&format!("name = \"{}\"", d.name), &format!("name = \"earlier-{}\"", d.name));
    assert!(d.when.is_none() && d.applies_to == "smem", "{d:?}");
    let earlier = earlier.replacen("\nrequire = ", "\nwhen = \"stage_bytes > 0\"\nrequire = ", 1);
    assert_ne!(earlier, text);
    commit_file(&repo, &dir, &format!("compiler/rules/{}/V699-earlier-{}.toml", d.category, d.name), &earlier, "an earlier accepted rule");

    let out = review::accept(&dir, &r.id, "ok", None, GateOptions::static_only()).unwrap();
    let (_, rec) = queue::find(&dir.join("proposals"), &r.id).unwrap();
    assert!(matches!(out, Accepted::Merged { .. }), "accept after an overlapping rule landed: {out:?}\n{}", rec.gate_report().table());
    assert_eq!(rec.status, Status::Accepted);
    let note = rec.notes.iter().find(|n| n.contains("re-derived the expected findings")).unwrap_or_else(|| panic!("{:?}", rec.notes));
    assert!(note.contains("V699") && note.contains(&d.code), "{note}");
    // The proposal's negative cases on main expect both rules' findings now.
    let negatives: Vec<_> = std::fs::read_dir(dir.join("corpus/verifier-negative"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.file_name().unwrap().to_string_lossy().starts_with(&format!("{}-", d.code)))
        .collect();
    assert!(!negatives.is_empty());
    for p in negatives {
        let m = std::fs::read_to_string(&p).unwrap();
        assert!(m.contains("\"V699\"") && m.contains(&format!("\"{}\"", d.code)), "{}:\n{m}", p.display());
    }
}
