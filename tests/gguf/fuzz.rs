//! Corrupted GGUF files: seeded random byte flips, overwrites with hostile numbers, insertions
//! and truncations of valid files. Every parse must return (Ok or Err) quickly, never panic, and
//! an Ok file must be safe to use. Plus proptest round trips of arbitrary metadata.

use std::time::{Duration, Instant};

use proptest::collection::vec;
use proptest::prelude::*;
use ultra::gguf::{Gguf, GgufWriter, Value, ValueType};

use super::{parse, small_file, valid_writer};

/// splitmix64.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Numbers that stress counts, lengths, offsets and dims.
const HOSTILE: [u64; 10] = [0, 1, 2, 31, 32, 0xffff_ffff, 1 << 32, 1 << 62, u64::MAX, u64::MAX - 31];

pub fn mutate(rng: &mut Rng, mut bytes: Vec<u8>) -> Vec<u8> {
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(bytes.len());
        match rng.below(6) {
            0 => bytes[at] ^= 1 << rng.below(8),
            1 => bytes[at] = rng.next() as u8,
            2 | 3 => {
                let v = HOSTILE[rng.below(HOSTILE.len())].to_le_bytes();
                let width = if rng.below(2) == 0 { 8 } else { 4 };
                let end = (at + width).min(bytes.len());
                bytes[at..end].copy_from_slice(&v[..end - at]);
            }
            4 => bytes.truncate(at),
            _ => {
                let insert: Vec<u8> = (0..1 + rng.below(16)).map(|_| rng.next() as u8).collect();
                bytes.splice(at..at, insert);
            }
        }
        if bytes.is_empty() {
            break;
        }
    }
    bytes
}

/// Uses everything a parsed file offers, as a loader would.
fn exercise(g: &Gguf) {
    for (key, value) in &g.metadata {
        let _ = format!("{key} = {value}");
        assert!(g.get(key).is_some());
    }
    for t in &g.tensors {
        let bytes = g.tensor_bytes(t);
        let bytes = bytes.bytes();
        assert_eq!(bytes.len() as u64, t.n_bytes);
        let _ = (t.rows(), t.cols(), t.type_name(), t.format());
        // Any bits make valid blocks (k-quants included): dequantizing a corrupted tensor's first
        // rows never panics.
        if let Ok(format) = t.format()
            && let Ok(row_bytes) = format.row_bytes(t.cols())
            && row_bytes > 0
            && t.cols() <= 1 << 16
            && bytes.len() == t.rows() * row_bytes
        {
            let mut out = vec![0f32; t.cols()];
            for row in bytes.chunks_exact(row_bytes).take(4) {
                ultra::quant::dequantize_row(format, row, &mut out);
            }
        }
    }
}

#[test]
fn seeded_corruption_never_panics() {
    let bases = [valid_writer(None).to_bytes(), valid_writer(Some(8)).to_bytes(), small_file()];
    let started = Instant::now();
    let (mut ok, mut slowest) = (0, Duration::ZERO);
    for seed in 0..5000u64 {
        let mut rng = Rng(seed);
        let base = &bases[seed as usize % bases.len()];
        let bytes = mutate(&mut rng, base.clone());
        let t0 = Instant::now();
        let result = parse(bytes);
        slowest = slowest.max(t0.elapsed());
        if let Ok(g) = result {
            exercise(&g);
            ok += 1;
        }
    }
    eprintln!("5000 corrupted files: {ok} still parse; slowest {slowest:?}, total {:?}", started.elapsed());
    // Each parse is linear in the file (a few KiB here): even a slow debug build stays far below this.
    assert!(slowest < Duration::from_secs(1), "a parse took {slowest:?}");
}

fn leaf_array() -> impl Strategy<Value = Value> {
    prop_oneof![
        vec(any::<u8>(), 0..8).prop_map(|v| Value::Array(ValueType::U8, v.into_iter().map(Value::U8).collect())),
        vec(any::<i64>(), 0..8).prop_map(|v| Value::Array(ValueType::I64, v.into_iter().map(Value::I64).collect())),
        vec(any::<bool>(), 0..8).prop_map(|v| Value::Array(ValueType::Bool, v.into_iter().map(Value::Bool).collect())),
        vec(".{0,6}", 0..8).prop_map(|v| Value::Array(ValueType::String, v.into_iter().map(Value::String).collect())),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    // Finite floats only: NaN != NaN would fail the equality check, not the reader.
    let f32s = prop::num::f32::NORMAL | prop::num::f32::SUBNORMAL | prop::num::f32::ZERO | prop::num::f32::INFINITE;
    let f64s = prop::num::f64::NORMAL | prop::num::f64::ZERO;
    prop_oneof![
        any::<u8>().prop_map(Value::U8),
        any::<i8>().prop_map(Value::I8),
        any::<u16>().prop_map(Value::U16),
        any::<i16>().prop_map(Value::I16),
        any::<u32>().prop_map(Value::U32),
        any::<i32>().prop_map(Value::I32),
        any::<u64>().prop_map(Value::U64),
        any::<i64>().prop_map(Value::I64),
        f32s.prop_map(Value::F32),
        f64s.prop_map(Value::F64),
        any::<bool>().prop_map(Value::Bool),
        ".{0,12}".prop_map(Value::String),
        leaf_array(),
        vec(leaf_array(), 0..4).prop_map(|v| Value::Array(ValueType::Array, v)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_metadata_round_trips(values in vec(value(), 0..12), tensors in vec((1usize..4, 1usize..3), 0..4)) {
        let mut w = GgufWriter::new();
        for (i, v) in values.iter().enumerate() {
            w.meta(&format!("key.{i}"), v.clone());
        }
        for (i, &(rows, blocks)) in tensors.iter().enumerate() {
            let format = ultra::Format::ALL[i * 3 % ultra::Format::ALL.len()];
            let cols = blocks * format.block_len().max(32);
            let n = rows * format.row_bytes(cols).unwrap();
            w.tensor(&format!("t{i}"), format, rows, cols, (0..n).map(|b| b as u8).collect());
        }
        let g = parse(w.to_bytes()).unwrap();
        prop_assert_eq!(g.metadata.len(), values.len());
        for (i, v) in values.iter().enumerate() {
            prop_assert_eq!(g.get(&format!("key.{i}")), Some(v));
        }
        prop_assert_eq!(g.tensors.len(), tensors.len());
        exercise(&g);
    }

    #[test]
    fn arbitrary_tails_never_panic(cut in 0usize..4096, tail in vec(any::<u8>(), 0..256)) {
        let mut bytes = small_file();
        bytes.truncate(cut);
        bytes.extend_from_slice(&tail);
        if let Ok(g) = parse(bytes) {
            exercise(&g);
        }
    }
}
