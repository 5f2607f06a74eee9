//! `RecordBatch`: a checked, borrowed view over one v2 batch, and `RecordBatchMut` for in-place stamping.
//!
//! A view exists only after the bounds, the magic and the CRC-32C were checked, so the indexes and the
//! producer state never see unchecked bytes. Parsing copies nothing.

use zerocopy::FromBytes;

use super::control::ControlRecord;
use super::header::{Attributes, BatchHeader, TimestampType};
use super::record::Records;
use super::{
    crc32c, increment_sequence, Compression, CRC_START, LOG_OVERHEAD, NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
};
use crate::{Corruption, Error};

/// A validated v2 record batch borrowed from a buffer (a segment mmap, a file read, a fetch response).
#[derive(Debug, Clone, Copy)]
pub struct RecordBatch<'a> {
    header: &'a BatchHeader,
    bytes: &'a [u8],
    position: u64,
}

/// What `parse_unchecked_crc` validated, before the checksum.
fn check_structure(buf: &[u8], position: u64) -> Result<(&BatchHeader, &[u8]), Error> {
    let corrupt = |reason| Error::corrupt(position, reason);
    let (header, _) = BatchHeader::ref_from_prefix(buf).map_err(|_| {
        corrupt(Corruption::Truncated {
            needed: RECORD_BATCH_OVERHEAD as u64,
            available: buf.len() as u64,
        })
    })?;
    let batch_length = header.batch_length.get();
    let minimum = (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32;
    if batch_length < minimum {
        return Err(corrupt(Corruption::BatchLengthTooSmall {
            batch_length,
            minimum,
        }));
    }
    let size = LOG_OVERHEAD as u64 + batch_length as u64;
    if size > buf.len() as u64 {
        return Err(corrupt(Corruption::Truncated {
            needed: size,
            available: buf.len() as u64,
        }));
    }
    if header.magic != 2 {
        return Err(corrupt(Corruption::BadMagic {
            magic: header.magic,
        }));
    }
    Ok((header, &buf[..size as usize]))
}

impl<'a> RecordBatch<'a> {
    /// Parses and validates the batch at the start of `buf`; `position` is where `buf` starts in its file,
    /// used only for error messages. Returns the batch and the bytes after it.
    pub fn parse(buf: &'a [u8], position: u64) -> Result<(Self, &'a [u8]), Error> {
        let (batch, rest) = Self::parse_unchecked_crc(buf, position)?;
        batch.verify_crc()?;
        Ok((batch, rest))
    }

    /// Like [`parse`](Self::parse) but without the checksum, for bytes whose CRC was verified when they
    /// were appended (our own segments). Bounds and magic are still checked.
    pub fn parse_unchecked_crc(buf: &'a [u8], position: u64) -> Result<(Self, &'a [u8]), Error> {
        let (header, bytes) = check_structure(buf, position)?;
        let batch = RecordBatch {
            header,
            bytes,
            position,
        };
        Ok((batch, &buf[bytes.len()..]))
    }

    /// Recomputes the CRC-32C over `attributes..end` and compares it with the stored one.
    pub fn verify_crc(&self) -> Result<(), Error> {
        let computed = self.compute_crc();
        let stored = self.crc();
        if computed != stored {
            return Err(Error::corrupt(
                self.position,
                Corruption::Crc { stored, computed },
            ));
        }
        Ok(())
    }

    /// The CRC-32C of `attributes..end`, as the header's `crc` should hold it.
    pub fn compute_crc(&self) -> u32 {
        crc32c(&self.bytes[CRC_START..])
    }

    /// The 61-byte header.
    pub fn header(&self) -> &'a BatchHeader {
        self.header
    }

    /// The whole batch, header included.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Where the batch started in the buffer it was parsed from (as given to `parse`).
    pub fn position(&self) -> u64 {
        self.position
    }

    /// `12 + batch_length`: the whole batch.
    pub fn size_in_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// `baseOffset`.
    pub fn base_offset(&self) -> i64 {
        self.header.base_offset.get()
    }

    /// `batchLength`: bytes after this field.
    pub fn batch_length(&self) -> i32 {
        self.header.batch_length.get()
    }

    /// `partitionLeaderEpoch`, stamped by the leader that appended the batch.
    pub fn partition_leader_epoch(&self) -> i32 {
        self.header.partition_leader_epoch.get()
    }

    /// `magic` (2).
    pub fn magic(&self) -> i8 {
        self.header.magic
    }

    /// The stored `crc`.
    pub fn crc(&self) -> u32 {
        self.header.crc.get()
    }

    /// `attributes`.
    pub fn attributes(&self) -> Attributes {
        Attributes::from_field(self.header.attributes.get())
    }

    /// The codec; an id of 5-7 is corruption (Kafka: "Unknown compression type id").
    pub fn compression(&self) -> Result<Compression, Error> {
        let a = self.attributes();
        a.compression().ok_or_else(|| {
            Error::corrupt(
                self.position,
                Corruption::UnknownCompression {
                    id: a.compression_id(),
                },
            )
        })
    }

    /// CreateTime or LogAppendTime (attributes bit 3).
    pub fn timestamp_type(&self) -> TimestampType {
        self.attributes().timestamp_type()
    }

    /// Whether the batch is transactional (attributes bit 4).
    pub fn is_transactional(&self) -> bool {
        self.attributes().is_transactional()
    }

    /// Whether it is a control batch (attributes bit 5).
    pub fn is_control(&self) -> bool {
        self.attributes().is_control()
    }

    /// `lastOffsetDelta`.
    pub fn last_offset_delta(&self) -> i32 {
        self.header.last_offset_delta.get()
    }

    /// `base_offset + last_offset_delta`.
    pub fn last_offset(&self) -> i64 {
        self.base_offset()
            .wrapping_add(self.last_offset_delta() as i64)
    }

    /// The offset after the batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }

    /// The stored base timestamp; the delete horizon when that attribute is set.
    pub fn base_timestamp(&self) -> i64 {
        self.header.base_timestamp.get()
    }

    /// `maxTimestamp`.
    pub fn max_timestamp(&self) -> i64 {
        self.header.max_timestamp.get()
    }

    /// `Some(ms)` when the delete-horizon attribute is set.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        self.attributes()
            .has_delete_horizon()
            .then(|| self.base_timestamp())
    }

    /// `producerId` (-1: none).
    pub fn producer_id(&self) -> i64 {
        self.header.producer_id.get()
    }

    /// Kafka's `hasProducerId()`: `producerId > -1`.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id() > -1
    }

    /// `producerEpoch` (-1: none).
    pub fn producer_epoch(&self) -> i16 {
        self.header.producer_epoch.get()
    }

    /// `baseSequence` (-1: none).
    pub fn base_sequence(&self) -> i32 {
        self.header.base_sequence.get()
    }

    /// Kafka's `lastSequence()`: -1 without a base sequence, else wrapping at `i32::MAX`.
    pub fn last_sequence(&self) -> i32 {
        let base = self.base_sequence();
        if base == NO_SEQUENCE {
            NO_SEQUENCE
        } else {
            increment_sequence(base, self.last_offset_delta())
        }
    }

    /// `recordsCount`.
    pub fn records_count(&self) -> i32 {
        self.header.records_count.get()
    }

    /// The bytes after the header: the records, or one compressed stream of them.
    pub fn records_payload(&self) -> &'a [u8] {
        &self.bytes[RECORD_BATCH_OVERHEAD..]
    }

    /// Iterates the records. Uncompressed batches are read in place; compressed ones are inflated once into
    /// `scratch` (reused across batches), capped at [`super::DEFAULT_MAX_DECOMPRESSED_BYTES`].
    pub fn records<'s>(&'s self, scratch: &'s mut Vec<u8>) -> Result<Records<'s>, Error> {
        self.records_with_limit(scratch, super::DEFAULT_MAX_DECOMPRESSED_BYTES)
    }

    /// The records, inflating a compressed batch into `scratch` at most `limit` bytes (the decompression-bomb cap).
    pub fn records_with_limit<'s>(
        &'s self,
        scratch: &'s mut Vec<u8>,
        limit: usize,
    ) -> Result<Records<'s>, Error> {
        let count = self.records_count();
        if count < 0 {
            return Err(Error::corrupt(
                self.position,
                Corruption::NegativeRecordCount { count },
            ));
        }
        let data: &'s [u8] = match self.compression()? {
            Compression::None => self.records_payload(),
            codec => {
                codec
                    .decompress(self.records_payload(), scratch, limit)
                    .map_err(|r| Error::corrupt(self.position, r))?;
                scratch.as_slice()
            }
        };
        let log_append_time =
            (self.timestamp_type() == TimestampType::LogAppendTime).then(|| self.max_timestamp());
        Ok(Records::new(
            data,
            count,
            self.base_offset(),
            self.base_timestamp(),
            self.base_sequence(),
            log_append_time,
            self.position,
        ))
    }

    /// The control record of a control batch (its first record), decoded; `None` for a data batch.
    pub fn control_record(&self) -> Result<Option<ControlRecord>, Error> {
        if !self.is_control() {
            return Ok(None);
        }
        let mut scratch = Vec::new();
        let mut records = self.records(&mut scratch)?;
        let first = match records.next() {
            Some(r) => r?,
            None => return Err(Error::corrupt(self.position, Corruption::EmptyControlBatch)),
        };
        ControlRecord::parse(first.key, first.value)
            .map(Some)
            .map_err(|r| Error::corrupt(self.position, r))
    }
}

/// A mutable view for the leader's in-place stamping of a batch that was already validated.
pub struct RecordBatchMut<'a> {
    bytes: &'a mut [u8],
}

impl<'a> RecordBatchMut<'a> {
    /// Validates the batch at the start of `buf` (bounds, magic, CRC) and returns a view of exactly it.
    pub fn parse(buf: &'a mut [u8]) -> Result<Self, Error> {
        let size = RecordBatch::parse(buf, 0)?.0.size_in_bytes();
        Ok(RecordBatchMut {
            bytes: &mut buf[..size],
        })
    }

    /// Like [`parse`](Self::parse) without the checksum, for a batch validated just before.
    pub fn parse_unchecked_crc(buf: &'a mut [u8]) -> Result<Self, Error> {
        let size = RecordBatch::parse_unchecked_crc(buf, 0)?.0.size_in_bytes();
        Ok(RecordBatchMut {
            bytes: &mut buf[..size],
        })
    }

    fn header(&mut self) -> &mut BatchHeader {
        BatchHeader::mut_from_prefix(self.bytes)
            .expect("checked in parse")
            .0
    }

    /// Outside the CRC: no recompute.
    pub fn set_base_offset(&mut self, base_offset: i64) {
        self.header().base_offset.set(base_offset);
    }

    /// Outside the CRC: no recompute.
    pub fn set_partition_leader_epoch(&mut self, epoch: i32) {
        self.header().partition_leader_epoch.set(epoch);
    }

    /// Kafka's `setMaxTimestamp(LOG_APPEND_TIME, ts)`: attributes and max timestamp are inside the CRC, so it
    /// is recomputed, and only when something changed.
    pub fn set_log_append_time(&mut self, timestamp_ms: i64) {
        let header = self.header();
        let old = Attributes::from_field(header.attributes.get());
        let new = Attributes(old.0 | Attributes::TIMESTAMP_TYPE);
        if old == new && header.max_timestamp.get() == timestamp_ms {
            return;
        }
        let high = header.attributes.get() as u16 & 0xff00;
        header.attributes.set((high | new.0 as u16) as i16);
        header.max_timestamp.set(timestamp_ms);
        let crc = crc32c(&self.bytes[CRC_START..]);
        self.header().crc.set(crc);
    }

    /// Kafka's `setMaxTimestamp(CREATE_TIME, ts)` on a CreateTime batch: the max timestamp is inside the
    /// CRC, so it is recomputed, and only when the value changed.
    pub fn set_create_time_max_timestamp(&mut self, timestamp_ms: i64) {
        let header = self.header();
        if header.max_timestamp.get() == timestamp_ms {
            return;
        }
        header.max_timestamp.set(timestamp_ms);
        let crc = crc32c(&self.bytes[CRC_START..]);
        self.header().crc.set(crc);
    }

    /// A read-only view of the same bytes.
    pub fn as_batch(&self) -> RecordBatch<'_> {
        let (header, _) = BatchHeader::ref_from_prefix(self.bytes).expect("checked in parse");
        RecordBatch {
            header,
            bytes: self.bytes,
            position: 0,
        }
    }
}
