//! The backend-parameterized end-to-end suites' shared parts: which model a backend runs
//! (the reference model, or on a software GPU a tiny synthetic one so CI stays fast), its
//! prompts, and how outputs are compared (exactly on batch-invariant backends, else up to the
//! first near-tie).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use super::{NEAR_TIE, top2};
use ultra::Backend;
use ultra::generate::sampler::{Sampler, SamplerConfig};
use ultra::generate::{GenerateOptions, generate};
use ultra::gguf::Gguf;
use ultra::kv_cache::CacheLayout;
use ultra::model::{Batch, Llama, Runner};

pub const CONTEXT: usize = 1024;

pub struct SuiteModel<B: Backend> {
    pub backend: Arc<B>,
    pub model: Arc<Llama<B>>,
    /// Outputs must be bit-identical whatever the batching (the backend is batch-invariant).
    pub exact: bool,
    /// The reference model (false: the synthetic `tiny` preset).
    pub real: bool,
}

/// The synthetic tiny model, written once per test process.
fn tiny_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("ultra-suite-tiny-{}.gguf", std::process::id()));
        ultra::model::synth::synth_gguf("llama", "tiny", ultra::Format::Q8_0, 7, &path).expect("synth tiny");
        path
    })
    .clone()
}

impl<B: Backend> SuiteModel<B> {
    pub fn load(backend: B, exact: bool, real: bool) -> SuiteModel<B> {
        let path = if real { super::model_path() } else { tiny_path() };
        let gguf = Gguf::open(&path).unwrap();
        let model = Llama::load(&backend, &gguf).unwrap();
        SuiteModel { backend: Arc::new(backend), model: Arc::new(model), exact, real }
    }

    pub fn runner(&self, layout: CacheLayout) -> Runner<B> {
        Runner::new(self.backend.clone(), self.model.clone(), layout, CONTEXT).unwrap()
    }

    /// Reference prompts by name, mapped into the tiny model's vocabulary when it is used.
    pub fn prompt(&self, name: &str) -> Vec<u32> {
        let refs = super::load_json("smollm2/greedy.json");
        let case = refs["prompts"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone();
        let vocab = self.model.config.vocab_size as u32;
        super::ids(&case["prompt_ids"]).into_iter().map(|t| t % vocab).collect()
    }

    /// Greedy generation of one prompt alone, plain cache.
    pub fn solo(&self, prompt: &[u32], max_tokens: usize) -> Vec<u32> {
        let mut runner = self.runner(CacheLayout::plain(1, CONTEXT));
        let seq = runner.cache.add_seq();
        let opts = GenerateOptions { max_tokens, prefill_chunk: 512, eog: vec![0, 2] };
        let mut sampler = Sampler::new(SamplerConfig::default()).unwrap();
        generate(&mut runner, seq, prompt, &mut sampler, &opts, |_| Ok(())).unwrap().tokens
    }

    /// `got` equals `want`, or (on a backend that is not batch-invariant) equals it up to a
    /// step where `want`'s own logits had a top-2 gap below [`NEAR_TIE`].
    pub fn assert_same_greedy(&self, prompt: &[u32], want: &[u32], got: &[u32], what: &str) {
        if self.exact {
            assert_eq!(got, want, "{what}");
            return;
        }
        let Some(s) = got.iter().zip(want).position(|(a, b)| a != b) else {
            assert_eq!(got.len(), want.len(), "{what}: different lengths");
            return;
        };
        let gap = self.top2_gap(prompt, &want[..s]);
        assert!(gap < NEAR_TIE, "{what}: differs at step {s} where the top-2 gap is {gap}");
    }

    /// Top-2 logit gap after `prompt ++ generated`.
    fn top2_gap(&self, prompt: &[u32], generated: &[u32]) -> f64 {
        let mut runner = self.runner(CacheLayout::plain(1, CONTEXT));
        let seq = runner.cache.add_seq();
        let tokens = [prompt, generated].concat();
        runner.forward(&Batch::sequence(seq, 0, &tokens, false)).unwrap();
        top2(runner.logits(0)).1
    }
}

/// Defines `mod $name` with one #[test] per listed suite function, each given the backend's
/// SuiteModel; a missing device skips loudly (or fails under `$require=1`). `exact` and `real`
/// ask the backend made: whether it is batch-invariant, whether to run the reference model.
#[macro_export]
macro_rules! backend_suite {
    ($name:ident, $what:literal, $require:literal, $make:expr, exact: $exact:expr, real: $real:expr, [$($test:ident),* $(,)?]) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            fn model() -> Option<$crate::common::suite::SuiteModel<impl ultra::Backend>> {
                let b = $crate::common::or_skip($what, $require, $make)?;
                let (exact, real): (fn(&_) -> bool, fn(&_) -> bool) = ($exact, $real);
                let (e, r) = (exact(&b), real(&b));
                Some($crate::common::suite::SuiteModel::load(b, e, r))
            }
            $(#[test] fn $test() { if let Some(m) = model() { super::$test(&m) } })*
        }
    };
}
