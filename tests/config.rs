//! Model configuration from GGUF metadata, per architecture: what each reads and hard-codes
//! (gemma3's windows, RoPE bases and scales), and clear errors for an unknown architecture,
//! metadata that contradicts the tensors, a missing architecture tensor or an unsupported setting.

mod common;

use common::tiny::{TinySpec, tiny_gguf};
use std::sync::Arc;
use ultra::Cpu;

use ultra::gguf::{Gguf, GgufWriter, Value};
use ultra::model::{Activation, Config, Llama};

/// `g` written again with metadata `key` set to `value` (added if absent).
fn set(g: &mut Gguf, key: &str, value: Value) {
    *g = rewrite(g, Some((key, value)), None);
}

/// `g` written again without the tensor `name`.
fn drop_tensor(g: &mut Gguf, name: &str) {
    *g = rewrite(g, None, Some(name));
}

fn rewrite(g: &Gguf, meta: Option<(&str, Value)>, drop: Option<&str>) -> Gguf {
    let mut w = GgufWriter::new();
    for (k, v) in g.metadata.iter().filter(|(k, _)| meta.as_ref().is_none_or(|(m, _)| m != k)) {
        w.meta(k, v.clone());
    }
    if let Some((k, v)) = meta {
        w.meta(k, v);
    }
    for t in g.tensors.iter().filter(|t| Some(t.name.as_str()) != drop) {
        w.raw_tensor(&t.name, t.dims.clone(), t.type_id, g.tensor_bytes(t).bytes().to_vec());
    }
    Gguf::parse(Arc::new(w.to_bytes())).unwrap()
}

fn load_error(g: &Gguf) -> String {
    match Llama::<Cpu>::load(&Cpu::exact(), g) {
        Ok(_) => panic!("the model loaded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn gemma3_reads_its_window_and_hard_codes_the_rest() {
    let spec = TinySpec { arch: "gemma3", n_layers: 13, window: 7, ..TinySpec::default() };
    let c = Config::from_gguf(&tiny_gguf(&spec)).unwrap();
    let hd = spec.d_model / spec.n_heads;
    // Every 6th layer (5, 11) global with the file's base; the others windowed at base 1e4.
    for (i, layer) in c.layers.iter().enumerate() {
        let global = i % 6 == 5;
        assert_eq!(layer.window, if global { None } else { Some(7) }, "layer {i}");
        assert_eq!(layer.rope.theta, if global { 1e6 } else { 1e4 }, "layer {i}");
    }
    assert_eq!(c.attn_scale, 1.0 / (hd as f32).sqrt());
    assert_eq!(c.embed_scale, (spec.d_model as f32).sqrt());
    assert_eq!(c.activation, Activation::GeluTanh);
    assert!(c.qk_norm && c.post_norms && !c.qkv_bias);
    assert_eq!(c.max_window(5), Some(7));
    assert_eq!(c.max_window(13), None);
}

#[test]
fn gemma3_without_a_window_is_all_global_and_llama_qwen_have_none() {
    let mut g = tiny_gguf(&TinySpec { arch: "gemma3", n_layers: 7, ..TinySpec::default() });
    set(&mut g, "gemma3.attention.sliding_window", Value::U32(0));
    assert!(Config::from_gguf(&g).unwrap().layers.iter().all(|l| l.window.is_none()));
    for arch in ["llama", "qwen2", "qwen3"] {
        let c = Config::from_gguf(&tiny_gguf(&TinySpec { arch, ..TinySpec::default() })).unwrap();
        assert!(c.layers.iter().all(|l| l.window.is_none() && l.rope == c.rope), "{arch}");
        assert_eq!((c.qk_norm, c.qkv_bias), (arch == "qwen3", arch == "qwen2"), "{arch}");
        assert_eq!(c.activation, Activation::Silu);
    }
}

#[test]
fn an_unknown_architecture_is_named() {
    let mut g = tiny_gguf(&TinySpec::default());
    set(&mut g, "general.architecture", Value::String("mamba".into()));
    let err = Config::from_gguf(&g).unwrap_err().to_string();
    assert_eq!(err, "model metadata: architecture `mamba` is not supported (llama, qwen2, qwen3, gemma3 are)");
}

#[test]
fn metadata_that_contradicts_the_tensors_is_a_clear_error() {
    // The tensors have 2 KV heads of 8; the metadata claims 4.
    let mut g = tiny_gguf(&TinySpec::default());
    set(&mut g, "llama.attention.head_count_kv", Value::U32(4));
    assert_eq!(
        load_error(&g),
        "model metadata: llama.attention.head_count = 4, llama.attention.head_count_kv = 4 and a head size of 8 \
         (llama.embedding_length / head_count) make 32 query and 32 key rows, but the file's \
         `blk.0.attn_q.weight` has 32 and `blk.0.attn_k.weight` 16"
    );
    // qwen3 with a head size (key_length) its q/k norms do not have.
    let mut g = tiny_gguf(&TinySpec { arch: "qwen3", ..TinySpec::default() });
    set(&mut g, "qwen3.attention.key_length", Value::U32(16));
    let err = load_error(&g);
    assert!(err.contains("blk.0.attn_q.weight"), "{err}");
}

#[test]
fn a_missing_architecture_tensor_or_an_unsupported_setting_is_refused() {
    let mut g = tiny_gguf(&TinySpec { arch: "gemma3", n_layers: 2, ..TinySpec::default() });
    drop_tensor(&mut g, "blk.1.post_ffw_norm.weight");
    assert!(load_error(&g).contains("blk.1.post_ffw_norm.weight"));
    let mut g = tiny_gguf(&TinySpec { arch: "gemma3", n_layers: 2, ..TinySpec::default() });
    set(&mut g, "gemma3.final_logit_softcapping", Value::F32(30.0));
    let err = Config::from_gguf(&g).unwrap_err().to_string();
    assert_eq!(err, "model metadata: gemma3.final_logit_softcapping is set: logit softcapping is not supported");
    let mut g = tiny_gguf(&TinySpec::default());
    set(&mut g, "llama.attention.value_length", Value::U32(16));
    let err = Config::from_gguf(&g).unwrap_err().to_string();
    assert!(err.contains("value_length"), "{err}");
}

/// `rope.scaling.*` as llama.cpp reads it: a missing type is linear, the factor (or the older
/// `rope.scale_linear`) divides positions, a factor of 0 and the type `none` leave them alone, and
/// a type the engine does not implement (yarn, longrope) is refused. Llama 3's scaling has no
/// type: it is the `rope_freqs` tensor (tests/tiny_reference.rs).
#[test]
fn rope_scaling_metadata_reads_as_llama_cpp_does() {
    let scale = |pairs: &[(&str, Value)]| {
        let mut g = tiny_gguf(&TinySpec::default());
        for (k, v) in pairs {
            set(&mut g, &format!("llama.rope.{k}"), v.clone());
        }
        Config::from_gguf(&g).map(|c| c.rope.freq_scale)
    };
    let text = |s: &str| Value::String(s.into());
    assert_eq!(scale(&[]).unwrap(), 1.0);
    assert_eq!(scale(&[("scaling.factor", Value::F32(4.0))]).unwrap(), 0.25);
    assert_eq!(scale(&[("scale_linear", Value::F32(2.0))]).unwrap(), 0.5);
    assert_eq!(scale(&[("scaling.type", text("linear")), ("scaling.factor", Value::F32(8.0))]).unwrap(), 0.125);
    assert_eq!(scale(&[("scaling.type", text("none")), ("scaling.factor", Value::F32(8.0))]).unwrap(), 1.0);
    assert_eq!(scale(&[("scaling.factor", Value::F32(0.0))]).unwrap(), 1.0);
    let err = scale(&[("scaling.type", text("yarn")), ("scaling.factor", Value::F32(4.0))]).unwrap_err().to_string();
    assert_eq!(
        err,
        "model metadata: rope scaling `yarn` (llama.rope.scaling.type) is not supported (none, linear are)"
    );
}
