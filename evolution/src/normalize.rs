//! Message normalization: a tool's message with everything that differs between two
//! occurrences of the same failure replaced by a placeholder. The miner's signatures and the
//! importers' classes and de-duplication both read it; it lives apart from both so that `mine`
//! (which parses compile logs with `import::parse_ptxas`) and `import` do not use each other.

use std::sync::OnceLock;

use regex::Regex;

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("normalization regex"))
}

/// A message with everything that differs between two occurrences of the same failure replaced
/// by a placeholder, in this order:
/// 1. compute-sanitizer's `=========` line prefixes are dropped;
/// 2. absolute paths (`/tmp/cake-run-1234/kernel.cu`) and relative file names with a known
///    extension (`evidence/x.cake`, `kernel.cu`) → `<path>`;
/// 3. runs of 16+ hex digits (hashes) → `<hash>`;
/// 4. hex numbers `0x…` → `<hex>`;
/// 5. quoted names `'gemm_bf16_ws'` and `"x"` → `'<sym>'` / `"<sym>"`, mangled names `_Z…` → `<sym>`, names in
///    backticks that are not operations of the op catalog (`` `a_s` `` → `` `<sym>` ``; `` `tma_load` ``
///    stays), byte-span locations `(at bytes 12..40)` dropped;
/// 6. decimal numbers (with a unit suffix `s ms us B KB MB GB` kept) → `<n>`; digits inside
///    identifiers (`sm_90a`, `bf16`, `C7508`, `CUDA_ERROR_…`, `m64n256k16`) are kept;
/// 7. whitespace collapsed, ends trimmed.
pub fn normalize(msg: &str) -> String {
    static PREFIX: OnceLock<Regex> = OnceLock::new();
    static ABS: OnceLock<Regex> = OnceLock::new();
    static REL: OnceLock<Regex> = OnceLock::new();
    static HASH: OnceLock<Regex> = OnceLock::new();
    static HEX: OnceLock<Regex> = OnceLock::new();
    static QUOTED: OnceLock<Regex> = OnceLock::new();
    static DQUOTED: OnceLock<Regex> = OnceLock::new();
    static MANGLED: OnceLock<Regex> = OnceLock::new();
    static AT_BYTES: OnceLock<Regex> = OnceLock::new();
    static BACKTICK: OnceLock<Regex> = OnceLock::new();
    static NUM: OnceLock<Regex> = OnceLock::new();
    static WS: OnceLock<Regex> = OnceLock::new();
    let s = re(&PREFIX, r"(?m)^=+ ?").replace_all(msg, "");
    let s = re(&ABS, r#"(^|[\s'"(=\[,:])(?:[A-Za-z]:)?/[\w.+@~-]+(?:/[\w.+@~-]*)+"#).replace_all(&s, "${1}<path>");
    let s = re(&REL, r"\b[\w.+-]+(?:/[\w.+-]+)*\.(?:cake|cu|cuh|ptx|cubin|cpp|h|json|toml|log|txt)\b").replace_all(&s, "<path>");
    let s = re(&HASH, r"\b[0-9a-fA-F]{16,}\b").replace_all(&s, "<hash>");
    let s = re(&HEX, r"\b0[xX][0-9a-fA-F]+\b").replace_all(&s, "<hex>");
    let s = re(&QUOTED, r"'[^'\s]*'").replace_all(&s, "'<sym>'");
    let s = re(&DQUOTED, r#""[A-Za-z_][A-Za-z0-9_:]*""#).replace_all(&s, "\"<sym>\"");
    let s = re(&MANGLED, r"\b_Z\w+").replace_all(&s, "<sym>");
    let s = re(&AT_BYTES, r"\s*\(at bytes \d+\.\.\d+\)").replace_all(&s, "");
    let s = re(&BACKTICK, r"`([A-Za-z_][A-Za-z0-9_]*)`").replace_all(&s, |c: &regex::Captures<'_>| {
        if cake::catalog::Catalog::builtin().get(&c[1]).is_some() {
            c[0].to_string()
        } else {
            "`<sym>`".to_string()
        }
    });
    let s = re(&NUM, r"\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(ms|us|s|B|KB|MB|GB)?\b").replace_all(&s, "<n>${1}");
    let s = re(&WS, r"\s+").replace_all(&s, " ");
    s.trim().to_string()
}
