//! Sketches of a document's signature set: MinHash with LSH banding (the
//! index's candidate generator), and the seeds' other sketches (bottom-k,
//! mod-n sampling, super-shingles, SimHash), each with its estimator.
//!
//! Every sketch applies its own seeded permutation of the 64-bit hash space
//! (XXH3-64 of the signature hash's little-endian bytes, under a seed
//! derived from the configuration seed and the sketch's name), so sketches
//! never share randomness with each other or with the signature hashes.

mod bottomk;
mod lsh;
mod minhash;
mod modn;
mod simhash;

pub use bottomk::BottomK;
pub use lsh::{band_keys, s_curve, LshParams, SuperShingles};
pub use minhash::{MinHashSketch, MinHasher, EMPTY_BIN};
pub use modn::ModSample;
pub use simhash::SimHash;
