//! Every wgpu kernel: its stem (the file `shaders/<stem>.wgsl` and its entry point), its bindings,
//! and how its source is assembled. Weight-reading kernels join a per-format block decoder
//! (`decode_<format>.wgsl`, matmul_vec `decode32_<format>.wgsl`; for the k-quants after their bit
//! helpers, `kquant.wgsl`; for the group-wise formats after `intn.wgsl`, one decoder per scheme
//! with the group size a constant) to their body; matmul joins the reduction it was built with,
//! matmul_tiled the K step of its arithmetic (`tile32_f32.wgsl` or `tile32_f16.wgsl`), matmul_coop
//! and matmul_coop16 their matrix side, subgroup size, matrix type aliases and epilogue (`coop_store`); the RMSNorm
//! kernels their row scale (`norm_scale`), and the two plain ones their output
//! loop (`norm_apply`, or with `q8` `norm_apply_q8`, which also writes dst's int8 blocks), and
//! attention_combine its output (`combine_out`, or `combine_out_q8`); the kernels that write int8 x
//! their block writer (`q8_blocks`); the
//! attention kernels join their cache reader (`kv_f32`, `kv_f16` or `kv_q8`), the chunk routine and
//! the softmax fold they share (`attention_chunk`, `attention_fold`), which is what keeps split-K
//! and tiled attention bit-identical; the f16 and q8_0 cache writers their f32 → f16 rounding
//! (`f16_bits`); the RoPE kernels the rotation (`rope_common`), and rope_kv_write and
//! rope_kv_write_f16 also their bindings and q pass (`rope_kv_common`).

use crate::backend::DType;
use crate::quant::Format;
use crate::quant::intn::Scheme;

macro_rules! shader {
    ($stem:literal) => {
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/shaders/", $stem, ".wgsl"))
    };
}

/// Storage binding kinds, in binding order after the params uniform (binding 0).
const R: bool = false;
const W: bool = true;

macro_rules! kernels {
    ($($kernel:ident => $stem:literal, [$($rw:expr),*];)*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Kernel { $($kernel),* }

        impl Kernel {
            pub const ALL: &'static [Kernel] = &[$(Kernel::$kernel),*];
            pub const fn stem(self) -> &'static str { match self { $(Kernel::$kernel => $stem),* } }
            const fn body(self) -> &'static str { match self { $(Kernel::$kernel => shader!($stem)),* } }
            /// Whether each storage binding (1, 2, …) is written.
            pub const fn writes(self) -> &'static [bool] { match self { $(Kernel::$kernel => &[$($rw),*]),* } }
        }
    };
}

kernels! {
    Matmul => "matmul", [R, R, W];
    MatmulVec => "matmul_vec", [R, R, W];
    MatmulVecParts => "matmul_vec_parts", [R, R, R, R, W, W, W];
    MatmulVecSilu => "matmul_vec_silu", [R, R, R, W, W];
    MatmulTiled => "matmul_tiled", [R, R, W];
    MatmulCoop => "matmul_coop", [R, R, W];
    MatmulCoop16 => "matmul_coop16", [R, R, W];
    DequantF16 => "dequant_f16", [R, W];
    ToF16 => "to_f16", [R, W];
    Embed => "embed", [R, R, W];
    RmsNorm => "rms_norm", [R, R, W];
    AddRmsNorm => "add_rms_norm", [W, R, R, W];
    AddRmsNormSplit => "add_rms_norm_split", [W, R, R, W, W, W];
    Rope => "rope", [W, R, R];
    RmsNormRope => "rms_norm_rope", [W, R, R, R];
    RopeKvWrite => "rope_kv_write", [W, W, R, R, R, R, W, W];
    RopeKvWriteF16 => "rope_kv_write_f16", [W, W, R, R, R, R, W, W];
    SiluMul => "silu_mul", [R, R, W];
    GeluMul => "gelu_mul", [R, R, W];
    AddAssign => "add_assign", [W, R];
    AddBias => "add_bias", [W, R];
    GatherRows => "gather_rows", [R, R, W];
    KvWrite => "kv_write", [R, R, R, W, W];
    KvWriteF16 => "kv_write_f16", [R, R, R, W, W];
    KvWriteQ8 => "kv_write_q8", [R, R, R, W, W];
    CopySlots => "copy_slots", [R, W];
    Attention => "attention", [R, R, R, R, R, R, W];
    AttentionDirect => "attention_direct", [R, R, R, R, R, R, W];
    AttentionTiled => "attention_tiled", [R, R, R, R, R, R, W];
    AttentionCombine => "attention_combine", [R, R, W];
    QuantizeQ8 => "quantize_q8", [R, W];
    SiluMulQ8 => "silu_mul_q8", [R, R, W, W];
    Argmax => "argmax", [R, W];
    TopK => "top_k", [R, W, W];
}

/// One compiled variant of a kernel: the knobs that change its source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Variant {
    pub kernel: Kernel,
    /// Weight format, for the kernels that read weights.
    pub format: Option<Format>,
    /// GEMV only: reduce rows with subgroup operations (threads per row = subgroup size).
    pub subgroups: bool,
    /// GEMV only: threads per output row.
    pub tpr: u32,
    /// Matmuls: rows of x per workgroup (each decoded weight is reused this many times); for
    /// matmul_tiled the tile's width BN (its height is always 64).
    pub mb: u32,
    /// matmul_tiled: per-block products in f16 (needs SHADER_F16).
    pub f16: bool,
    /// matmul_vec with teams of several lanes: blocks a lane loads before computing on them (1, 2
    /// or 4; the sums and their order do not depend on it).
    pub unroll: u32,
    /// matmul_vec, matmul_vec_parts, matmul_vec_silu with one row of x (MB = 1) and teams of several
    /// lanes: x goes through workgroup memory (`gemv.wgsl`'s STAGE_X), the same bits.
    pub stage_x: bool,
    /// matmul_vec_parts: how many weights (2 or 3) share its dispatch; 0 for other kernels.
    pub parts: u32,
    /// matmul_coop: the side of its square cooperative matrices (8 or 16; 0 for other kernels), with
    /// `tpr` the subgroup size that shares one matrix.
    pub coop: u32,
    /// matmul_vec, matmul_vec_parts with subgroups: subgroups per team (1, or the workgroup's: then
    /// TPR = split × the subgroup size, the team's subgroup sums combined in workgroup memory).
    pub split: u32,
    /// matmul_vec, matmul_vec_parts: x is int8 blocks (`quantize_q8.wgsl`) and the block products
    /// integer dot products (`gemv_xq8.wgsl`); only for formats with `int8_gemv`. rms_norm,
    /// add_rms_norm, attention_combine: dst's int8 blocks are written too (`q8_writer`).
    pub q8: bool,
    /// attention, attention_tiled: what the KV cache holds: f32 (`kv_f32.wgsl`), IEEE halves two
    /// per u32 word (`kv_f16.wgsl`, read with `unpack2x16float`, so no SHADER_F16 is needed) or
    /// q8_0 blocks (`kv_q8.wgsl`).
    pub kv: DType,
    /// attention_direct: query heads per workgroup (QH) and the head's vec4 columns (HD4); 0 for
    /// other kernels.
    pub heads: u32,
    pub hd4: u32,
}

impl Variant {
    pub fn plain(kernel: Kernel) -> Variant {
        Variant {
            kernel,
            format: None,
            subgroups: false,
            tpr: 0,
            mb: 0,
            f16: false,
            unroll: 1,
            stage_x: false,
            parts: 0,
            coop: 0,
            split: 1,
            q8: false,
            kv: DType::F32,
            heads: 0,
            hd4: 0,
        }
    }

    /// Whether each storage binding (1, 2, …) is written: the kernel's, and for a kernel that also
    /// writes its output's int8 blocks (`q8_writer`) those last.
    pub fn writes(&self) -> Vec<bool> {
        let mut writes = self.kernel.writes().to_vec();
        if self.q8_writer() {
            writes.push(true);
        }
        writes
    }

    /// rms_norm, add_rms_norm or attention_combine that also writes dst's int8 blocks
    /// (`norm_apply_q8.wgsl`, `combine_out_q8.wgsl`).
    fn q8_writer(&self) -> bool {
        self.q8 && matches!(self.kernel, Kernel::RmsNorm | Kernel::AddRmsNorm | Kernel::AttentionCombine)
    }

    pub fn label(&self) -> String {
        let mut s = self.kernel.stem().to_string();
        if let Some(f) = self.format {
            s += &format!("_{}", f.name().to_lowercase());
        }
        if matches!(self.kernel, Kernel::Matmul | Kernel::MatmulVec | Kernel::MatmulVecParts | Kernel::MatmulVecSilu) {
            s += &format!("_tpr{}_mb{}{}", self.tpr, self.mb, if self.subgroups { "_subgroup" } else { "" });
        }
        if self.parts > 0 {
            s += &format!("_p{}", self.parts);
        }
        if self.unroll > 1 {
            s += &format!("_u{}", self.unroll);
        }
        if self.stage_x {
            s += "_sx";
        }
        if self.q8 {
            s += "_q8";
        }
        if self.split > 1 {
            s += &format!("_s{}", self.split);
        }
        if self.kernel == Kernel::MatmulTiled {
            s += &format!("_bn{}", self.mb);
        }
        if self.coop > 0 {
            s += &format!("_cm{}_sg{}", self.coop, self.tpr);
        }
        if self.f16 {
            s += "_f16";
        }
        if self.heads > 0 {
            s += &format!("_h{}_d{}", self.heads, 4 * self.hd4);
        }
        match self.kv {
            DType::F16 => s += "_kvf16",
            DType::Q8_0 => s += "_kvq8",
            DType::F32 | DType::U32 => {}
        }
        s
    }

    /// The WGSL module: knobs, shared helpers, decoder and reduction as needed, then the body.
    pub fn source(&self) -> String {
        // An `enable` directive must precede every declaration.
        let mut src = String::from(if self.f16 { "enable f16;\n" } else { "" });
        if matches!(self.kernel, Kernel::MatmulCoop | Kernel::MatmulCoop16) {
            let (cm, sg) = (self.coop, self.tpr);
            src += "enable wgpu_cooperative_matrix;\n";
            src += &format!("const CM: u32 = {cm}u;\nconst SG: u32 = {sg}u;\n");
            src += &format!("alias MatA = coop_mat{cm}x{cm}<f16, A>;\nalias MatB = coop_mat{cm}x{cm}<f16, B>;\n");
            src += &format!("alias MatC = coop_mat{cm}x{cm}<f32, C>;\n");
            src += shader!("coop_store");
        }
        if matches!(self.kernel, Kernel::Matmul | Kernel::MatmulVec | Kernel::MatmulVecParts | Kernel::MatmulVecSilu) {
            let wg = if self.kernel == Kernel::Matmul { 256 } else { vec_wg(self.tpr) };
            src += &format!("const WG: u32 = {wg}u;\nconst TPR: u32 = {}u;\nconst MB: u32 = {}u;\n", self.tpr, self.mb);
            src += &format!("const UNROLL: u32 = {}u;\nconst SPLIT: u32 = {}u;\n", self.unroll, self.split);
            src += if self.subgroups { shader!("reduce_subgroup") } else { shader!("reduce_shared") };
        }
        if matches!(self.kernel, Kernel::MatmulVec | Kernel::MatmulVecParts | Kernel::MatmulVecSilu) {
            // Variants are made by `all()` and the matmul planner, only for quantized formats.
            let decode = self.format.and_then(decoder32).unwrap_or("");
            src += &format!("const PARTS: u32 = {}u;\n", self.parts);
            src += if self.stage_x {
                "const STAGE_X: bool = true;\nconst XCB: u32 = 2u * TPR;\nvar<workgroup> xs: array<vec4<f32>, XCB * 9u>;\n"
            } else {
                "const STAGE_X: bool = false;\nconst XCB: u32 = 1u;\nvar<workgroup> xs: array<vec4<f32>, 1>;\n"
            };
            src += if self.q8 { "alias XT = vec4<u32>;\n" } else { "alias XT = vec4<f32>;\n" };
            src += shader!("dot32_f32");
            src += if self.q8 { shader!("gemv_xq8") } else { shader!("gemv_x32") };
            src += &helpers(self.format);
            return src + decode + shader!("gemv") + self.kernel.body();
        }
        if self.kernel == Kernel::MatmulTiled {
            src += &format!("const BN: u32 = {}u;\n", self.mb);
            src += if self.f16 { shader!("tile32_f16") } else { shader!("tile32_f32") };
        }
        if let Some(format) = self.format {
            src += shader!("common");
            src += &helpers(Some(format));
            src += decoder(format);
        }
        if self.q8_writer() {
            // The int8 blocks' binding follows the kernel's own (`writes`).
            src += &format!("@group(0) @binding({}) var<storage, read_write> xq: array<u32>;\n", self.writes().len());
        }
        if matches!(self.kernel, Kernel::RmsNorm | Kernel::AddRmsNorm | Kernel::AddRmsNormSplit | Kernel::RmsNormRope) {
            src += shader!("norm_scale");
        }
        if matches!(self.kernel, Kernel::RmsNorm | Kernel::AddRmsNorm) {
            src += if self.q8 { shader!("norm_apply_q8") } else { shader!("norm_apply") };
        }
        if self.kernel == Kernel::AttentionCombine {
            src += if self.q8 { shader!("combine_out_q8") } else { shader!("combine_out") };
        }
        if matches!(self.kernel, Kernel::QuantizeQ8 | Kernel::SiluMulQ8 | Kernel::AddRmsNormSplit) || self.q8_writer() {
            src += shader!("q8_blocks");
        }
        if matches!(self.kernel, Kernel::KvWriteF16 | Kernel::KvWriteQ8 | Kernel::RopeKvWriteF16) {
            src += shader!("f16_bits");
        }
        if matches!(self.kernel, Kernel::Rope | Kernel::RmsNormRope | Kernel::RopeKvWrite | Kernel::RopeKvWriteF16) {
            src += shader!("rope_common");
        }
        if matches!(self.kernel, Kernel::RopeKvWrite | Kernel::RopeKvWriteF16) {
            src += shader!("rope_kv_common");
        }
        if self.kernel == Kernel::AttentionDirect {
            src += &format!("const QH: u32 = {}u;\nconst HD4: u32 = {}u;\n", self.heads, self.hd4);
        }
        if matches!(
            self.kernel,
            Kernel::Attention | Kernel::AttentionDirect | Kernel::AttentionTiled | Kernel::AttentionCombine
        ) {
            src += shader!("attention_fold");
        }
        if matches!(self.kernel, Kernel::Attention | Kernel::AttentionDirect | Kernel::AttentionTiled) {
            src += match self.kv {
                DType::F16 => shader!("kv_f16"),
                DType::Q8_0 => shader!("kv_q8"),
                DType::F32 | DType::U32 => shader!("kv_f32"),
            };
        }
        if matches!(self.kernel, Kernel::Attention | Kernel::AttentionTiled) {
            src += shader!("attention_chunk");
        }
        src + self.kernel.body()
    }

    /// Every variant the backend can build (for validation without a GPU).
    pub fn all() -> Vec<Variant> {
        let mut out = Vec::new();
        for &kernel in Kernel::ALL {
            match kernel {
                Kernel::Matmul => {
                    for format in Format::ALL {
                        for (subgroups, tpr, mb) in [(false, 32, 1), (false, 32, 8), (true, 32, 1), (true, 8, 8)] {
                            out.push(Variant {
                                kernel,
                                format: Some(format),
                                subgroups,
                                tpr,
                                mb,
                                ..Variant::plain(kernel)
                            });
                        }
                    }
                }
                Kernel::MatmulVec | Kernel::MatmulVecParts | Kernel::MatmulVecSilu => {
                    let parts: &[u32] = if kernel == Kernel::MatmulVecParts { &[2, 3] } else { &[0] };
                    for format in Format::ALL.into_iter().filter(|&f| decoder32(f).is_some()) {
                        let shapes =
                            [(false, 32, 1), (false, 32, 8), (true, 32, 1), (true, 8, 8), (false, 1, 1), (false, 1, 8)];
                        for (subgroups, tpr, mb) in shapes {
                            let stages: &[bool] = if tpr > 1 && mb == 1 { &[false, true] } else { &[false] };
                            // Int8 x (never staged, never with silu computed as x is loaded), in subgroup
                            // teams also split over the workgroup's four subgroups.
                            let q8 = kernel != Kernel::MatmulVecSilu && int8_gemv(format);
                            let splits: &[u32] = if subgroups { &[1, 4] } else { &[1] };
                            let xs = stages
                                .iter()
                                .map(|&s| (s, false, 1))
                                .chain(splits.iter().filter(|_| q8).map(|&split| (false, true, split)));
                            for (unroll, (stage_x, q8, split)) in
                                VEC_UNROLLS.into_iter().flat_map(|u| xs.clone().map(move |x| (u, x)))
                            {
                                out.extend(parts.iter().map(|&parts| Variant {
                                    kernel,
                                    format: Some(format),
                                    subgroups,
                                    tpr: tpr * split,
                                    mb,
                                    unroll,
                                    stage_x,
                                    parts,
                                    q8,
                                    split,
                                    ..Variant::plain(kernel)
                                }));
                            }
                        }
                    }
                }
                Kernel::MatmulTiled => {
                    for format in Format::ALL {
                        for mb in TILED_SIDES {
                            for f16 in [false, true].into_iter().filter(|&h| !h || format.is_quantized()) {
                                out.push(Variant { kernel, format: Some(format), mb, f16, ..Variant::plain(kernel) });
                            }
                        }
                    }
                }
                Kernel::MatmulCoop16 => out.extend(COOP_SHAPES.map(|(coop, tpr)| Variant {
                    f16: true,
                    coop,
                    tpr,
                    ..Variant::plain(kernel)
                })),
                Kernel::DequantF16 => {
                    out.extend(Format::ALL.into_iter().filter(|f| f.is_quantized()).map(|f| Variant {
                        format: Some(f),
                        f16: true,
                        ..Variant::plain(kernel)
                    }))
                }
                Kernel::ToF16 => out.push(Variant { f16: true, ..Variant::plain(kernel) }),
                Kernel::MatmulCoop => {
                    for format in Format::ALL.into_iter().filter(|f| f.is_quantized()) {
                        for (coop, tpr) in COOP_SHAPES {
                            out.push(Variant {
                                kernel,
                                format: Some(format),
                                f16: true,
                                coop,
                                tpr,
                                ..Variant::plain(kernel)
                            });
                        }
                    }
                }
                Kernel::Embed => {
                    out.extend(Format::ALL.into_iter().map(|f| Variant { format: Some(f), ..Variant::plain(kernel) }))
                }
                Kernel::Attention | Kernel::AttentionTiled => {
                    out.extend([DType::F32, DType::F16, DType::Q8_0].map(|kv| Variant { kv, ..Variant::plain(kernel) }))
                }
                Kernel::AttentionDirect => {
                    // llama-8b (4 heads, hd 128), SmolLM2 (3, hd 64), head_dim 256, 96 and 32.
                    for (heads, hd4) in [(4, 32), (3, 16), (4, 64), (2, 24), (1, 8)] {
                        out.extend([DType::F32, DType::F16, DType::Q8_0].map(|kv| Variant {
                            kv,
                            heads,
                            hd4,
                            ..Variant::plain(kernel)
                        }))
                    }
                }
                Kernel::RmsNorm | Kernel::AddRmsNorm | Kernel::AttentionCombine => {
                    out.extend([false, true].map(|q8| Variant { q8, ..Variant::plain(kernel) }))
                }
                _ => out.push(Variant::plain(kernel)),
            }
        }
        out
    }
}

/// The UNROLL values matmul_vec is built with.
pub const VEC_UNROLLS: [u32; 3] = [1, 2, 4];

/// Threads per workgroup of matmul_vec (teams of TPR lanes, four weight rows per team).
pub const VEC_WG: u32 = 128;
/// matmul_vec's workgroup when a team is one lane (CPU adapters): 64 rows per workgroup, so a
/// 576-row matrix still gives 9 workgroups for the adapter to spread over its threads.
const VEC_WG_SOLO: u32 = 16;

/// Threads per workgroup of matmul_vec with teams of `tpr` lanes.
pub fn vec_wg(tpr: u32) -> u32 {
    if tpr == 1 { VEC_WG_SOLO } else { VEC_WG }
}

/// (matrix side, subgroup size) pairs matmul_coop is validated with: lavapipe's 8 × 8 in subgroups of
/// 8, NVIDIA's 16 × 16 in warps of 32 (the host builds whatever pair its adapter has).
const COOP_SHAPES: [(u32, u32); 2] = [(8, 8), (16, 32)];

/// Tile widths BN of matmul_tiled (64 rows × BN columns; 256 threads, 4 × 4 or 4 × 8 outputs each).
pub const TILED_SIDES: [u32; 2] = [64, 128];

/// Whether matmul_vec's decoder for `format` adds a block minimum (`HAS_MIN`: m · Σx over the block),
/// so that the GEMV sums x values and does not only multiply them. Read from the decoder's source,
/// which is what decides it.
pub fn gemv_sums_x(format: Format) -> bool {
    decoder32(format).is_none_or(|d| !d.contains("const HAS_MIN: bool = false;"))
}

/// Whether matmul_vec can run `format` on int8 activations (`Variant::q8`): its decoder gives a block's
/// values as packed signed bytes (`fn ints`). Read from the decoder's source, which is what decides it.
pub fn int8_gemv(format: Format) -> bool {
    decoder32(format).is_some_and(|d| d.contains("fn ints("))
}

/// The whole-block decoder of a quantized format, for matmul_vec (float formats have none: their
/// GEMV is `matmul`). A k-quant's is one 32-value block of its 256-value super-block.
fn decoder32(format: Format) -> Option<&'static str> {
    match format {
        Format::Q4_0 => Some(shader!("decode32_q4_0")),
        Format::Q4_1 => Some(shader!("decode32_q4_1")),
        Format::Q5_0 => Some(shader!("decode32_q5_0")),
        Format::Q5_1 => Some(shader!("decode32_q5_1")),
        Format::Q8_0 => Some(shader!("decode32_q8_0")),
        Format::Q2_K => Some(shader!("decode32_q2_k")),
        Format::Q3_K => Some(shader!("decode32_q3_k")),
        Format::Q4_K => Some(shader!("decode32_q4_k")),
        Format::Q5_K => Some(shader!("decode32_q5_k")),
        Format::Q6_K => Some(shader!("decode32_q6_k")),
        Format::Intn(f) => Some(match f.scheme {
            Scheme::Int8 => shader!("decode32_int8"),
            Scheme::Int4 => shader!("decode32_int4"),
            Scheme::Int2 => shader!("decode32_int2"),
            Scheme::Nf4 => concat!(shader!("nf4_pairs"), shader!("decode32_nf4")),
            Scheme::Nf4Dq => concat!(shader!("nf4_pairs"), shader!("decode32_nf4_dq")),
        }),
        Format::F32 | Format::F16 | Format::BF16 => None,
    }
}

/// The element decoder of a weight format (values 8g .. 8g+7 of a row).
fn decoder(format: Format) -> &'static str {
    match format {
        Format::F32 => shader!("decode_f32"),
        Format::F16 => shader!("decode_f16"),
        Format::BF16 => shader!("decode_bf16"),
        Format::Q4_0 => shader!("decode_q4_0"),
        Format::Q4_1 => shader!("decode_q4_1"),
        Format::Q5_0 => shader!("decode_q5_0"),
        Format::Q5_1 => shader!("decode_q5_1"),
        Format::Q8_0 => shader!("decode_q8_0"),
        Format::Q2_K => shader!("decode_q2_k"),
        Format::Q3_K => shader!("decode_q3_k"),
        Format::Q4_K => shader!("decode_q4_k"),
        Format::Q5_K => shader!("decode_q5_k"),
        Format::Q6_K => shader!("decode_q6_k"),
        Format::Intn(f) => match f.scheme {
            Scheme::Int8 => shader!("decode_int8"),
            Scheme::Int4 => shader!("decode_int4"),
            Scheme::Int2 => shader!("decode_int2"),
            Scheme::Nf4 => shader!("decode_nf4"),
            Scheme::Nf4Dq => shader!("decode_nf4_dq"),
        },
    }
}

/// What both decoders of a format share, joined before them: the k-quants' (and INT2's 2-bit) bit
/// helpers (`kquant.wgsl`); for the group-wise formats their block size (a block is
/// 32 << INTN_SHIFT values) and `intn.wgsl`. Nothing for other formats.
fn helpers(format: Option<Format>) -> String {
    let mut src = String::new();
    let two_bit = matches!(format, Some(Format::Intn(f)) if f.scheme == Scheme::Int2);
    if format.is_some_and(Format::is_kquant) || two_bit {
        src += shader!("kquant");
    }
    if let Some(Format::Intn(f)) = format {
        src += &format!("const INTN_SHIFT: u32 = {}u;\n", (f.block_len() / 32).trailing_zeros());
        src += shader!("intn");
    }
    src
}
