//! Streamed weights on CUDA (`model/offload.rs` drives them): host copies in page-locked memory,
//! ring slots on the device, and a second stream that copies while the compute stream runs.
//!
//! Ordering: `stream_weights` records an event on the compute stream and makes the copy stream
//! wait for it (the slot's previous layer is done), queues the copies, and records a second event
//! on the copy stream: the fence. `wait_fence` makes the compute stream wait for that one.
//!
//! CUDA graphs: a step being captured forks the copy stream into the capture through the first
//! event and joins it back through the fence, so copies become memcpy nodes of the step's graph.
//! Slots and host arrays are allocated once and never move, so a graph's addresses stay valid
//! and replaying it streams the layers again. Copies from pageable memory cannot be captured:
//! once a host weight falls back to pageable memory, graphs are off (`Cuda::pageable`).

use std::sync::atomic::Ordering;

use cudarc::driver::{DevicePtr, PinnedHostSlice, result};

use super::context::Cuda;
use super::driver::driver;
use super::memory::{self, CudaWeight};
use crate::backend::{HostBytes, HostWeightInfo, Weight};
use crate::error::{Error, Result};
use crate::quant::Format;

/// One array of a host weight: page-locked, or pageable when the driver refused to lock it.
enum HostArray {
    Pinned(PinnedHostSlice<u8>),
    Pageable(Vec<u8>),
}

/// A weight's device arrays (`CudaWeight`'s fields, same names and sizes) kept on the host.
pub struct CudaHostWeight {
    fields: Vec<(&'static str, HostArray, *const u8, usize)>,
    layout: (Format, usize, usize),
}

// SAFETY: the raw pointers point into the `HostArray` beside them, which is Send + Sync and is
// never written after `host_weight` returns.
unsafe impl Send for CudaHostWeight {}
unsafe impl Sync for CudaHostWeight {}

impl HostWeightInfo for CudaHostWeight {
    fn bytes(&self) -> usize {
        self.fields.iter().map(|f| f.3).sum()
    }
    fn layout(&self) -> (Format, usize, usize) {
        self.layout
    }
}

/// `ULTRA_CUDA_PINNED=0` refuses page-locked memory, as a driver out of it would (for tests).
fn pinned_allowed() -> bool {
    std::env::var("ULTRA_CUDA_PINNED").map_or(true, |v| v != "0")
}

fn pin(cuda: &Cuda, bytes: &[u8]) -> Result<HostArray> {
    if !pinned_allowed() {
        return Err(Error::Device {
            backend: "cuda",
            detail: "page-locked memory refused (ULTRA_CUDA_PINNED=0)".into(),
        });
    }
    // SAFETY: the slice is filled completely below before anything reads it.
    let mut pinned = unsafe { cuda.ctx.alloc_pinned::<u8>(bytes.len()) }.map_err(driver)?;
    pinned.as_mut_slice().map_err(driver)?.copy_from_slice(bytes);
    Ok(HostArray::Pinned(pinned))
}

pub fn host_weight(cuda: &Cuda, format: Format, rows: usize, cols: usize, bytes: HostBytes) -> Result<CudaHostWeight> {
    let mut fields = Vec::new();
    for (name, bytes) in memory::device_arrays(format, rows, cols, &bytes)? {
        let array = match pin(cuda, &bytes) {
            Ok(pinned) => pinned,
            Err(e) => {
                if !cuda.pageable.swap(true, Ordering::Relaxed) {
                    eprintln!(
                        "warning: cuda: page-locked host memory for streamed layers was refused ({e}); \
                         streaming from pageable memory instead (slower copies, CUDA graphs off)"
                    );
                }
                HostArray::Pageable(bytes)
            }
        };
        let (ptr, len) = match &array {
            // SAFETY: as_ptr only waits on the slice's event (nothing is queued on it yet).
            HostArray::Pinned(p) => (p.as_ptr().map_err(driver)?, p.len()),
            HostArray::Pageable(v) => (v.as_ptr(), v.len()),
        };
        fields.push((name, array, ptr, len));
    }
    Ok(CudaHostWeight { fields, layout: (format, rows, cols) })
}

pub fn weight_slot(cuda: &Cuda, like: &CudaHostWeight) -> Result<Weight<Cuda>> {
    let fields = like.fields.iter().map(|f| Ok((f.0, cuda.alloc_bytes(f.3)?))).collect::<Result<Vec<_>>>()?;
    let (format, rows, cols) = like.layout;
    Ok(Weight { storage: CudaWeight::new(fields, cuda)?, format, rows, cols })
}

pub fn stream_weights(cuda: &Cuda, parts: &[(&CudaHostWeight, &Weight<Cuda>)]) -> Result<cudarc::driver::CudaEvent> {
    let copy = &cuda.copy_stream;
    copy.wait(&cuda.stream.record_event(None).map_err(driver)?).map_err(driver)?;
    for (host, slot) in parts {
        for (name, _, ptr, len) in &host.fields {
            let dst = slot.storage.field(name);
            if dst.len() < *len {
                return Err(Error::InvalidArgument(format!(
                    "stream_weights: field {name} of {len} bytes does not fit its slot of {}",
                    dst.len()
                )));
            }
            let (dst_ptr, _record) = dst.device_ptr(copy);
            // SAFETY: `ptr..ptr + len` is the host array beside it (alive as long as `host`, which
            // the offload manager keeps for the model's life); the slot holds at least `len` bytes
            // (checked above).
            let src = unsafe { std::slice::from_raw_parts(*ptr, *len) };
            unsafe { result::memcpy_htod_async(dst_ptr, src, copy.cu_stream()) }.map_err(driver)?;
        }
    }
    copy.record_event(None).map_err(driver)
}

pub fn wait_fence(cuda: &Cuda, fence: cudarc::driver::CudaEvent) -> Result<()> {
    cuda.stream.wait(&fence).map_err(driver)
}
