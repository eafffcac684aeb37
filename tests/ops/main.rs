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
        $(#[test] fn $test() { crate::harness::check_family(&backend(), crate::cases::Family::$family) })*
    };
}

macro_rules! op_suite {
    ($backend:ident => $make:expr) => {
        mod $backend {
            fn backend() -> impl ultra::Backend {
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
                let missed = crate::misuse::check(&backend());
                assert!(missed.is_empty(), "these misuses were not reported as errors: {missed:#?}");
            }
            #[test]
            fn invariance_matmul() {
                crate::invariance::matmul(&backend())
            }
            #[test]
            fn invariance_rms_norm() {
                crate::invariance::rms_norm(&backend())
            }
            #[test]
            fn invariance_attention() {
                crate::invariance::attention(&backend())
            }
        }
    };
}

op_suite!(cpu => ultra::Cpu::new());

/// Every family has cases (a new family without rows fails here, not silently).
#[test]
fn every_family_has_cases() {
    let all = cases::all();
    for family in cases::Family::ALL {
        assert!(all.iter().any(|c| c.op.family() == family), "no cases for {family:?}");
    }
}
