//! The benchmark corpus generator (`tests/common/webcorpus.rs`): pages are
//! a pure function of pool, seed and number; copies come from earlier
//! pages and stay near-duplicates of them.

mod common;

use common::webcorpus::{origin, root, Corpus};
use neardex::{SignatureConfig, Signer, Similarity};

fn pool() -> Vec<String> {
    (0..400)
        .map(|i| {
            format!("The committee number {i} has said that the report of the year was late and it was read again.")
        })
        .collect()
}

#[test]
fn pages_are_deterministic_and_copies_point_back() {
    let a = Corpus::from_sentences(pool(), 7);
    let b = Corpus::from_sentences(pool(), 7);
    let c = Corpus::from_sentences(pool(), 8);
    assert_eq!(a.digest(), b.digest());
    assert_ne!(a.digest(), c.digest());
    let mut copies = 0;
    for n in 0..500 {
        assert_eq!(a.page(n), b.page(n));
        if let Some(m) = origin(7, n) {
            assert!(m < n);
            copies += 1;
        }
        assert!(root(7, n) <= n);
    }
    assert!((100..200).contains(&copies), "about 30% copies, got {copies}");
    assert_ne!(a.page(1), c.page(1));
}

#[test]
fn copies_are_near_duplicates_of_their_root_and_others_are_not() {
    let corpus = Corpus::from_sentences(pool(), 7);
    let signer = Signer::new(SignatureConfig::word_shingles(3)).unwrap();
    let sign = |n: u64| {
        let text: Vec<String> = corpus.paragraphs(n).iter().map(|p| p.join(" ")).collect();
        signer.sign_text(&text.join("\n")).vector
    };
    let (mut close, mut copies) = (0, 0);
    for n in 1..300 {
        let r = root(7, n);
        let sim = Similarity::SetJaccard.overlap(&sign(n), &sign(r)).value();
        if r != n {
            copies += 1;
            close += usize::from(sim >= 0.5);
        } else {
            let other = Similarity::SetJaccard.overlap(&sign(n), &sign(n - 1)).value();
            assert!(other < 0.5, "fresh pages {n} and {} are {other:.2} similar", n - 1);
        }
    }
    assert!(close * 10 >= copies * 8, "{close} of {copies} copies keep half their shingles");
}

/// On a Debian machine the pool is real text and large enough.
#[test]
fn the_debian_pool_loads_the_same_twice() {
    if !std::path::Path::new("/usr/share/common-licenses").is_dir() {
        eprintln!("skipping: not a Debian machine");
        return;
    }
    let a = Corpus::load(7);
    assert!(a.sentences() >= 1_000);
    assert_eq!(a.digest(), Corpus::load(7).digest());
}
