//! Recursive-descent parser: tokens → [`File`].
//!
//! Layout rules the parser implements (LANGUAGE.md, "Lexical structure"):
//! - a declaration or statement ends at the end of its line, or just before a `}` on the same
//!   line (so `if c { f() }` is accepted; the printer expands it);
//! - inside `(...)` and `[...]` newlines and comments are skipped; comments found there move to
//!   the enclosing node's leading comments, the only place the tree can hold them;
//! - a comment after a block's `{` is the trailing comment of the node that opens the block (after
//!   `else {`, where the tree has no slot, it leads the block's first statement); a comment after
//!   its closing `}` becomes the last of the block's end comments;
//! - a blank line before the first statement of a block, or before the header, is not recorded.
//!
//! Error recovery: a failed declaration or statement is reported and skipped to the end of its
//! line (skipping any `{ ... }` opened on that line as a whole); a failed `for`/`if`/`on` header
//! still parses its block so errors inside are found too. At most [`MAX_ERRORS`] are reported.
//! Nesting deeper than [`MAX_NESTING`] is an error, which bounds both the parser's recursion and
//! the height of the trees it returns (so later recursive passes are stack-safe too).

use super::ast::*;
use super::lexer::{self, comment_text, Token, TokenKind};
use crate::diag::Diagnostic;
use crate::span::Span;

/// Deepest nesting of expressions, blocks and `else if` chains the parser accepts. Real kernels
/// nest a handful of levels; the bound keeps recursion (here and in every pass over the tree)
/// within about 1 MiB of stack even in debug builds, where one level costs up to ~8 KiB.
pub const MAX_NESTING: usize = 128;
/// The parser stops after this many errors.
pub const MAX_ERRORS: usize = 20;

/// Stable syntax error codes; each has an entry in `compiler/diagnostics/syntax.toml`.
pub mod codes {
    pub const UNEXPECTED_TOKEN: &str = "E0101";
    pub const UNTERMINATED_BLOCK: &str = "E0102";
    pub const MISSING_HEADER: &str = "E0103";
    pub const UNKNOWN_DECLARATION: &str = "E0104";
    pub const BAD_NUMBER: &str = super::lexer::E_BAD_NUMBER;
    pub const INT_TOO_LARGE: &str = super::lexer::E_INT_TOO_LARGE;
    pub const EXPECTED_EXPRESSION: &str = "E0107";
    pub const EXPECTED_NAME: &str = "E0108";
    pub const UNCLOSED_DELIMITER: &str = "E0109";
    pub const BAD_CHARACTER: &str = super::lexer::E_BAD_CHAR;
    pub const UNMATCHED_CLOSER: &str = "E0111";
    pub const TOO_DEEP: &str = "E0112";
    pub const EXPECTED_LINE_END: &str = "E0113";
    pub const EXPECTED_STATEMENT: &str = "E0114";
    pub const BAD_ASSIGN_TARGET: &str = "E0115";
    pub const MISSING_ATTR_VALUE: &str = "E0116";
    pub const EXPECTED_ATTR: &str = "E0117";
    pub const DANGLING_ELSE: &str = "E0118";
    pub const BAD_FOR_ITER: &str = "E0119";
    pub const DECL_IN_BLOCK: &str = "E0120";
    pub const EMPTY_BRACKETS: &str = "E0121";

    /// Every code above, in order.
    pub const ALL: &[&str] = &[
        UNEXPECTED_TOKEN,
        UNTERMINATED_BLOCK,
        MISSING_HEADER,
        UNKNOWN_DECLARATION,
        BAD_NUMBER,
        INT_TOO_LARGE,
        EXPECTED_EXPRESSION,
        EXPECTED_NAME,
        UNCLOSED_DELIMITER,
        BAD_CHARACTER,
        UNMATCHED_CLOSER,
        TOO_DEEP,
        EXPECTED_LINE_END,
        EXPECTED_STATEMENT,
        BAD_ASSIGN_TARGET,
        MISSING_ATTR_VALUE,
        EXPECTED_ATTR,
        DANGLING_ELSE,
        BAD_FOR_ITER,
        DECL_IN_BLOCK,
        EMPTY_BRACKETS,
    ];
}
use codes::*;

/// Parse a whole `.cake` file. On failure, returns every syntax error found (at least one, at
/// most [`MAX_ERRORS`]), sorted by position.
pub fn parse(source: &str) -> Result<File, Vec<Diagnostic>> {
    let (tokens, lex_errors) = lexer::lex(source);
    let mut p = Parser {
        src: source,
        toks: tokens,
        pos: 0,
        prev_end: 0,
        delims: Vec::new(),
        interior_comments: Vec::new(),
        depth: 0,
        errors: Vec::new(),
        lex_errors,
        fresh_line: false,
        abort_to_items: false,
        too_deep_reported: false,
        unclosed_at_eof: None,
    };
    let file = p.parse_file();
    let mut errors = p.errors;
    errors.append(&mut p.lex_errors);
    if errors.is_empty() {
        match file {
            Some(file) => return Ok(file),
            // Unreachable: a missing file always comes with an error. Stay total regardless.
            None => errors.push(
                Diagnostic::error(MISSING_HEADER, "no kernel header", Span::default(), "")
                    .with_help("start the file with a header line such as `kernel gemm target sm_90a`"),
            ),
        }
    }
    errors.sort_by_key(|d| (d.primary.span.start, d.primary.span.end));
    if errors.len() >= MAX_ERRORS {
        errors.truncate(MAX_ERRORS);
        let last = errors.last_mut().expect("non-empty");
        last.notes.push(format!("stopped after {MAX_ERRORS} errors; fix these and run again"));
    }
    Err(errors)
}

/// Marker that an error was recorded; the caller recovers.
struct Failed;
type PResult<T> = Result<T, Failed>;

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    /// Index of the next token. Inside `(...)`/`[...]` [`Parser::peek`] first moves it past
    /// newlines and comments.
    pos: usize,
    /// End of the last consumed token, for node spans and "expected X here" positions.
    prev_end: usize,
    /// Open `(` / `[` with their spans; non-empty means newlines are insignificant.
    delims: Vec<(TokenKind, Span)>,
    /// Comments skipped inside delimiters, waiting to be attached to the enclosing node.
    interior_comments: Vec<String>,
    /// Current nesting of expressions, blocks and `else if`s (see [`MAX_NESTING`]).
    depth: usize,
    /// Syntax errors found so far.
    errors: Vec<Diagnostic>,
    /// The lexer's errors, in source order; they count towards [`MAX_ERRORS`] once the parser
    /// has passed them, so the errors reported are the first ones in the file.
    lex_errors: Vec<Diagnostic>,
    /// Set when an unclosed `(`/`[` was detected at the start of a line: recovery then resumes
    /// on that line instead of skipping it.
    fresh_line: bool,
    /// Nesting too deep is reported once per file; deeper levels fail silently.
    too_deep_reported: bool,
    /// The one "unterminated block" error for blocks still open at the end of the file (index
    /// into `errors`); outer open blocks add a label to it rather than an error each.
    unclosed_at_eof: Option<usize>,
    /// Set when a block turned out to be unterminated at a declaration: every open block gives
    /// up and the item loop resumes at that declaration.
    abort_to_items: bool,
}

/// Heights of expression trees travel with them while parsing so that over-deep trees are caught
/// where they are built (a long `a + b + ...` chain is deep without any parser recursion).
type Height = usize;

fn is_declaration_keyword(kind: TokenKind) -> bool {
    use TokenKind::*;
    matches!(
        kind,
        Kernel | Dim | Const | Scalar | In | Out | InOut | Grid | Smem | View | Role | Barrier | Pipeline | On
    )
}

fn binop(kind: TokenKind) -> Option<BinOp> {
    use TokenKind::*;
    Some(match kind {
        Star => BinOp::Mul,
        Slash => BinOp::Div,
        Percent => BinOp::Rem,
        Plus => BinOp::Add,
        Minus => BinOp::Sub,
        Shl => BinOp::Shl,
        Shr => BinOp::Shr,
        Lt => BinOp::Lt,
        Le => BinOp::Le,
        Gt => BinOp::Gt,
        Ge => BinOp::Ge,
        EqEq => BinOp::Eq,
        Ne => BinOp::Ne,
        AndAnd => BinOp::And,
        OrOr => BinOp::Or,
        _ => return None,
    })
}

fn can_start_expression(kind: TokenKind) -> bool {
    use TokenKind::*;
    matches!(kind, Ident | Int(_) | Float | Bytes(_) | True | False | Inf | LParen | Minus | Bang)
}

fn closer_of(open: TokenKind) -> TokenKind {
    match open {
        TokenKind::LParen => TokenKind::RParen,
        TokenKind::LBracket => TokenKind::RBracket,
        _ => TokenKind::RBrace,
    }
}

fn is_place(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Name(_) => true,
        ExprKind::Field { base, .. } | ExprKind::Index { base, .. } => is_place(base),
        _ => false,
    }
}

fn attr_value_help(key: &str) -> String {
    format!(
        "write `{key} VALUE`: an expression (`4`, `128B`, `load`), a range (`1..3`) or a list (`[128, 64]`); only `persistent` takes no value"
    )
}

const DECLARATION_HELP: &str = "a declaration starts with one of `dim`, `const`, `scalar`, `in`, `out`, `inout`, `grid`, `smem`, `view`, `role`, `barrier`, `pipeline`, `on`";

impl<'a> Parser<'a> {
    // ---------------------------------------------------------------- token cursor

    /// The next significant token. Inside delimiters this skips newlines and comments (keeping
    /// the comments); outside, newlines and comments are significant and returned.
    fn peek(&mut self) -> Token {
        if !self.delims.is_empty() {
            loop {
                let tok = self.toks[self.pos];
                match tok.kind {
                    TokenKind::Newline => self.pos += 1,
                    TokenKind::Comment => {
                        self.interior_comments.push(comment_text(self.src, tok.span));
                        self.pos += 1;
                    }
                    _ => break,
                }
            }
        }
        self.toks[self.pos]
    }

    fn at(&mut self, kind: TokenKind) -> bool {
        self.peek().kind == kind
    }

    /// The token after the next one, with no skipping (used only for one-line look-ahead).
    fn peek2_raw(&self) -> TokenKind {
        self.toks.get(self.pos + 1).map_or(TokenKind::Eof, |t| t.kind)
    }

    fn bump(&mut self) -> Token {
        let tok = self.peek();
        if tok.kind != TokenKind::Eof {
            self.pos += 1;
            self.prev_end = tok.span.end as usize;
        }
        tok
    }

    fn text(&self, span: Span) -> &'a str {
        &self.src[span.range()]
    }

    /// True when a newline separates the next token from the previous one.
    fn starts_line(&self) -> bool {
        self.pos == 0 || self.toks[self.pos - 1].kind == TokenKind::Newline
    }

    /// An empty span just after the last consumed token: where a missing token belongs.
    fn after_prev(&self) -> Span {
        Span::new(self.prev_end, self.prev_end)
    }

    fn halted(&self) -> bool {
        let here = self.toks[self.pos].span.start;
        let lex_before = self.lex_errors.partition_point(|d| d.primary.span.start < here);
        self.errors.len() + lex_before >= MAX_ERRORS
    }

    /// Indentation (spaces and tabs) of the line holding byte `offset`.
    fn line_indent(&self, offset: u32) -> usize {
        let offset = offset as usize;
        let line_start = self.src[..offset].rfind('\n').map_or(0, |i| i + 1);
        self.src[line_start..].bytes().take_while(|&b| b == b' ' || b == b'\t').count()
    }

    // ---------------------------------------------------------------- errors

    /// Record `diag` unless the offending token is a lexer error (already reported) or the
    /// error limit is reached.
    #[cold]
    #[inline(never)]
    fn report(&mut self, diag: Diagnostic) -> Failed {
        let tok = self.toks[self.pos];
        let on_lex_error = tok.kind == TokenKind::Error && diag.primary.span == tok.span;
        if !on_lex_error && !self.halted() {
            self.errors.push(diag);
        }
        Failed
    }

    /// "expected WHAT, found X" at the next token, as E0101 unless a more specific code applies:
    /// E0109 when an open delimiter is left dangling, E0111 for a stray closing delimiter.
    #[cold]
    #[inline(never)]
    fn unexpected(&mut self, code: &'static str, expected: &str, help: &str) -> Failed {
        let tok = self.peek();
        if let Some(failed) = self.delimiter_trouble(tok) {
            return failed;
        }
        let found = tok.describe(self.src);
        let diag = Diagnostic::error(
            code,
            format!("expected {expected}, found {found}"),
            tok.span,
            format!("expected {expected}"),
        )
        .with_help(help);
        self.report(diag)
    }

    /// If `tok` shows that an open `(`/`[` was never closed (it starts a new line, or is a brace
    /// or the end of file), or is a closer matching nothing open, report that instead.
    #[cold]
    #[inline(never)]
    fn delimiter_trouble(&mut self, tok: Token) -> Option<Failed> {
        use TokenKind::*;
        if tok.kind == Error {
            // Already reported by the lexer.
            return Some(Failed);
        }
        if matches!(tok.kind, RParen | RBracket) {
            let matches_open = self.delims.last().is_some_and(|&(open, _)| closer_of(open) == tok.kind);
            if !matches_open {
                return Some(self.unmatched_closer(tok));
            }
        }
        let &(open, open_span) = self.delims.last()?;
        // A token that starts a line no deeper than the opening line is the next statement, not
        // a continuation: the delimiter was left open. (A deeper line is a continuation with a
        // mistake in it, reported as such.)
        let next_statement =
            self.starts_line() && self.line_indent(tok.span.start) <= self.line_indent(open_span.start);
        if matches!(tok.kind, Eof | LBrace | RBrace) || next_statement {
            self.fresh_line = next_statement;
            let close = closer_of(open).text().unwrap_or_default();
            let open_text = open.text().unwrap_or_default();
            let diag = Diagnostic::error(
                UNCLOSED_DELIMITER,
                format!("unclosed `{open_text}`"),
                open_span,
                format!("this `{open_text}` is never closed"),
            )
            .with_secondary(self.after_prev(), format!("expected `{close}` here"))
            .with_help(format!(
                "add `{close}` after the last item; a line break inside `{open_text}...{close}` does not end it"
            ));
            return Some(self.report(diag));
        }
        None
    }

    #[cold]
    #[inline(never)]
    fn unmatched_closer(&mut self, tok: Token) -> Failed {
        let text = self.text(tok.span);
        let mut diag =
            Diagnostic::error(UNMATCHED_CLOSER, format!("unmatched `{text}`"), tok.span, "nothing open here to close");
        if let Some(&(open, open_span)) = self.delims.last() {
            let want = closer_of(open).text().unwrap_or_default();
            diag = Diagnostic::error(
                UNMATCHED_CLOSER,
                format!("mismatched `{text}`"),
                tok.span,
                format!("expected `{want}`"),
            )
            .with_secondary(open_span, format!("to close this `{}`", open.text().unwrap_or_default()))
            .with_help(format!("close with `{want}`, or remove the stray `{text}`"));
        } else {
            diag = diag.with_help(format!("remove the `{text}`, or add the opening delimiter it was meant to close"));
        }
        self.report(diag)
    }

    fn expect(&mut self, kind: TokenKind, help: &str) -> PResult<Token> {
        if self.at(kind) {
            Ok(self.bump())
        } else {
            Err(self.unexpected(UNEXPECTED_TOKEN, &kind.describe(), help))
        }
    }

    /// A name; `what` says which ("the dimension's name").
    fn ident(&mut self, what: &str, help: &str) -> PResult<Ident> {
        let tok = self.peek();
        if tok.kind == TokenKind::Ident {
            self.bump();
            return Ok(Ident { name: self.text(tok.span).to_string(), span: tok.span });
        }
        Err(self.expected_name(tok, what, help))
    }

    #[cold]
    #[inline(never)]
    fn expected_name(&mut self, tok: Token, what: &str, help: &str) -> Failed {
        if !tok.kind.is_keyword() {
            return self.unexpected(EXPECTED_NAME, what, help);
        }
        let word = self.text(tok.span);
        let diag = Diagnostic::error(
            EXPECTED_NAME,
            format!("expected {what}, found keyword `{word}`"),
            tok.span,
            "reserved keyword",
        )
        .with_help(format!("`{word}` is a reserved keyword and cannot be a name; choose another name, e.g. `{word}_`"));
        self.report(diag)
    }

    /// Enter one nesting level; fails (E0112) past [`MAX_NESTING`].
    fn enter(&mut self, span: Span) -> PResult<()> {
        if self.depth >= MAX_NESTING {
            return Err(self.too_deep(span));
        }
        self.depth += 1;
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn too_deep(&mut self, span: Span) -> Failed {
        if std::mem::replace(&mut self.too_deep_reported, true) {
            return Failed;
        }
        let diag = Diagnostic::error(
            TOO_DEEP,
            format!("nesting is deeper than {MAX_NESTING} levels"),
            span,
            "too deeply nested",
        )
        .with_help("split the expression with `let` bindings, or flatten the nested blocks");
        self.report(diag)
    }

    fn check_height(&mut self, h: Height, span: Span) -> PResult<Height> {
        if h > MAX_NESTING {
            Err(self.too_deep(span))
        } else {
            Ok(h)
        }
    }

    // ---------------------------------------------------------------- recovery

    /// Skip the rest of the failed line: up to and including its newline, or up to a `}` that
    /// closes the enclosing block. A `{ ... }` opened on the line is skipped whole. When the error
    /// was found at the start of a later line (an unclosed `(` swallowed the newline), nothing is
    /// skipped: that line is a fresh start.
    fn recover_line(&mut self, node_start: usize) {
        self.delims.clear();
        self.interior_comments.clear();
        if std::mem::take(&mut self.fresh_line) && self.pos > node_start {
            return;
        }
        let mut braces = 0usize;
        loop {
            match self.toks[self.pos].kind {
                TokenKind::Eof => return,
                TokenKind::Newline if braces == 0 => {
                    self.pos += 1;
                    return;
                }
                TokenKind::RBrace if braces == 0 => return,
                TokenKind::RBrace => braces -= 1,
                TokenKind::LBrace => braces += 1,
                _ => {}
            }
            self.pos += 1;
        }
    }

    /// After a failed `for`/`if`/`on` header: move to the `{` on the same line, if any, so the
    /// block can still be parsed. Returns whether one was found.
    fn recover_to_brace(&mut self) -> bool {
        self.delims.clear();
        self.interior_comments.clear();
        self.fresh_line = false;
        loop {
            match self.toks[self.pos].kind {
                TokenKind::LBrace => return true,
                TokenKind::Newline | TokenKind::Eof | TokenKind::RBrace => return false,
                _ => self.pos += 1,
            }
        }
    }

    // ---------------------------------------------------------------- layout

    /// Blank lines and whole-line comments before a node. Called at the start of a line.
    fn leading_trivia(&mut self) -> Trivia {
        let mut trivia = Trivia::default();
        loop {
            let tok = self.toks[self.pos];
            match tok.kind {
                TokenKind::Newline => {
                    trivia.blank_line_before = true;
                    self.pos += 1;
                }
                TokenKind::Comment => {
                    trivia.leading.push(comment_text(self.src, tok.span));
                    self.pos += 1;
                    if self.toks[self.pos].kind == TokenKind::Newline {
                        self.pos += 1;
                    }
                }
                _ => return trivia,
            }
        }
    }

    /// The end of a declaration or statement: an optional trailing comment, then a newline (or
    /// end of file, or a `}` on the same line, which is left for the block to consume).
    fn end_line(&mut self, help: &str) -> PResult<Option<String>> {
        let tok = self.peek();
        match tok.kind {
            TokenKind::Comment => {
                self.pos += 1;
                if self.toks[self.pos].kind == TokenKind::Newline {
                    self.pos += 1;
                }
                Ok(Some(comment_text(self.src, tok.span)))
            }
            TokenKind::Newline => {
                self.pos += 1;
                Ok(None)
            }
            TokenKind::Eof | TokenKind::RBrace => Ok(None),
            _ => Err(self.unexpected(EXPECTED_LINE_END, "end of line", help)),
        }
    }

    /// A comment on the line of a block's closing `}` joins the block's end comments.
    fn closing_comment(&mut self, block: &mut Block) {
        let tok = self.toks[self.pos];
        if tok.kind == TokenKind::Comment {
            block.end_comments.push(comment_text(self.src, tok.span));
            self.pos += 1;
        }
    }

    fn take_interior_comments(&mut self, trivia: &mut Trivia) {
        trivia.leading.append(&mut self.interior_comments);
    }

    // ---------------------------------------------------------------- file and items

    fn parse_file(&mut self) -> Option<File> {
        let mut header_trivia = self.leading_trivia();
        header_trivia.blank_line_before = false;
        let header_start = self.pos;
        let header = if self.at(TokenKind::Kernel) {
            match self.parse_header() {
                Ok(h) => Some(h),
                Err(Failed) => {
                    self.recover_line(header_start);
                    None
                }
            }
        } else {
            let tok = self.peek();
            let span = if tok.kind == TokenKind::Eof { Span::new(0, 0) } else { tok.span };
            let found = if tok.kind == TokenKind::Eof { "an empty file".to_string() } else { tok.describe(self.src) };
            let diag = Diagnostic::error(
                MISSING_HEADER,
                format!("expected the kernel header `kernel NAME target TARGET`, found {found}"),
                span,
                "expected `kernel` here",
            )
            .with_help("start the file with a header line such as `kernel gemm target sm_90a`");
            self.report(diag);
            // A declaration can be parsed as usual; anything else is skipped with its line.
            if !is_declaration_keyword(tok.kind) && tok.kind != TokenKind::Eof {
                self.recover_line(header_start);
            }
            None
        };

        let mut items = Vec::new();
        let end_comments = loop {
            let trivia = self.leading_trivia();
            if self.at(TokenKind::Eof) || self.halted() {
                break trivia.leading;
            }
            let start = self.pos;
            match self.parse_item(trivia) {
                Ok(item) => items.push(item),
                Err(Failed) => {
                    if !std::mem::take(&mut self.abort_to_items) {
                        self.recover_line(start);
                    }
                }
            }
            if self.pos == start {
                // Never loop without progress (e.g. a stray `}` at the top level).
                self.pos += 1;
            }
        };
        let (header_trivia, kernel, target, header_span) = header.map(|(trailing, k, t, s)| {
            header_trivia.trailing = trailing;
            (header_trivia, k, t, s)
        })?;
        Some(File {
            header_trivia,
            kernel,
            target,
            items,
            end_comments,
            span: Span::new(header_span.start as usize, self.src.len()),
        })
    }

    fn parse_header(&mut self) -> PResult<(Option<String>, Ident, Ident, Span)> {
        const HELP: &str = "the header is `kernel NAME target TARGET`, e.g. `kernel gemm target sm_90a`";
        let start = self.bump().span;
        let kernel = self.ident("the kernel's name", HELP)?;
        self.expect(TokenKind::Target, HELP)?;
        let target = self.ident("a target such as `sm_90a`", HELP)?;
        let span = start.to(target.span);
        let trailing =
            self.end_line("the header line ends after the target; put declarations on the following lines")?;
        Ok((trailing, kernel, target, span))
    }

    fn parse_item(&mut self, mut trivia: Trivia) -> PResult<Item> {
        use TokenKind::*;
        let tok = self.peek();
        let start = tok.span;
        let kind = match tok.kind {
            Dim => {
                self.bump();
                let name = self.ident("the dimension's name", "write `dim M` or `dim M multiple_of 128`")?;
                ItemKind::Dim { name, attrs: self.attrs(false)? }
            }
            Const => {
                self.bump();
                let name = self.ident("the constant's name", "write `const BK = 64`")?;
                self.expect(Eq, "a constant is defined with `=`: `const BK = 64`")?;
                ItemKind::Const { name, value: self.expr()? }
            }
            Scalar => {
                self.bump();
                let name = self.ident("the scalar's name", "write `scalar alpha: f32`")?;
                self.expect(Colon, "a scalar argument needs a type: `scalar alpha: f32`")?;
                let ty = self.type_expr()?;
                ItemKind::Scalar { name, ty, attrs: self.attrs(false)? }
            }
            In | Out | InOut => {
                self.bump();
                let access = match tok.kind {
                    In => Access::In,
                    Out => Access::Out,
                    _ => Access::InOut,
                };
                let name = self.ident("the tensor's name", "write `in A: bf16[M, K]`")?;
                self.expect(Colon, "a tensor argument needs a type: `in A: bf16[M, K]`")?;
                let ty = self.type_expr()?;
                ItemKind::Tensor { access, name, ty, attrs: self.attrs(false)? }
            }
            Grid => {
                self.bump();
                let name = self.ident("the tile space's name", "write `grid tiles[m = M / 128, n = N / 128]`")?;
                let (axes, _, _) = self.delimited(
                    LBracket,
                    "the next axis",
                    "a tile space names its axes: `grid tiles[m = M / 128, n = N / 128]`",
                    Parser::axis,
                )?;
                ItemKind::Grid { name, axes, attrs: self.attrs(false)? }
            }
            Smem | View => {
                self.bump();
                let what = if tok.kind == Smem { "smem" } else { "view" };
                let help = if tok.kind == Smem {
                    "write `smem a_s: bf16[128, 64] stages 4`"
                } else {
                    "write `view c_s: bf16[64, 256] of a_s offset 0`"
                };
                let name = self.ident(&format!("the {what}'s name"), help)?;
                self.expect(Colon, help)?;
                let ty = self.type_expr()?;
                let attrs = self.attrs(false)?;
                if tok.kind == Smem {
                    ItemKind::Smem { name, ty, attrs }
                } else {
                    ItemKind::View { name, ty, attrs }
                }
            }
            Role | Barrier | Pipeline => {
                self.bump();
                let (what, help) = match tok.kind {
                    Role => ("role", "write `role mma: warpgroup 1..3 regs 232`"),
                    Barrier => ("barrier", "write `barrier done: count 1 producer mma consumer store`"),
                    _ => ("pipeline", "write `pipeline ab: stages 4 producer load consumer mma`"),
                };
                let name = self.ident(&format!("the {what}'s name"), help)?;
                self.expect(Colon, &format!("a {what}'s attributes follow a `:` after its name; {help}"))?;
                let attrs = self.attrs(false)?;
                match tok.kind {
                    Role => ItemKind::Role { name, attrs },
                    Barrier => ItemKind::Barrier { name, attrs },
                    _ => ItemKind::Pipeline { name, attrs },
                }
            }
            On => {
                self.bump();
                let role = match self.ident("the role's name", "write `on mma { ... }`") {
                    Ok(role) => role,
                    Err(Failed) => {
                        if self.recover_to_brace() {
                            self.block()?;
                        }
                        return Err(Failed);
                    }
                };
                let (mut body, opener) = self.block()?;
                trivia.trailing = opener;
                self.closing_comment(&mut body);
                self.end_line("put the next declaration on its own line")?;
                return Ok(Item { kind: ItemKind::On { role, body }, trivia, span: start.to(self.after_prev()) });
            }
            RBrace => return Err(self.unmatched_closer(tok)),
            Kernel => {
                let diag = Diagnostic::error(
                    UNKNOWN_DECLARATION,
                    "a second kernel header",
                    tok.span,
                    "only the first line may be a header",
                )
                .with_help("a file holds one kernel; start a new file for another kernel");
                return Err(self.report(diag));
            }
            Reg | Let | For | If | Else => {
                let word = self.text(tok.span);
                let diag = Diagnostic::error(
                    UNKNOWN_DECLARATION,
                    format!("`{word}` statement outside a role body"),
                    tok.span,
                    "statements are not declarations",
                )
                .with_help("statements belong inside an `on ROLE { ... }` body");
                return Err(self.report(diag));
            }
            Ident if matches!(self.peek2_raw(), LParen | Eq | Dot | LBracket) => {
                let diag = Diagnostic::error(
                    UNKNOWN_DECLARATION,
                    "statement outside a role body",
                    tok.span,
                    "expected a declaration",
                )
                .with_help("statements belong inside an `on ROLE { ... }` body");
                return Err(self.report(diag));
            }
            Ident => {
                let word = self.text(tok.span);
                let hint = match word {
                    "tensor" | "input" | "output" => "; tensor arguments are declared with `in`, `out` or `inout`",
                    "shared" | "shmem" => "; shared memory is declared with `smem`",
                    "warp" | "warpgroup" => "; warp roles are declared with `role NAME: warpgroup 1`",
                    "fn" | "def" | "func" => "; role bodies are written `on ROLE { ... }`",
                    _ => "",
                };
                let diag = Diagnostic::error(
                    UNKNOWN_DECLARATION,
                    format!("unknown declaration `{word}`"),
                    tok.span,
                    "not a declaration keyword",
                )
                .with_help(format!("{DECLARATION_HELP}{hint}"));
                return Err(self.report(diag));
            }
            _ => return Err(self.unexpected(UNKNOWN_DECLARATION, "a declaration", DECLARATION_HELP)),
        };
        let span = start.to(self.after_prev());
        self.take_interior_comments(&mut trivia);
        trivia.trailing = self.end_line("a declaration is one line: its keyword, name, type and attributes")?;
        Ok(Item { kind, trivia, span })
    }

    fn axis(&mut self) -> PResult<(Axis, Height)> {
        const HELP: &str = "an axis is `NAME = EXTENT`, e.g. `m = M / 128`";
        let name = self.ident("an axis name", HELP)?;
        self.expect(TokenKind::Eq, HELP)?;
        let (extent, h) = self.expr_h()?;
        let span = name.span.to(extent.span);
        Ok((Axis { name, extent, span }, h))
    }

    fn type_expr(&mut self) -> PResult<TypeExpr> {
        let dtype = self.ident(
            "a type such as `f32` or `bf16[M, K]`",
            "write a dtype, optionally with a shape: `f32`, `bf16[128, 64]`",
        )?;
        let mut span = dtype.span;
        let shape = if self.at(TokenKind::LBracket) {
            let (dims, close, _) = self.delimited(
                TokenKind::LBracket,
                "the next dimension",
                "dimensions are separated by `,`: `bf16[M, K]`",
                Parser::expr_h,
            )?;
            if dims.is_empty() {
                return Err(self.empty_brackets(
                    close,
                    "a tensor type needs at least one dimension: `f32[64]`; a scalar type has no brackets: `f32`",
                ));
            }
            span = span.to(close);
            Some(dims)
        } else {
            None
        };
        Ok(TypeExpr { dtype, shape, span })
    }

    #[cold]
    #[inline(never)]
    fn empty_brackets(&mut self, close: Span, help: &str) -> Failed {
        let diag = Diagnostic::error(EMPTY_BRACKETS, "empty brackets", close, "expected at least one item before `]`")
            .with_help(help);
        self.report(diag)
    }

    /// Attributes up to the end of the line (or up to `{` for a `for` header).
    fn attrs(&mut self, until_brace: bool) -> PResult<Vec<Attr>> {
        use TokenKind::*;
        let mut attrs = Vec::new();
        loop {
            let tok = self.peek();
            match tok.kind {
                Newline | Comment | Eof | RBrace => return Ok(attrs),
                LBrace if until_brace => return Ok(attrs),
                Ident => {}
                _ => {
                    let context = if until_brace { "an attribute or `{`" } else { "an attribute or end of line" };
                    return Err(self.unexpected(
                        EXPECTED_ATTR,
                        context,
                        "attributes are `key value` pairs, e.g. `stages 4 swizzle 128B`; `persistent` stands alone",
                    ));
                }
            }
            self.bump();
            let key = super::ast::Ident { name: self.text(tok.span).to_string(), span: tok.span };
            let value = if FLAG_ATTRS.contains(&key.name.as_str()) {
                AttrValue::Flag
            } else {
                let next = self.peek();
                match next.kind {
                    LBracket => {
                        let (items, close, _) = self.delimited(
                            LBracket,
                            "the next item",
                            "list items are separated by `,`: `[128, 64]`",
                            Parser::expr_h,
                        )?;
                        AttrValue::List(items, next.span.to(close))
                    }
                    k if can_start_expression(k) => {
                        let lo = self.expr()?;
                        let dots = self.peek();
                        let (value, range) = if dots.kind == DotDot {
                            self.bump();
                            let hi = self.expr()?;
                            (AttrValue::Range(lo, hi), Some(dots.span))
                        } else {
                            (AttrValue::Expr(lo), None)
                        };
                        // A bare name followed by something only a value can be: the value was
                        // missing and the name is the next key (`stages regs 232`, `1.. regs 4`).
                        if let AttrValue::Expr(last) | AttrValue::Range(_, last) = &value {
                            let after = self.peek().kind;
                            if let ExprKind::Name(name) = &last.kind {
                                if can_start_expression(after) && after != Ident || after == LBracket {
                                    return Err(self.missing_value_before_key(&key, range, name.span));
                                }
                            }
                        }
                        value
                    }
                    _ => return Err(self.missing_value(&key, next)),
                }
            };
            let span = key.span.to(self.after_prev());
            attrs.push(Attr { key, value, span });
        }
    }

    #[cold]
    #[inline(never)]
    fn missing_value(&mut self, key: &Ident, next: Token) -> Failed {
        let diag = Diagnostic::error(
            MISSING_ATTR_VALUE,
            format!("attribute `{}` needs a value", key.name),
            key.span,
            "no value follows",
        )
        .with_secondary(next.span, format!("expected a value before {}", next.describe(self.src)))
        .with_help(attr_value_help(&key.name));
        self.report(diag)
    }

    /// `key NAME value` where NAME was taken as `key`'s value, or `key lo.. NAME value` where it
    /// was taken as the range's end: the value (or the end) is missing. `dots` is the `..` of a
    /// range.
    #[cold]
    #[inline(never)]
    fn missing_value_before_key(&mut self, key: &Ident, dots: Option<Span>, name: Span) -> Failed {
        let next_key = self.text(name);
        let diag = match dots {
            Some(dots) => Diagnostic::error(
                EXPECTED_EXPRESSION,
                format!("the range of `{}` has no end", key.name),
                dots,
                "expected the end of the range after `..`",
            )
            .with_secondary(name, format!("`{next_key}` looks like the next attribute"))
            .with_help(format!("ranges are half-open and need both bounds: `{} 1..3`", key.name)),
            None => Diagnostic::error(
                MISSING_ATTR_VALUE,
                format!("attribute `{}` needs a value", key.name),
                key.span,
                "no value follows",
            )
            .with_secondary(name, format!("`{next_key}` looks like the next attribute"))
            .with_help(attr_value_help(&key.name)),
        };
        self.report(diag)
    }

    /// `open item, item, ... close` with newlines allowed inside and an optional trailing comma.
    /// Returns the items, the closing delimiter's span and the tallest item's height.
    fn delimited<T>(
        &mut self,
        open: TokenKind,
        what: &str,
        help: &str,
        mut item: impl FnMut(&mut Self) -> PResult<(T, Height)>,
    ) -> PResult<(Vec<T>, Span, Height)> {
        let open_tok = self.expect(open, help)?;
        let close = closer_of(open);
        self.delims.push((open, open_tok.span));
        let mut items = Vec::new();
        let mut height = 0;
        loop {
            if self.at(close) {
                break;
            }
            let (it, h) = item(self)?;
            items.push(it);
            height = height.max(h);
            if self.at(TokenKind::Comma) {
                self.bump();
            } else if !self.at(close) {
                let expected = format!("`,` or `{}`", close.text().unwrap_or_default());
                return Err(self.unexpected(
                    UNEXPECTED_TOKEN,
                    &expected,
                    &format!(
                        "{help}; close the list with `{}`, or write `,` before {what}",
                        close.text().unwrap_or_default()
                    ),
                ));
            }
        }
        let close_tok = self.bump();
        self.delims.pop();
        Ok((items, close_tok.span, height))
    }

    // ---------------------------------------------------------------- blocks and statements

    /// `{ stmts }`. Returns the block and the comment on the line of its `{`, if any.
    fn block(&mut self) -> PResult<(Block, Option<String>)> {
        let tok = self.peek();
        let (open, implicit) = match tok.kind {
            TokenKind::LBrace => (self.bump().span, false),
            TokenKind::Newline | TokenKind::Comment => self.missing_open_brace(),
            TokenKind::Eq => {
                let help = "a condition compares with `==`; `=` assigns, and only as a statement";
                return Err(self.unexpected(UNEXPECTED_TOKEN, "`{`", help));
            }
            _ => {
                return Err(self.unexpected(
                    UNEXPECTED_TOKEN,
                    "`{`",
                    "a block starts with `{` at the end of the header line",
                ))
            }
        };
        if self.enter(open).is_err() {
            // Skip the whole block, so its `}` does not close an enclosing block early.
            self.skip_to_matching_brace(implicit);
            return Err(Failed);
        }
        let result = self.block_body(open, implicit);
        self.depth -= 1;
        result
    }

    /// Move past the `}` that closes the block just opened (raw tokens, counting braces).
    fn skip_to_matching_brace(&mut self, implicit: bool) {
        let mut open = 1usize;
        while open > 0 {
            match self.toks[self.pos].kind {
                TokenKind::Eof => return,
                TokenKind::LBrace => open += 1,
                TokenKind::RBrace => open -= 1,
                // An implicitly opened block has no `}` of its own to find; its line is all.
                TokenKind::Newline if implicit && open == 1 => return,
                _ => {}
            }
            self.pos += 1;
        }
    }

    /// The header line ended without `{`. Report it, then carry on as if it were there, so the
    /// block's `}` does not show up as unmatched: a `{` alone on the next line is taken as the
    /// opener, otherwise the block opens implicitly at the end of the header. Returns the span
    /// to use for the opener and whether it is implicit (no `{` in the source).
    #[cold]
    #[inline(never)]
    fn missing_open_brace(&mut self) -> (Span, bool) {
        let at = self.peek();
        let mut next = self.pos;
        while matches!(self.toks[next].kind, TokenKind::Newline | TokenKind::Comment) {
            next += 1;
        }
        let own_line = self.toks[next];
        let diag = if own_line.kind == TokenKind::LBrace {
            Diagnostic::error(UNEXPECTED_TOKEN, "`{` must end the header line", own_line.span, "on its own line")
                .with_secondary(self.after_prev(), "move `{` here")
                .with_help("a newline ends the header; write the `{` at the end of the header line: `for i in 0..N {`")
        } else {
            // Point at the end of the line, or just before a comment that ends it.
            let span = if at.kind == TokenKind::Comment { self.after_prev() } else { at.span };
            Diagnostic::error(UNEXPECTED_TOKEN, "expected `{` at the end of the header line", span, "expected `{`")
                .with_help("a block starts with `{` at the end of the header line: `for i in 0..N {`")
        };
        self.report(diag);
        if own_line.kind == TokenKind::LBrace {
            self.pos = next + 1;
            self.prev_end = own_line.span.end as usize;
            (own_line.span, false)
        } else {
            (self.after_prev(), true)
        }
    }

    /// The statements after `{` (or after a header missing its `{`, when `implicit`: the error
    /// is reported already, so the block's own end-of-file or `on` errors are not).
    fn block_body(&mut self, open: Span, implicit: bool) -> PResult<(Block, Option<String>)> {
        let mut opener = None;
        let tok = self.toks[self.pos];
        if tok.kind == TokenKind::Comment {
            opener = Some(comment_text(self.src, tok.span));
            self.pos += 1;
        }
        if self.toks[self.pos].kind == TokenKind::Newline {
            self.pos += 1;
        }
        let mut stmts = Vec::new();
        loop {
            if self.halted() {
                return Err(Failed);
            }
            let mut trivia = self.leading_trivia();
            if stmts.is_empty() {
                // No blank line at the start of a block.
                trivia.blank_line_before = false;
            }
            let tok = self.peek();
            match tok.kind {
                TokenKind::RBrace => {
                    self.bump();
                    let block = Block { stmts, end_comments: trivia.leading, span: open.to(tok.span) };
                    return Ok((block, opener));
                }
                TokenKind::Eof => {
                    if !implicit {
                        self.unterminated_block(open, tok);
                    }
                    return Err(Failed);
                }
                TokenKind::On | TokenKind::Kernel => {
                    // A role body cannot hold another one: the `}` above is missing.
                    if !implicit {
                        self.unterminated_block(open, tok);
                    }
                    self.abort_to_items = true;
                    return Err(Failed);
                }
                k if is_declaration_keyword(k) => {
                    self.declaration_in_block(tok);
                    let start = self.pos;
                    self.recover_line(start);
                    continue;
                }
                _ => {}
            }
            let start = self.pos;
            match self.stmt(trivia) {
                Ok(stmt) => stmts.push(stmt),
                Err(Failed) => {
                    if self.abort_to_items || self.halted() {
                        return Err(Failed);
                    }
                    self.recover_line(start);
                }
            }
            if self.pos == start {
                self.pos += 1;
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn unterminated_block(&mut self, open: Span, found: Token) -> Failed {
        if found.kind == TokenKind::Eof {
            // Blocks are left innermost first: the first reports, the enclosing ones add labels.
            if let Some(diag) = self.unclosed_at_eof.and_then(|i| self.errors.get_mut(i)) {
                diag.secondary.push(crate::diag::Label { span: open, message: "this `{` is not closed either".into() });
                return Failed;
            }
            if !self.halted() {
                self.unclosed_at_eof = Some(self.errors.len());
            }
        }
        let diag = Diagnostic::error(UNTERMINATED_BLOCK, "unterminated block", open, "this `{` is never closed");
        let diag = if found.kind == TokenKind::Eof {
            diag.with_secondary(found.span, "the file ends here").with_help("add `}` after the block's last statement")
        } else {
            diag.with_secondary(found.span, "a new declaration starts here")
                .with_help("add `}` before this declaration to close the block")
        };
        self.report(diag)
    }

    #[cold]
    #[inline(never)]
    fn declaration_in_block(&mut self, tok: Token) -> Failed {
        let word = self.text(tok.span);
        let diag = Diagnostic::error(
            DECL_IN_BLOCK,
            format!("`{word}` declaration inside a block"),
            tok.span,
            "declarations are not statements",
        )
        .with_help(
            "declarations go at the top level, before the `on` bodies; inside a block use `let`, `reg` or a statement",
        );
        self.report(diag)
    }

    /// One statement with its trivia. Kept small, like the other functions on the recursion
    /// path, so that deep nesting costs little stack (debug builds keep every temporary).
    fn stmt(&mut self, trivia: Trivia) -> PResult<Stmt> {
        match self.peek().kind {
            TokenKind::For | TokenKind::If => self.compound_stmt(trivia),
            _ => self.simple_stmt(trivia),
        }
    }

    /// `for` or `if`, which hold blocks.
    #[inline(never)]
    fn compound_stmt(&mut self, mut trivia: Trivia) -> PResult<Stmt> {
        let tok = self.peek();
        let kind = if tok.kind == TokenKind::For { self.for_stmt(&mut trivia)? } else { self.if_stmt(&mut trivia)? };
        let span = tok.span.to(self.after_prev());
        self.end_line("put the next statement on its own line")?;
        Ok(Stmt { kind, trivia, span })
    }

    #[inline(never)]
    fn simple_stmt(&mut self, mut trivia: Trivia) -> PResult<Stmt> {
        use TokenKind::*;
        let tok = self.peek();
        let start = tok.span;
        let kind = match tok.kind {
            Reg => self.reg_stmt()?,
            Let => self.let_stmt()?,
            Else => return Err(self.dangling_else(tok)),
            k if !can_start_expression(k) => return Err(self.expected_statement()),
            _ => self.expr_stmt()?,
        };
        let span = start.to(self.after_prev());
        self.take_interior_comments(&mut trivia);
        trivia.trailing = self.end_line("put each statement on its own line")?;
        Ok(Stmt { kind, trivia, span })
    }

    #[inline(never)]
    fn reg_stmt(&mut self) -> PResult<StmtKind> {
        const HELP: &str = "write `reg acc: f32[64, 256] per warpgroup`";
        self.bump();
        let name = self.ident("the fragment's name", HELP)?;
        self.expect(TokenKind::Colon, HELP)?;
        let ty = self.type_expr()?;
        Ok(StmtKind::Reg { name, ty, attrs: self.attrs(false)? })
    }

    #[inline(never)]
    fn let_stmt(&mut self) -> PResult<StmtKind> {
        const HELP: &str = "write `let NAME = EXPR`";
        self.bump();
        let name = self.ident("a name", HELP)?;
        self.expect(TokenKind::Eq, HELP)?;
        Ok(StmtKind::Let { name, value: self.expr()? })
    }

    /// An assignment `place = value` or a call statement `op(args)`.
    #[inline(never)]
    fn expr_stmt(&mut self) -> PResult<StmtKind> {
        let target = self.expr()?;
        if self.at(TokenKind::Eq) {
            self.bump();
            if !is_place(&target) {
                return Err(self.bad_assign_target(&target));
            }
            Ok(StmtKind::Assign { target, value: self.expr()? })
        } else if matches!(target.kind, ExprKind::Call { .. }) {
            Ok(StmtKind::Call(target))
        } else {
            Err(self.not_a_statement(&target))
        }
    }

    #[cold]
    #[inline(never)]
    fn dangling_else(&mut self, tok: Token) -> Failed {
        let diag = Diagnostic::error(
            DANGLING_ELSE,
            "`else` without a preceding `if` block on its line",
            tok.span,
            "`else` must follow `}`",
        )
        .with_help("write `} else {` on one line, right after the `if` block's closing brace");
        self.report(diag)
    }

    #[cold]
    #[inline(never)]
    fn expected_statement(&mut self) -> Failed {
        self.unexpected(
            EXPECTED_STATEMENT,
            "a statement",
            "a statement is `reg`, `let`, `for`, `if`, an assignment `x = ...`, or an operation call `op(...)`",
        )
    }

    #[cold]
    #[inline(never)]
    fn bad_assign_target(&mut self, target: &Expr) -> Failed {
        let diag = Diagnostic::error(BAD_ASSIGN_TARGET, "cannot assign to this expression", target.span, "not a register fragment or element")
            .with_help("assign to a name, an element or a window of it: `acc = ...`, `best[i] = ...`; use `let` to name a new value");
        self.report(diag)
    }

    #[cold]
    #[inline(never)]
    fn not_a_statement(&mut self, target: &Expr) -> Failed {
        let help = match &target.kind {
            ExprKind::Name(n) => {
                format!("to call the operation, write `{}()`; to bind a value, write `let NAME = ...`", n.name)
            }
            ExprKind::Binary { op: BinOp::Eq, .. } => "to assign, write a single `=`: `x = value`".to_string(),
            _ => "only operation calls stand alone as statements; bind the value with `let NAME = ...`".to_string(),
        };
        let diag =
            Diagnostic::error(EXPECTED_STATEMENT, "expression is not a statement", target.span, "this value is unused")
                .with_help(help);
        self.report(diag)
    }

    /// Parse a block after a failed header, to report errors inside it; always fails.
    fn skip_block_after_error(&mut self) -> Failed {
        if !self.abort_to_items && self.recover_to_brace() {
            let _ = self.block();
        }
        Failed
    }

    /// `for VAR in ITER attrs { }`; fills `trivia` with the header's comments.
    fn for_stmt(&mut self, trivia: &mut Trivia) -> PResult<StmtKind> {
        let header = self.for_header();
        let Ok((var, iter, attrs)) = header else {
            return Err(self.skip_block_after_error());
        };
        self.take_interior_comments(trivia);
        let (mut body, opener) = self.block()?;
        trivia.trailing = opener;
        self.closing_comment(&mut body);
        Ok(StmtKind::For { var, iter, attrs, body })
    }

    #[inline(never)]
    fn for_header(&mut self) -> PResult<(Ident, ForIter, Vec<Attr>)> {
        const HELP: &str = "write `for i in 0..N { ... }` or `for t in tiles { ... }`";
        self.bump();
        let var = self.ident("a loop variable", HELP)?;
        self.expect(TokenKind::In, HELP)?;
        let lo = self.expr()?;
        let iter = if self.at(TokenKind::DotDot) {
            self.bump();
            ForIter::Range { lo, hi: self.expr()? }
        } else if let ExprKind::Name(name) = lo.kind {
            ForIter::Tiles(name)
        } else {
            return Err(self.bad_for_iter(lo.span));
        };
        let attrs = self.attrs(true)?;
        Ok((var, iter, attrs))
    }

    #[cold]
    #[inline(never)]
    fn bad_for_iter(&mut self, span: Span) -> Failed {
        let diag = Diagnostic::error(
            BAD_FOR_ITER,
            "a `for` loop walks a range or a tile space",
            span,
            "not a range or a tile space name",
        )
        .with_help("write a half-open range `for i in LO..HI` or the grid's name `for t in tiles`");
        self.report(diag)
    }

    /// `if c { } [else { } | else if ...]`; fills `trivia` with the header's comments.
    fn if_stmt(&mut self, trivia: &mut Trivia) -> PResult<StmtKind> {
        self.bump();
        let cond = match self.expr() {
            Ok(cond) => cond,
            Err(Failed) => return Err(self.skip_block_after_error()),
        };
        self.take_interior_comments(trivia);
        let (mut then_block, opener) = self.block()?;
        trivia.trailing = opener;
        if !self.at(TokenKind::Else) {
            self.closing_comment(&mut then_block);
            return Ok(StmtKind::If { cond, then_block, else_block: None });
        }
        self.bump();
        let else_block = self.else_block()?;
        Ok(StmtKind::If { cond, then_block, else_block: Some(else_block) })
    }

    /// What follows `else`: `if ...` (held as a block with that one statement) or `{ ... }`.
    #[inline(never)]
    fn else_block(&mut self) -> PResult<Block> {
        if self.at(TokenKind::If) {
            let start = self.peek().span;
            self.enter(start)?;
            let mut trivia = Trivia::default();
            let inner = self.if_stmt(&mut trivia);
            self.depth -= 1;
            let kind = inner?;
            let span = start.to(self.after_prev());
            let stmt = Stmt { kind, trivia, span };
            Ok(Block { stmts: vec![stmt], end_comments: Vec::new(), span })
        } else if self.at(TokenKind::LBrace) {
            let (mut block, opener) = self.block()?;
            // The tree has no slot for a comment after `else {`; it leads the block instead.
            if let Some(comment) = opener {
                match block.stmts.first_mut() {
                    Some(first) => first.trivia.leading.insert(0, comment),
                    None => block.end_comments.insert(0, comment),
                }
            }
            self.closing_comment(&mut block);
            Ok(block)
        } else {
            Err(self.unexpected(
                UNEXPECTED_TOKEN,
                "`{` or `if` after `else`",
                "write `else { ... }` or `else if COND { ... }`",
            ))
        }
    }

    // ---------------------------------------------------------------- expressions

    fn expr(&mut self) -> PResult<Expr> {
        Ok(self.expr_h()?.0)
    }

    fn expr_h(&mut self) -> PResult<(Expr, Height)> {
        let span = self.peek().span;
        self.enter(span)?;
        let result = self.binary(1);
        self.depth -= 1;
        result
    }

    /// Precedence climbing: operators binding at least `min_prec`, left-associative.
    fn binary(&mut self, min_prec: u8) -> PResult<(Expr, Height)> {
        let (mut lhs, mut height) = self.unary()?;
        while let Some(op) = binop(self.peek().kind).filter(|op| op.precedence() >= min_prec) {
            self.bump();
            let (rhs, rh) = self.binary(op.precedence() + 1)?;
            let span = lhs.span.to(rhs.span);
            height = self.check_height(height.max(rh) + 1, span)?;
            lhs = Expr { kind: ExprKind::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) }, span };
        }
        Ok((lhs, height))
    }

    fn unary(&mut self) -> PResult<(Expr, Height)> {
        let tok = self.peek();
        let op = match tok.kind {
            TokenKind::Minus => UnOp::Neg,
            TokenKind::Bang => UnOp::Not,
            _ => return self.postfix(),
        };
        self.bump();
        self.enter(tok.span)?;
        let operand = self.unary();
        self.depth -= 1;
        let (operand, h) = operand?;
        let span = tok.span.to(operand.span);
        let h = self.check_height(h + 1, span)?;
        Ok((Expr { kind: ExprKind::Unary { op, operand: Box::new(operand) }, span }, h))
    }

    fn postfix(&mut self) -> PResult<(Expr, Height)> {
        let (mut e, mut height) = self.primary()?;
        loop {
            let tok = self.peek();
            (e, height) = match tok.kind {
                TokenKind::Dot => self.field(e, height)?,
                TokenKind::LBracket => self.index(e, height)?,
                TokenKind::LParen => return Err(self.call_of_non_name(tok, e.span)),
                _ => return Ok((e, height)),
            };
        }
    }

    #[inline(never)]
    fn field(&mut self, base: Expr, height: Height) -> PResult<(Expr, Height)> {
        self.bump();
        let field = self.ident("a field name after `.`", "fields are names: `t.m`, `ab.stage`, `mma.warpgroup`")?;
        let span = base.span.to(field.span);
        let height = self.check_height(height + 1, span)?;
        Ok((Expr { kind: ExprKind::Field { base: Box::new(base), field }, span }, height))
    }

    #[inline(never)]
    fn index(&mut self, base: Expr, height: Height) -> PResult<(Expr, Height)> {
        let (items, close, h) = self.delimited(
            TokenKind::LBracket,
            "the next index item",
            "index items are `i`, `start :+ len` or `:`, separated by `,`",
            Parser::index_item,
        )?;
        if items.is_empty() {
            return Err(self.empty_brackets(
                close,
                "write at least one index item (`i`, `start :+ len` or `:`), or drop the brackets to use the whole value",
            ));
        }
        let span = base.span.to(close);
        let height = self.check_height(height.max(h) + 1, span)?;
        Ok((Expr { kind: ExprKind::Index { base: Box::new(base), items }, span }, height))
    }

    #[cold]
    #[inline(never)]
    fn call_of_non_name(&mut self, paren: Token, callee: Span) -> Failed {
        let diag = Diagnostic::error(
            UNEXPECTED_TOKEN,
            "only operations can be called",
            paren.span,
            "call of a value that is not an operation name",
        )
        .with_secondary(callee, "this is not an operation name")
        .with_help("operations are called by name: `op(args)`; fields and indexed values cannot be called");
        self.report(diag)
    }

    fn index_item(&mut self) -> PResult<(IndexItem, Height)> {
        let tok = self.peek();
        if tok.kind == TokenKind::Colon {
            self.bump();
            return Ok((IndexItem::Full(tok.span), 0));
        }
        let (start, h1) = self.expr_h()?;
        if self.at(TokenKind::ColonPlus) {
            self.bump();
            let (len, h2) = self.expr_h()?;
            return Ok((IndexItem::Window { start, len }, h1.max(h2)));
        }
        if self.at(TokenKind::Colon) {
            return Err(self.slice_syntax());
        }
        Ok((IndexItem::At(start), h1))
    }

    #[cold]
    #[inline(never)]
    fn slice_syntax(&mut self) -> Failed {
        let tok = self.peek();
        let diag = Diagnostic::error(UNEXPECTED_TOKEN, "slices are written as windows", tok.span, "expected `:+`")
            .with_help("a window is `start :+ len` (constant length); `:` alone is the whole dimension");
        self.report(diag)
    }

    fn arg(&mut self) -> PResult<(Arg, Height)> {
        let tok = self.peek();
        let name = if tok.kind == TokenKind::Ident && self.peek2_raw() == TokenKind::Eq {
            self.bump();
            self.bump();
            Some(Ident { name: self.text(tok.span).to_string(), span: tok.span })
        } else {
            None
        };
        let (value, h) = self.expr_h()?;
        let span = tok.span.to(value.span);
        Ok((Arg { name, value, span }, h))
    }

    fn primary(&mut self) -> PResult<(Expr, Height)> {
        use TokenKind::*;
        let tok = self.peek();
        let kind = match tok.kind {
            Int(v) => ExprKind::Int(v),
            Bytes(v) => ExprKind::Bytes(v),
            Float => ExprKind::Float(self.text(tok.span).to_string()),
            True | False => ExprKind::Bool(tok.kind == True),
            Inf => ExprKind::Inf,
            Ident if self.peek2_raw() == LParen => return self.call(),
            Ident => ExprKind::Name(super::ast::Ident { name: self.text(tok.span).to_string(), span: tok.span }),
            LParen => return self.paren(),
            _ => return Err(self.expected_expression()),
        };
        self.bump();
        Ok((Expr { kind, span: tok.span }, 0))
    }

    #[inline(never)]
    fn call(&mut self) -> PResult<(Expr, Height)> {
        let tok = self.bump();
        let func = Ident { name: self.text(tok.span).to_string(), span: tok.span };
        let (args, close, h) = self.delimited(
            TokenKind::LParen,
            "the next argument",
            "arguments are separated by `,`: `op(a, b, axis=1)`",
            Parser::arg,
        )?;
        let span = tok.span.to(close);
        let h = self.check_height(h + 1, span)?;
        Ok((Expr { kind: ExprKind::Call { func, args }, span }, h))
    }

    #[inline(never)]
    fn paren(&mut self) -> PResult<(Expr, Height)> {
        let open = self.bump();
        self.delims.push((TokenKind::LParen, open.span));
        let (inner, h) = self.expr_h()?;
        if !self.at(TokenKind::RParen) {
            return Err(self.unexpected(UNEXPECTED_TOKEN, "`)`", "close the parenthesis after the expression"));
        }
        let close = self.bump();
        self.delims.pop();
        let span = open.span.to(close.span);
        let h = self.check_height(h + 1, span)?;
        Ok((Expr { kind: ExprKind::Paren(Box::new(inner)), span }, h))
    }

    #[cold]
    #[inline(never)]
    fn expected_expression(&mut self) -> Failed {
        self.unexpected(
            EXPECTED_EXPRESSION,
            "an expression",
            "an expression is a number, a name, a call `op(...)`, a field `x.f`, an index `x[i]`, or operators on those",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(src: &str) -> Vec<Diagnostic> {
        match parse(src) {
            Ok(_) => panic!("expected errors for {src:?}"),
            Err(e) => e,
        }
    }

    /// The single error for `src`: its code and the text its primary span covers.
    fn one_error(src: &str) -> (String, String) {
        let errs = errors(src);
        assert_eq!(errs.len(), 1, "expected one error for {src:?}, got {errs:#?}");
        let e = &errs[0];
        assert!(e.help.as_deref().is_some_and(|h| !h.is_empty()), "error without help: {e:?}");
        (e.code.clone(), src[e.primary.span.range()].to_string())
    }

    const HEAD: &str = "kernel k target sm_90a\n";

    fn in_body(stmts: &str) -> String {
        format!("{HEAD}role r: warp 0\non r {{\n{stmts}\n}}\n")
    }

    #[test]
    fn minimal_file() {
        let f = parse("kernel k target sm_90a\n").unwrap();
        assert_eq!(f.kernel.name, "k");
        assert_eq!(f.target.name, "sm_90a");
        assert!(f.items.is_empty());
    }

    #[test]
    fn precedence_and_assoc() {
        let f = parse(&in_body("let x = a - b - c * d + -e.f[1] << 2 < 3 == 1 && !p || q")).unwrap();
        let ItemKind::On { body, .. } = &f.items[1].kind else { panic!() };
        let StmtKind::Let { value, .. } = &body.stmts[0].kind else { panic!() };
        // The root is the loosest operator.
        let ExprKind::Binary { op: BinOp::Or, lhs, .. } = &value.kind else { panic!("{value:?}") };
        let ExprKind::Binary { op: BinOp::And, lhs, .. } = &lhs.kind else { panic!() };
        let ExprKind::Binary { op: BinOp::Eq, lhs, .. } = &lhs.kind else { panic!() };
        let ExprKind::Binary { op: BinOp::Lt, lhs, .. } = &lhs.kind else { panic!() };
        let ExprKind::Binary { op: BinOp::Shl, lhs, .. } = &lhs.kind else { panic!() };
        let ExprKind::Binary { op: BinOp::Add, lhs, rhs } = &lhs.kind else { panic!() };
        assert!(matches!(rhs.kind, ExprKind::Unary { op: UnOp::Neg, .. }));
        // a - b - c*d is (a - b) - (c * d).
        let ExprKind::Binary { op: BinOp::Sub, lhs, rhs } = &lhs.kind else { panic!() };
        assert!(matches!(rhs.kind, ExprKind::Binary { op: BinOp::Mul, .. }));
        assert!(matches!(lhs.kind, ExprKind::Binary { op: BinOp::Sub, .. }));
    }

    #[test]
    fn spans_cover_nodes() {
        let src = in_body("    store(C[t.m * 128 :+ 128, :], cast(acc, bf16))  # done");
        let f = parse(&src).unwrap();
        let ItemKind::On { body, .. } = &f.items[1].kind else { panic!() };
        let stmt = &body.stmts[0];
        assert_eq!(&src[stmt.span.range()], "store(C[t.m * 128 :+ 128, :], cast(acc, bf16))");
        assert_eq!(stmt.trivia.trailing.as_deref(), Some("done"));
        let StmtKind::Call(call) = &stmt.kind else { panic!() };
        let ExprKind::Call { args, .. } = &call.kind else { panic!() };
        assert_eq!(&src[args[0].span.range()], "C[t.m * 128 :+ 128, :]");
        let ExprKind::Index { items, .. } = &args[0].value.kind else { panic!() };
        assert!(matches!(items[1], IndexItem::Full(_)));
        let IndexItem::Window { start, len } = &items[0] else { panic!() };
        assert_eq!(&src[start.span.range()], "t.m * 128");
        assert_eq!(&src[len.span.range()], "128");
    }

    #[test]
    fn declarations_with_colon_attrs() {
        let f = parse(&format!("{HEAD}role mma: warpgroup 1..3 regs 232\nbarrier b: count 1 producer mma\ngrid tiles[m = M / 128] persistent cluster [2, 1]\n")).unwrap();
        let ItemKind::Role { attrs, .. } = &f.items[0].kind else { panic!() };
        assert_eq!(attrs.len(), 2);
        assert!(matches!(attrs[0].value, AttrValue::Range(..)));
        let ItemKind::Grid { axes, attrs, .. } = &f.items[2].kind else { panic!() };
        assert_eq!(axes[0].name.name, "m");
        assert!(matches!(attrs[0].value, AttrValue::Flag));
        assert!(matches!(attrs[1].value, AttrValue::List(ref v, _) if v.len() == 2));
    }

    #[test]
    fn newlines_inside_parens_and_comments_there() {
        let src = in_body("    store(C[0 :+ 64,\n            1],  # inner\n          x)  # tail");
        let f = parse(&src).unwrap();
        let ItemKind::On { body, .. } = &f.items[1].kind else { panic!() };
        assert_eq!(body.stmts.len(), 1);
        assert_eq!(body.stmts[0].trivia.leading, vec!["inner".to_string()]);
        assert_eq!(body.stmts[0].trivia.trailing.as_deref(), Some("tail"));
    }

    #[test]
    fn else_if_chain_and_one_line_blocks() {
        let f = parse(&in_body("    if a { f() } else if b {  # two\n        g()\n    } else { h() }  # end")).unwrap();
        let ItemKind::On { body, .. } = &f.items[1].kind else { panic!() };
        let StmtKind::If { else_block: Some(else_block), .. } = &body.stmts[0].kind else { panic!() };
        assert_eq!(else_block.stmts.len(), 1);
        let inner = &else_block.stmts[0];
        assert_eq!(inner.trivia.trailing.as_deref(), Some("two"));
        let StmtKind::If { else_block: Some(last), .. } = &inner.kind else { panic!() };
        assert_eq!(last.end_comments, vec!["end".to_string()]);
    }

    #[test]
    fn trivia_blank_lines() {
        let f = parse("# about\n\nkernel k target sm_90a  # hdr\n\n\n# lead\ndim M\ndim N\n\non r {\n\n    f()\n\n    g()\n    # tail\n}\n# bye\n").unwrap();
        assert_eq!(f.header_trivia.leading, vec!["about"]);
        assert!(!f.header_trivia.blank_line_before);
        assert_eq!(f.header_trivia.trailing.as_deref(), Some("hdr"));
        assert!(f.items[0].trivia.blank_line_before);
        assert_eq!(f.items[0].trivia.leading, vec!["lead"]);
        assert!(!f.items[1].trivia.blank_line_before);
        let ItemKind::On { body, .. } = &f.items[2].kind else { panic!() };
        assert!(!body.stmts[0].trivia.blank_line_before);
        assert!(body.stmts[1].trivia.blank_line_before);
        assert_eq!(body.end_comments, vec!["tail"]);
        assert_eq!(f.end_comments, vec!["bye"]);
    }

    #[test]
    fn error_codes_and_spans() {
        assert_eq!(one_error(&format!("{HEAD}dim M multiple_of 128 )\n")), ("E0111".into(), ")".into()));
        assert_eq!(one_error(&format!("{HEAD}on r {{\n    f()\n")), ("E0102".into(), "{".into()));
        assert_eq!(one_error("dim M\n"), ("E0103".into(), "dim".into()));
        assert_eq!(one_error("").0, "E0103");
        assert_eq!(one_error(&format!("{HEAD}tensor A: f32[4]\n")), ("E0104".into(), "tensor".into()));
        assert_eq!(one_error(&format!("{HEAD}const X = 4x\n")), ("E0105".into(), "4x".into()));
        assert_eq!(one_error(&format!("{HEAD}const X = 99999999999999999999\n")).0, "E0106");
        assert_eq!(one_error(&format!("{HEAD}const X = * 2\n")), ("E0107".into(), "*".into()));
        assert_eq!(one_error(&format!("{HEAD}dim in\n")), ("E0108".into(), "in".into()));
        assert_eq!(one_error(&in_body("    f(a, b\n    g()")), ("E0109".into(), "(".into()));
        assert_eq!(one_error(&format!("{HEAD}dim M @\n")), ("E0110".into(), "@".into()));
        assert_eq!(one_error(&in_body("    f(a]")), ("E0111".into(), "]".into()));
        assert_eq!(one_error(&in_body("    f() g()")), ("E0113".into(), "g".into()));
        assert_eq!(one_error(&in_body("    x + 1")), ("E0114".into(), "x + 1".into()));
        assert_eq!(one_error(&in_body("    f(x) = 1")), ("E0115".into(), "f(x)".into()));
        assert_eq!(one_error(&format!("{HEAD}smem a: f32[4] stages\n")), ("E0116".into(), "stages".into()));
        assert_eq!(one_error(&format!("{HEAD}smem a: f32[4] 4\n")), ("E0117".into(), "4".into()));
        assert_eq!(one_error(&in_body("    if c {\n    }\n    else {\n    }")), ("E0118".into(), "else".into()));
        assert_eq!(one_error(&in_body("    for i in 4 {\n    }")), ("E0119".into(), "4".into()));
        assert_eq!(one_error(&in_body("    smem a: f32[4]")), ("E0120".into(), "smem".into()));
        assert_eq!(one_error(&in_body("    f(x[])")), ("E0121".into(), "]".into()));
        assert_eq!(one_error(&format!("{HEAD}role r warp 0\n")), ("E0101".into(), "warp".into()));
    }

    #[test]
    fn missing_brace_before_next_role_body() {
        let src = format!("{HEAD}on a {{\n    f()\non b {{\n    g(\n}}\n");
        let errs = errors(&src);
        let codes: Vec<_> = errs.iter().map(|e| e.code.as_str()).collect();
        assert_eq!(codes, vec!["E0102", "E0109"], "{errs:#?}");
    }

    #[test]
    fn several_errors_reported() {
        let src = in_body("    f(\n    let = 3\n    x +\n    for i in 0.. {\n        g() h()\n    }\n    ok()");
        let errs = errors(&src);
        let codes: Vec<_> = errs.iter().map(|e| e.code.as_str()).collect();
        assert_eq!(codes, vec!["E0109", "E0108", "E0107", "E0107", "E0113"], "{errs:#?}");
    }

    #[test]
    fn error_cap() {
        let src = format!("{HEAD}{}", "dim\n".repeat(100));
        let errs = errors(&src);
        assert_eq!(errs.len(), MAX_ERRORS);
        assert!(errs.last().unwrap().notes[0].contains("stopped"));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        for open in ["(", "-", "f(", "x[", "!"] {
            let src = in_body(&format!("    let y = {}1", open.repeat(100_000)));
            let errs = errors(&src);
            assert!(errs.iter().any(|e| e.code == TOO_DEEP), "{open}: {errs:?}");
        }
        let chain = format!("{}x", "x.".repeat(10_000));
        assert!(errors(&in_body(&format!("    let y = {chain}"))).iter().any(|e| e.code == TOO_DEEP));
        let sum = format!("1{}", " + 1".repeat(10_000));
        assert!(errors(&in_body(&format!("    let y = {sum}"))).iter().any(|e| e.code == TOO_DEEP));
        let blocks = format!("{}{}", "if c {\n".repeat(10_000), "}\n".repeat(10_000));
        assert!(errors(&in_body(&blocks)).iter().any(|e| e.code == TOO_DEEP));
        let elifs = format!("if c {{\n}}{}\n", " else if c {\n}".repeat(10_000));
        assert!(errors(&in_body(&elifs)).iter().any(|e| e.code == TOO_DEEP));
    }

    #[test]
    fn nesting_limit_boundary() {
        // The role body is one level and the `let` value another; each paren adds one.
        let parens = |n: usize| in_body(&format!("    let y = {}1{}", "(".repeat(n), ")".repeat(n)));
        parse(&parens(MAX_NESTING - 2)).unwrap();
        assert_eq!(errors(&parens(MAX_NESTING - 1))[0].code, TOO_DEEP);
        // Each block is one level; the innermost `if` condition one more.
        let ifs = |n: usize| in_body(&format!("{}{}", "if c {\n".repeat(n), "}\n".repeat(n)));
        parse(&ifs(MAX_NESTING - 2)).unwrap();
        assert_eq!(errors(&ifs(MAX_NESTING))[0].code, TOO_DEEP);
        // A long flat chain is a deep tree.
        let sum = |n: usize| in_body(&format!("    let y = 1{}", " + 1".repeat(n)));
        parse(&sum(MAX_NESTING)).unwrap();
        assert_eq!(errors(&sum(MAX_NESTING + 1))[0].code, TOO_DEEP);
    }
}
