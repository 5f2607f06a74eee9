//! What a read by offset costs in I/O: the `.log` reads (`pread`s) of `PartitionLog::read` of one batch,
//! counted through a [`CountingStorage`] that wraps the real one.
//!
//! A read by offset finds the batch through the index. Kafka's `translateOffset` starts at the last entry
//! at or below the offset, which for an offset inside a batch names the batch before (entries carry a
//! batch's last offset), and reads that batch's header and then the next one's. Where every batch is
//! indexed, klog reads the header at the entry after the offset first, the batch holding it: one header,
//! then the batch (`segment/lookup.rs`). Up to the log end there is no second lookup: the bound is past
//! every batch of the segment. A sealed segment that is already memory-mapped (its first read maps it)
//! is read through the map, headers included: no `pread` at all.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Batches, Compression};
use klog_log::io::{CountingStorage, IoOp, SimStorage, StdStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};

const BATCHES: i64 = 400;
const RECORDS: i64 = 4;

/// Segments of about 25 batches; `index.interval.bytes` of 1 puts an index entry at every batch but a
/// segment's first, so a lookup walks one header.
fn config() -> LogConfig {
    LogConfig::from_pairs(["segment.bytes=16384", "index.interval.bytes=1"]).unwrap()
}

fn fill(storage: &Arc<CountingStorage>, dir: &Path) -> PartitionLog {
    let dyn_storage: Arc<dyn Storage> = storage.clone();
    let (log, _) = PartitionLog::open(dyn_storage, dir, config(), OpenOptions::default()).unwrap();
    for i in 0..BATCHES {
        let mut b = BatchBuilder::new(Compression::None);
        for r in 0..RECORDS {
            b.append(
                1_700_000_000_000 + i,
                None,
                Some(format!("value {i} {r} {}", "x".repeat(100)).as_bytes()),
                &[],
            )
            .unwrap();
        }
        log.append_as_leader(&mut b.build().unwrap(), 0).unwrap();
    }
    log.update_high_watermark(log.log_end_offset());
    assert!(log.segment_base_offsets().len() >= 10);
    log
}

/// Reads one batch at `offset` (an offset inside it) up to the log end; returns the `.log` reads it took.
fn reads_of_one_read(log: &PartitionLog, storage: &CountingStorage, offset: i64) -> u64 {
    let before = storage.count(IoOp::Read, "log");
    let info = log.read(offset, 1, None, true).unwrap();
    let batch = Batches::new(info.records.as_slice())
        .next()
        .unwrap()
        .unwrap();
    assert!(batch.base_offset() <= offset && offset <= batch.last_offset());
    storage.count(IoOp::Read, "log") - before
}

/// Batches in the middle of sealed segments, and in the active one (not the segments' first batches,
/// which have no index entry).
fn offsets(log: &PartitionLog) -> Vec<i64> {
    let bases = log.segment_base_offsets();
    bases
        .iter()
        .map(|b| b + 3 * RECORDS + 2)
        .filter(|o| *o < log.log_end_offset())
        .collect()
}

#[test]
fn a_read_by_offset_inside_a_batch_reads_one_header_and_the_batch() {
    let storage = Arc::new(CountingStorage::new(Arc::new(SimStorage::new(5))));
    let log = fill(&storage, &PathBuf::from("/sim/read-io/t-0"));
    for offset in offsets(&log) {
        assert_eq!(
            reads_of_one_read(&log, &storage, offset),
            2,
            "reads of .log files for a read at offset {offset}"
        );
    }
}

#[test]
fn a_read_from_a_mapped_sealed_segment_needs_no_pread() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("read-io-t-0");
    let _ = std::fs::remove_dir_all(&dir);
    let storage = Arc::new(CountingStorage::new(Arc::new(StdStorage)));
    let log = fill(&storage, &dir);
    let sealed: Vec<i64> = offsets(&log)
        .into_iter()
        .filter(|o| log.segment_base_offsets().last().is_some_and(|a| o < a))
        .collect();
    for &offset in &sealed {
        reads_of_one_read(&log, &storage, offset); // maps the segment
    }
    for &offset in &sealed {
        assert_eq!(
            reads_of_one_read(&log, &storage, offset),
            0,
            "preads for a read at offset {offset} of a mapped sealed segment"
        );
    }
    log.close().unwrap();
    drop(log);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Reads bounded inside a segment (a high watermark, a last stable offset) end at the last whole batch
/// below the bound, whether the headers come from the map or from `pread`s.
#[test]
fn a_bound_inside_a_segment_ends_the_read_at_the_batch_below_it() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("read-io-bound-t-0");
    let _ = std::fs::remove_dir_all(&dir);
    let std_storage = Arc::new(CountingStorage::new(Arc::new(StdStorage)));
    let sim_storage = Arc::new(CountingStorage::new(Arc::new(SimStorage::new(6))));
    let on_std = fill(&std_storage, &dir);
    let on_sim = fill(&sim_storage, &PathBuf::from("/sim/read-io/t-1"));
    for log in [&on_std, &on_sim] {
        let leo = log.log_end_offset();
        for pass in 0..2 {
            // The second pass reads sealed segments of the std log through their maps.
            for start in (0..leo).step_by(37) {
                let bound = (start + 1 + (start * 7) % 90).min(leo);
                let info = log.read(start, 1 << 20, Some(bound), false).unwrap();
                let mut last = None;
                for b in Batches::new(info.records.as_slice()) {
                    last = Some(b.unwrap().last_offset());
                }
                let ctx = format!("pass {pass}, read from {start} bounded at {bound}");
                match last {
                    // Whole batches, none reaching the bound.
                    Some(last) => {
                        assert!(last < bound, "{ctx}: a batch ends at {last}");
                        assert_eq!(info.next_offset, last + 1, "{ctx}");
                    }
                    // Nothing below the bound but the batch holding `start`, which reaches it.
                    None => assert_eq!(info.next_offset, start, "{ctx}"),
                }
            }
        }
    }
    on_std.close().unwrap();
    drop(on_std);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The `.log` reads of Kafka's walk for a read of one batch at `offset`: the headers from the batch of
/// the last index entry at or below `offset` (Kafka 4.x's rule: an entry before a batch once more than
/// `interval` bytes were appended since the last) to the batch holding it, then the batch.
fn kafka_walk_reads(batches: &[(i64, i64, u64)], bases: &[i64], interval: u64, offset: i64) -> u64 {
    let segment = *bases.iter().rev().find(|b| **b <= offset).unwrap();
    let mut since = 0u64;
    let mut start = None;
    let mut walked = 0;
    for (base, last, size) in batches.iter().filter(|(base, ..)| *base >= segment) {
        if bases.iter().any(|b| b > &segment && b <= base) {
            break;
        }
        if since > interval {
            since = 0;
            if *last <= offset {
                start = Some(*base); // a later entry at or below the offset
                walked = 0;
            }
        }
        since += size;
        if start.is_none() && walked == 0 {
            start = Some(segment);
        }
        walked += 1;
        if *last >= offset {
            return walked + 1;
        }
    }
    unreachable!("offset {offset} is in the log")
}

/// Where index entries skip batches, the batch after the offset's entry is often not the one holding
/// it: the guess is learned per segment and stops, so a read costs no more than Kafka's walk but for
/// a few guesses while it learns.
#[test]
fn where_entries_skip_batches_reads_cost_at_most_kafkas_walk_and_a_few_guesses() {
    // About 540-byte batches: an entry every other batch (1,080 > 1,000 bytes since the last).
    let config =
        || LogConfig::from_pairs(["segment.bytes=16384", "index.interval.bytes=1000"]).unwrap();
    let storage = Arc::new(CountingStorage::new(Arc::new(SimStorage::new(9))));
    let dyn_storage: Arc<dyn Storage> = storage.clone();
    let dir = PathBuf::from("/sim/read-io/t-2");
    let (log, _) = PartitionLog::open(dyn_storage, &dir, config(), OpenOptions::default()).unwrap();
    let mut batches = Vec::new();
    for i in 0..BATCHES {
        let mut b = BatchBuilder::new(Compression::None);
        for r in 0..RECORDS {
            let value = format!("value {i} {r} {}", "x".repeat(100));
            b.append(1_700_000_000_000 + i, None, Some(value.as_bytes()), &[])
                .unwrap();
        }
        let bytes = b.build().unwrap();
        let size = bytes.len() as u64;
        log.append_as_leader(&mut bytes.clone(), 0).unwrap();
        batches.push((i * RECORDS, i * RECORDS + RECORDS - 1, size));
    }
    let bases = log.segment_base_offsets();
    let (mut klog, mut kafka) = (0, 0);
    for offset in 1..log.log_end_offset() {
        klog += reads_of_one_read(&log, &storage, offset);
        kafka += kafka_walk_reads(&batches, &bases, 1000, offset);
    }
    let guesses_while_learning = 2 * bases.len() as u64;
    assert!(
        klog <= kafka + guesses_while_learning,
        "{klog} reads of .log files against Kafka's walk's {kafka}"
    );
}
