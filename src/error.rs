//! The library's one error type. Every failure on bad input (a hostile GGUF, a prompt longer
//! than the context, a missing GPU) is a value of this type; the library never panics on input.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("GGUF byte {offset}: {reason}")]
    MalformedGguf { offset: u64, reason: String },
    #[error("GGUF tensor `{tensor}` has type {type_name} (id {type_id}), which this engine does not read yet")]
    UnsupportedTensorType { tensor: String, type_name: &'static str, type_id: u32 },
    #[error("model file has no tensor `{0}`")]
    MissingTensor(String),
    #[error("model metadata: {0}")]
    Metadata(String),
    #[error("{op}: expected shape {expected:?}, got {got:?}")]
    Shape { op: &'static str, expected: Vec<usize>, got: Vec<usize> },
    #[error("{op} does not support {detail} on the {backend} backend")]
    Unsupported { op: &'static str, backend: &'static str, detail: String },
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("chat template: {0}")]
    Template(String),
    #[error("the prompt has {prompt} tokens, but the context holds {context} (and generation needs room)")]
    ContextOverflow { prompt: usize, context: usize },
    #[error("KV cache: {0}")]
    Cache(String),
    #[error("this build has no {0} backend; rebuild with `--features {0}`")]
    BackendNotBuilt(&'static str),
    #[error("{backend} backend unavailable: {reason}")]
    DeviceUnavailable { backend: &'static str, reason: String },
    #[error("{backend} device error: {detail}")]
    Device { backend: &'static str, detail: String },
    #[error("kernel `{kernel}` failed to compile:\n{log}")]
    KernelCompile { kernel: String, log: String },
    #[error("model fetch: {0}")]
    Fetch(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("{path}: {source}")]
    File { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps an I/O error with the path it happened on.
    pub fn file(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::File { path, source }
    }
}
