//! Combining the per-role work into a predicted time (see the module docs of `cost`).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};

use crate::ir::*;
use crate::layout::KernelLayout;
use crate::target::TargetInfo;

use super::calibration::{Calibration, P};
use super::walk::{self, Ctx, Issue, Read, RoleWork, Work};
use super::*;

/// A time split by what it is spent on, ns.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Split {
    pub(super) tensor: f64,
    pub(super) memory: f64,
    pub(super) epilogue: f64,
    pub(super) sync: f64,
}

impl Split {
    fn memory(x: f64) -> Split {
        Split { memory: x, ..Split::default() }
    }
    fn sync(x: f64) -> Split {
        Split { sync: x, ..Split::default() }
    }
    pub(super) fn total(self) -> f64 {
        self.tensor + self.memory + self.epilogue + self.sync
    }
    fn scale(self, f: f64) -> Split {
        Split { tensor: self.tensor * f, memory: self.memory * f, epilogue: self.epilogue * f, sync: self.sync * f }
    }
    fn add(self, o: Split) -> Split {
        Split {
            tensor: self.tensor + o.tensor,
            memory: self.memory + o.memory,
            epilogue: self.epilogue + o.epilogue,
            sync: self.sync + o.sync,
        }
    }
}

/// The first of the largest (ties keep the earlier: resources are listed before paths).
fn max_split(items: impl IntoIterator<Item = Split>) -> Split {
    items.into_iter().fold(None, |best: Option<Split>, s| match best {
        Some(b) if b.total() >= s.total() => Some(b),
        _ => Some(s),
    })
    .unwrap_or_default()
}

/// The reuse analysis of one global operand (a tensor read through windows that depend on one
/// set of tile axes).
#[derive(Clone, Debug)]
pub(super) struct Operand {
    pub(super) tensor: usize,
    mask: u32,
    pub(super) readers: f64,
    miss: f64,
    /// Delivery rate to one SM, bytes per ns.
    bw_sm: f64,
    pub(super) requested: f64,
    pub(super) dram: f64,
}

struct Model<'a, 'c> {
    ctx: &'c Ctx<'a>,
    operands: Vec<Operand>,
    dram_sm: f64,
    l2_sm: f64,
    ingest: f64,
    /// Tiles resident on the GPU at once, on average over the kernel (all tiles over the rounds
    /// the busiest block slot runs): whose element-loop bytes each DRAM round trip queues behind.
    resident_tiles: f64,
    /// Tiles of the mean SM over those of the busiest (the occupancy's tail efficiency): the
    /// busiest SM's last tiles run while the others are done, so the DRAM and the L2, shared by
    /// all SMs, carry only the mean SM's share of the kernel's bytes.
    tail: f64,
}

impl Model<'_, '_> {
    fn p(&self, p: P) -> f64 {
        self.ctx.p(p)
    }

    fn operand(&self, r: &Read) -> Option<&Operand> {
        self.operands.iter().find(|o| o.tensor == r.tensor && o.mask == r.mask)
    }

    /// (memory time, L2 time, DRAM time, ingest time) of a piece of work on one SM, ns.
    fn mem(&self, w: &Work) -> (f64, f64, f64, f64) {
        let mut l2 = w.write_l2_bytes / self.l2_sm;
        let mut dram = w.write_bytes / self.dram_sm;
        let mut bytes = 0.0;
        for r in &w.reads {
            bytes += r.bytes;
            match self.operand(r) {
                Some(o) => {
                    l2 += r.bytes / o.bw_sm;
                    dram += r.bytes * o.miss / self.dram_sm;
                }
                None => {
                    l2 += r.bytes / self.l2_sm;
                    dram += r.bytes / self.dram_sm;
                }
            }
        }
        let ingest = bytes / self.ingest;
        (l2.max(dram).max(ingest), l2, dram, ingest)
    }

    /// Memory time over the kernel, per tile of the busiest SM, of a tile's [`Model::mem`]: the
    /// shared DRAM and L2 serve the mean SM's bytes ([`Model::tail`]), the SM's own ingest its own.
    fn kernel_mem(&self, (_, l2, dram, ingest): (f64, f64, f64, f64)) -> f64 {
        (l2.max(dram) * self.tail).max(ingest)
    }

    /// Byte-weighted miss ratio of some reads.
    fn miss(&self, reads: &[Read]) -> f64 {
        let total: f64 = reads.iter().map(|r| r.bytes).sum();
        if total <= 0.0 {
            return 1.0;
        }
        reads.iter().map(|r| r.bytes * self.operand(r).map_or(1.0, |o| o.miss)).sum::<f64>() / total
    }

    /// Issue time of a piece of work on one SM (all its thread-level operations), ns, split by unit.
    fn issue(&self, w: &Work) -> [f64; 4] {
        [
            w.alu / (self.p(P::AluElemsPerSPerSm) * 1e-9),
            w.sfu / (self.p(P::SfuElemsPerSPerSm) * 1e-9),
            w.shfl / (self.p(P::ShflElemsPerSPerSm) * 1e-9),
            w.lsu / (self.p(P::LsuElemsPerSPerSm) * 1e-9),
        ]
    }

    fn epi(&self, w: &Work) -> f64 {
        self.issue(w).iter().sum()
    }

    /// The SM's tensor cores and its thread-level issue work side by side: they overlap only in
    /// part (`tensor_issue_overlap` of the shorter), as the MMAs' accumulator traffic shares the
    /// register-file ports with the ALU work. A kernel with only one of the two is its max.
    fn tensor_and_issue(&self, tensor: f64, issue: f64) -> Split {
        let overlap = self.p(P::TensorIssueOverlap) * tensor.min(issue);
        let (t, e) = if tensor >= issue { (tensor, issue - overlap) } else { (tensor - overlap, issue) };
        Split { tensor: t, epilogue: e, ..Split::default() }
    }

    /// One group's time for a piece of thread-level issue work: a dependent chain takes the
    /// longer of its issue time and its latency.
    ///
    /// `units` is the group's warps per scheduler (threads / 128; below 1, the share of the SM's
    /// four schedulers it occupies, one warp each). Its ALU work issues at most at what its
    /// schedulers dispatch (`issue_slots_per_s_per_sm`, all pipes together: mixed
    /// compare/select/integer work is not held to the FFMA pipe's `alu_elems_per_s_per_sm`). A
    /// lone warp reaches `single_warp_issue_efficiency` of that on dependent work; more warps on a
    /// scheduler fill each other's gaps, up to the scheduler's rate and never past it: a
    /// two-warpgroup role shares the SM's issue, it does not double it (bench `argmin`, two
    /// warpgroups of 64 rows, against `argmin-1wg`, one).
    fn issue_path(&self, w: &Issue, units: f64) -> f64 {
        let rate = |p: P| self.p(p) * 1e-9;
        let dispatch = (self.p(P::IssueSlotsPerSPerSm) / self.p(P::AluElemsPerSPerSm)).max(1.0);
        let unit_share = units.min(1.0);
        let alu_share = dispatch * (units * self.p(P::SingleWarpIssueEfficiency)).min(unit_share);
        let alu_rate = rate(P::AluElemsPerSPerSm) * alu_share;
        let other = (w.alu - w.chain_alu).max(0.0) / alu_rate;
        let chain = (w.chain_alu / alu_rate).max(w.chain_ns);
        other + (w.sfu / rate(P::SfuElemsPerSPerSm) + w.shfl / rate(P::ShflElemsPerSPerSm) + w.lsu / rate(P::LsuElemsPerSPerSm)) / unit_share + chain
    }

    /// Warps per scheduler of a group of `role` (below 1: its share of the SM's schedulers).
    fn units(role: &RoleDecl) -> f64 {
        (f64::from(role.threads()) / 128.0).max(1.0 / 32.0)
    }

    /// One group's issue time for the part of a piece of work it does not issue while its own
    /// MMAs run (between a `wgmma_wait` and its next MMAs).
    fn exposed_issue(&self, w: &Work, role: &RoleDecl) -> f64 {
        let units = Self::units(role);
        (self.issue_path(&Issue::of(w), units) - self.issue_path(&w.under_mma, units)).max(0.0)
    }

    /// One group's own serial path through a piece of work.
    fn own(&self, w: &Work, role: &RoleDecl) -> Split {
        let units = Self::units(role);
        let epilogue = self.issue_path(&Issue::of(w), units);
        // Work issued while the group's own MMAs run hides behind them, up to their time and
        // as far as the two share the warps' issue slots and register-file ports.
        let hidden = self.p(P::TensorIssueOverlap) * self.issue_path(&w.under_mma, units).min(w.tensor_own_ns).min(epilogue);
        let trips = self.row_trip_latency_ns(w);
        let (epilogue, sync) = (epilogue - hidden, w.latency_ns + trips + w.sync_ns + w.issue_ns);
        let other = w.tensor_own_ns + epilogue + sync - trips;
        Split { tensor: w.tensor_own_ns, memory: self.row_queue_ns(w, trips, other), epilogue, sync }
    }

    /// The element loops' DRAM round trips on one group's path: each waits the unloaded
    /// `row_trip_latency_ns` (latency, in `sync`).
    fn row_trip_latency_ns(&self, w: &Work) -> f64 {
        // Only a program with element loops reads (and reports using) the parameter.
        if w.row_trips > 0.0 { w.row_trips * self.p(P::RowTripLatencyNs) } else { 0.0 }
    }

    /// The time one group's DRAM round trips (`trips_ns` of unloaded latency on a path whose
    /// other work takes `other_ns`) also wait for the DRAM to move the bytes of the resident
    /// tiles' trips in flight with them (memory time on the path).
    ///
    /// A trip is a burst: it ends the latency after the last byte of every burst issued with it
    /// leaves the DRAM. If all of every resident tile's element-loop bytes were in flight at each
    /// trip (`queue`: their time at the DRAM bandwidth), the path would be `trips + other +
    /// queue`. But a tile is in a trip only for the fraction `f` of its path its trips take, so
    /// a trip waits for `f · queue`. With path `P = other + trips + f · queue` and
    /// `f = (trips + f · queue) / P` (self-consistent): `P² − P (other + trips + queue) + other
    /// · queue = 0`. Its larger root is `trips + queue` when the path is all trips (lockstep
    /// warps: latency and transfer add), `max(other, queue)` when it has none (computing warps
    /// hide each other's transfers), and in between a smooth knee.
    fn row_queue_ns(&self, w: &Work, trips_ns: f64, other_ns: f64) -> f64 {
        let queue = w.row_bytes * self.resident_tiles / (self.p(P::DramBytesPerS) * 1e-9);
        if queue <= 0.0 {
            return 0.0;
        }
        let b = other_ns + trips_ns + queue;
        let path = (b + (b * b - 4.0 * other_ns * queue).max(0.0).sqrt()) / 2.0;
        (path - other_ns - trips_ns).max(0.0)
    }

    /// TMA latency of a stage of `bytes` whose reads miss L2 with ratio `miss`, ns.
    fn tma_latency(&self, bytes: f64, miss: f64) -> f64 {
        miss * self.p(P::TmaLatencyDramNs) + (1.0 - miss) * self.p(P::TmaLatencyL2Ns) + bytes / self.ingest
    }
}

struct Occ {
    occupancy: Occupancy,
    tiles: f64,
    blocks_per_sm: f64,
    active: f64,
    smem: u64,
}

fn occupancy(ctx: &Ctx<'_>, target: &TargetInfo) -> Result<Occ, CostError> {
    let m = ctx.m;
    let sms = ctx.p(P::SmCount);
    let threads = ctx.layout.threads_per_block.max(32);
    let smem = ctx.layout.smem_bytes;
    let big = m.smem.iter().max_by_key(|(_, s)| s.total_bytes()).map(|(h, _)| m.smem.span(h).item);
    if smem > u64::from(target.smem_per_block_max) {
        return Err(CostError::DoesNotFit {
            reason: format!(
                "the block needs {smem} B of shared memory; `{}` allows {} B per block",
                target.name, target.smem_per_block_max
            ),
            span: big.unwrap_or_default(),
        });
    }
    let covered: u64 = m.roles.iter().map(|(_, r)| u64::from(r.threads())).sum();
    let needs_default = m.roles.iter().any(|(_, r)| r.regs.is_none()) || u64::from(threads) > covered;
    let default_regs = if needs_default { ctx.p(P::DefaultRegsPerThread) as u64 } else { 0 };
    // A role without `regs` holds at least its declared fragments and what ptxas adds to them
    // (gemm-sm80's 64×64-per-warp accumulators need 160 of their 229 registers: 2 blocks per SM,
    // not the 4 the default would allow).
    let role_regs = |h: Handle<RoleDecl>, r: &RoleDecl| -> u64 {
        r.regs.map_or_else(
            || {
                let frags: u64 = m.bodies.iter().filter(|(_, b)| b.role == h).map(|(_, b)| crate::layout::fragment_regs_per_thread(m, &b.block)).sum();
                let held = if frags > 0 { frags + ctx.p(P::FragmentRegOverhead) as u64 } else { 0 };
                default_regs.max(held)
            },
            u64::from,
        )
    };
    let regs: u64 = m.roles.iter().map(|(h, r)| u64::from(r.threads()) * role_regs(h, r)).sum::<u64>()
        + u64::from(threads).saturating_sub(covered) * default_regs;
    let reserved = u64::from(target.smem_per_sm.saturating_sub(target.smem_per_block_max));
    let limits = [
        ("shared memory", u64::from(target.smem_per_sm) / (smem + reserved).max(1)),
        ("registers", u64::from(target.regs_per_sm) / regs.max(1)),
        ("threads", u64::from(target.max_threads_per_sm) / u64::from(threads)),
        ("block limit", 32),
    ];
    let (limited_by, bps) = limits.iter().copied().min_by_key(|&(_, n)| n).expect("non-empty");
    if bps == 0 {
        return Err(CostError::DoesNotFit {
            reason: format!("one block needs more {limited_by} than an SM of `{}` has", target.name),
            span: m.roles.iter().next().map(|(h, _)| m.roles.span(h).item).unwrap_or_default(),
        });
    }
    let (tiles, persistent) = match m.grid.iter().next() {
        Some((h, g)) => {
            let mut t: f64 = 1.0;
            for (i, &e) in ctx.tile_extents.iter().enumerate() {
                if e <= 0 {
                    return Err(CostError::DoesNotFit {
                        reason: format!("tile axis `{}` has extent {e} at these dims: the tile space is empty", g.axes[i].name),
                        span: m.grid.span(h).item,
                    });
                }
                t *= e as f64;
            }
            (t, g.persistent)
        }
        None => (1.0, false),
    };
    let bps_eff = if persistent { 1.0 } else { bps as f64 };
    let grid_blocks = if persistent { sms } else { tiles };
    let active = sms.min(tiles).max(1.0);
    // Tiles of the busiest block (persistent) or SM (one block per tile), and the mean.
    let (max_per, mean_per) = ((tiles / sms).ceil().max(1.0), tiles / active);
    Ok(Occ {
        occupancy: Occupancy {
            threads_per_block: threads,
            smem_bytes_per_block: smem,
            regs_per_block: regs,
            blocks_per_sm: bps_eff as u32,
            limited_by: if persistent { "persistent grid: one block per SM".into() } else { limited_by.into() },
            tiles: tiles as u64,
            persistent,
            grid_blocks: grid_blocks as u64,
            active_sms: active as u32,
            tiles_per_block_max: max_per as u64,
            tiles_per_block_mean: mean_per,
            waves: tiles / (sms * bps_eff),
            tail_efficiency: (mean_per / max_per).min(1.0),
        },
        tiles,
        blocks_per_sm: bps_eff,
        active,
        smem,
    })
}

/// Pairs of roles `(x, y)` that hand each other explicit barriers in both directions in one scope
/// (`works[i]`: role i's work there), with the ring depth of the pair.
///
/// When role X arrives on barrier `b1`, which role Y waits on, and Y arrives on `b2`, which X waits
/// on, neither can run more than `stages` phases ahead of the other: each of X's waits returns only
/// after Y's wait on X's earlier arrival has returned and Y has done its part. With one stage (a
/// ping-pong) the two roles' paths — each wait charged one hand-off — run one after the other, so
/// the pair takes path X + path Y; a ring of `stages` barrier phases overlaps that many, so
/// (path X + path Y) / stages (the analogue of a pipeline's round trip over its stages). The depth
/// is the smaller stage count of the two barriers; of several such barrier pairs, the tightest.
fn barrier_cycles(m: &Module, works: &[Work]) -> Vec<(usize, usize, f64)> {
    let barriers: Vec<f64> = m.barriers.iter().map(|(_, b)| f64::from(b.stages.max(1))).collect();
    let count = |w: &Work, b: usize| w.bars.get(b).cloned().unwrap_or_default();
    let mut out = Vec::new();
    for x in 0..works.len() {
        for y in x + 1..works.len() {
            let mut depth: Option<f64> = None;
            for b1 in 0..barriers.len() {
                for b2 in 0..barriers.len() {
                    if b1 == b2 {
                        continue;
                    }
                    let coupled = count(&works[x], b1).arrives > 0.0
                        && count(&works[y], b1).waits > 0.0
                        && count(&works[y], b2).arrives > 0.0
                        && count(&works[x], b2).waits > 0.0;
                    if coupled {
                        let d = barriers[b1].min(barriers[b2]);
                        depth = Some(depth.map_or(d, |x: f64| x.min(d)));
                    }
                }
            }
            if let Some(d) = depth {
                out.push((x, y, d));
            }
        }
    }
    out
}

/// Axis indices of linear tile `l`, walked as the lowering walks them: row-major (last axis
/// fastest), or with `group G` the last two axes `[.., r, c]` in bands of `G` values of `r`
/// (`r` fastest inside a band; the last band may be short), earlier axes slowest.
fn tile_coords(extents: &[i64], group: Option<u32>, l: u64, out: &mut Vec<u64>) {
    out.clear();
    let n = extents.len();
    let e: Vec<u64> = extents.iter().map(|&x| x.max(1) as u64).collect();
    let plain = if group.is_some() && n >= 2 { n - 2 } else { n };
    for k in 0..plain {
        // Saturating: a product past u64 (absurd shapes) must not wrap to a zero divisor.
        let div: u64 = e[k + 1..].iter().fold(1u64, |a, x| a.saturating_mul(*x));
        out.push(l / div.max(1) % e[k]);
    }
    if let (Some(gs), true) = (group, plain < n) {
        let (er, ec, gs) = (e[n - 2], e[n - 1], u64::from(gs.max(1)));
        let plane = l % er.saturating_mul(ec);
        let first = plane / (gs * ec) * gs;
        let rows = (er - first).min(gs).max(1);
        let inner = plane - first * ec;
        out.push(first + inner % rows);
        out.push(inner / rows);
    }
}

/// Distinct values of the tile-axis projection `mask` over the first `c` tiles of the walk.
fn distinct(extents: &[i64], group: Option<u32>, mask: u32, c: u64) -> f64 {
    if mask == 0 {
        return 1.0;
    }
    let c = c.min(1 << 16);
    let mut keys: Vec<u64> = Vec::with_capacity(c as usize);
    let mut coords = Vec::with_capacity(extents.len());
    for l in 0..c {
        tile_coords(extents, group, l, &mut coords);
        let mut key = 0u64;
        for (i, &idx) in coords.iter().enumerate() {
            if mask & (1 << i) != 0 {
                key = key.wrapping_mul(1 << 20).wrapping_add(idx);
            }
        }
        keys.push(key);
    }
    keys.sort_unstable();
    keys.dedup();
    keys.len() as f64
}

pub(super) fn run(
    m: &Module,
    layout: &KernelLayout,
    cal: &Calibration,
    target: &TargetInfo,
    dims: Vec<i64>,
    named: &BTreeMap<String, i64>,
) -> Result<Estimate, CostError> {
    let tile_extents: Vec<i64> = m.grid().map_or(Vec::new(), |g| g.axes.iter().map(|a| a.extent.eval(&dims).unwrap_or(0)).collect());
    let ctx = Ctx { m, layout, target, cal, dims, tile_extents, used: Cell::new(0), notes: RefCell::new(BTreeSet::new()) };
    let occ = occupancy(&ctx, target)?;
    let roles = walk::walk(&ctx);
    let sms = ctx.p(P::SmCount);

    // ---- reuse analysis over global operands ---------------------------------------------
    let per_tile = |w: &RoleWork| {
        let mut t = w.rest.clone();
        if let Some(ml) = &w.main {
            t.add_scaled(&ml.iter, ml.iters);
        }
        t
    };
    let mut tile_work = Work::default();
    for r in &roles {
        tile_work.add_scaled(&per_tile(r), 1.0);
        tile_work.add_scaled(&r.cta, 1.0 / occ.occupancy.tiles_per_block_mean.max(1.0));
    }
    let concurrent = occ.tiles.min(occ.active * occ.blocks_per_sm).max(1.0);
    let group = m.grid().and_then(|g| g.group);
    let cap = ctx.p(P::L2Bytes) * ctx.p(P::L2ReuseFraction);
    let (l2_bw, l2_shared_bw) = (ctx.p(P::L2BytesPerS), ctx.p(P::L2SharedBytesPerS));
    let ingest = ctx.p(P::SmIngestBytesPerS) * 1e-9;
    let mut ops: Vec<(Operand, f64)> = tile_work
        .reads
        .iter()
        .map(|r| {
            let d = distinct(&ctx.tile_extents, group, r.mask, concurrent as u64);
            let all: f64 = ctx
                .tile_extents
                .iter()
                .enumerate()
                .filter(|(i, _)| r.mask & (1 << i) != 0)
                .map(|(_, &e)| e.max(1) as f64)
                .product();
            let readers = (concurrent / d).max(1.0);
            let requested = r.bytes * occ.tiles;
            let unique = (all * r.bytes).min(requested);
            let t = ((readers - 1.0) / 3.0).clamp(0.0, 1.0);
            let bw_sm = ((l2_bw + (l2_shared_bw - l2_bw) * t) / occ.active * 1e-9).min(ingest);
            (Operand { tensor: r.tensor, mask: r.mask, readers, miss: 1.0, bw_sm, requested, dram: requested }, unique)
        })
        .collect();
    // Operands whose distinct windows fit in the usable L2 come from DRAM once (smallest first);
    // the others once per wave.
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by(|&a, &b| ops[a].1.total_cmp(&ops[b].1));
    let mut resident = 0.0;
    for i in order {
        let (o, unique) = &mut ops[i];
        o.dram = if resident + *unique <= cap {
            resident += *unique;
            *unique
        } else {
            unique.max(o.requested / o.readers)
        };
        o.miss = if o.requested > 0.0 { (o.dram / o.requested).min(1.0) } else { 1.0 };
    }
    let model = Model {
        ctx: &ctx,
        operands: ops.into_iter().map(|(o, _)| o).collect(),
        dram_sm: ctx.p(P::DramBytesPerS) / occ.active * 1e-9,
        l2_sm: (l2_bw / occ.active * 1e-9).min(ingest),
        ingest,
        resident_tiles: {
            let per_slot = occ.occupancy.tiles_per_block_max as f64;
            let rounds = if occ.occupancy.persistent { per_slot } else { (per_slot / occ.blocks_per_sm).ceil() };
            (occ.tiles / rounds.max(1.0)).max(1.0)
        },
        tail: occ.occupancy.tail_efficiency.clamp(0.0, 1.0),
    };

    // ---- main loops ----------------------------------------------------------------------
    let (handoff, issue, acquire) = if m.pipelines.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (ctx.p(P::MbarrierHandoffNs), ctx.p(P::TmaIssueNs), ctx.p(P::PipelineAcquireNs))
    };
    let role_of = |h: Handle<RoleDecl>| &m.roles[h];
    // Per role: the iteration split of its main loop on its own.
    let iter_split: Vec<Option<Split>> = roles
        .iter()
        .map(|r| {
            r.main.as_ref().map(|ml| {
                let it = &ml.iter;
                max_split([
                    model.tensor_and_issue(it.tensor_ns, model.epi(it)),
                    Split::memory(model.mem(it).0),
                    model.own(it, role_of(r.role)),
                ])
            })
        })
        .collect();
    // Roles coupled through a pipeline handed off in both main loops advance together.
    let n = roles.len();
    let mut group: Vec<usize> = (0..n).collect();
    fn find(g: &mut [usize], i: usize) -> usize {
        let mut i = i;
        while g[i] != i {
            g[i] = g[g[i]];
            i = g[i];
        }
        i
    }
    let idx_of = |h: Handle<RoleDecl>| roles.iter().position(|r| r.role == h);
    for (_, p) in m.pipelines.iter() {
        if let (Some(a), Some(b)) = (idx_of(p.producer), idx_of(p.consumer)) {
            if roles[a].main.is_some() && roles[b].main.is_some() {
                let (ra, rb) = (find(&mut group, a), find(&mut group, b));
                group[ra] = rb;
            }
        }
    }
    let roots: Vec<usize> = (0..n).map(|i| find(&mut group, i)).collect();
    let mut t_nb: Vec<Split> = vec![Split::default(); n];
    for i in 0..n {
        if iter_split[i].is_some() {
            let members = (0..n).filter(|&j| roots[j] == roots[i]);
            t_nb[i] = max_split(members.filter_map(|j| iter_split[j]));
        }
    }

    // Pipelines: main-loop round trips (bubbles per iteration) and fills.
    let mut bubble_iter = vec![0.0f64; n];
    let mut facts: Vec<PipelineFacts> = Vec::new();
    let mut fill = 0.0f64;
    let mut per_tile_pipes: Vec<(Handle<PipelineDecl>, f64, f64, f64)> = Vec::new(); // (pipe, handoffs/tile, bytes, latency part)
    for (ph, p) in m.pipelines.iter() {
        let (Some(pi), Some(ci)) = (idx_of(p.producer), idx_of(p.consumer)) else { continue };
        let k = ph.index();
        let (prod, cons) = (&roles[pi], &roles[ci]);
        let prod_work = |w: &Work| w.pipes.get(k).cloned().unwrap_or_default();
        let main_waits = cons.main.as_ref().map_or(0.0, |ml| prod_work(&ml.iter).waits);
        let rest_waits = prod_work(&cons.rest).waits;
        let cta_waits = prod_work(&cons.cta).waits;
        // Where the producer fills this pipeline.
        let mut pc = prod_work(&prod.rest);
        if let Some(ml) = &prod.main {
            let it = prod_work(&ml.iter);
            pc.acquires += it.acquires * ml.iters;
            pc.tma_bytes += it.tma_bytes * ml.iters;
            pc.tma_loads += it.tma_loads * ml.iters;
            for r in &it.reads {
                walk::add_read(&mut pc.reads, Read { bytes: r.bytes * ml.iters, ..r.clone() });
            }
        }
        let cta_pc = prod_work(&prod.cta);
        if pc.acquires <= 0.0 && cta_pc.acquires > 0.0 {
            pc = cta_pc;
        }
        let acquires = pc.acquires.max(1.0);
        let bytes = pc.tma_bytes / acquires;
        let loads = pc.tma_loads / acquires;
        let miss = model.miss(&pc.reads);
        let lat = model.tma_latency(bytes, miss);
        let cold = model.tma_latency(bytes, 1.0);
        let stages = f64::from(p.stages.max(1));
        if main_waits > 0.0 {
            let ml = cons.main.as_ref().expect("waits in main");
            let interval = t_nb[ci].total() / main_waits;
            let round_trip = 2.0 * handoff + acquire + loads * issue + lat + interval;
            let bubble = (round_trip / stages - interval).max(0.0);
            for j in 0..n {
                if roots[j] == roots[ci] {
                    bubble_iter[j] = bubble_iter[j].max(bubble * main_waits);
                }
            }
            fill = fill.max(handoff + acquire + loads * issue + cold);
            facts.push(PipelineFacts {
                pipeline: p.name.clone(),
                stages: p.stages,
                bytes_per_stage: bytes,
                handoffs_per_tile: main_waits * ml.iters + rest_waits,
                in_main_loop: true,
                interval_ns: interval,
                round_trip_ns: round_trip,
                stages_needed: if interval > 0.0 { (round_trip / interval).ceil().max(1.0) as u32 } else { 1 },
                bubble_ns_per_handoff: bubble,
            });
        } else if rest_waits > 0.0 {
            fill = fill.max(handoff + acquire + loads * issue + cold);
            per_tile_pipes.push((ph, rest_waits, bytes, 2.0 * handoff + acquire + loads * issue + lat));
        } else if cta_waits > 0.0 {
            fill = fill.max(handoff + acquire + loads * issue + cold);
            facts.push(PipelineFacts {
                pipeline: p.name.clone(),
                stages: p.stages,
                bytes_per_stage: bytes,
                handoffs_per_tile: 0.0,
                in_main_loop: false,
                interval_ns: 0.0,
                round_trip_ns: 2.0 * handoff + acquire + loads * issue + cold,
                stages_needed: 1,
                bubble_ns_per_handoff: 0.0,
            });
        }
    }
    // cp.async pipelines without a pipeline declaration (one role loads and computes).
    for (i, r) in roles.iter().enumerate() {
        let Some(ml) = &r.main else { continue };
        let it = &ml.iter;
        if it.cp_async_bytes > 0.0 && it.cp_async_waits > 0.0 {
            let miss = model.miss(&it.reads);
            let lat = ctx.p(P::LoadLatencyNs) + miss * (ctx.p(P::TmaLatencyDramNs) - ctx.p(P::TmaLatencyL2Ns)).max(0.0);
            let c = lat + it.cp_async_bytes / model.ingest + t_nb[i].total();
            let bound = c / f64::from(it.cp_async_depth.max(1));
            bubble_iter[i] = bubble_iter[i].max((bound - t_nb[i].total()).max(0.0));
            fill = fill.max(lat + it.cp_async_bytes / model.ingest);
        }
    }

    // ---- per tile ------------------------------------------------------------------------
    let mut paths: Vec<(Split, f64)> = Vec::with_capacity(n);
    for (i, r) in roles.iter().enumerate() {
        let role = role_of(r.role);
        let mut s = model.own(&r.rest, role);
        let mut b = 0.0;
        if let Some(ml) = &r.main {
            s = s.add(t_nb[i].scale(ml.iters));
            b = bubble_iter[i] * ml.iters;
        }
        paths.push((s, b));
    }
    let mem_tile = model.mem(&tile_work);
    let mem_kernel = model.kernel_mem(mem_tile);
    let issue_tile = model.issue(&tile_work);
    let res_tile = max_split([model.tensor_and_issue(tile_work.tensor_ns, issue_tile.iter().sum()), Split::memory(mem_kernel)]);
    // Roles that hand each other explicit barriers in both directions run in lockstep: their
    // paths add up (over the ring depth), see `barrier_cycles`.
    let tile_works: Vec<Work> = roles.iter().map(per_tile).collect();
    let cycle_paths: Vec<(Split, f64)> = barrier_cycles(m, &tile_works)
        .into_iter()
        .map(|(x, y, depth)| {
            ctx.note(format!(
                "roles `{}` and `{}` hand each other explicit barriers (ring depth {depth}): their paths add up, over the depth",
                role_of(roles[x].role).name,
                role_of(roles[y].role).name
            ));
            (paths[x].0.add(paths[y].0).scale(1.0 / depth), (paths[x].1 + paths[y].1) / depth)
        })
        .collect();
    let (path_tile, path_bubble) = paths
        .iter()
        .chain(&cycle_paths)
        .copied()
        .fold((Split::default(), 0.0), |best, (s, b)| if s.total() + b > best.0.total() + best.1 { (s, b) } else { best });
    let persistent = occ.occupancy.persistent;
    // Persistent blocks run one tile after another; the tile takes its longest constraint.
    let (mut tile_split, mut tile_bubble) =
        if !persistent || res_tile.total() >= path_tile.total() + path_bubble { (res_tile, 0.0) } else { (path_tile, path_bubble) };
    let tile_time_nb = tile_split.total() + tile_bubble;
    // Pipelines handed off once (or a few times) per tile: a round trip per hand-off.
    for &(ph, handoffs, bytes, lat) in &per_tile_pipes {
        let p = &m.pipelines[ph];
        let interval = (if persistent { tile_time_nb } else { path_tile.total() + path_bubble }) / handoffs;
        let round_trip = lat + interval;
        let bubble = (round_trip / f64::from(p.stages.max(1)) - interval).max(0.0);
        facts.push(PipelineFacts {
            pipeline: p.name.clone(),
            stages: p.stages,
            bytes_per_stage: bytes,
            handoffs_per_tile: handoffs,
            in_main_loop: false,
            interval_ns: interval,
            round_trip_ns: round_trip,
            stages_needed: if interval > 0.0 { (round_trip / interval).ceil().max(1.0) as u32 } else { 1 },
            bubble_ns_per_handoff: bubble,
        });
        tile_bubble += bubble * handoffs;
    }
    // Report pipelines in declaration order.
    facts.sort_by_key(|f| m.pipelines.iter().position(|(_, p)| p.name == f.pipeline));
    let per_tile_bubbles: f64 = tile_bubble - if tile_split == path_tile && persistent { path_bubble } else { 0.0 };

    // ---- per block and per kernel ----------------------------------------------------------
    let cta_own: Vec<Split> = roles.iter().map(|r| model.own(&r.cta, role_of(r.role))).collect();
    let cta_works: Vec<Work> = roles.iter().map(|r| r.cta.clone()).collect();
    let cta_cycles = barrier_cycles(m, &cta_works).into_iter().map(|(x, y, depth)| cta_own[x].add(cta_own[y]).scale(1.0 / depth));
    let cta_split = max_split(cta_own.iter().copied().chain(cta_cycles)).add(Split::sync(ctx.p(P::CtaPrologueNs)));
    let launch = ctx.p(P::LaunchOverheadNs);
    let waves_launched = if persistent { 1.0 } else { (occ.tiles / (sms * occ.blocks_per_sm)).ceil() };
    let launch_ns = launch + (waves_launched - 1.0).max(0.0) * ctx.p(P::CtaWaveNs);
    let n_tiles = occ.occupancy.tiles_per_block_max as f64;
    // Tiles one block slot runs in sequence: all of the busiest block's (persistent), or one per
    // round of co-resident blocks.
    let rounds = if persistent { n_tiles } else { (n_tiles / occ.blocks_per_sm).ceil() };
    // A kernel with a pipeline pays its start once beyond the empty launch (tensor maps, barrier
    // set-up, the first round trip past the modelled fill, the last stores draining).
    let setup = if m.pipelines.is_empty() { 0.0 } else { ctx.p(P::PipelineSetupNs) };
    let (critical, bubble_total, fill_total) = if persistent {
        (tile_split.scale(n_tiles).add(cta_split), tile_bubble * n_tiles, fill)
    } else {
        let path_round = path_tile.add(cta_split);
        let path_time = rounds * (path_round.total() + path_bubble + per_tile_bubbles + fill);
        let res_time = n_tiles * res_tile.total();
        if res_time >= path_time {
            tile_split = res_tile;
            (res_tile.scale(n_tiles), 0.0, fill)
        } else {
            tile_split = path_tile;
            (path_round.scale(rounds), (path_bubble + per_tile_bubbles) * rounds, fill * rounds)
        }
    };
    let ms = 1e-6;
    let components = Components {
        tensor_core_ms: critical.tensor * ms,
        memory_ms: critical.memory * ms,
        epilogue_ms: critical.epilogue * ms,
        sync_latency_ms: critical.sync * ms,
        fill_bubble_ms: (bubble_total + fill_total + setup) * ms,
        launch_ms: launch_ns * ms,
    };
    let predicted_ms = components.total_ms();

    // ---- reports ---------------------------------------------------------------------------
    let resources = Resources {
        tensor_core_ms: tile_work.tensor_ns * n_tiles * ms,
        memory_ms: mem_kernel * n_tiles * ms,
        l2_ms: mem_tile.1 * model.tail * n_tiles * ms,
        dram_ms: mem_tile.2 * model.tail * n_tiles * ms,
        issue_ms: issue_tile.iter().sum::<f64>() * n_tiles * ms,
        alu_ms: issue_tile[0] * n_tiles * ms,
        sfu_ms: issue_tile[1] * n_tiles * ms,
        shfl_ms: issue_tile[2] * n_tiles * ms,
        lsu_ms: issue_tile[3] * n_tiles * ms,
    };
    let role_busy: Vec<RoleBusy> = roles
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let role = role_of(r.role);
            let mut busy = model.own(&r.rest, role).total();
            if let Some(ml) = &r.main {
                busy += ml.iters * model.own(&ml.iter, role).total();
            }
            let cta = model.own(&r.cta, role).total() * if persistent { 1.0 } else { rounds };
            let busy_ms = (busy * rounds + cta) * ms;
            let path_ms = ((paths[i].0.total() + paths[i].1) * rounds + cta) * ms;
            let unit = match role.unit {
                RoleUnit::Warp => "warp",
                RoleUnit::Warpgroup => "warpgroup",
            };
            let warps = if role.count == 1 {
                format!("{unit} {}", role.first)
            } else {
                format!("{unit} {}..{}", role.first, role.first + role.count)
            };
            RoleBusy {
                role: role.name.clone(),
                warps,
                threads: role.threads(),
                busy_ms,
                path_ms,
                utilization: if predicted_ms > 0.0 { busy_ms / predicted_ms } else { 0.0 },
                main_loop_iters_per_tile: r.main.as_ref().map_or(0.0, |ml| ml.iters),
            }
        })
        .collect();
    let grid_blocks = occ.occupancy.grid_blocks as f64;
    let flops: f64 = roles.iter().map(|r| per_tile(r).flops * occ.tiles + r.cta.flops * grid_blocks).sum();
    let write_bytes: f64 = roles.iter().map(|r| per_tile(r).write_bytes * occ.tiles + r.cta.write_bytes * grid_blocks).sum();
    let traffic = Traffic {
        tensor_flops: flops,
        l2_to_sm_bytes: model.operands.iter().map(|o| o.requested).sum(),
        dram_read_bytes: model.operands.iter().map(|o| o.dram).sum(),
        dram_write_bytes: write_bytes,
        operands: model
            .operands
            .iter()
            .map(|o| OperandTraffic {
                tensor: m.tensors.iter().nth(o.tensor).map_or_else(String::new, |(_, t)| t.name.clone()),
                requested_bytes: o.requested,
                dram_bytes: o.dram,
                concurrent_readers: o.readers,
            })
            .collect(),
    };

    let bottleneck = components.bottleneck();
    let share = if predicted_ms > 0.0 { components.class_ms(bottleneck) / predicted_ms } else { 0.0 };
    let mut notes: Vec<String> = Vec::new();
    if let Some(second) = Bottleneck::ALL
        .iter()
        .copied()
        .filter(|&b| b != bottleneck)
        .max_by(|&a, &b| components.class_ms(a).total_cmp(&components.class_ms(b)))
    {
        let (w, s) = (components.class_ms(bottleneck), components.class_ms(second));
        if s >= 0.9 * w && w > 0.0 {
            notes.push(format!("close call: {second} is {:.0}% of {bottleneck} ({s:.4} vs {w:.4} ms)", 100.0 * s / w));
        }
    }

    let mut est = Estimate {
        kernel: m.name.clone(),
        target: m.target.clone(),
        dims: named.iter().filter(|(k, _)| m.dims.iter().any(|(_, d)| &d.name == *k)).map(|(k, v)| (k.clone(), *v)).collect(),
        predicted_ms,
        bottleneck,
        bottleneck_share: share,
        components,
        resources,
        roles: role_busy,
        pipelines: facts,
        occupancy: occ.occupancy.clone(),
        traffic,
        tflops: (flops > 0.0 && predicted_ms > 0.0).then(|| flops / (predicted_ms * 1e-3) / 1e12),
        hints: Vec::new(),
        notes: Vec::new(),
        calibration: CalibrationUsed { file: cal.file.clone(), fitted_on: cal.meta.fitted_on.clone(), provisional_used: Vec::new() },
    };

    // ---- hints ---------------------------------------------------------------------------
    let own = |w: &Work, role: &RoleDecl| model.own(w, role);
    let exposed_issue = |w: &Work, role: &RoleDecl| model.exposed_issue(w, role);
    let cx = super::hints::HintCx {
        m,
        target,
        est: &est,
        roles: &roles,
        own: &own,
        exposed_issue: &exposed_issue,
        paths: &paths,
        path_tile,
        path_bubble,
        path_binds: tile_split == path_tile,
        t_nb: &t_nb,
        bubble_iter: &bubble_iter,
        operands: &model.operands,
        smem: occ.smem,
        tiles: occ.tiles,
        sms,
        n_tiles,
        persistent,
        tile_time_nb,
        tile_tensor_ns: tile_work.tensor_ns,
    };
    est.hints = super::hints::run(&cx);

    // ---- notes ---------------------------------------------------------------------------
    if m.grid.iter().next().is_some() {
        let order = match m.grid().and_then(|g| g.group) {
            Some(gs) => format!("in bands of {gs} along the second-to-last tile axis (`group {gs}`)"),
            None => "last tile axis fastest".to_string(),
        };
        notes.push(format!(
            "tiles are walked as the lowering does, {order}; {}",
            if persistent {
                format!("block b takes tiles b, b + {}, … ({} rounds on the busiest block)", sms, n_tiles)
            } else {
                format!("one block per tile, {} per SM at a time", occ.blocks_per_sm)
            }
        ));
    }
    notes.extend(ctx.notes.borrow().iter().cloned());
    let provisional = cal.provisional_names(ctx.used.get());
    if !provisional.is_empty() {
        notes.push(format!("used provisional parameters (not yet measured on the device): {}", provisional.join(", ")));
    }
    if cal.meta.fitted_on.is_empty() {
        notes.push(format!("{}: initial measured values, not yet fitted to GPU corpus measurements; accuracy unknown", cal.file));
    }
    est.calibration.provisional_used = provisional.iter().map(|s| s.to_string()).collect();
    est.notes = notes;
    Ok(est)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two roles of one warp each (`ping` may be widened) playing ping-pong on two mbarriers.
    const PING_PONG: &str = "kernel pp target sm_90a
dim T
dim I
out O: f32[T, 32]
grid tiles[b = T] persistent
role ping: PING
role pong: PONG
barrier to_pong: count 1 producer ping consumer pong
barrier to_ping: count 1 producer pong consumer ping
on ping {
    reg v: f32[32] per warp
    for t in tiles {
        for i in 0..I {
            arrive(to_pong)
            wait(to_ping)
        }
        fill(v, 1.0)
        # One warp stores the tile's row (every warp storing it would be a double write).
        if ping.warp == 0 {
            store(O[t.b, :], v)
        }
    }
}
on pong {
    for t in tiles {
        for i in 0..I {
            wait(to_pong)
            arrive(to_ping)
        }
    }
}
";

    /// A two-slot ring over explicit full/empty barriers: the producer waits for the slot it
    /// filled two rounds ago, so it runs up to two phases ahead of the consumer.
    const RING: &str = "kernel ring target sm_90a
dim T
dim I multiple_of 2
out O: f32[T, 32]
grid tiles[b = T]
role prod: warp 0
role cons: warp 1
barrier full: stages 2 count 1 producer prod consumer cons
barrier empty: stages 2 count 1 producer cons consumer prod
on prod {
    reg v: f32[32] per warp
    for t in tiles {
        for i in 0..I {
            wait_parity(empty[i % 2], (i / 2 + 1) % 2)
            arrive(full[i % 2])
        }
        fill(v, 1.0)
        store(O[t.b, :], v)
    }
}
on cons {
    for t in tiles {
        for i in 0..I {
            wait(full[i % 2])
            arrive(empty[i % 2])
        }
    }
}
";

    fn predict(src: &str, i: i64) -> Estimate {
        let out = crate::check::check_source(src);
        let v = out.validated.unwrap_or_else(|| panic!("does not verify: {:#?}", out.diagnostics));
        let dims: BTreeMap<String, i64> = [("T".to_string(), 132), ("I".to_string(), i)].into_iter().collect();
        crate::cost::estimate_builtin(&v, &dims).expect("estimate")
    }

    /// Time per iteration of the `I` loop, ns (the slope between two trip counts).
    fn per_iteration_ns(src: &str) -> f64 {
        let (a, b) = (predict(src, 1024), predict(src, 2048));
        (b.predicted_ms - a.predicted_ms) * 1e6 / 1024.0
    }

    fn cal() -> &'static Calibration {
        crate::cost::builtin_calibration("sm_90a").expect("sm_90a is calibrated")
    }

    #[test]
    fn a_barrier_ping_pong_costs_two_handoffs_per_round_trip() {
        let h = cal().get(P::MbarrierHandoffNs);
        let src = PING_PONG.replace("PING", "warp 0").replace("PONG", "warp 1");
        // Each round trip: ping's arrive reaches pong's wait, pong's arrive reaches ping's wait.
        // The arrivals of one-warp roles are a __syncwarp (free); no data moves.
        let t = per_iteration_ns(&src);
        assert!((t - 2.0 * h).abs() < 1e-6 * h, "{t} ns per round trip, want 2 x {h}");
        let e = predict(&src, 4096);
        assert_eq!(e.bottleneck, Bottleneck::LatencySync);
        assert!(e.notes.iter().any(|n| n.contains("`ping` and `pong` hand each other explicit barriers (ring depth 1)")), "{:#?}", e.notes);
        // Each role alone is only half of the round trip.
        assert!(e.roles.iter().all(|r| r.path_ms < 0.6 * e.predicted_ms), "{:#?}", e.roles);
    }

    #[test]
    fn only_a_multi_warp_role_pays_a_named_barrier_to_arrive() {
        let (h, bar) = (cal().get(P::MbarrierHandoffNs), cal().get(P::BarSyncNs));
        let src = PING_PONG.replace("PING", "warp 0..4").replace("PONG", "warp 4");
        // `ping` is four warps: they meet on a named barrier (bar.sync) before the arrival.
        let t = per_iteration_ns(&src);
        assert!((t - (2.0 * h + bar)).abs() < 1e-6 * h, "{t} ns per round trip, want 2 x {h} + {bar}");
    }

    #[test]
    fn a_barrier_ring_overlaps_its_stages() {
        let h = cal().get(P::MbarrierHandoffNs);
        // Round trip of a slot: two hand-offs; two slots in flight: one hand-off per round.
        let t = per_iteration_ns(RING);
        assert!((t - h).abs() < 1e-6 * h, "{t} ns per round, want {h}");
        let e = predict(RING, 2048);
        assert!(e.notes.iter().any(|n| n.contains("(ring depth 2)")), "{:#?}", e.notes);
    }

    #[test]
    fn grouped_walk_matches_the_lowering() {
        // tiles[m = 5, n = 3] group 2: bands of 2 m-rows, m fastest inside a band; last band short.
        let mut c = Vec::new();
        let walk: Vec<(u64, u64)> = (0..15)
            .map(|l| {
                tile_coords(&[5, 3], Some(2), l, &mut c);
                (c[0], c[1])
            })
            .collect();
        assert_eq!(
            walk,
            [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 0), (3, 0), (2, 1), (3, 1), (2, 2), (3, 2), (4, 0), (4, 1), (4, 2)]
        );
        tile_coords(&[5, 3], None, 4, &mut c);
        assert_eq!(c, [1, 1]);
        // 132 concurrent tiles of a 64 x 32 grid: 5 m-rows (row-major) or 16 rows x 9 columns (group 16).
        assert_eq!(distinct(&[64, 32], None, 0b01, 132), 5.0);
        assert_eq!(distinct(&[64, 32], None, 0b10, 132), 32.0);
        assert_eq!(distinct(&[64, 32], Some(16), 0b01, 132), 16.0);
        assert_eq!(distinct(&[64, 32], Some(16), 0b10, 132), 9.0);
    }
}
