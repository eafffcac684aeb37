//! `ultra`: the command-line front end. Parses arguments, picks the backend once, and hands off
//! to one function per command in `cli/`.

mod cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use cli::{BenchArgs, GenerateArgs, InfoArgs, ModelsArgs, PerplexityArgs, SynthArgs, TokenizeArgs};

#[derive(Parser)]
#[command(name = "ultra", version, about = "Ultra LLM Engine: run quantized GGUF models on the CPU, wgpu or CUDA")]
struct Cli {
    /// Worker threads for the CPU backend (default: all cores).
    #[arg(long, global = true)]
    threads: Option<usize>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate text from a prompt, streaming tokens as they are made.
    Generate(GenerateArgs),
    /// Print the token ids of a text.
    Tokenize(TokenizeArgs),
    /// Perplexity of a text file, computed as llama.cpp's llama-perplexity does.
    Perplexity(PerplexityArgs),
    /// Model metadata and tensor table.
    Info(InfoArgs),
    /// The models known by name, their sizes and whether they are cached; `--fetch` fetches.
    Models(ModelsArgs),
    /// Convert a model's matrices to another format (int4, nf4, q4_k_m, ...), written as GGUF.
    Quantize(cli::quantize::QuantizeArgs),
    /// Write a GGUF with random weights of a real model's shape.
    Synth(SynthArgs),
    /// Prefill and decode speed: median, min and max of several runs.
    Bench(BenchArgs),
    /// An OpenAI-compatible HTTP server on the continuous-batching scheduler.
    Serve(cli::serve::ServeArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(n) = cli.threads {
        // Only fails if a pool already exists, which cannot happen this early.
        let _ = rayon::ThreadPoolBuilder::new().num_threads(n.max(1)).build_global();
    }
    let result = match cli.command {
        Command::Generate(args) => cli::generate::run(args),
        Command::Tokenize(args) => cli::tokenize::run(args),
        Command::Perplexity(args) => cli::perplexity::run(args),
        Command::Info(args) => cli::info::run(args),
        Command::Models(args) => cli::models::run(args),
        Command::Quantize(args) => cli::quantize::run(args),
        Command::Synth(args) => cli::synth::run(args),
        Command::Bench(args) => cli::bench::run(args),
        Command::Serve(args) => cli::serve::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
