//! CUDA graphs for repeated forward passes. A step key seen for the first time runs eagerly (it
//! compiles kernels and sizes the scratch buffers); the second time its launches are captured
//! from the stream into a graph, which is then launched; from the third on the graph is replayed
//! and the caller skips the ops. A graph is valid while the scratch buffers it captured stay put:
//! each scratch reallocation bumps a generation, and a graph from an older one is captured anew.
//! `ULTRA_CUDA_GRAPHS=0` turns all of this off (every step runs eagerly).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use cudarc::driver::{CudaGraph, sys};

use cudarc::driver::CudaStream;

use super::driver::driver;
use crate::backend::StepMode;
use crate::error::{Error, Result};

/// Graphs kept at most (a few batch shapes per runner; stale ones go when the table is full).
const MAX_GRAPHS: usize = 32;

/// One instantiated graph and the scratch generation it captured.
pub(super) struct Recorded {
    graph: CudaGraph,
    generation: u64,
}

// SAFETY: a CudaGraph is only touched under the `Graphs` mutex, which serializes every call on it.
unsafe impl Send for Recorded {}

/// Per-key state, behind one mutex in `Cuda`.
#[derive(Default)]
pub(super) struct Graphs {
    /// Keys that ran eagerly once (the next pass with the key is captured).
    seen: HashSet<u64>,
    recorded: HashMap<u64, Recorded>,
    /// The key whose pass is being captured now, and the scratch generation when it began.
    capturing: Option<(u64, u64)>,
}

impl Graphs {
    /// Starts the pass of `key` on `stream`; `generation` is the scratch buffers' generation now.
    pub fn begin_step(&mut self, stream: &Arc<CudaStream>, key: u64, generation: u64) -> Result<StepMode> {
        let g = self;
        if g.capturing.is_some() {
            return Err(Error::InvalidArgument("begin_step: the previous step was not ended".into()));
        }
        if let Some(r) = g.recorded.get(&key) {
            if r.generation == generation {
                r.graph.launch().map_err(driver)?;
                return Ok(StepMode::Replayed);
            }
            g.recorded.remove(&key);
        } else if g.seen.insert(key) {
            return Ok(StepMode::Run);
        }
        stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED).map_err(driver)?;
        g.capturing = Some((key, generation));
        Ok(StepMode::Run)
    }

    /// Ends the pass `begin_step` started: a captured pass becomes a graph and runs now.
    pub fn end_step(&mut self, stream: &Arc<CudaStream>, ok: bool) -> Result<()> {
        let g = self;
        let Some((key, generation)) = g.capturing.take() else {
            return Ok(());
        };
        let graph = stream.end_capture(sys::CUgraphInstantiate_flags(0)).map_err(driver)?;
        let Some(graph) = graph.filter(|_| ok) else {
            // A failed pass is not recorded (and its captured launches never run).
            return Ok(());
        };
        // Nothing ran while capturing: run the pass now.
        graph.launch().map_err(driver)?;
        if g.recorded.len() >= MAX_GRAPHS {
            g.recorded.clear();
            g.seen.clear();
        }
        g.recorded.insert(key, Recorded { graph, generation });
        Ok(())
    }
}
