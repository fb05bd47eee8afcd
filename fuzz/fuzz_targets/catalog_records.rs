#![no_main]
//! Catalog record decoding (document, pending, manifest) on arbitrary bytes.
libfuzzer_sys::fuzz_target!(|data: &[u8]| neardex::fuzz_support::catalog_records(data));
