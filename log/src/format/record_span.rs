//! A record and where its bytes lie in its batch: what the cleaner reads of each record, in one walk.
//!
//! [`Records::next_span`] yields the same records, in the same order and with the same errors, as
//! [`Records`]'s iterator, through a fast path that decodes only the lengths (the precise path, which
//! names the failed check, runs on any record the fast path refuses). A span carries the record's bytes
//! after its offset delta (key, value, header count and headers as written, its [`RecordSpan::tail`]):
//! Kafka's `MemoryRecordsBuilder.append(Record)` re-encodes a kept record with attributes 0 and its
//! timestamp delta against the new batch's base timestamp, and writes the rest field by field, which is
//! these bytes unchanged exactly when every varint in them is minimal and every header key is UTF-8
//! ([`RecordSpan::tail_is_canonical`]).

use super::record::{varint, varlong, zigzag_varint, HeaderIter, Records};
use super::varint::{size_of_varint, Cursor};
use crate::{Corruption, Error};

/// One record of a v2 batch with its bytes after the offset delta.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSpan<'a> {
    /// The absolute offset: base offset + offset delta.
    pub offset: i64,
    /// The record's timestamp, as [`super::Record::timestamp`].
    pub timestamp: i64,
    /// The offset delta in the batch.
    pub offset_delta: i32,
    /// The key (`None`: null).
    pub key: Option<&'a [u8]>,
    /// The value (`None`: null, a tombstone).
    pub value: Option<&'a [u8]>,
    /// The headers, checked when the record was read.
    pub headers: HeaderIter<'a>,
    /// The bytes from the key's length to the record's end, as written.
    pub tail: &'a [u8],
}

impl RecordSpan<'_> {
    /// Whether [`RecordSpan::tail`] is what Kafka writes for this key, value and headers: every length
    /// and the header count minimal varints (a longer encoding is longer than the minimal one, so the
    /// sizes tell), and every header key UTF-8 (Kafka reads it as a Java `String`).
    pub fn tail_is_canonical(&self) -> bool {
        let mut size = nullable_size(self.key) + nullable_size(self.value);
        size += size_of_varint(self.headers.len() as i32);
        for (key, value) in self.headers.clone() {
            if std::str::from_utf8(key).is_err() {
                return false;
            }
            size += nullable_size(Some(key)) + nullable_size(value);
        }
        size == self.tail.len()
    }
}

fn nullable_size(b: Option<&[u8]>) -> usize {
    b.map_or(1, |b| size_of_varint(b.len() as i32) + b.len())
}

/// What the fast path learned of a record at the start of the bytes it was given.
struct Fast {
    end: usize,
    timestamp_delta: i64,
    offset_delta: i32,
    tail_start: usize,
    key: Option<(usize, usize)>,
    value: Option<(usize, usize)>,
    headers_start: usize,
    header_count: u32,
}

impl<'a> Records<'a> {
    /// The next record as a [`RecordSpan`]: the same record, or the same error, as [`Iterator::next`].
    pub fn next_span(&mut self) -> Option<Result<RecordSpan<'a>, Error>> {
        if let Some(end) = self.end_check() {
            return end.map(Err);
        }
        let rest = self.cursor.rest();
        if let Some(fast) = span_fast(rest) {
            let span = self.span_of(rest, &fast);
            // The fast path checked `fast.end` within `rest`.
            let _ = self.cursor.read_bytes(fast.end, "record");
            self.index += 1;
            return Some(Ok(span));
        }
        match self.parse_one_with_tail() {
            Ok((record, tail)) => {
                self.index += 1;
                Some(Ok(RecordSpan {
                    offset: record.offset,
                    timestamp: record.timestamp,
                    offset_delta: record.offset_delta,
                    key: record.key,
                    value: record.value,
                    headers: record.headers,
                    tail,
                }))
            }
            Err(reason) => {
                let index = self.index;
                self.fail(Corruption::Record { index, reason })
            }
        }
    }

    fn span_of(&self, rest: &'a [u8], fast: &Fast) -> RecordSpan<'a> {
        let slice = |range: Option<(usize, usize)>| range.map(|(from, to)| &rest[from..to]);
        let timestamp = self
            .log_append_time
            .unwrap_or_else(|| self.base_timestamp.wrapping_add(fast.timestamp_delta));
        RecordSpan {
            offset: self.base_offset.wrapping_add(fast.offset_delta as i64),
            timestamp,
            offset_delta: fast.offset_delta,
            key: slice(fast.key),
            value: slice(fast.value),
            headers: HeaderIter {
                cursor: Cursor::new(&rest[fast.headers_start..fast.end]),
                remaining: fast.header_count,
            },
            tail: &rest[fast.tail_start..fast.end],
        }
    }
}

/// The record at the start of `data`, checked as the precise path checks it (`Records::parse_one`) but
/// without building errors: `None` when any check fails or a varint is longer than the fast decoders
/// take, and the precise path then runs on the same bytes.
#[inline(always)]
fn span_fast(data: &[u8]) -> Option<Fast> {
    let (length, body_start) = varint(data, 0)?;
    let end = body_start.checked_add(usize::try_from(length).ok()?)?;
    let body = data.get(..end)?;
    // The attributes byte (unused in v2), then the deltas.
    let p = body_start + 1;
    let (timestamp_delta, p) = varlong(body, p)?;
    let (offset_delta, tail_start) = varint(body, p)?;
    let (key, p) = nullable(body, tail_start)?;
    let (value, p) = nullable(body, p)?;
    let (headers, headers_start) = varint(body, p)?;
    let mut p = headers_start;
    if headers != 0 {
        if headers < 0 || headers as usize > end.checked_sub(p)? {
            return None;
        }
        for _ in 0..headers {
            let (key, q) = varint(body, p)?;
            p = q.checked_add(usize::try_from(key).ok()?)?;
            p = nullable(body, p)?.1;
        }
    }
    (p == end).then_some(Fast {
        end,
        timestamp_delta,
        offset_delta,
        tail_start,
        key,
        value,
        headers_start,
        header_count: headers as u32,
    })
}

/// A varint length and that many bytes at `p` within `buf` (-1: null; other negatives fail): the bytes'
/// range and the position after them.
#[inline(always)]
#[allow(clippy::type_complexity)]
fn nullable(buf: &[u8], p: usize) -> Option<(Option<(usize, usize)>, usize)> {
    // On the zigzag bits: 1 is -1 (null), any other odd value is below -1, an even one twice the length.
    let (raw, p) = zigzag_varint(buf, p)?;
    if raw & 1 != 0 {
        return (raw == 1).then_some((None, p));
    }
    let end = p.checked_add((raw >> 1) as usize)?;
    (end <= buf.len()).then_some((Some((p, end)), end))
}

#[cfg(test)]
mod tests;
