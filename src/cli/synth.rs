//! `ultra synth`: a GGUF with random weights of a real model's shape.

use anyhow::{Result, anyhow};

use super::SynthArgs;
use ultra::model::synth::WeightType;

pub fn run(args: SynthArgs) -> Result<()> {
    let weights = WeightType::parse(&args.format).ok_or_else(|| anyhow!("unknown weight type `{}`", args.format))?;
    eprintln!("writing {} {} {} to {}", args.arch, args.preset, weights.name(), args.out.display());
    ultra::model::synth::synth_gguf(&args.arch, &args.preset, weights, args.seed, &args.out)?;
    Ok(())
}
