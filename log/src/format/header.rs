//! The 61-byte v2 batch header, declared once, and its attributes.

use zerocopy::byteorder::big_endian::{I16, I32, I64, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::Compression;

/// Kafka RecordBatch v2 header: 61 bytes, big-endian, unaligned (`DefaultRecordBatch.java`).
/// CRC-32C covers `attributes..end`; `batch_length` is not covered, so bound it before trusting it.
#[derive(Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct BatchHeader {
    /// `baseOffset`: the first offset.
    pub base_offset: I64,
    /// `batchLength`: bytes after this field.
    pub batch_length: I32,
    /// `partitionLeaderEpoch`.
    pub partition_leader_epoch: I32,
    /// `magic`: 2.
    pub magic: i8,
    /// `crc`: CRC-32C of `attributes..end`.
    pub crc: U32,
    /// `attributes`: codec, timestamp type, transactional, control, delete horizon.
    pub attributes: I16,
    /// `lastOffsetDelta`.
    pub last_offset_delta: I32,
    /// `baseTimestamp` (the delete horizon when that bit is set).
    pub base_timestamp: I64,
    /// `maxTimestamp`.
    pub max_timestamp: I64,
    /// `producerId` (-1: none).
    pub producer_id: I64,
    /// `producerEpoch`.
    pub producer_epoch: I16,
    /// `baseSequence`.
    pub base_sequence: I32,
    /// `recordsCount`.
    pub records_count: I32,
}

const _: () = assert!(core::mem::size_of::<BatchHeader>() == super::RECORD_BATCH_OVERHEAD);

/// Timestamp type of a batch (attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimestampType {
    /// Set by the producer.
    CreateTime,
    /// Set by the broker when it appends.
    LogAppendTime,
}

impl TimestampType {
    /// The name `kafka-dump-log` prints.
    pub fn kafka_name(self) -> &'static str {
        match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }
}

/// The attributes of a v2 batch. Kafka reads only the low byte of the int16 field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Attributes(pub u8);

impl Attributes {
    /// Bits 0-2: the codec id.
    pub const COMPRESSION_MASK: u8 = 0x07;
    /// Bit 3: LogAppendTime.
    pub const TIMESTAMP_TYPE: u8 = 0x08;
    /// Bit 4: transactional.
    pub const TRANSACTIONAL: u8 = 0x10;
    /// Bit 5: control batch.
    pub const CONTROL: u8 = 0x20;
    /// Bit 6: `baseTimestamp` holds the delete horizon.
    pub const DELETE_HORIZON: u8 = 0x40;

    /// From the stored int16: only the low byte counts (`(byte) buffer.getShort(21)`).
    pub fn from_field(field: i16) -> Self {
        Attributes(field as u8)
    }

    /// The codec id (bits 0-2).
    pub fn compression_id(self) -> u8 {
        self.0 & Self::COMPRESSION_MASK
    }

    /// The codec, or `None` for the ids 5-7 Kafka rejects.
    pub fn compression(self) -> Option<Compression> {
        Compression::from_id(self.compression_id())
    }

    /// The timestamp type (bit 3).
    pub fn timestamp_type(self) -> TimestampType {
        if self.0 & Self::TIMESTAMP_TYPE != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Bit 4.
    pub fn is_transactional(self) -> bool {
        self.0 & Self::TRANSACTIONAL != 0
    }

    /// Bit 5.
    pub fn is_control(self) -> bool {
        self.0 & Self::CONTROL != 0
    }

    /// Bit 6.
    pub fn has_delete_horizon(self) -> bool {
        self.0 & Self::DELETE_HORIZON != 0
    }

    /// Kafka's `computeAttributes`.
    pub fn new(
        compression: Compression,
        timestamp_type: TimestampType,
        transactional: bool,
        control: bool,
        delete_horizon: bool,
    ) -> Self {
        let mut a = compression.id();
        if timestamp_type == TimestampType::LogAppendTime {
            a |= Self::TIMESTAMP_TYPE;
        }
        if transactional {
            a |= Self::TRANSACTIONAL;
        }
        if control {
            a |= Self::CONTROL;
        }
        if delete_horizon {
            a |= Self::DELETE_HORIZON;
        }
        Attributes(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_decode_every_bit() {
        let a = Attributes::from_field(0x7f);
        assert_eq!(a.compression_id(), 7);
        assert_eq!(a.compression(), None);
        assert_eq!(a.timestamp_type(), TimestampType::LogAppendTime);
        assert!(a.is_transactional() && a.is_control() && a.has_delete_horizon());
        let b = Attributes::from_field(0x0130u16 as i16);
        assert_eq!(b.0, 0x30, "only the low byte is read");
        assert_eq!(b.compression(), Some(Compression::None));
        assert_eq!(
            Attributes::new(
                Compression::Zstd,
                TimestampType::CreateTime,
                true,
                false,
                false
            )
            .0,
            0x14
        );
    }
}
