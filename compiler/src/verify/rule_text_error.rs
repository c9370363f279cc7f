//! Why a verifier rule's text is refused at load time: its `applies_to`, a predicate (`require`,
//! `when`), a message placeholder or a span key names something the rule's construct kind does
//! not have. The loader reports it as the rule file's [`super::rules::RuleError`] (E0006 for
//! `cake check`); the message says which field and what would be valid.

/// One refused field of a rule file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RuleTextError {
    #[error("cannot read the directory: {message}")]
    ReadDir { message: String },
    #[error("unknown `applies_to = \"{text}\"`; use one of: kernel, grid, smem, view, tensor, role, pipeline, barrier, call:<op>, call:*, arg:<op>, arg:*")]
    UnknownKind { text: String },
    #[error("`applies_to = \"{text}\"` names `{op}`, which is not in the op catalog")]
    UnknownOp { text: String, op: String },
    #[error("`applies_to = \"{text}\"`: only call and arg take `:<op>`")]
    OpOnKind { text: String },
    #[error("`{field}` does not parse: {error}\n  {field} = \"{text}\"")]
    Parse { field: String, text: String, error: crate::pred::PredError },
    /// A word of a predicate or placeholder (`word`) that the construct kind does not know.
    #[error("`{field}`: {word}")]
    Word { field: String, word: WordError },
    #[error("`{field}` has an unclosed `{{` (write `{{{{` for a brace)")]
    UnclosedPlaceholder { field: String },
    #[error("`{field}`: placeholder `{{{inner}}}` does not parse: {error}")]
    PlaceholderParse { field: String, inner: String, error: crate::pred::PredError },
    #[error("`{field}`: placeholder `{{{inner}}}`: {word}")]
    PlaceholderWord { field: String, inner: String, word: WordError },
    #[error("`{field} = \"{key}\"`: no parameter `{param}` on `{applies}`")]
    SpanParam { field: String, key: String, param: String, applies: String },
    #[error("`{field} = \"{key}\"` is not a span of `{applies}`; its spans: {}", spans.join(", "))]
    SpanKey { field: String, key: String, applies: String, spans: Vec<String> },
}

/// A word in a rule's expression that does not fit its construct kind.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WordError {
    #[error("`{0}` is an indexed fact: write `{0}(i)`")]
    NeedsIndex(String),
    #[error("`{0}` takes no index: write `{0}`")]
    TakesNoIndex(String),
    #[error("`{0}(...)` takes exactly one argument")]
    OneArgument(String),
    #[error("`has({0})` needs a feature name of targets.toml")]
    NotAFeature(String),
    #[error("`{word}` is neither a fact of `{applies}` nor a known literal{}", near.as_ref().map(|n| format!(" (did you mean `{n}`?)")).unwrap_or_default())]
    Unknown { word: String, applies: String, near: Option<String> },
}
