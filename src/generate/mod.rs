//! Generation on top of the model: sampling, the prefill/decode loop, perplexity.

pub mod decode;
pub mod perplexity;
pub mod sampler;

pub use decode::{GenerateOptions, Generation, generate, prefill};
pub use perplexity::{Perplexity, perplexity};
