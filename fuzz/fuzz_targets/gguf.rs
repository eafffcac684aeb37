//! `cargo fuzz run gguf`: see `fuzz/harness.rs` for what one input does and the contract checked.
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::gguf(data));
