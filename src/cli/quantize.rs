//! `ultra quantize`: a GGUF file's matrices in another format (`quant::target` decides which
//! tensor gets which), written as GGUF: ggml's formats with their standard type ids, so
//! llama.cpp reads the file; ours with type ids from 1000 and `ultra.quant.version`. Our formats
//! are quantized under a calibration run of the source model (`model::calibrate`) by the method
//! `gptq::default_method` picks (importance-weighted rounding from a quantized source, GPTQ from a
//! float one; GPTQ everywhere with `--calibrate-all`), or rounded to nearest with
//! `--no-calibrate`; ggml's formats by their own quantizers.

use std::collections::BTreeMap;
use std::io::BufWriter;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use super::ModelArgs;
use ultra::gguf::{GgufWriter, Value};
use ultra::gptq::{Method, convert_calibrated, default_method};
use ultra::model::Config;
use ultra::model::calibrate::{self, Calibration};
use ultra::quant::intn::{VERSION, VERSION_KEY};
use ultra::quant::kquant::mix::MixModel;
use ultra::quant::target::{DEFAULT_KEEP, ROLES, Target, bits_per_weight};

#[derive(Args, Clone, Debug)]
pub struct QuantizeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// int8, int4, int2, nf4, nf4_dq (Ultra's group-wise formats), or ggml's q4_0, q4_1, q5_0,
    /// q5_1, q8_0, q2_k, q3_k, q3_k_m, q4_k, q4_k_m, q5_k, q5_k_m, q6_k (also f16, bf16, f32).
    #[arg(long = "to", value_name = "FORMAT")]
    pub to: String,
    /// Values per group for int8/int4/int2/nf4/nf4_dq: 32, 64 or 128 (default 32 for int8, 128
    /// otherwise).
    #[arg(long)]
    pub group_size: Option<usize>,
    /// Roles that keep the source's type (a float source: at most as lossy as 8 bits), comma
    /// separated: token_embd, output, attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up,
    /// ffn_down; `none` for none.
    #[arg(long, value_delimiter = ',', default_values_t = DEFAULT_KEEP.map(String::from))]
    pub keep: Vec<String>,
    #[arg(long)]
    pub out: PathBuf,
    /// Calibration text (default: the bundled `src/model/calibration.txt`).
    #[arg(long, value_name = "FILE", conflicts_with = "no_calibrate")]
    pub calibrate: Option<PathBuf>,
    /// Calibration tokens (the text's first N), run in chunks of 512.
    #[arg(long, value_name = "N", default_value_t = 2048)]
    pub calibrate_tokens: usize,
    /// Round each group to nearest by the plain search (no calibration: no importance weights, no
    /// GPTQ).
    #[arg(long)]
    pub no_calibrate: bool,
    /// GPTQ for every matrix, also from an already quantized source (which by default takes
    /// importance-weighted rounding: there GPTQ measured worse, see README).
    #[arg(long, conflicts_with = "no_calibrate")]
    pub calibrate_all: bool,
}

/// Tokens per calibration chunk (each from an empty cache).
const CALIBRATION_CTX: usize = 512;

pub fn run(args: QuantizeArgs) -> Result<()> {
    let start = std::time::Instant::now();
    let target = Target::parse(&args.to, args.group_size)?;
    let keep: Vec<String> = args.keep.iter().map(|k| k.trim().to_ascii_lowercase()).filter(|k| k != "none").collect();
    if let Some(bad) = keep.iter().find(|k| !ROLES.contains(&k.as_str())) {
        bail!("--keep {bad}: not a role ({})", ROLES.join(", "));
    }
    let path = args.model.path()?;
    if path.canonicalize().ok() == args.out.canonicalize().ok() {
        bail!("--out {} is the input file", args.out.display());
    }
    let gguf = args.model.open()?;
    let config = Config::from_gguf(&gguf)?;
    let model = MixModel {
        n_layers: config.n_layers,
        n_gqa: (config.n_heads / config.n_kv_heads.max(1)).max(1),
        tied_embeddings: gguf.tensor("output.weight").is_none(),
    };

    let mut writer = GgufWriter::new();
    for (key, value) in &gguf.metadata {
        if key != "general.file_type" && key != VERSION_KEY {
            writer.meta(key, value.clone());
        }
    }
    if let Some(file_type) = target.file_type() {
        writer.meta("general.file_type", Value::U32(file_type));
    }
    let mut plan = Vec::with_capacity(gguf.tensors.len());
    for info in &gguf.tensors {
        let source = info.format()?;
        let format = target.tensor_format(&info.name, info.rows(), info.cols(), source, &model, &keep);
        writer.declare_tensor(&info.name, format, info.rows(), info.cols())?;
        plan.push((info, source, format));
    }
    if plan.iter().any(|(_, _, f)| matches!(f, ultra::Format::Intn(_))) {
        writer.meta(VERSION_KEY, Value::U32(VERSION));
    }
    let twice: Vec<_> = plan.iter().filter(|(_, s, f)| s.is_quantized() && s != f).collect();
    if let Some((first, source, _)) = twice.first() {
        eprintln!(
            "warning: {} tensors (e.g. {}, {}) are already quantized: they are dequantized and quantized \
             again, so quality is lost twice; quantize from an F32/F16/BF16 file where you can",
            twice.len(),
            first.name,
            source.name()
        );
    }

    let method = |source: ultra::Format, to: ultra::Format| match to {
        ultra::Format::Intn(f) if source != to => {
            Some(if args.calibrate_all { Method::Gptq } else { default_method(source, f) })
        }
        _ => None,
    };
    let calibration = if !args.no_calibrate && plan.iter().any(|(_, s, f)| method(*s, *f).is_some()) {
        Some(run_calibration(&gguf, &args)?)
    } else {
        if args.calibrate.is_some() {
            eprintln!("note: no tensor takes one of Ultra's group-wise formats here: --calibrate is unused");
        }
        None
    };

    let file = std::fs::File::create(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let mut stream = writer.stream(BufWriter::new(file))?;
    let bar = ProgressBar::new(plan.len() as u64)
        .with_style(ProgressStyle::with_template("{bar:40} {pos}/{len} tensors {msg}").expect("a valid template"));
    let (mut bytes, mut values, mut matrix_bytes, mut matrix_values) = (0u64, 0u64, 0u64, 0u64);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut methods: BTreeMap<Method, usize> = BTreeMap::new();
    for (info, source, format) in &plan {
        bar.set_message(info.name.clone());
        let source_bytes = gguf.tensor_bytes(info);
        let calibrated =
            method(*source, *format).and_then(|m| Some((calibration.as_ref()?.for_tensor(&info.name)?, m)));
        if let Some((_, m)) = calibrated {
            *methods.entry(m).or_default() += 1;
        }
        let data = convert_calibrated(*source, source_bytes.bytes(), info.rows(), info.cols(), *format, calibrated)
            .with_context(|| format!("tensor {}", info.name))?;
        stream.write(&data)?;
        let n = (info.rows() * info.cols()) as u64;
        (bytes, values) = (bytes + data.len() as u64, values + n);
        if info.rows() > 1 {
            (matrix_bytes, matrix_values) = (matrix_bytes + data.len() as u64, matrix_values + n);
        }
        *counts.entry(format.name().to_string()).or_default() += 1;
        bar.inc(1);
    }
    stream.finish()?;
    bar.finish_and_clear();

    let formats: Vec<String> = counts.iter().map(|(f, n)| format!("{f} x{n}")).collect();
    let source_len = std::fs::metadata(&path)?.len();
    let out_len = std::fs::metadata(&args.out)?.len();
    let method = match &calibration {
        Some(c) => format!(
            "calibrated on {} tokens: {} tensors by importance-weighted rounding, {} by GPTQ, the rest \
             rounded to nearest",
            c.tokens,
            methods.get(&Method::Weighted).unwrap_or(&0),
            methods.get(&Method::Gptq).unwrap_or(&0)
        ),
        None if target.is_ours() => "round-to-nearest".to_string(),
        None => "ggml's quantizers".to_string(),
    };
    println!("wrote {} ({}, {method}): {}", args.out.display(), target.name(), formats.join(", "));
    println!(
        "size {:.2} MiB (source {:.2} MiB); {:.3} bits per weight over all {} values, {:.3} over the matrices{}",
        out_len as f64 / (1 << 20) as f64,
        source_len as f64 / (1 << 20) as f64,
        8.0 * bytes as f64 / values.max(1) as f64,
        values,
        8.0 * matrix_bytes as f64 / matrix_values.max(1) as f64,
        match target {
            Target::Pure(f) => format!(" ({} alone: {:.3})", f.name(), bits_per_weight(f)),
            Target::Mix(_) => String::new(),
        }
    );
    eprintln!("done in {:.1} s", start.elapsed().as_secs_f64());
    Ok(())
}

/// GPTQ's calibration statistics: the source model run on the calibration text (a progress bar
/// over its tokens).
fn run_calibration(gguf: &ultra::gguf::Gguf, args: &QuantizeArgs) -> Result<Calibration> {
    let text = match &args.calibrate {
        Some(path) => std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        None => calibrate::TEXT.to_string(),
    };
    let tokens = calibrate::tokens(gguf, &text, args.calibrate_tokens, CALIBRATION_CTX)?;
    let bar = ProgressBar::new(tokens.len() as u64).with_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} calibration tokens {elapsed}").expect("a valid template"),
    );
    let start = std::time::Instant::now();
    let calibration = calibrate::calibrate(gguf, &tokens, CALIBRATION_CTX, |n| bar.inc(n as u64))?;
    bar.finish_and_clear();
    eprintln!("calibrated on {} tokens in {:.1} s", tokens.len(), start.elapsed().as_secs_f64());
    Ok(calibration)
}
