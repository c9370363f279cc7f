//! Ids and paths that come from data are never trusted: a crafted record whose id is
//! `../Cargo` once made `reject` overwrite the workspace `Cargo.toml` (the record file was
//! named after the id read from inside it). Now the id is validated (`Q001`), the write stays in
//! `proposals/`, and `list` names the crafted file while still listing the good records.

#[path = "hardening_support.rs"]
mod support;

use support::*;

#[test]
fn a_crafted_record_id_cannot_write_outside_the_queue() {
    let (_tmp, repo, evidence) = setup();
    propose(&repo, &evidence);
    let good_name = record_files(&repo)[0].clone();
    let good = std::fs::read_to_string(repo.join("proposals").join(&good_name)).unwrap();
    let good_id = good_name.trim_end_matches(".toml");
    let sentinel = "[workspace]\n# the user's workspace manifest\n";
    std::fs::write(repo.join("Cargo.toml"), sentinel).unwrap();
    // The same record, its id changed to climb out of proposals/.
    let crafted = good.replace(&format!("id = \"{good_id}\""), "id = \"../Cargo\"");
    assert_ne!(crafted, good);
    std::fs::write(repo.join("proposals/crafted.toml"), crafted).unwrap();

    let o = run(&repo, &["reject", "../Cargo", "--why", "crafted"]);
    assert_eq!(std::fs::read_to_string(repo.join("Cargo.toml")).unwrap(), sentinel, "Cargo.toml was overwritten:\n{}", text(&o));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("Q001"), "a coded error: {}", text(&o));

    // The crafted file is named and skipped; the good record is still served.
    let l = run(&repo, &["list"]);
    assert_eq!(l.status.code(), Some(0), "{}", text(&l));
    let (out, err) = (String::from_utf8_lossy(&l.stdout), String::from_utf8_lossy(&l.stderr));
    assert!(out.contains(good_id) && !out.contains("../Cargo"), "{}", text(&l));
    assert!(err.contains("crafted.toml") && err.contains("Q001"), "{}", text(&l));
    let r = run(&repo, &["reject", good_id, "--why", "not needed"]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    assert_eq!(std::fs::read_to_string(repo.join("Cargo.toml")).unwrap(), sentinel);
}

#[test]
fn a_record_naming_another_branch_is_skipped() {
    let (_tmp, repo, evidence) = setup();
    propose(&repo, &evidence);
    let name = record_files(&repo)[0].clone();
    let path = repo.join("proposals").join(&name);
    let text_ = std::fs::read_to_string(&path).unwrap();
    let branch_line = text_.lines().find(|l| l.starts_with("branch = ")).unwrap().to_string();
    std::fs::write(&path, text_.replace(&branch_line, "branch = \"main\"")).unwrap();
    let id = name.trim_end_matches(".toml");
    let o = run(&repo, &["accept", id, "--tier", "static"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("Q003"), "{}", text(&o));
}
