//! What a follower (and a mirror, which appends as one) still checks, matched with Kafka's
//! `UnifiedLog.appendAsFollower` (`ignoreRecordSize = true`, `validateAndAssignOffsets = false`): the
//! leader already accepted a batch, so `max.message.bytes` is not checked again (a topic whose limit was
//! lowered, or a leader with a larger one, must still replicate), but the CRC, increasing offsets, the
//! log end offset and `segment.bytes` (`RecordBatchTooLargeException`, RECORD_LIST_TOO_LARGE) are.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Batches, Compression};
use klog_log::io::{StdStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::KafkaError;

/// Small enough that one record with a 4 KiB value is over it.
const MAX_MESSAGE_BYTES: u32 = 1_000;

fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("follower-append")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn config() -> LogConfig {
    LogConfig {
        max_message_bytes: MAX_MESSAGE_BYTES,
        ..LogConfig::default()
    }
}

fn open(name: &str, config: LogConfig) -> PartitionLog {
    let storage: Arc<dyn Storage> = Arc::new(StdStorage);
    let (log, _) = PartitionLog::open(
        storage,
        &temp_dir(name).join("t-0"),
        config,
        OpenOptions::default(),
    )
    .unwrap();
    log
}

/// A leader's batch at `base_offset` (epoch 3) of `records` records with `value_len`-byte values.
fn leader_batch(base_offset: i64, records: usize, value_len: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None)
        .base_offset(base_offset)
        .partition_leader_epoch(3);
    for i in 0..records {
        let value = vec![b'a' + (i % 26) as u8; value_len];
        b.append(1_700_000_000_000 + i as i64, Some(b"k"), Some(&value), &[])
            .unwrap();
    }
    b.build().unwrap()
}

/// Every batch the log holds from offset 0, as bytes.
fn read_back(log: &PartitionLog) -> Vec<u8> {
    log.update_high_watermark(log.log_end_offset());
    let read = log.read(0, 1 << 20, None, false).unwrap();
    read.records.as_slice().to_vec()
}

#[test]
fn a_follower_batch_over_max_message_bytes_is_appended_and_reads_back() {
    let log = open("follower-large", config());
    let small = leader_batch(0, 2, 10);
    let large = leader_batch(2, 1, 4_096);
    assert!(large.len() > MAX_MESSAGE_BYTES as usize);
    log.append_as_follower(&small).unwrap();
    let info = log
        .append_as_follower(&large)
        .expect("the leader accepted this batch: a follower keeps it");
    assert_eq!((info.first_offset, info.last_offset), (2, 2));
    assert_eq!(log.log_end_offset(), 3);
    let mut expected = small.clone();
    expected.extend_from_slice(&large);
    assert_eq!(read_back(&log), expected, "the leader's bytes, unchanged");
    log.close().unwrap();
}

#[test]
fn a_mirror_batch_over_max_message_bytes_is_appended_and_reads_back() {
    let log = open("mirror-large", config());
    let large = leader_batch(0, 2, 4_096);
    assert!(large.len() > MAX_MESSAGE_BYTES as usize);
    log.append_as_mirror(&large)
        .expect("the source accepted this batch: a mirror keeps it");
    assert_eq!(log.log_end_offset(), 2);
    assert_eq!(read_back(&log), large);
    log.close().unwrap();
}

#[test]
fn a_leader_still_refuses_a_batch_over_max_message_bytes() {
    let log = open("leader-large", config());
    let mut large = leader_batch(0, 1, 4_096);
    let err = log.append_as_leader(&mut large, 0).unwrap_err();
    assert_eq!(err.kafka_error(), KafkaError::MessageTooLarge, "{err}");
    assert_eq!(log.log_end_offset(), 0);
    log.close().unwrap();
}

/// Kafka checks `segment.bytes` after the offsets for every origin: a set that cannot fit one segment is
/// RECORD_LIST_TOO_LARGE for a follower too, and nothing is written.
#[test]
fn a_follower_set_larger_than_a_segment_is_record_list_too_large() {
    let log = open(
        "follower-segment",
        LogConfig {
            segment_bytes: 8_192,
            ..config()
        },
    );
    let mut set = leader_batch(0, 1, 3_000);
    set.extend_from_slice(&leader_batch(1, 1, 3_000));
    set.extend_from_slice(&leader_batch(2, 1, 3_000));
    assert!(set.len() > 8_192);
    let err = log.append_as_follower(&set).unwrap_err();
    assert_eq!(err.kafka_error(), KafkaError::RecordListTooLarge, "{err}");
    let err = log.append_as_mirror(&set).unwrap_err();
    assert_eq!(err.kafka_error(), KafkaError::RecordListTooLarge, "{err}");
    assert_eq!(log.log_end_offset(), 0);
    // One batch over max.message.bytes that fits the segment is kept.
    log.append_as_follower(&set[..set.len() / 3]).unwrap();
    assert_eq!(log.log_end_offset(), 1);
    log.close().unwrap();
}

/// What the follower still checks: the CRC (CORRUPT_MESSAGE), offsets that go backwards
/// (OFFSETS_OUT_OF_ORDER) and a first offset below the log end (UNEXPECTED_APPEND_OFFSET), large
/// batches included.
#[test]
fn a_follower_still_checks_crc_offsets_and_the_log_end() {
    let log = open("follower-checks", config());
    let mut corrupt = leader_batch(0, 1, 4_096);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x01;
    let err = log.append_as_follower(&corrupt).unwrap_err();
    assert_eq!(err.kafka_error(), KafkaError::CorruptMessage, "{err}");

    let mut backwards = leader_batch(5, 1, 4_096);
    backwards.extend_from_slice(&leader_batch(2, 1, 10));
    let err = log.append_as_follower(&backwards).unwrap_err();
    assert_eq!(err.kafka_error(), KafkaError::OffsetsOutOfOrder, "{err}");
    assert_eq!(log.log_end_offset(), 0, "nothing written");

    log.append_as_follower(&leader_batch(0, 3, 4_096)).unwrap();
    let err = log
        .append_as_follower(&leader_batch(1, 1, 4_096))
        .unwrap_err();
    assert_eq!(
        err.kafka_error(),
        KafkaError::UnexpectedAppendOffset,
        "{err}"
    );
    assert_eq!(Batches::new(&read_back(&log)).count(), 1);
    log.close().unwrap();
}
