//! The model's weights on a backend. GGUF tensor names appear only here (`gguf_name`): the
//! model code sees fields, never "blk.{i}.attn_q.weight".

use crate::backend::{Backend, DType, Tensor, Weight};
use crate::error::{Error, Result};
use crate::gguf::Gguf;
use crate::model::config::Config;
use crate::model::offload::{LayerMatrices, Matrices, Offload};
use crate::model::placement::Placement;
use crate::quant::{Format, dequantize_row};

/// One transformer block: its matrices when resident (`Weights::matrices` hands them out, resident
/// or streamed), and its vectors, always on the device.
pub struct LayerWeights<B: Backend> {
    /// `None` when the layer streams from host memory (`Weights::offload`).
    pub mats: Option<LayerMatrices<B>>,
    pub attn_norm: Tensor<B>,              // [1, d_model]
    pub b_q: Option<Tensor<B>>,            // [1, q_dim] (qwen2)
    pub b_k: Option<Tensor<B>>,            // [1, kv_dim]
    pub b_v: Option<Tensor<B>>,            // [1, kv_dim]
    pub q_norm: Option<Tensor<B>>,         // [1, head_dim] (qwen3, gemma3)
    pub k_norm: Option<Tensor<B>>,         // [1, head_dim]
    pub post_attn_norm: Option<Tensor<B>>, // [1, d_model] (gemma3)
    pub ffn_norm: Tensor<B>,               // [1, d_model]
    pub post_ffn_norm: Option<Tensor<B>>,  // [1, d_model] (gemma3)
}

pub struct Weights<B: Backend> {
    pub embed: Weight<B>, // [vocab, d_model]
    pub layers: Vec<LayerWeights<B>>,
    pub output_norm: Tensor<B>, // [1, d_model]
    /// RoPE frequency factors (Llama 3's `rope_freqs`, from its rope scaling), if the file has them.
    pub rope_freqs: Option<Tensor<B>>, // [1, n_rot / 2]
    /// `None` when the output projection is tied to `embed` (no copy is made).
    pub lm_head: Option<Weight<B>>, // [vocab, d_model]
    /// The layers that stream from host memory, and their ring of device slots.
    pub offload: Option<Offload<B>>,
}

impl<B: Backend> Weights<B> {
    pub fn lm_head(&self) -> &Weight<B> {
        self.lm_head.as_ref().unwrap_or(&self.embed)
    }

    /// Starts a pass over the first `n` layers: queues the first streamed layers' copies.
    pub fn begin_layers(&self, be: &B, n: usize) -> Result<()> {
        self.offload.as_ref().map_or(Ok(()), |o| o.begin(be, n))
    }

    /// Layer `i`'s matrices: resident, or its ring slot once its copy has landed.
    pub fn matrices(&self, be: &B, i: usize) -> Result<&LayerMatrices<B>> {
        match (&self.layers[i].mats, &self.offload) {
            (Some(m), _) => Ok(m),
            (None, Some(o)) => o.slot(be, i),
            (None, None) => Err(Error::InvalidArgument(format!("layer {i} has no matrices"))),
        }
    }

    /// Layer `i` (of a pass over `n`) has been queued: its slot may take the next streamed layer.
    pub fn end_layer(&self, be: &B, i: usize, n: usize) -> Result<()> {
        self.offload.as_ref().map_or(Ok(()), |o| o.done(be, i, n))
    }

    /// Layers whose matrices stay on the device, and those streamed.
    pub fn resident_and_streamed(&self) -> (usize, usize) {
        let streamed = self.layers.iter().filter(|l| l.mats.is_none()).count();
        (self.layers.len() - streamed, streamed)
    }

    /// Bytes streamed by one pass over the first `n` layers.
    pub fn streamed_bytes(&self, n: usize) -> u64 {
        self.offload.as_ref().map_or(0, |o| o.pass_bytes(n) as u64)
    }
}

/// Our name → the GGUF tensor name.
fn gguf_name(layer: Option<usize>, name: &str) -> String {
    match layer {
        Some(i) => format!("blk.{i}.{name}.weight"),
        None => format!("{name}.weight"),
    }
}

fn gguf_bias_name(layer: usize, name: &str) -> String {
    format!("blk.{layer}.{name}.bias")
}

struct Loader<'a, B: Backend> {
    backend: &'a B,
    gguf: &'a Gguf,
}

impl<B: Backend> Loader<'_, B> {
    /// A matrix `[rows, cols]`, in its file format (no dequantization).
    fn weight(&self, name: &str, rows: usize, cols: usize) -> Result<Weight<B>> {
        let info = self.gguf.tensor(name).ok_or_else(|| Error::MissingTensor(name.to_string()))?;
        if info.rows() != rows || info.cols() != cols {
            return Err(Error::Metadata(format!(
                "tensor `{name}` is {}×{}, the model's metadata implies {rows}×{cols}",
                info.rows(),
                info.cols()
            )));
        }
        let format = info.format()?;
        if let Format::Intn(_) = format {
            check_intn_version(self.gguf)?;
        }
        self.backend.upload_weight(format, rows, cols, self.gguf.tensor_bytes(info))
    }

    /// A matrix kept in host memory for streaming (`Backend::host_weight`).
    fn host_weight(&self, name: &str, rows: usize, cols: usize) -> Result<B::HostWeight> {
        let info = self.gguf.tensor(name).ok_or_else(|| Error::MissingTensor(name.to_string()))?;
        if info.rows() != rows || info.cols() != cols {
            return Err(Error::Metadata(format!(
                "tensor `{name}` is {}×{}, expected {rows}×{cols}",
                info.rows(),
                info.cols()
            )));
        }
        self.backend.host_weight(info.format()?, rows, cols, self.gguf.tensor_bytes(info))
    }

    /// A vector (norm gain or bias) of `len` values as an f32 tensor `[1, len]`.
    fn vector(&self, name: &str, len: usize) -> Result<Tensor<B>> {
        let info = self.gguf.tensor(name).ok_or_else(|| Error::MissingTensor(name.to_string()))?;
        if info.rows() * info.cols() != len {
            return Err(Error::Metadata(format!(
                "tensor `{name}` has {} values, expected {len}",
                info.rows() * info.cols()
            )));
        }
        let format = info.format()?;
        let mut values = vec![0f32; len];
        dequantize_row(format, self.gguf.tensor_bytes(info).bytes(), &mut values);
        let mut t = self.backend.alloc(DType::F32, 1, len)?;
        self.backend.write_f32(&mut t, &values)?;
        Ok(t)
    }

    fn optional_vector(&self, name: &str, len: usize) -> Result<Option<Tensor<B>>> {
        match self.gguf.tensor(name) {
            None => Ok(None),
            Some(_) => self.vector(name, len).map(Some),
        }
    }
}

/// The metadata that sizes the model against the tensors it sizes, naming the key that
/// disagrees: the per-tensor checks in `Loader` name only the first tensor that does not fit.
fn check_metadata(gguf: &Gguf, cfg: &Config) -> Result<()> {
    let key = |k: &str| format!("{}.{k}", cfg.arch.name());
    let contradiction = |what: String, tensor: &str, has: String| {
        Err(Error::Metadata(format!("{what}, but the file's `{tensor}` {has}")))
    };
    if let Some(t) = gguf.tensor("token_embd.weight") {
        if t.cols() != cfg.d_model {
            let what = format!("{} = {}", key("embedding_length"), cfg.d_model);
            return contradiction(what, &t.name, format!("has rows of {}", t.cols()));
        }
        if t.rows() != cfg.vocab_size {
            let source =
                if gguf.get(&key("vocab_size")).is_some() { key("vocab_size") } else { "the tokenizer".into() };
            let what = format!("the vocabulary has {} tokens ({source})", cfg.vocab_size);
            return contradiction(what, &t.name, format!("has {} rows", t.rows()));
        }
    }
    let (q, k) = (gguf.tensor(&gguf_name(Some(0), "attn_q")), gguf.tensor(&gguf_name(Some(0), "attn_k")));
    if let (Some(q), Some(k)) = (q, k)
        && (q.rows() != cfg.q_dim() || k.rows() != cfg.kv_dim())
    {
        let head_size = match gguf.get(&key("attention.key_length")) {
            Some(_) => key("attention.key_length"),
            None => format!("{} / head_count", key("embedding_length")),
        };
        let what = format!(
            "{} = {}, {} = {} and a head size of {} ({head_size}) make {} query and {} key rows",
            key("attention.head_count"),
            cfg.n_heads,
            key("attention.head_count_kv"),
            cfg.n_kv_heads,
            cfg.head_dim,
            cfg.q_dim(),
            cfg.kv_dim()
        );
        return contradiction(what, &q.name, format!("has {} and `{}` {}", q.rows(), k.name, k.rows()));
    }
    let tensor = gguf_name(Some(0), "ffn_up");
    if let Some(t) = gguf.tensor(&tensor).filter(|t| t.rows() != cfg.d_ff) {
        return contradiction(
            format!("{} = {}", key("feed_forward_length"), cfg.d_ff),
            &tensor,
            format!("has {} rows", t.rows()),
        );
    }
    let last = gguf_name(Some(cfg.n_layers - 1), "attn_norm");
    if gguf.tensor(&last).is_none() {
        let what = format!("{} = {}", key("block_count"), cfg.n_layers);
        return Err(Error::Metadata(format!("{what}, but the file has no `{last}`")));
    }
    Ok(())
}

/// A device out of memory while loading, named as such (with what was being loaded and the way out).
fn name_oom(e: Error, what: &str, resident: usize) -> Error {
    let text = e.to_string();
    if !text.to_ascii_lowercase().contains("out of memory") && !text.contains("OUT_OF_MEMORY") {
        return e;
    }
    Error::Device {
        backend: "gpu",
        detail: format!(
            "out of device memory loading {what} ({resident} layer(s) resident so far): \
             lower --gpu-layers or set a --gpu-memory budget ({text})"
        ),
    }
}

impl<B: Backend> Weights<B> {
    /// Every layer resident on the device.
    pub fn load(backend: &B, gguf: &Gguf, cfg: &Config) -> Result<Weights<B>> {
        Weights::load_placed(backend, gguf, cfg, &Placement::all())
    }

    /// The first `placement.resident_of(n)` layers resident, the rest streamed.
    pub fn load_placed(backend: &B, gguf: &Gguf, cfg: &Config, placement: &Placement) -> Result<Weights<B>> {
        check_metadata(gguf, cfg)?;
        let l = Loader { backend, gguf };
        let (d, q_dim, kv_dim) = (cfg.d_model, cfg.q_dim(), cfg.kv_dim());
        let resident = placement.resident_of(cfg.n_layers);
        let mut layers = Vec::with_capacity(cfg.n_layers);
        let mut host = Vec::new();
        for i in 0..cfg.n_layers {
            let n = |name: &str| gguf_name(Some(i), name);
            let bias = |name: &str, len: usize| -> Result<Option<Tensor<B>>> {
                if cfg.qkv_bias { l.optional_vector(&gguf_bias_name(i, name), len) } else { Ok(None) }
            };
            // Required where the architecture has them (a file without one is not that model).
            let norm_if = |yes: bool, name: &str, len: usize| -> Result<Option<Tensor<B>>> {
                if yes { l.vector(&n(name), len).map(Some) } else { Ok(None) }
            };
            let shapes = [
                ("attn_q", q_dim, d),
                ("attn_k", kv_dim, d),
                ("attn_v", kv_dim, d),
                ("attn_output", d, q_dim),
                ("ffn_gate", cfg.d_ff, d),
                ("ffn_up", cfg.d_ff, d),
                ("ffn_down", d, cfg.d_ff),
            ];
            let mats = if i < resident {
                let m = |k: usize| l.weight(&n(shapes[k].0), shapes[k].1, shapes[k].2);
                let loaded = matrices(m).map_err(|e| name_oom(e, &format!("layer {i}"), i))?;
                Some(loaded)
            } else {
                host.push(matrices(|k| l.host_weight(&n(shapes[k].0), shapes[k].1, shapes[k].2))?);
                None
            };
            layers.push(LayerWeights {
                mats,
                attn_norm: l.vector(&n("attn_norm"), d)?,
                b_q: bias("attn_q", q_dim)?,
                b_k: bias("attn_k", kv_dim)?,
                b_v: bias("attn_v", kv_dim)?,
                q_norm: norm_if(cfg.qk_norm, "attn_q_norm", cfg.head_dim)?,
                k_norm: norm_if(cfg.qk_norm, "attn_k_norm", cfg.head_dim)?,
                post_attn_norm: norm_if(cfg.post_norms, "post_attention_norm", d)?,
                ffn_norm: l.vector(&n("ffn_norm"), d)?,
                post_ffn_norm: norm_if(cfg.post_norms, "post_ffw_norm", d)?,
            });
        }
        let offload =
            match host.is_empty() {
                true => None,
                false => Some(Offload::new(backend, resident, host, placement.prefetch).map_err(|e| {
                    name_oom(e, &format!("the ring of {} streamed slot(s)", placement.prefetch), resident)
                })?),
            };
        let lm_head_name = gguf_name(None, "output");
        let oom = |e| name_oom(e, "the embeddings and output", resident);
        Ok(Weights {
            offload,
            embed: l.weight(&gguf_name(None, "token_embd"), cfg.vocab_size, d).map_err(oom)?,
            layers,
            output_norm: l.vector(&gguf_name(None, "output_norm"), d)?,
            rope_freqs: l.optional_vector(&gguf_name(None, "rope_freqs"), cfg.rope.n_rot / 2)?,
            lm_head: match gguf.tensor(&lm_head_name) {
                Some(_) => Some(l.weight(&lm_head_name, cfg.vocab_size, d).map_err(oom)?),
                None => None,
            },
        })
    }
}

/// A layer's seven matrices, `k`-th by `k` (in `Matrices` order).
fn matrices<W>(mut m: impl FnMut(usize) -> Result<W>) -> Result<Matrices<W>> {
    Ok(Matrices { w_q: m(0)?, w_k: m(1)?, w_v: m(2)?, w_o: m(3)?, w_gate: m(4)?, w_up: m(5)?, w_down: m(6)? })
}

/// Formats of the model's matrices, for `info` and benchmark labels.
pub fn weight_format_summary(gguf: &Gguf) -> Vec<(Format, usize)> {
    let mut counts: Vec<(Format, usize)> = Vec::new();
    for t in &gguf.tensors {
        if let Ok(f) = t.format() {
            match counts.iter_mut().find(|(g, _)| *g == f) {
                Some((_, c)) => *c += 1,
                None => counts.push((f, 1)),
            }
        }
    }
    counts
}

/// Ok when `gguf` declares the group-wise layout's version (`quant::intn::VERSION`): a file with our type ids but another
/// version (or none) is refused with a clear error rather than read with the wrong layout.
fn check_intn_version(gguf: &Gguf) -> Result<()> {
    use crate::quant::intn::{ID_BASE, VERSION, VERSION_KEY};
    match gguf.get(VERSION_KEY).and_then(|v| v.as_u64()) {
        Some(v) if v == VERSION as u64 => Ok(()),
        found => Err(Error::Metadata(format!(
            "this file holds Ultra's group-wise tensors (type ids {ID_BASE}+) with {VERSION_KEY} = {}; \
             this build reads version {VERSION}",
            found.map_or("(missing)".to_string(), |v| v.to_string())
        ))),
    }
}
