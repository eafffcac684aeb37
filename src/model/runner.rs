//! Runs batches through the model: checks them, grows each sequence's cache, fills the device
//! inputs (ids, positions, slots, block table) and reads back the logits. Activations are kept
//! per batch shape, so a decode loop reuses one set and allocates nothing.

use std::path::Path;
use std::sync::Arc;

use crate::backend::{Backend, StepMode, ready};
use crate::error::{Error, Result};
use crate::gguf::Gguf;
use crate::kv_cache::{CacheLayout, KvCache};
use crate::model::{Activations, Batch, Config, Llama, Observer, Placement};

/// Distinct batch shapes whose activations are kept (decode, prefill chunk, a few others).
const MAX_SHAPES: usize = 6;

pub struct Runner<B: Backend> {
    pub backend: Arc<B>,
    /// Shared with other runners of the same weights (a self-speculation draft runs its first layers).
    pub model: Arc<Llama<B>>,
    /// Layers this runner computes (all, unless it is a shallow draft of a shared model).
    pub depth: usize,
    pub cache: KvCache<B>,
    /// Longest sequence this runner serves (the context size).
    pub context: usize,
    shapes: Vec<Activations<B>>, // most recently used last
    logits: Vec<f32>,            // host copy of the last call's logits [n_logits, vocab]
    /// Forward passes run so far (one per `forward` call, whatever the batch size).
    pub forward_passes: u64,
    /// Weight bytes streamed from host memory so far (`model/offload.rs`).
    pub bytes_streamed: u64,
    host: HostInputs,
}

/// The device's top candidates of each logits row (`Backend::top_k`, read back).
pub struct TopK {
    pub k: usize,
    pub ids: Vec<u32>,  // [n_logits, k]      token ids, best first
    pub vals: Vec<f32>, // [n_logits, k + 1]  their logits, then the row's log-sum-exp
}

impl TopK {
    /// Row i's (ids, vals), as `Sampler::sample_top_k` takes them.
    pub fn row(&self, i: usize) -> (&[u32], &[f32]) {
        (&self.ids[i * self.k..(i + 1) * self.k], &self.vals[i * (self.k + 1)..(i + 1) * (self.k + 1)])
    }
}

/// Host staging for the per-call device inputs (kept to avoid allocating per call).
#[derive(Default)]
struct HostInputs {
    ids: Vec<u32>,
    seq: Vec<u32>,
    pos: Vec<u32>,
    slot: Vec<u32>,
    table: Vec<u32>,
    logit_rows: Vec<u32>,
}

impl<B: Backend> Runner<B> {
    /// Loads the model from a parsed GGUF onto `backend`, with a KV cache of this layout.
    pub fn load(backend: B, gguf: &Gguf, layout: CacheLayout, context: usize) -> Result<Runner<B>> {
        Runner::load_placed(backend, gguf, layout, context, &Placement::all())
    }

    /// As `load`, with the layers placed as `placement` says (resident or streamed).
    pub fn load_placed(
        backend: B,
        gguf: &Gguf,
        layout: CacheLayout,
        context: usize,
        placement: &Placement,
    ) -> Result<Runner<B>> {
        let model = Llama::load_placed(&backend, gguf, placement)?;
        Runner::new(Arc::new(backend), Arc::new(model), layout, context)
    }

    /// Opens a GGUF file (or a Hugging Face checkpoint directory) and loads it with a plain cache for `max_seqs` sequences of `context`.
    pub fn open(backend: B, path: &Path, max_seqs: usize, context: usize) -> Result<Runner<B>> {
        let gguf = crate::hf::open_model(path, None)?;
        let config = Config::from_gguf(&gguf)?;
        let context = context.min(config.context_length).max(1);
        Runner::load(backend, &gguf, CacheLayout::plain(max_seqs, context), context)
    }

    /// A runner over an already loaded model, with its own KV cache.
    pub fn new(backend: Arc<B>, model: Arc<Llama<B>>, layout: CacheLayout, context: usize) -> Result<Runner<B>> {
        let depth = model.config.n_layers;
        Runner::with_depth(backend, model, layout, context, depth)
    }

    /// A runner that computes only the first `depth` layers, then the model's head: a cheap draft
    /// of the same model for self-speculative decoding. Its cache holds `depth` layers.
    pub fn with_depth(
        backend: Arc<B>,
        model: Arc<Llama<B>>,
        layout: CacheLayout,
        context: usize,
        depth: usize,
    ) -> Result<Runner<B>> {
        if depth == 0 || depth > model.config.n_layers {
            return Err(Error::InvalidArgument(format!("depth {depth} outside 1..={}", model.config.n_layers)));
        }
        let cache_config = Config { n_layers: depth, ..model.config.clone() };
        let cache = KvCache::new(&*backend, cache_config.n_layers, cache_config.kv_dim(), layout)?
            .with_window(model.config.max_window(depth));
        let context = context.min(cache.max_seq_len());
        Ok(Runner {
            backend,
            model,
            depth,
            cache,
            context,
            shapes: Vec::new(),
            logits: Vec::new(),
            forward_passes: 0,
            bytes_streamed: 0,
            host: HostInputs::default(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.model.config
    }

    /// Runs one batch; afterwards `logits(i)` is the i-th row that asked for logits.
    pub fn forward(&mut self, batch: &Batch) -> Result<()> {
        ready(self.forward_async(batch))
    }

    /// Runs one batch and returns the argmax of each logits row, computed on the device so only
    /// the token ids come back.
    pub fn forward_argmax(&mut self, batch: &Batch) -> Result<Vec<u32>> {
        ready(self.forward_argmax_async(batch))
    }

    /// Runs one batch and returns the `k` best candidates and the log-sum-exp of each logits row
    /// (`Backend::top_k`), so only those come back. The logits stay on the device: `read_logits`
    /// fetches them when the candidates do not decide the token.
    pub fn forward_top_k(&mut self, batch: &Batch, k: usize) -> Result<TopK> {
        ready(self.forward_top_k_async(batch, k))
    }

    /// Reads back the logits of the last forward pass (after `forward_top_k` or `forward_argmax`,
    /// which leave them on the device), so that `logits(i)` serves them.
    pub fn read_logits(&mut self) -> Result<()> {
        ready(self.read_logits_async())
    }

    // The read path, written once: the blocking calls above are these polled once (`ready`); a
    // page awaits them, its WebGPU readback arriving in a later turn of the event loop.

    /// `forward`, awaiting the readback.
    pub async fn forward_async(&mut self, batch: &Batch) -> Result<()> {
        self.run(batch)?;
        let n = batch.n_logits() * self.config().vocab_size;
        self.logits.resize(n, 0.0);
        let a = self.shapes.last().expect("run leaves its shape last");
        self.backend.read_f32_async(&a.logits, &mut self.logits).await
    }

    /// `forward_argmax`, awaiting the readback.
    pub async fn forward_argmax_async(&mut self, batch: &Batch) -> Result<Vec<u32>> {
        self.run(batch)?;
        let a = self.shapes.last_mut().expect("run leaves its shape last");
        self.backend.argmax(&a.logits, &mut a.argmax)?;
        let mut ids = vec![0u32; batch.n_logits()];
        self.backend.read_u32_async(&a.argmax, &mut ids).await?;
        Ok(ids)
    }

    /// `forward_top_k`, awaiting the readback.
    pub async fn forward_top_k_async(&mut self, batch: &Batch, k: usize) -> Result<TopK> {
        self.run(batch)?;
        let be = &*self.backend;
        let a = self.shapes.last_mut().expect("run leaves its shape last");
        let (logits, out) = a.logits_and_top_k(be, k)?;
        be.top_k(logits, &mut out.ids, &mut out.vals)?;
        let n = batch.n_logits();
        let mut top = TopK { k, ids: vec![0; n * k], vals: vec![0.0; n * (k + 1)] };
        be.read_u32_async(&out.ids, &mut top.ids).await?;
        be.read_f32_async(&out.vals, &mut top.vals).await?;
        Ok(top)
    }

    /// `read_logits`, awaiting the readback.
    pub async fn read_logits_async(&mut self) -> Result<()> {
        let a = self.shapes.last().ok_or_else(|| Error::InvalidArgument("no forward pass yet".into()))?;
        self.logits.resize(a.n_logits * self.model.config.vocab_size, 0.0);
        self.backend.read_f32_async(&a.logits, &mut self.logits).await
    }

    /// Logits of the i-th logits row of the last `forward`.
    pub fn logits(&self, i: usize) -> &[f32] {
        let v = self.config().vocab_size;
        &self.logits[i * v..(i + 1) * v]
    }

    /// Runs one batch, handing each layer's matmul inputs to `observe` (`Llama::forward_observed`);
    /// reads no logits back.
    pub fn forward_observed(&mut self, batch: &Batch, observe: &mut Observer<'_, B>) -> Result<()> {
        self.run_observed(batch, observe)
    }

    fn run(&mut self, batch: &Batch) -> Result<()> {
        self.run_observed(batch, &mut |_, _, _| Ok(()))
    }

    fn run_observed(&mut self, batch: &Batch, observe: &mut Observer<'_, B>) -> Result<()> {
        self.check(batch)?;
        let seqs = batch.seqs();
        let per_seq: Vec<Vec<u32>> =
            seqs.iter().map(|&s| batch.tokens.iter().filter(|t| t.seq == s).map(|t| t.token).collect()).collect();
        // All or nothing: a batch that does not fit changes no sequence, so a scheduler can
        // preempt and retry.
        let mut need = 0;
        for (&s, toks) in seqs.iter().zip(&per_seq) {
            need += self.cache.blocks_needed(s, toks.len())?;
        }
        if need > self.cache.free_blocks() {
            return Err(Error::Cache(format!(
                "out of KV blocks: the batch needs {need}, {} available",
                self.cache.free_blocks()
            )));
        }
        for (&s, toks) in seqs.iter().zip(&per_seq) {
            self.cache.append(&*self.backend, s, toks)?;
        }
        self.stage_inputs(batch, &seqs)?;
        let (n_tokens, n_logits) = (batch.len(), batch.n_logits().max(1));
        // One token per sequence is part of the shape: the backend may pick its attention kernel by it.
        self.use_shape(n_tokens, n_logits, seqs.len() == n_tokens)?;
        let a = self.shapes.last_mut().expect("use_shape leaves its shape last");
        let be = &*self.backend;
        let h = &self.host;
        be.write_u32(&mut a.ids, &h.ids)?;
        be.write_u32(&mut a.batch.seq, &h.seq)?;
        be.write_u32(&mut a.batch.pos, &h.pos)?;
        be.write_u32(&mut a.batch.slot, &h.slot)?;
        be.write_u32(&mut a.batch.block_table, &h.table)?;
        be.write_u32(&mut a.logit_rows, &h.logit_rows)?;
        // The CPU backend forks and joins on rayon's pool a few hundred times per pass. Run from a
        // pool thread, each fork is a local push that this thread helps finish; run from outside,
        // each would be an injection into the pool plus a sleep and wake-up of the caller.
        //
        // All inputs are written (and their indices checked, by `check` and the cache) before
        // `begin_step`, into buffers of this shape, so a backend may replay a recorded pass.
        if be.begin_step(a.step_key)? == StepMode::Run {
            let (model, cache) = (&self.model, &mut self.cache);
            let done = rayon::scope(|_| model.forward_observed(be, cache, a, observe));
            be.end_step(done.is_ok())?;
            done?;
        } else {
            be.end_step(true)?;
        }
        self.forward_passes += 1;
        self.bytes_streamed += self.model.weights.streamed_bytes(self.depth);
        Ok(())
    }

    /// Each sequence's tokens continue it at consecutive positions from its current length.
    fn check(&self, batch: &Batch) -> Result<()> {
        if batch.is_empty() {
            return Err(Error::InvalidArgument("empty batch".into()));
        }
        let vocab = self.config().vocab_size;
        for s in batch.seqs() {
            let mut next = self.cache.seq_len(s)?;
            for t in batch.tokens.iter().filter(|t| t.seq == s) {
                if t.pos != next {
                    return Err(Error::InvalidArgument(format!(
                        "sequence {s}: token at position {} but the next position is {next}",
                        t.pos
                    )));
                }
                if t.token as usize >= vocab {
                    return Err(Error::InvalidArgument(format!(
                        "token id {} is outside the vocabulary ({vocab})",
                        t.token
                    )));
                }
                next += 1;
            }
            if next > self.context {
                return Err(Error::ContextOverflow { prompt: next, context: self.context });
            }
        }
        Ok(())
    }

    /// Fills the host copies of the device inputs.
    fn stage_inputs(&mut self, batch: &Batch, seqs: &[usize]) -> Result<()> {
        let max_blocks = self.cache.blocks_for(self.context);
        let h = &mut self.host;
        h.ids.clear();
        h.seq.clear();
        h.pos.clear();
        h.slot.clear();
        h.logit_rows.clear();
        h.table.clear();
        h.table.resize(batch.len() * max_blocks, 0);
        for (row, &s) in seqs.iter().enumerate() {
            let blocks = self.cache.blocks(s)?;
            h.table[row * max_blocks..row * max_blocks + blocks.len()].copy_from_slice(blocks);
        }
        for (i, t) in batch.tokens.iter().enumerate() {
            h.ids.push(t.token);
            h.seq.push(seqs.iter().position(|&s| s == t.seq).expect("seq listed") as u32);
            h.pos.push(t.pos as u32);
            h.slot.push(self.cache.slot(t.seq, t.pos)?);
            if t.logits {
                h.logit_rows.push(i as u32);
            }
        }
        if h.logit_rows.is_empty() {
            // The output projection still needs a row; its logits are simply not read.
            h.logit_rows.push(batch.len() as u32 - 1);
        }
        Ok(())
    }

    /// Moves this batch shape's activations to the end of `shapes`, allocating them on first use.
    fn use_shape(&mut self, n_tokens: usize, n_logits: usize, decode: bool) -> Result<()> {
        let found = self
            .shapes
            .iter()
            .position(|a| a.n_tokens == n_tokens && a.n_logits == n_logits && a.batch.decode == decode);
        let a = match found {
            Some(i) => self.shapes.remove(i),
            None => {
                if self.shapes.len() >= MAX_SHAPES {
                    self.shapes.remove(0);
                }
                let max_blocks = self.cache.blocks_for(self.context);
                Activations::new(
                    &*self.backend,
                    &self.model.config,
                    n_tokens,
                    n_logits,
                    max_blocks,
                    self.cache.layout.block_size,
                    decode,
                )?
            }
        };
        self.shapes.push(a);
        Ok(())
    }
}
