//! The compacted partition the cleaner's tests clean, and what they read of it.
//!
//! Forty rounds of appends, a segment rolled every four: plain batches overwriting five keys (each with
//! a key of its own beside), a tombstone every tenth round, a committed transaction of producer 8 and an
//! aborted one of producer 7, then an active segment with a few more batches. Every round's offsets,
//! keys and values follow from its number alone, so a fresh copy is the same log byte for byte.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use klog_log::clock::ManualClock;
use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Batches, Compression, ControlRecordType};
use klog_log::io::Storage;
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::validator::AppendOrigin;
use klog_log::Error;

/// The clock of the appends and of the first pass.
pub const NOW: i64 = 1_800_000_000_000;
/// `delete.retention.ms` of the partition.
pub const DELETE_RETENTION_MS: i64 = 60_000;

/// A compacted topic with small segments (the tests roll them) and a minute of `delete.retention.ms`.
pub fn config() -> LogConfig {
    LogConfig::from_pairs([
        "cleanup.policy=compact",
        "segment.bytes=1200",
        "index.interval.bytes=64",
        "delete.retention.ms=60000",
        "min.cleanable.dirty.ratio=0.01",
    ])
    .unwrap()
}

/// Opens (or creates) the partition at `dir` with [`config`] and a clock at [`NOW`].
pub fn open(
    storage: Arc<dyn Storage>,
    dir: &Path,
    config: LogConfig,
    options: OpenOptions,
) -> Result<PartitionLog, Error> {
    let clock = Arc::new(ManualClock::new(NOW));
    PartitionLog::open_with_clock(storage, dir, config, options, clock).map(|(l, _)| l)
}

fn plain(records: &[(&str, Option<String>)]) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    for (k, v) in records {
        b.append(
            NOW,
            Some(k.as_bytes()),
            v.as_deref().map(str::as_bytes),
            &[],
        )
        .unwrap();
    }
    b.build().unwrap()
}

fn transactional(producer: i64, seq: i32, key: &str, value: &str) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None)
        .producer(producer, 0, seq)
        .transactional(true);
    b.append(NOW, Some(key.as_bytes()), Some(value.as_bytes()), &[])
        .unwrap();
    b.build().unwrap()
}

/// An end-transaction marker of `producer`, appended as the coordinator writes it.
pub fn marker(log: &PartitionLog, kind: ControlRecordType, producer: i64) {
    let mut m = BatchBuilder::end_txn_marker(kind, producer, 0, 0, NOW)
        .unwrap()
        .build()
        .unwrap();
    log.append_as_leader_with_origin(&mut m, 0, AppendOrigin::Coordinator)
        .unwrap();
}

/// Round `i` of the appends.
fn round(log: &PartitionLog, i: i32, seqs: &mut [i32; 2]) {
    let key = format!("k{}", i % 5);
    match i % 10 {
        3 => {
            let mut b = transactional(7, seqs[0], &format!("t{i}"), "aborted");
            seqs[0] += 1;
            log.append_as_leader(&mut b, 0).unwrap();
            marker(log, ControlRecordType::Abort, 7);
        }
        6 => {
            let mut b = transactional(8, seqs[1], &key, &format!("committed {i}"));
            seqs[1] += 1;
            log.append_as_leader(&mut b, 0).unwrap();
            marker(log, ControlRecordType::Commit, 8);
        }
        8 => {
            log.append_as_leader(&mut plain(&[(&key, None)]), 0)
                .unwrap();
        }
        _ => {
            let unique = format!("u{i}");
            let value = format!("value {i} {}", "x".repeat((i % 4) as usize * 10));
            let records = [
                (key.as_str(), Some(value)),
                (unique.as_str(), Some("once".to_owned())),
            ];
            log.append_as_leader(&mut plain(&records), 0).unwrap();
        }
    }
}

/// The partition: 40 rounds in 10 sealed segments, then an active one with 3 more rounds; the high
/// watermark at the log end, everything flushed.
pub fn fill(log: &PartitionLog) {
    let mut seqs = [0, 0];
    for i in 0..40 {
        round(log, i, &mut seqs);
        if i % 4 == 3 {
            log.roll().unwrap();
        }
    }
    for i in 40..43 {
        round(log, i, &mut seqs);
    }
    log.update_high_watermark(log.log_end_offset());
    log.flush(log.log_end_offset()).unwrap();
}

/// One record as read back: its key and value, and whether it is a control record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    /// The record's key.
    pub key: Option<Vec<u8>>,
    /// Its value (None: a tombstone).
    pub value: Option<Vec<u8>>,
    /// In a control batch.
    pub control: bool,
    /// In a transactional batch of this producer (-1: none).
    pub producer_id: i64,
    /// The batch's delete horizon.
    pub delete_horizon_ms: Option<i64>,
}

/// Every record of every segment by offset, read from the segments' bytes (not bounded by the high
/// watermark); offsets must strictly increase through the log.
pub fn records(log: &PartitionLog) -> BTreeMap<i64, Rec> {
    let mut out = BTreeMap::new();
    let mut last = -1i64;
    let mut scratch = Vec::new();
    for base in log.segment_base_offsets() {
        let seg = log.segment(base).unwrap();
        let bytes = seg.read_bytes(0, seg.size() as usize).unwrap();
        for batch in Batches::new(&bytes) {
            let klog_log::format::AnyBatch::V2(batch) = batch.unwrap() else {
                panic!("a v2 log")
            };
            assert!(
                batch.base_offset() > last,
                "offsets reorder: batch {} after {last}",
                batch.base_offset()
            );
            last = batch.last_offset();
            let producer_id = if batch.is_transactional() {
                batch.producer_id()
            } else {
                -1
            };
            for r in batch.records(&mut scratch).unwrap() {
                let r = r.unwrap();
                let rec = Rec {
                    key: r.key.map(<[u8]>::to_vec),
                    value: r.value.map(<[u8]>::to_vec),
                    control: batch.is_control(),
                    producer_id,
                    delete_horizon_ms: batch.delete_horizon_ms(),
                };
                out.insert(r.offset, rec);
            }
        }
    }
    out
}

/// What a first pass over `before` keeps below `end` (Kafka's `shouldRetainRecord` with every horizon
/// in the future): control records, and the data records of no aborted transaction whose offset is the
/// key's last below `end`; everything at or after `end` is kept.
pub fn expected_after_first_pass(before: &BTreeMap<i64, Rec>, end: i64) -> BTreeMap<i64, Rec> {
    let live = |r: &Rec| r.producer_id != 7;
    let mut latest: BTreeMap<&[u8], i64> = BTreeMap::new();
    for (&offset, r) in before.range(..end) {
        if !r.control && live(r) {
            latest.insert(r.key.as_deref().unwrap(), offset);
        }
    }
    before
        .iter()
        .filter(|(&offset, r)| {
            offset >= end
                || r.control
                || (live(r) && latest.get(r.key.as_deref().unwrap()) == Some(&offset))
        })
        .map(|(&o, r)| (o, r.clone()))
        .collect()
}

/// Records compared by offset, key, value and kind (horizons aside).
pub fn same_records(a: &BTreeMap<i64, Rec>, b: &BTreeMap<i64, Rec>) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|((oa, ra), (ob, rb))| {
            oa == ob && ra.key == rb.key && ra.value == rb.value && ra.control == rb.control
        })
}
