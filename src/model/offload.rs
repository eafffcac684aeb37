//! Layer offload: the first `resident` layers keep their matrices on the device, the rest live in
//! host memory (`Backend::host_weight`, page-locked where the driver allows) and stream through a
//! ring of `depth` device slots. The copy of streamed layer j goes to slot j mod depth; it is
//! queued as soon as layer j − depth, the slot's previous tenant, has been queued for compute, so
//! while layer l computes the copies of l + 1 … l + depth − 1 are under way. A file whose layers
//! differ in layout (k-quant mixes) gets one such ring per layout, each over its own layers. The first streamed
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

/// The streamed layers, their rings of device slots (one ring per layer layout), and each slot's
/// pending copy.
pub struct Offload<B: Backend> {
    /// Layers `first ..` stream; `host[j]` is layer `first + j`.
    first: usize,
    host: Vec<Matrices<B::HostWeight>>,
    rings: Vec<Ring<B>>,
    /// Streamed layer j's ring and its index among that ring's layers.
    place: Vec<(usize, usize)>,
    /// The copy that fills each slot (`fences[ring][slot]`), until the layer that reads it waits.
    fences: Mutex<Vec<Vec<Option<B::Fence>>>>,
    depth: usize,
}

/// The streamed layers of one layout (k-quant mixes give a file several: llama-quantize keeps
/// some layers' attn_v and ffn_down in a wider type) and the slots of that layout they cycle
/// through: member k lives in slot k mod depth.
struct Ring<B: Backend> {
    members: Vec<usize>,
    slots: Vec<LayerMatrices<B>>,
}

impl<B: Backend> Offload<B> {
    /// Streams `host` (layers `first ..`) through rings of `depth` slots each (at most one per
    /// layer), one ring per distinct layout of the seven matrices.
    pub fn new(be: &B, first: usize, host: Vec<Matrices<B::HostWeight>>, depth: usize) -> Result<Offload<B>> {
        if host.is_empty() {
            return Err(Error::InvalidArgument("offload: no streamed layers".into()));
        }
        let layout = |m: &Matrices<B::HostWeight>| m.each().map(|w| w.layout());
        let mut layouts = Vec::new();
        let mut members: Vec<Vec<usize>> = Vec::new();
        let mut place = Vec::with_capacity(host.len());
        for (j, layer) in host.iter().enumerate() {
            let l = layout(layer);
            let r = layouts.iter().position(|x| *x == l).unwrap_or_else(|| {
                layouts.push(l);
                members.push(Vec::new());
                layouts.len() - 1
            });
            place.push((r, members[r].len()));
            members[r].push(j);
        }
        let depth = depth.max(1);
        let rings = members
            .into_iter()
            .map(|members| {
                let model = &host[members[0]];
                let slots = (0..depth.min(members.len()))
                    .map(|_| model.try_map(|w| be.weight_slot(w)))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Ring { members, slots })
            })
            .collect::<Result<Vec<Ring<B>>>>()?;
        let fences = Mutex::new(rings.iter().map(|r| r.slots.iter().map(|_| None).collect()).collect());
        Ok(Offload { first, host, rings, place, fences, depth })
    }

    /// The first streamed layer (the number of resident ones).
    pub fn first(&self) -> usize {
        self.first
    }

    /// Slots per ring: how many of a layout's layers are in flight at once.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Streamed layers among the first `n`.
    pub fn streamed(&self, n: usize) -> usize {
        n.saturating_sub(self.first)
    }

    /// Bytes the streamed layers among the first `n` move to the device in one pass.
    pub fn pass_bytes(&self, n: usize) -> usize {
        self.host[..self.streamed(n).min(self.host.len())]
            .iter()
            .map(|m| m.each().iter().map(|w| w.bytes()).sum::<usize>())
            .sum()
    }

    /// Queues the copies of the first streamed layers of each ring in a pass over `n` layers.
    pub fn begin(&self, be: &B, n: usize) -> Result<()> {
        let streamed = self.streamed(n);
        for ring in &self.rings {
            for &j in ring.members.iter().take(ring.slots.len()).take_while(|&&j| j < streamed) {
                self.queue(be, j)?;
            }
        }
        Ok(())
    }

    /// Layer `i`'s slot (`i` streams), once its copy has landed for the compute queued from now on.
    pub fn slot(&self, be: &B, i: usize) -> Result<&LayerMatrices<B>> {
        let (r, s) = self.slot_of(i - self.first);
        let fence = lock(&self.fences)[r][s].take();
        let fence =
            fence.ok_or_else(|| Error::InvalidArgument(format!("offload: layer {i}'s copy was never queued")))?;
        be.wait_fence(fence)?;
        Ok(&self.rings[r].slots[s])
    }

    /// Layer `i` has been queued for compute: its slot takes its ring's layer `depth` later.
    pub fn done(&self, be: &B, i: usize, n: usize) -> Result<()> {
        if i < self.first {
            return Ok(());
        }
        let (r, k) = self.place[i - self.first];
        let ring = &self.rings[r];
        match ring.members.get(k + ring.slots.len()) {
            Some(&next) if next < self.streamed(n) => self.queue(be, next),
            _ => Ok(()),
        }
    }

    /// Streamed layer j's ring and slot.
    fn slot_of(&self, j: usize) -> (usize, usize) {
        let (r, k) = self.place[j];
        (r, k % self.rings[r].slots.len())
    }

    /// Queues streamed layer `j`'s copy into its slot.
    fn queue(&self, be: &B, j: usize) -> Result<()> {
        let (r, s) = self.slot_of(j);
        let pairs: Vec<(&B::HostWeight, &Weight<B>)> =
            self.host[j].each().into_iter().zip(self.rings[r].slots[s].each()).collect();
        let fence = be.stream_weights(&pairs)?;
        lock(&self.fences)[r][s] = Some(fence);
        Ok(())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
