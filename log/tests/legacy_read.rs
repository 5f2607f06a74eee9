//! Reads of uncompressed legacy messages (magic 0 and 1, spec kafka-storage.md §1.8): every offset of a
//! hand-built message set is found, whether the log was just appended or reopened from its files.
//! A legacy log entry is `offset int64 | size int32 | crc uint32 | magic | attributes | [timestamp, v1] |
//! key | value`: its offset is its own last offset, and a small one is shorter than a v2 batch header.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::config::LogConfig;
use klog_log::format::{AnyBatch, BatchBuilder, Batches, Compression};
use klog_log::io::{StdStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};

fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One uncompressed legacy message at `offset` (magic 0 without a timestamp, magic 1 with one).
fn legacy_message(magic: u8, offset: i64, timestamp: i64, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut body = vec![magic, 0];
    if magic == 1 {
        body.extend_from_slice(&timestamp.to_be_bytes());
    }
    for part in [key, value] {
        body.extend_from_slice(&(part.len() as i32).to_be_bytes());
        body.extend_from_slice(part);
    }
    let mut entry = offset.to_be_bytes().to_vec();
    entry.extend_from_slice(&(4 + body.len() as i32).to_be_bytes());
    entry.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    entry.extend_from_slice(&body);
    entry
}

/// Offsets 0-4 in magic 0, 5-9 in magic 1; values from 3 bytes (a 20-byte message) to 300.
fn message_set() -> Vec<u8> {
    (0..10i64)
        .flat_map(|o| {
            let magic = if o < 5 { 0 } else { 1 };
            let value = vec![b'a' + o as u8; 3 + (o as usize * 37) % 300];
            legacy_message(
                magic,
                o,
                1_700_000_000_000 + o,
                format!("k{o}").as_bytes(),
                &value,
            )
        })
        .collect()
}

fn open(dir: &Path) -> PartitionLog {
    let storage: Arc<dyn Storage> = Arc::new(StdStorage);
    PartitionLog::open(storage, dir, LogConfig::default(), OpenOptions::default())
        .unwrap()
        .0
}

/// Every offset reads back: the first entry returned is that offset's message, and the rest follow.
fn assert_every_offset_reads(log: &PartitionLog, what: &str) {
    log.update_high_watermark(10);
    for offset in 0..10i64 {
        let read = log.read(offset, 1 << 20, None, true).unwrap();
        let entries: Vec<(i64, u8, Vec<u8>)> = Batches::new(read.records.as_slice())
            .map(|b| match b.unwrap() {
                AnyBatch::Legacy(e) => (e.offset, e.magic as u8, e.key.unwrap().to_vec()),
                AnyBatch::V2(_) => panic!("{what}: a v2 batch"),
            })
            .collect();
        let expected: Vec<(i64, u8, Vec<u8>)> = (offset..10)
            .map(|o| (o, u8::from(o >= 5), format!("k{o}").into_bytes()))
            .collect();
        assert_eq!(entries, expected, "{what}: read at {offset}");
        assert_eq!(read.next_offset, 10, "{what}: read at {offset}");
        // At most one message's worth: exactly the message at the offset.
        let one = log.read(offset, 1, None, true).unwrap();
        let first = Batches::new(one.records.as_slice())
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(
            (first.last_offset(), one.next_offset),
            (offset, offset + 1),
            "{what}: one message at {offset}"
        );
    }
}

#[test]
fn uncompressed_v0_and_v1_messages_read_at_their_offsets() {
    let dir = temp_dir("legacy-read").join("old-0");
    let log = open(&dir);
    let info = log.append_as_follower(&message_set()).unwrap();
    assert_eq!((info.first_offset, info.last_offset), (0, 9));
    assert_eq!(log.log_end_offset(), 10);
    assert_every_offset_reads(&log, "appended");
    log.close().unwrap();

    let log = open(&dir);
    assert_eq!(log.log_end_offset(), 10);
    assert_every_offset_reads(&log, "reopened");

    // The roll test reads the first batch's timestamp where its magic puts it: a v2 batch a minute
    // later goes into the same segment (reading a v2 header's place in the legacy bytes gave a
    // timestamp decades old, and a roll).
    let mut b = BatchBuilder::new(Compression::None)
        .base_offset(10)
        .partition_leader_epoch(0);
    b.append(1_700_000_060_000, Some(b"k10"), Some(b"v2"), &[])
        .unwrap();
    log.append_as_follower(&b.build().unwrap()).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0]);
}
