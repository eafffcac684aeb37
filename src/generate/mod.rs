//! Generation on top of the model: sampling, the prefill/decode loop, speculative decoding,
//! perplexity.

pub mod adaptive;
pub mod decode;
pub mod drafter;
pub mod perplexity;
pub mod requests;
pub mod rows;
pub mod sampler;
pub mod scheduler;
pub mod speculative;
pub mod stop;
pub mod verify;

pub use decode::{GenerateOptions, Generation, generate, generate_async, prefill};
pub use drafter::{Draft, Drafter, LookupDrafter, ModelDrafter, NgramDrafter};
pub use perplexity::{Perplexity, perplexity};
pub use scheduler::{Completion, Event, Extras, FinishReason, Request, Scheduler, SchedulerOptions};
pub use speculative::{SpecOptions, SpecStats, generate_speculative, generate_speculative_async};
