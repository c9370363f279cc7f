//! What the protocol analysis knows about a module before running anything: the roles that
//! execute (actors), the synchronization objects (every pipeline stage's full and empty barrier,
//! every explicit barrier stage), which shared buffers a pipeline fills, and how a catalog op's
//! effects map onto protocol events.

use std::collections::{BTreeMap, HashMap};

use crate::catalog::{Catalog, EffectAccess, IssueScope, OpDef, ParamKind, PipeBarrier};
use crate::ir::*;
use crate::span::Span;

/// One synchronization object the protocol tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SyncObj {
    /// Full barrier of a pipeline stage (producer → consumer).
    Full(Handle<PipelineDecl>, u32),
    /// Empty barrier of a pipeline stage (consumer → producer).
    Empty(Handle<PipelineDecl>, u32),
    /// One stage of an explicit barrier.
    Bar(Handle<BarrierDecl>, u32),
}

/// One stage of one shared region.
pub type BufKey = (Handle<SmemDecl>, u32);

/// How a pipeline op acts on its pipeline (derived from the op's catalog effects).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PipeKind {
    /// waits on empty, arms full (`acquire`)
    Acquire,
    /// waits on full (`wait`)
    Wait,
    /// arrives on empty (`release`)
    Release,
    /// completes transactions on full (`tma_load`)
    Credit,
}

pub struct Model<'m> {
    pub m: &'m Module,
    pub cat: &'static Catalog,
    /// Roles with a body, in declaration order; an actor index is a position here.
    pub actors: Vec<Handle<RoleDecl>>,
    pub objs: Vec<SyncObj>,
    obj_index: HashMap<SyncObj, usize>,
    /// Shared regions filled by a pipeline's TMA loads (region → pipelines).
    pub bound: BTreeMap<Handle<SmemDecl>, Vec<Handle<PipelineDecl>>>,
    /// Blocks per cluster.
    pub cluster: i64,
    pub persistent: bool,
}

impl<'m> Model<'m> {
    pub fn new(m: &'m Module) -> Model<'m> {
        let cat = Catalog::builtin();
        let mut actors: Vec<Handle<RoleDecl>> = Vec::new();
        for h in m.roles.handles() {
            if m.body_of(h).is_some() {
                actors.push(h);
            }
        }
        let mut objs = Vec::new();
        for (p, d) in m.pipelines.iter() {
            for s in 0..d.stages.min(1024) {
                objs.push(SyncObj::Full(p, s));
                objs.push(SyncObj::Empty(p, s));
            }
        }
        for (b, d) in m.barriers.iter() {
            for s in 0..d.stages.min(1024) {
                objs.push(SyncObj::Bar(b, s));
            }
        }
        let obj_index = objs.iter().enumerate().map(|(i, o)| (*o, i)).collect();
        let grid = m.grid();
        let cluster = grid.map_or(1, |g| g.cluster.iter().copied().filter(|c| *c > 0).product::<i64>().max(1));
        let persistent = grid.is_some_and(|g| g.persistent);
        let mut model = Model { m, cat, actors, objs, obj_index, bound: BTreeMap::new(), cluster, persistent };
        model.bound = model.compute_bound();
        model
    }

    /// Whether some pipeline or barrier names a role without a body (rules V402 / V404 report
    /// it; simulating it would only echo them).
    pub fn has_bodyless_sync_role(&self) -> bool {
        let no_body = |r: &Handle<RoleDecl>| self.actor_of(*r).is_none();
        self.m.pipelines.iter().any(|(_, p)| no_body(&p.producer) || no_body(&p.consumer))
            || self.m.barriers.iter().any(|(_, b)| b.producers.iter().chain(&b.consumers).any(no_body))
    }

    pub fn obj(&self, o: SyncObj) -> Option<usize> {
        self.obj_index.get(&o).copied()
    }

    pub fn actor_of(&self, r: Handle<RoleDecl>) -> Option<usize> {
        self.actors.iter().position(|a| *a == r)
    }

    pub fn body(&self, actor: usize) -> Option<&'m Block> {
        let r = *self.actors.get(actor)?;
        self.m.body_of(r).map(|b| &b.block)
    }

    pub fn role_name(&self, r: Handle<RoleDecl>) -> &str {
        &self.m.roles[r].name
    }

    pub fn actor_name(&self, a: usize) -> &str {
        self.actors.get(a).map_or("?", |r| self.role_name(*r))
    }

    pub fn role_span(&self, r: Handle<RoleDecl>) -> Span {
        self.m.roles.span(r).item
    }

    pub fn actor_span(&self, a: usize) -> Span {
        self.actors.get(a).map_or(Span::default(), |r| self.role_span(*r))
    }

    pub fn stmt_span(&self, s: Handle<Stmt>) -> Span {
        *self.m.stmts.span(s)
    }

    pub fn pipe_name(&self, p: Handle<PipelineDecl>) -> &str {
        &self.m.pipelines[p].name
    }

    pub fn pipe_span(&self, p: Handle<PipelineDecl>) -> Span {
        self.m.pipelines.span(p).item
    }

    pub fn bar_span(&self, b: Handle<BarrierDecl>) -> Span {
        self.m.barriers.span(b).item
    }

    pub fn smem_name(&self, s: Handle<SmemDecl>) -> &str {
        &self.m.smem[s].name
    }

    /// Declaration span of the barrier or pipeline behind an object.
    pub fn obj_decl_span(&self, o: usize) -> Span {
        match self.objs.get(o) {
            Some(SyncObj::Full(p, _)) | Some(SyncObj::Empty(p, _)) => self.pipe_span(*p),
            Some(SyncObj::Bar(b, _)) => self.bar_span(*b),
            None => Span::default(),
        }
    }

    /// `full barrier of `ab` stage 2`, `` `done[1]` ``.
    pub fn obj_name(&self, o: usize) -> String {
        match self.objs.get(o) {
            Some(SyncObj::Full(p, s)) => format!("the full barrier of `{}` stage {s}", self.pipe_name(*p)),
            Some(SyncObj::Empty(p, s)) => format!("the empty barrier of `{}` stage {s}", self.pipe_name(*p)),
            Some(SyncObj::Bar(b, s)) => {
                let d = &self.m.barriers[*b];
                if d.stages > 1 {
                    format!("`{}[{s}]`", d.name)
                } else {
                    format!("`{}`", d.name)
                }
            }
            None => "?".to_string(),
        }
    }

    /// The barrier or pipeline declaration behind an object, which findings are grouped by.
    pub fn subject(&self, o: usize) -> Option<super::Subject> {
        match self.objs.get(o)? {
            SyncObj::Full(p, _) | SyncObj::Empty(p, _) => Some(super::Subject::Pipeline(*p)),
            SyncObj::Bar(b, _) => Some(super::Subject::Barrier(*b)),
        }
    }

    /// The span of the argument an op call passes for its catalog parameter `param` (the bytes
    /// of `arrive_expect_tx`, the parity of `wait_parity`), when the statement is such a call.
    pub fn arg_span(&self, s: Handle<Stmt>, param: &str) -> Option<Span> {
        let Stmt::Op(call) = &self.m.stmts[s] else { return None };
        let def = self.cat.get(&call.op)?;
        let i = def.params.iter().position(|p| p.name == param)?;
        let e = call.args.get(i).copied().flatten()?;
        Some(*self.m.exprs.span(e))
    }

    /// The span of the first read of `local` inside statement `s` (the accumulator an
    /// expression uses), or the statement's span.
    pub fn local_use_span(&self, s: Handle<Stmt>, local: Handle<Local>) -> Span {
        let within = self.stmt_span(s);
        self.m
            .exprs
            .iter()
            .filter(|(_, e)| matches!(e.kind, ExprKind::Local(l) if l == local))
            .map(|(h, _)| *self.m.exprs.span(h))
            .filter(|sp| sp.start >= within.start && sp.end <= within.end)
            .min_by_key(|sp| sp.start)
            .unwrap_or(within)
    }

    /// The counted loops (`for v in lo..hi`) around statement `s` in the body of `actor`, from
    /// the outermost, below the tile loop; `None` when `s` is not in the body or sits under an
    /// `if` (its count is not a product of loop trips then).
    pub fn loops_around(&self, actor: usize, s: Handle<Stmt>) -> Option<Vec<Handle<Stmt>>> {
        fn walk(m: &Module, b: &Block, s: Handle<Stmt>, path: &mut Vec<Handle<Stmt>>, guarded: bool) -> Option<bool> {
            for x in &b.stmts {
                if *x == s {
                    return Some(guarded);
                }
                match &m.stmts[*x] {
                    Stmt::For { body, .. } => {
                        path.push(*x);
                        if let Some(g) = walk(m, body, s, path, guarded) {
                            return Some(g);
                        }
                        path.pop();
                    }
                    Stmt::ForTiles { body, .. } => {
                        // Trip counts are compared per tile: loops outside the tile loop do not count.
                        let outer = std::mem::take(path);
                        if let Some(g) = walk(m, body, s, path, guarded) {
                            return Some(g);
                        }
                        *path = outer;
                    }
                    Stmt::If { then_block, else_block, .. } => {
                        if let Some(g) = walk(m, then_block, s, path, true) {
                            return Some(g);
                        }
                        if let Some(e) = else_block {
                            if let Some(g) = walk(m, e, s, path, true) {
                                return Some(g);
                            }
                        }
                    }
                    _ => {}
                }
            }
            None
        }
        let mut path = Vec::new();
        let guarded = walk(self.m, self.body(actor)?, s, &mut path, false)?;
        (!guarded).then_some(path)
    }

    /// The span of a loop's range where its trip count is decided: the upper bound of
    /// `0..hi`, the whole `lo..hi` otherwise.
    pub fn loop_bound_span(&self, l: Handle<Stmt>) -> Span {
        let Stmt::For { lo, hi, .. } = &self.m.stmts[l] else { return self.stmt_span(l) };
        let hs = *self.m.exprs.span(*hi);
        if self.m.const_value(*lo) == Some(0) {
            hs
        } else {
            let ls = *self.m.exprs.span(*lo);
            Span { start: ls.start.min(hs.start), end: hs.end.max(ls.end) }
        }
    }

    /// How many independently tracked parts a region has: its stages, or for a one-stage region
    /// with a small leading dimension (`bf16[2, 128, 64]`), the slots of that dimension.
    pub fn slots(&self, s: Handle<SmemDecl>) -> u32 {
        let d = &self.m.smem[s];
        if d.stages > 1 {
            d.stages.min(1024)
        } else if d.shape.len() >= 2 && d.shape[0] >= 1 && d.shape[0] <= 64 {
            d.shape[0] as u32
        } else {
            1
        }
    }

    /// `a_s` stage 2, `x_s[1]`, or just `a_s` for a region tracked as a whole.
    pub fn buf_name(&self, k: BufKey) -> String {
        let d = &self.m.smem[k.0];
        if d.stages > 1 {
            format!("`{}` stage {}", d.name, k.1)
        } else if self.slots(k.0) > 1 {
            format!("`{}[{}]`", d.name, k.1)
        } else {
            format!("`{}`", d.name)
        }
    }

    /// Arrivals one call of `def` makes when issued by role `r` (by the op's issue scope).
    pub fn arrivals_per_call(&self, def: &OpDef, r: Handle<RoleDecl>) -> u32 {
        let role = &self.m.roles[r];
        let warps = role.warps().len() as u32;
        match def.issue {
            IssueScope::Thread => role.threads(),
            IssueScope::Warp => warps,
            IssueScope::Warpgroup => (warps / 4).max(1),
            IssueScope::Role | IssueScope::Elected | IssueScope::Block | IssueScope::Cluster => 1,
        }
    }

    /// How a call acts on a pipeline argument, from the op's effects on that param.
    pub fn pipe_kind(def: &OpDef, param: &str) -> Option<PipeKind> {
        let has = |acc: EffectAccess, bar: PipeBarrier| def.effects_on(param).any(|e| e.access == acc && e.barrier == Some(bar));
        if has(EffectAccess::Wait, PipeBarrier::Empty) {
            Some(PipeKind::Acquire)
        } else if has(EffectAccess::Wait, PipeBarrier::Full) {
            Some(PipeKind::Wait)
        } else if has(EffectAccess::Arrive, PipeBarrier::Empty) {
            Some(PipeKind::Release)
        } else if def.effects_on(param).any(|e| e.access == EffectAccess::CompleteTx) {
            Some(PipeKind::Credit)
        } else {
            None
        }
    }

    /// The pipelines an op call names, with what it does to each.
    pub fn pipe_uses(&self, call: &OpCall) -> Vec<(Handle<PipelineDecl>, PipeKind)> {
        let Some(def) = self.cat.get(&call.op) else { return Vec::new() };
        let mut out = Vec::new();
        for (i, param) in def.params.iter().enumerate() {
            if !matches!(param.kind, ParamKind::Pipeline | ParamKind::Sync) {
                continue;
            }
            let Some(Some(e)) = call.args.get(i) else { continue };
            if let ExprKind::Pipeline(p) = &self.m.exprs[*e].kind {
                if let Some(k) = Self::pipe_kind(def, &param.name) {
                    out.push((*p, k));
                }
            }
        }
        out
    }

    /// The shared region behind a (possibly indexed) shared-memory expression.
    pub fn smem_base(&self, e: Handle<Expr>) -> Option<Handle<SmemDecl>> {
        self.m.smem_region(e)
    }

    fn compute_bound(&self) -> BTreeMap<Handle<SmemDecl>, Vec<Handle<PipelineDecl>>> {
        let mut bound: BTreeMap<Handle<SmemDecl>, Vec<Handle<PipelineDecl>>> = BTreeMap::new();
        // A region indexed by a pipeline's stage (`a_s[ab.stage]`) belongs to that pipeline.
        for (_, e) in self.m.exprs.iter() {
            let ExprKind::Index { base, items } = &e.kind else { continue };
            let Some(IndexItem::At(first)) = items.first() else { continue };
            let ExprKind::Field { base: fb, field: Field::Stage } = &self.m.exprs[*first].kind else { continue };
            let ExprKind::Pipeline(p) = self.m.exprs[*fb].kind else { continue };
            let s = match self.m.exprs[*base].kind {
                ExprKind::Smem(s) => s,
                _ => continue,
            };
            if self.m.smem[s].stages > 1 {
                let v = bound.entry(s).or_default();
                if !v.contains(&p) {
                    v.push(p);
                }
            }
        }
        for (_, st) in self.m.stmts.iter() {
            let Stmt::Op(call) = st else { continue };
            let Some(def) = self.cat.get(&call.op) else { continue };
            for (p, k) in self.pipe_uses(call) {
                if k != PipeKind::Credit {
                    continue;
                }
                // The destination: the smem params written asynchronously.
                for (i, param) in def.params.iter().enumerate() {
                    if param.kind != ParamKind::Smem {
                        continue;
                    }
                    let writes = def.effects_on(&param.name).any(|e| e.access.writes());
                    if !writes {
                        continue;
                    }
                    if let Some(Some(e)) = call.args.get(i) {
                        if let Some(s) = self.smem_base(*e) {
                            let v = bound.entry(s).or_default();
                            if !v.contains(&p) {
                                v.push(p);
                            }
                        }
                    }
                }
            }
        }
        bound
    }

    /// Bytes of a shared-memory window (from its type).
    pub fn bytes_of(&self, e: Handle<Expr>) -> Option<u64> {
        match &self.m.exprs[e].ty {
            Type::Shared { dtype, shape, .. } => {
                let mut n: u64 = 1;
                for d in shape {
                    n = n.checked_mul(u64::try_from(*d).ok()?)?;
                }
                n.checked_mul(dtype.size_bytes())
            }
            _ => None,
        }
    }
}
