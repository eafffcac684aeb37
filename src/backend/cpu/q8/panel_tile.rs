//! The panel GEMM's driver (above both panels.rs, its layout and definition, and
//! panels_avx512.rs, its kernel): which CPUs run it, and one task's tile of weight rows.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_imports))] // the driver runs only the AVX-512 kernel

use super::panels::{PANEL_ROWS, PanelChunk, XBlock, fill_row, handles};
use super::{Kind, WChunk, XChunk};

/// Whether this CPU runs the panel GEMM for `kind`.
pub fn runs(kind: Kind) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        handles(kind) && *super::avx512::AVAILABLE
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = kind;
        false
    }
}

#[cfg(target_arch = "x86_64")]
thread_local! {
    /// One unpacked weight row, then the current tile's panels: [panels, chunks].
    static SCRATCH: std::cell::RefCell<(Vec<WChunk>, Vec<PanelChunk>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// dst[i, j] for j in `cols`, every i < m, the panel way. Panics unless `runs(kind)`.
///
/// # Safety
/// No other thread may touch columns `cols` of `out` meanwhile.
#[cfg(target_arch = "x86_64")]
pub unsafe fn tile(
    w: &crate::backend::cpu::buffer::CpuWeight,
    kind: Kind,
    (x, xb): (&[XChunk], &[XBlock]),
    (m, n): (usize, usize),
    cols: std::ops::Range<usize>,
    out: &crate::backend::cpu::columns::Columns,
) {
    let (c, blocks) = (x.len() / m, xb.len() / m);
    SCRATCH.with_borrow_mut(|(row, panels)| {
        row.resize(c, WChunk::ZERO);
        // No zeroing: fill_row overwrites every row in cols, and the last panel's rows past it
        // keep what an earlier tile left (or zeros): the kernel's lanes are independent and
        // those rows' outputs are never written.
        panels.resize(cols.len().div_ceil(PANEL_ROWS) * c, PanelChunk::ZERO);
        for (r, j) in cols.clone().enumerate() {
            super::avx512::unpack_row(kind, w.row(j), row);
            let p = r / PANEL_ROWS;
            fill_row(&mut panels[p * c..(p + 1) * c], r % PANEL_ROWS, row);
        }
        super::panels_avx512::gemm(kind, panels, c, x, xb, blocks, |i, p, v| {
            let j = cols.start + p * PANEL_ROWS;
            let len = PANEL_ROWS.min(cols.end - j);
            // SAFETY: columns j..j + len belong to this task (the caller's contract).
            unsafe {
                if len == PANEL_ROWS {
                    out.write16(i * n + j, v);
                } else {
                    out.write_run(i * n + j, &v[..len]);
                }
            }
        });
    });
}
