//! The model: hyperparameters, weights, batch description, activations, the forward pass, and
//! random-weight models of real shapes (`synth`).

mod activations;
mod batch;
pub mod calibrate;
mod config;
mod llama;
pub mod offload;
pub mod placement;
mod runner;
pub mod synth;
mod weights;

pub use activations::{Activations, TopKOut};
pub use batch::{Batch, BatchToken};
pub use config::{Activation, Arch, Config, LayerAttention};
pub use llama::{Llama, MatmulInput, Observer};
pub use offload::LayerMatrices;
pub use placement::{Footprint, Placement};
pub use runner::{Runner, TopK};
pub use weights::{LayerWeights, Weights, weight_format_summary};
