//! The op catalog, loaded from data (`compiler/catalog/*.toml`, one file per op class).
//!
//! Ops are data that the engines interpret: each entry carries its signature, type rule (P4),
//! effects (P5/P7), target requirements, lowering note and hardware documentation (P8). The
//! built-in catalog is embedded at build time (`build.rs`); [`Catalog::from_toml_files`],
//! [`Catalog::load_dir`] and [`Catalog::overlay`] read extra or replacement files at run time, so
//! the evolution engine can propose a primitive by writing a file.
//!
//! Loading validates the principles and fails with a [`CatalogError`] naming the file and the op:
//! unique names, known features, effects on real params, non-empty docs, a type rule for every op,
//! a result rule from the fixed vocabulary. The constraint strings themselves are evaluated by the
//! type checker (`crate::pred`); here they are only parsed, so a malformed rule fails at load time.
//! The schema is documented in `compiler/catalog/README.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::pred::{self, PExpr};
use crate::target::{TargetInfo, TargetTable};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_catalog.rs"));
}

/// Directory of the built-in catalog, relative to the crate root (prefix of built-in file names).
pub const BUILTIN_DIR: &str = "catalog";

// ─── Schema ─────────────────────────────────────────────────────────────────────────────────────

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpClass {
    Compute,
    Memory,
    Sync,
    Math,
    Control,
}

impl OpClass {
    pub const ALL: [OpClass; 5] = [OpClass::Compute, OpClass::Memory, OpClass::Sync, OpClass::Math, OpClass::Control];

    pub fn as_str(self) -> &'static str {
        match self {
            OpClass::Compute => "compute",
            OpClass::Memory => "memory",
            OpClass::Sync => "sync",
            OpClass::Math => "math",
            OpClass::Control => "control",
        }
    }
}

/// `stmt`: called for its effect; `expr`: returns a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpForm {
    Stmt,
    Expr,
}

/// Who executes one call (see `catalog/README.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueScope {
    /// Every thread that reaches it, independently.
    Thread,
    /// Warp-collective (`.sync.aligned`).
    Warp,
    /// Warpgroup-collective: 4 consecutive warps, the first at a warp index divisible by 4.
    Warpgroup,
    /// Every thread of the calling role, uniformly (role-level state or work split over the role).
    Role,
    /// One thread of the role, elected by the compiler.
    Elected,
    /// Every thread of the block.
    Block,
    /// Every thread of every block of the cluster.
    Cluster,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamKind {
    /// A register fragment.
    Frag,
    /// A shared region or view, or a window of one.
    Smem,
    /// A window of a global tensor.
    Global,
    /// A global or a shared window.
    Mem,
    /// Any scalar- or fragment-valued expression.
    Value,
    /// An integer expression (may be a run-time value).
    Int,
    /// A compile-time integer.
    ConstInt,
    Float,
    /// A dtype name.
    Dtype,
    Pipeline,
    Barrier,
    /// A pipeline or a barrier.
    Sync,
    Role,
}

impl ParamKind {
    /// The spelling used in catalog files.
    pub fn as_str(self) -> &'static str {
        match self {
            ParamKind::Frag => "frag",
            ParamKind::Smem => "smem",
            ParamKind::Global => "global",
            ParamKind::Mem => "mem",
            ParamKind::Value => "value",
            ParamKind::Int => "int",
            ParamKind::ConstInt => "const_int",
            ParamKind::Float => "float",
            ParamKind::Dtype => "dtype",
            ParamKind::Pipeline => "pipeline",
            ParamKind::Barrier => "barrier",
            ParamKind::Sync => "sync",
            ParamKind::Role => "role",
        }
    }

    /// Kinds the constraint language has facts about; a param of any other kind is fully checked
    /// by its kind, which is when `type_rule = ["true"]` is allowed.
    pub fn has_type_facts(self) -> bool {
        !matches!(self, ParamKind::Pipeline | ParamKind::Barrier | ParamKind::Sync | ParamKind::Role | ParamKind::Int)
    }

    /// Kinds that name memory or registers the op may read or write.
    pub fn is_data(self) -> bool {
        matches!(self, ParamKind::Frag | ParamKind::Smem | ParamKind::Global | ParamKind::Mem)
    }

    /// Whether an argument of this kind may be a pipeline (for `barrier = "full" | "empty"`).
    pub fn may_be_pipeline(self) -> bool {
        matches!(self, ParamKind::Pipeline | ParamKind::Sync)
    }
}

/// How a statement op uses a data param.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    Read,
    Write,
    Readwrite,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Readwrite => "readwrite",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamDef {
    pub name: String,
    pub kind: ParamKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
    /// Must be passed as `name=value`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub named: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub optional: bool,
    /// Source text of the default value (with `optional = true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectAccess {
    Read,
    Write,
    Readwrite,
    Arrive,
    Wait,
    ExpectTx,
    CompleteTx,
    Fence,
    Commit,
}

impl EffectAccess {
    /// The spelling used in catalog files.
    pub fn as_str(self) -> &'static str {
        match self {
            EffectAccess::Read => "read",
            EffectAccess::Write => "write",
            EffectAccess::Readwrite => "readwrite",
            EffectAccess::Arrive => "arrive",
            EffectAccess::Wait => "wait",
            EffectAccess::ExpectTx => "expect_tx",
            EffectAccess::CompleteTx => "complete_tx",
            EffectAccess::Fence => "fence",
            EffectAccess::Commit => "commit",
        }
    }

    /// A data access (which must name its proxy).
    pub fn is_data(self) -> bool {
        matches!(self, EffectAccess::Read | EffectAccess::Write | EffectAccess::Readwrite)
    }

    pub fn reads(self) -> bool {
        matches!(self, EffectAccess::Read | EffectAccess::Readwrite)
    }

    pub fn writes(self) -> bool {
        matches!(self, EffectAccess::Write | EffectAccess::Readwrite)
    }
}

/// The memory proxy an access goes through: generic (ld/st) or async (TMA, wgmma, tcgen05).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Proxy {
    Generic,
    Async,
    #[default]
    None,
}

/// Which of a pipeline stage's two barriers an effect touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PipeBarrier {
    Full,
    Empty,
}

/// Implicit resources an effect may name instead of a param (see `catalog/README.md`).
pub const IMPLICIT_RESOURCES: &[&str] =
    &["@block", "@cluster", "@grid", "@smem", "@wgmma_group", "@cp_async_group", "@bulk_group"];

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Effect {
    /// A param name or one of [`IMPLICIT_RESOURCES`].
    pub on: String,
    pub access: EffectAccess,
    #[serde(default)]
    pub proxy: Proxy,
    /// The effect completes later (a wait, commit or barrier says when).
    #[serde(rename = "async", default, skip_serializing_if = "is_false")]
    pub is_async: bool,
    /// A commutative read-modify-write of each element (`red` / `atom`): concurrent atomic effects
    /// of different threads on one element accumulate instead of racing, and the destination's
    /// prior contents are read (an `inout` tensor).
    #[serde(default, skip_serializing_if = "is_false")]
    pub atomic: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub barrier: Option<PipeBarrier>,
}

impl Effect {
    /// Whether the effect is on an implicit resource rather than a param.
    pub fn is_implicit(&self) -> bool {
        self.on.starts_with('@')
    }
}

/// Features an op needs only when a condition (in the constraint language) holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConditionalRequire {
    pub when: String,
    pub features: Vec<String>,
}

/// The result-type rule of an expression op.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultRule {
    /// Statement ops.
    #[default]
    None,
    /// The type of param `x`.
    Same(String),
    /// NumPy broadcast of the params' shapes; their dtypes must agree.
    Broadcast(Vec<String>),
    /// Broadcast shape of `a` and `b`, dtype `bool`.
    Compare(String, String),
    /// Broadcast shape of `c`, `a`, `b`, dtype of `a`.
    Select(String, String, String),
    /// `x` without dimension `axis`, dtype of `x`.
    Reduce { x: String, axis: String },
    /// `x` without dimension `axis`, dtype `i32`.
    ReduceIndex { x: String, axis: String },
    /// Shape of `x`, dtype named by the `dtype` param `to`.
    Cast { x: String, to: String },
    /// Shape of `x`, dtype `i32` (each element's position along `axis`).
    Index { x: String, axis: String },
}

/// The result rules a catalog op may declare.
const RESULT_RULES: &str = "expected one of none, same(x), broadcast(a, b, ...), compare(a, b), select(c, a, b), \
                            reduce(x, axis), reduce_index(x, axis), cast(x, to), index(x, axis)";

/// A catalog op's `result` that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResultRuleError {
    /// `problem` says what is wrong with `text`.
    #[error("`{text}`: {problem}")]
    Malformed { text: String, problem: String },
    #[error("unknown result rule `{head}`: {RESULT_RULES}")]
    Unknown { head: String },
}

impl ResultRule {
    /// Parse `none`, `same(x)`, `broadcast(a, b, ...)`, `compare(a, b)`, `select(c, a, b)`,
    /// `reduce(x, axis)`, `reduce_index(x, axis)`, `cast(x, to)`, `index(x, axis)`.
    pub fn parse(text: &str) -> Result<ResultRule, ResultRuleError> {
        let text = text.trim();
        if text == "none" {
            return Ok(ResultRule::None);
        }
        let fail = |problem: String| ResultRuleError::Malformed { text: text.to_string(), problem };
        let (head, rest) = text.split_once('(').ok_or_else(|| fail(RESULT_RULES.to_string()))?;
        let inner = rest.strip_suffix(')').ok_or_else(|| fail("missing `)`".into()))?;
        let args: Vec<String> = inner.split(',').map(|a| a.trim().to_string()).collect();
        if args.iter().any(|a| !is_identifier(a)) {
            return Err(fail("arguments must be parameter names".into()));
        }
        let arity = |n: usize| -> Result<(), ResultRuleError> {
            if args.len() == n {
                Ok(())
            } else {
                Err(fail(format!("`{}` takes {n} argument(s)", head.trim())))
            }
        };
        Ok(match head.trim() {
            "same" => {
                arity(1)?;
                ResultRule::Same(args[0].clone())
            }
            "broadcast" => {
                if args.len() < 2 {
                    return Err(fail("`broadcast` takes two or more arguments".into()));
                }
                ResultRule::Broadcast(args)
            }
            "compare" => {
                arity(2)?;
                ResultRule::Compare(args[0].clone(), args[1].clone())
            }
            "select" => {
                arity(3)?;
                ResultRule::Select(args[0].clone(), args[1].clone(), args[2].clone())
            }
            "reduce" => {
                arity(2)?;
                ResultRule::Reduce { x: args[0].clone(), axis: args[1].clone() }
            }
            "reduce_index" => {
                arity(2)?;
                ResultRule::ReduceIndex { x: args[0].clone(), axis: args[1].clone() }
            }
            "cast" => {
                arity(2)?;
                ResultRule::Cast { x: args[0].clone(), to: args[1].clone() }
            }
            "index" => {
                arity(2)?;
                ResultRule::Index { x: args[0].clone(), axis: args[1].clone() }
            }
            other => return Err(ResultRuleError::Unknown { head: other.to_string() }),
        })
    }

    /// The params the rule mentions.
    pub fn params(&self) -> Vec<&str> {
        match self {
            ResultRule::None => vec![],
            ResultRule::Same(x) => vec![x],
            ResultRule::Broadcast(xs) => xs.iter().map(String::as_str).collect(),
            ResultRule::Compare(a, b) => vec![a, b],
            ResultRule::Select(c, a, b) => vec![c, a, b],
            ResultRule::Reduce { x, axis } | ResultRule::ReduceIndex { x, axis } | ResultRule::Index { x, axis } => vec![x, axis],
            ResultRule::Cast { x, to } => vec![x, to],
        }
    }
}

impl fmt::Display for ResultRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResultRule::None => write!(f, "none"),
            ResultRule::Same(x) => write!(f, "same({x})"),
            ResultRule::Broadcast(xs) => write!(f, "broadcast({})", xs.join(", ")),
            ResultRule::Compare(a, b) => write!(f, "compare({a}, {b})"),
            ResultRule::Select(c, a, b) => write!(f, "select({c}, {a}, {b})"),
            ResultRule::Reduce { x, axis } => write!(f, "reduce({x}, {axis})"),
            ResultRule::ReduceIndex { x, axis } => write!(f, "reduce_index({x}, {axis})"),
            ResultRule::Cast { x, to } => write!(f, "cast({x}, {to})"),
            ResultRule::Index { x, axis } => write!(f, "index({x}, {axis})"),
        }
    }
}

/// One op of the catalog, validated.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpDef {
    pub name: String,
    pub class: OpClass,
    pub form: OpForm,
    pub summary: String,
    /// Target features (from `targets.toml`); empty = everywhere.
    pub requires: Vec<String>,
    /// Features needed only when a condition holds (e.g. fp8 operands).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requires_when: Vec<ConditionalRequire>,
    pub issue: IssueScope,
    pub params: Vec<ParamDef>,
    /// Constraints in the predicate language, checked in order.
    pub type_rule: Vec<String>,
    /// The same constraints, parsed.
    #[serde(skip)]
    pub type_rule_parsed: Vec<PExpr>,
    /// Per constraint, the help line a failing finding prints (`{term}` holes take the
    /// program's values); `None` where the catalog gives none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub type_rule_help: Vec<Option<String>>,
    pub result: ResultRule,
    /// No effects (expression ops only).
    pub pure: bool,
    pub effects: Vec<Effect>,
    pub lowering: String,
    pub hardware: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
    /// The file the op came from (`catalog/compute.toml` for built-ins).
    pub file: String,
}

impl OpDef {
    pub fn param(&self, name: &str) -> Option<&ParamDef> {
        self.params.iter().find(|p| p.name == name)
    }

    pub fn param_index(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|p| p.name == name)
    }

    /// Params passed by position, in order.
    pub fn positional_params(&self) -> impl Iterator<Item = &ParamDef> {
        self.params.iter().filter(|p| !p.named)
    }

    /// Params passed as `name=value`.
    pub fn named_params(&self) -> impl Iterator<Item = &ParamDef> {
        self.params.iter().filter(|p| p.named)
    }

    /// Effects on one param (or implicit resource).
    pub fn effects_on<'a>(&'a self, on: &'a str) -> impl Iterator<Item = &'a Effect> + 'a {
        self.effects.iter().filter(move |e| e.on == on)
    }

    /// Unconditional `requires` features the target lacks.
    pub fn missing_on(&self, target: &TargetInfo) -> Vec<&str> {
        target.missing(self.requires.iter().map(String::as_str))
    }

    /// Whether every unconditional requirement holds on the target (conditional ones depend on
    /// the call's argument types; the checker evaluates `requires_when`).
    pub fn available_on(&self, target: &TargetInfo) -> bool {
        self.missing_on(target).is_empty()
    }
}

// ─── Errors ─────────────────────────────────────────────────────────────────────────────────────

/// A catalog that failed to load: which file, which op, what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogError {
    pub file: String,
    pub op: Option<String>,
    pub message: String,
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file)?;
        if let Some(op) = &self.op {
            write!(f, "op `{op}`: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for CatalogError {}

// ─── Catalog ────────────────────────────────────────────────────────────────────────────────────

/// Every op, in file order (files sorted by name as given).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Catalog {
    pub ops: Vec<OpDef>,
}

/// What one catalog file holds, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    op: Vec<RawOp>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOp {
    name: String,
    class: OpClass,
    form: OpForm,
    #[serde(default)]
    summary: String,
    #[serde(default)]
    requires: Vec<String>,
    #[serde(default)]
    requires_when: Vec<ConditionalRequire>,
    issue: IssueScope,
    #[serde(default)]
    params: Vec<ParamDef>,
    #[serde(default)]
    type_rule: Vec<RuleEntry>,
    #[serde(default)]
    result: Option<String>,
    #[serde(default)]
    pure: bool,
    effects: Option<Vec<Effect>>,
    #[serde(default)]
    lowering: String,
    #[serde(default)]
    hardware: String,
    #[serde(default)]
    example: Option<String>,
}

/// One constraint of a type rule: the predicate alone, or with the help line a finding prints
/// when it fails (`{term}` holes are filled with the program's values).
#[derive(Deserialize)]
#[serde(untagged)]
enum RuleEntry {
    Plain(String),
    WithHelp {
        rule: String,
        help: String,
    },
}

impl RuleEntry {
    fn rule(&self) -> &str {
        match self {
            RuleEntry::Plain(r) | RuleEntry::WithHelp { rule: r, .. } => r,
        }
    }

    fn help(&self) -> Option<&str> {
        match self {
            RuleEntry::Plain(_) => None,
            RuleEntry::WithHelp { help, .. } => Some(help),
        }
    }
}

/// Words an op may not be named: the language's keywords and dtype names.
const RESERVED: &[&str] = &[
    "kernel", "target", "dim", "const", "scalar", "in", "out", "inout", "grid", "smem", "view", "role", "barrier",
    "pipeline", "on", "reg", "let", "for", "if", "else", "true", "false", "inf", "bool", "i32", "u32", "i64", "f32",
    "f16", "bf16", "f8e4m3", "f8e5m2",
];

/// Facts of the constraint language whose first argument is a param.
const PARAM_FACTS: &[&str] =
    &["dtype", "rank", "dim", "numel", "bytes", "scope", "space", "swizzle", "box", "value", "has_tma", "is_literal", "same_shape"];

/// Facts all of whose arguments are params.
const PARAM_PAIR_FACTS: &[&str] = &["same_shape"];

impl Catalog {
    /// The built-in catalog (parsed and validated once against the built-in target table).
    /// Panics if the embedded data is invalid, which the crate's tests rule out.
    pub fn builtin() -> &'static Catalog {
        static CATALOG: OnceLock<Catalog> = OnceLock::new();
        CATALOG.get_or_init(|| match Catalog::from_toml_files(&Catalog::builtin_files()) {
            Ok(c) => c,
            Err(e) => panic!("the built-in op catalog is invalid: {e}"),
        })
    }

    /// The embedded catalog files as (`catalog/<file>.toml`, contents), sorted by name.
    pub fn builtin_files() -> Vec<(&'static str, &'static str)> {
        static NAMES: OnceLock<Vec<String>> = OnceLock::new();
        let names = NAMES.get_or_init(|| embedded::CATALOG_TOML.iter().map(|(n, _)| format!("{BUILTIN_DIR}/{n}")).collect());
        names.iter().map(String::as_str).zip(embedded::CATALOG_TOML.iter().map(|(_, text)| *text)).collect()
    }

    /// Parse and validate catalog files (name, contents) against the built-in target table.
    pub fn from_toml_files(files: &[(&str, &str)]) -> Result<Catalog, CatalogError> {
        Catalog::from_toml_files_with(files, TargetTable::builtin())
    }

    /// Parse and validate catalog files against a given target table.
    pub fn from_toml_files_with(files: &[(&str, &str)], targets: &TargetTable) -> Result<Catalog, CatalogError> {
        let mut ops: Vec<OpDef> = Vec::new();
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        for (file, text) in files {
            let raw: RawFile = toml::from_str(text).map_err(|e| CatalogError {
                file: file.to_string(),
                op: None,
                message: e.to_string().trim_end().to_string(),
            })?;
            let file_class = Path::new(file)
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|stem| OpClass::ALL.into_iter().find(|c| c.as_str() == stem));
            for raw_op in raw.op {
                let op = validate_op(raw_op, file, file_class, targets)?;
                if let Some(first) = seen.get(&op.name) {
                    return Err(CatalogError {
                        file: file.to_string(),
                        op: Some(op.name.clone()),
                        message: format!("defined twice (first in {first}); op names are unique (P3)"),
                    });
                }
                seen.insert(op.name.clone(), file.to_string());
                ops.push(op);
            }
        }
        Ok(Catalog { ops })
    }

    /// Load every `*.toml` file of a directory (sorted by name), against the built-in targets.
    pub fn load_dir(path: impl AsRef<Path>) -> Result<Catalog, CatalogError> {
        Catalog::load_dir_with(path, TargetTable::builtin())
    }

    /// Load every `*.toml` file of a directory against a given target table.
    pub fn load_dir_with(path: impl AsRef<Path>, targets: &TargetTable) -> Result<Catalog, CatalogError> {
        let files = read_toml_dir(path.as_ref())?;
        let borrowed: Vec<(&str, &str)> = files.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
        Catalog::from_toml_files_with(&borrowed, targets)
    }

    /// The built-in files with `extra` layered on top: an extra file whose file name equals a
    /// built-in one (`compute.toml`) replaces it, any other is added.
    pub fn overlay(extra: &[(&str, &str)]) -> Result<Catalog, CatalogError> {
        let base_name = |n: &str| Path::new(n).file_name().and_then(|s| s.to_str()).unwrap_or(n).to_string();
        let replaced: BTreeSet<String> = extra.iter().map(|(n, _)| base_name(n)).collect();
        let mut files: Vec<(&str, &str)> =
            Catalog::builtin_files().into_iter().filter(|(n, _)| !replaced.contains(&base_name(n))).collect();
        files.extend_from_slice(extra);
        Catalog::from_toml_files(&files)
    }

    /// The op called `name`.
    pub fn get(&self, name: &str) -> Option<&OpDef> {
        self.ops.iter().find(|op| op.name == name)
    }

    /// Op names, in catalog order.
    pub fn names(&self) -> Vec<&str> {
        self.ops.iter().map(|op| op.name.as_str()).collect()
    }

    /// Ops of one class, in catalog order.
    pub fn ops_in_class(&self, class: OpClass) -> impl Iterator<Item = &OpDef> {
        self.ops.iter().filter(move |op| op.class == class)
    }

    /// Ops the target cannot run: some unconditional `requires` feature is missing.
    pub fn ops_missing_on(&self, target: &TargetInfo) -> Vec<&OpDef> {
        self.ops.iter().filter(|op| !op.available_on(target)).collect()
    }
}

fn read_toml_dir(dir: &Path) -> Result<Vec<(String, String)>, CatalogError> {
    let io_err = |file: &Path, e: std::io::Error| CatalogError {
        file: file.display().to_string(),
        op: None,
        message: format!("cannot read: {e}"),
    };
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| io_err(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| std::fs::read_to_string(&p).map(|t| (p.display().to_string(), t)).map_err(|e| io_err(&p, e)))
        .collect()
}

fn validate_op(raw: RawOp, file: &str, file_class: Option<OpClass>, targets: &TargetTable) -> Result<OpDef, CatalogError> {
    let name = raw.name.clone();
    let err = |message: String| CatalogError { file: file.to_string(), op: Some(name.clone()), message };

    if !is_identifier(&raw.name) || RESERVED.contains(&raw.name.as_str()) {
        return Err(err("op names are lower-case identifiers and not a keyword or dtype name".into()));
    }
    if let Some(c) = file_class {
        if c != raw.class {
            return Err(err(format!("class `{}` in {file}, which holds `{}` ops", raw.class.as_str(), c.as_str())));
        }
    }
    for (field, text) in [("summary", &raw.summary), ("lowering", &raw.lowering), ("hardware", &raw.hardware)] {
        if text.trim().is_empty() {
            let why = if field == "hardware" { " (P8: every op documents its hardware behaviour)" } else { "" };
            return Err(err(format!("`{field}` is missing or empty{why}")));
        }
    }
    if let Some(example) = &raw.example {
        if !example.contains(&format!("{}(", raw.name)) {
            return Err(err(format!("`example` does not call the op: `{example}`")));
        }
    }

    // Target features.
    let check_feature = |f: &String| -> Result<(), CatalogError> {
        if targets.is_feature(f) {
            Ok(())
        } else {
            Err(err(format!("requires unknown feature `{f}` (not in targets.toml [features])")))
        }
    };
    raw.requires.iter().try_for_each(check_feature)?;

    // Params.
    let mut names = BTreeSet::new();
    let mut seen_named = false;
    for p in &raw.params {
        if !is_identifier(&p.name) {
            return Err(err(format!("param name `{}` is not an identifier", p.name)));
        }
        if !names.insert(p.name.as_str()) {
            return Err(err(format!("param `{}` declared twice", p.name)));
        }
        if p.optional != p.default.is_some() {
            return Err(err(format!("param `{}`: `optional = true` and `default` go together", p.name)));
        }
        if p.named {
            seen_named = true;
        } else if seen_named {
            return Err(err(format!("positional param `{}` follows a named one", p.name)));
        }
    }
    let param = |n: &str| raw.params.iter().find(|p| p.name == n);

    // Conditional requirements.
    for cond in &raw.requires_when {
        cond.features.iter().try_for_each(check_feature)?;
        if cond.features.is_empty() {
            return Err(err("a `requires_when` entry names no features".into()));
        }
        parse_constraint(&cond.when, &raw.params).map_err(|m| err(format!("requires_when `{}`: {m}", cond.when)))?;
    }

    // Type rule (P4).
    if raw.type_rule.is_empty() {
        return Err(err("`type_rule` is missing or empty (P4): state at least one constraint, or [\"true\"] where the param kinds say it all".into()));
    }
    let mut type_rule_parsed = Vec::new();
    let type_rule: Vec<String> = raw.type_rule.iter().map(|r| r.rule().to_string()).collect();
    let type_rule_help: Vec<Option<String>> = raw.type_rule.iter().map(|r| r.help().map(str::to_string)).collect();
    for c in &type_rule {
        if c.trim() == "true" {
            if raw.type_rule.len() > 1 {
                return Err(err("`true` must be the only constraint of a type rule".into()));
            }
            if let Some(p) = raw.params.iter().find(|p| p.kind.has_type_facts()) {
                return Err(err(format!(
                    "type_rule = [\"true\"] is only for ops whose params carry no type facts; param `{}` ({}) needs a constraint",
                    p.name,
                    p.kind.as_str()
                )));
            }
        }
        type_rule_parsed.push(parse_constraint(c, &raw.params).map_err(|m| err(format!("type_rule `{c}`: {m}")))?);
    }

    // Result rule.
    let result = match &raw.result {
        Some(text) => ResultRule::parse(text).map_err(|m| err(format!("result: {m}")))?,
        None => ResultRule::None,
    };
    match raw.form {
        OpForm::Stmt if result != ResultRule::None => return Err(err("a `stmt` op has `result = \"none\"`".into())),
        OpForm::Expr if result == ResultRule::None => {
            return Err(err("an `expr` op needs a result rule (same, broadcast, compare, select, reduce, reduce_index, cast)".into()))
        }
        _ => {}
    }
    for p in result.params() {
        if param(p).is_none() {
            return Err(err(format!("result `{result}` names `{p}`, which is not a param")));
        }
    }
    match &result {
        ResultRule::Cast { to, .. } if param(to).map(|p| p.kind) != Some(ParamKind::Dtype) => {
            return Err(err(format!("result `{result}`: `{to}` must be a `dtype` param")));
        }
        ResultRule::Reduce { axis, .. } | ResultRule::ReduceIndex { axis, .. } | ResultRule::Index { axis, .. }
            if param(axis).map(|p| p.kind) != Some(ParamKind::ConstInt) =>
        {
            return Err(err(format!("result `{result}`: `{axis}` must be a `const_int` param")));
        }
        _ => {}
    }

    // Effects (P5, P7).
    let effects = match raw.effects {
        Some(e) => e,
        None => {
            return Err(err(
                "`effects` is missing: declare them (P5/P7), or `pure = true` with `effects = []` for a pure expression".into(),
            ))
        }
    };
    if raw.pure {
        if raw.form != OpForm::Expr {
            return Err(err("`pure = true` is only for `expr` ops".into()));
        }
        if !effects.is_empty() {
            return Err(err("a `pure` op has `effects = []`".into()));
        }
        if let Some(p) = raw.params.iter().find(|p| p.access.is_some()) {
            return Err(err(format!("param `{}` of a pure op declares an `access`", p.name)));
        }
    } else if effects.is_empty() {
        return Err(err("`effects = []` is only allowed with `pure = true` on an `expr` op".into()));
    }
    for e in &effects {
        let target_param = if e.is_implicit() {
            if !IMPLICIT_RESOURCES.contains(&e.on.as_str()) {
                return Err(err(format!("effect on unknown resource `{}` (known: {})", e.on, IMPLICIT_RESOURCES.join(", "))));
            }
            None
        } else {
            match param(&e.on) {
                Some(p) => Some(p),
                None => return Err(err(format!("effect on `{}`, which is not a param", e.on))),
            }
        };
        if (e.access.is_data() || e.access == EffectAccess::Fence) && e.proxy == Proxy::None {
            return Err(err(format!("effect `{}` on `{}` must name its proxy (generic or async)", e.access.as_str(), e.on)));
        }
        if e.barrier.is_some() && !target_param.is_some_and(|p| p.kind.may_be_pipeline()) {
            return Err(err(format!("effect on `{}`: `barrier = full|empty` applies to pipeline params only", e.on)));
        }
    }
    for p in &raw.params {
        match p.access {
            Some(a) => {
                let reads = effects.iter().any(|e| e.on == p.name && e.access.reads());
                let writes = effects.iter().any(|e| e.on == p.name && e.access.writes());
                let ok = match a {
                    Access::Read => reads,
                    Access::Write => writes,
                    Access::Readwrite => reads && writes,
                };
                if !ok {
                    return Err(err(format!("param `{}` is `{}` but no effect on it says so", p.name, a.as_str())));
                }
            }
            None if raw.form == OpForm::Stmt && p.kind.is_data() => {
                return Err(err(format!("param `{}` ({}) of a statement op needs `access`", p.name, p.kind.as_str())));
            }
            None => {}
        }
    }

    Ok(OpDef {
        name: raw.name,
        class: raw.class,
        form: raw.form,
        summary: raw.summary,
        requires: raw.requires,
        requires_when: raw.requires_when,
        issue: raw.issue,
        params: raw.params,
        type_rule,
        type_rule_help,
        type_rule_parsed,
        result,
        pure: raw.pure,
        effects,
        lowering: raw.lowering,
        hardware: raw.hardware,
        example: raw.example,
        file: file.to_string(),
    })
}

/// Why a catalog constraint (`type_rule`, `requires_when`) is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
enum ConstraintError {
    #[error("{0}")]
    Parse(#[from] pred::PredError),
    /// A param fact (`dtype(x)`, `same_shape(a, b)`) without a param of the op.
    #[error("{0}")]
    ParamFact(String),
}

/// Parse one constraint and check that every param fact names a param of the op.
fn parse_constraint(text: &str, params: &[ParamDef]) -> Result<PExpr, ConstraintError> {
    let e = pred::parse(text)?;
    let mut problem = None;
    visit_facts(&e, &mut |name, args| {
        if problem.is_some() || !PARAM_FACTS.contains(&name) {
            return;
        }
        let checked = if PARAM_PAIR_FACTS.contains(&name) { args.len() } else { 1 };
        if args.is_empty() {
            problem = Some(format!("`{name}()` needs a param"));
        }
        for arg in args.iter().take(checked) {
            match arg {
                PExpr::Sym(p) if params.iter().any(|q| &q.name == p) => {}
                other => problem = Some(format!("`{name}(...)`: `{other}` does not name a param")),
            }
        }
    });
    match problem {
        Some(p) => Err(ConstraintError::ParamFact(p)),
        None => Ok(e),
    }
}

fn visit_facts(e: &PExpr, f: &mut dyn FnMut(&str, &[PExpr])) {
    match e {
        PExpr::Int(_) | PExpr::Sym(_) => {}
        PExpr::Fact { name, args } => {
            f(name, args);
            args.iter().for_each(|a| visit_facts(a, f));
        }
        PExpr::Not(x) | PExpr::Neg(x) => visit_facts(x, f),
        PExpr::Bin { lhs, rhs, .. } => {
            visit_facts(lhs, f);
            visit_facts(rhs, f);
        }
        PExpr::In { value, set } => {
            visit_facts(value, f);
            set.iter().for_each(|s| visit_facts(s, f));
        }
    }
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn is_false(b: &bool) -> bool {
    !*b
}
