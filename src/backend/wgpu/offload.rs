//! Streamed weights on wgpu (`model/offload.rs` drives them). A host weight is one staging
//! buffer per part (MAP_WRITE | COPY_SRC, filled once while mapped at creation: host-visible
//! memory the device reads over the bus); a ring slot is a storage buffer per part.
//!
//! Ordering: wgpu has one queue per device. `stream_weights` submits the dispatches recorded so
//! far and `copy_buffer_to_buffer`s after them in the same command buffer, so the copy follows the
//! slot's last reader and precedes every dispatch recorded later; fences are therefore empty.
//! What overlaps is up to the driver: wgpu exposes no transfer queue, and it places a barrier
//! before a copy into a buffer that a previous dispatch read, so at most the copy may run beside
//! later dispatches that touch other buffers (measured in benches/notes/wgpu.md).

use super::Wgpu;
use super::context::device_error;
use super::memory::{self, GpuWeight, PartLayout};
use crate::backend::{HostBytes, HostWeightInfo, Weight};
use crate::error::{Error, Result};
use crate::quant::Format;

/// A weight's repacked parts in staging buffers.
pub struct WgpuHostWeight {
    parts: Vec<(wgpu::Buffer, PartLayout)>,
    layout: (Format, usize, usize),
}

impl HostWeightInfo for WgpuHostWeight {
    fn bytes(&self) -> usize {
        self.parts.iter().map(|(b, _)| b.size() as usize).sum()
    }
    fn layout(&self) -> (Format, usize, usize) {
        self.layout
    }
}

pub fn host_weight(be: &Wgpu, format: Format, rows: usize, cols: usize, bytes: HostBytes) -> Result<WgpuHostWeight> {
    let src = bytes.bytes();
    let per_part = memory::rows_per_part(be, format, rows, cols, src.len())?;
    let row_bytes = src.len() / rows.max(1);
    let mut parts = Vec::new();
    for i in 0..rows.div_ceil(per_part).max(1) {
        let (row0, n) = (i * per_part, per_part.min(rows - i * per_part));
        let (words, part) = memory::repack_part(format, cols, row0, n, &src[row0 * row_bytes..(row0 + n) * row_bytes]);
        let size = (words.len() * 4).max(4) as u64;
        if size > be.ctx.limits.max_buffer_size {
            return Err(Error::Unsupported {
                op: "host_weight",
                backend: "wgpu",
                detail: format!("a staging buffer of {size} bytes (over this adapter's max_buffer_size)"),
            });
        }
        let staging = be.ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("streamed weight"),
            size,
            usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        if !words.is_empty() {
            let mut view = staging.slice(..(words.len() * 4) as u64).get_mapped_range_mut().map_err(device_error)?;
            view.copy_from_slice(bytemuck::cast_slice(&words));
        }
        staging.unmap();
        parts.push((staging, part));
    }
    be.ctx.check_errors()?;
    Ok(WgpuHostWeight { parts, layout: (format, rows, cols) })
}

pub fn weight_slot(be: &Wgpu, like: &WgpuHostWeight) -> Result<Weight<Wgpu>> {
    let parts = like
        .parts
        .iter()
        .map(|(staging, part)| Ok(part.clone().with(be.ctx.buffer(staging.size(), "weight slot")?)))
        .collect::<Result<Vec<_>>>()?;
    let (format, rows, cols) = like.layout;
    Ok(Weight { storage: GpuWeight { parts }, format, rows, cols })
}

pub fn stream_weights(be: &Wgpu, pairs: &[(&WgpuHostWeight, &Weight<Wgpu>)]) -> Result<()> {
    let mut copies = Vec::new();
    for (host, slot) in pairs {
        if host.parts.len() != slot.storage.parts.len() {
            return Err(Error::InvalidArgument("stream_weights: the slot was made for another weight".into()));
        }
        for ((staging, _), part) in host.parts.iter().zip(&slot.storage.parts) {
            if part.buf.buf.size() < staging.size() {
                return Err(Error::InvalidArgument("stream_weights: a part does not fit its slot".into()));
            }
            copies.push((staging, &part.buf.buf, staging.size()));
        }
    }
    be.ctx.flush(&copies)
}
