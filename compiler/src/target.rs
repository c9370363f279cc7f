//! The target capability table, loaded from data (`compiler/targets.toml`).
//!
//! A target lists the hardware *features* it has, named from a fixed vocabulary that the table
//! itself declares and documents (`[features]`). Ops in the catalog say which features they
//! require; the checker refuses a program that calls an op its target lacks — there is no silent
//! step-down. The built-in table is embedded at build time; [`TargetTable::load`] and
//! [`TargetTable::from_toml_str`] read a replacement at run time (the evolution engine, tests).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The built-in table's file name (relative to the crate root), for error messages.
pub const BUILTIN_FILE: &str = "targets.toml";

/// The built-in table, embedded at build time.
pub const BUILTIN_TOML: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/targets.toml"));

/// The whole table: the feature vocabulary and every target.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetTable {
    /// Feature vocabulary: name → what it is, which PTX it unlocks and where it exists.
    pub features: BTreeMap<String, String>,
    /// Targets, in table order.
    #[serde(rename = "target")]
    pub targets: Vec<TargetInfo>,
}

/// One target's capabilities and limits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetInfo {
    /// The name programs use: `sm_90a`.
    pub name: String,
    /// Compute capability × 10: `90`.
    pub sm: u32,
    /// ptxas / NVRTC architecture string: `sm_90a`.
    pub arch: String,
    /// First PTX ISA version that accepts `arch`: `"8.0"`.
    pub ptx_isa_min: String,
    /// GPUs of this target: `"H100 / H200"`.
    pub skus: String,
    /// Capabilities, names from the table's feature vocabulary.
    pub features: BTreeSet<String>,
    /// Bytes of shared memory one block may use (opt-in maximum).
    pub smem_per_block_max: u32,
    /// Bytes of shared memory per SM.
    pub smem_per_sm: u32,
    /// 32-bit registers per SM.
    pub regs_per_sm: u32,
    /// Registers one thread may use.
    pub regs_per_thread_max: u32,
    pub max_threads_per_block: u32,
    pub max_threads_per_sm: u32,
    /// Portable maximum blocks per cluster; 1 where the target has no clusters.
    pub max_cluster_size: u32,
    /// Shared-memory banks and their width in bytes (bank conflicts: the cost model).
    pub smem_banks: u32,
    pub smem_bank_bytes: u32,
    /// SMs of the reference SKU (the first of `skus`), where verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_count: Option<u32>,
    /// Whether this project's lab can run kernels for this target.
    pub runnable: bool,
    /// Hardware source and caveats.
    pub notes: String,
}

impl TargetInfo {
    /// Whether the target has `feature`.
    pub fn has(&self, feature: &str) -> bool {
        self.features.contains(feature)
    }

    /// The features of `required` this target lacks, in the given order.
    pub fn missing<'a>(&self, required: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
        required.into_iter().filter(|f| !self.has(f)).collect()
    }
}

/// A target table that failed to load: which file, which target, what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetError {
    pub file: String,
    pub target: Option<String>,
    pub message: String,
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file)?;
        if let Some(t) = &self.target {
            write!(f, "target `{t}`: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for TargetError {}

impl TargetTable {
    /// The built-in table (parsed and validated once). Panics if the embedded data is invalid,
    /// which the crate's tests rule out.
    pub fn builtin() -> &'static TargetTable {
        static TABLE: OnceLock<TargetTable> = OnceLock::new();
        TABLE.get_or_init(|| match TargetTable::from_toml_str(BUILTIN_FILE, BUILTIN_TOML) {
            Ok(t) => t,
            Err(e) => panic!("the built-in target table is invalid: {e}"),
        })
    }

    /// Parse and validate a table; `file` names it in errors.
    pub fn from_toml_str(file: &str, text: &str) -> Result<TargetTable, TargetError> {
        let table: TargetTable = toml::from_str(text)
            .map_err(|e| TargetError { file: file.to_string(), target: None, message: e.to_string().trim_end().to_string() })?;
        table.validate(file)?;
        Ok(table)
    }

    /// Read, parse and validate a table from a file.
    pub fn load(path: impl AsRef<Path>) -> Result<TargetTable, TargetError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| TargetError { file: name.clone(), target: None, message: format!("cannot read: {e}") })?;
        TargetTable::from_toml_str(&name, &text)
    }

    /// The target called `name`.
    pub fn get(&self, name: &str) -> Option<&TargetInfo> {
        self.targets.iter().find(|t| t.name == name)
    }

    /// Target names, in table order.
    pub fn names(&self) -> Vec<&str> {
        self.targets.iter().map(|t| t.name.as_str()).collect()
    }

    /// Whether `feature` is in the vocabulary.
    pub fn is_feature(&self, feature: &str) -> bool {
        self.features.contains_key(feature)
    }

    /// The vocabulary's description of `feature`.
    pub fn feature_doc(&self, feature: &str) -> Option<&str> {
        self.features.get(feature).map(String::as_str)
    }

    /// Targets that have every feature of `required`.
    pub fn targets_with<'a>(&'a self, required: &'a [String]) -> impl Iterator<Item = &'a TargetInfo> + 'a {
        self.targets.iter().filter(move |t| required.iter().all(|f| t.has(f)))
    }

    fn validate(&self, file: &str) -> Result<(), TargetError> {
        let err = |target: Option<&str>, message: String| TargetError {
            file: file.to_string(),
            target: target.map(str::to_string),
            message,
        };
        if self.features.is_empty() {
            return Err(err(None, "the feature vocabulary `[features]` is empty".into()));
        }
        for (name, doc) in &self.features {
            if !is_identifier(name) {
                return Err(err(None, format!("feature name `{name}` is not a lower-case identifier")));
            }
            if doc.trim().is_empty() {
                return Err(err(None, format!("feature `{name}` has an empty description")));
            }
        }
        if self.targets.is_empty() {
            return Err(err(None, "no `[[target]]` entries".into()));
        }
        let mut seen = BTreeSet::new();
        for t in &self.targets {
            let name = Some(t.name.as_str());
            if !seen.insert(t.name.as_str()) {
                return Err(err(name, "defined twice".into()));
            }
            if !t.name.starts_with("sm_") || !t.arch.starts_with("sm_") {
                return Err(err(name, format!("name and arch must be `sm_...` strings (arch is `{}`)", t.arch)));
            }
            let digits: String = t.name[3..].chars().take_while(char::is_ascii_digit).collect();
            if digits.parse::<u32>().ok() != Some(t.sm) {
                return Err(err(name, format!("`sm = {}` does not match the name", t.sm)));
            }
            for f in &t.features {
                if !self.is_feature(f) {
                    return Err(err(name, format!("feature `{f}` is not in the `[features]` vocabulary")));
                }
            }
            if t.smem_per_block_max == 0 || t.smem_per_block_max > t.smem_per_sm {
                return Err(err(
                    name,
                    format!("smem_per_block_max ({}) must be in 1..=smem_per_sm ({})", t.smem_per_block_max, t.smem_per_sm),
                ));
            }
            if t.regs_per_thread_max == 0 || t.regs_per_thread_max > t.regs_per_sm {
                return Err(err(name, "regs_per_thread_max must be in 1..=regs_per_sm".into()));
            }
            if t.max_threads_per_block == 0 || t.max_threads_per_block > t.max_threads_per_sm {
                return Err(err(name, "max_threads_per_block must be in 1..=max_threads_per_sm".into()));
            }
            if t.max_cluster_size == 0 {
                return Err(err(name, "max_cluster_size must be at least 1 (1 = no clusters)".into()));
            }
            if (t.max_cluster_size > 1) != t.has("clusters") {
                return Err(err(
                    name,
                    "max_cluster_size > 1 exactly when the target has the `clusters` feature".into(),
                ));
            }
            if t.skus.trim().is_empty() || t.notes.trim().is_empty() || t.ptx_isa_min.trim().is_empty() {
                return Err(err(name, "skus, ptx_isa_min and notes must not be empty".into()));
            }
        }
        Ok(())
    }
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}
