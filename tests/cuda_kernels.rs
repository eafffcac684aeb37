//! Compiles every CUDA kernel module (`cuda/*.cu` joined as the backend joins them) with NVRTC
//! for sm_90, without a GPU. Skips loudly when libnvrtc is missing, unless ULTRA_REQUIRE_CUDA=1.
#![cfg(feature = "cuda")]

use ultra::backend::cuda::source::{Module, nvrtc_present};

#[test]
fn every_cuda_kernel_compiles_for_sm_90() {
    if !nvrtc_present() {
        let msg = "SKIPPED: no NVRTC (libnvrtc) found: CUDA kernels not compiled";
        assert!(std::env::var("ULTRA_REQUIRE_CUDA").as_deref() != Ok("1"), "{msg}");
        eprintln!("{msg}");
        return;
    }
    let mut failures = Vec::new();
    for module in Module::all() {
        match module.compile("sm_90") {
            Ok(_) => eprintln!("compiled {}", module.name()),
            Err(e) => failures.push(e.to_string()),
        }
    }
    assert!(failures.is_empty(), "{} modules failed:\n{}", failures.len(), failures.join("\n"));
}
