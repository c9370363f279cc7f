//! Which verifier rule set a command (`check`, `lower`, `build`, `run`, `bench`) runs with:
//! `--rules DIR` when given, else the `compiler/rules/` of the checkout the command runs in, else
//! the set embedded at build time. Reading the checkout's rules is what lets an accepted rule (a
//! data file merged into the checkout) take effect without rebuilding `cake`; `--rules DIR` is how
//! an ablation runs a bug class through to the GPU with one rule left out.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::diag::Diagnostic;
use crate::span::Span;
use crate::verify::{RuleError, RuleSet};

/// Where the active rules came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RulesOrigin {
    /// `--rules DIR`.
    Flag(PathBuf),
    /// `compiler/rules/` of the checkout rooted here.
    Checkout(PathBuf),
    /// Built into this binary.
    Embedded,
}

/// The rule set a command verifies with, and where it came from.
#[derive(Clone, Debug)]
pub struct ActiveRules {
    pub set: Arc<RuleSet>,
    pub origin: RulesOrigin,
}

impl ActiveRules {
    /// The rules built into this binary.
    pub fn embedded() -> ActiveRules {
        ActiveRules { set: Arc::new(RuleSet::builtin().clone()), origin: RulesOrigin::Embedded }
    }

    /// `--rules DIR` if given, else the rules of the checkout around the current directory, else
    /// the embedded ones. A rule file that does not load is an `E0006` naming it.
    pub fn resolve(flag: Option<&Path>) -> Result<ActiveRules, Box<Diagnostic>> {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        ActiveRules::resolve_from(flag, &cwd)
    }

    /// [`ActiveRules::resolve`] with the checkout searched from `start` upwards.
    pub fn resolve_from(flag: Option<&Path>, start: &Path) -> Result<ActiveRules, Box<Diagnostic>> {
        if let Some(dir) = flag {
            if !dir.is_dir() {
                return Err(Box::new(
                    Diagnostic::error("E0006", format!("--rules {}: not a directory", dir.display()), Span::default(), "")
                        .with_help("pass a directory of rule files (`<category>/<CODE>-<name>.toml`), e.g. `--rules compiler/rules`"),
                ));
            }
            let set = RuleSet::load_dir(dir).map_err(|e| load_error(&format!("--rules {}", dir.display()), &e))?;
            return Ok(ActiveRules { set: Arc::new(set), origin: RulesOrigin::Flag(dir.to_path_buf()) });
        }
        match find_checkout(start) {
            Some(root) => {
                let set = RuleSet::load_dir(root.join("compiler/rules"))
                    .map_err(|e| load_error(&format!("the rules of checkout {}", root.display()), &e))?;
                Ok(ActiveRules { set: Arc::new(set), origin: RulesOrigin::Checkout(root) })
            }
            None => Ok(ActiveRules::embedded()),
        }
    }

    /// What the one `note:` line says: `rules: compiler/rules of checkout /path (98 rules)`.
    pub fn describe(&self) -> String {
        let n = self.set.len();
        match &self.origin {
            RulesOrigin::Flag(dir) => format!("rules: --rules {} ({n} rules)", dir.display()),
            RulesOrigin::Checkout(root) => format!("rules: compiler/rules of checkout {} ({n} rules)", root.display()),
            RulesOrigin::Embedded => format!("rules: embedded rules (built into this binary, {n} rules)"),
        }
    }

    /// The `rules` field of JSON output: `{"origin": "flag"|"checkout"|"embedded", "dir", "count"}`.
    pub fn to_json(&self) -> serde_json::Value {
        let (origin, dir) = match &self.origin {
            RulesOrigin::Flag(d) => ("flag", Some(d.display().to_string())),
            RulesOrigin::Checkout(root) => ("checkout", Some(root.join("compiler/rules").display().to_string())),
            RulesOrigin::Embedded => ("embedded", None),
        };
        serde_json::json!({ "origin": origin, "dir": dir, "count": self.set.len() })
    }
}

/// The nearest ancestor of `start` (itself included) that holds `compiler/rules/` beside a
/// `Cargo.toml` or `.git` (a file in a git worktree): the root of a Cake checkout.
pub fn find_checkout(start: &Path) -> Option<PathBuf> {
    let start = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
    start
        .ancestors()
        .find(|d| d.join("compiler/rules").is_dir() && (d.join("Cargo.toml").is_file() || d.join(".git").exists()))
        .map(Path::to_path_buf)
}

fn load_error(what: &str, e: &RuleError) -> Box<Diagnostic> {
    let mut d = Diagnostic::error("E0006", format!("{what}: cannot load `{}`: {}", e.file, e.message), Span::default(), "");
    if let Some(code) = &e.code {
        d = d.with_note(format!("in rule {code}"));
    }
    Box::new(d.with_help(
        "fix or remove that file (`compiler/rules/README.md` gives the schema), or pass `--rules DIR` naming a rule set that loads",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiler_checkout_is_found_from_a_subdirectory() {
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let root = find_checkout(&here).expect("the crate lies in a checkout");
        assert!(root.join("compiler/rules").is_dir());
        let active = ActiveRules::resolve_from(None, &here).expect("the checkout's rules load");
        assert!(matches!(active.origin, RulesOrigin::Checkout(_)));
        assert_eq!(active.set.len(), RuleSet::builtin().len(), "the checkout's rules are the ones this crate embeds");
        assert!(active.describe().contains("compiler/rules of checkout"), "{}", active.describe());
    }

    #[test]
    fn outside_a_checkout_the_embedded_rules_are_used() {
        let active = ActiveRules::resolve_from(None, Path::new("/")).expect("embedded rules");
        assert_eq!(active.origin, RulesOrigin::Embedded);
        assert_eq!(active.to_json()["origin"], "embedded");
    }

    #[test]
    fn a_missing_rules_dir_is_e0006() {
        let e = ActiveRules::resolve_from(Some(Path::new("/nonexistent/rules")), Path::new("/")).unwrap_err();
        assert_eq!(e.code, "E0006");
        assert!(e.message.contains("/nonexistent/rules"), "{}", e.message);
    }
}
