//! The cleaner's pass (`PartitionLog::clean`, `LogDir::clean`) on the partition of `cleaner_common`:
//! what it keeps, when tombstones and markers go, where a full map ends it, how it groups segments,
//! the checkpoint, the dry run, and what it leaves alone.

mod cleaner_common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cleaner_common::{
    config, expected_after_first_pass, fill, open, records, same_records, DELETE_RETENTION_MS, NOW,
};
use klog_log::cleaner::{read_cleaner_checkpoint, CleanOptions, CleanerConfig};
use klog_log::clock::ManualClock;
use klog_log::config::LogConfig;
use klog_log::io::{read_file, ReadOnlyStorage, SimStorage, Storage};
use klog_log::log_dir::LogDir;
use klog_log::partition_log::{OpenOptions, PartitionLog};
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
    let opts = CleanOptions {
        max_dirty_bytes: Some(1000),
        ..at(NOW)
    };
    let report = log.clean(&CleanerConfig::default(), &opts, None).unwrap();
    assert!(report.map_full, "{report:?}");
    let first = log.segment(0).unwrap();
    assert!(report.end_offset > 0);
    assert!(report.end_offset < *log.segment_base_offsets().last().unwrap());
    drop(first);
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
    let mut b = klog_log::format::BatchBuilder::new(klog_log::format::Compression::None);
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
