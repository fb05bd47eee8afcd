//! A serialized roaring bitmap read in place: the portable format the
//! `roaring` crate writes into a segment's posting and band data (FORMAT.md
//! §7). A query needs a list's length, the count and the members inside an
//! ordinal range, and membership tests; decoding a whole `RoaringBitmap` for
//! that allocated a vector per container and was a seventh of a query's
//! time. The view allocates nothing.
//!
//! The format: a cookie `u32`. With 12346 (no run containers) a `u32`
//! container count follows; with 12347 in the low 16 bits the count less one
//! is in the high 16 bits and a bitset of `⌈count/8⌉` bytes marks the run
//! containers. Then per container its key (the high 16 bits of its values,
//! `u16`) and cardinality less one (`u16`); then per container the `u32`
//! offset of its data from the start of the serialization (always without
//! run containers, and with them when there are at least four); then the
//! data: an *array* (cardinality ≤ 4,096) of ascending `u16`, a *bitmap* of
//! 1,024 `u64` words, or a *run* container: a `u16` run count and per run
//! its start and length less one (`u16` each). All little-endian.
//!
//! [`RoaringView::parse`] checks that every container's data lies inside the
//! bytes, so nothing afterwards can read out of bounds; contents it does not
//! check (order, cardinalities agreeing with the data) can only make the
//! answers wrong, never panic, and `Segment::verify` decodes every list in
//! full.

const COOKIE_NO_RUN: u32 = 12346;
const COOKIE_RUN: u32 = 12347;
const MAX_ARRAY: u32 = 4096;
const BITMAP_BYTES: usize = 8192;
const NO_OFFSET_THRESHOLD: usize = 4;

/// A serialized roaring bitmap, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoaringView<'a> {
    bytes: &'a [u8],
    count: usize,
    /// Byte offset of the run-container bitset (run cookie only).
    run_flags: Option<usize>,
    /// Byte offset of the descriptive header.
    descriptive: usize,
    /// Byte offset of the offset header, when there is one.
    offsets: Option<usize>,
    /// Where the first container's data starts.
    first_data: usize,
    len: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Array,
    Bitmap,
    Run,
}

#[derive(Debug, Clone, Copy)]
struct Container<'a> {
    /// The values' high bits, shifted into place.
    base: u64,
    cardinality: u32,
    kind: Kind,
    data: &'a [u8],
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

impl<'a> RoaringView<'a> {
    /// Reads the headers of the serialization at the start of `bytes` (which
    /// may continue past its end) and checks every container's extent.
    ///
    /// # Errors
    /// What is malformed, for the caller's corruption error.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, &'static str> {
        if bytes.len() < 4 {
            return Err("bitmap shorter than its cookie");
        }
        let cookie = u32_at(bytes, 0);
        let (count, run_flags, descriptive) = if cookie == COOKIE_NO_RUN {
            if bytes.len() < 8 {
                return Err("bitmap shorter than its header");
            }
            (u32_at(bytes, 4) as usize, None, 8)
        } else if cookie & 0xFFFF == COOKIE_RUN {
            let count = (cookie >> 16) as usize + 1;
            (count, Some(4), 4 + count.div_ceil(8))
        } else {
            return Err("unknown bitmap cookie");
        };
        if count > 1 << 16 {
            return Err("more bitmap containers than keys");
        }
        let has_offsets = run_flags.is_none() || count >= NO_OFFSET_THRESHOLD;
        let offsets = has_offsets.then_some(descriptive + 4 * count);
        let first_data = descriptive + 4 * count + if has_offsets { 4 * count } else { 0 };
        if bytes.len() < first_data {
            return Err("bitmap headers truncated");
        }
        let mut view = RoaringView { bytes, count, run_flags, descriptive, offsets, first_data, len: 0 };
        let mut next = first_data;
        let mut len = 0u64;
        for i in 0..count {
            let start = match offsets {
                Some(at) => u32_at(bytes, at + 4 * i) as usize,
                None => next,
            };
            let end = view.extent(i, start).ok_or("bitmap container outside its bytes")?;
            next = end;
            len += u64::from(u16_at(bytes, descriptive + 4 * i + 2)) + 1;
        }
        view.len = len;
        Ok(view)
    }

    /// The end of container `i`'s data starting at `start`, if it lies
    /// inside the bytes.
    fn extent(&self, i: usize, start: usize) -> Option<usize> {
        let size = match self.kind(i) {
            Kind::Array => 2 * self.cardinality(i) as usize,
            Kind::Bitmap => BITMAP_BYTES,
            Kind::Run => 2 + 4 * usize::from(u16_at(self.bytes.get(..start.checked_add(2)?)?, start)),
        };
        let end = start.checked_add(size)?;
        (end <= self.bytes.len()).then_some(end)
    }

    fn cardinality(&self, i: usize) -> u32 {
        u32::from(u16_at(self.bytes, self.descriptive + 4 * i + 2)) + 1
    }

    fn kind(&self, i: usize) -> Kind {
        if let Some(flags) = self.run_flags {
            if self.bytes[flags + i / 8] & (1 << (i % 8)) != 0 {
                return Kind::Run;
            }
        }
        if self.cardinality(i) <= MAX_ARRAY {
            Kind::Array
        } else {
            Kind::Bitmap
        }
    }

    fn container(&self, i: usize) -> Container<'a> {
        let start = match self.offsets {
            Some(at) => u32_at(self.bytes, at + 4 * i) as usize,
            // At most three containers: walk from the first.
            None => (0..i).fold(self.first_data, |at, j| self.extent(j, at).unwrap_or(at)),
        };
        // `parse` checked every extent, so this is inside the bytes.
        let end = self.extent(i, start).unwrap_or(start);
        Container {
            base: u64::from(u16_at(self.bytes, self.descriptive + 4 * i)) << 16,
            cardinality: self.cardinality(i),
            kind: self.kind(i),
            data: &self.bytes[start.min(end)..end],
        }
    }

    /// Number of values.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the bitmap holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The container whose values share `value`'s high bits.
    fn find(&self, value: u32) -> Option<Container<'a>> {
        let key = value >> 16;
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match u32::from(u16_at(self.bytes, self.descriptive + 4 * mid)).cmp(&key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(self.container(mid)),
            }
        }
        None
    }

    /// Whether `value` is in the bitmap.
    pub fn contains(&self, value: u32) -> bool {
        self.find(value).is_some_and(|c| c.count(u32::from(value as u16), u32::from(value as u16)) > 0)
    }

    /// Number of values in `range`.
    pub fn count_in(&self, range: std::ops::Range<u32>) -> u64 {
        let (first, end) = (u64::from(range.start), u64::from(range.end));
        let mut total = 0;
        for i in 0..self.count {
            let c = self.container(i);
            let (lo, hi) = (first.max(c.base), end.min(c.base + 0x1_0000));
            if lo >= hi {
                continue;
            }
            total += if lo == c.base && hi == c.base + 0x1_0000 {
                u64::from(c.cardinality)
            } else {
                u64::from(c.count((lo - c.base) as u32, (hi - 1 - c.base) as u32))
            };
        }
        total
    }

    /// The largest value, if any: the last one of the last container.
    pub fn max(&self) -> Option<u32> {
        let c = self.container(self.count.checked_sub(1)?);
        let low = match c.kind {
            Kind::Array => u32::from(u16_at(c.data, c.data.len().checked_sub(2)?)),
            Kind::Bitmap => {
                let i = (0..BITMAP_BYTES / 8).rev().find(|&i| c.word(i) != 0)?;
                64 * i as u32 + 63 - c.word(i).leading_zeros()
            }
            Kind::Run => c.run(c.runs().checked_sub(1)?).1,
        };
        u32::try_from(c.base + u64::from(low)).ok()
    }

    /// The values in `range`, ascending.
    pub fn iter_in(&self, range: std::ops::Range<u32>) -> Iter<'a> {
        Iter { view: *self, next: 0, start: u64::from(range.start), end: u64::from(range.end), at: At::Between }
    }
}

impl Container<'_> {
    /// Number of values whose low 16 bits are in `[lo, hi]`.
    fn count(&self, lo: u32, hi: u32) -> u32 {
        match self.kind {
            Kind::Array => {
                // Saturating: a damaged, unsorted array must not underflow.
                self.lower_bound(hi + 1).saturating_sub(self.lower_bound(lo)) as u32
            }
            Kind::Bitmap => {
                let mut total = 0;
                for word_index in lo / 64..=hi / 64 {
                    let mut word = self.word(word_index as usize);
                    if word_index == lo / 64 {
                        word &= u64::MAX << (lo % 64);
                    }
                    if word_index == hi / 64 && hi % 64 != 63 {
                        word &= (1u64 << (hi % 64 + 1)) - 1;
                    }
                    total += word.count_ones();
                }
                total
            }
            Kind::Run => {
                let mut total = 0;
                for r in 0..self.runs() {
                    let (start, last) = self.run(r);
                    let (a, b) = (start.max(lo), last.min(hi));
                    if a <= b {
                        total += b - a + 1;
                    }
                }
                total
            }
        }
    }

    /// Index of the first array value at least `value`.
    fn lower_bound(&self, value: u32) -> usize {
        let (mut lo, mut hi) = (0, self.data.len() / 2);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if u32::from(u16_at(self.data, 2 * mid)) < value {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    fn word(&self, i: usize) -> u64 {
        let at = 8 * i;
        u64::from_le_bytes(self.data[at..at + 8].try_into().unwrap_or([0; 8]))
    }

    fn runs(&self) -> usize {
        (self.data.len() - 2) / 4
    }

    /// Run `r` as (first, last) value.
    fn run(&self, r: usize) -> (u32, u32) {
        let start = u32::from(u16_at(self.data, 2 + 4 * r));
        (start, start + u32::from(u16_at(self.data, 4 + 4 * r)))
    }
}

/// Where an [`Iter`] is: between containers, or inside one.
#[derive(Debug, Clone, Copy)]
enum At<'a> {
    Between,
    Array { c: Container<'a>, index: usize },
    Bitmap { c: Container<'a>, word_index: usize, word: u64 },
    Run { c: Container<'a>, run: usize, value: u32 },
}

/// The values of a [`RoaringView`] in a range, ascending.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    view: RoaringView<'a>,
    /// The next container to enter.
    next: usize,
    start: u64,
    end: u64,
    at: At<'a>,
}

impl Iterator for Iter<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        loop {
            let low = match &mut self.at {
                At::Between => {
                    if self.next >= self.view.count {
                        return None;
                    }
                    let c = self.view.container(self.next);
                    self.next += 1;
                    if c.base >= self.end {
                        self.next = self.view.count;
                        return None;
                    }
                    if c.base + 0x1_0000 <= self.start {
                        continue;
                    }
                    let from = self.start.saturating_sub(c.base) as u32;
                    self.at = match c.kind {
                        Kind::Array => At::Array { c, index: c.lower_bound(from) },
                        Kind::Bitmap => {
                            let word_index = (from / 64) as usize;
                            At::Bitmap { c, word_index, word: c.word(word_index) & (u64::MAX << (from % 64)) }
                        }
                        Kind::Run => At::Run { c, run: 0, value: from },
                    };
                    continue;
                }
                At::Array { c, index } => {
                    if *index >= c.data.len() / 2 {
                        self.at = At::Between;
                        continue;
                    }
                    *index += 1;
                    (c.base, u32::from(u16_at(c.data, 2 * (*index - 1))))
                }
                At::Bitmap { c, word_index, word } => {
                    while *word == 0 {
                        *word_index += 1;
                        if *word_index >= BITMAP_BYTES / 8 {
                            break;
                        }
                        *word = c.word(*word_index);
                    }
                    if *word == 0 {
                        self.at = At::Between;
                        continue;
                    }
                    let bit = word.trailing_zeros();
                    *word &= *word - 1;
                    (c.base, (*word_index as u32) * 64 + bit)
                }
                At::Run { c, run, value } => {
                    let mut found = None;
                    while *run < c.runs() {
                        let (first, last) = c.run(*run);
                        let v = (*value).max(first);
                        if v <= last {
                            *value = v + 1;
                            found = Some(v);
                            break;
                        }
                        *run += 1;
                    }
                    match found {
                        Some(v) => (c.base, v),
                        None => {
                            self.at = At::Between;
                            continue;
                        }
                    }
                }
            };
            let value = low.0 + u64::from(low.1);
            if value >= self.end {
                self.next = self.view.count;
                self.at = At::Between;
                return None;
            }
            if value < self.start {
                // Only a damaged (unsorted) container gets here.
                continue;
            }
            return Some(value as u32);
        }
    }
}

/// Appends to `out` the serialization of the roaring bitmap of `ordinals`
/// (strictly ascending, not empty), without run containers: the bytes the
/// `roaring` crate's `serialize_into` writes for a bitmap built by
/// `append` of the same ordinals (every container of at most 4,096 values
/// an array, else a bitmap), written straight from the slice instead of
/// through a `RoaringBitmap` (a vector per container, filled value by
/// value, then copied out).
pub(super) fn serialize_sorted_into(ordinals: &[u32], out: &mut Vec<u8>) {
    debug_assert!(!ordinals.is_empty() && ordinals.windows(2).all(|w| w[0] < w[1]));
    let bytes_of =
        |container: &[u32]| if container.len() as u32 <= MAX_ARRAY { 2 * container.len() } else { BITMAP_BYTES };
    // The containers and their data's bytes, in one walk.
    let (count, data) = containers_of(ordinals).fold((0, 0), |(count, data), c| (count + 1, data + bytes_of(c)));
    let header = 8 + 8 * count;
    let total = header + data;
    let at = out.len();
    out.resize(at + total, 0);
    let bytes = &mut out[at..];
    bytes[..4].copy_from_slice(&COOKIE_NO_RUN.to_le_bytes());
    bytes[4..8].copy_from_slice(&(count as u32).to_le_bytes());
    let mut offset = header;
    for (i, container) in containers_of(ordinals).enumerate() {
        let description = &mut bytes[8 + 4 * i..12 + 4 * i];
        description[..2].copy_from_slice(&((container[0] >> 16) as u16).to_le_bytes());
        description[2..].copy_from_slice(&((container.len() - 1) as u16).to_le_bytes());
        bytes[8 + 4 * count + 4 * i..12 + 4 * count + 4 * i].copy_from_slice(&(offset as u32).to_le_bytes());
        let data = &mut bytes[offset..offset + bytes_of(container)];
        if container.len() as u32 <= MAX_ARRAY {
            for (slot, &value) in data.chunks_exact_mut(2).zip(container) {
                slot.copy_from_slice(&(value as u16).to_le_bytes());
            }
        } else {
            // The bytes are zeros: each value sets its bit.
            for &value in container {
                let bit = usize::from(value as u16);
                data[bit / 8] |= 1 << (bit % 8);
            }
        }
        offset += data.len();
    }
}

/// The runs of sorted `ordinals` that share their high 16 bits (a roaring
/// bitmap's containers), each found by a search of the rest: a list of a
/// segment's ordinals spans a few at most.
fn containers_of(ordinals: &[u32]) -> impl Iterator<Item = &[u32]> {
    let mut rest = ordinals;
    std::iter::from_fn(move || {
        let &first = rest.first()?;
        let (container, tail) = rest.split_at(rest.partition_point(|&v| v >> 16 == first >> 16));
        rest = tail;
        Some(container)
    })
}

/// A small deterministic generator for this module's and the segment's
/// tests (xorshift64).
#[cfg(test)]
pub(super) fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roaring::RoaringBitmap;

    fn bytes_of(bitmap: &RoaringBitmap) -> Vec<u8> {
        let mut out = Vec::new();
        bitmap.serialize_into(&mut out).unwrap();
        out
    }

    fn check(bitmap: &RoaringBitmap, ranges: &[std::ops::Range<u32>]) {
        let bytes = bytes_of(bitmap);
        let view = RoaringView::parse(&bytes).unwrap();
        assert_eq!(view.len(), bitmap.len());
        assert_eq!(view.max(), bitmap.max());
        for range in ranges {
            let expected: Vec<u32> = bitmap.range(range.clone()).collect();
            assert_eq!(view.iter_in(range.clone()).collect::<Vec<_>>(), expected, "{range:?}");
            assert_eq!(view.count_in(range.clone()), bitmap.range_cardinality(range.clone()), "{range:?}");
        }
        for probe in bitmap.iter().take(200).chain([0, 1, 65_535, 65_536, 1 << 20, u32::MAX]) {
            assert_eq!(view.contains(probe), bitmap.contains(probe), "{probe}");
            assert!(!view.contains(probe.wrapping_add(1)) || bitmap.contains(probe.wrapping_add(1)));
        }
    }

    fn ranges() -> Vec<std::ops::Range<u32>> {
        vec![0..u32::MAX, 0..0, 5..6, 100..70_000, 65_535..65_537, 65_536..131_072, 3..200_000, 131_000..400_000]
    }

    #[test]
    fn arrays_bitmaps_and_runs_read_like_the_crate() {
        // Array containers.
        check(&RoaringBitmap::from_iter([1u32, 5, 9, 65_536, 65_540, 200_000]), &ranges());
        // A bitmap container (more than 4,096 values under one key).
        check(&RoaringBitmap::from_iter((0u32..70_000).filter(|v| v % 3 != 0)), &ranges());
        // Run containers (the run cookie), fewer and more than four.
        let mut runs = RoaringBitmap::from_iter((10u32..5_000).chain(70_000..70_100));
        runs.optimize();
        check(&runs, &ranges());
        let mut many = RoaringBitmap::from_iter((0u32..6).flat_map(|k| (k << 16) + 7..(k << 16) + 900));
        many.optimize();
        check(&many, &ranges());
        check(&RoaringBitmap::new(), &ranges());
    }

    #[test]
    fn lists_serialize_as_the_crate_serializes_them() {
        let mut next = xorshift(0x2545_F491_4F6C_DD1D);
        let mut cases: Vec<Vec<u32>> = vec![
            vec![0],
            vec![u32::MAX],
            vec![3, 65_535, 65_536, u32::MAX],
            // 4,096 values under one key (an array) and 4,097 (a bitmap).
            (0..4_096).map(|v| v * 16).collect(),
            (0..4_097).map(|v| v * 15).collect(),
            (0..70_000).filter(|v| v % 3 != 0).collect(),
            (0..200_000).collect(),
        ];
        for _ in 0..300 {
            let span = 1 + next() % (1 << 20);
            let n = (next() % 6_000) as usize + 1;
            let mut list: Vec<u32> = (0..n).map(|_| (next() % span) as u32).collect();
            list.sort_unstable();
            list.dedup();
            cases.push(list);
        }
        for list in cases {
            let mut expected = Vec::new();
            let mut bitmap = RoaringBitmap::new();
            bitmap.append(list.iter().copied()).unwrap();
            bitmap.serialize_into(&mut expected).unwrap();
            // Appended after bytes already there, as a data section's lists are.
            let mut got = vec![7u8; 3];
            serialize_sorted_into(&list, &mut got);
            assert_eq!(got[..3], [7, 7, 7]);
            assert_eq!(got[3..], expected[..], "{} ordinals", list.len());
        }
    }

    #[test]
    fn random_bitmaps_read_like_the_crate() {
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
        for round in 0..200 {
            let spread = [300u64, 70_000, 1 << 20][round % 3];
            let n = next() % 6_000;
            let mut bitmap = RoaringBitmap::from_iter((0..n).map(|_| (next() % spread) as u32));
            if round % 4 == 0 {
                bitmap.optimize();
            }
            let mut probes = ranges();
            for _ in 0..8 {
                let (a, b) = ((next() % spread) as u32, (next() % spread) as u32);
                probes.push(a.min(b)..a.max(b));
            }
            check(&bitmap, &probes);
        }
    }

    #[test]
    fn damaged_bytes_are_refused_or_read_without_panicking() {
        let mut runs = RoaringBitmap::from_iter((10u32..5_000).chain(70_000..70_100).chain([300_000]));
        runs.optimize();
        for bitmap in [RoaringBitmap::from_iter((0u32..70_000).step_by(3)), runs] {
            let bytes = bytes_of(&bitmap);
            for len in 0..bytes.len() {
                if let Ok(view) = RoaringView::parse(&bytes[..len]) {
                    let _ = view.iter_in(0..u32::MAX).count();
                }
            }
            for at in 0..bytes.len().min(64) {
                for bit in 0..8 {
                    let mut flipped = bytes.clone();
                    flipped[at] ^= 1 << bit;
                    if let Ok(view) = RoaringView::parse(&flipped) {
                        let _ = view.iter_in(0..u32::MAX).take(100_000).count();
                        let _ = view.count_in(3..100_000);
                        let _ = view.contains(70_050);
                    }
                }
            }
        }
    }
}
