//! Whole-tree helpers over the syntax tree.
//!
//! `strip_spans` sets every span to `Span::default()`, so two trees can be compared for
//! structure alone: `a.strip_spans(); b.strip_spans(); a == b` (used by the formatter's round-trip
//! tests; trivia is part of the comparison).

use super::ast::*;
use crate::span::Span;

impl File {
    /// Zero every span in the file (see the module docs).
    pub fn strip_spans(&mut self) {
        self.span = Span::default();
        self.kernel.strip_spans();
        self.target.strip_spans();
        for item in &mut self.items {
            item.strip_spans();
        }
    }
}

impl Ident {
    pub fn strip_spans(&mut self) {
        self.span = Span::default();
    }
}

impl Item {
    pub fn strip_spans(&mut self) {
        self.span = Span::default();
        match &mut self.kind {
            ItemKind::Dim { name, attrs }
            | ItemKind::Role { name, attrs }
            | ItemKind::Barrier { name, attrs }
            | ItemKind::Pipeline { name, attrs } => {
                name.strip_spans();
                strip_attrs(attrs);
            }
            ItemKind::Const { name, value } => {
                name.strip_spans();
                value.strip_spans();
            }
            ItemKind::Scalar { name, ty, attrs }
            | ItemKind::Tensor { name, ty, attrs, .. }
            | ItemKind::Smem { name, ty, attrs }
            | ItemKind::View { name, ty, attrs } => {
                name.strip_spans();
                ty.strip_spans();
                strip_attrs(attrs);
            }
            ItemKind::Grid { name, axes, attrs } => {
                name.strip_spans();
                for axis in axes {
                    axis.span = Span::default();
                    axis.name.strip_spans();
                    axis.extent.strip_spans();
                }
                strip_attrs(attrs);
            }
            ItemKind::On { role, body } => {
                role.strip_spans();
                body.strip_spans();
            }
        }
    }
}

impl TypeExpr {
    pub fn strip_spans(&mut self) {
        self.span = Span::default();
        self.dtype.strip_spans();
        for dim in self.shape.iter_mut().flatten() {
            dim.strip_spans();
        }
    }
}

impl Attr {
    pub fn strip_spans(&mut self) {
        self.span = Span::default();
        self.key.strip_spans();
        match &mut self.value {
            AttrValue::Flag => {}
            AttrValue::Expr(e) => e.strip_spans(),
            AttrValue::Range(lo, hi) => {
                lo.strip_spans();
                hi.strip_spans();
            }
            AttrValue::List(items, span) => {
                *span = Span::default();
                for e in items {
                    e.strip_spans();
                }
            }
        }
    }
}

fn strip_attrs(attrs: &mut [Attr]) {
    for attr in attrs {
        attr.strip_spans();
    }
}

impl Block {
    pub fn strip_spans(&mut self) {
        self.span = Span::default();
        for stmt in &mut self.stmts {
            stmt.strip_spans();
        }
    }
}

impl Stmt {
    pub fn strip_spans(&mut self) {
        self.span = Span::default();
        match &mut self.kind {
            StmtKind::Let { name, value } => {
                name.strip_spans();
                value.strip_spans();
            }
            StmtKind::Reg { name, ty, attrs } => {
                name.strip_spans();
                ty.strip_spans();
                strip_attrs(attrs);
            }
            StmtKind::Assign { target, value } => {
                target.strip_spans();
                value.strip_spans();
            }
            StmtKind::Call(e) => e.strip_spans(),
            StmtKind::For { var, iter, attrs, body } => {
                var.strip_spans();
                match iter {
                    ForIter::Range { lo, hi } => {
                        lo.strip_spans();
                        hi.strip_spans();
                    }
                    ForIter::Tiles(name) => name.strip_spans(),
                }
                strip_attrs(attrs);
                body.strip_spans();
            }
            StmtKind::If { cond, then_block, else_block } => {
                cond.strip_spans();
                then_block.strip_spans();
                if let Some(b) = else_block {
                    b.strip_spans();
                }
            }
        }
    }
}

impl Expr {
    pub fn strip_spans(&mut self) {
        self.span = Span::default();
        match &mut self.kind {
            ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bytes(_) | ExprKind::Bool(_) | ExprKind::Inf => {}
            ExprKind::Name(id) => id.strip_spans(),
            ExprKind::Field { base, field } => {
                base.strip_spans();
                field.strip_spans();
            }
            ExprKind::Index { base, items } => {
                base.strip_spans();
                for item in items {
                    match item {
                        IndexItem::At(e) => e.strip_spans(),
                        IndexItem::Window { start, len } => {
                            start.strip_spans();
                            len.strip_spans();
                        }
                        IndexItem::Full(span) => *span = Span::default(),
                    }
                }
            }
            ExprKind::Call { func, args } => {
                func.strip_spans();
                for arg in args {
                    arg.span = Span::default();
                    if let Some(name) = &mut arg.name {
                        name.strip_spans();
                    }
                    arg.value.strip_spans();
                }
            }
            ExprKind::Unary { operand, .. } => operand.strip_spans(),
            ExprKind::Binary { lhs, rhs, .. } => {
                lhs.strip_spans();
                rhs.strip_spans();
            }
            ExprKind::Paren(inner) => inner.strip_spans(),
        }
    }
}
