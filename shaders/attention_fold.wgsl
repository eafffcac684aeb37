// attention_fold  the online-softmax fold over key chunks, shared by attention_tiled (in registers) and
//                 attention_combine (over the split partials): run ← fold(run, m_c, l_c, o_c) for c = 0, 1, …
// Layout          Run = (m: running max, l: running Σ e^(s - m), o: four columns of the running Σ e^(s - m) · V)
// Numerics        f32, explicit fma (a driver may not contract one shader's a·b + c differently from the other's),
//                 chunks in ascending order: both kernels give the same bits for the same chunk partials

// Key positions per chunk, the unit of the fold. Fixed, so a token's result never depends on the batch.
const CHUNK: u32 = 32u;
const NEG: f32 = -0x1.fffffep+127f;

struct Run { m: f32, l: f32, o: vec4<f32> }

// The first key position a token at p sees with a sliding window of `window` keys (0: no window):
// keys p - window < j ≤ p. Chunks wholly before it are neither computed nor folded, in both kernels.
fn first_key(p: u32, window: u32) -> u32 {
    return select(0u, p + 1u - window, window != 0u && p + 1u > window);
}

fn run_start() -> Run {
    return Run(NEG, 0.0, vec4<f32>(0.0));
}

// Merges one chunk's (max m, Σp l, Σp·V o) into the run, rescaling both sides to the new max.
fn fold(run: Run, m: f32, l: f32, o: vec4<f32>) -> Run {
    let m_new = max(run.m, m);
    let a = exp(run.m - m_new);
    let b = exp(m - m_new);
    return Run(m_new, fma(run.l, a, l * b), fma(run.o, vec4<f32>(a), o * b));
}

// The normalized output; a row that saw no keys gets zeros.
fn finish(run: Run) -> vec4<f32> {
    return run.o * select(0.0, 1.0 / run.l, run.l > 0.0);
}
