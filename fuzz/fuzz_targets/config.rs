//! Fuzz target `config`: the properties are in `oai_bridge::fuzzing::check_config`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| oai_bridge::fuzzing::check_config(data));
