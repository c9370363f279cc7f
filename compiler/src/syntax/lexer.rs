//! Hand-written lexer: source text → tokens with byte spans.
//!
//! Newlines and comments are tokens, not skipped whitespace: newlines end statements (the parser
//! ignores them inside `(...)` and `[...]`), and comments become trivia that the printer writes
//! back. The lexer never fails: a bad character becomes an [`TokenKind::Error`] token and a bad
//! number becomes a placeholder literal, each with a diagnostic, so the parser can continue and
//! report further errors without cascading on the same mistake.

use crate::diag::Diagnostic;
use crate::span::Span;

/// Stable codes of lexical errors (the parser's codes are in `parser.rs`; all are documented in
/// `compiler/diagnostics/syntax.toml`).
pub const E_BAD_NUMBER: &str = "E0105";
pub const E_INT_TOO_LARGE: &str = "E0106";
pub const E_BAD_CHAR: &str = "E0110";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    Ident,
    /// A decimal or hex integer, already converted.
    Int(i64),
    /// A float; its text is the token's source bytes.
    Float,
    /// `128B`
    Bytes(u64),

    // Keywords.
    Kernel,
    Target,
    Dim,
    Const,
    Scalar,
    In,
    Out,
    InOut,
    Grid,
    Smem,
    View,
    Role,
    Barrier,
    Pipeline,
    On,
    Reg,
    Let,
    For,
    If,
    Else,
    True,
    False,
    Inf,

    // Operators and punctuation.
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Shl,
    Shr,
    Lt,
    Le,
    Gt,
    Ge,
    EqEq,
    Ne,
    AndAnd,
    OrOr,
    Bang,
    Eq,
    DotDot,
    ColonPlus,
    Colon,
    Dot,
    Comma,
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,

    /// End of a line (`\n`; a `\r` before it is whitespace).
    Newline,
    /// `# ...` up to, not including, the newline.
    Comment,
    /// A character that starts no token; already reported.
    Error,
    /// End of input; always the last token.
    Eof,
}

/// Reserved words, in the order LANGUAGE.md lists them.
pub const KEYWORDS: &[(&str, TokenKind)] = &[
    ("kernel", TokenKind::Kernel),
    ("target", TokenKind::Target),
    ("dim", TokenKind::Dim),
    ("const", TokenKind::Const),
    ("scalar", TokenKind::Scalar),
    ("in", TokenKind::In),
    ("out", TokenKind::Out),
    ("inout", TokenKind::InOut),
    ("grid", TokenKind::Grid),
    ("smem", TokenKind::Smem),
    ("view", TokenKind::View),
    ("role", TokenKind::Role),
    ("barrier", TokenKind::Barrier),
    ("pipeline", TokenKind::Pipeline),
    ("on", TokenKind::On),
    ("reg", TokenKind::Reg),
    ("let", TokenKind::Let),
    ("for", TokenKind::For),
    ("if", TokenKind::If),
    ("else", TokenKind::Else),
    ("true", TokenKind::True),
    ("false", TokenKind::False),
    ("inf", TokenKind::Inf),
];

/// True when `word` is a reserved keyword (and so cannot be used as a name).
pub fn is_keyword(word: &str) -> bool {
    KEYWORDS.iter().any(|(k, _)| *k == word)
}

impl TokenKind {
    pub fn is_keyword(self) -> bool {
        KEYWORDS.iter().any(|(_, k)| *k == self)
    }

    /// The fixed text of a keyword or punctuation token.
    pub fn text(self) -> Option<&'static str> {
        use TokenKind::*;
        if let Some((word, _)) = KEYWORDS.iter().find(|(_, k)| *k == self) {
            return Some(word);
        }
        Some(match self {
            Plus => "+",
            Minus => "-",
            Star => "*",
            Slash => "/",
            Percent => "%",
            Shl => "<<",
            Shr => ">>",
            Lt => "<",
            Le => "<=",
            Gt => ">",
            Ge => ">=",
            EqEq => "==",
            Ne => "!=",
            AndAnd => "&&",
            OrOr => "||",
            Bang => "!",
            Eq => "=",
            DotDot => "..",
            ColonPlus => ":+",
            Colon => ":",
            Dot => ".",
            Comma => ",",
            LParen => "(",
            RParen => ")",
            LBracket => "[",
            RBracket => "]",
            LBrace => "{",
            RBrace => "}",
            _ => return None,
        })
    }

    /// How a message names a token kind when no source text is at hand: "`(`", "keyword `in`".
    pub fn describe(self) -> String {
        match self {
            TokenKind::Ident => "a name".into(),
            TokenKind::Int(_) | TokenKind::Float | TokenKind::Bytes(_) => "a number".into(),
            TokenKind::Newline => "end of line".into(),
            TokenKind::Comment => "a comment".into(),
            TokenKind::Error => "an invalid character".into(),
            TokenKind::Eof => "end of file".into(),
            k if k.is_keyword() => format!("keyword `{}`", k.text().unwrap_or_default()),
            k => format!("`{}`", k.text().unwrap_or_default()),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    pub kind: TokenKind,
    pub span: Span,
}

impl Token {
    /// How a message names this token, quoting its text: "name `foo`", "`)`", "end of line".
    pub fn describe(&self, source: &str) -> String {
        let text = &source[self.span.range()];
        match self.kind {
            TokenKind::Ident => format!("name `{text}`"),
            TokenKind::Int(_) | TokenKind::Float | TokenKind::Bytes(_) => format!("number `{text}`"),
            TokenKind::Error => format!("`{text}`"),
            k => k.describe(),
        }
    }
}

/// The text of a comment token: without the `#`, one following space, and trailing whitespace.
pub fn comment_text(source: &str, span: Span) -> String {
    let raw = &source[span.range()];
    let body = raw.strip_prefix('#').unwrap_or(raw);
    let body = body.strip_prefix(' ').unwrap_or(body);
    body.trim_end().to_string()
}

/// Split `source` into tokens. The result always ends with one `Eof` token; a comment is always
/// followed by `Newline` or `Eof`. Lexical errors come back alongside, in source order.
pub fn lex(source: &str) -> (Vec<Token>, Vec<Diagnostic>) {
    let mut lexer = Lexer { src: source, bytes: source.as_bytes(), pos: 0, tokens: Vec::new(), errors: Vec::new() };
    lexer.run();
    (lexer.tokens, lexer.errors)
}

struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    tokens: Vec<Token>,
    errors: Vec<Diagnostic>,
}

impl Lexer<'_> {
    fn byte(&self, at: usize) -> u8 {
        self.bytes.get(at).copied().unwrap_or(0)
    }

    fn push(&mut self, kind: TokenKind, start: usize) {
        self.tokens.push(Token { kind, span: Span::new(start, self.pos) });
    }

    fn run(&mut self) {
        while self.pos < self.bytes.len() {
            let start = self.pos;
            let b = self.bytes[start];
            match b {
                b' ' | b'\t' | b'\r' => self.pos += 1,
                b'\n' => {
                    self.pos += 1;
                    self.push(TokenKind::Newline, start);
                }
                b'#' => {
                    // Comments may hold any UTF-8; `\n` is ASCII so a byte scan stays on char
                    // boundaries.
                    while self.pos < self.bytes.len() && self.bytes[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                    self.push(TokenKind::Comment, start);
                }
                b'0'..=b'9' => self.number(),
                b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                    while matches!(self.byte(self.pos), b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_') {
                        self.pos += 1;
                    }
                    let word = &self.src[start..self.pos];
                    let kind = KEYWORDS.iter().find(|(k, _)| *k == word).map_or(TokenKind::Ident, |(_, kind)| *kind);
                    self.push(kind, start);
                }
                _ => self.punct(),
            }
        }
        let end = self.bytes.len();
        self.tokens.push(Token { kind: TokenKind::Eof, span: Span::new(end, end) });
    }

    fn punct(&mut self) {
        use TokenKind::*;
        let start = self.pos;
        let next = self.byte(start + 1);
        let (kind, len) = match (self.bytes[start], next) {
            (b'<', b'<') => (Shl, 2),
            (b'>', b'>') => (Shr, 2),
            (b'<', b'=') => (Le, 2),
            (b'>', b'=') => (Ge, 2),
            (b'=', b'=') => (EqEq, 2),
            (b'!', b'=') => (Ne, 2),
            (b'&', b'&') => (AndAnd, 2),
            (b'|', b'|') => (OrOr, 2),
            (b'.', b'.') => (DotDot, 2),
            (b':', b'+') => (ColonPlus, 2),
            (b'+', _) => (Plus, 1),
            (b'-', _) => (Minus, 1),
            (b'*', _) => (Star, 1),
            (b'/', _) => (Slash, 1),
            (b'%', _) => (Percent, 1),
            (b'<', _) => (Lt, 1),
            (b'>', _) => (Gt, 1),
            (b'!', _) => (Bang, 1),
            (b'=', _) => (Eq, 1),
            (b':', _) => (Colon, 1),
            (b'.', _) => (Dot, 1),
            (b',', _) => (Comma, 1),
            (b'(', _) => (LParen, 1),
            (b')', _) => (RParen, 1),
            (b'[', _) => (LBracket, 1),
            (b']', _) => (RBracket, 1),
            (b'{', _) => (LBrace, 1),
            (b'}', _) => (RBrace, 1),
            _ => return self.bad_char(),
        };
        self.pos += len;
        self.push(kind, start);
    }

    fn bad_char(&mut self) {
        let start = self.pos;
        // Take the whole character so the span stays on UTF-8 boundaries.
        let ch = self.src[start..].chars().next().unwrap_or('\0');
        self.pos += ch.len_utf8().max(1);
        self.push(TokenKind::Error, start);
        let span = Span::new(start, self.pos);
        let shown =
            if ch.is_control() || (ch.is_whitespace() && ch != ' ') { format!("{:?}", ch) } else { format!("`{ch}`") };
        let help = match ch {
            ';' => "statements end at the end of the line; remove the `;`".to_string(),
            '&' => "logical and is written `&&`".to_string(),
            '|' => "logical or is written `||`".to_string(),
            '"' | '\'' => "Cake has no string literals; names are written bare".to_string(),
            '^' | '~' => "Cake has no bitwise operators besides `<<` and `>>`".to_string(),
            c if !c.is_ascii() => "only ASCII may appear outside comments; put prose in a `#` comment".to_string(),
            _ => "remove it; tokens are names, numbers, and the operators listed in LANGUAGE.md".to_string(),
        };
        self.errors.push(
            Diagnostic::error(E_BAD_CHAR, format!("unexpected character {shown}"), span, "not valid here")
                .with_help(help),
        );
    }

    /// A number: `42`, `1_024`, `0x40`, `1.0`, `2.5e-3`, `1e9`, `128B`. The scan takes every
    /// following letter and digit too, so `4x` or `12KB` is reported as one malformed literal
    /// rather than a number followed by a name.
    fn number(&mut self) {
        let start = self.pos;
        let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        let hex = self.bytes[start] == b'0' && matches!(self.byte(start + 1), b'x' | b'X');
        let mut float = false;
        if hex {
            self.pos += 2;
            while is_word(self.byte(self.pos)) {
                self.pos += 1;
            }
        } else {
            while matches!(self.byte(self.pos), b'0'..=b'9' | b'_') {
                self.pos += 1;
            }
            // `0..4` is a range: a `.` belongs to the number only when a digit follows.
            if self.byte(self.pos) == b'.' && self.byte(self.pos + 1).is_ascii_digit() {
                float = true;
                self.pos += 1;
                while matches!(self.byte(self.pos), b'0'..=b'9' | b'_') {
                    self.pos += 1;
                }
            }
            if matches!(self.byte(self.pos), b'e' | b'E') {
                let after = self.byte(self.pos + 1);
                let digit_at = if matches!(after, b'+' | b'-') { self.pos + 2 } else { self.pos + 1 };
                if self.byte(digit_at).is_ascii_digit() {
                    float = true;
                    self.pos = digit_at;
                    while matches!(self.byte(self.pos), b'0'..=b'9' | b'_') {
                        self.pos += 1;
                    }
                }
            }
            while is_word(self.byte(self.pos)) {
                self.pos += 1;
            }
        }
        let text = &self.src[start..self.pos];
        let span = Span::new(start, self.pos);
        let kind = match classify_number(text, hex, float) {
            Ok(kind) => kind,
            Err(err) => {
                self.errors.push(err.into_diagnostic(text, span));
                // A placeholder of the intended kind keeps the parser from reporting the same
                // mistake again as a syntax error.
                if float {
                    TokenKind::Float
                } else {
                    TokenKind::Int(0)
                }
            }
        };
        self.push(kind, start);
    }
}

enum NumberError {
    Malformed(&'static str),
    TooLarge(&'static str),
}

impl NumberError {
    fn into_diagnostic(self, text: &str, span: Span) -> Diagnostic {
        match self {
            NumberError::Malformed(help) => {
                Diagnostic::error(E_BAD_NUMBER, format!("malformed number `{text}`"), span, "not a valid number")
                    .with_help(help)
            }
            NumberError::TooLarge(help) => Diagnostic::error(
                E_INT_TOO_LARGE,
                format!("integer literal `{text}` is too large"),
                span,
                "does not fit",
            )
            .with_help(help),
        }
    }
}

const HELP_SUFFIX: &str = "a number cannot run into letters: write a byte count as `128B`, a hex integer as `0x40`, or put a space before the name";

fn classify_number(text: &str, hex: bool, float: bool) -> Result<TokenKind, NumberError> {
    if hex {
        let digits = &text[2..];
        if !digits.bytes().all(|b| b.is_ascii_hexdigit() || b == b'_') {
            return Err(NumberError::Malformed("hex integers use only the digits 0-9 and a-f after `0x`, e.g. `0x40`"));
        }
        let clean: String = digits.chars().filter(|&c| c != '_').collect();
        if clean.is_empty() {
            return Err(NumberError::Malformed("write hex digits after `0x`, e.g. `0x40`"));
        }
        return i64::from_str_radix(&clean, 16).map(TokenKind::Int).map_err(|_| {
            NumberError::TooLarge("integers must fit in a signed 64-bit value (at most 0x7fff_ffff_ffff_ffff)")
        });
    }
    let mantissa_end = text.find(|c: char| !(c.is_ascii_digit() || c == '_' || c == '.')).unwrap_or(text.len());
    if float {
        // The scan ends exactly at the float's end unless letters follow it.
        let body_end = float_end(text);
        if body_end != text.len() {
            return Err(NumberError::Malformed(HELP_SUFFIX));
        }
        if text.contains('_') {
            return Err(NumberError::Malformed(
                "underscores are allowed only in integers; write the float without them, e.g. `1024.0`",
            ));
        }
        return Ok(TokenKind::Float);
    }
    let (digits, suffix) = text.split_at(mantissa_end);
    let clean: String = digits.chars().filter(|&c| c != '_').collect();
    match suffix {
        "" => clean.parse::<i64>().map(TokenKind::Int).map_err(|_| {
            NumberError::TooLarge("integers must fit in a signed 64-bit value (at most 9223372036854775807)")
        }),
        "B" => clean
            .parse::<u64>()
            .map(TokenKind::Bytes)
            .map_err(|_| NumberError::TooLarge("byte counts must fit in an unsigned 64-bit value")),
        s if s.starts_with(['e', 'E']) => Err(NumberError::Malformed("an exponent needs digits: `1e9`, `2.5e-3`")),
        _ => Err(NumberError::Malformed(HELP_SUFFIX)),
    }
}

/// Length of the leading `digits[.digits][(e|E)[+-]digits]` part of `text` (underscores allowed in
/// digit runs; the caller rejects them for floats).
fn float_end(text: &str) -> usize {
    let b = text.as_bytes();
    let digits = |mut i: usize| {
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
            i += 1;
        }
        i
    };
    let mut i = digits(0);
    if i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
        i = digits(i + 1);
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        if j < b.len() && b[j].is_ascii_digit() {
            i = digits(j);
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use TokenKind::*;

    fn kinds(src: &str) -> Vec<TokenKind> {
        let (toks, errs) = lex(src);
        assert!(errs.is_empty(), "unexpected errors for {src:?}: {errs:?}");
        toks.into_iter().map(|t| t.kind).collect()
    }

    fn one_error(src: &str) -> Diagnostic {
        let (_, errs) = lex(src);
        assert_eq!(errs.len(), 1, "expected one error for {src:?}, got {errs:?}");
        errs.into_iter().next().unwrap()
    }

    #[test]
    fn numbers() {
        assert_eq!(kinds("42 1_024 0x40 0XfF"), vec![Int(42), Int(1024), Int(64), Int(255), Eof]);
        assert_eq!(kinds("1.0 2.5e-3 1e9 1E+2"), vec![Float, Float, Float, Float, Eof]);
        assert_eq!(kinds("128B 1_024B"), vec![Bytes(128), Bytes(1024), Eof]);
        // A range is not a float.
        assert_eq!(kinds("0..4"), vec![Int(0), DotDot, Int(4), Eof]);
        assert_eq!(kinds("1.0..2.0"), vec![Float, DotDot, Float, Eof]);
        // A field access on an integer is not a float either.
        assert_eq!(kinds("1.e5"), vec![Int(1), Dot, Ident, Eof]);
        assert_eq!(kinds("9223372036854775807"), vec![Int(i64::MAX), Eof]);
    }

    #[test]
    fn float_text_is_kept() {
        let src = "2.5e-3";
        let (toks, _) = lex(src);
        assert_eq!(&src[toks[0].span.range()], "2.5e-3");
    }

    #[test]
    fn operators_and_keywords() {
        assert_eq!(
            kinds("a :+ b << >> <= >= == != && || ! = .. : . , ( ) [ ] { } < > + - * / %"),
            vec![
                Ident, ColonPlus, Ident, Shl, Shr, Le, Ge, EqEq, Ne, AndAnd, OrOr, Bang, Eq, DotDot, Colon, Dot, Comma,
                LParen, RParen, LBracket, RBracket, LBrace, RBrace, Lt, Gt, Plus, Minus, Star, Slash, Percent, Eof
            ]
        );
        assert_eq!(kinds("kernel inout in inner"), vec![Kernel, InOut, In, Ident, Eof]);
    }

    #[test]
    fn comments_and_newlines() {
        let src = "dim M  # the rows ×\r\n# whole line\n";
        let (toks, errs) = lex(src);
        assert!(errs.is_empty());
        let k: Vec<_> = toks.iter().map(|t| t.kind).collect();
        assert_eq!(k, vec![Dim, Ident, Comment, Newline, Comment, Newline, Eof]);
        assert_eq!(comment_text(src, toks[2].span), "the rows ×");
        assert_eq!(comment_text(src, toks[4].span), "whole line");
        assert_eq!(comment_text("#", Span::new(0, 1)), "");
        assert_eq!(comment_text("#   x", Span::new(0, 5)), "  x");
    }

    #[test]
    fn bad_numbers() {
        let e = one_error("stages 4x");
        assert_eq!(e.code, E_BAD_NUMBER);
        assert_eq!(e.primary.span, Span::new(7, 9));
        assert_eq!(one_error("0x").code, E_BAD_NUMBER);
        assert_eq!(one_error("0x4g").code, E_BAD_NUMBER);
        assert_eq!(one_error("1e").code, E_BAD_NUMBER);
        assert_eq!(one_error("1.5B").code, E_BAD_NUMBER);
        assert_eq!(one_error("1_0.5").code, E_BAD_NUMBER);
        assert_eq!(one_error("12KB").code, E_BAD_NUMBER);
        let e = one_error("x = 9223372036854775808");
        assert_eq!(e.code, E_INT_TOO_LARGE);
        assert_eq!(e.primary.span, Span::new(4, 23));
        assert_eq!(one_error("0x8000000000000000").code, E_INT_TOO_LARGE);
        assert_eq!(one_error("99999999999999999999B").code, E_INT_TOO_LARGE);
    }

    #[test]
    fn bad_chars() {
        let e = one_error("a ; b");
        assert_eq!(e.code, E_BAD_CHAR);
        assert_eq!(e.primary.span, Span::new(2, 3));
        assert!(e.help.unwrap().contains(";"));
        // A multi-byte character is reported whole.
        let e = one_error("a × b");
        assert_eq!(e.primary.span, Span::new(2, 4));
        assert_eq!(one_error("a & b").help.unwrap(), "logical and is written `&&`");
    }
}
