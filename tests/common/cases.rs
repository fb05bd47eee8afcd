//! The property tests' configuration (a module of its own: `mod.rs` is
//! also compiled into the benchmarks and the comparison harness, which
//! have no proptest).

/// proptest's configuration for a property test: `default` cases, or
/// `PROPTEST_CASES` when set (longer local runs set it).
pub fn proptest_cases(default: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    proptest::test_runner::Config { cases, ..proptest::test_runner::Config::default() }
}
