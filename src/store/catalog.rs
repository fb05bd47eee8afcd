//! The catalog (FORMAT.md §6): redb tables and the encodings of their
//! records. A redb commit is the only commit point of the index.

use redb::{MultimapTableDefinition, TableDefinition};

use super::error::IndexError;
use super::redb_err;
use crate::hash::Fingerprint;
use crate::vector::SignatureVector;

/// File name of the catalog inside the index directory.
pub const CATALOG_FILE: &str = "catalog.redb";
/// The catalog format version this build writes.
pub const CATALOG_VERSION: u32 = 3;
/// The oldest catalog format version this build reads (a writable open
/// upgrades it: FORMAT.md §6.1).
pub const CATALOG_VERSION_MIN: u32 = 1;

/// `meta`: named values (`format`, `config`, `next_doc_id`, `next_segment_id`).
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// `keys`: external key → document id.
pub const KEYS: TableDefinition<&str, u64> = TableDefinition::new("keys");
/// `docs`: document id → [`DocRecord`]. A live document's vector is in
/// `pending` when that table holds its id, and otherwise in the one live
/// segment whose id index lists it.
pub const DOCS: TableDefinition<u64, &[u8]> = TableDefinition::new("docs");
/// `pending`: document id → [`PendingRecord`] for documents not yet flushed.
pub const PENDING: TableDefinition<u64, &[u8]> = TableDefinition::new("pending");
/// `deleted`: document id → segment id, for deleted documents a segment
/// still holds.
pub const DELETED: TableDefinition<u64, u64> = TableDefinition::new("deleted");
/// `manifest`: segment id → [`SegmentRecord`]: the live segments.
pub const MANIFEST: TableDefinition<u64, &[u8]> = TableDefinition::new("manifest");
/// `fingerprints`: exact-content fingerprint → ids of live documents. Since
/// catalog format version 2 it must list the live documents of segments
/// older than segment format 4 (which store no fingerprints); it may list
/// others (all of a version 1 catalog's), and new documents are not added.
pub const FINGERPRINTS: MultimapTableDefinition<u128, u64> = MultimapTableDefinition::new("fingerprints");

/// Descriptive metadata stored with a document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    /// Where the document came from.
    pub url: Option<String>,
    /// The WARC record it was read from.
    pub warc_record_id: Option<String>,
    /// A date, as the source gave it (for WARC, `WARC-Date`).
    pub date: Option<String>,
    /// Anything else the caller wants kept.
    pub user: Vec<u8>,
}

/// A document's catalog record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocRecord {
    /// The external key.
    pub key: String,
    /// Exact-content fingerprint.
    pub fingerprint: Fingerprint,
    /// Descriptive metadata.
    pub metadata: Metadata,
}

impl DocRecord {
    /// The encoding (FORMAT.md §6.2): record version 2, whose lengths are
    /// varints.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_as(2)
    }

    /// The encoding in record version 1 (`u32` lengths) or 2 (varints).
    pub(crate) fn encode_as(&self, version: u8) -> Vec<u8> {
        let put = |out: &mut Vec<u8>, bytes: &[u8]| {
            if version == 1 {
                out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            } else {
                put_varint(out, bytes.len() as u64);
            }
            out.extend_from_slice(bytes);
        };
        let mut out = Vec::with_capacity(32 + self.key.len());
        out.push(version);
        out.extend_from_slice(&self.fingerprint.to_le_bytes());
        put(&mut out, self.key.as_bytes());
        let m = &self.metadata;
        let flags =
            u8::from(m.url.is_some()) | u8::from(m.warc_record_id.is_some()) << 1 | u8::from(m.date.is_some()) << 2;
        out.push(flags);
        for field in [&m.url, &m.warc_record_id, &m.date].into_iter().flatten() {
            put(&mut out, field.as_bytes());
        }
        put(&mut out, &m.user);
        out
    }

    /// Reads a record back; `id` names it in errors.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] for malformed bytes.
    pub fn decode(bytes: &[u8], id: u64) -> Result<Self, IndexError> {
        let mut r = Reader::new(bytes, "docs", id);
        r.varint_lengths = match r.u8()? {
            1 => false,
            2 => true,
            _ => return Err(r.bad("unknown record version")),
        };
        let fingerprint = Fingerprint(u128::from_le_bytes(r.array()?));
        let key = r.string()?;
        let flags = r.u8()?;
        if flags & !0b111 != 0 {
            return Err(r.bad("unknown metadata flags"));
        }
        let mut optional = |bit: u8| if flags & bit != 0 { r.string().map(Some) } else { Ok(None) };
        let url = optional(1)?;
        let warc_record_id = optional(2)?;
        let date = optional(4)?;
        let user = r.bytes()?.to_vec();
        r.end()?;
        Ok(DocRecord { key, fingerprint, metadata: Metadata { url, warc_record_id, date, user } })
    }
}

/// A pending document's signature vector, band keys and fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRecord {
    /// The signature vector.
    pub vector: SignatureVector,
    /// The LSH band keys.
    pub band_keys: Vec<u64>,
    /// The exact-content fingerprint (written since catalog format version
    /// 2; `None` in a record written before, whose document's [`DocRecord`]
    /// holds it).
    pub fingerprint: Option<Fingerprint>,
}

impl PendingRecord {
    /// The encoding (FORMAT.md §6.3).
    pub fn encode(&self) -> Vec<u8> {
        let n = self.vector.distinct() as usize;
        let mut out = Vec::with_capacity(24 + n * 12 + self.band_keys.len() * 8);
        out.extend_from_slice(&(n as u32).to_le_bytes());
        for h in self.vector.hashes() {
            out.extend_from_slice(&h.to_le_bytes());
        }
        for f in self.vector.freqs() {
            out.extend_from_slice(&f.to_le_bytes());
        }
        out.extend_from_slice(&(self.band_keys.len() as u32).to_le_bytes());
        for k in &self.band_keys {
            out.extend_from_slice(&k.to_le_bytes());
        }
        if let Some(fingerprint) = self.fingerprint {
            out.extend_from_slice(&fingerprint.to_le_bytes());
        }
        out
    }

    /// Reads a record back; `id` names it in errors.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] for malformed bytes or an unsorted vector.
    pub fn decode(bytes: &[u8], id: u64) -> Result<Self, IndexError> {
        let mut r = Reader::new(bytes, "pending", id);
        let n = r.u32()? as usize;
        if n > bytes.len() / 12 {
            return Err(r.bad("vector longer than the record"));
        }
        let hashes: Vec<u64> = (0..n).map(|_| r.u64()).collect::<Result<_, _>>()?;
        let freqs: Vec<u32> = (0..n).map(|_| r.u32()).collect::<Result<_, _>>()?;
        let vector = SignatureVector::from_sorted(hashes, freqs).ok_or_else(|| r.bad("vector not strictly sorted"))?;
        let b = r.u32()? as usize;
        if b > bytes.len() / 8 {
            return Err(r.bad("band keys longer than the record"));
        }
        let band_keys = (0..b).map(|_| r.u64()).collect::<Result<_, _>>()?;
        let fingerprint = if r.at == bytes.len() { None } else { Some(Fingerprint(u128::from_le_bytes(r.array()?))) };
        r.end()?;
        Ok(PendingRecord { vector, band_keys, fingerprint })
    }
}

/// A live segment's manifest record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentRecord {
    /// Documents in the segment (live or deleted).
    pub doc_count: u32,
    /// File size in bytes.
    pub byte_len: u64,
    /// CRC32 of the whole file.
    pub file_crc: u32,
}

impl SegmentRecord {
    /// The encoding (FORMAT.md §6.4): 16 bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16);
        out.extend_from_slice(&self.doc_count.to_le_bytes());
        out.extend_from_slice(&self.file_crc.to_le_bytes());
        out.extend_from_slice(&self.byte_len.to_le_bytes());
        out
    }

    /// Reads a record back.
    ///
    /// # Errors
    /// [`IndexError::Corrupted`] unless it is exactly 16 bytes.
    pub fn decode(bytes: &[u8], id: u64) -> Result<Self, IndexError> {
        let mut r = Reader::new(bytes, "manifest", id);
        let record = SegmentRecord { doc_count: r.u32()?, file_crc: r.u32()?, byte_len: r.u64()? };
        r.end()?;
        Ok(record)
    }
}

/// The file name of segment `id`.
pub fn segment_file_name(id: u64) -> String {
    format!("seg-{id:016x}.nds")
}

/// The segment id of a file name written by [`segment_file_name`].
pub fn segment_id_of(name: &str) -> Option<u64> {
    let hex = name.strip_prefix("seg-")?.strip_suffix(".nds")?;
    (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok()).flatten()
}

/// The free bytes in the `keys` table's pages below which [`repack_keys`]
/// leaves it alone: a small table's part-empty last leaf is no reason to
/// rewrite it at every compaction.
const REPACK_MIN_FREE: u64 = 64 << 10;

/// Where [`repack_keys`] copies the `keys` table meanwhile: inside its one
/// transaction only, so no committed catalog holds it.
const KEYS_REPACKED: TableDefinition<&str, u64> = TableDefinition::new("keys.repacked");

/// Rewrites the `keys` table into full B-tree leaves when more than a
/// quarter of its pages' bytes, and at least [`REPACK_MIN_FREE`] bytes,
/// are free, and says whether it did.
///
/// Keys arrive in any order (URLs as a crawl finds them, numbers that do
/// not sort as text), and redb splits a full leaf in two halves, so a
/// table built by inserts in the middle keeps its leaves a half to two
/// thirds full (at 1M documents: 13.9 MB of keys in 33.7 MB of pages).
/// Copied in key order through one cursor, whose run of inserts redb packs
/// into full leaves, it takes about half the pages. A table of at most
/// [`REPACK_IN_MEMORY`] stored bytes is read into memory and written back
/// once; a larger one streams to a scratch table and back (memory does
/// not grow with the table). Either way within `txn`: the caller commits
/// it, or a failure leaves the catalog as it was.
///
/// # Errors
/// Catalog errors.
pub fn repack_keys(txn: &redb::WriteTransaction) -> Result<bool, IndexError> {
    repack_keys_within(txn, REPACK_IN_MEMORY)
}

/// The most stored bytes of the `keys` table (keys and ids) that
/// [`repack_keys`] holds in memory to copy it once instead of twice: 1M
/// keys of a few digits are about 14 MB, 1M URLs about 70 MB. The copy in
/// memory holds the keys' text and 16 bytes an entry besides (at most
/// twice the bound in all, for the shortest keys). Copied once, 1M keys
/// of a few digits were repacked in 0.22-0.23 s against 0.42-0.45 s
/// through the scratch table.
const REPACK_IN_MEMORY: u64 = 64 << 20;

/// [`repack_keys`], holding the table in memory when its stored bytes are
/// at most `in_memory` (tests take both ways).
fn repack_keys_within(txn: &redb::WriteTransaction, in_memory: u64) -> Result<bool, IndexError> {
    use redb::ReadableTableMetadata;
    let stats = txn.open_table(KEYS).and_then(|t| Ok(t.stats()?)).map_err(redb_err("reading keys"))?;
    let free = stats.fragmented_bytes();
    if free <= (stats.stored_bytes() + stats.metadata_bytes()) / 4 || free < REPACK_MIN_FREE {
        return Ok(false);
    }
    if stats.stored_bytes() <= in_memory {
        let held = KeysInMemory::read(txn)?;
        txn.delete_table(KEYS).map_err(redb_err(REPACKING))?;
        held.write(txn)?;
    } else {
        copy_in_key_order(txn, KEYS, KEYS_REPACKED)?;
        txn.delete_table(KEYS).map_err(redb_err(REPACKING))?;
        copy_in_key_order(txn, KEYS_REPACKED, KEYS)?;
        txn.delete_table(KEYS_REPACKED).map_err(redb_err(REPACKING))?;
    }
    Ok(true)
}

/// The `keys` table's entries in key order, held for [`repack_keys`]: the
/// keys' text one after another, and where each ends with its id.
struct KeysInMemory {
    text: String,
    entries: Vec<(usize, u64)>,
}

impl KeysInMemory {
    fn read(txn: &redb::WriteTransaction) -> Result<KeysInMemory, IndexError> {
        use redb::{ReadableTable, ReadableTableMetadata};
        let table = txn.open_table(KEYS).map_err(redb_err(REPACKING))?;
        let count = table.len().map_err(redb_err(REPACKING))?;
        let mut held = KeysInMemory { text: String::new(), entries: Vec::with_capacity(count as usize) };
        for entry in table.iter().map_err(redb_err(REPACKING))? {
            let (key, id) = entry.map_err(redb_err(REPACKING))?;
            held.text.push_str(key.value());
            held.entries.push((held.text.len(), id.value()));
        }
        Ok(held)
    }

    /// Writes the entries into the (empty) `keys` table.
    fn write(&self, txn: &redb::WriteTransaction) -> Result<(), IndexError> {
        insert_in_key_order(txn, KEYS, |insert| {
            let mut start = 0;
            for &(end, id) in &self.entries {
                insert(&self.text[start..end], id)?;
                start = end;
            }
            Ok(())
        })
    }
}

/// Copies every entry of `from` into `to` (empty) in key order.
fn copy_in_key_order(
    txn: &redb::WriteTransaction,
    from: TableDefinition<&str, u64>,
    to: TableDefinition<&str, u64>,
) -> Result<(), IndexError> {
    use redb::ReadableTable;
    let source = txn.open_table(from).map_err(redb_err(REPACKING))?;
    insert_in_key_order(txn, to, |insert| {
        for entry in source.iter().map_err(redb_err(REPACKING))? {
            let (key, id) = entry.map_err(redb_err(REPACKING))?;
            insert(key.value(), id.value())?;
        }
        Ok(())
    })
}

/// What the repack's catalog errors say it was doing.
const REPACKING: &str = "repacking keys";

/// Inserts into `to` (empty) the entries `fill` hands its `insert`, which
/// come in key order, through one cursor at the end of `to` (whose run of
/// inserts redb packs into full leaves).
fn insert_in_key_order(
    txn: &redb::WriteTransaction,
    to: TableDefinition<&str, u64>,
    fill: impl FnOnce(&mut dyn FnMut(&str, u64) -> Result<(), IndexError>) -> Result<(), IndexError>,
) -> Result<(), IndexError> {
    let mut target = txn.open_table(to).map_err(redb_err(REPACKING))?;
    let mut cursor = target.upper_bound_mut(std::ops::Bound::<&str>::Unbounded).map_err(redb_err(REPACKING))?;
    fill(&mut |key, id| cursor.insert_before(key, id).map(drop).map_err(redb_err(REPACKING)))?;
    cursor.close().map_err(redb_err(REPACKING))
}

/// `value` as a varint: seven bits a byte, least significant first, the top
/// bit set on every byte but the last.
fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A bounds-checked cursor whose errors name the table and record.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    table: &'static str,
    id: u64,
    /// Whether a field's length is a varint (document record version 2)
    /// rather than a `u32`.
    varint_lengths: bool,
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `bytes`, lengths in `u32`s.
    fn new(bytes: &'a [u8], table: &'static str, id: u64) -> Self {
        Reader { bytes, at: 0, table, id, varint_lengths: false }
    }

    fn bad(&self, reason: &str) -> IndexError {
        IndexError::corrupted(CATALOG_FILE, self.table, self.id, reason)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], IndexError> {
        let end =
            self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or_else(|| self.bad("record truncated"))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], IndexError> {
        let slice = self.take(N)?;
        slice.try_into().map_err(|_| self.bad("record truncated"))
    }

    fn u8(&mut self) -> Result<u8, IndexError> {
        Ok(self.array::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32, IndexError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, IndexError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A varint of at most 32 bits in its shortest form.
    fn varint(&mut self) -> Result<u32, IndexError> {
        let mut value = 0u64;
        for shift in (0..35).step_by(7) {
            let byte = self.u8()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                if byte == 0 && shift > 0 {
                    return Err(self.bad("length not in its shortest form"));
                }
                return u32::try_from(value).map_err(|_| self.bad("length above 2^32 - 1"));
            }
        }
        Err(self.bad("length longer than five bytes"))
    }

    fn bytes(&mut self) -> Result<&'a [u8], IndexError> {
        let n = if self.varint_lengths { self.varint()? } else { self.u32()? };
        self.take(n as usize)
    }

    fn string(&mut self) -> Result<String, IndexError> {
        let bytes = self.bytes()?;
        String::from_utf8(bytes.to_vec()).map_err(|_| self.bad("text field is not UTF-8"))
    }

    fn end(&self) -> Result<(), IndexError> {
        if self.at == self.bytes.len() {
            Ok(())
        } else {
            Err(self.bad("trailing bytes"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_reject_damage() {
        let doc = DocRecord {
            key: "warc:<urn:uuid:1>".into(),
            fingerprint: Fingerprint(0x0123_4567_89ab_cdef_0011_2233_4455_6677),
            metadata: Metadata {
                url: Some("http://example.com/".into()),
                warc_record_id: None,
                date: Some("2024-01-01".into()),
                user: vec![1, 2, 3],
            },
        };
        // Record version 2 (written today) and 1 (read still).
        for version in [2, 1] {
            let bytes = doc.encode_as(version);
            assert_eq!(bytes[0], version);
            assert_eq!(DocRecord::decode(&bytes, 1).unwrap(), doc);
            for len in 0..bytes.len() {
                assert!(DocRecord::decode(&bytes[..len], 1).is_err());
            }
            let mut trailing = bytes.clone();
            trailing.push(0);
            assert!(DocRecord::decode(&trailing, 1).is_err());
        }
        assert_eq!(doc.encode(), doc.encode_as(2));
        // Version 2 spends a byte on each short length where version 1
        // spends four: key, URL, date and user bytes here.
        assert_eq!(doc.encode_as(1).len() - doc.encode_as(2).len(), 4 * 3);
        let mut unknown = doc.encode();
        unknown[0] = 3;
        assert!(DocRecord::decode(&unknown, 1).is_err());
        // Lengths on both sides of each varint byte boundary.
        for n in [0, 1, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152] {
            let long = DocRecord { key: "k".repeat(n), ..doc.clone() };
            let bytes = long.encode();
            let width = [(1 << 7, 1), (1 << 14, 2), (1 << 21, 3), (1 << 28, 4)]
                .into_iter()
                .find_map(|(limit, width)| (n < limit).then_some(width))
                .unwrap();
            assert_eq!(bytes.len(), doc.encode().len() - 1 - doc.key.len() + width + n, "key of {n} bytes");
            assert_eq!(DocRecord::decode(&bytes, 1).unwrap(), long);
        }
        // A length in more bytes than it needs is damage, as is one of more
        // than five bytes or above 2^32 - 1.
        let at = 1 + 16;
        let mut overlong = doc.encode();
        assert_eq!(overlong[at] as usize, doc.key.len());
        overlong[at] |= 0x80;
        overlong.insert(at + 1, 0);
        assert!(DocRecord::decode(&overlong, 1).is_err());
        for length in [&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01][..], &[0xff, 0xff, 0xff, 0xff, 0x1f]] {
            let mut bytes = doc.encode();
            bytes.splice(at..at + 1, length.iter().copied());
            assert!(DocRecord::decode(&bytes, 1).is_err());
        }
        // No byte string panics the decoder, and no flip of one bit of a
        // record goes unnoticed unless it decodes to a valid record.
        let bytes = doc.encode();
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            if let Ok(decoded) = DocRecord::decode(&flipped, 1) {
                assert_eq!(decoded.encode_as(flipped[0]), flipped, "bit {bit}");
            }
        }
        let pending = PendingRecord {
            vector: SignatureVector::from_pairs([(3, 1), (9, 4)]),
            band_keys: vec![11, 12],
            fingerprint: Some(Fingerprint(7 << 100 | 5)),
        };
        let bytes = pending.encode();
        assert_eq!(PendingRecord::decode(&bytes, 1).unwrap(), pending);
        // Without its last 16 bytes it is the record catalog format 1
        // wrote: the same but for the fingerprint. Every other cut is damage.
        let v1 = bytes.len() - 16;
        let legacy = PendingRecord { fingerprint: None, ..pending.clone() };
        assert_eq!(PendingRecord::decode(&bytes[..v1], 1).unwrap(), legacy);
        assert_eq!(legacy.encode(), &bytes[..v1]);
        for len in (0..bytes.len()).filter(|&len| len != v1) {
            assert!(PendingRecord::decode(&bytes[..len], 1).is_err());
        }
        let seg = SegmentRecord { doc_count: 3, byte_len: 4096, file_crc: 0xdead_beef };
        assert_eq!(SegmentRecord::decode(&seg.encode(), 1).unwrap(), seg);
        assert_eq!(segment_id_of(&segment_file_name(0xabc)), Some(0xabc));
        assert_eq!(segment_id_of("seg-xyz.nds"), None);
    }

    /// Keys inserted out of order leave the table's leaves part empty;
    /// `repack_keys` rewrites it into about half the pages with the same
    /// entries, and leaves a packed table alone.
    #[test]
    fn repacking_the_keys_table_keeps_its_entries_in_fewer_pages() {
        use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};
        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("catalog.redb")).unwrap();
        // Decimal numbers, which do not ascend as text, inserted as a
        // harness inserts them, and a few thousand keys in a scattered order.
        let keys: Vec<String> = (0..40_000u64)
            .map(|i| i.to_string())
            .chain((0..5_000u64).map(|i| format!("url-{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15))))
            .collect();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(KEYS).unwrap();
            for (id, key) in keys.iter().enumerate() {
                table.insert(key.as_str(), id as u64).unwrap();
            }
        }
        txn.commit().unwrap();
        let entries = || -> Vec<(String, u64)> {
            let txn = db.begin_read().unwrap();
            let table = txn.open_table(KEYS).unwrap();
            table.iter().unwrap().map(|e| e.map(|(k, v)| (k.value().to_owned(), v.value())).unwrap()).collect()
        };
        let leaves = || db.begin_read().unwrap().open_table(KEYS).unwrap().stats().unwrap().leaf_pages();
        let before = (entries(), leaves());
        assert_eq!(before.0.len(), keys.len());
        // Held in memory and written once (as repack_keys does with a table
        // this small), and streamed through the scratch table and back (a
        // larger one), each in a transaction of its own, aborted before the
        // last: the same entries in the same fewer leaves either way.
        let mut packed = None;
        for (in_memory, keep) in [(0, false), (u64::MAX, true)] {
            let txn = db.begin_write().unwrap();
            assert!(repack_keys_within(&txn, in_memory).unwrap(), "a table built out of order is repacked");
            let table = txn.open_table(KEYS).unwrap();
            let got: Vec<(String, u64)> =
                table.iter().unwrap().map(|e| e.map(|(k, v)| (k.value().to_owned(), v.value())).unwrap()).collect();
            assert_eq!(got, before.0, "in memory up to {in_memory} bytes");
            let leaves_now = table.stats().unwrap().leaf_pages();
            assert_eq!(*packed.get_or_insert(leaves_now), leaves_now, "both ways pack alike");
            drop(table);
            if keep {
                txn.commit().unwrap();
            } else {
                txn.abort().unwrap();
            }
        }
        let after = (entries(), leaves());
        assert_eq!(after.0, before.0);
        assert!(after.1 * 10 < before.1 * 7, "{} leaves after, {} before", after.1, before.1);
        eprintln!("keys table: {} leaves before the repack, {} after", before.1, after.1);
        // No scratch table is left, and a packed table stays as it is.
        let txn = db.begin_write().unwrap();
        let tables: Vec<String> = txn.list_tables().unwrap().map(|t| redb::TableHandle::name(&t).to_owned()).collect();
        assert_eq!(tables, ["keys"]);
        assert!(!repack_keys(&txn).unwrap());
        // A small table, its few leaves part empty, is left alone too.
        txn.delete_table(KEYS).unwrap();
        {
            let mut table = txn.open_table(KEYS).unwrap();
            for (id, key) in keys.iter().take(300).enumerate() {
                table.insert(key.as_str(), id as u64).unwrap();
            }
        }
        assert!(!repack_keys(&txn).unwrap());
        txn.abort().unwrap();
    }
}
