//! Cross-backend op suite: every case of cases.rs on every compiled backend against the f64
//! oracle of reference.rs, plus misuse and batch-invariance checks. One `#[test]` per op family
//! per backend, so `cargo test --test ops cpu::matmul` runs exactly that family.

mod cases;
mod harness;
mod invariance;
mod misuse;
mod reference;
mod run;

/// One `#[test]` per family, each running that family's cases on `backend()`.
macro_rules! family_tests {
    ($($test:ident => $family:ident),* $(,)?) => {
        $(#[test] fn $test() { if let Some(b) = backend() { crate::harness::check_family(&b, crate::cases::Family::$family) } })*
    };
}

macro_rules! op_suite {
    ($backend:ident => $make:expr) => {
        mod $backend {
            /// The backend, or None (after a loud SKIPPED line) when its device is missing.
            fn backend() -> Option<impl ultra::Backend> {
                $make
            }

            family_tests! {
                matmul => Matmul, embed => Embed, rms_norm => RmsNorm, rope => Rope,
                rms_norm_rope => RmsNormRope, silu_mul => SiluMul, add_assign => AddAssign,
                add_bias => AddBias, gather_rows => GatherRows, kv_write => KvWrite,
                attention => Attention, copy_slots => CopySlots, argmax => Argmax,
            }

            #[test]
            fn misuse() {
                let Some(b) = backend() else { return };
                let missed = crate::misuse::check(&b);
                assert!(missed.is_empty(), "these misuses were not reported as errors: {missed:#?}");
            }
            #[test]
            fn invariance_matmul() {
                if let Some(b) = backend() {
                    crate::invariance::matmul(&b)
                }
            }
            #[test]
            fn invariance_rms_norm() {
                if let Some(b) = backend() {
                    crate::invariance::rms_norm(&b)
                }
            }
            #[test]
            fn invariance_attention() {
                if let Some(b) = backend() {
                    crate::invariance::attention(&b)
                }
            }
        }
    };
}

op_suite!(cpu => Some(ultra::Cpu::new()));
#[cfg(feature = "wgpu")]
op_suite!(wgpu => crate::harness::or_skip("wgpu", "ULTRA_REQUIRE_WGPU", ultra::Wgpu::with_options(ultra::backend::wgpu::Options::from_env())));
// The fallback kernels (no subgroups, no f16), as `ULTRA_WGPU_DISABLE=subgroups,f16` selects.
#[cfg(feature = "wgpu")]
op_suite!(wgpu_fallbacks => crate::harness::or_skip("wgpu", "ULTRA_REQUIRE_WGPU", ultra::Wgpu::with_options(ultra::backend::wgpu::Options::fallbacks())));
#[cfg(feature = "cuda")]
op_suite!(cuda => crate::harness::or_skip("CUDA", "ULTRA_REQUIRE_CUDA", ultra::Cuda::new(0)));

/// Every family has cases (a new family without rows fails here, not silently).
#[test]
fn every_family_has_cases() {
    let all = cases::all();
    for family in cases::Family::ALL {
        assert!(all.iter().any(|c| c.op.family() == family), "no cases for {family:?}");
    }
}
