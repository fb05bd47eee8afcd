#![no_main]
//! Stored-configuration decoding on arbitrary bytes.
libfuzzer_sys::fuzz_target!(|data: &[u8]| neardex::fuzz_support::config_decode(data));
