//! Role-local checks: everything that follows from one role's own trace, whatever the other
//! roles do. Pipeline hold discipline (a consumer touches only stages it waited for and has not
//! released; a producer's TMA writes only the stage it acquired), wgmma commit groups against
//! accumulator uses and releases (bug class 5), cp.async groups, proxy fences between this role's
//! generic writes and its async reads (bug class 4), ordering between the threads of the role,
//! and the parity sequence of each explicit-barrier wait (bug class 1).

use std::collections::{HashMap, HashSet, VecDeque};

use crate::diag::{Diagnostic, Severity};
use crate::ir::*;

use super::code;
use super::model::{BufKey, Model, SyncObj};
use super::trace::{AccKind, BufSel, Credit, Ek, Trace};
use super::Findings;

#[derive(Default)]
struct Group {
    accs: Vec<(Handle<Local>, Handle<Stmt>)>,
    reads: Vec<(BufKey, Handle<Stmt>)>,
    /// A wgmma_wait that ran after this group was committed and left it pending.
    waited_past: Option<(Handle<Stmt>, u32)>,
}

/// This role's generic accesses to one buffer since its last barrier: by the whole role
/// (`shared`) or split by warp identity (`private`, each warp its own part).
#[derive(Default)]
struct Intra {
    write_shared: Option<Handle<Stmt>>,
    write_private: Option<Handle<Stmt>>,
    read_shared: Option<Handle<Stmt>>,
    read_private: Option<Handle<Stmt>>,
}

impl Intra {
    /// An earlier write another thread of the role may have made (two warp-split accesses are
    /// assumed to touch each warp's own part).
    fn write_for(&self, private: bool) -> Option<Handle<Stmt>> {
        if private {
            self.write_shared
        } else {
            self.write_shared.or(self.write_private)
        }
    }
    fn read_for(&self, private: bool) -> Option<Handle<Stmt>> {
        if private {
            self.read_shared
        } else {
            self.read_shared.or(self.read_private)
        }
    }
}

#[derive(Clone, Copy)]
enum CpState {
    Pending(Handle<Stmt>),
    Waited(Handle<Stmt>, Handle<Stmt>),
}

/// Asynchronous groups (wgmma commit groups, cp.async groups, bulk stores) one role may have
/// pending at once before the analysis stops (a coverage limit, V955). Each use of a buffer or
/// accumulator scans the pending groups, so commits that no wait ever retires, in a long loop,
/// made the analysis quadratic (9 s and 760 MB in the fuzz campaign); a real schedule keeps a
/// handful pending (the wait depths of the corpus are at most 2).
const MAX_PENDING_GROUPS: usize = 4096;

struct St<'a, 'm> {
    model: &'a Model<'m>,
    cov: &'a mut Vec<Diagnostic>,
    /// Set when a work bound was hit: the rest of the trace is not checked.
    stopped: bool,
    feeds: &'a HashMap<usize, HashSet<BufKey>>,
    role: Handle<RoleDecl>,
    out: &'a mut Findings,
    prod_cur: HashMap<Handle<PipelineDecl>, u32>,
    held: HashMap<Handle<PipelineDecl>, VecDeque<(u32, Handle<Stmt>)>>,
    released: HashMap<(Handle<PipelineDecl>, u32), Handle<Stmt>>,
    wg_open: Group,
    wg_pending: VecDeque<Group>,
    cp_open: Vec<(BufKey, Handle<Stmt>)>,
    cp_pending: VecDeque<Vec<(BufKey, Handle<Stmt>)>>,
    cp_state: HashMap<BufKey, CpState>,
    bulk: VecDeque<Vec<(BufKey, Handle<Stmt>)>>,
    intra: HashMap<BufKey, Intra>,
    unfenced_writes: HashMap<BufKey, Handle<Stmt>>,
    unfenced_reads: HashMap<BufKey, Handle<Stmt>>,
    bar_off: HashMap<usize, i64>,
    free_pass: HashMap<usize, Handle<Stmt>>,
    /// Pipelines whose hold discipline this role already violated: after the first violation
    /// the role's idea of which stage it holds is off, so later ones would be echoes.
    hold_reported: HashSet<Handle<PipelineDecl>>,
    /// The first V457 per accumulator and wgmma, which later uses before the same missing wait follow.
    acc_unwaited: HashMap<(Handle<Local>, Handle<Stmt>), Diagnostic>,
}

pub fn check(model: &Model, feeds: &HashMap<usize, HashSet<BufKey>>, actor: usize, trace: &Trace, out: &mut Findings, cov: &mut Vec<Diagnostic>) {
    let Some(role) = model.actors.get(actor).copied() else { return };
    let mut st = St {
        model,
        cov,
        stopped: false,
        feeds,
        role,
        out,
        prod_cur: HashMap::new(),
        held: HashMap::new(),
        released: HashMap::new(),
        wg_open: Group::default(),
        wg_pending: VecDeque::new(),
        cp_open: Vec::new(),
        cp_pending: VecDeque::new(),
        cp_state: HashMap::new(),
        bulk: VecDeque::new(),
        intra: HashMap::new(),
        unfenced_writes: HashMap::new(),
        unfenced_reads: HashMap::new(),
        bar_off: HashMap::new(),
        free_pass: HashMap::new(),
        hold_reported: HashSet::new(),
        acc_unwaited: HashMap::new(),
    };
    for ev in &trace.events {
        st.event(&ev.kind, ev.stmt);
        let pending = st.wg_pending.len().max(st.cp_pending.len()).max(st.bulk.len());
        if pending > MAX_PENDING_GROUPS {
            let d = Diagnostic::error(
                code::SIM_LIMIT,
                format!("role `{}` has more than {MAX_PENDING_GROUPS} asynchronous groups pending (commits no wait retires); the role-local analysis stops", st.rname()),
                st.span(ev.stmt),
                "the protocol analysis stops here",
            )
            .with_severity(Severity::CoverageLimit)
            .with_help("wait for committed groups in the loop that commits them (`wgmma_wait`, `cp_async_wait`, `tma_store_wait`)");
            st.cov.push(d);
            st.stopped = true;
        }
        if st.stopped {
            break;
        }
    }
}

impl St<'_, '_> {
    fn m(&self) -> &Module {
        self.model.m
    }
    fn rname(&self) -> String {
        self.model.role_name(self.role).to_string()
    }
    fn span(&self, s: Handle<Stmt>) -> crate::span::Span {
        self.model.stmt_span(s)
    }
    /// Move a finding's primary span onto the parity argument of the wait at `w` (the initial
    /// phase is what is wrong), when the wait names one.
    fn at_parity(&self, mut d: Diagnostic, w: Handle<Stmt>) -> Diagnostic {
        if let Some(span) = self.model.arg_span(w, "parity") {
            d.primary.span = span;
        }
        d
    }

    fn err(&mut self, code: &str, msg: String, at: Handle<Stmt>, label: &str) -> Diagnostic {
        let _ = code;
        Diagnostic::error(code, msg, self.span(at), label)
    }

    fn event(&mut self, k: &Ek, h: Handle<Stmt>) {
        match k {
            Ek::Acquire { p, stage, .. } => {
                self.prod_cur.insert(*p, *stage);
                self.mbarrier_arrive();
            }
            Ek::PWait { p, stage, .. } => {
                self.held.entry(*p).or_default().push_back((*stage, h));
                self.released.remove(&(*p, *stage));
            }
            Ek::Release { p, stage } => self.release(*p, *stage, h),
            Ek::Arrive { .. } => self.mbarrier_arrive(),
            Ek::BWait { obj, parity, k, .. } => self.bwait(*obj, *parity, *k, h),
            Ek::Tma { dst, credit, .. } => self.tma(*dst, *credit, h),
            Ek::Access { buf, write, kind, .. } => self.access(*buf, *write, *kind, h),
            Ek::FragUse { local, .. } => self.frag_use(*local, h),
            Ek::WgmmaIssue { acc } => {
                if let Some(l) = acc {
                    self.wg_open.accs.push((*l, h));
                }
            }
            Ek::WgmmaCommit => {
                let g = std::mem::take(&mut self.wg_open);
                self.wg_pending.push_back(g);
            }
            Ek::WgmmaWait(n) => {
                while self.wg_pending.len() > *n as usize {
                    self.wg_pending.pop_front();
                }
                for g in self.wg_pending.iter_mut() {
                    g.waited_past = Some((h, *n));
                }
            }
            Ek::CpCommit => {
                let g = std::mem::take(&mut self.cp_open);
                self.cp_pending.push_back(g);
            }
            Ek::CpWait(n) => {
                while self.cp_pending.len() > *n as usize {
                    if let Some(g) = self.cp_pending.pop_front() {
                        for (key, w) in g {
                            if let Some(CpState::Pending(_)) = self.cp_state.get(&key) {
                                self.cp_state.insert(key, CpState::Waited(w, h));
                            }
                        }
                    }
                }
            }
            Ek::BulkWait(n) => {
                while self.bulk.len() > *n as usize {
                    self.bulk.pop_front();
                }
            }
            Ek::Fence => {
                self.unfenced_writes.clear();
                self.unfenced_reads.clear();
            }
            Ek::Sync | Ek::ClusterSync | Ek::SyncRole => {
                self.intra.clear();
                self.cp_state.retain(|_, s| matches!(s, CpState::Pending(_)));
            }
        }
    }

    fn mbarrier_arrive(&mut self) {}

    fn release(&mut self, p: Handle<PipelineDecl>, stage: Option<u32>, h: Handle<Stmt>) {
        let pname = self.model.pipe_name(p).to_string();
        let Some(s) = stage else {
            let d = self
                .err(
                    code::RELEASE_UNHELD,
                    format!("role `{}` releases a stage of pipeline `{pname}` it does not hold: every stage it waited for is already released", self.rname()),
                    h,
                    "nothing to release",
                )
                .with_secondary(self.model.pipe_span(p), format!("pipeline `{pname}` declared here"))
                .with_help("release exactly once per `wait`, after the last read of the stage");
            self.out.push(d);
            return;
        };
        if let Some(q) = self.held.get_mut(&p) {
            q.pop_front();
        }
        self.released.insert((p, s), h);
        // A wgmma still reading the stage (uncommitted, or committed and not waited).
        let bound: Vec<BufKey> = self.bound_keys(p, s);
        let mut culprit: Option<(Handle<Stmt>, bool)> = None;
        for (key, st) in self.wg_open.reads.iter() {
            if bound.contains(key) {
                culprit = Some((*st, false));
                break;
            }
        }
        if culprit.is_none() {
            for g in self.wg_pending.iter() {
                if let Some((_, st)) = g.reads.iter().find(|(k, _)| bound.contains(k)) {
                    culprit = Some((*st, true));
                    break;
                }
            }
        }
        if let Some((rd, committed)) = culprit {
            let what = if committed { "its commit group is still pending (no `wgmma_wait` covers it yet)" } else { "it is not even committed yet" };
            let d = self
                .err(
                    code::RELEASE_BEFORE_READ,
                    format!(
                        "role `{}` releases stage {s} of pipeline `{pname}` while a wgmma still reads it: {what}; the producer may overwrite the operands in flight",
                        self.rname()
                    ),
                    h,
                    "released too early",
                )
                .with_secondary(self.span(rd), "this wgmma reads the stage asynchronously")
                .with_secondary(self.model.pipe_span(p), format!("pipeline `{pname}` declared here"))
                .with_help("release after a `wgmma_wait(n)` that covers the group (n = 0, or n = 1 when releasing the previous stage)");
            self.out.push(d);
        }
        // A TMA store still reading the stage.
        for g in self.bulk.iter() {
            if let Some((_, st)) = g.iter().find(|(k, _)| bound.contains(k)) {
                let st = *st;
                let d = self
                    .err(
                        code::RELEASE_BEFORE_READ,
                        format!("role `{}` releases stage {s} of pipeline `{pname}` while a TMA store still reads it", self.rname()),
                        h,
                        "released too early",
                    )
                    .with_secondary(self.span(st), "this tma_store reads the stage asynchronously")
                    .with_help("call `tma_store_wait(0)` before the release");
                self.out.push(d);
                break;
            }
        }
    }

    /// Buffer stages a pipeline's stage `s` covers.
    fn bound_keys(&self, p: Handle<PipelineDecl>, s: u32) -> Vec<BufKey> {
        let mut v = Vec::new();
        for (smem, ps) in self.model.bound.iter() {
            if ps.contains(&p) {
                if self.m().smem[*smem].stages > 1 {
                    v.push((*smem, s));
                } else {
                    v.extend((0..self.model.slots(*smem)).map(|k| (*smem, k)));
                }
            }
        }
        v
    }

    fn bwait(&mut self, obj: usize, parity: u8, k: u32, h: Handle<Stmt>) {
        if k == 0 {
            let off = if parity == 1 { -1 } else { 0 };
            self.bar_off.insert(obj, off);
            if parity == 1 {
                self.free_pass.insert(obj, h);
            }
            return;
        }
        self.free_pass.remove(&obj);
        let off = *self.bar_off.get(&obj).unwrap_or(&0);
        let phase = i64::from(k) + off;
        let expected = (phase & 1) as u8;
        if parity != expected {
            let name = self.model.obj_name(obj);
            let d = self
                .err(
                    code::PHASE_DESYNC,
                    format!(
                        "wait number {} of role `{}` on {name} uses parity {parity}, but its waits so far track phase {phase}, whose parity is {expected}: the waiter's phase has drifted from the barrier's",
                        k + 1,
                        self.rname()
                    ),
                    h,
                    "parity out of step",
                )
                .with_secondary(self.model.obj_decl_span(obj), "barrier declared here")
                .with_note("each wait on a barrier stage waits for the next phase; parity = phase mod 2. A parity derived from a loop counter that restarts (per tile) or skips (a conditional wait) goes out of step, and the waiter passes on a stale phase or hangs")
                .with_help("use `wait(b)`, which derives the parity from the role's own wait counter");
            self.out.push_about(d, self.model.subject(obj));
        }
    }

    fn tma(&mut self, dst: Option<BufSel>, credit: Credit, h: Handle<Stmt>) {
        // A TMA into a pipeline before the producer's first acquire. (A stage other than the
        // acquired one, or a buffer with fewer stages than the pipeline, is reported by the rules
        // V306 / V401: the index is not `P.stage`.)
        if let Some((p, None)) = credit.filter_pipe(&self.hold_reported) {
            let pname = self.model.pipe_name(p).to_string();
            let d = self
                .err(
                    code::WRITE_BEFORE_ACQUIRE,
                    format!("role `{}` loads into pipeline `{pname}` before its first `acquire({pname})`: no stage is held, so the copy may overwrite a stage the consumer is reading", self.rname()),
                    h,
                    "no stage acquired",
                )
                .with_secondary(self.model.pipe_span(p), format!("pipeline `{pname}` declared here"))
                .with_help(format!("call `acquire({pname})` first; it waits until the consumer released the stage"));
            self.out.push(d);
            self.hold_reported.insert(p);
        }
        let Some(dst) = dst else { return };
        for key in dst.keys(self.model) {
            self.write_hazards(key, h, true);
            if let Some(r) = self.unfenced_reads.get(&key).copied() {
                if !self.model.bound.contains_key(&key.0) {
                    let d = self
                        .err(
                            code::MISSING_PROXY_FENCE,
                            format!(
                                "the TMA (async proxy) overwrites {} after role `{}` read it with generic loads, with no `fence_proxy_async()` between",
                                self.model.buf_name(key),
                                self.rname()
                            ),
                            h,
                            "async write after generic read",
                        )
                        .with_secondary(self.span(r), "generic read here")
                        .with_help("call `fence_proxy_async()` after the last generic read and before the TMA that overwrites the buffer");
                    self.out.push(d);
                }
            }
        }
    }

    /// Writes by this role against its own in-flight async reads.
    fn write_hazards(&mut self, key: BufKey, h: Handle<Stmt>, _async_write: bool) {
        let inflight = self
            .wg_open
            .reads
            .iter()
            .chain(self.wg_pending.iter().flat_map(|g| g.reads.iter()))
            .find(|(k, _)| *k == key)
            .map(|(_, s)| (*s, "a wgmma"))
            .or_else(|| self.bulk.iter().flat_map(|g| g.iter()).find(|(k, _)| *k == key).map(|(_, s)| (*s, "a TMA store")));
        if let Some((rd, what)) = inflight {
            let d = self
                .err(
                    code::OVERWRITE_IN_USE,
                    format!("role `{}` overwrites {} while {what} issued earlier still reads it asynchronously", self.rname(), self.model.buf_name(key)),
                    h,
                    "overwrites data in flight",
                )
                .with_secondary(self.span(rd), format!("{what} reads it here"))
                .with_help(if what == "a wgmma" { "wait with `wgmma_wait(0)` first" } else { "wait with `tma_store_wait(0)` first" });
            self.out.push(d);
        }
    }

    fn access(&mut self, buf: BufSel, write: bool, kind: AccKind, h: Handle<Stmt>) {
        let keys = buf.keys(self.model);
        for key in keys {
            self.pipeline_hold(key, write, kind, buf.by_pipe_stage, h);
            self.free_pass_read(key, write, h);
            match (write, kind) {
                (false, AccKind::Wgmma) | (false, AccKind::BulkStore) => {
                    if let Some(w) = self.unfenced_writes.get(&key).copied() {
                        let d = self
                            .err(
                                code::MISSING_PROXY_FENCE,
                                format!(
                                    "{} reads {} through the async proxy after role `{}` wrote it with generic stores, with no `fence_proxy_async()` between",
                                    if kind == AccKind::Wgmma { "this wgmma" } else { "this TMA store" },
                                    self.model.buf_name(key),
                                    self.rname()
                                ),
                                h,
                                "async read of generic writes",
                            )
                            .with_secondary(self.span(w), "generic write here")
                            .with_help("after the generic writes: `fence_proxy_async()` in the writing threads, then `sync_role(...)`, then the async read");
                        self.out.push(d);
                    }
                    {
                        if let Some(w) = self.intra.get(&key).and_then(|i| i.write_for(buf.private)) {
                            let d = self
                                .err(
                                    code::READ_BEFORE_WAIT,
                                    format!("{} reads {} written by other threads of role `{}` with no role barrier between", if kind == AccKind::Wgmma { "this wgmma" } else { "this TMA store" }, self.model.buf_name(key), self.rname()),
                                    h,
                                    "not ordered after the writes",
                                )
                                .with_secondary(self.span(w), "written here")
                                .with_help("insert `sync_role(ROLE)` (after `fence_proxy_async()`) between the writes and the read");
                            self.out.push(d);
                        }
                    }
                    if kind == AccKind::Wgmma {
                        self.wg_open.reads.push((key, h));
                    } else {
                        self.bulk.push_back(vec![(key, h)]);
                    }
                }
                (false, _) => {
                    match self.cp_state.get(&key).copied() {
                        Some(CpState::Pending(w)) => {
                            let d = self
                                .err(
                                    code::READ_BEFORE_WAIT,
                                    format!("role `{}` reads {} before a `cp_async_wait` covers the cp.async that fills it", self.rname(), self.model.buf_name(key)),
                                    h,
                                    "copy may still be in flight",
                                )
                                .with_secondary(self.span(w), "the cp.async that writes it")
                                .with_help("`cp_async_commit()` the copy, then `cp_async_wait(n)` with n small enough to cover its group, then `sync()`");
                            self.out.push(d);
                        }
                        Some(CpState::Waited(w, wt)) => {
                            let d = self
                                .err(
                                    code::READ_BEFORE_WAIT,
                                    format!(
                                        "role `{}` reads {} after `cp_async_wait` but without a barrier: the wait covers each thread's own copies, not the other threads'",
                                        self.rname(),
                                        self.model.buf_name(key)
                                    ),
                                    h,
                                    "other threads' copies not visible",
                                )
                                .with_secondary(self.span(wt), "waits for this thread's copies only")
                                .with_secondary(self.span(w), "the cp.async spread over the role's threads")
                                .with_help("`sync()` (or `sync_role(...)`) between `cp_async_wait` and the read");
                            self.out.push(d);
                        }
                        _ => {}
                    }
                    {
                        if let Some(w) = self.intra.get(&key).and_then(|i| i.write_for(buf.private)) {
                            let d = self
                                .err(
                                    code::READ_BEFORE_WAIT,
                                    format!("role `{}` reads {} written by other threads of the role with no barrier between", self.rname(), self.model.buf_name(key)),
                                    h,
                                    "not ordered after the writes",
                                )
                                .with_secondary(self.span(w), "written here")
                                .with_help("insert `sync_role(ROLE)` or `sync()` between the writes and the reads");
                            self.out.push(d);
                        }
                        let e = self.intra.entry(key).or_default();
                        if buf.private {
                            e.read_private = Some(h);
                        } else {
                            e.read_shared = Some(h);
                        }
                    }
                    self.unfenced_reads.insert(key, h);
                }
                (true, _) => {
                    self.write_hazards(key, h, kind == AccKind::CpAsync);
                    // cp.async spreads the copy over all of the role's threads.
                    let private = buf.private && kind != AccKind::CpAsync;
                    {
                        if let Some(r) = self.intra.get(&key).and_then(|i| i.read_for(private)) {
                            let d = self
                                .err(
                                    code::OVERWRITE_IN_USE,
                                    format!("role `{}` overwrites {} that other threads of the role may still be reading: no barrier since their read", self.rname(), self.model.buf_name(key)),
                                    h,
                                    "overwrites data other threads read",
                                )
                                .with_secondary(self.span(r), "read here")
                                .with_help("insert `sync()` (or `sync_role(...)`) between the last read and the overwrite");
                            self.out.push(d);
                        }
                    }
                    if kind == AccKind::CpAsync {
                        self.cp_open.push((key, h));
                        self.cp_state.insert(key, CpState::Pending(h));
                    } else {
                        self.cp_state.remove(&key);
                        let e = self.intra.entry(key).or_default();
                        if private {
                            e.write_private = Some(h);
                        } else {
                            e.write_shared = Some(h);
                        }
                    }
                    self.unfenced_writes.insert(key, h);
                }
            }
        }
    }

    /// A read of a buffer that a barrier this role passed for free (initial parity 1) fills.
    fn free_pass_read(&mut self, key: BufKey, write: bool, h: Handle<Stmt>) {
        if write {
            return;
        }
        let hit: Option<(usize, Handle<Stmt>)> =
            self.free_pass.iter().find(|(obj, _)| self.feeds.get(obj).is_some_and(|s| s.contains(&key))).map(|(o, s)| (*o, *s));
        if let Some((obj, w)) = hit {
            self.free_pass.remove(&obj);
            let name = self.model.obj_name(obj);
            let d = self
                .err(
                    code::INITIAL_PARITY,
                    format!(
                        "role `{}`'s first wait on {name} uses parity 1, which a barrier that has not completed any phase satisfies at once, and then reads {}, which TMA loads completing on {name} fill: it reads before the data arrives",
                        self.rname(),
                        self.model.buf_name(key)
                    ),
                    w,
                    "parity 1 passes before phase 0 completes",
                )
                .with_secondary(self.span(w), "the first wait passes at once")
                .with_secondary(self.span(h), "reads the buffer here")
                .with_secondary(self.model.obj_decl_span(obj), "barrier declared here")
                .with_note("consumers of a full barrier wait for phase 0 with parity 0; only a producer waiting on an empty barrier starts at parity 1")
                .with_help("start this role's waits at parity 0 (`wait(b)` derives it)");
            let d = self.at_parity(d, w);
            self.out.push_about(d, self.model.subject(obj));
        }
    }

    fn pipeline_hold(&mut self, key: BufKey, write: bool, kind: AccKind, by_pipe_stage: bool, h: Handle<Stmt>) {
        let Some(pipes) = self.model.bound.get(&key.0).cloned() else { return };
        let Some(p) = pipes.first().copied() else { return };
        if self.hold_reported.contains(&p) {
            return;
        }
        let before = self.out_len();
        self.pipeline_hold_inner(p, key, write, kind, by_pipe_stage, h);
        if self.out_len() != before {
            self.hold_reported.insert(p);
        }
    }

    fn out_len(&self) -> usize {
        self.out.len()
    }

    fn pipeline_hold_inner(&mut self, p: Handle<PipelineDecl>, key: BufKey, write: bool, kind: AccKind, by_pipe_stage: bool, h: Handle<Stmt>) {
        let d = &self.m().pipelines[p];
        let (producer, consumer) = (d.producer, d.consumer);
        let pname = d.name.clone();
        let staged = self.m().smem[key.0].stages > 1;
        let bname = self.model.buf_name(key);
        let role = self.rname();
        let pspan = self.model.pipe_span(p);
        if self.role == producer {
            if write && by_pipe_stage {
                // Rule V311 reports writes into `P.stage` that are not TMA loads.
                return;
            }
            if write {
                let d = self
                    .err(
                        code::UNTRACKED_WRITE,
                        format!(
                            "role `{role}` writes {bname}, a stage of pipeline `{pname}`, with {}: only `tma_load(..., {pname})` completes on the stage's full barrier, so the consumer's `wait({pname})` does not cover this write",
                            if kind == AccKind::CpAsync { "cp.async" } else { "a generic store" }
                        ),
                        h,
                        "write not tracked by the pipeline",
                    )
                    .with_secondary(pspan, format!("pipeline `{pname}` declared here"))
                    .with_help(format!("fill pipeline stages with `tma_load(dst, src, {pname})`"));
                self.out.push(d);
            } else {
                let cur = self.prod_cur.get(&p).copied();
                let ok = match cur {
                    Some(c) => !staged || c == key.1,
                    None => false,
                };
                if !ok {
                    let d = self
                        .err(code::READ_BEFORE_WAIT, format!("role `{role}` reads {bname}, a stage of pipeline `{pname}` it has not acquired"), h, "stage not held")
                        .with_secondary(pspan, format!("pipeline `{pname}` declared here"));
                    self.out.push(d);
                }
            }
            return;
        }
        if self.role == consumer {
            let held = self.held.get(&p);
            let holds = match held {
                Some(q) => {
                    if staged {
                        q.iter().any(|(s, _)| *s == key.1)
                    } else {
                        !q.is_empty()
                    }
                }
                None => false,
            };
            if holds {
                return;
            }
            if write {
                let d = self
                    .err(
                        code::OVERWRITE_IN_USE,
                        format!("role `{role}` writes {bname}, a stage of pipeline `{pname}` it does not hold: the producer may be filling it"),
                        h,
                        "writes a stage not held",
                    )
                    .with_secondary(pspan, format!("pipeline `{pname}` declared here"))
                    .with_help(format!("write a stage only between `wait({pname})` and `release({pname})`"));
                self.out.push(d);
                return;
            }
            let rel_stage = if staged { key.1 } else { 0 };
            let released = self.released.get(&(p, rel_stage)).copied().or_else(|| {
                if staged {
                    None
                } else {
                    self.released.iter().find(|((pp, _), _)| *pp == p).map(|(_, s)| *s)
                }
            });
            if let Some(rel) = released {
                let d = self
                    .err(
                        code::RELEASE_BEFORE_READ,
                        format!("role `{role}` releases {bname} (pipeline `{pname}`) before its last read of it: the producer may already be overwriting it"),
                        rel,
                        "released too early",
                    )
                    .with_secondary(self.span(h), "the stage is still read here")
                    .with_secondary(pspan, format!("pipeline `{pname}` declared here"))
                    .with_help(format!("move `release({pname})` after the last read of the stage"));
                self.out.push(d);
            } else {
                let prod = self.model.role_name(producer).to_string();
                let d = self
                    .err(
                        code::READ_BEFORE_WAIT,
                        format!("role `{role}` reads {bname} before `wait({pname})` hands it that stage: the TMA of `{prod}` may not have filled it yet"),
                        h,
                        "read before the stage is full",
                    )
                    .with_secondary(pspan, format!("pipeline `{pname}` declared here"))
                    .with_secondary(self.model.role_span(producer), format!("`{prod}` fills it"))
                    .with_help(format!("call `wait({pname})` before reading the stage (and index it with `{pname}.stage`)"));
                self.out.push(d);
            }
            return;
        }
        // A role outside the pipeline.
        let (code, what) = if write { (code::OVERWRITE_IN_USE, "writes") } else { (code::READ_BEFORE_WAIT, "reads") };
        let d = self
            .err(code, format!("role `{role}` {what} {bname}, a stage of pipeline `{pname}`, but takes no part in the pipeline: nothing orders it against the hand-off"), h, "outside the pipeline")
            .with_secondary(pspan, format!("pipeline `{pname}` declared here"));
        self.out.push(d);
    }

    fn frag_use(&mut self, local: Handle<Local>, h: Handle<Stmt>) {
        let name = self.m().locals[local].name.clone();
        if let Some((_, issue)) = self.wg_open.accs.iter().find(|(l, _)| *l == local).copied() {
            let d = self
                .err(
                    code::ACC_BEFORE_WAIT,
                    format!("role `{}` uses accumulator `{name}` while a wgmma writing it is not even committed: its registers are undefined until `wgmma_commit()` and a covering `wgmma_wait`", self.rname()),
                    h,
                    "accumulator still being written",
                )
                .with_secondary(self.span(issue), "asynchronous wgmma into it")
                .with_help("`wgmma_commit()` then `wgmma_wait(0)` before touching the accumulator");
            self.out.push(d);
            return;
        }
        let found = self.wg_pending.iter().rev().find_map(|g| g.accs.iter().find(|(l, _)| *l == local).map(|(_, s)| (*s, g.waited_past)));
        if let Some((issue, waited)) = found {
            match waited {
                Some((w, n)) => {
                    let d = self
                        .err(
                            code::WGMMA_WAIT_SHALLOW,
                            format!("`wgmma_wait({n})` leaves up to {n} commit group(s) pending, including the one that writes `{name}`, which role `{}` uses next", self.rname()),
                            w,
                            "does not cover the group",
                        )
                        .with_secondary(self.span(h), format!("`{name}` is used here"))
                        .with_secondary(self.span(issue), "the wgmma that writes it")
                        .with_help(format!("wait with a smaller n (`wgmma_wait(0)` drains everything) before using `{name}`"));
                    self.out.push(d);
                }
                None => {
                    let mut d = self
                        .err(
                            code::ACC_BEFORE_WAIT,
                            format!("role `{}` uses accumulator `{name}` before a `wgmma_wait` covers the wgmma that writes it: its registers are undefined until then", self.rname()),
                            h,
                            "read while the wgmma may still write it",
                        )
                        .with_secondary(self.span(h), format!("`{name}` is read in this statement"))
                        .with_secondary(self.span(issue), format!("asynchronous wgmma into `{name}`"))
                        .with_help("`wgmma_wait(0)` after the `wgmma_commit()` and before this use");
                    d.primary.span = self.model.local_use_span(h, local);
                    // Later uses before the same missing wait are the same mistake.
                    match self.acc_unwaited.get(&(local, issue)) {
                        Some(first) => {
                            let d = d.following(first);
                            self.out.push(d);
                        }
                        None => {
                            self.acc_unwaited.insert((local, issue), d.clone());
                            self.out.push(d);
                        }
                    }
                }
            }
        }
    }
}

#[allow(dead_code)]
fn is_bar(model: &Model, obj: usize) -> bool {
    matches!(model.objs.get(obj), Some(SyncObj::Bar(..)))
}

trait FilterPipe {
    fn filter_pipe(self, reported: &HashSet<Handle<PipelineDecl>>) -> Option<(Handle<PipelineDecl>, Option<u32>)>;
}

impl FilterPipe for Credit {
    fn filter_pipe(self, reported: &HashSet<Handle<PipelineDecl>>) -> Option<(Handle<PipelineDecl>, Option<u32>)> {
        match self {
            Credit::Pipe { p, stage } if !reported.contains(&p) => Some((p, stage)),
            _ => None,
        }
    }
}
