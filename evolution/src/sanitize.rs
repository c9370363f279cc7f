//! The one place text from outside (failure-report fields, evidence text, LLM drafts, queue
//! records shared through git) is made safe before it reaches a terminal, a commit message, a
//! branch name, a path or a committed file.
//!
//! * [`text`] and [`line`] escape control characters visibly (`\x1b`, `\u{9b}`, ...) so an ESC
//!   or OSC sequence can neither drive a terminal nor hide in a commit, and bound the length;
//!   [`text`] keeps newlines and tabs (multi-line files), [`line`] escapes them too.
//! * [`slug`] reduces a name to `[a-z0-9._-]` for branch names and file names.
//! * [`is_safe_name`] and [`is_safe_repo_path`] decide whether a name from data may be used as a
//!   path component or a path inside the repository as it is.

/// The longest text field kept (characters); longer ones end in `…[N more characters]`.
pub const MAX_TEXT: usize = 16 * 1024;
/// The longest one-line field kept for a terminal line or a commit subject.
pub const MAX_LINE: usize = 400;
/// The longest slug in a branch or file name.
pub const MAX_SLUG: usize = 60;

/// Whether `c` must not reach a terminal or a file raw: C0 controls, DEL, C1 controls, and the
/// bidirectional overrides that make text read differently from what it is ("Trojan source").
fn is_dangerous(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

fn escape_into(out: &mut String, c: char) {
    let n = c as u32;
    if n < 0x100 {
        out.push_str(&format!("\\x{n:02x}"));
    } else {
        out.push_str(&format!("\\u{{{n:x}}}"));
    }
}

fn bounded(mut s: String, chars: usize, max: usize) -> String {
    if chars > max {
        let cut: String = s.chars().take(max).collect();
        s = format!("{cut}…[{} more characters]", chars - max);
    }
    s
}

/// Multi-line text for a file or a terminal: newlines and tabs kept, every other control
/// character escaped, at most [`MAX_TEXT`] characters.
pub fn text(s: &str) -> String {
    text_bounded(s, MAX_TEXT)
}

/// [`text`] with another bound.
pub fn text_bounded(s: &str, max: usize) -> String {
    // A lone CR rewrites the line on a terminal, so it is escaped with the other controls.
    escape_bounded(s, max, |c| c == '\n' || c == '\t')
}

/// One line for a terminal, a table cell or a commit subject: every control character
/// (newlines too) escaped, at most [`MAX_LINE`] characters.
pub fn line(s: &str) -> String {
    line_bounded(s, MAX_LINE)
}

/// [`line`] with another bound.
pub fn line_bounded(s: &str, max: usize) -> String {
    escape_bounded(s, max, |_| false)
}

/// At most `max` characters of `s`, each control character escaped unless `keep` says so.
fn escape_bounded(s: &str, max: usize, keep: fn(char) -> bool) -> String {
    let mut out = String::with_capacity(s.len().min(max.saturating_mul(4)));
    let mut n = 0usize;
    for c in s.chars() {
        n += 1;
        if n > max {
            continue;
        }
        if !keep(c) && is_dangerous(c) {
            escape_into(&mut out, c);
        } else {
            out.push(c);
        }
    }
    bounded(out, n, max)
}

/// Whether `s` is already safe to print as one line (nothing to escape).
pub fn is_clean_line(s: &str) -> bool {
    !s.chars().any(is_dangerous)
}

/// Whether `s` is already safe as multi-line text (nothing but newlines and tabs to keep).
pub fn is_clean_text(s: &str) -> bool {
    !s.chars().any(|c| c != '\n' && c != '\t' && is_dangerous(c))
}

/// A name for a branch or a file: lower-case ASCII letters, digits, `.`, `_` and `-`; runs of
/// anything else become one `-`; no leading or trailing `-`/`.`; at most [`MAX_SLUG`]
/// characters; `x` when nothing is left.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.' || c == '-' {
            // `..` never survives: it would climb out of a folder or be an invalid ref name.
            if c == '.' && out.ends_with('.') {
                continue;
            }
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
        if out.len() >= MAX_SLUG {
            break;
        }
    }
    let out = out.trim_matches(|c| c == '-' || c == '.').to_string();
    if out.is_empty() {
        "x".into()
    } else {
        out
    }
}

/// Whether `s` may be used as one path component or branch-name component as it is: 1 to 100
/// characters of `[A-Za-z0-9._-]`, not starting with `.` or `-`, no `..`.
pub fn is_safe_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !s.starts_with('.')
        && !s.starts_with('-')
        && !s.contains("..")
}

/// Whether `p` is a relative path inside a repository that stays inside it: `/`-separated
/// components, none empty, `.`, `..` or `.git`, no control characters or backslashes.
pub fn is_safe_repo_path(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 400
        && !p.starts_with('/')
        && !p.contains('\\')
        && !p.chars().any(is_dangerous)
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != ".." && !c.eq_ignore_ascii_case(".git"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_terminal_sequences_visibly() {
        assert_eq!(line("a\x1b]0;pwned\x07b"), "a\\x1b]0;pwned\\x07b");
        assert_eq!(line("x\u{9b}31m"), "x\\x9b31m");
        assert_eq!(text("one\ntwo\tthree\x1b[2J"), "one\ntwo\tthree\\x1b[2J");
        assert_eq!(line("one\ntwo"), "one\\x0atwo");
        assert_eq!(line("\u{202E}abc"), "\\u{202e}abc");
    }

    #[test]
    fn bounds_lengths() {
        let long = "x".repeat(MAX_LINE + 10);
        let l = line(&long);
        assert!(l.starts_with(&"x".repeat(MAX_LINE)) && l.ends_with("…[10 more characters]"), "{l}");
    }

    #[test]
    fn slugs_and_names() {
        assert_eq!(slug("../../Cargo"), "cargo");
        assert_eq!(slug("tma_load"), "tma_load");
        assert_eq!(slug("\x1b[31m"), "31m");
        assert_eq!(slug(""), "x");
        assert!(is_safe_name("sm_90a") && !is_safe_name("../x") && !is_safe_name("a/b") && !is_safe_name(".git"));
        assert!(is_safe_repo_path("compiler/rules/smem/V600-x.toml"));
        for bad in ["../Cargo.toml", "/etc/passwd", "a/../b", ".git/config", "a//b", "a\\b", "a/\x1b"] {
            assert!(!is_safe_repo_path(bad), "{bad}");
        }
    }
}
