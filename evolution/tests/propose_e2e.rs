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

/// The held-out programs whose failures fall in bucket `id` (mined from the held-out store, which
/// the engine never saw), as (sha256, source).
fn heldout_of(id: &str) -> Vec<(String, String)> {
    let store = EvidenceStore::open(evidence_dir().join("heldout-bundle")).unwrap();
    let report = mine_report(&store);
    let Some(b) = report.buckets.iter().find(|b| b.id == id) else { return Vec::new() };
    b.program_hashes.iter().map(|h| (h.clone(), store.program(h).unwrap().expect("the held-out program is stored"))).collect()
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

/// Run `program` through the harness as `scripts/make-evidence.sh` does (`cake run
/// --unsafe-skip-verify`, records into the store's `runs/`), and store the program: the build
/// fails, so no GPU is needed. The new record's id.
fn run_into_store(store_dir: &Path, program: &Path, workload: &Path) -> String {
    use cake::runtime::harness::{self, HarnessError, Mode, Options};
    let opts = Options {
        mode: Mode::Run,
        program: program.to_path_buf(),
        workload: Some(workload.to_path_buf()),
        shapes: Vec::new(),
        dists: Vec::new(),
        timeout: std::time::Duration::from_secs(10),
        unsafe_skip_verify: true,
        evidence: store_dir.to_path_buf(),
        repeats: Some(1),
        warmup: Some(0),
        baseline: None,
        seed: None,
        cublas_check: false,
        arch: None,
        // Nothing to spawn: the build fails before any child would run.
        exe: store_dir.join("no-such-cake"),
        max_timeouts: Some(1),
    };
    let res = harness::run(&opts, &mut |_| {}, &mut |_| {});
    let Err(HarnessError::Build { record: Some(path), .. }) = res else { panic!("the build fails and is recorded: {res:?}") };
    let store = EvidenceStore::open(store_dir).unwrap();
    let out = cake_evolve::import::import_file(&store, cake_evolve::import::ImportKind::Run, &path, &cake_evolve::import::ImportOptions { program: Some(program.to_path_buf()), ..Default::default() }).unwrap();
    out.records.first().expect("the record is in the store").id.clone()
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
    assert!(rules.len() >= 3, "at least 3 rule proposals:\n{table}");
    for r in &rules {
        assert_eq!(r.status, Status::Queued);
        assert!(r.branch.starts_with(&format!("evolve/rule/{}-", r.id)), "{}", r.branch);
        let head = cake_evolve::git::proposal_commit(&repo, &r.branch).expect("the branch exists");
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

    // The three classes the verifier misses and the lowering refuses, each a rule.
    let rule_for = |signature: &str| -> queue::Record {
        rules.iter().find(|r| r.signature.contains(signature)).map(|r| (*r).clone()).unwrap_or_else(|| panic!("a rule proposal for `{signature}`:\n{table}"))
    };
    let align = rule_for("alignment <n> of `<sym>` is not a power of two");
    let stride = rule_for("cp.async needs the row stride");
    let gap = rule_for("shared memory needs <n> bytes");
    assert_eq!(align.rule.as_ref().unwrap().applies_to, "smem");
    assert_eq!(stride.rule.as_ref().unwrap().applies_to, "tensor", "the call's own facts say nothing of the stride: the rule is on the tensor it copies from");

    // Each rule rejects the held-out failing programs of its bucket, which today's rules accept
    // and which the engine never saw.
    let store = EvidenceStore::open(&evidence).unwrap();
    for r in [&align, &stride, &gap] {
        let code = r.rule.as_ref().unwrap().code.clone();
        let held: Vec<(String, String)> = heldout_of(&r.bucket).into_iter().filter(|(_, src)| check_with_rules_of(&checkout(), src).is_empty()).collect();
        assert!(!held.is_empty(), "bucket {} has held-out programs today's verifier accepts", r.bucket);
        let tree = rules_with(&repo, &repo_dir, &tmp.path().join(format!("rules-{}", r.id)), r);
        for (sha, src) in &held {
            assert!(store.program(sha).unwrap().is_none(), "held-out program {sha} is not in the evidence");
            let codes = check_with_rules_of(&tree, src);
            assert!(codes.contains(&code), "{code} of {} rejects held-out {sha} (got {codes:?})", r.id);
        }
    }

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
        assert!(check_with_rules_of(&checkout(), src).is_empty(), "today's verifier accepts {}", kernel_name(src));
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
    let shown = review::show(&repo_dir, &align, true).unwrap();
    assert!(shown.contains(&align.rule.as_ref().unwrap().require) && shown.contains("corpus") && shown.contains("+++ b/compiler/rules/"), "{shown}");

    // ── accept: re-gated on main (unchanged: fast-forward), merged, recorded ──
    let held_align: Vec<(String, String)> = heldout_of(&align.bucket);
    assert!(held_align.len() >= 2, "the align bucket has held-out programs");
    for (sha, src) in &held_align {
        assert!(check_with_rules_of(&repo_dir, src).is_empty(), "before the merge, main's rules accept held-out {sha}");
    }
    let accepted = review::accept(&repo_dir, &align.id, "reviewed: align above 1024 never lowers", None, GateOptions::static_only()).unwrap();
    let Accepted::Merged { commit, how } = accepted else { panic!("accept failed: {accepted:?}") };
    assert_eq!(how, "fast-forward");
    assert_eq!(repo.head().unwrap().peel_to_commit().unwrap().id().to_string(), commit);
    let (_, rec) = queue::find(&qdir, &align.id).unwrap();
    assert_eq!(rec.status, Status::Accepted);
    assert!(rec.review.as_ref().unwrap().note.contains("reviewed"));
    // The working copy (on main, clean) was updated: the rule file is there.
    let d = align.rule.as_ref().unwrap();
    let code = d.code.clone();
    let rule_file = repo_dir.join(format!("compiler/rules/{}/{}-{}.toml", d.category, code, d.name));
    assert!(rule_file.is_file(), "{}", rule_file.display());
    let changelog = std::fs::read_to_string(repo_dir.join("CHANGELOG.md")).unwrap();
    assert!(changelog.contains(&align.changelog), "the CHANGELOG line landed");
    // The merged rule rejects the held-out failing programs of its bucket before compilation,
    // through the repository's own rules.
    for (sha, src) in &held_align {
        let codes = check_with_rules_of(&repo_dir, src);
        assert!(codes.contains(&code), "the merged {code} rejects held-out {sha} (got {codes:?})");
    }

    // ── reject: remembered; the bucket is not proposed again ──
    let r = review::reject(&repo_dir, &stride.id, "the row-stride rule belongs in the lowering's own check").unwrap();
    assert_eq!(r.status, Status::Rejected);
    let third = queue::propose(&o).unwrap();
    let out = third.outcomes.iter().find(|x| x.bucket == stride.bucket).unwrap();
    assert_eq!(out.what, "unchanged", "{out:?}");
    assert!(out.detail.contains("rejected"), "{out:?}");
    assert_eq!(queue::find(&qdir, &stride.id).unwrap().1.status, Status::Rejected);
    assert!(third.proposed().is_empty());

    // ── bors: main gains an accepted corpus program the gap rule would reject; accepting that
    // proposal re-runs the gates on current main, and its corpus gate fails saying which case and
    // why ──
    let gap_code = gap.rule.as_ref().unwrap().code.clone();
    let victim = heldout_of(&gap.bucket)
        .into_iter()
        .map(|(_, src)| src)
        .find(|src| check_with_rules_of(&repo_dir, src).is_empty() && check_with_rules_of(&tmp.path().join(format!("rules-{}", gap.id)), src).contains(&gap_code))
        .expect("a held-out program main accepts and the gap rule rejects");
    let fam = repo_dir.join("corpus/kmeans-extra");
    std::fs::create_dir_all(&fam).unwrap();
    std::fs::write(fam.join("family.toml"), "description = \"kmeans assign variants kept for the static tier (test)\"\n").unwrap();
    std::fs::write(fam.join("big-x.cake"), &victim).unwrap();
    std::fs::write(fam.join("big-x.toml"), "program = \"big-x.cake\"\ntarget = \"sm_90a\"\ntiers = [\"static\"]\n\n[expect]\nverdict = \"accept\"\nfindings = []\n").unwrap();
    commit_all(&repo, "corpus: a larger kmeans x_s tile, accepted");
    let res = review::accept(&repo_dir, &gap.id, "", None, GateOptions::static_only()).unwrap();
    let Accepted::GatesFailed { table: gate_table } = res else { panic!("the gap rule must not merge: {res:?}") };
    println!("accept {} on the grown main:\n{gate_table}", gap.id);
    assert!(gate_table.contains("corpus") && gate_table.contains("kmeans-extra/big-x") && gate_table.contains("regressed") && gate_table.contains(&gap_code), "{gate_table}");
    let (_, rec) = queue::find(&qdir, &gap.id).unwrap();
    assert_eq!(rec.status, Status::Queued, "not merged");
    assert_eq!(rec.gates_passed, Some(false));
    let corpus_gate = rec.gates.iter().find(|g| g.gate == "corpus").unwrap();
    assert!(corpus_gate.details.iter().any(|d| d.contains("kmeans-extra/big-x [static] regressed") && d.contains("expected verdict accept")), "{:?}", corpus_gate.details);
    // main did not move.
    assert!(review::list(&queue::load_all(&qdir).unwrap()).contains(&gap.id));

    // ── new evidence for the rejected bucket brings it back: one more program with a misaligned
    // row stride, run through the harness like the bundle's ──
    let src = std::fs::read_to_string(checkout().join("examples/gemm_bf16_sm80.cake")).unwrap().replacen("dim K multiple_of 64", "dim K multiple_of 12", 1);
    let extra = tmp.path().join("stride_gemm80_k12.cake");
    std::fs::write(&extra, src).unwrap();
    let id = run_into_store(&evidence, &extra, &evidence_dir().join("workloads/gemm_stride.workload.toml"));
    let fourth = queue::propose(&o).unwrap();
    let back = queue::find(&qdir, &stride.id).unwrap().1;
    assert_eq!(back.status, Status::Queued, "re-proposed with the new evidence: {:?}", fourth.outcomes);
    assert!(back.evidence.contains(&id), "the new record is part of the bucket");
    assert_eq!(back.history.len(), 1, "the rejection is kept in the history");
    assert_eq!(back.history[0].action, Status::Rejected);

    // ── accept the half-fill rule on the grown main (a merge commit, gates re-run): the merged
    // rule rejects the half-filled programs it never saw through the repository's own rules ──
    let accepted = review::accept(&repo_dir, &half.id, "reviewed: a TMA load must fill the stage wgmma reads", None, GateOptions::static_only()).unwrap();
    assert!(matches!(accepted, Accepted::Merged { .. }), "accept failed: {accepted:?}");
    for (sha, src) in &unseen {
        let codes = check_with_rules_of(&repo_dir, src);
        assert!(codes.contains(&hd.code), "the merged {} rejects {} ({sha}; got {codes:?})", hd.code, kernel_name(src));
    }
}
