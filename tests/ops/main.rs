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
/// mixes with another's work and a GPU suite keeps one command stream. The batch-invariance
/// checks run on `invariance:` — `same` backend, or a second one made to keep the promise (wgpu's
/// default tiled prefill matmul does not) — with `matmul_rows` rows in the matmul check and attention batches of at most `attn_tokens` tokens.
macro_rules! op_suite {
    ($backend:ident: $ty:ty => $make:expr, invariance: same, matmul_rows: $m:expr, attn_tokens: $t:expr) => {
        op_suite!(@suite $backend: $ty => $make, $m, $t,
            fn invariant_backend() -> Option<MutexGuard<'static, $ty>> {
                backend()
            }
        );
    };
    ($backend:ident: $ty:ty => $make:expr, invariance: $inv:expr, matmul_rows: $m:expr, attn_tokens: $t:expr) => {
        op_suite!(@suite $backend: $ty => $make, $m, $t,
            fn invariant_backend() -> Option<MutexGuard<'static, $ty>> {
                static INVARIANT: OnceLock<Option<Mutex<$ty>>> = OnceLock::new();
                let made = INVARIANT.get_or_init(|| $inv.map(Mutex::new)).as_ref()?;
                Some(made.lock().unwrap_or_else(|p| p.into_inner()))
            }
        );
    };
    (@suite $backend:ident: $ty:ty => $make:expr, $m:expr, $t:expr, $invariant_backend:item) => {
        mod $backend {
            #[allow(unused_imports)]
            use std::sync::{Mutex, MutexGuard, OnceLock};

            static BACKEND: OnceLock<Option<Mutex<$ty>>> = OnceLock::new();

            /// The suite's backend, or None (after a loud SKIPPED line) when its device is missing.
            fn backend() -> Option<MutexGuard<'static, $ty>> {
                let made = BACKEND.get_or_init(|| $make.map(Mutex::new)).as_ref()?;
                // A failed test poisons the lock; the backend itself is still usable.
                Some(made.lock().unwrap_or_else(|p| p.into_inner()))
            }

            /// The backend the invariance checks run on.
            $invariant_backend

            family_tests! {
                matmul => Matmul, silu_mul_matmul => SiluMulMatmul, norm_matmuls => NormMatmuls, embed => Embed, rms_norm => RmsNorm, rope => Rope,
                rms_norm_rope => RmsNormRope, silu_mul => SiluMul, gelu_mul => GeluMul, add_assign => AddAssign,
                add_bias => AddBias, gather_rows => GatherRows, kv_write => KvWrite,
                attention => Attention, copy_slots => CopySlots, argmax => Argmax, top_k => TopK,
            }

            #[test]
            fn misuse() {
                let Some(b) = backend() else { return };
                let missed = crate::misuse::check(&*b);
                assert!(missed.is_empty(), "these misuses did not give their error: {missed:#?}");
            }
            #[test]
            fn invariance_matmul() {
                if let Some(b) = invariant_backend() {
                    crate::invariance::matmul(&*b, $m)
                }
            }
            #[test]
            fn invariance_rms_norm() {
                if let Some(b) = invariant_backend() {
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
            fn norm_then_matmuls() {
                if let Some(b) = backend() {
                    crate::fused::norm_then_matmuls(&*b)
                }
            }
            #[test]
            fn add_rms_norm() {
                if let Some(b) = backend() {
                    crate::fused::add_rms_norm(&*b)
                }
            }
            #[test]
            fn rope_kv_write_equals_its_parts() {
                if let Some(b) = backend() {
                    crate::fused::rope_kv_write(&*b)
                }
            }
            #[test]
            fn norm_matmuls_equals_its_parts() {
                if let Some(b) = backend() {
                    crate::fused::norm_matmuls(&*b)
                }
            }
            #[test]
            fn attention_matmul_equals_its_parts() {
                if let Some(b) = backend() {
                    crate::fused::attention_matmul(&*b)
                }
            }
            #[test]
            fn silu_mul_matmul_equals_its_parts() {
                if let Some(b) = backend() {
                    crate::fused::silu_mul_matmul(&*b)
                }
            }
            #[test]
            fn invariance_attention() {
                if let Some(b) = invariant_backend() {
                    crate::invariance::attention(&*b, $t)
                }
            }
        }
    };
}

op_suite!(cpu: ultra::Cpu => Some(ultra::Cpu::exact()), invariance: same, matmul_rows: 70, attn_tokens: usize::MAX);
// The CPU's default int8 path (portable code where the CPU lacks AVX-512 VNNI: the same bits):
// the decode path's int8 kernels up to 16 rows, the panel GEMM above (AVX-512 VNNI; the f32 tile
// elsewhere and for formats it lacks), so invariant over 16 rows; the m > 16 matmul rows check it.
op_suite!(cpu_int8: ultra::Cpu => Some(ultra::Cpu::with_activations(ultra::backend::cpu::Activations::Int8)), invariance: same, matmul_rows: 16, attn_tokens: usize::MAX);
// The AMX path where the CPU has it (skipped loudly elsewhere; ULTRA_REQUIRE_AMX=1 fails
// instead): the int8 kernels up to 16 rows, the panel GEMM to 63, bf16 tiles from 64, so
// invariant over 16 rows.
op_suite!(cpu_amx: ultra::Cpu => crate::harness::or_skip("AMX", "ULTRA_REQUIRE_AMX", ultra::Cpu::amx()), invariance: same, matmul_rows: 16, attn_tokens: usize::MAX);
// wgpu keeps batch invariance only with Options::batch_invariant (ULTRA_WGPU_BATCH_INVARIANT=1):
// 70 rows cover the m ≥ 32 range that otherwise runs the tiled matmul. This suite keeps
// cooperative matrices off, so the tiled GEMM is checked on every adapter (wgpu_coop checks them),
// runs the GEMV on int8 activations (the GPU default; a CPU adapter's would be f32, which
// wgpu_fallbacks checks) and turns the opt-in silu fusion on, so that its kernel (matmul_vec_silu,
// for the formats without int8 values) is checked too, as is split-K attention reading K and V
// straight into registers (attention_direct, the GPU default; a CPU adapter's default is
// attention.wgsl, which wgpu_fallbacks and the invariance rows check), and the opt-in add + RMSNorm
// spread over a row's workgroups (add_rms_norm_split: norm_matmuls_equals_its_parts checks its bits).
#[cfg(feature = "wgpu")]
op_suite!(wgpu: ultra::Wgpu => crate::harness::or_skip("wgpu", "ULTRA_REQUIRE_WGPU", ultra::Wgpu::with_options(ultra::backend::wgpu::Options::from_env().without_coopmat().with_int8_gemv().with_silu_fusion().with_attn_direct().with_norm_split())),
    invariance: crate::harness::or_skip("wgpu", "ULTRA_REQUIRE_WGPU", ultra::Wgpu::with_options(ultra::backend::wgpu::Options::from_env().without_coopmat().with_int8_gemv().with_silu_fusion().invariant())),
    matmul_rows: 70, attn_tokens: usize::MAX);
// The fallback kernels (no subgroups, no f16, f32 GEMVs), as `ULTRA_WGPU_DISABLE=subgroups,f16 ULTRA_WGPU_INT8=0` select.
#[cfg(feature = "wgpu")]
op_suite!(wgpu_fallbacks: ultra::Wgpu => crate::harness::or_skip("wgpu", "ULTRA_REQUIRE_WGPU", ultra::Wgpu::with_options(ultra::backend::wgpu::Options::fallbacks())),
    invariance: crate::harness::or_skip("wgpu", "ULTRA_REQUIRE_WGPU", ultra::Wgpu::with_options(ultra::backend::wgpu::Options::fallbacks().invariant())),
    matmul_rows: 70, attn_tokens: usize::MAX);
// Cooperative matrices (matmul_coop for quantized m ≥ 64) where the adapter has them (Mesa ≥ 26's
// lavapipe, NVIDIA): skipped loudly elsewhere, ULTRA_REQUIRE_COOPMAT=1 fails instead.
#[cfg(feature = "wgpu")]
op_suite!(wgpu_coop: ultra::Wgpu => crate::harness::or_skip("cooperative-matrix wgpu", "ULTRA_REQUIRE_COOPMAT", crate::harness::wgpu_coop(ultra::backend::wgpu::Options::from_env())),
    invariance: crate::harness::or_skip("cooperative-matrix wgpu", "ULTRA_REQUIRE_COOPMAT", crate::harness::wgpu_coop(ultra::backend::wgpu::Options::from_env().invariant())),
    matmul_rows: 70, attn_tokens: usize::MAX);
// cuda is not batch-invariant past m = 8 (int8 GEMV below, f16 tensor cores above): 7 rows; nor
// for attention batches of 64+ tokens (the tiled prefill kernel, not the split-K one).
#[cfg(feature = "cuda")]
op_suite!(cuda: ultra::Cuda => crate::harness::or_skip("CUDA", "ULTRA_REQUIRE_CUDA", ultra::Cuda::new(0)), invariance: same, matmul_rows: 7, attn_tokens: 63);
// Every fused decode launch on, the norm's included (off by default: `Fusions::DEFAULT`).
#[cfg(feature = "cuda")]
op_suite!(cuda_all_fusions: ultra::Cuda => crate::harness::or_skip("CUDA", "ULTRA_REQUIRE_CUDA", ultra::Cuda::new(0).map(|c| c.with_fusions(ultra::backend::cuda::Fusions::ALL))), invariance: same, matmul_rows: 7, attn_tokens: 63);

/// Every family has cases (a new family without rows fails here, not silently).
#[test]
fn every_family_has_cases() {
    let all = cases::all();
    for family in cases::Family::ALL {
        assert!(all.iter().any(|c| c.op.family() == family), "no cases for {family:?}");
    }
}
