//! Fuzz target `classify`: the properties are in `oai_bridge::fuzzing::check_classify`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| oai_bridge::fuzzing::check_classify(data));
