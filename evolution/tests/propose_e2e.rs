//! End to end, in a temporary git repository holding a copy of this checkout's compiler data and
//! corpus: evidence from real broken candidates → `propose` (rule proposals on branches, gated,
//! queued) → `accept` merges one, and the merged rule rejects held-out failing programs of its
//! bucket before compilation → `reject` stops another bucket from being proposed again (until new
//! evidence arrives) → a proposal whose rule would reject an accepted corpus program fails its
//! corpus gate at `accept` (main gained that program since) and the report names the case and why.

#[path = "propose_fixture.rs"]
mod fixture;

use std::path::Path;

use cake_evolve::queue::{self, Kind, ProposeOptions, Status};
use cake_evolve::review::{self, Accepted};
use cake_evolve::store::EvidenceStore;
use cake_merge_gates::GateOptions;
use fixture::*;

fn mutations() -> Vec<Mutation> {
    vec![
        // Alignment above 1024: the verifier accepts it, the lowering refuses it (L002).
        Mutation { name: "align", cases: &[], from: "align 1024", train: &["align 2048"], heldout: &["align 4096"] },
        // A K dimension whose row stride is not a multiple of 16 bytes: cp.async refuses (L006).
        Mutation { name: "k-multiple", cases: &[], from: "dim K multiple_of 32", train: &["dim K multiple_of 33", "dim K multiple_of 36"], heldout: &["dim K multiple_of 34"] },
        // Shared memory that fits the verifier's count but not with the barriers and the 1024 B
        // base alignment the lowering adds (L002).
        Mutation { name: "smem-gap", cases: &["kmeans-assign/d128-128x128-s4-p", "kmeans-assign/d128-128x256-s2-p"], from: "smem x_s: bf16[2, 128, 64]", train: &["smem x_s: bf16[6, 128, 64]"], heldout: &[] },
        Mutation { name: "smem-gap", cases: &["kmeans-assign/d128-64x128-s4"], from: "smem x_s: bf16[2, 64, 64]", train: &["smem x_s: bf16[12, 64, 64]"], heldout: &[] },
        Mutation { name: "smem-gap", cases: &["kmeans-assign/d64-128x256-s3"], from: "smem x_s: bf16[1, 128, 64]", train: &["smem x_s: bf16[8, 128, 64]"], heldout: &[] },
        Mutation { name: "smem-gap", cases: &["kmeans-assign/d64-128x128-s5-p"], from: "smem x_s: bf16[1, 128, 64]", train: &[], heldout: &["smem x_s: bf16[9, 128, 64]"] },
        Mutation { name: "smem-gap", cases: &["kmeans-assign/d128-128x128-s5"], from: "smem x_s: bf16[2, 128, 64]", train: &[], heldout: &["smem x_s: bf16[4, 128, 64]"] },
    ]
}

const FAMILIES: &[&str] = &["attention-fwd", "knn-topk", "kmeans-assign", "gemm-sm80", "gemm-sm90-ws"];

fn opts(repo: &Path, evidence: &Path) -> ProposeOptions {
    let mut o = ProposeOptions::new(repo, evidence);
    o.gate = GateOptions::static_only();
    o.progress = false;
    o.quiet = true;
    o.llm = None;
    o
}

/// The repository's own rules, as the compiler loads them at run time.
fn check_with_rules_of(dir: &Path, source: &str) -> Vec<String> {
    let fe = cake_merge_gates::corpus_gate::frontend_for(&cake_merge_gates::Tree::new(dir)).unwrap();
    let out = fe.check(source);
    out.diagnostics.iter().filter(|d| d.is_error()).map(|d| d.code.clone()).collect()
}

/// Commit the working copy's changes on `main` (HEAD) like a person would.
fn commit_all(repo: &git2::Repository, msg: &str) {
    let mut index = repo.index().unwrap();
    index.add_all(["*"].iter(), git2::IndexAddOption::DEFAULT, None).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    let sig = repo.signature().unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, msg, &tree, &[&head]).unwrap();
}

#[test]
fn propose_accept_reject_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let repo_dir = tmp.path().join("repo");
    let evidence = tmp.path().join("evidence");
    let repo = make_repo(&repo_dir);
    let main_before = repo.head().unwrap().peel_to_commit().unwrap().id();
    let (train, heldout) = make_evidence(&repo_dir, &evidence, FAMILIES, &mutations(), 4);
    let by_kind = |c: &[Candidate], k: &str| c.iter().filter(|x| x.mutation == k).count();
    for k in ["align", "k-multiple", "smem-gap"] {
        assert!(by_kind(&train, k) >= 2, "{k}: {} training failures", by_kind(&train, k));
        assert!(by_kind(&heldout, k) >= 1, "{k}: {} held-out failures", by_kind(&heldout, k));
    }
    // Every candidate passes today's verifier: that is what the engine must learn.
    for c in train.iter().chain(&heldout) {
        assert!(cake::check::check_source(&c.source).validated.is_some(), "{} ({}) is accepted by the verifier today", c.case, c.mutation);
    }

    // ── propose ──
    let o = opts(&repo_dir, &evidence);
    let summary = queue::propose(&o).unwrap();
    let qdir = repo_dir.join("proposals");
    let records = queue::load_all(&qdir).unwrap();
    let rules: Vec<&queue::Record> = records.iter().filter(|r| r.kind == Kind::Rule).collect();
    let table: String = summary.outcomes.iter().map(|o| format!("{} {} {:?} {}\n", o.bucket, o.what, o.proposal, o.detail)).collect();
    println!("propose:\n{table}");
    assert!(rules.len() >= 3, "at least 3 rule proposals:\n{table}");
    for r in &rules {
        assert_eq!(r.status, Status::Queued);
        assert!(r.branch.starts_with(&format!("evolve/rule/{}-", r.id)), "{}", r.branch);
        let head = cake_evolve::git::branch_target(&repo, &r.branch).expect("the branch exists");
        assert_eq!(head.to_string(), r.commit);
        assert_eq!(r.base, main_before.to_string());
        assert_eq!(r.gates_passed, Some(true), "{} gates:\n{}", r.id, r.gate_report().table());
        let d = r.rule.as_ref().unwrap();
        assert!(d.code.starts_with("V6"), "evolved codes are V600–V699: {}", d.code);
        // The branch commits the rule, its negative cases and a CHANGELOG line.
        let changed = cake_evolve::git::diff(&repo, main_before, head).unwrap();
        let paths: Vec<&str> = changed.iter().map(|f| f.path.as_str()).collect();
        assert!(paths.iter().any(|p| p.starts_with("compiler/rules/") && p.contains(&d.code)), "{paths:?}");
        assert!(paths.iter().any(|p| p.starts_with(&format!("corpus/verifier-negative/{}-", d.code)) && p.ends_with(".cake")), "{paths:?}");
        assert!(paths.contains(&"CHANGELOG.md"));
        let gates: Vec<&str> = r.gates.iter().map(|g| g.gate.as_str()).collect();
        for g in ["data-only", "schema", "corpus", "P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "lowering"] {
            assert!(gates.contains(&g), "gate {g} ran: {gates:?}");
        }
    }
    // The user's working copy and HEAD were not touched.
    assert_eq!(repo.head().unwrap().peel_to_commit().unwrap().id(), main_before);
    assert!(cake_evolve::git::dirty_tracked(&repo, "proposals/").unwrap().is_empty());

    let rule_for = |mutation: &str| -> queue::Record {
        let c = train.iter().find(|c| c.mutation == mutation).unwrap();
        let store = EvidenceStore::open(&evidence).unwrap();
        let sha = store.put_program(&c.source).unwrap().sha256;
        queue::load_all(&qdir).unwrap().into_iter().find(|r| r.kind == Kind::Rule && r.programs.contains(&sha)).unwrap_or_else(|| panic!("a rule proposal for {mutation}:\n{table}"))
    };
    let align = rule_for("align");
    let kmul = rule_for("k-multiple");
    let gap = rule_for("smem-gap");
    assert_eq!(align.rule.as_ref().unwrap().applies_to, "smem");

    // ── idempotent: the same evidence proposes nothing new ──
    let again = queue::propose(&o).unwrap();
    assert!(again.proposed().is_empty(), "{:?}", again.outcomes);
    let records2 = queue::load_all(&qdir).unwrap();
    assert_eq!(records2.len(), records.len());
    for r in &records2 {
        assert_eq!(Some(r), records.iter().find(|x| x.id == r.id), "record {} unchanged", r.id);
    }

    // ── show ──
    let shown = review::show(&repo_dir, &align, true).unwrap();
    assert!(shown.contains(&align.rule.as_ref().unwrap().require) && shown.contains("corpus") && shown.contains("+++ b/compiler/rules/"), "{shown}");

    // ── accept: re-gated on main (unchanged: fast-forward), merged, recorded ──
    let accepted = review::accept(&repo_dir, &align.id, "reviewed: align above 1024 never lowers", None, GateOptions::static_only()).unwrap();
    let Accepted::Merged { commit, how } = accepted else { panic!("accept failed: {accepted:?}") };
    assert_eq!(how, "fast-forward");
    assert_eq!(repo.head().unwrap().peel_to_commit().unwrap().id().to_string(), commit);
    let (_, rec) = queue::find(&qdir, &align.id).unwrap();
    assert_eq!(rec.status, Status::Accepted);
    assert!(rec.review.as_ref().unwrap().note.contains("reviewed"));
    // The working copy (on main, clean) was updated: the rule file is there.
    let code = align.rule.as_ref().unwrap().code.clone();
    let rule_file = repo_dir.join(format!("compiler/rules/{}/{}-{}.toml", align.rule.as_ref().unwrap().category, code, align.rule.as_ref().unwrap().name));
    assert!(rule_file.is_file(), "{}", rule_file.display());
    let changelog = std::fs::read_to_string(repo_dir.join("CHANGELOG.md")).unwrap();
    assert!(changelog.contains(&align.changelog), "the CHANGELOG line landed");

    // The merged rule rejects the held-out failing programs of its bucket before compilation —
    // programs the engine never saw, which today's rules accept.
    let held: Vec<&Candidate> = heldout.iter().filter(|c| c.mutation == "align").collect();
    assert!(!held.is_empty());
    for c in &held {
        assert!(!evidence_has(&evidence, &c.source), "held-out program {} was not in the evidence", c.case);
        assert!(check_with_rules_of(&fixture::checkout(), &c.source).is_empty(), "today's rules accept the held-out {}", c.case);
        let codes = check_with_rules_of(&repo_dir, &c.source);
        assert!(codes.contains(&code), "the merged {code} rejects held-out {} (got {codes:?})", c.case);
    }

    // ── reject: remembered; the bucket is not proposed again ──
    let r = review::reject(&repo_dir, &kmul.id, "the row-stride rule belongs in the lowering's own check").unwrap();
    assert_eq!(r.status, Status::Rejected);
    let third = queue::propose(&o).unwrap();
    let out = third.outcomes.iter().find(|x| x.bucket == kmul.bucket).unwrap();
    assert_eq!(out.what, "unchanged", "{out:?}");
    assert!(out.detail.contains("rejected"), "{out:?}");
    assert_eq!(queue::find(&qdir, &kmul.id).unwrap().1.status, Status::Rejected);
    assert!(third.proposed().is_empty());

    // ── bors: main gains an accepted corpus program the `smem-gap` rule would reject; accepting
    // that proposal re-runs the gates on current main, and its corpus gate fails saying which
    // case and why ──
    let victim = heldout.iter().find(|c| c.mutation == "smem-gap").unwrap();
    let fam = repo_dir.join("corpus/kmeans-extra");
    std::fs::create_dir_all(&fam).unwrap();
    std::fs::write(fam.join("family.toml"), "description = \"kmeans assign variants kept for the static tier (test)\"\n").unwrap();
    std::fs::write(fam.join("big-x.cake"), &victim.source).unwrap();
    std::fs::write(fam.join("big-x.toml"), "program = \"big-x.cake\"\ntarget = \"sm_90a\"\ntiers = [\"static\"]\n\n[expect]\nverdict = \"accept\"\nfindings = []\n").unwrap();
    commit_all(&repo, "corpus: a larger kmeans x_s tile, accepted");
    let res = review::accept(&repo_dir, &gap.id, "", None, GateOptions::static_only()).unwrap();
    let Accepted::GatesFailed { table: gate_table } = res else { panic!("the gap rule must not merge: {res:?}") };
    println!("accept {} on the grown main:\n{gate_table}", gap.id);
    let gap_code = gap.rule.as_ref().unwrap().code.clone();
    assert!(gate_table.contains("corpus") && gate_table.contains("kmeans-extra/big-x") && gate_table.contains("regressed") && gate_table.contains(&gap_code), "{gate_table}");
    let (_, rec) = queue::find(&qdir, &gap.id).unwrap();
    assert_eq!(rec.status, Status::Queued, "not merged");
    assert_eq!(rec.gates_passed, Some(false));
    let corpus_gate = rec.gates.iter().find(|g| g.gate == "corpus").unwrap();
    assert!(corpus_gate.details.iter().any(|d| d.contains("kmeans-extra/big-x [static] regressed") && d.contains("expected verdict accept")), "{:?}", corpus_gate.details);
    // main did not move.
    assert!(review::list(&queue::load_all(&qdir).unwrap()).contains(&gap.id));

    // ── new evidence for the rejected bucket brings it back ──
    let store = EvidenceStore::open(&evidence).unwrap();
    let extra = train.iter().find(|c| c.mutation == "k-multiple").unwrap().source.replacen("multiple_of 33", "multiple_of 35", 1).replacen("multiple_of 36", "multiple_of 35", 1);
    let (lcode, lmsg, line) = lower_failure(&extra).expect("the new candidate fails in the lowering too");
    store_failure(&store, "sm_90a", &extra, &lcode, &lmsg, line, "multiple_of 35");
    let fourth = queue::propose(&o).unwrap();
    let back = queue::find(&qdir, &kmul.id).unwrap().1;
    assert_eq!(back.status, Status::Queued, "re-proposed with the new evidence: {:?}", fourth.outcomes);
    assert_eq!(back.history.len(), 1, "the rejection is kept in the history");
    assert_eq!(back.history[0].action, Status::Rejected);
}

fn evidence_has(store: &Path, source: &str) -> bool {
    let s = EvidenceStore::open(store).unwrap();
    let file = cake::syntax::parse(source).unwrap();
    let sha = cake::runtime::record::sha256_hex(cake::syntax::print(&file).as_bytes());
    s.program(&sha).unwrap().is_some()
}
