//! Writes the valid configuration encodings into the `config_decode` fuzz
//! seed corpus (run after a deliberate format change).
//!
//! Run: `cargo run --example write_config_seeds`
fn main() -> std::io::Result<()> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/config_decode");
    for (name, config) in [
        ("default.bin", neardex::SignatureConfig::default()),
        ("words3.bin", neardex::SignatureConfig::word_shingles(3)),
        ("chars5.bin", neardex::SignatureConfig::char_shingles(5)),
        (
            "fallback-words3.bin",
            neardex::SignatureConfig {
                fallback: Some(neardex::Scheme::WordShingles { k: 3 }),
                ..neardex::SignatureConfig::default()
            },
        ),
    ] {
        std::fs::write(dir.join(name), config.encode())?;
    }
    Ok(())
}
