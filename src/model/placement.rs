//! Where a model's layers live: how many stay resident on the device and how deep the ring of
//! streamed ones is (`offload.rs`), from `--gpu-layers N` or a `--gpu-memory SIZE` budget.

use crate::error::{Error, Result};
use crate::gguf::Gguf;
use crate::kv_cache::CacheLayout;
use crate::model::Config;

/// Resident layers (`None`: all) and the prefetch depth of the streamed ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub resident: Option<usize>,
    pub prefetch: usize,
}

/// The default prefetch depth: one layer computes while the next one's copy runs.
pub const DEFAULT_PREFETCH: usize = 2;

impl Placement {
    /// Every layer on the device.
    pub fn all() -> Placement {
        Placement { resident: None, prefetch: DEFAULT_PREFETCH }
    }

    /// Resident layers out of `n_layers`.
    pub fn resident_of(&self, n_layers: usize) -> usize {
        self.resident.map_or(n_layers, |r| r.min(n_layers))
    }
}

/// What the device must hold, in bytes: weights outside the layers (embeddings, output head),
/// one layer's matrices (the largest), its norms and biases, and the KV cache.
#[derive(Clone, Copy, Debug)]
pub struct Footprint {
    pub fixed: u64,
    pub layer: u64,
    pub kv_cache: u64,
    pub n_layers: usize,
    /// Distinct layer layouts (tensor types per layer: k-quant mixes have two or more), each of
    /// which streams through its own ring (`offload.rs`).
    pub layouts: usize,
}

impl Footprint {
    /// From the file's tensor sizes and the KV cache's layout (its slots per layer, each a key and a
    /// value row of its element type).
    pub fn of(gguf: &Gguf, cfg: &Config, layout: CacheLayout) -> Footprint {
        let mut fixed = 0u64;
        let mut layers = vec![0u64; cfg.n_layers];
        let mut types: Vec<Vec<(String, u32)>> = vec![Vec::new(); cfg.n_layers];
        for t in &gguf.tensors {
            let mut parts = t.name.strip_prefix("blk.").map(|r| r.splitn(2, '.'));
            let layer: Option<usize> = parts.as_mut().and_then(|p| p.next()).and_then(|i| i.parse().ok());
            match layer {
                Some(i) if i < cfg.n_layers => {
                    layers[i] += t.n_bytes;
                    let role = parts.and_then(|mut p| p.next()).unwrap_or_default().to_string();
                    types[i].push((role, t.type_id));
                }
                _ => fixed += t.n_bytes,
            }
        }
        types.iter_mut().for_each(|t| t.sort());
        types.sort();
        types.dedup();
        let slot_bytes = layout.kv_dtype.row_bytes(cfg.kv_dim()).unwrap_or(usize::MAX) as u64;
        let kv_cache = ((cfg.n_layers * 2) as u64).saturating_mul(layout.n_slots() as u64).saturating_mul(slot_bytes);
        let layer = layers.into_iter().max().unwrap_or(0);
        Footprint { fixed, layer, kv_cache, n_layers: cfg.n_layers, layouts: types.len().max(1) }
    }

    /// Bytes on the device with `resident` layers and rings of `depth` slots (one ring per
    /// layout: an upper bound when some layouts are all resident).
    pub fn need(&self, resident: usize, depth: usize) -> u64 {
        let streamed = self.n_layers - resident.min(self.n_layers);
        let slots = (depth * self.layouts.max(1)).min(streamed);
        self.fixed + self.kv_cache + (resident + slots) as u64 * self.layer
    }

    /// The placement for `--gpu-layers` and/or `--gpu-memory` (neither: all resident). With a
    /// budget alone, as many layers stay resident as fit beside a ring of `prefetch` slots (or
    /// fewer slots, down to one, when the budget is tight). Weights and KV cache are counted;
    /// activations and scratch are not (leave some room).
    pub fn place(&self, gpu_layers: Option<usize>, gpu_memory: Option<u64>, prefetch: usize) -> Result<Placement> {
        let prefetch = prefetch.max(1);
        let n = self.n_layers;
        let too_small = |budget: u64, resident: usize, depth: usize| {
            Error::InvalidArgument(format!(
                "--gpu-memory {} is too small: {} resident layer(s) and {} streamed slot(s) of {} each, \
                 the KV cache ({}) and the embeddings and output ({}) need {}",
                fmt_size(budget),
                resident,
                depth,
                fmt_size(self.layer),
                fmt_size(self.kv_cache),
                fmt_size(self.fixed),
                fmt_size(self.need(resident, depth))
            ))
        };
        match (gpu_layers, gpu_memory) {
            (None, None) => Ok(Placement::all()),
            (Some(r), None) => Ok(Placement { resident: Some(r.min(n)), prefetch }),
            (Some(r), Some(budget)) => {
                let r = r.min(n);
                if self.need(r, prefetch) > budget {
                    return Err(too_small(budget, r, prefetch.min(n - r)));
                }
                Ok(Placement { resident: Some(r), prefetch })
            }
            (None, Some(budget)) => {
                if self.need(n, 0) <= budget {
                    return Ok(Placement { resident: None, prefetch });
                }
                for depth in (1..=prefetch).rev() {
                    let base = self.need(0, depth);
                    if base <= budget {
                        let fit = ((budget - base) / self.layer.max(1)) as usize;
                        return Ok(Placement { resident: Some(fit.min(n - 1)), prefetch: depth });
                    }
                }
                Err(too_small(budget, 0, 1))
            }
        }
    }
}

/// `SIZE`: a count of bytes with an optional unit: `B`, `KB`/`MB`/`GB`/`TB` (powers of 1000) or
/// `KiB`/`MiB`/`GiB`/`TiB` (powers of 1024); a fraction is allowed (`1.5GB`); case-insensitive.
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = (t[..split].trim(), t[split..].trim());
    let bad = || Error::InvalidArgument(format!("`{text}` is not a size (like 8GB, 6.5GiB, 512MiB, 1000000B)"));
    let value: f64 = num.parse().map_err(|_| bad())?;
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return Err(bad()),
    };
    let bytes = value * scale as f64;
    if !bytes.is_finite() || bytes > u64::MAX as f64 || (scale == 1 && num.contains('.')) {
        return Err(bad());
    }
    Ok(bytes.round() as u64)
}

/// Bytes as the largest unit of 1000 that keeps them above 1 (`4.70 GB`).
pub fn fmt_size(bytes: u64) -> String {
    let units = [("GB", 1e9), ("MB", 1e6), ("KB", 1e3)];
    match units.iter().find(|(_, s)| bytes as f64 >= *s) {
        Some((u, s)) => format!("{:.2} {u}", bytes as f64 / s),
        None => format!("{bytes} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_both_unit_systems() {
        assert_eq!(parse_size("123").unwrap(), 123);
        assert_eq!(parse_size("123B").unwrap(), 123);
        assert_eq!(parse_size("8KB").unwrap(), 8_000);
        assert_eq!(parse_size("8kib").unwrap(), 8_192);
        assert_eq!(parse_size("1.5GB").unwrap(), 1_500_000_000);
        assert_eq!(parse_size("6GiB").unwrap(), 6 << 30);
        assert_eq!(parse_size(" 512 MiB ").unwrap(), 512 << 20);
        assert_eq!(parse_size("2MB").unwrap(), 2_000_000);
        assert_eq!(parse_size("1TiB").unwrap(), 1 << 40);
        for bad in ["", "GB", "8XB", "-1GB", "1.2.3MB", "1.5B", "8 G B", "nanGB"] {
            assert!(parse_size(bad).is_err(), "{bad:?} parsed");
        }
    }

    fn footprint() -> Footprint {
        Footprint { fixed: 100, layer: 10, kv_cache: 20, n_layers: 8, layouts: 1 }
    }

    #[test]
    fn a_budget_keeps_as_many_layers_as_fit_beside_the_ring() {
        let f = footprint();
        assert_eq!(f.place(None, None, 2).unwrap(), Placement::all());
        assert_eq!(f.place(None, Some(200), 2).unwrap().resident, None); // 100 + 20 + 80 fits
        // 100 + 20 + 2 slots = 140: 3 more layers fit in 175.
        assert_eq!(f.place(None, Some(175), 2).unwrap(), Placement { resident: Some(3), prefetch: 2 });
        // Room for one slot only: depth 1.
        assert_eq!(f.place(None, Some(135), 2).unwrap(), Placement { resident: Some(0), prefetch: 1 });
        let e = f.place(None, Some(129), 2).unwrap_err().to_string();
        assert!(e.contains("--gpu-memory 129 B is too small") && e.contains("need 130 B"), "{e}");
        assert_eq!(f.place(Some(3), None, 4).unwrap(), Placement { resident: Some(3), prefetch: 4 });
        assert!(f.place(Some(3), Some(150), 2).is_err()); // 100 + 20 + 3·10 + 2·10 = 170
        assert_eq!(fmt_size(4_700_000_000), "4.70 GB");
    }
}
