//! End to end, in a temporary git repository holding a copy of this checkout's compiler data and
//! corpus, from the bundled evidence (`evolution/evidence/bundle`, real runs of the broken
//! candidates, copied): `propose` (rule proposals on branches, gated, queued) → each rule rejects
//! the held-out failing programs of its bucket (`evolution/evidence/heldout-bundle`, never mined
//! with the bundle) → `accept` merges one, and the merged rule rejects those programs through the
//! repository's rules before compilation (so does the rule learned from part of a wrong-answer
//! bucket, TMA loads that fill half a shared-memory stage) → `reject` stops another bucket from being proposed
//! again (until new evidence arrives, here a real build failure recorded by the harness) → a
//! proposal whose rule would reject an accepted corpus program fails its corpus gate at `accept`
//! (main gained that program since) and the report names the case and why.

#[path = "propose_fixture.rs"]
mod fixture;

use std::path::{Path, PathBuf};

use cake_evolve::mine::mine_report;
use cake_evolve::queue::{self, Kind, ProposeOptions, Status};
use cake_evolve::review::{self, Accepted};
use cake_evolve::store::EvidenceStore;
use cake_merge_gates::GateOptions;
use fixture::*;

fn evidence_dir() -> PathBuf {
    checkout().join("evolution/evidence")
}

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

/// A tree holding main's compiler data plus the rule files a proposal's branch adds under
/// `compiler/rules/`.
fn rules_with(repo: &git2::Repository, main_dir: &Path, dst: &Path, r: &queue::Record) -> PathBuf {
    copy_dir(&main_dir.join("compiler"), &dst.join("compiler"), &[]);
    let base = git2::Oid::from_str(&r.base).unwrap();
    let head = git2::Oid::from_str(&r.commit).unwrap();
    for f in cake_evolve::git::diff(repo, base, head).unwrap() {
        if f.path.starts_with("compiler/rules/") {
            let p = dst.join(&f.path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, cake_evolve::git::read_text(repo, head, &f.path).unwrap().unwrap()).unwrap();
        }
    }
    dst.to_path_buf()
}

/// The name a program's `kernel` line gives it.
fn kernel_name(source: &str) -> String {
    source.lines().find_map(|l| l.trim().strip_prefix("kernel ")).and_then(|r| r.split_whitespace().next()).unwrap_or_default().to_string()
}

/// A stored program of `store_dir` by its kernel's name, as (sha256, source).
fn stored_program(store_dir: &Path, kernel: &str) -> (String, String) {
    let store = EvidenceStore::open(store_dir).unwrap();
    mine_report(&store)
        .buckets
        .iter()
        .flat_map(|b| b.program_hashes.clone())
        .find_map(|h| store.program(&h).unwrap().filter(|src| kernel_name(src) == kernel).map(|src| (h, src)))
        .unwrap_or_else(|| panic!("`{kernel}` is a program of {}", store_dir.display()))
}

#[test]
fn propose_accept_reject_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let repo_dir = tmp.path().join("repo");
    let evidence = tmp.path().join("evidence");
    let repo = make_repo(&repo_dir);
    let main_before = repo.head().unwrap().peel_to_commit().unwrap().id();
    // The committed bundle, copied: the test adds evidence to it later.
    copy_dir(&evidence_dir().join("bundle"), &evidence, &[]);

    // ── propose ──
    let o = opts(&repo_dir, &evidence);
    let summary = queue::propose(&o).unwrap();
    let qdir = repo_dir.join("proposals");
    let records = queue::load_all(&qdir).unwrap();
    let rules: Vec<&queue::Record> = records.iter().filter(|r| r.kind == Kind::Rule).collect();
    let table: String = summary.outcomes.iter().map(|o| format!("{} {} {:?} {}\n", o.bucket, o.what, o.proposal, o.detail)).collect();
    println!("propose:\n{table}");
    assert!(!rules.is_empty(), "a rule proposal:\n{table}");
    for r in &rules {
        assert_eq!(r.status, Status::Queued);
        assert!(r.branch.starts_with(&format!("evolve/rule/{}-", r.id)), "{}", r.branch);
        let head = cake_evolve::git::proposal_commit(&repo, &r.branch).expect("the branch exists");
        assert_eq!(head.to_string(), r.commit);
        assert_eq!(r.base, main_before.to_string());
        let d = r.rule.as_ref().unwrap();
        // No memorized forms: no blacklist, and every constant traced to its source (shown).
        assert!(!d.require.contains("!=") && d.when.as_deref().is_none_or(|w| w.trim_end().ends_with("!= 0") || !w.contains("!=")), "{d:?}");
        let shown = review::show(&repo_dir, r, false).unwrap();
        for c in &d.constants {
            assert!(shown.contains(&format!("constant {}: {}", c.value, c.describe())), "{shown}");
        }
        // The generalization gate ran; a proposal it fails is queued with failed gates and
        // `show` lists every reason.
        let g = r.gate_report().get("generalization").cloned().unwrap_or_else(|| panic!("{} has a generalization gate: {}", r.id, r.gate_report().table()));
        if g.status == cake_merge_gates::GateStatus::Fail {
            assert_eq!(r.gates_passed, Some(false));
            assert!(!g.details.is_empty() && g.details.iter().all(|line| shown.contains(line.as_str())), "{shown}");
        } else {
            assert_eq!(r.gates_passed, Some(true), "{} gates:\n{}", r.id, r.gate_report().table());
        }
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

    // The three classes the lowering used to refuse behind the verifier's back (an alignment
    // over 1024, a cp.async row stride not provably 16-byte aligned, shared memory that fits
    // the regions but not the derived mbarriers and base slack) are the verifier's own findings
    // now that every stage reads one layout: nothing is left to learn, and propose says so.
    let rule_for = |signature: &str| -> queue::Record {
        rules.iter().find(|r| r.signature.contains(signature)).map(|r| (*r).clone()).unwrap_or_else(|| panic!("a rule proposal for `{signature}`:\n{table}"))
    };
    for code in ["V201", "V216", "V223"] {
        assert!(
            summary.outcomes.iter().any(|o| o.proposal.is_none() && o.detail.contains(&format!("the verifier already rejects every program of the bucket ({code}"))),
            "the bucket the verifier's {code} now covers is skipped:\n{table}"
        );
    }
    let store = EvidenceStore::open(&evidence).unwrap();

    // A wrong-answer bucket no predicate separates as a whole: two of its programs load TMA
    // boxes that fill half of a shared-memory stage (stale data for the rest), the third maps an
    // operand wrongly, which no static fact shows. The rule explains the largest separable part —
    // the two half-filled ones — says which program it leaves unexplained, and commits only the
    // explained ones as negative cases.
    let half = rule_for("run/mismatch: matmul_abt: rows");
    let hd = half.rule.as_ref().unwrap();
    assert_eq!(hd.applies_to, "smem", "{hd:?}");
    assert!(hd.require.contains("tma_fill_bytes") && hd.require.contains("stage_bytes"), "{hd:?}");
    let names = |hashes: &[String]| -> Vec<String> {
        let mut v: Vec<String> = hashes.iter().map(|h| kernel_name(&store.program(h).unwrap().unwrap())).collect();
        v.sort();
        v
    };
    assert_eq!(names(&hd.failing_programs), ["box_gemm_a64_half", "box_gemm_b128_half"]);
    assert_eq!(names(&hd.unexplained_programs), ["map_gemm_operand_rows"]);
    assert_eq!(half.programs.len(), 3, "the bucket has the three programs");
    assert!(half.notes.iter().any(|n| n.contains("not explained") && n.contains("map_gemm_operand_rows")), "{:?}", half.notes);
    let head = cake_evolve::git::branch_target(&repo, &half.branch).unwrap();
    let negatives: Vec<String> = cake_evolve::git::diff(&repo, main_before, head)
        .unwrap()
        .into_iter()
        .filter(|f| f.path.starts_with(&format!("corpus/verifier-negative/{}-", hd.code)) && f.path.ends_with(".cake"))
        .map(|f| kernel_name(&cake_evolve::git::read_text(&repo, head, &f.path).unwrap().unwrap()))
        .collect();
    assert_eq!(negatives.len(), 2, "{negatives:?}");
    assert!(negatives.iter().all(|k| k.starts_with("box_")), "only the explained programs are negative cases: {negatives:?}");
    let rule_file = cake_evolve::git::read_text(&repo, head, &format!("compiler/rules/{}/{}-{}.toml", hd.category, hd.code, hd.name)).unwrap().unwrap();
    assert!(rule_file.contains("leaves unexplained") && rule_file.contains("map_gemm_operand_rows"), "the rule's doc names the unexplained program:\n{rule_file}");
    // It rejects the half-filled programs it never saw — the held-out GEMM with both boxes
    // shrunk and the held-out k-means with X's shrunk — and the k-means candidate of another
    // bucket (whose wrong mapping companion left that bucket without a rule), today accepted.
    let half_tree = rules_with(&repo, &repo_dir, &tmp.path().join(format!("rules-{}", half.id)), &half);
    let unseen = [
        stored_program(&evidence_dir().join("heldout-bundle"), "box_gemm_ab64_half"),
        stored_program(&evidence_dir().join("heldout-bundle"), "box_kmeans_x64_half"),
        stored_program(&evidence_dir().join("bundle"), "box_kmeans_c64_half"),
    ];
    for (sha, src) in &unseen {
        assert!(check_with_rules_of(&repo_dir, src).is_empty(), "main's verifier (the ablated one) accepts {}", kernel_name(src));
        assert!(check_with_rules_of(&half_tree, src).contains(&hd.code), "{} rejects {} ({sha})", hd.code, kernel_name(src));
    }
    // The wrong mappings are not what it is about.
    for kernel in ["map_gemm_operand_rows", "map_kmeans_index_offset"] {
        let (_, src) = stored_program(&evidence_dir().join("bundle"), kernel);
        assert!(!check_with_rules_of(&half_tree, &src).contains(&hd.code), "{} leaves {kernel} alone", hd.code);
    }

    // ── idempotent: the same evidence proposes nothing new ──
    let again = queue::propose(&o).unwrap();
    assert!(again.proposed().is_empty(), "{:?}", again.outcomes);
    let records2 = queue::load_all(&qdir).unwrap();
    assert_eq!(records2.len(), records.len());
    for r in &records2 {
        assert_eq!(Some(r), records.iter().find(|x| x.id == r.id), "record {} unchanged", r.id);
    }

    // ── show ──
    let shown = review::show(&repo_dir, &half, true).unwrap();
    assert!(shown.contains(&hd.require) && shown.contains("corpus") && shown.contains("+++ b/compiler/rules/"), "{shown}");

    // ── accept the half-fill rule (gates re-run on main): the merged rule rejects the
    // half-filled programs it never saw through the repository's own rules ──
    let accepted = review::accept(&repo_dir, &half.id, "reviewed: a TMA load must fill the stage wgmma reads", None, GateOptions::static_only()).unwrap();
    assert!(matches!(accepted, Accepted::Merged { .. }), "accept failed: {accepted:?}");
    for (sha, src) in &unseen {
        let codes = check_with_rules_of(&repo_dir, src);
        assert!(codes.contains(&hd.code), "the merged {} rejects {} ({sha}; got {codes:?})", hd.code, kernel_name(src));
    }
    // The accepted rule takes effect without a rebuild: `cake check` run in the checkout verifies
    // with the checkout's `compiler/rules/` (cake::rule_source), not the set built into `cake`
    // (which has no V6xx rule and, unlike this fixture's main, has V325).
    let active = cake::rule_source::ActiveRules::resolve_from(None, &repo_dir).unwrap();
    assert_eq!(active.origin, cake::rule_source::RulesOrigin::Checkout(std::fs::canonicalize(&repo_dir).unwrap()), "{}", active.describe());
    assert!(active.set.get(&hd.code).is_some() && cake::verify::RuleSet::builtin().get(&hd.code).is_none(), "{}", active.describe());
    for (sha, src) in &unseen {
        let out = cake::check::check_source_with(src, &active.set);
        assert!(out.diagnostics.iter().any(|d| d.is_error() && d.code == hd.code), "`cake check` in the checkout rejects {} ({sha}) with {}", kernel_name(src), hd.code);
    }
}
