//! How a register fragment is spread over the threads that hold it.
//!
//! Every layout here is a view of the tensor-core accumulator layout (PTX ISA: wgmma `m64nNk16`
//! D fragment, mma.sync `m16n8k16` C/D fragment), which are the same per warp:
//!
//! * [`Layout::Acc`] — a `[16·m_tiles, 8·n_tiles]` tile per warp (per warpgroup: 64 rows, warp w
//!   of the group owning rows 16w..16w+15). Register `i` of a thread holds
//!   `row = base + 16·(i / 4 / n_tiles) + lane / 4 + 8·((i % 4) / 2)`,
//!   `col = 8·((i / 4) % n_tiles) + 2·(lane % 4) + i % 2`, where `base` is `16·(warp % 4)` for a
//!   warpgroup fragment and 0 for a warp fragment. A 64×N f32 wgmma accumulator is N/2 registers.
//! * [`Layout::Rows`] — a row vector of an accumulator (the result of a reduction over axis 1):
//!   register `i` holds `row = base + 16·(i / 2) + lane / 4 + 8·(i % 2)`; the four lanes of a quad
//!   hold the same values.
//! * [`Layout::MmaA`] / [`Layout::MmaB`] — mma.sync operand fragments of 16-bit elements, packed
//!   two per 32-bit register: A `[16·m_tiles, 16·k_tiles]` has 4 registers per (m, k) tile, B
//!   `[8·n_tiles, 16·k_tiles]` (K-major, our `b[N, K]`) has 2 per (n, k) tile.
//! * [`Layout::Scalar`] — a rank-0 fragment: one value per thread.
//! * [`Layout::Uniform`] — a small fragment (at most [`UNIFORM_MAX`] elements) held whole by every
//!   thread of its scope, element `i` (row-major) in register `i`: a per-thread array, or per-warp
//!   running state (a row's max and sum) that warp-wide reductions give every lane alike.

use crate::ir::DType;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    Acc { m_tiles: u32, n_tiles: u32, wg: bool },
    Rows { m_tiles: u32, wg: bool },
    MmaA { m_tiles: u32, k_tiles: u32 },
    MmaB { n_tiles: u32, k_tiles: u32 },
    Scalar,
    Uniform { n: u32 },
}

/// The most elements a [`Layout::Uniform`] fragment holds (registers per thread).
pub(crate) const UNIFORM_MAX: i64 = 32;

impl Layout {
    /// Registers (array elements) per thread.
    pub fn regs(self) -> u32 {
        match self {
            Layout::Acc { m_tiles, n_tiles, .. } => m_tiles * n_tiles * 4,
            Layout::Rows { m_tiles, .. } => m_tiles * 2,
            Layout::MmaA { m_tiles, k_tiles } => m_tiles * k_tiles * 4,
            Layout::MmaB { n_tiles, k_tiles } => n_tiles * k_tiles * 2,
            Layout::Scalar => 1,
            Layout::Uniform { n } => n,
        }
    }

    /// Elements per register: 2 for the packed mma operand layouts.
    pub fn packed(self) -> bool {
        matches!(self, Layout::MmaA { .. } | Layout::MmaB { .. })
    }

    /// The shape the layout holds (per warp or warpgroup).
    pub fn shape(self) -> Vec<i64> {
        match self {
            Layout::Acc { m_tiles, n_tiles, wg } => {
                vec![if wg { 64 } else { 16 * m_tiles as i64 }, 8 * n_tiles as i64]
            }
            Layout::Rows { m_tiles, wg } => vec![if wg { 64 } else { 16 * m_tiles as i64 }],
            Layout::MmaA { m_tiles, k_tiles } => vec![16 * m_tiles as i64, 16 * k_tiles as i64],
            Layout::MmaB { n_tiles, k_tiles } => vec![8 * n_tiles as i64, 16 * k_tiles as i64],
            Layout::Scalar => vec![],
            Layout::Uniform { n } => vec![i64::from(n)],
        }
    }

    /// Whether every thread holds every element (so any element is a register of any thread).
    pub fn whole_in_each_thread(self) -> bool {
        matches!(self, Layout::Scalar | Layout::Uniform { .. })
    }

    pub fn describe(self) -> String {
        match self {
            Layout::Acc { n_tiles, wg: true, .. } => {
                format!("wgmma m64n{} accumulator layout, {} registers per thread", 8 * n_tiles, self.regs())
            }
            Layout::Acc { m_tiles, n_tiles, wg: false } => format!(
                "mma.sync accumulator layout ({}×{} tiles of 16×8), {} registers per thread",
                m_tiles,
                n_tiles,
                self.regs()
            ),
            Layout::Rows { wg, .. } => format!(
                "row vector of the {} accumulator layout, {} registers per thread (replicated over each lane quad)",
                if wg { "wgmma" } else { "mma.sync" },
                self.regs()
            ),
            Layout::MmaA { m_tiles, k_tiles } => {
                format!("mma.sync A operand layout ({m_tiles}×{k_tiles} tiles of 16×16), {} packed registers", self.regs())
            }
            Layout::MmaB { n_tiles, k_tiles } => {
                format!("mma.sync B operand layout ({n_tiles}×{k_tiles} tiles of 8×16), {} packed registers", self.regs())
            }
            Layout::Scalar => "one value per thread".into(),
            Layout::Uniform { n } => format!("the whole fragment in every thread of its scope, {n} registers"),
        }
    }

    /// The row base of the thread's warp inside the fragment (C expression).
    fn base(wg: bool) -> &'static str {
        if wg {
            "16 * (cake_warp % 4) + "
        } else {
            ""
        }
    }

    /// C expression: the row (axis 0) of register `i` (a C expression, constant after unrolling).
    pub fn row(self, i: &str) -> Option<String> {
        match self {
            Layout::Acc { n_tiles, wg, .. } => Some(format!(
                "{}16 * (({i}) / 4 / {n_tiles}) + cake_lane / 4 + 8 * ((({i}) % 4) / 2)",
                Self::base(wg)
            )),
            Layout::Rows { wg, .. } => Some(format!("{}16 * (({i}) / 2) + cake_lane / 4 + 8 * (({i}) % 2)", Self::base(wg))),
            _ => None,
        }
    }

    /// C expression: the column (axis 1) of register `i`.
    pub fn col(self, i: &str) -> Option<String> {
        match self {
            Layout::Acc { n_tiles, .. } => Some(format!("8 * ((({i}) / 4) % {n_tiles}) + 2 * (cake_lane % 4) + ({i}) % 2")),
            _ => None,
        }
    }

    /// The column of register `i` split as `register part + lane part` (C expressions): the first
    /// depends on the register alone (a constant after unrolling), the second on the lane alone
    /// (the same for every register of a thread). Their sum is [`Layout::col`].
    pub fn col_parts(self, i: &str) -> Option<(String, &'static str)> {
        match self {
            Layout::Acc { n_tiles, .. } => Some((format!("8 * ((({i}) / 4) % {n_tiles}) + ({i}) % 2"), "2 * (cake_lane % 4)")),
            _ => None,
        }
    }

    /// The layout of a reduction over `axis`.
    pub fn reduced(self, axis: i64) -> Option<Layout> {
        match (self, axis) {
            (Layout::Acc { m_tiles, wg, .. }, 1) => Some(Layout::Rows { m_tiles, wg }),
            _ => None,
        }
    }
}

/// The C type of one register of a fragment with this dtype (16-bit floats are held as f32 values
/// that are exactly representable in the narrow type; packed operand layouts use `unsigned`).
pub(crate) fn reg_ctype(dtype: DType, layout: Layout) -> Option<&'static str> {
    if layout.packed() {
        return matches!(dtype, DType::BF16 | DType::F16).then_some("unsigned");
    }
    Some(match dtype {
        DType::F32 | DType::BF16 | DType::F16 => "float",
        DType::I32 => "int",
        DType::U32 => "unsigned",
        DType::I64 => "long long",
        DType::Bool => "bool",
        DType::F8E4M3 | DType::F8E5M2 => return None,
    })
}

/// The C type of a scalar value of `dtype` (16-bit floats computed in f32).
pub(crate) fn scalar_ctype(dtype: DType) -> Option<&'static str> {
    reg_ctype(dtype, Layout::Scalar)
}

/// The C element type of a global tensor or shared region of `dtype` (storage).
pub(crate) fn mem_ctype(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool | DType::F8E4M3 | DType::F8E5M2 => "unsigned char",
        DType::I32 => "int",
        DType::U32 => "unsigned",
        DType::I64 => "long long",
        DType::F32 => "float",
        DType::F16 | DType::BF16 => "unsigned short",
    }
}
