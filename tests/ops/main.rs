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
            /// The backend, or None when this machine has no such device (the suite then skips).
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
op_suite!(wgpu => crate::wgpu_or_skip(ultra::backend::wgpu::Options::from_env()));
// The fallback kernels (no subgroups, no f16), as `ULTRA_WGPU_DISABLE=subgroups,f16` selects.
#[cfg(feature = "wgpu")]
op_suite!(wgpu_fallbacks => crate::wgpu_or_skip(ultra::backend::wgpu::Options::fallbacks()));

/// A wgpu backend, or None after printing why to stderr; with `ULTRA_REQUIRE_WGPU=1` a missing
/// adapter fails the test instead.
#[cfg(feature = "wgpu")]
fn wgpu_or_skip(options: ultra::backend::wgpu::Options) -> Option<ultra::Wgpu> {
    match ultra::Wgpu::with_options(options) {
        Ok(b) => Some(b),
        Err(e) if std::env::var("ULTRA_REQUIRE_WGPU").as_deref() != Ok("1") => {
            eprintln!("SKIPPED: no wgpu adapter: {e}");
            None
        }
        Err(e) => panic!("ULTRA_REQUIRE_WGPU=1 but {e}"),
    }
}

/// Every family has cases (a new family without rows fails here, not silently).
#[test]
fn every_family_has_cases() {
    let all = cases::all();
    for family in cases::Family::ALL {
        assert!(all.iter().any(|c| c.op.family() == family), "no cases for {family:?}");
    }
}
