//! `ultra models`: the models known by name, their sizes and whether they are cached;
//! `--fetch NAME` fetches one now (CI does this up front, so a fetch failure reads as one).

use anyhow::{Result, bail};
use serde_json::json;

use super::ModelsArgs;
use ultra::fetch::{self, CacheState, KNOWN_MODELS};

pub fn run(args: ModelsArgs) -> Result<()> {
    let dir = fetch::cache_dir();
    let mut wanted = Vec::new();
    for name in &args.fetch {
        if name == "all" {
            wanted.extend(KNOWN_MODELS.iter());
        } else if let Some(model) = fetch::known(name) {
            wanted.push(model);
        } else {
            bail!("unknown model `{name}` (known: {})", fetch::known_names());
        }
    }
    for model in wanted {
        model.ensure_in(&dir)?;
    }
    let rows: Vec<_> = KNOWN_MODELS.iter().map(|m| (m, m.state_in(&dir))).collect();
    if args.json {
        let list: Vec<_> = rows
            .iter()
            .map(|(m, state)| {
                let (cached, path) = match state {
                    CacheState::Cached(p) => (true, p),
                    CacheState::Missing(p) | CacheState::WrongSize { path: p, .. } => (false, p),
                };
                json!({ "name": m.name, "file": m.file, "bytes": m.size, "sha256": m.sha256,
                        "description": m.description, "cached": cached, "path": path })
            })
            .collect();
        println!("{}", json!({ "cache": dir, "models": list }));
        return Ok(());
    }
    println!("cache: {}", dir.display());
    for (i, (m, state)) in rows.iter().enumerate() {
        let status = match state {
            CacheState::Cached(_) => "cached".to_string(),
            CacheState::Missing(_) => "not cached (fetched on first use)".to_string(),
            CacheState::WrongSize { bytes, .. } => format!("wrong size in cache ({bytes} bytes): delete it"),
        };
        let default = if i == 0 { " (default)" } else { "" };
        println!("{:<14} {:>7.1} MB  {status}{default}\n  {}, {}", m.name, m.size as f64 / 1e6, m.description, m.file);
    }
    Ok(())
}
