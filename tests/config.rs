//! SignatureConfig: validation names every bad parameter; the encoding round
//! trips and rejects every corruption with a typed error, never a panic.

use neardex::{
    ConfigDecodeError, ConfigError, FrequencyFilter, MinHashConfig, Scheme, SignatureConfig, SignatureVector, Signer,
    Similarity, SpotSigsConfig, SpotSpec, Threshold,
};
use proptest::prelude::*;

fn spot(specs: Vec<SpotSpec>, stopwords: &[&str]) -> SignatureConfig {
    SignatureConfig {
        scheme: Scheme::SpotSigs(SpotSigsConfig {
            specs,
            stopwords: stopwords.iter().map(|s| s.to_string()).collect(),
        }),
        ..SignatureConfig::default()
    }
}

fn spec(antecedents: &[&str], distance: u32, chain: u32) -> SpotSpec {
    SpotSpec { antecedents: antecedents.iter().map(|s| s.to_string()).collect(), distance, chain }
}

#[test]
fn every_invalid_parameter_has_its_error() {
    let out_of_range = |c: SignatureConfig, name: &str| match c.validate() {
        Err(ConfigError::OutOfRange { parameter, .. }) => assert_eq!(parameter, name),
        other => panic!("{name}: {other:?}"),
    };
    out_of_range(spot(vec![spec(&["the"], 0, 2)], &[]), "spot distance d");
    out_of_range(spot(vec![spec(&["the"], 1, 0)], &[]), "chain length c");
    out_of_range(spot(vec![spec(&["the"], 65, 1)], &[]), "spot distance d");
    out_of_range(SignatureConfig::word_shingles(0), "word shingle size k");
    out_of_range(SignatureConfig::char_shingles(0), "character shingle size k");
    assert_eq!(spot(vec![], &[]).validate(), Err(ConfigError::NoSpotSpecs));
    assert_eq!(spot(vec![spec(&[], 1, 1)], &[]).validate(), Err(ConfigError::EmptyAntecedents { spec: 0 }));
    assert!(matches!(spot(vec![spec(&["The"], 1, 1)], &[]).validate(), Err(ConfigError::InvalidWord { .. })));
    assert!(matches!(spot(vec![spec(&["two words"], 1, 1)], &[]).validate(), Err(ConfigError::InvalidWord { .. })));
    assert!(matches!(spot(vec![spec(&["a"], 1, 1)], &["of", ""]).validate(), Err(ConfigError::InvalidWord { .. })));
    assert!(matches!(spot(vec![spec(&["a", "a"], 1, 1)], &[]).validate(), Err(ConfigError::DuplicateWord { .. })));
    let many = (0..64).map(|_| spec(&["a"], 1, 1)).collect();
    assert!(matches!(spot(many, &[]).validate(), Err(ConfigError::TooManySpotSpecs { count: 64, max: 63 })));
    let banding = |permutations, bands, rows| SignatureConfig {
        minhash: MinHashConfig { permutations, bands, rows },
        ..SignatureConfig::default()
    };
    assert!(matches!(banding(128, 20, 5).validate(), Err(ConfigError::Banding { .. })));
    assert!(matches!(banding(100, 0, 5).validate(), Err(ConfigError::Banding { .. })));
    assert!(matches!(banding(0, 0, 0).validate(), Err(ConfigError::OutOfRange { .. })));
    assert!(banding(100, 20, 5).validate().is_ok());
    for tau in [0.0, -0.5, 1.000_001, f64::NAN, f64::INFINITY, 1e-12] {
        assert!(matches!(Threshold::new(tau), Err(ConfigError::Threshold { .. })), "{tau}");
    }
    assert!(Signer::new(SignatureConfig::word_shingles(0)).is_err());
    // Errors say what to do.
    let message = banding(128, 20, 5).validate().unwrap_err().to_string();
    assert!(message.contains("bands x rows must equal"), "{message}");
}

#[test]
fn unicode_words_are_valid_antecedents() {
    assert!(spot(vec![spec(&["der", "die", "das", "été"], 1, 2)], &["und"]).validate().is_ok());
}

#[test]
fn every_corruption_of_the_encoding_is_a_typed_error() {
    let with_fallback = SignatureConfig { fallback: Some(Scheme::CharShingles { k: 5 }), ..SignatureConfig::default() };
    for config in [SignatureConfig::default(), with_fallback] {
        let bytes = config.encode();
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let result = SignatureConfig::decode(&flipped);
            assert!(result.is_err(), "bit {bit} flipped went unnoticed");
        }
        for len in 0..bytes.len() {
            assert!(SignatureConfig::decode(&bytes[..len]).is_err(), "truncated to {len}");
        }
    }
    let bytes = SignatureConfig::default().encode();
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(SignatureConfig::decode(&longer).is_err());
    let mut other_version = bytes.clone();
    other_version[4] = 9;
    assert_eq!(
        SignatureConfig::decode(&other_version),
        Err(ConfigDecodeError::Incompatible { found: 9, supported: 1..=3 })
    );
    assert!(matches!(SignatureConfig::decode(b"NOPE...."), Err(ConfigDecodeError::BadMagic { .. })));
}

#[test]
fn a_config_without_a_filter_still_encodes_as_version_1_and_one_with_a_filter_as_version_2() {
    let plain = SignatureConfig::default().encode();
    assert_eq!(&plain[4..6], &[1, 0]);
    let filtered =
        SignatureConfig { frequency_filter: FrequencyFilter::new([9, 3, 3, 7]), ..SignatureConfig::default() };
    let bytes = filtered.encode();
    assert_eq!(&bytes[4..6], &[2, 0]);
    assert_eq!(bytes.len(), plain.len() + 4 + 3 * 8, "count and three distinct hashes");
    let decoded = SignatureConfig::decode(&bytes).expect("round trip");
    assert_eq!(decoded.frequency_filter.hashes(), &[3, 7, 9]);
    // The encoding is canonical: hashes out of order are rejected (CRC fixed up).
    let mut swapped = bytes.clone();
    let at = plain.len() - 4 + 4;
    swapped[at..at + 16].rotate_left(8);
    let body = swapped.len() - 4;
    let crc = crc32fast::hash(&swapped[..body]);
    swapped[body..].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        SignatureConfig::decode(&swapped),
        Err(ConfigDecodeError::Invalid(ConfigError::FilterOrder { position: 1 }))
    );
}

#[test]
fn a_fallback_encodes_as_version_3_with_or_without_a_filter() {
    let plain = SignatureConfig::default().encode();
    let fallback = SignatureConfig { fallback: Some(Scheme::WordShingles { k: 3 }), ..SignatureConfig::default() };
    let bytes = fallback.encode();
    assert_eq!(&bytes[4..6], &[3, 0]);
    assert_eq!(bytes.len(), plain.len() + 4 + 1 + 4, "an empty filter's count, the fallback's code and k");
    assert_eq!(SignatureConfig::decode(&bytes), Ok(fallback.clone()));
    let both = SignatureConfig { frequency_filter: FrequencyFilter::new([5, 1]), ..fallback };
    let bytes = both.encode();
    assert_eq!((&bytes[4..6], bytes.len()), (&[3u8, 0][..], plain.len() + 4 + 2 * 8 + 5));
    assert_eq!(SignatureConfig::decode(&bytes), Ok(both));
    // SpotSigs is no fallback: refused by validation, and as a code.
    let spot = SignatureConfig { fallback: Some(SignatureConfig::default().scheme), ..SignatureConfig::default() };
    assert_eq!(spot.validate(), Err(ConfigError::FallbackScheme));
    assert!(Signer::new(spot.clone()).is_err());
    assert_eq!(
        SignatureConfig::decode(&spot.encode()),
        Err(ConfigDecodeError::UnknownCode { field: "fallback scheme", code: 1 })
    );
    let zero = SignatureConfig { fallback: Some(Scheme::CharShingles { k: 0 }), ..SignatureConfig::default() };
    assert!(matches!(zero.validate(), Err(ConfigError::OutOfRange { .. })));
}

#[test]
fn the_fallback_signs_exactly_what_the_scheme_finds_nothing_in() {
    let english = "The city council voted on Tuesday to approve a plan for a new library, and the debate was long.";
    let japanese = "東京都は月曜日に新しい図書館の計画を承認した。議論は三年以上続いていた。";
    let spot = Signer::new(SignatureConfig::default()).unwrap();
    let words = Signer::new(SignatureConfig::word_shingles(3)).unwrap();
    let config = SignatureConfig { fallback: Some(Scheme::WordShingles { k: 3 }), ..SignatureConfig::default() };
    let both = Signer::new(config.clone()).unwrap();
    assert!(!spot.sign_text(english).vector.is_empty());
    assert_eq!(both.sign_text(english), spot.sign_text(english), "a text with signatures is signed as before");
    assert!(spot.sign_text(japanese).vector.is_empty(), "no English antecedents");
    let fell_back = both.sign_text(japanese);
    assert!(!fell_back.vector.is_empty());
    assert_eq!(fell_back.vector, words.sign_text(japanese).vector, "the fallback's own signatures");
    assert_eq!(fell_back.fingerprint, spot.sign_text(japanese).fingerprint);
    assert_eq!(both.explain(japanese), words.explain(japanese));
    let html = format!("<html><body><p>{japanese}</p></body></html>");
    assert_eq!(both.sign_html(html.as_bytes()).vector, fell_back.vector);
    let mut hashes = Vec::new();
    both.signature_hashes(japanese, &mut neardex::Scratch::default(), &mut hashes);
    assert_eq!(SignatureVector::from_hashes(hashes), fell_back.vector);
    // A character-shingle fallback reads the joined tokens, which only
    // character shingles need.
    let hashes_of = |config: SignatureConfig| {
        let mut hashes = Vec::new();
        Signer::new(config).unwrap().signature_hashes(japanese, &mut neardex::Scratch::default(), &mut hashes);
        hashes
    };
    let chars = SignatureConfig { fallback: Some(Scheme::CharShingles { k: 4 }), ..SignatureConfig::default() };
    let expected = hashes_of(SignatureConfig::char_shingles(4));
    assert!(!expected.is_empty());
    assert_eq!(hashes_of(chars), expected);
    // The frequency filter applies to the fallback's signatures too.
    let dropped = fell_back.vector.hashes()[0];
    let filtered =
        Signer::new(SignatureConfig { frequency_filter: FrequencyFilter::new([dropped]), ..config }).unwrap();
    let vector = filtered.sign_text(japanese).vector;
    assert_eq!((vector.distinct(), vector.hashes().contains(&dropped)), (fell_back.vector.distinct() - 1, false));
}

#[test]
fn the_frequency_filter_drops_its_signatures_from_every_document() {
    let text = "the cat is on the mat and the dog is in the house, the end was near and the night was long";
    let plain = Signer::new(SignatureConfig::default()).unwrap().sign_text(text);
    assert!(plain.vector.distinct() >= 3, "enough signatures to drop some");
    let dropped: Vec<u64> = plain.vector.hashes().iter().copied().step_by(2).collect();
    let filtered_config =
        SignatureConfig { frequency_filter: FrequencyFilter::new(dropped.clone()), ..SignatureConfig::default() };
    let signer = Signer::new(filtered_config).unwrap();
    let filtered = signer.sign_text(text);
    let expected: Vec<(u64, u32)> = plain.vector.iter().filter(|(h, _)| !dropped.contains(h)).collect();
    assert_eq!(filtered.vector.iter().collect::<Vec<_>>(), expected);
    assert!(signer.explain(text).iter().all(|s| !dropped.contains(&s.hash)));
    assert_eq!(filtered.fingerprint, plain.fingerprint, "the fingerprint is of the text, not of the signatures");
}

#[test]
fn a_learned_filter_drops_what_more_than_the_given_share_of_the_sample_holds() {
    let vectors: Vec<SignatureVector> = (0..100u64)
        .map(|i| {
            // hash 1 in every document, hash 2 in 3 of them, hash 1000+i in one.
            let mut h = vec![1, 1000 + i];
            if i < 3 {
                h.push(2);
            }
            SignatureVector::from_hashes(h)
        })
        .collect();
    assert_eq!(FrequencyFilter::learn(&vectors, 0.01).hashes(), &[1, 2]);
    assert_eq!(FrequencyFilter::learn(&vectors, 0.05).hashes(), &[1]);
    assert!(FrequencyFilter::learn(&vectors, 1.0).is_empty());
}

#[test]
fn a_well_formed_encoding_of_an_invalid_config_is_rejected() {
    let bad = SignatureConfig::word_shingles(0).encode();
    assert!(matches!(SignatureConfig::decode(&bad), Err(ConfigDecodeError::Invalid(_))));
}

fn arb_word() -> impl Strategy<Value = String> {
    "[a-zà-öø-ÿ0-9]{1,8}"
}

fn arb_config() -> impl Strategy<Value = SignatureConfig> {
    let spec = (prop::collection::hash_set(arb_word(), 1..6), 1u32..=8, 1u32..=8)
        .prop_map(|(a, distance, chain)| SpotSpec { antecedents: a.into_iter().collect(), distance, chain });
    let scheme = prop_oneof![
        (prop::collection::vec(spec, 1..4), prop::collection::hash_set(arb_word(), 0..20)).prop_map(|(specs, stop)| {
            Scheme::SpotSigs(SpotSigsConfig { specs, stopwords: stop.into_iter().collect() })
        }),
        (1u32..=64).prop_map(|k| Scheme::WordShingles { k }),
        (1u32..=64).prop_map(|k| Scheme::CharShingles { k }),
    ];
    let similarity =
        prop_oneof![Just(Similarity::MultisetJaccard), Just(Similarity::SetJaccard), Just(Similarity::Containment)];
    let filter = prop_oneof![Just(Vec::new()), prop::collection::vec(any::<u64>(), 1..40)];
    let fallback = prop_oneof![
        Just(None),
        (1u32..=64).prop_map(|k| Some(Scheme::WordShingles { k })),
        (1u32..=64).prop_map(|k| Some(Scheme::CharShingles { k })),
    ];
    (scheme, similarity, any::<u64>(), 1u32..=32, 1u32..=16, filter, fallback).prop_map(
        |(scheme, similarity, hash_seed, bands, rows, filter, fallback)| SignatureConfig {
            scheme,
            similarity,
            hash_seed,
            minhash: MinHashConfig { permutations: bands * rows, bands, rows },
            frequency_filter: FrequencyFilter::new(filter),
            fallback,
        },
    )
}

proptest! {
    #[test]
    fn encoding_round_trips(config in arb_config()) {
        prop_assert!(config.validate().is_ok());
        let bytes = config.encode();
        prop_assert_eq!(SignatureConfig::decode(&bytes), Ok(config));
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200), valid_prefix in any::<bool>()) {
        let mut input = if valid_prefix { b"NDXC\x01\x00".to_vec() } else { Vec::new() };
        input.extend(bytes);
        let _ = SignatureConfig::decode(&input);
    }
}
