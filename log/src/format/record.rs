//! Records inside a v2 batch: borrowed views, no allocation per record.
//!
//! Layout (`DefaultRecord.java`): length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
//! key (varint length, -1 = null), value (likewise), header count varint, headers. The body must be exactly
//! `length` bytes; header keys are never null.

use super::record_layout::RecordLayout;
use super::varint::Cursor;
use super::{increment_sequence, NO_SEQUENCE};
use crate::{Corruption, Error, RecordCorruption};

/// One record, with its absolute offset and timestamp resolved against the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    /// The absolute offset: base offset + offset delta.
    pub offset: i64,
    /// The record's timestamp; for LogAppendTime batches the batch's max timestamp, as Kafka reports it.
    pub timestamp: i64,
    /// The offset delta in the batch.
    pub offset_delta: i32,
    /// The timestamp delta from the base timestamp.
    pub timestamp_delta: i64,
    /// Kafka's per-record sequence: base sequence + offset delta, wrapping, or -1 without a producer.
    pub sequence: i32,
    /// The record attributes (unused by Kafka: 0).
    pub attributes: i8,
    /// The key (`None`: null).
    pub key: Option<&'a [u8]>,
    /// The value (`None`: null, a tombstone).
    pub value: Option<&'a [u8]>,
    /// The headers, decoded lazily.
    pub headers: HeaderIter<'a>,
    /// Encoded size of the record including its length varint.
    pub size_in_bytes: usize,
}

/// The headers of a record, validated when the record was parsed; iteration cannot fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderIter<'a> {
    pub(super) cursor: Cursor<'a>,
    pub(super) remaining: u32,
}

impl<'a> HeaderIter<'a> {
    /// The number of headers.
    pub fn len(&self) -> usize {
        self.remaining as usize
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.remaining == 0
    }
}

impl<'a> Iterator for HeaderIter<'a> {
    /// (key bytes, as Kafka's UTF-8 string; value bytes or null)
    type Item = (&'a [u8], Option<&'a [u8]>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        // Validated by `parse_headers`; a failure here is a bug of ours, not bad input.
        let key = self.cursor.read_nullable_bytes("header key").ok().flatten();
        let value = self
            .cursor
            .read_nullable_bytes("header value")
            .ok()
            .flatten();
        Some((key.expect("header validated at parse"), value))
    }
}

/// Iterates the records of one batch. Yields an error once, then stops.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    pub(super) cursor: Cursor<'a>,
    declared: i32,
    pub(super) index: u32,
    pub(super) base_offset: i64,
    pub(super) base_timestamp: i64,
    base_sequence: i32,
    pub(super) log_append_time: Option<i64>,
    batch_position: u64,
    done: bool,
}

impl<'a> Records<'a> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        data: &'a [u8],
        declared: i32,
        base_offset: i64,
        base_timestamp: i64,
        base_sequence: i32,
        log_append_time: Option<i64>,
        batch_position: u64,
    ) -> Self {
        Records {
            cursor: Cursor::new(data),
            declared,
            index: 0,
            base_offset,
            base_timestamp,
            base_sequence,
            log_append_time,
            batch_position,
            done: false,
        }
    }

    pub(super) fn fail<T>(&mut self, reason: Corruption) -> Option<Result<T, Error>> {
        Some(Err(self.failure(reason)))
    }

    /// The error that ends the iteration.
    fn failure(&mut self, reason: Corruption) -> Error {
        self.done = true;
        Error::corrupt(self.batch_position, reason)
    }

    /// Before a record: `None` when one is to be parsed, else how the iteration ends (`Some(None)`: it
    /// ended cleanly; `Some(Some(_))`: with this error, once).
    pub(super) fn end_check(&mut self) -> Option<Option<Error>> {
        if self.done {
            return Some(None);
        }
        if self.index as i64 >= self.declared as i64 {
            self.done = true;
            let trailing = self.cursor.remaining() as u64;
            return Some(
                (trailing != 0)
                    .then(|| self.failure(Corruption::TrailingBytes { bytes: trailing })),
            );
        }
        if self.cursor.remaining() == 0 {
            let (declared, found) = (self.declared, self.index);
            return Some(Some(
                self.failure(Corruption::MissingRecords { declared, found }),
            ));
        }
        None
    }

    fn parse_one(&mut self) -> Result<Record<'a>, RecordCorruption> {
        self.parse_one_with_tail().map(|(record, _)| record)
    }

    /// The next record, checked field by field, and its bytes after the offset delta (key, value,
    /// headers, as written).
    pub(super) fn parse_one_with_tail(
        &mut self,
    ) -> Result<(Record<'a>, &'a [u8]), RecordCorruption> {
        let start = self.cursor.position();
        let length = self.cursor.read_varint("record length")?;
        let available = self.cursor.remaining() as u64;
        if length < 0 || length as u64 > available {
            return Err(RecordCorruption::BadLength {
                length: length as i64,
                available,
            });
        }
        let body = self.cursor.read_bytes(length as usize, "record body")?;
        let mut c = Cursor::new(body);
        let attributes = c.read_u8("attributes")? as i8;
        let timestamp_delta = c.read_varlong("timestamp delta")?;
        let offset_delta = c.read_varint("offset delta")?;
        let tail = c.rest();
        let key = c.read_nullable_bytes("key")?;
        let value = c.read_nullable_bytes("value")?;
        let headers = parse_headers(&mut c)?;
        if c.remaining() != 0 {
            return Err(RecordCorruption::SizeMismatch {
                declared: length as u64,
                actual: c.position() as u64,
            });
        }
        // `DefaultRecord.readFrom`: any negative base sequence gives -1 (unlike `lastSequence()`).
        let sequence = if self.base_sequence < 0 {
            NO_SEQUENCE
        } else {
            increment_sequence(self.base_sequence, offset_delta)
        };
        let record = Record {
            offset: self.base_offset.wrapping_add(offset_delta as i64),
            timestamp: self
                .log_append_time
                .unwrap_or_else(|| self.base_timestamp.wrapping_add(timestamp_delta)),
            offset_delta,
            timestamp_delta,
            sequence,
            attributes,
            key,
            value,
            headers,
            size_in_bytes: self.cursor.position() - start,
        };
        Ok((record, tail))
    }
}

/// What the leader's validation needs from the records of one batch, learned without building them
/// (Kafka's `skipKeyValueIterator`): keys, values and headers are bounds-checked and skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordsWalk {
    /// The first record whose offset delta is not its index: (index, offset delta).
    pub offset_delta_gap: Option<(u32, i32)>,
    /// The earliest and the latest record timestamps other than -1, each with its record's index.
    pub earliest: Option<(u32, i64)>,
    /// The latest record timestamp other than -1, with its record's index.
    pub latest: Option<(u32, i64)>,
}

/// How many record layouts one walk learns before it stops checking records against the last one.
const LAYOUTS_LEARNED: u32 = 4;

/// Walks the `declared` records in `data` with the checks of `DefaultRecord.readFrom` and of the batch's
/// record iterator: each body exactly its declared length, key and value lengths of at least -1, header
/// counts of at least 0 and within the body, header keys of at least 0 bytes and values of at least -1,
/// exactly `declared` records and no byte after the last. Accepts exactly what [`Records`] iterates without an error.
pub fn walk_records(
    data: &[u8],
    declared: i32,
    base_timestamp: i64,
) -> Result<RecordsWalk, Corruption> {
    if declared < 0 {
        return Err(Corruption::NegativeRecordCount { count: declared });
    }
    let mut walk = RecordsWalk {
        offset_delta_gap: None,
        earliest: None,
        latest: None,
    };
    // (index, timestamp); index u32::MAX until a record with a timestamp is seen.
    let (mut earliest, mut latest) = ((u32::MAX, i64::MAX), (u32::MAX, i64::MIN));
    let mut position = 0usize;
    // The layout of the last record the full walk took, while it keeps paying: a batch whose records
    // vary in size stops learning after LAYOUTS_LEARNED records.
    let (mut layout, mut learned) = (None::<RecordLayout>, 0u32);
    let mut index = 0u32;
    while index < declared as u32 {
        if let Some(layout) = &layout {
            (position, index) = walk_layout_run(
                layout,
                data,
                (position, index),
                declared as u32,
                base_timestamp,
                (&mut earliest, &mut latest),
            );
            if index == declared as u32 {
                break;
            }
        }
        if position == data.len() {
            return Err(Corruption::MissingRecords {
                declared,
                found: index,
            });
        }
        let record = match skip_record_fast(data, position) {
            Some(record) => record,
            None => skip_record_precise(data, position, index)?,
        };
        layout = (learned < LAYOUTS_LEARNED)
            .then(|| {
                learned += 1;
                RecordLayout::learn(&data[position..record.0])
            })
            .flatten();
        let (end, offset_delta, timestamp_delta) = record;
        position = end;
        if offset_delta != index as i32 {
            note_gap(&mut walk.offset_delta_gap, index, offset_delta);
        }
        let timestamp = base_timestamp.wrapping_add(timestamp_delta);
        if timestamp != super::NO_TIMESTAMP {
            note_timestamp(&mut earliest, &mut latest, index, timestamp);
        }
        index += 1;
    }
    let seen = |(index, t): (u32, i64)| (index != u32::MAX).then_some((index, t));
    walk.earliest = seen(earliest);
    walk.latest = seen(latest);
    if position != data.len() {
        return Err(Corruption::TrailingBytes {
            bytes: (data.len() - position) as u64,
        });
    }
    Ok(walk)
}

/// The precise path, for a record the fast path refused: it names the check that failed (and is the
/// reference the fast path follows), or skips a record the fast path does not take (a length of three
/// varint bytes or more). Out of line: inlined, its cursor took the registers of the walk's loop, which
/// then kept the data pointer and the timestamp bounds on the stack.
#[cold]
#[inline(never)]
fn skip_record_precise(
    data: &[u8],
    position: usize,
    index: u32,
) -> Result<(usize, i32, i64), Corruption> {
    let mut cursor = Cursor::new(&data[position..]);
    let (offset_delta, timestamp_delta) =
        skip_record(&mut cursor).map_err(|reason| Corruption::Record { index, reason })?;
    Ok((position + cursor.position(), offset_delta, timestamp_delta))
}

/// The records from `(position, index)` on that have `layout`, walked in a loop of their own, whose
/// few locals stay in registers (inside the walk's loop the layout's fields lived on the stack): returns
/// where the first record that does not match starts, and its index (`declared` after the last record).
/// A record of the layout has the offset delta of its index, so no gap is noted here.
#[inline(never)]
fn walk_layout_run(
    layout: &RecordLayout,
    data: &[u8],
    (mut position, mut index): (usize, u32),
    declared: u32,
    base_timestamp: i64,
    (earliest, latest): (&mut (u32, i64), &mut (u32, i64)),
) -> (usize, u32) {
    let layout = *layout;
    let (mut first, mut last) = (*earliest, *latest);
    while index < declared {
        let Some((end, timestamp_delta)) = layout.matches(data, position, index) else {
            break;
        };
        let timestamp = base_timestamp.wrapping_add(timestamp_delta);
        // Most records change neither bound: one test for them.
        if timestamp != super::NO_TIMESTAMP
            && (timestamp < first.1 || timestamp > last.1 || first.0 == u32::MAX)
        {
            note_timestamp(&mut first, &mut last, index, timestamp);
        }
        position = end;
        index += 1;
    }
    (*earliest, *latest) = (first, last);
    (position, index)
}

/// The first gap in the offset deltas is the one reported.
#[cold]
fn note_gap(gap: &mut Option<(u32, i32)>, index: u32, offset_delta: i32) {
    if gap.is_none() {
        *gap = Some((index, offset_delta));
    }
}

/// (index, timestamp) of the earliest and the latest record; index u32::MAX until one is seen. Strict
/// comparisons keep the first record of equal timestamps, as Kafka reports it.
#[inline]
fn note_timestamp(earliest: &mut (u32, i64), latest: &mut (u32, i64), index: u32, timestamp: i64) {
    if timestamp < earliest.1 || earliest.0 == u32::MAX {
        *earliest = (index, timestamp);
    }
    if timestamp > latest.1 || latest.0 == u32::MAX {
        *latest = (index, timestamp);
    }
}

/// [`skip_record`] without building errors, for the leader's hot path (140 records of 100 bytes cost
/// about as much to walk as the batch's CRC): the record at `position` checked and skipped, returning
/// (end position, offset delta, timestamp delta), or `None` if any check fails, in which case the precise
/// path runs on the same bytes to name the check. It decodes varints exactly as [`Cursor`] does.
#[inline(always)]
fn skip_record_fast(data: &[u8], position: usize) -> Option<(usize, i32, i64)> {
    let (length, body_start) = varint(data, position)?;
    let end = body_start.checked_add(usize::try_from(length).ok()?)?;
    let body = data.get(..end)?;
    // The record's last byte, loaded before the fields that lead to it: with no headers it is the header
    // count, and the check below needs no load that waits on the key and value lengths (the walk is
    // bound by such chains of dependent loads: this took it from about 13.5 to 15.2 GB/s).
    let last = *body.last()?;
    // Attributes (unused in v2), then the deltas.
    let p = body_start + 1;
    let (timestamp_delta, p) = varlong(body, p)?;
    let (offset_delta, mut p) = varint(body, p)?;
    for _ in 0..2 {
        p = skip_nullable(body, p)?;
    }
    // No headers: the header count is the record's last byte, 0.
    if last == 0 && p + 1 == end {
        return Some((end, offset_delta, timestamp_delta));
    }
    let (headers, mut p) = varint(body, p)?;
    if headers < 0 || headers as usize > end.checked_sub(p)? {
        return None;
    }
    for _ in 0..headers {
        let (key, q) = varint(body, p)?;
        p = q.checked_add(usize::try_from(key).ok()?)?;
        p = skip_nullable(body, p)?;
    }
    (p == end).then_some((end, offset_delta, timestamp_delta))
}

/// A zigzag varint at `p` within `buf`, and the position after it (`Cursor::read_varint`). One- and
/// two-byte varints (lengths below 8 KiB, offset deltas below 8192) take the inline path.
#[inline(always)]
pub(super) fn varint(buf: &[u8], p: usize) -> Option<(i32, usize)> {
    let (raw, next) = zigzag_varint(buf, p)?;
    Some((((raw >> 1) as i32) ^ -((raw & 1) as i32), next))
}

/// The undecoded (zigzag) bits of the varint at `p`, and the position after it.
#[inline(always)]
pub(super) fn zigzag_varint(buf: &[u8], p: usize) -> Option<(u32, usize)> {
    let first = *buf.get(p)? as u32;
    if first < 0x80 {
        return Some((first, p + 1));
    }
    let second = *buf.get(p + 1)? as u32;
    if second < 0x80 {
        return Some(((first & 0x7f) | (second << 7), p + 2));
    }
    let (raw, next) = unsigned_varlong(buf, p, 5)?;
    Some((raw as u32, next))
}

/// A zigzag varlong at `p` within `buf`, and the position after it (`Cursor::read_varlong`).
#[inline(always)]
pub(super) fn varlong(buf: &[u8], p: usize) -> Option<(i64, usize)> {
    let first = *buf.get(p)? as u64;
    let (raw, next) = if first < 0x80 {
        (first, p + 1)
    } else {
        unsigned_varlong(buf, p, 10)?
    };
    Some((((raw >> 1) as i64) ^ -((raw & 1) as i64), next))
}

/// Kafka's unsigned varint of at most `max_bytes` bytes (5 for an int, 10 for a long), bits past the
/// type dropped as Java drops them (`u32` callers truncate; a 5-byte int's high bits shift out).
#[cold]
#[inline(never)]
fn unsigned_varlong(buf: &[u8], p: usize, max_bytes: u32) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for i in 0..max_bytes {
        let b = *buf.get(p + i as usize)?;
        let bits = (b & 0x7f) as u64;
        value |= if max_bytes == 5 {
            // As `Cursor::read_unsigned_varint`: the shift happens in 32 bits.
            ((bits as u32).wrapping_shl(7 * i)) as u64
        } else {
            bits.wrapping_shl(7 * i)
        };
        if b & 0x80 == 0 {
            return Some((value, p + i as usize + 1));
        }
    }
    None
}

/// Skips a varint length and that many bytes (-1: null) within `buf`; other negatives fail.
#[inline(always)]
fn skip_nullable(buf: &[u8], p: usize) -> Option<usize> {
    // Read on the zigzag bits, without decoding: 1 is -1 (null), any other odd value is below -1, and an
    // even value is twice the length.
    let (raw, p) = zigzag_varint(buf, p)?;
    if raw & 1 != 0 {
        return (raw == 1).then_some(p);
    }
    let end = p.checked_add((raw >> 1) as usize)?;
    (end <= buf.len()).then_some(end)
}

/// One record checked and skipped; returns its (offset delta, timestamp delta).
#[inline]
fn skip_record(cursor: &mut Cursor<'_>) -> Result<(i32, i64), RecordCorruption> {
    let length = cursor.read_varint("record length")?;
    let available = cursor.remaining() as u64;
    if length < 0 || length as u64 > available {
        return Err(RecordCorruption::BadLength {
            length: length as i64,
            available,
        });
    }
    let body = cursor.read_bytes(length as usize, "record body")?;
    let mut c = Cursor::new(body);
    c.read_u8("attributes")?;
    let timestamp_delta = c.read_varlong("timestamp delta")?;
    let offset_delta = c.read_varint("offset delta")?;
    c.read_nullable_bytes("key")?;
    c.read_nullable_bytes("value")?;
    parse_headers(&mut c)?;
    if c.remaining() != 0 {
        return Err(RecordCorruption::SizeMismatch {
            declared: length as u64,
            actual: c.position() as u64,
        });
    }
    Ok((offset_delta, timestamp_delta))
}

fn parse_headers<'a>(c: &mut Cursor<'a>) -> Result<HeaderIter<'a>, RecordCorruption> {
    let count = c.read_varint("header count")?;
    if count < 0 || count as u64 > c.remaining() as u64 {
        return Err(RecordCorruption::BadHeaderCount {
            count,
            available: c.remaining() as u64,
        });
    }
    let start = c.clone();
    for _ in 0..count {
        let key_len = c.read_varint("header key length")?;
        if key_len < 0 || key_len as usize > c.remaining() {
            return Err(RecordCorruption::BadFieldLength {
                field: "header key",
                length: key_len,
                available: c.remaining() as u64,
            });
        }
        c.read_bytes(key_len as usize, "header key")?;
        c.read_nullable_bytes("header value")?;
    }
    Ok(HeaderIter {
        cursor: start,
        remaining: count as u32,
    })
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(end) = self.end_check() {
            return end.map(Err);
        }
        match self.parse_one() {
            Ok(r) => {
                self.index += 1;
                Some(Ok(r))
            }
            Err(reason) => {
                let index = self.index;
                self.fail(Corruption::Record { index, reason })
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.declared as i64 - self.index as i64).max(0) as usize;
        (0, Some(left + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{BatchBuilder, Compression, Header};
    use proptest::prelude::*;

    fn payload() -> Vec<u8> {
        records(4)
    }

    fn records(n: i64) -> Vec<u8> {
        records_with(n, true)
    }

    fn records_with(n: i64, with_header: bool) -> Vec<u8> {
        let mut b = BatchBuilder::new(Compression::None);
        for i in 0..n {
            let header = Header {
                key: "h",
                value: Some(b"hv"),
            };
            let headers = if with_header { &[header][..] } else { &[] };
            b.append(1000 + i, Some(b"key"), Some(b"value"), headers)
                .unwrap();
        }
        b.build().unwrap()[crate::format::RECORD_BATCH_OVERHEAD..].to_vec()
    }

    fn iterates(data: &[u8], declared: i32) -> bool {
        let records = Records::new(data, declared, 0, 1000, -1, None, 0);
        records.into_iter().all(|r| r.is_ok())
    }

    #[test]
    fn the_walk_reports_gaps_and_timestamps() {
        let data = payload();
        let walk = walk_records(&data, 4, 1000).unwrap();
        assert_eq!(walk.offset_delta_gap, None);
        assert_eq!(walk.earliest, Some((0, 1000)));
        assert_eq!(walk.latest, Some((3, 1003)));
        assert_eq!(
            walk_records(&data, 5, 0).unwrap_err(),
            Corruption::MissingRecords {
                declared: 5,
                found: 4
            }
        );
    }

    /// A record without headers whose value stops short: the zero after it reads as the header count,
    /// and a byte is left in the body. The shortcut for headerless records must refuse it as the precise
    /// path does (its last byte is 0 too).
    #[test]
    fn a_headerless_record_ends_at_its_header_count() {
        let mut b = BatchBuilder::new(Compression::None);
        b.append(1000, Some(b"key"), Some(b"valu\0"), &[]).unwrap();
        let mut data = b.build().unwrap()[crate::format::RECORD_BATCH_OVERHEAD..].to_vec();
        let value_length = data.len() - 7;
        assert_eq!(data[value_length], 10, "zigzag 5");
        data[value_length] = 8;
        assert_eq!(skip_record_fast(&data, 0), None);
        assert!(matches!(
            walk_records(&data, 1, 1000),
            Err(Corruption::Record {
                index: 0,
                reason: RecordCorruption::SizeMismatch { .. }
            })
        ));
    }

    /// The walk as the precise path alone makes it, record by record: the reference for the fast paths.
    fn walk_precisely(
        data: &[u8],
        declared: i32,
        base_timestamp: i64,
    ) -> Result<RecordsWalk, Corruption> {
        let mut walk = RecordsWalk {
            offset_delta_gap: None,
            earliest: None,
            latest: None,
        };
        let mut position = 0;
        for index in 0..declared.max(0) as u32 {
            if position == data.len() {
                return Err(Corruption::MissingRecords {
                    declared,
                    found: index,
                });
            }
            let (end, offset_delta, timestamp_delta) = skip_record_precise(data, position, index)?;
            position = end;
            if offset_delta != index as i32 && walk.offset_delta_gap.is_none() {
                walk.offset_delta_gap = Some((index, offset_delta));
            }
            let t = base_timestamp.wrapping_add(timestamp_delta);
            if t != crate::format::NO_TIMESTAMP {
                if walk.earliest.is_none_or(|(_, e)| t < e) {
                    walk.earliest = Some((index, t));
                }
                if walk.latest.is_none_or(|(_, l)| t > l) {
                    walk.latest = Some((index, t));
                }
            }
        }
        if position != data.len() {
            return Err(Corruption::TrailingBytes {
                bytes: (data.len() - position) as u64,
            });
        }
        Ok(walk)
    }

    /// `n` records without headers, all of one size (what the walk's layout check takes), with
    /// timestamps `step` ms apart (a step of 2 or more makes two-byte deltas after a while).
    /// Keys of 70 bytes make, past the 64th record, a layout whose key length lies past the first
    /// eight bytes (two-byte length, timestamp and offset deltas).
    fn same_size_records(n: i64, key_bytes: usize, value_bytes: usize, step: i64) -> Vec<u8> {
        let mut b = BatchBuilder::new(Compression::None);
        let value = vec![7u8; value_bytes];
        for i in 0..n {
            let key = format!("k{i:0width$}", width = key_bytes - 1);
            b.append(1000 + i * step, Some(key.as_bytes()), Some(&value), &[])
                .unwrap();
        }
        b.build().unwrap()[crate::format::RECORD_BATCH_OVERHEAD..].to_vec()
    }

    proptest! {
        /// On batches of same-sized records (the layout check's case: offset deltas past 63 and timestamp
        /// deltas past 63 take two bytes), mutated or cut, the walk answers exactly as the precise path
        /// record by record: the same gap, bounds and error.
        #[test]
        fn the_walk_of_same_sized_records_agrees_with_the_precise_path(
            n in 60i64..70,
            key_bytes in prop_oneof![Just(8usize), Just(70)],
            value_bytes in prop_oneof![Just(0usize), Just(5), Just(100), Just(200)],
            step in 0i64..3,
            flips in proptest::collection::vec((0usize..20_000, any::<u8>()), 0..3),
            cut in 0usize..3,
            declared_off in -2i32..3,
        ) {
            let mut data = same_size_records(n, key_bytes, value_bytes, step);
            for (at, byte) in flips {
                let at = at % data.len();
                data[at] = byte;
            }
            data.truncate(data.len() - cut);
            let declared = n as i32 + declared_off;
            prop_assert_eq!(walk_records(&data, declared, 1000), walk_precisely(&data, declared, 1000));
        }

        /// The validator's walk and the reader's iterator accept exactly the same bytes: what a leader
        /// admits, klog can read back.
        #[test]
        fn the_walk_accepts_what_the_reader_accepts(
            flips in proptest::collection::vec((0usize..5000, any::<u8>()), 0..3),
            cut in 0usize..8,
            declared in 66i32..71,
        ) {
            let mut data = records(68);
            for (at, byte) in flips {
                let at = at % data.len();
                data[at] = byte;
            }
            data.truncate(data.len() - cut.min(data.len()));
            prop_assert_eq!(walk_records(&data, declared, 1000).is_ok(), iterates(&data, declared));
        }

        /// The walk reports the first offset-delta gap and the first record of the earliest and of the
        /// latest timestamp (ties, -1 and gaps included) as read back record by record.
        #[test]
        fn the_walk_reports_what_the_records_hold(
            records in proptest::collection::vec((-1i64..4, 1i32..3), 1..24),
        ) {
            let mut b = BatchBuilder::new(Compression::None);
            let mut delta = -1;
            for (timestamp, step) in &records {
                delta += step;
                b.append_with_offset_delta(delta, *timestamp, None, Some(b"v"), &[]).unwrap();
            }
            let batch = b.build().unwrap();
            let data = &batch[crate::format::RECORD_BATCH_OVERHEAD..];
            // The builder takes the first record's timestamp as the batch's base timestamp.
            let base = records[0].0;
            let read: Vec<Record<'_>> = Records::new(data, records.len() as i32, 0, base, -1, None, 0)
                .map(|r| r.unwrap())
                .collect();
            let gap = read.iter().enumerate()
                .find(|(i, r)| r.offset_delta != *i as i32)
                .map(|(i, r)| (i as u32, r.offset_delta));
            let stamped = || read.iter().enumerate().filter(|(_, r)| r.timestamp != -1);
            let first_of = |t: i64| stamped().find(|(_, r)| r.timestamp == t).map(|(i, _)| (i as u32, t));
            let earliest = stamped().map(|(_, r)| r.timestamp).min().and_then(first_of);
            let latest = stamped().map(|(_, r)| r.timestamp).max().and_then(first_of);
            let walk = walk_records(data, records.len() as i32, base).unwrap();
            prop_assert_eq!(walk, RecordsWalk { offset_delta_gap: gap, earliest, latest });
        }

        /// The fast path answers exactly as the precise one, on mutated records (with and without
        /// headers: a record without has its own shortcut) and on random bytes.
        #[test]
        fn the_fast_path_agrees_with_the_precise_one(
            flips in proptest::collection::vec((0usize..200, any::<u8>()), 0..4),
            random in proptest::collection::vec(any::<u8>(), 0..64),
            use_random: bool,
            with_header: bool,
        ) {
            let mut data = if use_random { random } else { records_with(4, with_header) };
            for (at, byte) in flips {
                if !data.is_empty() {
                    let at = at % data.len();
                    data[at] = byte;
                }
            }
            let mut cursor = Cursor::new(&data);
            let precise = skip_record(&mut cursor).ok().map(|(o, t)| (cursor.position(), o, t));
            prop_assert_eq!(skip_record_fast(&data, 0), precise);
        }
    }
}
