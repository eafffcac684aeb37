//! The int8 GEMM of many activation rows (prefill): weight rows in panels of 16, each 4-value
//! quad of a panel's rows in one 64-byte line, met by a broadcast quad of one activation row in
//! one `vpdpbusd` per plane (panels_avx512.rs). Sixteen outputs share every instruction, so the
//! f32 work is once per block of 32 values, not once per 4 as in the decode path's lanes.
//!
//! Numerics (a definition of its own, not mod.rs's lane one; every path follows it step for step,
//! so the tiling, m and the instruction set never show in the bits):
//! - activations as mod.rs quantizes them (two planes, q = 256·hi + lo, d_x per block);
//! - per block b of 32 values, in one exact i32: isum_b = Σ u·q − o·Σ q (u the weight's unsigned
//!   levels, o its offset as in mod.rs; |isum_b| < 2^29);
//! - acc = 0, then for b = 0, 1, … in order: acc = fma(f32(isum_b), d_w[b]·d_x[b], acc), and for
//!   Q4_1/Q5_1 acc = fma(m_w[b], d_x[b]·Σ q, acc) (mod.rs's s); the output is acc.
//!
//! Formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K (the others keep the f32 tile above 16 rows). Each output
//! depends only on its activation row and weight row, so chunked and whole prefills of more than
//! `INT8_MAX_M` rows agree bit for bit; below it the decode path's lane definition runs instead.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // its only kernel is AVX-512's (panels_avx512.rs)

use rayon::prelude::*;

use super::reference::unpack_chunk;
use super::{Kind, WChunk, XChunk};

/// Weight rows per panel: one 64-byte line holds one quad of each.
pub const PANEL_ROWS: usize = 16;

/// The chunk lanes (mod.rs's lane order) that hold block `half` of a chunk, in value order.
pub const fn block_lanes(half: usize) -> [usize; 8] {
    let h = 4 * half;
    [h, h + 1, h + 2, h + 3, h + 8, h + 9, h + 10, h + 11]
}

/// One chunk (two blocks) of a panel's 16 weight rows.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub struct PanelChunk {
    /// quads[L][4r..4r + 4]: row r's levels at chunk lane L (values 4L..4L + 4 in lane order).
    pub quads: [[u8; 64]; 16],
    /// d_w of block `half` of row r: dw[half][r].
    pub dw: [[f32; 16]; 2],
    /// m_w likewise (formats with a minimum), else 0.
    pub mw: [[f32; 16]; 2],
}

impl PanelChunk {
    pub const ZERO: PanelChunk = PanelChunk { quads: [[0; 64]; 16], dw: [[0.0; 16]; 2], mw: [[0.0; 16]; 2] };
}

/// What one block of one activation row needs beyond its bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct XBlock {
    /// Σ q over the block, shifted by the format's offset (o·Σ q), or 0 without one.
    pub corr: i32,
    pub dx: f32,
    /// d_x·Σ q (mod.rs's s).
    pub s: f32,
}

/// Whether `kind` has this GEMM.
pub const fn handles(kind: Kind) -> bool {
    // Q6_K's scales change every 16 values, inside a block: not this definition's one per block.
    matches!(kind, Kind::Q4_0 | Kind::Q4_1 | Kind::Q5_0 | Kind::Q5_1 | Kind::Q8_0 | Kind::Q4_K | Kind::Q5_K)
}

/// The blocks of quantized activation rows (c chunks each, `blocks` blocks of 32 values each) as
/// XBlocks: [rows, blocks].
/// Rows go to the thread pool: on one thread this held the other cores up before every panel GEMM.
pub fn x_blocks(kind: Kind, x: &[XChunk], c: usize, blocks: usize) -> Vec<XBlock> {
    let shift = kind.offset_shift();
    let mut out = vec![XBlock::default(); x.len() / c * blocks];
    if blocks == 0 {
        return out;
    }
    out.par_chunks_mut(blocks).zip(x.par_chunks_exact(c)).for_each(|(out, row)| {
        for (b, o) in out.iter_mut().enumerate() {
            let (chunk, half) = (&row[b / 2], b % 2);
            let qsum: i32 = block_lanes(half).iter().map(|&l| chunk.sum4[l]).sum();
            let corr = shift.map_or(0, |s| qsum << s);
            *o = XBlock { corr, dx: chunk.dx[4 * half], s: chunk.s[4 * half] };
        }
    });
    out
}

/// Writes weight row `r` (< PANEL_ROWS) of a panel from its unpacked chunks.
pub fn fill_row(panel: &mut [PanelChunk], r: usize, row: &[WChunk]) {
    for (p, w) in panel.iter_mut().zip(row) {
        for (l, quad) in p.quads.iter_mut().enumerate() {
            quad[4 * r..4 * r + 4].copy_from_slice(&w.u[4 * l..4 * l + 4]);
        }
        for half in 0..2 {
            p.dw[half][r] = w.dw[4 * half];
            p.mw[half][r] = w.mw[4 * half];
        }
    }
}

/// The output for one activation row (its chunks and XBlocks) and one weight row: the definition
/// the fast kernels equal.
#[cfg_attr(not(test), allow(dead_code))] // the kernels run it only in tests
pub fn dot_ref(kind: Kind, row: &[u8], x: &[XChunk], xb: &[XBlock]) -> f32 {
    let blocks = kind.row_values(row.len()) / 32;
    let mut acc = 0.0f32;
    let mut w = WChunk::ZERO;
    for (b, xb) in xb.iter().enumerate().take(blocks) {
        let (c, half) = (b / 2, b % 2);
        if half == 0 {
            w = unpack_chunk(kind, row, c);
        }
        let q = |p: usize| 256 * i32::from(x[c].q[p]) + i32::from(x[c].lo[p]);
        let dot: i32 = block_lanes(half).iter().flat_map(|&l| 4 * l..4 * l + 4).map(|p| i32::from(w.u[p]) * q(p)).sum();
        let isum = dot - xb.corr;
        acc = (isum as f32).mul_add(w.dw[4 * half] * xb.dx, acc);
        if kind.has_min() {
            acc = w.mw[4 * half].mul_add(xb.s, acc);
        }
    }
    acc
}
