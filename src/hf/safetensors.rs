//! The `*.safetensors` files of a checkpoint, memory-mapped: one `model.safetensors`, or the
//! shards that `model.safetensors.index.json` names. The container is parsed and validated by the
//! `safetensors` crate (header length bound, offsets contiguous and inside the file, every
//! tensor's byte length equal to its dtype × shape); this module checks what spans files: the
//! index against the shards' contents, and each name in only one place.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use safetensors::{Dtype, SafeTensors};

use crate::backend::HostBytes;
use crate::error::{Error, Result};

/// One tensor of a checkpoint.
pub struct Entry {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub bytes: HostBytes,
}

pub struct Checkpoint {
    pub tensors: HashMap<String, Entry>,
}

fn bad(path: &Path, msg: impl std::fmt::Display) -> Error {
    Error::Metadata(format!("{}: {msg}", path.display()))
}

/// The tensors of one safetensors file held in `bytes`.
pub fn parse(bytes: Arc<dyn AsRef<[u8]> + Send + Sync>, path: &Path) -> Result<HashMap<String, Entry>> {
    let buf = (*bytes).as_ref();
    let (header_len, meta) =
        SafeTensors::read_metadata(buf).map_err(|e| bad(path, format!("not a valid safetensors file: {e}")))?;
    // read_metadata checked that the data section, 8 + header_len onwards, holds every tensor.
    let data_start = 8 + header_len;
    let mut out = HashMap::new();
    for (name, info) in meta.tensors() {
        let (start, end) = info.data_offsets;
        let (start, end) = (data_start + start, data_start + end);
        if end > buf.len() || start > end {
            return Err(bad(path, format!("tensor `{name}` lies outside the file")));
        }
        out.insert(
            name,
            Entry { dtype: info.dtype, shape: info.shape.clone(), bytes: HostBytes::new(bytes.clone(), start, end) },
        );
    }
    Ok(out)
}

#[cfg(not(target_arch = "wasm32"))]
fn map(path: &Path) -> Result<Arc<dyn AsRef<[u8]> + Send + Sync>> {
    let file = std::fs::File::open(path).map_err(Error::file(path))?;
    // SAFETY: read-only private map; as for GGUF we rely on the file not being truncated while
    // mapped. Every range into it is checked by `parse` before use.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(Error::file(path))?;
    Ok(Arc::new(map))
}

/// No memory maps on wasm32 (the `web` branch builds the library there): the file is read.
#[cfg(target_arch = "wasm32")]
fn map(path: &Path) -> Result<Arc<dyn AsRef<[u8]> + Send + Sync>> {
    Ok(Arc::new(std::fs::read(path).map_err(Error::file(path))?))
}

/// Opens the checkpoint in `dir`.
pub fn open(dir: &Path) -> Result<Checkpoint> {
    let single = dir.join("model.safetensors");
    let index = dir.join("model.safetensors.index.json");
    if !index.is_file() {
        if !single.is_file() {
            return Err(bad(dir, "has neither model.safetensors nor model.safetensors.index.json"));
        }
        return Ok(Checkpoint { tensors: parse(map(&single)?, &single)? });
    }
    let text = std::fs::read_to_string(&index).map_err(Error::file(&index))?;
    let weight_map = shard_map(&text).map_err(|e| bad(&index, e))?;
    let mut shards: Vec<&str> = weight_map.values().map(String::as_str).collect();
    shards.sort_unstable();
    shards.dedup();
    let mut tensors = HashMap::new();
    for shard in shards {
        // A shard is a file beside the index, never a path elsewhere.
        if shard.contains(['/', '\\']) || shard == ".." || shard.is_empty() {
            return Err(bad(&index, format!("shard name `{shard}` is not a file name")));
        }
        let path = dir.join(shard);
        if !path.is_file() {
            return Err(bad(&index, format!("names shard `{shard}`, which is not in the directory")));
        }
        for (name, entry) in parse(map(&path)?, &path)? {
            if weight_map.get(&name).map(String::as_str) != Some(shard) {
                continue; // the index decides where a tensor lives
            }
            tensors.insert(name, entry);
        }
    }
    if let Some(missing) = weight_map.keys().find(|k| !tensors.contains_key(*k)) {
        let shard = &weight_map[missing];
        return Err(bad(&index, format!("places `{missing}` in `{shard}`, which does not hold it")));
    }
    Ok(Checkpoint { tensors })
}

/// `weight_map` of an index file: tensor name → shard file name.
fn shard_map(text: &str) -> std::result::Result<HashMap<String, String>, String> {
    let json: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let map = json.get("weight_map").and_then(|m| m.as_object()).ok_or("no `weight_map` object")?;
    map.iter()
        .map(|(k, v)| {
            v.as_str().map(|s| (k.clone(), s.to_string())).ok_or(format!("`{k}` maps to {v}, not a file name"))
        })
        .collect()
}
