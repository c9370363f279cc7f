//! The loop end to end without a GPU: the GPU stage is recorded and reported as skipped, never as
//! passed; determinism under `--seed`; `--replay`; resume after SIGKILL; coded errors for bad input.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use cake_evolve_kernel::db::Db;
use support::*;

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn kmeans_end_to_end_on_cpu_reports_the_gpu_stage_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("k.sqlite");
    let ev = tmp.path().join("evidence");
    let c = contract("kmeans-assign.toml");
    let out = run(&["run", s(&c), "--db", s(&db), "--seed", "3", "--budget-evals", "4", "--evidence", s(&ev), "--format", "json"], &cake_bin(), tmp.path());
    let summary = json(&out);
    // Exit 3: the search ran, the GPU stage was skipped (no GPU here).
    assert_eq!(out.status.code(), Some(3), "{summary}\n{}", stderr(&out));
    assert_eq!(summary["evaluations"], 4);
    assert_eq!(summary["skipped"], 4);
    assert_eq!(summary["passed"], 0);
    assert_eq!(summary["gpu_stage_skipped"], true);
    assert_eq!(summary["best"]["measured"], false, "a prediction is never reported as a measurement");

    let d = Db::open_existing(&db).unwrap();
    let cands = d.candidates().unwrap();
    let evals = d.evaluations().unwrap();
    assert!(cands.len() > 4);
    assert!(evals.iter().all(|e| e.status == "skipped" && e.headline_ms.is_none()));
    // Every record carries the contract's hash and the compiler that made it.
    let hash = cake_evolve_kernel::contract::sha256_hex(&std::fs::read(&c).unwrap());
    assert!(cands.iter().all(|r| r.contract_hash == hash && r.compiler_commit.starts_with("cake ")));
    assert!(evals.iter().all(|e| e.contract_hash == hash));
    // The first candidate is the seed, and every other has a parent and a tactic.
    assert_eq!(cands[0].tactic, "seed");
    assert!(cands[1..].iter().all(|r| r.parents.len() == 1 && r.tactic != "seed"));
    // Only gate passers were evaluated, the cost model's best of their generation.
    assert!(evals.iter().all(|e| cands[e.seq as usize].gate == "passed"));

    // Gate rejections of the compiler's gates are in the evidence store, readable by mining.
    let compiler_rejections = cands.iter().filter(|r| matches!(r.gate.as_str(), "parse" | "typecheck" | "verify")).count();
    let store = cake_evolve::store::EvidenceStore::open(&ev).unwrap();
    let scan = store.scan();
    assert!(scan.problems.is_empty(), "{:?}", scan.problems);
    assert_eq!(scan.records.len(), compiler_rejections);

    let report = json(&run(&["report", "--db", s(&db), "--format", "json"], &cake_bin(), tmp.path()));
    assert_eq!(report["gpu_stage_skipped"], true);
    assert_eq!(report["gpu_stage"]["skipped"], 4);
    assert!(report["leaderboard"].as_array().unwrap().is_empty(), "nothing was timed");
    assert!(report["gpu_seconds_saved_estimate"].is_null(), "no GPU time was measured to extrapolate");
    let f = &report["filtered"];
    assert_eq!(f["evaluated_on_gpu_stage"], 4);
    assert_eq!(f["by_gates"].as_u64().unwrap() + f["by_cost_rank"].as_u64().unwrap() + 4, cands.len() as u64);
    let svg = tmp.path().join("trajectory.svg");
    let human = String::from_utf8_lossy(&run(&["report", "--db", s(&db), "--svg", s(&svg)], &cake_bin(), tmp.path()).stdout).into_owned();
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("predicted (GPU stage skipped: nothing timed)"), "the plot says nothing was timed");
    assert!(human.contains("SKIPPED"), "{human}");
    let best = run(&["best", "--db", s(&db)], &cake_bin(), tmp.path());
    assert!(best.status.success());
    let best = String::from_utf8_lossy(&best.stdout).into_owned();
    assert!(best.contains("\nkernel kmeans_assign target sm_90a\n"), "{best}");
    assert!(cake::check::check_source(&best).validated.is_some(), "the best program verifies");
}

#[test]
fn the_same_seed_generates_the_same_candidates_in_the_same_order_and_replay_agrees() {
    let tmp = tempfile::tempdir().unwrap();
    let (fake, _) = fake_cake(tmp.path(), "0");
    let c = contract("gemm-bf16.toml");
    let order = |db: &str, seed: &str| {
        let out = run(&["run", s(&c), "--db", db, "--seed", seed, "--budget-evals", "10", "--evidence", "ev", "--format", "json"], &fake, tmp.path());
        assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
        json(&out)
    };
    let a = order("a.sqlite", "11");
    let b = order("b.sqlite", "11");
    assert_eq!(a["order"], b["order"]);
    assert!(a["order"].as_array().unwrap().len() > 10);
    let other = order("c.sqlite", "12");
    assert_ne!(a["order"], other["order"], "another seed draws other moves");
    // Replay from the recorded measurements: same candidates, same best, nothing new.
    let r = run(&["run", s(&c), "--db", "a.sqlite", "--replay", "--format", "json"], &fake, tmp.path());
    let r = json(&r);
    assert_eq!(r["order"], a["order"]);
    assert_eq!(r["best"], a["best"]);
    assert_eq!(r["new_candidates"], 0);
    assert_eq!(r["new_evaluations"], 0);
}

#[test]
fn resume_after_sigkill_reevaluates_nothing_finished_and_loses_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let c = contract("kmeans-assign.toml");
    let budget = "12";
    // The reference: one uninterrupted run.
    let (quick, _) = fake_cake(tmp.path(), "0");
    let reference = run(&["run", s(&c), "--db", "ref.sqlite", "--seed", "5", "--budget-evals", budget, "--evidence", "ev", "--format", "json"], &quick, tmp.path());
    let reference = json(&reference);

    let slow_dir = tmp.path().join("slow");
    std::fs::create_dir_all(&slow_dir).unwrap();
    let (slow, log) = fake_cake(&slow_dir, "0.3");
    let mut child = std::process::Command::new(kevo())
        .args(["run", s(&c), "--db", "k.sqlite", "--seed", "5", "--budget-evals", budget, "--evidence", "ev"])
        .env("CAKE_BIN", &slow)
        .current_dir(tmp.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::fs::read_to_string(&log).map(|l| l.lines().count()).unwrap_or(0) < 5 {
        assert!(start.elapsed() < Duration::from_secs(60), "the run made no progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A second writer is refused while the first runs.
    let second = run(&["resume", s(&c), "--db", "k.sqlite", "--evidence", "ev"], &slow, tmp.path());
    assert!(stderr(&second).contains("error[K205]"), "{}", stderr(&second));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let calls_before = std::fs::read_to_string(&log).unwrap().lines().count();

    let d = Db::open_existing(&tmp.path().join("k.sqlite")).unwrap();
    let finished: BTreeSet<i64> = d.evaluations().unwrap().iter().map(|e| e.seq).collect();
    let kept = d.candidates().unwrap();
    drop(d);
    assert!(!finished.is_empty() && finished.len() < 12, "killed mid-run: {finished:?}");
    let runs = run(&["status", "--db", "k.sqlite", "--format", "json"], &slow, tmp.path());
    assert_eq!(json(&runs)["runs"][0]["state"], "running", "the killed run never finished");

    let resumed = run(&["resume", s(&c), "--db", "k.sqlite", "--evidence", "ev", "--format", "json"], &slow, tmp.path());
    let resumed = json(&resumed);
    // Nothing finished was evaluated again: the calls after the kill are all for other candidates.
    let calls: Vec<String> = std::fs::read_to_string(&log).unwrap().lines().skip(calls_before).map(String::from).collect();
    for seq in &finished {
        let tag = format!("cand-{seq:05}-");
        assert!(!calls.iter().any(|l| l.contains(&tag)), "candidate #{seq} was evaluated again: {calls:?}");
    }
    assert_eq!(resumed["new_evaluations"].as_u64().unwrap() as usize, 12 - finished.len());
    // Nothing was lost: everything recorded before the kill is still there, and the search ends
    // exactly where the uninterrupted one did.
    let d = Db::open_existing(&tmp.path().join("k.sqlite")).unwrap();
    let after = d.candidates().unwrap();
    assert_eq!(&after[..kept.len()], &kept[..]);
    assert_eq!(resumed["order"], reference["order"]);
    assert_eq!(resumed["best"], reference["best"]);
    let status = json(&run(&["status", "--db", "k.sqlite", "--format", "json"], &slow, tmp.path()));
    assert_eq!(status["runs"][0]["state"], "interrupted");
    assert_eq!(status["runs"][1]["state"], "finished");
}

#[test]
fn bad_input_gets_coded_errors_and_leaves_the_database_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let (fake, _) = fake_cake(tmp.path(), "0");
    let c = contract("softmax.toml");
    let code = |args: &[&str], want: &str| {
        let out = run(args, &fake, tmp.path());
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(&format!("error[{want}]")), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("help:"), "{}", stderr(&out));
    };
    // A malformed contract.
    std::fs::write(tmp.path().join("bad.toml"), "schema = \"cake.kernel-contract/1\"\nname = 3\n").unwrap();
    code(&["run", "bad.toml", "--db", "x.sqlite"], "K002");
    // A zero budget.
    code(&["run", s(&c), "--db", "z.sqlite", "--budget-evals", "0"], "K004");
    code(&["run", s(&c), "--db", "z2.sqlite", "--wall-seconds", "0"], "K004");
    assert!(!tmp.path().join("z.sqlite").exists() && !tmp.path().join("z2.sqlite").exists(), "a refused run writes no database");
    // A missing peer.
    let text = std::fs::read_to_string(&c).unwrap().replace("[search]", "[[reference]]\nname = \"torch\"\nkind = \"command\"\ncommand = [\"no-such-peer-xyz\"]\n\n[search]").replace("../seeds/", &format!("{}/", c.parent().unwrap().join("../seeds").display()));
    std::fs::write(tmp.path().join("peer.toml"), text).unwrap();
    code(&["run", "peer.toml", "--db", "p.sqlite"], "K008");
    // A seed that does not verify.
    let seed = std::fs::read_to_string(c.parent().unwrap().join("../seeds/softmax_bf16_naive.cake")).unwrap();
    std::fs::write(tmp.path().join("bad.cake"), seed.replace("reg s: f32[1] per warp", "reg s: f32[1] per nothing")).unwrap();
    let text = std::fs::read_to_string(&c).unwrap().replace("../seeds/softmax_bf16_naive.cake", "bad.cake");
    std::fs::write(tmp.path().join("badseed.toml"), text).unwrap();
    code(&["run", "badseed.toml", "--db", "s.sqlite"], "K006");
    // Resume without a database.
    code(&["resume", s(&c), "--db", "none.sqlite"], "K302");
    // A file that is not a database, and a database of another program: untouched.
    std::fs::write(tmp.path().join("junk.sqlite"), b"not a database, but someone's file\n".repeat(200)).unwrap();
    let before = std::fs::read(tmp.path().join("junk.sqlite")).unwrap();
    code(&["run", s(&c), "--db", "junk.sqlite"], "K202");
    code(&["report", "--db", "junk.sqlite"], "K202");
    assert_eq!(std::fs::read(tmp.path().join("junk.sqlite")).unwrap(), before);
    {
        let conn = rusqlite::Connection::open(tmp.path().join("other.sqlite")).unwrap();
        conn.execute_batch("CREATE TABLE notes (t TEXT); INSERT INTO notes VALUES ('mine');").unwrap();
    }
    code(&["run", s(&c), "--db", "other.sqlite"], "K202");
    let conn = rusqlite::Connection::open(tmp.path().join("other.sqlite")).unwrap();
    let t: String = conn.query_row("SELECT t FROM notes", [], |r| r.get(0)).unwrap();
    assert_eq!(t, "mine");
    // An empty file (a creation killed before its first commit) holds nothing: it becomes the database.
    std::fs::write(tmp.path().join("empty.sqlite"), b"").unwrap();
    let out = run(&["run", s(&c), "--db", "empty.sqlite", "--budget-evals", "1", "--evidence", "ev"], &fake, tmp.path());
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    // A database made under another contract.
    let out = run(&["run", s(&c), "--db", "soft.sqlite", "--budget-evals", "2", "--evidence", "ev"], &fake, tmp.path());
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    code(&["run", s(&contract("gemm-bf16.toml")), "--db", "soft.sqlite"], "K203");
    // Another seed on the same database.
    code(&["run", s(&c), "--db", "soft.sqlite", "--seed", "99"], "K304");
    // No cake binary.
    let out = std::process::Command::new(kevo()).args(["run", s(&c), "--db", "nb.sqlite"]).env("CAKE_BIN", "/nonexistent/cake").current_dir(tmp.path()).output().unwrap();
    assert!(stderr(&out).contains("error[K301]"), "{}", stderr(&out));
}

/// `--rules`: the gates verify with the given set (an ablation lets its class through), the run
/// says which set it used, and a database searched under one set refuses a resume under another.
#[test]
fn rules_flag_gates_with_the_given_set_and_the_database_keeps_it() {
    let tmp = tempfile::tempdir().unwrap();
    let c = contract("gemm-bf16.toml");
    let full = tmp.path().join("full.sqlite");
    let out = run(&["run", s(&c), "--db", s(&full), "--seed", "1", "--budget-evals", "20", "--evidence", s(&tmp.path().join("e1")), "--format", "json"], &cake_bin(), tmp.path());
    let with_all = json(&out);
    assert!(with_all["rejected_by"]["V201"].as_u64().unwrap_or(0) > 0, "the full set rejects over-capacity candidates: {with_all}");
    // The same search with V201's file left out of a copy of the rules.
    let rules = tmp.path().join("rules");
    let src = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../compiler/rules");
    for e in walk(&src) {
        let rel = e.strip_prefix(&src).unwrap();
        if rel.file_name().is_some_and(|n| n.to_string_lossy().starts_with("V201-")) {
            continue;
        }
        std::fs::create_dir_all(rules.join(rel).parent().unwrap()).unwrap();
        std::fs::copy(&e, rules.join(rel)).unwrap();
    }
    let ablated = tmp.path().join("ablated.sqlite");
    let out = run(&["run", s(&c), "--db", s(&ablated), "--seed", "1", "--budget-evals", "20", "--evidence", s(&tmp.path().join("e2")), "--rules", s(&rules), "--format", "json"], &cake_bin(), tmp.path());
    let without = json(&out);
    assert_eq!(without["rules"]["origin"], "flag", "{without}");
    assert!(without["rejected_by"].get("V201").is_none(), "V201 left out, nothing is rejected by it: {without}");
    assert_ne!(without["rules"]["fingerprint"], with_all["rules"]["fingerprint"]);
    // A resume of the ablated search under the full set is refused, naming both sets.
    let out = run(&["resume", s(&c), "--db", s(&ablated), "--evidence", s(&tmp.path().join("e2"))], &cake_bin(), tmp.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("K206"), "{}", stderr(&out));
    // A rules directory that does not exist is a coded error.
    let out = run(&["run", s(&c), "--db", s(&tmp.path().join("x.sqlite")), "--rules", s(&tmp.path().join("nope"))], &cake_bin(), tmp.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("K306"), "{}", stderr(&out));
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
