//! Fuzz target `list_records`: the properties are in `oai_bridge::fuzzing::check_list_records`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| oai_bridge::fuzzing::check_list_records(data));
