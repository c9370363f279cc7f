//! Property tests for the lexer, parser and printer:
//! - arbitrary input never panics, and every error is well-formed (code, span, help);
//! - mutated example programs never panic, and whatever parses prints idempotently;
//! - randomly generated well-formed programs survive print → parse exactly (modulo spans), and
//!   the printer adds the parentheses a tree needs.

use std::path::PathBuf;

use cake::diag::Diagnostic;
use cake::syntax::ast::*;
use cake::syntax::lexer;
use cake::syntax::parser::MAX_ERRORS;
use cake::syntax::printer::attr_order;
use cake::syntax::{parse, print};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

fn config(cases: u32) -> ProptestConfig {
    // No persistence files: the tests run in a shared workspace.
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..ProptestConfig::default()
    }
}

/// Every diagnostic is a syntax error with a code in E0101–E0199, a span inside the source on
/// character boundaries, and a help line.
fn check_diagnostics(src: &str, errors: &[Diagnostic]) {
    assert!(!errors.is_empty(), "Err with no diagnostics");
    assert!(errors.len() <= MAX_ERRORS, "{} errors reported", errors.len());
    for d in errors {
        let n: u32 = d.code.strip_prefix("E01").and_then(|n| n.parse().ok()).unwrap_or(0);
        assert!(d.code.len() == 5 && (1..=99).contains(&n), "bad code {:?}", d.code);
        for label in std::iter::once(&d.primary).chain(&d.secondary) {
            let r = label.span.range();
            assert!(r.start <= r.end && r.end <= src.len(), "span {r:?} outside source of {} bytes", src.len());
            assert!(src.is_char_boundary(r.start) && src.is_char_boundary(r.end), "span {r:?} splits a character");
        }
        assert!(d.help.as_deref().is_some_and(|h| !h.is_empty()), "no help: {d:?}");
        assert!(!d.message.is_empty());
    }
}

/// Parse `src`; on success check that printing is a fixpoint, on failure check the diagnostics.
fn parse_and_check(src: &str) {
    match parse(src) {
        Ok(file) => {
            let once = print(&file);
            let reparsed = parse(&once).unwrap_or_else(|e| panic!("printed form does not parse: {e:#?}\n---\n{once}"));
            assert_eq!(print(&reparsed), once, "print is not idempotent");
        }
        Err(errors) => check_diagnostics(src, &errors),
    }
}

// ------------------------------------------------------------------ (a) arbitrary input

proptest! {
    #![proptest_config(config(2048))]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let src = String::from_utf8_lossy(&bytes);
        let _ = lexer::lex(&src);
        parse_and_check(&src);
    }

    #[test]
    fn random_cake_like_text_never_panics(src in "(kernel k target sm_90a\n)?[a-z_0-9 \n\t#().,:+*/%<>=!&|{}\\[\\]-]{0,300}") {
        parse_and_check(&src);
    }

    #[test]
    fn random_token_soup_never_panics(words in prop::collection::vec(prop::sample::select(TOKEN_SOUP), 0..120)) {
        let src = format!("kernel k target sm_90a\n{}", words.join(" "));
        parse_and_check(&src);
    }
}

const TOKEN_SOUP: &[&str] = &[
    "on",
    "r",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "\n",
    "\n",
    "\n",
    "for",
    "i",
    "in",
    "0",
    "..",
    "4",
    "if",
    "else",
    "let",
    "reg",
    "x",
    "=",
    "==",
    ":",
    ":+",
    ",",
    "f",
    "+",
    "-",
    "*",
    "!",
    "&&",
    "<<",
    "#c\n",
    "dim",
    "smem",
    "a:",
    "f32[4]",
    "stages",
    "persistent",
    "role",
    "warp",
    "1..3",
    "128B",
    "1.5",
    "0x40",
    "inf",
    "true",
    ".",
    "t.m",
    "@",
    "1e",
];

// ------------------------------------------------------------------ (b) mutated examples

fn examples() -> Vec<String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("examples directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "cake"))
        .collect();
    files.sort();
    files.iter().map(|p| std::fs::read_to_string(p).expect("readable")).collect()
}

#[derive(Clone, Debug)]
enum Mutation {
    /// Delete the token at this (scaled) index.
    DeleteToken(usize),
    /// Insert a snippet before the token at this index.
    InsertBefore(usize, &'static str),
    /// Swap two tokens.
    SwapTokens(usize, usize),
    /// Delete a byte range (snapped to character boundaries).
    DeleteBytes(usize, usize),
    /// Duplicate a line.
    DuplicateLine(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::DeleteToken),
        (any::<usize>(), prop::sample::select(TOKEN_SOUP)).prop_map(|(i, s)| Mutation::InsertBefore(i, s)),
        (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Mutation::SwapTokens(i, j)),
        (any::<usize>(), 0usize..40).prop_map(|(i, n)| Mutation::DeleteBytes(i, n)),
        any::<usize>().prop_map(Mutation::DuplicateLine),
    ]
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn apply(src: &str, m: &Mutation) -> String {
    let (tokens, _) = lexer::lex(src);
    let spans: Vec<_> = tokens.iter().filter(|t| t.kind != lexer::TokenKind::Eof).map(|t| t.span.range()).collect();
    if spans.is_empty() {
        return src.to_string();
    }
    let pick = |i: usize| spans[i % spans.len()].clone();
    match *m {
        Mutation::DeleteToken(i) => {
            let r = pick(i);
            format!("{}{}", &src[..r.start], &src[r.end..])
        }
        Mutation::InsertBefore(i, s) => {
            let r = pick(i);
            format!("{}{} {}", &src[..r.start], s, &src[r.start..])
        }
        Mutation::SwapTokens(i, j) => {
            let (a, b) = (pick(i), pick(j));
            let (a, b) = if a.start <= b.start { (a, b) } else { (b, a) };
            if a.end > b.start || a == b {
                return src.to_string();
            }
            format!("{}{}{}{}{}", &src[..a.start], &src[b.clone()], &src[a.end..b.start], &src[a], &src[b.end..])
        }
        Mutation::DeleteBytes(i, n) => {
            let start = floor_boundary(src, i % (src.len() + 1));
            let end = floor_boundary(src, start + n);
            format!("{}{}", &src[..start], &src[end..])
        }
        Mutation::DuplicateLine(i) => {
            let lines: Vec<&str> = src.split_inclusive('\n').collect();
            let k = i % lines.len();
            let mut out = String::new();
            for (n, line) in lines.iter().enumerate() {
                out.push_str(line);
                if n == k {
                    out.push_str(line);
                }
            }
            out
        }
    }
}

proptest! {
    #![proptest_config(config(1536))]

    #[test]
    fn mutated_examples_never_panic(which in any::<usize>(), mutations in prop::collection::vec(mutation(), 1..5)) {
        let all = examples();
        let mut src = all[which % all.len()].clone();
        for m in &mutations {
            src = apply(&src, m);
        }
        parse_and_check(&src);
    }
}

// ------------------------------------------------------------------ (c) generated programs

fn sp() -> cake::span::Span {
    cake::span::Span::default()
}

fn id(name: &str) -> Ident {
    Ident { name: name.to_string(), span: sp() }
}

fn ex(kind: ExprKind) -> Expr {
    Expr { kind, span: sp() }
}

const NAMES: &[&str] =
    &["a", "b", "M", "K", "t", "acc", "x_1", "_y", "bf16", "f32", "tiles", "load", "persistent", "warp", "B"];

fn name() -> impl Strategy<Value = Ident> {
    prop::sample::select(NAMES).prop_map(id)
}

fn comment() -> impl Strategy<Value = String> {
    "[a-z0-9 #:.()=+×-]{0,14}".prop_map(|s| s.trim_end().to_string())
}

fn trivia() -> impl Strategy<Value = Trivia> {
    (
        prop_oneof![3 => Just(Vec::new()), 1 => prop::collection::vec(comment(), 1..3)],
        prop::option::weighted(0.3, comment()),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(leading, trailing, blank_line_before)| Trivia { leading, trailing, blank_line_before })
}

const BINOPS: &[BinOp] = &[
    BinOp::Mul,
    BinOp::Div,
    BinOp::Rem,
    BinOp::Add,
    BinOp::Sub,
    BinOp::Shl,
    BinOp::Shr,
    BinOp::Lt,
    BinOp::Le,
    BinOp::Gt,
    BinOp::Ge,
    BinOp::Eq,
    BinOp::Ne,
    BinOp::And,
    BinOp::Or,
];

fn leaf_expr() -> impl Strategy<Value = Expr> {
    prop_oneof![
        (0i64..100_000).prop_map(|v| ex(ExprKind::Int(v))),
        Just(i64::MAX).prop_map(|v| ex(ExprKind::Int(v))),
        prop::sample::select(&["1.0", "2.5e-3", "1e9", "0.5", "3E+2", "10.25"][..])
            .prop_map(|s| ex(ExprKind::Float(s.into()))),
        (0u64..1_000_000).prop_map(|v| ex(ExprKind::Bytes(v))),
        any::<bool>().prop_map(|b| ex(ExprKind::Bool(b))),
        Just(ex(ExprKind::Inf)),
        name().prop_map(|n| ex(ExprKind::Name(n))),
    ]
}

/// Random expression trees, with or without the parentheses their shape needs.
fn raw_expr() -> impl Strategy<Value = Expr> {
    leaf_expr().prop_recursive(5, 40, 4, |inner| {
        let item = prop_oneof![
            inner.clone().prop_map(IndexItem::At),
            (inner.clone(), inner.clone()).prop_map(|(start, len)| IndexItem::Window { start, len }),
            Just(IndexItem::Full(sp())),
        ];
        let arg = (prop::option::weighted(0.3, name()), inner.clone()).prop_map(|(name, value)| Arg {
            name,
            value,
            span: sp(),
        });
        prop_oneof![
            (inner.clone(), name()).prop_map(|(b, f)| ex(ExprKind::Field { base: Box::new(b), field: f })),
            (inner.clone(), prop::collection::vec(item, 1..4))
                .prop_map(|(b, items)| ex(ExprKind::Index { base: Box::new(b), items })),
            (name(), prop::collection::vec(arg, 0..4)).prop_map(|(func, args)| ex(ExprKind::Call { func, args })),
            (prop::sample::select(&[UnOp::Neg, UnOp::Not][..]), inner.clone())
                .prop_map(|(op, e)| ex(ExprKind::Unary { op, operand: Box::new(e) })),
            (prop::sample::select(BINOPS), inner.clone(), inner.clone()).prop_map(|(op, l, r)| ex(ExprKind::Binary {
                op,
                lhs: Box::new(l),
                rhs: Box::new(r)
            })),
            (prop::sample::select(BINOPS), inner.clone(), inner.clone()).prop_map(|(op, l, r)| ex(ExprKind::Binary {
                op,
                lhs: Box::new(l),
                rhs: Box::new(r)
            })),
            inner.prop_map(|e| ex(ExprKind::Paren(Box::new(e)))),
        ]
    })
}

/// Binding strength by the grammar: postfix and atoms over unary over binary (by precedence).
fn strength(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Binary { op, .. } => op.precedence(),
        ExprKind::Unary { .. } => 100,
        _ => 200,
    }
}

fn wrap_below(e: &mut Box<Expr>, min: u8) {
    if strength(e) < min {
        let inner = std::mem::replace(&mut **e, ex(ExprKind::Inf));
        **e = ex(ExprKind::Paren(Box::new(inner)));
    }
}

/// Insert the `Paren` nodes a parser would produce for this tree's printed form: the shape of
/// every tree the parser returns.
fn add_needed_parens(e: &mut Expr) {
    match &mut e.kind {
        ExprKind::Field { base, .. } => {
            add_needed_parens(base);
            wrap_below(base, 200);
        }
        ExprKind::Index { base, items } => {
            add_needed_parens(base);
            wrap_below(base, 200);
            for item in items {
                match item {
                    IndexItem::At(x) => add_needed_parens(x),
                    IndexItem::Window { start, len } => {
                        add_needed_parens(start);
                        add_needed_parens(len);
                    }
                    IndexItem::Full(_) => {}
                }
            }
        }
        ExprKind::Call { args, .. } => args.iter_mut().for_each(|a| add_needed_parens(&mut a.value)),
        ExprKind::Unary { operand, .. } => {
            add_needed_parens(operand);
            wrap_below(operand, 100);
        }
        ExprKind::Binary { op, lhs, rhs } => {
            add_needed_parens(lhs);
            add_needed_parens(rhs);
            wrap_below(lhs, op.precedence());
            wrap_below(rhs, op.precedence() + 1);
        }
        ExprKind::Paren(inner) => add_needed_parens(inner),
        _ => {}
    }
}

/// Remove every `Paren` node (for comparing trees whose grouping the printer had to add).
fn strip_parens(e: &mut Expr) {
    while let ExprKind::Paren(inner) = &mut e.kind {
        let inner = std::mem::replace(&mut **inner, ex(ExprKind::Inf));
        *e = inner;
    }
    match &mut e.kind {
        ExprKind::Field { base, .. } => strip_parens(base),
        ExprKind::Index { base, items } => {
            strip_parens(base);
            for item in items {
                match item {
                    IndexItem::At(x) => strip_parens(x),
                    IndexItem::Window { start, len } => {
                        strip_parens(start);
                        strip_parens(len);
                    }
                    IndexItem::Full(_) => {}
                }
            }
        }
        ExprKind::Call { args, .. } => args.iter_mut().for_each(|a| strip_parens(&mut a.value)),
        ExprKind::Unary { operand, .. } => strip_parens(operand),
        ExprKind::Binary { lhs, rhs, .. } => {
            strip_parens(lhs);
            strip_parens(rhs);
        }
        _ => {}
    }
}

fn expr() -> impl Strategy<Value = Expr> {
    raw_expr().prop_map(|mut e| {
        add_needed_parens(&mut e);
        e
    })
}

fn type_expr() -> impl Strategy<Value = TypeExpr> {
    (name(), prop::option::of(prop::collection::vec(expr(), 1..3))).prop_map(|(dtype, shape)| TypeExpr {
        dtype,
        shape,
        span: sp(),
    })
}

fn attr_value() -> impl Strategy<Value = AttrValue> {
    prop_oneof![
        expr().prop_map(AttrValue::Expr),
        (expr(), expr()).prop_map(|(lo, hi)| AttrValue::Range(lo, hi)),
        prop::collection::vec(expr(), 0..3).prop_map(|v| AttrValue::List(v, sp())),
    ]
}

const UNKNOWN_KEYS: &[&str] = &["mystery", "note", "persistent", "per", "zz"];

/// Attributes for a declaration keyword, in canonical order: some known keys, then unknown ones.
fn attrs(keyword: &'static str) -> impl Strategy<Value = Vec<Attr>> {
    let known = attr_order(keyword);
    let unknown: Vec<&'static str> = UNKNOWN_KEYS.iter().copied().filter(|k| !known.contains(k)).collect();
    (
        prop::collection::vec((any::<bool>(), attr_value()), known.len()),
        prop::collection::vec((prop::sample::select(unknown), attr_value()), 0..3),
    )
        .prop_map(move |(known_values, extra)| {
            let make = |key: &str, value: AttrValue| {
                let value = if FLAG_ATTRS.contains(&key) { AttrValue::Flag } else { value };
                Attr { key: id(key), value, span: sp() }
            };
            let mut out: Vec<Attr> =
                known.iter().zip(known_values).filter(|(_, (keep, _))| *keep).map(|(k, (_, v))| make(k, v)).collect();
            out.extend(extra.into_iter().map(|(k, v)| make(k, v)));
            out
        })
}

fn simple_stmt() -> impl Strategy<Value = StmtKind> {
    let place = (name(), prop::option::of(expr()), prop::option::of(name())).prop_map(|(n, index, field)| {
        let mut e = ex(ExprKind::Name(n));
        if let Some(i) = index {
            e = ex(ExprKind::Index { base: Box::new(e), items: vec![IndexItem::At(i)] });
        }
        if let Some(f) = field {
            e = ex(ExprKind::Field { base: Box::new(e), field: f });
        }
        e
    });
    let call = (name(), prop::collection::vec(expr(), 0..3)).prop_map(|(func, args)| {
        let args = args.into_iter().map(|value| Arg { name: None, value, span: sp() }).collect();
        ex(ExprKind::Call { func, args })
    });
    prop_oneof![
        (name(), expr()).prop_map(|(name, value)| StmtKind::Let { name, value }),
        (name(), type_expr(), attrs("reg")).prop_map(|(name, ty, attrs)| StmtKind::Reg { name, ty, attrs }),
        (place, expr()).prop_map(|(target, value)| StmtKind::Assign { target, value }),
        call.prop_map(StmtKind::Call),
    ]
}

fn block_of(stmts: Vec<Stmt>, end_comments: Vec<String>) -> Block {
    let mut stmts = stmts;
    if let Some(first) = stmts.first_mut() {
        first.trivia.blank_line_before = false;
    }
    Block { stmts, end_comments, span: sp() }
}

fn stmt() -> impl Strategy<Value = Stmt> {
    let leaf = (simple_stmt(), trivia()).prop_map(|(kind, trivia)| Stmt { kind, trivia, span: sp() });
    leaf.prop_recursive(4, 24, 4, |inner| {
        let block = (prop::collection::vec(inner, 0..4), prop::collection::vec(comment(), 0..2))
            .prop_map(|(s, c)| block_of(s, c))
            .boxed();
        let iter = prop_oneof![
            (expr(), expr()).prop_map(|(lo, hi)| ForIter::Range { lo, hi }),
            name().prop_map(ForIter::Tiles),
        ];
        let for_stmt = (name(), iter, attrs("for"), block.clone()).prop_map(|(var, iter, attrs, body)| StmtKind::For {
            var,
            iter,
            attrs,
            body,
        });
        let if_stmt = (expr(), block.clone(), prop::option::of(block))
            .prop_map(|(cond, then_block, else_block)| StmtKind::If { cond, then_block, else_block });
        (prop_oneof![for_stmt, if_stmt], trivia()).prop_map(|(kind, trivia)| Stmt { kind, trivia, span: sp() })
    })
}

fn item() -> impl Strategy<Value = Item> {
    let access = prop::sample::select(&[(Access::In, "in"), (Access::Out, "out"), (Access::InOut, "inout")][..]);
    let kind = prop_oneof![
        1 => (name(), attrs("dim")).prop_map(|(name, attrs)| ItemKind::Dim { name, attrs }),
        1 => (name(), expr()).prop_map(|(name, value)| ItemKind::Const { name, value }),
        1 => (name(), type_expr(), attrs("scalar")).prop_map(|(name, ty, attrs)| ItemKind::Scalar { name, ty, attrs }),
        1 => (access, name(), type_expr(), attrs("in"))
            .prop_map(|((access, _), name, ty, attrs)| ItemKind::Tensor { access, name, ty, attrs }),
        1 => (name(), prop::collection::vec((name(), expr()), 1..3), attrs("grid")).prop_map(|(name, axes, attrs)| ItemKind::Grid {
            name,
            axes: axes.into_iter().map(|(name, extent)| Axis { name, extent, span: sp() }).collect(),
            attrs
        }),
        1 => (name(), type_expr(), attrs("smem")).prop_map(|(name, ty, attrs)| ItemKind::Smem { name, ty, attrs }),
        1 => (name(), type_expr(), attrs("view")).prop_map(|(name, ty, attrs)| ItemKind::View { name, ty, attrs }),
        1 => (name(), attrs("role")).prop_map(|(name, attrs)| ItemKind::Role { name, attrs }),
        1 => (name(), attrs("barrier")).prop_map(|(name, attrs)| ItemKind::Barrier { name, attrs }),
        1 => (name(), attrs("pipeline")).prop_map(|(name, attrs)| ItemKind::Pipeline { name, attrs }),
        6 => (name(), prop::collection::vec(stmt(), 0..6), prop::collection::vec(comment(), 0..2))
            .prop_map(|(role, stmts, c)| ItemKind::On { role, body: block_of(stmts, c) }),
    ];
    (kind, trivia()).prop_map(|(kind, trivia)| Item { kind, trivia, span: sp() })
}

fn file() -> impl Strategy<Value = File> {
    (trivia(), name(), prop::collection::vec(item(), 0..6), prop::collection::vec(comment(), 0..2)).prop_map(
        |(mut header_trivia, kernel, items, end_comments)| {
            header_trivia.blank_line_before = false;
            File { header_trivia, kernel, target: id("sm_90a"), items, end_comments, span: sp() }
        },
    )
}

proptest! {
    #![proptest_config(config(768))]

    #[test]
    fn generated_programs_round_trip(ast in file()) {
        let text = print(&ast);
        let mut reparsed = parse(&text).unwrap_or_else(|e| panic!("printed program does not parse: {e:#?}\n---\n{text}"));
        prop_assert_eq!(print(&reparsed), text.clone(), "print is not a fixpoint");
        reparsed.strip_spans();
        prop_assert_eq!(reparsed, ast, "parse(print(ast)) differs\n---\n{}", text);
    }
}

proptest! {
    #![proptest_config(config(1024))]

    /// Trees without the grouping their shape needs: the printer adds parentheses, so re-parsing
    /// gives the same tree once all `Paren` nodes are removed from both.
    #[test]
    fn printer_adds_needed_parentheses(e in raw_expr()) {
        let text = format!("kernel k target sm_90a\nconst X = {}\n", cake::syntax::printer::print_expr(&e));
        let file = parse(&text).unwrap_or_else(|err| panic!("does not parse: {err:#?}\n---\n{text}"));
        let ItemKind::Const { value, .. } = &file.items[0].kind else { panic!("not a const") };
        let mut got = value.clone();
        got.strip_spans();
        strip_parens(&mut got);
        let mut want = e.clone();
        strip_parens(&mut want);
        prop_assert_eq!(got, want, "{}", text);
    }
}
