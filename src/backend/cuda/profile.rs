//! `ULTRA_CUDA_PROFILE=1`: GPU time per op, measured with CUDA events around each op's launches
//! and printed as a table (share, total, calls, µs per call, GB/s of weights for matmuls) when the
//! backend is dropped. Graphs are off while profiling (events cannot sit inside a capture), so
//! the table shows kernel time without launch overlap: use it to find the slow op, and
//! `ultra bench` for end-to-end speed. The wgpu backend has the same switch (ULTRA_WGPU_PROFILE).

use std::collections::HashSet;
use std::sync::Mutex;

use cudarc::driver::{CudaEvent, CudaStream, sys::CUevent_flags};

use super::driver::driver;
use crate::backend::profile::ProfileTable;
use crate::error::Result;

/// Pending event pairs resolved (with one stream synchronization) once this many have queued.
const FLUSH_EVERY: usize = 512;

#[derive(Default)]
pub struct Profiler {
    pending: Mutex<Vec<(String, u64, CudaEvent, CudaEvent)>>,
    /// Each label's first call is left out (it includes compiling the kernel).
    totals: Mutex<ProfileTable>,
    seen: Mutex<HashSet<String>>,
}

/// Whether `ULTRA_CUDA_PROFILE=1` asks for the per-op table.
pub fn requested() -> bool {
    std::env::var("ULTRA_CUDA_PROFILE").as_deref() == Ok("1")
}

/// Runs `op`, timing it when profiling: `label` names the row (and gives the bytes it must move,
/// 0 when not meaningful) and is only evaluated when profiling is on.
pub fn timed<T>(
    profiler: Option<&Profiler>,
    stream: &CudaStream,
    label: impl FnOnce() -> (String, u64),
    op: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let Some(p) = profiler else { return op() };
    let start = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(driver)?;
    let out = op()?;
    let end = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(driver)?;
    let (name, bytes) = label();
    let mut pending = p.pending.lock().unwrap_or_else(|e| e.into_inner());
    pending.push((name, bytes, start, end));
    if pending.len() >= FLUSH_EVERY {
        flush(p, &mut pending)?;
    }
    Ok(out)
}

fn flush(p: &Profiler, pending: &mut Vec<(String, u64, CudaEvent, CudaEvent)>) -> Result<()> {
    let mut totals = p.totals.lock().unwrap_or_else(|e| e.into_inner());
    let mut seen = p.seen.lock().unwrap_or_else(|e| e.into_inner());
    for (name, bytes, start, end) in pending.drain(..) {
        end.synchronize().map_err(driver)?;
        if seen.insert(name.clone()) {
            continue;
        }
        let ms = start.elapsed_ms(&end).map_err(driver)? as f64;
        totals.add(name, ms * 1e6, bytes);
    }
    Ok(())
}

impl Drop for Profiler {
    fn drop(&mut self) {
        let mut pending = std::mem::take(self.pending.get_mut().unwrap_or_else(|e| e.into_inner()));
        if flush(self, &mut pending).is_err() {
            eprintln!("cuda profile: the last events could not be read");
        }
        self.totals.get_mut().unwrap_or_else(|e| e.into_inner()).print("cuda", "timed ops");
    }
}
