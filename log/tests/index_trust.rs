//! Indexes are derived and never trusted (ARCHITECTURE.md): an `.index` or `.timeindex` entry pointing at
//! the wrong bytes costs a longer walk, never a wrong answer, in a sealed segment and in the active one;
//! the open's sanity check finds damage at an index's ends and rebuilds the index from the `.log`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::config::LogConfig;
use klog_log::format::{AnyBatch, BatchBuilder, Batches, Compression};
use klog_log::io::{read_file, write_atomic, SimStorage, StdStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::segment::LogSegment;

const BASE_TS: i64 = 1_700_000_000_000;
const BATCHES: i64 = 120;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 8 << 10,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// `BATCHES` batches of 2 records each (offsets 2i, 2i + 1; timestamps growing) over several segments.
fn build(storage: &Arc<dyn Storage>, dir: &Path) {
    let (log, _) =
        PartitionLog::open(storage.clone(), dir, config(), OpenOptions::default()).unwrap();
    for i in 0..BATCHES {
        let mut b = BatchBuilder::new(Compression::None);
        for r in 0..2 {
            let value = format!("value {i} {r} {}", "x".repeat(40));
            b.append(BASE_TS + i * 10 + r, None, Some(value.as_bytes()), &[])
                .unwrap();
        }
        log.append_as_leader(&mut b.build().unwrap(), 0).unwrap();
    }
    log.close().unwrap();
}

fn clean_open(storage: &Arc<dyn Storage>, dir: &Path) -> (PartitionLog, Vec<i64>) {
    let options = OpenOptions {
        clean_shutdown: true,
        ..OpenOptions::default()
    };
    let (log, report) = PartitionLog::open(storage.clone(), dir, config(), options).unwrap();
    (log, report.rebuilt_indexes)
}

fn bases(storage: &Arc<dyn Storage>, dir: &Path) -> Vec<i64> {
    let mut v: Vec<i64> = storage
        .list(dir)
        .unwrap()
        .iter()
        .filter(|n| n.ends_with(".log"))
        .filter_map(|n| klog_log::segment::parse_base_offset(n))
        .collect();
    v.sort_unstable();
    v
}

/// Rewrites the `.index` of segment `base`, moving the positions of the entries `which` picks 7 bytes
/// into their batches.
fn shift_positions(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    base: i64,
    which: impl Fn(usize, usize) -> bool,
) {
    let path = LogSegment::index_path(dir, base);
    let mut bytes = read_file(storage.as_ref(), &path).unwrap().unwrap();
    let n = bytes.len() / 8;
    assert!(n >= 3, "segment {base} has {n} index entries");
    for i in 0..n {
        if which(i, n) {
            let p = i32::from_be_bytes(bytes[i * 8 + 4..i * 8 + 8].try_into().unwrap()) + 7;
            bytes[i * 8 + 4..i * 8 + 8].copy_from_slice(&p.to_be_bytes());
        }
    }
    write_atomic(storage.as_ref(), &path, &bytes).unwrap();
}

/// Every offset read on its own comes back in the batch that holds it.
fn assert_every_offset_reads(log: &PartitionLog) {
    for offset in 0..BATCHES * 2 {
        let read = log.read(offset, 1, None, true).unwrap();
        let first = Batches::new(read.records.as_slice())
            .next()
            .unwrap_or_else(|| panic!("offset {offset}: no batch"))
            .unwrap();
        assert_eq!(
            (first.base_offset(), first.last_offset()),
            (offset / 2 * 2, offset / 2 * 2 + 1),
            "offset {offset}"
        );
    }
}

fn storages(name: &str) -> Vec<(Arc<dyn Storage>, PathBuf)> {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&tmp);
    vec![
        (Arc::new(StdStorage), tmp.join("t-0")),
        (
            Arc::new(SimStorage::new(3)),
            PathBuf::from(format!("/sim/{name}/t-0")),
        ),
    ]
}

/// Entries in the middle of a sealed segment's index (its ends intact, so the open keeps it) point inside
/// batches: every read still finds its batch, and the fallbacks are counted.
#[test]
fn a_sealed_index_entry_pointing_inside_a_batch_falls_back_to_a_walk() {
    for (storage, dir) in storages("index-trust-middle") {
        build(&storage, &dir);
        let first = bases(&storage, &dir)[0];
        shift_positions(&storage, &dir, first, |i, n| i > 0 && i + 1 < n);
        let (log, rebuilt) = clean_open(&storage, &dir);
        assert_eq!(
            rebuilt,
            Vec::<i64>::new(),
            "{}: the ends are intact",
            storage.name()
        );
        assert_every_offset_reads(&log);
        assert!(
            log.index_fallbacks() > 0,
            "{}: fallbacks counted",
            storage.name()
        );
        log.close().unwrap();
    }
}

/// Every entry of a sealed segment's index and of the active one's points inside a batch: the open's
/// sanity check rebuilds both (and says so), reads are right, the log end is found, and the rebuilt
/// files are the ones the log wrote.
#[test]
fn an_index_whose_entries_all_point_inside_batches_is_rebuilt_at_open() {
    for (storage, dir) in storages("index-trust-all") {
        build(&storage, &dir);
        let all = bases(&storage, &dir);
        let (first, active) = (all[0], *all.last().unwrap());
        let originals: Vec<Vec<u8>> = [first, active]
            .iter()
            .map(|&b| {
                read_file(storage.as_ref(), &LogSegment::index_path(&dir, b))
                    .unwrap()
                    .unwrap()
            })
            .collect();
        for base in [first, active] {
            shift_positions(&storage, &dir, base, |_, _| true);
        }
        let (log, rebuilt) = clean_open(&storage, &dir);
        assert_eq!(rebuilt, vec![first, active], "{}", storage.name());
        assert_eq!(log.log_end_offset(), BATCHES * 2, "{}", storage.name());
        assert_every_offset_reads(&log);
        log.close().unwrap();
        for (base, original) in [first, active].iter().zip(&originals) {
            let now = read_file(storage.as_ref(), &LogSegment::index_path(&dir, *base))
                .unwrap()
                .unwrap();
            assert_eq!(
                &now,
                original,
                "{}: segment {base} rebuilt as written",
                storage.name()
            );
        }
    }
}

/// A reader's open (nothing written) of a directory whose active index is damaged finds the log end and
/// reads every offset.
#[test]
fn a_read_only_open_of_a_damaged_active_index_reads_everything() {
    for (storage, dir) in storages("index-trust-read-only") {
        build(&storage, &dir);
        let active = *bases(&storage, &dir).last().unwrap();
        shift_positions(&storage, &dir, active, |_, _| true);
        let damaged = read_file(storage.as_ref(), &LogSegment::index_path(&dir, active)).unwrap();
        let options = OpenOptions {
            clean_shutdown: true,
            ..OpenOptions::default()
        };
        let (log, _) =
            PartitionLog::open_read_only(storage.clone(), &dir, config(), options).unwrap();
        assert_eq!(log.log_end_offset(), BATCHES * 2, "{}", storage.name());
        assert_every_offset_reads(&log);
        drop(log);
        let after = read_file(storage.as_ref(), &LogSegment::index_path(&dir, active)).unwrap();
        assert_eq!(
            after,
            damaged,
            "{}: a reader changes nothing",
            storage.name()
        );
    }
}

/// A `.timeindex` entry in the middle of a sealed segment naming a later offset than its timestamp's
/// batch: the search for that timestamp still finds the first record at or after it.
#[test]
fn a_time_index_entry_naming_the_wrong_batch_falls_back_to_a_walk() {
    for (storage, dir) in storages("index-trust-time") {
        build(&storage, &dir);
        let first = bases(&storage, &dir)[0];
        let path = LogSegment::time_index_path(&dir, first);
        let mut bytes = read_file(storage.as_ref(), &path).unwrap().unwrap();
        let n = bytes.len() / 12;
        assert!(n >= 4, "{n} time index entries");
        // Entry 1 keeps its timestamp but names entry 2's offset (still in order, still in the segment):
        // a search for its timestamp would start past the record it wants.
        let later = bytes[2 * 12 + 8..3 * 12].to_vec();
        bytes[12 + 8..24].copy_from_slice(&later);
        let ts = i64::from_be_bytes(bytes[12..20].try_into().unwrap());
        write_atomic(storage.as_ref(), &path, &bytes).unwrap();
        let (log, _) = clean_open(&storage, &dir);
        let (found_ts, offset) = log.offset_for_timestamp(ts).unwrap().unwrap();
        let i = (ts - BASE_TS) / 10;
        assert_eq!(
            (found_ts, offset),
            (ts, i * 2 + (ts - BASE_TS) % 10),
            "{}",
            storage.name()
        );
        assert!(log.index_fallbacks() > 0, "{}", storage.name());
        // Every batch's first timestamp is found at its first offset.
        for i in 0..BATCHES {
            assert_eq!(
                log.offset_for_timestamp(BASE_TS + i * 10).unwrap(),
                Some((BASE_TS + i * 10, i * 2))
            );
        }
        log.close().unwrap();
    }
}

/// A truncation into a segment whose index is damaged cuts at the right batch.
#[test]
fn truncation_through_a_damaged_index_cuts_at_the_batch() {
    for (storage, dir) in storages("index-trust-truncate") {
        build(&storage, &dir);
        let active = *bases(&storage, &dir).last().unwrap();
        shift_positions(&storage, &dir, active, |i, n| i > 0 && i + 1 < n);
        let (log, _) = clean_open(&storage, &dir);
        let cut = active + 10;
        log.truncate_to(cut).unwrap();
        assert_eq!(log.log_end_offset(), cut, "{}", storage.name());
        let read = log.read(active, 1 << 20, None, true).unwrap();
        let lasts: Vec<i64> = Batches::new(read.records.as_slice())
            .map(|b| match b.unwrap() {
                AnyBatch::V2(b) => b.last_offset(),
                AnyBatch::Legacy(_) => unreachable!(),
            })
            .collect();
        assert_eq!(lasts.last(), Some(&(cut - 1)), "{}", storage.name());
        log.close().unwrap();
    }
}
