//! Bad input is an error value, never a panic, and the same error on every backend: each row feeds
//! one op one bad argument (a wrong shape or dtype, an out-of-range index read from a u32 tensor:
//! token ids, rows, slots, sequences, block-table entries) and states the exact error, which
//! `ultra::backend::check` makes for cpu, wgpu and cuda alike.

use ultra::backend::{AttnBatch, AttnShape, Rope, RopeStyle};
use ultra::{Backend, Format};

use crate::harness::{f32_tensor, u32_tensor, upload};
use crate::run::kv_layer;

/// Runs every row; returns a line for each that did not give exactly its error.
pub fn check<B: Backend>(b: &B) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut expect = |what: &str, want: &str, result: ultra::Result<()>| match result {
        Ok(()) => wrong.push(format!("{what}: no error (want `{want}`)")),
        Err(e) if e.to_string() != want => wrong.push(format!("{what}: `{e}` (want `{want}`)")),
        Err(_) => {}
    };
    let f32s = |rows, cols| f32_tensor(b, rows, cols, &vec![1.0; rows * cols]).unwrap();
    let u32s = |rows, cols, v: &[u32]| u32_tensor(b, rows, cols, v).unwrap();
    let w = upload(b, Format::Q8_0, 4, 32, vec![0; 4 * 34]).unwrap();
    let invalid = |s: &str| format!("invalid argument: {s}");

    expect(
        "upload_weight with too few bytes",
        &invalid("upload_weight: Q4_0 [4, 32] needs 72 bytes, got 10"),
        upload(b, Format::Q4_0, 4, 32, vec![0; 10]).map(drop),
    );
    expect(
        "upload_weight with cols not whole blocks",
        &invalid("Q4_0 rows hold whole blocks of 32 values; 33 is not a multiple"),
        upload(b, Format::Q4_0, 1, 33, vec![0; 18]).map(drop),
    );
    let shape = |op: &str, want: [usize; 2], got: [usize; 2]| format!("{op}: expected shape {want:?}, got {got:?}");
    expect("matmul with x cols != k", &shape("matmul", [2, 32], [2, 31]), b.matmul(&f32s(2, 31), &w, &mut f32s(2, 4)));
    expect(
        "matmul with dst of the wrong shape",
        &shape("matmul", [2, 4], [2, 5]),
        b.matmul(&f32s(2, 32), &w, &mut f32s(2, 5)),
    );
    expect(
        "matmul with a u32 x",
        &invalid("matmul: x must be F32, got U32"),
        b.matmul(&u32s(1, 32, &[0; 32]), &w, &mut f32s(1, 4)),
    );
    expect(
        "silu_mul_matmul with hidden of the wrong shape",
        &shape("silu_mul", [1, 32], [1, 31]),
        b.silu_mul_matmul(&f32s(1, 32), &f32s(1, 32), &w, &mut f32s(1, 31), &mut f32s(1, 4)),
    );
    expect(
        "silu_mul_matmul with dst of the wrong shape",
        &shape("matmul", [1, 4], [1, 3]),
        b.silu_mul_matmul(&f32s(1, 32), &f32s(1, 32), &w, &mut f32s(1, 32), &mut f32s(1, 3)),
    );
    expect(
        "norm_matmuls with y of the wrong shape",
        &shape("add_rms_norm", [1, 32], [1, 31]),
        b.norm_matmuls(
            &mut f32s(1, 32),
            Some(&f32s(1, 31)),
            &f32s(1, 32),
            1e-5,
            &mut f32s(1, 32),
            &mut [(&w, &mut f32s(1, 4))],
        ),
    );
    expect(
        "norm_matmuls with xn of the wrong shape",
        &shape("rms_norm", [1, 32], [1, 31]),
        b.norm_matmuls(&mut f32s(1, 32), None, &f32s(1, 32), 1e-5, &mut f32s(1, 31), &mut [(&w, &mut f32s(1, 4))]),
    );
    expect(
        "norm_matmuls with a part's dst of the wrong shape",
        &shape("matmul", [1, 4], [1, 3]),
        b.norm_matmuls(
            &mut f32s(1, 32),
            Some(&f32s(1, 32)),
            &f32s(1, 32),
            1e-5,
            &mut f32s(1, 32),
            &mut [(&w, &mut f32s(1, 3))],
        ),
    );
    expect(
        "write_f32 into a u32 tensor",
        &invalid("write_f32: the tensor must be F32, got U32"),
        b.write_f32(&mut u32s(1, 2, &[0, 0]), &[1.0]),
    );
    expect(
        "write_f32 past the end",
        &invalid("write_f32: 3 values do not fit a tensor of 2"),
        b.write_f32(&mut f32s(1, 2), &[1.0; 3]),
    );
    expect(
        "read_u32 from an f32 tensor",
        &invalid("read_u32: the tensor must be U32, got F32"),
        b.read_u32(&f32s(1, 2), &mut [0; 2]),
    );
    expect(
        "embed with an id ≥ vocab",
        &invalid("embed: token id 4 out of range (< 4)"),
        b.embed(&w, &u32s(2, 1, &[1, 4]), 1.0, &mut f32s(2, 32)),
    );
    expect(
        "embed with f32 ids",
        &invalid("embed: token id must be U32, got F32"),
        b.embed(&w, &f32s(2, 1), 1.0, &mut f32s(2, 32)),
    );
    expect(
        "gather_rows with a row out of range",
        &invalid("gather_rows: row 3 out of range (< 3)"),
        b.gather_rows(&f32s(3, 8), &u32s(1, 1, &[3]), &mut f32s(1, 8)),
    );
    expect(
        "rms_norm with a gain of the wrong size",
        &shape("rms_norm", [1, 8], [1, 7]),
        b.rms_norm(&f32s(2, 8), &f32s(1, 7), 1e-5, &mut f32s(2, 8)),
    );
    expect(
        "rms_norm with a u32 gain",
        &invalid("rms_norm: gain must be F32, got U32"),
        b.rms_norm(&f32s(2, 8), &u32s(1, 8, &[0; 8]), 1e-5, &mut f32s(2, 8)),
    );
    expect(
        "gelu_mul with dst of the wrong shape",
        &shape("gelu_mul", [2, 8], [2, 7]),
        b.gelu_mul(&f32s(2, 8), &f32s(2, 8), &mut f32s(2, 7)),
    );
    expect(
        "gelu_mul with a u32 gate",
        &invalid("gelu_mul: gate must be F32, got U32"),
        b.gelu_mul(&u32s(2, 8, &[0; 16]), &f32s(2, 8), &mut f32s(2, 8)),
    );
    expect(
        "silu_mul with a u32 up",
        &invalid("silu_mul: up must be F32, got U32"),
        b.silu_mul(&f32s(2, 8), &u32s(2, 8, &[0; 16]), &mut f32s(2, 8)),
    );
    expect(
        "add_bias with a bias of the wrong width",
        &shape("add_bias", [1, 8], [1, 9]),
        b.add_bias(&mut f32s(2, 8), &f32s(1, 9)),
    );
    let odd = Rope { head_dim: 8, n_rot: 3, theta: 1e4, freq_scale: 1.0, style: RopeStyle::Normal };
    expect(
        "rope with an odd n_rot",
        &invalid("rope: head_dim 8 with n_rot 3 (even, ≤ head_dim) does not fit rows of 8"),
        b.rope(&mut f32s(1, 8), &u32s(1, 1, &[0]), &odd, None),
    );
    let rope = Rope { n_rot: 8, ..odd };
    expect(
        "rope with rows not whole heads",
        &invalid("rope: head_dim 8 with n_rot 8 (even, ≤ head_dim) does not fit rows of 12"),
        b.rope(&mut f32s(1, 12), &u32s(1, 1, &[0]), &rope, None),
    );
    expect(
        "rms_norm_rope with f32 positions",
        &invalid("rms_norm_rope: pos must be U32, got F32"),
        b.rms_norm_rope(&mut f32s(1, 8), &f32s(1, 8), 1e-5, &f32s(1, 1), &rope, None),
    );
    expect(
        "rope with frequency factors of the wrong length",
        &shape("rope", [1, 4], [1, 8]),
        b.rope(&mut f32s(1, 8), &u32s(1, 1, &[0]), &rope, Some(&f32s(1, 8))),
    );
    expect(
        "rms_norm_rope with u32 frequency factors",
        &invalid("rms_norm_rope: factors must be F32, got U32"),
        b.rms_norm_rope(&mut f32s(1, 8), &f32s(1, 8), 1e-5, &u32s(1, 1, &[0]), &rope, Some(&u32s(1, 4, &[1; 4]))),
    );
    expect(
        "argmax with dst of the wrong shape",
        &shape("argmax", [2, 1], [1, 1]),
        b.argmax(&f32s(2, 8), &mut u32s(1, 1, &[0])),
    );
    expect(
        "argmax into an f32 tensor",
        &invalid("argmax: dst must be U32, got F32"),
        b.argmax(&f32s(2, 8), &mut f32s(2, 1)),
    );
    let top_k = |vocab, (ids_rows, k), vals_cols, ids_f32: bool| {
        let mut ids = if ids_f32 { f32s(ids_rows, k) } else { u32s(ids_rows, k, &vec![0; ids_rows * k]) };
        b.top_k(&f32s(2, vocab), &mut ids, &mut f32s(2, vals_cols))
    };
    let k_range = |k, vocab| invalid(&format!("top_k: k = {k} outside 1..=min(vocab = {vocab}, MAX_TOP_K = 256)"));
    expect("top_k with k = 0", &k_range(0, 8), top_k(8, (2, 0), 1, false));
    expect("top_k with k > vocab", &k_range(9, 8), top_k(8, (2, 9), 10, false));
    expect("top_k with k > MAX_TOP_K", &k_range(257, 300), top_k(300, (2, 257), 258, false));
    expect("top_k with vals not k + 1 wide", &shape("top_k", [2, 4], [2, 3]), top_k(8, (2, 3), 3, false));
    expect("top_k with ids of the wrong rows", &shape("top_k", [2, 3], [1, 3]), top_k(8, (1, 3), 4, false));
    expect("top_k into f32 ids", &invalid("top_k: ids must be U32, got F32"), top_k(8, (2, 3), 4, true));
    let top_k_control = top_k(8, (2, 3), 4, false);

    // A cache of 4 blocks of 4 slots, one KV head of 8; one sequence using blocks [2, 0].
    let mut cache = kv_layer(b, 16, 8, &[0.5; 128], &[0.5; 128]).unwrap();
    expect(
        "kv_write to a slot ≥ n_slots",
        &invalid("kv_write: slot 16 out of range (< 16)"),
        b.kv_write(&f32s(1, 8), &f32s(1, 8), &u32s(1, 1, &[16]), &mut cache),
    );
    expect(
        "kv_write with v of the wrong width",
        &shape("kv_write", [1, 8], [1, 9]),
        b.kv_write(&f32s(1, 8), &f32s(1, 9), &u32s(1, 1, &[0]), &mut cache),
    );
    let no_fit =
        |n: usize, src, dst| invalid(&format!("copy_slots: {n} slots from {src} to {dst} do not fit a cache of 16"));
    expect("copy_slots past the end", &no_fit(7, 10, 0), b.copy_slots(&mut cache, 10, 0, 7));
    expect(
        "copy_slots with an overflowing count",
        &no_fit(usize::MAX, 1, 0),
        b.copy_slots(&mut cache, 1, 0, usize::MAX),
    );
    let shape_ok = AttnShape { n_heads: 2, n_kv_heads: 1, head_dim: 8, scale: 0.35, window: None };
    let attend = |seq: u32, pos: u32, table: &[u32], shape: &AttnShape| {
        let batch = AttnBatch {
            seq: u32s(1, 1, &[seq]),
            pos: u32s(1, 1, &[pos]),
            slot: u32s(1, 1, &[0]),
            block_table: u32s(1, 2, table),
            block_size: 4,
            decode: true,
        };
        let mut dst = f32s(1, 16);
        b.attention(&f32s(1, 16), &cache, &batch, shape, &mut dst)
    };
    let attend_matmul = |table: &[u32], w: &ultra::backend::Weight<B>, n: usize| {
        let batch = AttnBatch {
            seq: u32s(1, 1, &[0]),
            pos: u32s(1, 1, &[7]),
            slot: u32s(1, 1, &[0]),
            block_table: u32s(1, 2, table),
            block_size: 4,
            decode: true,
        };
        let (mut att, mut dst) = (f32s(1, 16), f32s(1, n));
        b.attention_matmul(&f32s(1, 16), &cache, &batch, &shape_ok, &mut att, w, &mut dst)
    };
    expect(
        "attention_matmul with a block id outside the cache",
        &invalid("attention: token 0: block 4 outside the cache's 4"),
        attend_matmul(&[2, 4], &w, 4),
    );
    expect(
        "attention_matmul with w of another width than att",
        &shape("matmul", [1, 32], [1, 16]),
        attend_matmul(&[2, 0], &w, 4),
    );
    let control = attend(0, 7, &[2, 0], &shape_ok);
    let attn = |s: &str| invalid(&format!("attention: {s}"));
    expect(
        "attention with seq ≥ n_seqs",
        &attn("token 0: sequence 1 has no block-table row"),
        attend(1, 3, &[2, 0], &shape_ok),
    );
    expect(
        "attention with pos beyond the block table",
        &attn("token 0: position 8 beyond 2 blocks of 4"),
        attend(0, 8, &[2, 0], &shape_ok),
    );
    expect(
        "attention with a block id outside the cache",
        &attn("token 0: block 4 outside the cache's 4"),
        attend(0, 7, &[2, 4], &shape_ok),
    );
    expect(
        "attention with block id u32::MAX",
        &attn("token 0: block 4294967295 outside the cache's 4"),
        attend(0, 0, &[u32::MAX, 0], &shape_ok),
    );
    expect(
        "attention with n_heads not a multiple of n_kv_heads",
        &attn("n_heads 2 must be a nonzero multiple of n_kv_heads 3, head_dim 8 nonzero"),
        attend(0, 0, &[2, 0], &AttnShape { n_kv_heads: 3, ..shape_ok }),
    );
    expect(
        "attention with a window of 0 keys",
        &attn("window Some(0) must be 1..=u32::MAX keys (None: no window)"),
        attend(0, 7, &[2, 0], &AttnShape { window: Some(0), ..shape_ok }),
    );
    // A window of 4 at position 7 reads block 1 only: block 0's entry is never looked at.
    let windowed = attend(0, 7, &[u32::MAX, 0], &AttnShape { window: Some(4), ..shape_ok });
    expect(
        "attention with a bad block inside the window",
        &attn("token 0: block 4294967295 outside the cache's 4"),
        attend(0, 7, &[0, u32::MAX], &AttnShape { window: Some(4), ..shape_ok }),
    );
    if let Err(e) = windowed {
        wrong.push(format!("(control) attention whose window skips a bad block failed: {e}"));
    }
    if let Err(e) = control {
        wrong.push(format!("(control) a valid attention call failed: {e}"));
    }
    if let Err(e) = top_k_control {
        wrong.push(format!("(control) a valid top_k call failed: {e}"));
    }
    wrong
}
