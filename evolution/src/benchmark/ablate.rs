//! An ablated base: a git repository holding a checkout's compiler data, corpus, calibration and
//! CHANGELOG, less some verifier rules — the rule files, their negative corpus cases and every
//! expected finding of theirs. Removing a rule lets its bug class through; the seeded benchmark
//! then asks whether the engine derives an equivalent rule from the failures alone (issue 12).

use std::path::Path;

fn copy_dir(src: &Path, dst: &Path, skip: &[&str]) -> Result<(), String> {
    std::fs::create_dir_all(dst).map_err(|e| format!("cannot create {}: {e}", dst.display()))?;
    let mut entries: Vec<_> = std::fs::read_dir(src).map_err(|e| format!("cannot read {}: {e}", src.display()))?.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        if skip.contains(&name.as_str()) {
            continue;
        }
        if p.is_dir() {
            copy_dir(&p, &dst.join(&name), skip)?;
        } else {
            std::fs::copy(&p, dst.join(&name)).map_err(|e| format!("cannot copy {}: {e}", p.display()))?;
        }
    }
    Ok(())
}

/// Drop the entries of `codes` from a corpus manifest's expected findings
/// (`{ code = "V325", line = 4, column = 1 }` and the separator after it).
pub fn ablate_manifest(text: &str, codes: &[String]) -> String {
    let mut out = text.to_string();
    for code in codes {
        let pat = format!("{{ code = \"{code}\"");
        while let Some(i) = out.find(&pat) {
            let end = out[i..].find('}').map_or(out.len(), |j| i + j + 1);
            let mut stop = end;
            let rest = &out[end..];
            if let Some(r) = rest.strip_prefix(',') {
                stop += 1 + (r.len() - r.trim_start_matches([' ', '\n']).len());
            }
            out.replace_range(i..stop, "");
        }
    }
    out.replace(", ]", " ]").replace(",\n]", "\n]")
}

fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut v: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    v.sort();
    for p in v {
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// Make the ablated base at `dst` from the checkout `src`, less the rules `codes`: a git
/// repository whose `main` is one commit (fixed author and time, so the same inputs give the same
/// commit), HEAD on `main`, working copy clean. Returns the number of rule files and negative
/// cases removed.
pub fn make_ablated_repo(src: &Path, dst: &Path, codes: &[String]) -> Result<(usize, usize), String> {
    copy_dir(&src.join("compiler/rules"), &dst.join("compiler/rules"), &[])?;
    let mut rules = Vec::new();
    files_under(&dst.join("compiler/rules"), &mut rules);
    let mut removed_rules = 0;
    for p in &rules {
        let name = p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        if codes.iter().any(|c| name.starts_with(&format!("{c}-"))) {
            std::fs::remove_file(p).map_err(|e| format!("cannot remove {}: {e}", p.display()))?;
            removed_rules += 1;
        }
    }
    for c in codes {
        if !rules.iter().any(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&format!("{c}-")))) {
            return Err(format!("E801: no rule file of `{c}` under {}/compiler/rules: the class ablates a rule the base does not have", src.display()));
        }
    }
    copy_dir(&src.join("compiler/catalog"), &dst.join("compiler/catalog"), &[])?;
    std::fs::copy(src.join("compiler/targets.toml"), dst.join("compiler/targets.toml")).map_err(|e| format!("cannot copy the target table: {e}"))?;
    copy_dir(&src.join("corpus"), &dst.join("corpus"), &["results"])?;
    let mut corpus = Vec::new();
    files_under(&dst.join("corpus"), &mut corpus);
    let mut removed_cases = 0;
    for p in &corpus {
        let name = p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        if codes.iter().any(|c| name.starts_with(&format!("{c}-"))) {
            std::fs::remove_file(p).map_err(|e| format!("cannot remove {}: {e}", p.display()))?;
            if name.ends_with(".toml") {
                removed_cases += 1;
            }
        } else if name.ends_with(".toml") {
            let text = std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            let ablated = ablate_manifest(&text, codes);
            if ablated != text {
                std::fs::write(p, ablated).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
            }
        }
    }
    copy_dir(&src.join("calibration"), &dst.join("calibration"), &["microbench"])?;
    std::fs::copy(src.join("CHANGELOG.md"), dst.join("CHANGELOG.md")).map_err(|e| format!("cannot copy the CHANGELOG: {e}"))?;
    std::fs::create_dir_all(dst.join("proposals")).map_err(|e| e.to_string())?;
    std::fs::write(dst.join("proposals/README.md"), "# proposals/\n").map_err(|e| e.to_string())?;
    let mut opts = git2::RepositoryInitOptions::new();
    opts.initial_head("main");
    let repo = git2::Repository::init_opts(dst, &opts).map_err(|e| format!("cannot create a repository at {}: {e}", dst.display()))?;
    {
        let mut cfg = repo.config().map_err(|e| e.to_string())?;
        cfg.set_str("user.name", "Cake Benchmark").map_err(|e| e.to_string())?;
        cfg.set_str("user.email", "benchmark@cake.invalid").map_err(|e| e.to_string())?;
    }
    let mut index = repo.index().map_err(|e| e.to_string())?;
    index.add_all(["*"].iter(), git2::IndexAddOption::DEFAULT, None).map_err(|e| e.to_string())?;
    index.write().map_err(|e| e.to_string())?;
    let tree = repo.find_tree(index.write_tree().map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    let sig = git2::Signature::new("Cake Benchmark", "benchmark@cake.invalid", &git2::Time::new(1_700_000_000, 0)).map_err(|e| e.to_string())?;
    let msg = if codes.is_empty() { "Cake data, corpus and calibration".to_string() } else { format!("Cake data, corpus and calibration, less {}", codes.join(", ")) };
    repo.commit(Some("HEAD"), &sig, &sig, &msg, &tree, &[]).map_err(|e| e.to_string())?;
    Ok((removed_rules, removed_cases))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_entries_of_ablated_codes_go() {
        let t = "findings = [{ code = \"V325\", line = 4, column = 1 }, { code = \"V320\", line = 9, column = 2 }]\n";
        assert_eq!(ablate_manifest(t, &["V325".into()]), "findings = [{ code = \"V320\", line = 9, column = 2 }]\n");
        assert_eq!(ablate_manifest(t, &["V320".into()]), "findings = [{ code = \"V325\", line = 4, column = 1 } ]\n");
    }
}
