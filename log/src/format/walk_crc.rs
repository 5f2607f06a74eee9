//! The leader's record walk and the batch's CRC-32C in one pass over an uncompressed v2 batch.
//!
//! A leader checks each batch's CRC-32C (`attributes..end`) and walks every record (`walk_records`).
//! Done one after the other, each streams the whole batch; here the CRC follows the walk a chunk at a
//! time, over bytes the walk has just loaded, and the CRC's vector folds (independent of the walk's
//! chain of dependent loads) can run beside the next records' walk. The result is exactly that of
//! [`crc32c`](super::crc32c) of `attributes..end` beside [`walk_records`](super::walk_records) of the
//! records, whatever the bytes are: every byte is checksummed once and in order, and the walk in steps
//! is the walk in one go.

use crc_fast::{CrcAlgorithm, Digest};

use super::batch::RecordBatch;
use super::record::{RecordsWalk, RecordsWalker};
use super::{CRC_START, RECORD_BATCH_OVERHEAD};
use crate::Corruption;

/// Bytes of records walked between two CRC updates: small enough that one update's instructions fit
/// the core's reorder window beside the walk's, large enough that an update's setup and final
/// reduction (a few dozen instructions) stay a small part of it.
pub const CRC_CHUNK_BYTES: usize = 2048;

/// The CRC-32C of `batch`'s `attributes..end` and the walk of its records (its payload read as
/// uncompressed records, `records_count` of them from `base_timestamp`), computed in one pass. The CRC
/// covers every byte even when the walk fails part way.
pub fn walk_records_crc(batch: &RecordBatch<'_>) -> (u32, Result<RecordsWalk, Corruption>) {
    walk_records_crc_in(batch, CRC_CHUNK_BYTES)
}

/// [`walk_records_crc`] with the CRC updated every `chunk_bytes` of records walked (at least one
/// record each time), for measuring the choice of [`CRC_CHUNK_BYTES`].
pub fn walk_records_crc_in(
    batch: &RecordBatch<'_>,
    chunk_bytes: usize,
) -> (u32, Result<RecordsWalk, Corruption>) {
    let bytes = batch.as_bytes();
    let records = batch.records_payload();
    let mut digest = Digest::new(CrcAlgorithm::Crc32Iscsi);
    let mut summed = CRC_START;
    let walk = (|| {
        let mut walker = RecordsWalker::new(batch.records_count(), batch.base_timestamp())?;
        while !walker.is_done() {
            let stop_at = walker.position().saturating_add(chunk_bytes);
            walker.walk_until(records, stop_at)?;
            let walked = RECORD_BATCH_OVERHEAD + walker.position();
            digest.update(&bytes[summed..walked]);
            summed = walked;
        }
        walker.finish(records)
    })();
    digest.update(&bytes[summed..]);
    (digest.finalize() as u32, walk)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{crc32c, walk_records, BatchBuilder, Compression, Header};
    use proptest::prelude::*;

    /// The separate passes the fused one must equal: (CRC-32C of `attributes..end`, the walk).
    fn separate(bytes: &[u8]) -> (u32, Result<RecordsWalk, Corruption>) {
        let (b, _) = RecordBatch::parse_unchecked_crc(bytes, 0).expect("structure");
        let walk = walk_records(b.records_payload(), b.records_count(), b.base_timestamp());
        (crc32c(&bytes[CRC_START..]), walk)
    }

    fn fused(bytes: &[u8]) -> (u32, Result<RecordsWalk, Corruption>) {
        let (b, _) = RecordBatch::parse_unchecked_crc(bytes, 0).expect("structure");
        walk_records_crc(&b)
    }

    /// An uncompressed batch of `values` (each record keyed, some with a header), timestamps from
    /// 1,000 ms on, in the order `ts_order` moves them.
    fn batch(values: &[Vec<u8>], ts_step: i64, header_every: usize) -> Vec<u8> {
        let mut b = BatchBuilder::new(Compression::None);
        for (i, v) in values.iter().enumerate() {
            let header = Header {
                key: "h",
                value: Some(b"hv"),
            };
            let headers = if header_every > 0 && i % header_every == 0 {
                &[header][..]
            } else {
                &[]
            };
            let key = format!("k{i}");
            b.append(
                1_000 + ts_step * i as i64,
                Some(key.as_bytes()),
                Some(v),
                headers,
            )
            .expect("append");
        }
        b.build().expect("build")
    }

    /// Sets a 32-bit big-endian header field and returns the bytes (the CRC is not fixed up).
    fn set_i32(mut bytes: Vec<u8>, at: usize, v: i32) -> Vec<u8> {
        bytes[at..at + 4].copy_from_slice(&v.to_be_bytes());
        bytes
    }

    #[test]
    fn a_valid_batch_of_every_shape_gives_the_crc_and_walk_of_the_separate_passes() {
        for (n, len) in [(1, 0), (1, 5000), (15, 1024), (140, 100), (3, 20_000)] {
            let values = vec![vec![7u8; len]; n];
            let bytes = batch(&values, 1, 0);
            let (crc, walk) = fused(&bytes);
            assert_eq!(
                (crc, walk.clone()),
                separate(&bytes),
                "{n} records of {len} bytes"
            );
            let stored = u32::from_be_bytes(bytes[17..21].try_into().unwrap());
            assert_eq!(crc, stored, "{n} records of {len} bytes");
            assert!(walk.is_ok());
        }
    }

    #[test]
    fn a_walk_that_fails_part_way_still_checksums_every_byte() {
        // 40 records of 100 bytes: break the length of record 30, past the first chunk.
        let values = vec![vec![1u8; 100]; 40];
        let mut bytes = batch(&values, 1, 0);
        let (b, _) = RecordBatch::parse(&bytes, 0).expect("valid");
        let mut scratch = Vec::new();
        let start: usize = b
            .records(&mut scratch)
            .expect("records")
            .take(30)
            .map(|r| r.expect("record").size_in_bytes)
            .sum();
        assert!(
            start > CRC_CHUNK_BYTES,
            "record 30 starts past the first chunk"
        );
        // Record 30's length: past the end of the records.
        bytes[RECORD_BATCH_OVERHEAD + start] = 0x7e;
        let (crc, walk) = fused(&bytes);
        assert_eq!((crc, walk.clone()), separate(&bytes));
        assert!(walk.is_err(), "{walk:?}");
        assert_eq!(crc, crc32c(&bytes[CRC_START..]));
    }

    /// Where the corruption goes: (byte index into the records, new byte).
    fn corruption() -> impl Strategy<Value = Vec<(usize, u8)>> {
        proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4)
    }

    proptest! {
        /// Valid and corrupt batches alike (bytes of the records flipped, so varints, lengths and
        /// offset deltas go wrong; the stored CRC wrong; the record count or the last offset delta
        /// not the records'): the fused pass gives exactly the separate passes' CRC and walk, so the
        /// validator accepts and refuses the same batches with the same reasons.
        #[test]
        fn the_fused_pass_equals_the_separate_walk_and_crc(
            sizes in proptest::collection::vec(0usize..3000, 1..60),
            ts_step in -5i64..5,
            header_every in 0usize..4,
            flips in corruption(),
            bad_crc in any::<bool>(),
            count_delta in prop_oneof![Just(0i32), -2i32..3],
            offset_delta in prop_oneof![Just(0i32), -2i32..3],
        ) {
            let values: Vec<Vec<u8>> = sizes.iter().map(|&n| vec![0x5a; n]).collect();
            let mut bytes = batch(&values, ts_step, header_every);
            let records = bytes.len() - RECORD_BATCH_OVERHEAD;
            for (at, v) in flips {
                if records > 0 {
                    bytes[RECORD_BATCH_OVERHEAD + at % records] = v;
                }
            }
            if bad_crc {
                bytes[17] ^= 0x01;
            }
            let count = i32::from_be_bytes(bytes[57..61].try_into().unwrap());
            bytes = set_i32(bytes, 57, count.wrapping_add(count_delta));
            let last = i32::from_be_bytes(bytes[23..27].try_into().unwrap());
            bytes = set_i32(bytes, 23, last.wrapping_add(offset_delta));
            prop_assert_eq!(fused(&bytes), separate(&bytes));
        }

        /// Arbitrary bytes after a valid header: whatever the records' bytes are.
        #[test]
        fn the_fused_pass_equals_the_separate_passes_on_random_records(
            payload in proptest::collection::vec(any::<u8>(), 0..5000),
            count in -1i32..200,
        ) {
            let mut bytes = batch(&[Vec::new()], 0, 0);
            bytes.truncate(RECORD_BATCH_OVERHEAD);
            bytes.extend_from_slice(&payload);
            let length = (bytes.len() - 12) as i32;
            bytes = set_i32(bytes, 8, length);
            bytes = set_i32(bytes, 57, count);
            prop_assert_eq!(fused(&bytes), separate(&bytes));
        }
    }
}
