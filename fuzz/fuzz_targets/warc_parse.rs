#![no_main]
//! The WARC reader on arbitrary bytes.
libfuzzer_sys::fuzz_target!(|data: &[u8]| neardex::fuzz_support::warc_parse(data));
