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
