//! Cross-backend op suite: every case of cases.rs on every compiled backend against the f64
//! oracle of reference.rs, plus misuse and batch-invariance checks. One `#[test]` per op family
//! per backend, so `cargo test --test ops cpu::matmul` runs exactly that family.

mod cases;
mod harness;
mod invariance;
mod misuse;
mod reference;
mod run;

macro_rules! op_suite {
    ($backend:ident => $make:expr) => {
        mod $backend {
            use crate::cases::Family;
            use crate::harness::check_family;

            fn backend() -> impl ultra::Backend {
                $make
            }

            #[test]
            fn matmul() {
                check_family(&backend(), Family::Matmul)
            }
            #[test]
            fn embed() {
                check_family(&backend(), Family::Embed)
            }
            #[test]
            fn rms_norm() {
                check_family(&backend(), Family::RmsNorm)
            }
            #[test]
            fn rope() {
                check_family(&backend(), Family::Rope)
            }
            #[test]
            fn rms_norm_rope() {
                check_family(&backend(), Family::RmsNormRope)
            }
            #[test]
            fn silu_mul() {
                check_family(&backend(), Family::SiluMul)
            }
            #[test]
            fn add_assign() {
                check_family(&backend(), Family::AddAssign)
            }
            #[test]
            fn add_bias() {
                check_family(&backend(), Family::AddBias)
            }
            #[test]
            fn gather_rows() {
                check_family(&backend(), Family::GatherRows)
            }
            #[test]
            fn kv_write() {
                check_family(&backend(), Family::KvWrite)
            }
            #[test]
            fn attention() {
                check_family(&backend(), Family::Attention)
            }
            #[test]
            fn copy_slots() {
                check_family(&backend(), Family::CopySlots)
            }
            #[test]
            fn argmax() {
                check_family(&backend(), Family::Argmax)
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
