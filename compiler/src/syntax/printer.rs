//! Canonical printer (what `cake fmt` writes).
//!
//! Layout: header first; one declaration or statement per line; 4-space indentation; single
//! spaces around binary operators and after commas; `name=value` named arguments; `x :+ n`
//! windows; `lo..hi` ranges; attributes in the canonical order of [`attr_order`]; comments kept
//! (leading lines, and trailing `  # text`); at most one blank line where the source had any, none
//! at the start of a block; exactly one newline at the end.
//!
//! Parentheses: every `Paren` node is printed, and parentheses are added where the tree's shape
//! needs them (a looser operator under a tighter one), so that parsing the output gives back the
//! same tree, modulo spans and those added `Paren` nodes. Trees from the parser always hold the
//! `Paren`s they need, so for them printing and re-parsing is exact.

use std::fmt::Write;

use super::ast::*;

/// Canonical attribute order for each declaration or statement keyword (LANGUAGE.md table).
/// Keys not listed keep their relative order after the listed ones.
pub fn attr_order(keyword: &str) -> &'static [&'static str] {
    match keyword {
        "dim" => &["multiple_of"],
        "in" | "out" | "inout" => &["tma", "swizzle"],
        "grid" => &["persistent", "group", "cluster"],
        "smem" => &["stages", "swizzle", "align"],
        "view" => &["of", "offset", "swizzle"],
        "role" => &["warp", "warpgroup", "regs"],
        "barrier" => &["stages", "count", "producer", "consumer"],
        "pipeline" => &["stages", "producer", "consumer"],
        "reg" => &["per"],
        "for" => &["unroll"],
        _ => &[],
    }
}

/// Print a file in canonical form.
pub fn print(file: &File) -> String {
    let mut p = Printer { out: String::new(), indent: 0 };
    p.leading(&file.header_trivia.leading);
    p.line_start();
    let _ = write!(p.out, "kernel {} target {}", file.kernel.name, file.target.name);
    p.line_end(&file.header_trivia.trailing);
    for item in &file.items {
        p.item(item);
    }
    p.leading(&file.end_comments);
    p.out
}

/// Print one expression as it would appear in a file.
pub fn print_expr(expr: &Expr) -> String {
    let mut out = String::new();
    write_expr(&mut out, expr);
    out
}

struct Printer {
    out: String,
    indent: usize,
}

impl Printer {
    fn line_start(&mut self) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
    }

    fn line_end(&mut self, trailing: &Option<String>) {
        if let Some(text) = trailing {
            self.out.push_str("  ");
            push_comment(&mut self.out, text);
        }
        self.out.push('\n');
    }

    fn leading(&mut self, comments: &[String]) {
        for text in comments {
            self.line_start();
            push_comment(&mut self.out, text);
            self.out.push('\n');
        }
    }

    /// Blank line and leading comments before a node; `first` nodes of a block get no blank.
    fn before(&mut self, trivia: &Trivia, first_in_block: bool) {
        if trivia.blank_line_before && !first_in_block {
            self.out.push('\n');
        }
        self.leading(&trivia.leading);
    }

    fn item(&mut self, item: &Item) {
        self.before(&item.trivia, false);
        self.line_start();
        let out = &mut self.out;
        match &item.kind {
            ItemKind::Dim { name, attrs } => {
                let _ = write!(out, "dim {}", name.name);
                write_attrs(out, "dim", attrs);
            }
            ItemKind::Const { name, value } => {
                let _ = write!(out, "const {} = ", name.name);
                write_expr(out, value);
            }
            ItemKind::Scalar { name, ty, attrs } => {
                let _ = write!(out, "scalar {}: ", name.name);
                write_type(out, ty);
                write_attrs(out, "scalar", attrs);
            }
            ItemKind::Tensor { access, name, ty, attrs } => {
                let _ = write!(out, "{} {}: ", access.keyword(), name.name);
                write_type(out, ty);
                write_attrs(out, access.keyword(), attrs);
            }
            ItemKind::Grid { name, axes, attrs } => {
                let _ = write!(out, "grid {}[", name.name);
                for (i, axis) in axes.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    let _ = write!(out, "{} = ", axis.name.name);
                    write_expr(out, &axis.extent);
                }
                out.push(']');
                write_attrs(out, "grid", attrs);
            }
            ItemKind::Smem { name, ty, attrs } | ItemKind::View { name, ty, attrs } => {
                let keyword = if matches!(item.kind, ItemKind::Smem { .. }) { "smem" } else { "view" };
                let _ = write!(out, "{keyword} {}: ", name.name);
                write_type(out, ty);
                write_attrs(out, keyword, attrs);
            }
            ItemKind::Role { name, attrs } | ItemKind::Barrier { name, attrs } | ItemKind::Pipeline { name, attrs } => {
                let keyword = match item.kind {
                    ItemKind::Role { .. } => "role",
                    ItemKind::Barrier { .. } => "barrier",
                    _ => "pipeline",
                };
                let _ = write!(out, "{keyword} {}:", name.name);
                write_attrs(out, keyword, attrs);
            }
            ItemKind::On { role, body } => {
                let _ = write!(out, "on {} ", role.name);
                self.block(body, &item.trivia.trailing);
                self.out.push('\n');
                return;
            }
        }
        self.line_end(&item.trivia.trailing);
    }

    /// `{`, the opener comment, the statements, `}` (no newline after it). An empty block with no
    /// comments prints as `{}`.
    fn block(&mut self, block: &Block, opener: &Option<String>) {
        if block.stmts.is_empty() && block.end_comments.is_empty() && opener.is_none() {
            self.out.push_str("{}");
            return;
        }
        self.out.push('{');
        self.line_end(opener);
        self.indent += 1;
        for (i, stmt) in block.stmts.iter().enumerate() {
            self.stmt(stmt, i == 0);
        }
        self.leading(&block.end_comments);
        self.indent -= 1;
        self.line_start();
        self.out.push('}');
    }

    fn stmt(&mut self, stmt: &Stmt, first_in_block: bool) {
        self.before(&stmt.trivia, first_in_block);
        self.line_start();
        let out = &mut self.out;
        match &stmt.kind {
            StmtKind::Let { name, value } => {
                let _ = write!(out, "let {} = ", name.name);
                write_expr(out, value);
            }
            StmtKind::Reg { name, ty, attrs } => {
                let _ = write!(out, "reg {}: ", name.name);
                write_type(out, ty);
                write_attrs(out, "reg", attrs);
            }
            StmtKind::Assign { target, value } => {
                write_expr(out, target);
                out.push_str(" = ");
                write_expr(out, value);
            }
            StmtKind::Call(call) => write_expr(out, call),
            StmtKind::For { var, iter, attrs, body } => {
                let _ = write!(out, "for {} in ", var.name);
                match iter {
                    ForIter::Range { lo, hi } => write_range(out, lo, hi),
                    ForIter::Tiles(name) => out.push_str(&name.name),
                }
                write_attrs(out, "for", attrs);
                out.push(' ');
                self.block(body, &stmt.trivia.trailing);
                self.out.push('\n');
                return;
            }
            StmtKind::If { .. } => {
                self.if_chain(stmt);
                self.out.push('\n');
                return;
            }
        }
        self.line_end(&stmt.trivia.trailing);
    }

    /// `if c { } else if d { } else { }`, starting at the current position.
    fn if_chain(&mut self, stmt: &Stmt) {
        let StmtKind::If { cond, then_block, else_block } = &stmt.kind else { return };
        self.out.push_str("if ");
        write_expr(&mut self.out, cond);
        self.out.push(' ');
        self.block(then_block, &stmt.trivia.trailing);
        let Some(else_block) = else_block else { return };
        self.out.push_str(" else ");
        match else_block.stmts.as_slice() {
            // `else if` when the tree holds nothing that form cannot show.
            [inner]
                if else_block.end_comments.is_empty()
                    && inner.trivia.leading.is_empty()
                    && matches!(inner.kind, StmtKind::If { .. }) =>
            {
                self.if_chain(inner)
            }
            _ => self.block(else_block, &None),
        }
    }
}

fn push_comment(out: &mut String, text: &str) {
    if text.is_empty() {
        out.push('#');
    } else {
        out.push_str("# ");
        out.push_str(text);
    }
}

fn write_type(out: &mut String, ty: &TypeExpr) {
    out.push_str(&ty.dtype.name);
    if let Some(dims) = &ty.shape {
        out.push('[');
        write_list(out, dims);
        out.push(']');
    }
}

fn write_list(out: &mut String, exprs: &[Expr]) {
    for (i, e) in exprs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_expr(out, e);
    }
}

fn write_range(out: &mut String, lo: &Expr, hi: &Expr) {
    write_expr(out, lo);
    out.push_str("..");
    write_expr(out, hi);
}

fn write_attrs(out: &mut String, keyword: &str, attrs: &[Attr]) {
    let order = attr_order(keyword);
    let rank = |a: &Attr| order.iter().position(|k| *k == a.key.name).unwrap_or(order.len());
    let mut sorted: Vec<&Attr> = attrs.iter().collect();
    sorted.sort_by_key(|a| rank(a)); // stable: unknown keys keep their order
    for attr in sorted {
        out.push(' ');
        out.push_str(&attr.key.name);
        match &attr.value {
            AttrValue::Flag => {}
            AttrValue::Expr(e) => {
                out.push(' ');
                write_expr(out, e);
            }
            AttrValue::Range(lo, hi) => {
                out.push(' ');
                write_range(out, lo, hi);
            }
            AttrValue::List(items, _) => {
                out.push_str(" [");
                write_list(out, items);
                out.push(']');
            }
        }
    }
}

/// Binding strength of an expression's outermost form, for deciding parentheses: atoms and
/// postfix forms bind tightest, then unary, then binary operators by precedence.
fn strength(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Binary { op, .. } => op.precedence(),
        ExprKind::Unary { .. } => 100,
        _ => 200,
    }
}

/// Write `e`, in parentheses when its strength is below `min`.
fn write_operand(out: &mut String, e: &Expr, min: u8) {
    if strength(e) < min {
        out.push('(');
        write_expr(out, e);
        out.push(')');
    } else {
        write_expr(out, e);
    }
}

fn write_expr(out: &mut String, e: &Expr) {
    match &e.kind {
        ExprKind::Int(v) => {
            let _ = write!(out, "{v}");
        }
        ExprKind::Float(text) => out.push_str(text),
        ExprKind::Bytes(v) => {
            let _ = write!(out, "{v}B");
        }
        ExprKind::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        ExprKind::Inf => out.push_str("inf"),
        ExprKind::Name(id) => out.push_str(&id.name),
        ExprKind::Field { base, field } => {
            write_operand(out, base, 200);
            out.push('.');
            out.push_str(&field.name);
        }
        ExprKind::Index { base, items } => {
            write_operand(out, base, 200);
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                match item {
                    IndexItem::At(x) => write_expr(out, x),
                    IndexItem::Window { start, len } => {
                        write_expr(out, start);
                        out.push_str(" :+ ");
                        write_expr(out, len);
                    }
                    IndexItem::Full(_) => out.push(':'),
                }
            }
            out.push(']');
        }
        ExprKind::Call { func, args } => {
            out.push_str(&func.name);
            out.push('(');
            for (i, arg) in args.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                if let Some(name) = &arg.name {
                    out.push_str(&name.name);
                    out.push('=');
                }
                write_expr(out, &arg.value);
            }
            out.push(')');
        }
        ExprKind::Unary { op, operand } => {
            out.push(match op {
                UnOp::Neg => '-',
                UnOp::Not => '!',
            });
            write_operand(out, operand, 100);
        }
        ExprKind::Binary { op, lhs, rhs } => {
            // Left-associative: the left operand may be as loose as `op`, the right must bind
            // strictly tighter.
            write_operand(out, lhs, op.precedence());
            out.push(' ');
            out.push_str(op.symbol());
            out.push(' ');
            write_operand(out, rhs, op.precedence() + 1);
        }
        ExprKind::Paren(inner) => {
            out.push('(');
            write_expr(out, inner);
            out.push(')');
        }
    }
}
