//! The queue survives losing its files: after `git clean` removes the untracked records,
//! `propose` re-creates them from the branches that carry them (instead of "resumed", nothing
//! recreated), and `queue rebuild` restores them from branches alone. One unreadable record is
//! named and skipped while `list`, `show`, `reject` and `propose` still serve the others.

#[path = "hardening_support.rs"]
mod support;

use support::*;

fn remove_records(repo: &std::path::Path) -> Vec<(String, String)> {
    let mut gone = Vec::new();
    for name in record_files(repo) {
        let p = repo.join("proposals").join(&name);
        gone.push((name, std::fs::read_to_string(&p).unwrap()));
        std::fs::remove_file(p).unwrap();
    }
    gone
}

#[test]
fn propose_recreates_records_removed_by_git_clean() {
    let (_tmp, repo, evidence) = setup();
    propose(&repo, &evidence);
    let before = record_files(&repo);
    assert!(!before.is_empty(), "the first run queued a proposal");
    let gone = remove_records(&repo);

    let o = propose(&repo, &evidence);
    assert_eq!(record_files(&repo), before, "every record is back after the re-run:\n{}", text(&o));
    for (name, old) in gone {
        let now = std::fs::read_to_string(repo.join("proposals").join(&name)).unwrap();
        let (a, b): (toml::Value, toml::Value) = (toml::from_str(&old).unwrap(), toml::from_str(&now).unwrap());
        assert_eq!(a, b, "{name} is re-created as it was");
    }
}

#[test]
fn queue_rebuild_restores_the_queue_from_branches() {
    let (_tmp, repo, evidence) = setup();
    propose(&repo, &evidence);
    let before = record_files(&repo);
    let gone = remove_records(&repo);

    let o = run(&repo, &["queue", "rebuild"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(record_files(&repo), before, "{}", text(&o));
    for (name, old) in gone {
        let now = std::fs::read_to_string(repo.join("proposals").join(&name)).unwrap();
        assert_eq!(toml::from_str::<toml::Value>(&old).unwrap(), toml::from_str::<toml::Value>(&now).unwrap(), "{name}");
    }
    let l = run(&repo, &["list"]);
    assert!(String::from_utf8_lossy(&l.stdout).contains("queued"), "{}", text(&l));
}

#[test]
fn one_unreadable_record_is_named_and_the_others_are_served() {
    let (_tmp, repo, evidence) = setup();
    propose(&repo, &evidence);
    let good = record_files(&repo)[0].trim_end_matches(".toml").to_string();
    std::fs::write(repo.join("proposals/r-00000000.toml"), "this is { not a record\n").unwrap();

    let l = run(&repo, &["list"]);
    assert_eq!(l.status.code(), Some(0), "{}", text(&l));
    assert!(String::from_utf8_lossy(&l.stdout).contains(&good), "the good record is listed: {}", text(&l));
    assert!(String::from_utf8_lossy(&l.stderr).contains("r-00000000.toml"), "the bad one is named: {}", text(&l));

    let s = run(&repo, &["show", &good, "--no-diff"]);
    assert_eq!(s.status.code(), Some(0), "{}", text(&s));

    let p = run(&repo, &["propose", "--no-gates", "--no-progress", "--evidence", evidence.to_str().unwrap()]);
    assert_eq!(p.status.code(), Some(0), "{}", text(&p));

    let r = run(&repo, &["reject", &good, "--why", "testing"]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    let now = std::fs::read_to_string(repo.join("proposals").join(format!("{good}.toml"))).unwrap();
    assert!(now.contains("status = \"rejected\""), "{now}");
}

/// Gate checkouts live under `.git/cake-evolve/tmp/` (not $TMPDIR): a killed gate's checkout is
/// reclaimed by the next run, and a finished run leaves none behind.
#[test]
fn a_killed_gates_checkout_is_reclaimed_by_the_next_run() {
    let (_tmp, repo, evidence) = setup();
    let stale = repo.join(".git/cake-evolve/tmp/gate-killed");
    std::fs::create_dir_all(stale.join("compiler/rules")).unwrap();
    std::fs::write(stale.join("compiler/rules/x.toml"), "left by a killed gate").unwrap();
    propose(&repo, &evidence);
    assert!(!stale.exists(), "the killed gate's checkout was reclaimed");
    let left: Vec<_> = std::fs::read_dir(repo.join(".git/cake-evolve/tmp")).unwrap().flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "a finished run leaves no checkout: {left:?}");
}
