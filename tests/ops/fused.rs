//! `matmuls` (several weights sharing x, one launch on cuda) against one `matmul` per weight,
//! bit for bit: the fused launch must compute every row exactly as the single one does.

use ultra::backend::DType;
use ultra::{Backend, Format};

use crate::harness::{Rng, f32_tensor, random_weight, read_f32, upload};
use crate::invariance::assert_bits_eq;

pub fn matmuls<B: Backend>(b: &B) {
    let k = 576;
    let groups: [&[Format]; 9] = [
        &[Format::F32; 3],
        &[Format::F16; 2],
        &[Format::Q4_0; 3],
        &[Format::Q4_1; 3],
        &[Format::Q5_0; 2],
        &[Format::Q5_1; 3],
        &[Format::Q8_0; 3],
        &[Format::Q4_0, Format::Q8_0, Format::Q4_0], // mixed formats: one matmul each
        &[Format::Q4_1],
    ];
    for formats in groups {
        let mut rng = Rng::from_name(&format!("matmuls {formats:?}"));
        let ns = [96, 37, 33];
        let weights: Vec<_> = formats
            .iter()
            .zip(ns)
            .map(|(&f, n)| upload(b, f, n, k, random_weight(&mut rng, f, n, k)).unwrap())
            .collect();
        for m in [1, 3, 8, 13] {
            let x = f32_tensor(b, m, k, &rng.fill(m * k, -1.0, 1.0)).unwrap();
            let mut fused: Vec<_> = weights.iter().map(|w| b.alloc(DType::F32, m, w.rows).unwrap()).collect();
            let mut parts: Vec<_> = weights.iter().zip(fused.iter_mut()).collect();
            b.matmuls(&x, &mut parts).unwrap();
            for (w, got) in weights.iter().zip(&fused) {
                let mut want = b.alloc(DType::F32, m, w.rows).unwrap();
                b.matmul(&x, w, &mut want).unwrap();
                let what = format!("matmuls {formats:?} m={m} n={} vs matmul", w.rows);
                assert_bits_eq(&what, &read_f32(b, got).unwrap(), &read_f32(b, &want).unwrap());
            }
        }
    }
}
