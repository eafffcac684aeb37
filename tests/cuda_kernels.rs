//! Compiles every CUDA kernel module (`cuda/*.cu` joined as the backend joins them) with NVRTC
//! for sm_90, without a GPU. Skips loudly when libnvrtc is missing, unless ULTRA_REQUIRE_CUDA=1 or
//! ULTRA_REQUIRE_NVRTC=1 (CI sets it, with NVRTC from its PyPI wheel: see .ci/run).
#![cfg(feature = "cuda")]

use rayon::prelude::*;
use ultra::backend::cuda::kernels::{Module, nvrtc_present};

/// Every file in cuda/ is joined into some module (found in the assembled sources: no list of
/// files is kept by hand). No NVRTC needed.
#[test]
fn every_cuda_file_is_used() {
    let sources: Vec<String> = Module::all().into_iter().map(Module::source).collect();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/cuda");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(sources.iter().any(|s| s.contains(&text)), "{} is not joined into any module", path.display());
    }
}

/// Every kernel's first statement is `GRID_DEPENDENCY_WAIT();` (cuda/common.cuh): a recorded step
/// launches a kernel while the one before it still runs (src/backend/cuda/graph.rs), so a kernel
/// that touched memory before the wait would race with it. No NVRTC needed.
#[test]
fn every_cuda_kernel_first_waits_for_the_one_before() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/cuda");
    let mut kernels = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for (at, _) in text.match_indices("__global__") {
            let body = &text[at..][text[at..].find('{').expect("a kernel body") + 1..];
            let first = body.trim_start_matches(|c: char| c.is_whitespace() || c == '\\');
            let line = text[..at].matches('\n').count() + 1;
            assert!(
                first.starts_with("GRID_DEPENDENCY_WAIT();"),
                "{}:{line}: a kernel whose first statement is not GRID_DEPENDENCY_WAIT();",
                path.display()
            );
            kernels += 1;
        }
    }
    assert!(kernels >= 20, "found only {kernels} kernels in {dir}");
}

/// Compiles every module and checks that it defines each entry point the registry declares.
#[test]
fn every_cuda_kernel_compiles_for_sm_90() {
    if !nvrtc_present() {
        let msg = "SKIPPED: no NVRTC (libnvrtc) found: CUDA kernels not compiled";
        for require in ["ULTRA_REQUIRE_CUDA", "ULTRA_REQUIRE_NVRTC"] {
            assert!(std::env::var(require).as_deref() != Ok("1"), "{msg} ({require}=1)");
        }
        let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{msg}\n").as_bytes()); // past the test harness's capture: a skip must be seen
        return;
    }
    // NVRTC compiles independent programs concurrently: rayon spreads the modules over the cores.
    let failures: Vec<String> = Module::all().par_iter().flat_map_iter(compile_and_check).collect();
    assert!(failures.is_empty(), "{} modules failed:\n{}", failures.len(), failures.join("\n"));
}

/// One module compiled for sm_90: its errors, or each entry point the registry declares that its
/// PTX lacks.
fn compile_and_check(module: &Module) -> Vec<String> {
    let ptx = match module.compile("sm_90") {
        Ok(ptx) => ptx.to_src(),
        Err(e) => return vec![e.to_string()],
    };
    eprintln!("compiled {}", module.name());
    let mut failures = Vec::new();
    for entry in module.entries() {
        let Some(at) = ptx.find(&format!(".entry {entry}(")) else {
            failures.push(format!("{}: no entry point {entry}", module.name()));
            continue;
        };
        // The entry's code, up to the next entry: it must hold the wait of GRID_DEPENDENCY_WAIT().
        let code = &ptx[at + 1..];
        let code = &code[..code.find(".entry ").unwrap_or(code.len())];
        if !code.contains("griddepcontrol.wait") {
            failures.push(format!("{}: {entry} has no griddepcontrol.wait", module.name()));
        }
    }
    failures
}

/// The GEMV's integer NF4 levels (cuda/intn.cuh `NF4_HI`, `NF4_LO`) are round(NF4·32512) split
/// into int8 halves, 256·hi + lo, recomputed here from the reference levels: an error in a lo byte
/// is below the op table's tolerance, so it is checked exactly here. No NVRTC needed.
#[test]
fn nf4_integer_levels_match_the_reference_levels() {
    let (mut hi, mut lo) = ([0u32; 4], [0u32; 4]);
    for (c, level) in ultra::quant::intn::NF4.iter().enumerate() {
        let q = (level * 32512.0).round() as i32;
        let h = (q + 128).div_euclid(256);
        let l = q - 256 * h;
        assert!((-128..128).contains(&h) && (-128..128).contains(&l), "level {c}: {q} does not split");
        hi[c / 4] |= (h as u8 as u32) << (8 * (c % 4));
        lo[c / 4] |= (l as u8 as u32) << (8 * (c % 4));
    }
    let line = |name: &str, t: [u32; 4]| format!("#define {name} {}", t.map(|w| format!("{w:#010x}u")).join(", "));
    let source = include_str!("../cuda/intn.cuh");
    for expected in [line("NF4_HI", hi), line("NF4_LO", lo)] {
        assert!(source.contains(&expected), "cuda/intn.cuh lacks `{expected}`");
    }
}
