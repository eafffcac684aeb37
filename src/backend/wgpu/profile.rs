//! `ULTRA_WGPU_PROFILE=1` (adapters with timestamp queries): every dispatch gets its own pass
//! with GPU timestamps, each flush waits for them, and dropping the context prints the GPU time
//! per kernel variant (`ProfileTable`, shared with cuda's profiler). Slow (no overlap between
//! dispatches); for finding hot kernels.

use std::sync::Mutex;

use crate::backend::profile::ProfileTable;

/// The timestamp queries, their readback, and the totals so far.
pub struct Profiler {
    pub(super) queries: wgpu::QuerySet,
    pub(super) resolve: wgpu::Buffer,
    pub(super) readback: wgpu::Buffer,
    pub(super) period_ns: f64,
    pub(super) totals: Mutex<ProfileTable>,
}

/// Dispatches timed per flush (two queries each); later ones in the same flush are not timed.
pub(super) const PROFILED: usize = 2048;

impl Profiler {
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue) -> Profiler {
        let bytes = (PROFILED * 16) as u64;
        let buffer = |label, usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        Profiler {
            queries: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("profile"),
                ty: wgpu::QueryType::Timestamp,
                count: (PROFILED * 2) as u32,
            }),
            resolve: buffer("profile resolve", wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC),
            readback: buffer("profile readback", wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST),
            period_ns: queue.get_timestamp_period() as f64,
            totals: Mutex::default(),
        }
    }
}
