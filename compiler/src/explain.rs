//! What `cake explain QUERY` prints: the documentation of a diagnostic code (`V201`), else the
//! reference of an operation of the op catalog (`wgmma`). The CLI and the MCP server's `explain`
//! tool both answer through [`explain`], so they print the same text.

/// What a query names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subject {
    Code,
    Op,
}

impl Subject {
    pub fn as_str(self) -> &'static str {
        match self {
            Subject::Code => "code",
            Subject::Op => "op",
        }
    }
}

/// The explanation of `query`: what it names and the text (`json`: one JSON object and a
/// newline, as `--message-format json` prints), or `None` when it is neither a documented code
/// nor an operation.
pub fn explain(query: &str, json: bool) -> Option<(Subject, String)> {
    if let Some(doc) = crate::verify::rules::documented(query) {
        let text = if json {
            format!("{}\n", serde_json::to_string(&doc).unwrap_or_default())
        } else {
            crate::codes::format_doc(&doc)
        };
        return Some((Subject::Code, text));
    }
    let op = crate::catalog::Catalog::builtin().get(query.trim())?;
    let text = if json {
        format!("{}\n", serde_json::to_string(op).unwrap_or_default())
    } else {
        crate::op_reference::explain(op, crate::target::TargetTable::builtin())
    };
    Some((Subject::Op, text))
}

/// The help line for a query that [`explain`] does not know.
pub const UNKNOWN_HELP: &str =
    "run `cake explain --list` to see every documented code and `cake explain --ops` every operation";
