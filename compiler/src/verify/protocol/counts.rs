//! Whole-program counting checks: who may use which barrier (V108), pipeline trip counts per
//! tile compared symbolically (V104), arrivals per phase against a barrier's `count` (V102),
//! phases completed against phases waited for (V104/V105/V106), transaction bytes announced
//! against bytes delivered per phase (V101), and block barriers reached equally often (V104).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::catalog::{EffectAccess, ParamKind};
use crate::diag::{Diagnostic, Severity};
use crate::ir::*;

use super::code;
use super::eval::{eval, Env, Val};
use super::model::{BufKey, Model, PipeKind, SyncObj};
use super::symbolic::{expr_poly, Atom, Poly};
use super::trace::{Binding, Credit, Ek, Trace};
use super::{Findings, Subject};
use crate::span::Span;

// ------------------------------------------------------------------ listing (V108)

/// A use of a barrier by a role: as a `producer` (it arrives) or a `consumer` (it waits).
struct BarrierUse {
    barrier: Handle<BarrierDecl>,
    role: Handle<RoleDecl>,
    side: &'static str,
    stmt: Handle<Stmt>,
    /// Whether the barrier declares the role on that side.
    listed: bool,
}

/// Roles that wait on (or arrive on) a barrier they are not declared on. The cause is the
/// barrier's role list, so each barrier gets one finding there; the uses it finds become its
/// follow-ons.
pub fn listing(model: &Model, out: &mut Findings) {
    let mut uses = Vec::new();
    for (a, role) in model.actors.iter().enumerate() {
        if let Some(body) = model.body(a) {
            listing_block(model, *role, body, &mut uses);
        }
    }
    let m = model.m;
    for (b, d) in m.barriers.iter() {
        let mine: Vec<&BarrierUse> = uses.iter().filter(|u| u.barrier == b && !u.listed).collect();
        let Some(first) = mine.first() else { continue };
        // Every role that arrives (waits) but is not declared a producer (consumer).
        let mut wrong: Vec<(&'static str, Handle<RoleDecl>)> = Vec::new();
        for u in &mine {
            if !wrong.contains(&(u.side, u.role)) {
                wrong.push((u.side, u.role));
            }
        }
        let names = |rs: &[Handle<RoleDecl>]| -> String {
            if rs.is_empty() {
                "none".to_string()
            } else {
                rs.iter().map(|r| format!("`{}`", model.role_name(*r))).collect::<Vec<_>>().join(", ")
            }
        };
        // The lists the uses ask for: every role that arrives (waits); a side nobody uses
        // keeps its declaration.
        let actual = |side: &str, declared: &[Handle<RoleDecl>]| -> Vec<Handle<RoleDecl>> {
            let mut v: Vec<Handle<RoleDecl>> = Vec::new();
            for u in uses.iter().filter(|u| u.barrier == b && u.side == side) {
                if !v.contains(&u.role) {
                    v.push(u.role);
                }
            }
            if v.is_empty() {
                declared.to_vec()
            } else {
                v
            }
        };
        let producers = actual("producer", &d.producers);
        let consumers = actual("consumer", &d.consumers);
        let what: Vec<String> = wrong
            .iter()
            .map(|(side, r)| {
                let verb = if *side == "producer" { "arrives on it" } else { "waits on it" };
                format!("`{}` {verb}", model.role_name(*r))
            })
            .collect();
        let spans = m.barriers.span(b);
        let attr_of = |side: &str| spans.attrs.iter().find(|(k, _)| k == side).map(|(_, s)| *s);
        let sides: Vec<&str> = ["producer", "consumer"].into_iter().filter(|s| wrong.iter().any(|(w, _)| w == s)).collect();
        let primary = match (attr_of(sides[0]), sides.get(1).and_then(|s| attr_of(s))) {
            (Some(x), Some(y)) => Span { start: x.start.min(y.start), end: x.end.max(y.end) },
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => spans.name,
        };
        let fix = format!("producer {} consumer {}", role_list(model, &producers), role_list(model, &consumers));
        let root = Diagnostic::error(
            code::NOT_LISTED,
            format!(
                "barrier `{}` declares producer {} and consumer {}, but {}",
                d.name,
                names(&d.producers),
                names(&d.consumers),
                what.join(" and ")
            ),
            primary,
            if sides.len() == 2 { "roles do not match the uses".to_string() } else { format!("`{}` not listed here", model.role_name(wrong[0].1)) },
        )
        .with_secondary(model.stmt_span(first.stmt), format!("`{}` {} here", model.role_name(first.role), if first.side == "producer" { "arrives" } else { "waits" }))
        .with_note("a barrier's count and phases are derived from its declared producers (who arrive) and consumers (who wait)")
        .with_help(format!("declare `barrier {}: ... {fix}`, or use a barrier that names these roles", d.name));
        for u in &mine {
            let rname = model.role_name(u.role);
            let (verb, list) = if u.side == "consumer" { ("waits on", &d.consumers) } else { ("arrives on", &d.producers) };
            let follow = Diagnostic::error(
                code::NOT_LISTED,
                format!("role `{rname}` {verb} barrier `{}`, but is not among its {}s ({})", d.name, u.side, names(list)),
                model.stmt_span(u.stmt),
                format!("`{rname}` is not a {} of `{}`", u.side, d.name),
            )
            .with_secondary(model.bar_span(b), format!("barrier `{}` declared here", d.name))
            .following(&root);
            out.push_about(follow, Some(Subject::Barrier(b)));
        }
        out.push_about(root, Some(Subject::Barrier(b)));
    }
}

/// `mma` or `a b` as a barrier's role list is written.
fn role_list(model: &Model, roles: &[Handle<RoleDecl>]) -> String {
    roles.iter().map(|r| model.role_name(*r)).collect::<Vec<_>>().join(" ")
}

fn listing_block(model: &Model, role: Handle<RoleDecl>, b: &Block, out: &mut Vec<BarrierUse>) {
    let m = model.m;
    for s in &b.stmts {
        match &m.stmts[*s] {
            Stmt::Op(call) => listing_op(model, role, call, *s, out),
            Stmt::For { body, .. } | Stmt::ForTiles { body, .. } => listing_block(model, role, body, out),
            Stmt::If { then_block, else_block, .. } => {
                listing_block(model, role, then_block, out);
                if let Some(e) = else_block {
                    listing_block(model, role, e, out);
                }
            }
            _ => {}
        }
    }
}

fn listing_op(model: &Model, role: Handle<RoleDecl>, call: &OpCall, s: Handle<Stmt>, out: &mut Vec<BarrierUse>) {
    let m = model.m;
    let Some(def) = model.cat.get(&call.op) else { return };
    // Pipelines: the rule V418 (acquire, tma_load, wait, release) and the type checker (E0322, `.stage`) check the
    // roles; here only explicit barriers.
    for (i, param) in def.params.iter().enumerate() {
        if !matches!(param.kind, ParamKind::Barrier | ParamKind::Sync) {
            continue;
        }
        let Some(Some(e)) = call.args.get(i) else { continue };
        let b = match &m.exprs[*e].kind {
            ExprKind::Barrier(b) => *b,
            ExprKind::Index { base, .. } => match m.exprs[*base].kind {
                ExprKind::Barrier(b) => b,
                _ => continue,
            },
            _ => continue,
        };
        let d = &m.barriers[b];
        let effs: Vec<_> = def.effects_on(&param.name).collect();
        let waits = effs.iter().any(|x| x.access == EffectAccess::Wait);
        let arrives = effs.iter().any(|x| matches!(x.access, EffectAccess::Arrive | EffectAccess::ExpectTx | EffectAccess::CompleteTx));
        if waits {
            out.push(BarrierUse { barrier: b, role, side: "consumer", stmt: s, listed: d.consumers.contains(&role) });
        }
        if arrives {
            out.push(BarrierUse { barrier: b, role, side: "producer", stmt: s, listed: d.producers.contains(&role) });
        }
    }
}

// ------------------------------------------------------------------ pipeline trip counts (V104)

#[derive(Clone, Debug)]
pub struct SymCount {
    pub per_tile: Poly,
    pub outside: Poly,
    pub known: bool,
    pub first: Option<Handle<Stmt>>,
}

pub type SymCounts = BTreeMap<(usize, Handle<PipelineDecl>, PipeKind), SymCount>;

pub fn symbolic_pipeline_counts(model: &Model) -> SymCounts {
    let mut acc = SymCounts::new();
    for a in 0..model.actors.len() {
        if let Some(body) = model.body(a) {
            sym_block(model, a, body, &Some(Poly::constant(1)), false, None, &mut acc);
        }
    }
    acc
}

/// The innermost counted loop around a statement list: its variable, bounds, and the
/// multiplier outside it.
struct LoopCtx {
    var: Handle<Local>,
    lo: Poly,
    hi: Poly,
    outer: Option<Poly>,
}

/// How many iterations of the loop satisfy `var CMP bound` (bound a polynomial), assuming the
/// bound lies within the loop's range (checked against the concrete traces afterwards).
fn cond_count(m: &Module, cond: Handle<Expr>, lp: &LoopCtx) -> Option<Poly> {
    use crate::syntax::ast::BinOp;
    let ExprKind::Binary(op, x, y) = &m.exprs[cond].kind else { return None };
    let is_var = |e: Handle<Expr>| matches!(m.exprs[e].kind, ExprKind::Local(l) if l == lp.var);
    let (op, bound) = if is_var(*x) {
        (*op, expr_poly(m, *y)?)
    } else if is_var(*y) {
        let flipped = match op {
            BinOp::Lt => BinOp::Gt,
            BinOp::Le => BinOp::Ge,
            BinOp::Gt => BinOp::Lt,
            BinOp::Ge => BinOp::Le,
            o => *o,
        };
        (flipped, expr_poly(m, *x)?)
    } else {
        return None;
    };
    // The count assumes the bound lies inside the loop's range, which the traces confirm only
    // for a bound they can evaluate: one over the tile's coordinates or a clamp stays unknown
    // (compared on samples), never a count trusted unchecked.
    if !bound.evaluable() {
        return None;
    }
    let one = Poly::constant(1);
    match op {
        BinOp::Ge => lp.hi.sub(&bound),
        BinOp::Gt => lp.hi.sub(&bound)?.sub(&one),
        BinOp::Lt => bound.sub(&lp.lo),
        BinOp::Le => bound.add(&one)?.sub(&lp.lo),
        BinOp::Eq => Some(one),
        BinOp::Ne => lp.hi.sub(&lp.lo)?.sub(&one),
        _ => None,
    }
}

fn sym_block(model: &Model, a: usize, b: &Block, mult: &Option<Poly>, in_tile: bool, lp: Option<&LoopCtx>, acc: &mut SymCounts) {
    let m = model.m;
    for s in &b.stmts {
        match &m.stmts[*s] {
            Stmt::Op(call) => {
                for (p, kind) in model.pipe_uses(call) {
                    if kind == PipeKind::Credit {
                        continue;
                    }
                    let e = acc.entry((a, p, kind)).or_insert(SymCount { per_tile: Poly::zero(), outside: Poly::zero(), known: true, first: None });
                    if e.first.is_none() {
                        e.first = Some(*s);
                    }
                    match mult {
                        Some(x) => {
                            let slot = if in_tile { &mut e.per_tile } else { &mut e.outside };
                            match slot.add(x) {
                                Some(v) => *slot = v,
                                None => e.known = false,
                            }
                        }
                        None => e.known = false,
                    }
                }
            }
            Stmt::For { var, lo, hi, body, .. } => {
                let (l, h) = (expr_poly(m, *lo), expr_poly(m, *hi));
                let trip = match (&l, &h) {
                    (Some(l), Some(h)) => h.sub(l),
                    _ => None,
                };
                let inner = match (mult, &trip) {
                    (Some(x), Some(t)) => x.mul(t),
                    _ => None,
                };
                match (l, h) {
                    (Some(lo), Some(hi)) => {
                        let ctx = LoopCtx { var: *var, lo, hi, outer: mult.clone() };
                        sym_block(model, a, body, &inner, in_tile, Some(&ctx), acc);
                    }
                    _ => sym_block(model, a, body, &inner, in_tile, None, acc),
                }
            }
            Stmt::ForTiles { body, .. } => sym_block(model, a, body, &Some(Poly::constant(1)), true, None, acc),
            Stmt::If { cond, then_block, else_block } => {
                let env = Env::default();
                match eval(m, &env, *cond) {
                    Val::Bool(true) => sym_block(model, a, then_block, mult, in_tile, lp, acc),
                    Val::Bool(false) => {
                        if let Some(e) = else_block {
                            sym_block(model, a, e, mult, in_tile, lp, acc);
                        }
                    }
                    _ => {
                        // A condition on the innermost loop's variable: count its iterations.
                        let counted = lp.and_then(|ctx| {
                            let n = cond_count(m, *cond, ctx)?;
                            let outer = ctx.outer.clone()?;
                            let trip = ctx.hi.sub(&ctx.lo)?;
                            Some((outer.mul(&n)?, outer.mul(&trip.sub(&n)?)?))
                        });
                        let (tm, em) = match counted {
                            Some((t, e)) => (Some(t), Some(e)),
                            None => (None, None),
                        };
                        sym_block(model, a, then_block, &tm, in_tile, None, acc);
                        if let Some(e) = else_block {
                            sym_block(model, a, e, &em, in_tile, None, acc);
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// Where two roles' loop nests around their synchronization ops run a different number of
/// times per tile: the first loop (from the outermost) whose trip count differs from the other
/// nest's loop at the same depth. `at` belongs to role `b` when `b` has a loop at that depth.
struct LoopCause {
    at: Handle<Stmt>,
    at_actor: usize,
    trip: Poly,
    other: Option<(Handle<Stmt>, Poly)>,
    /// How often each op runs per tile (the product of its loops' trips): `a`'s, then `b`'s.
    per_tile: (Poly, Poly),
}

fn differing_loop(model: &Model, a: usize, sa: Handle<Stmt>, b: usize, sb: Handle<Stmt>) -> Option<LoopCause> {
    let m = model.m;
    let trips = |actor: usize, s: Handle<Stmt>| -> Option<Vec<(Handle<Stmt>, Poly)>> {
        model
            .loops_around(actor, s)?
            .into_iter()
            .map(|l| match &m.stmts[l] {
                Stmt::For { lo, hi, .. } => Some((l, expr_poly(m, *hi)?.sub(&expr_poly(m, *lo)?)?)),
                _ => None,
            })
            .collect()
    };
    let (la, lb) = (trips(a, sa)?, trips(b, sb)?);
    let product = |ls: &[(Handle<Stmt>, Poly)]| ls.iter().try_fold(Poly::constant(1), |acc, (_, t)| acc.mul(t));
    let per_tile = (product(&la)?, product(&lb)?);
    if per_tile.0 == per_tile.1 {
        return None;
    }
    for i in 0..la.len().max(lb.len()) {
        match (la.get(i), lb.get(i)) {
            (x, Some(y)) if x.is_none_or(|x| x.1 != y.1) => {
                return Some(LoopCause { at: y.0, at_actor: b, trip: y.1.clone(), other: x.cloned(), per_tile });
            }
            (Some(x), None) => return Some(LoopCause { at: x.0, at_actor: a, trip: x.1.clone(), other: None, per_tile }),
            _ => {}
        }
    }
    None
}

fn plural_times(n: u64) -> String {
    match n {
        1 => "once".to_string(),
        2 => "twice".to_string(),
        n => format!("{n} times"),
    }
}

fn times(p: &Poly, m: &Module) -> String {
    match p.as_const() {
        Some(1) => "once".to_string(),
        Some(2) => "twice".to_string(),
        _ => format!("{} times", p.render(m)),
    }
}

fn total(model: &Model, c: &SymCount) -> Option<Poly> {
    let t = if model.persistent { Poly::atom(Atom::Tiles) } else { Poly::constant(1) };
    c.per_tile.mul(&t)?.add(&c.outside)
}

fn render_count(model: &Model, c: &SymCount) -> String {
    let m = model.m;
    let per = c.per_tile.render(m);
    let times = |s: &str| if s == "1" { "once".to_string() } else { format!("{s} times") };
    match (c.per_tile.is_zero(), c.outside.is_zero()) {
        (true, true) => "never".to_string(),
        (false, true) => format!("{} per tile", times(&per)),
        (true, false) => format!("{} outside the tile loop", times(&c.outside.render(m))),
        (false, false) => format!("{} per tile and {} outside the tile loop", times(&per), times(&c.outside.render(m))),
    }
}

/// Compare acquires, waits and releases of every pipeline: symbolically where the counts are
/// polynomials, otherwise on the concrete traces (with a coverage-limit finding when they agree
/// there: agreement on samples is not a proof).
/// One side of a count comparison: which role does what how often.
struct Side<'a> {
    count: &'a SymCount,
    actor: Option<usize>,
    kind: PipeKind,
    role: &'a str,
    verb: &'static str,
}

pub fn compare_pipeline_counts(model: &Model, sym: &SymCounts, runs: &[(Binding, Vec<Trace>)], out: &mut Findings) {
    let m = model.m;
    for (p, d) in m.pipelines.iter() {
        let pa = model.actor_of(d.producer);
        let ca = model.actor_of(d.consumer);
        if pa.is_none() || ca.is_none() {
            // A pipeline role without a body is rule V402.
            continue;
        }
        let zero = SymCount { per_tile: Poly::zero(), outside: Poly::zero(), known: true, first: None };
        let get = |a: Option<usize>, k: PipeKind| a.and_then(|a| sym.get(&(a, p, k)).cloned()).unwrap_or_else(|| zero.clone());
        let acq = get(pa, PipeKind::Acquire);
        let wait = get(ca, PipeKind::Wait);
        let rel = get(ca, PipeKind::Release);
        if acq.first.is_none() && wait.first.is_none() && rel.first.is_none() {
            continue;
        }
        let prod = model.role_name(d.producer).to_string();
        let cons = model.role_name(d.consumer).to_string();
        let acquire = Side { count: &acq, actor: pa, kind: PipeKind::Acquire, role: &prod, verb: "acquires a stage" };
        let waits = Side { count: &wait, actor: ca, kind: PipeKind::Wait, role: &cons, verb: "waits for one" };
        let waits2 = Side { count: &wait, actor: ca, kind: PipeKind::Wait, role: &cons, verb: "waits for a stage" };
        let releases = Side { count: &rel, actor: ca, kind: PipeKind::Release, role: &cons, verb: "releases one" };
        for (x, y) in [(&acquire, &waits), (&waits2, &releases)] {
            compare_sides(model, p, x, y, runs, out);
        }
    }
}

fn compare_sides(model: &Model, p: Handle<PipelineDecl>, x: &Side, y: &Side, runs: &[(Binding, Vec<Trace>)], out: &mut Findings) {
    let m = model.m;
    let d = &m.pipelines[p];
    let Some(primary) = y.count.first.or(x.count.first) else { return };
    let mk = |msg: String| {
        let mut diag = Diagnostic::error(code::TRIP_COUNT, msg, model.stmt_span(primary), "count differs")
            .with_secondary(model.pipe_span(p), format!("pipeline `{}` declared here", d.name));
        if let Some(o) = x.count.first {
            if o != primary {
                diag = diag.with_secondary(model.stmt_span(o), format!("`{}` {} here", x.role, x.verb));
            }
        }
        diag.with_note("every acquire must be matched by exactly one wait and one release, per tile: otherwise one side blocks forever on a phase the other never completes (or exits while it waits), and the stage/phase counters of the next tile are out of step")
            .with_help("make the loops around acquire, wait and release run the same number of times")
    };
    let (tx, ty) = (total(model, x.count), total(model, y.count));
    // A symbolic count is trusted unless a concrete trace definitely disagrees with it (the
    // counting of conditions assumes their bound lies inside the loop range).
    let confirmed = |t: &Option<Poly>, side: &Side| -> bool {
        let Some(t) = t else { return false };
        runs.iter().all(|(b, traces)| match side.actor.and_then(|x| traces.get(x)) {
            Some(tr) if tr.complete => {
                let tiles = super::trace::tiles_walked(model, b);
                t.eval(&b.dims, tiles).is_none_or(|v| v == count_kind(tr, p, side.kind) as i128)
            }
            _ => true,
        })
    };
    // Two different clamps (`max(..)`) may still agree: only equal ones decide symbolically.
    let decisive = match (&tx, &ty) {
        (Some(a), Some(b)) => a == b || !(a.has_clamp() || b.has_clamp()),
        _ => true,
    };
    if x.count.known && y.count.known && decisive && confirmed(&tx, x) && confirmed(&ty, y) {
        if let (Some(a), Some(b)) = (&tx, &ty) {
            if a != b {
                if let Some(d) = loop_cause_of_pipeline(model, p, x, y) {
                    out.push_about(d, Some(Subject::Pipeline(p)));
                    return;
                }
                let d = mk(format!(
                    "pipeline `{}`: `{}` {} {}, but `{}` {} {}",
                    d.name,
                    x.role,
                    x.verb,
                    render_count(model, x.count),
                    y.role,
                    y.verb,
                    render_count(model, y.count)
                ));
                out.push_about(d, Some(Subject::Pipeline(p)));
            }
            return;
        }
    }
    // Concrete comparison.
    let mut any = false;
    for (b, traces) in runs {
        let (Some(trx), Some(try_)) = (x.actor.and_then(|a| traces.get(a)), y.actor.and_then(|a| traces.get(a))) else { continue };
        if !trx.complete || !try_.complete {
            continue;
        }
        any = true;
        let nx = count_kind(trx, p, x.kind);
        let ny = count_kind(try_, p, y.kind);
        if nx != ny {
            out.push_about(
                mk(format!("pipeline `{}`: `{}` {} {nx} times, but `{}` {} {ny} times", d.name, x.role, x.verb, y.role, y.verb))
                    .with_detail(format!("binding: {}", b.describe(m))),
                Some(Subject::Pipeline(p)),
            );
            return;
        }
    }
    if any {
        out.push(
            Diagnostic::error(
                code::SYMBOLIC_UNDECIDED,
                format!(
                    "pipeline `{}`: how often `{}` {} and `{}` {} could only be compared on sample sizes (they agree there)",
                    d.name, x.role, x.verb, y.role, y.verb
                ),
                model.stmt_span(primary),
                "count compared on samples only",
            )
            .with_severity(Severity::CoverageLimit)
            .with_secondary(model.pipe_span(p), format!("pipeline `{}` declared here", d.name))
            .with_help("trip counts are compared symbolically when loop bounds are dims, constants and tile coordinates (`t.m`) and conditions compare the loop variable with such a bound"),
        );
    }
}

/// The V104 finding at the loop bound behind a pipeline trip-count mismatch, when each side's
/// op sits once in a nest of counted loops (no peeled iterations, no conditions) and one loop
/// of the nests runs a different number of times.
fn loop_cause_of_pipeline(model: &Model, p: Handle<PipelineDecl>, x: &Side, y: &Side) -> Option<Diagnostic> {
    let m = model.m;
    let (xa, ya) = (x.actor?, y.actor?);
    let (xs, ys) = (x.count.first?, y.count.first?);
    if !x.count.outside.is_zero() || !y.count.outside.is_zero() {
        return None;
    }
    let cause = differing_loop(model, xa, xs, ya, ys)?;
    // Only a nest that accounts for every call explains the count.
    if cause.per_tile.0 != x.count.per_tile || cause.per_tile.1 != y.count.per_tile {
        return None;
    }
    let d = &m.pipelines[p];
    let (here, there, op_here) = if cause.at_actor == ya { (y, x, ys) } else { (x, y, xs) };
    let mut diag = Diagnostic::error(
        code::TRIP_COUNT,
        format!(
            "pipeline `{}`: `{}` {} {} per tile, but `{}` {} {} per tile",
            d.name,
            x.role,
            x.verb,
            times(&cause.per_tile.0, m),
            y.role,
            y.verb,
            times(&cause.per_tile.1, m)
        ),
        model.loop_bound_span(cause.at),
        format!("this loop of `{}` runs {}", here.role, times(&cause.trip, m)),
    );
    if let Some((other, trip)) = &cause.other {
        diag = diag.with_secondary(model.loop_bound_span(*other), format!("the loop of `{}` runs {}", there.role, times(trip, m)));
    }
    diag = diag
        .with_secondary(model.stmt_span(op_here), format!("`{}` {} once per iteration", here.role, here.verb))
        .with_secondary(model.pipe_span(p), format!("pipeline `{}` declared here", d.name))
        .with_note("every acquire must be matched by exactly one wait and one release, per tile: otherwise one side blocks forever on a phase the other never completes (or exits while it waits)");
    let help = match &cause.other {
        Some((_, trip)) => format!("make this loop run {} like the loop of `{}` (or change both)", times(trip, m), there.role),
        None => "make the loops around acquire, wait and release run the same number of times".to_string(),
    };
    Some(diag.with_help(help))
}

fn count_kind(t: &Trace, p: Handle<PipelineDecl>, k: PipeKind) -> usize {
    t.events
        .iter()
        .filter(|e| match (&e.kind, k) {
            (Ek::Acquire { p: q, .. }, PipeKind::Acquire) => *q == p,
            (Ek::PWait { p: q, .. }, PipeKind::Wait) => *q == p,
            (Ek::Release { p: q, .. }, PipeKind::Release) => *q == p,
            _ => false,
        })
        .count()
}

// ------------------------------------------------------------------ explicit barriers

/// Buffer stages that TMA loads completing on each explicit barrier stage fill.
pub fn feeds(model: &Model, traces: &[Trace]) -> HashMap<usize, HashSet<BufKey>> {
    let mut f: HashMap<usize, HashSet<BufKey>> = HashMap::new();
    for t in traces {
        for e in &t.events {
            if let Ek::Tma { dst: Some(dst), credit: Credit::Bar { obj }, .. } = &e.kind {
                f.entry(*obj).or_default().extend(dst.keys(model));
            }
        }
    }
    f
}

#[derive(Default)]
struct BarSide {
    arrivals: u64,
    first_arrive: Option<Handle<Stmt>>,
    waits: Vec<Handle<Stmt>>,
    free: bool,
}

/// Arrivals per phase against `count`, and phases completed against phases waited for.
pub fn barrier_accounting(model: &Model, b: &Binding, traces: &[Trace], out: &mut Findings) {
    let m = model.m;
    for (o, obj) in model.objs.iter().enumerate() {
        let SyncObj::Bar(bar, _) = obj else { continue };
        let decl = &m.barriers[*bar];
        if decl.producers.iter().chain(&decl.consumers).any(|r| model.actor_of(*r).is_none()) {
            // A barrier role without a body is rule V404.
            continue;
        }
        let count = u64::from(decl.count.max(1));
        let mut sides: Vec<BarSide> = (0..traces.len()).map(|_| BarSide::default()).collect();
        for (a, t) in traces.iter().enumerate() {
            for e in &t.events {
                match &e.kind {
                    Ek::Arrive { obj, arrivals, .. } if *obj == o => {
                        sides[a].arrivals += u64::from(*arrivals);
                        if *arrivals > 0 && sides[a].first_arrive.is_none() {
                            sides[a].first_arrive = Some(e.stmt);
                        }
                    }
                    Ek::BWait { obj, parity, k, .. } if *obj == o => {
                        if *k == 0 && *parity == 1 {
                            sides[a].free = true;
                        }
                        sides[a].waits.push(e.stmt);
                    }
                    _ => {}
                }
            }
        }
        let total: u64 = sides.iter().map(|s| s.arrivals).sum();
        let name = model.obj_name(o);
        let bspan = model.bar_span(*bar);
        let subject = Some(Subject::Barrier(*bar));
        let binding = format!("binding: {}", b.describe(m));
        let arrivers: Vec<usize> = (0..sides.len()).filter(|a| sides[*a].arrivals > 0).collect();
        for (w, side) in sides.iter().enumerate() {
            let nw = side.waits.len() as u64;
            if nw == 0 {
                continue;
            }
            let wname = model.actor_name(w).to_string();
            let needed = nw - u64::from(side.free);
            if total == 0 {
                if needed > 0 {
                    let idx = usize::from(side.free);
                    let at = side.waits.get(idx).copied().unwrap_or(side.waits[0]);
                    let listed: Vec<String> = decl.producers.iter().map(|r| format!("`{}`", model.role_name(*r))).collect();
                    let mut d = Diagnostic::error(
                        code::DEADLOCK,
                        format!("role `{wname}` waits on {name}, but no role ever arrives on it: the wait never returns"),
                        model.stmt_span(at),
                        "never satisfied",
                    )
                    .with_secondary(bspan, format!("barrier `{}` declared here", decl.name))
                    .with_detail(binding.clone());
                    if !listed.is_empty() {
                        d = d.with_note(format!("its declared producers ({}) never call `arrive` or `arrive_expect_tx` on it", listed.join(", ")));
                    }
                    out.push_about(d.with_help("arrive on the barrier once per phase from its producer role"), subject);
                }
                continue;
            }
            let mut cands = vec![nw];
            if side.free && nw > 1 {
                cands.push(nw - 1);
            }
            let divisible = |p: u64| p > 0 && arrivers.iter().all(|a| sides[*a].arrivals.is_multiple_of(p));
            if cands.iter().any(|p| divisible(*p) && total / p == count) {
                continue;
            }
            if let Some(p) = cands.iter().copied().find(|p| divisible(*p)) {
                let per = total / p;
                let first = arrivers.first().copied().unwrap_or(0);
                let at = sides[first].first_arrive.unwrap_or(side.waits[0]);
                let who: Vec<String> = arrivers
                    .iter()
                    .map(|a| format!("`{}` {} per phase", model.actor_name(*a), sides[*a].arrivals / p))
                    .collect();
                // The cause is the declared count: the arrivals are what the roles do.
                let d = Diagnostic::error(
                    code::ARRIVAL_COUNT,
                    format!(
                        "barrier `{}` counts {count} arrival(s) per phase, but {per} arrive per phase ({}): {}",
                        decl.name,
                        who.join(", "),
                        if per < count { "every phase waits for arrivals that never come (hang)" } else { "phases complete early, before all producers are done" }
                    ),
                    m.barriers.span(*bar).attr("count"),
                    format!("{count} arrival(s) per phase declared here"),
                )
                .with_secondary(model.stmt_span(at), format!("`{}` arrives {} per phase", model.actor_name(first), plural_times(sides[first].arrivals / p)))
                .with_secondary(model.stmt_span(side.waits[0]), format!("`{wname}` waits for each phase"))
                .with_note("`arrive` is one arrival per call by the whole role (its warps meet first); an op issued per thread, warp or warpgroup arrives once per thread, warp or warpgroup")
                .with_detail(binding.clone())
                .with_help(format!("declare `count {per}`, or arrive {count} time(s) per phase"));
                out.push_about(d, subject);
                continue;
            }
            let phases = total / count;
            // A phase count that differs because one role's loop runs more often than the
            // other's: the cause is that loop's bound.
            let cause = arrivers.first().and_then(|f| {
                let arrive = sides[*f].first_arrive?;
                let (a, sa, b, sb) = if *f > w { (w, side.waits[0], *f, arrive) } else { (*f, arrive, w, side.waits[0]) };
                differing_loop(model, a, sa, b, sb).map(|c| (c, *f, a == w))
            });
            let root = cause.map(|(c, f, waiter_first)| {
                let (waits_per_tile, arrives_per_tile) = if waiter_first { (&c.per_tile.0, &c.per_tile.1) } else { (&c.per_tile.1, &c.per_tile.0) };
                let here = model.actor_name(c.at_actor).to_string();
                let there = model.actor_name(if c.at_actor == w { f } else { w }).to_string();
                let mut d = Diagnostic::error(
                    code::TRIP_COUNT,
                    format!(
                        "role `{wname}` waits on barrier `{}` {} per tile, but `{}` arrives on it {} per tile",
                        decl.name,
                        times(waits_per_tile, m),
                        model.actor_name(f),
                        times(arrives_per_tile, m)
                    ),
                    model.loop_bound_span(c.at),
                    format!("this loop of `{here}` runs {}", times(&c.trip, m)),
                );
                if let Some((other, trip)) = &c.other {
                    d = d.with_secondary(model.loop_bound_span(*other), format!("the loop of `{there}` runs {}", times(trip, m)));
                }
                let help = match &c.other {
                    Some((_, trip)) => format!("make this loop run {} like the loop of `{there}` (or change both)", times(trip, m)),
                    None => "make the loops around the waits and the arrivals run the same number of times".to_string(),
                };
                d.with_secondary(model.stmt_span(side.waits[0]), format!("`{wname}` waits here once per iteration"))
                    .with_secondary(model.stmt_span(sides[f].first_arrive.unwrap_or(side.waits[0])), format!("`{}` arrives here once per iteration", model.actor_name(f)))
                    .with_secondary(bspan, format!("barrier `{}` declared here", decl.name))
                    .with_note("every phase one role waits for must be completed by the other role's arrivals: a role that waits more often hangs, one that waits less often falls out of step")
                    .with_detail(binding.clone())
                    .with_help(help)
            });
            let mut report = |d: Diagnostic| match &root {
                Some(r) => out.push_about(d.following(r), subject),
                None => out.push_about(d, subject),
            };
            if phases < needed {
                let idx = (phases + u64::from(side.free)) as usize;
                let at = side.waits.get(idx).copied().unwrap_or(side.waits[side.waits.len() - 1]);
                let who: Vec<String> = arrivers.iter().map(|a| format!("`{}`", model.actor_name(*a))).collect();
                let mut d = Diagnostic::error(
                    code::EXIT_WHILE_WAITED,
                    format!(
                        "role `{wname}` waits for {needed} phase(s) of {name}, but the arrivals of {} complete only {phases}: they finish while `{wname}` still waits",
                        who.join(", ")
                    ),
                    model.stmt_span(at),
                    "waits for a phase that never completes",
                )
                .with_secondary(bspan, format!("barrier `{}` declared here", decl.name));
                if let Some(a) = arrivers.first() {
                    d = d.with_secondary(model.actor_span(*a), format!("`{}` arrives too few times", model.actor_name(*a)));
                }
                report(d.with_detail(binding.clone()).with_help("make every wait correspond to one phase the producers complete"));
            } else {
                let first = arrivers.first().copied().unwrap_or(0);
                let mut d = Diagnostic::error(
                    code::TRIP_COUNT,
                    format!("arrivals complete {phases} phase(s) of {name}, but role `{wname}` waits for only {needed}"),
                    model.stmt_span(side.waits[0]),
                    "waits too few times",
                )
                .with_secondary(bspan, format!("barrier `{}` declared here", decl.name));
                if let Some(s) = sides[first].first_arrive {
                    d = d.with_secondary(model.stmt_span(s), format!("`{}` arrives here", model.actor_name(first)));
                }
                report(
                    d.with_note("phases the waiter skips put its parity out of step with the barrier: it passes on a stale phase or hangs")
                        .with_detail(binding.clone())
                        .with_help("wait once per phase the producers complete"),
                );
            }
            if let Some(r) = root {
                out.push_about(r, subject);
            }
        }
    }
}

/// One phase's announcement by a role: (announced bytes, the announcing statement, bytes
/// delivered so far, the first TMA load).
type Segment = (u64, Handle<Stmt>, u64, Option<Handle<Stmt>>);

/// Transaction bytes announced by `arrive_expect_tx` against the bytes of the TMA loads that
/// complete on the barrier in that phase (per role: from one announcement to the next).
pub fn tx_bytes(model: &Model, traces: &[Trace], out: &mut Findings, cov: &mut Vec<Diagnostic>) {
    let mut armers: HashMap<usize, HashSet<usize>> = HashMap::new();
    for (a, t) in traces.iter().enumerate() {
        for e in &t.events {
            if let Ek::Arrive { obj, tx: Some(_), .. } = &e.kind {
                armers.entry(*obj).or_default().insert(a);
            }
        }
    }
    for (a, t) in traces.iter().enumerate() {
        // obj → (announced, stmt, delivered, first tma)
        let mut open: HashMap<usize, Segment> = HashMap::new();
        let close = |obj: usize, seg: Segment, out: &mut Findings| {
            let (n, at, sum, first) = seg;
            if n != sum {
                let name = model.obj_name(obj);
                let mut d = Diagnostic::error(
                    code::TX_BYTES,
                    format!(
                        "role `{}` announces {n} transaction bytes on {name}, but the TMA loads completing on it in this phase deliver {sum}: {}",
                        model.actor_name(a),
                        if sum < n { "the phase never completes (hang)" } else { "the phase completes before all data has landed" }
                    ),
                    model.arg_span(at, "bytes").unwrap_or_else(|| model.stmt_span(at)),
                    format!("announces {n} bytes"),
                )
                .with_secondary(model.stmt_span(at), "the phase is armed here")
                .with_secondary(model.obj_decl_span(obj), "barrier declared here");
                if let Some(f) = first {
                    d = d.with_secondary(model.stmt_span(f), format!("the TMA loads completing on it from here deliver {sum} bytes"));
                }
                out.push_about(
                    d.with_note("a phase completes when its arrivals are done and its transaction count is back to zero: every byte announced must be delivered by a copy that names the barrier")
                        .with_help(format!("announce exactly {sum} bytes (the sum of the boxes loaded), or let a pipeline derive them")),
                    model.subject(obj),
                );
            }
        };
        for e in &t.events {
            match &e.kind {
                Ek::Arrive { obj, tx: Some(n), .. } => {
                    if let Some(seg) = open.remove(obj) {
                        close(*obj, seg, out);
                    }
                    open.insert(*obj, (*n, e.stmt, 0, None));
                }
                Ek::Tma { bytes, credit: Credit::Bar { obj }, .. } => match open.get_mut(obj) {
                    Some(seg) => {
                        seg.2 = seg.2.saturating_add(*bytes);
                        if seg.3.is_none() {
                            seg.3 = Some(e.stmt);
                        }
                    }
                    None => {
                        let others = armers.get(obj).is_some_and(|s| s.iter().any(|x| *x != a));
                        let name = model.obj_name(*obj);
                        if others {
                            cov.push(
                                Diagnostic::error(
                                    code::UNMODELLED_OP,
                                    format!("the bytes of this TMA load on {name} are announced by another role; per-phase byte accounting across roles is not modelled"),
                                    model.stmt_span(e.stmt),
                                    "transaction bytes not checked",
                                )
                                .with_severity(Severity::CoverageLimit)
                                .with_help("announce the bytes in the role that issues the loads"),
                            );
                        } else {
                            out.push_about(
                                Diagnostic::error(
                                    code::TX_BYTES,
                                    format!(
                                        "this TMA load completes {bytes} transaction bytes on {name}, but no `arrive_expect_tx` announced them in role `{}`",
                                        model.actor_name(a)
                                    ),
                                    model.stmt_span(e.stmt),
                                    "bytes never announced",
                                )
                                .with_secondary(model.obj_decl_span(*obj), "barrier declared here")
                                .with_help("call `arrive_expect_tx(b, bytes)` for the phase before (or with) its loads"),
                                model.subject(*obj),
                            );
                        }
                    }
                },
                _ => {}
            }
        }
        let mut rest: Vec<_> = open.into_iter().collect();
        rest.sort_by_key(|(o, _)| *o);
        for (obj, seg) in rest {
            close(obj, seg, out);
        }
    }
}

/// `sync()` must be reached equally often by every role.
pub fn block_syncs(model: &Model, b: &Binding, traces: &[Trace], out: &mut Findings) {
    let counts: Vec<(usize, Option<Handle<Stmt>>)> = traces
        .iter()
        .map(|t| {
            let n = t.events.iter().filter(|e| e.kind == Ek::Sync).count();
            (n, t.events.iter().find(|e| e.kind == Ek::Sync).map(|e| e.stmt))
        })
        .collect();
    let Some(max) = counts.iter().map(|c| c.0).max() else { return };
    if max == 0 || counts.iter().all(|c| c.0 == max) {
        return;
    }
    let (hi, lo) = match (counts.iter().position(|c| c.0 == max), counts.iter().position(|c| c.0 != max)) {
        (Some(h), Some(l)) => (h, l),
        _ => return,
    };
    let Some(at) = counts[hi].1 else { return };
    out.push(
        Diagnostic::error(
            code::TRIP_COUNT,
            format!(
                "role `{}` reaches the block barrier `sync()` {} times, but role `{}` reaches it {} times: every thread of the block must arrive each time",
                model.actor_name(hi),
                counts[hi].0,
                model.actor_name(lo),
                counts[lo].0
            ),
            model.stmt_span(at),
            "block barrier not reached by every role",
        )
        .with_secondary(model.actor_span(lo), format!("`{}`", model.actor_name(lo)))
        .with_detail(format!("binding: {}", b.describe(model.m)))
        .with_help("use `sync_role(ROLE)` for a barrier among one role's warps"),
    );
}
