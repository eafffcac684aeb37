//! AVX-512 VNNI kernel of the panel GEMM (panels.rs's numerics, step for step): R activation
//! rows × P panels of 16 weight rows at a time. Per block, each of its 8 quads loads the P panel
//! lines once and broadcasts each row's quad of both planes; one `vpdpbusd` per (row, panel,
//! plane) sums into i32 lanes, so a block ends with one convert and one FMA per 16 outputs.

use std::arch::x86_64::*;

use super::panels::{PANEL_ROWS, PanelChunk, XBlock, block_lanes};
use super::tags::{Q4_0, Q4_1, kind_of};
use super::{Kind, XChunk};

/// Activation rows per kernel call: 6 accumulators per (row, panel pair) keep 24 of the 32
/// registers busy at 4 rows.
const ROWS: usize = 4;

/// The 16 outputs of each (row i0 + r, panel p) pair: acc[r][p].
///
/// # Safety
/// The CPU has AVX-512 F/BW/VNNI; x and xb hold rows i0..i0 + R (c chunks and `blocks` XBlocks
/// each), every panel holds c chunks, and blocks ≤ 2c.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn rows<const K: u8, const P: usize, const R: usize>(
    panels: [&[PanelChunk]; P],
    x: &[XChunk],
    xb: &[XBlock],
    c: usize,
    blocks: usize,
    i0: usize,
) -> [[__m512; P]; R] {
    let kind = kind_of(K);
    let mut acc = [[_mm512_setzero_ps(); P]; R];
    for ch in 0..c {
        for half in 0..2 {
            let b = 2 * ch + half;
            if b >= blocks {
                break;
            }
            let mut hi = [[_mm512_setzero_si512(); P]; R];
            let mut lo = [[_mm512_setzero_si512(); P]; R];
            for l in block_lanes(half) {
                // SAFETY: PanelChunk lines are 64-byte aligned; ch < c (the caller's contract).
                let w: [__m512i; P] =
                    std::array::from_fn(|p| unsafe { _mm512_load_si512(panels[p][ch].quads[l].as_ptr().cast()) });
                for r in 0..R {
                    let xc = &x[(i0 + r) * c + ch];
                    // SAFETY: bytes 4l..4l + 4 of 64 (l < 16).
                    let (qh, ql) = unsafe {
                        (
                            _mm512_set1_epi32(xc.q.as_ptr().add(4 * l).cast::<i32>().read_unaligned()),
                            _mm512_set1_epi32(xc.lo.as_ptr().add(4 * l).cast::<i32>().read_unaligned()),
                        )
                    };
                    for p in 0..P {
                        hi[r][p] = _mm512_dpbusd_epi32(hi[r][p], w[p], qh);
                        lo[r][p] = _mm512_dpbusd_epi32(lo[r][p], w[p], ql);
                    }
                }
            }
            for r in 0..R {
                let xbk = xb[(i0 + r) * blocks + b];
                let (corr, dx, s) = (_mm512_set1_epi32(xbk.corr), _mm512_set1_ps(xbk.dx), _mm512_set1_ps(xbk.s));
                for p in 0..P {
                    let isum = _mm512_sub_epi32(_mm512_add_epi32(_mm512_slli_epi32::<8>(hi[r][p]), lo[r][p]), corr);
                    let chunk = &panels[p][ch];
                    // SAFETY: 16 aligned floats each.
                    let (dw, mw) =
                        unsafe { (_mm512_load_ps(chunk.dw[half].as_ptr()), _mm512_load_ps(chunk.mw[half].as_ptr())) };
                    acc[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, dx), acc[r][p]);
                    if kind.has_min() {
                        acc[r][p] = _mm512_fmadd_ps(mw, s, acc[r][p]);
                    }
                }
            }
        }
    }
    acc
}

/// Every (row, panel) of x against panels [n_panels, c], R rows and P panels per call.
///
/// # Safety
/// As `rows`, for every row of x and every panel.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn gemm_k<const K: u8>(
    panels: &[PanelChunk],
    c: usize,
    x: &[XChunk],
    xb: &[XBlock],
    blocks: usize,
    mut write: impl FnMut(usize, usize, &[f32; PANEL_ROWS]),
) {
    let (m, n_panels) = (x.len() / c, panels.len() / c);
    let panel = |p: usize| &panels[p * c..(p + 1) * c];
    let mut emit = |i0: usize, p0: usize, acc: &[__m512]| {
        for (p, v) in acc.iter().enumerate() {
            let mut out = [0.0f32; PANEL_ROWS];
            // SAFETY: 16 floats.
            unsafe { _mm512_storeu_ps(out.as_mut_ptr(), *v) };
            write(i0, p0 + p, &out);
        }
    };
    macro_rules! run {
        ($p:expr, $r:expr, $p0:expr, $i0:expr) => {{
            let ps: [&[PanelChunk]; $p] = std::array::from_fn(|t| panel($p0 + t));
            // SAFETY: rows i0..i0 + R exist (loop bounds); the caller's contract for the rest.
            let acc = unsafe { rows::<K, $p, $r>(ps, x, xb, c, blocks, $i0) };
            for (r, a) in acc.iter().enumerate() {
                emit($i0 + r, $p0, a);
            }
        }};
    }
    let m_full = m / ROWS * ROWS;
    for p0 in (0..n_panels).step_by(2) {
        let pair = p0 + 1 < n_panels;
        for i0 in (0..m_full).step_by(ROWS) {
            if pair { run!(2, ROWS, p0, i0) } else { run!(1, ROWS, p0, i0) }
        }
        for i0 in m_full..m {
            if pair { run!(2, 1, p0, i0) } else { run!(1, 1, p0, i0) }
        }
    }
}

/// write(i, p, outputs of activation row i against the 16 rows of panel p) for every pair.
/// Panics unless the CPU has the kernel (avx512.rs's AVAILABLE), `kind` is one panels.rs handles,
/// and the lengths hold whole rows (x: c chunks, xb: `blocks` ≤ 2c blocks, panels: c chunks).
pub fn gemm(
    kind: Kind,
    panels: &[PanelChunk],
    c: usize,
    x: &[XChunk],
    xb: &[XBlock],
    blocks: usize,
    write: impl FnMut(usize, usize, &[f32; PANEL_ROWS]),
) {
    let whole = c > 0 && x.len().is_multiple_of(c) && panels.len().is_multiple_of(c) && blocks <= 2 * c;
    assert!(
        *super::avx512::AVAILABLE && super::panels::handles(kind) && whole && xb.len() == x.len() / c * blocks,
        "panels gemm: CPU, format or lengths"
    );
    macro_rules! go {
        ($k:expr) => {
            // SAFETY: checked above.
            unsafe { gemm_k::<{ $k }>(panels, c, x, xb, blocks, write) }
        };
    }
    // The kernel tells formats apart only by whether they have a minimum (the offsets are in the
    // XBlocks): one instance for each.
    if kind.has_min() { go!(Q4_1) } else { go!(Q4_0) }
}
