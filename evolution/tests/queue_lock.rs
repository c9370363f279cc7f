//! One run at a time: `propose`, `accept` and `reject` hold an advisory lock on
//! `.git/cake-evolve/lock`. A second run waits up to `--lock-timeout` and then names the holder
//! (`Q005`); two concurrent proposes from different evidence never hand out the same rule code;
//! `accept` after a crash between moving main and saving the record makes no second merge.

#[path = "hardening_support.rs"]
mod support;

use std::path::Path;
use std::process::{Command, Stdio};

use support::*;

fn codes(repo: &Path) -> Vec<String> {
    let mut v = Vec::new();
    for name in record_files(repo) {
        let t: toml::Value = toml::from_str(&std::fs::read_to_string(repo.join("proposals").join(name)).unwrap()).unwrap();
        if let Some(c) = t.get("rule").and_then(|r| r.get("code")).and_then(|c| c.as_str()) {
            v.push(c.to_string());
        }
    }
    v
}

#[test]
fn a_second_run_waits_for_the_lock_then_names_the_holder() {
    let (_tmp, repo, evidence) = setup();
    let lock = repo.join(".git/cake-evolve/lock");
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    std::fs::write(&lock, "pid 4242, `cake-evolve-compiler propose`, started at unix time 1700000000\n").unwrap();
    // Another holder: flock(1) keeps the lock while it sleeps (`--no-fork`: the sleep is the
    // flock process itself, so killing it releases the lock and leaves no process behind).
    let mut holder = Command::new("flock")
        .arg("--no-fork")
        .arg(&lock)
        .args(["sleep", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("flock(1) runs");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let t0 = std::time::Instant::now();
    let o = run(&repo, &["propose", "--no-gates", "--no-progress", "--lock-timeout", "2", "--evidence", evidence.to_str().unwrap()]);
    let waited = t0.elapsed();
    let _ = holder.kill();
    let _ = holder.wait();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(err.contains("Q005") && err.contains("pid 4242") && err.contains("propose"), "{}", text(&o));
    assert!(waited >= std::time::Duration::from_secs(2), "it waited the timeout: {waited:?}");
    assert!(record_files(&repo).is_empty(), "nothing was queued without the lock");
}

#[test]
fn concurrent_proposes_from_different_evidence_get_distinct_codes() {
    let (tmp, repo, evidence) = setup();
    // A second, different store: the same wrong answers as failure reports (buckets of its own).
    let bundle = failure_store(tmp.path(), &evidence, "");
    let spawn = |ev: &Path| {
        Command::new(env!("CARGO_BIN_EXE_cake-evolve-compiler"))
            // A lock timeout that outlasts the other run on a loaded 2-core machine (one run
            // takes about a minute there; the default, 60 s, did not always).
            .args(["propose", "--no-gates", "--no-progress", "--lock-timeout", "600", "--evidence", ev.to_str().unwrap()])
            .current_dir(&repo)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(&evidence), spawn(&bundle));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_eq!(a.status.code(), Some(0), "{}", text(&a));
    assert_eq!(b.status.code(), Some(0), "{}", text(&b));
    let mut c = codes(&repo);
    let n = c.len();
    assert!(n >= 2, "both runs made rules: {c:?}");
    c.sort();
    c.dedup();
    assert_eq!(c.len(), n, "no rule code is given twice: {:?}", codes(&repo));
}

/// Two proposes of the same evidence at once: the second waits for the lock, then finds the
/// work done. Neither fails, and the queue is what one run makes (no record twice, no code twice).
#[test]
fn concurrent_proposes_of_the_same_evidence_make_one_queue() {
    let (tmp, repo, evidence) = setup();
    let alone = tmp.path().join("alone");
    copy_dir(&repo, &alone, &[]);
    propose(&alone, &evidence);
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_cake-evolve-compiler"))
            .args(["propose", "--no-gates", "--no-progress", "--lock-timeout", "600", "--evidence", evidence.to_str().unwrap()])
            .current_dir(&repo)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_eq!(a.status.code(), Some(0), "{}", text(&a));
    assert_eq!(b.status.code(), Some(0), "{}", text(&b));
    assert_eq!(record_files(&repo), record_files(&alone), "the queue of one run");
    let mut c = codes(&repo);
    let n = c.len();
    c.sort();
    c.dedup();
    assert_eq!(c.len(), n, "no rule code is given twice: {:?}", codes(&repo));
    assert_eq!(codes(&repo).len(), codes(&alone).len());
}

#[test]
fn propose_beside_accept_gives_no_error_and_no_duplicate_code() {
    let (tmp, repo, evidence) = setup();
    propose(&repo, &evidence);
    let id = record_files(&repo)[0].trim_end_matches(".toml").to_string();
    // A second, different store: the same wrong answers as failure reports (buckets of its own).
    let bundle = failure_store(tmp.path(), &evidence, "");
    let bin = env!("CARGO_BIN_EXE_cake-evolve-compiler");
    // Lock timeouts that outlast the other run on a loaded 2-core machine (the default, 60 s,
    // gave accept Q005 there while propose held the lock).
    let accept = Command::new(bin)
        .args(["accept", &id, "--tier", "static", "--lock-timeout", "600"])
        .current_dir(&repo)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let prop = Command::new(bin)
        .args(["propose", "--no-gates", "--no-progress", "--lock-timeout", "600", "--evidence", bundle.to_str().unwrap()])
        .current_dir(&repo)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (a, p) = (accept.wait_with_output().unwrap(), prop.wait_with_output().unwrap());
    assert_eq!(a.status.code(), Some(0), "{}", text(&a));
    assert_eq!(p.status.code(), Some(0), "{}", text(&p));
    let mut c = codes(&repo);
    let n = c.len();
    c.sort();
    c.dedup();
    assert_eq!(c.len(), n, "no rule code is given twice: {:?}", codes(&repo));
}

#[test]
fn accept_after_a_crash_past_the_merge_makes_no_second_merge() {
    let (_tmp, repo_dir, evidence) = setup();
    propose(&repo_dir, &evidence);
    let name = record_files(&repo_dir)[0].clone();
    let id = name.trim_end_matches(".toml").to_string();
    let rec: toml::Value = toml::from_str(&std::fs::read_to_string(repo_dir.join("proposals").join(&name)).unwrap()).unwrap();
    let commit = git2::Oid::from_str(rec["commit"].as_str().unwrap()).unwrap();
    // The crash: main already moved to the proposal (a fast-forward), the record still queued.
    let repo = git2::Repository::open(&repo_dir).unwrap();
    let base = repo.head().unwrap().peel_to_commit().unwrap().id();
    repo.set_head_detached(base).unwrap();
    repo.reference("refs/heads/main", commit, true, "test: accept moved main, then crashed").unwrap();

    let o = run(&repo_dir, &["accept", &id, "--tier", "static"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let main = repo.find_reference("refs/heads/main").unwrap().peel_to_commit().unwrap();
    assert_eq!(main.id(), commit, "main did not move again (no empty merge): {}", text(&o));
    let after: toml::Value = toml::from_str(&std::fs::read_to_string(repo_dir.join("proposals").join(&name)).unwrap()).unwrap();
    assert_eq!(after["status"].as_str(), Some("accepted"));
    assert_eq!(after["review"]["merged"].as_str(), Some(commit.to_string().as_str()));
}
