//! `ultra synth`: a GGUF with random weights of a real model's shape.

use anyhow::{Result, anyhow};

use super::SynthArgs;
use ultra::Format;

pub fn run(args: SynthArgs) -> Result<()> {
    let format = Format::parse(&args.format).ok_or_else(|| anyhow!("unknown weight type `{}`", args.format))?;
    eprintln!("writing {} {} {} to {}", args.arch, args.preset, format.name(), args.out.display());
    ultra::model::synth::synth_gguf(&args.arch, &args.preset, format, args.seed, &args.out)?;
    Ok(())
}
