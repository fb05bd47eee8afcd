#![no_main]
//! HTML extraction and the signature pipeline on arbitrary bytes.
libfuzzer_sys::fuzz_target!(|data: &[u8]| neardex::fuzz_support::html_text(data));
