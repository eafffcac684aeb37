//! The engine in a page: wasm-bindgen exports over the `ultra` library, for `web/ultra.js`.
//!
//! One model is loaded at a time, from the GGUF's bytes. Its runner lives on WebGPU (the wgpu
//! backend on `navigator.gpu`) or on the CPU (the same CPU backend as natively, on one thread),
//! made when a generation first asks for that backend. Generation is the library's own decode
//! loop (`generate_async`, `generate_speculative_async`), awaited: WebGPU readbacks resolve in
//! later turns of the event loop, which lets the page paint the tokens as they come.
#![cfg(target_arch = "wasm32")]

use std::cell::RefCell;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use ultra::backend::wgpu::Options;
use ultra::generate::sampler::{Sampler, SamplerConfig};
use ultra::generate::{
    GenerateOptions, Generation, LookupDrafter, SpecOptions, SpecStats, generate_async, generate_speculative_async,
};
use ultra::gguf::Gguf;
use ultra::kv_cache::CacheLayout;
use ultra::model::{Config, Llama, Runner};
use ultra::tokenizer::Tokenizer;
use ultra::{Backend, Cpu, Error, Wgpu};
use wasm_bindgen::prelude::*;

/// Context (tokens) of the page's runners: the KV cache of both backends is sized by it.
const DEFAULT_CONTEXT: usize = 2048;

struct Engine {
    gguf: Gguf,
    tokenizer: Tokenizer,
    context: usize,
    options: Options,
    gpu: Option<Runner<Wgpu>>,
    cpu: Option<Runner<Cpu>>,
    /// Why WebGPU is not there, once it was asked for and failed.
    gpu_error: Option<String>,
}

thread_local! {
    /// The loaded engine; taken out while a call awaits, so a second call at once is refused.
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

fn js_error(e: impl std::fmt::Display) -> JsValue {
    js_sys::Error::new(&e.to_string()).into()
}

fn take_engine() -> Result<Engine, JsValue> {
    ENGINE.with(|e| e.borrow_mut().take()).ok_or_else(|| js_error("no model loaded, or the engine is busy"))
}

fn put_engine(engine: Engine) {
    ENGINE.with(|e| *e.borrow_mut() = Some(engine));
}

/// What `load` tells the page about the model.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ModelInfo {
    architecture: String,
    n_layers: usize,
    vocab_size: usize,
    context: usize,
    has_chat_template: bool,
    backend: &'static str,
    adapter: String,
}

/// Parses a GGUF file's bytes and loads the model onto `backend` ("webgpu", "cpu", or "auto":
/// WebGPU when the browser has an adapter, else the CPU). `wgpu_disable` lists optional WebGPU
/// features to leave unused ("subgroups", "f16": `ULTRA_WGPU_DISABLE`'s words). Resolves to
/// `ModelInfo` as JSON.
#[wasm_bindgen]
pub async fn load(
    bytes: Vec<u8>,
    backend: String,
    context: Option<usize>,
    wgpu_disable: Option<String>,
) -> Result<String, JsValue> {
    ENGINE.with(|e| e.borrow_mut().take()); // drop the old model first: memory
    let gguf = Gguf::parse(Arc::new(bytes)).map_err(js_error)?;
    let tokenizer = Tokenizer::from_gguf(&gguf).map_err(js_error)?;
    let config = Config::from_gguf(&gguf).map_err(js_error)?;
    let context = context.unwrap_or(DEFAULT_CONTEXT).min(config.context_length).max(1);
    let list = wgpu_disable.unwrap_or_default();
    let has = |w: &str| list.split(',').any(|x| x.trim().eq_ignore_ascii_case(w));
    let options = Options { disable_subgroups: has("subgroups"), disable_f16: has("f16"), ..Options::default() };
    let mut engine = Engine { gguf, tokenizer, context, options, gpu: None, cpu: None, gpu_error: None };
    let kind = engine.ensure(&backend).await.map_err(js_error)?;
    let info = ModelInfo {
        architecture: format!("{:?}", config.arch),
        n_layers: config.n_layers,
        vocab_size: config.vocab_size,
        context,
        has_chat_template: engine.tokenizer.chat_template().is_some(),
        backend: kind,
        adapter: engine.adapter(kind),
    };
    put_engine(engine);
    serde_json::to_string(&info).map_err(js_error)
}

impl Engine {
    /// Makes the runner `want` names if it is not there yet; returns "webgpu" or "cpu".
    async fn ensure(&mut self, want: &str) -> Result<&'static str, Error> {
        let gpu = match want {
            "webgpu" => true,
            "cpu" => false,
            "auto" | "" => self.gpu_error.is_none(),
            other => return Err(Error::InvalidArgument(format!("unknown backend `{other}` (webgpu, cpu or auto)"))),
        };
        if gpu && self.gpu.is_none() {
            match self.load_gpu().await {
                Ok(runner) => self.gpu = Some(runner),
                Err(e) if want == "webgpu" => return Err(e),
                Err(e) => self.gpu_error = Some(e.to_string()),
            }
        }
        if self.gpu.is_some() && gpu {
            return Ok("webgpu");
        }
        if self.cpu.is_none() {
            self.cpu = Some(Runner::load(Cpu::new(), &self.gguf, CacheLayout::plain(1, self.context), self.context)?);
        }
        Ok("cpu")
    }

    async fn load_gpu(&self) -> Result<Runner<Wgpu>, Error> {
        let wgpu = Wgpu::with_options_async(self.options).await?;
        let model = Llama::load(&wgpu, &self.gguf)?;
        Runner::new(Arc::new(wgpu), Arc::new(model), CacheLayout::plain(1, self.context), self.context)
    }

    fn adapter(&self, kind: &str) -> String {
        match (&self.gpu, kind) {
            (Some(r), "webgpu") => r.backend.adapter_name(),
            _ => "wasm32 CPU (one thread)".into(),
        }
    }
}

/// `generate`'s options, as the page's `ultra.generate({...})` passes them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
struct Request {
    prompt: String,
    chat: bool,
    max_tokens: usize,
    temperature: f32,
    top_k: usize,
    top_p: f32,
    seed: u64,
    /// Prompt-lookup speculation: drafts of up to k tokens per target pass; 0 is off.
    speculate: usize,
    backend: String,
}

impl Default for Request {
    fn default() -> Request {
        // The defaults of `ultra generate`, so that equal options give equal tokens.
        Request {
            prompt: String::new(),
            chat: false,
            max_tokens: 128,
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
            speculate: 0,
            backend: "auto".into(),
        }
    }
}

/// What a generation resolves to (`ids` are the generated ids only, as `tokens` in
/// `ultra generate --json`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Output {
    ids: Vec<u32>,
    text: String,
    prefill_tok_s: f64,
    decode_tok_s: f64,
    /// Accepted drafts / drafted tokens; null without speculation.
    acceptance_rate: Option<f64>,
    /// Tokens emitted per target forward pass (1 without speculation).
    tokens_per_pass: f64,
    prompt_tokens: usize,
    backend: &'static str,
    adapter: String,
}

/// Generates for `request` (a JSON `Request`), calling `on_token(id, text)` as each token is
/// chosen (`text`: the new complete characters). Resolves to `Output` as JSON.
#[wasm_bindgen]
pub async fn generate(request: String, on_token: js_sys::Function) -> Result<String, JsValue> {
    let request: Request = serde_json::from_str(&request).map_err(|e| js_error(format!("generate options: {e}")))?;
    let mut engine = take_engine()?;
    let result = engine.generate(&request, &on_token).await;
    put_engine(engine);
    serde_json::to_string(&result.map_err(js_error)?).map_err(js_error)
}

impl Engine {
    async fn generate(&mut self, request: &Request, on_token: &js_sys::Function) -> Result<Output, Error> {
        let kind = self.ensure(&request.backend).await?;
        let prompt = self.tokenizer.encode_prompt(&request.prompt, request.chat)?;
        let adapter = self.adapter(kind);
        let (tokenizer, output) = (&self.tokenizer, self.gpu.as_mut().filter(|_| kind == "webgpu"));
        let (generation, spec, passes) = match output {
            Some(runner) => run(runner, tokenizer, &prompt, request, on_token).await?,
            None => run(self.cpu.as_mut().expect("ensure made it"), tokenizer, &prompt, request, on_token).await?,
        };
        let eog = self.tokenizer.eog_ids();
        let text_ids: Vec<u32> = generation.tokens.iter().copied().filter(|id| !eog.contains(id)).collect();
        let decode_steps = passes.max(1) as f64;
        Ok(Output {
            text: self.tokenizer.decode_lossy(&text_ids),
            prefill_tok_s: generation.prefill_tok_s(),
            decode_tok_s: generation.decode_tok_s(),
            acceptance_rate: spec.map(|s| s.acceptance_rate()),
            // The first token comes from the prefill's logits: the rest from `passes` passes.
            tokens_per_pass: generation.tokens.len().saturating_sub(1) as f64 / decode_steps,
            prompt_tokens: prompt.len(),
            ids: generation.tokens,
            backend: kind,
            adapter,
        })
    }
}

/// One generation on `runner`; returns it, the speculation counts, and the decode passes run.
async fn run<B: Backend>(
    runner: &mut Runner<B>,
    tokenizer: &Tokenizer,
    prompt: &[u32],
    request: &Request,
    on_token: &js_sys::Function,
) -> Result<(Generation, Option<SpecStats>, u64), Error> {
    let config = SamplerConfig {
        temperature: request.temperature,
        top_k: request.top_k,
        top_p: request.top_p,
        seed: request.seed,
        ..SamplerConfig::default()
    };
    let mut sampler = Sampler::new(config)?;
    let opts =
        GenerateOptions { max_tokens: request.max_tokens, prefill_chunk: 512, eog: tokenizer.eog_ids().to_vec() };
    let seq = runner.cache.add_seq();
    let mut stream = tokenizer.stream_decoder();
    let mut emit = |id: u32| -> ultra::Result<()> {
        let text = if opts.eog.contains(&id) { String::new() } else { stream.push(id) };
        on_token
            .call2(&JsValue::NULL, &JsValue::from(id), &JsValue::from(text))
            .map(|_| ())
            .map_err(|e| Error::InvalidArgument(format!("onToken threw: {e:?}")))
    };
    let passes_before = runner.forward_passes;
    let result = if request.speculate == 0 {
        generate_async(runner, seq, prompt, &mut sampler, &opts, &mut emit).await.map(|g| (g, None))
    } else {
        let spec = SpecOptions { k: request.speculate, adaptive: false, k_max: 16 };
        let mut drafter = LookupDrafter::new(3);
        generate_speculative_async(runner, seq, prompt, &mut sampler, &opts, &mut drafter, spec, &mut emit)
            .await
            .map(|(g, s)| (g, Some(s)))
    };
    // Prefill passes are not decode passes: a prompt of n tokens is n.div_ceil(chunk) of them.
    let prefill_passes = prompt.len().div_ceil(opts.prefill_chunk) as u64;
    let passes = (runner.forward_passes - passes_before).saturating_sub(prefill_passes);
    runner.cache.remove_seq(seq)?;
    let (generation, spec) = result?;
    Ok((generation, spec, passes))
}
