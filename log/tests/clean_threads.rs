//! A pass on several threads writes what a pass on one writes, byte for byte: every file of the partition
//! directory and the cleaner checkpoint, and the same report, after a first pass, a second pass past the
//! delete horizon, a pass whose map fills and one bounded by `max_dirty_bytes` (the prefix cases), and a
//! pass that a corrupt batch stops (in the map build's range, and in the clean part only the rewrite reads).
//!
//! The partition has transactions that span groups (data in one group, its ABORT or COMMIT marker in a
//! later one), so a worker's group depends on the transaction state the groups before it left, which the
//! pass replays from their batch headers; and the map build's readers run ahead of its inserts.

mod cleaner_common;

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::Arc;

use cleaner_common::{config, fill, marker, DELETE_RETENTION_MS, NOW};
use klog_log::cleaner::{CleanOptions, CleanReport, CleanerConfig};
use klog_log::clock::ManualClock;
use klog_log::format::{BatchBuilder, Compression, ControlRecordType};
use klog_log::io::{read_file, SimStorage, Storage};
use klog_log::log_dir::LogDir;
use klog_log::partition_log::PartitionLog;
use klog_log::segment::LogSegment;

const ROOT: &str = "/logs";
const PARTITION: &str = "threads-0";

fn plain(key: &str, value: Option<&str>) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(NOW, Some(key.as_bytes()), value.map(str::as_bytes), &[])
        .unwrap();
    b.build().unwrap()
}

fn transactional(log: &PartitionLog, producer: i64, seq: i32, key: &str) {
    let mut b = BatchBuilder::new(Compression::None)
        .producer(producer, 0, seq)
        .transactional(true);
    b.append(NOW, Some(key.as_bytes()), Some(b"in a transaction"), &[])
        .unwrap();
    let mut bytes = b.build().unwrap();
    log.append_as_leader(&mut bytes, 0).unwrap();
}

/// A segment of its own group: one plain batch large enough that no two such segments fit in
/// `segment.bytes` (1200), then `rest`, then a roll.
fn segment(log: &PartitionLog, i: usize, rest: impl FnOnce(&PartitionLog)) {
    let value = format!("{i} {}", "p".repeat(650));
    log.append_as_leader(&mut plain(&format!("k{}", i % 3), Some(&value)), 0)
        .unwrap();
    rest(log);
    log.roll().unwrap();
}

/// Transactions open across group boundaries, then [`fill`]'s partition after them.
fn populate(log: &PartitionLog) {
    use ControlRecordType::{Abort, Commit};
    segment(log, 0, |l| {
        transactional(l, 17, 0, "a17");
        transactional(l, 18, 0, "c18");
    });
    segment(log, 1, |l| {
        marker(l, Abort, 17);
        transactional(l, 18, 1, "c18");
    });
    segment(log, 2, |l| {
        marker(l, Commit, 18);
        l.append_as_leader(&mut plain("k1", None), 0).unwrap();
        transactional(l, 19, 0, "a19");
    });
    segment(log, 3, |_| {});
    segment(log, 4, |l| marker(l, Abort, 19));
    fill(log);
}

/// A fresh copy of the partition (the same bytes every time) in its own simulated storage.
fn fresh() -> (SimStorage, LogDir, PartitionLog) {
    let sim = SimStorage::new(41);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let log_dir = LogDir::open(storage, Path::new(ROOT)).unwrap();
    let clock = Arc::new(ManualClock::new(NOW));
    let (log, _) = log_dir
        .open_partition_with_clock(PARTITION, config(), clock)
        .unwrap();
    populate(&log);
    (sim, log_dir, log)
}

fn opts(now_ms: i64, threads: usize) -> CleanOptions {
    CleanOptions {
        now_ms,
        force: true,
        threads: NonZeroUsize::new(threads),
        ..CleanOptions::default()
    }
}

/// Every file under the root (the checkpoint) and the partition directory, with its bytes.
fn files(sim: &SimStorage) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for dir in [Path::new(ROOT).to_owned(), Path::new(ROOT).join(PARTITION)] {
        for name in sim.list(&dir).unwrap() {
            let path = dir.join(&name);
            if name == ".lock" || name == PARTITION {
                continue;
            }
            let bytes = read_file(sim, &path).unwrap().unwrap_or_default();
            out.insert(path.display().to_string(), bytes);
        }
    }
    out
}

/// What a report says, for comparing the reports of two runs.
fn said(reports: &[CleanReport]) -> String {
    format!("{reports:?}")
}

/// Two passes (the second past the delete horizon, after more appends) with `threads`: the reports and the files after each.
fn two_passes(cleaner: &CleanerConfig, threads: usize) -> Vec<(String, BTreeMap<String, Vec<u8>>)> {
    let (sim, mut log_dir, log) = fresh();
    let mut out = Vec::new();
    for (pass, now) in [NOW, NOW + 2 * DELETE_RETENTION_MS].into_iter().enumerate() {
        if pass == 1 {
            // Something dirty for the second pass, which rewrites the whole log again.
            for i in 0..3 {
                segment(&log, 10 + i, |_| {});
            }
            log.update_high_watermark(log.log_end_offset());
        }
        let reports = log_dir
            .clean(&[&log], cleaner, &opts(now, threads))
            .unwrap();
        out.push((said(&reports), files(&sim)));
    }
    out
}

fn assert_same(
    one: &[(String, BTreeMap<String, Vec<u8>>)],
    many: &[(String, BTreeMap<String, Vec<u8>>)],
) {
    assert_eq!(one.len(), many.len());
    for (pass, ((r1, f1), (rn, fnn))) in one.iter().zip(many).enumerate() {
        assert_eq!(r1, rn, "pass {pass}: the reports differ");
        assert_eq!(
            f1.keys().collect::<Vec<_>>(),
            fnn.keys().collect::<Vec<_>>(),
            "pass {pass}: the file names differ"
        );
        for (name, bytes) in f1 {
            assert!(&fnn[name] == bytes, "pass {pass}: {name} differs");
        }
    }
}

#[test]
fn two_and_three_threads_write_the_bytes_of_one() {
    let cleaner = CleanerConfig::default();
    let one = two_passes(&cleaner, 1);
    // The first pass cleaned the whole log in many groups, the transactions spanning some of them.
    let (sim, _dir, log) = fresh();
    let bases = log.segment_base_offsets();
    drop((sim, log));
    assert!(bases.len() > 12, "{bases:?}");
    assert!(one[0].0.contains("cleaned: true"), "{}", one[0].0);
    let groups = one[0].0.matches("], [").count() + 1;
    assert!(groups >= 6, "{}", one[0].0);
    // The second pass removed what the delete horizon let go: its files differ from the first's.
    assert!(one[0].1 != one[1].1, "the second pass changed nothing");
    assert!(one[1].0.contains("tombstones_removed: 1"), "{}", one[1].0);
    assert_same(&one, &two_passes(&cleaner, 2));
    assert_same(&one, &two_passes(&cleaner, 3));
}

#[test]
fn a_pass_whose_map_fills_cleans_the_same_prefix_on_two_threads() {
    // 20 slots of 24 bytes: full at 18 distinct keys, before the end of the dirty range.
    let cleaner = CleanerConfig {
        dedupe_buffer_size: 20 * 24,
        ..CleanerConfig::default()
    };
    let one = two_passes(&cleaner, 1);
    assert!(one[0].0.contains("map_full: true"), "{}", one[0].0);
    assert_same(&one, &two_passes(&cleaner, 2));
}

#[test]
fn a_pass_bounded_by_max_dirty_bytes_cleans_the_same_prefix_on_two_threads() {
    let run = |threads| {
        let (sim, _dir, log) = fresh();
        let bounded = CleanOptions {
            max_dirty_bytes: Some(3000),
            ..opts(NOW, threads)
        };
        let report = log
            .clean(&CleanerConfig::default(), &bounded, None)
            .unwrap();
        (said(&[report]), files(&sim))
    };
    let one = run(1);
    assert!(one.0.contains("map_full: true"), "{}", one.0);
    assert_same(&[one], &[run(2)]);
}

/// A pass stopped by a corrupt batch in the segment at `corrupt` (of the sealed ones), the pass
/// starting at the checkpoint `from` (a segment index; `None`: the log start): the error, and every
/// file after it.
fn stopped_pass(
    threads: usize,
    corrupt: usize,
    from: Option<usize>,
) -> (String, BTreeMap<String, Vec<u8>>) {
    let (sim, _dir, log) = fresh();
    let bases = log.segment_base_offsets();
    let path = LogSegment::log_path(&Path::new(ROOT).join(PARTITION), bases[corrupt]);
    let mut bytes = sim.live_bytes(&path).unwrap();
    let at = bytes.len() - 5;
    bytes[at] ^= 0xff;
    sim.corrupt(&path, bytes).unwrap();
    let err = log
        .clean(
            &CleanerConfig::default(),
            &opts(NOW, threads),
            from.map(|i| bases[i]),
        )
        .unwrap_err();
    (err.to_string(), files(&sim))
}

#[test]
fn a_pass_a_corrupt_batch_stops_leaves_the_files_one_thread_leaves() {
    // In the dirty range (the map build stops), then in the clean part before the checkpoint (only the
    // rewrite reads it: the groups before it are swapped in, the rest left as they were).
    for (corrupt, from) in [(8, None), (6, Some(12))] {
        let (error, files_one) = stopped_pass(1, corrupt, from);
        assert!(error.contains("CRC") || error.contains("crc"), "{error}");
        assert!(
            files_one.keys().all(|n| !n.ends_with(".cleaned")),
            "{:?}",
            files_one.keys()
        );
        let (error_two, files_two) = stopped_pass(2, corrupt, from);
        assert_eq!(error, error_two);
        assert_eq!(
            files_one.keys().collect::<Vec<_>>(),
            files_two.keys().collect::<Vec<_>>()
        );
        for (name, bytes) in &files_one {
            assert!(&files_two[name] == bytes, "{name} differs");
        }
    }
}
