//! Layer offload: the first `resident` layers keep their matrices on the device, the rest live in
//! host memory (`Backend::host_weight`, page-locked where the driver allows) and stream through a
//! ring of `depth` device slots. The copy of streamed layer j goes to slot j mod depth; it is
//! queued as soon as layer j − depth, the slot's previous tenant, has been queued for compute, so
//! while layer l computes the copies of l + 1 … l + depth − 1 are under way. The first streamed
//! layers of a pass are queued when the pass starts, behind no compute but the resident layers'.
//!
//! The forward pass asks `Weights::matrices(i)` for each layer and never sees which kind it got.
//! Slots and host copies never move after loading, so a backend that records a pass (CUDA
//! graphs) can replay its copies too.

use std::sync::Mutex;

use crate::backend::{Backend, HostWeightInfo, Weight};
use crate::error::{Error, Result};

/// A layer's seven matrices, as device weights (`LayerMatrices`) or host copies.
pub struct Matrices<W> {
    pub w_q: W,    // [q_dim, d_model]
    pub w_k: W,    // [kv_dim, d_model]
    pub w_v: W,    // [kv_dim, d_model]
    pub w_o: W,    // [d_model, q_dim]
    pub w_gate: W, // [d_ff, d_model]
    pub w_up: W,   // [d_ff, d_model]
    pub w_down: W, // [d_model, d_ff]
}

pub type LayerMatrices<B> = Matrices<Weight<B>>;

impl<W> Matrices<W> {
    pub fn each(&self) -> [&W; 7] {
        [&self.w_q, &self.w_k, &self.w_v, &self.w_o, &self.w_gate, &self.w_up, &self.w_down]
    }

    fn try_map<V>(&self, mut f: impl FnMut(&W) -> Result<V>) -> Result<Matrices<V>> {
        Ok(Matrices {
            w_q: f(&self.w_q)?,
            w_k: f(&self.w_k)?,
            w_v: f(&self.w_v)?,
            w_o: f(&self.w_o)?,
            w_gate: f(&self.w_gate)?,
            w_up: f(&self.w_up)?,
            w_down: f(&self.w_down)?,
        })
    }
}

/// The streamed layers, their ring of device slots, and each slot's pending copy.
pub struct Offload<B: Backend> {
    /// Layers `first ..` stream; `host[j]` is layer `first + j`.
    first: usize,
    host: Vec<Matrices<B::HostWeight>>,
    slots: Vec<LayerMatrices<B>>,
    /// The copy that fills each slot, until the layer that reads it waits for it.
    fences: Mutex<Vec<Option<B::Fence>>>,
    /// Bytes one streamed layer moves to the device.
    pub layer_bytes: usize,
}

impl<B: Backend> Offload<B> {
    /// Streams `host` (layers `first ..`) through a ring of `depth` slots (at most one per layer).
    /// Every streamed layer must have the layout of the first: one slot fits them all.
    pub fn new(be: &B, first: usize, host: Vec<Matrices<B::HostWeight>>, depth: usize) -> Result<Offload<B>> {
        let Some(model) = host.first() else {
            return Err(Error::InvalidArgument("offload: no streamed layers".into()));
        };
        for (j, layer) in host.iter().enumerate() {
            let same = layer.each().iter().zip(model.each()).all(|(a, b)| a.layout() == b.layout());
            if !same {
                return Err(Error::Unsupported {
                    op: "offload",
                    backend: be.name(),
                    detail: format!(
                        "streaming layer {} (its matrices' formats or shapes differ from layer {first}'s, \
                         as in k-quant mixes; keep such layers resident with a larger --gpu-layers)",
                        first + j
                    ),
                });
            }
        }
        let layer_bytes = model.each().iter().map(|w| w.bytes()).sum();
        let slots = (0..depth.clamp(1, host.len()))
            .map(|_| model.try_map(|w| be.weight_slot(w)))
            .collect::<Result<Vec<_>>>()?;
        let fences = Mutex::new((0..slots.len()).map(|_| None).collect());
        Ok(Offload { first, host, slots, fences, layer_bytes })
    }

    /// The first streamed layer (the number of resident ones).
    pub fn first(&self) -> usize {
        self.first
    }

    pub fn depth(&self) -> usize {
        self.slots.len()
    }

    /// Streamed layers among the first `n`.
    pub fn streamed(&self, n: usize) -> usize {
        n.saturating_sub(self.first)
    }

    /// Queues the copies of the first streamed layers of a pass over `n` layers.
    pub fn begin(&self, be: &B, n: usize) -> Result<()> {
        (0..self.depth().min(self.streamed(n))).try_for_each(|j| self.queue(be, j))
    }

    /// Layer `i`'s slot (`i` streams), once its copy has landed for the compute queued from now on.
    pub fn slot(&self, be: &B, i: usize) -> Result<&LayerMatrices<B>> {
        let s = (i - self.first) % self.depth();
        let fence = lock(&self.fences)[s].take();
        let fence =
            fence.ok_or_else(|| Error::InvalidArgument(format!("offload: layer {i}'s copy was never queued")))?;
        be.wait_fence(fence)?;
        Ok(&self.slots[s])
    }

    /// Layer `i` has been queued for compute: its slot takes the streamed layer `depth` later.
    pub fn done(&self, be: &B, i: usize, n: usize) -> Result<()> {
        if i < self.first {
            return Ok(());
        }
        let next = i - self.first + self.depth();
        if next < self.streamed(n) { self.queue(be, next) } else { Ok(()) }
    }

    /// Queues streamed layer `j`'s copy into its slot.
    fn queue(&self, be: &B, j: usize) -> Result<()> {
        let s = j % self.depth();
        let pairs: Vec<(&B::HostWeight, &Weight<B>)> =
            self.host[j].each().into_iter().zip(self.slots[s].each()).collect();
        let fence = be.stream_weights(&pairs)?;
        lock(&self.fences)[s] = Some(fence);
        Ok(())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
