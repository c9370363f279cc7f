//! `evolution/benchmark/classes.toml`: one `[[class]]` per bug class of the seeded benchmark.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// A bug class: the verifier rules its ablation removes, and where its failures show.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Class {
    /// Its folder under the benchmark (`train/`, `heldout/`, `probe/`, `variants/`, `evidence/`).
    pub name: String,
    /// The rule codes removed from the base.
    pub ablate: Vec<String>,
    /// `ablation` (a rule removed, its class let through) or `h200` (wrong answers and hangs
    /// recorded on the H200).
    pub source: String,
    /// Whether the failure is only observable on a GPU (launch and encode errors, wrong answers).
    pub gpu: bool,
    /// What `cake build --unsafe-skip-verify` gives its programs: `pass`, or the code that
    /// refuses them (`L002`, a ptxas `P00x`).
    #[serde(default)]
    pub build: Option<String>,
    /// Whether a program may hit only a subset of `ablate`.
    #[serde(default)]
    pub subset: bool,
    pub what: String,
    /// Program counts per set, as the generator wrote them (informational).
    #[serde(default)]
    pub train: Option<usize>,
    #[serde(default)]
    pub heldout: Option<usize>,
    #[serde(default)]
    pub probe: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    class: Vec<Class>,
}

/// The classes of the benchmark at `dir`. A malformed file is `E803` naming it; a class without
/// its folder is `E804`.
pub fn load_classes(dir: &Path) -> Result<Vec<Class>, String> {
    let path = dir.join("classes.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("E803: cannot read {}: {e}", path.display()))?;
    let f: File = toml::from_str(&text).map_err(|e| format!("E803: {}: {e}", path.display()))?;
    for c in &f.class {
        let ok_name = !c.name.is_empty() && c.name.chars().all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-');
        if !ok_name {
            return Err(format!("E803: {}: class name `{}` must be lowercase letters, digits and `-`", path.display(), c.name.escape_debug()));
        }
        if c.ablate.is_empty() || !c.ablate.iter().all(|r| r.len() == 4 && r.starts_with('V') && r[1..].chars().all(|ch| ch.is_ascii_digit())) {
            return Err(format!("E803: {}: class `{}` must ablate one or more rule codes like `V201`", path.display(), c.name));
        }
        if !dir.join(&c.name).is_dir() {
            return Err(format!("E804: class `{}` has no folder {}", c.name, dir.join(&c.name).display()));
        }
    }
    Ok(f.class)
}
