//! End to end on the reference model (SmolLM2-135M-Instruct Q4_1), on every backend: against
//! llama.cpp's outputs and an independent float64 forward pass (tests/data/smollm2, README there)
//! and, on the GPU backends, against the CPU backend. checks.rs holds the checks, each written once
//! for any backend; tolerances.rs holds what each backend must meet, with the reasons, and how
//! much of the reference data it runs (less on a software adapter, as in CI). A GPU suite skips
//! loudly without a device, and fails instead under ULTRA_REQUIRE_WGPU=1 / ULTRA_REQUIRE_CUDA=1.
//! gemma3.rs runs the second real model (Gemma 3 270M Q4_K_M) on the GPU backends against the CPU.
//! `cargo test --release --test model wgpu::` runs one backend's suite.

#[path = "../common/mod.rs"]
mod common;

mod checks;
mod gemma3;
mod tolerances;

/// Defines `mod $name` with one `#[test]` per listed check of checks.rs, each given a fresh
/// backend made by `$make` (or skipping, see `common::or_skip`) and its row of tolerances.rs,
/// which `$profile` picks from the backend made.
macro_rules! model_suite {
    ($name:ident: $ty:ty, $what:literal, $require:literal, $make:expr, $profile:expr, [$($test:ident),* $(,)?]) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn setup() -> Option<($ty, tolerances::Profile)> {
                let backend: $ty = crate::common::or_skip($what, $require, $make)?;
                let profile: fn(&$ty) -> tolerances::Profile = $profile;
                let profile = profile(&backend);
                Some((backend, profile))
            }

            $(#[test] fn $test() { if let Some((backend, profile)) = setup() { crate::checks::$test(backend, &profile) } })*
        }
    };
}

// The CPU alone is batch-invariant, so only it must give bit-identical logits when chunked; and
// only it is held to llama.cpp's perplexity at ctx 512 (the GPUs are held to the CPU's at 128).
model_suite!(cpu: ultra::Cpu, "cpu", "", Ok(ultra::Cpu::exact()), tolerances::cpu, [
    teacher_forced_logits_match_the_references,
    greedy_ids_match_llama_cpp_and_the_cpu_until_a_near_tie,
    chunked_prefill_and_decode_are_bit_identical_to_one_batch,
    perplexity_ctx_128_matches_the_references,
    perplexity_ctx_512_matches_the_references,
]);

// The default int8 path (portable code where the CPU lacks AVX-512 VNNI: the same bits), held
// to the f32 CPU above. It is not chunk-invariant (decode int8 kernels up to 16 rows, the panel
// GEMM or the f32 tile above).
model_suite!(cpu_int8: ultra::Cpu, "cpu", "", Ok(ultra::Cpu::with_activations(ultra::backend::cpu::Activations::Int8)), tolerances::cpu_int8, [
    teacher_forced_logits_match_the_references,
    greedy_ids_match_llama_cpp_and_the_cpu_until_a_near_tie,
    perplexity_ctx_128_matches_the_references,
    perplexity_ctx_512_matches_the_references,
    gemma3_teacher_forced_logits_match_the_cpu,
    gemma3_greedy_ids_match_the_cpu_until_a_near_tie,
]);

// The AMX path where the CPU has it (skipped loudly elsewhere; ULTRA_REQUIRE_AMX=1 fails
// instead), held to the f32 CPU as the int8 path is, with bf16's looser logits.
model_suite!(cpu_amx: ultra::Cpu, "AMX", "ULTRA_REQUIRE_AMX", ultra::Cpu::amx(), tolerances::cpu_amx, [
    teacher_forced_logits_match_the_references,
    greedy_ids_match_llama_cpp_and_the_cpu_until_a_near_tie,
    perplexity_ctx_128_matches_the_references,
    perplexity_ctx_512_matches_the_references,
    gemma3_teacher_forced_logits_match_the_cpu,
    gemma3_greedy_ids_match_the_cpu_until_a_near_tie,
]);

#[cfg(feature = "wgpu")]
model_suite!(wgpu: ultra::Wgpu, "wgpu", "ULTRA_REQUIRE_WGPU", ultra::Wgpu::new(), tolerances::wgpu, [
    teacher_forced_logits_match_the_references,
    greedy_ids_match_llama_cpp_and_the_cpu_until_a_near_tie,
    perplexity_ctx_128_matches_the_references,
    gemma3_teacher_forced_logits_match_the_cpu,
    gemma3_greedy_ids_match_the_cpu_until_a_near_tie,
]);

#[cfg(feature = "cuda")]
model_suite!(cuda: ultra::Cuda, "CUDA", "ULTRA_REQUIRE_CUDA", ultra::Cuda::new(0), tolerances::cuda, [
    teacher_forced_logits_match_the_references,
    greedy_ids_match_llama_cpp_and_the_cpu_until_a_near_tie,
    greedy_ids_are_the_same_with_and_without_cuda_graphs,
    perplexity_ctx_128_matches_the_references,
    gemma3_teacher_forced_logits_match_the_cpu,
    gemma3_greedy_ids_match_the_cpu_until_a_near_tie,
]);
