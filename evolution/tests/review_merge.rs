//! `accept` when main has moved (a merge commit, the CHANGELOG line inserted into main's
//! CHANGELOG) and when the working copy on main has uncommitted changes (refused, nothing moves);
//! `list` and `show`.

#[path = "propose_fixture.rs"]
mod fixture;

use std::path::Path;

use cake_evolve::queue::{self, ProposeOptions, Status};
use cake_evolve::review::{self, Accepted};
use cake_merge_gates::GateOptions;
use fixture::*;

fn setup() -> (tempfile::TempDir, std::path::PathBuf, queue::Record) {
    let tmp = tempfile::tempdir().unwrap();
    let repo_dir = tmp.path().join("repo");
    let evidence = tmp.path().join("evidence");
    make_repo(&repo_dir);
    // The committed bundle: its half-filled TMA stages are a class the verifier misses.
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("evidence/bundle"), &evidence, &[]);
    let mut o = ProposeOptions::new(&repo_dir, &evidence);
    o.gate = GateOptions::static_only();
    o.progress = false;
    o.quiet = true;
    o.llm = None;
    let s = queue::propose(&o).unwrap();
    let id = s.proposed().into_iter().next().unwrap_or_else(|| panic!("{:?}", s.outcomes));
    let (_, r) = queue::find(&repo_dir.join("proposals"), &id).unwrap();
    (tmp, repo_dir, r)
}

fn commit_file(repo: &git2::Repository, dir: &Path, path: &str, text: &str, msg: &str) {
    std::fs::write(dir.join(path), text).unwrap();
    let mut index = repo.index().unwrap();
    index.add_path(Path::new(path)).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    let sig = repo.signature().unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, msg, &tree, &[&head]).unwrap();
}

#[test]
fn accept_after_main_moved_makes_a_merge_commit_with_both_changelog_lines() {
    let (_tmp, dir, r) = setup();
    let repo = git2::Repository::open(&dir).unwrap();
    // Someone else lands a change on main, touching the CHANGELOG too.
    let log = std::fs::read_to_string(dir.join("CHANGELOG.md")).unwrap();
    let theirs = cake_evolve::synth::changelog_insert(&log, "- An unrelated change that landed first.");
    commit_file(&repo, &dir, "CHANGELOG.md", &theirs, "unrelated change");
    let before = repo.head().unwrap().peel_to_commit().unwrap().id();

    let out = review::accept(&dir, &r.id, "ok", None, GateOptions::static_only()).unwrap();
    let Accepted::Merged { commit, how } = out else { panic!("{out:?}") };
    assert_eq!(how, "merge commit");
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    assert_eq!(head.id().to_string(), commit);
    let parents: Vec<String> = head.parent_ids().map(|p| p.to_string()).collect();
    assert_eq!(parents, vec![before.to_string(), r.commit.clone()], "main first, then the proposal");
    let log = std::fs::read_to_string(dir.join("CHANGELOG.md")).unwrap();
    assert!(log.contains("- An unrelated change that landed first.") && log.contains(&r.changelog), "{log}");
    let d = r.rule.as_ref().unwrap();
    assert!(dir.join(format!("compiler/rules/{}/{}-{}.toml", d.category, d.code, d.name)).is_file());
    let (_, rec) = queue::find(&dir.join("proposals"), &r.id).unwrap();
    assert_eq!(rec.status, Status::Accepted);
    assert_eq!(rec.review.as_ref().unwrap().how.as_deref(), Some("merge commit"));
    assert!(!rec.review.as_ref().unwrap().gates.is_empty(), "the gates were re-run on current main");
    // Accepting twice merges nothing more: it names the commit already made (a re-run after a killed
    // accept must not fail, issue 15).
    let again = review::accept(&dir, &r.id, "", None, GateOptions::static_only()).unwrap();
    assert_eq!(again, Accepted::Merged { commit: commit.clone(), how: "already accepted".into() });
    assert_eq!(repo.head().unwrap().peel_to_commit().unwrap().id().to_string(), commit, "main did not move");
}

/// Main changed a file the proposal also changes: `accept` names the file in a coded error and
/// merges nothing (issue 15: the conflicting file was not named).
#[test]
fn accept_names_the_file_main_and_the_proposal_both_changed() {
    let (_tmp, dir, r) = setup();
    let repo = git2::Repository::open(&dir).unwrap();
    let d = r.rule.as_ref().unwrap();
    let path = format!("compiler/rules/{}/{}-{}.toml", d.category, d.code, d.name);
    std::fs::create_dir_all(dir.join(&path).parent().unwrap()).unwrap();
    commit_file(&repo, &dir, &path, "# someone else's rule under the same name\n", "a rule file landed first");
    let before = repo.head().unwrap().peel_to_commit().unwrap().id();
    let e = review::accept(&dir, &r.id, "", None, GateOptions::static_only()).unwrap_err();
    assert!(e.contains("Q010") && e.contains(&path) && e.contains("nothing was merged"), "{e}");
    assert_eq!(repo.head().unwrap().peel_to_commit().unwrap().id(), before, "main did not move");
    assert_eq!(queue::find(&dir.join("proposals"), &r.id).unwrap().1.status, Status::Queued);
}

#[test]
fn accept_refuses_a_dirty_working_copy_on_main() {
    let (_tmp, dir, r) = setup();
    let repo = git2::Repository::open(&dir).unwrap();
    let before = repo.head().unwrap().peel_to_commit().unwrap().id();
    std::fs::write(dir.join("CHANGELOG.md"), "# edited but not committed\n").unwrap();
    let e = review::accept(&dir, &r.id, "", None, GateOptions::static_only()).unwrap_err();
    assert!(e.contains("uncommitted changes") && e.contains("CHANGELOG.md") && e.contains("nothing was merged"), "{e}");
    assert_eq!(repo.head().unwrap().peel_to_commit().unwrap().id(), before, "main did not move");
    assert_eq!(std::fs::read_to_string(dir.join("CHANGELOG.md")).unwrap(), "# edited but not committed\n", "the user's edit is kept");
    assert_eq!(queue::find(&dir.join("proposals"), &r.id).unwrap().1.status, Status::Queued);
}

#[test]
fn list_and_show() {
    let (_tmp, dir, r) = setup();
    let all = queue::load_all(&dir.join("proposals")).unwrap();
    let l = review::list(&all);
    assert!(l.contains(&r.id) && l.contains("rule") && l.contains("queued") && l.contains("pass") && l.contains(&r.branch), "{l}");
    let s = review::show(&dir, &r, true).unwrap();
    let d = r.rule.as_ref().unwrap();
    for want in [d.code.as_str(), d.require.as_str(), "evidence", "bucket:", "gates", "corpus", "P8", "--- /dev/null", "+++ b/corpus/verifier-negative/"] {
        assert!(s.contains(want), "show lacks `{want}`:\n{s}");
    }
    // The record file is reviewable TOML with the documented fields.
    let text = std::fs::read_to_string(dir.join("proposals").join(format!("{}.toml", r.id))).unwrap();
    for key in ["id = ", "kind = \"rule\"", "status = \"queued\"", "branch = ", "base = ", "evidence = ", "[rule]", "[[gates]]"] {
        assert!(text.contains(key), "record lacks `{key}`:\n{text}");
    }
}
