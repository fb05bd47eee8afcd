//! Golden vectors. Signature hashes, fingerprints, MinHash values, band keys
//! and the configuration encoding are stored on disk: a change to any of
//! them makes every existing index wrong. These tests pin them; if one
//! fails, the change is a format change (FORMAT.md, "Version log"), never a
//! test to update casually.

use neardex::hash::hash_bytes;
use neardex::sketch::{band_keys, BottomK, LshParams, MinHasher, SimHash};
use neardex::{SignatureConfig, Signer, DEFAULT_HASH_SEED};

#[test]
fn xxh3_matches_the_reference_implementation() {
    // The published XXH3-64 of the empty input with seed 0.
    assert_eq!(xxhash_rust::xxh3::xxh3_64(b""), 0x2d06_8005_38d3_94c2);
    assert_eq!(DEFAULT_HASH_SEED, 0x6e65_6172_6465_7831); // "neardex1"
    assert_eq!(hash_bytes(b"a:rally:kick", DEFAULT_HASH_SEED), 0xefc1_1d30_f425_6d89);
}

#[test]
fn spot_signature_hashes() {
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    let got: Vec<(String, u64)> = signer
        .explain("The senator has said that the bill would be signed by the governor on Monday.")
        .into_iter()
        .map(|s| (s.text, s.hash))
        .collect();
    let expected = [
        ("the:said:bill:signed", 0xffb9_bdc8_4b16_5aab),
        ("has:bill:signed:governor", 0x0e31_c89d_4294_63a8),
        ("the:signed:governor:monday", 0x0189_3fef_7462_02db),
        ("would:signed:governor:monday", 0x2bf6_afd9_9b8e_d358),
        ("be:governor:monday", 0xeaef_31a5_78e1_0ccb),
        ("the:monday", 0x8de5_cac1_98ff_dbd6),
    ];
    let expected: Vec<(String, u64)> = expected.iter().map(|&(t, h)| (t.to_owned(), h)).collect();
    assert_eq!(got, expected);
    // explain and the hot path agree.
    let vector =
        signer.sign_text("The senator has said that the bill would be signed by the governor on Monday.").vector;
    let mut hashes: Vec<u64> = expected.iter().map(|&(_, h)| h).collect();
    hashes.sort_unstable();
    assert_eq!(vector.hashes(), hashes.as_slice());
}

#[test]
fn shingle_hashes() {
    let words = Signer::new(SignatureConfig::word_shingles(4)).unwrap();
    let first = &words.explain("My name is Inigo Montoya")[0];
    assert_eq!((first.text.as_str(), first.hash), ("my name is inigo", 0xc59e_761c_4832_6b58));
    let chars = Signer::new(SignatureConfig::char_shingles(2)).unwrap();
    let got: Vec<u64> = chars.explain("abc").into_iter().map(|s| s.hash).collect();
    assert_eq!(got, [0xf9f8_254a_c0a8_d0cb, 0xc4c5_2058_fdda_4d21]);
}

#[test]
fn fingerprint() {
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    let fp = signer.sign_text("Hello, World!").fingerprint;
    assert_eq!(fp.to_string(), "361df24b7765e778c5956728688af80e");
    // Markup, case and white space do not change it.
    assert_eq!(signer.sign_html(b"<p>hello</p>\n<p>  world</p>").fingerprint, fp);
}

#[test]
fn minhash_values_and_band_keys() {
    let set: Vec<u64> = (1..=10).collect();
    let sketch = MinHasher::new(117, DEFAULT_HASH_SEED).sketch(&set);
    assert_eq!(
        &sketch.values()[..8],
        [2387014099, 2401304590, 3606992572, 3021212996, 2387014099, 2921714304, 1861501305, 4193676680]
    );
    let keys = band_keys(&sketch, LshParams { bands: 9, rows: 13 }, DEFAULT_HASH_SEED);
    assert_eq!(keys.len(), 9);
    assert_eq!(&keys[..3], [0x1aa6_633e_275d_4a2f, 0x2a5d_8e25_3193_6ab3, 0xd772_1c75_1031_fa8d]);
}

#[test]
fn other_sketches() {
    let set: Vec<u64> = (1..=10).collect();
    assert_eq!(SimHash::new([(1, 1), (2, 3), (3, 1)], DEFAULT_HASH_SEED).0, 0xaec2_5b57_c61c_2778);
    assert_eq!(
        BottomK::new(&set, 3, DEFAULT_HASH_SEED).values(),
        [0x2e81_9abc_2007_d954, 0x40e7_776f_4464_2fca, 0x4b8a_b934_7cb6_5f3d]
    );
}

#[test]
fn configuration_encoding() {
    let hex: String = SignatureConfig::word_shingles(3).encode().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, "4e44584301000201317865647261656e75000000090000000d00000003000000c3306587");
    // The CRC32 an encoding stores in its last four bytes (the CRC32 of a
    // whole encoding, stored CRC included, is the constant 0x2144df1c for
    // every valid one, so that pins nothing).
    let stored_crc = |bytes: &[u8]| u32::from_le_bytes(bytes[bytes.len() - 4..].try_into().unwrap());
    let default = SignatureConfig::default().encode();
    assert_eq!((default.len(), stored_crc(&default)), (1359, 0x08c9_9744));
    // Version 3: the default with a word-3-shingle fallback, whose last 9
    // bytes before the CRC are an empty filter's count, code 2 and k = 3.
    let fallback =
        SignatureConfig { fallback: Some(neardex::Scheme::WordShingles { k: 3 }), ..SignatureConfig::default() };
    let bytes = fallback.encode();
    let tail: String = bytes[bytes.len() - 13..].iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!((bytes.len(), &tail[..18], stored_crc(&bytes)), (1368, "000000000203000000", 0x4720_b926));
}
