//! Failure reports are external text. A report whose message carries ESC / OSC sequences is
//! printed escaped by `mine`, `propose`, `list` and `show`; its bucket still becomes a rule (the
//! raw control characters once made every candidate rule fail to load, silently); nothing raw
//! reaches the branch's files or commit messages.

#[path = "hardening_support.rs"]
mod support;

use support::*;

const EVIL: &str = "\x1b]0;owned\x07\x1b[2J\x1b]8;;http://evil.invalid\x07click\x1b]8;;\x07\u{9b}31m";

fn has_esc(b: &[u8]) -> bool {
    b.contains(&0x1b) || String::from_utf8_lossy(b).contains('\u{9b}')
}

#[test]
fn control_sequences_from_a_report_never_reach_the_terminal_or_the_branch() {
    let (tmp, repo_dir, evidence) = setup();
    let evil = failure_store(tmp.path(), &evidence, EVIL);
    let ev = evil.to_str().unwrap();

    let m = run(&repo_dir, &["mine", "--store", ev]);
    assert_eq!(m.status.code(), Some(0), "{}", text(&m));
    assert!(!has_esc(&m.stdout) && !has_esc(&m.stderr), "mine prints raw control characters: {:?}", String::from_utf8_lossy(&m.stdout));
    assert!(String::from_utf8_lossy(&m.stdout).contains("\\x1b"), "shown escaped: {}", text(&m));

    let p = run(&repo_dir, &["propose", "--no-gates", "--no-progress", "--evidence", ev]);
    assert_eq!(p.status.code(), Some(0), "{}", text(&p));
    assert!(!has_esc(&p.stdout) && !has_esc(&p.stderr), "propose prints raw control characters: {:?}", String::from_utf8_lossy(&p.stdout));
    let files = record_files(&repo_dir);
    assert!(!files.is_empty(), "the bucket became a rule proposal (not dropped): {}", text(&p));

    let l = run(&repo_dir, &["list"]);
    assert!(!has_esc(&l.stdout) && !has_esc(&l.stderr), "{:?}", String::from_utf8_lossy(&l.stdout));
    let id = files[0].trim_end_matches(".toml");
    let s = run(&repo_dir, &["show", id]);
    assert_eq!(s.status.code(), Some(0), "{}", text(&s));
    assert!(!has_esc(&s.stdout) && !has_esc(&s.stderr), "{:?}", String::from_utf8_lossy(&s.stdout));

    // Every file and commit message on the proposal branches is free of raw sequences.
    let repo = git2::Repository::open(&repo_dir).unwrap();
    for r in repo.references_glob("refs/heads/evolve/*").unwrap().flatten() {
        let mut c = r.peel_to_commit().unwrap();
        loop {
            assert!(!has_esc(c.message_bytes()), "commit {} message: {:?}", c.id(), c.message());
            let tree = c.tree().unwrap();
            tree.walk(git2::TreeWalkMode::PreOrder, |root, e| {
                // Compressed archives (calibration/records/*.tgz) hold 0x1b by chance; text is what a terminal or reviewer reads.
                if let Some(b) = e.to_object(&repo).and_then(|o| o.peel_to_blob()).ok().filter(|b| !b.is_binary()) {
                    assert!(!has_esc(b.content()), "{root}{} on {} holds a raw control sequence", e.name().unwrap_or(""), r.name().unwrap());
                }
                git2::TreeWalkResult::Ok
            })
            .unwrap();
            if c.parent_count() == 0 || c.summary().is_some_and(|s| s.starts_with("Cake data")) {
                break;
            }
            c = c.parent(0).unwrap();
        }
    }
}
