#![no_main]

#[path = "../simulation.rs"]
mod simulation;

libfuzzer_sys::fuzz_target!(|data: &[u8]| simulation::client::calling(data));
