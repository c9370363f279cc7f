//! sm_90a lowering: pipelines over mbarriers, TMA loads, wgmma.

use super::frag::mul_c;
use super::layout::Layout;
use super::prelude::Helper;
use super::{strip_parens, unsupported, Lw, LowerError};
use crate::ir::*;
use crate::layout::{TxDerivation, TX_COUNT_MAX};
use crate::span::Span;

impl<'a> Lw<'a> {
    fn pipeline_of(&self, e: Handle<Expr>, span: Span) -> Result<Handle<PipelineDecl>, LowerError> {
        match self.m.exprs[e].kind {
            ExprKind::Pipeline(p) => Ok(p),
            ExprKind::Barrier(_) => Err(unsupported("explicit barriers", span)),
            _ => Err(unsupported("this synchronisation argument", span)),
        }
    }

    fn pipe_state(&self, p: Handle<PipelineDecl>, span: Span) -> Result<super::PipeState, LowerError> {
        self.role
            .as_ref()
            .and_then(|r| r.pipes.get(&p).cloned())
            .ok_or_else(|| super::outside_role(format!("pipeline `{}` used outside its producer and consumer", self.m.pipelines[p].name), "V418", span))
    }

    fn wait_helper(&mut self) {
        if self.sm90() {
            self.need(Helper::MbarWait);
        } else {
            self.need(Helper::MbarTestWait);
        }
    }

    pub(crate) fn is_leader_guarded(&self) -> Option<String> {
        let r = self.role.as_ref()?;
        (!r.single_thread).then(|| r.leader.clone())
    }

    /// `acquire(p)`: advance, wait until consumers released the stage, arm its full barrier with
    /// the derived transaction bytes.
    pub(crate) fn acquire(&mut self, pe: Handle<Expr>, span: Span, siblings: &[Handle<Stmt>], pos: usize) -> Result<(), LowerError> {
        let p = self.pipeline_of(pe, span)?;
        let m = self.m;
        let pd = &m.pipelines[p];
        let role = self.role.as_ref().map(|r| r.h);
        if role != Some(pd.producer) {
            return Err(super::outside_role(format!("acquire of `{}` outside its producer role", pd.name), "V418", span));
        }
        let st = self.pipe_state(p, span)?;
        let pp = &self.pipes[p.index()];
        let (full, empty, stages) = (pp.full.clone(), pp.empty.clone(), pp.stages);
        // The verifier checked the derivation (V459, V460); an unverified module that gets here
        // without one is refused rather than armed with a wrong count.
        let tx = match self.layout.tx_of(siblings[pos]) {
            Some(TxDerivation::Bytes(b)) if (1..=TX_COUNT_MAX).contains(b) => *b,
            Some(TxDerivation::Underivable { reason, span }) => {
                return Err(LowerError::new("L004", format!("cannot derive the transaction bytes: {reason}"), *span));
            }
            _ => return Err(LowerError::new("L004", format!("no derivable transaction bytes for this acquire of `{}`", pd.name), span)),
        };
        self.wait_helper();
        self.need(Helper::MbarArriveExpectTx);
        self.w.line(format!("if (++{} == {stages}) {{ {} = 0; {} ^= 1u; }}", st.stage, st.stage, st.phase));
        self.w.line(format!(
            "cake_mbar_wait({empty} + 8 * {}, {} ^ 1u);  // the consumers released this stage (a fresh barrier passes parity 1)",
            st.stage, st.phase
        ));
        let arm = format!(
            "cake_mbar_arrive_expect_tx({full} + 8 * {}, {}u);  // the bytes of this stage's tma_loads, up to the next acquire",
            st.stage, tx
        );
        match self.is_leader_guarded() {
            Some(l) => self.w.line(format!("if ({l}) {arm}")),
            None => self.w.line(arm),
        }
        if let Some(top) = self.acquired.last_mut() {
            top.push(p);
        }
        Ok(())
    }

    /// `wait(p)` (consumer): advance, wait until the stage is full.
    pub(crate) fn wait(&mut self, pe: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        let p = self.pipeline_of(pe, span)?;
        let pd = &self.m.pipelines[p];
        if self.role.as_ref().map(|r| r.h) != Some(pd.consumer) {
            return Err(super::outside_role(format!("wait on `{}` outside its consumer role", pd.name), "V418", span));
        }
        let st = self.pipe_state(p, span)?;
        let pp = &self.pipes[p.index()];
        let (full, stages) = (pp.full.clone(), pp.stages);
        self.wait_helper();
        self.w.line(format!("if (++{} == {stages}) {{ {} = 0; {} ^= 1u; }}", st.stage, st.stage, st.phase));
        self.w.line(format!("cake_mbar_wait({full} + 8 * {}, {});  // the stage's TMA bytes have landed", st.stage, st.phase));
        Ok(())
    }

    /// `release(p)` (consumer): one elected arrival per consumer warpgroup (warp) on the empty
    /// barrier of the oldest stage it holds.
    pub(crate) fn release(&mut self, pe: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        let p = self.pipeline_of(pe, span)?;
        let pd = &self.m.pipelines[p];
        if self.role.as_ref().map(|r| r.h) != Some(pd.consumer) {
            return Err(super::outside_role(format!("release of `{}` outside its consumer role", pd.name), "V418", span));
        }
        let st = self.pipe_state(p, span)?;
        let pp = &self.pipes[p.index()];
        let (empty, stages, warps) = (pp.empty.clone(), pp.stages, pp.consumer_warps);
        let (generic, bar_base) = self.role.as_ref().map(|r| (r.generic_smem_reads, r.release_bar_base)).expect("role");
        let role = &self.m.roles[pd.consumer];
        self.need(Helper::MbarArrive);
        if warps {
            if generic {
                self.w.line("__syncwarp();  // the warp's reads of the stage are done before lane 0 arrives");
            }
            self.w.line(format!("if (cake_lane == 0) cake_mbar_arrive({empty} + 8 * {});  // one arrival per consumer warp", st.release));
        } else {
            if generic {
                self.need(Helper::NamedBarrier);
                let first_wg = role.warps().start / 4;
                self.w.line(format!(
                    "cake_named_barrier({bar_base} + cake_warp / 4 - {first_wg}, 128);  // the warpgroup's ordinary shared-memory reads are done"
                ));
            }
            self.w.line(format!(
                "if (threadIdx.x % 128 == 0) cake_mbar_arrive({empty} + 8 * {});  // one elected arrival per consumer warpgroup",
                st.release
            ));
        }
        self.w.line(format!("if (++{} == {stages}) {} = 0;", st.release, st.release));
        Ok(())
    }

    /// `tma_load(dst, src, p)`: the elected thread copies one box, crediting its bytes to the
    /// full barrier of the pipeline stage the role holds, or to an explicit barrier.
    pub(crate) fn tma_load(&mut self, dst: Handle<Expr>, src: Handle<Expr>, bar: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        let m = self.m;
        let mbar = if self.is_barrier_expr(bar) {
            self.bar_ref(bar, span)?.addr
        } else {
            let p = self.pipeline_of(bar, span)?;
            let pd = &m.pipelines[p];
            if self.role.as_ref().map(|r| r.h) != Some(pd.producer) {
                return Err(super::outside_role(format!("tma_load into `{}` outside its producer role", pd.name), "V418", span));
            }
            if !self.acquired.iter().any(|scope| scope.contains(&p)) {
                return Err(LowerError::new(
                    "L004",
                    format!("tma_load into pipeline `{}` without a preceding acquire in an enclosing block", pd.name),
                    span,
                ));
            }
            let st = self.pipe_state(p, span)?;
            format!("{} + 8 * {}", self.pipes[p.index()].full, st.stage)
        };
        let (t, rank, coords) = self.tma_box(src, "tma_load source", span)?;
        let td = &m.tensors[t];
        // Destination.
        let r = self.smem_ref(dst)?;
        let align = if r.swizzle == crate::ir::Swizzle::None { 128 } else { 8 * u64::from(r.swizzle.bytes()) };
        if !r.aligned(align, false) {
            return Err(LowerError::new(
                "L006",
                format!("the TMA destination is not provably {align}-byte aligned (window starts must be multiples of whole swizzle atoms)"),
                span,
            ));
        }
        let dst_c = self.smem_addr_c_noswizzle(&r);
        let map = self.tmap_name(&td.name);
        // sm_12x has no accelerated cluster TMA: a `.shared::cluster` destination would be
        // emulated (an address check and a call), so name the block's own shared memory.
        let cta = !self.target.has("tma_multicast");
        self.need(Helper::TmaLoad { rank: rank as u32, cta });
        let call = format!("cake_tma_load_{rank}d({dst_c}, &{map}, {mbar}, {});", coords.join(", "));
        match self.is_leader_guarded() {
            Some(l) => self.w.line(format!("if ({l}) {call}")),
            None => self.w.line(call),
        }
        Ok(())
    }

    /// The tensor, rank and box coordinates (innermost first, as C) of a TMA window `g`.
    fn tma_box(&mut self, g: Handle<Expr>, what: &str, span: Span) -> Result<(Handle<TensorDecl>, usize, Vec<String>), LowerError> {
        let m = self.m;
        let (base, items) = match &m.exprs[g].kind {
            ExprKind::Index { base, items } => (*base, items.clone()),
            _ => return Err(unsupported(format!("a {what} that is not a window of a tensor"), span)),
        };
        let ExprKind::Tensor(t) = m.exprs[base].kind else {
            return Err(unsupported(format!("a {what} that is not a tensor"), span));
        };
        let td = &m.tensors[t];
        let Some(tma) = &td.tma else {
            return Err(LowerError::new("L005", format!("`{}` has no tensor map (declare it with `tma [box]`)", td.name), span));
        };
        let rank = td.shape.len();
        if !(1..=5).contains(&rank) || tma.box_dims.len() != rank {
            return Err(LowerError::new("L005", format!("`{}`: rank {rank} with a box of {} dimensions", td.name, tma.box_dims.len()), span));
        }
        let mut coords = Vec::new();
        for d in 0..rank {
            let bx = tma.box_dims[d];
            let c = match items.get(d) {
                Some(IndexItem::At(x)) => {
                    if bx != 1 {
                        return Err(LowerError::new("L005", format!("dimension {d} of `{}` is indexed, but its box extent is {bx} (must be 1)", td.name), span));
                    }
                    self.scalar(*x)?
                }
                Some(IndexItem::Window { start, len }) => {
                    if *len != bx {
                        return Err(LowerError::new("L005", format!("window of {len} on dimension {d} of `{}`, whose box extent is {bx}", td.name), span));
                    }
                    self.scalar(*start)?
                }
                Some(IndexItem::Full) | None => {
                    if td.shape[d].as_const() != Some(bx) {
                        return Err(LowerError::new("L005", format!("whole dimension {d} of `{}` is not one box ({bx})", td.name), span));
                    }
                    "0".into()
                }
            };
            coords.push(strip_parens(&c).to_string());
        }
        coords.reverse(); // innermost first
        Ok((t, rank, coords))
    }

    /// `tma_store(dst, src)`: the role's elected thread copies the shared tile to one box of the
    /// tensor, as its own bulk async-group.
    pub(crate) fn tma_store(&mut self, dst: Handle<Expr>, src: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        let m = self.m;
        let (t, rank, coords) = self.tma_box(dst, "tma_store destination", span)?;
        let td = &m.tensors[t];
        let r = self.smem_ref(src)?;
        let align = if r.swizzle == crate::ir::Swizzle::None { 128 } else { 8 * u64::from(r.swizzle.bytes()) };
        if !r.aligned(align, false) {
            return Err(LowerError::new(
                "L006",
                format!("the TMA store source is not provably {align}-byte aligned (window starts must be multiples of whole swizzle atoms)"),
                span,
            ));
        }
        let src_c = self.smem_addr_c_noswizzle(&r);
        let map = self.tmap_name(&td.name);
        self.need(Helper::TmaStore(rank as u32));
        let call = format!("cake_tma_store_{rank}d(&{map}, {src_c}, {});", coords.join(", "));
        match self.is_leader_guarded() {
            Some(l) => self.w.line(format!("if ({l}) {call}")),
            None => self.w.line(call),
        }
        Ok(())
    }

    /// `tma_store_wait(n)`: the thread that issued the role's TMA stores waits until at most `n`
    /// of them still read their sources, then the role meets so any thread may overwrite them.
    pub(crate) fn tma_store_wait(&mut self, n: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        let n = self.m.const_value(n).ok_or_else(|| LowerError::new("L001", "tma_store_wait needs a constant", span))?;
        self.need(Helper::TmaStoreWait);
        let call = format!("cake_tma_store_wait_read<{n}>();  // at most {n} TMA store(s) still reading shared memory");
        match self.is_leader_guarded() {
            None => self.w.line(call),
            Some(l) => {
                self.w.line(format!("if ({l}) {call}"));
                self.role_sync("the sources are free for every thread of the role")?;
            }
        }
        Ok(())
    }

    /// The calling role's threads meet (`__syncwarp` for one warp, else its named barrier).
    pub(crate) fn role_sync(&mut self, why: &str) -> Result<(), LowerError> {
        let rh = self.role.as_ref().map(|r| r.h).ok_or_else(|| unsupported("a role barrier outside a role", crate::span::Span::default()))?;
        let r = &self.m.roles[rh];
        if r.threads() == 32 {
            self.w.line(format!("__syncwarp();  // {why}"));
        } else {
            self.need(Helper::NamedBarrier);
            self.w.line(format!("cake_named_barrier({}, {});  // role `{}`: {why}", 1 + rh.index(), r.threads(), r.name));
        }
        Ok(())
    }

    /// A shared address without the swizzle function (TMA and wgmma apply the pattern themselves
    /// from the address bits).
    fn smem_addr_c_noswizzle(&self, r: &super::frag::SmemRef) -> String {
        let base = self.regions[r.region].addr.clone();
        let off = r.offset_c();
        if off == "0" {
            base
        } else {
            format!("{base} + {off}")
        }
    }

    /// `wgmma(acc, a, b)`: acc (64×N f32 or f16, per warpgroup) += a (64×K) · bᵀ (N×K), both K-major
    /// in swizzled shared memory, one instruction per 32-byte K slice (k16 for 16-bit operands, k32
    /// for 8-bit floats).
    pub(crate) fn wgmma(&mut self, acc: Handle<Expr>, a: Handle<Expr>, b: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        let m = self.m;
        let ExprKind::Local(l) = m.exprs[acc].kind else { return Err(unsupported("a wgmma accumulator that is not a fragment", span)) };
        let lay = self.layouts.get(&l).copied();
        let Some(Layout::Acc { n_tiles, wg: true, .. }) = lay else {
            return Err(LowerError::new("L007", "the wgmma accumulator must be a 64×N fragment per warpgroup", span));
        };
        let n = 8 * n_tiles;
        let (Some(ad), Some(bd), Some(dd)) = (m.exprs[a].ty.dtype(), m.exprs[b].ty.dtype(), m.exprs[acc].ty.dtype()) else {
            return Err(unsupported("wgmma operands without a dtype", span));
        };
        let fp8 = |d: DType| matches!(d, DType::F8E4M3 | DType::F8E5M2);
        let ok = match (ad, bd, dd) {
            (DType::BF16, DType::BF16, DType::F32) => true,
            (DType::F16, DType::F16, DType::F32 | DType::F16) => true,
            (x, y, DType::F32 | DType::F16) => fp8(x) && fp8(y),
            _ => false,
        };
        if !ok {
            return Err(unsupported(format!("wgmma with {ad} × {bd} operands and {dd} accumulators"), span));
        }
        if dd == DType::F16 && !self.packed.contains(&l) {
            return Err(LowerError::new("L007", "an f16 wgmma accumulator must be a declared `reg` fragment", span));
        }
        let ra = self.smem_ref(a)?;
        let rb = self.smem_ref(b)?;
        if ra.shape.len() != 2 || rb.shape.len() != 2 || ra.shape[0] != 64 || rb.shape[0] != i64::from(n) || ra.shape[1] != rb.shape[1] {
            return Err(LowerError::new("L007", format!("wgmma operand shapes {:?} and {:?} for a 64×{n} accumulator", ra.shape, rb.shape), span));
        }
        let k = ra.shape[1];
        let slice = 32 / ad.size_bytes() as i64; // elements in one 32-byte K slice
        if k % slice != 0 {
            return Err(LowerError::new("L007", format!("K = {k} is not a multiple of {slice}"), span));
        }
        // A refusal of one operand's layout points at that operand.
        let da = self.wgmma_desc(&ra, self.expr_span(a))?;
        let db = self.wgmma_desc(&rb, self.expr_span(b))?;
        let name = self.local_name(l);
        let flag = self.scale_flags.get(&l).cloned().unwrap_or_else(|| "1".into());
        if !self.wg_fenced {
            self.need_fence_regs(l);
            self.need(Helper::WgmmaFence);
            self.w.line(format!("cake_fence_regs({name});"));
            self.w.line("cake_wgmma_fence();  // order earlier register writes before the asynchronous MMA");
        }
        self.need(Helper::WgmmaDesc);
        self.need(Helper::Wgmma { n, d: dd, a: ad, b: bd });
        let f = super::prelude::wgmma_name(n, dd, ad, bd);
        self.w.open("{");
        let sw = |r: &super::frag::SmemRef| r.swizzle.bytes();
        self.w.line(format!("const unsigned long long cake_da = {da};  // A: 64×{k}, K-major, {}B swizzle", sw(&ra)));
        self.w.line(format!("const unsigned long long cake_db = {db};  // B: {n}×{k}, K-major, {}B swizzle", sw(&rb)));
        self.w.line("#pragma unroll");
        self.w.open(format!(
            "for (int cake_k = 0; cake_k < {}; ++cake_k) {{  // K = {k}: k{slice} slices, +32 bytes (2 in the descriptor's address field) each",
            k / slice
        ));
        self.w.line(format!("{f}({name}, cake_da + 2 * cake_k, cake_db + 2 * cake_k, {flag});"));
        if flag != "1" {
            self.w.line(format!("{flag} = 1;"));
        }
        self.w.close("}");
        self.w.close("}");
        self.wg_fenced = true;
        Ok(())
    }

    /// C: the descriptor of a K-major swizzled operand (K slice 0).
    fn wgmma_desc(&mut self, r: &super::frag::SmemRef, span: Span) -> Result<String, LowerError> {
        let sw = r.swizzle;
        let (layout, bytes) = match sw {
            crate::ir::Swizzle::B128 => (1, 128u64),
            crate::ir::Swizzle::B64 => (2, 64),
            crate::ir::Swizzle::B32 => (3, 32),
            crate::ir::Swizzle::None => {
                return Err(LowerError::new("L006", "wgmma operands must be swizzled (core matrices of 8 rows × 16 contiguous bytes)", span))
            }
        };
        if r.pitch != bytes {
            return Err(unsupported(
                format!("a K-major wgmma operand whose rows ({} bytes) are not exactly one {bytes}-byte swizzle span", r.pitch),
                span,
            ));
        }
        let atom = 8 * bytes;
        // Row and stage offsets must keep the operand on whole swizzle atoms; a K offset must be
        // whole k16 slices (32 bytes) inside the row.
        for t in &r.terms {
            let ok = if t.innermost {
                t.mult == 0 || (t.mult as u64 * t.stride) % 32 == 0
            } else {
                t.mult == 0 || (t.mult as u64).saturating_mul(t.stride) % atom == 0 || t.stride % atom == 0
            };
            if !ok {
                return Err(LowerError::new(
                    "L006",
                    format!("wgmma operand offset `{}` is not provably a multiple of {} bytes", mul_c(t.stride, &t.c), if t.innermost { 32 } else { atom }),
                    span,
                ));
            }
        }
        let base = self.regions[r.region].addr.clone();
        let off = r.offset_c();
        let addr = if off == "0" { base } else { format!("{base} + {off}") };
        Ok(format!("cake_wgmma_desc({addr}, 16, {atom}, {layout})"))
    }

    pub(crate) fn wgmma_wait(&mut self, n: Handle<Expr>, span: Span) -> Result<(), LowerError> {
        let n = self.m.const_value(n).ok_or_else(|| LowerError::new("L001", "wgmma_wait needs a constant", span))?;
        self.need(Helper::WgmmaWait);
        self.w.line(format!("cake_wgmma_wait<{n}>();"));
        let accs = self.role.as_ref().map(|r| r.wgmma_accs.clone()).unwrap_or_default();
        for l in accs {
            self.need_fence_regs(l);
            let name = self.local_name(l);
            self.w.line(format!("cake_fence_regs({name});  // reads of {name} stay after the wait"));
        }
        Ok(())
    }
}
