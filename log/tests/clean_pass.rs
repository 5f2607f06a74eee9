//! The cleaner's pass (`PartitionLog::clean`, `LogDir::clean`) on the partition of `cleaner_common`:
//! what it keeps, when tombstones and markers go, where a full map ends it, how it groups segments,
//! the checkpoint, the dry run, and what it leaves alone.

mod cleaner_common;
#[path = "../../tests/common/skip.rs"]
mod skip;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cleaner_common::{
    config, expected_after_first_pass, fill, open, records, same_records, DELETE_RETENTION_MS, NOW,
};
use klog_log::cleaner::{read_cleaner_checkpoint, CleanOptions, CleanerConfig};
use klog_log::clock::ManualClock;
use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression};
use klog_log::io::{read_file, ReadOnlyStorage, SimStorage, StdStorage, Storage};
use klog_log::log_dir::LogDir;
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::segment::LogSegment;
use klog_log::Error;

fn dir() -> PathBuf {
    PathBuf::from("/logs/compacted-0")
}

fn filled() -> (Arc<dyn Storage>, PartitionLog) {
    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(1));
    let log = open(storage.clone(), &dir(), config(), OpenOptions::default()).unwrap();
    fill(&log);
    (storage, log)
}

fn at(now_ms: i64) -> CleanOptions {
    CleanOptions {
        now_ms,
        ..CleanOptions::default()
    }
}

/// Every file of `dir` with its bytes.
fn files(storage: &dyn Storage, dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut names = storage.list(dir).unwrap();
    names.sort();
    names
        .into_iter()
        .filter(|n| n != ".lock")
        .map(|n| {
            let bytes = read_file(storage, &dir.join(&n))
                .unwrap()
                .unwrap_or_default();
            (n, bytes)
        })
        .collect()
}

#[test]
fn a_pass_keeps_the_latest_record_of_each_key_and_drops_aborted_data() {
    let (_storage, log) = filled();
    let before = records(&log);
    let report = log
        .clean(&CleanerConfig::default(), &at(NOW), None)
        .unwrap();
    assert!(report.cleaned, "{report:?}");
    assert!(!report.map_full);
    let active = *log.segment_base_offsets().last().unwrap();
    assert_eq!(
        report.end_offset, active,
        "everything below the active segment is cleaned"
    );
    assert_eq!(report.range.first_uncleanable_offset, active);
    let after = records(&log);
    let expected = expected_after_first_pass(&before, report.end_offset);
    assert!(
        same_records(&after, &expected),
        "after: {after:?}\nexpected: {expected:?}"
    );
    assert!(after.len() < before.len());
    assert!(
        after.values().all(|r| r.producer_id != 7 || r.control),
        "no record of the aborted transactions is left"
    );
    assert!(report.bytes_after < report.bytes_before);
    assert_eq!(report.bytes_after, log.size_in_bytes());
}

#[test]
fn tombstones_stay_until_the_delete_horizon_then_go() {
    let (_storage, log) = filled();
    let cleaner = CleanerConfig::default();
    log.clean(&cleaner, &at(NOW), None).unwrap();
    let tombstones = |log: &PartitionLog| {
        let end = *log.segment_base_offsets().last().unwrap();
        records(log)
            .into_iter()
            .filter(|(o, r)| !r.control && r.value.is_none() && *o < end)
            .map(|(o, r)| (o, r.delete_horizon_ms))
            .collect::<Vec<_>>()
    };
    let first = tombstones(&log);
    assert!(
        !first.is_empty(),
        "the latest record of a key is a tombstone: kept"
    );
    let horizon = NOW + DELETE_RETENTION_MS;
    assert!(
        first.iter().all(|(_, h)| *h == Some(horizon)),
        "a kept tombstone's batch carries the horizon now + delete.retention.ms: {first:?}"
    );
    // Before the horizon a second pass keeps them; at it, they go.
    log.clean(&cleaner, &at(horizon - 1), None).unwrap();
    assert_eq!(tombstones(&log), first);
    log.clean(&cleaner, &at(horizon), None).unwrap();
    assert_eq!(
        tombstones(&log),
        vec![],
        "tombstones past their horizon are removed"
    );
}

#[test]
fn abort_markers_outlive_their_data_then_go_after_the_horizon() {
    let (_storage, log) = filled();
    let cleaner = CleanerConfig::default();
    let aborts = |log: &PartitionLog| {
        let end = *log.segment_base_offsets().last().unwrap();
        records(log)
            .into_iter()
            .filter(|(o, r)| *o < end && r.control && r.key.as_deref() == Some(&[0, 0, 0, 0][..]))
            .count()
    };
    let txn_entries = |log: &PartitionLog| -> usize {
        log.segment_base_offsets()
            .into_iter()
            .map(|b| log.segment(b).unwrap().collect_aborted(0, i64::MAX).0.len())
            .sum()
    };
    assert_eq!(aborts(&log), 4);
    assert_eq!(txn_entries(&log), 4);
    log.clean(&cleaner, &at(NOW), None).unwrap();
    assert_eq!(
        aborts(&log),
        4,
        "markers stay while their data was seen this pass"
    );
    assert_eq!(
        txn_entries(&log),
        4,
        "their AbortedTxn entries are copied to the cleaned .txnindex"
    );
    // Producer 7's last data batch stays as an empty header (RETAIN_EMPTY), so its last transaction's
    // marker keeps seeing data; the three others are emptied transactions.
    log.clean(&cleaner, &at(NOW), None).unwrap();
    assert_eq!(
        aborts(&log),
        4,
        "a marker of an emptied transaction waits for its horizon"
    );
    assert_eq!(
        txn_entries(&log),
        1,
        "no .txnindex entry for an emptied transaction"
    );
    log.clean(&cleaner, &at(NOW + DELETE_RETENTION_MS), None)
        .unwrap();
    assert_eq!(aborts(&log), 1, "markers past their horizon are removed");
    assert_eq!(txn_entries(&log), 1);
}

#[test]
fn a_full_map_cleans_only_the_prefix_it_covers() {
    let (_storage, log) = filled();
    let before = records(&log);
    // 20 slots of 24 bytes (MD5 + offset): full at 18 distinct keys.
    let cleaner = CleanerConfig {
        dedupe_buffer_size: 20 * 24,
        ..CleanerConfig::default()
    };
    let report = log.clean(&cleaner, &at(NOW), None).unwrap();
    assert!(report.map_full, "{report:?}");
    assert_eq!(report.map_entries, 18);
    let active = *log.segment_base_offsets().last().unwrap();
    assert!(report.end_offset < active, "{report:?}");
    let cleaned_bases: Vec<i64> = report.groups.iter().flatten().copied().collect();
    assert!(cleaned_bases.iter().all(|&b| b < report.end_offset));
    let after = records(&log);
    let expected = expected_after_first_pass(&before, report.end_offset);
    assert!(
        same_records(&after, &expected),
        "after: {after:?}\nexpected: {expected:?}"
    );
    let from_end = |m: &BTreeMap<i64, cleaner_common::Rec>| -> BTreeMap<i64, cleaner_common::Rec> {
        m.range(report.end_offset..)
            .map(|(o, r)| (*o, r.clone()))
            .collect()
    };
    assert!(
        same_records(&from_end(&before), &from_end(&after)),
        "every record from the end of the map on is kept"
    );
}

#[test]
fn max_dirty_bytes_bounds_a_pass_like_a_full_map() {
    let (_storage, log) = filled();
    // (last offset, size) of every batch, in log order.
    let mut batches = Vec::new();
    for base in log.segment_base_offsets() {
        let seg = log.segment(base).unwrap();
        let bytes = seg.read_bytes(0, seg.size() as usize).unwrap();
        for b in klog_log::format::Batches::new(&bytes) {
            let b = b.unwrap();
            batches.push((b.last_offset(), b.size_in_bytes() as u64));
        }
    }
    // The batches a 1000-byte budget takes: whole ones, while they fit.
    let mut used = 0;
    let taken = batches
        .iter()
        .take_while(|(_, size)| {
            let fits = used + size <= 1000;
            used += size;
            fits
        })
        .count();
    let opts = CleanOptions {
        max_dirty_bytes: Some(1000),
        ..at(NOW)
    };
    let report = log.clean(&CleanerConfig::default(), &opts, None).unwrap();
    assert!(report.map_full, "{report:?}");
    assert_eq!(report.end_offset, batches[taken - 1].0 + 1, "{report:?}");
    assert!(report.end_offset < *log.segment_base_offsets().last().unwrap());
}

#[test]
fn segments_are_grouped_up_to_segment_bytes() {
    let (storage, log) = filled();
    let bases = log.segment_base_offsets();
    log.close().unwrap();
    let mut bigger = config();
    bigger.set("segment.bytes", "2000").unwrap();
    let log = open(storage, &dir(), bigger, OpenOptions::default()).unwrap();
    log.update_high_watermark(log.log_end_offset());
    let sizes: BTreeMap<i64, u64> = bases
        .iter()
        .map(|&b| (b, log.segment(b).unwrap().size()))
        .collect();
    let report = log
        .clean(&CleanerConfig::default(), &at(NOW), None)
        .unwrap();
    assert!(
        report.groups.len() > 1 && report.groups.iter().any(|g| g.len() > 1),
        "{report:?}"
    );
    for group in &report.groups {
        let total: u64 = group.iter().map(|b| sizes[b]).sum();
        assert!(
            total <= 2000 || group.len() == 1,
            "{group:?}: {total} bytes"
        );
    }
    let mut expected: Vec<i64> = report.groups.iter().map(|g| g[0]).collect();
    expected.push(*bases.last().unwrap());
    assert_eq!(
        log.segment_base_offsets(),
        expected,
        "one segment per group, then the active one"
    );
    assert_eq!(report.segments_after, expected.len());
}

#[test]
fn the_log_dir_writes_the_cleaner_checkpoint_and_a_second_pass_starts_there() {
    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(2));
    let root = Path::new("/logs");
    let mut log_dir = LogDir::open(storage.clone(), root).unwrap();
    let clock = Arc::new(ManualClock::new(NOW));
    let (log, _) = log_dir
        .open_partition_with_clock("compacted-0", config(), clock)
        .unwrap();
    fill(&log);
    let reports = log_dir
        .clean(&[&log], &CleanerConfig::default(), &at(NOW))
        .unwrap();
    let end = reports[0].end_offset;
    assert!(reports[0].cleaned);
    let checkpoint = read_cleaner_checkpoint(storage.as_ref(), root).unwrap();
    assert_eq!(checkpoint.get(&("compacted".to_owned(), 0)), Some(&end));
    // Nothing new is dirty: the next pass is not cleanable and says why.
    let again = log_dir
        .clean(&[&log], &CleanerConfig::default(), &at(NOW))
        .unwrap();
    assert_eq!(again[0].range.first_dirty_offset, end);
    assert!(!again[0].cleaned);
    assert!(again[0].skipped.is_some());
}

#[test]
fn a_dry_run_writes_nothing_and_reports_what_a_pass_would_do() {
    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(3));
    let root = Path::new("/logs");
    let mut log_dir = LogDir::open(storage.clone(), root).unwrap();
    let clock = Arc::new(ManualClock::new(NOW));
    let (log, _) = log_dir
        .open_partition_with_clock("compacted-0", config(), clock)
        .unwrap();
    fill(&log);
    let (root_before, dir_before) = (
        files(storage.as_ref(), root),
        files(storage.as_ref(), &dir()),
    );
    let records_before = records(&log);
    let dry = CleanOptions {
        dry_run: true,
        ..at(NOW)
    };
    let reports = log_dir
        .clean(&[&log], &CleanerConfig::default(), &dry)
        .unwrap();
    assert_eq!(files(storage.as_ref(), root), root_before);
    assert_eq!(
        files(storage.as_ref(), &dir()),
        dir_before,
        "not even .cleaned files"
    );
    assert_eq!(records(&log), records_before);
    let real = log_dir
        .clean(&[&log], &CleanerConfig::default(), &at(NOW))
        .unwrap();
    assert_eq!(reports[0].end_offset, real[0].end_offset);
    assert_eq!(reports[0].groups, real[0].groups);
    assert_eq!(reports[0].stats, real[0].stats);
    assert_eq!(reports[0].bytes_after, real[0].bytes_after);
    assert_eq!(reports[0].segments_after, real[0].segments_after);
}

#[test]
fn a_cleaned_log_reopens_to_the_same_records_and_its_active_segment_is_untouched() {
    let (storage, log) = filled();
    let active = *log.segment_base_offsets().last().unwrap();
    let active_bytes = {
        let seg = log.segment(active).unwrap();
        seg.read_bytes(0, seg.size() as usize).unwrap()
    };
    let old_first = log.segment(0).unwrap();
    let old_first_bytes = old_first.read_bytes(0, old_first.size() as usize).unwrap();
    log.clean(&CleanerConfig::default(), &at(NOW), None)
        .unwrap();
    let seg = log.segment(active).unwrap();
    assert_eq!(
        seg.read_bytes(0, seg.size() as usize).unwrap(),
        active_bytes
    );
    // A reader holding a replaced segment still reads it.
    assert_eq!(
        old_first.read_bytes(0, old_first.size() as usize).unwrap(),
        old_first_bytes
    );
    let cleaned = records(&log);
    let names = storage.list(&dir()).unwrap();
    assert!(
        names
            .iter()
            .all(|n| !n.ends_with(".cleaned") && !n.ends_with(".swap") && !n.ends_with(".deleted")),
        "{names:?}"
    );
    // Appends go on after a pass.
    let leo = log.log_end_offset();
    let mut b = BatchBuilder::new(Compression::None);
    b.append(NOW, Some(b"k0"), Some(b"after"), &[]).unwrap();
    log.append_as_leader(&mut b.build().unwrap(), 0).unwrap();
    assert_eq!(log.log_end_offset(), leo + 1);
    log.close().unwrap();
    let reopened = open(storage, &dir(), config(), OpenOptions::default()).unwrap();
    let mut expected = cleaned;
    expected.extend(
        records(&reopened)
            .range(leo..)
            .map(|(o, r)| (*o, r.clone())),
    );
    assert_eq!(records(&reopened), expected);
    assert_eq!(reopened.log_end_offset(), leo + 1);
}

#[test]
fn a_read_only_log_is_refused_and_a_delete_policy_log_skipped() {
    let (storage, log) = filled();
    log.close().unwrap();
    let view: Arc<dyn Storage> = Arc::new(ReadOnlyStorage::new(storage.clone()));
    let (reader, _) =
        PartitionLog::open_read_only(view, &dir(), config(), OpenOptions::default()).unwrap();
    let err = reader
        .clean(&CleanerConfig::default(), &at(NOW), None)
        .unwrap_err();
    assert!(matches!(err, Error::ReadOnly { .. }), "{err}");
    // A dry run writes nothing: a reader's open may run one (given the leader's high watermark).
    reader.update_high_watermark(reader.log_end_offset());
    let dry = CleanOptions {
        dry_run: true,
        ..at(NOW)
    };
    let report = reader.clean(&CleanerConfig::default(), &dry, None).unwrap();
    assert!(
        report.cleaned && report.bytes_after < report.bytes_before,
        "{report:?}"
    );
    let log = open(
        storage,
        &dir(),
        LogConfig::default(),
        OpenOptions::default(),
    )
    .unwrap();
    let report = log
        .clean(&CleanerConfig::default(), &at(NOW), None)
        .unwrap();
    assert!(!report.cleaned);
    assert_eq!(
        report.skipped.as_deref(),
        Some("cleanup.policy has no compact")
    );
}

#[test]
fn appends_go_on_into_the_active_segment_while_a_pass_runs() {
    let (_storage, log) = filled();
    let before = records(&log);
    let leo = log.log_end_offset();
    let report = std::thread::scope(|s| {
        let appender = s.spawn(|| {
            for i in 0..100 {
                let mut b = BatchBuilder::new(Compression::None);
                let key = format!("late{i}");
                b.append(NOW, Some(key.as_bytes()), Some(b"v"), &[])
                    .unwrap();
                log.append_as_leader(&mut b.build().unwrap(), 0).unwrap();
            }
        });
        let report = log.clean(&CleanerConfig::default(), &at(NOW), None);
        appender.join().unwrap();
        report.unwrap()
    });
    assert!(report.cleaned, "{report:?}");
    assert_eq!(log.log_end_offset(), leo + 100);
    let after = records(&log);
    let below: BTreeMap<i64, cleaner_common::Rec> =
        after.range(..leo).map(|(o, r)| (*o, r.clone())).collect();
    let expected = expected_after_first_pass(&before, report.end_offset);
    assert!(same_records(&below, &expected), "{below:?}");
    assert_eq!(
        after.range(leo..).count(),
        100,
        "every append is in the log"
    );
}

#[test]
fn a_reader_holding_a_replaced_segment_on_disk_keeps_reading_it() {
    let root = std::env::temp_dir().join(format!("klog-clean-pass-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let dir = root.join("compacted-0");
    let storage: Arc<dyn Storage> = Arc::new(StdStorage);
    let log = open(storage, &dir, config(), OpenOptions::default()).unwrap();
    fill(&log);
    let second = log.segment_base_offsets()[1];
    let old = log.segment(second).unwrap();
    let bytes = old.read_bytes(0, old.size() as usize).unwrap();
    let report = log
        .clean(&CleanerConfig::default(), &at(NOW), None)
        .unwrap();
    assert!(
        report
            .groups
            .iter()
            .any(|g| g[0] != second && g.contains(&second)),
        "{report:?}"
    );
    assert!(log.segment(second).is_none());
    assert!(
        !LogSegment::log_path(&dir, second).exists(),
        "its files are gone"
    );
    let slice = old.slice(0, old.size()).unwrap();
    assert_eq!(slice.as_slice(), &bytes[..]);
    let found = old.translate_offset(second, 0).unwrap().map(|p| p.position);
    assert_eq!(found, Some(0), "its index is still readable");
    log.close().unwrap();
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn the_log_dir_reports_every_log_in_order_and_resets_a_checkpoint_outside_the_log() {
    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(4));
    let root = Path::new("/logs");
    let mut log_dir = LogDir::open(storage.clone(), root).unwrap();
    let clock = Arc::new(ManualClock::new(NOW));
    let (compacted, _) = log_dir
        .open_partition_with_clock("compacted-0", config(), clock.clone())
        .unwrap();
    fill(&compacted);
    let (plain, _) = log_dir
        .open_partition_with_clock("plain-0", LogConfig::default(), clock)
        .unwrap();
    fill(&plain);
    // A checkpoint past the log end (a log truncated since): the pass starts at the log start, and the
    // entry is rewritten even when nothing is cleanable.
    let mut entries = BTreeMap::new();
    entries.insert(("compacted".to_owned(), 0), 1_000_000);
    klog_log::cleaner::write_cleaner_checkpoint(storage.as_ref(), root, &entries).unwrap();
    let reports = log_dir
        .clean(&[&plain, &compacted], &CleanerConfig::default(), &at(NOW))
        .unwrap();
    assert_eq!(reports.len(), 2);
    assert_eq!(
        reports[0].skipped.as_deref(),
        Some("cleanup.policy has no compact")
    );
    assert!(reports[1].range.force_checkpoint);
    assert_eq!(reports[1].range.first_dirty_offset, 0);
    assert!(reports[1].cleaned);
    let checkpoint = read_cleaner_checkpoint(storage.as_ref(), root).unwrap();
    assert_eq!(
        checkpoint.len(),
        1,
        "only compacted logs have an entry: {checkpoint:?}"
    );
    assert_eq!(
        checkpoint.get(&("compacted".to_owned(), 0)),
        Some(&reports[1].end_offset)
    );
}

/// The simulation, truncating the log once, when the pass creates its first `.cleaned` segment (after
/// it read the group, before it swaps it in): what a follower's truncation may do meanwhile.
#[derive(Debug)]
struct TruncateWhileCleaning {
    inner: SimStorage,
    log: std::sync::OnceLock<std::sync::Weak<PartitionLog>>,
    to: std::sync::atomic::AtomicI64,
    fired: std::sync::atomic::AtomicBool,
}

impl Storage for TruncateWhileCleaning {
    fn create(&self, path: &Path) -> std::io::Result<Arc<dyn klog_log::io::StorageFile>> {
        let cleaned = path.to_string_lossy().ends_with(".log.cleaned");
        if cleaned && !self.fired.swap(true, std::sync::atomic::Ordering::SeqCst) {
            if let Some(log) = self.log.get().and_then(std::sync::Weak::upgrade) {
                log.truncate_to(self.to.load(std::sync::atomic::Ordering::SeqCst))
                    .unwrap();
            }
        }
        self.inner.create(path)
    }
    fn open(&self, path: &Path) -> std::io::Result<Arc<dyn klog_log::io::StorageFile>> {
        self.inner.open(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        self.inner.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn name(&self) -> &'static str {
        "sim-truncating"
    }
    fn lock_dir(&self, dir: &Path) -> std::io::Result<Option<std::fs::File>> {
        self.inner.lock_dir(dir)
    }
}

#[test]
fn a_group_truncated_while_it_was_cleaned_is_not_swapped_in() {
    let storage = Arc::new(TruncateWhileCleaning {
        inner: SimStorage::new(5),
        log: std::sync::OnceLock::new(),
        to: std::sync::atomic::AtomicI64::new(0),
        fired: std::sync::atomic::AtomicBool::new(false),
    });
    let log = Arc::new(open(storage.clone(), &dir(), config(), OpenOptions::default()).unwrap());
    fill(&log);
    let before = records(&log);
    // Into the first group's second segment, at a batch boundary: it becomes the active segment and
    // every later one goes.
    let second = log.segment_base_offsets()[1];
    let to = {
        let seg = log.segment(second).unwrap();
        let bytes = seg.read_bytes(0, seg.size() as usize).unwrap();
        let first = klog_log::format::Batches::new(&bytes)
            .next()
            .unwrap()
            .unwrap();
        first.last_offset() + 1
    };
    storage.to.store(to, std::sync::atomic::Ordering::SeqCst);
    storage.log.set(Arc::downgrade(&log)).unwrap();
    let report = log
        .clean(&CleanerConfig::default(), &at(NOW), None)
        .unwrap();
    assert!(storage.fired.load(std::sync::atomic::Ordering::SeqCst));
    assert!(report.groups[0].contains(&second), "{report:?}");
    assert!(!report.cleaned, "{report:?}");
    assert_eq!(log.log_end_offset(), to);
    let after = records(&log);
    assert_eq!(
        after,
        before
            .range(..to)
            .map(|(o, r)| (*o, r.clone()))
            .collect::<BTreeMap<_, _>>(),
        "nothing the truncation removed comes back"
    );
    let names = storage.list(&dir()).unwrap();
    assert!(names.iter().all(|n| !n.ends_with(".cleaned")), "{names:?}");
}

#[test]
fn the_map_build_reads_from_the_index_entry_below_the_first_dirty_offset() {
    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(6));
    let mut sparse = config();
    sparse.set("index.interval.bytes", "4096").unwrap();
    let log = open(storage, &dir(), sparse, OpenOptions::default()).unwrap();
    let txn = |seq: i32, value: &[u8]| {
        let mut b = BatchBuilder::new(Compression::None)
            .producer(9, 0, seq)
            .transactional(true);
        b.append(NOW, Some(b"x"), Some(value), &[]).unwrap();
        b.build().unwrap()
    };
    let marker = |kind| {
        BatchBuilder::end_txn_marker(kind, 9, 0, 0, NOW)
            .unwrap()
            .build()
            .unwrap()
    };
    use klog_log::format::ControlRecordType::{Abort, Commit};
    use klog_log::validator::AppendOrigin::Coordinator;
    // Offsets 0-1: producer 9's aborted transaction, before the first dirty offset 2.
    log.append_as_leader(&mut txn(0, b"aborted"), 0).unwrap();
    log.append_as_leader_with_origin(&mut marker(Abort), 0, Coordinator)
        .unwrap();
    // 2: x = old; 3-4: producer 9 commits x = new.
    let mut b = BatchBuilder::new(Compression::None);
    b.append(NOW, Some(b"x"), Some(b"old"), &[]).unwrap();
    log.append_as_leader(&mut b.build().unwrap(), 0).unwrap();
    log.append_as_leader(&mut txn(1, b"new"), 0).unwrap();
    log.append_as_leader_with_origin(&mut marker(Commit), 0, Coordinator)
        .unwrap();
    log.roll().unwrap();
    log.update_high_watermark(log.log_end_offset());
    let report = log
        .clean(&CleanerConfig::default(), &at(NOW), Some(2))
        .unwrap();
    assert_eq!(report.range.first_dirty_offset, 2);
    let values: Vec<(i64, Option<Vec<u8>>)> = records(&log)
        .into_iter()
        .filter(|(_, r)| !r.control)
        .map(|(o, r)| (o, r.value))
        .collect();
    // Read from offset 0, the ABORT marker ends producer 9's aborted transaction, so its committed
    // batch at 3 is not taken for aborted: x's latest is 3, and x = old goes.
    assert_eq!(values, vec![(3, Some(b"new".to_vec()))]);
}

#[test]
fn a_pass_on_the_real_backends_keeps_what_it_keeps_on_the_simulation_and_reopens_so() {
    let (_sim, reference) = filled();
    let before = records(&reference);
    let report = reference
        .clean(&CleanerConfig::default(), &at(NOW), None)
        .unwrap();
    let expected = records(&reference);
    let mut backends: Vec<(&str, Arc<dyn Storage>)> = vec![("std", Arc::new(StdStorage))];
    match klog_log::io::open_backend(klog_log::io::IoBackend::Uring) {
        Ok(uring) => backends.push(("uring", uring)),
        Err(_) if std::env::var("KLOG_REQUIRE_URING").is_ok_and(|v| v == "1") => {
            panic!("KLOG_REQUIRE_URING=1 but the io_uring backend is unavailable")
        }
        Err(_) => skip::skip("the cleaner's uring run: io_uring is unavailable here"),
    }
    for (name, storage) in backends {
        let root =
            std::env::temp_dir().join(format!("klog-clean-backend-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("compacted-0");
        let log = open(storage.clone(), &dir, config(), OpenOptions::default()).unwrap();
        fill(&log);
        assert_eq!(records(&log), before, "{name}");
        let got = log
            .clean(&CleanerConfig::default(), &at(NOW), None)
            .unwrap();
        assert_eq!(got.groups, report.groups, "{name}");
        assert_eq!(got.bytes_after, report.bytes_after, "{name}");
        assert_eq!(records(&log), expected, "{name}");
        log.close().unwrap();
        drop(log);
        let reopened = open(storage, &dir, config(), OpenOptions::default()).unwrap();
        assert_eq!(records(&reopened), expected, "{name}: reopened");
        reopened.close().unwrap();
        std::fs::remove_dir_all(&root).unwrap();
    }
}
