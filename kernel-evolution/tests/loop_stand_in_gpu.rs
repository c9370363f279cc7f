//! The GPU path of the loop with a stand-in `cake` (tests/fixtures/stand-in-gpu-cake.py) that
//! writes run records as a GPU run would: passed and failed evaluations, times at the headline,
//! the cuBLAS peer, the archive ranking by measurement, evidence routing of failures and timed
//! passes, and a replay that reproduces the search from the recorded measurements.

mod support;

use cake_evolve_kernel::db::Db;
use support::*;

#[test]
fn measured_candidates_are_ranked_routed_and_replayed() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stand-in-gpu-cake.py");
    let c = contract("gemm-bf16.toml");
    let c = c.to_str().unwrap();
    let out = run(&["run", c, "--db", "g.sqlite", "--seed", "2", "--budget-evals", "9", "--evidence", "ev", "--format", "json"], &fake, tmp.path());
    let summary = json(&out);
    assert_eq!(out.status.code(), Some(0), "{summary}\n{}", stderr(&out));
    let (passed, failed) = (summary["passed"].as_u64().unwrap(), summary["failed"].as_u64().unwrap());
    assert!(passed > 0 && failed > 0, "the stand-in makes both: {summary}");
    assert_eq!(passed + failed, 9);
    assert_eq!(summary["best"]["measured"], true);

    let d = Db::open_existing(&tmp.path().join("g.sqlite")).unwrap();
    let evals = d.evaluations().unwrap();
    let best = evals.iter().filter(|e| e.status == "passed").map(|e| (e.headline_ms.unwrap(), e.seq)).min_by(|a, b| a.0.total_cmp(&b.0)).unwrap();
    assert_eq!(summary["best"]["seq"], best.1, "the best is the fastest measured");
    assert!(evals.iter().filter(|e| e.status == "passed").all(|e| e.peers["cublas"]["median_ms"] == 1.5));
    assert!(evals.iter().filter(|e| e.status == "failed").all(|e| e.headline_ms.is_none()), "a failed candidate is never timed");

    // Routed: every failing run record and every timed pass, byte for byte.
    let store = cake_evolve::store::EvidenceStore::open(tmp.path().join("ev")).unwrap();
    let scan = store.scan();
    assert!(scan.problems.is_empty(), "{:?}", scan.problems);
    let runs: Vec<_> = scan.records.iter().filter_map(|r| match &r.record {
        cake_evolve::store::Record::Run(r) => Some(r.clone()),
        _ => None,
    }).collect();
    assert_eq!(runs.iter().filter(|r| r.verdict.name() == "mismatch").count() as u64, failed);
    assert_eq!(runs.iter().filter(|r| r.command == "bench").count() as u64, passed);

    // The loop closes: mining the routed evidence buckets the wrong answers, one program each.
    let mined = cake_evolve::mine::mine_report(&store);
    let wrong: Vec<_> = mined.buckets.iter().filter(|b| b.class == "mismatch").collect();
    assert!(!wrong.is_empty(), "{:?}", mined.buckets.iter().map(|b| &b.signature).collect::<Vec<_>>());
    assert_eq!(wrong.iter().map(|b| b.evidence_ids.len()).sum::<usize>() as u64, failed);

    let report = json(&run(&["report", "--db", "g.sqlite", "--format", "json"], &fake, tmp.path()));
    assert_eq!(report["leaderboard"][0]["seq"], best.1);
    assert_eq!(report["gpu_stage"]["passed"], passed);
    assert!(report["gpu_seconds_saved_estimate"].as_f64().unwrap() > 0.0);
    assert!(report["cost_top10_recall"].as_f64().is_some());

    let replay = json(&run(&["run", c, "--db", "g.sqlite", "--replay", "--format", "json"], &fake, tmp.path()));
    assert_eq!(replay["order"], summary["order"]);
    assert_eq!(replay["best"], summary["best"]);
    assert_eq!(replay["new_evaluations"], 0);
}

#[test]
fn a_command_peer_runs_after_a_passing_candidate_and_a_failed_peer_is_recorded_as_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stand-in-gpu-cake.py");
    // A peer that fails (exit 3, as benchmarks/torch_peer.py does without torch or a GPU), and one
    // that prints its time.
    let dir = tmp.path();
    let peer_log = dir.join("peer-ok.log");
    std::fs::write(dir.join("peer-ok.sh"), format!("#!/bin/sh\necho \"rows $1\" >> '{}'\necho '{{\"median_ms\": 0.25}}'\n", peer_log.display())).unwrap();
    std::fs::write(dir.join("peer-gone.sh"), "#!/bin/sh\necho 'torch_peer: torch is not installed' >&2\nexit 3\n").unwrap();
    let contract_dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("contracts");
    let text = std::fs::read_to_string(contract_dir.join("softmax.toml")).unwrap();
    let start = text.find("[[reference]]").unwrap();
    let end = text.find("[search]").unwrap();
    let peers = format!(
        "[[reference]]\nname = \"ok\"\nkind = \"command\"\ncommand = [\"sh\", \"{}\", \"{{R}}\"]\n\n[[reference]]\nname = \"gone\"\nkind = \"command\"\ncommand = [\"sh\", \"{}\"]\n\n",
        dir.join("peer-ok.sh").display(),
        dir.join("peer-gone.sh").display()
    );
    let text = format!("{}{}{}", &text[..start], peers, &text[end..])
        .replace("../seeds/", &format!("{}/", contract_dir.join("../seeds").display()))
        .replace("tactics = \"../tactics\"", &format!("tactics = \"{}\"", contract_dir.join("../tactics").display()));
    std::fs::write(dir.join("softmax.toml"), text).unwrap();
    let out = run(&["run", "softmax.toml", "--db", "s.sqlite", "--seed", "1", "--budget-evals", "6", "--evidence", "ev", "--format", "json"], &fake, dir);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let d = Db::open_existing(&dir.join("s.sqlite")).unwrap();
    let evals = d.evaluations().unwrap();
    let passed: Vec<_> = evals.iter().filter(|e| e.status == "passed").collect();
    assert!(!passed.is_empty());
    assert!(passed.len() > 1, "several candidates pass");
    // The peer ran once for the invocation, at the headline's R, and every candidate is compared
    // with that time.
    assert_eq!(std::fs::read_to_string(&peer_log).unwrap(), "rows 16384\n");
    for e in passed {
        assert_eq!(e.peers["ok"]["median_ms"], 0.25, "{}", e.peers);
        // Within an ulp: the value went through JSON text.
        let speedup = e.peers["ok"]["speedup"].as_f64().unwrap();
        assert!((speedup - 0.25 / e.headline_ms.unwrap()).abs() < 1e-12, "{speedup}");
        assert!(e.peers["gone"]["skipped"].as_str().unwrap().contains("exit Some(3)"), "{}", e.peers);
        assert!(e.peers["gone"].get("median_ms").is_none(), "a failed peer has no time");
    }
    assert!(evals.iter().filter(|e| e.status == "failed").all(|e| e.peers.as_object().unwrap().is_empty()), "peers run only after a pass");
}

#[test]
fn sweep_improvements_checks_every_shape_only_for_candidates_that_could_be_the_best() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stand-in-gpu-cake.py");
    let src = contract("gemm-bf16.toml");
    let base = src.parent().unwrap();
    let text = std::fs::read_to_string(&src)
        .unwrap()
        .replace("[workload]", "[evaluation]\nsweep = \"improvements\"\n\n[workload]")
        .replace("\"../seeds/", &format!("\"{}/", base.join("../seeds").display()))
        .replace("\"../tactics\"", &format!("\"{}\"", base.join("../tactics").display()));
    std::fs::write(tmp.path().join("g.toml"), text).unwrap();
    let out = run(&["run", "g.toml", "--db", "g.sqlite", "--seed", "2", "--budget-evals", "12", "--evidence", "ev", "--format", "json"], &fake, tmp.path());
    let summary = json(&out);
    assert_eq!(out.status.code(), Some(0), "{summary}\n{}", stderr(&out));
    assert!(summary["timed"].as_u64().unwrap() > 0, "{summary}");
    let d = Db::open_existing(&tmp.path().join("g.sqlite")).unwrap();
    let evals = d.evaluations().unwrap();
    let best = evals.iter().filter(|e| e.status == "passed").map(|e| e.headline_ms.unwrap()).fold(f64::INFINITY, f64::min);
    assert_eq!(summary["best"]["ms"], best, "the best is a fully checked candidate");
    for e in evals.iter().filter(|e| e.status == "timed") {
        assert!(e.headline_ms.unwrap() >= best, "a timed-only candidate is never faster than the best");
        let runs = e.verdicts["runs"].as_array().unwrap();
        assert!(runs.iter().all(|r| r["command"] == "bench"), "no sweep was spent on it: {runs:?}");
    }
    let report = json(&run(&["report", "--db", "g.sqlite", "--format", "json"], &fake, tmp.path()));
    assert!(report["leaderboard"].as_array().unwrap().iter().all(|r| evals.iter().any(|e| e.seq == r["seq"].as_i64().unwrap() && e.status == "passed")), "the leaderboard holds fully checked candidates only");
}
