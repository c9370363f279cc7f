//! Structural tactics: rewrites of a consumer loop's shape, as syntax-tree transforms.
//!
//! Both find a counted loop `for V in LO..HI` (anywhere in a role body) whose body starts with an
//! *issue* part `wait(P) … wgmma(acc, …) … wgmma_commit()` (at least one `wgmma`, possibly inside
//! inner loops) followed by `wgmma_wait(0)`:
//!
//! * `deferred-release`: the body is `ISSUE; wgmma_wait(0); release(P)` and `P` has at least two
//!   stages. The first iteration is peeled; the loop keeps one wgmma group in flight
//!   (`wgmma_wait(1)`, then release the previous stage); `wgmma_wait(0); release(P)` follow it.
//!   (The warp-specialized GEMM example's main loop.)
//! * `software-pipeline`: the body is `ISSUE; wgmma_wait(0); DRAIN; EPILOGUE` where `DRAIN` ends
//!   with `release(P)` and `EPILOGUE` reads neither the accumulator nor `P`. The next tile's MMAs
//!   are issued before this tile's epilogue, so the tensor cores work while the warpgroup reduces:
//!   `ISSUE[V:=LO]; for V in LO+1..HI { wgmma_wait(0); DRAIN[V:=V-1]; ISSUE; EPILOGUE[V:=V-1] };
//!   wgmma_wait(0); DRAIN[V:=HI-1]; EPILOGUE[V:=HI-1]`. (The Flash-KMeans example's loop.)
//!
//! A loop that does not match exactly is left alone: these tactics have no move for it.

use cake::span::Span;
use cake::syntax::ast::{self, BinOp, Block, Expr, ExprKind, File, ForIter, Ident, ItemKind, Stmt, StmtKind};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rewrite {
    DeferredRelease,
    SoftwarePipeline,
    /// Consumers that split the tile's rows split its columns instead (`split_n.rs`).
    SplitN,
}

impl Rewrite {
    pub fn parse(s: &str) -> Option<Rewrite> {
        match s {
            "deferred-release" => Some(Rewrite::DeferredRelease),
            "software-pipeline" => Some(Rewrite::SoftwarePipeline),
            "split-n" => Some(Rewrite::SplitN),
            _ => None,
        }
    }
}

/// Every rewrite of one matching loop; the `usize` is the loop's index among the matches.
pub fn moves(file: &File, rw: Rewrite) -> Vec<(usize, File)> {
    if rw == Rewrite::SplitN {
        return crate::split_n::moves(file);
    }
    let stages = |p: &str| {
        file.items.iter().find_map(|it| match &it.kind {
            ItemKind::Pipeline { name, attrs } if name.name == p => Some(
                attrs
                    .iter()
                    .find(|a| a.key.name == "stages")
                    .and_then(|a| match &a.value {
                        ast::AttrValue::Expr(Expr { kind: ExprKind::Int(v), .. }) => Some(*v),
                        _ => None,
                    })
                    .unwrap_or(1),
            ),
            _ => None,
        })
    };
    let mut out = Vec::new();
    let mut k = 0;
    loop {
        let mut f = file.clone();
        let mut seen = 0;
        let mut done = false;
        for it in &mut f.items {
            if let ItemKind::On { body, .. } = &mut it.kind {
                rewrite_block(body, rw, &stages, k, &mut seen, &mut done);
            }
        }
        if !done {
            return out;
        }
        out.push((k, f));
        k += 1;
    }
}

fn rewrite_block(b: &mut Block, rw: Rewrite, stages: &dyn Fn(&str) -> Option<i64>, want: usize, seen: &mut usize, done: &mut bool) {
    let mut i = 0;
    while i < b.stmts.len() && !*done {
        let replacement = match &b.stmts[i].kind {
            StmtKind::For { var, iter: ForIter::Range { lo, hi }, attrs, body } if attrs.is_empty() => match transform(var, lo, hi, body, rw, stages) {
                Some(stmts) => {
                    let mine = *seen == want;
                    *seen += 1;
                    mine.then_some(stmts)
                }
                None => None,
            },
            _ => None,
        };
        if let Some(stmts) = replacement {
            let trivia = b.stmts[i].trivia.clone();
            let n = stmts.len();
            b.stmts.splice(i..=i, stmts);
            b.stmts[i].trivia = trivia;
            *done = true;
            i += n;
            continue;
        }
        match &mut b.stmts[i].kind {
            StmtKind::For { body, .. } => rewrite_block(body, rw, stages, want, seen, done),
            StmtKind::If { then_block, else_block, .. } => {
                rewrite_block(then_block, rw, stages, want, seen, done);
                if let Some(e) = else_block {
                    rewrite_block(e, rw, stages, want, seen, done);
                }
            }
            _ => {}
        }
        i += 1;
    }
}

fn call_of(s: &Stmt) -> Option<(&str, &[ast::Arg])> {
    match &s.kind {
        StmtKind::Call(Expr { kind: ExprKind::Call { func, args }, .. }) => Some((func.name.as_str(), args.as_slice())),
        _ => None,
    }
}

fn name_arg(args: &[ast::Arg], i: usize) -> Option<&str> {
    match &args.get(i)?.value.kind {
        ExprKind::Name(id) => Some(&id.name),
        _ => None,
    }
}

fn is_call(s: &Stmt, f: &str, arg0: Option<&str>) -> bool {
    match call_of(s) {
        Some((name, args)) if name == f => match arg0 {
            None => true,
            Some(a) => name_arg(args, 0) == Some(a),
        },
        _ => false,
    }
}

fn is_wait_group(s: &Stmt, n: i64) -> bool {
    matches!(call_of(s), Some(("wgmma_wait", [a])) if matches!(a.value.kind, ExprKind::Int(v) if v == n))
}

/// The accumulators of the `wgmma` calls in `stmts` (their first argument), nested loops included.
fn accumulators(stmts: &[Stmt]) -> Vec<String> {
    let mut out = Vec::new();
    for s in stmts {
        match &s.kind {
            StmtKind::For { body, .. } => out.extend(accumulators(&body.stmts)),
            _ => {
                if let Some(("wgmma", args)) = call_of(s) {
                    if let Some(a) = name_arg(args, 0) {
                        out.push(a.to_string());
                    }
                }
            }
        }
    }
    out
}

/// Whether statement `s` names `name` anywhere.
pub(crate) fn mentions(s: &Stmt, name: &str) -> bool {
    let mut found = false;
    let mut check = |e: &Expr| {
        if matches!(&e.kind, ExprKind::Name(id) if id.name == name) {
            found = true;
        }
    };
    each_stmt_expr(s, &mut check);
    found
}

/// Every expression of `e`, outermost first.
pub(crate) fn walk(e: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Field { base, .. } => walk(base, f),
        ExprKind::Index { base, items } => {
            walk(base, f);
            for it in items {
                match it {
                    ast::IndexItem::At(x) => walk(x, f),
                    ast::IndexItem::Window { start, len } => {
                        walk(start, f);
                        walk(len, f);
                    }
                    ast::IndexItem::Full(_) => {}
                }
            }
        }
        ExprKind::Call { args, .. } => args.iter().for_each(|a| walk(&a.value, f)),
        ExprKind::Unary { operand, .. } => walk(operand, f),
        ExprKind::Binary { lhs, rhs, .. } => {
            walk(lhs, f);
            walk(rhs, f);
        }
        ExprKind::Paren(x) => walk(x, f),
        _ => {}
    }
}

fn each_stmt_expr(s: &Stmt, f: &mut dyn FnMut(&Expr)) {
    match &s.kind {
        StmtKind::Let { value, .. } => walk(value, f),
        StmtKind::Reg { .. } => {}
        StmtKind::Assign { target, value } => {
            walk(target, f);
            walk(value, f);
        }
        StmtKind::Call(e) => walk(e, f),
        StmtKind::For { iter, body, .. } => {
            if let ForIter::Range { lo, hi } = iter {
                walk(lo, f);
                walk(hi, f);
            }
            body.stmts.iter().for_each(|s| each_stmt_expr(s, f));
        }
        StmtKind::If { cond, then_block, else_block } => {
            walk(cond, f);
            then_block.stmts.iter().for_each(|s| each_stmt_expr(s, f));
            if let Some(e) = else_block {
                e.stmts.iter().for_each(|s| each_stmt_expr(s, f));
            }
        }
    }
}

fn subst_expr(e: &mut Expr, var: &str, with: &Expr) {
    match &mut e.kind {
        ExprKind::Name(id) if id.name == var => *e = with.clone(),
        ExprKind::Field { base, .. } => subst_expr(base, var, with),
        ExprKind::Index { base, items } => {
            subst_expr(base, var, with);
            for it in items {
                match it {
                    ast::IndexItem::At(x) => subst_expr(x, var, with),
                    ast::IndexItem::Window { start, len } => {
                        subst_expr(start, var, with);
                        subst_expr(len, var, with);
                    }
                    ast::IndexItem::Full(_) => {}
                }
            }
        }
        ExprKind::Call { args, .. } => args.iter_mut().for_each(|a| subst_expr(&mut a.value, var, with)),
        ExprKind::Unary { operand, .. } => subst_expr(operand, var, with),
        ExprKind::Binary { lhs, rhs, .. } => {
            subst_expr(lhs, var, with);
            subst_expr(rhs, var, with);
        }
        ExprKind::Paren(x) => subst_expr(x, var, with),
        _ => {}
    }
}

/// `stmts` with `var` replaced by `with` (an inner loop that rebinds `var` is left alone).
fn subst(stmts: &[Stmt], var: &str, with: &Expr) -> Vec<Stmt> {
    let mut out = stmts.to_vec();
    for s in &mut out {
        match &mut s.kind {
            StmtKind::Let { value, .. } => subst_expr(value, var, with),
            StmtKind::Reg { .. } => {}
            StmtKind::Assign { target, value } => {
                subst_expr(target, var, with);
                subst_expr(value, var, with);
            }
            StmtKind::Call(e) => subst_expr(e, var, with),
            StmtKind::For { var: v, iter, body, .. } => {
                if let ForIter::Range { lo, hi } = iter {
                    subst_expr(lo, var, with);
                    subst_expr(hi, var, with);
                }
                if v.name != var {
                    body.stmts = subst(&body.stmts, var, with);
                }
            }
            StmtKind::If { cond, then_block, else_block } => {
                subst_expr(cond, var, with);
                then_block.stmts = subst(&then_block.stmts, var, with);
                if let Some(e) = else_block {
                    e.stmts = subst(&e.stmts, var, with);
                }
            }
        }
    }
    out
}

fn expr(kind: ExprKind) -> Expr {
    Expr { kind, span: Span::default() }
}

fn offset(e: &Expr, op: BinOp) -> Expr {
    match (&e.kind, op) {
        (ExprKind::Int(v), BinOp::Add) => expr(ExprKind::Int(v + 1)),
        (ExprKind::Int(v), BinOp::Sub) => expr(ExprKind::Int(v - 1)),
        _ => expr(ExprKind::Binary { op, lhs: Box::new(e.clone()), rhs: Box::new(expr(ExprKind::Int(1))) }),
    }
}

fn wait_group(n: i64) -> Stmt {
    let call = expr(ExprKind::Call {
        func: Ident { name: "wgmma_wait".into(), span: Span::default() },
        args: vec![ast::Arg { name: None, value: expr(ExprKind::Int(n)), span: Span::default() }],
    });
    Stmt { kind: StmtKind::Call(call), trivia: ast::Trivia::default(), span: Span::default() }
}

fn for_stmt(var: &Ident, lo: Expr, hi: Expr, stmts: Vec<Stmt>) -> Stmt {
    let body = Block { stmts, end_comments: Vec::new(), span: Span::default() };
    Stmt { kind: StmtKind::For { var: var.clone(), iter: ForIter::Range { lo, hi }, attrs: Vec::new(), body }, trivia: ast::Trivia::default(), span: Span::default() }
}

fn no_trivia(mut stmts: Vec<Stmt>) -> Vec<Stmt> {
    for s in &mut stmts {
        s.trivia = ast::Trivia::default();
    }
    stmts
}

fn transform(var: &Ident, lo: &Expr, hi: &Expr, body: &Block, rw: Rewrite, stages: &dyn Fn(&str) -> Option<i64>) -> Option<Vec<Stmt>> {
    let s = &body.stmts;
    let (_, args) = call_of(s.first()?).filter(|(f, _)| *f == "wait")?;
    let p = name_arg(args, 0)?.to_string();
    stages(&p)?;
    let commit = s.iter().position(|x| is_call(x, "wgmma_commit", None))?;
    let issue = &s[..=commit];
    let accs = accumulators(issue);
    if accs.is_empty() || !is_wait_group(s.get(commit + 1)?, 0) {
        return None;
    }
    let after = &s[commit + 2..];
    let v = expr(ExprKind::Name(var.clone()));
    match rw {
        Rewrite::DeferredRelease => {
            if after.len() != 1 || !is_call(&after[0], "release", Some(&p)) || stages(&p)? < 2 {
                return None;
            }
            let mut inner = issue.to_vec();
            inner.push(wait_group(1));
            inner.push(after[0].clone());
            let mut out = no_trivia(subst(issue, &var.name, lo));
            out.push(for_stmt(var, offset(lo, BinOp::Add), hi.clone(), no_trivia(inner)));
            out.push(wait_group(0));
            out.push(Stmt { trivia: ast::Trivia::default(), ..after[0].clone() });
            Some(out)
        }
        Rewrite::SplitN => None,
        Rewrite::SoftwarePipeline => {
            let rel = after.iter().position(|x| is_call(x, "release", Some(&p)))?;
            let (drain, epilogue) = (&after[..=rel], &after[rel + 1..]);
            if epilogue.is_empty() || epilogue.iter().any(|x| mentions(x, &p) || accs.iter().any(|a| mentions(x, a))) {
                return None;
            }
            if issue[1..].iter().any(|x| mentions(x, &p) && (is_call(x, "wait", Some(&p)) || is_call(x, "release", Some(&p)))) {
                return None;
            }
            let prev = expr(ExprKind::Binary { op: BinOp::Sub, lhs: Box::new(v.clone()), rhs: Box::new(expr(ExprKind::Int(1))) });
            let last = offset(hi, BinOp::Sub);
            let mut inner = vec![wait_group(0)];
            inner.extend(subst(drain, &var.name, &prev));
            inner.extend(issue.iter().cloned());
            inner.extend(subst(epilogue, &var.name, &prev));
            let mut out = no_trivia(subst(issue, &var.name, lo));
            out.push(for_stmt(var, offset(lo, BinOp::Add), hi.clone(), no_trivia(inner)));
            out.push(wait_group(0));
            out.extend(no_trivia(subst(drain, &var.name, &last)));
            out.extend(no_trivia(subst(epilogue, &var.name, &last)));
            Some(out)
        }
    }
}
