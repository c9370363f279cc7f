//! The structural tactic `split-n`: consumer warpgroups that split the tile's rows (M) are
//! rewritten to split its columns (N) instead, sharing one A stage.
//!
//! It matches a consumer role `role R: warpgroup LO..HI` with W = HI − LO ≥ 2 warpgroups whose
//! body keeps one accumulator `reg ACC: f32[RW, CN] per warpgroup`, used only by `zero(ACC)`,
//! `wgmma(ACC, A[…, R.warpgroup * RW :+ RW], B[…])` and one `store(OUT[ROW + R.warpgroup * RW :+
//! RW, COL :+ CN], …ACC…)`, in a program that declares the tile's row extent as `const TM = RW *
//! W` (or `W * RW`). The rewrite gives every consumer the whole A stage and its own CN / W rows of
//! B — `const WN = CN / W`, `wgmma(ACC, A[…], B[…, R.warpgroup * WN :+ WN])`, `reg ACC: f32[RW,
//! WN]`, `store(OUT[ROW :+ RW, COL + R.warpgroup * WN :+ WN], …)` — and sets `TM = RW`, so a block
//! computes an RW × CN tile (the corpus family `gemm-sm90-splitn`'s shape). Smaller
//! accumulators per warpgroup and half the A traffic per tile are what it trades against more
//! blocks. A program that does not match exactly has no move; the verifier judges the result.

use cake::span::Span;
use cake::syntax::ast::{self, AttrValue, BinOp, Block, Expr, ExprKind, File, Ident, IndexItem, ItemKind, StmtKind};
use cake::syntax::printer::print_expr;

use crate::structural::{mentions, walk};

fn expr(kind: ExprKind) -> Expr {
    Expr { kind, span: Span::default() }
}

fn same(a: &Expr, b: &Expr) -> bool {
    print_expr(a) == print_expr(b)
}

fn bin(op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
    expr(ExprKind::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs) })
}

fn paren(e: Expr) -> Expr {
    match e.kind {
        ExprKind::Int(_) | ExprKind::Name(_) => e,
        _ => expr(ExprKind::Paren(Box::new(e))),
    }
}

/// The const the rewrite declares for one consumer's columns (`const WN = TN / WG`).
const SHARE: &str = "WN";

fn share_name() -> Expr {
    expr(ExprKind::Name(Ident { name: SHARE.into(), span: Span::default() }))
}

/// The integer value of a constant expression over the program's literal consts.
fn eval(file: &File, e: &Expr, depth: u32) -> Option<i64> {
    if depth > 16 {
        return None;
    }
    match &e.kind {
        ExprKind::Int(v) => Some(*v),
        ExprKind::Paren(x) => eval(file, x, depth + 1),
        ExprKind::Name(id) => file.items.iter().find_map(|it| match &it.kind {
            ItemKind::Const { name, value } if name.name == id.name => eval(file, value, depth + 1),
            _ => None,
        }),
        ExprKind::Binary { op, lhs, rhs } => {
            let (a, b) = (eval(file, lhs, depth + 1)?, eval(file, rhs, depth + 1)?);
            match op {
                BinOp::Add => a.checked_add(b),
                BinOp::Sub => a.checked_sub(b),
                BinOp::Mul => a.checked_mul(b),
                BinOp::Div if b != 0 && a % b == 0 => Some(a / b),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `R.warpgroup * RW`.
fn is_warpgroup_offset(e: &Expr, role: &str, rw: &Expr) -> bool {
    match &e.kind {
        ExprKind::Binary { op: BinOp::Mul, lhs, rhs } => {
            let is_wg = |x: &Expr| matches!(&x.kind, ExprKind::Field { base, field } if field.name == "warpgroup" && matches!(&base.kind, ExprKind::Name(b) if b.name == role));
            is_wg(lhs) && same(rhs, rw)
        }
        _ => false,
    }
}

/// `START + R.warpgroup * RW` → `START`.
fn strip_row_offset(e: &Expr, role: &str, rw: &Expr) -> Option<Expr> {
    match &e.kind {
        ExprKind::Binary { op: BinOp::Add, lhs, rhs } if is_warpgroup_offset(rhs, role, rw) => Some((**lhs).clone()),
        _ => None,
    }
}

fn warpgroup_offset(role: &str, len: &Expr) -> Expr {
    let wg = expr(ExprKind::Field { base: Box::new(expr(ExprKind::Name(Ident { name: role.into(), span: Span::default() }))), field: Ident { name: "warpgroup".into(), span: Span::default() } });
    bin(BinOp::Mul, wg, paren(len.clone()))
}

/// What the body does with the accumulator, rewritten; `None` when a use is not one of the three
/// the tactic understands.
struct Rewriter<'a> {
    role: &'a str,
    acc: String,
    rw: Expr,
    cn: Expr,
    wgmmas: usize,
    stores: usize,
}

impl Rewriter<'_> {
    fn block(&mut self, b: &mut Block) -> Option<()> {
        for s in &mut b.stmts {
            match &mut s.kind {
                StmtKind::For { body, .. } => self.block(body)?,
                StmtKind::If { then_block, else_block, .. } => {
                    self.block(then_block)?;
                    if let Some(e) = else_block {
                        self.block(e)?;
                    }
                }
                StmtKind::Reg { name, ty, .. } if name.name == self.acc => {
                    let shape = ty.shape.as_mut()?;
                    shape[1] = share_name();
                }
                StmtKind::Call(Expr { kind: ExprKind::Call { func, args }, .. }) => self.call(&func.name, args)?,
                _ => {
                    if mentions(s, &self.acc) {
                        return None;
                    }
                }
            }
        }
        Some(())
    }

    fn call(&mut self, func: &str, args: &mut [ast::Arg]) -> Option<()> {
        let is_acc = |a: &ast::Arg, acc: &str| matches!(&a.value.kind, ExprKind::Name(n) if n.name == acc);
        let uses_acc = args.iter().any(|a| expr_mentions(&a.value, &self.acc));
        if !uses_acc {
            return Some(());
        }
        let width = share_name();
        match func {
            "zero" if args.len() == 1 && is_acc(&args[0], &self.acc) => Some(()),
            "wgmma" if args.len() >= 3 && is_acc(&args[0], &self.acc) && args[1..].iter().all(|a| !expr_mentions(&a.value, &self.acc)) => {
                // A: drop the warpgroup's row window; B: add the warpgroup's column window.
                let ExprKind::Index { items: a_items, .. } = &mut args[1].value.kind else { return None };
                let last = a_items.last()?;
                match last {
                    IndexItem::Window { start, len } if is_warpgroup_offset(start, self.role, &self.rw) && same(len, &self.rw) => {}
                    _ => return None,
                }
                a_items.pop();
                // `a_s[R.warpgroup * RW :+ RW]` of a one-stage region becomes the whole `a_s`.
                if a_items.is_empty() {
                    let ExprKind::Index { base, .. } = &args[1].value.kind else { return None };
                    args[1].value = (**base).clone();
                }
                let b = &mut args[2].value;
                let window = IndexItem::Window { start: warpgroup_offset(self.role, &width), len: width.clone() };
                match &mut b.kind {
                    ExprKind::Index { items, .. } => {
                        if items.iter().any(|i| matches!(i, IndexItem::Window { .. })) {
                            return None;
                        }
                        items.push(window);
                    }
                    ExprKind::Name(_) => {
                        let base = Box::new(b.clone());
                        *b = expr(ExprKind::Index { base, items: vec![window] });
                    }
                    _ => return None,
                }
                self.wgmmas += 1;
                Some(())
            }
            "store" if args.len() == 2 && !expr_mentions(&args[0].value, &self.acc) => {
                let ExprKind::Index { items, .. } = &mut args[0].value.kind else { return None };
                if items.len() != 2 {
                    return None;
                }
                let (row_start, row_len) = match &items[0] {
                    IndexItem::Window { start, len } if same(len, &self.rw) => (strip_row_offset(start, self.role, &self.rw)?, len.clone()),
                    _ => return None,
                };
                let col_start = match &items[1] {
                    IndexItem::Window { start, len } if same(len, &self.cn) => start.clone(),
                    _ => return None,
                };
                items[0] = IndexItem::Window { start: row_start, len: row_len };
                items[1] = IndexItem::Window { start: bin(BinOp::Add, col_start, warpgroup_offset(self.role, &width)), len: width };
                self.stores += 1;
                Some(())
            }
            _ => None,
        }
    }
}

fn expr_mentions(e: &Expr, name: &str) -> bool {
    let mut found = false;
    walk(e, &mut |x| found |= matches!(&x.kind, ExprKind::Name(id) if id.name == name));
    found
}

/// The consumer count of `warpgroup LO..HI`: `X` for `LO..LO + X`, else `HI - LO`.
fn warpgroup_count(lo: &Expr, hi: &Expr) -> Expr {
    match &hi.kind {
        ExprKind::Binary { op: BinOp::Add, lhs, rhs } if same(lhs, lo) => (**rhs).clone(),
        _ => bin(BinOp::Sub, hi.clone(), paren(lo.clone())),
    }
}

/// The rewrite of every role that matches (one move each).
pub fn moves(file: &File) -> Vec<(usize, File)> {
    let roles: Vec<(String, Expr)> = file
        .items
        .iter()
        .filter_map(|it| match &it.kind {
            ItemKind::Role { name, attrs } => attrs.iter().find(|a| a.key.name == "warpgroup").and_then(|a| match &a.value {
                AttrValue::Range(lo, hi) => Some((name.name.clone(), warpgroup_count(lo, hi))),
                _ => None,
            }),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    for (role, part) in roles {
        if eval(file, &part, 0).is_none_or(|w| w < 2) {
            continue;
        }
        if let Some(f) = rewrite_role(file, &role, &part) {
            out.push((out.len(), f));
        }
    }
    out
}

fn rewrite_role(file: &File, role: &str, part: &Expr) -> Option<File> {
    let body = file.items.iter().find_map(|it| match &it.kind {
        ItemKind::On { role: r, body } if r.name == role => Some(body),
        _ => None,
    })?;
    // The one per-warpgroup f32 accumulator.
    let mut accs = body.stmts.iter().filter_map(|s| match &s.kind {
        StmtKind::Reg { name, ty, attrs } if ty.dtype.name == "f32" && attrs.iter().any(|a| a.key.name == "per") => ty.shape.as_ref().filter(|sh| sh.len() == 2).map(|sh| (name.name.clone(), sh[0].clone(), sh[1].clone())),
        _ => None,
    });
    let (acc, rw, cn) = accs.next()?;
    if accs.next().is_some() {
        return None;
    }
    let (w, cols) = (eval(file, part, 0)?, eval(file, &cn, 0)?);
    if cols % w != 0 {
        return None;
    }
    // The tile's row extent `const TM = RW * W`.
    let tm = file.items.iter().position(|it| match &it.kind {
        ItemKind::Const { value: Expr { kind: ExprKind::Binary { op: BinOp::Mul, lhs, rhs }, .. }, .. } => (same(lhs, &rw) && same(rhs, part)) || (same(lhs, part) && same(rhs, &rw)),
        _ => false,
    })?;
    // Each consumer's share of the columns, as a const: the verifier folds a const where it
    // would not fold `TN / WG` inside an index (the descriptor's atom alignment needs the value).
    if file.items.iter().any(|it| matches!(&it.kind, ItemKind::Const { name, .. } if name.name == SHARE)) {
        return None;
    }
    let mut f = file.clone();
    if let ItemKind::Const { value, .. } = &mut f.items[tm].kind {
        *value = rw.clone();
    }
    let share = bin(BinOp::Div, paren(cn.clone()), paren(part.clone()));
    let mut item = f.items[tm].clone();
    item.kind = ItemKind::Const { name: Ident { name: SHARE.into(), span: Span::default() }, value: share };
    item.trivia = Default::default();
    // After every const, so the ones it names are declared before it.
    let last_const = f.items.iter().rposition(|it| matches!(it.kind, ItemKind::Const { .. })).unwrap_or(tm);
    f.items.insert(last_const + 1, item);
    let body = f.items.iter_mut().find_map(|it| match &mut it.kind {
        ItemKind::On { role: r, body } if r.name == role => Some(body),
        _ => None,
    })?;
    let mut rw_ = Rewriter { role, acc, rw, cn, wgmmas: 0, stores: 0 };
    rw_.block(body)?;
    (rw_.wgmmas > 0 && rw_.stores == 1).then_some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed(wg: i64) -> File {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/seeds/gemm_bf16_naive.cake")).unwrap();
        let text = text.replace("const WG = 1", &format!("const WG = {wg}")).replace("const MMA_REGS = 240", "const MMA_REGS = 232");
        cake::syntax::parser::parse(&text).unwrap()
    }

    #[test]
    fn two_consumers_that_split_rows_split_columns_and_the_result_verifies() {
        let moves = moves(&seed(2));
        assert_eq!(moves.len(), 1);
        let text = cake::syntax::print(&moves[0].1);
        for want in [
            "const TM = 64\n",
            "const WN = TN / WG\n",
            "reg acc: f32[64, WN] per warpgroup",
            "wgmma(acc, a_s[ab.stage], b_s[ab.stage, mma.warpgroup * WN :+ WN])",
            "store(C[t.m * TM :+ 64, t.n * TN + mma.warpgroup * WN :+ WN], cast(acc, bf16))",
        ] {
            assert!(text.contains(want), "missing `{want}` in\n{text}");
        }
        let v = cake::api::validate(&text);
        assert!(v.is_ok(), "{text}\n{:?}", v.err().map(|e| e.diagnostics()));
    }

    #[test]
    fn a_one_stage_operand_window_becomes_the_whole_region() {
        let text = cake::syntax::print(&seed(2)).replace("a_s[ab.stage, mma.warpgroup * 64 :+ 64]", "a_s[mma.warpgroup * 64 :+ 64]");
        let moves = moves(&cake::syntax::parser::parse(&text).unwrap());
        let out = cake::syntax::print(&moves[0].1);
        assert!(out.contains("wgmma(acc, a_s, b_s[ab.stage, mma.warpgroup * WN :+ WN])"), "{out}");
    }

    #[test]
    fn one_consumer_or_a_split_that_does_not_divide_has_no_move() {
        assert!(moves(&seed(1)).is_empty());
        // 128 columns over 3 consumers.
        assert!(moves(&seed(3)).is_empty());
    }
}
