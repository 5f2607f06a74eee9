//! Kafka 4.x's index rule for appends of several batches (`LogSegment.append` walks the batches): an
//! offset-index entry is a batch's own last offset at the batch's own position, once more than
//! `index.interval.bytes` were appended since the last entry, and the time index is offered the running max
//! per batch. A follower (or mirror) appending whole fetches, or the coordinator appending several batches
//! at once, must therefore end with the `.index` and `.timeindex` of a log that took the same batches one
//! at a time.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::clock::ManualClock;
use klog_log::config::LogConfig;
use klog_log::format::{AnyBatch, BatchBuilder, Batches, Compression};
use klog_log::io::{read_file, StdStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::validator::AppendOrigin;

const NOW_MS: i64 = 1_800_000_000_000;

fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn open(dir: &Path, config: &LogConfig) -> PartitionLog {
    let storage: Arc<dyn Storage> = Arc::new(StdStorage);
    let clock = Arc::new(ManualClock::new(NOW_MS));
    PartitionLog::open_with_clock(storage, dir, config.clone(), OpenOptions::default(), clock)
        .unwrap()
        .0
}

/// `n` batches from `base` of 1 to 12 records and values of 10 to 1,500 bytes (so some batches alone
/// pass the index interval and some need several), with timestamps that go back now and then.
fn varied_batches(base: i64, n: usize) -> Vec<Vec<u8>> {
    let mut offset = base;
    (0..n)
        .map(|i| {
            let records = 1 + (i * 7) % 12;
            let value = vec![b'v'; 10 + (i * 389) % 1_500];
            let ts = NOW_MS - 600_000 + (i as i64 * 1_000) - if i % 5 == 3 { 7_000 } else { 0 };
            let mut b = BatchBuilder::new(Compression::None)
                .base_offset(offset)
                .partition_leader_epoch(0);
            for r in 0..records {
                b.append(ts + r as i64, Some(b"key"), Some(&value), &[])
                    .unwrap();
            }
            offset += records as i64;
            b.build().unwrap()
        })
        .collect()
}

/// Groups of 1, 2, ... 9 batches, then again: fetches of varied sizes.
fn grouped(batches: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = batches;
    let mut n = 1;
    while !rest.is_empty() {
        let take = n.min(rest.len());
        out.push(rest[..take].concat());
        rest = &rest[take..];
        n = n % 9 + 1;
    }
    out
}

fn index_files(dir: &Path) -> (Vec<u8>, Vec<u8>) {
    let read = |name: &str| read_file(&StdStorage, &dir.join(name)).unwrap().unwrap();
    (
        read("00000000000000000000.index"),
        read("00000000000000000000.timeindex"),
    )
}

/// Every offset-index entry names the last offset of the batch at its position (what `kafka-dump-log`
/// and `klog verify` check).
fn assert_entries_point_at_their_batches(dir: &Path, what: &str) {
    let log = std::fs::read(dir.join("00000000000000000000.log")).unwrap();
    let (index, _) = index_files(dir);
    assert!(index.len() >= 16, "{what}: expected several index entries");
    for entry in index.chunks(8) {
        let relative = i32::from_be_bytes(entry[0..4].try_into().unwrap()) as i64;
        let position = u32::from_be_bytes(entry[4..8].try_into().unwrap()) as usize;
        let batch = Batches::new(&log[position..]).next().unwrap().unwrap();
        let AnyBatch::V2(batch) = batch else {
            panic!("legacy batch")
        };
        assert_eq!(
            batch.last_offset(),
            relative,
            "{what}: index entry ({relative}, {position}) does not end its batch"
        );
    }
}

fn config() -> LogConfig {
    LogConfig {
        index_interval_bytes: 1_000,
        ..LogConfig::default()
    }
}

#[test]
fn a_follower_appending_whole_fetches_gets_the_indexes_of_one_batch_per_append() {
    let root = temp_dir("index-rule-follower");
    let batches = varied_batches(0, 300);
    let one_by_one = root.join("t-0");
    let log = open(&one_by_one, &config());
    for b in &batches {
        log.append_as_follower(b).unwrap();
    }
    log.close().unwrap();
    let fetched = root.join("t-1");
    let log = open(&fetched, &config());
    for set in grouped(&batches) {
        log.append_as_follower(&set).unwrap();
    }
    log.close().unwrap();
    assert_entries_point_at_their_batches(&one_by_one, "one by one");
    assert_entries_point_at_their_batches(&fetched, "whole fetches");
    let (index, time_index) = index_files(&one_by_one);
    let (fetched_index, fetched_time_index) = index_files(&fetched);
    assert_eq!(fetched_index, index, ".index");
    assert_eq!(fetched_time_index, time_index, ".timeindex");
}

#[test]
fn a_coordinator_append_of_several_batches_indexes_each_batch() {
    let root = temp_dir("index-rule-coordinator");
    let batches = varied_batches(0, 200);
    let one_by_one = root.join("t-0");
    let log = open(&one_by_one, &config());
    for b in &batches {
        log.append_as_leader_with_origin(&mut b.clone(), 0, AppendOrigin::Coordinator)
            .unwrap();
    }
    log.close().unwrap();
    let together = root.join("t-1");
    let log = open(&together, &config());
    for mut set in grouped(&batches) {
        log.append_as_leader_with_origin(&mut set, 0, AppendOrigin::Coordinator)
            .unwrap();
    }
    log.close().unwrap();
    assert_entries_point_at_their_batches(&together, "several per append");
    assert_eq!(index_files(&together), index_files(&one_by_one));
}

/// The active segment's indexes as appends leave them equal what recovery rebuilds from the `.log`
/// (the same rule applied by a different path).
#[test]
fn appended_indexes_equal_rebuilt_indexes() {
    let root = temp_dir("index-rule-rebuild");
    let dir = root.join("t-0");
    let log = open(&dir, &config());
    for set in grouped(&varied_batches(0, 150)) {
        log.append_as_follower(&set).unwrap();
    }
    log.close().unwrap();
    let appended = index_files(&dir);
    std::fs::remove_file(dir.join("00000000000000000000.index")).unwrap();
    std::fs::remove_file(dir.join("00000000000000000000.timeindex")).unwrap();
    let log = open(&dir, &config());
    log.close().unwrap();
    assert_eq!(index_files(&dir), appended);
}

/// Kafka's rule as a model over (last offset, size) of each batch: the counter of bytes since the last
/// entry starts at 0, and again at batch `restart` (a new `LogSegment` object after a restart).
fn model_entries(batches: &[(i64, u64)], interval: u64, restart: usize) -> Vec<(i32, u32)> {
    let (mut entries, mut since, mut position) = (Vec::new(), 0u64, 0u64);
    for (i, &(last_offset, size)) in batches.iter().enumerate() {
        if i == restart {
            since = 0;
        }
        if since > interval {
            entries.push((last_offset as i32, position as u32));
            since = 0;
        }
        since += size;
        position += size;
    }
    entries
}

/// After an unclean restart the active segment is recovered (its indexes rebuilt by the same rule), and
/// the next entry is placed as Kafka places it: counting from the restart, as for a new segment.
#[test]
fn after_recovery_the_next_entry_counts_from_the_restart() {
    let dir = temp_dir("index-rule-restart").join("t-0");
    let batches = varied_batches(0, 80);
    let log = open(&dir, &config());
    for b in &batches[..40] {
        log.append_as_follower(b).unwrap();
    }
    drop(log); // no close: the next open recovers the active segment from its `.log`
    let log = open(&dir, &config());
    for b in &batches[40..] {
        log.append_as_follower(b).unwrap();
    }
    log.close().unwrap();
    let shape: Vec<(i64, u64)> = batches
        .iter()
        .map(|b| match Batches::new(b).next().unwrap().unwrap() {
            AnyBatch::V2(v) => (v.last_offset(), v.size_in_bytes() as u64),
            AnyBatch::Legacy(_) => unreachable!("v2 batches"),
        })
        .collect();
    let expected = model_entries(&shape, config().index_interval_bytes as u64, 40);
    let (index, _) = index_files(&dir);
    let entries: Vec<(i32, u32)> = index
        .chunks(8)
        .map(|e| {
            (
                i32::from_be_bytes(e[0..4].try_into().unwrap()),
                u32::from_be_bytes(e[4..8].try_into().unwrap()),
            )
        })
        .collect();
    assert_eq!(entries, expected);
    assert_ne!(
        expected,
        model_entries(&shape, config().index_interval_bytes as u64, usize::MAX),
        "the restart moves an entry (else this test shows nothing)"
    );
}
