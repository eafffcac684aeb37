//! Cross-backend op suite: every case of cases.rs on every compiled backend against the f64
//! oracle of reference.rs, plus misuse and batch-invariance checks. One `#[test]` per op family
//! per backend, so `cargo test --test ops cpu::matmul` runs exactly that family.

mod cases;
mod fused;
mod harness;
mod invariance;
mod misuse;
mod reference;
mod run;

/// One `#[test]` per family, each running that family's cases on `backend()`.
macro_rules! family_tests {
    ($($test:ident => $family:ident),* $(,)?) => {
        $(#[test] fn $test() { if let Some(b) = backend() { crate::harness::check_family(&*b, crate::cases::Family::$family) } })*
    };
}

/// One module of tests per backend. The backend is made once per suite and shared (a device per
/// test made the H200 run crawl: 34 Vulkan devices, each compiling its own pipelines, on 16 test
/// threads); tests of one suite take turns through a lock, so one test's failure report never
/// mixes with another's work and a GPU suite keeps one command stream.
macro_rules! op_suite {
    ($backend:ident: $ty:ty => $make:expr) => {
        mod $backend {
            use std::sync::{Mutex, MutexGuard, OnceLock};

            static BACKEND: OnceLock<Option<Mutex<$ty>>> = OnceLock::new();

            /// The suite's backend, or None (after a loud SKIPPED line) when its device is missing.
            fn backend() -> Option<MutexGuard<'static, $ty>> {
                let made = BACKEND.get_or_init(|| $make.map(Mutex::new)).as_ref()?;
                // A failed test poisons the lock; the backend itself is still usable.
                Some(made.lock().unwrap_or_else(|p| p.into_inner()))
            }

            family_tests! {
                matmul => Matmul, embed => Embed, rms_norm => RmsNorm, rope => Rope,
                rms_norm_rope => RmsNormRope, silu_mul => SiluMul, add_assign => AddAssign,
                add_bias => AddBias, gather_rows => GatherRows, kv_write => KvWrite,
                attention => Attention, copy_slots => CopySlots, argmax => Argmax, top_k => TopK,
            }

            #[test]
            fn misuse() {
                let Some(b) = backend() else { return };
                let missed = crate::misuse::check(&*b);
                assert!(missed.is_empty(), "these misuses were not reported as errors: {missed:#?}");
            }
            #[test]
            fn invariance_matmul() {
                if let Some(b) = backend() {
                    crate::invariance::matmul(&*b)
                }
            }
            #[test]
            fn invariance_rms_norm() {
                if let Some(b) = backend() {
                    crate::invariance::rms_norm(&*b)
                }
            }
            #[test]
            fn matmuls() {
                if let Some(b) = backend() {
                    crate::fused::matmuls(&*b)
                }
            }
            #[test]
            fn invariance_attention() {
                if let Some(b) = backend() {
                    crate::invariance::attention(&*b)
                }
            }
        }
    };
}

op_suite!(cpu: ultra::Cpu => Some(ultra::Cpu::new()));
#[cfg(feature = "wgpu")]
op_suite!(wgpu: ultra::Wgpu => crate::harness::or_skip("wgpu", "ULTRA_REQUIRE_WGPU", ultra::Wgpu::with_options(ultra::backend::wgpu::Options::from_env())));
// The fallback kernels (no subgroups, no f16), as `ULTRA_WGPU_DISABLE=subgroups,f16` selects.
#[cfg(feature = "wgpu")]
op_suite!(wgpu_fallbacks: ultra::Wgpu => crate::harness::or_skip("wgpu", "ULTRA_REQUIRE_WGPU", ultra::Wgpu::with_options(ultra::backend::wgpu::Options::fallbacks())));
#[cfg(feature = "cuda")]
op_suite!(cuda: ultra::Cuda => crate::harness::or_skip("CUDA", "ULTRA_REQUIRE_CUDA", ultra::Cuda::new(0)));

/// Every family has cases (a new family without rows fails here, not silently).
#[test]
fn every_family_has_cases() {
    let all = cases::all();
    for family in cases::Family::ALL {
        assert!(all.iter().any(|c| c.op.family() == family), "no cases for {family:?}");
    }
}
