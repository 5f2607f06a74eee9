//! The recovery report tells what recovery did to the disk: every cut and every deleted segment is listed,
//! whatever state the indexes were in (present, missing, corrupt), and the totals are the bytes that left
//! the `.log` files and the bytes checked and kept, measured here on the files themselves.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression};
use klog_log::io::{StdStorage, Storage};
use klog_log::log_dir::LogDir;
use klog_recovery::{LogLoader, RecoveryReport};

const PARTITION: &str = "r-0";

#[derive(Debug, Clone, Copy)]
enum Indexes {
    Present,
    Missing,
    Corrupt,
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 8_000,
        index_interval_bytes: 1_000,
        ..LogConfig::default()
    }
}

/// A partition of 60 batches of ~850 bytes in segments of 8,000 bytes, closed, then made to look like
/// a crash with no recovery point (every segment is rescanned).
fn build(root: &Path) -> PathBuf {
    let storage: Arc<dyn Storage> = Arc::new(StdStorage);
    let mut log_dir = LogDir::open(storage, root).unwrap();
    let (log, _) = log_dir.open_partition(PARTITION, config()).unwrap();
    for i in 0..60i64 {
        let mut b = BatchBuilder::new(Compression::None)
            .base_offset(i * 2)
            .partition_leader_epoch(0);
        for r in 0..2 {
            b.append(
                1_800_000_000_000 + i,
                Some(b"k"),
                Some(&[b'x' + r; 400]),
                &[],
            )
            .unwrap();
        }
        log.append_as_follower(&b.build().unwrap()).unwrap();
    }
    log_dir.close_partition(log).unwrap();
    log_dir.close().unwrap();
    let _ = std::fs::remove_file(root.join(".kafka_cleanshutdown"));
    std::fs::remove_file(root.join("recovery-point-offset-checkpoint")).unwrap();
    root.join(PARTITION)
}

/// The `.log` files of `dir`: base offset -> bytes.
fn log_sizes(dir: &Path) -> BTreeMap<i64, u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| {
            let base = p.file_stem().unwrap().to_str().unwrap().parse().unwrap();
            (base, std::fs::metadata(&p).unwrap().len())
        })
        .collect()
}

fn set_indexes(dir: &Path, state: Indexes) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if ext != "index" && ext != "timeindex" {
            continue;
        }
        match state {
            Indexes::Present => {}
            Indexes::Missing => std::fs::remove_file(&path).unwrap(),
            // A length no entry size divides: Kafka's sanity check fails.
            Indexes::Corrupt => std::fs::write(&path, [0xAB; 13]).unwrap(),
        }
    }
}

/// Position of the `n`th batch in a `.log`.
fn batch_position(log: &[u8], n: usize) -> usize {
    let mut pos = 0;
    for _ in 0..n {
        pos += i32::from_be_bytes(log[pos + 8..pos + 12].try_into().unwrap()) as usize + 12;
    }
    pos
}

/// Recovers `root` (its one partition) and closes it; the report.
fn recover(root: &Path) -> RecoveryReport {
    let storage: Arc<dyn Storage> = Arc::new(StdStorage);
    let loader = LogLoader::new(storage, config());
    let (mut log_dir, outcomes) = loader.load_dir(root, true).unwrap();
    let mut reports = Vec::new();
    for (_, outcome) in outcomes {
        let (log, report) = outcome.unwrap();
        log_dir.close_partition(log).unwrap();
        reports.push(report);
    }
    log_dir.close().unwrap();
    assert_eq!(reports.len(), 1);
    reports.remove(0)
}

/// A CRC failure in the second segment's third batch: that segment is cut there and every later
/// segment deleted. The report lists the cut and each deleted segment, and its totals are the files'.
fn corruption_in_the_second_segment(indexes: Indexes) {
    let root = temp_dir(&format!("report-{indexes:?}"));
    let dir = build(&root);
    let before = log_sizes(&dir);
    assert!(before.len() >= 5, "{before:?}");
    let second = *before.keys().nth(1).unwrap();
    let second_path = dir.join(format!("{second:020}.log"));
    let mut bytes = std::fs::read(&second_path).unwrap();
    let third = batch_position(&bytes, 2);
    bytes[third + 100] ^= 0xff;
    std::fs::write(&second_path, &bytes).unwrap();
    set_indexes(&dir, indexes);

    let report = recover(&root);
    let after = log_sizes(&dir);
    let what = format!("{indexes:?}: {report:#?}");
    let left_disk = before.values().sum::<u64>() - after.values().sum::<u64>();
    let reported: u64 = report.truncated.iter().map(|t| t.bytes).sum();
    assert_eq!(reported, left_disk, "{what}");
    assert_eq!(report.bytes_truncated, left_disk, "{what}");
    assert_eq!(
        report.bytes_validated,
        after.values().sum::<u64>(),
        "{what}: every kept byte was scanned"
    );

    let cut = &report.truncated[0];
    assert_eq!(
        (cut.segment, cut.position, cut.bytes),
        (second, third as u64, bytes.len() as u64 - third as u64),
        "{what}"
    );
    assert!(cut.reason.contains("crc"), "{what}");
    assert_eq!(cut.offset, report.log_end_offset, "{what}");
    let deleted: Vec<(i64, u64, i64)> = report.truncated[1..]
        .iter()
        .map(|t| (t.segment, t.bytes, t.offset))
        .collect();
    let expected: Vec<(i64, u64, i64)> = before
        .iter()
        .filter(|(b, _)| **b > second)
        .map(|(b, size)| (*b, *size, *b))
        .collect();
    assert_eq!(deleted, expected, "{what}: every later segment, whole");
    assert!(
        report.truncated[1..]
            .iter()
            .all(|t| t.position == 0 && t.reason.contains("deleted")),
        "{what}"
    );
    assert_eq!(
        after.keys().copied().collect::<Vec<_>>(),
        before.keys().take(2).copied().collect::<Vec<_>>()
    );
}

#[test]
fn the_report_lists_every_cut_with_indexes_present() {
    corruption_in_the_second_segment(Indexes::Present);
}

#[test]
fn the_report_lists_every_cut_with_indexes_missing() {
    corruption_in_the_second_segment(Indexes::Missing);
}

#[test]
fn the_report_lists_every_cut_with_indexes_corrupt() {
    corruption_in_the_second_segment(Indexes::Corrupt);
}

/// A torn tail in the last segment, with a clean shutdown marker but the indexes deleted (an operator
/// deleting them, or a copy without them): the rebuild cuts the torn bytes and says so.
#[test]
fn a_cut_made_while_rebuilding_indexes_after_a_clean_shutdown_is_reported() {
    let root = temp_dir("report-clean-rebuild");
    let dir = build(&root);
    let before = log_sizes(&dir);
    let (&last, &size) = before.iter().next_back().unwrap();
    let path = dir.join(format!("{last:020}.log"));
    let torn = size - 100;
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(torn).unwrap();
    drop(file);
    std::fs::write(root.join(".kafka_cleanshutdown"), b"").unwrap();
    set_indexes(&dir, Indexes::Missing);

    let report = recover(&root);
    let after = log_sizes(&dir);
    let left_disk = before.values().sum::<u64>() - 100 - after.values().sum::<u64>();
    assert!(left_disk > 0);
    assert_eq!(report.truncated.len(), 1, "{report:#?}");
    assert_eq!(report.truncated[0].segment, last);
    assert_eq!(report.truncated[0].bytes, left_disk, "{report:#?}");
    assert_eq!(report.truncated[0].reason, "torn write");
    assert_eq!(report.bytes_validated, after.values().sum::<u64>());
}

/// After a clean shutdown (nothing would be rescanned), every `.index` entry of every segment points 7
/// bytes inside its batch: recovery does not trust them, rebuilds each segment's indexes as they were
/// written and lists the segments in its report.
#[test]
fn indexes_pointing_inside_batches_are_rebuilt_after_a_clean_shutdown_and_reported() {
    let root = temp_dir("report-shifted-indexes");
    let dir = build(&root);
    std::fs::write(root.join(".kafka_cleanshutdown"), b"").unwrap();
    let bases: Vec<i64> = log_sizes(&dir).keys().copied().collect();
    let mut originals = Vec::new();
    for base in &bases {
        let path = dir.join(format!("{base:020}.index"));
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.len() >= 16, "segment {base} has index entries");
        let mut shifted = bytes.clone();
        for e in shifted.chunks_exact_mut(8) {
            let p = i32::from_be_bytes(e[4..8].try_into().unwrap()) + 7;
            e[4..8].copy_from_slice(&p.to_be_bytes());
        }
        std::fs::write(&path, &shifted).unwrap();
        originals.push((path, bytes));
    }
    let report = recover(&root);
    assert!(report.clean_shutdown, "{report:#?}");
    assert_eq!(report.log_end_offset, 120, "{report:#?}");
    assert_eq!(report.rebuilt_indexes, bases, "{report:#?}");
    assert!(report.truncated.is_empty(), "{report:#?}");
    for (path, bytes) in originals {
        assert_eq!(
            std::fs::read(&path).unwrap(),
            bytes,
            "{} rebuilt",
            path.display()
        );
    }
}

/// A corrupt producer snapshot above the first rescanned segment: recovery replays the batches instead,
/// deletes the snapshot and says so; `verify` then finds nothing wrong with the snapshots.
#[test]
fn a_corrupt_snapshot_of_an_unclean_directory_is_deleted_and_reported() {
    let root = temp_dir("report-corrupt-snapshot");
    let dir = build(&root);
    let last = *log_sizes(&dir).keys().last().unwrap();
    let snapshot = dir.join(format!("{last:020}.snapshot"));
    let mut bytes = std::fs::read(&snapshot).expect("a snapshot at the last roll");
    let n = bytes.len();
    bytes[n - 1] ^= 0xff;
    std::fs::write(&snapshot, bytes).unwrap();
    assert!(
        !klog_recovery::verify_partition(&StdStorage, &dir)
            .unwrap()
            .is_empty(),
        "verify sees the corrupt snapshot"
    );
    let report = recover(&root);
    assert!(
        report.snapshots_deleted.contains(&last),
        "{:?}",
        report.snapshots_deleted
    );
    assert!(!snapshot.exists(), "the corrupt snapshot survived recovery");
    assert_eq!(
        klog_recovery::verify_partition(&StdStorage, &dir).unwrap(),
        vec![]
    );
}
