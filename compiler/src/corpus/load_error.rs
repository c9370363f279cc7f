//! Why one case did not load: its manifest, its program, or (for an instance of a templated
//! family) its variables and placeholders. The loader records the message as the case's
//! [`super::LoadError`], which the gate reports as an error result of that case; fix the file it
//! names.

use std::path::PathBuf;

/// A plain case (`<case>.toml` + its program) that did not load.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CaseError {
    #[error("cannot read {}: {message}", path.display())]
    Read { path: PathBuf, message: String },
    #[error("{}: {message}", path.display())]
    Toml { path: PathBuf, message: String },
    #[error("{}: a plain case needs `program = \"FILE.cake\"`", path.display())]
    NoProgram { path: PathBuf },
    #[error("cannot read the program {}: {message}", path.display())]
    ReadProgram { path: PathBuf, message: String },
    #[error("{0}")]
    Manifest(#[from] ManifestError),
}

/// A manifest (plain, or an instance merged over its family's defaults) that is not a valid one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// A key of the wrong type (the TOML deserializer's message).
    #[error("{message}")]
    Schema { message: String },
    #[error("the manifest needs `target = \"sm_..\"`")]
    NoTarget,
    #[error("the manifest needs `tiers = [\"static\", ...]`")]
    NoTiers,
    #[error("a tier is listed twice in `tiers`")]
    RepeatedTier,
    #[error("the gpu tier needs a `[workload]` table")]
    NoWorkload,
    #[error("[workload] is not a workload spec (compiler/src/runtime/README.md): {message}")]
    Workload { message: String },
}

/// An `[[instance]]` of a templated family that does not expand.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InstanceError {
    #[error("`vars` must be a table, e.g. `vars = {{ TM = 128, DT = \"bf16\" }}`")]
    VarsNotTable,
    #[error("variable name `{name}`: use letters, digits and `_`")]
    VarName { name: String },
    #[error("variable `{name}` must be a string, number or boolean")]
    VarType { name: String },
    #[error("an instance's program is the family template; remove `program`")]
    Program,
    #[error("template: {0}")]
    Template(Placeholder),
    #[error("manifest: {0}")]
    ManifestText(Placeholder),
    #[error("manifest placeholder `{{{{{name}}}}}` has no value in `vars`")]
    ManifestValue { name: String },
    #[error("variables {unused:?} are used neither by the template nor by the manifest; an instance must differ by what its variables change")]
    Unused { unused: Vec<String> },
    #[error("{0}")]
    Manifest(#[from] ManifestError),
}

/// A `{{NAME}}` placeholder that cannot be filled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Placeholder {
    #[error("unclosed `{{{{` near `{near}`")]
    Unclosed { near: String },
    #[error("placeholder `{{{{{name}}}}}` has no value in `vars`")]
    NoValue { name: String },
}
