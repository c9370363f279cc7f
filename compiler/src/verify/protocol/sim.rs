//! The cross-role simulation: every role runs its trace "as far as it can" against mbarrier
//! objects with real parity semantics (`try_wait.parity(P)` passes iff the current phase's
//! parity differs from P), in a fixed priority order. No interleaving is enumerated: a role runs
//! until it blocks, then the next; a sweep in which no role moves while some have not finished is
//! a deadlock. Happens-before is tracked with vector clocks (one component per role, one per
//! barrier object for the TMA copies that complete on it), so a race is found whatever order the
//! scheduler happened to pick: an access is fine iff it is ordered after every conflicting access.
//! The run stops at its first error, which is reported with the binding.

use std::collections::{HashMap, VecDeque};

use crate::catalog::Proxy;
use crate::diag::{Diagnostic, Severity};
use crate::ir::*;

use super::code;
use super::model::{BufKey, Model, SyncObj};
use super::trace::{AccKind, Binding, BufSel, Credit, Ek, Trace};

const MAX_STEPS: u64 = 5_000_000;

/// Role priority orders to try: declaration order, reversed, and their rotations.
pub fn orders(n: usize) -> Vec<Vec<usize>> {
    let mut v: Vec<Vec<usize>> = Vec::new();
    let fwd: Vec<usize> = (0..n).collect();
    for r in 0..n.max(1) {
        let mut o = fwd.clone();
        o.rotate_left(r.min(n.saturating_sub(1)));
        if !v.contains(&o) {
            v.push(o.clone());
        }
        o.reverse();
        if !v.contains(&o) {
            v.push(o);
        }
        if v.len() >= 8 {
            break;
        }
    }
    v
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// Waiting on an object for a phase with this parity; `first`: the role's first wait on it.
    Obj { obj: usize, parity: u8, first: bool, explicit: bool, expected: i64 },
    Sync,
}

pub struct Deadlock {
    /// (actor, event index, why) for every role that has not finished.
    pub blocked: Vec<(usize, usize, Blocked)>,
    pub done: Vec<bool>,
    pub completed: Vec<u64>,
}

pub struct RunResult {
    pub findings: Vec<Diagnostic>,
    pub deadlock: Option<Deadlock>,
    pub capped: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Group {
    Wgmma(u64),
    Cp(u64),
    Bulk(u64),
}

#[derive(Clone, Debug)]
struct Rec {
    actor: usize,
    comp: usize,
    epoch: u64,
    stmt: Handle<Stmt>,
    generic: bool,
    /// Generic write: the writer fenced since. Generic read: the reader fenced or arrived on an
    /// mbarrier since (an mbarrier hand-off orders it before a later TMA overwrite).
    settled: bool,
    pending: Option<Group>,
    /// Made by an asynchronous operation (wgmma, cp.async, TMA store), complete only at its wait.
    was_async: bool,
}

#[derive(Default)]
struct Mem {
    write: Option<Rec>,
    reads: Vec<Rec>,
}

struct Actor {
    pc: usize,
    done: bool,
    vc: Vec<u64>,
    at_sync: bool,
    next_group: u64,
    wg_open: u64,
    wg: VecDeque<u64>,
    cp_open: u64,
    cp: VecDeque<u64>,
    bulk: VecDeque<u64>,
    bar_off: HashMap<usize, i64>,
}

struct Obj {
    count: i64,
    pending: i64,
    tx: i64,
    completed: u64,
    cur: Vec<u64>,
    /// The clock of the last completed phase (a passing wait observes that phase).
    last: Vec<u64>,
    engine: u64,
}

struct Sim<'a, 'm> {
    model: &'a Model<'m>,
    traces: &'a [Trace],
    n: usize,
    actors: Vec<Actor>,
    objs: Vec<Obj>,
    mem: HashMap<BufKey, Mem>,
    sync_acc: Vec<u64>,
    free_pass: Option<(usize, Handle<BarrierDecl>)>,
    findings: Vec<Diagnostic>,
}

enum Step {
    Progress,
    Blocked(Blocked),
    Done,
}

fn join(a: &mut [u64], b: &[u64]) {
    for (x, y) in a.iter_mut().zip(b) {
        if *y > *x {
            *x = *y;
        }
    }
}

pub fn run(model: &Model, traces: &[Trace], order: &[usize], free_pass: Option<(usize, Handle<BarrierDecl>)>) -> RunResult {
    let n = traces.len();
    let comps = n + model.objs.len();
    let objs = model
        .objs
        .iter()
        .map(|o| {
            let count = match o {
                SyncObj::Bar(b, _) => i64::from(model.m.barriers[*b].count.max(1)),
                _ => 1,
            };
            Obj { count, pending: count, tx: 0, completed: 0, cur: vec![0; comps], last: vec![0; comps], engine: 0 }
        })
        .collect();
    let actors = (0..n)
        .map(|a| {
            let mut vc = vec![0; comps];
            vc[a] = 1;
            Actor {
                pc: 0,
                done: false,
                vc,
                at_sync: false,
                next_group: 1,
                wg_open: 0,
                wg: VecDeque::new(),
                cp_open: 0,
                cp: VecDeque::new(),
                bulk: VecDeque::new(),
                bar_off: HashMap::new(),
            }
        })
        .collect();
    let mut sim = Sim { model, traces, n, actors, objs, mem: HashMap::new(), sync_acc: vec![0; comps], free_pass, findings: Vec::new() };
    for a in 0..n {
        sim.actors[a].wg_open = sim.fresh(a);
        sim.actors[a].cp_open = sim.fresh(a);
    }
    let mut steps: u64 = 0;
    loop {
        let mut progress = false;
        for &a in order {
            if a >= n {
                continue;
            }
            loop {
                if !sim.findings.is_empty() {
                    return RunResult { findings: std::mem::take(&mut sim.findings), deadlock: None, capped: false };
                }
                steps += 1;
                if steps > MAX_STEPS {
                    return RunResult { findings: Vec::new(), deadlock: None, capped: true };
                }
                match sim.step(a) {
                    Step::Progress => progress = true,
                    Step::Done => {
                        if !sim.actors[a].done {
                            sim.actors[a].done = true;
                            progress = true;
                            sim.try_sync();
                        }
                        break;
                    }
                    Step::Blocked(_) => break,
                }
            }
        }
        if !sim.findings.is_empty() {
            return RunResult { findings: std::mem::take(&mut sim.findings), deadlock: None, capped: false };
        }
        if sim.actors.iter().all(|x| x.done) {
            return RunResult { findings: Vec::new(), deadlock: None, capped: false };
        }
        if !progress {
            let mut blocked = Vec::new();
            for a in 0..n {
                if sim.actors[a].done {
                    continue;
                }
                if let Step::Blocked(b) = sim.peek_block(a) {
                    blocked.push((a, sim.actors[a].pc, b));
                }
            }
            let done = sim.actors.iter().map(|x| x.done).collect();
            let completed = sim.objs.iter().map(|o| o.completed).collect();
            return RunResult { findings: Vec::new(), deadlock: Some(Deadlock { blocked, done, completed }), capped: false };
        }
    }
}

impl Sim<'_, '_> {
    fn fresh(&mut self, a: usize) -> u64 {
        let g = self.actors[a].next_group;
        self.actors[a].next_group += 1;
        g
    }

    fn comp(&self, obj: usize) -> usize {
        self.n + obj
    }

    /// What actor `a` is blocked on (re-evaluates its current event without side effects).
    fn peek_block(&self, a: usize) -> Step {
        let Some(ev) = self.traces[a].events.get(self.actors[a].pc) else { return Step::Done };
        match &ev.kind {
            Ek::Sync | Ek::ClusterSync => Step::Blocked(Blocked::Sync),
            k => match self.wait_target(a, k) {
                Some((obj, parity, first, explicit, expected)) => Step::Blocked(Blocked::Obj { obj, parity, first, explicit, expected }),
                None => Step::Progress,
            },
        }
    }

    /// The object, parity, first-wait flag, explicitness and expected phase of a waiting event.
    fn wait_target(&self, a: usize, k: &Ek) -> Option<(usize, u8, bool, bool, i64)> {
        match k {
            Ek::Acquire { p, stage, round, .. } => {
                let obj = self.model.obj(SyncObj::Empty(*p, *stage))?;
                let e = i64::from(*round) - 1;
                Some((obj, (e & 1) as u8, *round == 0, false, e))
            }
            Ek::PWait { p, stage, round } => {
                let obj = self.model.obj(SyncObj::Full(*p, *stage))?;
                Some((obj, (round & 1) as u8, *round == 0, false, i64::from(*round)))
            }
            Ek::BWait { obj, parity, k, .. } => {
                let flip = match (self.free_pass, self.model.objs.get(*obj)) {
                    (Some((fa, fb)), Some(SyncObj::Bar(b, _))) => fa == a && fb == *b,
                    _ => false,
                };
                let parity = if flip { parity ^ 1 } else { *parity };
                let off = if *k == 0 { if parity == 1 { -1 } else { 0 } } else { *self.actors[a].bar_off.get(obj).unwrap_or(&0) };
                Some((*obj, parity, *k == 0, true, i64::from(*k) + off))
            }
            _ => None,
        }
    }

    fn step(&mut self, a: usize) -> Step {
        let pc = self.actors[a].pc;
        let Some(ev) = self.traces[a].events.get(pc) else { return Step::Done };
        let stmt = ev.stmt;
        let kind = ev.kind.clone();
        match &kind {
            Ek::Acquire { p, stage, tx, .. } => {
                let Some((obj, parity, first, _, expected)) = self.wait_target(a, &kind) else { return self.advance(a) };
                if !self.try_wait(a, obj, parity, expected, stmt, false) {
                    return Step::Blocked(Blocked::Obj { obj, parity, first, explicit: false, expected });
                }
                if let Some(full) = self.model.obj(SyncObj::Full(*p, *stage)) {
                    self.arrive(a, full, 1, Some(*tx), stmt);
                }
                self.advance(a)
            }
            Ek::PWait { .. } => {
                let Some((obj, parity, first, _, expected)) = self.wait_target(a, &kind) else { return self.advance(a) };
                if !self.try_wait(a, obj, parity, expected, stmt, false) {
                    return Step::Blocked(Blocked::Obj { obj, parity, first, explicit: false, expected });
                }
                self.advance(a)
            }
            Ek::Release { p, stage } => {
                if let Some(s) = stage {
                    if let Some(obj) = self.model.obj(SyncObj::Empty(*p, *s)) {
                        self.arrive(a, obj, 1, None, stmt);
                    }
                }
                self.advance(a)
            }
            Ek::Arrive { obj, arrivals, tx } => {
                self.arrive(a, *obj, i64::from(*arrivals), *tx, stmt);
                self.advance(a)
            }
            Ek::BWait { obj, k, .. } => {
                let Some((_, parity, first, _, expected)) = self.wait_target(a, &kind) else { return self.advance(a) };
                if *k == 0 {
                    self.actors[a].bar_off.insert(*obj, if parity == 1 { -1 } else { 0 });
                }
                if !self.try_wait(a, *obj, parity, expected, stmt, true) {
                    return Step::Blocked(Blocked::Obj { obj: *obj, parity, first, explicit: true, expected });
                }
                self.advance(a)
            }
            Ek::Tma { dst, bytes, credit } => {
                let obj = match credit {
                    Credit::Pipe { p, stage: Some(s) } => self.model.obj(SyncObj::Full(*p, *s)),
                    Credit::Pipe { .. } => None,
                    Credit::Bar { obj } => Some(*obj),
                };
                if let Some(obj) = obj {
                    let comp = self.comp(obj);
                    if let Some(dst) = dst {
                        self.write(a, *dst, stmt, AccKind::Plain, Some((comp, self.objs[obj].engine + 1)), false);
                    }
                    let vc = self.actors[a].vc.clone();
                    let o = &mut self.objs[obj];
                    o.engine += 1;
                    join(&mut o.cur, &vc);
                    if o.cur[comp] < o.engine {
                        o.cur[comp] = o.engine;
                    }
                    o.tx -= i64::try_from(*bytes).unwrap_or(i64::MAX);
                    self.try_complete(obj);
                }
                self.advance(a)
            }
            Ek::Access { buf, write, proxy, kind: ak } => {
                if *write {
                    self.write(a, *buf, stmt, *ak, None, *proxy == Proxy::Generic);
                } else {
                    self.read(a, *buf, stmt, *ak, *proxy == Proxy::Generic);
                }
                self.advance(a)
            }
            Ek::FragUse { .. } | Ek::WgmmaIssue { .. } | Ek::SyncRole => self.advance(a),
            Ek::WgmmaCommit => {
                let open = self.actors[a].wg_open;
                self.actors[a].wg.push_back(open);
                self.actors[a].wg_open = self.fresh(a);
                self.advance(a)
            }
            Ek::WgmmaWait(n) => {
                let mut done = Vec::new();
                while self.actors[a].wg.len() > *n as usize {
                    if let Some(g) = self.actors[a].wg.pop_front() {
                        done.push(Group::Wgmma(g));
                    }
                }
                self.finish_groups(a, &done);
                self.advance(a)
            }
            Ek::CpCommit => {
                let open = self.actors[a].cp_open;
                self.actors[a].cp.push_back(open);
                self.actors[a].cp_open = self.fresh(a);
                self.advance(a)
            }
            Ek::CpWait(n) => {
                let mut done = Vec::new();
                while self.actors[a].cp.len() > *n as usize {
                    if let Some(g) = self.actors[a].cp.pop_front() {
                        done.push(Group::Cp(g));
                    }
                }
                self.finish_groups(a, &done);
                self.advance(a)
            }
            Ek::BulkWait(n) => {
                let mut done = Vec::new();
                while self.actors[a].bulk.len() > *n as usize {
                    if let Some(g) = self.actors[a].bulk.pop_front() {
                        done.push(Group::Bulk(g));
                    }
                }
                self.finish_groups(a, &done);
                self.advance(a)
            }
            Ek::Fence => {
                for mem in self.mem.values_mut() {
                    if let Some(w) = mem.write.as_mut() {
                        if w.actor == a {
                            w.settled = true;
                        }
                    }
                    for r in mem.reads.iter_mut() {
                        if r.actor == a {
                            r.settled = true;
                        }
                    }
                }
                self.advance(a)
            }
            Ek::Sync | Ek::ClusterSync => {
                if !self.actors[a].at_sync {
                    self.actors[a].at_sync = true;
                    let vc = self.actors[a].vc.clone();
                    join(&mut self.sync_acc, &vc);
                    self.try_sync();
                    return Step::Progress;
                }
                Step::Blocked(Blocked::Sync)
            }
        }
    }

    fn advance(&mut self, a: usize) -> Step {
        self.actors[a].pc += 1;
        Step::Progress
    }

    /// Complete the block barrier when every role still running has arrived.
    fn try_sync(&mut self) {
        let live: Vec<usize> = (0..self.n).filter(|a| !self.actors[*a].done).collect();
        if live.is_empty() || !live.iter().all(|a| self.actors[*a].at_sync) {
            return;
        }
        let acc = std::mem::replace(&mut self.sync_acc, vec![0; self.n + self.objs.len()]);
        for a in live {
            let act = &mut self.actors[a];
            join(&mut act.vc, &acc);
            act.vc[a] += 1;
            act.at_sync = false;
            act.pc += 1;
        }
    }

    fn try_wait(&mut self, a: usize, obj: usize, parity: u8, expected: i64, stmt: Handle<Stmt>, explicit: bool) -> bool {
        let c = self.objs[obj].completed;
        if (c & 1) as u8 == parity {
            return false;
        }
        let observed = c as i64 - 1;
        if observed >= 0 {
            let last = self.objs[obj].last.clone();
            join(&mut self.actors[a].vc, &last);
        }
        if observed != expected {
            let name = self.model.obj_name(obj);
            let role = self.model.actor_name(a).to_string();
            let msg = if observed < expected {
                format!(
                    "role `{role}` passes its wait for phase {expected} of {name} while only phase {observed} has completed: one parity bit cannot tell the phases apart, so the waiter runs a full lap ahead of the arrivals (it sees stale data)"
                )
            } else {
                format!(
                    "role `{role}` waits for phase {expected} of {name}, but the barrier has already completed phase {observed}: the arrivals ran two phases ahead and the parity now matches a later phase"
                )
            };
            let d = Diagnostic::error(code::PHASE_DESYNC, msg, self.model.stmt_span(stmt), "passes on the wrong phase")
                .with_secondary(self.model.obj_decl_span(obj), "declared here")
                .with_note("an mbarrier wait only compares one parity bit: waiters and arrivers must stay within one phase of each other")
                .with_help(if explicit {
                    "make the arriving role wait for the waiter before it arrives again (an empty barrier), so neither side can get a phase ahead"
                } else {
                    "keep the consumer's waits matched one-to-one with the producer's acquires"
                });
            self.findings.push(d);
        }
        true
    }

    fn arrive(&mut self, a: usize, obj: usize, arrivals: i64, tx: Option<u64>, stmt: Handle<Stmt>) {
        let vc = self.actors[a].vc.clone();
        {
            let o = &mut self.objs[obj];
            join(&mut o.cur, &vc);
            o.pending -= arrivals;
            if let Some(t) = tx {
                o.tx += i64::try_from(t).unwrap_or(i64::MAX / 2);
            }
        }
        self.actors[a].vc[a] += 1;
        // An mbarrier arrive releases this role's earlier generic reads (for WAR against TMA).
        for mem in self.mem.values_mut() {
            for r in mem.reads.iter_mut() {
                if r.actor == a && r.pending.is_none() {
                    r.settled = true;
                }
            }
        }
        if self.objs[obj].pending < 0 {
            let name = self.model.obj_name(obj);
            let count = self.objs[obj].count;
            let d = Diagnostic::error(
                code::ARRIVAL_COUNT,
                format!("role `{}` arrives on {name} more often than its count ({count}) allows in one phase", self.model.actor_name(a)),
                self.model.stmt_span(stmt),
                "too many arrivals",
            )
            .with_secondary(self.model.obj_decl_span(obj), "declared here");
            self.findings.push(d);
        }
        self.try_complete(obj);
    }

    fn try_complete(&mut self, obj: usize) {
        let comps = self.n + self.objs.len();
        let o = &mut self.objs[obj];
        if o.pending <= 0 && o.tx == 0 {
            o.completed += 1;
            o.last = std::mem::replace(&mut o.cur, vec![0; comps]);
            o.pending = o.count;
            o.tx = 0;
        }
    }

    fn finish_groups(&mut self, a: usize, groups: &[Group]) {
        if groups.is_empty() {
            return;
        }
        let now = self.actors[a].vc[a];
        for mem in self.mem.values_mut() {
            if let Some(w) = mem.write.as_mut() {
                if w.actor == a && w.pending.is_some_and(|g| groups.contains(&g)) {
                    w.pending = None;
                    w.epoch = now;
                }
            }
            for r in mem.reads.iter_mut() {
                if r.actor == a && r.pending.is_some_and(|g| groups.contains(&g)) {
                    r.pending = None;
                    r.epoch = now;
                }
            }
        }
    }

    fn ordered(&self, rec: &Rec, vc: &[u64]) -> bool {
        rec.pending.is_none() && vc.get(rec.comp).copied().unwrap_or(0) >= rec.epoch
    }

    fn group_for(&mut self, a: usize, kind: AccKind) -> Option<Group> {
        match kind {
            AccKind::Plain => None,
            AccKind::Wgmma => Some(Group::Wgmma(self.actors[a].wg_open)),
            AccKind::CpAsync => Some(Group::Cp(self.actors[a].cp_open)),
            AccKind::BulkStore => {
                let g = self.fresh(a);
                self.actors[a].bulk.push_back(g);
                Some(Group::Bulk(g))
            }
        }
    }

    fn read(&mut self, a: usize, buf: BufSel, stmt: Handle<Stmt>, kind: AccKind, generic: bool) {
        let vc = self.actors[a].vc.clone();
        let group = self.group_for(a, kind);
        for key in buf.keys(self.model) {
            let mem = self.mem.entry(key).or_default();
            if let Some(w) = mem.write.clone() {
                if w.actor != a {
                    if !self.ordered(&w, &vc) {
                        self.race(code::READ_BEFORE_WAIT, a, key, stmt, &w, ("reads", "written"));
                        return;
                    }
                    let async_read = matches!(kind, AccKind::Wgmma | AccKind::BulkStore);
                    if async_read && w.generic && !w.settled {
                        let d = Diagnostic::error(
                            code::MISSING_PROXY_FENCE,
                            format!(
                                "role `{}` reads {} through the async proxy, but role `{}` wrote it with generic stores and did not `fence_proxy_async()` before handing it over",
                                self.model.actor_name(a),
                                self.model.buf_name(key),
                                self.model.actor_name(w.actor)
                            ),
                            self.model.stmt_span(stmt),
                            "async read of generic writes",
                        )
                        .with_secondary(self.model.stmt_span(w.stmt), "generic write here")
                        .with_help("the writing role calls `fence_proxy_async()` after its stores and before the arrive that hands the buffer over");
                        self.findings.push(d);
                        return;
                    }
                }
            }
            let epoch = vc[a];
            let mem = self.mem.entry(key).or_default();
            mem.reads.retain(|r| !(r.actor == a && r.pending.is_none()));
            mem.reads.push(Rec { actor: a, comp: a, epoch, stmt, generic, settled: false, pending: group, was_async: group.is_some() });
        }
    }

    /// `tma`: for a TMA write, the (component, epoch) the write is published under.
    fn write(&mut self, a: usize, buf: BufSel, stmt: Handle<Stmt>, kind: AccKind, tma: Option<(usize, u64)>, generic: bool) {
        let vc = self.actors[a].vc.clone();
        let group = if tma.is_some() { None } else { self.group_for(a, kind) };
        for key in buf.keys(self.model) {
            let mem = self.mem.entry(key).or_default();
            let prev_w = mem.write.clone();
            let prev_r = mem.reads.clone();
            if let Some(w) = prev_w {
                if w.actor != a && !self.ordered(&w, &vc) {
                    self.race(code::OVERWRITE_IN_USE, a, key, stmt, &w, ("overwrites", "written"));
                    return;
                }
            }
            for r in &prev_r {
                if (r.actor != a || r.pending.is_some()) && !self.ordered(r, &vc) {
                    self.race(code::OVERWRITE_IN_USE, a, key, stmt, r, ("overwrites", "read"));
                    return;
                }
                if tma.is_some() && r.actor != a && r.generic && !r.settled {
                    let d = Diagnostic::error(
                        code::MISSING_PROXY_FENCE,
                        format!(
                            "this TMA (async proxy) overwrites {} after role `{}` read it with generic loads; the reader neither fenced (`fence_proxy_async()`) nor handed it back through an mbarrier",
                            self.model.buf_name(key),
                            self.model.actor_name(r.actor)
                        ),
                        self.model.stmt_span(stmt),
                        "async write after generic read",
                    )
                    .with_secondary(self.model.stmt_span(r.stmt), "generic read here")
                    .with_help("the reading role calls `fence_proxy_async()` after its last read, before the synchronization that lets the TMA go");
                    self.findings.push(d);
                    return;
                }
            }
            let (comp, epoch) = tma.unwrap_or((a, vc[a]));
            let mem = self.mem.entry(key).or_default();
            mem.reads.clear();
            mem.write = Some(Rec { actor: a, comp, epoch, stmt, generic, settled: false, pending: group, was_async: group.is_some() });
        }
    }

    /// `words`: what this access does (`reads`) and what the other did (`written`).
    fn race(&mut self, code: &str, a: usize, key: BufKey, stmt: Handle<Stmt>, other: &Rec, words: (&str, &str)) {
        let (verb, how) = words;
        let me = self.model.actor_name(a).to_string();
        let them = self.model.actor_name(other.actor).to_string();
        let buf = self.model.buf_name(key);
        let msg = if other.actor == a {
            format!("role `{me}` {verb} {buf} while its own earlier asynchronous operation on it is still in flight")
        } else if code == super::code::READ_BEFORE_WAIT {
            format!("role `{me}` {verb} {buf} before waiting for the barrier phase that makes `{them}`'s write of it visible: nothing orders the write before this read")
        } else {
            format!("role `{me}` {verb} {buf}, which role `{them}` {how} and has not handed back through a barrier this role waited on")
        };
        let help = if code == super::code::READ_BEFORE_WAIT {
            "wait (`wait` / `wait_parity`) on the barrier the writer's data completes on before reading"
        } else {
            "wait on a barrier the other role arrives on after its last access (an empty barrier) before overwriting"
        };
        let mut d = Diagnostic::error(code, msg, self.model.stmt_span(stmt), "not ordered after the other access")
            .with_secondary(self.model.stmt_span(other.stmt), format!("`{them}` {how} it here"))
            .with_secondary(self.model.actor_span(other.actor), format!("role `{them}`"))
            .with_help(help);
        if other.was_async {
            d = d.with_note(format!(
                "that access is asynchronous: it is complete only at the `wgmma_wait` / `cp_async_wait` / `tma_store_wait` that covers it, so an arrive by `{them}` before that wait does not hand the buffer over"
            ));
        }
        self.findings.push(d);
    }
}

/// Explain a deadlock: a wrong initial parity (V103) when flipping one first wait lets every role
/// finish; a role waiting on arrivals from roles that already finished (V106); otherwise a cycle
/// of waits or a wait no one arrives on (V105).
pub fn explain_deadlock(model: &Model, traces: &[Trace], order: &[usize], dl: &Deadlock) -> Diagnostic {
    let stmt_of = |a: usize, pc: usize| traces.get(a).and_then(|t| t.events.get(pc)).map(|e| e.stmt);
    // V103: a first wait with parity 0 on a barrier that never completed a phase.
    for (a, pc, b) in &dl.blocked {
        if let Blocked::Obj { obj, parity: 0, first: true, explicit: true, .. } = b {
            if dl.completed.get(*obj).copied() != Some(0) {
                continue;
            }
            let Some(SyncObj::Bar(bar, _)) = model.objs.get(*obj).copied() else { continue };
            let rerun = run(model, traces, order, Some((*a, bar)));
            if rerun.deadlock.is_none() && !rerun.capped && rerun.findings.is_empty() {
                let Some(st) = stmt_of(*a, *pc) else { continue };
                let name = model.obj_name(*obj);
                let role = model.actor_name(*a).to_string();
                let arrivers = arrivers_of(model, traces, *obj);
                let mut d = Diagnostic::error(
                    code::INITIAL_PARITY,
                    format!(
                        "role `{role}`'s first wait on {name} waits for phase 0 (parity 0), but that phase can only complete after `{role}` itself moves on: a role that waits for the other side to free a slot must start at parity 1, which a fresh barrier satisfies at once"
                    ),
                    model.arg_span(st, "parity").unwrap_or_else(|| model.stmt_span(st)),
                    "parity 0 waits for a phase that cannot complete first",
                )
                .with_secondary(model.stmt_span(st), format!("`{role}` hangs in its first wait"))
                .with_secondary(model.obj_decl_span(*obj), "barrier declared here");
                for r in arrivers.iter().take(1) {
                    if let Some((_, rpc, _)) = dl.blocked.iter().find(|(x, _, _)| x == r) {
                        if let Some(rs) = stmt_of(*r, *rpc) {
                            d = d.with_secondary(model.stmt_span(rs), format!("`{}` is blocked here, before its first arrival on {name}", model.actor_name(*r)));
                        }
                    }
                }
                return d
                    .with_note("producers start at phase 1 on an empty barrier (bug class 1): `wait_parity(empty, 1)` on the first trip, then alternating")
                    .with_help("start this role's parity at 1 (e.g. `wait_parity(b, (i / stages + 1) % 2)`)");
            }
        }
    }
    // A wait whose phase has already completed but whose parity now matches a later phase: the
    // arrivals ran two (or any even number of) phases ahead of the waiter.
    for (a, pc, b) in &dl.blocked {
        if let Blocked::Obj { obj, expected, .. } = b {
            let c = dl.completed.get(*obj).copied().unwrap_or(0) as i64;
            if c > *expected + 1 {
                let Some(st) = stmt_of(*a, *pc) else { continue };
                let name = model.obj_name(*obj);
                let role = model.actor_name(*a).to_string();
                let mut d = Diagnostic::error(
                    code::PHASE_DESYNC,
                    format!(
                        "role `{role}` waits for phase {expected} of {name}, but the arrivals have already completed {c} phases: they lapped the waiter, the parity bit now names a later phase, and the wait hangs (or, one phase later, passes on the wrong data)"
                    ),
                    model.stmt_span(st),
                    "waiter lapped by the arrivals",
                )
                .with_secondary(model.obj_decl_span(*obj), "declared here");
                if let Some(r) = arrivers_of(model, traces, *obj).first() {
                    d = d.with_secondary(model.actor_span(*r), format!("`{}` arrives without waiting for `{role}`", model.actor_name(*r)));
                }
                return d
                    .with_note("an mbarrier wait compares one parity bit: the arriving side must not get more than one phase ahead, which is what an empty barrier (waited by the producer, arrived by the consumer) enforces")
                    .with_help("make the arriving role wait for the waiter's release before reusing the slot");
            }
        }
    }
    // The first blocked role (declaration order) on an object.
    // Prefer a consumer's wait (on a full barrier or an explicit barrier) over a producer's
    // acquire: a consumer holding too many stages is the usual culprit.
    let mut blocked = dl.blocked.clone();
    let is_acquire = |b: &Blocked| matches!(b, Blocked::Obj { obj, .. } if matches!(model.objs.get(*obj), Some(SyncObj::Empty(..))));
    blocked.sort_by_key(|(a, _, b)| (is_acquire(b), *a));
    let describe = |a: usize, pc: usize, b: &Blocked| -> String {
        match b {
            Blocked::Obj { obj, .. } => format!("`{}` waits on {}", model.actor_name(a), model.obj_name(*obj)),
            Blocked::Sync => {
                let _ = pc;
                format!("`{}` waits at `sync()`", model.actor_name(a))
            }
        }
    };
    if let Some((a, pc, Blocked::Obj { obj, .. })) = blocked.iter().find(|(_, _, b)| matches!(b, Blocked::Obj { .. })).copied() {
        let st = stmt_of(a, pc);
        let span = st.map_or(model.actor_span(a), |s| model.stmt_span(s));
        let name = model.obj_name(obj);
        let role = model.actor_name(a).to_string();
        let arrivers = arrivers_of(model, traces, obj);
        if !arrivers.is_empty() && arrivers.iter().all(|r| dl.done.get(*r).copied().unwrap_or(true)) {
            let who: Vec<String> = arrivers.iter().map(|r| format!("`{}`", model.actor_name(*r))).collect();
            let mut d = Diagnostic::error(
                code::EXIT_WHILE_WAITED,
                format!("role `{role}` waits on {name}, but {} — the only role(s) that arrive on it — have already finished: the wait never returns", who.join(", ")),
                span,
                "waits on a role that has exited",
            )
            .with_secondary(model.obj_decl_span(obj), "declared here");
            if let Some(r) = arrivers.first() {
                d = d.with_secondary(model.actor_span(*r), format!("`{}` finishes first", model.actor_name(*r)));
            }
            return d.with_help("every wait must correspond to an arrival the other role makes before it exits");
        }
        let others: Vec<String> = blocked.iter().filter(|(x, _, _)| *x != a).map(|(x, p, b)| describe(*x, *p, b)).collect();
        let mut d = Diagnostic::error(
            code::DEADLOCK,
            if arrivers.is_empty() {
                format!("role `{role}` waits on {name}, but no role ever arrives on it: deadlock")
            } else if others.is_empty() {
                format!("role `{role}` waits on {name} for a phase its own later arrivals would complete: deadlock")
            } else {
                format!("deadlock: `{role}` waits on {name} while {}", others.join(", "))
            },
            span,
            "blocks forever",
        )
        .with_secondary(model.obj_decl_span(obj), "declared here");
        for (x, p, _) in blocked.iter().filter(|(x, _, _)| *x != a).take(2) {
            if let Some(s) = stmt_of(*x, *p) {
                d = d.with_secondary(model.stmt_span(s), format!("`{}` is blocked here", model.actor_name(*x)));
            }
        }
        return d
            .with_note("no role can move: each waits for a phase that only another blocked role's later arrival would complete")
            .with_help("order each role's waits so that the arrivals they depend on come first (a consumer must release stages before waiting for more than the pipeline holds)");
    }
    // Everyone left is at a block barrier while someone else is stuck elsewhere, or only block barriers.
    let (a, pc, b) = blocked.first().copied().unwrap_or((0, 0, Blocked::Sync));
    let span = stmt_of(a, pc).map_or(model.actor_span(a), |s| model.stmt_span(s));
    Diagnostic::error(code::DEADLOCK, format!("deadlock: {}", describe(a, pc, &b)), span, "blocks forever")
        .with_help("every role must reach `sync()` the same number of times")
}

fn arrivers_of(model: &Model, traces: &[Trace], obj: usize) -> Vec<usize> {
    (0..traces.len()).filter(|a| traces[*a].events.iter().any(|e| e.kind.arrives_on(model) == Some(obj))).collect()
}

/// The coverage-limit finding for a simulation that ran out of steps.
pub fn cap_finding(model: &Model, b: &Binding) -> Diagnostic {
    let span = model.actors.first().map_or(crate::span::Span::default(), |r| model.role_span(*r));
    Diagnostic::error(
        code::SIM_LIMIT,
        format!("the protocol simulation stopped after {MAX_STEPS} steps without deciding"),
        span,
        "not decided",
    )
    .with_severity(Severity::CoverageLimit)
    .with_note(format!("binding: {}", b.describe(model.m)))
}
