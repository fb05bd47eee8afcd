//! The bodies of the fuzz targets, kept in the library so that `cargo test`
//! replays every seed corpus file through exactly the code the fuzzer runs
//! (`tests/fuzz_corpus.rs`). Not part of the stable API.

use crate::{SignatureConfig, Signer};

/// Arbitrary bytes as an HTML page through the whole signature pipeline:
/// charset decoding, text extraction, tokenising, every scheme, sketches.
/// Checks what must hold for any input; panics (a fuzz finding) otherwise.
pub fn html_text(data: &[u8]) {
    let text = crate::text::html_bytes_to_text(data);
    let tokens = crate::text::Tokens::from_text(&text);
    for token in tokens.iter() {
        assert!(!token.is_empty(), "empty token from {data:?}");
    }
    for config in [SignatureConfig::default(), SignatureConfig::word_shingles(3), SignatureConfig::char_shingles(4)] {
        let signer = Signer::new(config).expect("built-in configurations are valid");
        let signature = signer.sign_html(data);
        assert_eq!(signature.vector, signer.sign_text(&text).vector);
        assert_eq!(signature.band_keys.is_empty(), signature.vector.is_empty());
    }
}

/// Arbitrary bytes as a stored configuration: decoding returns a value or
/// a typed error, and what decodes re-encodes to the same bytes.
pub fn config_decode(data: &[u8]) {
    if let Ok(config) = SignatureConfig::decode(data) {
        assert_eq!(config.encode(), data, "decode/encode is not the identity");
    }
}
