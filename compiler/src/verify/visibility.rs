//! Cross-thread visibility inside a role: a generic shared-memory write read back by the same
//! role, with no barrier of the role's threads in between.
//!
//! Each role's body is walked in program order (every loop twice, so a write at the end of one
//! iteration meets the reads at the start of the next; both branches of an `if`, joined). Generic
//! writes (`store`, `stmatrix` into shared memory) make their region *pending*; a barrier that
//! orders all of the role's threads (`sync_role` of the role, `sync`, `cluster_sync`, or a wait on
//! an explicit barrier) clears every pending region. A read of a pending region — generic (an
//! expression that reads it) or async (wgmma, TMA store) — is reported: the values were written
//! by other threads of the role (a row statistic one lane stores and the whole row reads, a P
//! tile every warp writes and one wgmma reads), and without the barrier some readers see the old
//! contents. `cp_async` writes are left to the cp.async group checks, which track their stages,
//! and TMA-store reads to the protocol analysis (V451).
//!
//! The result is a fact of the region (`unsynced_reads`, with the text and both spans), so the
//! rule that reports it is data (V329).

use std::collections::BTreeMap;

use crate::catalog::{Access as ParamAccess, Catalog, Proxy};
use crate::ir::*;
use crate::span::Span;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegionVisibility {
    pub unsynced_reads: u32,
    pub first: Option<UnsyncedRead>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsyncedRead {
    pub what: String,
    pub read: Span,
    pub write: Span,
}

type Pending = BTreeMap<Handle<SmemDecl>, Span>;

pub fn analyze(m: &Module) -> BTreeMap<Handle<SmemDecl>, RegionVisibility> {
    let mut w = Walk { m, catalog: Catalog::builtin(), role: None, out: BTreeMap::new() };
    for (_, body) in m.bodies.iter() {
        w.role = Some(body.role);
        let mut pending = Pending::new();
        w.block(&body.block, &mut pending);
    }
    w.out
}

struct Walk<'m> {
    m: &'m Module,
    catalog: &'static Catalog,
    role: Option<Handle<RoleDecl>>,
    out: BTreeMap<Handle<SmemDecl>, RegionVisibility>,
}

impl Walk<'_> {
    fn block(&mut self, b: &Block, pending: &mut Pending) {
        for s in &b.stmts {
            let span = *self.m.stmts.span(*s);
            match &self.m.stmts[*s] {
                Stmt::Let { value, .. } => self.reads_in(*value, pending, span),
                Stmt::Assign { target, value } => {
                    self.reads_in(*value, pending, span);
                    if let Some(r) = self.m.smem_region(*target) {
                        pending.insert(r, span);
                    }
                }
                Stmt::Op(c) => self.op(c, pending, span),
                Stmt::For { body, .. } | Stmt::ForTiles { body, .. } => {
                    // Twice: the second pass sees what the first left pending at the loop's end.
                    self.block(body, pending);
                    self.block(body, pending);
                }
                Stmt::If { then_block, else_block, .. } => {
                    let mut other = pending.clone();
                    self.block(then_block, pending);
                    if let Some(e) = else_block {
                        self.block(e, &mut other);
                    }
                    pending.extend(other);
                }
                Stmt::Reg(_) => {}
            }
        }
    }

    fn op(&mut self, c: &OpCall, pending: &mut Pending, span: Span) {
        let Some(def) = self.catalog.get(&c.op) else { return };
        if self.orders_the_role(c) {
            pending.clear();
            return;
        }
        let mut writes: Vec<Handle<SmemDecl>> = Vec::new();
        for (p, a) in def.params.iter().zip(&c.args) {
            let Some(a) = *a else { continue };
            // A TMA store's read of generically written data is the protocol analysis' (V451).
            match p.access {
                _ if c.op == "tma_store" => {}
                Some(ParamAccess::Read) | Some(ParamAccess::Readwrite) | None => self.reads_in(a, pending, span),
                Some(ParamAccess::Write) => {}
            }
            let generic_write = def.effects.iter().any(|e| e.on == p.name && e.access.writes() && e.proxy == Proxy::Generic);
            if generic_write && c.op != "cp_async" && matches!(self.m.exprs[a].ty, Type::Shared { .. }) {
                if let Some(r) = self.m.smem_region(a) {
                    writes.push(r);
                }
            }
        }
        for r in writes {
            pending.insert(r, span);
        }
    }

    /// A barrier every thread of the calling role takes part in.
    fn orders_the_role(&self, c: &OpCall) -> bool {
        match c.op.as_str() {
            "sync" | "cluster_sync" => true,
            "sync_role" => c.args.first().copied().flatten().is_some_and(|a| matches!(self.m.exprs[a].kind, ExprKind::Role(r) if Some(r) == self.role)),
            "wait" | "wait_parity" => c.args.first().copied().flatten().is_some_and(|a| matches!(self.m.exprs[a].ty, Type::Barrier(_))),
            _ => false,
        }
    }

    /// Report reads of pending regions inside an expression.
    fn reads_in(&mut self, e: Handle<Expr>, pending: &Pending, span: Span) {
        let mut found: Vec<Handle<SmemDecl>> = Vec::new();
        self.collect(e, &mut found, 0);
        for r in found {
            let Some(w) = pending.get(&r) else { continue };
            let name = &self.m.smem[r].name;
            let role = self.role.map_or("?".to_string(), |h| self.m.roles[h].name.clone());
            let e = self.out.entry(r).or_default();
            e.unsynced_reads += 1;
            e.first.get_or_insert(UnsyncedRead {
                what: format!("role `{role}` reads `{name}` after writing it, with no barrier of its threads in between: other threads' writes may not be visible yet"),
                read: span,
                write: *w,
            });
        }
    }

    fn collect(&self, e: Handle<Expr>, out: &mut Vec<Handle<SmemDecl>>, depth: u32) {
        if depth > 64 {
            return;
        }
        match &self.m.exprs[e].kind {
            ExprKind::Smem(s) => out.push(*s),
            ExprKind::View(v) => out.push(self.m.views[*v].region),
            ExprKind::Index { base, .. } => self.collect(*base, out, depth + 1),
            ExprKind::Unary(_, x) => self.collect(*x, out, depth + 1),
            ExprKind::Binary(_, a, b) => {
                self.collect(*a, out, depth + 1);
                self.collect(*b, out, depth + 1);
            }
            ExprKind::Call(c) => {
                for a in c.args.iter().flatten() {
                    self.collect(*a, out, depth + 1);
                }
            }
            _ => {}
        }
    }
}
