//! CUDA graphs for repeated forward passes. A step key seen for the first time runs eagerly (it
//! compiles kernels and sizes the scratch buffers); the second time its launches are captured
//! from the stream into a graph, which is then launched; from the third on the graph is replayed
//! and the caller skips the ops. A graph is valid while the scratch buffers it captured stay put:
//! each scratch reallocation bumps a generation, and a graph from an older one is captured anew.
//! `ULTRA_CUDA_GRAPHS=0` turns all of this off (every step runs eagerly).
//!
//! On sm_90 and later each edge from one kernel to the next becomes a programmatic edge from the
//! upstream kernel's launch-order port: the next kernel's blocks are launched once all of the
//! previous kernel's blocks have started, and wait in `GRID_DEPENDENCY_WAIT()` (every kernel's first
//! statement, cuda/common.cuh) until it has finished. The launch and ramp-up of each kernel then
//! overlap the tail of the one before, instead of following it (a kernel boundary costs ~1–1.5 µs
//! inside a graph otherwise). `Pdl` says which recorded steps get these edges: by default one-token
//! steps that read less than `PDL_MAX_WEIGHT_BYTES` of weights, whose kernels are short enough
//! for the boundaries to be a large share of the step. On an H100 that won 8-9% on SmolLM2's shape
//! and 2-4% on llama-1b's, and lost 2% on llama-8b's at batch 1, 12% at batch 8 and 1-6% on
//! prefill (benches/notes/cuda.md, v21). Without the edges the wait returns at once.

use std::collections::{HashMap, HashSet};
use std::ptr::null_mut;
use std::sync::Arc;

use cudarc::driver::{CudaStream, DriverError, sys};

use super::driver::driver;
use crate::backend::StepMode;
use crate::error::{Error, Result};

/// Graphs kept at most (a few batch shapes per runner; stale ones go when the table is full).
const MAX_GRAPHS: usize = 32;
/// `Pdl::Decode`'s limits: tokens per step, and weight bytes its matmuls read (between llama-1b
/// Q4_0's 0.7 GB, which gained, and llama-8b's 4.2 GB, which lost).
const PDL_MAX_TOKENS: usize = 1;
const PDL_MAX_WEIGHT_BYTES: u64 = 2 << 30;

/// Which recorded steps get programmatic kernel edges (module comment). `ULTRA_CUDA_PDL=0` turns
/// them off, `=1` puts them on every step; the default is `Decode`. Only for sm_90 and later.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(super) enum Pdl {
    #[default]
    Off,
    Decode,
    All,
}

impl Pdl {
    pub fn from_env() -> Pdl {
        match std::env::var("ULTRA_CUDA_PDL").as_deref() {
            Ok("0") => Pdl::Off,
            Ok("1") => Pdl::All,
            _ => Pdl::Decode,
        }
    }

    fn applies(self, tokens: usize, weight_bytes: u64) -> bool {
        match self {
            Pdl::Off => false,
            Pdl::Decode => tokens <= PDL_MAX_TOKENS && weight_bytes < PDL_MAX_WEIGHT_BYTES,
            Pdl::All => true,
        }
    }
}

/// A captured graph and its instantiation, destroyed together. (cudarc's `CudaGraph` instantiates
/// as capture ends, before its edges could be changed.)
struct Graph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

impl Graph {
    /// Ends the capture on `stream`; None when nothing was captured.
    fn end_capture(stream: &CudaStream, programmatic: bool) -> std::result::Result<Option<Graph>, DriverError> {
        stream.context().bind_to_thread()?;
        let mut graph = null_mut();
        // SAFETY: the stream is capturing (begin_step began it); graph receives the captured graph.
        unsafe { sys::cuStreamEndCapture(stream.cu_stream(), &mut graph) }.result()?;
        if graph.is_null() {
            return Ok(None);
        }
        let mut g = Graph { graph, exec: null_mut() };
        if programmatic {
            kernel_edges_programmatic(g.graph)?;
        }
        // SAFETY: g.graph is a valid graph; exec receives its instantiation (freed by Drop).
        unsafe { sys::cuGraphInstantiateWithFlags(&mut g.exec, g.graph, 0) }.result()?;
        Ok(Some(g))
    }

    fn launch(&self, stream: &CudaStream) -> std::result::Result<(), DriverError> {
        stream.context().bind_to_thread()?;
        // SAFETY: exec is a live instantiation; the stream belongs to the graph's context.
        unsafe { sys::cuGraphLaunch(self.exec, stream.cu_stream()) }.result()
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: both handles are owned here and freed once; errors at teardown have no one to go to.
        unsafe {
            if !self.exec.is_null() {
                let _ = sys::cuGraphExecDestroy(self.exec);
            }
            let _ = sys::cuGraphDestroy(self.graph);
        }
    }
}

/// Replaces every full-completion edge between two kernel nodes of `graph` by a programmatic edge
/// from the upstream kernel's launch-order port (module comment). Other nodes' edges stay.
fn kernel_edges_programmatic(graph: sys::CUgraph) -> std::result::Result<(), DriverError> {
    let mut n = 0usize;
    // SAFETY: null arrays ask only for the edge count.
    unsafe { sys::cuGraphGetEdges_v2(graph, null_mut(), null_mut(), null_mut(), &mut n) }.result()?;
    let mut from = vec![null_mut(); n];
    let mut to = vec![null_mut(); n];
    let mut data = vec![edge(0, 0); n];
    // SAFETY: each array holds n entries; n comes back as the number written.
    unsafe { sys::cuGraphGetEdges_v2(graph, from.as_mut_ptr(), to.as_mut_ptr(), data.as_mut_ptr(), &mut n) }
        .result()?;
    let full = edge(0, 0);
    let (mut kf, mut kt) = (Vec::new(), Vec::new());
    for i in 0..n.min(from.len()) {
        if data[i] == full && is_kernel(from[i])? && is_kernel(to[i])? {
            kf.push(from[i]);
            kt.push(to[i]);
        }
    }
    if kf.is_empty() {
        return Ok(());
    }
    let old = vec![full; kf.len()];
    let new = vec![
        edge(
            sys::CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER as u8,
            sys::CUgraphDependencyType::CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC as u8
        );
        kf.len()
    ];
    // SAFETY: kf, kt, old and new hold kf.len() entries each, naming edges that exist in graph.
    unsafe {
        sys::cuGraphRemoveDependencies_v2(graph, kf.as_ptr(), kt.as_ptr(), old.as_ptr(), kf.len()).result()?;
        if let Err(e) = sys::cuGraphAddDependencies_v2(graph, kf.as_ptr(), kt.as_ptr(), new.as_ptr(), kf.len()).result()
        {
            // A driver that refuses the edges gets the captured ones back: slower, still right.
            eprintln!("cuda: programmatic graph edges refused ({e}); kernels stay fully serialized");
            return sys::cuGraphAddDependencies_v2(graph, kf.as_ptr(), kt.as_ptr(), old.as_ptr(), kf.len()).result();
        }
        Ok(())
    }
}

fn edge(from_port: u8, kind: u8) -> sys::CUgraphEdgeData {
    sys::CUgraphEdgeData { from_port, to_port: 0, type_: kind, reserved: [0; 5] }
}

fn is_kernel(node: sys::CUgraphNode) -> std::result::Result<bool, DriverError> {
    let mut kind = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
    // SAFETY: node came from cuGraphGetEdges of a live graph.
    unsafe { sys::cuGraphNodeGetType(node, &mut kind) }.result()?;
    Ok(kind == sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL)
}

/// One instantiated graph and the scratch generation it captured.
pub(super) struct Recorded {
    graph: Graph,
    generation: u64,
}

// SAFETY: a Graph is only touched under the `Graphs` mutex, which serializes every call on it.
unsafe impl Send for Recorded {}

/// Per-key state, behind one mutex in `Cuda`.
#[derive(Default)]
pub(super) struct Graphs {
    /// Keys that ran eagerly once (the next pass with the key is captured).
    seen: HashSet<u64>,
    recorded: HashMap<u64, Recorded>,
    capturing: Option<Capture>,
    pdl: Pdl,
}

/// The pass being captured now.
struct Capture {
    key: u64,
    /// The scratch buffers' generation when it began.
    generation: u64,
    /// Its token rows: the most rows of x any of its matmuls took (`note_matmul`; the output
    /// matmul may take fewer).
    tokens: usize,
    /// Bytes of the weights its matmuls read.
    weight_bytes: u64,
}

impl Graphs {
    /// `pdl`: which steps get programmatic edges (`Off` where the device lacks them, before sm_90).
    pub fn new(pdl: Pdl) -> Graphs {
        Graphs { pdl, ..Graphs::default() }
    }

    /// Starts the pass of `key` on `stream`; `generation` is the scratch buffers' generation now.
    pub fn begin_step(&mut self, stream: &Arc<CudaStream>, key: u64, generation: u64) -> Result<StepMode> {
        let g = self;
        if g.capturing.is_some() {
            return Err(Error::InvalidArgument("begin_step: the previous step was not ended".into()));
        }
        if let Some(r) = g.recorded.get(&key) {
            if r.generation == generation {
                r.graph.launch(stream).map_err(driver)?;
                return Ok(StepMode::Replayed);
            }
            g.recorded.remove(&key);
        } else if g.seen.insert(key) {
            return Ok(StepMode::Run);
        }
        stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED).map_err(driver)?;
        g.capturing = Some(Capture { key, generation, tokens: 0, weight_bytes: 0 });
        Ok(StepMode::Run)
    }

    /// A matmul of the pass being captured took `rows` rows of x and read `weight_bytes`.
    pub fn note_matmul(&mut self, rows: usize, weight_bytes: u64) {
        if let Some(c) = &mut self.capturing {
            c.tokens = c.tokens.max(rows);
            c.weight_bytes += weight_bytes;
        }
    }

    /// Ends the pass `begin_step` started: a captured pass becomes a graph and runs now.
    pub fn end_step(&mut self, stream: &Arc<CudaStream>, ok: bool) -> Result<()> {
        let g = self;
        let Some(Capture { key, generation, tokens, weight_bytes }) = g.capturing.take() else {
            return Ok(());
        };
        let graph = Graph::end_capture(stream, g.pdl.applies(tokens, weight_bytes)).map_err(driver)?;
        let Some(graph) = graph.filter(|_| ok) else {
            // A failed pass is not recorded (and its captured launches never run).
            return Ok(());
        };
        // Nothing ran while capturing: run the pass now.
        graph.launch(stream).map_err(driver)?;
        if g.recorded.len() >= MAX_GRAPHS {
            g.recorded.clear();
            g.seen.clear();
        }
        g.recorded.insert(key, Recorded { graph, generation });
        Ok(())
    }
}
