//! `cargo fuzz run safetensors`: see `fuzz/harness.rs` for what one input does and the contract checked.
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::safetensors(data));
