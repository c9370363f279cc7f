//! Git through git2, without touching the user's working copy: proposal commits are built from
//! the base commit's tree plus the new files in an in-memory index and written to a branch ref;
//! gates read a commit by exporting its tree into a temporary folder; `accept` merges by building
//! the merged tree the same way (the proposal's changes re-applied on current main, as bors
//! does) and moves the main branch — updating the working copy only when it is on main and clean.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use git2::{Commit, ErrorCode, Index, IndexEntry, IndexTime, ObjectType, Oid, Repository, Signature, Status, StatusOptions, Time, TreeWalkMode, TreeWalkResult};

use cake_merge_gates::{Change, ChangedPath};

use crate::sanitize;

pub type Result<T> = std::result::Result<T, String>;

fn e(err: git2::Error) -> String {
    err.message().to_string()
}

/// Open the repository at (or above) `path`.
pub fn open(path: &Path) -> Result<Repository> {
    Repository::discover(path).map_err(|err| format!("{}: not inside a git repository ({})", path.display(), e(err)))
}

/// The working directory of a non-bare repository.
pub fn workdir(repo: &Repository) -> Result<PathBuf> {
    repo.workdir().map(Path::to_path_buf).ok_or_else(|| "the repository is bare: cake-evolve-compiler needs a working directory for proposals/".to_string())
}

/// The main branch: `requested`, else `main`, else `master`, else the branch HEAD points at.
pub fn main_branch(repo: &Repository, requested: Option<&str>) -> Result<String> {
    if let Some(r) = requested {
        return repo.find_branch(r, git2::BranchType::Local).map(|_| r.to_string()).map_err(|_| format!("no local branch `{r}`"));
    }
    for name in ["main", "master"] {
        if repo.find_branch(name, git2::BranchType::Local).is_ok() {
            return Ok(name.to_string());
        }
    }
    let head = repo.head().map_err(e)?;
    head.shorthand().map(str::to_string).ok_or_else(|| "HEAD is not on a branch; name the main branch with --main".to_string())
}

/// The commit a local branch points at.
pub fn branch_commit(repo: &Repository, branch: &str) -> Result<Oid> {
    let r = repo.find_reference(&format!("refs/heads/{branch}")).map_err(|err| format!("branch `{branch}`: {}", e(err)))?;
    r.peel_to_commit().map(|c| c.id()).map_err(e)
}

/// Whether a local branch exists, and where it points.
pub fn branch_target(repo: &Repository, branch: &str) -> Option<Oid> {
    repo.find_reference(&format!("refs/heads/{branch}")).ok().and_then(|r| r.peel_to_commit().ok()).map(|c| c.id())
}

/// Every blob of a commit's tree: path → (mode, blob id).
pub fn tree_files(repo: &Repository, commit: Oid) -> Result<BTreeMap<String, (i32, Oid)>> {
    let tree = repo.find_commit(commit).and_then(|c| c.tree()).map_err(e)?;
    let mut out = BTreeMap::new();
    tree.walk(TreeWalkMode::PreOrder, |root, entry| {
        if entry.kind() == Some(ObjectType::Blob) {
            if let Some(name) = entry.name() {
                out.insert(format!("{root}{name}"), (entry.filemode(), entry.id()));
            }
        }
        TreeWalkResult::Ok
    })
    .map_err(e)?;
    Ok(out)
}

/// A file's contents at a commit (`None` when absent).
pub fn read_file(repo: &Repository, commit: Oid, path: &str) -> Result<Option<Vec<u8>>> {
    let tree = repo.find_commit(commit).and_then(|c| c.tree()).map_err(e)?;
    match tree.get_path(Path::new(path)) {
        Ok(entry) => {
            let blob = repo.find_blob(entry.id()).map_err(e)?;
            Ok(Some(blob.content().to_vec()))
        }
        Err(err) if err.code() == ErrorCode::NotFound => Ok(None),
        Err(err) => Err(e(err)),
    }
}

pub fn read_text(repo: &Repository, commit: Oid, path: &str) -> Result<Option<String>> {
    Ok(read_file(repo, commit, path)?.map(|b| String::from_utf8_lossy(&b).into_owned()))
}

/// The deterministic identity proposal commits are made with: the same evidence on the same base
/// gives the same commit id (the time is the base commit's).
pub fn engine_signature(repo: &Repository, base: Oid) -> Result<Signature<'static>> {
    let t = repo.find_commit(base).map_err(e)?.committer().when();
    Signature::new("cake-evolve-compiler", "cake-evolve@localhost", &Time::new(t.seconds(), t.offset_minutes())).map_err(e)
}

/// The tree of `base` with `edits` applied (path → new contents, `None` deletes), written to the
/// object database; nothing else is touched.
pub fn tree_with(repo: &Repository, base: Oid, edits: &BTreeMap<String, Option<Vec<u8>>>) -> Result<Oid> {
    let tree = repo.find_commit(base).and_then(|c| c.tree()).map_err(e)?;
    let mut index = Index::new().map_err(e)?;
    index.read_tree(&tree).map_err(e)?;
    for (path, content) in edits {
        // Paths come from evidence, drafts and LLM output: none may leave the repository's tree.
        if !sanitize::is_safe_repo_path(path) {
            return Err(format!(
                "[Q006] `{}`: not a path inside the repository (absolute, `..`, `.git` or control characters)\n  help: a name from the evidence or a draft made this path; nothing was committed — report the evidence record that carries it",
                sanitize::line(path)
            ));
        }
        match content {
            Some(bytes) => {
                // Last line of defence for committed text: no raw control sequence gets in.
                let cleaned;
                let bytes = match std::str::from_utf8(bytes) {
                    Ok(t) if !sanitize::is_clean_text(t) => {
                        cleaned = sanitize::text_bounded(t, usize::MAX).into_bytes();
                        &cleaned
                    }
                    _ => bytes,
                };
                let id = repo.blob(bytes).map_err(e)?;
                let entry = IndexEntry {
                    ctime: IndexTime::new(0, 0),
                    mtime: IndexTime::new(0, 0),
                    dev: 0,
                    ino: 0,
                    mode: 0o100644,
                    uid: 0,
                    gid: 0,
                    file_size: bytes.len() as u32,
                    id,
                    flags: 0,
                    flags_extended: 0,
                    path: path.as_bytes().to_vec(),
                };
                index.add(&entry).map_err(e)?;
            }
            None => {
                let _ = index.remove_path(Path::new(path));
            }
        }
    }
    index.write_tree_to(repo).map_err(e)
}

/// Commit `edits` on top of `base` and point `refs/heads/<branch>` at it (created or moved).
/// Returns the commit. The working copy, the index and HEAD are not touched.
pub fn commit_on_branch(repo: &Repository, base: Oid, branch: &str, edits: &BTreeMap<String, Option<Vec<u8>>>, message: &str) -> Result<Oid> {
    let tree_id = tree_with(repo, base, edits)?;
    let tree = repo.find_tree(tree_id).map_err(e)?;
    let parent = repo.find_commit(base).map_err(e)?;
    let sig = engine_signature(repo, base)?;
    let message = commit_message(message);
    let oid = repo.commit(None, &sig, &sig, &message, &tree, &[&parent]).map_err(e)?;
    set_branch(repo, branch, oid, &format!("cake-evolve-compiler: {}", message.lines().next().unwrap_or("")))?;
    Ok(oid)
}

/// A commit message from parts that may hold external text: control characters escaped, the
/// subject one bounded line.
pub fn commit_message(message: &str) -> String {
    let (subject, body) = message.split_once('\n').unwrap_or((message, ""));
    let subject = sanitize::line_bounded(subject, 200);
    if body.is_empty() {
        subject
    } else {
        format!("{subject}\n{}", sanitize::text(body))
    }
}

/// Point a branch at a commit (force). A name that is not a valid ref is `Q006`.
pub fn set_branch(repo: &Repository, branch: &str, oid: Oid, log: &str) -> Result<()> {
    let name = format!("refs/heads/{branch}");
    if !git2::Reference::is_valid_name(&name) || branch.chars().any(|c| !c.is_ascii_graphic()) {
        return Err(format!("[Q006] `{}`: not a valid branch name\n  help: the name was made from evidence or a draft; nothing was written", sanitize::line(branch)));
    }
    repo.reference(&name, oid, true, &sanitize::line(log)).map(|_| ()).map_err(e)
}

/// The subject of a record commit (`record_commit` recognises it by it).
fn record_subject(id: &str) -> String {
    format!("cake-evolve record {id}")
}

/// Point `branch` at a record commit: `proposal` plus the one file `path` (the record), so the
/// branch carries its own record. The proposal commit stays what gates and `accept` use.
pub fn commit_record(repo: &Repository, branch: &str, proposal: Oid, path: &str, bytes: &[u8], id: &str) -> Result<Oid> {
    let mut edits = BTreeMap::new();
    edits.insert(path.to_string(), Some(bytes.to_vec()));
    let tree_id = tree_with(repo, proposal, &edits)?;
    let tree = repo.find_tree(tree_id).map_err(e)?;
    let parent = repo.find_commit(proposal).map_err(e)?;
    let sig = engine_signature(repo, proposal)?;
    let msg = format!("{}\n\nThe review record of proposal {id}, kept on its branch so the queue can be rebuilt\n(`cake-evolve-compiler queue rebuild`). Not part of the proposal: `accept` merges its parent.\n", record_subject(id));
    let oid = repo.commit(None, &sig, &sig, &msg, &tree, &[&parent]).map_err(e)?;
    set_branch(repo, branch, oid, &record_subject(id))?;
    Ok(oid)
}

/// When `branch` ends in a record commit: (the proposal commit beneath it, the record commit).
/// A record commit has one parent, the record subject, and changes only `proposals/<id>.toml`.
pub fn record_commit(repo: &Repository, branch: &str) -> Option<(Oid, Oid)> {
    let head = branch_target(repo, branch)?;
    let c = repo.find_commit(head).ok()?;
    let id = c.summary()?.strip_prefix("cake-evolve record ")?.to_string();
    if c.parent_count() != 1 {
        return None;
    }
    let parent = c.parent(0).ok()?;
    let d = repo.diff_tree_to_tree(Some(&parent.tree().ok()?), Some(&c.tree().ok()?), None).ok()?;
    let only_record = d.deltas().count() == 1 && d.deltas().all(|x| x.new_file().path().and_then(|p| p.to_str()) == Some(&format!("proposals/{id}.toml")));
    only_record.then(|| (parent.id(), head))
}

/// The proposal commit of a branch: beneath its record commit, or its head.
pub fn proposal_commit(repo: &Repository, branch: &str) -> Option<Oid> {
    record_commit(repo, branch).map(|(p, _)| p).or_else(|| branch_target(repo, branch))
}

/// Local branches whose name starts with `prefix`, sorted.
pub fn branches_under(repo: &Repository, prefix: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for r in repo.references_glob(&format!("refs/heads/{prefix}*")).map_err(e)?.flatten() {
        if let Some(name) = r.name().and_then(|n| n.strip_prefix("refs/heads/")) {
            out.push(name.to_string());
        }
    }
    out.sort();
    Ok(out)
}

/// Where `commit` entered `branch_head`'s first-parent history: itself (a fast-forward) or the
/// merge commit with it as a parent. `None` when it is not merged (or too far back).
pub fn merged_at(repo: &Repository, branch_head: Oid, commit: Oid) -> Option<(Oid, &'static str)> {
    if branch_head != commit && !repo.graph_descendant_of(branch_head, commit).unwrap_or(false) {
        return None;
    }
    let mut at = repo.find_commit(branch_head).ok()?;
    for _ in 0..100_000 {
        if at.id() == commit {
            return Some((at.id(), "fast-forward"));
        }
        if at.parent_ids().skip(1).any(|p| p == commit) {
            return Some((at.id(), "merge commit"));
        }
        at = at.parent(0).ok()?;
    }
    None
}

/// Write every file of a commit's tree under `dest` (an isolated checkout for the gates).
pub fn export_tree(repo: &Repository, commit: Oid, dest: &Path) -> Result<()> {
    let files = tree_files(repo, commit)?;
    for (path, (_, id)) in files {
        let blob = repo.find_blob(id).map_err(e)?;
        let out = dest.join(&path);
        if let Some(dir) = out.parent() {
            std::fs::create_dir_all(dir).map_err(|err| format!("{}: {err}", dir.display()))?;
        }
        std::fs::write(&out, blob.content()).map_err(|err| format!("{}: {err}", out.display()))?;
    }
    Ok(())
}

/// One file's change between two commits, with both contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileDiff {
    pub path: String,
    pub change: Change,
    pub old: Option<Vec<u8>>,
    pub new: Option<Vec<u8>>,
}

/// The files that differ between two commits, by path.
pub fn diff(repo: &Repository, old: Oid, new: Oid) -> Result<Vec<FileDiff>> {
    let a = tree_files(repo, old)?;
    let b = tree_files(repo, new)?;
    let mut out = Vec::new();
    let blob = |id: Oid| -> Result<Vec<u8>> { repo.find_blob(id).map(|b| b.content().to_vec()).map_err(e) };
    for (path, (_, id)) in &b {
        match a.get(path) {
            None => out.push(FileDiff { path: path.clone(), change: Change::Added, old: None, new: Some(blob(*id)?) }),
            Some((_, old_id)) if old_id != id => out.push(FileDiff { path: path.clone(), change: Change::Modified, old: Some(blob(*old_id)?), new: Some(blob(*id)?) }),
            _ => {}
        }
    }
    for (path, (_, id)) in &a {
        if !b.contains_key(path) {
            out.push(FileDiff { path: path.clone(), change: Change::Deleted, old: Some(blob(*id)?), new: None });
        }
    }
    out.sort_by(|x, y| x.path.cmp(&y.path));
    Ok(out)
}

pub fn changed_paths(d: &[FileDiff]) -> Vec<ChangedPath> {
    d.iter().map(|f| ChangedPath { path: f.path.clone(), change: f.change }).collect()
}

/// Re-apply the change `base → head` on top of `onto` (bors-style): every file the change added,
/// modified or deleted takes the change's version, provided `onto` did not change that file
/// itself since `base` — except files with a `resolve` function (the CHANGELOG, where the
/// proposal's line is inserted into `onto`'s version). Returns the new tree, or the conflicting
/// paths.
pub fn rebase_tree(
    repo: &Repository,
    base: Oid,
    head: Oid,
    onto: Oid,
    resolve: &dyn Fn(&str, &str) -> Option<String>,
) -> Result<std::result::Result<Oid, Vec<String>>> {
    let change = diff(repo, base, head)?;
    let mut edits: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
    let mut conflicts = Vec::new();
    for f in change {
        let on_onto = read_file(repo, onto, &f.path)?;
        if on_onto == f.new {
            continue; // already there
        }
        if on_onto == f.old {
            edits.insert(f.path.clone(), f.new.clone());
            continue;
        }
        let onto_text = on_onto.as_ref().map(|b| String::from_utf8_lossy(b).into_owned()).unwrap_or_default();
        match resolve(&f.path, &onto_text) {
            Some(text) => {
                edits.insert(f.path.clone(), Some(text.into_bytes()));
            }
            None => conflicts.push(f.path.clone()),
        }
    }
    if !conflicts.is_empty() {
        return Ok(Err(conflicts));
    }
    Ok(Ok(tree_with_tree(repo, onto, &edits)?))
}

fn tree_with_tree(repo: &Repository, commit: Oid, edits: &BTreeMap<String, Option<Vec<u8>>>) -> Result<Oid> {
    tree_with(repo, commit, edits)
}

/// Make a commit with the given tree and parents (not on any ref).
pub fn commit_tree(repo: &Repository, tree: Oid, parents: &[Oid], message: &str, sig: &Signature<'_>) -> Result<Oid> {
    let tree = repo.find_tree(tree).map_err(e)?;
    let parents: Vec<Commit<'_>> = parents.iter().map(|p| repo.find_commit(*p)).collect::<std::result::Result<_, _>>().map_err(e)?;
    let refs: Vec<&Commit<'_>> = parents.iter().collect();
    repo.commit(None, sig, sig, &commit_message(message), &tree, &refs).map_err(e)
}

/// A signature for merges made on the user's behalf: the repository's configured user, else the
/// engine's.
pub fn user_signature(repo: &Repository) -> Signature<'static> {
    repo.signature().map(|s| s.to_owned()).unwrap_or_else(|_| Signature::now("cake-evolve-compiler", "cake-evolve@localhost").expect("a valid signature"))
}

/// Tracked files with uncommitted changes (index or working tree), outside `ignore_prefix`.
pub fn dirty_tracked(repo: &Repository, ignore_prefix: &str) -> Result<Vec<String>> {
    let mut opts = StatusOptions::new();
    opts.include_untracked(false).include_ignored(false).exclude_submodules(true);
    let statuses = repo.statuses(Some(&mut opts)).map_err(e)?;
    let mut out = Vec::new();
    for s in statuses.iter() {
        let st = s.status();
        if st.is_empty() || st == Status::CURRENT || st.contains(Status::IGNORED) || st.contains(Status::WT_NEW) {
            continue;
        }
        if let Some(p) = s.path() {
            if !p.starts_with(ignore_prefix) {
                out.push(p.to_string());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Whether HEAD is (symbolically) on `branch`.
pub fn head_is(repo: &Repository, branch: &str) -> bool {
    repo.find_reference("HEAD").ok().and_then(|h| h.symbolic_target().map(str::to_string)).as_deref() == Some(&format!("refs/heads/{branch}"))
}

/// Move `branch` to `new` (a descendant of its current commit, or a merge whose first parent it
/// is). When the working copy is on that branch, it is updated too — only if it has no
/// uncommitted changes to tracked files (outside `proposals/`); otherwise nothing moves and the
/// error says why.
pub fn advance_branch(repo: &Repository, branch: &str, new: Oid, log: &str) -> Result<()> {
    if head_is(repo, branch) && !repo.is_bare() {
        let dirty = dirty_tracked(repo, "proposals/")?;
        if !dirty.is_empty() {
            return Err(format!(
                "your working copy is on `{branch}` and has uncommitted changes ({}); commit or stash them and accept again — nothing was merged",
                dirty.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        let commit = repo.find_commit(new).map_err(e)?;
        let mut co = git2::build::CheckoutBuilder::new();
        co.safe();
        repo.checkout_tree(commit.as_object(), Some(&mut co)).map_err(|err| format!("cannot update the working copy: {}", e(err)))?;
    }
    set_branch(repo, branch, new, log)
}
