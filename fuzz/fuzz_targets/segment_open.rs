#![no_main]
//! Segment parsing, verification and reads on arbitrary bytes.
libfuzzer_sys::fuzz_target!(|data: &[u8]| neardex::fuzz_support::segment_open(data));
