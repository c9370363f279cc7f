//! Device helper functions the generated kernels call: one small `__forceinline__` function per
//! PTX form, emitted only when used, in a fixed order (so output is deterministic). Each one
//! names the PTX instruction it wraps; no CUDA header is included.

use std::fmt::Write as _;

use crate::ir::DType;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Helper {
    TensorMapType,
    SmemU32,
    MbarInit,
    FenceMbarrierInit,
    FenceProxyAsync,
    MbarWait,
    MbarTestWait,
    MbarArrive,
    MbarArriveExpectTx,
    PrefetchTensorMap,
    /// A TMA load of this rank; `cta`: the destination written as `.shared::cta` (targets without
    /// accelerated cluster TMA, where ptxas would emulate a `.shared::cluster` address).
    TmaLoad { rank: u32, cta: bool },
    TmaStore(u32),
    TmaStoreWait,
    WgmmaDesc,
    WgmmaFence,
    WgmmaCommit,
    WgmmaWait,
    FenceRegs,
    FenceRegsU32,
    /// `wgmma m64n{n}k{32 / bytes(a)}` with accumulator dtype `d` and operand dtypes `a`, `b`.
    Wgmma { n: u32, d: DType, a: DType, b: DType },
    CpAsync16,
    CpAsyncCommit,
    CpAsyncWait,
    LdmatrixX4,
    MmaBf16,
    MmaF16,
    MmaF16Acc,
    PackBf16x2,
    PackF16x2,
    /// f32 → one fp8 byte of this dtype (`f8e4m3`, `f8e5m2`), round to nearest even, saturating
    /// to the largest finite value (sm_89+): `cake_cvt_e4m3`.
    CvtF8(DType),
    UnpackF16x2,
    /// One fp8 byte of this dtype widened to f32 through the f16x2 pair (`cvt.rn.f16x2.e4m3x2`,
    /// sm_89+): `cake_e4m3_get`; uses [`Helper::UnpackF16x2`], which comes first.
    F8Get(DType),
    RoundBf16,
    RoundF16,
    NamedBarrier,
    Swizzle,
    StShared,
}

pub(crate) fn text(h: Helper) -> String {
    match h {
        Helper::TensorMapType => r#"// The driver's CUtensorMap: 128 opaque bytes, built on the host with cuTensorMapEncodeTiled and
// passed by value as a `const __grid_constant__` kernel parameter.
struct __align__(64) CUtensorMap { unsigned long long opaque[16]; };
"#
        .into(),
        Helper::SmemU32 => r#"// 32-bit shared-window address of a generic pointer into shared memory (cvta.to.shared).
static __device__ __forceinline__ unsigned cake_smem_u32(const void* p) {
    unsigned a;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}
"#
        .into(),
        Helper::MbarInit => r#"// mbarrier.init: a fresh barrier in phase 0 expecting `count` arrivals per phase.
static __device__ __forceinline__ void cake_mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
"#
        .into(),
        Helper::FenceMbarrierInit => r#"// Make mbarrier initialisation visible to the other threads and the async proxy (TMA).
static __device__ __forceinline__ void cake_fence_mbarrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
"#
        .into(),
        Helper::FenceProxyAsync => r#"// Order this thread's generic-proxy shared-memory accesses before later async-proxy ones.
static __device__ __forceinline__ void cake_fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
"#
        .into(),
        Helper::MbarWait => r#"// Wait until the phase of `bar` with parity `parity` has completed (try_wait may suspend; loop
// until it reports completion).
static __device__ __forceinline__ void cake_mbar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}
"#
        .into(),
        Helper::MbarTestWait => r#"// Wait until the phase of `bar` with parity `parity` has completed (sm_80: test_wait polls).
static __device__ __forceinline__ void cake_mbar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{ .reg .pred p; mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}
"#
        .into(),
        Helper::MbarArrive => r#"// One arrival on `bar` (release semantics at CTA scope).
static __device__ __forceinline__ void cake_mbar_arrive(unsigned bar) {
    asm volatile("{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [%0]; }" :: "r"(bar) : "memory");
}
"#
        .into(),
        Helper::MbarArriveExpectTx => r#"// Announce `bytes` of transactions for the current phase of `bar` and arrive once.
static __device__ __forceinline__ void cake_mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }" :: "r"(bar), "r"(bytes) : "memory");
}
"#
        .into(),
        Helper::PrefetchTensorMap => r#"// Bring a tensor map into the descriptor cache ahead of its first use.
static __device__ __forceinline__ void cake_prefetch_tensormap(const CUtensorMap* map) {
    asm volatile("prefetch.tensormap [%0];" :: "l"(map) : "memory");
}
"#
        .into(),
        Helper::TmaLoad { rank, cta } => {
            let space = if cta { "shared::cta" } else { "shared::cluster" };
            let params: Vec<String> = (0..rank).map(|i| format!("int c{i}")).collect();
            let coords: Vec<String> = (0..rank).map(|i| format!("%{}", i + 3)).collect();
            let args: Vec<String> = (0..rank).map(|i| format!("\"r\"(c{i})")).collect();
            format!(
                r#"// TMA: copy one box of a {rank}-D tensor (coordinates innermost first) into shared memory at `dst`,
// crediting its bytes to mbarrier `bar` (complete_tx).
static __device__ __forceinline__ void cake_tma_load_{rank}d(unsigned dst, const CUtensorMap* map, unsigned bar, {}) {{
    asm volatile("cp.async.bulk.tensor.{rank}d.{space}.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {{{}}}], [%2];"
                 :: "r"(dst), "l"(map), "r"(bar), {} : "memory");
}}
"#,
                params.join(", "),
                coords.join(", "),
                args.join(", ")
            )
        }
        Helper::TmaStore(rank) => {
            let params: Vec<String> = (0..rank).map(|i| format!("int c{i}")).collect();
            let coords: Vec<String> = (0..rank).map(|i| format!("%{}", i + 2)).collect();
            let args: Vec<String> = (0..rank).map(|i| format!("\"r\"(c{i})")).collect();
            format!(
                r#"// TMA: copy the shared tile at `src` to one box of a {rank}-D tensor (coordinates innermost first), as its
// own bulk async-group of this thread; elements of the box outside the tensor are not written.
static __device__ __forceinline__ void cake_tma_store_{rank}d(const CUtensorMap* map, unsigned src, {}) {{
    asm volatile("cp.async.bulk.tensor.{rank}d.global.shared::cta.tile.bulk_group [%0, {{{}}}], [%1];"
                 :: "l"(map), "r"(src), {} : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}}
"#,
                params.join(", "),
                coords.join(", "),
                args.join(", ")
            )
        }
        Helper::TmaStoreWait => r#"// Wait until at most N of this thread's bulk async-groups (TMA stores) still read shared memory.
template <int N>
static __device__ __forceinline__ void cake_tma_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
}
// Wait until every TMA store of this thread has completed (before the block may exit).
static __device__ __forceinline__ void cake_tma_store_wait_all() {
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
"#
        .into(),
        Helper::WgmmaDesc => r#"// wgmma shared-memory matrix descriptor: bits 0-13 start address >> 4, 16-29 leading byte offset >> 4,
// 32-45 stride byte offset >> 4, 49-51 base offset (0: atoms 1024-byte aligned), 62-63 layout
// (1 = 128B swizzle, 2 = 64B, 3 = 32B).
static __device__ __forceinline__ unsigned long long cake_wgmma_desc(unsigned addr, unsigned lbo, unsigned sbo, unsigned layout) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4)
         | ((unsigned long long)((lbo & 0x3FFFF) >> 4) << 16)
         | ((unsigned long long)((sbo & 0x3FFFF) >> 4) << 32)
         | ((unsigned long long)layout << 62);
}
"#
        .into(),
        Helper::WgmmaFence => r#"// Order earlier register and shared-memory accesses before the following wgmma.mma_async.
static __device__ __forceinline__ void cake_wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
"#
        .into(),
        Helper::WgmmaCommit => r#"// Close the warpgroup's pending wgmma.mma_async into one group.
static __device__ __forceinline__ void cake_wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
"#
        .into(),
        Helper::WgmmaWait => r#"// Wait until at most N wgmma groups are pending.
template <int N>
static __device__ __forceinline__ void cake_wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory");
}
"#
        .into(),
        Helper::FenceRegs => r#"// Compiler-only fence: the registers are read and written here, so no access to them moves across
// the asynchronous wgmma that reads and writes them behind the compiler's back.
template <int N>
static __device__ __forceinline__ void cake_fence_regs(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i]) :: "memory");
}
"#
        .into(),
        Helper::FenceRegsU32 => r#"// The same compiler-only fence for packed (f16x2) accumulator registers.
template <int N>
static __device__ __forceinline__ void cake_fence_regs(unsigned (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i]) :: "memory");
}
"#
        .into(),
        Helper::Wgmma { n, d, a, b } => wgmma_text(n, d, a, b),
        Helper::CpAsync16 => r#"// cp.async of 16 bytes global -> shared, bypassing L1; `src_bytes` < 16 zero-fills the rest.
static __device__ __forceinline__ void cake_cp_async_16(unsigned dst, const void* src, unsigned src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
"#
        .into(),
        Helper::CpAsyncCommit => r#"// Close this thread's pending cp.async copies into one group.
static __device__ __forceinline__ void cake_cp_async_commit() {
    asm volatile("cp.async.commit_group;" ::: "memory");
}
"#
        .into(),
        Helper::CpAsyncWait => r#"// Wait until at most N of this thread's cp.async groups are pending.
template <int N>
static __device__ __forceinline__ void cake_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
}
"#
        .into(),
        Helper::LdmatrixX4 => r#"// ldmatrix x4: four 8x8 16-bit matrices; lanes 8i..8i+7 give the row addresses of matrix i, and
// lane l receives row l/4, columns 2(l%4), 2(l%4)+1 of each matrix in r0..r3.
static __device__ __forceinline__ void cake_ldmatrix_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3, unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr) : "memory");
}
"#
        .into(),
        Helper::MmaBf16 => mma_text("bf16"),
        Helper::MmaF16 => mma_text("f16"),
        Helper::MmaF16Acc => r#"// mma.sync m16n8k16, f16 operands, f16 accumulators: d (2 registers of f16x2: elements 0,1 and 2,3 of the
// f32 accumulator layout) += a (4 packed regs, 16x16 row-major) · b (2 packed regs, 16x8 column-major).
static __device__ __forceinline__ void cake_mma_m16n8k16_f16_f16(unsigned& d0, unsigned& d1,
        unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};"
        : "+r"(d0), "+r"(d1)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
"#
        .into(),
        Helper::PackBf16x2 => r#"// Round two f32 to bf16 (nearest even) and pack them: `lo` at the lower address.
static __device__ __forceinline__ unsigned cake_pack_bf16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
"#
        .into(),
        Helper::CvtF8(d) => {
            let (t, max) = (wgmma_type(d), if d == DType::F8E4M3 { "448" } else { "57344" });
            format!(
                r#"// Round an f32 to fp8 {t} (nearest even, saturating to ±{max}): the byte of `x`, the low half of
// an {t}x2 pair (cvt puts its first operand in the upper byte).
static __device__ __forceinline__ unsigned char cake_cvt_{t}(float x) {{
    unsigned short r;
    asm("cvt.rn.satfinite.{t}x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x));
    return (unsigned char)(r & 0xFFu);
}}
"#
            )
        }
        Helper::PackF16x2 => r#"// Round two f32 to f16 (nearest even) and pack them: `lo` at the lower address.
static __device__ __forceinline__ unsigned cake_pack_f16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
"#
        .into(),
        Helper::UnpackF16x2 => r#"// One f16 of a packed pair (`hi` = 0: the lower half, the element at the lower address), as f32.
static __device__ __forceinline__ float cake_f16x2_get(unsigned r, int hi) {
    const unsigned short h = (unsigned short)(hi ? r >> 16 : r & 0xFFFFu);
    float f;
    asm("{ .reg .f16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
    return f;
}
"#
        .into(),
        Helper::F8Get(d) => {
            let t = wgmma_type(d);
            format!(
                r#"// An fp8 {t} byte as f32 (exact): widened to an f16 pair, the byte in the lower half.
static __device__ __forceinline__ float cake_{t}_get(unsigned char b) {{
    unsigned h2;
    asm("{{ .reg .b16 t; mov.b16 t, %1; cvt.rn.f16x2.{t}x2 %0, t; }}" : "=r"(h2) : "h"((unsigned short)b));
    return cake_f16x2_get(h2, 0);
}}
"#
            )
        }
        Helper::RoundBf16 => r#"// An f32 rounded to the nearest bf16 (held as the f32 of equal value).
static __device__ __forceinline__ float cake_round_bf16(float x) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x), "f"(0.0f));
    return __uint_as_float(r & 0xFFFF0000u);
}
"#
        .into(),
        Helper::RoundF16 => r#"// An f32 rounded to the nearest f16 (held as the f32 of equal value).
static __device__ __forceinline__ float cake_round_f16(float x) {
    float r;
    asm("{ .reg .f16 h; cvt.rn.f16.f32 h, %1; cvt.f32.f16 %0, h; }" : "=f"(r) : "f"(x));
    return r;
}
"#
        .into(),
        Helper::Swizzle => r#"// The shared-memory swizzle of a region with SPAN-byte swizzling (the TMA / CUTLASS Swizzle<b,4,3>
// pattern): the 16-byte chunk index (byte-offset bits 4..) is XORed with bits 7.. of the offset.
template <int SPAN>
static __device__ __forceinline__ unsigned cake_swizzle(unsigned off) {
    return off ^ (((off >> 7) & (SPAN / 16 - 1)) << 4);
}
"#
        .into(),
        Helper::StShared => r#"// Stores to 32-bit shared-window addresses (st.shared): 2, 4 and 2 × 4 bytes.
static __device__ __forceinline__ void cake_st_shared_u16(unsigned addr, unsigned short v) {
    asm volatile("st.shared.u16 [%0], %1;" :: "r"(addr), "h"(v) : "memory");
}
static __device__ __forceinline__ void cake_st_shared_u32(unsigned addr, unsigned v) {
    asm volatile("st.shared.u32 [%0], %1;" :: "r"(addr), "r"(v) : "memory");
}
static __device__ __forceinline__ void cake_st_shared_v2_u32(unsigned addr, unsigned lo, unsigned hi) {
    asm volatile("st.shared.v2.u32 [%0], {%1, %2};" :: "r"(addr), "r"(lo), "r"(hi) : "memory");
}
"#
        .into(),
        Helper::NamedBarrier => r#"// Named barrier `id` over `threads` threads (bar.sync orders their memory accesses).
static __device__ __forceinline__ void cake_named_barrier(unsigned id, unsigned threads) {
    asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");
}
"#
        .into(),
    }
}

fn mma_text(ty: &str) -> String {
    format!(
        r#"// mma.sync m16n8k16, {ty} operands, f32 accumulators: d (4 f32) += a (4 packed regs, 16x16 row-major)
// · b (2 packed regs, 16x8 column-major = our K-major b[N, K]).
static __device__ __forceinline__ void cake_mma_m16n8k16_f32_{ty}(float& d0, float& d1, float& d2, float& d3,
        unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.{ty}.{ty}.f32 {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};"
        : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}}
"#
    )
}

/// The PTX name of a wgmma operand or accumulator dtype.
pub(crate) fn wgmma_type(d: DType) -> &'static str {
    match d {
        DType::BF16 => "bf16",
        DType::F16 => "f16",
        DType::F32 => "f32",
        DType::F8E4M3 => "e4m3",
        DType::F8E5M2 => "e5m2",
        _ => "?",
    }
}

/// The helper's name: `cake_wgmma_m64n256k16_f32_bf16` (accumulator, then the operand dtype, or
/// both operand dtypes when they differ).
pub(crate) fn wgmma_name(n: u32, d: DType, a: DType, b: DType) -> String {
    let k = 32 / a.size_bytes();
    let ops = if a == b { wgmma_type(a).to_string() } else { format!("{}_{}", wgmma_type(a), wgmma_type(b)) };
    format!("cake_wgmma_m64n{n}k{k}_{}_{ops}", wgmma_type(d))
}

fn wgmma_text(n: u32, d: DType, a: DType, b: DType) -> String {
    let packed = d == DType::F16;
    let regs = if packed { n / 4 } else { n / 2 };
    let k = 32 / a.size_bytes();
    let (ta, tb, td) = (wgmma_type(a), wgmma_type(b), wgmma_type(d));
    let name = wgmma_name(n, d, a, b);
    let mut s = String::new();
    let operands = if a == b { format!("{ta} operands") } else { format!("{ta} × {tb} operands") };
    let (acc_words, rtype, cons) = if packed {
        (format!("{regs} f16x2 registers per thread, the m64n{n} accumulator layout packed in pairs"), "unsigned", "+r")
    } else {
        (format!("{regs} f32 per thread, the m64n{n} accumulator layout"), "float", "+f")
    };
    let _ = writeln!(
        s,
        "// wgmma m64n{n}k{k}, {operands} from shared-memory descriptors (both K-major), {td} accumulators:\n\
         // d ({acc_words}) = a · bᵀ + (scale_d ? d : 0).\n\
         static __device__ __forceinline__ void {name}({rtype} (&d)[{regs}], unsigned long long desc_a, unsigned long long desc_b, int scale_d) {{"
    );
    let dlist: Vec<String> = (0..regs).map(|i| format!("%{i}")).collect();
    let _ = writeln!(s, "    asm volatile(");
    let _ = writeln!(s, "        \"{{ .reg .pred p; setp.ne.b32 p, %{}, 0;\\n\"", regs + 2);
    let _ = writeln!(s, "        \"wgmma.mma_async.sync.aligned.m64n{n}k{k}.{td}.{ta}.{tb} {{\"");
    for chunk in dlist.chunks(16) {
        let _ = writeln!(s, "        \"{}\"", chunk.join(", ") + if chunk.last() == dlist.last() { "" } else { ", " });
    }
    // 16-bit operands take the transpose immediates (0: K-major); 8-bit ones have none.
    let imm = if a.size_bytes() == 2 { "1, 1, 0, 0" } else { "1, 1" };
    let _ = writeln!(s, "        \"}}, %{}, %{}, p, {imm}; }}\\n\"", regs, regs + 1);
    let outs: Vec<String> = (0..regs).map(|i| format!("\"{cons}\"(d[{i}])")).collect();
    let _ = write!(s, "        :");
    for (k, chunk) in outs.chunks(8).enumerate() {
        if k > 0 {
            let _ = write!(s, "\n         ");
        }
        let _ = write!(s, " {}", chunk.join(", "));
        if (k + 1) * 8 < outs.len() {
            let _ = write!(s, ",");
        }
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "        : \"l\"(desc_a), \"l\"(desc_b), \"r\"(scale_d)");
    let _ = writeln!(s, "        : \"memory\");");
    let _ = writeln!(s, "}}");
    s
}
