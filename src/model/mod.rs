//! The model: hyperparameters, weights, batch description, activations, and the forward pass.

mod activations;
mod batch;
mod config;
mod llama;
mod runner;
mod weights;

pub use activations::Activations;
pub use batch::{Batch, BatchToken};
pub use config::{Arch, Config};
pub use llama::Llama;
pub use runner::Runner;
pub use weights::{LayerWeights, Weights, weight_format_summary};
