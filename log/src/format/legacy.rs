//! Legacy message sets (magic 0 and 1): recognized, CRC-32 validated and iterated, never written.
//!
//! Entry = `offset int64 | size int32 | crc uint32 | magic int8 | attributes int8 | [timestamp int64, v1] |
//! key (int32 length, -1 null) | value (likewise)`; the CRC is plain CRC-32 over `magic..end`. A compressed
//! set is one wrapper whose value is the compressed inner entries; the wrapper's offset is the last inner
//! offset, and v1 inner offsets are relative (`LegacyRecord.java`, `AbstractLegacyRecordBatch.java`).

use super::header::TimestampType;
use super::varint::Cursor;
use super::Compression;
use crate::{Corruption, Error, RecordCorruption};

const OVERHEAD_V0: i32 = 14;
const OVERHEAD_V1: i32 = 22;

/// One legacy log entry (a message or a compressed wrapper), validated.
#[derive(Debug, Clone, Copy)]
pub struct LegacyEntry<'a> {
    bytes: &'a [u8],
    position: u64,
    /// The entry's offset (a compressed wrapper's: its last inner offset).
    pub offset: i64,
    /// The stored CRC-32.
    pub crc: u32,
    /// 0 or 1.
    pub magic: i8,
    /// Codec (bits 0-2) and, in v1, the timestamp type (bit 3).
    pub attributes: u8,
    /// v1 only.
    pub timestamp: Option<i64>,
    /// The key.
    pub key: Option<&'a [u8]>,
    /// The value (a wrapper: the compressed inner messages).
    pub value: Option<&'a [u8]>,
}

/// One record of a legacy entry, after unwrapping compression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyRecord<'a> {
    /// The offset.
    pub offset: i64,
    /// The timestamp (v1 only).
    pub timestamp: Option<i64>,
    /// The timestamp type (v1 only).
    pub timestamp_type: Option<TimestampType>,
    /// The stored CRC-32.
    pub crc: u32,
    /// The key.
    pub key: Option<&'a [u8]>,
    /// The value.
    pub value: Option<&'a [u8]>,
}

impl<'a> LegacyEntry<'a> {
    /// Parses and validates the entry at the start of `buf`; returns it and the rest.
    pub fn parse(buf: &'a [u8], position: u64) -> Result<(Self, &'a [u8]), Error> {
        let (entry, rest) = Self::parse_unchecked_crc(buf, position)?;
        let computed = entry.compute_crc();
        if computed != entry.crc {
            let reason = Corruption::Crc {
                stored: entry.crc,
                computed,
            };
            return Err(Error::corrupt(position, reason));
        }
        Ok((entry, rest))
    }

    /// CRC-32 over `magic..end`.
    pub fn compute_crc(&self) -> u32 {
        crc32fast::hash(&self.bytes[16..])
    }

    /// Structure only, no checksum (for tools that report `isvalid: false` and go on).
    pub fn parse_unchecked_crc(buf: &'a [u8], position: u64) -> Result<(Self, &'a [u8]), Error> {
        let corrupt = |reason| Error::corrupt(position, reason);
        if buf.len() < super::HEADER_SIZE_UP_TO_MAGIC {
            return Err(corrupt(Corruption::Truncated {
                needed: super::HEADER_SIZE_UP_TO_MAGIC as u64,
                available: buf.len() as u64,
            }));
        }
        let offset = i64::from_be_bytes(buf[0..8].try_into().expect("8 bytes"));
        let size = i32::from_be_bytes(buf[8..12].try_into().expect("4 bytes"));
        let magic = buf[16] as i8;
        let minimum = match magic {
            0 => OVERHEAD_V0,
            1 => OVERHEAD_V1,
            _ => return Err(corrupt(Corruption::BadMagic { magic })),
        };
        if size < minimum {
            return Err(corrupt(Corruption::BatchLengthTooSmall {
                batch_length: size,
                minimum,
            }));
        }
        let total = super::LOG_OVERHEAD as u64 + size as u64;
        if total > buf.len() as u64 {
            return Err(corrupt(Corruption::Truncated {
                needed: total,
                available: buf.len() as u64,
            }));
        }
        let bytes = &buf[..total as usize];
        let stored = u32::from_be_bytes(bytes[12..16].try_into().expect("4 bytes"));
        let record = |reason| corrupt(Corruption::Record { index: 0, reason });
        let mut c = Cursor::new(&bytes[17..]);
        let attributes = c.read_u8("attributes").map_err(record)?;
        let timestamp = if magic == 1 {
            Some(c.read_i64("timestamp").map_err(record)?)
        } else {
            None
        };
        let key = read_sized(&mut c, "key").map_err(record)?;
        let value = read_sized(&mut c, "value").map_err(record)?;
        if c.remaining() != 0 {
            return Err(corrupt(Corruption::TrailingBytes {
                bytes: c.remaining() as u64,
            }));
        }
        let entry = LegacyEntry {
            bytes,
            position,
            offset,
            crc: stored,
            magic,
            attributes,
            timestamp,
            key,
            value,
        };
        Ok((entry, &buf[bytes.len()..]))
    }

    /// Its bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Its size in bytes, log overhead included.
    pub fn size_in_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Its byte position in the data.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Codec of the wrapper; zstd and ids above 3 are invalid below magic 2.
    pub fn compression(&self) -> Result<Compression, Error> {
        match Compression::from_id(self.attributes & 0x07) {
            Some(c) if c != Compression::Zstd => Ok(c),
            _ => Err(Error::corrupt(
                self.position,
                Corruption::UnknownCompression {
                    id: self.attributes & 0x07,
                },
            )),
        }
    }

    /// `None` for magic 0 (Kafka's `NoTimestampType`).
    pub fn timestamp_type(&self) -> Option<TimestampType> {
        let log_append = self.attributes & 0x08 != 0;
        (self.magic == 1).then_some(if log_append {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        })
    }

    /// The records: the entry itself, or the inner entries of a compressed wrapper (inflated into `scratch`).
    pub fn records<'s>(&'s self, scratch: &'s mut Vec<u8>) -> Result<Vec<LegacyRecord<'s>>, Error> {
        let codec = self.compression()?;
        if codec == Compression::None {
            return Ok(vec![self.as_record(self.offset, self.timestamp)]);
        }
        let value = self.value.unwrap_or_default();
        let fixed;
        let value = if self.magic == 0 && codec == Compression::Lz4 {
            fixed = fix_broken_lz4_header_checksum(value);
            fixed.as_slice()
        } else {
            value
        };
        codec
            .decompress(value, scratch, super::DEFAULT_MAX_DECOMPRESSED_BYTES)
            .map_err(|r| Error::corrupt(self.position, r))?;
        let mut inner = Vec::new();
        let mut rest: &'s [u8] = scratch.as_slice();
        while !rest.is_empty() {
            let (entry, next) = LegacyEntry::parse(rest, self.position)?;
            if entry.attributes & 0x07 != 0 {
                return Err(Error::corrupt(
                    self.position,
                    Corruption::Record {
                        index: inner.len() as u32,
                        reason: RecordCorruption::Truncated {
                            field: "nested compressed message",
                        },
                    },
                ));
            }
            inner.push(entry);
            rest = next;
        }
        let last_relative = inner.last().map_or(0, |e| e.offset);
        let log_append_time = (self.timestamp_type() == Some(TimestampType::LogAppendTime))
            .then_some(self.timestamp)
            .flatten();
        Ok(inner
            .iter()
            .map(|e| {
                let offset = if self.magic >= 1 {
                    self.offset
                        .wrapping_sub(last_relative)
                        .wrapping_add(e.offset)
                } else {
                    e.offset
                };
                let mut r = e.as_record(offset, log_append_time.or(e.timestamp));
                r.timestamp_type = self.timestamp_type();
                r
            })
            .collect())
    }

    fn as_record(&self, offset: i64, timestamp: Option<i64>) -> LegacyRecord<'a> {
        LegacyRecord {
            offset,
            timestamp,
            timestamp_type: self.timestamp_type(),
            crc: self.crc,
            key: self.key,
            value: self.value,
        }
    }
}

/// Kafka 0.8-0.9 wrote magic 0 LZ4 frames with a header checksum computed over the magic bytes too (KIP-57,
/// `useBrokenFlagDescriptorChecksum`). Replace it with the correct one so a standard decoder accepts the frame.
fn fix_broken_lz4_header_checksum(frame: &[u8]) -> Vec<u8> {
    let mut fixed = frame.to_vec();
    if fixed.len() < 7 {
        return fixed;
    }
    let flg = fixed[4];
    let mut hc_at = 6;
    if flg & 0x08 != 0 {
        hc_at += 8;
    }
    if flg & 0x01 != 0 {
        hc_at += 4;
    }
    if hc_at < fixed.len() {
        let hash = twox_hash::XxHash32::oneshot(0, &fixed[4..hc_at]);
        fixed[hc_at] = (hash >> 8) as u8;
    }
    fixed
}

fn read_sized<'a>(
    c: &mut Cursor<'a>,
    field: &'static str,
) -> Result<Option<&'a [u8]>, RecordCorruption> {
    let len = c.read_i32(field)?;
    if len == -1 {
        return Ok(None);
    }
    if len < 0 || len as usize > c.remaining() {
        return Err(RecordCorruption::BadFieldLength {
            field,
            length: len,
            available: c.remaining() as u64,
        });
    }
    c.read_bytes(len as usize, field).map(Some)
}
