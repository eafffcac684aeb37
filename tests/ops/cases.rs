//! Every op case, as data. main.rs runs each case on each compiled backend and compares it with
//! reference.rs. Case names read like `matmul(format=Q4_1,m=33,k=4096,n=257)`.

use std::fmt;

use ultra::Format;
use ultra::backend::{DType, Rope, RopeStyle};
use ultra::quant::intn::Scheme;

/// One `#[test]` per family per backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Matmul,
    SiluMulMatmul,
    NormMatmuls,
    Embed,
    RmsNorm,
    Rope,
    RmsNormRope,
    SiluMul,
    GeluMul,
    AddAssign,
    AddBias,
    GatherRows,
    KvWrite,
    Attention,
    CopySlots,
    Argmax,
    TopK,
}

impl Family {
    pub const ALL: [Family; 17] = [
        Family::Matmul,
        Family::SiluMulMatmul,
        Family::NormMatmuls,
        Family::Embed,
        Family::RmsNorm,
        Family::Rope,
        Family::RmsNormRope,
        Family::SiluMul,
        Family::GeluMul,
        Family::AddAssign,
        Family::AddBias,
        Family::GatherRows,
        Family::KvWrite,
        Family::Attention,
        Family::CopySlots,
        Family::Argmax,
        Family::TopK,
    ];
}

/// Attention over a paged cache: sequence s holds `seq_lens[s]` positions, the batch queries its
/// last `new_tokens[s]` (1 = decode, all = prefill, a few = speculative verify).
#[derive(Clone, Debug)]
pub struct AttnCase {
    pub seq_lens: Vec<usize>,
    pub new_tokens: Vec<usize>,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub block_size: usize,
    /// Sliding window (keys a token sees, itself included), `None` for full causal attention.
    pub window: Option<usize>,
    /// The cache's element type: F32, or F16 (cuda and wgpu), whose rows the oracle still takes unrounded.
    pub kv: DType,
}

#[derive(Clone, Debug)]
pub enum Op {
    Matmul {
        format: Format,
        m: usize,
        k: usize,
        n: usize,
    },
    /// hidden = silu(gate) · up [m, k], then hidden · wᵀ [m, n].
    SiluMulMatmul {
        format: Format,
        m: usize,
        k: usize,
        n: usize,
    },
    /// xn = rms_norm(x [+ y]) [m, k] (`add`: with the residual y), then xn · wᵀ [m, n] and xn · w2ᵀ
    /// [m, n + 3] (two parts sharing xn, as q and k do).
    NormMatmuls {
        format: Format,
        m: usize,
        k: usize,
        n: usize,
        add: bool,
    },
    /// dst = scale · table rows (1, or Gemma's sqrt(d_model)).
    Embed {
        format: Format,
        vocab: usize,
        d: usize,
        n_tokens: usize,
        scale: f32,
    },
    RmsNorm {
        rows: usize,
        d: usize,
        eps: f32,
    },
    /// `factors`: with per-pair frequency factors (Llama 3's rope_freqs).
    Rope {
        n_tokens: usize,
        n_heads: usize,
        rope: Rope,
        factors: bool,
    },
    RmsNormRope {
        n_tokens: usize,
        n_heads: usize,
        eps: f32,
        rope: Rope,
        factors: bool,
    },
    SiluMul {
        rows: usize,
        d: usize,
    },
    GeluMul {
        rows: usize,
        d: usize,
    },
    AddAssign {
        rows: usize,
        d: usize,
    },
    AddBias {
        rows: usize,
        d: usize,
    },
    GatherRows {
        rows: usize,
        d: usize,
        n: usize,
    },
    KvWrite {
        n_tokens: usize,
        n_slots: usize,
        kv_dim: usize,
        kv: DType,
    },
    Attention(AttnCase),
    CopySlots {
        n_slots: usize,
        kv_dim: usize,
        src: usize,
        dst: usize,
        n: usize,
        kv: DType,
    },
    Argmax {
        rows: usize,
        vocab: usize,
    },
    TopK {
        rows: usize,
        vocab: usize,
        k: usize,
    },
}

impl Op {
    pub fn family(&self) -> Family {
        match self {
            Op::Matmul { .. } => Family::Matmul,
            Op::SiluMulMatmul { .. } => Family::SiluMulMatmul,
            Op::NormMatmuls { .. } => Family::NormMatmuls,
            Op::Embed { .. } => Family::Embed,
            Op::RmsNorm { .. } => Family::RmsNorm,
            Op::Rope { .. } => Family::Rope,
            Op::RmsNormRope { .. } => Family::RmsNormRope,
            Op::SiluMul { .. } => Family::SiluMul,
            Op::GeluMul { .. } => Family::GeluMul,
            Op::AddAssign { .. } => Family::AddAssign,
            Op::AddBias { .. } => Family::AddBias,
            Op::GatherRows { .. } => Family::GatherRows,
            Op::KvWrite { .. } => Family::KvWrite,
            Op::Attention(_) => Family::Attention,
            Op::CopySlots { .. } => Family::CopySlots,
            Op::Argmax { .. } => Family::Argmax,
            Op::TopK { .. } => Family::TopK,
        }
    }
}

fn rope_params(r: &Rope) -> String {
    format!(
        "style={:?},head_dim={},n_rot={},theta={},freq_scale={}",
        r.style, r.head_dim, r.n_rot, r.theta, r.freq_scale
    )
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Op::Matmul { format, m, k, n } => write!(f, "matmul(format={},m={m},k={k},n={n})", format.name()),
            Op::SiluMulMatmul { format, m, k, n } => {
                write!(f, "silu_mul_matmul(format={},m={m},k={k},n={n})", format.name())
            }
            Op::NormMatmuls { format, m, k, n, add } => {
                write!(f, "norm_matmuls(format={},m={m},k={k},n={n},add={add})", format.name())
            }
            Op::Embed { format, vocab, d, n_tokens, scale } => {
                write!(f, "embed(format={},vocab={vocab},d={d},n_tokens={n_tokens},scale={scale})", format.name())
            }
            Op::RmsNorm { rows, d, eps } => write!(f, "rms_norm(rows={rows},d={d},eps={eps:e})"),
            Op::Rope { n_tokens, n_heads, rope, factors } => {
                write!(f, "rope(n_tokens={n_tokens},n_heads={n_heads},{},factors={factors})", rope_params(rope))
            }
            Op::RmsNormRope { n_tokens, n_heads, eps, rope, factors } => write!(
                f,
                "rms_norm_rope(n_tokens={n_tokens},n_heads={n_heads},eps={eps:e},{},factors={factors})",
                rope_params(rope)
            ),
            Op::SiluMul { rows, d } => write!(f, "silu_mul(rows={rows},d={d})"),
            Op::GeluMul { rows, d } => write!(f, "gelu_mul(rows={rows},d={d})"),
            Op::AddAssign { rows, d } => write!(f, "add_assign(rows={rows},d={d})"),
            Op::AddBias { rows, d } => write!(f, "add_bias(rows={rows},d={d})"),
            Op::GatherRows { rows, d, n } => write!(f, "gather_rows(rows={rows},d={d},n={n})"),
            Op::KvWrite { n_tokens, n_slots, kv_dim, kv } => {
                write!(f, "kv_write(n_tokens={n_tokens},n_slots={n_slots},kv_dim={kv_dim}{})", kv_suffix(*kv))
            }
            Op::Attention(a) => write!(
                f,
                "attention(seq_lens={:?},new_tokens={:?},n_heads={},n_kv_heads={},head_dim={},block_size={}{}{})",
                a.seq_lens,
                a.new_tokens,
                a.n_heads,
                a.n_kv_heads,
                a.head_dim,
                a.block_size,
                a.window.map_or(String::new(), |w| format!(",window={w}")),
                kv_suffix(a.kv)
            ),
            Op::CopySlots { n_slots, kv_dim, src, dst, n, kv } => {
                write!(f, "copy_slots(n_slots={n_slots},kv_dim={kv_dim},src={src},dst={dst},n={n}{})", kv_suffix(*kv))
            }
            Op::Argmax { rows, vocab } => write!(f, "argmax(rows={rows},vocab={vocab},ties)"),
            Op::TopK { rows, vocab, k } => write!(f, "top_k(rows={rows},vocab={vocab},k={k})"),
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Tolerance {
    /// Bit-identical (copies, indices).
    Exact,
    /// Σ(actual - expected)² / Σ expected² ≤ this (reductions).
    Nmse(f64),
    /// |actual - expected| ≤ abs + rel · |expected| everywhere (elementwise).
    RelAbs { rel: f64, abs: f64 },
    /// The first `exact` values bit-exact (indices and copies), the rest within `RelAbs` (or
    /// bit-equal, which lets an expected −∞ pass).
    ExactThen { exact: usize, rel: f64, abs: f64 },
}

pub struct Case {
    pub op: Op,
    pub tolerance: Tolerance,
    /// Why this tolerance, in one line.
    pub why: &'static str,
}

/// The tolerance of `case` on `backend` (`f16`: the backend computes in f16 where it can): GPU
/// backends may quantize the activations of quantized matmuls to int8 blocks (llama.cpp's MMVQ),
/// which ggml's test-backend-ops allows at NMSE 5e-4; cuda's tensor-core GEMM (m > 8) rounds x and
/// each scaled weight to f16 (unit roundoff 2^-11) and is held to the same bound. The CPU's int8
/// path (`cpu_int8`) keeps two planes (error ≤ 1/65,024 of a block's largest value) and is held to
/// the f32 rows' 1e-7, except NF4, whose levels it takes to 1/4095 of the absmax: a 32-term dot that nearly cancels measured
/// NMSE 3.9e-7 (k = 32), so 1e-5. wgpu's GEMVs (m < 64) are f32, or with `Options::int8_gemv` (`wgpu_int8`,
/// the default on GPUs) int8 blocks of x as cuda's, held to the same 5e-4; with
/// SHADER_F16 its matmul_tiled (m ≥ 64) rounds x and each decoded weight to f16 (unit roundoff
/// 2^-11 ≈ 4.9e-4) and chains a whole block's 32 products in f16 before f32 takes over: NMSE
/// 8–9.2e-7 on lavapipe for every quantized format, not growing with k; 3e-5 leaves room for
/// blocks where d·Σq·x and m·Σx nearly cancel (an f16 GEMV measured 6.8e-6 on such a case).
/// The CPU's AMX path (`cpu_amx`) rounds x and each dequantized weight to bf16 from 64 rows
/// (unit roundoff 2^-9, f32 accumulators): NMSE 3.8–5.3e-6 measured for every quantized format
/// at k = 576–4096, so 2e-5.
pub fn tolerance_on(backend: &str, f16: bool, case: &Case) -> Tolerance {
    match case.op {
        Op::Matmul { format, m, .. } | Op::SiluMulMatmul { format, m, .. }
            if backend == "cpu_amx" && format.is_quantized() && m >= 64 =>
        {
            Tolerance::Nmse(2e-5)
        }
        Op::Matmul { format: Format::Intn(f), .. } | Op::SiluMulMatmul { format: Format::Intn(f), .. }
            if matches!(backend, "cpu_int8" | "cpu_amx") && matches!(f.scheme, Scheme::Nf4 | Scheme::Nf4Dq) =>
        {
            Tolerance::Nmse(1e-5)
        }
        Op::Matmul { format, .. } | Op::SiluMulMatmul { format, .. } | Op::NormMatmuls { format, .. }
            if backend == "cuda" && format.is_quantized() =>
        {
            Tolerance::Nmse(5e-4)
        }
        Op::Matmul { .. } | Op::SiluMulMatmul { .. } | Op::NormMatmuls { .. } if backend == "wgpu_int8" => {
            Tolerance::Nmse(5e-4)
        }
        Op::Matmul { format, m, .. } if backend == "wgpu" && f16 && format.is_quantized() && m >= 64 => {
            Tolerance::Nmse(3e-5)
        }
        _ => case.tolerance,
    }
}

fn case(op: Op, tolerance: Tolerance, why: &'static str) -> Case {
    Case { op, tolerance, why }
}

fn rope(style: RopeStyle, head_dim: usize, n_rot: usize, theta: f32, freq_scale: f32) -> Rope {
    Rope { head_dim, n_rot, theta, freq_scale, style }
}

/// k rounded up to whole blocks of `format`: k-quant rows hold 256-value super-blocks, so their
/// cases keep the odd m and n and the tile-edge shapes with k = 256, 512, 768, 1536 or 4096.
fn k_for(format: Format, k: usize) -> usize {
    k.next_multiple_of(format.block_len())
}

/// `,kv=f16` or `,kv=q8_0` in a case name for an f16 or q8_0 cache (nothing for f32).
fn kv_suffix(kv: DType) -> &'static str {
    match kv {
        DType::F16 => ",kv=f16",
        DType::Q8_0 => ",kv=q8_0",
        DType::F32 | DType::U32 => "",
    }
}

/// Cases that must fail with `Error::Unsupported` instead of running, by backend: a format that
/// lands on one backend first lists its cases here, so the table checks the others refuse it
/// cleanly. Today the f16 KV cache (the GPU backends', not the cpu's), the q8_0 KV cache (wgpu's
/// alone) and, on wgpu, attention of a head_dim that is not a multiple of 4 (its kernels read K/V
/// rows as vec4s).
pub fn unsupported_on(backend: &str, op: &Op) -> bool {
    let kv = match op {
        Op::KvWrite { kv, .. } | Op::CopySlots { kv, .. } => *kv,
        Op::Attention(a) => a.kv,
        _ => DType::F32,
    };
    let odd_head = matches!(op, Op::Attention(a) if !a.head_dim.is_multiple_of(4));
    (kv == DType::F16 && backend == "cpu")
        || (kv == DType::Q8_0 && backend != "wgpu")
        || (odd_head && backend == "wgpu")
}

pub fn all() -> Vec<Case> {
    let mut cases = Vec::new();
    // matmul: m = 1 is decode; 3, 7, 33 are odd batch sizes; k = 96 and 576 are multiples of 32
    // that are not powers of two; n = 257 is one past a tile multiple; (64, 576, 1536) is SmolLM2.
    const SUM_WHY: &str = "the oracle sees the same dequantized weights; only f32 accumulation differs";
    for format in Format::ALL {
        for (m, k, n) in [(1, 32, 1), (3, 96, 7), (7, 576, 33), (33, 4096, 257), (64, 576, 1536)] {
            let k = k_for(format, k);
            cases.push(case(Op::Matmul { format, m, k, n }, Tolerance::Nmse(1e-7), SUM_WHY));
        }
    }
    for (m, k, n) in [(5, 17, 3), (2, 100, 9), (1, 1, 1)] {
        cases.push(case(Op::Matmul { format: Format::F32, m, k, n }, Tolerance::Nmse(1e-7), SUM_WHY));
    }
    // m ≥ 64 (wgpu: matmul_tiled): m, n not multiples of its 64 tile, k = 32·odd; (130, 32, 8100) is
    // big enough for the 64 × 128 tile; 37 rows stay on the GEMV just below; float weights also with
    // a k tail past the last K step.
    for format in Format::ALL {
        let mut shapes = vec![(37, 288, 100), (70, 160, 129), (130, 32, 8100)];
        if !format.is_quantized() {
            shapes.extend([(70, 77, 129), (64, 1, 3)]);
        }
        for (m, k, n) in shapes {
            let k = k_for(format, k);
            cases.push(case(Op::Matmul { format, m, k, n }, Tolerance::Nmse(1e-7), SUM_WHY));
        }
    }
    // Batched decode (m = 8 … 256 rows of distinct sequences): cuda's matmul_mma splits k when the
    // tiles would not fill the GPU, with a 32-row tile up to m = 64 (matmul_mma_split32 on 132 SMs: 16
    // splits at m 32, 8 at 64 (two row tiles), 12 at 40, the last of 1 block), the 64-row one above (4, 8,
    // 4 splits at 128, 130, 256); m = 8 is the GEMV's largest; (20, 256, 34001) has tiles enough to run
    // unsplit, on the 32-row tile (matmul_mma32, as a vocabulary matrix in batched decode); a few formats
    // to keep the oracle cheap.
    for format in [Format::Q4_0, Format::Q8_0, Format::Q4_K, Format::Q6_K] {
        let shapes = [(8, 4096, 320), (32, 4096, 320), (64, 2048, 257), (128, 1024, 200), (130, 2048, 257)];
        for (m, k, n) in shapes.into_iter().chain([(256, 1024, 136), (40, 3200, 130), (20, 256, 34001)]) {
            let k = k_for(format, k);
            cases.push(case(Op::Matmul { format, m, k, n }, Tolerance::Nmse(1e-7), SUM_WHY));
        }
    }
    // GEMV grids past one resident wave (cuda pairs weight rows per lane group, matmul_vec_mM_r2, past
    // 8 blocks per SM at m = 1, 6 at m 2–4, always at m 5–8; 4,501 rows of 4,096 are 1,126 blocks, past
    // 8 per SM on up to 140 SMs): every m entry, an odd n so the last pair has one row.
    for format in [Format::Q4_0, Format::Q6_K, Format::F16] {
        for m in [1, 2, 3, 8] {
            cases.push(case(Op::Matmul { format, m, k: 4096, n: 4501 }, Tolerance::Nmse(1e-7), SUM_WHY));
        }
    }
    // silu_mul_matmul: decode (m = 1, 8: cuda's fused int8 path) and a batch past it (m = 13);
    // k = 1536 is SmolLM2's d_ff; hidden is rounded to f32 once, as silu_mul leaves it.
    const FUSED_WHY: &str = "silu in f32 (~1 ulp), then f32 accumulation over the same dequantized weights";
    for format in Format::ALL {
        for (m, k, n) in [(1, 1536, 40), (8, 96, 33), (13, 576, 7)] {
            let k = k_for(format, k);
            cases.push(case(Op::SiluMulMatmul { format, m, k, n }, Tolerance::Nmse(1e-7), FUSED_WHY));
        }
    }
    // norm_matmuls: decode (m = 1, 8: wgpu's norm writes int8 blocks) and a batch past the GEMV (m = 13),
    // with and without the residual add; k = 576 is SmolLM2's d_model.
    const NORM_WHY: &str = "one sum of squares, xn rounded to f32 once, then f32 accumulation over the weights";
    for format in [Format::Q4_0, Format::Q5_1, Format::Q8_0, Format::Q4_K, Format::Q6_K, Format::F16] {
        for (m, k, n, add) in [(1, 576, 40, true), (1, 256, 9, false), (8, 512, 33, true), (13, 256, 7, true)] {
            let k = k_for(format, k);
            cases.push(case(Op::NormMatmuls { format, m, k, n, add }, Tolerance::Nmse(1e-7), NORM_WHY));
        }
    }
    for format in Format::ALL {
        let d = if format.is_quantized() { k_for(format, 96) } else { 33 };
        cases.push(case(
            Op::Embed { format, vocab: 257, d, n_tokens: 7, scale: 1.0 },
            Tolerance::Exact,
            "a copy of dequantize_row",
        ));
        // Gemma 3 270M's scale, sqrt(640): one f32 product per value, correctly rounded.
        cases.push(case(
            Op::Embed { format, vocab: 257, d, n_tokens: 7, scale: 640f32.sqrt() },
            Tolerance::RelAbs { rel: 6e-8, abs: 0.0 },
            "dequantize_row, then one correctly rounded f32 product",
        ));
    }
    for (rows, d, eps) in [(1, 8, 1e-6), (3, 257, 1e-5), (7, 576, 1e-5), (33, 4096, 1e-6)] {
        let why = "f32 products after one sum of squares; an off-by-one in d shows at 1e-8";
        cases.push(case(Op::RmsNorm { rows, d, eps }, Tolerance::Nmse(1e-9), why));
    }
    let why_rope = "f32 angles (iterated theta, cosf/sinf) vs exact f64: ~1 ulp of angles up to 5000 rad";
    for style in [RopeStyle::Normal, RopeStyle::Neox] {
        for (n_tokens, n_heads, r) in [
            (1, 1, rope(style, 64, 64, 10000.0, 1.0)),
            (7, 9, rope(style, 64, 64, 10000.0, 1.0)),
            (3, 3, rope(style, 64, 32, 1e6, 0.25)),
            (33, 2, rope(style, 128, 96, 500000.0, 1.0)),
        ] {
            // Frequency factors as Llama 3's scaling makes them (1 for fast pairs up to 8 for slow).
            for factors in [false, true] {
                cases.push(case(Op::Rope { n_tokens, n_heads, rope: r, factors }, Tolerance::Nmse(1e-8), why_rope));
                let op = Op::RmsNormRope { n_tokens, n_heads, eps: 1e-6, rope: r, factors };
                cases.push(case(op, Tolerance::Nmse(1e-8), why_rope));
            }
        }
    }
    let why_silu = "one expf and two roundings per element";
    // gate in ±10 reaches tanh's clamp (u > 10 from g ≈ 4.2); up in ±2. Where 1 + tanh(u) cancels
    // (g ≈ -3…-4) its f32 rounding (~2 ulp of 1) times g/2 · up (≤ 10) is ≤ 3e-6 absolute.
    let why_gelu = "one tanhf and ~6 roundings; 1 + tanh cancels for negative gates (≤ 3e-6 absolute)";
    for (rows, d) in [(1, 1), (7, 257), (33, 1536)] {
        cases.push(case(Op::SiluMul { rows, d }, Tolerance::RelAbs { rel: 1e-6, abs: 1e-6 }, why_silu));
        cases.push(case(Op::GeluMul { rows, d }, Tolerance::RelAbs { rel: 1e-5, abs: 5e-6 }, why_gelu));
        let why = "one correctly rounded f32 add";
        cases.push(case(Op::AddAssign { rows, d }, Tolerance::RelAbs { rel: 1.2e-7, abs: 1e-30 }, why));
        cases.push(case(Op::AddBias { rows, d }, Tolerance::RelAbs { rel: 1.2e-7, abs: 1e-30 }, why));
        cases.push(case(Op::GatherRows { rows, d, n: rows + 2 }, Tolerance::Exact, "a copy"));
        cases.push(case(Op::Argmax { rows, vocab: d }, Tolerance::Exact, "an index"));
    }
    cases.push(case(Op::Argmax { rows: 3, vocab: 49152 }, Tolerance::Exact, "an index"));
    // top_k: vocab sizes that are not multiples of the workgroup, up to a 49152 + 37 vocabulary;
    // k = 256 is MAX_TOP_K (clamped to small vocabularies).
    // The lse's absolute error is its f32 sum's relative error: ~vocab/256 exp terms per thread,
    // then a tree, ≤ 2e-5 even if every rounding went one way; 1 ulp (≤ 1e-6) is what lavapipe shows.
    const TOP_K_WHY: &str = "ids, values exact; lse: f32 sums of exp, ≤ 2e-5 worst case, plus its rounding";
    for (rows, vocab) in [(1, 1), (3, 7), (2, 1000), (3, 49152 + 37)] {
        let mut ks: Vec<usize> = [1, 2, 40, 256].iter().map(|&k: &usize| k.min(vocab)).collect();
        ks.dedup();
        for k in ks {
            let tolerance = Tolerance::ExactThen { exact: 2 * rows * k, rel: 1e-6, abs: 2e-5 };
            cases.push(case(Op::TopK { rows, vocab, k }, tolerance, TOP_K_WHY));
        }
    }
    // f16 caches: the oracle's values are rounded to f16 (run.rs) as the host write and the kernel round them.
    // A q8_0 cache's kv_write against the unquantized values (run.rs): the error of the q8_0 cache against
    // the f32 one. Each value is off by ≤ half a step (max |x| / 254 of its block, ~0.0038 for U(-1, 1)),
    // uniformly: NMSE = step² / 12 / E[x²] ≈ 1.46e-5 over thousands of values; 2e-5 allows 1.37×, and fails
    // a kernel that truncates instead of rounding (step² / 3 on the written slots). Its copies move the
    // stored words.
    const Q8_WHY: &str = "q8_0 (≤ half a step of max|x|/127 per value) against f32: NMSE ≈ 1.46e-5 for U(-1, 1)";
    for kv in [DType::F32, DType::F16, DType::Q8_0] {
        for (n_tokens, n_slots, kv_dim) in [(1, 1, 64), (7, 48, 192), (33, 100, 96)] {
            let op = Op::KvWrite { n_tokens, n_slots, kv_dim, kv };
            cases.push(if kv == DType::Q8_0 {
                case(op, Tolerance::Nmse(2e-5), Q8_WHY)
            } else {
                case(op, Tolerance::Exact, "a copy (f16: rounded)")
            });
        }
        for (n_slots, kv_dim, src, dst, n) in [(4, 64, 0, 3, 1), (64, 192, 16, 40, 16), (50, 96, 3, 10, 20)] {
            let op = Op::CopySlots { n_slots, kv_dim, src, dst, n, kv };
            cases.push(case(op, Tolerance::Exact, "a copy (may overlap)"));
        }
    }
    let why_attn = "f32 dots, expf and online-softmax rescaling against a two-pass f64 softmax";
    let attn = |seq_lens: &[usize], new_tokens: &[usize], heads: (usize, usize), head_dim, block_size| {
        let a = AttnCase {
            seq_lens: seq_lens.to_vec(),
            new_tokens: new_tokens.to_vec(),
            n_heads: heads.0,
            n_kv_heads: heads.1,
            head_dim,
            block_size,
            window: None,
            kv: DType::F32,
        };
        case(Op::Attention(a), Tolerance::Nmse(1e-9), why_attn)
    };
    // An f16 cache against the oracle on the unrounded f32 rows: that is the error of the f16 cache
    // against the f32 one. Each value rounds by ≤ 2^-11 relative; an f64 simulation of these fills
    // (q in ±4, K/V in ±1, 1 to 1000 keys, head_dim 64 to 256) gives NMSE 4e-8 .. 1e-7; 5e-7 allows 5×.
    let why_f16 = "f16 K/V (≤ 2^-11 relative each) against the f32 oracle: NMSE ~1e-7 in an f64 simulation";
    let f16 = |mut c: Case| {
        if let Op::Attention(a) = &mut c.op {
            a.kv = DType::F16;
        }
        Case { tolerance: Tolerance::Nmse(5e-7), why: why_f16, ..c }
    };
    // A q8_0 cache against the oracle on the unquantized rows: the error of the q8_0 cache against the f32
    // one. Each value is off by ≤ half a step (max |x| / 254 of its block); an output is a p-weighted mean
    // of V rows with independent errors, so V alone gives its NMSE (~1.4e-5 for U(-1, 1)), and K through
    // the scores about as much again: 2.0e-5 .. 3.9e-5 measured on lavapipe; 1e-4 allows 2.5×.
    let why_q8 = "q8_0 K/V (≤ half a step of max|x|/127 each) against the f32 oracle: NMSE 2e-5 .. 4e-5";
    let q8 = |mut c: Case| {
        if let Op::Attention(a) = &mut c.op {
            a.kv = DType::Q8_0;
        }
        Case { tolerance: Tolerance::Nmse(1e-4), why: why_q8, ..c }
    };
    let windowed = |mut c: Case, window: usize| {
        if let Op::Attention(a) = &mut c.op {
            a.window = Some(window);
        }
        c
    };
    cases.push(attn(&[1], &[1], (9, 3), 64, 16)); // first decode step
    cases.push(attn(&[1, 17, 40], &[1, 1, 1], (9, 3), 64, 16)); // decode batch, GQA
    cases.push(attn(&[33, 7], &[33, 7], (9, 3), 64, 16)); // prefill of two prompts
    cases.push(attn(&[20, 45, 5], &[5, 4, 3], (4, 1), 32, 16)); // speculative verify, MQA
    cases.push(attn(&[300, 9], &[2, 9], (2, 2), 128, 7)); // MHA, block size not a power of two
    cases.push(attn(&[13], &[13], (6, 2), 64, 1)); // one slot per block
    cases.push(attn(&[300], &[37], (4, 2), 128, 16)); // one prompt's tail across a chunk edge (wgpu: tiled)
    // 64+ tokens: cuda runs attention_prefill (64 (token, head) rows × 64-key tiles; one pass per sequence
    // in a tile, and the harness shuffles the batch, so tiles mix sequences and positions)
    cases.push(attn(&[133], &[133], (9, 3), 64, 16)); // one prompt, 133 a multiple of no tile or block
    cases.push(attn(&[100], &[100], (8, 2), 128, 16)); // head_dim 128, g = 4
    cases.push(attn(&[70, 61], &[70, 61], (9, 3), 64, 16)); // two prompts' prefill chunks
    cases.push(attn(&[90, 30, 200, 5], &[80, 1, 1, 1], (9, 3), 64, 16)); // a prefill chunk + three decodes
    cases.push(attn(&[250], &[70], (9, 3), 64, 16)); // a second chunk after 180 cached positions
    cases.push(attn(&[81, 3], &[66, 3], (3, 3), 256, 7)); // head_dim 256, MHA, block size 7
    cases.push(attn(&[150, 40], &[64, 40], (4, 1), 96, 16)); // head_dim 96 (below the kernel's 128), MQA
    // wgpu folds chunks of 32 positions; split-K for few queries per sequence, tiled for ≥ 8 on average.
    cases.push(attn(&[1, 31, 32, 33, 63, 64, 65, 300, 1000], &[1; 9], (9, 3), 64, 16)); // decode around chunk edges
    cases.push(attn(&[1, 65, 1000], &[1, 1, 1], (8, 2), 128, 16)); // decode, GQA 4, head_dim 128
    cases.push(attn(&[2, 150, 41], &[1, 1, 1], (4, 1), 96, 16)); // decode, head_dim 96 (cuda: attention_h1_128)
    cases.push(windowed(attn(&[1, 300, 700], &[1, 1, 1], (4, 1), 256, 16), 512)); // gemma3 decode (h1_256)
    cases.push(attn(&[1000], &[40], (8, 2), 128, 16)); // prefill chunk from mid-sequence (wgpu: tiled)
    cases.push(attn(&[129], &[129], (2, 2), 32, 5)); // whole prompt, MHA (wgpu: tiled)
    // Mixed batches: prefill chunks beside decodes, tokens shuffled (wgpu tiled: tiles span sequences).
    cases.push(attn(&[100, 1, 65, 33, 500], &[40, 1, 1, 33, 1], (9, 3), 64, 16));
    cases.push(attn(&[70, 40, 300], &[3, 1, 2], (8, 2), 128, 8)); // speculative verify beside decode (split-K)
    // Decode batches of 64+ sequences (cuda: flash-decoding, never the tiled kernel; attention_batch from 128
    // (token, KV head) pairs): llama-8b's heads (g = 4), g = 6 (query heads in chunks of 4 + 2 per block), a
    // batch below attention_batch's threshold with g = 8, and a window.
    let lens = |n: usize| (0..n).map(|i| 1 + (i * 37) % 300).collect::<Vec<_>>();
    cases.push(attn(&lens(64), &[1; 64], (32, 8), 128, 16));
    cases.push(attn(&lens(130), &[1; 130], (12, 2), 64, 16));
    cases.push(attn(&lens(9), &[1; 9], (16, 2), 64, 16));
    cases.push(windowed(attn(&lens(96), &[1; 96], (8, 2), 128, 16), 100));
    // cuda's attention_batch (decode batches of 128+ (token, KV head) pairs, head_dim ≤ 128): head_dim 96 (lanes
    // past it idle, vector loads) and 66 (not a multiple of a lane's 4 dims: element loads), block size 5.
    cases.push(attn(&lens(40), &[1; 40], (16, 4), 96, 16));
    cases.push(attn(&lens(70), &[1; 70], (4, 2), 66, 5));
    // Sliding windows: blocks wholly before every batch token's window are u32::MAX in the table and
    // NaN in the cache (run.rs), so a kernel that reads one fails. Windows that are not multiples of the
    // block (16), wgpu's chunk (32) or cuda's key tile (64).
    cases.push(windowed(attn(&[1, 39, 40, 41, 100, 300, 1000], &[1; 7], (9, 3), 64, 16), 40)); // decode
    cases.push(windowed(attn(&[1, 2, 70], &[1, 1, 1], (2, 1), 64, 16), 1)); // a token sees only itself
    cases.push(windowed(attn(&[133], &[133], (9, 3), 64, 16), 50)); // prefill longer than the window
    cases.push(windowed(attn(&[300], &[37], (4, 2), 128, 16), 64)); // a chunk across the window edge
    cases.push(windowed(attn(&[1000], &[70], (8, 2), 128, 16), 100)); // chunk of 70 mid-sequence (cuda: tiled)
    cases.push(windowed(attn(&[100, 1, 65, 33, 500], &[40, 1, 1, 33, 1], (9, 3), 64, 16), 33)); // mixed batch
    cases.push(windowed(attn(&[600, 20], &[70, 20], (4, 1), 256, 16), 512)); // gemma3's shape and window
    cases.push(windowed(attn(&[30], &[30], (2, 2), 32, 5), 100)); // a window longer than the sequence
    // f16 caches through every cuda entry: flash-decoding with 4 heads per block and with 1, and the tiled
    // kernel at head_dim 64, 128 and 256 (with a window and a mixed batch).
    cases.push(f16(attn(&lens(64), &[1; 64], (32, 8), 128, 16))); // llama-8b decode batch (attention_batch_128_f16)
    cases.push(f16(attn(&lens(40), &[1; 40], (8, 1), 256, 16))); // head_dim 256, 8 heads per KV head (attention_256_f16)
    cases.push(f16(windowed(attn(&lens(48), &[1; 48], (9, 3), 64, 16), 40))); // attention_batch_64_f16, g = 3, window
    cases.push(f16(attn(&lens(70), &[1; 70], (4, 2), 66, 5))); // attention_batch_128_f16, element loads
    cases.push(f16(attn(&[1, 65, 1000], &[1, 1, 1], (8, 2), 128, 16))); // few tokens (attention_h1_128_f16)
    cases.push(f16(attn(&[20, 45, 5], &[5, 4, 3], (4, 1), 32, 16))); // speculative verify, MQA
    cases.push(f16(attn(&[133], &[133], (9, 3), 64, 16))); // prefill (attention_prefill_64_f16)
    cases.push(f16(attn(&[100, 1, 65, 33, 500], &[40, 1, 1, 33, 1], (9, 3), 64, 16))); // mixed batch
    cases.push(f16(attn(&[1000], &[70], (8, 2), 128, 16))); // a chunk mid-sequence (attention_prefill_128_f16)
    cases.push(f16(windowed(attn(&[600, 20], &[70, 20], (4, 1), 256, 16), 512))); // gemma3 (prefill_256_f16)
    cases.push(f16(windowed(attn(&[1, 39, 40, 41, 100, 300, 1000], &[1; 7], (9, 3), 64, 16), 40))); // decode, window
    // q8_0 caches (wgpu's split-K and tiled kernels): decode batches at head_dim 64 to 256, speculative verify at
    // head_dim 32 (one block per row), prefill, a mixed batch, a chunk mid-sequence, gemma3's window.
    cases.push(q8(attn(&lens(64), &[1; 64], (32, 8), 128, 16)));
    cases.push(q8(attn(&lens(40), &[1; 40], (8, 1), 256, 16)));
    cases.push(q8(windowed(attn(&[1, 39, 40, 41, 100, 300, 1000], &[1; 7], (9, 3), 64, 16), 40)));
    cases.push(q8(attn(&[20, 45, 5], &[5, 4, 3], (4, 1), 32, 16)));
    cases.push(q8(attn(&[133], &[133], (9, 3), 64, 16)));
    cases.push(q8(attn(&[100, 1, 65, 33, 500], &[40, 1, 1, 33, 1], (9, 3), 64, 16)));
    cases.push(q8(attn(&[1000], &[70], (8, 2), 128, 16)));
    cases.push(q8(windowed(attn(&[600, 20], &[70, 20], (4, 1), 256, 16), 512)));
    cases
}
