//! The GGUF reader. Every count, length, offset and dimension is checked against the bytes that
//! remain, so a truncated or hostile file gives `Error::MalformedGguf` naming the byte and the
//! problem: never a panic, an overflow, or an allocation larger than the file.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::value::{Value, ValueType};
use super::{DEFAULT_ALIGNMENT, MAGIC, MAX_ARRAY_DEPTH, MAX_DIMS, ggml_type_geometry};
use crate::backend::HostBytes;
use crate::error::{Error, Result};
use crate::quant::{Format, ggml_type_name};

/// One tensor's header entry.
#[derive(Clone, Debug)]
pub struct TensorInfo {
    pub name: String,
    /// ggml order: dims[0] is the innermost (contiguous) dimension.
    pub dims: Vec<u64>,
    pub type_id: u32,
    /// Byte offset from the start of the data section.
    pub offset: u64,
    pub n_bytes: u64,
}

impl TensorInfo {
    /// Values per row (the contiguous dimension).
    pub fn cols(&self) -> usize {
        self.dims[0] as usize
    }
    /// Rows: the product of the outer dimensions.
    pub fn rows(&self) -> usize {
        self.dims[1..].iter().product::<u64>() as usize
    }
    pub fn type_name(&self) -> &'static str {
        ggml_type_name(self.type_id)
    }
    /// The storage format, or an error naming a type this engine does not compute with.
    pub fn format(&self) -> Result<Format> {
        Format::from_ggml_id(self.type_id, &self.name)
    }
}

/// A parsed GGUF file over its bytes (usually a memory map).
pub struct Gguf {
    pub version: u32,
    /// Metadata in file order.
    pub metadata: Vec<(String, Value)>,
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    /// Absolute offset of the data section.
    pub data_offset: u64,
    index: HashMap<String, usize>,
    meta_index: HashMap<String, usize>,
    bytes: Arc<dyn AsRef<[u8]> + Send + Sync>,
    /// Each tensor's bytes, in `tensors` order, for a model assembled in memory (`from_parts`:
    /// a Hugging Face directory); empty for a file, whose tensors lie in `bytes`.
    parts: Vec<HostBytes>,
}

impl Gguf {
    /// Loads (as `ULTRA_LOAD` says: file_bytes.rs) and parses a file.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: &Path) -> Result<Gguf> {
        Gguf::parse(super::file_bytes::file_bytes(path, super::file_bytes::Load::from_env()?)?)
    }

    /// Reads and parses a file (no memory maps on wasm32; in a browser `parse` the fetched bytes).
    #[cfg(target_arch = "wasm32")]
    pub fn open(path: &Path) -> Result<Gguf> {
        Gguf::parse(Arc::new(std::fs::read(path).map_err(Error::file(path))?))
    }

    /// Parses a file held in memory.
    pub fn parse(bytes: Arc<dyn AsRef<[u8]> + Send + Sync>) -> Result<Gguf> {
        let (version, metadata, tensors, data_offset, alignment) = {
            let mut cur = Cursor { bytes: (*bytes).as_ref(), pos: 0 };
            parse_header(&mut cur)?
        };
        let index = tensors.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
        let meta_index = metadata.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)).collect();
        Ok(Gguf { version, metadata, tensors, alignment, data_offset, index, meta_index, bytes, parts: Vec::new() })
    }

    /// A model assembled in memory: GGUF metadata and tensors whose bytes lie elsewhere (memory
    /// maps of other files, or converted copies). Each tensor's `n_bytes` must be its bytes' length.
    pub fn from_parts(metadata: Vec<(String, Value)>, tensors: Vec<(TensorInfo, HostBytes)>) -> Result<Gguf> {
        let (tensors, parts): (Vec<TensorInfo>, Vec<HostBytes>) = tensors.into_iter().unzip();
        let mut index = HashMap::new();
        for (i, (t, p)) in tensors.iter().zip(&parts).enumerate() {
            if t.n_bytes != p.bytes().len() as u64 {
                return Err(Error::Metadata(format!(
                    "tensor `{}`: {} bytes for {} declared",
                    t.name,
                    p.bytes().len(),
                    t.n_bytes
                )));
            }
            if index.insert(t.name.clone(), i).is_some() {
                return Err(Error::Metadata(format!("duplicate tensor `{}`", t.name)));
            }
        }
        let meta_index = metadata.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)).collect();
        let bytes: Arc<dyn AsRef<[u8]> + Send + Sync> = Arc::new(Vec::<u8>::new());
        Ok(Gguf {
            version: 3,
            metadata,
            tensors,
            alignment: DEFAULT_ALIGNMENT,
            data_offset: 0,
            index,
            meta_index,
            bytes,
            parts,
        })
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.meta_index.get(key).map(|&i| &self.metadata[i].1)
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.index.get(name).map(|&i| &self.tensors[i])
    }

    /// A tensor's bytes, shared with the map (no copy).
    pub fn tensor_bytes(&self, info: &TensorInfo) -> HostBytes {
        if let Some(part) = self.index.get(&info.name).and_then(|&i| self.parts.get(i)) {
            return part.clone();
        }
        // Bounds were checked at parse time.
        let start = (self.data_offset + info.offset) as usize;
        HostBytes::new(self.bytes.clone(), start, start + info.n_bytes as usize)
    }

    pub fn file_len(&self) -> usize {
        (*self.bytes).as_ref().len() + self.parts.iter().map(|p| p.bytes().len()).sum::<usize>()
    }
}

type Header = (u32, Vec<(String, Value)>, Vec<TensorInfo>, u64, u64);

fn parse_header(cur: &mut Cursor) -> Result<Header> {
    let magic = cur.take(4, "magic")?;
    if magic != MAGIC {
        let reason = if magic == b"FUGG" {
            "big-endian GGUF files are not supported".to_string()
        } else {
            format!("bad magic {magic:02x?}: not a GGUF file")
        };
        return Err(Error::MalformedGguf { offset: 0, reason });
    }
    let version = cur.u32("version")?;
    if !(2..=3).contains(&version) {
        // Big-endian writers keep the magic's bytes but byte-swap every number after it.
        let reason = if (1..=3).contains(&version.swap_bytes()) {
            format!("big-endian GGUF (version {}) is not supported", version.swap_bytes())
        } else {
            format!("GGUF version {version} is not supported (2 and 3 are)")
        };
        return Err(cur.error_at(4, reason));
    }
    let n_tensors = cur.u64("tensor count")?;
    let n_kv = cur.u64("metadata count")?;
    // Each metadata entry takes at least 8 (key length) + 4 (type) + 1 bytes.
    cur.check_count(n_kv, 13, "metadata count")?;
    let mut metadata = Vec::with_capacity(preallocation(n_kv));
    let mut seen = HashMap::new(); // key → its byte offset
    for _ in 0..n_kv {
        let key_at = cur.pos;
        let key = cur.string("metadata key")?;
        let tag = cur.u32("metadata type")?;
        let value = cur.value(tag, 0)?;
        if seen.insert(key.clone(), key_at).is_some() {
            return Err(cur.error_at(key_at, format!("duplicate metadata key `{key}`")));
        }
        metadata.push((key, value));
    }
    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some((_, v)) => match v.as_u64() {
            Some(a) if a.is_power_of_two() && a <= 1 << 20 => a,
            _ => {
                let at = seen.get("general.alignment").copied().unwrap_or(0);
                return Err(cur.error_at(at, format!("general.alignment {v} is not a power of two up to 1 MiB")));
            }
        },
    };
    // Each tensor info takes at least 8 (name length) + 4 (n_dims) + 8 (one dim) + 4 + 8 bytes.
    cur.check_count(n_tensors, 32, "tensor count")?;
    let mut tensors = Vec::with_capacity(preallocation(n_tensors));
    for _ in 0..n_tensors {
        tensors.push(cur.tensor_info()?);
    }
    let data_offset = cur.pos.div_ceil(alignment as usize) as u64 * alignment;
    check_tensor_layout(&mut tensors, data_offset, cur.bytes.len() as u64, alignment)?;
    Ok((version, metadata, tensors, data_offset, alignment))
}

/// Capacity to reserve for `count` parsed items. Counts are bounded by the bytes that remain,
/// but a parsed item is larger than its smallest encoding (a 1-byte u8 value becomes a 32-byte
/// `Value`), so a hostile count could still reserve many times the file size before the parse
/// fails: reserve a little and let real data grow the vector.
fn preallocation(count: u64) -> usize {
    count.min(1 << 12) as usize
}

/// Every tensor lies inside the data section, aligned, without overlapping another.
fn check_tensor_layout(tensors: &mut [TensorInfo], data_offset: u64, file_len: u64, alignment: u64) -> Result<()> {
    let data_len = file_len.checked_sub(data_offset).ok_or_else(|| Error::MalformedGguf {
        offset: file_len,
        reason: format!("file ends at byte {file_len}, before its data section at {data_offset}"),
    })?;
    let mut spans: Vec<(u64, u64, usize)> = Vec::with_capacity(tensors.len());
    let mut names = HashMap::new();
    for (i, t) in tensors.iter().enumerate() {
        if names.insert(t.name.as_str(), i).is_some() {
            return Err(Error::MalformedGguf { offset: data_offset, reason: format!("duplicate tensor `{}`", t.name) });
        }
        if t.offset % alignment != 0 {
            return Err(Error::MalformedGguf {
                offset: data_offset.saturating_add(t.offset),
                reason: format!("tensor `{}` offset {} is not aligned to {alignment}", t.name, t.offset),
            });
        }
        let end = t.offset.checked_add(t.n_bytes).filter(|&e| e <= data_len).ok_or_else(|| Error::MalformedGguf {
            offset: data_offset.saturating_add(t.offset),
            reason: format!(
                "tensor `{}` ({} bytes at data offset {}) runs past the end of the file ({data_len} data bytes)",
                t.name, t.n_bytes, t.offset
            ),
        })?;
        spans.push((t.offset, end, i));
    }
    spans.sort_unstable();
    for pair in spans.windows(2) {
        let ((_, a_end, a), (b_start, _, b)) = (pair[0], pair[1]);
        if b_start < a_end {
            return Err(Error::MalformedGguf {
                offset: data_offset + b_start,
                reason: format!("tensors `{}` and `{}` overlap", tensors[a].name, tensors[b].name),
            });
        }
    }
    Ok(())
}

/// A bounds-checked little-endian reader over the header bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn error_at(&self, offset: usize, reason: String) -> Error {
        Error::MalformedGguf { offset: offset as u64, reason }
    }

    fn remaining(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    fn take(&mut self, n: u64, what: &str) -> Result<&[u8]> {
        if n > self.remaining() {
            return Err(
                self.error_at(self.pos, format!("file truncated: {what} needs {n} bytes, {} remain", self.remaining()))
            );
        }
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.bytes[start..self.pos])
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N as u64, what)?);
        Ok(out)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A count of items at least `min_item_bytes` each must fit in the remaining bytes.
    fn check_count(&self, count: u64, min_item_bytes: u64, what: &str) -> Result<()> {
        if count.saturating_mul(min_item_bytes) > self.remaining() {
            return Err(self.error_at(
                self.pos,
                format!("{what} {count} cannot fit in the {} bytes that remain", self.remaining()),
            ));
        }
        Ok(())
    }

    fn string(&mut self, what: &str) -> Result<String> {
        let at = self.pos;
        let len = self.u64(what)?;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.error_at(at, format!("{what} is not valid UTF-8")))
    }

    fn value(&mut self, tag: u32, depth: usize) -> Result<Value> {
        let at = self.pos;
        let ty = ValueType::from_u32(tag).ok_or_else(|| self.error_at(at, format!("unknown metadata type {tag}")))?;
        Ok(match ty {
            ValueType::U8 => Value::U8(self.array::<1>("u8")?[0]),
            ValueType::I8 => Value::I8(self.array::<1>("i8")?[0] as i8),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.array("u16")?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.array("i16")?)),
            ValueType::U32 => Value::U32(self.u32("u32")?),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.array("i32")?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.array("f32")?)),
            ValueType::U64 => Value::U64(self.u64("u64")?),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.array("i64")?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.array("f64")?)),
            ValueType::Bool => match self.array::<1>("bool")?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(self.error_at(at, format!("bool value {b} is neither 0 nor 1"))),
            },
            ValueType::String => Value::String(self.string("string value")?),
            ValueType::Array => {
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(self.error_at(at, format!("arrays nested deeper than {MAX_ARRAY_DEPTH}")));
                }
                let item_tag = self.u32("array type")?;
                let item_ty = ValueType::from_u32(item_tag)
                    .ok_or_else(|| self.error_at(at, format!("unknown array item type {item_tag}")))?;
                let count = self.u64("array length")?;
                self.check_count(count, item_ty.min_size(), "array length")?;
                let mut items = Vec::with_capacity(preallocation(count));
                for _ in 0..count {
                    items.push(self.value(item_tag, depth + 1)?);
                }
                Value::Array(item_ty, items)
            }
        })
    }

    fn tensor_info(&mut self) -> Result<TensorInfo> {
        let at = self.pos;
        let name = self.string("tensor name")?;
        let n_dims = self.u32("tensor dimension count")? as usize;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(self.error_at(at, format!("tensor `{name}` has {n_dims} dimensions (1 to {MAX_DIMS} allowed)")));
        }
        let mut dims = Vec::with_capacity(n_dims);
        for _ in 0..n_dims {
            dims.push(self.u64("tensor dimension")?);
        }
        let type_id = self.u32("tensor type")?;
        let offset = self.u64("tensor offset")?;
        let (block_len, block_bytes) = ggml_type_geometry(type_id)
            .ok_or_else(|| self.error_at(at, format!("tensor `{name}` has unknown ggml type id {type_id}")))?;
        let n_bytes = tensor_bytes(&dims, block_len, block_bytes).map_err(|reason| {
            self.error_at(at, format!("tensor `{name}` {dims:?} {}: {reason}", ggml_type_name(type_id)))
        })?;
        Ok(TensorInfo { name, dims, type_id, offset, n_bytes })
    }
}

/// Bytes of a tensor of these dims, or why they are invalid.
fn tensor_bytes(dims: &[u64], block_len: u64, block_bytes: u64) -> std::result::Result<u64, String> {
    if dims.contains(&0) {
        return Err("a dimension is zero".into());
    }
    if !dims[0].is_multiple_of(block_len) {
        return Err(format!("row length {} is not a multiple of the block size {block_len}", dims[0]));
    }
    let n_elements = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)).ok_or("element count overflows")?;
    if n_elements > i64::MAX as u64 / 8 || dims.iter().any(|&d| d > i64::MAX as u64) {
        return Err("element count is implausibly large".into());
    }
    (n_elements / block_len).checked_mul(block_bytes).ok_or_else(|| "byte size overflows".into())
}
