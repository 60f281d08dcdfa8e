//! Fuzz target `platform_rows`: the properties are in `oai_bridge::fuzzing::check_platform_rows`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| oai_bridge::fuzzing::check_platform_rows(data));
