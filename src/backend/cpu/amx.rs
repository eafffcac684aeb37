//! Intel AMX tiles (x86-64 Linux): whether this process may use them, and the one tile product
//! the CPU backend runs on them, a bf16 GEMM with f32 accumulators (`tdpbf16ps`).
//!
//! Eight tile registers of 16 rows × 64 bytes each, configured per thread (`ldtilecfg`) and
//! released after each kernel call, so a preempted worker does not carry 8 KiB of tile state.
//! Rust has no stable AMX intrinsics, so the instructions are inline `asm!`: the tile registers are
//! not visible to the compiler, and no other code in the process uses them.

use std::arch::asm;
use std::arch::x86_64::*;
use std::sync::LazyLock;

/// bf16 values per tile row: 64 bytes.
pub const TILE_K: usize = 32;
/// Rows of every tile, and f32 columns of an accumulator tile.
pub const TILE_ROWS: usize = 16;
/// bf16 values in one 16 × 32 tile (1 KiB).
pub const TILE_VALUES: usize = TILE_ROWS * TILE_K;

/// Whether this process runs the AMX kernels: the CPU has AMX-TILE and AMX-BF16 and AVX-512 BF16
/// (for packing), the OS saves tile state (XCR0 bits 17 and 18), Linux granted this process
/// tile data (`arch_prctl(ARCH_REQ_XCOMP_PERM)`, asked once here), and `ULTRA_CPU_DISABLE` does
/// not list `amx` (nor `avx512`, which turns the packing off).
pub static AVAILABLE: LazyLock<bool> = LazyLock::new(|| {
    *super::avx512::AVAILABLE
        && is_x86_feature_detected!("avx512bf16")
        && !super::isa::disabled("amx")
        && cpu_has_amx()
        // SAFETY: the CPU has XSAVE (AMX implies it; checked by cpu_has_amx's leaf 1 bit).
        && unsafe { os_saves_tiles() }
        && permission()
});

/// CPUID leaf 7: EDX bits 22 (AMX-BF16) and 24 (AMX-TILE); leaf 1 ECX bit 27 (OSXSAVE).
fn cpu_has_amx() -> bool {
    let (l1, l7) = (__cpuid(1), __cpuid_count(7, 0));
    let osxsave = l1.ecx & (1 << 27) != 0;
    osxsave && l7.edx & (1 << 22) != 0 && l7.edx & (1 << 24) != 0
}

/// XCR0 has XTILECFG (bit 17) and XTILEDATA (bit 18): the OS context-switches tile state.
///
/// # Safety
/// The CPU has XSAVE and the OS enabled it (OSXSAVE).
#[target_feature(enable = "xsave")]
unsafe fn os_saves_tiles() -> bool {
    // SAFETY: the caller's contract (XGETBV with XCR0 needs only OSXSAVE).
    let xcr0 = unsafe { _xgetbv(0) };
    xcr0 & (0b11 << 17) == 0b11 << 17
}

/// Linux (5.16 on) hands tile data to a process only when asked: without it the first tile
/// instruction faults. Refusal (an older kernel, a sandbox) leaves AMX off.
fn permission() -> bool {
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: arch_prctl with this request only changes the process's permitted XSAVE features.
    unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 }
}

/// The palette-1 tile configuration: all eight tiles 16 rows × 64 bytes (tmm0–3 the f32
/// accumulators, tmm4–5 the first operand, tmm6–7 the second).
#[repr(C, align(64))]
struct Config([u8; 64]);

const CONFIG: Config = {
    let mut c = [0u8; 64];
    c[0] = 1; // palette 1
    let mut t = 0;
    while t < 8 {
        c[16 + 2 * t] = 64; // bytes per row (u16, little-endian)
        c[48 + t] = TILE_ROWS as u8;
        t += 1;
    }
    Config(c)
};

/// Runs `f` with the tile registers configured (palette 1: all eight 16 rows × 64 bytes) and
/// releases them after, so a preempted worker does not carry 8 KiB of tile state between calls.
/// Panics unless `AVAILABLE`.
pub fn with_tiles<R>(f: impl FnOnce() -> R) -> R {
    assert!(*AVAILABLE, "AMX tiles used without AVAILABLE");
    // SAFETY: AVAILABLE (the CPU has AMX-TILE and this process may use it).
    unsafe { configure() };
    let r = f();
    // SAFETY: as above.
    unsafe { asm!("tilerelease", options(nostack, nomem)) };
    r
}

/// # Safety
/// `AVAILABLE`.
#[target_feature(enable = "avx512f")]
unsafe fn configure() {
    // SAFETY: the caller's contract; CONFIG is a valid palette-1 configuration.
    unsafe { asm!("ldtilecfg [{0}]", in(reg) CONFIG.0.as_ptr(), options(nostack, readonly)) };
}

/// C[g][h] = Σ_k A_g[r][k] · B_h[c][k] for a 2 × 2 block of 16 × 16 f32 tiles over `steps`
/// 32-value slices of k, stored at `c[2g + h]` with rows `c_stride` bytes apart (dst itself, or
/// a buffer at the edges). Operands are packed 1 KiB tiles, slice s of A_g at
/// `a[g] + s · TILE_VALUES`, of B_h at `b[h] + s · TILE_VALUES`: A in rows of 32 bf16 (row r
/// holds the slice of x row r), B in the pair-interleaved layout `tdpbf16ps` multiplies against
/// (row p holds, for each of its 16 columns c, values 2p and 2p + 1 of weight row c). The tile
/// unit sums each pair in f32 and adds it to the accumulator in a fixed order, so every output
/// depends only on its own row of A and column of B: the same bits whatever the batch.
///
/// # Safety
/// Inside `with_tiles`; a[g] and b[h] each point at `steps` tiles; each c[t] at 16 rows of 16
/// writable floats, `c_stride` bytes apart, that no other thread touches.
#[target_feature(enable = "avx512f")]
pub unsafe fn product_2x2(a: [*const u16; 2], b: [*const u16; 2], steps: usize, c: [*mut f32; 4], c_stride: usize) {
    const TILE_BYTES: usize = TILE_VALUES * 2;
    // SAFETY: the caller's contract; each tile row is 64 bytes, rows 64 bytes apart.
    unsafe {
        asm!("tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3", options(nostack, nomem));
        for s in 0..steps {
            let at = |p: *const u16| p.cast::<u8>().add(s * TILE_BYTES);
            asm!(
                "tileloadd tmm4, [{a0} + {stride}]",
                "tileloadd tmm5, [{a1} + {stride}]",
                "tileloadd tmm6, [{b0} + {stride}]",
                "tileloadd tmm7, [{b1} + {stride}]",
                "tdpbf16ps tmm0, tmm4, tmm6",
                "tdpbf16ps tmm1, tmm4, tmm7",
                "tdpbf16ps tmm2, tmm5, tmm6",
                "tdpbf16ps tmm3, tmm5, tmm7",
                a0 = in(reg) at(a[0]), a1 = in(reg) at(a[1]), b0 = in(reg) at(b[0]), b1 = in(reg) at(b[1]),
                stride = in(reg) 64usize,
                options(nostack, readonly),
            );
        }
        asm!(
            "tilestored [{c0} + {stride}], tmm0",
            "tilestored [{c1} + {stride}], tmm1",
            "tilestored [{c2} + {stride}], tmm2",
            "tilestored [{c3} + {stride}], tmm3",
            c0 = in(reg) c[0], c1 = in(reg) c[1], c2 = in(reg) c[2], c3 = in(reg) c[3],
            stride = in(reg) c_stride,
            options(nostack),
        );
    }
}

/// f32 → bf16, rounding to nearest even (`vcvtne2ps2bf16`): 32 values, low 16 from `lo`,
/// stored at `dst` as one 64-byte store.
///
/// # Safety
/// The CPU has AVX-512 F and BF16 (`AVAILABLE`).
#[inline]
#[target_feature(enable = "avx512f,avx512bf16")]
pub unsafe fn store_bf16x32(lo: &[f32; 16], hi: &[f32; 16], dst: &mut [u16; 32]) {
    // SAFETY: 16 floats each in; 64 bytes of bf16 out.
    unsafe {
        let v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(hi.as_ptr()), _mm512_loadu_ps(lo.as_ptr()));
        _mm512_storeu_si512(dst.as_mut_ptr().cast(), std::mem::transmute::<__m512bh, __m512i>(v));
    }
}

/// The bf16 nearest to `x` (ties to even), as `store_bf16x32` rounds: the tests' reference.
#[cfg(test)]
pub fn bf16_round(x: f32) -> f32 {
    let b = x.to_bits();
    f32::from_bits(b.wrapping_add(0x7fff + ((b >> 16) & 1)) & 0xffff_0000)
}
