#![no_main]
//! Operation sequences (insert, replace, delete, commit, abort, flush,
//! merge, reopen) with a crash at any I/O operation, checked against the
//! model and the brute-force oracle.

#[path = "../../tests/common/workload.rs"]
mod workload;

libfuzzer_sys::fuzz_target!(|data: &[u8]| workload::fuzz_ops(data));
