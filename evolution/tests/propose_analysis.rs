//! What the predicate language cannot express (issue 12, item 6), end to end: a bucket of wrong
//! answers whose programs equal accepted corpus programs in every verifier fact (the activation
//! applied to the wrong input) has no separating predicate, so `propose` makes a proposal for a
//! new fact instead of a rule — a draft on `evolve/analysis/…` naming the missing quantity, the
//! failing programs and the accepted ones nearest them, with a skeleton analysis and test — queued
//! with gates that fail and say why, shown by `show`, never accepted.

#[path = "propose_fixture.rs"]
mod fixture;

use cake_evolve::queue::{self, Kind, ProposeOptions, Status};
use cake_evolve::review::{self, Accepted};
use cake_merge_gates::{GateOptions, GateStatus};
use fixture::*;

#[test]
fn a_separation_no_predicate_expresses_becomes_a_proposal_for_a_fact() {
    let tmp = tempfile::tempdir().unwrap();
    let repo_dir = tmp.path().join("repo");
    let evidence = tmp.path().join("evidence");
    let repo = make_repo(&repo_dir);
    let main_before = repo.head().unwrap().peel_to_commit().unwrap().id();
    let made = unexpressible_evidence(&repo_dir, &evidence);
    let mut failing = made.clone();
    failing.sort();
    let mut o = ProposeOptions::new(&repo_dir, &evidence);
    o.gate = GateOptions::static_only();
    o.progress = false;
    o.quiet = true;
    o.llm = None;
    let summary = queue::propose(&o).unwrap();
    let table: String = summary.outcomes.iter().map(|o| format!("{} {} {:?} {}\n", o.bucket, o.what, o.proposal, o.detail)).collect();
    let records = queue::load_all(&repo_dir.join("proposals")).unwrap();
    // Never a near-miss rule.
    assert!(records.iter().all(|r| r.kind != Kind::Rule), "no rule proposal:\n{table}");
    let a = records.iter().find(|r| r.kind == Kind::Analysis).unwrap_or_else(|| panic!("a proposal for a fact:\n{table}"));
    assert!(a.id.starts_with("a-") && a.branch.starts_with(&format!("evolve/analysis/{}-", a.id)), "{} {}", a.id, a.branch);
    assert_eq!(a.status, Status::Queued);
    let d = a.analysis.as_ref().unwrap();
    let mut explained = d.failing_programs.clone();
    explained.sort();
    assert_eq!(explained, failing, "it must separate both failing programs");
    assert!(d.why.contains("no predicate"), "{}", d.why);
    assert!(d.quantity.contains(&a.signature), "{}", d.quantity);
    // Each failing program's twin is the corpus case it was edited from: every fact of every
    // construct equal, so no predicate can separate them.
    for (h, case) in made.iter().zip(["elementwise/swiglu-sm_90a-bf16-c4096", "elementwise/geglu-sm_90a-f16-c2048"]) {
        let twin = d.nearest.iter().any(|n| n.starts_with(&format!("program {}", &h[..12])) && n.contains(case) && n.contains("no predicate over today's facts can tell them apart"));
        assert!(twin, "{h} and {case}: {:#?}", d.nearest);
        assert!(d.passing_programs.contains(&case.to_string()), "{:?}", d.passing_programs);
    }
    assert!(!d.passing_programs.is_empty(), "{:?}", d);

    // The gates fail and say why: not a rule, and its Rust is not data.
    assert_eq!(a.gates_passed, Some(false));
    let gate = |g: &str| a.gates.iter().find(|x| x.gate == g).unwrap_or_else(|| panic!("gate {g}: {:?}", a.gates)).clone();
    let analysis = gate("analysis");
    assert_eq!(analysis.status, GateStatus::Fail);
    assert!(analysis.summary.contains("not a rule") && analysis.summary.contains(&d.fact), "{analysis:?}");
    assert!(analysis.details.iter().any(|l| l.contains("cannot be accepted until a person writes the analysis")), "{analysis:?}");
    assert_eq!(gate("data-only").status, GateStatus::Fail);

    // The branch holds the skeleton (the fact's doc line, the function, a test over the failing
    // programs committed beside it and the nearest accepted cases) and a CHANGELOG line.
    let head = cake_evolve::git::proposal_commit(&repo, &a.branch).unwrap();
    let paths: Vec<String> = cake_evolve::git::diff(&repo, main_before, head).unwrap().into_iter().map(|f| f.path).collect();
    assert!(paths.contains(&d.skeleton) && paths.contains(&"CHANGELOG.md".to_string()), "{paths:?}");
    assert_eq!(paths.iter().filter(|p| p.ends_with(".cake") && p.contains(&d.fact)).count(), 2, "{paths:?}");
    let skeleton = cake_evolve::git::read_text(&repo, head, &d.skeleton).unwrap().unwrap();
    for want in [format!("f(\"{}\"", d.fact), format!("pub fn {}(", d.fact), "NOT wired in".to_string(), "const PASSING".to_string()] {
        assert!(skeleton.contains(&want), "the skeleton has {want}:\n{skeleton}");
    }
    for c in &d.passing_programs {
        assert!(skeleton.contains(&format!("\"{c}\"")), "{c}:\n{skeleton}");
    }

    // `show` says what it is.
    let shown = review::show(&repo_dir, a, false).unwrap();
    assert!(shown.contains("(analysis)") && shown.contains(&format!("new fact `{}`", d.fact)) && shown.contains("not a rule"), "{shown}");
    for l in &analysis.details {
        assert!(shown.contains(l.as_str()), "{shown}");
    }

    // Idempotent, and it cannot be accepted: main does not move.
    let again = queue::propose(&o).unwrap();
    assert!(again.proposed().is_empty(), "{:?}", again.outcomes);
    match review::accept(&repo_dir, &a.id, "try", None, GateOptions::static_only()).unwrap() {
        Accepted::GatesFailed { table } => assert!(table.contains("analysis"), "{table}"),
        other => panic!("a proposal for a fact merged: {other:?}"),
    }
    assert_eq!(repo.find_branch("main", git2::BranchType::Local).unwrap().get().peel_to_commit().unwrap().id(), main_before);
}
