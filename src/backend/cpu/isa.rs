//! Which instruction sets the CPU kernels use, decided once per process: what the CPU has, less
//! what `ULTRA_CPU_DISABLE` turns off. Every path gives the same bits, so this only changes speed.
//! Below simd.rs, avx512.rs, neon.rs and q8/, which each ask it.

use std::sync::LazyLock;

/// Whether this CPU runs the AVX2+FMA kernels (decided once, so results never change mid-run).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // asked by the x86-64 paths only
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

/// Whether this CPU runs the NEON kernels (aarch64; decided once, like AVX2).
static USE_NEON: LazyLock<bool> = LazyLock::new(|| {
    #[cfg(target_arch = "aarch64")]
    {
        std::arch::is_aarch64_feature_detected!("neon") && !disabled("neon")
    }
    #[cfg(not(target_arch = "aarch64"))]
    {
        false
    }
});

/// Whether the NEON kernels may use the Armv8.2 dot product (`sdot`).
static USE_DOTPROD: LazyLock<bool> = LazyLock::new(|| {
    #[cfg(target_arch = "aarch64")]
    {
        *USE_NEON && std::arch::is_aarch64_feature_detected!("dotprod") && !disabled("dotprod")
    }
    #[cfg(not(target_arch = "aarch64"))]
    {
        false
    }
});

/// Whether `ULTRA_CPU_DISABLE` (a comma-separated list of `avx512`, `avx2`, `neon`, `dotprod`,
/// `amx`; read once) turns the kernels of `isa` off. `avx2` turns AVX-512 off too, leaving the
/// portable path; `neon` turns `dotprod` off too. Every path gives the same bits, so this only
/// changes speed (and lets one machine test every path), except `amx`: the AMX activations mode
/// then runs as int8, whose bits differ (cpu/mod.rs `Activations::Amx`).
#[cfg_attr(not(any(target_arch = "x86_64", target_arch = "aarch64")), allow(dead_code))] // no SIMD paths elsewhere
pub fn disabled(isa: &str) -> bool {
    static LIST: LazyLock<String> = LazyLock::new(|| std::env::var("ULTRA_CPU_DISABLE").unwrap_or_default());
    LIST.split(',').any(|x| x.trim().eq_ignore_ascii_case(isa))
}

/// Whether the AVX2+FMA kernels run (simd.rs, avx512.rs, kquant/).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub fn avx2_fma() -> bool {
    *USE_AVX2_FMA
}

/// Whether the NEON kernels run (neon.rs, q8/neon.rs).
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))] // asked by the aarch64 paths only
pub fn neon() -> bool {
    *USE_NEON
}

/// Whether the NEON int8 kernels use `sdot` (else widening multiplies; the same bits).
#[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
pub fn dotprod() -> bool {
    *USE_DOTPROD
}
