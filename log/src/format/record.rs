//! Records inside a v2 batch: borrowed views, no allocation per record.
//!
//! Layout (`DefaultRecord.java`): length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
//! key (varint length, -1 = null), value (likewise), header count varint, headers. The body must be exactly
//! `length` bytes; header keys are never null.

use super::varint::Cursor;
use super::{increment_sequence, NO_SEQUENCE};
use crate::{Corruption, Error, RecordCorruption};

/// One record, with its absolute offset and timestamp resolved against the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub offset: i64,
    /// The record's timestamp; for LogAppendTime batches the batch's max timestamp, as Kafka reports it.
    pub timestamp: i64,
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    /// Kafka's per-record sequence: base sequence + offset delta, wrapping, or -1 without a producer.
    pub sequence: i32,
    pub attributes: i8,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: HeaderIter<'a>,
    /// Encoded size of the record including its length varint.
    pub size_in_bytes: usize,
}

/// The headers of a record, validated when the record was parsed; iteration cannot fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderIter<'a> {
    cursor: Cursor<'a>,
    remaining: u32,
}

impl<'a> HeaderIter<'a> {
    pub fn len(&self) -> usize {
        self.remaining as usize
    }

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
    cursor: Cursor<'a>,
    declared: i32,
    index: u32,
    base_offset: i64,
    base_timestamp: i64,
    base_sequence: i32,
    log_append_time: Option<i64>,
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

    fn fail(&mut self, reason: Corruption) -> Option<Result<Record<'a>, Error>> {
        self.done = true;
        Some(Err(Error::corrupt(self.batch_position, reason)))
    }

    fn parse_one(&mut self) -> Result<Record<'a>, RecordCorruption> {
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
        Ok(Record {
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
        })
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
    pub latest: Option<(u32, i64)>,
}

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
    let mut cursor = Cursor::new(data);
    for index in 0..declared as u32 {
        if cursor.remaining() == 0 {
            return Err(Corruption::MissingRecords {
                declared,
                found: index,
            });
        }
        let (offset_delta, timestamp_delta) =
            skip_record(&mut cursor).map_err(|reason| Corruption::Record { index, reason })?;
        if offset_delta != index as i32 && walk.offset_delta_gap.is_none() {
            walk.offset_delta_gap = Some((index, offset_delta));
        }
        let timestamp = base_timestamp.wrapping_add(timestamp_delta);
        if timestamp != super::NO_TIMESTAMP {
            if walk.earliest.is_none_or(|(_, t)| timestamp < t) {
                walk.earliest = Some((index, timestamp));
            }
            if walk.latest.is_none_or(|(_, t)| timestamp > t) {
                walk.latest = Some((index, timestamp));
            }
        }
    }
    if cursor.remaining() != 0 {
        return Err(Corruption::TrailingBytes {
            bytes: cursor.remaining() as u64,
        });
    }
    Ok(walk)
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
        if self.done {
            return None;
        }
        if self.index as i64 >= self.declared as i64 {
            self.done = true;
            let trailing = self.cursor.remaining();
            if trailing != 0 {
                return self.fail(Corruption::TrailingBytes {
                    bytes: trailing as u64,
                });
            }
            return None;
        }
        if self.cursor.remaining() == 0 {
            return self.fail(Corruption::MissingRecords {
                declared: self.declared,
                found: self.index,
            });
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
        let mut b = BatchBuilder::new(Compression::None);
        for i in 0..4 {
            let header = Header {
                key: "h",
                value: Some(b"hv"),
            };
            b.append(1000 + i, Some(b"key"), Some(b"value"), &[header])
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

    proptest! {
        /// The validator's walk and the reader's iterator accept exactly the same bytes: what a leader
        /// admits, klog can read back.
        #[test]
        fn the_walk_accepts_what_the_reader_accepts(
            flips in proptest::collection::vec((0usize..200, any::<u8>()), 0..3),
            cut in 0usize..8,
            declared in 2i32..6,
        ) {
            let mut data = payload();
            for (at, byte) in flips {
                let at = at % data.len();
                data[at] = byte;
            }
            data.truncate(data.len() - cut.min(data.len()));
            prop_assert_eq!(walk_records(&data, declared, 1000).is_ok(), iterates(&data, declared));
        }
    }
}
