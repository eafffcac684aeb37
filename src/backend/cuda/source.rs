//! The CUDA kernel sources (`cuda/*.cu`, embedded with `include_str!`) and how they join into
//! NVRTC modules: `common.cuh`, then each part behind a `#line` marker so compiler errors point
//! into the right file. Compiling needs only libnvrtc, no GPU (tests/cuda_kernels.rs uses this).

use cudarc::nvrtc::{CompileOptions, Ptx};

use crate::error::{Error, Result};
use crate::quant::Format;

const COMMON: &str = include_str!("../../../cuda/common.cuh");

macro_rules! file {
    ($name:literal) => {
        ($name, include_str!(concat!("../../../cuda/", $name)))
    };
}

/// One source file: (file name, text).
type Part = (&'static str, &'static str);

/// The block or element decoder of a weight format (joined before the matmul and embed bodies).
fn decoder(format: Format) -> Part {
    match format {
        Format::F32 => file!("matmul_f32.cu"),
        Format::F16 => file!("matmul_f16.cu"),
        Format::BF16 => file!("matmul_bf16.cu"),
        Format::Q4_0 => file!("matmul_q4_0.cu"),
        Format::Q4_1 => file!("matmul_q4_1.cu"),
        Format::Q5_0 => file!("matmul_q5_0.cu"),
        Format::Q5_1 => file!("matmul_q5_1.cu"),
        Format::Q8_0 => file!("matmul_q8_0.cu"),
    }
}

/// Declares `Module` once: the kernels compiled on their own, then the per-format families.
macro_rules! modules {
    ($($unit:ident),* $(,)?) => {
        /// A compilation unit: its cache name and its parts after common.cuh.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Module {
            $($unit,)*
            Matmul(Format),
            Embed(Format),
        }

        impl Module {
            /// Every module, for ahead-of-time compile checks.
            pub fn all() -> Vec<Module> {
                let mut all = vec![$(Module::$unit),*];
                all.extend(Format::ALL.iter().map(|&f| Module::Matmul(f)));
                all.extend(Format::ALL.iter().map(|&f| Module::Embed(f)));
                all
            }
        }
    };
}

modules!(
    RmsNorm,
    Rope,
    RmsNormRope,
    SiluMul,
    AddAssign,
    AddBias,
    GatherRows,
    KvWrite,
    CopySlots,
    Attention,
    Argmax,
    TopK,
    QuantizeQ8_1,
);

impl Module {
    fn parts(self) -> Vec<Part> {
        match self {
            Module::RmsNorm => vec![file!("rms_norm.cu")],
            Module::Rope => vec![file!("rope.cu")],
            Module::RmsNormRope => vec![file!("rope.cu"), file!("rms_norm_rope.cu")],
            Module::SiluMul => vec![file!("quantize_q8_1.cu"), file!("silu_mul.cu")],
            Module::AddAssign => vec![file!("add_assign.cu")],
            Module::AddBias => vec![file!("add_bias.cu")],
            Module::GatherRows => vec![file!("gather_rows.cu")],
            Module::KvWrite => vec![file!("kv_write.cu")],
            Module::CopySlots => vec![file!("copy_slots.cu")],
            // attention.cu last: it names the module.
            Module::Attention => vec![file!("attention_prefill.cu"), file!("attention.cu")],
            Module::Argmax => vec![file!("argmax.cu")],
            Module::TopK => vec![file!("top_k.cu")],
            Module::QuantizeQ8_1 => vec![file!("quantize_q8_1.cu")],
            Module::Matmul(f) => vec![decoder(f), file!("matmul.cu"), file!("matmul_mma.cu")],
            Module::Embed(f) => vec![decoder(f), file!("embed.cu")],
        }
    }

    /// A readable name for logs: the body's stem, with the format for per-format modules.
    pub fn name(self) -> String {
        match self {
            Module::Matmul(f) => format!("matmul_{}", f.name().to_lowercase()),
            Module::Embed(f) => format!("embed_{}", f.name().to_lowercase()),
            other => self
                .parts()
                .last()
                .map(|(file, _)| file.trim_end_matches(".cu").to_string())
                .unwrap_or_else(|| format!("{other:?}")),
        }
    }

    /// The full text NVRTC compiles.
    pub fn source(self) -> String {
        let mut src = format!("#line 1 \"common.cuh\"\n{COMMON}\n");
        for (file, text) in self.parts() {
            src.push_str(&format!("#line 1 \"{file}\"\n{text}\n"));
        }
        src
    }

    /// Compiles to PTX for `arch` (e.g. "sm_90"); the error carries NVRTC's log.
    pub fn compile(self, arch: &'static str) -> Result<Ptx> {
        let opts = CompileOptions {
            arch: Some(arch),
            options: vec!["--std=c++17".into(), "-lineinfo".into()],
            name: Some(format!("{}.cu", self.name())),
            ..Default::default()
        };
        cudarc::nvrtc::compile_ptx_with_opts(self.source(), opts).map_err(|e| Error::KernelCompile {
            kernel: self.name(),
            log: match e {
                cudarc::nvrtc::CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
                other => other.to_string(),
            },
        })
    }
}

/// Whether libnvrtc can be loaded (compiling kernels needs it, a GPU does not).
pub fn nvrtc_present() -> bool {
    // SAFETY: only probes for the shared library; nothing is called through it.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}
