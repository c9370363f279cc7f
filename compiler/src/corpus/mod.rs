//! The kernel corpus and its gate (`cake corpus gate|merge|list|show`).
//!
//! The corpus is the compiler's memory and safety net: every compiler change is judged against
//! it. It lives in `corpus/<family>/`, one folder per family:
//!
//! - `family.toml` — `description` (one line: what the family covers and which hardware path it
//!   exercises) and, for a templated family, `template = "FILE.cake.tmpl"`, instance defaults
//!   (any manifest key but `program`) and one `[[instance]]` table per instance (`id`, `vars`,
//!   optional overrides). `{{NAME}}` in the template (and in string values of the manifest) is
//!   replaced by `vars.NAME`, so each instance is its own program; the loader rejects an instance
//!   that leaves a placeholder unfilled, names a variable nothing uses, or expands to the same
//!   program as another instance.
//! - `<case>.toml` + the `.cake` program it names — a plain case.
//!
//! A case's manifest (see [`Manifest`]) states its program, target, tiers and expectations: the
//! verifier's verdict and the exact `(code, line, column)` of its error findings (and of its
//! warnings, when the manifest lists them), ptxas bounds for the compile tier, and the GPU
//! workload. The gate ([`gate`]) runs the selected tiers over the selected cases in parallel and
//! classifies every result against a baseline results file like Crater does ([`report`]);
//! `--bless` rewrites the expectations of the selected cases in place ([`bless`]). [`run`] is one
//! gate or merge invocation as a library call (the CLI prints what it returns).

pub mod bless;
pub mod error;
pub mod family_plot;
pub mod gate;
pub mod load_error;
pub mod pool;
pub mod report;
pub mod results;
pub mod run;
pub mod tiers;

pub use error::CorpusError;
use load_error::{CaseError, InstanceError, ManifestError, Placeholder};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The three tiers of a case, cheapest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    /// Parse, type check and verify; no toolchain needed.
    Static,
    /// Lower to CUDA and build a cubin with NVRTC; compare the ptxas report with bounds.
    Compile,
    /// Run on the GPU against the oracle.
    Gpu,
}

impl Tier {
    pub const ALL: [Tier; 3] = [Tier::Static, Tier::Compile, Tier::Gpu];

    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Static => "static",
            Tier::Compile => "compile",
            Tier::Gpu => "gpu",
        }
    }

    pub fn parse(s: &str) -> Option<Tier> {
        Tier::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verifier's verdict on a program.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// No finding at error severity: the program is validated.
    #[default]
    Accept,
    /// At least one finding at error severity (syntax, type or verifier).
    Reject,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Accept => "accept",
            Verdict::Reject => "reject",
        }
    }
}

/// One expected (or observed) finding: its stable code and the 1-based line and column of its
/// primary span's start.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FindingSpec {
    pub code: String,
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for FindingSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}:{}", self.code, self.line, self.column)
    }
}

/// `[expect]`: what the static tier must observe.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    #[serde(default)]
    pub verdict: Verdict,
    /// Every finding at error severity, exactly (order does not matter).
    #[serde(default)]
    pub findings: Vec<FindingSpec>,
    /// When present, every finding at warning severity, exactly; when absent, warnings are not
    /// compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<FindingSpec>>,
    /// When present, every hint, exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hints: Option<Vec<FindingSpec>>,
    /// When present, every coverage-limit finding (an analysis that could not decide), exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage_limits: Option<Vec<FindingSpec>>,
}

/// `[compile]`: bounds on the ptxas report of the case's cubin. An absent bound is not checked.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompileBounds {
    /// Registers per thread (ptxas `Used N registers`) at most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_registers: Option<u32>,
    /// Spill stores + spill loads (bytes) must equal this (normally 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spills: Option<u64>,
    /// Shared memory per block in bytes (static + the dynamic size the kernel launches with) at
    /// most this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_smem: Option<u64>,
}

impl CompileBounds {
    pub fn is_empty(&self) -> bool {
        self.max_registers.is_none() && self.spills.is_none() && self.max_smem.is_none()
    }
}

/// `[workload]`: how the GPU tier runs the case — the GPU runtime's workload spec
/// (`cake::runtime::workload::WorkloadSpec`, documented in `compiler/src/runtime/README.md`):
/// `oracle` (`matmul_abt`, `grouped_matmul_abt`, `attention`, `kmeans_assign`, `copy`,
/// `transpose`, `softmax`, `row_reduce`, `rmsnorm`, `layernorm`, `elementwise`, `rotary`, `fp8_quant_row`, `fp8_quant_block`, `gemv`, `none`), `headline`
/// and `shapes` (values of the
/// program's `dim`s), per-input distributions (`inputs`), derived inputs (`derive`), `scalars`,
/// `tolerance` (`rtol`, `atol`, `samples`), `reduce` (`row_reduce`), `expr` (`elementwise`) and
/// `seed`. Kept as a table here and parsed by the runtime, so the corpus and `cake run` share one
/// format. An instance's `workload = { ... }` merges key by key over the family's `[workload]`
/// (e.g. one `reduce` or `expr` per instance).
pub type Workload = toml::Table;

/// One case's manifest (a `<case>.toml`, or a family's defaults merged with one `[[instance]]`).
///
/// ```toml
/// program = "V201-smem-over-capacity.cake"   # plain cases: the program beside the manifest
/// target = "sm_90a"
/// tiers = ["static", "compile", "gpu"]
/// note = "why this case exists"               # optional, free text
/// [expect]
/// verdict = "reject"                          # reject | accept
/// findings = [ { code = "V201", line = 16, column = 1 } ]
/// # warnings = [ ... ]                        # optional: compared exactly when present
/// # hints = [ ... ]                           # likewise for hints
/// # coverage_limits = [ ... ]                 # likewise for coverage-limit findings
/// [compile]
/// max_registers = 168
/// spills = 0
/// max_smem = 196608
/// [workload]                                 # the GPU runtime's workload spec
/// oracle = "matmul_abt"
/// headline = { M = 4096, N = 4096, K = 4096 }
/// shapes = [{ M = 256, N = 512, K = 128 }]
/// tolerance = { rtol = 2e-2, atol = 1e-2 }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    #[serde(default)]
    pub target: String,
    #[serde(default)]
    pub tiers: Vec<Tier>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(default)]
    pub expect: Expect,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile: Option<CompileBounds>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<Workload>,
    /// Keys this schema does not know: kept, reported as load warnings (a typo such as `tier =`
    /// must not pass silently).
    #[serde(flatten, skip_serializing)]
    pub unknown: BTreeMap<String, toml::Value>,
}

/// Where a case's expectations live, so `--bless` can rewrite them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A plain case: its own manifest file.
    Plain { manifest: PathBuf, program: PathBuf },
    /// An instance of a templated family: `family.toml`, `[[instance]]` number `index`.
    Instance { family_toml: PathBuf, template: PathBuf, index: usize },
}

impl Origin {
    /// The file `--bless` edits.
    pub fn manifest_path(&self) -> &Path {
        match self {
            Origin::Plain { manifest, .. } => manifest,
            Origin::Instance { family_toml, .. } => family_toml,
        }
    }

    /// The program (plain) or template (instance) file.
    pub fn program_path(&self) -> &Path {
        match self {
            Origin::Plain { program, .. } => program,
            Origin::Instance { template, .. } => template,
        }
    }
}

/// One loaded case: a program instance and what it must show.
#[derive(Clone, Debug)]
pub struct Case {
    /// `family/case`; stable, used as the key in results and baselines.
    pub id: String,
    pub family: String,
    pub manifest: Manifest,
    /// The program text (the template expanded, for instances).
    pub source: String,
    pub origin: Origin,
    /// The instance's variables (empty for plain cases).
    pub vars: BTreeMap<String, String>,
    /// Problems found while loading that do not stop the case (unknown manifest keys).
    pub warnings: Vec<String>,
}

impl Case {
    /// Whether the manifest asks for `tier`.
    pub fn has_tier(&self, tier: Tier) -> bool {
        self.manifest.tiers.contains(&tier)
    }
}

/// A family folder.
#[derive(Clone, Debug)]
pub struct Family {
    pub name: String,
    pub dir: PathBuf,
    /// The one line: what the family covers and which hardware path it exercises.
    pub description: String,
    /// Free text (e.g. why a tier is absent).
    pub note: Option<String>,
    pub template: Option<PathBuf>,
}

/// Something in the corpus that could not be loaded; the gate reports it as an `error` result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    /// The case (or `family/family.toml`) it belongs to.
    pub id: String,
    pub family: String,
    pub message: String,
}

/// The whole corpus as loaded from its root folder.
#[derive(Clone, Debug, Default)]
pub struct Corpus {
    pub root: PathBuf,
    pub families: Vec<Family>,
    /// Every case, sorted by id.
    pub cases: Vec<Case>,
    pub errors: Vec<LoadError>,
}

/// Folders under the corpus root that are not families.
const NOT_FAMILIES: &[&str] = &["results"];

impl Corpus {
    /// Load every family under `root` (a folder with a `family.toml`, or — for folders other
    /// engineers create before writing theirs — any folder holding `<case>.toml` files).
    pub fn load(root: impl AsRef<Path>) -> std::io::Result<Corpus> {
        let root = root.as_ref().to_path_buf();
        let mut corpus = Corpus { root: root.clone(), ..Corpus::default() };
        let mut dirs: Vec<PathBuf> = fs::read_dir(&root)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| !n.starts_with('.') && !NOT_FAMILIES.contains(&n)))
            .collect();
        dirs.sort();
        for dir in dirs {
            corpus.load_family(&dir);
        }
        corpus.cases.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(corpus)
    }

    fn load_family(&mut self, dir: &Path) {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let family_toml = dir.join("family.toml");
        let mut family = Family { name: name.clone(), dir: dir.to_path_buf(), description: String::new(), note: None, template: None };
        let mut defaults = toml::Table::new();
        let mut instances: Vec<toml::Value> = Vec::new();
        let err = |message: String| LoadError { id: format!("{name}/family.toml"), family: name.clone(), message };
        if family_toml.is_file() {
            match fs::read_to_string(&family_toml)
                .map_err(|e| e.to_string())
                .and_then(|t| t.parse::<toml::Table>().map_err(|e| e.to_string()))
            {
                Ok(mut table) => {
                    match table.remove("description") {
                        Some(toml::Value::String(d)) if !d.trim().is_empty() => family.description = d.trim().to_string(),
                        _ => self.errors.push(err("family.toml needs `description = \"...\"`: one line saying what the family covers and which hardware path it exercises".into())),
                    }
                    if let Some(v) = table.remove("note") {
                        family.note = v.as_str().map(str::to_string);
                    }
                    if let Some(v) = table.remove("template") {
                        match v.as_str() {
                            Some(t) => family.template = Some(dir.join(t)),
                            None => self.errors.push(err("`template` must be a file name".into())),
                        }
                    }
                    if let Some(v) = table.remove("instance") {
                        match v {
                            toml::Value::Array(a) => instances = a,
                            _ => self.errors.push(err("`instance` must be an array of tables (`[[instance]]`)".into())),
                        }
                    }
                    defaults = table;
                }
                Err(e) => self.errors.push(err(format!("cannot read family.toml: {e}"))),
            }
        } else {
            self.errors.push(err("the family has no family.toml (it needs at least `description`)".into()));
        }

        // Plain cases: every `*.toml` but family.toml.
        let mut manifests: Vec<PathBuf> =
            fs::read_dir(dir).map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
        manifests
            .retain(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml") && p.file_name().is_some_and(|n| n != "family.toml"));
        manifests.sort();
        let mut ids: HashMap<String, String> = HashMap::new();
        for path in manifests {
            let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            let id = format!("{name}/{stem}");
            ids.insert(id.clone(), path.display().to_string());
            match load_plain(&name, &id, &path) {
                Ok(case) => self.cases.push(case),
                Err(e) => self.errors.push(LoadError { id, family: name.clone(), message: e.to_string() }),
            }
        }

        if !instances.is_empty() || family.template.is_some() {
            self.load_instances(&family, &family_toml, &defaults, &instances, &mut ids);
        } else if !defaults.is_empty() {
            let keys: Vec<&String> = defaults.keys().collect();
            self.errors.push(err(format!("family.toml without a template has instance defaults {keys:?}; they apply to nothing")));
        }
        self.families.push(family);
    }

    fn load_instances(
        &mut self,
        family: &Family,
        family_toml: &Path,
        defaults: &toml::Table,
        instances: &[toml::Value],
        ids: &mut HashMap<String, String>,
    ) {
        let name = &family.name;
        let err = |id: String, message: String| LoadError { id, family: name.clone(), message };
        let Some(template_path) = &family.template else {
            self.errors.push(err(format!("{name}/family.toml"), "`[[instance]]` tables need `template = \"FILE\"`".into()));
            return;
        };
        let template = match fs::read_to_string(template_path) {
            Ok(t) => t,
            Err(e) => {
                self.errors.push(err(format!("{name}/family.toml"), format!("cannot read template {}: {e}", template_path.display())));
                return;
            }
        };
        if instances.is_empty() {
            self.errors.push(err(format!("{name}/family.toml"), "a template without `[[instance]]` tables makes no case".into()));
        }
        // Distinct programs: the expanded text (and target) of every instance.
        let mut programs: HashMap<(String, String), String> = HashMap::new();
        for (index, inst) in instances.iter().enumerate() {
            let Some(table) = inst.as_table() else {
                self.errors.push(err(format!("{name}/instance#{index}"), "an `[[instance]]` entry must be a table".into()));
                continue;
            };
            let Some(local) = table.get("id").and_then(|v| v.as_str()).map(str::to_string) else {
                self.errors.push(err(format!("{name}/instance#{index}"), "an `[[instance]]` needs `id = \"...\"`".into()));
                continue;
            };
            let id = format!("{name}/{local}");
            if !valid_id(&local) {
                self.errors.push(err(id, "instance ids use only letters, digits, `-`, `_` and `.`".into()));
                continue;
            }
            if let Some(prev) = ids.insert(id.clone(), format!("instance #{index}")) {
                self.errors.push(err(id, format!("case id used twice (also {prev})")));
                continue;
            }
            match expand_instance(defaults, table, &template) {
                Ok((manifest, source, vars, warnings)) => {
                    let key = (manifest.target.clone(), source.clone());
                    if let Some(other) = programs.get(&key) {
                        self.errors
                            .push(err(id, format!("expands to the same program as `{other}`; every instance must be a distinct program")));
                        continue;
                    }
                    programs.insert(key, id.clone());
                    self.cases.push(Case {
                        id,
                        family: name.clone(),
                        manifest,
                        source,
                        origin: Origin::Instance { family_toml: family_toml.to_path_buf(), template: template_path.clone(), index },
                        vars,
                        warnings,
                    });
                }
                Err(e) => self.errors.push(err(id, e.to_string())),
            }
        }
    }

    /// The family a case belongs to.
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|f| f.name == name)
    }

    pub fn case(&self, id: &str) -> Option<&Case> {
        self.cases.iter().find(|c| c.id == id)
    }
}

fn valid_id(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

fn load_plain(family: &str, id: &str, path: &Path) -> Result<Case, CaseError> {
    let text = fs::read_to_string(path).map_err(|e| CaseError::Read { path: path.to_path_buf(), message: e.to_string() })?;
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| CaseError::Toml { path: path.to_path_buf(), message: e.to_string() })?;
    let (manifest, warnings) = manifest_from_table(table)?;
    let program = manifest.program.clone().ok_or_else(|| CaseError::NoProgram { path: path.to_path_buf() })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let program_path = dir.join(&program);
    let source = fs::read_to_string(&program_path)
        .map_err(|e| CaseError::ReadProgram { path: program_path.clone(), message: e.to_string() })?;
    Ok(Case {
        id: id.to_string(),
        family: family.to_string(),
        manifest,
        source,
        origin: Origin::Plain { manifest: path.to_path_buf(), program: program_path },
        vars: BTreeMap::new(),
        warnings,
    })
}

fn manifest_from_table(table: toml::Table) -> Result<(Manifest, Vec<String>), ManifestError> {
    let manifest: Manifest =
        toml::Value::Table(table).try_into().map_err(|e: toml::de::Error| ManifestError::Schema { message: e.message().to_string() })?;
    let mut warnings = Vec::new();
    for key in manifest.unknown.keys() {
        warnings.push(format!("unknown manifest key `{key}` (ignored)"));
    }
    if manifest.target.is_empty() {
        return Err(ManifestError::NoTarget);
    }
    if manifest.tiers.is_empty() {
        return Err(ManifestError::NoTiers);
    }
    let mut seen = BTreeSet::new();
    if manifest.tiers.iter().any(|t| !seen.insert(*t)) {
        return Err(ManifestError::RepeatedTier);
    }
    if manifest.tiers.contains(&Tier::Gpu) && manifest.workload.is_none() {
        return Err(ManifestError::NoWorkload);
    }
    if let Some(w) = &manifest.workload {
        let spec: Result<crate::runtime::workload::WorkloadSpec, _> = toml::Value::Table(w.clone()).try_into();
        if let Err(e) = spec {
            return Err(ManifestError::Workload { message: e.message().to_string() });
        }
    }
    Ok((manifest, warnings))
}

/// An expanded instance: its manifest, program text, variables (as text) and load warnings.
type Expanded = (Manifest, String, BTreeMap<String, String>, Vec<String>);

/// Keys of an `[[instance]]` table that are not manifest keys.
const INSTANCE_KEYS: &[&str] = &["id", "vars"];

/// Merge an instance over the family defaults, substitute its variables into the template and
/// the manifest, and check that every placeholder was filled and every variable used.
fn expand_instance(defaults: &toml::Table, inst: &toml::Table, template: &str) -> Result<Expanded, InstanceError> {
    let mut vars: BTreeMap<String, toml::Value> = BTreeMap::new();
    if let Some(v) = inst.get("vars") {
        let t = v.as_table().ok_or(InstanceError::VarsNotTable)?;
        for (k, v) in t {
            if !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(InstanceError::VarName { name: k.clone() });
            }
            match v {
                toml::Value::String(_) | toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => {}
                _ => return Err(InstanceError::VarType { name: k.clone() }),
            }
            vars.insert(k.clone(), v.clone());
        }
    }
    let text_vars: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| {
            let s = match v {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), s)
        })
        .collect();

    let mut merged = defaults.clone();
    for (k, v) in inst {
        if INSTANCE_KEYS.contains(&k.as_str()) {
            continue;
        }
        if k == "program" {
            return Err(InstanceError::Program);
        }
        deep_merge(&mut merged, k, v.clone());
    }

    let mut used: BTreeSet<String> = BTreeSet::new();
    let source = substitute(template, &text_vars, &mut used).map_err(InstanceError::Template)?;
    let mut merged = toml::Value::Table(merged);
    substitute_value(&mut merged, &vars, &text_vars, &mut used)?;
    let unused: Vec<String> = text_vars.keys().filter(|k| !used.contains(*k)).cloned().collect();
    if !unused.is_empty() {
        return Err(InstanceError::Unused { unused });
    }
    let toml::Value::Table(merged) = merged else { unreachable!() };
    let (manifest, warnings) = manifest_from_table(merged)?;
    Ok((manifest, source, text_vars, warnings))
}

/// Instance values override defaults; tables merge key by key.
fn deep_merge(into: &mut toml::Table, key: &str, value: toml::Value) {
    match (into.get_mut(key), value) {
        (Some(toml::Value::Table(dst)), toml::Value::Table(src)) => {
            for (k, v) in src {
                deep_merge(dst, &k, v);
            }
        }
        (_, v) => {
            into.insert(key.to_string(), v);
        }
    }
}

/// Replace every `{{NAME}}` by its variable; an unknown name or an unclosed `{{` is an error.
fn substitute(text: &str, vars: &BTreeMap<String, String>, used: &mut BTreeSet<String>) -> Result<String, Placeholder> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or_else(|| Placeholder::Unclosed { near: after.chars().take(20).collect() })?;
        let name = after[..end].trim();
        let value = vars.get(name).ok_or_else(|| Placeholder::NoValue { name: name.to_string() })?;
        used.insert(name.to_string());
        out.push_str(value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Substitute into the string values of a manifest. A string that is exactly one placeholder
/// takes the variable's own TOML type (so `M = "{{M}}"` becomes an integer).
fn substitute_value(
    v: &mut toml::Value,
    vars: &BTreeMap<String, toml::Value>,
    text: &BTreeMap<String, String>,
    used: &mut BTreeSet<String>,
) -> Result<(), InstanceError> {
    match v {
        toml::Value::String(s) => {
            let t = s.trim();
            if let Some(name) = t.strip_prefix("{{").and_then(|r| r.strip_suffix("}}")).map(str::trim) {
                if !name.contains("{{") && !name.contains("}}") {
                    let value = vars.get(name).ok_or_else(|| InstanceError::ManifestValue { name: name.to_string() })?;
                    used.insert(name.to_string());
                    *v = value.clone();
                    return Ok(());
                }
            }
            *s = substitute(s, text, used).map_err(InstanceError::ManifestText)?;
        }
        toml::Value::Array(a) => {
            for x in a {
                substitute_value(x, vars, text, used)?;
            }
        }
        toml::Value::Table(t) => {
            for (_, x) in t.iter_mut() {
                substitute_value(x, vars, text, used)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Stable shard of a case id: FNV-1a 64 of the id, modulo `count` (0-based). Independent of
/// the Rust version and platform, so every shard of a CI matrix agrees.
pub fn shard_of(id: &str, count: u32) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % u64::from(count.max(1))) as u32
}

/// Which cases a gate run selects.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// Families to run (all when empty).
    pub families: Vec<String>,
    /// Case ids or id prefixes to run (all when empty).
    pub cases: Vec<String>,
    /// `(index, count)`, index 1-based as on the command line (`--shard 2/4`).
    pub shard: Option<(u32, u32)>,
}

impl Selection {
    pub fn selects(&self, id: &str, family: &str) -> bool {
        (self.families.is_empty() || self.families.iter().any(|f| f == family))
            && (self.cases.is_empty()
                || self.cases.iter().any(|c| {
                    id == c
                        || id.starts_with(&format!("{}/", c.trim_end_matches('/')))
                        || (c.ends_with('*') && id.starts_with(c.trim_end_matches('*')))
                }))
            && self.shard.is_none_or(|(i, n)| shard_of(id, n) == i - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitution_fills_and_reports() {
        let vars: BTreeMap<String, String> = [("TM".to_string(), "128".to_string())].into();
        let mut used = BTreeSet::new();
        assert_eq!(substitute("a[{{TM}}, {{ TM }}]", &vars, &mut used).unwrap(), "a[128, 128]");
        assert!(used.contains("TM"));
        assert!(substitute("{{TN}}", &vars, &mut used).unwrap_err().to_string().contains("TN"));
        assert!(substitute("{{TM", &vars, &mut used).unwrap_err().to_string().contains("unclosed"));
    }

    #[test]
    fn shards_partition_ids() {
        let ids: Vec<String> = (0..200).map(|i| format!("fam/case{i}")).collect();
        let mut counts = [0usize; 4];
        for id in &ids {
            counts[shard_of(id, 4) as usize] += 1;
        }
        assert_eq!(counts.iter().sum::<usize>(), 200);
        assert!(counts.iter().all(|c| *c > 20), "{counts:?}");
        // Stable across runs and platforms (a fixed value).
        assert_eq!(shard_of("gemm/a", 1000), shard_of("gemm/a", 1000));
    }

    #[test]
    fn instance_merges_over_defaults() {
        let defaults: toml::Table = r#"
            target = "sm_90a"
            tiers = ["static", "compile"]
            [compile]
            spills = 0
            max_smem = 1000
        "#
        .parse()
        .unwrap();
        let inst: toml::Table = r#"
            id = "x"
            vars = { TM = 128, T = "sm_80" }
            target = "{{T}}"
            compile = { max_smem = 2000 }
        "#
        .parse()
        .unwrap();
        let (m, src, vars, warnings) = expand_instance(&defaults, &inst, "tile {{TM}}").unwrap();
        assert_eq!(src, "tile 128");
        assert_eq!(m.target, "sm_80");
        assert_eq!(m.compile, Some(CompileBounds { max_registers: None, spills: Some(0), max_smem: Some(2000) }));
        assert_eq!(vars["TM"], "128");
        assert!(warnings.is_empty());
        let unused: toml::Table = "id = \"y\"\nvars = { Q = 1 }".parse().unwrap();
        assert!(expand_instance(&defaults, &unused, "no vars").unwrap_err().to_string().contains("used neither"));
    }

    #[test]
    fn an_instance_workload_merges_over_the_family_workload() {
        // The family's [workload] (oracle, shapes, scalars) with one key per instance: row_reduce's
        // `reduce`. The merged table is a workload spec; without the instance's key it is not one
        // the runtime accepts (validation wants `reduce`), and a misspelt key is refused.
        let defaults: toml::Table = r#"
            target = "sm_90a"
            tiers = ["static", "compile", "gpu"]
            [workload]
            oracle = "row_reduce"
            headline = { R = 4096 }
            shapes = [{ R = 64 }]
            scalars = { s = 1.0 }
        "#
        .parse()
        .unwrap();
        let inst: toml::Table = "id = \"x\"\nvars = { K = \"max\" }\nworkload = { reduce = \"{{K}}\" }".parse().unwrap();
        let (m, _, _, warnings) = expand_instance(&defaults, &inst, "no placeholders").unwrap();
        assert!(warnings.is_empty());
        let w = m.workload.expect("merged");
        assert_eq!(w.get("reduce").and_then(|v| v.as_str()), Some("max"));
        assert_eq!(w.get("oracle").and_then(|v| v.as_str()), Some("row_reduce"));
        assert!(w.get("shapes").is_some() && w.get("scalars").is_some(), "the family's keys stay: {w:?}");
        let spec: crate::runtime::workload::WorkloadSpec = toml::Value::Table(w).try_into().unwrap();
        assert_eq!(spec.reduce, Some(crate::runtime::oracle::RowReduce::Max));
        let typo: toml::Table = "id = \"y\"\nworkload = { reduction = \"max\" }".parse().unwrap();
        let e = expand_instance(&defaults, &typo, "t").unwrap_err().to_string();
        assert!(e.contains("[workload] is not a workload spec") && e.contains("reduction"), "{e}");
    }
}
