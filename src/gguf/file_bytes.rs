//! A model file's bytes in memory: a read-only map of the file, or a copy in anonymous memory
//! advised for transparent huge pages (`ULTRA_LOAD=map|copy`; README: CPU backend).
//!
//! Why a copy: a decode step reads every weight once, in rows a few hundred bytes long. Mapped
//! from the page cache they come in 4 KiB pages (this kernel maps file pages one at a time:
//! smaps' `FilePmdMapped` stays 0 even with `MADV_HUGEPAGE`), so each 4 KiB costs a TLB miss; in
//! 2 MiB pages those walks go away. The copy costs one read of the file at load and its size in
//! anonymous memory, so a file larger than half of the memory available is mapped whatever the
//! setting.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};

/// How a GGUF file's bytes are held.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Load {
    /// A read-only memory map of the file.
    Map,
    /// A copy in anonymous memory with `MADV_HUGEPAGE` (a map where the file is too large).
    Copy,
}

impl Load {
    /// `ULTRA_LOAD` (`map` or `copy`), else the default.
    pub fn from_env() -> Result<Load> {
        match std::env::var("ULTRA_LOAD").ok().as_deref().map(str::trim) {
            None | Some("") => Ok(Load::DEFAULT),
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "map" => Ok(Load::Map),
                "copy" => Ok(Load::Copy),
                _ => Err(Error::InvalidArgument(format!("ULTRA_LOAD={v:?}: expected map or copy"))),
            },
        }
    }

    /// The map: on the machine where the copy was tried (benches/notes/cpu.md) its decode was
    /// within the run-to-run noise of the map's, so the copy's memory and load time buy nothing
    /// measured yet.
    pub const DEFAULT: Load = Load::Map;
}

/// The bytes of the file at `path`, held as `load` says.
pub fn file_bytes(path: &Path, load: Load) -> Result<Arc<dyn AsRef<[u8]> + Send + Sync>> {
    let file = std::fs::File::open(path).map_err(Error::file(path))?;
    // SAFETY: the map is read-only and private to this process; like every mmap-based model
    // loader we rely on the file not being truncated underneath us while it is mapped.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(Error::file(path))?;
    if load == Load::Map || map.is_empty() || !fits_twice(map.len()) {
        return Ok(Arc::new(map));
    }
    let mut copy = memmap2::MmapMut::map_anon(map.len()).map_err(Error::file(path))?;
    // A hint: where the kernel has no transparent huge pages the copy still works, in 4 KiB pages.
    #[cfg(target_os = "linux")]
    let _ = copy.advise(memmap2::Advice::HugePage);
    copy.copy_from_slice(&map);
    Ok(Arc::new(copy.make_read_only().map_err(Error::file(path))?))
}

/// Whether `bytes` is at most half of the memory the kernel reports available (Linux; elsewhere
/// always, as there is nothing to read).
fn fits_twice(bytes: usize) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/meminfo") else { return true };
    let available_kib = info
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
    available_kib.is_none_or(|kib| (bytes as u64) <= kib * 1024 / 2)
}

#[cfg(test)]
mod tests {
    use super::{Load, file_bytes};

    #[test]
    fn a_copy_holds_the_same_bytes_as_the_map() {
        let path = std::env::temp_dir().join(format!("ultra-file-bytes-{}.bin", std::process::id()));
        let data: Vec<u8> = (0..3 * 4096 + 17).map(|i| (i * 31 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let (map, copy) = (file_bytes(&path, Load::Map).unwrap(), file_bytes(&path, Load::Copy).unwrap());
        std::fs::remove_file(&path).unwrap();
        assert_eq!((*map).as_ref(), data.as_slice());
        assert_eq!((*copy).as_ref(), data.as_slice());
    }

    #[test]
    fn a_missing_file_is_an_error_naming_it() {
        let err = file_bytes(std::path::Path::new("/nonexistent/model.gguf"), Load::Copy).err().unwrap();
        assert!(err.to_string().contains("/nonexistent/model.gguf"), "{err}");
    }
}
