//! The workload contract: what a kernel must compute, how it is judged, what the search may spend
//! and where it starts. Schema `cake.kernel-contract/1`, documented in `kernel-evolution/CONTRACT.md`.
//!
//! The contract is the authority: its `[workload]` table is a `cake run` workload (oracle, shapes,
//! headline, distributions, tolerances), its hash (SHA-256 of the file's bytes) is carried by every
//! database record, and a database made under one contract refuses another.
//!
//! Errors (all [`KevoError`]):
//! * `K001` the file cannot be read;
//! * `K002` not TOML of this schema (syntax, an unknown key, a value of the wrong type);
//! * `K003` a field is empty or out of range (schema, name, spec, target, search parameters);
//! * `K004` the budget is zero (no GPU evaluations or no wall time: nothing could run);
//! * `K005` a seed program is missing or unreadable;
//! * `K006` a seed program does not parse, type-check or verify (its findings are listed);
//! * `K007` the workload does not fit a seed (oracle roles, a shape that misses a dim or breaks a
//!   `multiple_of`);
//! * `K008` a permitted reference (peer) is unavailable: cuBLAS for an oracle with no cuBLAS peer,
//!   a command that is empty or not found;
//! * `K009` a seed's target differs from the contract's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cake::runtime::workload::{check_shape, WorkloadSpec};
use cake::target::TargetTable;
use serde::{Deserialize, Serialize};

use crate::error::{KevoError, Result};

pub const CONTRACT_SCHEMA: &str = "cake.kernel-contract/1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContractFile {
    /// Always [`CONTRACT_SCHEMA`].
    pub schema: String,
    /// A short name, `[a-z0-9-]+` (used in paths and reports).
    pub name: String,
    /// The math the kernel computes, in words (the authority when the oracle and a reader disagree).
    pub spec: String,
    /// The target every candidate is built for (`sm_90a`).
    pub target: String,
    /// Seed programs, relative to the contract file.
    pub seeds: Vec<String>,
    pub budget: Budget,
    /// Peers timed in the same run as the candidates.
    #[serde(default, rename = "reference")]
    pub references: Vec<Reference>,
    #[serde(default)]
    pub search: SearchParams,
    #[serde(default)]
    pub evaluation: EvaluationParams,
    /// A `cake run` workload (schema: `compiler/src/runtime/README.md`): the oracle, the correctness
    /// `shapes`, the timed `headline`, the input `distributions`, the `tolerance`.
    pub workload: WorkloadSpec,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Candidates evaluated on the GPU (each: every shape × distribution, and the headline timing).
    pub gpu_evaluations: u32,
    /// Wall-clock seconds of one `run` or `resume` invocation.
    pub wall_seconds: u64,
    /// Tokens an LLM proposer may spend (0: the built-in tactics alone).
    #[serde(default)]
    pub llm_tokens: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PeerKind {
    /// cuBLAS, timed by `cake bench --baseline cublas` in the same process as the candidate.
    Cublas,
    /// A command (a torch op, a Python library) run after the candidate in the same device call;
    /// it prints `{"median_ms": …}` as its last stdout line (CONTRACT.md).
    Command,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    pub name: String,
    pub kind: PeerKind,
    /// `kind = "command"` only: the program and its arguments; a program with a `/` is relative
    /// to the contract file, otherwise looked up on `PATH`.
    #[serde(default)]
    pub command: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SearchParams {
    /// Candidates generated per generation (before the hard gates).
    pub candidates_per_generation: u32,
    /// Of those that pass the gates, how many of the cost model's best go to the GPU.
    pub gpu_per_generation: u32,
    /// The tactic directory, relative to the contract file.
    pub tactics: String,
}

impl Default for SearchParams {
    fn default() -> SearchParams {
        // A generation of 12 rewrites and the 3 best predictions on the GPU: a 300-evaluation budget
        // is 100 generations, and the cost model filters three quarters of what verifies.
        SearchParams { candidates_per_generation: 12, gpu_per_generation: 3, tactics: "../tactics".to_string() }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvaluationParams {
    /// Wall-clock limit of one `cake run` run (one shape × distribution) and of a peer command.
    pub run_timeout_s: u64,
    /// Timed repeats at the headline (`cake bench --repeats`).
    pub bench_repeats: u32,
    /// Which candidates get the correctness sweep over every shape × distribution.
    pub sweep: Sweep,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sweep {
    /// Every evaluated candidate: the sweep, then the headline timing.
    #[default]
    Every,
    /// The headline first (checked and timed); the sweep only for a candidate faster than the best
    /// fully checked one, so the GPU time goes to candidates that could become the best.
    Improvements,
}

impl Default for EvaluationParams {
    fn default() -> EvaluationParams {
        // `cake run`'s own defaults: a 60 s limit per run, 20 timed repeats for bench.
        EvaluationParams { run_timeout_s: 60, bench_repeats: 20, sweep: Sweep::Every }
    }
}

/// One seed program, verified, in canonical form.
#[derive(Clone, Debug)]
pub struct Seed {
    pub path: PathBuf,
    /// The path as the contract writes it (relative to the contract), which records carry.
    pub rel: String,
    /// Canonical text (`cake fmt`'s printer).
    pub source: String,
}

/// A loaded, checked contract.
#[derive(Clone, Debug)]
pub struct Contract {
    pub path: PathBuf,
    pub file: ContractFile,
    /// SHA-256 of the contract file's bytes.
    pub hash: String,
    pub seeds: Vec<Seed>,
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    cake::runtime::record::sha256_hex(bytes)
}

fn subject(path: &Path, key: &str) -> String {
    if key.is_empty() {
        path.display().to_string()
    } else {
        format!("{}: {key}", path.display())
    }
}

const SCHEMA_HELP: &str = "see kernel-evolution/CONTRACT.md for the contract schema";

impl Contract {
    /// Read, parse and check a contract and its seeds.
    pub fn load(path: &Path) -> Result<Contract> {
        let bytes = std::fs::read(path).map_err(|e| {
            KevoError::new("K001", subject(path, ""), format!("cannot read the contract: {e}"), "give the path of a contract TOML file (examples: kernel-evolution/contracts/)")
        })?;
        let text = String::from_utf8(bytes.clone())
            .map_err(|_| KevoError::new("K002", subject(path, ""), "the contract is not UTF-8 text", SCHEMA_HELP))?;
        let file: ContractFile = toml::from_str(&text).map_err(|e| {
            let line = e.span().map(|s| text[..s.start.min(text.len())].lines().count().max(1));
            let at = line.map(|l| format!(" (line {l})")).unwrap_or_default();
            KevoError::new("K002", subject(path, ""), format!("not a valid contract{at}: {}", e.message().trim()), SCHEMA_HELP)
        })?;
        let contract = Contract { path: path.to_path_buf(), hash: sha256_hex(&bytes), seeds: Vec::new(), file };
        contract.check_fields()?;
        let seeds = contract.load_seeds()?;
        let contract = Contract { seeds, ..contract };
        contract.check_references()?;
        Ok(contract)
    }

    /// The directory relative paths in the contract are resolved against.
    pub fn dir(&self) -> PathBuf {
        self.path.parent().map(Path::to_path_buf).filter(|p| !p.as_os_str().is_empty()).unwrap_or_else(|| PathBuf::from("."))
    }

    pub fn tactics_dir(&self) -> PathBuf {
        self.dir().join(&self.file.search.tactics)
    }

    /// The `[workload]` table as a `cake run --workload` file.
    pub fn workload_toml(&self) -> String {
        toml::to_string(&self.file.workload).unwrap_or_default()
    }

    fn check_fields(&self) -> Result<()> {
        let f = &self.file;
        let p = &self.path;
        if f.schema != CONTRACT_SCHEMA {
            return Err(KevoError::new("K003", subject(p, "schema"), format!("schema is `{}`, expected `{CONTRACT_SCHEMA}`", f.schema), format!("write `schema = \"{CONTRACT_SCHEMA}\"`")));
        }
        if f.name.is_empty() || !f.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
            return Err(KevoError::new("K003", subject(p, "name"), format!("name `{}` is not `[a-z0-9-]+`", f.name), "use lowercase letters, digits and dashes"));
        }
        if f.spec.trim().is_empty() {
            return Err(KevoError::new("K003", subject(p, "spec"), "the math spec is empty", "say in words what the kernel computes (the oracle checks it)"));
        }
        if TargetTable::builtin().get(&f.target).is_none() {
            return Err(KevoError::new(
                "K003",
                subject(p, "target"),
                format!("unknown target `{}`", f.target),
                format!("the targets are: {}", TargetTable::builtin().names().join(", ")),
            ));
        }
        if f.budget.gpu_evaluations == 0 {
            return Err(KevoError::new("K004", subject(p, "budget.gpu_evaluations"), "the budget allows no GPU evaluation", "set `budget.gpu_evaluations` to at least 1"));
        }
        if f.budget.wall_seconds == 0 {
            return Err(KevoError::new("K004", subject(p, "budget.wall_seconds"), "the budget allows no wall time", "set `budget.wall_seconds` to at least 1"));
        }
        let s = &f.search;
        if s.candidates_per_generation == 0 || s.gpu_per_generation == 0 || s.gpu_per_generation > s.candidates_per_generation {
            return Err(KevoError::new(
                "K003",
                subject(p, "search"),
                format!("need 1 ≤ gpu_per_generation ({}) ≤ candidates_per_generation ({})", s.gpu_per_generation, s.candidates_per_generation),
                "fix the `[search]` table",
            ));
        }
        if f.evaluation.run_timeout_s == 0 || f.evaluation.bench_repeats == 0 {
            return Err(KevoError::new("K003", subject(p, "evaluation"), "run_timeout_s and bench_repeats must be at least 1", "fix the `[evaluation]` table"));
        }
        if f.workload.shapes.is_empty() {
            return Err(KevoError::new("K003", subject(p, "workload.shapes"), "no correctness shapes", "list the shapes the oracle checks, besides the headline"));
        }
        if f.seeds.is_empty() {
            return Err(KevoError::new("K005", subject(p, "seeds"), "no seed program", "list at least one seed `.cake` file, relative to the contract"));
        }
        Ok(())
    }

    fn load_seeds(&self) -> Result<Vec<Seed>> {
        let mut seeds = Vec::new();
        for (i, rel) in self.file.seeds.iter().enumerate() {
            let key = format!("seeds[{i}]");
            let path = self.dir().join(rel);
            let text = std::fs::read_to_string(&path).map_err(|e| {
                KevoError::new("K005", subject(&self.path, &key), format!("cannot read seed `{}`: {e}", path.display()), "seed paths are relative to the contract file")
            })?;
            let out = cake::check::check_source(&text);
            let Some(validated) = out.validated else {
                let errors: Vec<String> = out
                    .diagnostics
                    .iter()
                    .filter(|d| d.is_error())
                    .take(5)
                    .map(|d| format!("{} at byte {}: {}", d.code, d.primary.span.start, d.message))
                    .collect();
                return Err(KevoError::new(
                    "K006",
                    subject(&self.path, &key),
                    format!("seed `{}` does not verify: {}", path.display(), errors.join("; ")),
                    format!("run `cake check {}` and fix the findings; the search starts only from verified programs", path.display()),
                ));
            };
            let m = validated.module();
            if m.target != self.file.target {
                return Err(KevoError::new(
                    "K009",
                    subject(&self.path, &key),
                    format!("seed `{}` targets `{}`, the contract `{}`", path.display(), m.target, self.file.target),
                    "make the seed's `kernel … target` match the contract's `target`",
                ));
            }
            let misfit = |msg: String| {
                KevoError::new("K007", subject(&self.path, "workload"), format!("the workload does not fit seed `{}`: {msg}", path.display()), "fix `[workload]` (oracle args, shapes) or the seed's dims")
            };
            self.file.workload.validate(m).map_err(|e| misfit(e.0))?;
            for shape in self.file.workload.shapes.iter().chain(std::iter::once(&self.file.workload.headline)) {
                check_shape(m, shape).map_err(|e| misfit(format!("shape {}: {e}", shape_text(shape))))?;
            }
            let file = out.file.expect("a validated program parsed");
            seeds.push(Seed { path, rel: rel.clone(), source: cake::syntax::print(&file) });
        }
        Ok(seeds)
    }

    fn check_references(&self) -> Result<()> {
        for (i, r) in self.file.references.iter().enumerate() {
            let key = format!("reference[{i}] ({})", r.name);
            match r.kind {
                PeerKind::Cublas => {
                    if !self.file.workload.oracle.has_cublas_peer() {
                        return Err(KevoError::new(
                            "K008",
                            subject(&self.path, &key),
                            format!("oracle `{}` has no cuBLAS peer", self.file.workload.oracle.name()),
                            "drop the cublas reference or give a `kind = \"command\"` peer (a torch op, a Python library)",
                        ));
                    }
                }
                PeerKind::Command => {
                    let Some(program) = r.command.first() else {
                        return Err(KevoError::new("K008", subject(&self.path, &key), "a command peer with an empty `command`", "give the program and its arguments, `command = [\"python3\", \"peers/x.py\"]`"));
                    };
                    if let Some(a) = r.command.iter().map(|a| self.peer_arg(a)).find(|a| a.contains('{')) {
                        return Err(KevoError::new(
                            "K008",
                            subject(&self.path, &key),
                            format!("peer argument `{a}` names a placeholder that is not a headline dim or `{{REPEATS}}`"),
                            "use `{DIM}` for a dim of `workload.headline`, or `{REPEATS}`",
                        ));
                    }
                    if self.resolve_program(program).is_none() {
                        return Err(KevoError::new(
                            "K008",
                            subject(&self.path, &key),
                            format!("peer program `{program}` is not found"),
                            "install it, fix the path (relative to the contract), or drop the reference",
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// A peer argument with `{DIM}` (a headline dim) and `{REPEATS}` filled in.
    pub fn peer_arg(&self, arg: &str) -> String {
        let mut out = arg.replace("{REPEATS}", &self.file.evaluation.bench_repeats.to_string());
        for (k, v) in &self.file.workload.headline {
            out = out.replace(&format!("{{{k}}}"), &v.to_string());
        }
        out
    }

    /// A peer's program: with a `/`, relative to the contract; otherwise on `PATH`.
    pub fn resolve_program(&self, program: &str) -> Option<PathBuf> {
        if program.contains('/') {
            let p = self.dir().join(program);
            return p.is_file().then_some(p);
        }
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file())
    }
}

/// `B=32,N=65536,…` (the order of the map: dims sorted by name).
pub fn shape_text(shape: &BTreeMap<String, i64>) -> String {
    shape.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}
