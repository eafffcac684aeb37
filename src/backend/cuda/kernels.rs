//! Every CUDA kernel: the sources (`cuda/*.cu`, embedded with `include_str!`), how they join into
//! NVRTC modules (`common.cuh`, then each part behind a `#line` marker so compiler errors point
//! into the right file), and the entry points each module defines, all from one declaration
//! (`registry!`). Compiling needs only libnvrtc, no GPU (tests/cuda_kernels.rs uses this).

use cudarc::nvrtc::{CompileOptions, Ptx};

use crate::error::{Error, Result};
use crate::quant::Format;
use crate::quant::intn::{Intn, Scheme};

const COMMON: &str = include_str!("../../../cuda/common.cuh");

macro_rules! file {
    ($name:literal) => {
        ($name, include_str!(concat!("../../../cuda/", $name)))
    };
}

/// One source file: (file name, text).
type Part = (&'static str, &'static str);

/// The block or element decoder of a weight format and what it needs joined before it (the
/// group-wise formats: their block size as `INTN_SHIFT`, then `intn.cuh`), joined before the
/// matmul and embed bodies; empty for a format without kernels.
fn decoder(format: Format) -> Vec<Part> {
    let one = match format {
        Format::F32 => file!("matmul_f32.cu"),
        Format::F16 => file!("matmul_f16.cu"),
        Format::BF16 => file!("matmul_bf16.cu"),
        Format::Q4_0 => file!("matmul_q4_0.cu"),
        Format::Q4_1 => file!("matmul_q4_1.cu"),
        Format::Q5_0 => file!("matmul_q5_0.cu"),
        Format::Q5_1 => file!("matmul_q5_1.cu"),
        Format::Q8_0 => file!("matmul_q8_0.cu"),
        Format::Q2_K => file!("matmul_q2_k.cu"),
        Format::Q3_K => file!("matmul_q3_k.cu"),
        Format::Q4_K => file!("matmul_q4_k.cu"),
        Format::Q5_K => file!("matmul_q5_k.cu"),
        Format::Q6_K => file!("matmul_q6_k.cu"),
        Format::Intn(f) => return intn_decoder(f),
    };
    vec![one]
}

/// A group-wise format's parts: `#define INTN_SHIFT` (a block is 32 << INTN_SHIFT values), the
/// shared helpers, the scheme's decoder.
fn intn_decoder(f: Intn) -> Vec<Part> {
    const SHIFTS: [&str; 4] =
        ["#define INTN_SHIFT 0\n", "#define INTN_SHIFT 1\n", "#define INTN_SHIFT 2\n", "#define INTN_SHIFT 3\n"];
    let shift = (f.block_len() / 32).trailing_zeros() as usize;
    let scheme = match f.scheme {
        Scheme::Int8 => file!("matmul_int8.cu"),
        Scheme::Int4 => file!("matmul_int4.cu"),
        Scheme::Int2 => file!("matmul_int2.cu"),
        Scheme::Nf4 => file!("matmul_nf4.cu"),
        Scheme::Nf4Dq => file!("matmul_nf4_dq.cu"),
    };
    vec![("intn_shift", SHIFTS[shift]), file!("intn.cuh"), scheme]
}

/// Whether this backend has kernels for weights of `format`.
pub fn has_kernels(format: Format) -> bool {
    !decoder(format).is_empty()
}

/// The registry, declared once: each module's files (after common.cuh) and the kernel entry points
/// it defines, each named by a constant in [`entry`] so call sites never spell a kernel's name.
/// Per-format modules also join their format's decoder first (`decoder`).
macro_rules! registry {
    (
        units { $($unit:ident: [$($file:literal),*] => { $($entry:ident = $name:literal),* $(,)? })* }
        per_format { $($family:ident: [$($ffile:literal),*] => { $($fentry:ident = $fname:literal),* $(,)? })* }
    ) => {
        /// A compilation unit: its cache name and its parts after common.cuh.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Module {
            $($unit,)*
            $($family(Format),)*
        }

        /// Every kernel entry point, by the name its `extern "C" __global__` function has.
        pub mod entry {
            $($(pub const $entry: &str = $name;)*)*
            $($(pub const $fentry: &str = $fname;)*)*
        }

        impl Module {
            /// Every module, for ahead-of-time compile checks.
            pub fn all() -> Vec<Module> {
                let mut all = vec![$(Module::$unit),*];
                $(all.extend(Format::ALL.into_iter().filter(|&f| has_kernels(f)).map(Module::$family));)*
                all
            }

            fn parts(self) -> Vec<Part> {
                match self {
                    $(Module::$unit => vec![$(file!($file)),*],)*
                    $(Module::$family(f) => decoder(f).into_iter().chain([$(file!($ffile)),*]).collect(),)*
                }
            }

            /// The entry points the registry declares for this module.
            fn declared(self) -> &'static [&'static str] {
                match self {
                    $(Module::$unit => &[$($name),*],)*
                    $(Module::$family(_) => &[$($fname),*],)*
                }
            }
        }
    };
}

registry! {
    units {
    RmsNorm: ["quantize_q8_1.cu", "rms_norm.cu"] => {
        RMS_NORM = "rms_norm",
        ADD_RMS_NORM = "add_rms_norm",
        RMS_NORM_Q8 = "rms_norm_q8",
        ADD_RMS_NORM_Q8 = "add_rms_norm_q8",
    }
    Rope: ["rope.cu"] => { ROPE = "rope" }
    RmsNormRope: ["rope.cu", "rms_norm_rope.cu"] => { RMS_NORM_ROPE = "rms_norm_rope" }
    RopeKvWrite: ["rope.cu", "rope_kv_write.cu"] => {
        ROPE_KV_WRITE = "rope_kv_write",
        ROPE_KV_WRITE_F16 = "rope_kv_write_f16",
    }
    SiluMul: ["quantize_q8_1.cu", "silu_mul.cu"] => { SILU_MUL = "silu_mul", SILU_MUL_Q8 = "silu_mul_q8" }
    GeluMul: ["gelu_mul.cu"] => { GELU_MUL = "gelu_mul" }
    AddAssign: ["add_assign.cu"] => { ADD_ASSIGN = "add_assign" }
    AddBias: ["add_bias.cu"] => { ADD_BIAS = "add_bias" }
    GatherRows: ["gather_rows.cu"] => { GATHER_ROWS = "gather_rows" }
    KvWrite: ["kv_write.cu"] => { KV_WRITE = "kv_write", KV_WRITE_F16 = "kv_write_f16" }
    CopySlots: ["copy_slots.cu"] => { COPY_SLOTS = "copy_slots", COPY_SLOTS_F16 = "copy_slots_f16" }
    Attention: ["quantize_q8_1.cu", "attention_prefill.cu", "attention.cu", "attention_batch.cu"] => {
        ATTENTION_64 = "attention_64",
        ATTENTION_128 = "attention_128",
        ATTENTION_256 = "attention_256",
        ATTENTION_H1_64 = "attention_h1_64",
        ATTENTION_H1_128 = "attention_h1_128",
        ATTENTION_H1_256 = "attention_h1_256",
        ATTENTION_PREFILL_64 = "attention_prefill_64",
        ATTENTION_PREFILL_128 = "attention_prefill_128",
        ATTENTION_PREFILL_256 = "attention_prefill_256",
        ATTENTION_64_F16 = "attention_64_f16",
        ATTENTION_128_F16 = "attention_128_f16",
        ATTENTION_256_F16 = "attention_256_f16",
        ATTENTION_H1_64_F16 = "attention_h1_64_f16",
        ATTENTION_H1_128_F16 = "attention_h1_128_f16",
        ATTENTION_H1_256_F16 = "attention_h1_256_f16",
        ATTENTION_PREFILL_64_F16 = "attention_prefill_64_f16",
        ATTENTION_PREFILL_128_F16 = "attention_prefill_128_f16",
        ATTENTION_PREFILL_256_F16 = "attention_prefill_256_f16",
        ATTENTION_BATCH_64 = "attention_batch_64",
        ATTENTION_BATCH_128 = "attention_batch_128",
        ATTENTION_BATCH_64_F16 = "attention_batch_64_f16",
        ATTENTION_BATCH_128_F16 = "attention_batch_128_f16",
    }
    Argmax: ["argmax.cu"] => { ARGMAX = "argmax" }
    TopK: ["top_k.cu"] => { TOP_K = "top_k" }
    QuantizeQ8_1: ["quantize_q8_1.cu"] => { QUANTIZE_Q8_1 = "quantize_q8_1" }
    }
    per_format {
    Matmul: ["matmul.cu", "matmul_mma.cu"] => {
        MATMUL_VEC_M1_R1 = "matmul_vec_m1_r1",
        MATMUL_VEC_M1_R2 = "matmul_vec_m1_r2",
        MATMUL_VEC_M2_R1 = "matmul_vec_m2_r1",
        MATMUL_VEC_M2_R2 = "matmul_vec_m2_r2",
        MATMUL_VEC_M4_R1 = "matmul_vec_m4_r1",
        MATMUL_VEC_M4_R2 = "matmul_vec_m4_r2",
        MATMUL_VEC_M8_R1 = "matmul_vec_m8_r1",
        MATMUL_VEC_M8_R2 = "matmul_vec_m8_r2",
        MATMUL_TILE = "matmul_tile",
        MATMUL_MMA_PREP = "matmul_mma_prep",
        MATMUL_MMA = "matmul_mma",
        MATMUL_MMA_SPLIT = "matmul_mma_split",
        MATMUL_MMA_SPLIT32 = "matmul_mma_split32",
        MATMUL_MMA32 = "matmul_mma32",
        MATMUL_MMA_PARTS = "matmul_mma_parts",
        MATMUL_MMA_PARTS32 = "matmul_mma_parts32",
        MATMUL_MMA_PARTS_WHOLE = "matmul_mma_parts_whole",
    }
    Embed: ["embed.cu"] => { EMBED = "embed" }
    }
}

impl Module {
    /// The entry points this module defines: the declared ones, less the tensor-core GEMM of float
    /// formats (matmul_mma.cu compiles only for quantized weights; floats take matmul_tile).
    pub fn entries(self) -> Vec<&'static str> {
        let float_matmul = matches!(self, Module::Matmul(f) if !f.is_quantized());
        let mma = [
            entry::MATMUL_MMA_PREP,
            entry::MATMUL_MMA,
            entry::MATMUL_MMA_SPLIT,
            entry::MATMUL_MMA_SPLIT32,
            entry::MATMUL_MMA32,
            entry::MATMUL_MMA_PARTS,
            entry::MATMUL_MMA_PARTS32,
            entry::MATMUL_MMA_PARTS_WHOLE,
        ];
        self.declared().iter().copied().filter(|e| !(float_matmul && mma.contains(e))).collect()
    }

    /// A readable name for logs: the body's stem, with the format for per-format modules.
    pub fn name(self) -> String {
        match self {
            Module::Matmul(f) => format!("matmul_{}", f.name().to_lowercase()),
            Module::Embed(f) => format!("embed_{}", f.name().to_lowercase()),
            Module::Attention => "attention".into(),
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
