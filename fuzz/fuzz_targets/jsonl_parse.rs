#![no_main]
//! JSON Lines parsing on arbitrary bytes.
libfuzzer_sys::fuzz_target!(|data: &[u8]| neardex::fuzz_support::jsonl_parse(data));
