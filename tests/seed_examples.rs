//! The worked examples of the SpotSigs paper and the lecture-note seeds,
//! reproduced exactly.

use neardex::shingles::{char_shingles, word_shingles};
use neardex::similarity::{multiset_jaccard, partition_bounds};
use neardex::sketch::{s_curve, LshParams};
use neardex::text::Tokens;
use neardex::{Scheme, SignatureConfig, SignatureVector, Signer, SpotSigsConfig, SpotSpec, Threshold};

/// §3.2: antecedents a, an, the, is; d = 1, c = 2; exactly seven signatures.
#[test]
fn spotsigs_section_3_2_yields_its_seven_signatures() {
    let sentence = "At a rally to kick off a weeklong campaign for the South Carolina primary, Obama tried to set \
                    the record straight from an attack circulating widely on the Internet that is designed to play \
                    into prejudices against Muslims and fears of terrorism.";
    let spec = SpotSpec { antecedents: ["a", "an", "the", "is"].map(String::from).to_vec(), distance: 1, chain: 2 };
    let config = SignatureConfig {
        scheme: Scheme::SpotSigs(SpotSigsConfig { specs: vec![spec], ..SpotSigsConfig::default() }),
        ..SignatureConfig::default()
    };
    let signer = Signer::new(config).unwrap();
    let mut got: Vec<String> = signer.explain(sentence).into_iter().map(|s| s.text).collect();
    let mut expected = vec![
        "a:rally:kick",
        "a:weeklong:campaign",
        "the:south:carolina",
        "the:record:straight",
        "an:attack:circulating",
        "the:internet:designed",
        "is:designed:play",
    ];
    // The paper lists them as a set; document order is the same here.
    assert_eq!(got, expected);
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    assert_eq!(signer.sign_text(sentence).vector.total(), 7);
}

/// §3.2's last remark: a stock table (Figure 2) yields no signatures at all.
#[test]
fn spotsigs_skip_pages_without_prose() {
    let signer = Signer::new(SignatureConfig::default()).unwrap();
    let table = "NASDAQ 2,345.67 +12.3 DOW 12,800.10 -45.2 S&P 1,402.55 +3.1 Volume 1.2B";
    assert!(signer.sign_text(table).vector.is_empty());
}

/// Seeds 000 and 004: the 4-shingling of "My name is Inigo Montoya...".
#[test]
fn word_4_shingles_of_inigo_montoya() {
    let tokens = Tokens::from_text("My name is Inigo Montoya. You killed my father. Prepare to die");
    assert_eq!(
        word_shingles(&tokens, 4),
        [
            "my name is inigo",
            "name is inigo montoya",
            "is inigo montoya you",
            "inigo montoya you killed",
            "montoya you killed my",
            "you killed my father",
            "killed my father prepare",
            "my father prepare to",
            "father prepare to die",
        ]
    );
}

/// Seed 003: the 4-shingling of "to be or not to be, that is the question",
/// with the duplicate removed for the set.
#[test]
fn word_4_shingles_of_hamlet_as_a_set() {
    let tokens = Tokens::from_text("to be or not to be, that is the question");
    let multiset = word_shingles(&tokens, 4);
    assert_eq!(multiset.len(), 7);
    let mut set = multiset.clone();
    set.sort();
    set.dedup();
    assert_eq!(set.len(), 7, "no 4-shingle repeats in this sentence");
    assert_eq!(multiset[6], "that is the question");
}

/// Seed 004: D1 = abcab, k = 2: the set {ab, bc, ca}; the bag counts ab twice.
#[test]
fn char_2_shingles_of_abcab_as_set_and_multiset() {
    let bag = char_shingles("abcab", 2);
    assert_eq!(bag, ["ab", "bc", "ca", "ab"]);
    let signer = Signer::new(SignatureConfig::char_shingles(2)).unwrap();
    let v = signer.sign_text("abcab").vector;
    assert_eq!((v.distinct(), v.total()), (3, 4));
    assert_eq!(v.to_set().total(), 3);
    let ab = signer.explain("abcab").into_iter().find(|s| s.text == "ab").unwrap().hash;
    assert_eq!(v.freq(ab), 2);
}

/// Seed 004: the C1/C2 bit-vector example, Jaccard = 3/4.
#[test]
fn jaccard_of_the_bit_vector_example() {
    let c1 = SignatureVector::from_hashes(vec![1, 3, 4, 5]); // 10111
    let c2 = SignatureVector::from_hashes(vec![1, 4, 5]); // 10011
    let sim = neardex::similarity::set_jaccard(&c1, &c2);
    assert_eq!((sim.num, sim.den), (3, 4));
}

/// §4.3.2: d1 = {s1:5, s2:4, s3:4}, d3 = {s1:4, s2:5, s3:5}, τ = 0.8: the
/// similarity is exactly 12/15 = 0.8 and the pair is a match.
#[test]
fn deduplication_example_of_section_4_3_2() {
    let d1 = SignatureVector::from_pairs([(1, 5), (2, 4), (3, 4)]);
    let d2 = SignatureVector::from_pairs([(1, 8), (2, 4)]);
    let d3 = SignatureVector::from_pairs([(1, 4), (2, 5), (3, 5)]);
    assert_eq!((d1.total(), d2.total(), d3.total()), (13, 12, 14));
    let sim = multiset_jaccard(&d1, &d3);
    assert_eq!((sim.num, sim.den), (12, 15));
    assert_eq!(sim.value(), 0.8);
    assert!(sim.meets(Threshold::new(0.8).unwrap()));
    // In f64, 12.0/15.0 >= 0.8 happens to hold, but 0.8 is not 4/5: the
    // decision must not depend on such luck. 0.7 + 0.1 > 0.8 in f64.
    assert!(sim.meets(Threshold::new(0.7 + 0.1).unwrap()));
    assert!(!sim.meets(Threshold::new(0.800_000_001).unwrap()));
}

/// Seed 004's table for b = 20, r = 5.
#[test]
fn s_curve_table_for_20_bands_of_5_rows() {
    let table = [(0.2, 0.006), (0.3, 0.047), (0.4, 0.186), (0.5, 0.470), (0.6, 0.802), (0.7, 0.975)];
    for (s, p) in table {
        let got = s_curve(s, 20, 5);
        assert!((got - p).abs() < 0.0005, "s = {s}: {got} vs table {p}");
    }
    let got = s_curve(0.8, 20, 5);
    assert!((got - 0.9996).abs() < 0.00005, "s = 0.8: {got} vs table .9996");
    // The slide's own arithmetic: 0.8^5 = 0.328 and (1 - 0.328)^20 = 0.00035.
    assert!((0.8f64.powi(5) - 0.328).abs() < 0.0005);
    assert!(((1.0 - 0.8f64.powi(5)).powi(20) - 0.00035).abs() < 0.00001);
}

/// The optimiser puts the S-curve's steep part at τ and never spends more
/// permutations than allowed.
#[test]
fn optimal_banding_centres_the_s_curve_on_tau() {
    for tau in [0.3, 0.5, 0.8, 0.9] {
        let p = LshParams::optimal(tau, 128, 0.5, 0.5).unwrap();
        assert!(p.permutations() <= 128);
        let knee = (1.0 / f64::from(p.bands)).powf(1.0 / f64::from(p.rows));
        assert!((knee - tau).abs() < 0.12, "τ = {tau}: b = {}, r = {}, knee {knee}", p.bands, p.rows);
        assert!(p.probability(tau + 0.1) > p.probability(tau - 0.1));
    }
    // Weighting false negatives more lowers the knee: more pairs become candidates.
    let recall_first = LshParams::optimal(0.8, 128, 0.1, 0.9).unwrap();
    let balanced = LshParams::optimal(0.8, 128, 0.5, 0.5).unwrap();
    assert!(recall_first.probability(0.7) > balanced.probability(0.7));
    assert!(LshParams::optimal(0.0, 128, 0.5, 0.5).is_err());
    assert!(LshParams::optimal(0.8, 0, 0.5, 0.5).is_err());
    assert!(LshParams::optimal(0.8, 128, 0.0, 0.0).is_err());
}

/// A recall target: the banding reaches it at τ, and no other banding
/// within the budget that reaches it has less area under its S-curve below
/// τ (brute force over every (b, r), its own integration).
#[test]
fn recall_banding_reaches_the_recall_with_the_fewest_false_candidates() {
    let area_below = |p: LshParams, tau: f64| {
        let n = 2000;
        (0..n).map(|i| p.probability((f64::from(i) + 0.5) * tau / f64::from(n))).sum::<f64>() * tau / f64::from(n)
    };
    for (tau, recall, max) in [(0.8, 0.99, 128), (0.8, 0.999, 128), (0.5, 0.95, 64), (0.9, 0.9, 200), (0.3, 0.5, 16)] {
        let chosen = LshParams::for_recall(tau, recall, max).unwrap();
        assert!(chosen.permutations() <= max);
        assert!(chosen.probability(tau) >= recall, "τ {tau}: {chosen:?} at {}", chosen.probability(tau));
        let fewest = area_below(chosen, tau);
        for bands in 1..=max {
            for rows in 1..=max / bands {
                let other = LshParams { bands, rows };
                if other.probability(tau) >= recall {
                    assert!(
                        area_below(other, tau) >= fewest - 1e-6,
                        "τ {tau}, recall {recall}: {other:?} beats {chosen:?}"
                    );
                }
            }
        }
    }
    // The documented example, and more recall than the balanced default.
    let strict = LshParams::for_recall(0.8, 0.99, 128).unwrap();
    assert_eq!(strict, LshParams { bands: 16, rows: 6 });
    assert!(strict.probability(0.8) > neardex::MinHashConfig::default().lsh().probability(0.8));
    assert_eq!(
        neardex::MinHashConfig::for_recall(0.8, 0.99, 128).unwrap(),
        neardex::MinHashConfig { permutations: 96, bands: 16, rows: 6 }
    );
    // Out of (0, 1), or out of reach within the budget: a typed error.
    for recall in [0.0, 1.0, 1.5, -0.1, f64::NAN] {
        let err = LshParams::for_recall(0.8, recall, 128).unwrap_err();
        assert!(matches!(err, neardex::ConfigError::LshRecall { .. }), "{recall}: {err:?}");
        assert!(err.to_string().contains("not in (0, 1)"), "{err}");
    }
    // Four values at most: one row a band, 1 − 0.2⁴ = 0.9984 < 0.999.
    let err = LshParams::for_recall(0.8, 0.999, 4).unwrap_err();
    assert!(err.to_string().contains("no banding of at most 4"), "{err}");
    assert!(LshParams::for_recall(0.0, 0.9, 128).is_err());
    assert!(LshParams::for_recall(0.8, 0.9, 0).is_err());
}

/// The default banding is what the optimiser picks for τ = 0.8, P ≤ 128.
#[test]
fn default_banding_is_the_optimum_for_0_8() {
    use neardex::MinHashConfig;
    assert_eq!((MinHashConfig::DEFAULT_LSH_THRESHOLD, MinHashConfig::DEFAULT_LSH_BUDGET), (0.8, 128));
    let best =
        MinHashConfig::for_threshold(MinHashConfig::DEFAULT_LSH_THRESHOLD, MinHashConfig::DEFAULT_LSH_BUDGET).unwrap();
    assert_eq!(neardex::MinHashConfig::default(), best);
}

/// §4.2: the partition boundaries are a function of τ alone, and in exact
/// integers both of the paper's conditions hold for every pair of lengths.
#[test]
fn partitions_satisfy_conditions_a_and_b() {
    for tau in [1.0, 0.95, 0.9, 0.8, 0.5, 0.44, 0.1] {
        let t = Threshold::new(tau).unwrap();
        let rho = 600;
        let bounds = partition_bounds(t, rho);
        assert_eq!(bounds[0], 1);
        assert!(bounds.windows(2).all(|w| w[0] < w[1]));
        let part = |len: u64| neardex::similarity::partition_of(&bounds, len);
        for small in 1..=rho {
            for large in small..=rho {
                let reaches = neardex::similarity::length_bound(small, large).meets(t);
                let (ps, pl) = (part(small), part(large));
                if reaches {
                    assert!(pl <= ps + 1, "A: τ {tau}, {small} in {ps} and {large} in {pl}");
                }
                if ps == pl && large < *bounds.last().unwrap() {
                    assert!(reaches, "B: τ {tau}, {small} and {large} share partition {ps}");
                }
            }
        }
    }
}

/// The paper reports 501 partitions for τ = 1.0, 41 for 0.9 and 3 for 0.1 at
/// ρ = 1,000, but its own recurrence (p(k+1) − p(k) > (1 − τ)·p(k+1)) gives
/// other counts: at τ = 1 every length is its own partition. We implement
/// the recurrence; this test pins what it gives so the difference stays
/// visible.
#[test]
fn partition_counts_of_the_recurrence_at_rho_1000() {
    let count = |tau: f64| partition_bounds(Threshold::new(tau).unwrap(), 1000).len();
    assert_eq!(count(1.0), 1000);
    assert_eq!(count(0.1), 3);
    assert_eq!(count(0.9), 49);
}
