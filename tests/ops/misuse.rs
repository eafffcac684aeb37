//! Bad input is an error value, never a panic: wrong shapes and dtypes, and out-of-range indices
//! read from u32 tensors (token ids, rows, slots, sequences, block table entries).

use ultra::backend::{AttnBatch, AttnShape, Rope, RopeStyle};
use ultra::{Backend, Format};

use crate::harness::{f32_tensor, u32_tensor, upload};
use crate::run::kv_layer;

/// Runs every misuse; returns the ones that did not give an error.
pub fn check<B: Backend>(b: &B) -> Vec<&'static str> {
    let mut missed = Vec::new();
    let mut expect_err = |what: &'static str, result: ultra::Result<()>| {
        if result.is_ok() {
            missed.push(what);
        }
    };
    let f32s = |rows, cols| f32_tensor(b, rows, cols, &vec![1.0; rows * cols]).unwrap();
    let u32s = |rows, cols, v: &[u32]| u32_tensor(b, rows, cols, v).unwrap();
    let w = upload(b, Format::Q8_0, 4, 32, vec![0; 4 * 34]).unwrap();

    expect_err("upload_weight with too few bytes", upload(b, Format::Q4_0, 4, 32, vec![0; 10]).map(drop));
    expect_err("upload_weight with cols not whole blocks", upload(b, Format::Q4_0, 1, 33, vec![0; 18]).map(drop));
    expect_err("matmul with x cols != k", b.matmul(&f32s(2, 31), &w, &mut f32s(2, 4)));
    expect_err("matmul with dst of the wrong shape", b.matmul(&f32s(2, 32), &w, &mut f32s(2, 5)));
    expect_err("matmul with a u32 x", b.matmul(&u32s(1, 32, &[0; 32]), &w, &mut f32s(1, 4)));
    expect_err("write_f32 into a u32 tensor", b.write_f32(&mut u32s(1, 2, &[0, 0]), &[1.0]));
    expect_err("write_f32 past the end", b.write_f32(&mut f32s(1, 2), &[1.0; 3]));
    expect_err("embed with an id ≥ vocab", b.embed(&w, &u32s(2, 1, &[1, 4]), &mut f32s(2, 32)));
    expect_err("gather_rows with a row out of range", b.gather_rows(&f32s(3, 8), &u32s(1, 1, &[3]), &mut f32s(1, 8)));
    expect_err("rms_norm with a gain of the wrong size", b.rms_norm(&f32s(2, 8), &f32s(1, 7), 1e-5, &mut f32s(2, 8)));
    let odd = Rope { head_dim: 8, n_rot: 3, theta: 1e4, freq_scale: 1.0, style: RopeStyle::Normal };
    expect_err("rope with an odd n_rot", b.rope(&mut f32s(1, 8), &u32s(1, 1, &[0]), &odd));
    let rope = Rope { n_rot: 8, ..odd };
    expect_err("rope with rows not whole heads", b.rope(&mut f32s(1, 12), &u32s(1, 1, &[0]), &rope));
    expect_err("argmax with dst of the wrong shape", b.argmax(&f32s(2, 8), &mut u32s(1, 1, &[0])));
    expect_err("argmax into an f32 tensor", b.argmax(&f32s(2, 8), &mut f32s(2, 1)));
    let top_k = |vocab, (ids_rows, k), vals_cols, ids_f32: bool| {
        let mut ids = if ids_f32 { f32s(ids_rows, k) } else { u32s(ids_rows, k, &vec![0; ids_rows * k]) };
        b.top_k(&f32s(2, vocab), &mut ids, &mut f32s(2, vals_cols))
    };
    expect_err("top_k with k = 0", top_k(8, (2, 0), 1, false));
    expect_err("top_k with k > vocab", top_k(8, (2, 9), 10, false));
    expect_err("top_k with k > MAX_TOP_K", top_k(300, (2, 257), 258, false));
    expect_err("top_k with vals not k + 1 wide", top_k(8, (2, 3), 3, false));
    expect_err("top_k with ids of the wrong rows", top_k(8, (1, 3), 4, false));
    expect_err("top_k into f32 ids", top_k(8, (2, 3), 4, true));
    let top_k_control = top_k(8, (2, 3), 4, false);

    // A cache of 4 blocks of 4 slots, one KV head of 8; one sequence using blocks [2, 0].
    let mut cache = kv_layer(b, 16, 8, &[0.5; 128], &[0.5; 128]).unwrap();
    expect_err("kv_write to a slot ≥ n_slots", b.kv_write(&f32s(1, 8), &f32s(1, 8), &u32s(1, 1, &[16]), &mut cache));
    expect_err("copy_slots past the end", b.copy_slots(&mut cache, 10, 0, 7));
    expect_err("copy_slots with an overflowing count", b.copy_slots(&mut cache, 1, 0, usize::MAX));
    let shape = AttnShape { n_heads: 2, n_kv_heads: 1, head_dim: 8, scale: 0.35 };
    let attend = |seq: u32, pos: u32, table: &[u32], shape: &AttnShape| {
        let batch = AttnBatch {
            seq: u32s(1, 1, &[seq]),
            pos: u32s(1, 1, &[pos]),
            slot: u32s(1, 1, &[0]),
            block_table: u32s(1, 2, table),
            block_size: 4,
        };
        let mut dst = f32s(1, 16);
        b.attention(&f32s(1, 16), &cache, &batch, shape, &mut dst)
    };
    let control = attend(0, 7, &[2, 0], &shape);
    expect_err("attention with seq ≥ n_seqs", attend(1, 3, &[2, 0], &shape));
    expect_err("attention with pos beyond the block table", attend(0, 8, &[2, 0], &shape));
    expect_err("attention with a block id outside the cache", attend(0, 7, &[2, 4], &shape));
    expect_err("attention with block id u32::MAX", attend(0, 0, &[u32::MAX, 0], &shape));
    expect_err(
        "attention with n_heads not a multiple of n_kv_heads",
        attend(0, 0, &[2, 0], &AttnShape { n_kv_heads: 3, ..shape }),
    );
    if control.is_err() {
        missed.push("(control) a valid attention call failed");
    }
    if top_k_control.is_err() {
        missed.push("(control) a valid top_k call failed");
    }
    missed
}
