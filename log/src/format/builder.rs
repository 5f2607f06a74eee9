//! `BatchBuilder`: writes v2 batches as Kafka's Java producer does (`MemoryRecordsBuilder`), byte for byte
//! when uncompressed, plus the control batches: COMMIT/ABORT markers, KRaft's snapshot header and footer,
//! KIP-1279's MIRROR_PID_RESET.

use super::batch::RecordBatch;
use super::control::{ControlRecordType, EndTxnMarker, MirrorPidReset};
use super::header::{Attributes, TimestampType};
use super::java_utf8::java_string_bytes;
use super::record::HeaderIter;
use super::record_span::RecordSpan;
use super::varint::{size_of_varint, size_of_varlong, write_varint, write_varlong};
use super::{
    crc32c, Compression, CRC_START, LOG_OVERHEAD, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD,
};
use crate::Error;

/// A record header to write: Kafka header keys are strings, values nullable bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    /// The header key.
    pub key: &'a str,
    /// The header value (`None`: null).
    pub value: Option<&'a [u8]>,
}

/// Builds one v2 batch. Defaults match a Java producer's batch: base offset 0, partition leader epoch -1,
/// no producer id, CreateTime, no compression.
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    compression: Compression,
    timestamp_type: TimestampType,
    log_append_time_ms: i64,
    transactional: bool,
    control: bool,
    base_offset: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    delete_horizon_ms: Option<i64>,
    /// The encoded records from `records_start` on (before it: the buffer given to
    /// [`BatchBuilder::in_place`] and the header's room).
    records: Vec<u8>,
    records_start: usize,
    count: i32,
    base_timestamp: Option<i64>,
    max_timestamp: i64,
    last_offset_delta: Option<i32>,
    last_offset_delta_override: Option<i32>,
}

impl BatchBuilder {
    /// A builder of a batch in `compression`: base offset 0, no producer, CreateTime.
    pub fn new(compression: Compression) -> Self {
        BatchBuilder {
            compression,
            timestamp_type: TimestampType::CreateTime,
            log_append_time_ms: NO_TIMESTAMP,
            transactional: false,
            control: false,
            base_offset: 0,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            delete_horizon_ms: None,
            records: Vec::new(),
            records_start: 0,
            count: 0,
            base_timestamp: None,
            max_timestamp: NO_TIMESTAMP,
            last_offset_delta: None,
            last_offset_delta_override: None,
        }
    }

    /// An uncompressed batch built at the end of `buf` itself: its records are written after room for the
    /// header, which [`BatchBuilder::finish_in_place`] fills, so they are never copied (the cleaner's
    /// rebuild of an uncompressed batch writes straight into its output).
    pub fn in_place(mut buf: Vec<u8>) -> Self {
        buf.resize(buf.len() + RECORD_BATCH_OVERHEAD, 0);
        let mut builder = BatchBuilder::new(Compression::None);
        builder.records_start = buf.len();
        builder.records = buf;
        builder
    }

    /// Sets `baseOffset` (a follower's or a mirror's batch; a leader assigns it).
    pub fn base_offset(mut self, base_offset: i64) -> Self {
        self.base_offset = base_offset;
        self
    }

    /// Sets `partitionLeaderEpoch`.
    pub fn partition_leader_epoch(mut self, epoch: i32) -> Self {
        self.partition_leader_epoch = epoch;
        self
    }

    /// An idempotent or transactional producer's identity and the batch's first sequence.
    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Marks the batch transactional.
    pub fn transactional(mut self, transactional: bool) -> Self {
        self.transactional = transactional;
        self
    }

    /// LogAppendTime with the broker's append time: every record then reports it.
    pub fn log_append_time(mut self, append_time_ms: i64) -> Self {
        self.timestamp_type = TimestampType::LogAppendTime;
        self.log_append_time_ms = append_time_ms;
        self
    }

    /// Sets the delete horizon (the cleaner's; stored in the base timestamp field).
    pub fn delete_horizon_ms(mut self, horizon_ms: i64) -> Self {
        self.delete_horizon_ms = Some(horizon_ms);
        self
    }

    /// Marks the batch a control batch (attributes bit 5), as the cleaner's rebuild of one keeps it.
    pub fn control(mut self, control: bool) -> Self {
        self.control = control;
        self
    }

    /// Kafka's `overrideLastOffset`: the header's `lastOffsetDelta` is `delta`, not the last record's, so
    /// a batch the cleaner rebuilt keeps its producer's last sequence. `build` refuses a delta below the
    /// last record's.
    pub fn override_last_offset_delta(&mut self, delta: i32) {
        self.last_offset_delta_override = Some(delta);
    }

    /// Reserves room for `bytes` more of encoded records, so a builder that knows its size up front (the
    /// cleaner's rebuild: at most its source batch) grows its buffer once rather than record by record.
    pub fn reserve_records(&mut self, bytes: usize) {
        self.records.reserve(bytes);
    }

    /// Records appended so far.
    pub fn record_count(&self) -> i32 {
        self.count
    }

    /// Appends a record at the next offset.
    pub fn append(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
    ) -> Result<(), Error> {
        let delta = self.last_offset_delta.map_or(0, |d| d + 1);
        self.append_with_offset_delta(delta, timestamp_ms, key, value, headers)
    }

    /// Appends a record at `base_offset + offset_delta`; deltas must increase (gaps are allowed, as after
    /// compaction).
    pub fn append_with_offset_delta(
        &mut self,
        offset_delta: i32,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
    ) -> Result<(), Error> {
        let base_timestamp = self.check_append(offset_delta, timestamp_ms)?;
        write_record(
            &mut self.records,
            offset_delta,
            timestamp_ms.wrapping_sub(base_timestamp),
            key,
            value,
            headers.iter().map(|h| (h.key.as_bytes(), h.value)),
        );
        self.appended(offset_delta, timestamp_ms);
        Ok(())
    }

    /// Appends a record read from another batch at `base_offset + offset_delta`, as Kafka's
    /// `MemoryRecordsBuilder.append(Record)` does: attributes 0, the timestamp re-encoded against this
    /// batch's base timestamp, and each header key through a Java `String` (bytes that are not UTF-8 come
    /// out with U+FFFD where the JDK's decoder puts it, `java_utf8.rs`).
    pub fn append_with_raw_headers(
        &mut self,
        offset_delta: i32,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: HeaderIter<'_>,
    ) -> Result<(), Error> {
        let lossy: Vec<_> = if headers
            .clone()
            .any(|(k, _)| std::str::from_utf8(k).is_err())
        {
            headers
                .clone()
                .map(|(k, v)| (java_string_bytes(k), v))
                .collect()
        } else {
            Vec::new()
        };
        let base_timestamp = self.check_append(offset_delta, timestamp_ms)?;
        let timestamp_delta = timestamp_ms.wrapping_sub(base_timestamp);
        if lossy.is_empty() {
            write_record(
                &mut self.records,
                offset_delta,
                timestamp_delta,
                key,
                value,
                headers,
            );
        } else {
            let iter = lossy.iter().map(|(k, v)| (&k[..], *v));
            write_record(
                &mut self.records,
                offset_delta,
                timestamp_delta,
                key,
                value,
                iter,
            );
        }
        self.appended(offset_delta, timestamp_ms);
        Ok(())
    }

    /// Appends a record read from another batch as [`BatchBuilder::append_with_raw_headers`] appends it,
    /// copying its key, value and headers as one run of bytes when they are what Kafka would write
    /// ([`RecordSpan::tail_is_canonical`]); only the length, attributes, timestamp delta and offset delta
    /// are encoded anew.
    pub fn append_span(&mut self, span: &RecordSpan<'_>) -> Result<(), Error> {
        if !span.tail_is_canonical() {
            return self.append_with_raw_headers(
                span.offset_delta,
                span.timestamp,
                span.key,
                span.value,
                span.headers.clone(),
            );
        }
        let base_timestamp = self.check_append(span.offset_delta, span.timestamp)?;
        let timestamp_delta = span.timestamp.wrapping_sub(base_timestamp);
        let body = 1
            + size_of_varlong(timestamp_delta)
            + size_of_varint(span.offset_delta)
            + span.tail.len();
        self.records.reserve(body + 5);
        write_varint(&mut self.records, body as i32);
        self.records.push(0);
        write_varlong(&mut self.records, timestamp_delta);
        write_varint(&mut self.records, span.offset_delta);
        self.records.extend_from_slice(span.tail);
        self.appended(span.offset_delta, span.timestamp);
        Ok(())
    }

    /// Checks a record's offset delta and timestamp as `MemoryRecordsBuilder.appendWithOffset` does and
    /// returns the batch's base timestamp (set by the first record, or the delete horizon).
    fn check_append(&mut self, offset_delta: i32, timestamp_ms: i64) -> Result<i64, Error> {
        if offset_delta < 0 || self.last_offset_delta.is_some_and(|d| offset_delta <= d) {
            return Err(Error::InvalidInput(
                "record offsets must increase within a batch",
            ));
        }
        if timestamp_ms < 0 && timestamp_ms != NO_TIMESTAMP {
            return Err(Error::InvalidInput("a record timestamp must be >= 0 or -1"));
        }
        if self.count == i32::MAX {
            return Err(Error::InvalidInput("too many records for one batch"));
        }
        Ok(*self
            .base_timestamp
            .get_or_insert(self.delete_horizon_ms.unwrap_or(timestamp_ms)))
    }

    fn appended(&mut self, offset_delta: i32, timestamp_ms: i64) {
        self.count += 1;
        self.last_offset_delta = Some(offset_delta);
        self.max_timestamp = self.max_timestamp.max(timestamp_ms);
    }

    /// Writes the batch to a new buffer.
    pub fn build(&self) -> Result<Vec<u8>, Error> {
        let mut out = Vec::with_capacity(RECORD_BATCH_OVERHEAD + self.record_bytes().len());
        self.build_into(&mut out)?;
        Ok(out)
    }

    /// Appends the batch to `out`.
    pub fn build_into(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        let last_offset_delta = self.checked_last_offset_delta()?;
        let start = out.len();
        out.resize(start + RECORD_BATCH_OVERHEAD, 0);
        self.compression.compress(self.record_bytes(), out);
        self.seal(out, start, last_offset_delta)
    }

    /// The buffer given to [`BatchBuilder::in_place`] with the batch at its end (a builder made by
    /// [`BatchBuilder::new`]: a new buffer holding the batch); on an error, the buffer as it was given.
    pub fn finish_in_place(mut self) -> (Vec<u8>, Result<(), Error>) {
        if self.records_start == 0 {
            let mut out = Vec::new();
            let built = self.build_into(&mut out);
            return (out, built);
        }
        let start = self.records_start - RECORD_BATCH_OVERHEAD;
        let mut out = std::mem::take(&mut self.records);
        let sealed = self
            .checked_last_offset_delta()
            .and_then(|delta| self.seal(&mut out, start, delta));
        if sealed.is_err() {
            out.truncate(start);
        }
        (out, sealed)
    }

    /// The buffer given to [`BatchBuilder::in_place`] as it was given, the records appended dropped (a
    /// builder made by [`BatchBuilder::new`]: an empty buffer).
    pub fn into_buffer(mut self) -> Vec<u8> {
        let mut buf = std::mem::take(&mut self.records);
        buf.truncate(self.records_start.saturating_sub(RECORD_BATCH_OVERHEAD));
        buf
    }

    /// The encoded records appended so far.
    fn record_bytes(&self) -> &[u8] {
        &self.records[self.records_start..]
    }

    fn checked_last_offset_delta(&self) -> Result<i32, Error> {
        let Some(last_record_delta) = self.last_offset_delta else {
            return Err(Error::InvalidInput("a batch needs at least one record"));
        };
        let last_offset_delta = self.last_offset_delta_override.unwrap_or(last_record_delta);
        if last_offset_delta < last_record_delta {
            return Err(Error::InvalidInput(
                "the last offset delta is below the last record's",
            ));
        }
        Ok(last_offset_delta)
    }

    /// Fills the header of the batch at `out[start..]` (its records written after the header's room) and
    /// its CRC; a batch over 2 GiB is cut off `out` and refused.
    fn seal(&self, out: &mut Vec<u8>, start: usize, last_offset_delta: i32) -> Result<(), Error> {
        let size = out.len() - start;
        if size - LOG_OVERHEAD > i32::MAX as usize {
            out.truncate(start);
            return Err(Error::InvalidInput("batch larger than 2 GiB"));
        }
        let attributes = Attributes::new(
            self.compression,
            self.timestamp_type,
            self.transactional,
            self.control,
            self.delete_horizon_ms.is_some(),
        );
        let max_timestamp = match self.timestamp_type {
            TimestampType::LogAppendTime => self.log_append_time_ms,
            TimestampType::CreateTime => self.max_timestamp,
        };
        let h = &mut out[start..start + RECORD_BATCH_OVERHEAD];
        h[0..8].copy_from_slice(&self.base_offset.to_be_bytes());
        h[8..12].copy_from_slice(&((size - LOG_OVERHEAD) as i32).to_be_bytes());
        h[12..16].copy_from_slice(&self.partition_leader_epoch.to_be_bytes());
        h[16] = 2;
        h[21..23].copy_from_slice(&(attributes.0 as i16).to_be_bytes());
        h[23..27].copy_from_slice(&last_offset_delta.to_be_bytes());
        h[27..35].copy_from_slice(&self.base_timestamp.unwrap_or(NO_TIMESTAMP).to_be_bytes());
        h[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
        h[43..51].copy_from_slice(&self.producer_id.to_be_bytes());
        h[51..53].copy_from_slice(&self.producer_epoch.to_be_bytes());
        h[53..57].copy_from_slice(&self.base_sequence.to_be_bytes());
        h[57..61].copy_from_slice(&self.count.to_be_bytes());
        let crc = crc32c(&out[start + CRC_START..]);
        out[start + 17..start + 21].copy_from_slice(&crc.to_be_bytes());
        Ok(())
    }

    /// Kafka's `DefaultRecordBatch.writeEmptyHeader` of `source`, as the cleaner keeps a batch whose
    /// records all went (RETAIN_EMPTY): 61 bytes, length 49, no compression, the source's timestamp type,
    /// transactional and control flags (the delete-horizon flag cleared), base timestamp -1, and the
    /// source's base offset, last offset delta, max timestamp, leader epoch and producer fields.
    pub fn write_empty_header(source: &RecordBatch<'_>, out: &mut Vec<u8>) {
        let attributes = Attributes::new(
            Compression::None,
            source.timestamp_type(),
            source.is_transactional(),
            source.is_control(),
            false,
        );
        let start = out.len();
        out.resize(start + RECORD_BATCH_OVERHEAD, 0);
        let h = &mut out[start..];
        h[0..8].copy_from_slice(&source.base_offset().to_be_bytes());
        h[8..12].copy_from_slice(&((RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32).to_be_bytes());
        h[12..16].copy_from_slice(&source.partition_leader_epoch().to_be_bytes());
        h[16] = 2;
        h[21..23].copy_from_slice(&(attributes.0 as i16).to_be_bytes());
        h[23..27].copy_from_slice(&source.last_offset_delta().to_be_bytes());
        h[27..35].copy_from_slice(&NO_TIMESTAMP.to_be_bytes());
        h[35..43].copy_from_slice(&source.max_timestamp().to_be_bytes());
        h[43..51].copy_from_slice(&source.producer_id().to_be_bytes());
        h[51..53].copy_from_slice(&source.producer_epoch().to_be_bytes());
        h[53..57].copy_from_slice(&source.base_sequence().to_be_bytes());
        h[57..61].copy_from_slice(&0i32.to_be_bytes());
        let crc = crc32c(&h[CRC_START..]);
        h[17..21].copy_from_slice(&crc.to_be_bytes());
    }

    /// A COMMIT or ABORT marker as `MemoryRecords.writeEndTransactionalMarker` builds it: transactional,
    /// control, base sequence -1, one record with the marker. Set the base offset and epoch before building.
    pub fn end_txn_marker(
        marker: ControlRecordType,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        timestamp_ms: i64,
    ) -> Result<Self, Error> {
        if !matches!(marker, ControlRecordType::Abort | ControlRecordType::Commit) {
            return Err(Error::InvalidInput(
                "an end transaction marker is ABORT or COMMIT",
            ));
        }
        if producer_id < 0 {
            return Err(Error::InvalidInput(
                "an end transaction marker needs a producer id",
            ));
        }
        let value = EndTxnMarker {
            version: 0,
            coordinator_epoch,
        }
        .encode();
        let mut b = BatchBuilder::new(Compression::None)
            .producer(producer_id, producer_epoch, NO_SEQUENCE)
            .transactional(true);
        b.control = true;
        b.append(timestamp_ms, Some(&marker.key()), Some(&value), &[])?;
        Ok(b)
    }

    /// A KRaft control batch as `MemoryRecordsBuilder` builds one for the raft layer (snapshot header and
    /// footer, `RecordsSnapshotWriter`): control, not transactional, producer id/epoch/sequence -1, one
    /// record of `record_type` with `value`. Set the base offset and epoch before building.
    pub fn kraft_control(
        record_type: ControlRecordType,
        value: &[u8],
        timestamp_ms: i64,
    ) -> Result<Self, Error> {
        let mut b = BatchBuilder::new(Compression::None);
        b.control = true;
        b.append(timestamp_ms, Some(&record_type.key()), Some(value), &[])?;
        Ok(b)
    }

    /// KIP-1279's barrier: control type 7, producer id/epoch/sequence -1, not transactional, one record
    /// whose value is the flexible v0 `MirrorPidResetRecord` in the newest reference layout, `{Version}`
    /// (`00 00 00`; docs/compatibility.md).
    pub fn mirror_pid_reset(timestamp_ms: i64) -> Result<Self, Error> {
        let value = MirrorPidReset::new().encode();
        let mut b = BatchBuilder::new(Compression::None);
        b.control = true;
        b.append(
            timestamp_ms,
            Some(&ControlRecordType::MirrorPidReset.key()),
            Some(&value),
            &[],
        )?;
        Ok(b)
    }
}

fn nullable_size(b: Option<&[u8]>) -> usize {
    match b {
        None => 1,
        Some(b) => size_of_varint(b.len() as i32) + b.len(),
    }
}

fn write_nullable(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => write_varint(out, -1),
        Some(b) => {
            write_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
    }
}

/// `DefaultRecord.writeTo`; `headers` is walked twice (sizes, then bytes).
fn write_record<'h>(
    out: &mut Vec<u8>,
    offset_delta: i32,
    timestamp_delta: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: impl Iterator<Item = (&'h [u8], Option<&'h [u8]>)> + Clone,
) {
    let mut body = 1 + size_of_varlong(timestamp_delta) + size_of_varint(offset_delta);
    body += nullable_size(key) + nullable_size(value);
    let mut count = 0i32;
    for (k, v) in headers.clone() {
        body += nullable_size(Some(k)) + nullable_size(v);
        count += 1;
    }
    body += size_of_varint(count);
    out.reserve(body + 5);
    write_varint(out, body as i32);
    out.push(0);
    write_varlong(out, timestamp_delta);
    write_varint(out, offset_delta);
    write_nullable(out, key);
    write_nullable(out, value);
    write_varint(out, count);
    for (k, v) in headers {
        write_nullable(out, Some(k));
        write_nullable(out, v);
    }
}
