//! wgpu-specific checks that the shared op table does not cover: fused dequantize + matmul and
//! embed for every weight format against `dequantize_row` (GEMV paths with shared-memory and
//! subgroup reductions for m = 1, 3; matmul_tiled for m = 70), weights uploaded in parts, the
//! transfers of one decode step, and the f16 and q8_0 KV caches (their bits against the host's, a
//! whole model over them). Skips loudly without an adapter unless `ULTRA_REQUIRE_WGPU=1`.
#![cfg(feature = "wgpu")]

#[path = "common/tiny.rs"]
mod tiny;

use half::{bf16, f16};
use tiny::{Rng, TinySpec, tiny_gguf};
use ultra::backend::wgpu::Options;
use ultra::backend::{Backend, DType, HostBytes};
use ultra::kv_cache::CacheLayout;
use ultra::model::{Batch, Runner};
use ultra::quant::dequantize_row;
use ultra::quant::intn::{Group, Intn, Scheme};
use ultra::{Format, Wgpu};

/// The backend with `options`, or None (after saying so on stderr) when no adapter exists.
pub fn backend(options: Options) -> Option<Wgpu> {
    match Wgpu::with_options(options) {
        Ok(be) => Some(be),
        Err(e) if std::env::var("ULTRA_REQUIRE_WGPU").as_deref() != Ok("1") => {
            let msg = format!("SKIPPED: no wgpu adapter: {e}");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{msg}\n").as_bytes()); // past the test harness's capture: a skip must be seen
            None
        }
        Err(e) => panic!("ULTRA_REQUIRE_WGPU=1 but {e}"),
    }
}

/// Random GGUF bytes of `rows` × `cols` values in `format`, with small finite scales.
fn random_weight(rng: &mut Rng, format: Format, rows: usize, cols: usize) -> Vec<u8> {
    let n_blocks = rows * cols / format.block_len();
    let mut out = Vec::with_capacity(rows * format.row_bytes(cols).unwrap());
    let half = |v: f32| f16::from_f32(v).to_le_bytes();
    for _ in 0..n_blocks {
        match format {
            Format::F32 => out.extend(rng.uniform().to_le_bytes()),
            Format::F16 => out.extend(half(rng.uniform())),
            Format::BF16 => out.extend(bf16::from_f32(rng.uniform()).to_le_bytes()),
            _ if format.is_kquant() => {
                // Random quants and sub-block scales, small f16 super-block scales.
                let start = out.len();
                out.extend((0..format.block_bytes()).map(|_| rng.next_u64() as u8));
                for field in format.fields().iter().filter(|f| f.name == "d" || f.name == "dm") {
                    for at in (start + field.start..start + field.end).step_by(2) {
                        out[at..at + 2].copy_from_slice(&half(0.001 + 0.01 * rng.uniform()));
                    }
                }
            }
            _ => {
                out.extend(half(0.01 + 0.01 * rng.uniform()));
                if matches!(format, Format::Q4_1 | Format::Q5_1) {
                    out.extend(half(0.05 * rng.uniform()));
                }
                let rest = format.block_bytes() - if matches!(format, Format::Q4_1 | Format::Q5_1) { 4 } else { 2 };
                out.extend((0..rest).map(|_| rng.next_u64() as u8));
            }
        }
    }
    out
}

fn dequantized(format: Format, bytes: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let row_bytes = format.row_bytes(cols).unwrap();
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        dequantize_row(format, &bytes[r * row_bytes..(r + 1) * row_bytes], &mut out[r * cols..(r + 1) * cols]);
    }
    out
}

fn check_matmul_and_embed(be: &Wgpu) {
    // matmul_vec (m = 1, 3) is f32 on every adapter; f16 matmul_tiled (m = 70, SHADER_F16): w, x
    // and a block's 32-term chain round to f16, at most 34 roundings of relative size 2^-11 each,
    // all bounded by Σ|x·w|.
    let f16_rel = |m: usize| match be.uses_f16() {
        true if m >= 64 => 34.0 / 2048.0,
        _ => 0.0,
    };
    let mut rng = Rng(7);
    let mut failures = Vec::new();
    // The k-quants have no wgpu kernels yet (the op suite checks that their upload is refused).
    for format in Format::GGML.into_iter().filter(|f| !f.is_kquant()) {
        let ks: &[usize] = if format.is_quantized() { &[32, 576] } else { &[13, 576] };
        for &k in ks {
            let n = 67;
            let bytes = random_weight(&mut rng, format, n, k);
            let w_host = dequantized(format, &bytes, n, k);
            let w = be.upload_weight(format, n, k, HostBytes::from_vec(bytes)).unwrap();
            for m in [1, 3, 70] {
                let x_host: Vec<f32> = (0..m * k).map(|_| rng.uniform()).collect();
                let mut x = be.alloc(DType::F32, m, k).unwrap();
                be.write_f32(&mut x, &x_host).unwrap();
                let mut dst = be.alloc(DType::F32, m, n).unwrap();
                be.matmul(&x, &w, &mut dst).unwrap();
                let mut got = vec![0.0; m * n];
                be.read_f32(&dst, &mut got).unwrap();
                let rel = if format.is_quantized() { f16_rel(m) } else { 0.0 };
                let int8 = be.uses_int8_gemv(format, m, k, n);
                let worst = (0..m * n)
                    .map(|o| {
                        let (i, j) = (o / n, o % n);
                        let term = |c: usize| x_host[i * k + c] as f64 * w_host[j * k + c] as f64;
                        let want: f64 = (0..k).map(term).sum();
                        let mut bound = 1e-4 * (k as f64).sqrt() + rel * (0..k).map(|c| term(c).abs()).sum::<f64>();
                        if int8 {
                            bound += int8_error(&x_host[i * k..(i + 1) * k], &w_host[j * k..(j + 1) * k]);
                        }
                        (got[o] as f64 - want).abs() / bound
                    })
                    .fold(0.0, f64::max);
                if worst > 1.0 {
                    failures.push(format!("matmul {} m={m} k={k} n={n}: max |Δ| / bound {worst}", format.name()));
                }
            }
            let ids_host = [3u32, 0, 66, 3, 17];
            let mut ids = be.alloc(DType::U32, ids_host.len(), 1).unwrap();
            be.write_u32(&mut ids, &ids_host).unwrap();
            let mut dst = be.alloc(DType::F32, ids_host.len(), k).unwrap();
            be.embed(&w, &ids, 1.0, &mut dst).unwrap();
            let mut got = vec![0.0; ids_host.len() * k];
            be.read_f32(&dst, &mut got).unwrap();
            for (t, &id) in ids_host.iter().enumerate() {
                let want =
                    if (id as usize) < n { &w_host[id as usize * k..(id as usize + 1) * k] } else { &vec![0.0; k][..] };
                if got[t * k..(t + 1) * k] != *want {
                    failures.push(format!("embed {} k={k} id {id}: rows differ", format.name()));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The most int8 blocks of x can move a dot product: each value rounds to within half a step
/// (max|x| of its 32-value block / 127) of itself, times |w|.
fn int8_error(x: &[f32], w: &[f32]) -> f64 {
    let block = |b: usize| {
        let xs = &x[32 * b..32 * b + 32];
        let half_step = xs.iter().fold(0.0f64, |a, v| a.max(v.abs() as f64)) / 127.0 / 2.0;
        half_step * w[32 * b..32 * b + 32].iter().map(|v| v.abs() as f64).sum::<f64>()
    };
    (0..x.len() / 32).map(block).sum()
}

#[test]
fn matmul_and_embed_every_format() {
    if let Some(be) = backend(Options::default()) {
        check_matmul_and_embed(&be);
    }
}

#[test]
fn matmul_and_embed_every_format_fallbacks() {
    if let Some(be) = backend(Options::fallbacks()) {
        check_matmul_and_embed(&be);
    }
}

/// Whether the reduced CI suite runs (`CI=true`).
fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The GPU's GEMV shapes (teams of subgroup or shared-memory lanes, which a CPU adapter would not
/// take) for every format, against `dequantize_row`.
#[test]
fn matmul_and_embed_every_format_teams() {
    // Under CI=true (lavapipe on 2 cores, where each variant is a pipeline compile) the subgroup
    // teams only; both kinds of team on demand (README: tests).
    let int8 = Options::default().with_int8_gemv();
    let kinds: &[Options] =
        if ci() { &[Options::default(), int8] } else { &[Options::default(), int8, Options::fallbacks()] };
    for &options in kinds {
        if let Some(be) = backend(Options { disable_solo: true, ..options }) {
            check_matmul_and_embed(&be);
        }
    }
}

/// The GEMV's lanes sum their blocks in one order whatever number of blocks they load at once
/// (`Options::vec_unroll`) and wherever x comes from (workgroup memory at m = 1 unless
/// `disable_stage_x`): the same bits for unroll 1, 2 and 4 and staged x, for m = 1 and every row of
/// m = 5, and k long enough (131 or 136 blocks) that every lane runs the 4- and 2-block steps and
/// the remainder, and staging ends on a partial chunk. Subgroup teams for four formats,
/// shared-memory teams for one (each variant is a pipeline compile on lavapipe).
#[test]
fn gemv_unroll_keeps_the_bits() {
    let mut rng = Rng(23);
    let n = 67;
    let int8 = Options::default().with_int8_gemv();
    let runs = [
        (Options::default(), &[Format::Q4_0, Format::Q4_1, Format::Q8_0, Format::Q6_K][..]),
        (int8, &[Format::Q4_0, Format::Q5_1, Format::Q4_K][..]),
        (Options::fallbacks(), &[Format::Q4_0][..]),
    ];
    // Under CI=true one block format and one k-quant in subgroup teams (as above), and one on int8 x.
    let runs = if ci() {
        vec![(Options::default(), &[Format::Q4_0, Format::Q6_K][..]), (int8, &[Format::Q4_1][..])]
    } else {
        runs.to_vec()
    };
    for (base, formats) in runs {
        let kinds = [(1, false), (2, false), (4, false), (2, true)]; // (unroll, staged x at m = 1)
        let backends: Vec<Wgpu> = kinds
            .into_iter()
            .filter_map(|(u, stage_x)| {
                let disable_stage_x = !stage_x;
                backend(Options {
                    disable_solo: true,
                    vec_unroll: Some(u),
                    disable_stage_x,
                    batch_invariant: true,
                    ..base
                })
            })
            .collect();
        for &format in formats {
            let k = if format.is_kquant() { 4096 + 256 } else { 4096 + 3 * 32 };
            let bytes = random_weight(&mut rng, format, n, k);
            let x: Vec<f32> = (0..5 * k).map(|_| rng.uniform()).collect();
            let mut seen: Option<Vec<u32>> = None;
            for (be, (unroll, stage_x)) in backends.iter().zip(kinds) {
                let w = be.upload_weight(format, n, k, HostBytes::from_vec(bytes.clone())).unwrap();
                let run = |m: usize| {
                    let mut xt = be.alloc(DType::F32, m, k).unwrap();
                    be.write_f32(&mut xt, &x[..m * k]).unwrap();
                    let mut dst = be.alloc(DType::F32, m, n).unwrap();
                    be.matmul(&xt, &w, &mut dst).unwrap();
                    let mut out = vec![0.0f32; m * n];
                    be.read_f32(&dst, &mut out).unwrap();
                    out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                };
                let (one, five) = (run(1), run(5));
                let what = format!("{} unroll {unroll}, staged x {stage_x} ({base:?})", format.name());
                assert_eq!(one, five[..n], "{what}: m = 1 against row 0 of m = 5");
                match &seen {
                    Some(bits) => assert_eq!(*bits, five, "{what} against unroll 1"),
                    None => seen = Some(five),
                }
            }
        }
    }
}

/// A weight uploaded in parts (`Options::weight_part_bytes` forced to a few rows) gives the bits
/// of its one-part upload: matmul (GEMV for m = 1, 7; matmul_tiled for m = 70 unless the adapter
/// fits no tile) and embed, with ids on both sides of part edges.
#[test]
fn split_weights_equal_one_part() {
    for options in [Options::default(), Options::fallbacks()] {
        let Some(whole) = backend(options) else { return };
        let split = backend(Options { weight_part_bytes: Some(8192), ..options }).unwrap();
        let mut rng = Rng(11);
        let n = 67;
        // The group-wise formats: a part carries its own headers and NF4's level table.
        let ours = [(Scheme::Int4, Group::G128), (Scheme::Int2, Group::G32), (Scheme::Nf4Dq, Group::G64)]
            .map(|(s, g)| Format::Intn(Intn::new(s, g)));
        for format in [Format::F16, Format::Q4_0, Format::Q8_0, Format::Q4_K, Format::Q6_K].into_iter().chain(ours) {
            let k = if format.is_kquant() || matches!(format, Format::Intn(_)) { 768 } else { 576 };
            let bytes = random_weight(&mut rng, format, n, k);
            let one = whole.upload_weight(format, n, k, HostBytes::from_vec(bytes.clone())).unwrap();
            let parts = split.upload_weight(format, n, k, HostBytes::from_vec(bytes)).unwrap();
            let sizes: Vec<usize> = parts.storage.parts.iter().map(|p| p.rows).collect();
            assert_eq!(one.storage.parts.len(), 1);
            assert!(sizes.len() > 2 && sizes.iter().sum::<usize>() == n, "{}: parts {sizes:?}", format.name());
            let what = |op: &str| format!("{op} {} k={k}, parts {sizes:?} ({options:?})", format.name());
            for m in [1, 7, 70] {
                let x: Vec<f32> = (0..m * k).map(|_| rng.uniform()).collect();
                let run = |be: &Wgpu, w| {
                    let mut xt = be.alloc(DType::F32, m, k).unwrap();
                    be.write_f32(&mut xt, &x).unwrap();
                    let mut dst = be.alloc(DType::F32, m, n).unwrap();
                    be.matmul(&xt, w, &mut dst).unwrap();
                    let mut out = vec![0.0f32; m * n];
                    be.read_f32(&dst, &mut out).unwrap();
                    out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                };
                assert_eq!(run(&whole, &one), run(&split, &parts), "{} m={m}", what("matmul"));
            }
            let ids = [0u32, 16, 17, 11, 12, 66, 3, 24, 13, 40, 50];
            let run = |be: &Wgpu, w| {
                let mut it = be.alloc(DType::U32, ids.len(), 1).unwrap();
                be.write_u32(&mut it, &ids).unwrap();
                let mut dst = be.alloc(DType::F32, ids.len(), k).unwrap();
                be.embed(w, &it, 0.75, &mut dst).unwrap();
                let mut out = vec![0.0f32; ids.len() * k];
                be.read_f32(&dst, &mut out).unwrap();
                out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            };
            assert_eq!(run(&whole, &one), run(&split, &parts), "{}", what("embed"));
        }
    }
}

/// A decode step uploads only the six small batch inputs and reads back only the argmax ids.
#[test]
fn decode_step_transfers_only_inputs_and_token_ids() {
    let Some(be) = backend(Options::default()) else { return };
    let gguf = tiny_gguf(&TinySpec::default());
    let mut runner = Runner::load(be, &gguf, CacheLayout::plain(1, 64), 64).unwrap();
    let seq = runner.cache.add_seq();
    let mut next = runner.forward_argmax(&Batch::sequence(seq, 0, &[1, 2, 3, 4], false)).unwrap()[0];
    for pos in 4..8 {
        let before = runner.backend.transfer_count();
        next = runner.forward_argmax(&Batch::sequence(seq, pos, &[next], false)).unwrap()[0];
        assert_eq!(runner.backend.transfer_count() - before, 7, "6 input uploads + 1 id readback");
    }
}

/// An f16 cache rounds on the device exactly as `half` does on the host, edges included: every
/// f16 value, the midpoints between neighbours (ties to even), one f32 ulp either side of them,
/// the overflow edge (65504 … 65520 … inf), subnormals, signed zeros, infinities and NaN.
#[test]
fn f16_cache_rounds_every_value_as_the_host_does() {
    let Some(be) = backend(Options::default()) else { return };
    let mut values = Vec::new();
    for h in 0..=u16::MAX {
        let (a, b) = (f16::from_bits(h).to_f32(), f16::from_bits(h.wrapping_add(1)).to_f32());
        values.push(a);
        if a.is_finite() && b.is_finite() && (a < b || b == 0.0) {
            let mid = (a as f64 + b as f64) / 2.0;
            let m = mid as f32;
            values.extend([m, f32::from_bits(m.to_bits() + 1), f32::from_bits(m.to_bits().max(1) - 1)]);
        }
    }
    values.extend([65504.0, 65519.99, 65520.0, 1e9, f32::INFINITY, f32::NAN, -0.0, 1e-8, 2.9802322e-8, 5.96e-8]);
    values.extend(values.clone().iter().map(|v| -v));
    let kv_dim = 256;
    values.resize(values.len().next_multiple_of(kv_dim), 0.5);
    let n = values.len() / kv_dim;
    let upload = |dtype, rows, data: &[f32]| {
        let mut t = be.alloc(dtype, rows, kv_dim).unwrap();
        be.write_f32(&mut t, data).unwrap();
        t
    };
    let (k, v) =
        (upload(DType::F32, n, &values), upload(DType::F32, n, &values.iter().rev().copied().collect::<Vec<_>>()));
    let mut slot = be.alloc(DType::U32, n, 1).unwrap();
    be.write_u32(&mut slot, &(0..n as u32).rev().collect::<Vec<_>>()).unwrap();
    let mut cache = ultra::backend::KvLayer {
        k: upload(DType::F16, n, &vec![0.0; n * kv_dim]),
        v: upload(DType::F16, n, &vec![0.0; n * kv_dim]),
    };
    be.kv_write(&k, &v, &slot, &mut cache).unwrap();
    let mut got = vec![0.0f32; n * kv_dim];
    be.read_f32(&cache.k, &mut got).unwrap();
    let mut bad = Vec::new();
    for (t, row) in got.chunks(kv_dim).enumerate() {
        let src = &values[(n - 1 - t) * kv_dim..][..kv_dim];
        for (&g, &x) in row.iter().zip(src) {
            let want = f16::from_f32(x).to_f32();
            if !(g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan())) {
                bad.push(format!("{x:e} ({:#010x}): device {g:e}, host {want:e}", x.to_bits()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} values differ, e.g.\n{}",
        bad.len(),
        values.len(),
        bad[..bad.len().min(8)].join("\n")
    );
    be.read_f32(&cache.v, &mut got).unwrap();
    let want: Vec<f32> = values.iter().rev().map(|&x| f16::from_f32(x).to_f32()).collect();
    let same = |a: &f32, b: &f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    let rows_ok = got
        .chunks(kv_dim)
        .enumerate()
        .all(|(t, row)| row.iter().zip(&want[(n - 1 - t) * kv_dim..]).all(|(a, b)| same(a, b)));
    assert!(rows_ok, "v rows differ from the host's rounding");
}

/// `kv_write_q8` quantizes as the host's `kv_q8::encode` (the reference `write_f32` uses): every value
/// read back equals the host's, or (where the device's division rounds differently at a rounding edge)
/// sits one step of its block's scale away, for at most one value in a thousand. Blocks of random
/// values at scales from 1e-3 to 1e4, an all-zero block, one holding ±max exactly, a NaN and an
/// infinity (their blocks read back NaN), over an odd number of blocks per row (a lone last scale).
#[test]
fn q8_cache_quantizes_as_the_host_does() {
    use ultra::backend::kv_q8;
    let Some(be) = backend(Options::default()) else { return };
    let (kv_dim, n) = (96, 40);
    let mut rng = Rng(0x9e8);
    let mut values: Vec<f32> = Vec::new();
    for b in 0..n * kv_dim / 32 {
        let scale = 10f32.powi(b as i32 % 8 - 3);
        values.extend((0..32).map(|_| scale * rng.uniform()));
    }
    values[..32].fill(0.0);
    values[32..64].iter_mut().enumerate().for_each(|(i, v)| *v = if i % 2 == 0 { 127.0 } else { -127.0 });
    values[100] = f32::NAN;
    values[300] = f32::NEG_INFINITY;
    let upload = |dtype, data: &[f32]| {
        let mut t = be.alloc(dtype, n, kv_dim).unwrap();
        be.write_f32(&mut t, data).unwrap();
        t
    };
    let reversed: Vec<f32> = values.iter().rev().copied().collect();
    let (k, v) = (upload(DType::F32, &values), upload(DType::F32, &reversed));
    let mut slot = be.alloc(DType::U32, n, 1).unwrap();
    be.write_u32(&mut slot, &(0..n as u32).rev().collect::<Vec<_>>()).unwrap();
    let zeros = vec![0.0; n * kv_dim];
    let mut cache = ultra::backend::KvLayer { k: upload(DType::Q8_0, &zeros), v: upload(DType::Q8_0, &zeros) };
    be.kv_write(&k, &v, &slot, &mut cache).unwrap();
    for (side, src) in [(&cache.k, &values), (&cache.v, &reversed)] {
        // Slot s holds token n - 1 - s.
        let mut src_rows: Vec<f32> = Vec::new();
        for s in 0..n {
            src_rows.extend_from_slice(&src[(n - 1 - s) * kv_dim..][..kv_dim]);
        }
        let mut want = vec![0.0; src_rows.len()];
        kv_q8::decode(&kv_q8::encode(&src_rows, kv_dim), kv_dim, &mut want);
        let mut got = vec![0.0; src_rows.len()];
        be.read_f32(side, &mut got).unwrap();
        let (mut off_by_one, mut bad) = (0, Vec::new());
        for (i, ((&g, &w), block)) in got.iter().zip(&want).zip(src_rows.chunks(32).flat_map(|b| [b; 32])).enumerate() {
            let step = f16::from_f32(block.iter().fold(0f32, |m, x| m.max(x.abs())) / 127.0).to_f32();
            if g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()) {
                continue;
            }
            if (g - w).abs() == step {
                off_by_one += 1;
            } else {
                bad.push(format!("[{i}] {}: device {g:e}, host {w:e}", src_rows[i]));
            }
        }
        assert!(
            bad.is_empty(),
            "{} values differ by more than a step, e.g.\n{}",
            bad.len(),
            bad[..bad.len().min(8)].join("\n")
        );
        eprintln!("{off_by_one} of {} values one step from the host's", got.len());
        assert!(off_by_one * 1000 <= got.len(), "{off_by_one} of {} values one step from the host's", got.len());
        assert!(
            got.iter().filter(|g| g.is_nan()).count() == 64,
            "the NaN and the infinity poison their blocks, no more"
        );
    }
}

/// A whole model over an f16 cache: the tiny model's logits over a 40-token prompt (two attention
/// chunks) and 12 decode steps stay within f16's rounding of the f32 cache's (K/V round by
/// ≤ 2^-11 each; NMSE 2.6e-9 on lavapipe, bound 1e-7), and the greedy ids agree. A q8_0 cache the same
/// way, within its quantization (half a step of max |x| / 127 per value; NMSE 1.7e-6 on lavapipe, bound 1e-5).
#[test]
fn a_model_over_an_f16_or_q8_cache_follows_the_f32_one() {
    let Some(be) = backend(Options::default()) else { return };
    let be = std::sync::Arc::new(be);
    let run = |gguf: &ultra::gguf::Gguf, kv| {
        let model = std::sync::Arc::new(ultra::model::Llama::load(&*be, gguf).unwrap());
        let layout = CacheLayout::paged(4, 32).with_kv_dtype(kv);
        let mut runner = Runner::new(be.clone(), model, layout, 64).unwrap();
        let seq = runner.cache.add_seq();
        let (mut logits, mut ids) = (Vec::new(), Vec::new());
        let prompt: Vec<u32> = (0..40).map(|i| i * 7 % 16).collect();
        runner.forward(&Batch::sequence(seq, 0, &prompt, true)).unwrap();
        for t in 0..prompt.len() {
            logits.extend_from_slice(runner.logits(t));
        }
        for pos in prompt.len()..prompt.len() + 12 {
            let next = argmax(&logits[logits.len() - runner.config().vocab_size..]);
            ids.push(next);
            runner.forward(&Batch::sequence(seq, pos, &[next], true)).unwrap();
            logits.extend_from_slice(runner.logits(0));
        }
        (logits, ids)
    };
    // q8_0 blocks are 32 values: its model has four KV heads of 8 (kv_dim 32), the default two.
    let q8_spec = TinySpec { n_kv_heads: 4, ..TinySpec::default() };
    for (spec, kv, bound) in [(TinySpec::default(), DType::F16, 1e-7), (q8_spec, DType::Q8_0, 1e-5)] {
        let gguf = tiny_gguf(&spec);
        let ((want, want_ids), (got, got_ids)) = (run(&gguf, DType::F32), run(&gguf, kv));
        let err: f64 = got.iter().zip(&want).map(|(&a, &b)| (a as f64 - b as f64).powi(2)).sum::<f64>();
        let norm: f64 = want.iter().map(|&b| (b as f64).powi(2)).sum();
        eprintln!("{kv:?} cache: NMSE {:e}", err / norm);
        assert!(
            err / norm < bound && err > 0.0,
            "{kv:?}: NMSE {:e} (0 would mean the cache was not {kv:?})",
            err / norm
        );
        assert_eq!(got_ids, want_ids, "{kv:?}");
    }
}

fn argmax(row: &[f32]) -> u32 {
    row.iter().enumerate().fold((0, f32::MIN), |b, (i, &x)| if x > b.1 { (i, x) } else { b }).0 as u32
}

/// `ULTRA_WGPU_SUBMIT_EVERY` (`Options::submit_every`) only moves where submissions end: the tiny
/// model's logits over a prompt and decode steps are bit for bit those of one submission a step.
#[test]
fn submitting_in_chunks_gives_the_same_bits() {
    let run = |options: Options| {
        let be = backend(options)?;
        let mut runner = Runner::load(be, &tiny_gguf(&TinySpec::default()), CacheLayout::plain(1, 64), 64).unwrap();
        let seq = runner.cache.add_seq();
        let mut logits = Vec::new();
        let prompt: Vec<u32> = (0..20).map(|i| i * 5 % 16).collect();
        runner.forward(&Batch::sequence(seq, 0, &prompt, true)).unwrap();
        logits.extend((0..prompt.len()).flat_map(|t| runner.logits(t).to_vec()));
        for pos in prompt.len()..prompt.len() + 6 {
            let next = argmax(&logits[logits.len() - runner.config().vocab_size..]);
            runner.forward(&Batch::sequence(seq, pos, &[next], true)).unwrap();
            logits.extend_from_slice(runner.logits(0));
        }
        Some(logits.iter().map(|x| x.to_bits()).collect::<Vec<u32>>())
    };
    let Some(whole) = run(Options::default()) else { return };
    let chunked = run(Options { submit_every: Some(3), ..Options::default() }).unwrap();
    assert!(whole == chunked, "logits differ when a step is submitted every 3 dispatches");
}

/// matmul_coop16 (weights and x decoded to f16 once per call, `Options::coop_dequant`) gives
/// matmul_coop's bits: the same f16 operands and the same matrix products, slice by slice in
/// ascending k, into each output. Across formats, m and n off the tiles' multiples, k off
/// matmul_coop's 64-value step, whole and split weights, and weight rows in several ranges (the
/// f16 copy is capped at a weight part's bytes). Skips loudly where the adapter has no cooperative
/// matrices unless `ULTRA_REQUIRE_COOPMAT=1`.
#[test]
fn coop_dequant_equals_coop() {
    let coop = |extra: Options| {
        let options = Options { coopmat: Some(true), ..extra };
        let be = backend(options)?;
        if be.cooperative_matrices().is_none() {
            let msg = format!("SKIPPED: {} has no cooperative matrices", be.adapter_name());
            assert!(std::env::var("ULTRA_REQUIRE_COOPMAT").as_deref() != Ok("1"), "ULTRA_REQUIRE_COOPMAT=1 but {msg}");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{msg}\n").as_bytes());
            return None;
        }
        Some(be)
    };
    let Some(fused) = coop(Options { coop_dequant: Some(false), ..Options::default() }) else { return };
    let whole = coop(Options { coop_dequant: Some(true), ..Options::default() }).unwrap();
    let ranges =
        coop(Options { coop_dequant: Some(true), weight_part_bytes: Some(65536), ..Options::default() }).unwrap();
    let mut rng = Rng(23);
    let ours = Format::Intn(Intn::new(Scheme::Int4, Group::G128));
    for (format, k) in [
        (Format::Q4_0, 576),
        (Format::Q4_1, 608),
        (Format::Q8_0, 512),
        (Format::Q4_K, 768),
        (Format::Q6_K, 256),
        (ours, 768),
    ] {
        for (m, n) in [(64, 67), (70, 300), (131, 40)] {
            let bytes = random_weight(&mut rng, format, n, k);
            let x: Vec<f32> = (0..m * k).map(|_| rng.uniform() - 0.5).collect();
            let run = |be: &Wgpu| {
                let w = be.upload_weight(format, n, k, HostBytes::from_vec(bytes.clone())).unwrap();
                let mut xt = be.alloc(DType::F32, m, k).unwrap();
                be.write_f32(&mut xt, &x).unwrap();
                let mut dst = be.alloc(DType::F32, m, n).unwrap();
                be.matmul(&xt, &w, &mut dst).unwrap();
                let mut out = vec![0.0f32; m * n];
                be.read_f32(&dst, &mut out).unwrap();
                out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            };
            let base = run(&fused);
            assert!(base.iter().any(|&b| f32::from_bits(b) != 0.0), "{} m={m} n={n}: all zeros", format.name());
            for (be, how) in [(&whole, "whole"), (&ranges, "in row ranges and parts")] {
                let differ = run(be).iter().zip(&base).filter(|(a, b)| a != b).count();
                assert_eq!(differ, 0, "{} k={k} m={m} n={n} ({how}): outputs unlike matmul_coop's", format.name());
            }
        }
    }
}
