//! The evidence store: content addressing, idempotent appends, never rewriting, and coded,
//! skip-with-warning handling of corrupt or unreadable records.

#[path = "support/records.rs"]
mod records;

use std::path::Path;

use cake::runtime::record::{sha256_hex, RunRecord};
use cake_evolve::store::{canonical_json, EvidenceStore, FailureReport, Record, Stage, FAILURE_SCHEMA};

const PROGRAM: &str = "kernel t target sm_90a\n\ndim M multiple_of 128\n\nout C: f32[M]\n";

fn run_record(program_sha: &str, verdict: &str, error: Option<(&str, &str)>, created: u64) -> RunRecord {
    let mut r = records::run_record("t", program_sha, verdict, error, created);
    r.shape = [("M".to_string(), 256)].into();
    r
}

fn failure(program_sha: &str, class: &str) -> FailureReport {
    let mut f = FailureReport::new(program_sha, "sm_90a", Stage::Compile, "ptxas", class, "ptxas error   : something (0x10 bytes)");
    f.extra.insert("b".into(), serde_json::json!(2));
    f.extra.insert("a".into(), serde_json::json!({ "z": 1, "y": [1, 2] }));
    f
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir).map(|rd| rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()).unwrap_or_default();
    v.sort();
    v
}

#[test]
fn append_is_content_addressed_and_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let store = EvidenceStore::open(dir.path().join("ev")).unwrap();
    let prog = store.put_program(PROGRAM).unwrap();
    assert!(prog.canonical && prog.new);

    let f = failure(&prog.sha256, "ptxas.too_much_shared_data");
    let a = store.append_detailed(f.clone()).unwrap();
    assert!(a.new);
    let bytes = std::fs::read(&a.path).unwrap();
    assert_eq!(a.id.as_str(), sha256_hex(&bytes), "the id is the SHA-256 of the stored bytes");
    assert_eq!(a.path.file_name().unwrap().to_str().unwrap(), format!("{}.json", a.id));
    let mtime = std::fs::metadata(&a.path).unwrap().modified().unwrap();

    // Same content: same id, nothing written.
    let b = store.append_detailed(f.clone()).unwrap();
    assert_eq!(a.id, b.id);
    assert!(!b.new);
    assert_eq!(std::fs::metadata(&a.path).unwrap().modified().unwrap(), mtime);
    assert_eq!(files_in(&dir.path().join("ev/failures")).len(), 1);

    // Different content: a second record.
    let c = store.append(failure(&prog.sha256, "ptxas.spill")).unwrap();
    assert_ne!(a.id, c);

    // Run records: the runtime's own bytes (pretty JSON + newline), so either writer gives one id.
    let r = run_record(&prog.sha256, "timeout", Some(("timeout", "no result after 10.0 s (last stage: launch)")), 7);
    let rid = store.append(r.clone()).unwrap();
    let (runtime_path, _) = cake::runtime::record::write_record(dir.path().join("ev").as_path(), &r).unwrap();
    assert_eq!(runtime_path.file_stem().unwrap().to_str().unwrap(), rid.as_str());
    assert_eq!(files_in(&dir.path().join("ev/runs")).len(), 1);

    // Reading back: runs first, then failures, each sorted by id; get by id and by prefix.
    let scan = store.scan();
    assert!(scan.problems.is_empty(), "{:?}", scan.problems);
    assert_eq!(scan.records.len(), 3);
    assert!(matches!(scan.records[0].record, Record::Run(_)));
    let ids: Vec<_> = scan.records[1..].iter().map(|s| s.id.clone()).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted);
    assert_eq!(store.get(a.id.as_str()).unwrap().record, Record::Failure(Box::new(f)));
    assert_eq!(store.get(&a.id.as_str()[..10]).unwrap().id, a.id);
    assert_eq!(store.get("0000000000").unwrap_err().code, "S007");
    assert_eq!(store.get("xyz").unwrap_err().code, "S007");
    assert_eq!(store.program(&prog.sha256).unwrap().as_deref(), Some(PROGRAM));
}

#[test]
fn failure_reports_are_canonical_json() {
    let dir = tempfile::tempdir().unwrap();
    let store = EvidenceStore::open(dir.path()).unwrap();
    let sha = store.put_program(PROGRAM).unwrap().sha256;
    let a = store.append_detailed(failure(&sha, "x")).unwrap();
    let text = std::fs::read_to_string(&a.path).unwrap();
    // Keys sorted at every level, final newline.
    let keys: Vec<&str> = text.lines().filter(|l| l.starts_with("  \"")).map(|l| l.trim().split('"').nth(1).unwrap()).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    assert!(text.contains("\"a\": {\n      \"y\": [\n"), "{text}");
    assert!(text.ends_with("}\n"));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(canonical_json(&v), text);
    assert_eq!(v["schema"], FAILURE_SCHEMA);
}

#[test]
fn programs_are_stored_canonically_with_the_runtimes_hash() {
    let dir = tempfile::tempdir().unwrap();
    let store = EvidenceStore::open(dir.path()).unwrap();
    let messy = "kernel   t target sm_90a\ndim M multiple_of 128\nout C: f32[M]";
    let p = store.put_program(messy).unwrap();
    let file = cake::syntax::parse(messy).unwrap();
    let canonical = cake::syntax::print(&file);
    // The same hash `cake run` puts into `program.sha256` (SHA-256 of the `cake fmt` output).
    assert_eq!(p.sha256, sha256_hex(canonical.as_bytes()));
    assert_eq!(p.name.as_deref(), Some("t"));
    assert_eq!(p.target.as_deref(), Some("sm_90a"));
    // Text that does not parse is kept verbatim.
    let q = store.put_program("kernel ??? nonsense").unwrap();
    assert!(!q.canonical);
    assert_eq!(store.program(&q.sha256).unwrap().as_deref(), Some("kernel ??? nonsense"));
    assert_eq!(store.programs().unwrap().len(), 2);
}

#[test]
fn corrupt_and_unreadable_records_are_coded_warnings_never_lost_or_panics() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ev");
    let store = EvidenceStore::open(&root).unwrap();
    let sha = store.put_program(PROGRAM).unwrap().sha256;
    let good = store.append_detailed(failure(&sha, "good")).unwrap();
    let edited = store.append_detailed(failure(&sha, "edited")).unwrap();
    let run = store.append_detailed(run_record(&sha, "pass", None, 1)).unwrap();

    // Edited after it was written: the bytes no longer hash to the name.
    let mut text = std::fs::read_to_string(&edited.path).unwrap();
    text = text.replace("edited", "EDITED");
    std::fs::write(&edited.path, &text).unwrap();
    // Truncated run record.
    let full = std::fs::read(&run.path).unwrap();
    std::fs::write(&run.path, &full[..full.len() / 2]).unwrap();
    // Not JSON, but correctly named.
    let junk = b"{ not json";
    std::fs::write(root.join("failures").join(format!("{}.json", sha256_hex(junk))), junk).unwrap();
    // Valid JSON of the wrong schema, correctly named.
    let other = b"{\"schema\": \"something-else/1\"}\n";
    std::fs::write(root.join("failures").join(format!("{}.json", sha256_hex(other))), other).unwrap();
    // A stray file and a temporary file (ignored).
    std::fs::write(root.join("failures").join("notes.txt"), b"hello").unwrap();
    std::fs::write(root.join("failures").join(".abc.123.tmp"), b"partial").unwrap();
    // A directory where a record should be.
    std::fs::create_dir(root.join("failures").join(format!("{}.json", "a".repeat(64)))).unwrap();

    let scan = store.scan();
    assert_eq!(scan.records.len(), 1, "only the intact record is read");
    assert_eq!(scan.records[0].id, good.id);
    let mut codes: Vec<(&str, String)> =
        scan.problems.iter().map(|p| (p.code, p.path.file_name().unwrap().to_string_lossy().into_owned())).collect();
    codes.sort();
    let mut want = vec![
        ("S004", format!("{}.json", edited.id)),
        ("S004", format!("{}.json", run.id)),
        ("S003", format!("{}.json", sha256_hex(junk))),
        ("S005", format!("{}.json", sha256_hex(other))),
        ("S005", "notes.txt".to_string()),
        ("S005", format!("{}.json", "a".repeat(64))),
    ];
    want.sort();
    assert_eq!(codes, want);
    for p in &scan.problems {
        let shown = p.to_string();
        assert!(shown.contains(&p.path.display().to_string()), "the warning names the file: {shown}");
    }

    // Nothing was deleted or repaired.
    assert_eq!(std::fs::read_to_string(&edited.path).unwrap(), text);
    assert_eq!(std::fs::read(&run.path).unwrap(), &full[..full.len() / 2]);

    // Appending the original content again does not overwrite the damaged file: S004.
    let again = store.append(failure(&sha, "edited")).unwrap_err();
    assert_eq!(again.code, "S004");
    assert_eq!(std::fs::read_to_string(&edited.path).unwrap(), text);

    // get() on a damaged record is the same coded error.
    assert_eq!(store.get(edited.id.as_str()).unwrap_err().code, "S004");

    // Mining skips them with the same warnings.
    let report = cake_evolve::mine::mine_report(&store);
    assert_eq!(report.records, 1);
    assert_eq!(report.warnings.iter().filter(|w| w.starts_with("warning[S00")).count(), 6);
}

#[test]
fn unusable_store_paths_and_invalid_reports_are_coded() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    assert_eq!(EvidenceStore::open(&file).unwrap_err().code, "S001");

    let store = EvidenceStore::open(dir.path().join("ev")).unwrap();
    let mut bad = failure("not-a-hash", "x");
    assert_eq!(store.append(bad.clone()).unwrap_err().code, "S008");
    bad.program.sha256 = "a".repeat(64);
    bad.error_class = " ".into();
    assert_eq!(store.append(bad.clone()).unwrap_err().code, "S008");
    bad.error_class = "x".into();
    bad.gpu_seconds = Some(f64::NAN);
    assert_eq!(store.append(bad).unwrap_err().code, "S008");
    // Nothing was written by the refused appends.
    assert!(!dir.path().join("ev/failures").exists() || files_in(&dir.path().join("ev/failures")).is_empty());
    // An empty store reads as empty.
    let scan = store.scan();
    assert!(scan.records.is_empty() && scan.problems.is_empty());
}

#[test]
fn concurrent_appends_of_the_same_record_agree() {
    let dir = tempfile::tempdir().unwrap();
    let store = EvidenceStore::open(dir.path()).unwrap();
    let sha = store.put_program(PROGRAM).unwrap().sha256;
    let f = failure(&sha, "race");
    let ids: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8).map(|_| s.spawn(|| store.append_detailed(f.clone()).unwrap())).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(ids.windows(2).all(|w| w[0].id == w[1].id));
    assert_eq!(ids.iter().filter(|a| a.new).count(), 1, "exactly one writer created the file");
    assert_eq!(files_in(&dir.path().join("failures")).len(), 1, "no temporary files left behind");
}

/// Reading a store that is not there is an error naming the path (S009), for the library and for
/// `mine` (which reported 0 buckets and exited 0) and `propose`; writing creates the store.
#[test]
fn a_missing_store_is_an_error_for_readers() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-such-store");
    let e = EvidenceStore::open_existing(&missing).unwrap_err();
    assert_eq!(e.code, "S009");
    assert!(e.to_string().contains("no-such-store"), "{e}");
    let mine = std::process::Command::new(env!("CARGO_BIN_EXE_cake-evolve-compiler"))
        .args(["mine", "--store", missing.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(mine.status.code(), Some(2), "{mine:?}");
    assert!(String::from_utf8_lossy(&mine.stderr).contains("S009"), "{}", String::from_utf8_lossy(&mine.stderr));
    assert!(!missing.exists(), "reading creates nothing");
    // A writer still creates it.
    let store = EvidenceStore::open(&missing).unwrap();
    store.append(failure(&"a".repeat(64), "x")).unwrap();
    assert!(EvidenceStore::open_existing(&missing).is_ok());
}

/// Issue 15: a FIFO named like a record hung every reader, a symlink out of the store was
/// followed silently, and files were read whole. Now each is a coded problem (S010, S011), named
/// and skipped, while the other records are still served.
#[test]
fn fifos_symlinks_and_oversized_files_are_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ev");
    let store = EvidenceStore::open(&root).unwrap();
    let sha = store.put_program(PROGRAM).unwrap().sha256;
    let good = store.append_detailed(failure(&sha, "good")).unwrap();

    // A FIFO under a record's name: opening it for reading would block until a writer came.
    let fifo = root.join("failures").join(format!("{}.json", "b".repeat(64)));
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    // A symlink to a file outside the store, named by that file's hash (so only following it
    // would tell): its content must not be read.
    let outside = dir.path().join("outside.json");
    let secret = failure(&sha, "outside");
    let bytes = canonical_json(&serde_json::to_value(&secret).unwrap()).into_bytes();
    std::fs::write(&outside, &bytes).unwrap();
    let link = root.join("failures").join(format!("{}.json", sha256_hex(&bytes)));
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    // A program symlinked out of the store.
    let prog_link = root.join("programs").join(format!("{}.cake", "c".repeat(64)));
    std::os::unix::fs::symlink(&outside, &prog_link).unwrap();

    let t0 = std::time::Instant::now();
    let scan = store.scan();
    assert!(t0.elapsed() < std::time::Duration::from_secs(5), "the FIFO did not block the scan");
    assert_eq!(scan.records.len(), 1);
    assert_eq!(scan.records[0].id, good.id);
    let mut codes: Vec<(&str, String)> = scan.problems.iter().map(|p| (p.code, p.path.file_name().unwrap().to_string_lossy().into_owned())).collect();
    codes.sort();
    let mut want = vec![("S010", format!("{}.json", "b".repeat(64))), ("S010", format!("{}.json", sha256_hex(&bytes)))];
    want.sort();
    assert_eq!(codes, want, "{:?}", scan.problems);
    assert_eq!(store.program(&"c".repeat(64)).unwrap_err().code, "S010");

    // A record folder that is a symlink (runs/ → somewhere else) is not listed through.
    std::fs::remove_dir_all(root.join("runs")).ok();
    std::os::unix::fs::symlink(dir.path(), root.join("runs")).unwrap();
    assert!(store.scan().problems.iter().any(|p| p.code == "S010" && p.path.ends_with("runs")), "{:?}", store.scan().problems);

    // A file past its kind's read limit is not read: a program larger than the limit.
    let big = "x".repeat(cake::store::MAX_PROGRAM_BYTES as usize + 1);
    let big_path = root.join("programs").join(format!("{}.cake", sha256_hex(big.as_bytes())));
    std::fs::write(&big_path, &big).unwrap();
    assert_eq!(store.program(&sha256_hex(big.as_bytes())).unwrap_err().code, "S011");
}
