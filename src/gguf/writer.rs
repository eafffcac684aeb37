//! A GGUF v3 writer: metadata and tensors in, a valid file out. The tests' fixtures (valid and
//! deliberately malformed) are built in memory with `to_bytes`; `ultra synth` declares its
//! tensors' sizes, writes the header, then streams each tensor's bytes as they are produced.

use std::io::Write;

use super::value::Value;
use super::{DEFAULT_ALIGNMENT, MAGIC};
use crate::error::{Error, Result};
use crate::quant::Format;

struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    type_id: u32,
    n_bytes: u64,
    /// None for a tensor declared for streaming (`declare_tensor`).
    data: Option<Vec<u8>>,
}

/// Collects metadata and tensors, then lays them out with `to_bytes`, or writes the header and
/// streams tensor data in order with `stream` (for files too large to hold in memory).
#[derive(Default)]
pub struct GgufWriter {
    metadata: Vec<(String, Value)>,
    tensors: Vec<PendingTensor>,
}

impl GgufWriter {
    pub fn new() -> GgufWriter {
        GgufWriter::default()
    }

    pub fn meta(&mut self, key: &str, value: Value) -> &mut Self {
        self.metadata.push((key.to_string(), value));
        self
    }

    /// Adds a `[rows, cols]` tensor whose bytes are already in `format`.
    pub fn tensor(&mut self, name: &str, format: Format, rows: usize, cols: usize, data: Vec<u8>) -> &mut Self {
        self.raw_tensor(name, dims_of(rows, cols), format.ggml_id(), data)
    }

    /// Adds a tensor with explicit ggml dims and type id (for malformed fixtures). Its size in
    /// the layout is `data.len()`, whatever the dims say.
    pub fn raw_tensor(&mut self, name: &str, dims: Vec<u64>, type_id: u32, data: Vec<u8>) -> &mut Self {
        let n_bytes = data.len() as u64;
        self.tensors.push(PendingTensor { name: name.to_string(), dims, type_id, n_bytes, data: Some(data) });
        self
    }

    /// Declares a `[rows, cols]` tensor whose bytes will be streamed later (see `stream`);
    /// `to_bytes` writes zeros for it.
    pub fn declare_tensor(&mut self, name: &str, format: Format, rows: usize, cols: usize) -> Result<&mut Self> {
        let n_bytes = rows
            .checked_mul(format.row_bytes(cols)?)
            .ok_or_else(|| Error::InvalidArgument(format!("tensor `{name}` of {rows} x {cols} overflows")))?;
        let dims = dims_of(rows, cols);
        let (name, type_id) = (name.to_string(), format.ggml_id());
        self.tensors.push(PendingTensor { name, dims, type_id, n_bytes: n_bytes as u64, data: None });
        Ok(self)
    }

    /// The data alignment: `general.alignment` if set (even to a value readers refuse, for
    /// malformed fixtures), else 32.
    pub fn alignment(&self) -> u64 {
        let key = self.metadata.iter().find(|(k, _)| k == "general.alignment");
        key.and_then(|(_, v)| v.as_u64()).unwrap_or(DEFAULT_ALIGNMENT).max(1)
    }

    /// Names and byte sizes of the tensors, in file order.
    pub fn tensor_sizes(&self) -> Vec<(String, u64)> {
        self.tensors.iter().map(|t| (t.name.clone(), t.n_bytes)).collect()
    }

    /// Everything before the data section: header, metadata, tensor infos, padding.
    pub fn header_bytes(&self) -> Vec<u8> {
        let alignment = self.alignment();
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            write_string(&mut out, key);
            out.extend_from_slice(&(value.value_type() as u32).to_le_bytes());
            write_value(&mut out, value);
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            write_string(&mut out, &t.name);
            out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&t.type_id.to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offset = (offset + t.n_bytes).next_multiple_of(alignment);
        }
        out.resize((out.len() as u64).next_multiple_of(alignment) as usize, 0);
        out
    }

    /// The whole file in memory.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut stream = TensorStream::new(self, self.header_bytes());
        for t in &self.tensors {
            match &t.data {
                Some(data) => stream.write(data),
                None => stream.write(&vec![0; t.n_bytes as usize]),
            }
            .expect("sizes come from the tensors themselves");
        }
        stream.finish().expect("every tensor written")
    }

    /// Writes the header to `out` and returns a stream that takes every tensor's bytes in order
    /// (data already given to `tensor`/`raw_tensor` is not written for you).
    pub fn stream<W: Write>(&self, mut out: W) -> Result<TensorStream<W>> {
        out.write_all(&self.header_bytes())?;
        Ok(TensorStream::new(self, out))
    }
}

/// The data section being written: tensor bytes in declaration order, padded between tensors.
pub struct TensorStream<W: Write> {
    out: W,
    sizes: Vec<(String, u64)>,
    alignment: u64,
    /// Index of the tensor being written, and its bytes written so far.
    current: usize,
    written: u64,
}

impl<W: Write> TensorStream<W> {
    fn new(writer: &GgufWriter, out: W) -> TensorStream<W> {
        let sizes = writer.tensor_sizes();
        // Empty tensors need no bytes and no padding.
        let current = sizes.iter().take_while(|(_, n)| *n == 0).count();
        TensorStream { out, sizes, alignment: writer.alignment(), current, written: 0 }
    }

    /// The tensor whose bytes come next, and how many of them remain.
    pub fn next_tensor(&self) -> Option<(&str, u64)> {
        self.sizes.get(self.current).map(|(name, n)| (name.as_str(), n - self.written))
    }

    /// Appends bytes of the current tensor, in one piece or several; once a tensor is complete
    /// the file is padded to the alignment and the next tensor begins.
    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.advance()?;
        if bytes.is_empty() {
            return Ok(());
        }
        let Some((name, remaining)) = self.next_tensor() else {
            return Err(Error::InvalidArgument(format!("{} bytes written past the last tensor", bytes.len())));
        };
        if bytes.len() as u64 > remaining {
            let n = bytes.len();
            return Err(Error::InvalidArgument(format!("tensor `{name}` has {remaining} bytes left, got {n}")));
        }
        self.out.write_all(bytes)?;
        self.written += bytes.len() as u64;
        self.advance()
    }

    /// Checks that every tensor was written in full and returns the writer, flushed.
    pub fn finish(mut self) -> Result<W> {
        self.advance()?;
        if let Some((name, remaining)) = self.next_tensor() {
            return Err(Error::InvalidArgument(format!("tensor `{name}` is missing its last {remaining} bytes")));
        }
        self.out.flush()?;
        Ok(self.out)
    }

    /// Pads after each complete tensor (including empty ones) and moves past it.
    fn advance(&mut self) -> Result<()> {
        while let Some(&(_, n)) = self.sizes.get(self.current)
            && self.written >= n
        {
            let pad = n.next_multiple_of(self.alignment) - n;
            self.out.write_all(&vec![0; pad as usize])?;
            self.current += 1;
            self.written = 0;
        }
        Ok(())
    }
}

fn dims_of(rows: usize, cols: usize) -> Vec<u64> {
    if rows == 1 { vec![cols as u64] } else { vec![cols as u64, rows as u64] }
}

fn write_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::U8(v) => out.push(*v),
        Value::I8(v) => out.push(*v as u8),
        Value::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::Bool(v) => out.push(*v as u8),
        Value::String(s) => write_string(out, s),
        Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
        Value::Array(item_type, items) => {
            out.extend_from_slice(&(*item_type as u32).to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for item in items {
                write_value(out, item);
            }
        }
    }
}
