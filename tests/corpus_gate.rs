//! The corpus gate (`cake corpus gate`), run the way CI and a compiler change are judged.
//!
//! - `static_tier_matches_the_baseline`, `needs_toolchain_compile_tier_matches_the_baseline`:
//!   the static and compile tiers of the whole corpus, classified against the committed
//!   `corpus/results/baseline.json`; any regression (or a new case that fails) fails the test,
//!   listing the cases. The compile tier needs the CUDA toolchain: `scripts/test.sh` leaves that
//!   test out where it is absent (`CAKE_SKIP_TOOLCHAIN=1`), and run without it, it fails.
//! - `a_flipped_verifier_rule_fails_the_gate`: the must-show demonstration — the verifier's rule
//!   set with one rule's predicate negated, loaded from a directory at run time, makes the gate
//!   exit non-zero and list the regressed cases.
//! - shards merge into the full run; `--bless` rewrites expectations in place, keeping comments.
//! - `every_workload_fits_its_program`: without a GPU, every case's `[workload]` validates against
//!   its program (oracle roles, dtypes, shapes and `multiple_of`) and its TMA tensor maps meet the
//!   driver's limits at every workload shape — what the gpu tier would otherwise find on the H200.

use std::fs;
use std::path::{Path, PathBuf};

use cake::corpus::results::{GateResults, Status};
use cake::corpus::run::{self, GateRequest, MergeRequest};
use cake::corpus::Tier;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is inside the repository").to_path_buf()
}

/// A fresh scratch directory under the target directory.
fn scratch(name: &str) -> PathBuf {
    let base = option_env!("CARGO_TARGET_TMPDIR").map_or_else(std::env::temp_dir, PathBuf::from);
    let dir = base.join(format!("corpus-gate-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

/// `cake corpus gate --root ROOT --tier static -o OUT --report REPORT`, changed by `edit`, in
/// process; 1 when the gate fails (a regression, or without a baseline any failure), as the CLI exits.
fn gate(root: &Path, tier: Tier, out: &Path, report: &Path, edit: impl FnOnce(&mut GateRequest)) -> u8 {
    let mut req = GateRequest {
        root: Some(root.to_path_buf()),
        tiers: vec![tier],
        out: out.to_path_buf(),
        report: report.to_path_buf(),
        ..GateRequest::default()
    };
    edit(&mut req);
    u8::from(run::gate(&req).expect("the gate ran").is_failure())
}

/// Run the gate over the whole corpus for `tier`, classified against the committed baseline;
/// fails the test on any regression. Returns the results.
fn tier_matches_the_baseline(tier: Tier) -> GateResults {
    let root = repo().join("corpus");
    let baseline = root.join("results/baseline.json");
    let dir = scratch(tier.as_str());
    let (out, report) = (dir.join("results.json"), dir.join("report.md"));
    let code = gate(&root, tier, &out, &report, |r| r.baseline = Some(baseline.clone()));
    let results = GateResults::read(&out).expect("the gate wrote its results");
    let count = |st: Status| results.results.iter().filter(|r| r.status == st).count();
    println!(
        "corpus gate: {tier} {} pass / {} fail / {} skipped; report: {}",
        count(Status::Pass),
        count(Status::Fail) + count(Status::Error),
        count(Status::Skipped),
        report.display()
    );
    let md = fs::read_to_string(&report).unwrap_or_default();
    // The per-family figure (cake-plot) beside the report, embedded in it, with every family.
    let svg = fs::read_to_string(dir.join("report-families.svg")).expect("the gate drew report-families.svg beside report.md");
    assert!(md.contains("![results per family](report-families.svg)"), "the report embeds its figure:\n{md}");
    let families: std::collections::BTreeSet<&str> = results.results.iter().map(|r| r.family.as_str()).collect();
    assert!(svg.starts_with("<svg") && families.iter().all(|f| svg.contains(&format!("\n{f}\n"))), "every family labels a bar group");
    assert_eq!(
        code, 0,
        "the corpus gate found regressions against corpus/results/baseline.json (the lines above list them; full report below).\n\
         If a change is intended, re-bless the cases (`cake corpus gate --bless ...`) or regenerate the baseline:\n\
         `cargo run -p cake -- corpus gate --tier static --tier compile --no-timings -o corpus/results/baseline.json`\n\n{md}"
    );
    results
}

#[test]
fn static_tier_matches_the_baseline() {
    let results = tier_matches_the_baseline(Tier::Static);
    assert!(results.results.iter().all(|r| r.tier == Tier::Static));
}

#[test]
fn needs_toolchain_compile_tier_matches_the_baseline() {
    let results = tier_matches_the_baseline(Tier::Compile);
    let skipped: Vec<_> = results.results.iter().filter(|r| r.tier == Tier::Compile && r.status == Status::Skipped).collect();
    assert!(skipped.is_empty(), "the compile tier needs the CUDA toolchain; skipped here: {}", skipped[0].reason);
}

/// Copy a directory tree.
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            copy_tree(&p, &to.join(e.file_name()));
        } else {
            fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// Find the rule file of `code` under a rules tree.
fn rule_file(dir: &Path, code: &str) -> Option<PathBuf> {
    for e in fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(f) = rule_file(&p, code) {
                return Some(f);
            }
        } else if p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&format!("{code}-")) && n.ends_with(".toml")) {
            return Some(p);
        }
    }
    None
}

#[test]
fn a_flipped_verifier_rule_fails_the_gate() {
    let root = repo().join("corpus");
    let dir = scratch("flip");
    // The baseline: the static tier with the built-in rules.
    let base = dir.join("base.json");
    gate(&root, Tier::Static, &base, &dir.join("base.md"), |_| {});
    let baseline = GateResults::read(&base).unwrap();

    // The broken change: V201 (shared memory over the target's capacity) with its predicate
    // negated, in a copy of the rule set loaded at run time.
    let rules = dir.join("rules");
    copy_tree(&repo().join("compiler/rules"), &rules);
    let file = rule_file(&rules, "V201").expect("compiler/rules has rule V201");
    let text = fs::read_to_string(&file).unwrap();
    let (before, after) = text.split_once("\nrequire = \"").expect("V201 has a `require` predicate");
    let (pred, rest) = after.split_once("\"\n").unwrap();
    fs::write(&file, format!("{before}\nrequire = \"!({pred})\"\n{rest}")).unwrap();

    let (out, report) = (dir.join("flipped.json"), dir.join("flipped.md"));
    let code = gate(&root, Tier::Static, &out, &report, |r| {
        r.rules = Some(rules.clone());
        r.baseline = Some(base.clone());
    });
    assert_eq!(code, 1, "a flipped rule must make the gate exit 1");

    let flipped = GateResults::read(&out).unwrap();
    let was_pass = |id: &str| baseline.results.iter().any(|r| r.id == id && r.tier == Tier::Static && r.status == Status::Pass);
    let regressed: Vec<&str> = flipped.results.iter().filter(|r| r.status.is_failure() && was_pass(&r.id)).map(|r| r.id.as_str()).collect();
    // Every accepted program now "needs more shared memory than the target has".
    let accepted_before =
        baseline.results.iter().filter(|r| r.status == Status::Pass && r.observed.verdict == Some(cake::corpus::Verdict::Accept)).count();
    assert!(accepted_before >= 150, "the corpus has at least 150 accepted programs, found {accepted_before}");
    assert!(regressed.len() >= accepted_before, "every accepted program regresses: {} of {accepted_before}", regressed.len());
    for id in ["gemm-sm90-ws/bf16-128x256-s3-p", "kmeans-assign/d128-128x128-s4-p", "attention-fwd/bf16-hd128-q128-s2"] {
        assert!(regressed.contains(&id), "{id} must regress");
    }
    let md = fs::read_to_string(&report).unwrap();
    assert!(md.contains(&format!("## Regressed ({})", regressed.len())), "the report lists the regressions:\n{md}");
    assert!(md.contains("`gemm-sm90-ws/bf16-128x256-s3-p` | static | pass | fail |"), "{md}");
    assert!(md.contains("**Verdict: FAIL**"));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn shards_merge_into_the_full_run() {
    let root = repo().join("corpus");
    let dir = scratch("shards");
    let full = dir.join("full.json");
    gate(&root, Tier::Static, &full, &dir.join("full.md"), |_| {});
    let mut parts = Vec::new();
    for i in 1..=3 {
        let p = dir.join(format!("shard{i}.json"));
        gate(&root, Tier::Static, &p, &dir.join("s.md"), |r| r.selection.shard = Some((i, 3)));
        parts.push(p);
    }
    let merged = dir.join("merged.json");
    let req = MergeRequest { inputs: parts, out: merged.clone(), baseline: Some(full.clone()), report: None, root: None };
    assert!(!run::merge(&req).expect("the shards merge").is_failure(), "the merged shards match the full run");
    let (a, b) = (GateResults::read(&full).unwrap(), GateResults::read(&merged).unwrap());
    let key = |r: &GateResults| r.results.iter().map(|x| (x.id.clone(), x.tier, x.status)).collect::<Vec<_>>();
    assert_eq!(key(&a), key(&b));
    assert!(a.results.len() > 150);
    let _ = fs::remove_dir_all(&dir);
}

/// A run of every family merged with a run of some families covers every family (no list);
/// runs of some families merge into the union of their lists.
#[test]
fn merging_a_full_run_keeps_it_full() {
    let run = |families: &[&str]| {
        let mut r = GateResults::new(Vec::new());
        r.families = families.iter().map(|f| f.to_string()).collect();
        r
    };
    let merged = GateResults::merge(vec![run(&[]), run(&["elementwise"])]).unwrap();
    assert!(merged.families.is_empty(), "{:?}", merged.families);
    let merged = GateResults::merge(vec![run(&["softmax"]), run(&["elementwise", "softmax"])]).unwrap();
    assert_eq!(merged.families, ["softmax", "elementwise"]);
}

#[test]
fn bless_rewrites_expectations_in_place() {
    let dir = scratch("bless");
    let root = dir.join("corpus");
    // A plain case whose expected finding is wrong, and a templated family with a wrong verdict.
    let fam = root.join("demo");
    fs::create_dir_all(&fam).unwrap();
    fs::write(fam.join("family.toml"), "description = \"demo\"\n").unwrap();
    let program = "kernel k target sm_90a\n\ndim M multiple_of 64\n\nin A: f32[M]\nout B: f32[M]\n\ngrid tiles[m = M / 64]\n\nrole w: warp 0\n\non w {\n    for t in tiles {\n        store(B[t.m * 64 :+ 64], A[t.m * 64 :+ 64] + undefined_name)\n    }\n}\n";
    fs::write(fam.join("bad.cake"), program).unwrap();
    let manifest = "# why this case exists\nprogram = \"bad.cake\"\ntarget = \"sm_90a\"\ntiers = [\"static\"]\n\n[expect]\nverdict = \"reject\" # keep me\nfindings = [{ code = \"E9999\", line = 1, column = 1 }]\n";
    fs::write(fam.join("bad.toml"), manifest).unwrap();

    // A templated family: instance `bad` expands to a program the type checker rejects, but the
    // family default expects it to be accepted.
    let tf = root.join("tmpl");
    fs::create_dir_all(&tf).unwrap();
    fs::write(tf.join("t.cake.tmpl"), program.replace("undefined_name", "{{RHS}}")).unwrap();
    let family = "description = \"demo template\"\ntemplate = \"t.cake.tmpl\"\n# defaults\ntarget = \"sm_90a\"\ntiers = [\"static\"]\n\n[[instance]]\nid = \"good\"\nvars = { RHS = \"1.0\" }\n\n[[instance]]\nid = \"bad\" # the broken one\nvars = { RHS = \"nope\" }\n";
    fs::write(tf.join("family.toml"), family).unwrap();

    let code = gate(&root, Tier::Static, &dir.join("r.json"), &dir.join("r.md"), |_| {});
    assert_eq!(code, 1, "the wrong expectation fails");
    let code = gate(&root, Tier::Static, &dir.join("r.json"), &dir.join("r.md"), |r| r.bless = true);
    assert_eq!(code, 0, "after --bless the run passes");
    let blessed = fs::read_to_string(fam.join("bad.toml")).unwrap();
    assert!(blessed.starts_with("# why this case exists\n"), "comments stay:\n{blessed}");
    assert!(blessed.contains("verdict = \"reject\" # keep me"), "untouched keys stay:\n{blessed}");
    assert!(!blessed.contains("E9999") && blessed.contains("findings = [ { code = \"E0"), "{blessed}");
    let fam = fs::read_to_string(tf.join("family.toml")).unwrap();
    assert!(fam.contains("id = \"bad\" # the broken one"), "{fam}");
    let (good, bad) = fam.split_once("id = \"bad\"").unwrap();
    assert!(!good.contains("expect"), "the passing instance is untouched:\n{fam}");
    assert!(
        bad.contains("expect = { verdict = \"reject\", findings = [ { code = \"E0"),
        "the instance's own expectation is written:\n{fam}"
    );
    let code = gate(&root, Tier::Static, &dir.join("r.json"), &dir.join("r.md"), |_| {});
    assert_eq!(code, 0, "the blessed expectation holds");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn every_workload_fits_its_program() {
    use cake::runtime::workload::{OracleName, WorkloadSpec};
    let corpus = cake::corpus::Corpus::load(repo().join("corpus")).expect("the corpus loads");
    assert!(corpus.errors.is_empty(), "{:?}", corpus.errors);
    let mut checked = std::collections::BTreeMap::<String, (usize, usize)>::new();
    for case in &corpus.cases {
        let gpu = case.manifest.tiers.contains(&Tier::Gpu);
        let exact = match case.family.as_str() {
            "tma-copy" => Some(OracleName::Copy),
            "tma-transpose" => Some(OracleName::Transpose),
            _ => None,
        };
        let Some(w) = &case.manifest.workload else {
            assert!(!gpu, "{}: the gpu tier without a workload", case.id);
            assert!(exact.is_none(), "{}: every copy and transpose case has a workload", case.id);
            continue;
        };
        let spec: WorkloadSpec = toml::Value::Table(w.clone()).try_into().unwrap_or_else(|e| panic!("{}: {e}", case.id));
        let checked_src = cake::check::check_source(&case.source);
        let module = checked_src.module.as_ref().unwrap_or_else(|| panic!("{}: no module", case.id));
        spec.validate(module).unwrap_or_else(|e| panic!("{}: the workload does not fit the program: {e}", case.id));
        let v = checked_src.validated.as_ref().unwrap_or_else(|| panic!("{}: the program does not verify", case.id));
        let launch = cake::lower::lower(v).unwrap_or_else(|e| panic!("{}: {e}", case.id)).launch;
        for shape in spec.shapes.iter().chain(std::iter::once(&spec.headline)) {
            let maps = cake::runtime::job::concrete_tensor_maps(&launch, shape).unwrap_or_else(|e| panic!("{} at {shape:?}: {e:?}", case.id));
            for m in maps {
                // cudaMalloc returns 256-byte aligned pointers.
                m.validate(0x7f00_0000_0000).unwrap_or_else(|e| panic!("{} at {shape:?}: {e:?}", case.id));
            }
        }
        let n = checked.entry(case.family.clone()).or_default();
        n.0 += 1;
        n.1 += usize::from(gpu);
        if let Some(o) = exact {
            assert_eq!(spec.oracle, o, "{}", case.id);
            assert_eq!(gpu, case.manifest.target == "sm_90a", "{}: the gpu tier is for the sm_90a instances (the H200's)", case.id);
        }
    }
    for family in ["tma-copy", "tma-transpose", "gemm-sm90-ws", "kmeans-assign", "gemm-batched", "gemm-grouped", "attention-fwd", "knn-topk", "kmeans-update"] {
        assert!(checked.get(family).is_some_and(|n| n.1 > 0), "{family}: no gpu-tier case checked: {checked:?}");
    }
    println!("workloads checked (cases, of which gpu tier): {checked:?}");
}

/// Committed results and reports hold repository-relative paths only: no path of the machine
/// that produced them (`/work/…`, `/root/…`, `/home/…`, `/tmp/…`).
#[test]
fn committed_results_hold_no_absolute_paths() {
    let root = repo();
    let mut files = Vec::new();
    for dir in ["corpus/results", "calibration", "benchmarks", "evolution/evidence"] {
        let mut stack = vec![root.join(dir)];
        while let Some(d) = stack.pop() {
            let Ok(rd) = fs::read_dir(&d) else { continue };
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "json" || x == "md" || x == "toml") {
                    files.push(p);
                }
            }
        }
    }
    assert!(files.len() > 10, "found the committed results: {files:?}");
    let mut bad = Vec::new();
    for f in &files {
        let text = fs::read_to_string(f).unwrap_or_default();
        for prefix in ["/work/", "/root/", "/home/", "/tmp/"] {
            if let Some(i) = text.find(prefix) {
                let line = text[..i].matches('\n').count() + 1;
                bad.push(format!("{}:{line}: `{prefix}…`", f.strip_prefix(&root).unwrap_or(f).display()));
            }
        }
    }
    assert!(bad.is_empty(), "absolute paths in committed results:\n{}", bad.join("\n"));
}
