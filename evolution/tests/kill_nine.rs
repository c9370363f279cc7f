//! kill -9 at 20 random points of `propose` and `accept` (issue 15, item 7): after each kill the
//! repository is `git fsck` clean, every record on disk parses, and no record written before the
//! kill is gone; re-running the command converges to the refs and records of an uninterrupted run.
//!
//! The kill delays are drawn with a fixed seed from the length of the uninterrupted run, so the
//! points fall where the work is. A run that finished before its kill is compared with the
//! uninterrupted one and the next kill starts from a fresh copy; otherwise the next kill hits
//! the re-run (a resumed run, a later point of the same work). `CAKE_KILL_POINTS` (default 20:
//! 14 in propose, 6 in accept) and `CAKE_KILL_SEED` change the campaign.

#[path = "hardening_support.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

/// splitmix64: the kill delays, the same on every machine.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What the runs leave that matters: every branch and its commit, every record (as TOML).
#[derive(Debug, PartialEq)]
struct State {
    refs: BTreeMap<String, String>,
    records: BTreeMap<String, toml::Value>,
}

fn state(repo: &Path) -> State {
    let r = git2::Repository::open(repo).unwrap();
    let mut refs = BTreeMap::new();
    for b in r.branches(Some(git2::BranchType::Local)).unwrap() {
        let (b, _) = b.unwrap();
        refs.insert(b.name().unwrap().unwrap().to_string(), b.get().target().unwrap().to_string());
    }
    let mut records = BTreeMap::new();
    for name in record_files(repo) {
        let text = std::fs::read_to_string(repo.join("proposals").join(&name)).unwrap();
        records.insert(name, toml::from_str(&text).unwrap());
    }
    State { refs, records }
}

/// Runs `args` in `repo` and kills it with SIGKILL after `delay`; true when it was killed, false
/// when it exited first (then with status 0).
fn kill_after(repo: &Path, args: &[&str], delay: Duration) -> bool {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cake-evolve-compiler")).args(args).current_dir(repo).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let t0 = Instant::now();
    while t0.elapsed() < delay {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            assert!(status.success(), "`{}` failed on its own: {status}\n{err}", args.join(" "));
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    true
}

/// What must hold after any kill: git is consistent, every record parses, none was lost.
fn check_after_kill(repo: &Path, before: &BTreeSet<String>, what: &str) {
    let fsck = Command::new("git").args(["fsck", "--full", "--no-dangling", "--no-progress"]).current_dir(repo).output().unwrap();
    assert!(fsck.status.success(), "{what}: git fsck: {}", text(&fsck));
    let now: BTreeSet<String> = record_files(repo).into_iter().collect();
    for name in &now {
        if let Err(e) = cake_evolve::records::load(&repo.join("proposals").join(name)) {
            panic!("{what}: a record does not parse after the kill: {e}");
        }
    }
    let lost: Vec<_> = before.difference(&now).collect();
    assert!(lost.is_empty(), "{what}: records lost: {lost:?}");
}

/// Every proposal branch has its record, and the record names it.
fn check_branches_have_records(repo: &Path) {
    let s = state(repo);
    for (name, _) in s.refs.iter().filter(|(n, _)| n.starts_with("evolve/")) {
        let has = s.records.values().any(|r| r.get("branch").and_then(|b| b.as_str()) == Some(name));
        assert!(has, "branch {name} has no record in proposals/: {:?}", s.records.keys().collect::<Vec<_>>());
    }
}

/// Kills `args` `kills` times at random points in copies of `template`, re-running after each
/// kill, and checks that every repository ends in `want`.
fn campaign(template: &Path, scratch: &Path, args: &[&str], reference: Duration, want: &State, kills: usize, rng: &mut Rng, what: &str) {
    let mut n = 0;
    let mut copies = 0;
    let mut repo: Option<std::path::PathBuf> = None;
    while n < kills {
        let dir = repo.get_or_insert_with(|| {
            copies += 1;
            let d = scratch.join(format!("{what}-{copies}"));
            copy_dir(template, &d, &[]);
            d
        });
        let before: BTreeSet<String> = record_files(dir).into_iter().collect();
        let delay = reference.mul_f64(rng.unit());
        if kill_after(dir, args, delay) {
            n += 1;
            check_after_kill(dir, &before, &format!("{what} kill {n} at {delay:?}"));
        } else {
            // It finished before the kill: the uninterrupted result; the next kill starts afresh.
            assert_eq!(state(dir), *want, "{what}: a run that was not killed");
            repo = None;
        }
    }
    if let Some(dir) = repo {
        let o = run(&dir, args);
        assert_eq!(o.status.code(), Some(0), "{what}: the re-run after the last kill: {}", text(&o));
        assert_eq!(state(&dir), *want, "{what}: the re-run converges to the uninterrupted run's refs and records");
        check_branches_have_records(&dir);
    }
    eprintln!("{what}: {kills} kills in {copies} copies");
}

#[test]
fn kill_nine_at_random_points_of_propose_and_accept_loses_nothing() {
    let points: usize = std::env::var("CAKE_KILL_POINTS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let mut rng = Rng(std::env::var("CAKE_KILL_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(15));
    let (tmp, template, evidence) = setup();
    let ev = evidence.to_str().unwrap().to_string();
    let propose_args = ["propose", "--no-gates", "--no-progress", "--lock-timeout", "600", "--evidence", ev.as_str()];

    // The uninterrupted runs, in a copy: propose, then accept the first proposal.
    let reference = tmp.path().join("reference");
    copy_dir(&template, &reference, &[]);
    let t0 = Instant::now();
    propose(&reference, &evidence);
    let propose_time = t0.elapsed();
    let proposed = state(&reference);
    check_branches_have_records(&reference);
    let id = record_files(&reference)[0].trim_end_matches(".toml").to_string();
    let queued = tmp.path().join("queued");
    copy_dir(&reference, &queued, &[]);
    let accept_args = ["accept", id.as_str(), "--tier", "static", "--lock-timeout", "600"];
    let t0 = Instant::now();
    let o = run(&reference, &accept_args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let accept_time = t0.elapsed();
    let accepted = state(&reference);
    assert_ne!(proposed.refs["main"], accepted.refs["main"], "accept moved main");
    eprintln!("uninterrupted: propose {propose_time:?}, accept {accept_time:?}");

    let in_propose = points * 7 / 10;
    campaign(&template, tmp.path(), &propose_args, propose_time, &proposed, in_propose, &mut rng, "propose");
    campaign(&queued, tmp.path(), &accept_args, accept_time, &accepted, points - in_propose, &mut rng, "accept");
}
