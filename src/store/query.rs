//! The exact threshold query over a snapshot: SpotSigs' length window and
//! inverted-list pruning (paper §4, Algorithm 1) on length-ordered segments,
//! and the LSH query over band buckets.
//!
//! # Pruning, and why it is exact
//!
//! Let L = |q| and let δ1 be the summed query frequency of the signatures
//! whose posting lists have been fully processed; a signature with no list
//! in the segment (or the delta) counts as processed from the start. A
//! document first met after that shares none of those signatures, so its overlap with q is at most
//! `m = min(x, L − δ1)` for its length x, and its similarity at most
//! `m / (L + x − m)` (Jaccard; `m / L` for containment). A document is
//! verified only when that bound still meets τ:
//!
//! - *window*: documents outside `[⌈τL⌉, ⌊L/τ⌋]` can never meet τ (eq. 1–6);
//!   a segment's documents are ordered by length, so the window is an
//!   ordinal range and lists are only walked inside it;
//! - *δ2 break* (Algorithm 1, lines 15–18): within a list, walked in
//!   ascending length, the bound rises until x = L − δ1 and falls after it,
//!   so the first document past that point whose bound fails ends the list;
//! - *δ1 break* (lines 25–26): once the bound at its peak fails τ, no
//!   unseen document can match and the remaining lists are skipped. The
//!   peak is at x = L − δ1, where the bound is `(L − δ1) / L`, or at the
//!   window's nearer end when L − δ1 lies outside it: for a self-join probe,
//!   which wants only documents at least as long as itself, that is x = L
//!   and `(L − δ1) / (L + δ1)`.
//!
//! The paper states lines 17–18 as "break when δ1 + δ2 > (1 − τ)|d_i|" (δ2 =
//! |d_i| − |d_i'|). Read literally that is not exact for multiset Jaccard:
//! for q = {a:2, b:8}, τ = 0.5 and list a processed first (δ1 = 2), the
//! document {b:6} in list b has δ1 + δ2 = 6 > 5 and would be skipped, yet its
//! similarity is 6/10. The conditions here are derived from the bound above
//! instead, and `tests/query.rs` keeps that example.
//!
//! # Which lists are looked up
//!
//! With full pruning a segment is not asked for every query signature: the
//! signatures are visited in an index-wide rarity order (below), and only
//! until the weight visited, listed or not, makes the δ1 break certain:
//! the lists past that point would be skipped by the break anyway, so they
//! are never looked up. Any order is exact; a rare-first order makes the
//! looked-up prefix short lists. The order comes from [`Ranks`]: the
//! summed lengths of every segment's longest lists (its *frequent* section,
//! FORMAT.md §7); a signature not listed there counts as rarest, ties by
//! hash. With two or more segments, a query whose snapshot's segment
//! masks are built, and every self-join probe (with the join's masks),
//! first orders its signatures by how many segments may hold them, fewest
//! first, and by the ranks within that ([`Ranks::order_by_segments`]):
//! each segment looks up the same prefix of the order, so that makes the
//! fewest look-ups. The looked-up lists
//! are then walked in ascending length inside the window (Algorithm 1,
//! line 5).
//!
//! With full pruning a document that passes the bound when first met does
//! not get verified at once: it collects the weight `h` of every processed
//! list that holds it, and after the walk its overlap is at most
//! `min(x, h + L − δ1)`; only if that bound still meets τ is it verified.
//! Every candidate that survives is verified once, against its stored
//! vector, with [`Overlap::meets`](crate::Overlap::meets), the same
//! comparison the brute-force oracle uses.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use roaring::RoaringBitmap;

use super::{IndexError, Searcher};
use crate::oracle::Match;
use crate::signer::DocumentSignature;
use crate::similarity::{LengthWindow, Overlap, Similarity, Threshold};
use crate::vector::SignatureVector;

/// Which pruning a query applies (all give the same, exact answer; the
/// weaker settings exist to measure what pruning saves).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pruning {
    /// Length window, δ2 list breaks and the δ1 global break.
    #[default]
    Full,
    /// Only the length window.
    WindowOnly,
    /// Every posting entry of every query signature.
    None,
}

/// Index-wide length estimates of the longest posting lists: each
/// segment's frequent section, summed by hash. Only the order in which a
/// query visits its signatures depends on them, never its answer.
#[derive(Debug, Default)]
pub(super) struct Ranks {
    lengths: super::delta::MixMap<u64, u64>,
    /// The keys of `lengths`: most query signatures are in no frequent
    /// section, and this small filter says so without the map's cache
    /// misses.
    listed: KeyFilter,
}

impl Ranks {
    fn build<'s>(segments: impl Iterator<Item = &'s super::segment::Segment<super::mmap::SegmentBytes>>) -> Ranks {
        let mut lengths = super::delta::MixMap::default();
        for segment in segments {
            for (hash, len) in segment.frequent() {
                let sum: &mut u64 = lengths.entry(hash).or_default();
                *sum = sum.saturating_add(len);
            }
        }
        let mut listed = KeyFilter::sized(lengths.len());
        lengths.keys().for_each(|&hash| listed.insert(hash));
        Ranks { lengths, listed }
    }

    /// The query's signatures with their weights, rarest first: unlisted
    /// signatures (those the `listed` filter rules out, in the query's
    /// hash order), then the others by estimated length (0 for a filter
    /// false positive), ties by hash; cut where `enough`, given the
    /// weight before a signature, says no segment will look it up. The
    /// unlisted signatures often make that weight alone, and then the
    /// others' lengths are never read from the map.
    ///
    /// With `alone` (a self-join probe), the unlisted signatures that
    /// no other document holds are left out of the order and their
    /// summed weight is returned: they count as processed from the start
    /// everywhere, with no look-up. A listed signature has a long list
    /// somewhere, so it is never alone. Once that weight alone makes
    /// `enough`, the order is empty and the weight returned may be only
    /// part of it (enough already). With `by_segments` (two or more
    /// segments), the probe's other signatures are ordered by the
    /// segments its masks name, fewest first, as
    /// [`Ranks::order_by_segments`] orders a single query's; and once the
    /// blocks read so far hold enough weight, with the signatures held by
    /// none, in signatures one segment at most holds, the rest are never
    /// read (the order reaches `enough` with look-ups in one segment
    /// each, the kind the whole order starts with, and signatures left
    /// out of it only count as not processed).
    fn order(
        &self,
        query: &SignatureVector,
        measure: Similarity,
        alone: Option<&SharedSignatures>,
        by_segments: bool,
        enough: impl Fn(u64) -> bool,
    ) -> (Vec<(u64, u64)>, u64) {
        let Some(shared) = alone else {
            return (self.rank(weights(query, measure), 0, enough), 0);
        };
        // The signatures held by no other document come first, whatever
        // their hash. The filter is read a block of signatures at a time:
        // the block's words first (with the join's blocks, and each
        // signature's count of segments from the same line), in a loop
        // with nothing else in it, so that their cache misses overlap;
        // then tested with no branch on
        // the outcome. Once the weight held by none makes `enough`, the
        // order is empty whatever the rest holds (every source's δ1 break
        // is certain before its first list), so the rest is never read.
        // The words of the 64 signatures after a block are in flight
        // while it is read: more misses in flight than blocks of 16 once
        // had (whose early stops saved less than their waits cost:
        // ARCHITECTURE.md, "Signatures only the probe holds"). Blocks of
        // 32 with that distance: the early stops below come sooner, and
        // fewer lines are asked for past them (1M word 3-shingles: the
        // probes' phase about 0.99 of its time with blocks of 64 against
        // 128, each asking for the next; 0.98 with blocks of 32 against
        // 64, 128 ahead; 0.98 with 64 ahead against 128; blocks of 16,
        // and 32 ahead, no faster).
        const AHEAD: usize = 64;
        const BLOCK: usize = 32;
        let mut signatures: Vec<(u64, u64)> = weights(query, measure).collect();
        for &(hash, _) in signatures.iter().take(AHEAD) {
            shared.keys.prefetch(hash);
        }
        let mut held_by_none = 0;
        let mut kept = 0;
        // The kept signatures' weight that one segment at most holds (the
        // cheapest look-ups, which the order puts first).
        let mut cheap = 0;
        // With the join's blocks and segments to order by, each kept
        // signature's count of segments is read from the line its filter
        // word came in ([`JoinBlocks`]), into `counts`.
        let joined = match &shared.keys {
            SharedKeys::Blocks(blocks) if by_segments => Some(blocks),
            _ => None,
        };
        let mut buffers = RankBuffers::take();
        let mut counts = std::mem::take(&mut buffers.counts);
        if joined.is_some() {
            counts.resize(signatures.len(), 0);
        }
        for start in (0..signatures.len()).step_by(BLOCK) {
            let end = signatures.len().min(start + BLOCK);
            // The words `AHEAD` on asked for while this block's are read.
            for &(hash, _) in signatures.iter().skip(start + AHEAD).take(end - start) {
                shared.keys.prefetch(hash);
            }
            let mut words = [0u64; BLOCK];
            let mut named = [0u8; BLOCK];
            match joined {
                Some(blocks) => {
                    for ((word, named), &(hash, _)) in words.iter_mut().zip(&mut named).zip(&signatures[start..end]) {
                        (*word, *named) = blocks.word_and_count(hash);
                    }
                }
                None => {
                    for (word, &(hash, _)) in words.iter_mut().zip(&signatures[start..end]) {
                        *word = shared.keys.load(hash);
                    }
                }
            }
            for ((i, &word), &named) in (start..end).zip(&words).zip(&named) {
                let (hash, weight) = signatures[i];
                let may = KeyFilter::admits(word, hash);
                held_by_none += if may { 0 } else { weight };
                cheap += if may & (named <= 1) { weight } else { 0 };
                signatures[kept] = (hash, weight);
                if let Some(count) = counts.get_mut(kept) {
                    *count = named;
                }
                kept += usize::from(may);
            }
            if enough(held_by_none) {
                buffers.counts = counts;
                buffers.give_back();
                return (Vec::new(), held_by_none);
            }
            // The signatures read so far reach the cut with look-ups in
            // one segment at most: the rest are never read. Any order
            // whose weight reaches the cut gives the same answer (the
            // ones left out count as unprocessed). The whole order starts
            // with look-ups of that kind too, though not always the same
            // ones: an unread signature may be held by none, or rarer.
            if joined.is_some() && enough(held_by_none + cheap) {
                break;
            }
        }
        signatures.truncate(kept);
        counts.truncate(kept);
        let order = match joined {
            Some(_) => self.order_by_counts(signatures.iter().copied(), counts, held_by_none, enough, buffers),
            None => {
                buffers.counts = counts;
                buffers.give_back();
                if by_segments {
                    self.order_by_segments(signatures.iter().copied(), held_by_none, &shared.keys, enough)
                } else {
                    self.rank(signatures.iter().copied(), held_by_none, enough)
                }
            }
        };
        (order, held_by_none)
    }

    /// The order of `signatures` (after a weight of `visited` counted as
    /// processed) for a single query once the snapshot's segment masks
    /// are built, or a self-join probe's shared signatures with the
    /// join's masks: the signatures no segment holds first (they are
    /// looked up nowhere, so their weight comes free), then by how many
    /// segments the masks name, fewest first, and within that as
    /// [`Ranks::rank`] orders them. A segment looks up each signature of
    /// the order up to the same cut, so this order makes the fewest
    /// look-ups the masks can tell of: most signatures of a page are
    /// held by its near-duplicates too, often in other segments, and
    /// those rank behind the ones only one segment (or none) holds.
    fn order_by_segments(
        &self,
        signatures: impl Iterator<Item = (u64, u64)> + Clone,
        visited: u64,
        segment_masks: &impl SegmentSets,
        enough: impl Fn(u64) -> bool,
    ) -> Vec<(u64, u64)> {
        let mut buffers = RankBuffers::take();
        // Every signature's mask read, each kept as the number of
        // segments it names (0 to 8), with the mask `AHEAD` signatures on
        // asked for as each is read: about that many misses in flight
        // all along. Asked for all at once, in a loop of their own, a
        // word-3-shingle page's ~550 had left the reads past the first
        // few dozen waiting (warm queries over the five segments of 1M
        // pages: 0.91–0.92 of the time with 64 ahead, 32 and 128 each
        // about 1.015 of 64's; SpotSigs' ~90 masks no different).
        const AHEAD: usize = 64;
        let mut counts = std::mem::take(&mut buffers.counts);
        let mut ahead = signatures.clone();
        for (hash, _) in ahead.by_ref().take(AHEAD) {
            segment_masks.prefetch_segments(hash);
        }
        counts.extend(signatures.clone().map(|(hash, _)| {
            if let Some((next, _)) = ahead.next() {
                segment_masks.prefetch_segments(next);
            }
            segment_masks.segments(hash).count_ones() as u8
        }));
        self.order_by_counts(signatures, counts, visited, enough, buffers)
    }

    /// [`Ranks::order_by_segments`] with each signature's count of
    /// segments in `counts`, and the thread's buffers taken (`counts`
    /// goes back to them, and they to the thread).
    fn order_by_counts(
        &self,
        signatures: impl Iterator<Item = (u64, u64)> + Clone,
        counts: Vec<u8>,
        mut visited: u64,
        enough: impl Fn(u64) -> bool,
        mut buffers: RankBuffers,
    ) -> Vec<(u64, u64)> {
        let present = counts.iter().fold(0u16, |present, &count| present | 1 << count);
        // Count by count, fewest first, and each only while the ones
        // before have not made `enough` (most queries stop in the first
        // two or three): one pass over the signatures picks a count's
        // members in the query's hash order, as a stable sort by count
        // would give them.
        let mut order = std::mem::take(&mut buffers.order);
        let mut classed = std::mem::take(&mut buffers.classed);
        for class in 0..=8u8 {
            if enough(visited) {
                break;
            }
            if present & (1 << class) == 0 {
                continue;
            }
            if class == 0 {
                // No segment holds these: no ranks are needed for them.
                let members = signatures.clone().zip(&counts).filter(|&(_, &count)| count == 0).map(|(s, _)| s);
                for (hash, weight) in members {
                    if enough(visited) {
                        break;
                    }
                    order.push((hash, weight));
                    visited += weight;
                }
                continue;
            }
            // A signature's count follows no order a branch predictor
            // learns.
            gather_flagged(&mut classed, counts.len(), signatures.clone().zip(&counts).map(|(s, &c)| (s, c == class)));
            buffers.order = order;
            let before = buffers.order.len();
            order = self.rank_into(&classed, visited, &enough, &mut buffers);
            visited += order[before..].iter().map(|&(_, weight)| weight).sum::<u64>();
        }
        buffers.counts = counts;
        buffers.classed = classed;
        buffers.give_back();
        order
    }

    /// [`Ranks::order`] of `signatures`, after a weight of `visited`
    /// counted as processed.
    fn rank(
        &self,
        signatures: impl Iterator<Item = (u64, u64)>,
        visited: u64,
        enough: impl Fn(u64) -> bool,
    ) -> Vec<(u64, u64)> {
        // The vectors come from the thread's previous query (a fresh set
        // cost three allocations a query, two of them past the allocator's
        // per-thread cache); `order` goes back after the query
        // ([`give_back_order`]).
        let mut buffers = RankBuffers::take();
        let mut classed = std::mem::take(&mut buffers.classed);
        classed.extend(signatures);
        let order = self.rank_into(&classed, visited, enough, &mut buffers);
        buffers.classed = classed;
        buffers.give_back();
        order
    }

    /// [`Ranks::rank`] with the thread's `buffers`: the order is the one
    /// they held, extended (its scratch vectors are emptied first).
    fn rank_into(
        &self,
        signatures: &[(u64, u64)],
        mut visited: u64,
        enough: impl Fn(u64) -> bool,
        buffers: &mut RankBuffers,
    ) -> Vec<(u64, u64)> {
        // The filter's words all read first, so that their cache misses
        // overlap (as in `order`); a signature it rules out is unlisted.
        // The lengths of the others are read from the map only if the
        // unlisted ones do not make the weight (often they do): a filter
        // false positive then counts as listed with length 0.
        // A block of words at a time: the order is often cut within the
        // first block of a query's many signatures (a word-3-shingle join
        // probe's of two segments), and the blocks past the cut are never
        // read.
        const BLOCK: usize = 64;
        let RankBuffers { listed, order, .. } = buffers;
        let mut order = std::mem::take(order);
        listed.clear();
        order.reserve(signatures.len());
        for block in signatures.chunks(BLOCK) {
            block.iter().for_each(|&(hash, _)| self.listed.prefetch(hash));
            let mut words = [0u64; BLOCK];
            for (word, &(hash, _)) in words.iter_mut().zip(block) {
                *word = self.listed.load(hash);
            }
            for (&word, &(hash, weight)) in words.iter().zip(block) {
                if enough(visited) {
                    return order;
                }
                if KeyFilter::admits(word, hash) {
                    listed.push((0, hash, weight));
                } else {
                    order.push((hash, weight));
                    visited += weight;
                }
            }
        }
        if enough(visited) {
            return order;
        }
        for (length, hash, _) in listed.iter_mut() {
            *length = self.lengths.get(hash).copied().unwrap_or(0);
        }
        listed.sort_unstable();
        for &(_, hash, weight) in listed.iter() {
            if enough(visited) {
                break;
            }
            order.push((hash, weight));
            visited += weight;
        }
        order
    }
}

/// The vectors of a query's rarity order ([`Ranks::rank`]), kept by each
/// thread from one query to the next, empty between queries.
#[derive(Default)]
struct RankBuffers {
    listed: Vec<(u64, u64, u64)>,
    order: Vec<(u64, u64)>,
    /// [`Ranks::order_by_segments`]: the number of segments each
    /// signature's mask names, and the signatures of one such number.
    counts: Vec<u8>,
    classed: Vec<(u64, u64)>,
}

impl RankBuffers {
    /// The thread's buffers (empty).
    #[inline]
    fn take() -> RankBuffers {
        RANK_BUFFERS.with(std::cell::Cell::take)
    }

    /// Hands the buffers back to the thread, each emptied.
    #[inline]
    fn give_back(self) {
        RANK_BUFFERS.with(|b| b.set(self.kept()));
    }

    /// The buffers to keep, each emptied ([`super::kept_for_reuse`]).
    fn kept(self) -> Self {
        use super::kept_for_reuse as kept;
        RankBuffers {
            listed: kept(self.listed),
            order: kept(self.order),
            counts: kept(self.counts),
            classed: kept(self.classed),
        }
    }
}

thread_local! {
    static RANK_BUFFERS: std::cell::Cell<RankBuffers> = std::cell::Cell::new(RankBuffers::default());
}

/// The buffers of a query's segment walks ([`Searcher::query_segment`]),
/// kept by each thread from one query to the next, empty between queries
/// (as [`RankBuffers`]): a fresh set cost five allocations a query.
/// `'s` is the lifetime of the segments the lists borrow; the thread
/// keeps the buffers as `'static` ones, always empty.
#[derive(Default)]
struct SegmentBuffers<'s> {
    /// A segment's lists: the key to walk them by (set by the walk), the
    /// signature's weight, the list.
    lists: Vec<(u64, u64, super::segment::PostingList<'s>)>,
    /// The order of the walk: each list's count inside the window and its
    /// position in `lists`, packed into one key (see `query_segment`).
    walk: Vec<u64>,
    /// The documents met that may still meet τ, with the weight of the
    /// walked lists that hold them and their length.
    candidates: super::delta::MixMap<u32, (u64, u64)>,
    /// `candidates` in ordinal order, for verifying.
    verify: Vec<(u32, (u64, u64))>,
    /// For each signature of a query's order, the segments that may hold
    /// it.
    masks: Vec<u8>,
    /// The positions in the order of the signatures a segment's masks
    /// name it for (its look-ups).
    selected: Vec<usize>,
    /// The positions in the order of the signatures whose one holder is
    /// known ([`Searcher::known_lists`]), and its scratch: the order's
    /// signatures it may hold, by hash.
    known: Vec<usize>,
    wanted: Vec<(u64, usize)>,
}

/// An empty vector with the allocation of `v` (emptied), whatever the
/// element type's lifetimes: the collect runs in place, since the types
/// differ only in lifetimes, and no element is ever made.
fn recycled<T, U>(mut v: Vec<T>) -> Vec<U> {
    v.clear();
    v.into_iter().filter_map(|_| None).collect()
}

impl SegmentBuffers<'_> {
    /// The thread's buffers, for a query over segments of lifetime `'s`.
    fn take<'s>() -> SegmentBuffers<'s> {
        let b = SEGMENT_BUFFERS.with(std::cell::Cell::take);
        SegmentBuffers {
            lists: recycled(b.lists),
            walk: b.walk,
            candidates: b.candidates,
            verify: b.verify,
            masks: b.masks,
            selected: b.selected,
            known: b.known,
            wanted: b.wanted,
        }
    }

    /// Hands the buffers back to the thread, each emptied
    /// ([`super::kept_for_reuse`]; the map likewise).
    fn give_back(self) {
        use super::kept_for_reuse as kept;
        let mut candidates = self.candidates;
        candidates.clear();
        if candidates.capacity() > super::REUSED_LIMIT {
            candidates = Default::default();
        }
        let kept = SegmentBuffers {
            lists: kept(recycled(self.lists)),
            walk: kept(self.walk),
            candidates,
            verify: kept(self.verify),
            masks: kept(self.masks),
            selected: kept(self.selected),
            known: kept(self.known),
            wanted: kept(self.wanted),
        };
        SEGMENT_BUFFERS.with(|b| b.set(kept));
    }
}

thread_local! {
    static SEGMENT_BUFFERS: std::cell::Cell<SegmentBuffers<'static>> = std::cell::Cell::new(SegmentBuffers::default());
}

/// Empties `out` and puts in it, in order, the items of `items` whose flag
/// is set, with no branch on the flags: each item is written at the end
/// and the end moved on by its flag (for flags that follow no order a
/// branch predictor learns, on which a `filter` mispredicts often).
/// `items` holds at most `at_most` items (the callers zip with a slice of
/// that length): past them, an item is kept only while there is room.
#[inline(always)]
fn gather_flagged<T: Copy + Default>(out: &mut Vec<T>, at_most: usize, items: impl Iterator<Item = (T, bool)>) {
    out.clear();
    out.resize(at_most, T::default());
    let mut end = 0;
    for (item, flag) in items {
        if let Some(slot) = out.get_mut(end) {
            *slot = item;
        }
        end += usize::from(flag);
    }
    out.truncate(end);
}

/// Hands a query's rarity order back to its thread's buffers (unless the
/// thread's own is larger: a probe whose order came out empty before
/// ranking holds a new, empty one).
fn give_back_order(order: Vec<(u64, u64)>) {
    RANK_BUFFERS.with(|b| {
        let mut buffers = b.take();
        if order.capacity() >= buffers.order.capacity() {
            buffers.order = order;
        }
        b.set(buffers.kept());
    });
}

/// The signatures that two or more documents of a snapshot may hold: a
/// Bloom filter ([`KeyFilter`]) of the posting keys that have a list of
/// several documents in some segment, or that several sources (segments,
/// the pending documents) list. A self-join probe needs no look-up for a signature
/// the filter does not hold: only the probe holds it. False positives
/// only cost look-ups; there are no false negatives, so the join stays
/// exact. Deleted documents are counted, which also only costs look-ups.
///
/// Built without merging the sources: the keys are cut by their top bits
/// into ranges, on all cores, and each range's keys are read from every
/// source once and walked twice (see [`SharedSignatures::of_sources`]),
/// with small Bloom filters of the range's own in between.
///
/// For each shared key it also keeps a superset of the segments that hold
/// it (as [`SegmentMasks`] do): a probe looks a shared signature up only in
/// those. Three in four of the join's look-ups in an index of six segments
/// used to find nothing. With several sources the filter and those
/// segment sets share their cache lines ([`JoinBlocks`]).
#[derive(Debug)]
pub(super) struct SharedSignatures {
    /// The filter, and the segments that may hold each shared key.
    keys: SharedKeys,
    /// For each document of each segment (from `bases[position]` on), how
    /// many of its signatures no document after it in the join's order
    /// holds, at least: those with an inline one-document list that no
    /// other source lists, and those whose list of several, in a segment
    /// no other source lists them in, has it as the member last in that
    /// order ([`LastInOrder`]). A self-join
    /// probe asks only for documents after it, so none of them can match
    /// there: a probe for which they alone make the δ1 break certain is
    /// done without reading its vector.
    held_last: Vec<u32>,
    /// Where each source's counts start in `held_last`, and how many it has.
    bases: Vec<(usize, usize)>,
}

/// One source of [`SharedSignatures`]: a segment's posting keys, or the
/// pending documents' signatures (sorted, each with whether several of
/// them hold it).
enum KeySource<'s, B: AsRef<[u8]> = super::mmap::SegmentBytes> {
    Segment(&'s super::segment::Segment<B>),
    Sorted(&'s [(u64, bool)]),
}

impl<B: AsRef<[u8]>> Clone for KeySource<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B: AsRef<[u8]>> Copy for KeySource<'_, B> {}

impl<B: AsRef<[u8]>> KeySource<'_, B> {
    /// Calls `f` with each key in `lo..=hi`, ascending, whether its list
    /// may hold several documents, a segment's inline list's only document
    /// (its ordinal), and a segment key's index in its key section (for
    /// [`Segment::posting_list_at`](super::segment::Segment::posting_list_at));
    /// a damaged key section, or an error of `f`, is an error.
    #[inline]
    fn for_each_between(
        &self,
        lo: u64,
        hi: u64,
        mut f: impl FnMut(u64, bool, Option<u32>, Option<usize>) -> Result<(), IndexError>,
    ) -> Result<(), IndexError> {
        match *self {
            KeySource::Segment(segment) => {
                segment.for_each_posting_entry_between(lo, hi, |key, only, index| {
                    f(key, only.is_none(), only, Some(index))
                })?;
            }
            KeySource::Sorted(keys) => {
                let from = keys.partition_point(|k| k.0 < lo);
                let to = keys.partition_point(|k| k.0 <= hi);
                for &(key, several) in &keys[from..to] {
                    f(key, several, None, None)?;
                }
            }
        }
        Ok(())
    }

    /// How many documents the source has ordinals for (none for the
    /// pending documents).
    fn documents(&self) -> usize {
        match *self {
            KeySource::Segment(segment) => segment.doc_count() as usize,
            KeySource::Sorted(_) => 0,
        }
    }

    /// How many keys the source lists (distinct signatures).
    fn len(&self) -> usize {
        match *self {
            KeySource::Segment(segment) => segment.posting_key_count(),
            KeySource::Sorted(keys) => keys.len(),
        }
    }
}

impl SharedSignatures {
    /// Key ranges (by their top bits) built as separate units of work:
    /// `2^RANGE_BITS` of them, or with several sources up to
    /// `2^MAX_RANGE_BITS` ([`SharedSignatures::range_bits`]).
    const RANGE_BITS: u32 = 11;

    /// The most key ranges of a build over several sources, as bits.
    const MAX_RANGE_BITS: u32 = 13;

    /// The keys a range of a small build holds at least: one of fewer than
    /// `2^RANGE_BITS` times as many keys takes fewer ranges
    /// ([`SharedSignatures::range_bits`]).
    const MIN_RANGE_KEYS: usize = 1024;

    /// The keys a range of a build over several sources holds at most
    /// (24 bytes each in its buffer), unless that takes more than
    /// `2^MAX_RANGE_BITS` ranges.
    const RANGE_KEYS: usize = 20_000;

    /// Keys a block whose lists read for their last holder are read
    /// together, in stages ([`LastInOrder::last_holders`]).
    const STAGED: usize = 64;

    /// The first and last key of range `range` of the `2^RANGE_BITS`.
    fn range_bounds(range: usize) -> (u64, u64) {
        Self::range_bounds_in(Self::RANGE_BITS, range)
    }

    /// The first and last key of range `range` of `2^bits`.
    fn range_bounds_in(bits: u32, range: usize) -> (u64, u64) {
        let lo = (range as u64) << (64 - bits);
        (lo, lo | (u64::MAX >> bits))
    }

    /// The key ranges, as bits, of a build over several sources that
    /// list `total` keys: the fewest from `2^RANGE_BITS` up that hold at
    /// most [`SharedSignatures::RANGE_KEYS`] each, so that a range's
    /// buffer (24 bytes a key) is about the size of a core's L2 cache
    /// while its two passes read it (half a megabyte on a Zen 3 core;
    /// 60,000 keys had taken 1.4 MB). At 1M word-3-shingle
    /// pages in five segments (122 million keys) 8,192 ranges, whose
    /// setup took 0.91 of the time of 2,048's there; SpotSigs' 39
    /// million keys stay in 2,048 (8,192 were slower: HISTORY.md).
    ///
    /// A build of fewer keys than `2^RANGE_BITS` ranges of
    /// [`SharedSignatures::MIN_RANGE_KEYS`] takes fewer ranges
    /// ([`SharedSignatures::least_range_bits`]).
    fn range_bits(total: usize) -> u32 {
        (Self::least_range_bits(total)..Self::MAX_RANGE_BITS)
            .find(|&bits| total >> bits <= Self::RANGE_KEYS)
            .unwrap_or(Self::MAX_RANGE_BITS)
    }

    /// The fewest key ranges, as bits, of a build of `total` keys: those
    /// of at least [`SharedSignatures::MIN_RANGE_KEYS`] each, up to
    /// `2^RANGE_BITS` (one range under twice that). A range's setup (its
    /// place in each source's keys, its filters cleared, the counts'
    /// lock) costs what some hundred keys do: 2,048 ranges had made the
    /// self-join of an index of 15 short documents take 0.74–0.81 ms (0.30
    /// in fewer).
    fn least_range_bits(total: usize) -> u32 {
        let ranges = total / Self::MIN_RANGE_KEYS;
        (usize::BITS - ranges.leading_zeros()).saturating_sub(1).min(Self::RANGE_BITS)
    }

    fn build(searcher: &Searcher) -> Result<SharedSignatures, IndexError> {
        use rayon::prelude::*;
        // The pending documents' signatures: a hash in two of them is shared.
        let mut pending: Vec<u64> =
            searcher.state.delta.values().flat_map(|doc| doc.vector.hashes().iter().copied()).collect();
        pending.par_sort_unstable();
        let pending: Vec<(u64, bool)> = pending.chunk_by(|a, b| a == b).map(|run| (run[0], run.len() > 1)).collect();
        // The pending documents are in no segment: no bit.
        let sources: Vec<(KeySource<'_>, u8)> = searcher
            .state
            .segments
            .values()
            .enumerate()
            .map(|(position, loaded)| (KeySource::Segment(&loaded.segment), SegmentMasks::bit(position)))
            .chain([(KeySource::Sorted(&pending), 0)])
            .collect();
        Self::of_sources(&sources, searcher.signer.config().similarity)
    }

    /// The filter, masks and counts of `sources`, each with its segment
    /// bits.
    ///
    /// No merge: for each range of the keys' top bits, a first pass over
    /// every source's keys in the range sets them in a Bloom filter of the
    /// range (`seen`), and those it already held, or whose list holds
    /// several documents, in another (`shared`), and those it already held
    /// in a third (`listed_again`), and keeps the keys it read in a buffer
    /// of the range. A second pass over that buffer (the key sections are
    /// decoded once), while it is still in the core's cache, sets each key
    /// that `shared` holds in
    /// the result, with its source's bit: the range's part of the result
    /// is its own (small) slice. It counts each key `shared` rules out for
    /// the only document of its inline list, and each key `listed_again`
    /// rules out for the member of its list that comes last in the join's
    /// order, when [`LastInOrder`] can tell which: no document after it
    /// holds the key. A key two sources list is set in
    /// `shared` and `listed_again` when the second lists it, so every
    /// shared key is in the result with the bit of every source that lists
    /// it, and no key is counted for a document that another source's
    /// document follows; the local filters' false positives only add keys
    /// and leave out counts. The
    /// result is sized before: from the first pass over every 32nd range
    /// (keys are hash values, so about evenly spread), or over all of them
    /// for fewer than four million keys. When one source lists every key,
    /// [`SharedSignatures::of_one_source`] builds them in one pass.
    fn of_sources<B: AsRef<[u8]> + Sync>(
        sources: &[(KeySource<'_, B>, u8)],
        measure: Similarity,
    ) -> Result<SharedSignatures, IndexError> {
        let total: usize = sources.iter().map(|(source, _)| source.len()).sum();
        Self::of_sources_sampled(sources, if total < 4 << 20 { 1 } else { 32 }, measure)
    }

    /// [`SharedSignatures::of_sources`], sized by the first pass over every
    /// `step`-th range.
    fn of_sources_sampled<B: AsRef<[u8]> + Sync>(
        sources: &[(KeySource<'_, B>, u8)],
        step: usize,
        measure: Similarity,
    ) -> Result<SharedSignatures, IndexError> {
        let mut listing = sources.iter().enumerate().filter(|(_, (source, _))| source.len() > 0);
        if let (Some((lone, _)), None) = (listing.next(), listing.next()) {
            let bits = Self::least_range_bits(sources[lone].0.len());
            return Self::of_one_source(sources, lone, step.clamp(1, 1 << bits), bits, measure);
        }
        let total: usize = sources.iter().map(|(source, _)| source.len()).sum();
        Self::of_several_sources(sources, step, Self::range_bits(total), measure)
    }

    /// [`SharedSignatures::of_sources_sampled`] over two or more sources
    /// that list keys, in `2^bits` key ranges.
    fn of_several_sources<B: AsRef<[u8]> + Sync>(
        sources: &[(KeySource<'_, B>, u8)],
        step: usize,
        bits: u32,
        measure: Similarity,
    ) -> Result<SharedSignatures, IndexError> {
        use rayon::prelude::*;
        // Keys are hash values, so about evenly spread over the ranges.
        let total: usize = sources.iter().map(|(source, _)| source.len()).sum();
        let ranges = 1usize << bits;
        let step = step.clamp(1, ranges);
        let per_range = (total >> bits) + (total >> (bits + 2)) + 64;
        let last_in_order =
            sources.iter().map(|(source, _)| LastInOrder::of(source, measure)).collect::<Result<Vec<_>, _>>()?;
        let filters = || RangeFilters {
            met: RangeFilter::sized(per_range, bits),
            keys: Vec::with_capacity(per_range),
            starts: Vec::with_capacity(sources.len() + 1),
            staged: Vec::with_capacity(Self::STAGED),
            members: Vec::new(),
            holders: Vec::with_capacity(Self::STAGED),
        };
        // The first pass over a range: how many keys it set in `shared`,
        // and how many times a key was met again.
        let first_pass = |range: usize, local: &mut RangeFilters| {
            let (lo, hi) = Self::range_bounds_in(bits, range);
            let RangeFilters { met, keys, starts, .. } = local;
            met.clear();
            keys.clear();
            starts.clear();
            let (mut newly_shared, mut met_again) = (0usize, 0usize);
            for (source, _) in sources {
                starts.push(keys.len());
                source.for_each_between(lo, hi, |key, several, only, index| {
                    keys.push((key, index.unwrap_or(0), only));
                    let (again, now_shared) = met.meet(key, KeyFilter::mask(key), several);
                    newly_shared += usize::from(now_shared);
                    met_again += usize::from(again);
                    Ok(())
                })?;
            }
            starts.push(keys.len());
            Ok::<_, IndexError>((newly_shared, met_again))
        };
        let least = least_split(total);
        let sampled: Vec<(usize, usize)> = (0..ranges.div_ceil(step))
            .into_par_iter()
            .with_min_len(least)
            .map_init(filters, |local, i| first_pass(i * step, local))
            .collect::<Result<_, IndexError>>()?;
        // A shared key is listed once for each source that lists it: its
        // first listing, plus each meeting again.
        let scale = |n: usize| (n * ranges).div_ceil(sampled.len().max(1));
        let keys = scale(sampled.iter().map(|f| f.0).sum());
        let incidences = keys + scale(sampled.iter().map(|f| f.1).sum());
        let mut joined = JoinBlocks::sized_in(keys, incidences, ranges);
        let (bases, counters) = Self::bases(sources);
        let blocks = joined.blocks;
        let blocks_per_range = blocks / ranges;
        let ranges_run = joined
            .block_words_mut()
            .par_chunks_mut(blocks_per_range * JoinBlocks::WORDS)
            .enumerate()
            .with_min_len(least);
        ranges_run.try_for_each_init(filters, |local, (range, own_blocks)| {
            first_pass(range, local)?;
            let RangeFilters { met, keys, starts, staged, members, holders, .. } = local;
            let block_base = range * blocks_per_range;
            // Fresh pages: written before any read, so that none is
            // first mapped to the shared zero page and then copied on
            // its first write (a fault and a flush of both cores' TLBs
            // each).
            own_blocks.fill(0);
            let mut all_counts = counters.mine();
            let mut read = [(0u64, false, false); Self::STAGED];
            let mut lasts = [None; Self::STAGED];
            for (((&(source, bit), &(base, documents)), last_in_order), from) in
                sources.iter().zip(&bases).zip(&last_in_order).zip(starts.windows(2))
            {
                let counts = all_counts.get_mut(base..base + documents).unwrap_or_default();
                for block in keys.get(from[0]..from[1]).unwrap_or_default().chunks(Self::STAGED) {
                    // Each key's mask, and whether `shared` and
                    // `listed_again` hold it, read once for the block.
                    let read = &mut read[..block.len()];
                    for (r, &(key, _, _)) in read.iter_mut().zip(block) {
                        let mask = KeyFilter::mask(key);
                        let (held, again) = met.holds(key, mask);
                        *r = (mask, held, again);
                    }
                    // The lists of the block read for their last
                    // holder: under set Jaccard together, in stages
                    // (the keys to read gathered with no branch on
                    // which they are: 14% of the keys of the 1M
                    // word-3-shingle index, in no order a branch
                    // predictor follows);
                    // the multiset measures' last ordinals one at a
                    // time, below.
                    staged.clear();
                    holders.clear();
                    if let (KeySource::Segment(segment), true) = (source, last_in_order.staged()) {
                        gather_flagged(
                            staged,
                            block.len(),
                            block
                                .iter()
                                .zip(read.iter())
                                .map(|(&(_, index, only), &(_, held, again))| (index, only.is_none() & held & !again)),
                        );
                        last_in_order.last_holders(segment, staged, members, holders)?;
                    }
                    // Each key's last holder, its count's line asked
                    // for (a count is a random byte of the source's
                    // documents: mostly a cache miss), and its bits
                    // set; the counts once their lines are on the way.
                    let mut listed = 0;
                    let lasts = &mut lasts[..block.len()];
                    for ((&(key, index, only), &(mask, held, again)), last) in
                        block.iter().zip(read.iter()).zip(lasts.iter_mut())
                    {
                        // The document that holds the key last in the
                        // join's order: the inline list's only one when
                        // no other source lists the key and `shared`
                        // rules it out, or the member of a list no other
                        // source has that comes last in that order (none
                        // known for the pending documents).
                        *last = match source {
                            // Under the multiset measures the list's
                            // last ordinal, read here.
                            KeySource::Segment(segment) if !last_in_order.staged() => match (held && again, only) {
                                (true, _) => None,
                                (false, Some(ordinal)) => Some(ordinal),
                                (false, None) if !held => None,
                                (false, None) => last_in_order.last_ordinal(segment, index)?,
                            },
                            // With no branch on the key's kind: the
                            // list's holder, if one was read for it.
                            _ => {
                                let reads = only.is_none() & held & !again;
                                let read_last = holders.get(listed).copied().flatten().filter(|_| reads);
                                listed += usize::from(reads);
                                only.or(read_last).filter(|_| !(held & again))
                            }
                        };
                        super::mmap::prefetch_line(counts, last.map_or(0, |ordinal| ordinal as usize));
                        // All ones when `shared` holds the key, else zero.
                        let keep = 0u64.wrapping_sub(u64::from(held));
                        JoinBlocks::set_in_range(own_blocks, blocks, block_base, key, mask & keep, bit & keep as u8);
                    }
                    for &last in lasts.iter() {
                        WorkerCounts::count(counts, last);
                    }
                }
            }
            Ok::<(), IndexError>(())
        })?;
        Ok(SharedSignatures { keys: SharedKeys::Blocks(joined), held_last: counters.summed(), bases })
    }

    /// Where each source's counts start in `held_last` and how many it
    /// has (its segment's documents, one after another), and the counts'
    /// arrays.
    fn bases<B: AsRef<[u8]>>(sources: &[(KeySource<'_, B>, u8)]) -> (Vec<(usize, usize)>, WorkerCounts) {
        let mut bases = Vec::with_capacity(sources.len());
        let mut documents = 0;
        for (source, _) in sources {
            bases.push((documents, source.documents()));
            documents += source.documents();
        }
        (bases, WorkerCounts::new(documents))
    }

    /// [`SharedSignatures::of_sources`] when `sources[lone]` is the only
    /// source that lists keys (one segment and no pending document, as after
    /// [`Index::optimize`](crate::Index::optimize)): no key is listed
    /// twice, so a key is shared exactly when its list holds several
    /// documents, and its last holder in the join's order is its inline
    /// list's only document or the one [`LastInOrder`] finds in its list.
    /// One pass over the keys of each range, with no range filters and no
    /// buffer, and exact counts (no filter's false positive takes any
    /// away). No masks: the one source holds every key, which the empty
    /// masks say. The filter is sized as the general build's, from the
    /// multi-document lists of every `step`-th range.
    fn of_one_source<B: AsRef<[u8]> + Sync>(
        sources: &[(KeySource<'_, B>, u8)],
        lone: usize,
        step: usize,
        bits: u32,
        measure: Similarity,
    ) -> Result<SharedSignatures, IndexError> {
        use rayon::prelude::*;
        let ranges = 1usize << bits;
        // `lone` is an index of `sources` (of_sources_sampled's).
        let lone_source = &sources[lone].0;
        let last_in_order = LastInOrder::of(lone_source, measure)?;
        let least = least_split(lone_source.len());
        let sampled: Vec<usize> = (0..ranges.div_ceil(step))
            .into_par_iter()
            .with_min_len(least)
            .map(|i| {
                let (lo, hi) = Self::range_bounds_in(bits, i * step);
                let mut several_keys = 0;
                lone_source.for_each_between(lo, hi, |_, several, _, _| {
                    several_keys += usize::from(several);
                    Ok(())
                })?;
                Ok(several_keys)
            })
            .collect::<Result<_, IndexError>>()?;
        let keys = (sampled.iter().sum::<usize>() * ranges).div_ceil(sampled.len().max(1));
        let mut filter = KeyFilter::sized_in(keys, ranges);
        let (bases, counters) = Self::bases(sources);
        // The lone source's counts (none for the pending documents).
        let (base, documents) = bases[lone];
        let words = filter.words.len();
        let words_per_range = words / ranges;
        let scratch = || (Vec::with_capacity(Self::STAGED), Vec::new(), Vec::with_capacity(Self::STAGED));
        let segment = match lone_source {
            KeySource::Segment(segment) => Some(*segment),
            KeySource::Sorted(_) => None,
        };
        filter.words.par_chunks_mut(words_per_range).enumerate().with_min_len(least).try_for_each_init(
            scratch,
            |(staged, members, holders), (range, own_words)| {
                let (lo, hi) = Self::range_bounds_in(bits, range);
                let word_base = range * words_per_range;
                // Fresh pages, written before any read (as the general build's).
                own_words.fill(0);
                let mut all_counts = counters.mine();
                let counts = all_counts.get_mut(base..base + documents).unwrap_or_default();
                // The lists of several documents are read for their last
                // holder a block at a time, in stages.
                let mut read_block = |staged: &mut Vec<usize>, counts: &mut [u8]| {
                    holders.clear();
                    if let Some(segment) = segment {
                        last_in_order.last_holders(segment, staged, members, holders)?;
                    }
                    for &last in holders.iter() {
                        WorkerCounts::count(counts, last);
                    }
                    staged.clear();
                    Ok::<(), IndexError>(())
                };
                lone_source.for_each_between(lo, hi, |key, several, only, index| {
                    if several {
                        let _ = KeyFilter::set_in_range(own_words, words, word_base, key, KeyFilter::mask(key));
                        match segment {
                            Some(segment) if !last_in_order.staged() => {
                                WorkerCounts::count(counts, last_in_order.last_ordinal(segment, index.unwrap_or(0))?);
                            }
                            _ => {
                                staged.push(index.unwrap_or(0));
                                if staged.len() == Self::STAGED {
                                    read_block(staged, counts)?;
                                }
                            }
                        }
                    } else {
                        WorkerCounts::count(counts, only);
                    }
                    Ok(())
                })?;
                read_block(staged, counts)
            },
        )?;
        Ok(SharedSignatures { keys: SharedKeys::Filter(filter), held_last: counters.summed(), bases })
    }

    /// How many signatures of the document at `place` (its segment's
    /// position and its ordinal) no document after it in the join's order
    /// holds, at least (0 for a pending document).
    fn held_last(&self, (position, ordinal): (u32, u32)) -> u32 {
        match self.bases.get(position as usize) {
            Some(&(base, documents)) if (ordinal as usize) < documents => {
                self.held_last.get(base + ordinal as usize).copied().unwrap_or(0)
            }
            _ => 0,
        }
    }
}

/// The held-last counts of a [`SharedSignatures`] build, one array for each
/// worker thread, summed at the end: an atomic increment a key, each a
/// cache miss that nothing overlaps, took a fifth of the join's time at 1M
/// pages. A byte a document, saturating (still a lower bound; a probe's
/// break weight is about a ninth of its length at τ = 0.8), keeps more of
/// the array in a core's cache than 16 bits did. The lock only guards
/// against two tasks on one thread's array.
struct WorkerCounts {
    arrays: Vec<std::sync::Mutex<Vec<u8>>>,
    documents: usize,
}

impl WorkerCounts {
    fn new(documents: usize) -> WorkerCounts {
        let workers = rayon::current_num_threads().max(1);
        WorkerCounts { arrays: (0..workers).map(|_| Default::default()).collect(), documents }
    }

    /// The calling worker's array (allocated at its first use).
    fn mine(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        let worker = rayon::current_thread_index().unwrap_or(0) % self.arrays.len();
        let mut counts = self.arrays[worker].lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if counts.is_empty() {
            counts.resize(self.documents, 0);
        }
        counts
    }

    /// Counts one more key for `last`, the ordinal of the document that
    /// holds it last, if known, in `counts` (its source's part of a
    /// worker's array; none past it). With no branch on whether `last` is
    /// known (72% of the keys of the 1M word-3-shingle index, 77% of the
    /// SpotSigs one, in no order): an unknown one adds nothing to the
    /// first count.
    fn count(counts: &mut [u8], last: Option<u32>) {
        let (ordinal, one) = last.map_or((0, 0), |ordinal| (ordinal as usize, 1));
        if let Some(count) = counts.get_mut(ordinal) {
            *count = count.saturating_add(one);
        }
    }

    /// Each document's count, summed over the workers.
    fn summed(self) -> Vec<u32> {
        let arrays: Vec<Vec<u8>> = self
            .arrays
            .into_iter()
            .map(|c| c.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner))
            .collect();
        (0..self.documents).map(|d| arrays.iter().map(|c| u32::from(c.get(d).copied().unwrap_or(0))).sum()).collect()
    }
}

/// How to find which holder of a segment's list comes last in the join's
/// order, (length under the measure, id).
enum LastInOrder {
    /// A segment's ordinals ascend in (|d|, id), the join's order when a
    /// document's length under the measure is |d| (multiset Jaccard): the
    /// list's last ordinal.
    Ordinals,
    /// Under set Jaccard the join orders by (distinct signatures, id): each
    /// ordinal's place in that order within its segment, the holder with
    /// the highest found by reading the list (one of at most
    /// [`LastInOrder::READ_AT_MOST`] ordinals; none for a longer one).
    Ranked(Vec<u32>),
}

impl LastInOrder {
    /// The longest list read for its last holder under set Jaccard: those
    /// of near-duplicates are short, and a long list's last holder gains
    /// one signature of its count.
    const READ_AT_MOST: u64 = 64;

    fn of<B: AsRef<[u8]>>(source: &KeySource<'_, B>, measure: Similarity) -> Result<LastInOrder, IndexError> {
        let segment = match (measure, source) {
            (Similarity::MultisetJaccard | Similarity::Containment, _) | (_, KeySource::Sorted(_)) => {
                return Ok(LastInOrder::Ordinals)
            }
            (Similarity::SetJaccard, KeySource::Segment(segment)) => segment,
        };
        let mut order = Vec::with_capacity(segment.doc_count() as usize);
        for ordinal in 0..segment.doc_count() {
            let entry = segment.entry(ordinal)?;
            order.push((entry.distinct(), entry.id, ordinal));
        }
        order.sort_unstable();
        let mut ranks = vec![0u32; order.len()];
        for (rank, &(.., ordinal)) in order.iter().enumerate() {
            ranks[ordinal as usize] = rank as u32;
        }
        Ok(LastInOrder::Ranked(ranks))
    }

    /// Whether [`LastInOrder::last_holders`] reads lists a block at a
    /// time: under set Jaccard, whose holders' ranks are read. A list's
    /// last ordinal waits only on its own bytes, and blocks of them were
    /// no faster (SpotSigs at 1M: the build's CPU 5–7% more).
    fn staged(&self) -> bool {
        matches!(self, LastInOrder::Ranked(_))
    }

    /// The last ordinal of the list of key `index` of `segment`: its
    /// holder last in the join's order under [`LastInOrder::Ordinals`].
    fn last_ordinal<B: AsRef<[u8]>>(
        &self,
        segment: &super::segment::Segment<B>,
        index: usize,
    ) -> Result<Option<u32>, IndexError> {
        Ok(segment.posting_list_at(index)?.max())
    }

    /// The holder last in the join's order of each list of keys `indices`
    /// of `segment`, if known, into `out`: the list's last ordinal, or
    /// under set Jaccard its member of highest rank (unknown for a list of
    /// more than [`LastInOrder::READ_AT_MOST`], or with an ordinal past the
    /// segment's documents). Under set Jaccard in stages, so that their
    /// cache misses overlap: the lists' entries and first bytes asked for,
    /// then the lists read and their members' ranks asked for, then the
    /// highest found. `members` is scratch.
    fn last_holders<B: AsRef<[u8]>>(
        &self,
        segment: &super::segment::Segment<B>,
        indices: &[usize],
        members: &mut Vec<(u32, u32)>,
        out: &mut Vec<Option<u32>>,
    ) -> Result<(), IndexError> {
        out.clear();
        let ranks = match self {
            // A list's last ordinal waits only on its own bytes (the
            // builds read those one at a time: `staged`).
            LastInOrder::Ordinals => {
                for &i in indices {
                    out.push(self.last_ordinal(segment, i)?);
                }
                return Ok(());
            }
            LastInOrder::Ranked(ranks) => ranks,
        };
        segment.touch_posting_lists(indices);
        // Each list's members, tagged with the list's place in `out`.
        members.clear();
        for (n, &i) in indices.iter().enumerate() {
            let list = segment.posting_list_at(i)?;
            if list.len() <= Self::READ_AT_MOST {
                members.extend(list.iter_in(0..u32::MAX).map(|ordinal| (n as u32, ordinal)));
            }
            out.push(None);
        }
        for &(_, ordinal) in members.iter() {
            super::mmap::prefetch_line(ranks, ordinal as usize);
        }
        // The member of highest rank of each list (none when a member has
        // no rank: an ordinal past the segment's documents).
        for run in members.chunk_by(|a, b| a.0 == b.0) {
            let mut last: Option<(u32, u32)> = None;
            let mut known = true;
            for &(_, ordinal) in run {
                match ranks.get(ordinal as usize) {
                    Some(&rank) if last.is_none_or(|(r, _)| rank > r) => last = Some((rank, ordinal)),
                    Some(_) => {}
                    None => known = false,
                }
            }
            if let Some(slot) = run.first().and_then(|&(n, _)| out.get_mut(n as usize)) {
                *slot = last.filter(|_| known).map(|(_, ordinal)| ordinal);
            }
        }
        Ok(())
    }
}

/// The scratch of one range of [`SharedSignatures`]' build.
struct RangeFilters {
    /// The keys the first pass met ([`RangeFilter`]).
    met: RangeFilter,
    /// The range's keys as the first pass read them, source after source:
    /// the key, its index in its segment's key section (0 for the pending
    /// documents' keys, which have none and whose pass never reads it) and
    /// its inline list's only ordinal. The second pass reads them here
    /// instead of decoding the key sections again.
    keys: Vec<(u64, usize, Option<u32>)>,
    /// Where each source's keys start in `keys`, and where the last ends.
    starts: Vec<usize>,
    /// The second pass's scratch for a block of keys' last holders
    /// ([`LastInOrder::last_holders`]): the lists' key indices, their
    /// members, the holders found.
    staged: Vec<usize>,
    members: Vec<(u32, u32)>,
    holders: Vec<Option<u32>>,
}

/// Three Bloom filters of the keys of one range of [`SharedSignatures`]:
/// the keys any source lists (`seen`), those several documents may hold
/// (`shared`), and those a second source lists (`listed_again`). Each is
/// as [`KeyFilter`] (one word a key, four bits set in it), its word chosen
/// by the key's bits below the range's, at 16 bits a key: small enough to
/// stay in a core's cache while a range is built. The three choose the
/// same word and the same four bits, so a key's three words sit side by
/// side (24 bytes, in one cache line three times in four): one word
/// index and one mask serve all three (ARCHITECTURE.md, "The shared-key
/// build's three filters side by side").
struct RangeFilter {
    /// `[seen, shared, listed_again]` words.
    words: Vec<[u64; 3]>,
    /// The bits of the range's number (a key's top bits, the same for
    /// all its keys).
    range_bits: u32,
}

impl RangeFilter {
    /// For about `keys` keys of a range of `2^range_bits`.
    fn sized(keys: usize, range_bits: u32) -> RangeFilter {
        RangeFilter { words: vec![[0; 3]; (keys * 16).div_ceil(64).max(1)], range_bits }
    }

    /// Zeroes the filters. Also how fresh ones are first written: their
    /// pages are then never first mapped to the shared zero page by a
    /// read and copied on the next write, which costs a fault and a flush
    /// of every core's TLB each.
    fn clear(&mut self) {
        self.words.fill([0; 3]);
    }

    /// [`KeyFilter::word`] of the key's bits below the range's.
    fn word(&self, key: u64) -> usize {
        KeyFilter::word_of(self.words.len(), key << self.range_bits)
    }

    /// Meets `key` (of [`KeyFilter::mask`] `mask`) in one more source's
    /// listing, whose list holds several documents if `several`: sets it
    /// in `seen`, in `shared` if `seen` may have held it or `several`, and
    /// in `listed_again` if `seen` may have held it. Returns whether
    /// `seen` may have held it, and whether it is in `shared` now and
    /// may not have been before; no branch on either.
    fn meet(&mut self, key: u64, mask: u64, several: bool) -> (bool, bool) {
        let w = self.word(key);
        match self.words.get_mut(w) {
            Some([seen, shared, listed_again]) => {
                let again = *seen & mask == mask;
                let was_shared = *shared & mask == mask;
                let is_shared = again | several;
                *seen |= mask;
                *shared |= mask & 0u64.wrapping_sub(u64::from(is_shared));
                *listed_again |= mask & 0u64.wrapping_sub(u64::from(again));
                (again, is_shared & !was_shared)
            }
            None => (true, false),
        }
    }

    /// Whether `shared` and `listed_again` may hold `key` (of
    /// [`KeyFilter::mask`] `mask`); no branch on the outcome.
    fn holds(&self, key: u64, mask: u64) -> (bool, bool) {
        match self.words.get(self.word(key)) {
            Some(&[_, shared, listed_again]) => (shared & mask == mask, listed_again & mask == mask),
            None => (true, true),
        }
    }
}

/// Which segments may hold a key: a Bloom filter whose cells are segment
/// bit sets instead of bits. A key picks a 64-byte block by its top bits
/// (one cache line) and two one-byte cells in it; inserting ORs the bits of
/// the key's segments into both, and a look-up ANDs them: a superset of
/// the key's segments (never fewer, so a join that skips the others stays
/// exact), usually exact. A segment's bit is its position among the
/// snapshot's segments modulo 8: with more than eight, a bit stands for
/// several, which only costs look-ups. Two cells a key incidence: at 1M
/// pages in six segments the join's look-ups that find nothing fell from
/// 12.3 to 0.55 million. Empty (no cells), it says every segment.
#[derive(Debug, Default)]
pub(super) struct SegmentMasks {
    cells: Vec<u8>,
}

impl SegmentMasks {
    const BLOCK: usize = 64;

    /// The segments that may hold each posting key of `segments` (a
    /// snapshot's, not its pending documents): what a single query over
    /// several segments reads to look a signature up only in those. No
    /// merge: each segment ORs its bit into its keys' cells, on all cores
    /// by the key ranges of [`SharedSignatures`], each range with blocks of
    /// its own. With them, in the same walk, the filter of the keys with a
    /// list of several documents in some segment (`Masks::several`; sized
    /// by a first pass over each segment's posting entries). `None` when a
    /// key section is damaged.
    fn of_segments(segments: &BTreeMap<u64, Arc<super::LoadedSegment>>) -> Option<(SegmentMasks, KeyFilter)> {
        use rayon::prelude::*;
        let ranges = 1usize << SharedSignatures::RANGE_BITS;
        let segments: Vec<_> = segments.values().collect();
        let incidences: usize = segments.iter().map(|l| l.segment.posting_key_count()).sum();
        let mut masks = SegmentMasks::sized_in(incidences, ranges);
        let blocks = masks.cells.len() / Self::BLOCK;
        let per_range = masks.cells.len() / ranges;
        // The keys with a list of several documents in some segment,
        // filtered by the same ranges (`Masks::several`).
        let several_keys: usize = segments.par_iter().map(|l| l.segment.several_count()).sum();
        let mut several = KeyFilter::sized_in(several_keys, ranges);
        let words = several.words.len();
        let words_per_range = words / ranges;
        masks
            .cells
            .par_chunks_mut(per_range)
            .zip(several.words.par_chunks_mut(words_per_range))
            .enumerate()
            .try_for_each(|(range, (cells, own_words))| {
                let (lo, hi) = SharedSignatures::range_bounds(range);
                let base = range * per_range;
                let word_base = range * words_per_range;
                // A cell or word outside the range's own (not expected)
                // leaves the masks unbuilt rather than missing a bit.
                let mut inside = true;
                for (position, loaded) in segments.iter().enumerate() {
                    let bit = Self::bit(position);
                    let walked = loaded.segment.for_each_posting_entry_between(lo, hi, |key, only, _| {
                        let (a, b) = Self::cells_of(blocks, key);
                        for at in [a, b] {
                            match at.checked_sub(base).and_then(|i| cells.get_mut(i)) {
                                Some(cell) => *cell |= bit,
                                None => inside = false,
                            }
                        }
                        if only.is_none() {
                            inside &= KeyFilter::set_in_range(own_words, words, word_base, key, KeyFilter::mask(key));
                        }
                        Ok(())
                    });
                    walked.ok()?;
                }
                inside.then_some(())
            })?;
        Some((masks, several))
    }

    /// Masks for about `incidences` (key, segment) pairs, with a block
    /// count that `ranges` (a power of two) divides: the keys of each of
    /// `ranges` equal ranges of their top bits then have blocks of their
    /// own.
    fn sized_in(incidences: usize, ranges: usize) -> SegmentMasks {
        let blocks = (incidences * 2).div_ceil(Self::BLOCK).max(1).next_multiple_of(ranges);
        SegmentMasks { cells: vec![0; blocks * Self::BLOCK] }
    }

    /// The bit of the segment at `position`.
    fn bit(position: usize) -> u8 {
        1 << (position % 8)
    }

    /// The two cells of `key`: its block chosen by its top bits, the cells
    /// in it by a multiplicative remix.
    fn cells(&self, key: u64) -> (usize, usize) {
        Self::cells_of(self.cells.len() / Self::BLOCK, key)
    }

    /// [`SegmentMasks::cells`] in masks of `blocks` blocks.
    fn cells_of(blocks: usize, key: u64) -> (usize, usize) {
        let block = ((u128::from(key) * blocks as u128) >> 64) as usize * Self::BLOCK;
        let h = key.wrapping_mul(0xD1B5_4A32_D192_ED03);
        (block + (h >> 58) as usize, block + ((h >> 52) & 63) as usize)
    }

    /// Asks for the cache line of `key`'s cells (its block; nothing in
    /// the empty masks).
    fn prefetch(&self, key: u64) {
        super::mmap::prefetch_line(&self.cells, self.cells(key).0);
    }

    /// A superset of the bits inserted with `key`.
    fn get(&self, key: u64) -> u8 {
        if self.cells.is_empty() {
            return u8::MAX;
        }
        let (a, b) = self.cells(key);
        self.cells[a] & self.cells[b]
    }
}

/// Which segments may hold a key, as a query's order reads it: the
/// snapshot's [`SegmentMasks`], or a self-join's [`SharedKeys`].
trait SegmentSets {
    /// Asks for the cache line that [`SegmentSets::segments`] reads for
    /// `key`.
    fn prefetch_segments(&self, key: u64);

    /// A superset of the bits of the segments that hold `key`.
    fn segments(&self, key: u64) -> u8;
}

impl SegmentSets for SegmentMasks {
    fn prefetch_segments(&self, key: u64) {
        self.prefetch(key);
    }

    fn segments(&self, key: u64) -> u8 {
        self.get(key)
    }
}

/// A snapshot's [`SegmentMasks`]: built for some of its segments, and the
/// bits of those appended since, which every key names.
#[derive(Debug)]
pub(super) struct Masks {
    cells: Arc<SegmentMasks>,
    extra: u8,
    /// The keys that have a list of several documents in one of the
    /// segments the cells were built for: a key it rules out has a list of
    /// one document at most in each of them ([`Searcher::known_lists`]).
    several: Arc<KeyFilter>,
}

impl SegmentSets for Masks {
    fn prefetch_segments(&self, key: u64) {
        self.cells.prefetch(key);
    }

    fn segments(&self, key: u64) -> u8 {
        self.cells.get(key) | self.extra
    }
}

/// A snapshot's [`SegmentMasks`], shared by its searchers until the
/// segments change (and by the next snapshot when that only appends a
/// segment: [`LazyMasks::appended`]). [`WarmUp::Pages`] builds them; so, without it, does a
/// pool thread once the snapshot's queries over several segments have
/// spent about as long without them as building them takes: rent until the
/// rent paid reaches the price, then buy. (The rent counted is the
/// queries' whole time, not only what the masks would have saved, about
/// half of it at 1M pages, so it buys early rather than late.) Queries go
/// on without them meanwhile, and a snapshot whose segments a merge
/// replaces after a few queries never pays for them.
#[derive(Debug, Default)]
pub(super) struct LazyMasks {
    /// `None` inside when a key section is damaged (queries then look
    /// every signature up in every segment).
    built: std::sync::OnceLock<Option<Masks>>,
    /// Nanoseconds queries over several segments have spent without them.
    spent: AtomicU64,
    /// Whether a query has handed their build to the pool.
    handed: AtomicBool,
    /// What the build is expected to take, in nanoseconds: computed by the
    /// first charge.
    price: std::sync::OnceLock<u64>,
}

impl LazyMasks {
    /// What the build takes, in nanoseconds of CPU a (key, segment)
    /// pair: at 1M pages in five segments, 3.3–4.8 ns a pair on two cores
    /// (SpotSigs' 39.8 million pairs in 0.14–0.19 s, word 3-shingles' 122.9
    /// million in 0.41–0.57 s, the longer times with the key pages still
    /// to map).
    const BUILD_NANOS: u64 = 8;

    /// The masks, once built (and not damaged).
    fn get(&self) -> Option<&Masks> {
        self.built.get().and_then(Option::as_ref)
    }

    /// The masks of the snapshot that a flush or a bulk commit makes by
    /// adding segment `id` to this snapshot's, giving `segments`: when it
    /// comes last (segment ids ascend), this one's, shared, with the new
    /// segment's bit named for every key (a query then looks each of its
    /// signatures up there), so that its queries need not pay for new
    /// ones. Unbuilt when these are, when the new segment does not come
    /// last, or when its bit would stand for a covered segment too (from
    /// the ninth segment on).
    pub(super) fn appended(&self, segments: &BTreeMap<u64, Arc<super::LoadedSegment>>, id: u64) -> Arc<LazyMasks> {
        let covered = segments.len().saturating_sub(1);
        match self.get() {
            Some(masks) if covered < 8 && segments.keys().next_back() == Some(&id) => {
                let lazy = LazyMasks::default();
                let extra = masks.extra | SegmentMasks::bit(covered);
                let cells = Arc::clone(&masks.cells);
                let _ = lazy.built.set(Some(Masks { cells, extra, several: Arc::clone(&masks.several) }));
                Arc::new(lazy)
            }
            _ => Arc::default(),
        }
    }

    /// Whether the build has yet to end.
    fn unsettled(&self) -> bool {
        self.built.get().is_none()
    }

    /// Builds the masks of `segments` unless they are, on this thread and
    /// the pool. Without waiting for a build under way elsewhere (the
    /// later of two is dropped): a wait inside the pool could be for a
    /// build that the waiting thread itself is running.
    fn build(&self, segments: &BTreeMap<u64, Arc<super::LoadedSegment>>) {
        if self.unsettled() {
            let masks = SegmentMasks::of_segments(segments).map(|(cells, several)| Masks {
                cells: Arc::new(cells),
                extra: 0,
                several: Arc::new(several),
            });
            let _ = self.built.set(masks);
        }
    }

    /// Adds `nanos` a query over `segments` spent without the masks: true
    /// for the one query whose time brings the total to what the build
    /// takes.
    fn charge(&self, nanos: u64, segments: &BTreeMap<u64, Arc<super::LoadedSegment>>) -> bool {
        let spent = self.spent.fetch_add(nanos, Ordering::Relaxed).saturating_add(nanos);
        if self.handed.load(Ordering::Relaxed) || !self.unsettled() {
            return false;
        }
        let price = *self.price.get_or_init(|| {
            let pairs: usize = segments.values().map(|l| l.segment.posting_key_count()).sum();
            (pairs as u64).saturating_mul(Self::BUILD_NANOS)
        });
        spent >= price && !self.handed.swap(true, Ordering::Relaxed)
    }
}

/// A query's time without the snapshot's masks, charged to them when it
/// ends: the query that brings their charges to the build's cost hands the
/// build to the pool.
struct Rent<'s> {
    state: &'s Arc<super::State>,
    start: std::time::Instant,
}

impl Drop for Rent<'_> {
    fn drop(&mut self) {
        let nanos = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if self.state.segment_masks.charge(nanos, &self.state.segments) {
            let state = Arc::clone(self.state);
            rayon::spawn(move || state.segment_masks.build(&state.segments));
        }
    }
}

/// The keys several documents may hold, as a self-join's probes read
/// them: a [`KeyFilter`] when one source lists every key (every shared key
/// is in its one segment), else [`JoinBlocks`], each key's filter word and
/// segment cells in one cache line.
#[derive(Debug)]
enum SharedKeys {
    Filter(KeyFilter),
    Blocks(JoinBlocks),
}

impl SharedKeys {
    /// Asks for the cache line of `key`'s filter word (and under
    /// [`SharedKeys::Blocks`] its segment cells).
    fn prefetch(&self, key: u64) {
        match self {
            SharedKeys::Filter(filter) => filter.prefetch(key),
            SharedKeys::Blocks(blocks) => blocks.prefetch(key),
        }
    }

    /// `key`'s filter word ([`KeyFilter::admits`] tests it).
    fn load(&self, key: u64) -> u64 {
        match self {
            SharedKeys::Filter(filter) => filter.load(key),
            SharedKeys::Blocks(blocks) => blocks.word(key),
        }
    }

    /// False only if `key` was never inserted.
    #[cfg(test)]
    fn may_hold(&self, key: u64) -> bool {
        KeyFilter::admits(self.load(key), key)
    }
}

impl SegmentSets for SharedKeys {
    /// `key`'s block under [`SharedKeys::Blocks`]; nothing under
    /// [`SharedKeys::Filter`].
    fn prefetch_segments(&self, key: u64) {
        if let SharedKeys::Blocks(blocks) = self {
            blocks.prefetch(key);
        }
    }

    /// Every segment under [`SharedKeys::Filter`].
    fn segments(&self, key: u64) -> u8 {
        match self {
            SharedKeys::Filter(_) => u8::MAX,
            SharedKeys::Blocks(blocks) => blocks.segments(key),
        }
    }
}

/// A self-join's [`KeyFilter`] and [`SegmentMasks`] in one: a key picks a
/// 64-byte block by its top bits (one cache line: eight words, the first
/// at a line's start), and in it one of the first three words for its
/// filter bits (four set, as [`KeyFilter::mask`]) and two of the 40
/// one-byte segment cells that the other five words' bytes are (as
/// [`SegmentMasks`]). A probe needs the filter word of each of its
/// signatures and the segment cells of those the filter keeps, most of
/// them: in one line, that is one cache miss a signature instead of two,
/// and one read ([`JoinBlocks::word_and_count`]; ARCHITECTURE.md, "The
/// filter and the masks in one line"). Sized for 12 bits a shared key
/// and two cells a (key, segment) incidence, whichever needs more blocks.
#[derive(Debug)]
struct JoinBlocks {
    /// The blocks' words, from `start` on, and up to seven before them:
    /// a `u64` vector is aligned to eight bytes only, and the blocks start
    /// where a cache line does. Zeroed by the allocator, so that no page
    /// is written before a range's build writes it.
    words: Vec<u64>,
    start: usize,
    blocks: usize,
}

impl JoinBlocks {
    /// Words a block.
    const WORDS: usize = 8;
    /// Filter words a block, its first.
    const FILTER: usize = 3;
    /// Segment cells a block: the bytes of its other words.
    const CELLS: usize = (Self::WORDS - Self::FILTER) * 8;

    /// Blocks for about `keys` shared keys and `incidences` (key,
    /// segment) pairs, a count that `ranges` (a power of two) divides: the
    /// keys of each of `ranges` equal ranges of their top bits then have
    /// blocks of their own.
    fn sized_in(keys: usize, incidences: usize, ranges: usize) -> JoinBlocks {
        let by_keys = (keys * 12).div_ceil(Self::FILTER * 64);
        let by_cells = (incidences * 2).div_ceil(Self::CELLS);
        let blocks = by_keys.max(by_cells).max(1).next_multiple_of(ranges);
        let words = vec![0u64; blocks * Self::WORDS + Self::WORDS - 1];
        let start = words.as_ptr().align_offset(64).min(Self::WORDS - 1);
        JoinBlocks { words, start, blocks }
    }

    /// The blocks' words, a block's eight after another's.
    fn block_words_mut(&mut self) -> &mut [u64] {
        let (start, end) = (self.start, self.start + self.blocks * Self::WORDS);
        self.words.get_mut(start..end).unwrap_or_default()
    }

    /// The block of `key` in `blocks` blocks: the key scaled to the count
    /// (so chosen by its top bits).
    fn block_of(blocks: usize, key: u64) -> usize {
        ((u128::from(key) * blocks as u128) >> 64) as usize
    }

    /// The index among its block's words of `key`'s filter word: one of the
    /// first [`JoinBlocks::FILTER`], scaled from 32 bits of the remix below
    /// the 24 that [`KeyFilter::mask`] takes.
    fn word_in(key: u64) -> usize {
        let bits = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 8) & 0xFFFF_FFFF;
        ((bits * Self::FILTER as u64) >> 32) as usize
    }

    /// `key`'s two cells in its block (possibly one), each as the index of
    /// its word in the block and its shift in the word.
    fn cells_in(key: u64) -> [(usize, u32); 2] {
        let h = key.wrapping_mul(0xD1B5_4A32_D192_ED03);
        let cell = |x: u64| {
            let c = (((x & 0xFFFF_FFFF) * Self::CELLS as u64) >> 32) as usize;
            (Self::FILTER + c / 8, (c % 8) as u32 * 8)
        };
        [cell(h >> 32), cell(h)]
    }

    /// Sets `bits` in `key`'s filter word and `segments` in its two cells:
    /// `key` when they are its [`KeyFilter::mask`] and its segment's bit,
    /// nothing when they are zero (with no branch on which). `own` holds
    /// the words of one key range's blocks of `blocks` blocks, from block
    /// `base` on (a key outside them: none).
    fn set_in_range(own: &mut [u64], blocks: usize, base: usize, key: u64, bits: u64, segments: u8) {
        let Some(at) = Self::block_of(blocks, key).checked_sub(base).map(|b| b * Self::WORDS) else {
            return;
        };
        if let Some(block) = own.get_mut(at..at + Self::WORDS) {
            block[Self::word_in(key)] |= bits;
            for (word, shift) in Self::cells_in(key) {
                block[word] |= u64::from(segments) << shift;
            }
        }
    }

    /// Where `key`'s block starts in `words`.
    fn at(&self, key: u64) -> usize {
        self.start + Self::block_of(self.blocks, key) * Self::WORDS
    }

    /// Asks for the cache line of `key`'s block.
    fn prefetch(&self, key: u64) {
        super::mmap::prefetch_line(&self.words, self.at(key));
    }

    /// `key`'s block (none only with no blocks).
    #[inline]
    fn block(&self, key: u64) -> Option<&[u64; Self::WORDS]> {
        let at = self.at(key);
        self.words.get(at..at + Self::WORDS).and_then(|block| block.try_into().ok())
    }

    /// `key`'s filter word in its `block`.
    #[inline]
    fn word_of(block: &[u64; Self::WORDS], key: u64) -> u64 {
        block[Self::word_in(key) % Self::WORDS]
    }

    /// The segment bits that `key`'s two cells in its `block` share.
    #[inline]
    fn cells_of(block: &[u64; Self::WORDS], key: u64) -> u8 {
        let [(a, sa), (b, sb)] = Self::cells_in(key);
        (block[a % Self::WORDS] >> sa) as u8 & (block[b % Self::WORDS] >> sb) as u8
    }

    /// `key`'s filter word (all ones with no blocks).
    fn word(&self, key: u64) -> u64 {
        self.block(key).map_or(u64::MAX, |block| Self::word_of(block, key))
    }

    /// `key`'s filter word and the number of segments its cells name,
    /// read from its block at once (all ones and eight with no blocks).
    #[inline]
    fn word_and_count(&self, key: u64) -> (u64, u8) {
        match self.block(key) {
            Some(block) => (Self::word_of(block, key), Self::cells_of(block, key).count_ones() as u8),
            None => (u64::MAX, 8),
        }
    }

    /// A superset of the segment bits set with `key` (every segment with
    /// no blocks).
    fn segments(&self, key: u64) -> u8 {
        self.block(key).map_or(u8::MAX, |block| Self::cells_of(block, key))
    }
}

/// A Bloom filter of 64-bit hash keys: one 64-bit word a key, chosen by
/// the key's top bits, with four bits set in it; 12 bits a key, so
/// that the filter of a large index still fits a processor's last-level
/// cache better than the index's own key directories. No false
/// negatives; the empty filter (no words) holds every key.
#[derive(Debug, Default)]
struct KeyFilter {
    words: Vec<u64>,
}

impl KeyFilter {
    /// An empty filter for about `keys` keys.
    fn sized(keys: usize) -> KeyFilter {
        Self::sized_in(keys, 1)
    }

    /// As [`KeyFilter::sized`], with a word count that `ranges` (a power
    /// of two) divides: the keys of each of `ranges` equal ranges of their
    /// top bits then have words of their own.
    fn sized_in(keys: usize, ranges: usize) -> KeyFilter {
        KeyFilter { words: vec![0; (keys * 12).div_ceil(64).max(1).next_multiple_of(ranges)] }
    }

    /// The word of `key`: the key scaled to the word count (so chosen by
    /// its top bits).
    fn word(&self, key: u64) -> usize {
        Self::word_of(self.words.len(), key)
    }

    /// [`KeyFilter::word`] in a filter of `words` words.
    fn word_of(words: usize, key: u64) -> usize {
        ((u128::from(key) * words as u128) >> 64) as usize
    }

    /// Four bits of a word, from a multiplicative remix of the key (whose
    /// top bits chose the word).
    fn mask(key: u64) -> u64 {
        let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        1 << (h >> 58) | 1 << ((h >> 52) & 63) | 1 << ((h >> 46) & 63) | 1 << ((h >> 40) & 63)
    }

    fn insert(&mut self, key: u64) {
        let w = self.word(key);
        self.words[w] |= Self::mask(key);
    }

    /// Sets `bits` in `key`'s word: `key` when they are its
    /// [`KeyFilter::mask`], nothing when they are zero (with no branch on
    /// which). `own` holds the words of one key range of a filter of
    /// `words` words, from word `base` on; false, and nothing set, for a
    /// key whose word lies outside them.
    fn set_in_range(own: &mut [u64], words: usize, base: usize, key: u64, bits: u64) -> bool {
        match Self::word_of(words, key).checked_sub(base).and_then(|i| own.get_mut(i)) {
            Some(word) => {
                *word |= bits;
                true
            }
            None => false,
        }
    }

    /// False only if `key` was never inserted. Reads one word, with no
    /// branch on it.
    #[cfg(test)]
    fn may_hold(&self, key: u64) -> bool {
        Self::admits(self.load(key), key)
    }

    /// Asks for the cache line of `key`'s word (nothing in the empty
    /// filter).
    fn prefetch(&self, key: u64) {
        super::mmap::prefetch_line(&self.words, self.word(key));
    }

    /// The word of `key` (all ones in the empty filter).
    fn load(&self, key: u64) -> u64 {
        self.words.get(self.word(key)).copied().unwrap_or(u64::MAX)
    }

    /// Whether `word`, `key`'s word, may hold `key`.
    fn admits(word: u64, key: u64) -> bool {
        let mask = Self::mask(key);
        word & mask == mask
    }
}

/// How much [`Searcher::warm_up`] prepares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WarmUp {
    /// Every segment's key directory (heap memory, about a byte per
    /// distinct signature, built in one sequential pass over each key
    /// section) and the rarity ranks: what the first queries after an open
    /// otherwise build one segment at a time.
    #[default]
    Directories,
    /// The directories (the band keys' too, for [`Searcher::query_lsh`]),
    /// and the pages of every section a query reads (documents, lengths,
    /// vectors, posting keys and lists, band keys and buckets) mapped in
    /// ahead (`MADV_POPULATE_READ` on Linux; elsewhere only the
    /// directories): resident memory grows by about the index's size less
    /// its id and fingerprint tables, and the first queries run as fast as
    /// later ones. With two or more segments, also the segments' masks:
    /// for each posting key, which segments may hold it (two bytes a key
    /// and segment, built on all cores), so that a query looks each
    /// signature up only in those; kept until a merge (a flush that adds
    /// a segment keeps them, and its queries look every signature up in
    /// the new segment, up to eight segments).
    /// Without this warm-up, a pool thread builds them once the snapshot's
    /// queries over several segments have spent about as long without
    /// them as they take to build.
    Pages,
}

/// What a query touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueryStats {
    /// Posting entries walked.
    pub postings_read: u64,
    /// Documents whose vectors were compared with the query.
    pub candidates_verified: u64,
    /// Posting entries never walked because they lie outside the length
    /// window.
    pub pruned_by_window: u64,
    /// Posting entries never walked because of a δ2 list break or the δ1
    /// global break.
    pub pruned_by_bounds: u64,
    /// Delta (unflushed) entries examined: posting entries walked, or
    /// without pruning every pending document.
    pub delta_scanned: u64,
    /// Segment look-ups of query signatures never made, because the δ1
    /// break was certain before their turn or no document of the segment
    /// lies in the window (their lists' entries are not counted in
    /// `pruned_by_bounds` or `pruned_by_window`: nobody read their lengths).
    pub lists_skipped: u64,
    /// Segment look-ups of query signatures never made because their list
    /// there was known to be one document: a document of that segment
    /// found through two of the query's signatures holds them, and the snapshot's
    /// filter of signatures with lists of several says no segment lists
    /// them for several (ARCHITECTURE.md, "Lists a query knows").
    pub lists_known: u64,
}

impl std::ops::AddAssign for QueryStats {
    fn add_assign(&mut self, o: Self) {
        self.postings_read += o.postings_read;
        self.candidates_verified += o.candidates_verified;
        self.pruned_by_window += o.pruned_by_window;
        self.pruned_by_bounds += o.pruned_by_bounds;
        self.delta_scanned += o.delta_scanned;
        self.lists_skipped += o.lists_skipped;
        self.lists_known += o.lists_known;
    }
}

/// A query's `(hash, weight)` pairs in hash order: the weight of a
/// signature is 1 under set Jaccard and its query frequency otherwise.
fn weights(query: &SignatureVector, measure: Similarity) -> impl ExactSizeIterator<Item = (u64, u64)> + Clone + '_ {
    query.iter().map(move |(hash, freq)| (hash, if measure == Similarity::SetJaccard { 1 } else { u64::from(freq) }))
}

/// What a source (a segment or the delta) lacks of a query's signatures.
struct LookedUp {
    /// The summed weight of the signatures it has no list for: those count
    /// as processed from the start (δ1), as no document there can share
    /// them.
    absent: u64,
    /// Signatures not looked up: the δ1 break was certain before their turn.
    skipped: u64,
}

/// Looks up the signatures of `signatures` (in the given order) that come
/// before `enough` says, given the weight visited so far (found or
/// absent alike), that the δ1 break is certain: all at once, as `lookup`
/// gets them, so that a source can overlap their cache misses; `lookup`
/// hands each list it finds, with its signature's position, in order, to
/// the function it is given.
/// `lists` is cleared, then gets each list found: a key for the caller to
/// order them by (0 until it sets it), its signature's weight, the list
/// (a query's segments reuse one vector, sized by the first).
fn weighted_lists<L, E>(
    signatures: &[(u64, u64)],
    enough: impl Fn(u64) -> bool,
    lists: &mut Vec<(u64, u64, L)>,
    lookup: impl FnOnce(&[(u64, u64)], &mut dyn FnMut(usize, L)) -> Result<(), E>,
) -> Result<LookedUp, E> {
    let mut visited = 0;
    let cut = signatures
        .iter()
        .position(|&(_, weight)| {
            let done = enough(visited);
            visited += weight;
            done
        })
        .unwrap_or(signatures.len());
    lists.clear();
    lists.reserve(cut);
    let looked_up = &signatures[..cut];
    let mut found = 0;
    lookup(looked_up, &mut |n, list| {
        let weight = looked_up.get(n).map_or(0, |&(_, weight)| weight);
        found += weight;
        lists.push((0, weight, list));
    })?;
    let absent = looked_up.iter().map(|&(_, weight)| weight).sum::<u64>() - found;
    Ok(LookedUp { absent, skipped: (signatures.len() - cut) as u64 })
}

/// A self-join probe: its query wants only the documents after it in the
/// order of (length under the measure, id). Each pair is then found once,
/// from its shorter side, and the window starts at the probe's own length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct After {
    length: u64,
    id: u64,
}

/// A self-join probe and where its document is (see
/// [`Searcher::join_probes`]); ordered by the probe (ids are unique).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct JoinProbe {
    probe: After,
    place: (u32, u32),
}

/// What every segment's part of one query shares.
struct Plan<'q> {
    query: &'q SignatureVector,
    measure: Similarity,
    window: LengthWindow,
    pruning: Pruning,
    /// The query's `(hash, weight)`: with full pruning in rarity order and
    /// cut where the δ1 break is certain at the plan's threshold (segments
    /// may stop sooner), else all of them in hash order.
    order: &'q [(u64, u64)],
    /// Only documents after this one are wanted (self-join probes).
    after: Option<After>,
    /// The summed weight of the query's signatures that no other document
    /// holds (self-join probes; left out of `order`): processed, in every
    /// source, from the start.
    alone: u64,
    /// With `alone`: for each signature of `order`, the bits of the
    /// segments that may hold it ([`SegmentMasks`]).
    masks: Option<&'q [u8]>,
    /// The union of `masks`: a segment whose bit it lacks is not visited
    /// (most segments of most queries, read from one byte rather than
    /// from every signature's).
    named: u8,
    /// Signatures of `order` whose list in one segment is known
    /// ([`Searcher::known_lists`]): not looked up there.
    known: Option<Known<'q>>,
}

/// Signatures of a query's order whose list in one segment is known to be
/// one document ([`Searcher::known_lists`]): not looked up there (other
/// segments and the pending documents look them up as before).
#[derive(Clone, Copy)]
struct Known<'q> {
    /// The segment's position in the snapshot.
    position: usize,
    /// The document's ordinal in it.
    ordinal: u32,
    /// The signatures' positions in the order, ascending.
    members: &'q [usize],
}

impl Plan<'_> {
    /// Whether a document of length `x` (under the measure) and id `id`
    /// is wanted: always, except after a self-join probe.
    fn wants(&self, x: u64, id: u64) -> bool {
        self.after.is_none_or(|after| After { length: x, id } > after)
    }
}

/// Where a query's verified documents go, and the threshold they must
/// meet: fixed for a threshold query; for top-k, τ_min until `k` matches
/// are held and then the k-th best similarity, rounded down to ppb (never
/// above the true value, so nothing that could still enter is skipped).
struct Sink {
    tau: Threshold,
    keep: Option<usize>,
    matches: Vec<Match>,
    /// A bounded self-join's probe: its segment candidates that pass the
    /// bounds, as (segment position, ordinal), to be verified later in
    /// the order of their vectors ([`Searcher::self_join_within`]), rather
    /// than verified now.
    deferred: Option<Vec<(u32, u32)>>,
}

impl Sink {
    fn threshold(tau: Threshold) -> Sink {
        Sink { tau, keep: None, matches: Vec::new(), deferred: None }
    }

    fn offer(&mut self, id: u64, overlap: Overlap) {
        if !overlap.meets(self.tau) {
            return;
        }
        self.matches.push(Match { id, overlap });
        if let Some(k) = self.keep {
            if self.matches.len() >= 2 * k {
                self.settle(k);
            }
        }
    }

    /// Keeps the best `k` (most similar, then smallest id) and raises the
    /// threshold to the k-th.
    fn settle(&mut self, k: usize) {
        self.matches.sort_by(|x, y| y.overlap.cmp_value(x.overlap).then(x.id.cmp(&y.id)));
        self.matches.truncate(k);
        if self.matches.len() == k {
            let kth = self.matches[k - 1].overlap;
            let ppb = (u128::from(kth.num) * 1_000_000_000 / u128::from(kth.den.max(1))) as u32;
            if ppb > self.tau.ppb() {
                if let Ok(tau) = Threshold::from_ppb(ppb.min(1_000_000_000)) {
                    self.tau = tau;
                }
            }
        }
    }
}

/// The highest bound a document in `window` sharing none of the processed
/// signatures (weight `delta1`) can have: the bound rises with the length
/// x up to x = L − δ1 and falls after it, so it peaks there, or at the
/// window's nearer end when L − δ1 lies outside the window (no candidate
/// has a length outside it).
fn peak_bound(measure: Similarity, window: LengthWindow, len_q: u64, delta1: u64) -> Overlap {
    let x = len_q.saturating_sub(delta1).max(window.min).min(window.max);
    bound(measure, len_q, delta1, x)
}

/// The smallest processed weight δ1 at which [`peak_bound`] fails τ: the
/// point from which the δ1 break is certain (the bound only falls as δ1
/// grows, so a binary search over `0..=L` finds it; at δ1 = L it is 0).
fn break_weight(measure: Similarity, window: LengthWindow, len_q: u64, tau: Threshold) -> u64 {
    let (mut lo, mut hi) = (0, len_q);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if peak_bound(measure, window, len_q, mid).meets(tau) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The length window of a query of length `len_q` at `tau`; a self-join
/// probe's starts at its own length (`after`).
fn query_window(measure: Similarity, len_q: u64, tau: Threshold, after: Option<After>) -> LengthWindow {
    let mut window = LengthWindow::new(measure, len_q, tau);
    if let Some(after) = after {
        window.min = window.min.max(after.length);
    }
    window
}

/// The bound on the similarity of a document of length `x` that shares
/// none of the processed signatures (module documentation).
fn bound(measure: Similarity, len_q: u64, delta1: u64, x: u64) -> Overlap {
    let m = x.min(len_q.saturating_sub(delta1));
    match measure {
        Similarity::Containment => Overlap { num: m, den: len_q },
        _ => Overlap { num: m, den: len_q + x - m },
    }
}

impl Searcher {
    /// Every live document with `sim(query, d) ≥ τ` under the index's
    /// similarity, in ascending id order: exact, with the paper's pruning.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] for damaged segments.
    pub fn query(&self, query: &SignatureVector, tau: Threshold) -> Result<Vec<Match>, IndexError> {
        Ok(self.query_with(query, tau, Pruning::Full)?.0)
    }

    /// [`Searcher::query`] for a document given as a writer is given one
    /// (text, HTML, or signatures made with the index's configuration):
    /// "which stored documents are at least τ similar to this one?".
    ///
    /// # Errors
    /// As [`Searcher::query`].
    pub fn query_document(&self, document: super::Document<'_>, tau: Threshold) -> Result<Vec<Match>, IndexError> {
        self.query(&super::sign_document(self.signer(), document).vector, tau)
    }

    /// [`Searcher::query`] for the document stored under `key` (it is not
    /// part of its own answer); `None` when no document has that key.
    ///
    /// # Errors
    /// As [`Searcher::query`].
    pub fn query_key(&self, key: &str, tau: Threshold) -> Result<Option<Vec<Match>>, IndexError> {
        let Some(doc) = self.get(key)? else { return Ok(None) };
        let mut matches = self.query(&doc.vector, tau)?;
        matches.retain(|m| m.id != doc.id);
        Ok(Some(matches))
    }

    /// [`Searcher::query`] with a chosen pruning, returning what it touched.
    ///
    /// # Errors
    /// As [`Searcher::query`].
    pub fn query_with(
        &self,
        query: &SignatureVector,
        tau: Threshold,
        pruning: Pruning,
    ) -> Result<(Vec<Match>, QueryStats), IndexError> {
        let mut sink = Sink::threshold(tau);
        let stats = self.run_query(query, pruning, &mut sink, None, None)?;
        let mut out = sink.matches;
        out.sort_unstable_by_key(|m| m.id);
        Ok((out, stats))
    }

    /// Runs a query over every segment and the delta into `sink`, whose
    /// threshold may rise as matches arrive (top-k); with `after`, only
    /// documents after that probe are wanted, and `shared`, if given,
    /// holds every signature that another document than the probe may
    /// hold.
    fn run_query(
        &self,
        query: &SignatureVector,
        pruning: Pruning,
        sink: &mut Sink,
        after: Option<After>,
        shared: Option<&SharedSignatures>,
    ) -> Result<QueryStats, IndexError> {
        // A single query over several segments without the snapshot's
        // masks pays towards their build (`LazyMasks`), on every return.
        let unmasked = after.is_none()
            && pruning == Pruning::Full
            && self.state.segments.len() > 1
            && self.state.segment_masks.unsettled();
        let _rent = unmasked.then(|| Rent { state: &self.state, start: std::time::Instant::now() });
        let measure = self.signer.config().similarity;
        let len_q = measure.length(query);
        let mut stats = QueryStats::default();
        if len_q == 0 {
            return Ok(stats);
        }
        // The window of the lowest threshold the sink can have: a rising
        // threshold only prunes more through the bounds.
        let window = query_window(measure, len_q, sink.tau, after);
        let (order, alone) = if pruning == Pruning::Full && !self.state.segments.is_empty() {
            let ranks = self.state.ranks.get_or_init(|| Ranks::build(self.state.segments.values().map(|l| &l.segment)));
            let stop = break_weight(measure, window, len_q, sink.tau);
            let enough = |visited| visited >= stop;
            // In one segment the masks only say held or not, and a
            // stored page's signatures are all held: reading every mask
            // first cost more than it saved there.
            let several = self.state.segments.len() > 1;
            let (order, alone) = match (shared.filter(|_| after.is_some()), self.state.segment_masks.get()) {
                (None, Some(segment_masks)) if several => {
                    (ranks.order_by_segments(weights(query, measure), 0, segment_masks, enough), 0)
                }
                (shared, _) => ranks.order(query, measure, shared, several, enough),
            };
            if order.is_empty() && alone >= stop {
                // The δ1 break is certain everywhere before any list: no
                // document can meet τ (for most self-join probes).
                stats.lists_skipped = query.distinct() * (self.state.segments.len() as u64);
                return Ok(stats);
            }
            (order, alone)
        } else {
            (weights(query, measure).collect(), 0)
        };
        // Each signature of `order` with the segments that may hold it: a
        // self-join probe's shared signatures, or a query's once the
        // snapshot's masks are built.
        let mut buffers = SegmentBuffers::take();
        let mut masks = std::mem::take(&mut buffers.masks);
        let segment_masks: Option<&dyn SegmentSets> = match (shared, after) {
            _ if pruning != Pruning::Full => None,
            (Some(shared), Some(_)) => Some(&shared.keys),
            _ => self.state.segment_masks.get().map(|masks| masks as &dyn SegmentSets),
        };
        if let Some(segment_masks) = segment_masks {
            masks.extend(order.iter().map(|&(hash, _)| segment_masks.segments(hash)));
        }
        // A single query's signatures whose list in one segment is known
        // to be one document it holds: not looked up there.
        let mut known = std::mem::take(&mut buffers.known);
        let found = match (after, self.state.segment_masks.get()) {
            (None, Some(snapshot)) if pruning == Pruning::Full && segment_masks.is_some() => {
                self.known_lists(&order, &masks, snapshot, &mut known, &mut buffers.wanted)?
            }
            _ => None,
        };
        let plan = Plan {
            query,
            measure,
            window,
            pruning,
            order: &order,
            after,
            alone,
            masks: segment_masks.map(|_| masks.as_slice()),
            named: masks.iter().fold(0, |named, &m| named | m),
            known: found.map(|(position, ordinal)| Known { position, ordinal, members: &known }),
        };
        // The segments' walks share one set of buffers.
        for (position, loaded) in self.state.segments.values().enumerate() {
            self.query_segment(&loaded.segment, position, &plan, sink, &mut stats, &mut buffers)?;
        }
        self.query_delta(&plan, sink, &mut stats);
        buffers.masks = masks;
        buffers.known = known;
        buffers.give_back();
        give_back_order(order);
        Ok(stats)
    }

    /// The delta's part of a query ([`query_pending`] over this
    /// snapshot's delta and the shared postings; an empty delta does not
    /// take the postings' lock).
    fn query_delta(&self, plan: &Plan<'_>, sink: &mut Sink, stats: &mut QueryStats) {
        if self.state.delta.is_empty() {
            return;
        }
        let index = super::delta::read(&self.state.delta_index);
        query_pending(&*self.state.delta, &index, plan, sink, stats);
    }

    /// The part of a query in `segment`, at `position` among the
    /// snapshot's segments.
    fn query_segment<'s>(
        &self,
        segment: &'s super::segment::Segment<super::mmap::SegmentBytes>,
        position: usize,
        plan: &Plan<'_>,
        sink: &mut Sink,
        stats: &mut QueryStats,
        buffers: &mut SegmentBuffers<'s>,
    ) -> Result<(), IndexError> {
        let &Plan { query, measure, window, pruning, order, alone, masks, named, known, .. } = plan;
        let known = known.filter(|known| known.position == position);
        let SegmentBuffers { lists, walk, candidates, verify, selected, .. } = buffers;
        // The positions in the order of the signatures whose masks name
        // this segment: the only ones it looks up, since no document of it
        // holds the others. Masks come with full pruning only, whose order
        // reaches the δ1 break, so a document that can meet τ holds one of
        // its signatures: when the masks name the segment for none of
        // them, the segment is not visited (with SpotSigs at 1M pages in
        // five segments, three visits of four of single queries;
        // ARCHITECTURE.md).
        let selected = match masks {
            Some(masks) => {
                let bit = SegmentMasks::bit(position);
                selected.clear();
                if named & bit != 0 {
                    // Less the known ones (ascending too), not looked up.
                    let mut members = known.map_or(&[][..], |k| k.members).iter().peekable();
                    selected.extend(masks.iter().enumerate().filter(|&(_, &m)| m & bit != 0).map(|(n, _)| n).filter(
                        |&n| {
                            let is_known = members.next_if_eq(&&n).is_some();
                            !is_known
                        },
                    ));
                }
                if selected.is_empty() && known.is_none() {
                    stats.lists_skipped += query.distinct();
                    return Ok(());
                }
                Some(&*selected)
            }
            None => None,
        };
        // Ordinals are in ascending multiset length, so for the multiset
        // measures the window is an ordinal range and lists ascend in
        // length. Under set Jaccard the length is the distinct count, which
        // the order does not follow: the window is then checked per
        // document (from the segment's array of distinct counts), but no
        // document's distinct count exceeds its multiset length, so those
        // shorter than the window's start are left out as a range (in a
        // self-join, whose windows start at the probe's own length, a fifth
        // of the postings the lists hold).
        let ordered = measure != Similarity::SetJaccard;
        let range = match (pruning, ordered) {
            (Pruning::None, _) => 0..segment.doc_count(),
            (_, true) => segment.length_range(window.min, window.max),
            (_, false) => segment.length_range(window.min, u64::MAX),
        };
        if range.is_empty() {
            // No document of the segment lies in the window.
            stats.lists_skipped += query.distinct();
            return Ok(());
        }
        let len_q = measure.length(query);
        let full = pruning == Pruning::Full;
        // With full pruning, look-ups (in rarity order) stop once the weight
        // visited, found or absent, fails the bound: the walk below would
        // break before any later list.
        let stop = if full { break_weight(measure, window, len_q, sink.tau) } else { u64::MAX };
        let enough = |visited| alone + visited >= stop;
        let mut known_here = 0;
        let LookedUp { absent, skipped } = weighted_lists(order, enough, lists, |signatures, each| match selected {
            // The selected signatures before the cut go to the look-up. The
            // order puts the signatures the fewest segments hold first, so
            // each segment's share of it is small, and every signature
            // handed over costs an entry in each of the look-up's stages.
            Some(selected) => {
                let selected = &selected[..selected.partition_point(|&n| n < signatures.len())];
                let hashes = selected.iter().map(|&n| signatures[n].0);
                segment.posting_lists_each(hashes, |at, list| {
                    if let Some(&n) = selected.get(at) {
                        each(n, list);
                    }
                })?;
                // The known signatures' list here is their one holder.
                if let Some(known) = known {
                    for &n in known.members.iter().take_while(|&&n| n < signatures.len()) {
                        each(n, super::segment::PostingList::Single(known.ordinal));
                        known_here += 1;
                    }
                }
                Ok(())
            }
            None => segment.posting_lists_each(signatures.iter().map(|&(hash, _)| hash), each),
        })?;
        stats.lists_known += known_here;
        let absent = absent + alone;
        // Signatures past the cut of the order are skipped as well.
        stats.lists_skipped += skipped + (query.distinct() - order.len() as u64);
        for (inside, _, bitmap) in lists.iter_mut() {
            *inside = bitmap.count_in(range.clone());
            stats.pruned_by_window += bitmap.len() - *inside;
        }
        // Ascending document frequency inside the window (Algorithm 1, line
        // 5), ties in rarity order: each list's count and position packed
        // into one key (a count is below 2^32, as a segment's ordinals),
        // which sort faster than the lists themselves and in the order a
        // stable sort of them by count would give.
        walk.clear();
        walk.extend(lists.iter().enumerate().map(|(n, l)| l.0 << 32 | n as u64));
        walk.sort_unstable();
        // Without full pruning a document is verified when first met. With
        // it, a document whose bound meets τ when first met becomes a
        // candidate that collects the weight of every processed list
        // holding it; after the walk its overlap is at most that weight
        // plus the unprocessed rest (L − δ1), and only candidates whose
        // bound on that still meets τ are verified. Those sharing a single
        // rare signature with the query, the bulk, never are.
        let mut checked = RoaringBitmap::new();
        candidates.clear();
        let mut delta1 = absent;
        for (n, &key) in walk.iter().enumerate() {
            let (inside, weight, bitmap) = &lists[(key & u64::from(u32::MAX)) as usize];
            if delta1 >= stop {
                // δ1 break: once the bound fails at its peak (at x = L − δ1,
                // where it is (L − δ1) / L, or at the window's nearer end),
                // no unseen document can reach τ.
                stats.pruned_by_bounds += walk[n..].iter().map(|&k| k >> 32).sum::<u64>();
                break;
            }
            let mut walked = 0u64;
            let mut cut = None;
            for ordinal in bitmap.iter_in(range.clone()) {
                walked += 1;
                if let Some(c) = candidates.get_mut(&ordinal) {
                    c.0 += weight;
                    continue;
                }
                if checked.contains(ordinal) {
                    continue;
                }
                let x = if measure == Similarity::SetJaccard {
                    u64::from(segment.distinct_of(ordinal)?)
                } else {
                    match segment.length_at(ordinal) {
                        Some(length) => length,
                        None => segment.entry(ordinal)?.length,
                    }
                };
                if pruning != Pruning::None && !ordered && !window.contains(x) {
                    continue;
                }
                if !full {
                    checked.insert(ordinal);
                    self.verify_ordinal(segment, ordinal, x, plan, sink, stats)?;
                } else if bound(measure, len_q, delta1, x).meets(sink.tau) {
                    candidates.insert(ordinal, (*weight, x));
                } else if ordered && x > len_q.saturating_sub(delta1) {
                    // δ2 break: the bound only falls from here on.
                    stats.pruned_by_bounds += inside - walked;
                    cut = Some(ordinal);
                    break;
                }
            }
            if let Some(cut) = cut {
                // Candidates met earlier that this list holds past the cut
                // still collect its weight.
                for (&ordinal, c) in candidates.iter_mut() {
                    if ordinal > cut && bitmap.contains(ordinal) {
                        c.0 += *weight;
                    }
                }
            }
            stats.postings_read += walked;
            delta1 += weight;
        }
        verify.clear();
        verify.extend(candidates.drain());
        verify.sort_unstable_by_key(|c| c.0);
        let before = verify.len();
        verify.retain(|&(_, (held, x))| bound(measure, len_q, delta1.saturating_sub(held), x).meets(sink.tau));
        stats.pruned_by_bounds += (before - verify.len()) as u64;
        if let Some(deferred) = sink.deferred.as_mut() {
            // A bounded self-join's probe: the wanted survivors are
            // verified later, in the order of their vectors.
            let position = u32::try_from(position).unwrap_or(u32::MAX);
            for &(ordinal, (_, x)) in verify.iter() {
                let id = segment.entry(ordinal)?.id;
                if !self.state.deleted.contains(id) && plan.wants(x, id) {
                    deferred.push((position, ordinal));
                }
            }
            return Ok(());
        }
        // The survivors' entries and vectors asked for first, all of them, so
        // that their cache misses overlap rather than come one
        // verification at a time.
        segment.touch_vectors(verify.iter().map(|c| c.0), measure);
        for &(ordinal, (_, x)) in verify.iter() {
            self.verify_ordinal(segment, ordinal, x, plan, sink, stats)?;
        }
        Ok(())
    }

    /// The signatures of a single query's `order` whose one holder in a
    /// segment is known without looking them up there, into `known`
    /// (positions in the order, ascending), and that holder (its
    /// segment's position, its ordinal); `None` when there are none.
    ///
    /// The first two signatures of the order that the snapshot's masks
    /// name one segment (the same) alone for are looked up there; if both
    /// lists there are the same one document, its vector is merged with
    /// every signature of the order that the masks name that segment for.
    /// Each it holds that no segment lists for several documents
    /// (`Masks::several`, built for every segment of the snapshot: none
    /// appended since) has a list there of one document, which it holds:
    /// that document is what the look-up there would find, and the answer
    /// is unchanged. Every other segment the masks name still looks it
    /// up. Most of a stored page's signatures are its own alone, and so
    /// are many of a new page's that copy one.
    fn known_lists(
        &self,
        order: &[(u64, u64)],
        masks: &[u8],
        snapshot: &Masks,
        known: &mut Vec<usize>,
        wanted: &mut Vec<(u64, usize)>,
    ) -> Result<Option<(usize, u32)>, IndexError> {
        known.clear();
        if snapshot.extra != 0 || self.state.segments.len() < 2 {
            return Ok(None);
        }
        let Some(start) = masks.iter().position(|m| m.count_ones() == 1) else {
            return Ok(None);
        };
        let bit = masks[start];
        let position = bit.trailing_zeros() as usize;
        let Some(loaded) = self.state.segments.values().nth(position) else {
            return Ok(None);
        };
        let segment = &loaded.segment;
        // The seeds: the first two signatures the masks name that segment
        // alone for, looked up together. Only when both lists there are
        // the same one document is it merged with the rest (a page whose
        // signatures are not mostly one stored page's, most new pages,
        // pays for no merge).
        let mut seeds = masks.iter().zip(order).skip(start).filter(|&(&m, _)| m == bit).map(|(_, &(hash, _))| hash);
        let (Some(first), Some(second)) = (seeds.next(), seeds.next()) else {
            return Ok(None);
        };
        let mut holders = [None; 2];
        segment.posting_lists_each([first, second], |at, list| {
            if let (Some(holder), super::segment::PostingList::Single(ordinal)) = (holders.get_mut(at), list) {
                *holder = Some(ordinal);
            }
        })?;
        let [Some(ordinal), Some(other)] = holders else {
            return Ok(None);
        };
        if ordinal != other {
            return Ok(None);
        }
        wanted.clear();
        wanted.extend(masks.iter().enumerate().filter(|&(_, &m)| m & bit != 0).map(|(n, _)| (order[n].0, n)));
        wanted.sort_unstable();
        segment.holds_each(segment.entry(ordinal)?, wanted, |n| known.push(n))?;
        // Of those, the ones no segment lists for several documents: each
        // filter word asked for first, so that their misses overlap.
        let several = &snapshot.several;
        known.iter().for_each(|&n| several.prefetch(order[n].0));
        known.retain(|&n| {
            let hash = order[n].0;
            !KeyFilter::admits(several.load(hash), hash)
        });
        known.sort_unstable();
        Ok((!known.is_empty()).then_some((position, ordinal)))
    }

    /// Verifies one segment document (of length `x`) against the query,
    /// unless deleted or not wanted.
    fn verify_ordinal(
        &self,
        segment: &super::segment::Segment<super::mmap::SegmentBytes>,
        ordinal: u32,
        x: u64,
        plan: &Plan<'_>,
        sink: &mut Sink,
        stats: &mut QueryStats,
    ) -> Result<(), IndexError> {
        let entry = segment.entry(ordinal)?;
        let id = entry.id;
        if !self.state.deleted.contains(id) && plan.wants(x, id) {
            stats.candidates_verified += 1;
            // A candidate whose merge shows it cannot meet the sink's
            // threshold is not offered (the sink would refuse it).
            if let Some(overlap) = segment.overlap_reaching(entry, plan.query, plan.measure, sink.tau)? {
                sink.offer(id, overlap);
            }
        }
        Ok(())
    }

    /// Candidates from the LSH band buckets (documents sharing at least one
    /// band key with the query), each verified against its stored vector:
    /// no false positives; recall below 1 by the S-curve of the banding.
    ///
    /// # Errors
    /// As [`Searcher::query`].
    pub fn query_lsh(&self, query: &DocumentSignature, tau: Threshold) -> Result<Vec<Match>, IndexError> {
        let measure = self.signer.config().similarity;
        let mut out = Vec::new();
        let mut candidates = Vec::new();
        for loaded in self.state.segments.values() {
            let segment = &loaded.segment;
            // The buckets are read in place and their ordinals gathered,
            // then each candidate is verified once, in place.
            candidates.clear();
            for bucket in segment.band_lists(&query.band_keys)?.into_iter().flatten() {
                candidates.extend(bucket.iter_in(0..segment.doc_count()));
            }
            candidates.sort_unstable();
            candidates.dedup();
            for &ordinal in &candidates {
                let entry = segment.entry(ordinal)?;
                if self.state.deleted.contains(entry.id) {
                    continue;
                }
                // A candidate that cannot meet τ ends its merge early (one
                // outside the length window before it starts).
                if let Some(overlap) = segment.overlap_reaching(entry, &query.vector, measure, tau)? {
                    out.push(Match { id: entry.id, overlap });
                }
            }
        }
        if !self.state.delta.is_empty() {
            let index = super::delta::read(&self.state.delta_index);
            let mut candidates: Vec<u64> = (0u32..)
                .zip(&query.band_keys)
                .filter_map(|(band, &key)| index.bucket(band, key))
                .flatten()
                .copied()
                .collect();
            candidates.sort_unstable();
            candidates.dedup();
            for id in candidates {
                let Some(doc) = self.state.delta.get(&id) else { continue };
                let overlap = measure.overlap(&query.vector, &doc.vector);
                if overlap.meets(tau) {
                    out.push(Match { id, overlap });
                }
            }
        }
        out.sort_unstable_by_key(|m| m.id);
        Ok(out)
    }

    /// Recall of [`Searcher::query_lsh`] against the exact query, over the
    /// live documents whose ids are among `sample` used as queries: matches
    /// found by LSH divided by exact matches (1.0 when there are none). A
    /// query's match with its own document, which both paths always find,
    /// is not counted.
    ///
    /// # Errors
    /// As [`Searcher::query`].
    pub fn lsh_recall_audit(&self, sample: &[u64], tau: Threshold) -> Result<LshRecall, IndexError> {
        let mut report = LshRecall::default();
        for &id in sample {
            let Some(doc) = self.get_by_id(id)? else { continue };
            let signature = self.signer.sign_vector(doc.vector.clone(), doc.fingerprint);
            let others = |matches: Vec<Match>| matches.iter().filter(|m| m.id != id).count() as u64;
            report.queries += 1;
            report.exact_matches += others(self.query(&doc.vector, tau)?);
            report.lsh_matches += others(self.query_lsh(&signature, tau)?);
        }
        Ok(report)
    }
}

/// The outcome of [`Searcher::lsh_recall_audit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LshRecall {
    /// Queries run.
    pub queries: u64,
    /// Matches the exact query found (other than the query's document).
    pub exact_matches: u64,
    /// Matches the LSH query found (other than the query's document; all
    /// of them true: LSH results are verified).
    pub lsh_matches: u64,
}

impl LshRecall {
    /// `lsh_matches / exact_matches`, 1.0 when nothing matched.
    pub fn recall(&self) -> f64 {
        if self.exact_matches == 0 {
            1.0
        } else {
            self.lsh_matches as f64 / self.exact_matches as f64
        }
    }
}

/// One cluster of near-duplicates: the connected component of the
/// near-duplicate graph at some τ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// The smallest document id in the cluster (stable across runs).
    pub representative: u64,
    /// Every member, ascending (the representative included).
    pub members: Vec<u64>,
}

/// Documents per unit of parallel work in the self-join: bounds the pairs
/// held in memory before they are handed out in order. Each chunk ends
/// with a wait for its slowest probes, while the other core has none left
/// to take: with 512 a chunk, the SpotSigs join in five segments at 1M
/// pages ran 1,953 such waits and took about a tenth longer (HISTORY.md,
/// "Fewer waits in the self-join").
const JOIN_CHUNK: usize = 8192;

/// How many deferred candidates a bounded self-join holds before it
/// verifies them ([`Searcher::self_join_within`]).
const JOIN_DEFERRED: usize = 8 << 20;

/// The signatures below which a parallel step of a self-join or a warm-up
/// runs on the calling thread ([`least_split`]): handing a step to
/// rayon's threads and waiting for them costs a wake-up and a sleep on
/// each side, more than a step over a few thousand signatures. Self-joins
/// of the first real pages of `../shared/data` in three segments, on two
/// cores, each way: on this thread 0.80–0.82 of the time of both threads
/// at 1,107–2,871 SpotSigs signatures (10–25 pages), 0.82–1.02 at
/// 3,873–8,017, 1.44 at 12,051; word 3-shingles 1.13 already at 3,710
/// (3 pages).
const SEQUENTIAL_BELOW: usize = 1 << 12;

/// The fewest items a parallel step over `work` signatures hands a
/// thread (rayon's `with_min_len`): all of them, so that the step runs on
/// the calling thread with no hand-over, below [`SEQUENTIAL_BELOW`];
/// else one (rayon's own splitting).
fn least_split(work: usize) -> usize {
    if work < SEQUENTIAL_BELOW {
        usize::MAX
    } else {
        1
    }
}

/// A bounded self-join's deferred candidate: the probe (its index among
/// the join's probes) and the candidate's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Deferred {
    probe: usize,
    position: u32,
    ordinal: u32,
}

/// A bounded self-join's chunk of probes (their indices among the join's
/// probes) and their sinks, waiting to be gathered.
type ChunkSinks<'r> = (&'r [usize], Vec<Result<Sink, IndexError>>);

/// The pair of a self-join probe and one of its matches.
fn joined(JoinProbe { probe, .. }: JoinProbe, m: Match) -> crate::oracle::Pair {
    crate::oracle::Pair { a: probe.id.min(m.id), b: probe.id.max(m.id), overlap: m.overlap }
}

/// The segments' hashes sections taken as one run of bytes, in segment
/// order, cut into blocks of `block` bytes: what a bounded self-join
/// verifies from at a time ([`Searcher::self_join_within`]).
struct VectorBlocks {
    /// Where each segment's hashes start in the run.
    bases: Vec<usize>,
    /// The run's length.
    total: usize,
    /// The bytes of a block; `None` when every vector fits in the join's
    /// memory (one block, nothing released).
    block: Option<usize>,
}

impl VectorBlocks {
    fn sized(segments: &[&Arc<super::LoadedSegment>], mapped: usize) -> VectorBlocks {
        let mut bases = Vec::with_capacity(segments.len());
        let mut total = 0usize;
        for loaded in segments {
            bases.push(total);
            total += loaded.segment.hashes_len();
        }
        let block = (total > mapped).then_some((mapped / 2).max(1));
        VectorBlocks { bases, total, block }
    }

    fn bounded(&self) -> bool {
        self.block.is_some()
    }

    /// Where the vector at `place` starts in the run (its end for a
    /// pending document's place).
    fn offset_of(
        &self,
        segments: &[&Arc<super::LoadedSegment>],
        (position, ordinal): (u32, u32),
    ) -> Result<usize, IndexError> {
        match (segments.get(position as usize), self.bases.get(position as usize)) {
            (Some(loaded), Some(&base)) => Ok(base + loaded.segment.entry(ordinal)?.hash_bytes().start),
            _ => Ok(self.total),
        }
    }

    /// The block of the vector at `place`.
    fn block_of(&self, segments: &[&Arc<super::LoadedSegment>], place: (u32, u32)) -> Result<usize, IndexError> {
        match self.block {
            Some(block) => Ok(self.offset_of(segments, place)? / block),
            None => Ok(0),
        }
    }

    /// Releases the vectors in `range` of the run.
    fn release_run(&self, segments: &[&Arc<super::LoadedSegment>], range: std::ops::Range<usize>) {
        for (loaded, &base) in segments.iter().zip(&self.bases) {
            let len = loaded.segment.hashes_len();
            if range.start < base + len && base < range.end {
                loaded.segment.release_hashes(range.start.saturating_sub(base)..(range.end - base).min(len));
            }
        }
    }

    /// Releases the vectors of block `n`.
    fn release(&self, segments: &[&Arc<super::LoadedSegment>], n: usize) {
        if let Some(block) = self.block {
            self.release_run(segments, n * block..(n + 1) * block);
        }
    }

    /// Releases the vectors between `passed` (the run's bytes released so
    /// far) and the one at `place`, and moves `passed` there.
    fn release_before(
        &self,
        segments: &[&Arc<super::LoadedSegment>],
        place: (u32, u32),
        passed: &mut usize,
    ) -> Result<(), IndexError> {
        if !self.bounded() {
            return Ok(());
        }
        let until = self.offset_of(segments, place)?;
        if until > *passed {
            self.release_run(segments, *passed..until);
            *passed = until;
        }
        Ok(())
    }
}

impl Searcher {
    /// Drops this process's mapping of the pages of the snapshot's
    /// segments that queries, a warm-up or a join mapped in, leaving them
    /// to the page cache (which the kernel may reclaim): resident memory
    /// falls by that much, and later reads map them again, from the cache
    /// or the file. The heap structures a warm-up built stay. For a
    /// process that goes on to other work, or before
    /// [`Searcher::self_join_within`] (which does it itself when it
    /// bounds its memory). The answers never depend on it.
    pub fn release_pages(&self) {
        self.state.segments.values().for_each(|loaded| loaded.segment.release());
    }

    /// Prepares this snapshot for queries now rather than at the first
    /// ones, which otherwise pay for it: builds the key directory of every
    /// segment without one (on all cores), under set Jaccard its distinct
    /// counts, and the rarity ranks, and with [`WarmUp::Pages`] the
    /// segments' masks and has the kernel map in the pages queries read.
    /// A long-running process calls it after [`Index::open`](super::Index::open)
    /// or [`Index::reload`](super::Index::reload); the self-join calls it
    /// itself. The answers never depend on it.
    pub fn warm_up(&self, warm_up: WarmUp) {
        use super::segment::SectionKind as S;
        use rayon::prelude::*;
        // The frequencies last: set Jaccard leaves them out.
        const READ_BY_QUERIES: [S; 11] = [
            S::PostingKeys,
            S::BandKeys,
            S::Docs,
            S::Lengths,
            S::Hashes,
            S::PostingOffsets,
            S::PostingData,
            S::BandOffsets,
            S::BandData,
            S::Freqs,
            S::FreqEscapes,
        ];
        // Under set Jaccard no query reads a frequency (Segment::overlap,
        // Segment::vector_for): those pages stay unmapped.
        let set_jaccard = self.signer.config().similarity == Similarity::SetJaccard;
        let read: &[S] = if set_jaccard { &READ_BY_QUERIES[..READ_BY_QUERIES.len() - 2] } else { &READ_BY_QUERIES };
        let segments: Vec<_> = self.state.segments.values().collect();
        let keys = segments.iter().map(|l| l.segment.posting_key_count()).sum();
        segments.par_iter().with_min_len(least_split(keys)).for_each(|loaded| {
            let segment = &loaded.segment;
            // Pages first: building a directory reads its whole key
            // section, faster once the pages are mapped in one call.
            if warm_up == WarmUp::Pages {
                segment.populate(read);
                segment.prepare_band_lookups();
            } else if !segment.lookups_prepared() {
                segment.populate(&[S::PostingKeys]);
            }
            segment.prepare_lookups();
            // Set Jaccard's walks read each posting's distinct count.
            if set_jaccard {
                segment.prepare_distinct_counts();
            }
        });
        if !segments.is_empty() {
            self.state.ranks.get_or_init(|| Ranks::build(segments.iter().map(|l| &l.segment)));
        }
        // Which segments hold each key, so that a query looks a signature
        // up only in those (damaged keys: none, and queries look up all).
        if warm_up == WarmUp::Pages && segments.len() > 1 {
            self.state.segment_masks.build(&self.state.segments);
        }
    }

    /// Ids of every live document, ascending (the order in which they
    /// were inserted), read from the segments' entries and the delta
    /// without their vectors.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] for damaged segments.
    pub fn live_ids(&self) -> Result<Vec<u64>, IndexError> {
        let mut ids = Vec::with_capacity(self.len() as usize);
        // From the segments' entries: their vectors are not read.
        self.for_each_live_entry(|_, _, _, entry| {
            ids.push(entry.id);
            Ok(())
        })?;
        ids.extend(self.state.delta.keys());
        ids.sort_unstable();
        Ok(ids)
    }

    /// Calls `emit` with every pair `(a, b)`, `a < b`, of live documents
    /// with `sim ≥ τ`, each exactly once, in a deterministic order: grouped
    /// by the pair's shorter document (under the measure; the smaller id
    /// between equal lengths), the groups in ascending (length, id), each
    /// group by ascending id of the other document. The work runs on all
    /// cores in chunks of documents; only one chunk's pairs are held at a
    /// time.
    ///
    /// When the snapshot's segments are larger than the memory this
    /// process can have ([`Searcher::join_memory`]), the join is
    /// [`Searcher::self_join_within`] half that memory: the same pairs in
    /// the same order, without thrashing the page cache.
    ///
    /// Each document's query asks only for the documents after it in that
    /// order: its window starts at its own length and the δ1 break comes
    /// sooner (the bound peaks at the document's own length, at
    /// `(L − δ1) / (L + δ1)`), so every pair is found and verified once.
    ///
    /// # Errors
    /// [`IndexError::Unsupported`] under containment (not symmetric);
    /// corruption errors.
    pub fn self_join(&self, tau: Threshold, emit: impl FnMut(crate::oracle::Pair)) -> Result<(), IndexError> {
        match self.join_memory() {
            Some(mapped) => self.self_join_within(tau, mapped, emit),
            None => self.self_join_in_chunks(tau, JOIN_CHUNK, emit),
        }
    }

    /// The bytes of vectors [`Searcher::self_join`] and
    /// [`Searcher::clusters`] keep mapped: `None`, the whole index, when
    /// the snapshot's segments ([`Searcher::segment_bytes`]) fit in the
    /// memory this process can have now ([`super::available_memory`]: the
    /// kernel's `MemAvailable`, or the memory cgroup's limit when less) or
    /// that memory is unknown; else half of it, at least
    /// [`Searcher::LEAST_MAPPED`]. Segments of no more than that are
    /// joined whole without reading the memory.
    pub fn join_memory(&self) -> Option<usize> {
        super::budget::join_mapped(self.segment_bytes(), super::available_memory)
    }

    /// [`Searcher::self_join`] in chunks of `chunk` probes (a test's
    /// small chunks cross the boundaries a small index has none of).
    fn self_join_in_chunks(
        &self,
        tau: Threshold,
        chunk: usize,
        mut emit: impl FnMut(crate::oracle::Pair),
    ) -> Result<(), IndexError> {
        use rayon::prelude::*;
        let (probes, shared, least) = self.join_setup()?;
        let segments: Vec<_> = self.state.segments.values().collect();
        for chunk in probes.chunks(chunk.max(1)) {
            let found: Vec<Result<Vec<crate::oracle::Pair>, IndexError>> = chunk
                .par_iter()
                .with_min_len(least)
                .map(|&probe| {
                    let mut matches = self.join_probe(probe, &segments, &shared, tau, false)?.matches;
                    matches.sort_unstable_by_key(|m| m.id);
                    Ok(matches.into_iter().map(|m| joined(probe, m)).collect())
                })
                .collect();
            for pairs in found {
                pairs?.into_iter().for_each(&mut emit);
            }
        }
        Ok(())
    }

    /// [`Searcher::self_join`] that keeps at most about `mapped` bytes of
    /// the index's vectors mapped into the process at a time, for an
    /// index larger than the memory the join may use (a word-3-shingle
    /// index of 1M pages holds 4.1 GB of vectors and 2.2 GB of posting
    /// tables): the same pairs, in the same order.
    ///
    /// It runs in two phases. The probes' queries run in the order of
    /// their vectors, so that each probe's vector is read once, in
    /// passing, and released behind it; they look candidates up in the
    /// posting tables but verify none, deferring each candidate that
    /// passes the bounds. The deferred candidates are then verified
    /// grouped by the two blocks of `mapped / 2` bytes that hold their two
    /// vectors, block pair after block pair, each block released once no
    /// later group reads it; the posting tables are released before. What
    /// stays in memory besides: the deferred candidates (16 bytes each, 32
    /// more while they are sorted for verification; they are verified
    /// early when there are more than 8 million), and
    /// every pair found (32 bytes each), held until the end for the
    /// order. It starts by releasing whatever this process had mapped of
    /// the index. Released pages stay in the page cache, which the kernel
    /// may reclaim. When the vectors take no more than `mapped` bytes, it
    /// is the self-join's own run, which verifies each candidate at once
    /// (nothing would be released, and deferring costs time: 1.98 against
    /// 1.40 s over the 0.65 GB of vectors of 1M SpotSigs pages); `mapped`
    /// is at least [`Searcher::LEAST_MAPPED`].
    ///
    /// # Errors
    /// As [`Searcher::self_join`].
    pub fn self_join_within(
        &self,
        tau: Threshold,
        mapped: usize,
        emit: impl FnMut(crate::oracle::Pair),
    ) -> Result<(), IndexError> {
        let mapped = mapped.max(Self::LEAST_MAPPED);
        let segments: Vec<_> = self.state.segments.values().collect();
        if !VectorBlocks::sized(&segments, mapped).bounded() {
            return self.self_join_in_chunks(tau, JOIN_CHUNK, emit);
        }
        self.self_join_bounded(tau, mapped, JOIN_CHUNK, JOIN_DEFERRED, emit)
    }

    /// The least `mapped` of [`Searcher::self_join_within`]: blocks of a
    /// mebibyte.
    pub const LEAST_MAPPED: usize = 2 << 20;

    /// [`Searcher::self_join_within`]'s deferring run, whatever the
    /// vectors' size, in chunks of `chunk` probes, its deferred candidates
    /// verified once there are `deferred` of them (a test's small ones
    /// cross the boundaries a small index has none of).
    pub(crate) fn self_join_bounded(
        &self,
        tau: Threshold,
        mapped: usize,
        chunk: usize,
        deferred: usize,
        mut emit: impl FnMut(crate::oracle::Pair),
    ) -> Result<(), IndexError> {
        use rayon::prelude::*;
        let segments: Vec<_> = self.state.segments.values().collect();
        let blocks = VectorBlocks::sized(&segments, mapped);
        if blocks.bounded() {
            // What earlier work mapped in (queries, a warm-up) is left to
            // the page cache: the join maps what it reads.
            self.release_pages();
        }
        let (probes, shared, _) = self.join_setup()?;
        // The probes in the order of their vectors (the pending ones last).
        let mut run: Vec<usize> = (0..probes.len()).collect();
        run.sort_unstable_by_key(|&i| probes[i].place);
        let chunk = chunk.max(1);
        let mut found: Vec<(usize, Match)> = Vec::new();
        let mut waiting: Vec<Deferred> = Vec::new();
        let mut passed = 0;
        // A chunk's matches and candidates, gathered from its sinks.
        let gather = |part: &[usize],
                      sinks: Vec<Result<Sink, IndexError>>,
                      found: &mut Vec<(usize, Match)>,
                      waiting: &mut Vec<Deferred>| {
            for (&i, sink) in part.iter().zip(sinks) {
                let sink = sink?;
                found.extend(sink.matches.into_iter().map(|m| (i, m)));
                let candidates = sink.deferred.unwrap_or_default();
                waiting.extend(candidates.into_iter().map(|(position, ordinal)| Deferred {
                    probe: i,
                    position,
                    ordinal,
                }));
            }
            Ok::<(), IndexError>(())
        };
        // Each chunk's probes run beside (`rayon::join`) the gathering of
        // the chunk before and the release of the vectors before the
        // chunk's first probe: done between chunks, that one-core work had
        // left the other core idle (60 ms of a 1M word-3-shingle join).
        let mut previous: Option<ChunkSinks<'_>> = None;
        for part in run.chunks(chunk) {
            let before = previous.take();
            let first = part.first().map(|&i| probes[i].place);
            let (sinks, gathered) = rayon::join(
                || part.par_iter().map(|&i| self.join_probe(probes[i], &segments, &shared, tau, true)).collect(),
                || {
                    if let Some((part, sinks)) = before {
                        gather(part, sinks, &mut found, &mut waiting)?;
                    }
                    // The vectors of the probes run so far are released.
                    match first {
                        Some(place) => blocks.release_before(&segments, place, &mut passed),
                        None => Ok(()),
                    }
                },
            );
            gathered?;
            previous = Some((part, sinks));
            if waiting.len() >= deferred {
                self.verify_deferred(&mut waiting, &probes, &segments, &blocks, tau, &mut found)?;
            }
        }
        if let Some((part, sinks)) = previous {
            gather(part, sinks, &mut found, &mut waiting)?;
        }
        self.verify_deferred(&mut waiting, &probes, &segments, &blocks, tau, &mut found)?;
        found.sort_unstable_by_key(|&(i, m)| (i, m.id));
        for (i, m) in found {
            emit(joined(probes[i], m));
        }
        Ok(())
    }

    /// The snapshot's vector entries (distinct signatures of its
    /// documents, deleted ones in segments included): a self-join's work,
    /// as [`least_split`] weighs it.
    fn signature_count(&self) -> usize {
        let stored: usize = self.state.segments.values().map(|l| l.segment.hashes_len() / 8).sum();
        stored + self.state.delta.values().map(|doc| doc.vector.hashes().len()).sum::<usize>()
    }

    /// What both self-joins start with: containment refused, the
    /// directories built, the probes listed and the shared keys learned;
    /// with the least split of the join's parallel steps
    /// ([`least_split`] of [`Searcher::signature_count`]).
    fn join_setup(&self) -> Result<(Vec<JoinProbe>, SharedSignatures, usize), IndexError> {
        if self.signer.config().similarity == Similarity::Containment {
            return Err(IndexError::Unsupported { what: "self-join under containment similarity" });
        }
        self.warm_up(WarmUp::Directories);
        // The probe list (one core) beside the shared-key build (all of
        // them): its worker takes the build's ranges once it is done. A
        // small index's, one after the other on this thread.
        let least = least_split(self.signature_count());
        let (probes, shared) = if least == 1 {
            rayon::join(|| self.join_probes(), || SharedSignatures::build(self))
        } else {
            (self.join_probes(), SharedSignatures::build(self))
        };
        Ok((probes?, shared?, least))
    }

    /// Verifies the deferred candidates of a bounded self-join
    /// ([`Searcher::self_join_within`]) into `found`, grouped by the
    /// blocks of their two vectors, and empties `waiting`.
    fn verify_deferred(
        &self,
        waiting: &mut Vec<Deferred>,
        probes: &[JoinProbe],
        segments: &[&Arc<super::LoadedSegment>],
        blocks: &VectorBlocks,
        tau: Threshold,
        found: &mut Vec<(usize, Match)>,
    ) -> Result<(), IndexError> {
        use rayon::prelude::*;
        if waiting.is_empty() {
            return Ok(());
        }
        if blocks.bounded() {
            // What the candidates' look-ups read.
            self.release_pages();
        }
        // Each candidate under the blocks of its two vectors, lower first
        // (a pending probe's vector is in memory: its candidate's block
        // twice).
        let mut keyed = Vec::with_capacity(waiting.len());
        for &d in waiting.iter() {
            let candidate = blocks.block_of(segments, (d.position, d.ordinal))?;
            let (position, ordinal) = probes[d.probe].place;
            let probe = match segments.get(position as usize) {
                Some(_) => blocks.block_of(segments, (position, ordinal))?,
                None => candidate,
            };
            keyed.push((probe.min(candidate), probe.max(candidate), d));
        }
        waiting.clear();
        keyed.sort_unstable();
        let mut start = 0;
        while let Some(&(lo, hi, _)) = keyed.get(start) {
            let end = start + keyed[start..].partition_point(|k| (k.0, k.1) == (lo, hi));
            // Each probe's candidates in the group share its vector, read
            // once; the probes on all cores.
            let runs: Vec<&[(usize, usize, Deferred)]> =
                keyed[start..end].chunk_by(|x, y| x.2.probe == y.2.probe).collect();
            let verified: Vec<Result<Vec<(usize, Match)>, IndexError>> =
                runs.par_iter().with_min_len(16).map(|run| self.verify_run(run, probes, segments, tau)).collect();
            for v in verified {
                found.extend(v?);
            }
            // The blocks the next group does not read are released.
            let next = keyed.get(end).map(|k| (k.0, k.1));
            for &block in &[lo, hi][..1 + usize::from(lo != hi)] {
                if next.is_none_or(|(a, b)| a != block && b != block) {
                    blocks.release(segments, block);
                }
            }
            start = end;
        }
        Ok(())
    }

    /// Verifies one probe's deferred candidates (of one block pair)
    /// against its vector.
    fn verify_run(
        &self,
        run: &[(usize, usize, Deferred)],
        probes: &[JoinProbe],
        segments: &[&Arc<super::LoadedSegment>],
        tau: Threshold,
    ) -> Result<Vec<(usize, Match)>, IndexError> {
        let measure = self.signer.config().similarity;
        let Some(&(_, _, first)) = run.first() else { return Ok(Vec::new()) };
        // Under set Jaccard a stored probe's hashes are merged where they
        // are: no vector is built for its run.
        let (position, ordinal) = probes[first.probe].place;
        enum Probe<'s> {
            Stored(&'s super::segment::Segment<super::mmap::SegmentBytes>, super::segment::SegmentEntry),
            Vector(SignatureVector),
        }
        let probe = match (measure, segments.get(position as usize)) {
            (Similarity::SetJaccard, Some(held)) => Probe::Stored(&held.segment, held.segment.entry(ordinal)?),
            _ => Probe::Vector(self.probe_vector(probes[first.probe], segments)?),
        };
        let mut out = Vec::new();
        for &(_, _, d) in run {
            let Some(loaded) = segments.get(d.position as usize) else { continue };
            let entry = loaded.segment.entry(d.ordinal)?;
            let overlap = match &probe {
                Probe::Stored(held, probe_entry) => {
                    loaded.segment.overlap_reaching_stored(entry, held, *probe_entry, tau)?
                }
                Probe::Vector(vector) => loaded.segment.overlap_reaching(entry, vector, measure, tau)?,
            };
            if let Some(overlap) = overlap {
                out.push((d.probe, Match { id: entry.id, overlap }));
            }
        }
        Ok(out)
    }

    /// One self-join probe's query: the sink holding its matches (with
    /// `defer`, only those among pending documents, and its segment
    /// candidates in [`Sink::deferred`]).
    fn join_probe(
        &self,
        probe: JoinProbe,
        segments: &[&Arc<super::LoadedSegment>],
        shared: &SharedSignatures,
        tau: Threshold,
        defer: bool,
    ) -> Result<Sink, IndexError> {
        let measure = self.signer.config().similarity;
        let mut sink = Sink::threshold(tau);
        if defer {
            sink.deferred = Some(Vec::new());
        }
        // The signatures the probe alone holds may make the δ1 break
        // certain before any list, as its query would find (most probes):
        // done without its vector.
        let JoinProbe { probe: after, place } = probe;
        let held_last = u64::from(shared.held_last(place));
        if held_last > 0 {
            let window = query_window(measure, after.length, tau, Some(after));
            if held_last >= break_weight(measure, window, after.length, tau) {
                return Ok(sink);
            }
        }
        let vector = self.probe_vector(probe, segments)?;
        self.run_query(&vector, Pruning::Full, &mut sink, Some(after), Some(shared))?;
        Ok(sink)
    }

    /// A self-join probe's vector, read where the probe was found rather
    /// than looked up by id in every segment's id index.
    fn probe_vector(
        &self,
        JoinProbe { probe, place }: JoinProbe,
        segments: &[&Arc<super::LoadedSegment>],
    ) -> Result<SignatureVector, IndexError> {
        match segments.get(place.0 as usize) {
            Some(loaded) => loaded.segment.vector_for(place.1, self.signer.config().similarity),
            None => self.vector_of(probe.id),
        }
    }

    /// Every live document as a self-join probe, in ascending (length
    /// under the measure, id), with where it is: its segment's position
    /// among the snapshot's segments and its ordinal there, or
    /// `(u32::MAX, 0)` for a pending document.
    fn join_probes(&self) -> Result<Vec<JoinProbe>, IndexError> {
        let measure = self.signer.config().similarity;
        let mut probes = Vec::with_capacity(self.len() as usize);
        self.for_each_live_entry(|position, ordinal, _, entry| {
            let position = u32::try_from(position).unwrap_or(u32::MAX);
            let length = if measure == Similarity::SetJaccard { u64::from(entry.distinct()) } else { entry.length };
            probes.push(JoinProbe { probe: After { length, id: entry.id }, place: (position, ordinal) });
            Ok(())
        })?;
        for (&id, doc) in self.state.delta.iter() {
            probes.push(JoinProbe { probe: After { length: measure.length(&doc.vector), id }, place: (u32::MAX, 0) });
        }
        // Each segment's probes already ascend in that order under the
        // multiset measures: a stable sort merges those runs (at 1M pages
        // in five segments 20 ms instead of 44 ms for an unstable one).
        probes.sort();
        Ok(probes)
    }

    /// The clusters of two or more documents that the near-duplicate pairs
    /// at τ connect (union-find over [`Searcher::self_join`], bounded as
    /// it is), ordered by representative.
    ///
    /// # Errors
    /// As [`Searcher::self_join`].
    pub fn clusters(&self, tau: Threshold) -> Result<Vec<Cluster>, IndexError> {
        self.clusters_by(tau, None)
    }

    /// [`Searcher::clusters`] over [`Searcher::self_join_within`] `mapped`
    /// bytes.
    ///
    /// # Errors
    /// As [`Searcher::self_join`].
    pub fn clusters_within(&self, tau: Threshold, mapped: usize) -> Result<Vec<Cluster>, IndexError> {
        self.clusters_by(tau, Some(mapped))
    }

    /// [`Searcher::clusters`], the pairs from [`Searcher::self_join_within`]
    /// when `mapped` is given.
    fn clusters_by(&self, tau: Threshold, mapped: Option<usize>) -> Result<Vec<Cluster>, IndexError> {
        let ids = self.live_ids()?;
        let index_of = |id: u64| ids.binary_search(&id).ok();
        let mut parent: Vec<usize> = (0..ids.len()).collect();
        fn find(parent: &mut [usize], mut x: usize) -> usize {
            while parent[x] != x {
                parent[x] = parent[parent[x]];
                x = parent[x];
            }
            x
        }
        let join = |pair: crate::oracle::Pair| {
            if let (Some(a), Some(b)) = (index_of(pair.a), index_of(pair.b)) {
                let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
                // The smaller index (smaller id) becomes the root: the root
                // of a component is its smallest id.
                let (low, high) = if ra < rb { (ra, rb) } else { (rb, ra) };
                parent[high] = low;
            }
        };
        match mapped {
            Some(mapped) => self.self_join_within(tau, mapped, join)?,
            None => self.self_join(tau, join)?,
        }
        let mut members: std::collections::BTreeMap<usize, Vec<u64>> = std::collections::BTreeMap::new();
        for (i, &id) in ids.iter().enumerate() {
            let root = find(&mut parent, i);
            members.entry(root).or_default().push(id);
        }
        Ok(members
            .into_values()
            .filter(|m| m.len() > 1)
            .map(|members| Cluster { representative: members[0], members })
            .collect())
    }
}

/// Why two documents are (or are not) near-duplicates: the signatures they
/// share and the exact arithmetic of their similarity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// Shared signatures: `(hash, frequency in a, frequency in b)`.
    pub shared: Vec<(u64, u32, u32)>,
    /// |a| and |b| under the measure.
    pub lengths: (u64, u64),
    /// The similarity as an exact ratio.
    pub overlap: Overlap,
    /// The measure.
    pub measure: Similarity,
}

impl Searcher {
    /// The `k` most similar live documents with similarity at least
    /// `tau_min`, most similar first (ties by ascending id): exact.
    ///
    /// # Errors
    /// As [`Searcher::query`].
    ///
    /// One pass of the threshold query whose threshold rises: once `k`
    /// matches are held it becomes the k-th best similarity (rounded down
    /// to a whole part per billion), so the δ1/δ2 bounds skip every
    /// document that could no longer enter; a document as similar as the
    /// k-th best is still verified, for the tie-break by id.
    pub fn top_k(&self, query: &SignatureVector, k: usize, tau_min: Threshold) -> Result<Vec<Match>, IndexError> {
        if k == 0 {
            return Ok(Vec::new());
        }
        let mut sink = Sink { tau: tau_min, keep: Some(k), matches: Vec::new(), deferred: None };
        self.run_query(query, Pruning::Full, &mut sink, None, None)?;
        sink.settle(k);
        Ok(sink.matches)
    }

    /// The shared signatures and similarity arithmetic of the documents
    /// stored under `a` and `b`; `None` when either key is absent.
    ///
    /// # Errors
    /// Catalog and corruption errors.
    pub fn explain(&self, a: &str, b: &str) -> Result<Option<Explanation>, IndexError> {
        let (Some(da), Some(db)) = (self.get(a)?, self.get(b)?) else { return Ok(None) };
        Ok(Some(explain_vectors(self.signer.config().similarity, &da.vector, &db.vector)))
    }
}

/// [`Explanation`] of two vectors under `measure`.
pub fn explain_vectors(measure: Similarity, a: &SignatureVector, b: &SignatureVector) -> Explanation {
    let shared = a.iter().map(|(h, fa)| (h, fa, b.freq(h))).filter(|&(_, _, fb)| fb > 0).collect();
    Explanation { shared, lengths: (measure.length(a), measure.length(b)), overlap: measure.overlap(a, b), measure }
}

/// With full pruning, the pending documents' postings are looked up for
/// the first signatures of a query's order whose weight reaches this many
/// times the δ1 break point, not for all of them. Any set of processed
/// lists whose weight reaches the break point is exact: a document in
/// none of them misses at least that weight of the query. Sorting the
/// looked-up lists shortest first then processes the rarer ones among
/// them. Over a delta alone (no segment to rank the signatures by) the
/// order is the hash order, and a query looked every signature up
/// (ARCHITECTURE.md: on the 1,607 real pages, all pending, 2 gives 0.54×
/// the time of warm word-3-shingle queries and 0.64× of SpotSigs ones; 1
/// is slower, the common lists being long, and 3 and 4 gain less).
const PENDING_SAMPLE: u64 = 2;

/// The pending documents' part of a query: `delta` (a snapshot's, or
/// a writer's staged documents) through `index`, their postings (which may
/// list more documents: each id is looked up in `delta`). Without pruning
/// every document is compared; otherwise candidates come from the
/// postings (with full pruning only those of the first signatures of the
/// plan's order, [`PENDING_SAMPLE`]), walked in ascending list length with
/// the δ1 break and the per-document bound of [`Searcher::query_segment`]
/// (lists are not in length order here, so there is no δ2 break).
fn query_pending(
    delta: &impl super::delta::DocsById,
    index: &super::delta::DeltaIndex,
    plan: &Plan<'_>,
    sink: &mut Sink,
    stats: &mut QueryStats,
) {
    let &Plan { query, measure, window, pruning, .. } = plan;
    if delta.none() {
        return;
    }
    let verify = |id: u64, x: u64, vector: &SignatureVector, sink: &mut Sink, stats: &mut QueryStats| {
        if plan.wants(x, id) {
            stats.candidates_verified += 1;
            sink.offer(id, measure.overlap(query, vector));
        }
    };
    if pruning == Pruning::None {
        for (&id, doc) in delta.docs() {
            stats.delta_scanned += 1;
            verify(id, measure.length(&doc.vector), &doc.vector, sink, stats);
        }
        return;
    }
    let len_q = measure.length(query);
    let full = pruning == Pruning::Full;
    // The δ1 break point, as in `query_segment` (the threshold only
    // changes when candidates are verified, after the walk).
    let stop = if full { break_weight(measure, window, len_q, sink.tau) } else { u64::MAX };
    let sampled = stop.saturating_mul(PENDING_SAMPLE);
    let mut lists = Vec::new();
    let Ok(LookedUp { absent, .. }) = weighted_lists(
        plan.order,
        |visited| visited >= sampled,
        &mut lists,
        |signatures, each| {
            for (n, &(hash, _)) in signatures.iter().enumerate() {
                if let Some(ids) = index.posting(hash) {
                    each(n, ids);
                }
            }
            Ok::<_, std::convert::Infallible>(())
        },
    );
    let absent = absent + plan.alone;
    for (len, _, ids) in &mut lists {
        *len = ids.len() as u64;
    }
    lists.sort_by_key(|l| l.0);
    // Documents done with: verified (without full pruning), outside
    // the window, failing the bound when first met (it only falls), or
    // not in this snapshot.
    let mut seen = super::delta::MixSet::default();
    // With full pruning: candidates, with the weight of the processed
    // lists that hold them and their length (see `query_segment`).
    let mut candidates: super::delta::MixMap<u64, (u64, u64)> = Default::default();
    let mut delta1 = absent;
    for (n, &(_, weight, ids)) in lists.iter().enumerate() {
        if delta1 >= stop {
            stats.pruned_by_bounds += lists[n..].iter().map(|l| l.0).sum::<u64>();
            break;
        }
        for &id in ids {
            stats.delta_scanned += 1;
            if let Some(c) = candidates.get_mut(&id) {
                c.0 += weight;
                continue;
            }
            if seen.contains(&id) {
                continue;
            }
            // The length from the index (a hash look-up); whether this
            // snapshot holds the document is asked of `delta` only before
            // verifying it.
            let Some((total, distinct)) = index.lengths(id) else {
                seen.insert(id);
                continue;
            };
            let x = measure.length_of(total, distinct);
            if !window.contains(x) {
                stats.pruned_by_window += 1;
                seen.insert(id);
            } else if !full {
                seen.insert(id);
                if let Some(doc) = delta.doc(id) {
                    verify(id, x, &doc.vector, sink, stats);
                }
            } else if bound(measure, len_q, delta1, x).meets(sink.tau) {
                candidates.insert(id, (weight, x));
            } else {
                stats.pruned_by_bounds += 1;
                seen.insert(id);
            }
        }
        delta1 += weight;
    }
    let mut candidates: Vec<(u64, (u64, u64))> = candidates.into_iter().collect();
    candidates.sort_unstable_by_key(|c| c.0);
    for (id, (held, x)) in candidates {
        if !bound(measure, len_q, delta1.saturating_sub(held), x).meets(sink.tau) {
            stats.pruned_by_bounds += 1;
            continue;
        }
        if let Some(doc) = delta.doc(id) {
            verify(id, x, &doc.vector, sink, stats);
        }
    }
}

/// Every document of `docs` (a writer's staged documents, listed in
/// `index`) with `sim(query, d) ≥ τ`, in ascending id order: the pruned
/// query of the delta ([`Writer::insert_if_new`](super::Writer::insert_if_new)).
pub(super) fn query_staged(
    docs: &BTreeMap<u64, Arc<super::DeltaDoc>>,
    index: &super::delta::DeltaIndex,
    query: &SignatureVector,
    measure: Similarity,
    tau: Threshold,
) -> Vec<Match> {
    let len_q = measure.length(query);
    if len_q == 0 {
        return Vec::new();
    }
    let mut sink = Sink::threshold(tau);
    let window = query_window(measure, len_q, tau, None);
    let order: Vec<(u64, u64)> = weights(query, measure).collect();
    let plan = Plan {
        query,
        measure,
        window,
        pruning: Pruning::Full,
        order: &order,
        after: None,
        alone: 0,
        masks: None,
        named: 0,
        known: None,
    };
    query_pending(docs, index, &plan, &mut sink, &mut QueryStats::default());
    let mut out = sink.matches;
    out.sort_unstable_by_key(|m| m.id);
    out
}

#[cfg(test)]
mod tests {
    use super::{
        recycled, JoinBlocks, KeyFilter, KeySource, RangeFilter, Ranks, SegmentBuffers, SegmentMasks, SegmentSets,
        SharedKeys, SharedSignatures, Similarity,
    };
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// The filter holds every key that several documents hold (by
        /// brute-force counting) while rejecting most keys one document
        /// holds, and the masks name every source of each shared key.
        #[test]
        fn the_shared_signatures_are_the_keys_several_documents_hold(
            sources in prop::collection::vec(prop::collection::btree_map(0u64..3000, 0u8..8, 0..400), 0..6),
            range_bits in 0..=SharedSignatures::MAX_RANGE_BITS,
        ) {
            // Keys drawn from few values (so that sources share some),
            // spread over u64 by an odd multiplier; a key's list holds one
            // document unless its value is 0.
            let sources: Vec<Vec<(u64, bool)>> = sources
                .iter()
                .map(|s| {
                    let mut keys: Vec<(u64, bool)> =
                        s.iter().map(|(&k, &v)| (k.wrapping_mul(0xD6E8_FEB8_6659_FD93), v == 0)).collect();
                    keys.sort_unstable();
                    keys
                })
                .collect();
            let mut holders: BTreeMap<u64, u32> = BTreeMap::new();
            for source in &sources {
                for &(key, several) in source {
                    *holders.entry(key).or_default() += if several { 2 } else { 1 };
                }
            }
            let expected: Vec<u64> = holders.iter().filter(|(_, &n)| n > 1).map(|(&k, _)| k).collect();
            // Each source's bit is its position (modulo 8, as segments).
            let bits: Vec<u8> = (0..sources.len()).map(SegmentMasks::bit).collect();
            let mut holding: BTreeMap<u64, u8> = BTreeMap::new();
            for (source, &bit) in sources.iter().zip(&bits) {
                for &(key, _) in source {
                    *holding.entry(key).or_default() |= bit;
                }
            }
            let with_sources: Vec<(KeySource<'_, Vec<u8>>, u8)> =
                sources.iter().zip(&bits).map(|(s, &bit)| (KeySource::Sorted(s), bit)).collect();
            // Over several sources, in each number of key ranges a build
            // may take.
            let listing = sources.iter().filter(|s| !s.is_empty()).count();
            let shared = if listing > 1 {
                SharedSignatures::of_several_sources(&with_sources, 1, range_bits, Similarity::MultisetJaccard).unwrap()
            } else {
                SharedSignatures::of_sources(&with_sources, Similarity::MultisetJaccard).unwrap()
            };
            let mut extra_bits = 0;
            for key in &expected {
                let bits = holding[key];
                prop_assert!(shared.keys.may_hold(*key), "{key:#x}");
                // A superset of the key's segments, never fewer.
                let got = shared.keys.segments(*key);
                prop_assert_eq!(got & bits, bits, "{:#x}", key);
                extra_bits += (got & !bits).count_ones() as usize;
            }
            if listing > 1 {
                // Few segments named that do not hold the key: about one
                // in eight keys gets one at two cells an incidence and six
                // sources; the bound leaves room for small samples.
                prop_assert!(extra_bits * 5 <= expected.len() * 2 + 50, "{extra_bits} extra of {}", expected.len());
            } else if listing == 1 {
                // One source lists every key: no masks, which say every
                // segment.
                prop_assert!(matches!(shared.keys, SharedKeys::Filter(_)));
                prop_assert_eq!(shared.keys.segments(expected.first().copied().unwrap_or(1)), u8::MAX);
            }
            let alone: Vec<u64> = holders.iter().filter(|(_, &n)| n == 1).map(|(&k, _)| k).collect();
            if let SharedKeys::Blocks(joined) = &shared.keys {
                // The probes' one read of a block gives what the two
                // reads give.
                for &key in expected.iter().chain(&alone) {
                    prop_assert_eq!(joined.word_and_count(key), (joined.word(key), joined.segments(key).count_ones() as u8));
                }
            }
            let false_positives = alone.iter().filter(|&&k| shared.keys.may_hold(k)).count();
            // About 12 bits a shared key: few false positives.
            prop_assert!(false_positives * 10 <= alone.len().max(20), "{false_positives} of {}", alone.len());
            // Sized for the shared keys, not for every key: about 12 bits a
            // shared key, or (blocks) about two cells a key and source that
            // lists it, rounded up to whole words (or blocks) of each range.
            let total: usize = sources.iter().map(Vec::len).sum();
            let ranges = 1 << if listing > 1 { range_bits } else { SharedSignatures::least_range_bits(total) };
            let incidences: usize = expected.iter().map(|k| sources.iter().filter(|s| s.binary_search_by_key(k, |e| e.0).is_ok()).count()).sum();
            match &shared.keys {
                SharedKeys::Filter(filter) => {
                    let words = filter.words.len();
                    prop_assert!(words < ranges + (expected.len() + 64) * 14 / 64, "{words} words, {} keys", expected.len());
                }
                SharedKeys::Blocks(joined) => {
                    let blocks = joined.blocks;
                    let by_keys = (expected.len() + 64) * 14 / 128;
                    let by_cells = (incidences + 64) * 5 / 2 / JoinBlocks::CELLS;
                    prop_assert!(blocks < ranges + by_keys.max(by_cells), "{blocks} blocks, {} keys, {incidences} incidences", expected.len());
                }
            }
        }
    }

    /// A build over several sources takes one key range a 1,024 keys (in
    /// powers of two) up to 2,048 ranges, 2,048 up to 2,048 × 20,000 keys,
    /// and twice or four times as many above, each holding at most 20,000
    /// keys while 8,192 ranges can.
    #[test]
    fn the_key_ranges_grow_with_the_keys() {
        let keys = SharedSignatures::RANGE_KEYS;
        let least = SharedSignatures::MIN_RANGE_KEYS;
        for (total, bits) in [
            // Small builds: ranges of at least 1,024 keys.
            (0, 0),
            (15, 0),
            (2 * least - 1, 0),
            (2 * least, 1),
            (1000 * least, 9),
            (2047 * least, 10),
            (2048 * least, 11),
            (2048 * keys, 11),
            (2048 * keys + 2048, 12),
            (4096 * keys, 12),
            (4096 * keys + 4096, 13),
            (122_000_000, 13),
            (usize::MAX, 13),
        ] {
            assert_eq!(SharedSignatures::range_bits(total), bits, "{total} keys");
        }
    }

    proptest! {
        /// The flagged items, in order, as a `filter` keeps them, for up
        /// to `at_most` items.
        #[test]
        fn gather_flagged_keeps_what_a_filter_keeps(
            items in prop::collection::vec((any::<u32>(), any::<bool>()), 0..200),
            at_most in 0usize..220,
        ) {
            let mut out = vec![7u32; 3];
            let items = &items[..at_most.min(items.len())];
            crate::store::query::gather_flagged(&mut out, at_most, items.iter().copied());
            let expected: Vec<u32> = items.iter().filter(|&&(_, f)| f).map(|&(x, _)| x).collect();
            prop_assert_eq!(out, expected);
        }

        /// A range's three filters against exact sets, meeting keys as the
        /// first pass does (one range's keys, listed by several sources,
        /// some with lists of several documents): no false negatives in
        /// any of them, each newly shared key reported once (unless a
        /// false positive had set its bits before), and few false
        /// positives.
        #[test]
        fn a_range_filter_holds_what_it_met(
            meetings in prop::collection::vec((0u64..600, any::<bool>()), 0..1500),
        ) {
            // One range's keys: the range's top bits, then bits spread
            // by an odd multiplier.
            let key = |k: u64| (k.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> SharedSignatures::RANGE_BITS) | 3 << 62;
            let distinct = meetings.iter().map(|&(k, _)| k).collect::<std::collections::BTreeSet<_>>().len();
            let mut filter = RangeFilter::sized(distinct, SharedSignatures::RANGE_BITS);
            let mut met: BTreeMap<u64, (u32, bool)> = BTreeMap::new();
            let mut reported = 0usize;
            for &(k, several) in &meetings {
                let key = key(k);
                let entry = met.entry(key).or_default();
                let (again, now_shared) = filter.meet(key, KeyFilter::mask(key), several);
                let was_shared = entry.0 > 1 || entry.1;
                prop_assert!(again || entry.0 == 0, "{key:#x} met before, not held");
                prop_assert!(!(now_shared && was_shared), "{key:#x} reported shared twice");
                reported += usize::from(now_shared);
                entry.0 += 1;
                entry.1 |= several;
            }
            let mut false_positives = 0;
            let shared_keys = met.values().filter(|&&(n, several)| n > 1 || several).count();
            for (&key, &(n, several)) in &met {
                let (shared, listed_again) = filter.holds(key, KeyFilter::mask(key));
                prop_assert!(shared || !(n > 1 || several), "{key:#x} shared, not held");
                prop_assert!(listed_again || n < 2, "{key:#x} listed again, not held");
                false_positives += usize::from(shared && !(n > 1 || several)) + usize::from(listed_again && n < 2);
            }
            // 16 bits a key, four set: about one in a hundred of `seen`
            // (which, met again by mistake, puts a key in both other
            // filters), in words of a few keys each, whose loads vary:
            // a bound that a few such keys among 57 do not break (they
            // did break one of 5% and one key), and that testing any of
            // the four bits instead of all does.
            prop_assert!(false_positives <= met.len() / 5 + 6, "{false_positives} of {}", met.len());
            // A shared key goes unreported only when a false positive
            // had set its bits: as rare.
            prop_assert!(shared_keys.saturating_sub(reported) <= shared_keys / 10 + 3, "{reported} reported of {shared_keys}");
        }
    }

    proptest! {
        /// Each segment document's count of signatures no document after
        /// it in the join's order holds (pending ones hold every key they
        /// list for later) is at most the brute-force count. It is about
        /// equal (the filters' false positives only take some away) to the
        /// count the build aims at: with the ordinal order, the keys whose
        /// every holder is in the document's segment and before it; without
        /// it, the keys no other document holds.
        #[test]
        fn the_held_last_counts_are_a_lower_bound_and_nearly_exact(
            segments in prop::collection::vec(
                prop::collection::vec(prop::collection::btree_map(0u64..400, 1u32..3, 1..30), 1..12), 1..4),
            pending in prop::collection::vec(prop::collection::btree_set(0u64..400, 1..30), 0..4),
        ) {
            use crate::store::segment::{build_segment, Segment, SegmentDoc};
            use crate::vector::SignatureVector;
            let spread = |k: u64| k.wrapping_mul(0xD6E8_FEB8_6659_FD93);
            let mut next_id = 0u64;
            let bytes: Vec<Vec<u8>> = segments
                .iter()
                .enumerate()
                .map(|(n, docs)| {
                    let docs = docs
                        .iter()
                        .map(|set| {
                            next_id += 1;
                            SegmentDoc {
                                id: next_id,
                                vector: SignatureVector::from_pairs(set.iter().map(|(&k, &f)| (spread(k), f))),
                                band_keys: vec![],
                                fingerprint: crate::hash::Fingerprint(u128::from(next_id)),
                            }
                        })
                        .collect();
                    build_segment(n as u64 + 1, 0, docs)
                })
                .collect();
            let parsed: Vec<Segment<&[u8]>> = bytes.iter().map(|b| Segment::parse(b.as_slice(), "seg").unwrap()).collect();
            // Each key's holders: segment position, ordinal, and (length
            // under the measure, id) of each segment document; `None` for
            // a pending document.
            type Holder = Option<(usize, u32, (u64, u64))>;
            let holders_under = |measure: Similarity| {
                let mut holders: BTreeMap<u64, Vec<Holder>> = BTreeMap::new();
                for (position, segment) in parsed.iter().enumerate() {
                    for ordinal in 0..segment.doc_count() {
                        let (vector, id) = (segment.vector(ordinal).unwrap(), segment.entry(ordinal).unwrap().id);
                        for &hash in vector.hashes() {
                            holders.entry(hash).or_default().push(Some((position, ordinal, (measure.length(&vector), id))));
                        }
                    }
                }
                for set in &pending {
                    for &k in set {
                        holders.entry(spread(k)).or_default().push(None);
                    }
                }
                holders
            };
            let mut pending_keys: Vec<u64> = pending.iter().flatten().map(|&k| spread(k)).collect();
            pending_keys.sort_unstable();
            let pending_keys: Vec<(u64, bool)> =
                pending_keys.chunk_by(|a, b| a == b).map(|run| (run[0], run.len() > 1)).collect();
            let sources: Vec<(KeySource<'_, &[u8]>, u8)> = parsed
                .iter()
                .enumerate()
                .map(|(position, segment)| (KeySource::Segment(segment), SegmentMasks::bit(position)))
                .chain([(KeySource::Sorted(&pending_keys), 0)])
                .collect();
            for measure in [Similarity::MultisetJaccard, Similarity::SetJaccard] {
                let holders = holders_under(measure);
                let shared = SharedSignatures::of_sources(&sources, measure).unwrap();
                let (mut counted, mut aimed_total) = (0u64, 0u64);
                for (position, segment) in parsed.iter().enumerate() {
                    for ordinal in 0..segment.doc_count() {
                        let vector = segment.vector(ordinal).unwrap();
                        let me = (measure.length(&vector), segment.entry(ordinal).unwrap().id);
                        let (mut truth, mut aimed) = (0u32, 0u32);
                        for hash in vector.hashes() {
                            let others: Vec<_> =
                                holders[hash].iter().filter(|h| **h != Some((position, ordinal, me))).collect();
                            let last = others.iter().all(|h| h.is_some_and(|(.., at)| at < me));
                            truth += u32::from(last);
                            let in_its_segment = others.iter().all(|h| h.is_some_and(|(p, ..)| p == position));
                            aimed += u32::from(last && in_its_segment);
                        }
                        let got = shared.held_last((position as u32, ordinal));
                        prop_assert!(got <= truth, "segment {position}, ordinal {ordinal}: {got} > {truth}");
                        counted += u64::from(got);
                        aimed_total += u64::from(aimed);
                    }
                }
                prop_assert!(counted * 20 >= aimed_total * 19, "{counted} of {aimed_total}");
                if parsed.len() == 1 && pending.is_empty() {
                    // One source, built without filters of its own: exact.
                    prop_assert_eq!(counted, aimed_total);
                }
                // Past the segments and for pending documents: nothing.
                prop_assert_eq!(shared.held_last((parsed.len() as u32, 0)), 0);
                prop_assert_eq!(shared.held_last((u32::MAX, 0)), 0);
                prop_assert_eq!(shared.held_last((0, parsed[0].doc_count())), 0);
            }
        }
    }

    /// The shortest prefix of `order` whose weight, after `visited`,
    /// reaches `stop` before its last signature (all of it if none).
    fn reaching(order: &[(u64, u64)], visited: u64, stop: u64) -> &[(u64, u64)] {
        let mut weight = visited;
        let reach = order
            .iter()
            .position(|&(_, w)| {
                let done = weight >= stop;
                weight += w;
                done
            })
            .unwrap_or(order.len());
        &order[..reach]
    }

    proptest! {
        /// A query's rarity order, read a block of the `listed` filter's
        /// words at a time: uncut, the signatures the filter rules out in
        /// the query's order, then the others by estimated length (0 for
        /// a filter false positive), ties by hash; cut by a weight, the
        /// uncut order's shortest prefix that reaches it (or all of it).
        #[test]
        fn the_rarity_order_is_unlisted_first_then_by_length(
            signatures in prop::collection::btree_map(any::<u64>(), (1u64..4, prop::option::of(0u64..50)), 0..300),
            visited in 0u64..10,
            stop in 0u64..600,
        ) {
            let listed_count = signatures.values().filter(|(_, length)| length.is_some()).count();
            let mut ranks = Ranks { lengths: Default::default(), listed: KeyFilter::sized(listed_count) };
            for (&hash, &(_, length)) in &signatures {
                if let Some(length) = length {
                    ranks.lengths.insert(hash, length);
                    ranks.listed.insert(hash);
                }
            }
            let input: Vec<(u64, u64)> = signatures.iter().map(|(&hash, &(weight, _))| (hash, weight)).collect();
            let (unlisted, mut listed): (Vec<_>, Vec<_>) =
                input.iter().partition(|&&(hash, _)| !ranks.listed.may_hold(hash));
            listed.sort_by_key(|&(hash, weight)| (ranks.lengths.get(&hash).copied().unwrap_or(0), hash, weight));
            let expected: Vec<(u64, u64)> = unlisted.into_iter().chain(listed).collect();
            let uncut = ranks.rank(input.iter().copied(), visited, |_| false);
            prop_assert_eq!(&uncut, &expected);
            let cut = ranks.rank(input.iter().copied(), visited, |v| v >= stop);
            prop_assert_eq!(&cut[..], reaching(&expected, visited, stop));
        }

        /// A query's order by the segments its masks name: uncut, every
        /// signature once, the number of segments named never falling;
        /// cut by a weight, the uncut order's shortest prefix that
        /// reaches it (or all of it). The cut is what keeps a query
        /// exact: a document that meets τ holds a signature of it.
        #[test]
        fn the_segment_order_holds_every_signature_fewest_segments_first(
            signatures in prop::collection::btree_map(any::<u64>(), (1u64..4, any::<u8>(), prop::option::of(0u64..50)), 0..120),
            visited in 0u64..10,
            stop in 0u64..300,
        ) {
            let mut ranks = Ranks { lengths: Default::default(), listed: KeyFilter::sized(signatures.len()) };
            let mut masks = SegmentMasks::sized_in(signatures.len(), 1);
            let blocks = masks.cells.len() / SegmentMasks::BLOCK;
            for (&hash, &(_, bits, length)) in &signatures {
                let (a, b) = SegmentMasks::cells_of(blocks, hash);
                masks.cells[a] |= bits;
                masks.cells[b] |= bits;
                if let Some(length) = length {
                    ranks.lengths.insert(hash, length);
                    ranks.listed.insert(hash);
                }
            }
            let input: Vec<(u64, u64)> = signatures.iter().map(|(&hash, &(weight, ..))| (hash, weight)).collect();
            let uncut = ranks.order_by_segments(input.iter().copied(), visited, &masks, |_| false);
            let mut sorted = uncut.clone();
            sorted.sort_unstable();
            prop_assert_eq!(&sorted, &input);
            let named: Vec<u32> = uncut.iter().map(|&(hash, _)| masks.get(hash).count_ones()).collect();
            prop_assert!(named.windows(2).all(|w| w[0] <= w[1]), "{:?}", named);
            let cut = ranks.order_by_segments(input.iter().copied(), visited, &masks, |v| v >= stop);
            prop_assert_eq!(&cut[..], reaching(&uncut, visited, stop));
        }
    }

    /// A query's segment buffers come back to the thread with their
    /// allocations, lists included, whose element type borrows the
    /// segments: `recycled` collects in place.
    #[test]
    fn recycled_buffers_keep_their_allocations() {
        let lists: Vec<(u64, u64, crate::store::segment::PostingList<'_>)> = Vec::with_capacity(100);
        let kept: Vec<(u64, u64, crate::store::segment::PostingList<'static>)> = recycled(lists);
        assert!(kept.is_empty());
        assert_eq!(kept.capacity(), 100);
        let mut buffers = SegmentBuffers::take();
        buffers.walk.reserve(200);
        buffers.lists.reserve(300);
        buffers.walk.push(7);
        buffers.give_back();
        let again = SegmentBuffers::take();
        assert!(again.walk.is_empty() && again.walk.capacity() >= 200);
        assert!(again.lists.is_empty() && again.lists.capacity() >= 300);
        // A very long query's are freed.
        let mut long = again;
        long.walk.reserve(crate::store::REUSED_LIMIT + 1);
        long.give_back();
        assert_eq!(SegmentBuffers::take().walk.capacity(), 0);
    }

    /// At a million keys in ranges of their own, the join's blocks follow
    /// the shared keys and the sources that list them: those counted
    /// while building, not every key; sized from every range or from a
    /// sample of them, by the filter's 12 bits a key or the cells' two a
    /// (key, source), whichever needs more.
    #[test]
    fn the_filter_is_sized_by_the_shared_keys() {
        let spread = |k: u64| k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let sorted = |keys: std::ops::Range<u64>, several: bool| {
            let mut v: Vec<(u64, bool)> = keys.map(|k| (spread(k), several)).collect();
            v.sort_unstable();
            v
        };
        let (a, b) = (sorted(0..600_000, false), sorted(400_000..1_000_000, false));
        let sources: Vec<(KeySource<'_, Vec<u8>>, u8)> = vec![(KeySource::Sorted(&a), 1), (KeySource::Sorted(&b), 2)];
        let blocks_of = |shared: &SharedSignatures| match &shared.keys {
            SharedKeys::Blocks(joined) => joined.blocks,
            SharedKeys::Filter(_) => 0,
        };
        // Blocks are sized in whole blocks of each key range: `need`
        // rounded up to a multiple of the ranges, here at most 2,048
        // (these builds of fewer than 2,048 × 1,024 keys take fewer, a
        // power of two, whose multiple is never above 2,048's).
        let ranges = 1usize << SharedSignatures::RANGE_BITS;
        let whole = |need: usize| need.next_multiple_of(ranges);
        // 200,000 keys are in both: 400,000 incidences at two cells each,
        // 20,000 blocks (the filter's 12 bits a key would need 12,500), in
        // whole blocks of each range.
        for (step, blocks_within) in [(1, 20_000..=whole(20_000) + ranges), (32, 17_000..=whole(24_000))] {
            let shared = SharedSignatures::of_sources_sampled(&sources, step, Similarity::MultisetJaccard).unwrap();
            let blocks = blocks_of(&shared);
            assert!(blocks_within.contains(&blocks), "step {step}: {blocks} blocks");
            let held = (400_000..600_000).filter(|&k| shared.keys.may_hold(spread(k))).count();
            assert_eq!(held, 200_000);
            let alone = (0..400_000).chain(600_000..1_000_000).filter(|&k| shared.keys.may_hold(spread(k))).count();
            assert!(alone < 8_000, "step {step}: {alone} of 800,000 keys held alone pass");
            for k in 400_000..600_000 {
                assert_eq!(shared.keys.segments(spread(k)) & 3, 3);
            }
        }
        // Four sources list the same 200,000 keys: 800,000 incidences,
        // 40,000 blocks.
        let four: Vec<(KeySource<'_, Vec<u8>>, u8)> =
            (0..4).map(|i| (KeySource::Sorted(&b[..200_000]), 1 << i)).collect();
        let shared = SharedSignatures::of_sources_sampled(&four, 1, Similarity::MultisetJaccard).unwrap();
        let blocks = blocks_of(&shared);
        assert!((40_000..=whole(40_000) + ranges).contains(&blocks), "{blocks} blocks");
        assert!(b[..200_000].iter().all(|&(k, _)| shared.keys.segments(k).count_ones() == 4));
        // 200,000 keys each in one source, with lists of several
        // documents: the filter needs more blocks than the cells, 12,500.
        let (c, d) = (sorted(0..200_000, true), sorted(200_000..400_000, false));
        let apart: Vec<(KeySource<'_, Vec<u8>>, u8)> = vec![(KeySource::Sorted(&c), 1), (KeySource::Sorted(&d), 2)];
        let shared = SharedSignatures::of_sources_sampled(&apart, 1, Similarity::MultisetJaccard).unwrap();
        let blocks = blocks_of(&shared);
        assert!((12_500..=whole(12_500)).contains(&blocks), "{blocks} blocks");
        assert!(c.iter().all(|&(k, _)| shared.keys.may_hold(k) && shared.keys.segments(k) & 1 == 1));
    }

    /// A segment whose posting keys do not ascend fails the build with a
    /// typed error, whichever source it is.
    /// The self-join's pairs, in their order, whatever the chunks of
    /// probes it runs in: one probe a chunk, chunks that end inside runs
    /// of equal lengths, and one chunk for all (against the oracle), over
    /// three segments and pending documents.
    #[test]
    fn the_self_join_is_the_same_in_any_chunks() {
        use crate::{Similarity, Threshold};
        let dir = tempfile::tempdir().unwrap();
        let index = paired_pages_in(dir.path(), 3);
        let s = index.searcher().unwrap();
        let tau = Threshold::new(0.8).unwrap();
        let pairs = |chunk: usize| {
            let mut got = Vec::new();
            s.self_join_in_chunks(tau, chunk, |p| got.push(p)).unwrap();
            got
        };
        let whole = pairs(super::JOIN_CHUNK);
        let mut stored = Vec::new();
        s.for_each_live(|id, v| stored.push((id, v.clone()))).unwrap();
        let stored: Vec<(u64, &crate::vector::SignatureVector)> = stored.iter().map(|(id, v)| (*id, v)).collect();
        let mut expected = crate::oracle::self_join(&stored, Similarity::SetJaccard, tau);
        let mut sorted = whole.clone();
        sorted.sort_by_key(|p| (p.a, p.b));
        expected.sort_by_key(|p| (p.a, p.b));
        assert_eq!(sorted, expected);
        assert!(whole.len() >= 70, "{} pairs", whole.len());
        for chunk in [1, 2, 7, 64] {
            assert_eq!(pairs(chunk), whole, "chunks of {chunk}");
        }
    }

    /// A bounded self-join gives the self-join's pairs in its order, with
    /// its vectors in blocks of a few (or one) documents, its probes in
    /// chunks of any size, its candidates verified in batches of any
    /// size, and documents deleted from segments and pending.
    #[test]
    fn the_bounded_self_join_is_the_self_join() {
        use crate::Threshold;
        let dir = tempfile::tempdir().unwrap();
        let index = paired_pages_in(dir.path(), 3);
        let mut w = index.writer().unwrap();
        for key in ["0-0", "1-7", "2-12", "3-1"] {
            assert!(w.delete(key).unwrap(), "{key}");
        }
        w.commit().unwrap();
        let s = index.searcher().unwrap();
        assert_eq!(s.state.segments.len(), 3);
        assert!(!s.state.delta.is_empty());
        let tau = Threshold::new(0.8).unwrap();
        let mut whole = Vec::new();
        s.self_join(tau, |p| whole.push(p)).unwrap();
        assert!(whole.len() >= 70, "{} pairs", whole.len());
        let total: usize = s.state.segments.values().map(|l| l.segment.hashes_len()).sum();
        for mapped in [2, 300, 1_000, 4_096, total / 2, total, usize::MAX] {
            for (chunk, deferred) in [(1, 1), (7, 3), (64, 1_000), (super::JOIN_CHUNK, super::JOIN_DEFERRED)] {
                let mut got = Vec::new();
                s.self_join_bounded(tau, mapped, chunk, deferred, |p| got.push(p)).unwrap();
                assert_eq!(got, whole, "{mapped} bytes mapped, chunks of {chunk}, {deferred} deferred");
            }
        }
        let mut got = Vec::new();
        s.self_join_within(tau, 0, |p| got.push(p)).unwrap();
        assert_eq!(got, whole);
    }

    /// Without a warm-up, queries over several segments build the
    /// snapshot's masks on the pool once they have spent what the build
    /// costs, and answer the same before and after; a snapshot of one
    /// segment (and pending pages) never builds them, and one that a flush
    /// appends a segment to keeps them.
    #[test]
    fn queries_build_the_masks_they_pay_for() {
        use crate::{Similarity, Threshold};
        let tau = Threshold::new(0.8).unwrap();
        let dir = tempfile::tempdir().unwrap();
        for (flushes, masked) in [(1, false), (3, true)] {
            let index = paired_pages_in(&dir.path().join(flushes.to_string()), flushes);
            let s = index.searcher().unwrap();
            assert!(s.state.segment_masks.unsettled());
            let mut stored = Vec::new();
            s.for_each_live(|id, v| stored.push((id, v.clone()))).unwrap();
            let all: Vec<(u64, &crate::vector::SignatureVector)> = stored.iter().map(|(id, v)| (*id, v)).collect();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            let mut rounds = 0;
            // Every query checked; rounds until the masks are built (or,
            // in one segment, a few rounds).
            while rounds < 3 || (masked && s.state.segment_masks.unsettled()) {
                assert!(std::time::Instant::now() < deadline, "no masks after {rounds} rounds");
                for (_, v) in &all {
                    let expected = crate::oracle::query(all.iter().copied(), v, Similarity::SetJaccard, tau);
                    assert_eq!(s.query(v, tau).unwrap(), expected);
                }
                rounds += 1;
            }
            assert_eq!(s.state.segment_masks.get().is_some(), masked, "{flushes} flushes");
            // Once built, the queries read them.
            for (_, v) in &all {
                let expected = crate::oracle::query(all.iter().copied(), v, Similarity::SetJaccard, tau);
                assert_eq!(s.query(v, tau).unwrap(), expected);
            }
            if masked {
                // The pending pages in a segment of their own, appended:
                // the new snapshot keeps the masks, which name the new
                // segment for every key, and its queries find its pages.
                index.flush().unwrap();
                let fresh = index.searcher().unwrap();
                assert_eq!(fresh.state.segments.len(), s.state.segments.len() + 1);
                let bit = SegmentMasks::bit(s.state.segments.len());
                assert_eq!(fresh.state.segment_masks.get().map(|m| m.extra), Some(bit));
                let mut flushed = Vec::new();
                fresh.for_each_live(|id, v| flushed.push((id, v.clone()))).unwrap();
                assert_eq!(flushed, stored, "the same pages");
                for (_, v) in &all {
                    let expected = crate::oracle::query(all.iter().copied(), v, Similarity::SetJaccard, tau);
                    assert!(!expected.is_empty());
                    assert_eq!(fresh.query(v, tau).unwrap(), expected);
                }
            }
        }
    }

    /// A snapshot with one more segment keeps built masks, naming the new
    /// segment for every key, while that segment's bit is its own: up to
    /// eight segments.
    #[test]
    fn appended_segments_keep_the_masks_while_their_bits_are_free() {
        use super::{LazyMasks, Masks};
        use std::sync::Arc;
        // Segment lists of n segments with ids 1..=n (the segments
        // themselves are never read here): one made of the index above.
        let dir = tempfile::tempdir().unwrap();
        let index = paired_pages_in(dir.path(), 1);
        let one = index.searcher().unwrap().state.segments.values().next().cloned().unwrap();
        let list = |n: u64| (1..=n).map(|id| (id, Arc::clone(&one))).collect::<BTreeMap<_, _>>();
        let unbuilt = LazyMasks::default();
        assert!(unbuilt.appended(&list(3), 3).unsettled());
        let built = LazyMasks::default();
        let cells = Arc::new(SegmentMasks::sized_in(10, 1));
        built.built.set(Some(Masks { cells, extra: 0, several: Arc::default() })).unwrap();
        let three = built.appended(&list(3), 3);
        let four = three.appended(&list(4), 4);
        assert_eq!(four.get().map(|m| m.extra), Some(SegmentMasks::bit(2) | SegmentMasks::bit(3)));
        // Every key names the appended segments, and only those here.
        assert_eq!(four.get().unwrap().segments(0xDEAD_BEEF), 0b1100);
        assert!(four.appended(&list(5), 5).get().is_some());
        assert!(built.appended(&list(9), 9).unsettled());
        assert!(built.appended(&list(8), 8).get().is_some());
        // A segment that does not come last leaves the masks behind.
        assert!(built.appended(&list(3), 2).unsettled());
    }

    /// An index at `dir` of 90 pages of 30 words from a vocabulary of 400,
    /// each followed by a copy with one word changed (a few of them two):
    /// 77 pairs at τ = 0.8 under set Jaccard of word 3-shingles, and pages
    /// of equal lengths; committed 50 at a time, the first `flushes`
    /// commits flushed into segments of their own, the rest pending.
    fn paired_pages_in(dir: &std::path::Path, flushes: usize) -> crate::store::Index {
        use crate::store::{Document, Index, IndexOptions, Metadata};
        use crate::SignatureConfig;
        let config = SignatureConfig { similarity: Similarity::SetJaccard, ..SignatureConfig::word_shingles(3) };
        let options = IndexOptions { flush_threshold: 100_000, ..IndexOptions::default() };
        let index = Index::create_with(dir, config, options).unwrap();
        let mut next = crate::store::roaring_view::xorshift(0x9E37_79B9_7F4A_7C15u64);
        let mut pages = Vec::new();
        for n in 0..90u64 {
            let words: Vec<u64> = (0..30).map(|_| next() % 400).collect();
            let mut copy = words.clone();
            for _ in 0..1 + usize::from(n % 7 == 0) {
                let at = (next() % 30) as usize;
                copy[at] = 400 + n;
            }
            let text = |w: &[u64]| w.iter().map(|w| format!("w{w}")).collect::<Vec<_>>().join(" ");
            pages.push(text(&words));
            pages.push(text(&copy));
        }
        for (stage, stage_pages) in pages.chunks(50).enumerate() {
            let mut w = index.writer().unwrap();
            for (n, page) in stage_pages.iter().enumerate() {
                w.insert(&format!("{stage}-{n}"), Document::Text(page), Metadata::default()).unwrap();
            }
            w.commit().unwrap();
            if stage < flushes {
                index.flush().unwrap();
            }
        }
        index
    }

    #[test]
    fn a_damaged_key_section_fails_the_build() {
        use crate::store::segment::{build_segment, with_fresh_checksums, Segment, SegmentDoc};
        use crate::vector::SignatureVector;
        let docs: Vec<SegmentDoc> = (0..4u64)
            .map(|id| SegmentDoc {
                id,
                vector: SignatureVector::from_pairs([(id << 62 | 5, 1), (id << 62 | 9, 2)]),
                band_keys: vec![],
                fingerprint: crate::hash::Fingerprint(u128::from(id)),
            })
            .collect();
        let bytes = build_segment(1, 0, docs);
        let good = Segment::parse(bytes.as_slice(), "good").unwrap();
        let keys = good.section_offset(crate::store::segment::SectionKind::PostingKeys);
        let mut damaged = bytes.clone();
        let (first, second) = damaged[keys..keys + 16].split_at_mut(8);
        first.swap_with_slice(second);
        let damaged = with_fresh_checksums(&damaged).unwrap();
        let bad = Segment::parse(damaged.as_slice(), "bad").unwrap();
        let pending = [(7u64, true)];
        let none: [(u64, bool); 0] = [];
        for sources in [
            vec![(KeySource::Segment(&bad), 1)],
            vec![(KeySource::Sorted(&none), 0), (KeySource::Segment(&bad), 1)],
            vec![(KeySource::Segment(&bad), 1), (KeySource::Segment(&good), 2)],
            vec![(KeySource::Segment(&good), 1), (KeySource::Sorted(&pending), 0), (KeySource::Segment(&bad), 2)],
        ] {
            let err = SharedSignatures::of_sources(&sources, Similarity::SetJaccard).unwrap_err();
            assert!(err.to_string().contains("posting keys not ascending"), "{err}");
        }
        let fine = SharedSignatures::of_sources(
            &[(KeySource::Segment(&good), 1), (KeySource::Segment(&good), 2)],
            Similarity::MultisetJaccard,
        )
        .unwrap();
        assert!(fine.keys.may_hold(5) && fine.keys.may_hold(3 << 62 | 9));
    }
}
