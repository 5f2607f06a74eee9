//! Kafka's record formats: the v2 record batch (zero-copy views, builders, in-place stamping),
//! control records (including MIRROR_PID_RESET), the four codecs, and read-only legacy v0/v1 message sets.
//!
//! Layouts are in `docs/format.md`; the Kafka sources they follow are cited in `../shared/spec/kafka-storage.md` §1.

mod batch;
mod batch_stream;
mod batches;
mod builder;
mod compression;
mod control;
mod header;
mod java_utf8;
mod legacy;
mod record;
mod record_layout;
mod record_span;
pub mod varint;

pub use batch::{RecordBatch, RecordBatchMut};
pub use batch_stream::{BatchStream, OnBatch, ReadAt, DEFAULT_WINDOW_BYTES};
pub use batches::{AnyBatch, Batches, Tail};
pub use builder::{BatchBuilder, Header};
pub use compression::{Compression, DEFAULT_MAX_DECOMPRESSED_BYTES};
pub use control::{
    ControlRecord, ControlRecordType, ControlValue, EndTxnMarker, LeaderChange, MirrorPidReset,
};
pub use header::{Attributes, BatchHeader, TimestampType};
pub use legacy::{LegacyEntry, LegacyRecord};
pub use record::{walk_records, HeaderIter, Record, Records, RecordsWalk};
pub use record_span::RecordSpan;

/// Bytes before `batch_length`'s coverage starts: base offset (8) + batch length (4). Kafka's `LOG_OVERHEAD`.
pub const LOG_OVERHEAD: usize = 12;
/// Size of the v2 batch header. Kafka's `RECORD_BATCH_OVERHEAD`.
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// Bytes needed to read a batch's size and magic. Kafka's `HEADER_SIZE_UP_TO_MAGIC`.
pub const HEADER_SIZE_UP_TO_MAGIC: usize = 17;
/// Smallest legal `size` field of any entry (a v0 message). Kafka's `MIN_RECORD_OVERHEAD`.
pub const MIN_RECORD_OVERHEAD: i32 = 14;
/// The CRC-32C of a v2 batch covers `attributes..end`.
pub const CRC_START: usize = 21;

/// Kafka's sentinel for "no producer id", "no sequence", "no timestamp", "no epoch".
pub const NO_PRODUCER_ID: i64 = -1;
/// `RecordBatch.NO_PRODUCER_EPOCH`.
pub const NO_PRODUCER_EPOCH: i16 = -1;
/// `RecordBatch.NO_SEQUENCE`.
pub const NO_SEQUENCE: i32 = -1;
/// `RecordBatch.NO_TIMESTAMP`.
pub const NO_TIMESTAMP: i64 = -1;
/// `RecordBatch.NO_PARTITION_LEADER_EPOCH`.
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;

/// Kafka's sequence arithmetic (wrapping from `i32::MAX` to 0 as Java's ints do), shared with the
/// producer-state rules.
pub use klog_psm::{decrement_sequence, increment_sequence};

/// CRC-32C (Castagnoli), as Kafka's `Crc32C`. crc-fast folds with VPCLMULQDQ/AVX-512 where the CPU has
/// them (and SSE4.2/PCLMULQDQ, or a table, where not): the one CRC pass a leader append must make is its
/// largest CPU cost after the copy.
#[inline]
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_wrap_at_i32_max_like_kafka() {
        assert_eq!(increment_sequence(0, 4), 4);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(decrement_sequence(1, 3), i32::MAX - 1);
        assert_eq!(decrement_sequence(5, 2), 3);
        for s in [0, 7, i32::MAX - 2, i32::MAX] {
            for d in [0, 1, 2, 5, 1000] {
                assert_eq!(
                    decrement_sequence(increment_sequence(s, d), d),
                    s,
                    "s={s} d={d}"
                );
            }
        }
    }

    #[test]
    fn crc32c_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    /// Every length from 0 to 300 and some large ones, at every alignment: the same value as the crc32c
    /// crate (the implementation klog used before, checked against Kafka's files by the fixture tests).
    #[test]
    fn crc32c_matches_the_crc32c_crate() {
        let data: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for start in 0..8 {
            for len in (0..300).chain([1023, 4096, 16_384, 65_537, 69_000]) {
                let s = &data[start..start + len];
                assert_eq!(crc32c(s), ::crc32c::crc32c(s), "start {start} len {len}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn crc32c_matches_the_crc32c_crate_on_random_bytes(bytes in proptest::collection::vec(0u8.., 0..5000)) {
            proptest::prop_assert_eq!(crc32c(&bytes), ::crc32c::crc32c(&bytes));
        }
    }
}
