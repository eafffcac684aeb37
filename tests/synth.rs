//! `ultra synth`: the synthesized smollm2-135m re-opens with every tensor and metadata key a
//! llama loader needs, its weights have the intended statistics, and the bytes depend only on
//! the seed.

use std::path::{Path, PathBuf};

use ultra::gguf::{Gguf, Value};
use ultra::model::synth::{Preset, WeightType, byte_to_unicode, synth_gguf, vocabulary};
use ultra::quant::{Format, dequantize_row};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("ultra-synth-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn meta_u64(g: &Gguf, key: &str) -> u64 {
    g.get(key).and_then(Value::as_u64).unwrap_or_else(|| panic!("metadata {key}"))
}

fn check_file(path: &Path, preset: &Preset, format: Format) {
    let g = Gguf::open(path).unwrap();
    assert_eq!(g.version, 3);
    assert_eq!(g.get("general.architecture").and_then(Value::as_str), Some("llama"));
    for (key, want) in [
        ("llama.block_count", preset.n_layers),
        ("llama.context_length", preset.context),
        ("llama.embedding_length", preset.d_model),
        ("llama.feed_forward_length", preset.d_ff),
        ("llama.attention.head_count", preset.n_heads),
        ("llama.attention.head_count_kv", preset.n_kv_heads),
        ("llama.rope.dimension_count", preset.head_dim),
        ("llama.vocab_size", preset.vocab),
        ("tokenizer.ggml.bos_token_id", 256),
        ("tokenizer.ggml.eos_token_id", 256),
        ("general.alignment", 32),
    ] {
        assert_eq!(meta_u64(&g, key), want as u64, "{key}");
    }
    let f = |key: &str| g.get(key).and_then(Value::as_f64).unwrap();
    assert_eq!(f("llama.rope.freq_base"), preset.rope_theta as f64);
    assert_eq!(f("llama.attention.layer_norm_rms_epsilon") as f32, preset.rms_eps);
    let file_type = meta_u64(&g, "general.file_type");
    assert_eq!(file_type, if format == Format::Q4_0 { 2 } else { 7 });
    assert_eq!(g.get("tokenizer.ggml.model").and_then(Value::as_str), Some("gpt2"));
    // llama.cpp of October 2026 refuses `gpt2` here; `gpt-2` is its name for the same split.
    assert_eq!(g.get("tokenizer.ggml.pre").and_then(Value::as_str), Some("gpt-2"));
    let tokens = g.get("tokenizer.ggml.tokens").and_then(Value::as_array).unwrap();
    let types = g.get("tokenizer.ggml.token_type").and_then(Value::as_array).unwrap();
    assert_eq!((tokens.len(), types.len()), (preset.vocab, preset.vocab));
    assert_eq!(tokens[b'A' as usize].as_str(), Some("A"));
    assert_eq!(tokens[b' ' as usize].as_str(), Some("Ġ"));
    assert_eq!(tokens[256].as_str(), Some("<|endoftext|>"));
    assert_eq!(tokens[preset.vocab - 1].as_str().unwrap(), format!("<|synth_{}|>", preset.vocab - 258));
    assert_eq!((types[0].as_u64(), types[255].as_u64(), types[256].as_u64()), (Some(1), Some(1), Some(3)));
    assert_eq!(g.get("tokenizer.ggml.merges").and_then(Value::as_array).map(<[Value]>::len), Some(0));

    // Every tensor, in order, with its shape, type and size; nothing else.
    let specs = preset.tensors(format);
    assert_eq!(g.tensors.len(), specs.len());
    assert_eq!(specs.len(), 2 + 9 * preset.n_layers + !preset.tied_embeddings as usize);
    assert!(g.tensor("output.weight").is_none(), "tied embeddings");
    for (t, s) in g.tensors.iter().zip(&specs) {
        assert_eq!(t.name, s.name);
        assert_eq!((t.format().unwrap(), t.rows(), t.cols()), (s.format, s.rows, s.cols), "{}", s.name);
        assert_eq!(t.n_bytes as usize, s.rows * s.format.row_bytes(s.cols).unwrap());
    }
    let d = preset.d_model;
    let (q, kv) = (preset.n_heads * preset.head_dim, preset.n_kv_heads * preset.head_dim);
    for (name, format_want, rows, cols) in [
        ("token_embd.weight", format, preset.vocab, d),
        ("blk.0.attn_norm.weight", Format::F32, 1, d),
        ("blk.29.attn_q.weight", format, q, d),
        ("blk.29.attn_k.weight", format, kv, d),
        ("blk.29.attn_v.weight", format, kv, d),
        ("blk.29.attn_output.weight", format, d, q),
        ("blk.29.ffn_norm.weight", Format::F32, 1, d),
        ("blk.29.ffn_gate.weight", format, preset.d_ff, d),
        ("blk.29.ffn_up.weight", format, preset.d_ff, d),
        ("blk.29.ffn_down.weight", format, d, preset.d_ff),
        ("output_norm.weight", Format::F32, 1, d),
    ] {
        let t = g.tensor(name).unwrap_or_else(|| panic!("{name}"));
        assert_eq!((t.format().unwrap(), t.rows(), t.cols()), (format_want, rows, cols), "{name}");
    }

    // Statistics: matrices std ≈ 0.02 with mean ≈ 0; norms in [0.95, 1.05].
    let values = |name: &str| {
        let t = g.tensor(name).unwrap();
        let mut out = vec![0f32; t.rows() * t.cols()];
        dequantize_row(t.format().unwrap(), g.tensor_bytes(t).bytes(), &mut out);
        out
    };
    for name in ["blk.3.attn_q.weight", "token_embd.weight"] {
        let v = values(name);
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
        let std = (v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
        assert!(mean.abs() < 1e-3 && (0.018..0.022).contains(&std), "{name}: mean {mean}, std {std}");
    }
    assert!(values("blk.7.ffn_norm.weight").iter().all(|&x| (0.95..=1.05).contains(&x)));
}

#[test]
fn smollm2_135m_q4_0_and_q8_0_reopen_as_llama_models() {
    let dir = TempDir::new("shapes");
    let preset = Preset::get("smollm2-135m").unwrap();
    for format in [Format::Q4_0, Format::Q8_0] {
        let path = dir.path(&format!("smollm2-{}.gguf", format.name()));
        synth_gguf("llama", "smollm2-135m", format, 7, &path).unwrap();
        check_file(&path, preset, format);
        std::fs::remove_file(&path).unwrap();
    }
}

#[test]
fn synthesis_is_deterministic_for_a_seed() {
    let dir = TempDir::new("determinism");
    let read = |name: &str, preset: &str, seed: u64| {
        let path = dir.path(name);
        synth_gguf("llama", preset, Format::Q4_0, seed, &path).unwrap();
        std::fs::read(&path).unwrap()
    };
    let a = read("a.gguf", "smollm2-135m", 1);
    assert_eq!(a, read("b.gguf", "smollm2-135m", 1), "same seed, same bytes");
    let (c, d) = (read("c.gguf", "tiny", 1), read("d.gguf", "tiny", 2));
    assert_eq!(c.len(), d.len());
    assert_ne!(c, d, "another seed, other weights");
    let g = Gguf::parse(std::sync::Arc::new(d)).unwrap();
    assert!(g.tensor("output.weight").is_some(), "tiny has an untied output");
}

#[test]
fn bad_requests_are_errors() {
    let dir = TempDir::new("errors");
    let path = dir.path("x.gguf");
    let e = synth_gguf("llama", "gpt-5", Format::Q4_0, 0, &path).unwrap_err().to_string();
    assert!(e.contains("gpt-5") && e.contains("smollm2-135m"), "{e}");
    assert!(synth_gguf("mamba", "tiny", Format::Q4_0, 0, &path).unwrap_err().to_string().contains("mamba"));
    let missing_dir = dir.path("no/such/dir/x.gguf");
    let e = synth_gguf("llama", "tiny", Format::F16, 0, &missing_dir).unwrap_err().to_string();
    assert!(e.contains("no/such/dir"), "{e}");
}

#[test]
fn presets_match_the_real_models() {
    let p = Preset::get("llama-8b").unwrap();
    assert_eq!((p.n_layers, p.d_model, p.d_ff, p.n_heads, p.n_kv_heads, p.head_dim), (32, 4096, 14336, 32, 8, 128));
    assert!(!p.tied_embeddings && p.tensors(Format::Q4_0).last().unwrap().name == "output.weight");
    let p = Preset::get("llama-1b").unwrap();
    assert_eq!((p.n_layers, p.d_model, p.d_ff, p.n_heads, p.n_kv_heads, p.vocab), (16, 2048, 8192, 32, 8, 128256));
    // Parameter counts: 135M and 1.24B (tied), 8.03B (untied).
    let params =
        |name: &str| -> usize { Preset::get(name).unwrap().tensors(Format::F32).iter().map(|t| t.rows * t.cols).sum() };
    assert_eq!(params("smollm2-135m"), 134_515_008);
    assert_eq!(params("llama-1b") / 10_000_000, 123);
    assert_eq!(params("llama-8b") / 10_000_000, 803);
}

#[test]
fn byte_tokens_are_gpt2s_bytes_to_unicode() {
    assert_eq!(byte_to_unicode(b'!'), '!');
    assert_eq!(byte_to_unicode(0), 'Ā');
    assert_eq!(byte_to_unicode(b' '), 'Ġ');
    assert_eq!(byte_to_unicode(b'\n'), 'Ċ');
    assert_eq!(byte_to_unicode(0xad), 'Ń');
    assert_eq!(byte_to_unicode(0xff), 'ÿ');
    let (tokens, types) = vocabulary(300);
    let unique: std::collections::HashSet<_> = tokens.iter().collect();
    assert_eq!((unique.len(), types.len()), (300, 300));
}

/// `llama-quantize`'s per-tensor types (quant::kquant::mix states the rule and its source), on
/// llama-1b (16 layers, 4 query heads per KV head, tied embeddings) and llama-8b (32, untied).
#[test]
fn k_quant_mixes_pick_types_as_llama_quantize() {
    let types = |preset: &str, mix: &str| -> Vec<(String, Format)> {
        let weights = WeightType::parse(mix).unwrap();
        Preset::get(preset).unwrap().tensors(weights).into_iter().map(|t| (t.name, t.format)).collect()
    };
    let of = |list: &[(String, Format)], name: &str| list.iter().find(|(n, _)| n == name).unwrap().1;
    let count = |list: &[(String, Format)], f: Format| list.iter().filter(|(_, g)| *g == f).count();
    // use_more_bits(i, 16): i < 2, i >= 14, or (i - 2) % 3 == 2.
    let more_bits_16 = [0, 1, 4, 7, 10, 13, 14, 15];
    let q4km = types("llama-1b", "q4_k_m");
    for i in 0..16 {
        let want = if more_bits_16.contains(&i) { Format::Q6_K } else { Format::Q4_K };
        assert_eq!(of(&q4km, &format!("blk.{i}.attn_v.weight")), want, "attn_v {i}");
        assert_eq!(of(&q4km, &format!("blk.{i}.ffn_down.weight")), want, "ffn_down {i}");
        for other in ["attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"] {
            assert_eq!(of(&q4km, &format!("blk.{i}.{other}.weight")), Format::Q4_K, "{other} {i}");
        }
        assert_eq!(of(&q4km, &format!("blk.{i}.attn_norm.weight")), Format::F32);
    }
    assert_eq!(of(&q4km, "token_embd.weight"), Format::Q6_K, "tied: token_embd is the output");
    assert_eq!((count(&q4km, Format::Q4_K), count(&q4km, Format::Q6_K)), (96, 17));

    let q5km = types("llama-1b", "q5_k_m");
    assert_eq!((count(&q5km, Format::Q5_K), count(&q5km, Format::Q6_K)), (96, 17));
    let q6k = types("llama-1b", "q6_k");
    assert_eq!(count(&q6k, Format::Q6_K), 16 * 7 + 1);

    let q3km = types("llama-1b", "q3_k_m");
    for i in 0..16 {
        let v = if i < 2 { Format::Q5_K } else { Format::Q4_K };
        let down = if i < 1 { Format::Q5_K } else { Format::Q4_K };
        assert_eq!(of(&q3km, &format!("blk.{i}.attn_v.weight")), v, "attn_v {i}");
        assert_eq!(of(&q3km, &format!("blk.{i}.ffn_down.weight")), down, "ffn_down {i}");
        assert_eq!(of(&q3km, &format!("blk.{i}.attn_output.weight")), Format::Q4_K);
        assert_eq!(of(&q3km, &format!("blk.{i}.ffn_up.weight")), Format::Q3_K);
    }

    let q2k = types("llama-1b", "q2_k");
    assert_eq!(of(&q2k, "blk.3.attn_v.weight"), Format::Q4_K, "n_gqa = 4");
    assert_eq!(of(&q2k, "blk.3.ffn_down.weight"), Format::Q3_K);
    assert_eq!(of(&q2k, "blk.3.attn_output.weight"), Format::Q3_K);
    assert_eq!(of(&q2k, "blk.3.attn_q.weight"), Format::Q2_K);
    // smollm2 has 3 query heads per KV head: attn_v is Q3_K, where its rows allow k-quants at all.
    let smol = types("smollm2-135m", "q2_k");
    assert_eq!(of(&smol, "blk.0.ffn_down.weight"), Format::Q3_K, "1536-wide rows");
    assert_eq!(of(&smol, "blk.0.attn_v.weight"), Format::Q4_0, "576-wide rows: Q3_K falls back to Q4_0");

    // llama-8b: 32 layers, untied; use_more_bits keeps 16 of 32 layers' attn_v and ffn_down at Q6_K.
    let q4km = types("llama-8b", "q4_k_m");
    // use_more_bits(i, 32): i < 4, i >= 28, or (i - 4) % 3 == 2.
    let more_bits_32 = [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31];
    for i in 0..32 {
        let want = if more_bits_32.contains(&i) { Format::Q6_K } else { Format::Q4_K };
        assert_eq!(of(&q4km, &format!("blk.{i}.attn_v.weight")), want, "8b attn_v {i}");
    }
    assert_eq!((of(&q4km, "output.weight"), of(&q4km, "token_embd.weight")), (Format::Q6_K, Format::Q4_K));

    // Rows that do not hold super-blocks fall back as llama.cpp does: smollm2's 576-wide rows.
    let smol = types("smollm2-135m", "q4_k_m");
    assert_eq!(of(&smol, "blk.0.attn_q.weight"), Format::Q5_0);
    assert_eq!(of(&smol, "blk.3.attn_v.weight"), Format::Q5_0);
    assert_eq!(of(&smol, "blk.0.attn_v.weight"), Format::Q8_0, "Q6_K falls back to Q8_0");
    assert_eq!(of(&smol, "blk.0.ffn_down.weight"), Format::Q6_K, "1536-wide rows keep the k-quant");
    assert_eq!(of(&smol, "token_embd.weight"), Format::Q8_0, "the output on 576-wide rows");
    assert_eq!(of(&types("smollm2-135m", "q5_k_m"), "blk.0.attn_q.weight"), Format::Q5_1);
    assert_eq!(WeightType::parse("Q4_K"), Some(WeightType::Pure(Format::Q4_K)));
    assert_eq!(WeightType::parse("q9_k_m"), None);
}

/// A mix file re-opens with the types and file type it was written with, and runs on the CPU
/// backend: its logits equal, bit for bit, those of the same model with every weight stored as
/// the f32 values its blocks dequantize to (the CPU matmul dequantizes rows, then takes the same
/// f32 dot products).
#[test]
fn k_quant_mix_files_run_on_the_cpu_as_their_dequantized_weights() {
    use ultra::Cpu;
    use ultra::kv_cache::CacheLayout;
    use ultra::model::{Batch, Runner};
    let dir = TempDir::new("mix");
    let tokens = [1u32, 7, 300, 15, 0, 9, 9, 4];
    for (mix, file_type) in [("q4_k_m", 15), ("q2_k", 10), ("q3_k_m", 12), ("q5_k_m", 17), ("q6_k", 18)] {
        let path = dir.path(&format!("tiny-{mix}.gguf"));
        let weights = WeightType::parse(mix).unwrap();
        synth_gguf("llama", "tiny-256", weights, 3, &path).unwrap();
        let g = Gguf::open(&path).unwrap();
        assert_eq!(meta_u64(&g, "general.file_type"), file_type, "{mix}");
        let specs = Preset::get("tiny-256").unwrap().tensors(weights);
        for (t, s) in g.tensors.iter().zip(&specs) {
            assert_eq!((t.name.as_str(), t.format().unwrap()), (s.name.as_str(), s.format), "{mix}");
        }
        assert!(specs.iter().any(|s| s.format.is_kquant()), "{mix} has k-quant tensors");

        // The same file with f32 weights.
        let mut w = ultra::gguf::GgufWriter::new();
        for (key, value) in &g.metadata {
            w.meta(key, value.clone());
        }
        for t in &g.tensors {
            let mut values = vec![0f32; t.rows() * t.cols()];
            dequantize_row(t.format().unwrap(), g.tensor_bytes(t).bytes(), &mut values);
            w.tensor(&t.name, Format::F32, t.rows(), t.cols(), values.iter().flat_map(|v| v.to_le_bytes()).collect());
        }
        let f32_model = Gguf::parse(std::sync::Arc::new(w.to_bytes())).unwrap();

        let logits = |g: &Gguf| {
            let mut runner = Runner::load(Cpu::exact(), g, CacheLayout::plain(1, 64), 64).unwrap();
            let seq = runner.cache.add_seq();
            runner.forward(&Batch::sequence(seq, 0, &tokens, true)).unwrap();
            (0..tokens.len()).flat_map(|t| runner.logits(t).to_vec()).collect::<Vec<f32>>()
        };
        let (quantized, float) = (logits(&g), logits(&f32_model));
        assert!(quantized.iter().all(|v| v.is_finite()), "{mix}: finite logits");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&quantized), bits(&float), "{mix}: k-quant logits equal the dequantized model's");
    }
}
