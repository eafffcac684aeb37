//! The int8 path against its definition (reference.rs) bit for bit, and against the f64 dot of
//! the dequantized weights within its stated error.

use super::*;
use crate::backend::cpu::simd::noise;
use crate::quant::dequantize_row;
use crate::quant::intn::{Group, Intn, Scheme};

/// A row of `values` random values of `format` (whole blocks).
fn random_row(format: Format, values: usize, state: &mut u64) -> Vec<u8> {
    *state += 1;
    let blocks = values / format.block_len();
    let mut bytes = noise(blocks * format.block_bytes(), *state);
    let header = noise(blocks * 6, !*state);
    let mins = matches!(format, Format::Q4_1 | Format::Q5_1 | Format::Q4_K | Format::Q5_K);
    // Where a block's f16 scale sits (Q6_K's is last), and its minimum's after it.
    let at = if format == Format::Q6_K { 208 } else { 0 };
    for (b, h) in bytes.chunks_exact_mut(format.block_bytes()).zip(header.chunks_exact(6)) {
        // Finite f16 scales of either sign (random bytes may spell NaN, which is not the point).
        let scale = |lo: u8, hi: u8| {
            half::f16::from_f32((u16::from_le_bytes([lo, hi]) % 2000) as f32 / 1e5 - 0.01).to_le_bytes()
        };
        b[at..at + 2].copy_from_slice(&scale(h[0], h[1]));
        if mins {
            b[at + 2..at + 4].copy_from_slice(&scale(h[2], h[3]));
        }
        match format {
            Format::Intn(f) if f.scheme == Scheme::Int4 => (b[2], b[3]) = (h[4] % 16, 0), // z, pad
            Format::Intn(f) if f.scheme == Scheme::Nf4 => (b[2], b[3]) = (0, 0),          // pad
            Format::Intn(_) => (b[2], b[3]) = (h[4], h[5]),                               // c0, c1
            _ => {}
        }
    }
    bytes
}

fn random_x(k: usize, state: &mut u64) -> Vec<f32> {
    *state += 1;
    let bytes = noise(4 * k, *state);
    bytes.chunks_exact(4).map(|b| (u32::from_le_bytes(b.try_into().unwrap()) % 20001) as f32 / 10000.0 - 1.0).collect()
}

fn formats() -> Vec<Format> {
    let nibbles = [Scheme::Int4, Scheme::Nf4, Scheme::Nf4Dq]
        .into_iter()
        .flat_map(|scheme| Group::ALL.map(|group| Format::Intn(Intn { scheme, group })));
    let ggml = [Format::Q4_0, Format::Q4_1, Format::Q5_0, Format::Q5_1, Format::Q8_0];
    let kquants = [Format::Q4_K, Format::Q5_K, Format::Q6_K];
    ggml.into_iter().chain(kquants).chain(nibbles).collect()
}

#[test]
fn unpacked_levels_are_the_dequantized_values() {
    let mut state = 0x1234_5678_9abc_def1;
    for format in formats() {
        let kind = Kind::of(format).unwrap();
        let k = 384usize.next_multiple_of(format.block_len());
        let row = random_row(format, k, &mut state);
        let mut want = vec![0.0f32; k];
        dequantize_row(format, &row, &mut want);
        for c in 0..k / 64 {
            let w = unpack_chunk(kind, &row, c);
            for p in 0..64 {
                let (half, at) = ((p / 16) % 2, p % 16 + 16 * (p / 32));
                let l = p / 4;
                let want = want[(2 * c + half) * 32 + at];
                if kind.two_planes() {
                    // NF4: the level rounded to 1/4095 of the scale (dw = scale / 4095).
                    let level = 32 * (i32::from(w.u[p]) - 128) + i32::from(w.u2[p]);
                    let err = (f64::from(level) * f64::from(w.dw[l]) - f64::from(want)).abs();
                    let limit = 0.5 * f64::from(w.dw[l]).abs() * 1.001 + 1e-12;
                    assert!(err <= limit, "{} chunk {c} byte {p}: {err}", format.name());
                    continue;
                }
                let u = i32::from(w.u[p]) - kind.offset_shift().map_or(0, |s| 1 << s) - w.z[l];
                let v = if kind.has_min() { (u as f32) * w.dw[l] + w.mw[l] } else { u as f32 * w.dw[l] };
                assert_eq!(v.to_bits(), want.to_bits(), "{} chunk {c} byte {p}", format.name());
            }
        }
    }
}

#[test]
fn the_int8_dot_is_within_its_bound_of_the_f64_dot() {
    let mut state = 0x0fed_cba9_8765_4321;
    for format in formats() {
        let kind = Kind::of(format).unwrap();
        for blocks in [1, 2, 7, 18] {
            let k = (blocks * 32usize).next_multiple_of(format.block_len());
            let (row, x) = (random_row(format, k, &mut state), random_x(k, &mut state));
            let mut w = vec![0.0f32; k];
            dequantize_row(format, &row, &mut w);
            let mut xq = vec![XChunk::ZERO; chunks(k)];
            quantize_row(&x, &mut xq);
            let exact: f64 = w.iter().zip(&x).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
            // Each x moves by at most a step of its fine plane (max|x| / 32,512), the f32 sums add ~1e-6.
            let amax = x.iter().fold(0f64, |a, &v| a.max(f64::from(v).abs()));
            let mut bound: f64 = w.iter().map(|&a| f64::from(a).abs()).sum::<f64>() * amax / 32_512.0 + 1e-5;
            if kind.two_planes() {
                // NF4's levels rounded to 1/4095 of the scale (max |w| is the largest scale).
                let wmax = w.iter().fold(0f64, |a, &v| a.max(f64::from(v).abs()));
                bound += x.iter().map(|&v| f64::from(v).abs()).sum::<f64>() * wmax * 0.5 / 4095.0 * 1.01;
            }
            let got = f64::from(dot_ref(kind, &row, &xq));
            assert!(
                (got - exact).abs() <= bound,
                "{} blocks {blocks}: {got} vs {exact} (bound {bound})",
                format.name()
            );
        }
    }
}

/// The SIMD kernels S equal the reference bit for bit: dot_span for 1–6 rows, batch
/// for 5 activation rows × 6 weight rows, k with odd and even chunk counts.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn kernels_equal_the_reference<S: Kernels>() {
    let mut state = 0x5555_aaaa_3333_cccc;
    for format in formats() {
        let kind = Kind::of(format).unwrap();
        if !S::handles(kind) {
            continue;
        }
        for blocks in [1, 2, 3, 18, 48] {
            let k = (blocks * 32usize).next_multiple_of(format.block_len());
            let rows: Vec<Vec<u8>> = (0..6).map(|_| random_row(format, k, &mut state)).collect();
            let m = 5;
            let x: Vec<f32> = (0..m).flat_map(|_| random_x(k, &mut state)).collect();
            let xq = quantize(&x, m, k);
            let c = chunks(k);
            let want: Vec<Vec<u32>> = (0..m)
                .map(|i| rows.iter().map(|r| dot_ref(kind, r, &xq[i * c..(i + 1) * c]).to_bits()).collect())
                .collect();
            for i in 0..m {
                for n in 1..=rows.len() {
                    let span: Vec<u8> = rows[..n].concat();
                    let mut out = vec![0.0f32; n];
                    S::dot_span(kind, &span, &xq[i * c..(i + 1) * c], &mut out);
                    let bits: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(bits, want[i][..n], "{} dot_span k {k} row {i} n {n}", format.name());
                }
            }
            let mut got = vec![vec![0u32; rows.len()]; m];
            S::batch(kind, &rows.concat(), rows.len(), &xq, c, |i, r, v| got[i][r] = v.to_bits());
            assert_eq!(got, want, "{} batch k {k}", format.name());
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn the_avx512_kernels_equal_the_reference_bit_for_bit() {
    if !*avx512::AVAILABLE {
        eprintln!("SKIPPED: this CPU has no AVX-512 VNNI + VBMI (the AVX2 and portable paths are tested)");
        return;
    }
    kernels_equal_the_reference::<Avx512>();
}

#[cfg(target_arch = "x86_64")]
#[test]
fn the_avx2_kernels_equal_the_reference_bit_for_bit() {
    if !*avx2::AVAILABLE {
        eprintln!("SKIPPED: this CPU has no AVX2 + FMA + F16C (the portable path is the reference itself)");
        return;
    }
    kernels_equal_the_reference::<Avx2>();
}

#[cfg(target_arch = "aarch64")]
#[test]
fn the_neon_kernels_equal_the_reference_bit_for_bit() {
    if !*neon::AVAILABLE {
        eprintln!("SKIPPED: NEON turned off (ULTRA_CPU_DISABLE=neon; the portable path is the reference itself)");
        return;
    }
    eprintln!("NEON kernels with the dot product: {}", crate::backend::cpu::isa::dotprod());
    kernels_equal_the_reference::<Neon>();
}

/// NEON's widening-multiply kernels (CPUs without the dot product), on any NEON CPU.
#[cfg(target_arch = "aarch64")]
struct NeonWidening;

#[cfg(target_arch = "aarch64")]
impl Kernels for NeonWidening {
    fn dot_span(kind: Kind, rows: &[u8], x: &[XChunk], out: &mut [f32]) {
        neon::dot_span_with(false, kind, rows, x, out)
    }
    fn batch(kind: Kind, rows: &[u8], n: usize, x: &[XChunk], c: usize, write: impl FnMut(usize, usize, f32)) {
        neon::batch_with(false, kind, rows, n, x, c, write)
    }
}

#[cfg(target_arch = "aarch64")]
#[test]
fn the_neon_widening_kernels_equal_the_reference_bit_for_bit() {
    if !*neon::AVAILABLE {
        eprintln!("SKIPPED: NEON turned off (ULTRA_CPU_DISABLE=neon)");
        return;
    }
    kernels_equal_the_reference::<NeonWidening>();
}

/// The panel GEMM's definition is within the int8 bound of the f64 dot, and its AVX-512 kernel
/// equals the definition bit for bit for every shape the kernel splits on (rows mod 4, one or two
/// panels, a partial panel, odd and even block counts).
#[test]
fn the_panel_gemm_is_within_its_bound_and_its_kernel_equals_it() {
    let mut state = 0x7777_1111_2222_9999;
    for format in formats() {
        let kind = Kind::of(format).unwrap();
        if !panels::handles(kind) {
            continue;
        }
        for blocks in [1, 2, 3, 18, 47] {
            let k = (blocks * 32usize).next_multiple_of(format.block_len());
            let blocks = k / 32;
            let c = chunks(k);
            let n: usize = 37; // two full panels and a partial one
            let rows: Vec<Vec<u8>> = (0..n).map(|_| random_row(format, k, &mut state)).collect();
            let m = 7;
            let x: Vec<f32> = (0..m).flat_map(|_| random_x(k, &mut state)).collect();
            let xq = quantize(&x, m, k);
            let xb = panels::x_blocks(kind, &xq, c, blocks);
            let want: Vec<Vec<f32>> = (0..m)
                .map(|i| {
                    rows.iter()
                        .map(|r| panels::dot_ref(kind, r, &xq[i * c..(i + 1) * c], &xb[i * blocks..(i + 1) * blocks]))
                        .collect()
                })
                .collect();
            for (i, row) in want.iter().enumerate() {
                let xi = &x[i * k..(i + 1) * k];
                let amax = xi.iter().fold(0f64, |a, &v| a.max(f64::from(v).abs()));
                for (r, &got) in rows.iter().zip(row) {
                    let mut w = vec![0.0f32; k];
                    dequantize_row(format, r, &mut w);
                    let exact: f64 = w.iter().zip(xi).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum();
                    let bound = w.iter().map(|&a| f64::from(a).abs()).sum::<f64>() * amax / 32_512.0 + 1e-5;
                    assert!((f64::from(got) - exact).abs() <= bound, "{} k {k}: {got} vs {exact}", format.name());
                }
            }
            #[cfg(target_arch = "x86_64")]
            if !*avx512::AVAILABLE && blocks == 1 {
                eprintln!("SKIPPED: the panel kernel (no AVX-512 VNNI + VBMI here); its definition is checked");
            }
            #[cfg(target_arch = "x86_64")]
            if *avx512::AVAILABLE {
                let mut tile = vec![panels::PanelChunk::ZERO; n.div_ceil(16) * c];
                for (j, row) in rows.iter().enumerate() {
                    let unpacked: Vec<WChunk> = (0..c).map(|ch| unpack_chunk(kind, row, ch)).collect();
                    let p = j / 16;
                    panels::fill_row(&mut tile[p * c..(p + 1) * c], j % 16, &unpacked);
                }
                for m in 1..=m {
                    let mut got = vec![vec![0u32; n]; m];
                    panels_avx512::gemm(kind, &tile, c, &xq[..m * c], &xb[..m * blocks], blocks, |i, p, v| {
                        for (t, &v) in v.iter().enumerate() {
                            if 16 * p + t < n {
                                got[i][16 * p + t] = v.to_bits();
                            }
                        }
                    });
                    let want: Vec<Vec<u32>> =
                        want[..m].iter().map(|r| r.iter().map(|v| v.to_bits()).collect()).collect();
                    assert_eq!(got, want, "{} k {k} m {m}", format.name());
                }
            }
        }
    }
}
