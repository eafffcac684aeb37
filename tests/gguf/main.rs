//! The GGUF reader against in-memory fixtures made with `GgufWriter`: valid files round-trip
//! (every metadata type, every tensor format, v2 and v3, custom alignment), and every malformed
//! file is refused with `Error::MalformedGguf` naming the problem. bad_input.rs: bad model files
//! through the whole loader (k-quant models included). fuzz.rs: random corruption;
//! tokenizer_fuzz.rs: the same for tokenizer metadata (BPE and SentencePiece vocabularies).

mod bad_input;
mod fuzz;
mod tokenizer_fuzz;

use std::sync::Arc;

use ultra::Error;
use ultra::gguf::{Gguf, GgufWriter, Value, ValueType};
use ultra::quant::{Format, quantize_row};

fn parse(bytes: Vec<u8>) -> ultra::Result<Gguf> {
    Gguf::parse(Arc::new(bytes))
}

/// Parses `bytes`, expecting `MalformedGguf` whose reason contains `needle`; returns the offset.
#[track_caller]
fn malformed(bytes: Vec<u8>, needle: &str) -> u64 {
    match parse(bytes) {
        Err(Error::MalformedGguf { offset, reason }) => {
            assert!(reason.contains(needle), "reason `{reason}` does not mention `{needle}`");
            offset
        }
        Err(other) => panic!("expected MalformedGguf ({needle}), got {other}"),
        Ok(_) => panic!("expected MalformedGguf ({needle}), but the file parsed"),
    }
}

/// One metadata value of every type, arrays of every item type, and nested arrays.
fn every_value() -> Vec<(String, Value)> {
    let strings = Value::Array(ValueType::String, vec![Value::String("a".into()), Value::String("ü€".into())]);
    let nested = Value::Array(
        ValueType::Array,
        vec![
            Value::Array(ValueType::I32, vec![Value::I32(-1), Value::I32(2)]),
            Value::Array(ValueType::Array, vec![Value::Array(ValueType::Bool, vec![Value::Bool(true)])]),
            Value::Array(ValueType::F64, vec![]),
        ],
    );
    let values = [
        Value::U8(200),
        Value::I8(-100),
        Value::U16(60000),
        Value::I16(-30000),
        Value::U32(4_000_000_000),
        Value::I32(-2_000_000_000),
        Value::F32(1.5e-3),
        Value::Bool(true),
        Value::Bool(false),
        Value::String("hello, wörld".into()),
        Value::String(String::new()),
        Value::U64(u64::MAX),
        Value::I64(i64::MIN),
        Value::F64(-2.5e300),
        Value::Array(ValueType::U8, (0..=255).map(Value::U8).collect()),
        Value::Array(ValueType::F32, vec![Value::F32(1.0), Value::F32(-0.0)]),
        strings,
        nested,
    ];
    values.into_iter().enumerate().map(|(i, v)| (format!("test.value_{i}"), v)).collect()
}

/// `(name, format, rows, cols, bytes)` for one small tensor of every format.
fn every_tensor() -> Vec<(String, Format, usize, usize, Vec<u8>)> {
    Format::ALL
        .iter()
        .enumerate()
        .map(|(i, &format)| {
            let (rows, cols) = (i % 3 + 1, format.block_len().max(64));
            let values: Vec<f32> = (0..rows * cols).map(|j| ((j * 7 + i) % 23) as f32 * 0.1 - 1.0).collect();
            let mut bytes = Vec::new();
            quantize_row(format, &values, &mut bytes);
            (format!("tensor.{}", format.name()), format, rows, cols, bytes)
        })
        .collect()
}

fn valid_writer(alignment: Option<u32>) -> GgufWriter {
    let mut w = GgufWriter::new();
    w.meta("general.architecture", Value::String("llama".into()));
    if let Some(a) = alignment {
        w.meta("general.alignment", Value::U32(a));
    }
    for (key, value) in every_value() {
        w.meta(&key, value);
    }
    for (name, format, rows, cols, bytes) in every_tensor() {
        w.tensor(&name, format, rows, cols, bytes);
    }
    w
}

#[test]
fn valid_files_round_trip() {
    for alignment in [None, Some(1), Some(8), Some(64), Some(4096)] {
        for version in [3u32, 2] {
            let mut bytes = valid_writer(alignment).to_bytes();
            bytes[4..8].copy_from_slice(&version.to_le_bytes());
            let file_len = bytes.len();
            let g = parse(bytes).unwrap_or_else(|e| panic!("alignment {alignment:?} v{version}: {e}"));
            assert_eq!(g.version, version);
            assert_eq!(g.alignment, alignment.map_or(32, u64::from));
            assert_eq!(g.data_offset % g.alignment, 0);
            assert_eq!(g.file_len(), file_len);
            for (key, value) in every_value() {
                assert_eq!(g.get(&key), Some(&value), "{key}");
            }
            assert_eq!(g.metadata.len(), every_value().len() + 1 + alignment.is_some() as usize);
            assert_eq!(g.get("general.architecture").and_then(Value::as_str), Some("llama"));
            let expected = every_tensor();
            assert_eq!(g.tensors.len(), expected.len());
            for (name, format, rows, cols, data) in expected {
                let t = g.tensor(&name).unwrap_or_else(|| panic!("tensor {name}"));
                assert_eq!((t.format().unwrap(), t.rows(), t.cols()), (format, rows, cols), "{name}");
                assert_eq!(t.dims.len(), if rows == 1 { 1 } else { 2 });
                assert_eq!(t.n_bytes as usize, data.len());
                assert_eq!(t.offset % g.alignment, 0);
                assert_eq!(g.tensor_bytes(t).bytes(), &data[..], "{name} bytes");
            }
        }
    }
}

#[test]
fn streamed_file_equals_in_memory_file() {
    let in_memory = valid_writer(Some(64)).to_bytes();
    let mut stream = valid_writer(Some(64)).stream(Vec::new()).unwrap();
    for (name, _, _, _, bytes) in every_tensor() {
        assert_eq!(stream.next_tensor(), Some((name.as_str(), bytes.len() as u64)));
        let (a, b) = bytes.split_at(bytes.len() / 3);
        stream.write(a).unwrap();
        stream.write(b).unwrap();
    }
    assert_eq!(stream.next_tensor(), None);
    assert_eq!(stream.finish().unwrap(), in_memory);

    // Tensors declared for streaming give the same header as tensors given with their data.
    let mut declared = GgufWriter::new();
    declared.meta("general.architecture", Value::String("llama".into()));
    declared.meta("general.alignment", Value::U32(64));
    for (key, value) in every_value() {
        declared.meta(&key, value);
    }
    for (name, format, rows, cols, _) in every_tensor() {
        declared.declare_tensor(&name, format, rows, cols).unwrap();
    }
    assert_eq!(declared.header_bytes(), valid_writer(Some(64)).header_bytes());
    assert_eq!(declared.to_bytes().len(), in_memory.len());
}

#[test]
fn stream_refuses_wrong_sizes() {
    let mut w = GgufWriter::new();
    w.declare_tensor("a", Format::Q8_0, 2, 32).unwrap();
    let mut stream = w.stream(Vec::new()).unwrap();
    assert!(stream.write(&[0; 69]).is_err(), "more than the tensor holds");
    stream.write(&[0; 60]).unwrap();
    assert!(stream.finish().unwrap_err().to_string().contains("missing its last 8 bytes"));
    assert!(GgufWriter::new().declare_tensor("b", Format::Q4_0, 1, 33).is_err());
}

#[test]
fn bad_magic_and_version() {
    let valid = valid_writer(None).to_bytes();
    let mut b = valid.clone();
    b[..4].copy_from_slice(b"GGML");
    assert_eq!(malformed(b, "not a GGUF file"), 0);
    let mut b = valid.clone();
    b[..4].copy_from_slice(b"FUGG");
    malformed(b, "big-endian");
    let mut b = valid.clone();
    b[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert_eq!(malformed(b, "big-endian"), 4);
    for version in [0u32, 1, 4, u32::MAX] {
        let mut b = valid.clone();
        b[4..8].copy_from_slice(&version.to_le_bytes());
        malformed(b, "version");
    }
    malformed(Vec::new(), "truncated");
}

/// A small file whose last tensor ends exactly at the end of the file (so every cut is an error).
fn small_file() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.meta("general.architecture", Value::String("llama".into()));
    w.meta("a", Value::Array(ValueType::U16, vec![Value::U16(1), Value::U16(2)]));
    w.meta("b", Value::Bool(true));
    w.tensor("x", Format::Q4_0, 2, 32, vec![1; 36]);
    w.tensor("y", Format::F32, 1, 8, vec![2; 32]);
    w.to_bytes()
}

#[test]
fn truncation_at_every_byte_is_an_error() {
    let bytes = small_file();
    let g = parse(bytes.clone()).expect("the untruncated file parses");
    assert!(g.data_offset + 64 < bytes.len() as u64 + 1, "the cuts reach into the data section");
    for cut in 0..bytes.len() {
        let offset = malformed(bytes[..cut].to_vec(), "");
        assert!(offset <= cut as u64 || offset >= g.data_offset, "cut {cut}: error offset {offset}");
    }
}

fn file_with(meta: Vec<(&str, Value)>) -> Vec<u8> {
    let mut w = GgufWriter::new();
    for (k, v) in meta {
        w.meta(k, v);
    }
    w.to_bytes()
}

fn patch_u64(bytes: &mut [u8], at: usize, v: u64) {
    bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

// Layout of a file whose first metadata key is "k": counts at 8 and 16, key length at 24,
// key byte at 32, value type at 33, value at 37 (array: item type at 37, length at 41).
const KEY_LEN_AT: usize = 24;
const TYPE_AT: usize = 33;
const VALUE_AT: usize = 37;

#[test]
fn hostile_counts_and_lengths() {
    let base = file_with(vec![("k", Value::Array(ValueType::U8, vec![Value::U8(1); 4]))]);
    for (at, v, needle) in [
        (8, u64::MAX, "tensor count"),
        (8, 1 << 40, "tensor count"),
        (16, u64::MAX, "metadata count"),
        (16, 1 << 40, "metadata count"),
        (KEY_LEN_AT, u64::MAX, "metadata key"),
        (KEY_LEN_AT, 1 << 40, "metadata key"),
        (VALUE_AT + 4, u64::MAX, "array length"),
        (VALUE_AT + 4, 1000, "array length 1000 cannot fit"),
    ] {
        let mut b = base.clone();
        patch_u64(&mut b, at, v);
        malformed(b, needle);
    }
    let mut b = file_with(vec![("k", Value::String("abc".into()))]);
    patch_u64(&mut b, VALUE_AT, u64::MAX - 3);
    malformed(b, "string value");
}

#[test]
fn bad_metadata_values() {
    let mut b = file_with(vec![("k", Value::U32(7))]);
    b[TYPE_AT..TYPE_AT + 4].copy_from_slice(&13u32.to_le_bytes());
    assert_eq!(malformed(b, "unknown metadata type 13"), VALUE_AT as u64);
    let mut b = file_with(vec![("k", Value::Array(ValueType::U8, vec![]))]);
    b[VALUE_AT..VALUE_AT + 4].copy_from_slice(&99u32.to_le_bytes());
    malformed(b, "unknown array item type 99");
    let mut b = file_with(vec![("k", Value::Bool(true))]);
    b[VALUE_AT] = 2;
    assert_eq!(malformed(b, "bool value 2"), VALUE_AT as u64);
    let mut b = file_with(vec![("k", Value::U8(0))]);
    b[32] = 0xff;
    malformed(b, "not valid UTF-8");
    let mut b = file_with(vec![("k", Value::String("é".into()))]);
    b[VALUE_AT + 8] = 0xc3;
    b[VALUE_AT + 9] = 0x28;
    malformed(b, "string value is not valid UTF-8");
    malformed(file_with(vec![("k", Value::U8(1)), ("k", Value::U8(2))]), "duplicate metadata key `k`");
}

#[test]
fn nesting_depth_is_bounded() {
    let nest = |depth: usize| {
        let mut v = Value::Array(ValueType::U8, vec![Value::U8(1)]);
        for _ in 1..depth {
            v = Value::Array(ValueType::Array, vec![v]);
        }
        v
    };
    let ok = parse(file_with(vec![("k", nest(ultra::gguf::MAX_ARRAY_DEPTH))])).unwrap();
    assert_eq!(ok.get("k"), Some(&nest(ultra::gguf::MAX_ARRAY_DEPTH)));
    malformed(file_with(vec![("k", nest(ultra::gguf::MAX_ARRAY_DEPTH + 1))]), "nested deeper");
    malformed(file_with(vec![("k", nest(10_000))]), "nested deeper");
}

#[test]
fn bad_alignment() {
    for a in [0u32, 3, 48, 1 << 21] {
        malformed(file_with(vec![("general.alignment", Value::U32(a))]), "general.alignment");
    }
    malformed(file_with(vec![("general.alignment", Value::String("32".into()))]), "general.alignment");
}

fn raw_file(tensors: Vec<(&str, Vec<u64>, u32, usize)>) -> Vec<u8> {
    let mut w = GgufWriter::new();
    for (name, dims, type_id, n_bytes) in tensors {
        w.raw_tensor(name, dims, type_id, vec![0; n_bytes]);
    }
    w.to_bytes()
}

#[test]
fn bad_tensor_infos() {
    for (dims, type_id, needle) in [
        (vec![], 0, "0 dimensions"),
        (vec![1, 1, 1, 1, 1], 0, "5 dimensions"),
        (vec![0, 4], 0, "dimension is zero"),
        (vec![4, 0], 0, "dimension is zero"),
        (vec![1 << 32, 1 << 32, 1 << 32], 0, "overflows"),
        (vec![u64::MAX], 0, "implausibly large"),
        (vec![1 << 61], 0, "implausibly large"),
        (vec![33], 2, "not a multiple of the block size 32"),
        (vec![255, 2], 12, "not a multiple of the block size 256"),
        (vec![288], 14, "not a multiple of the block size 256"),
        (vec![32], 99, "unknown ggml type id 99"),
        (vec![32], 31, "unknown ggml type id 31"),
    ] {
        malformed(raw_file(vec![("t", dims, type_id, 64)]), needle);
    }
    // Too many dims in the count itself (not just in the writer's list).
    let mut b = raw_file(vec![("t", vec![32], 0, 128)]);
    let at = find(&b, b"t") + 1;
    b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    malformed(b, "dimensions");
}

#[test]
fn unsupported_but_known_types_parse_and_are_named() {
    // An IQ4_XS tensor is listed (so `ultra info` can show it), but asking for its format fails.
    let g = parse(raw_file(vec![("blk.0.attn_q.weight", vec![256, 2], 23, 272)])).unwrap();
    let t = &g.tensors[0];
    assert_eq!((t.type_name(), t.n_bytes), ("IQ4_XS", 272));
    match t.format() {
        Err(e @ Error::UnsupportedTensorType { .. }) => assert!(e.to_string().contains("IQ4_XS"), "{e}"),
        other => panic!("expected UnsupportedTensorType, got {other:?}"),
    }
    // k-quant tensors are read.
    let g = parse(raw_file(vec![("blk.0.attn_q.weight", vec![256, 2], 12, 288)])).unwrap();
    assert_eq!(g.tensors[0].format().unwrap(), ultra::Format::Q4_K);
}

fn find(haystack: &[u8], needle: &[u8]) -> usize {
    haystack.windows(needle.len()).position(|w| w == needle).expect("needle in file")
}

/// Byte position of tensor `name`'s offset field (name must be unique in the file).
fn offset_field(bytes: &[u8], name: &str, n_dims: usize) -> usize {
    find(bytes, name.as_bytes()) + name.len() + 4 + 8 * n_dims + 4
}

#[test]
fn bad_tensor_layout() {
    let two = || raw_file(vec![("first", vec![8], 0, 32), ("second", vec![8], 0, 32)]);
    let g = parse(two()).unwrap();
    assert_eq!(g.tensors[1].offset, 32);
    let at = offset_field(&two(), "second", 1);
    for (offset, needle) in [
        (1, "not aligned"),
        (33, "not aligned"),
        (0, "overlap"),
        (64, "past the end"),
        (1 << 40, "past the end"),
        (u64::MAX - 31, "past the end"),
    ] {
        let mut b = two();
        patch_u64(&mut b, at, offset);
        malformed(b, needle);
    }
    malformed(raw_file(vec![("t", vec![8], 0, 32), ("t", vec![8], 0, 32)]), "duplicate tensor `t`");
    // The data holds 32 bytes (16 and padding); the dims ask for 64.
    malformed(raw_file(vec![("t", vec![16], 0, 16)]), "past the end");
    let mut b = raw_file(vec![("tx", vec![8], 0, 32)]);
    let at = find(&b, b"tx");
    b[at] = 0x80;
    malformed(b, "tensor name is not valid UTF-8");
}

#[test]
fn error_messages_name_the_byte() {
    let mut b = file_with(vec![("k", Value::Bool(true))]);
    b[VALUE_AT] = 7;
    let err = parse(b).err().unwrap().to_string();
    assert_eq!(err, format!("GGUF byte {VALUE_AT}: bool value 7 is neither 0 nor 1"));
}
