//! Which instruction sets the CPU kernels use, decided once per process: what the CPU has, less
//! what `ULTRA_CPU_DISABLE` turns off. Every path gives the same bits, so this only changes speed.
//! Below both simd.rs and avx512.rs, which each ask it.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // asked by the x86-64 paths only

use std::sync::LazyLock;

/// Whether this CPU runs the AVX2+FMA kernels (decided once, so results never change mid-run).
static USE_AVX2_FMA: LazyLock<bool> = LazyLock::new(|| {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") && !disabled("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
});

/// Whether `ULTRA_CPU_DISABLE` (a comma-separated list of `avx512`, `avx2`; read once) turns the
/// kernels of `isa` off. `avx2` turns AVX-512 off too, leaving the portable path. Every path gives
/// the same bits, so this only changes speed (and lets one machine test every path).
pub fn disabled(isa: &str) -> bool {
    static LIST: LazyLock<String> = LazyLock::new(|| std::env::var("ULTRA_CPU_DISABLE").unwrap_or_default());
    LIST.split(',').any(|x| x.trim().eq_ignore_ascii_case(isa))
}

/// Whether the AVX2+FMA kernels run (simd.rs, avx512.rs, kquant/).
pub fn avx2_fma() -> bool {
    *USE_AVX2_FMA
}
