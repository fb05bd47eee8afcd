//! Writes the golden index of the current segment format version into
//! `tests/data/golden-vN/` (N = `SEGMENT_VERSION`; run only when a new format
//! version is created; the test `tests/golden_index.rs` keeps every
//! checked-in one opening and answering identically forever). The documents
//! and the steps are the same for every version (`tests/common/golden.rs`).
//!
//! Run: `cargo run --example write_golden_index`
use neardex::store::{Index, SEGMENT_VERSION};
use neardex::SignatureConfig;

#[path = "../tests/common/golden.rs"]
mod golden;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/golden-v{SEGMENT_VERSION}"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let index = Index::create_with(&dir, SignatureConfig::default(), golden::options())?;
    golden::write(&index)?;
    drop(index);
    std::fs::remove_file(dir.join("LOCK"))?;
    println!("wrote {}", dir.display());
    Ok(())
}
