//! What an unclean open syncs, counted through the simulated storage, and that what it leaves unsynced
//! is safe at a crash.
//!
//! Why an unclean open that cuts nothing needs no sync at all, whatever the number of segments it
//! rescans: it changes no byte of a `.log`, and everything else it writes is derived (the `.index`,
//! `.timeindex` and `.txnindex` it rebuilds). The recovery point stays where the checkpoint had it, so a
//! crash before the next flush sends the next open through the same rescan, which rebuilds those indexes
//! again from the `.log` whatever reached the disk of them. The first flush after the open syncs every
//! rebuilt index (the segments are sealed with their indexes marked unsynced) before the recovery point
//! can pass them. Kafka's `LogLoader` syncs nothing while it recovers either (its indexes are flushed at
//! the next `flush` or close). What does need a sync is a cut: truncation is durable at once, so cut
//! batches never come back (one sync of the cut `.log`, and one of the directory when later segments
//! were deleted).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression};
use klog_log::io::{CountingStorage, IoOp, SimStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::segment::LogSegment;

/// The simulated storage (to tear and crash it), seen through a [`CountingStorage`].
struct Counted {
    inner: Arc<SimStorage>,
    io: Arc<CountingStorage>,
}

impl Counted {
    /// Syncs since the last call by the kind of file (its extension, or `dir` for a directory sync).
    fn take(&self) -> BTreeMap<String, usize> {
        let mut syncs = BTreeMap::new();
        for ((op, kind), n) in self.io.take() {
            if matches!(op, IoOp::Sync | IoOp::SyncDir) {
                *syncs.entry(kind).or_default() += n as usize;
            }
        }
        syncs
    }

    fn storage(&self) -> Arc<dyn Storage> {
        self.io.clone()
    }
}

const PRODUCERS: i64 = 3;
const BATCHES: i64 = 1200;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 8 << 10,
        index_interval_bytes: 512,
        ..LogConfig::default()
    }
}

fn unclean(recovery_point: i64) -> OpenOptions {
    OpenOptions {
        recovery_point,
        log_start_offset: 0,
        clean_shutdown: false,
    }
}

/// A partition of many small segments (each with index entries) from idempotent producers, flushed and
/// closed; returns its log end offset.
fn build(storage: &Counted, dir: &Path) -> i64 {
    let dyn_storage = storage.storage();
    let (log, _) = PartitionLog::open(dyn_storage, dir, config(), OpenOptions::default()).unwrap();
    let mut sequences = [0i32; PRODUCERS as usize];
    for i in 0..BATCHES {
        let pid = i % PRODUCERS;
        let seq = &mut sequences[pid as usize];
        let mut b = BatchBuilder::new(Compression::None).producer(1000 + pid, 0, *seq);
        for r in 0..3 {
            b.append(
                1_700_000_000_000 + i,
                Some(b"key"),
                Some(format!("value {i} {r}").as_bytes()),
                &[],
            )
            .unwrap();
        }
        *seq += 3;
        let mut bytes = b.build().unwrap();
        log.append_as_leader(&mut bytes, 0).unwrap();
    }
    let leo = log.log_end_offset();
    log.flush(leo).unwrap();
    log.close().unwrap();
    leo
}

fn fresh() -> (Counted, PathBuf, i64) {
    let inner = Arc::new(SimStorage::new(11));
    let storage = Counted {
        io: Arc::new(CountingStorage::new(inner.clone())),
        inner,
    };
    let dir = PathBuf::from("/sim/recovery-syncs/t-0");
    let leo = build(&storage, &dir);
    (storage, dir, leo)
}

fn open(storage: &Counted, dir: &Path, options: OpenOptions) -> PartitionLog {
    let dyn_storage = storage.storage();
    let (log, _) = PartitionLog::open(dyn_storage, dir, config(), options).unwrap();
    log
}

/// Every segment's offset-index entries, and its `.log` bytes.
type Contents = (Vec<(i64, Vec<(i64, u32)>)>, Vec<Vec<u8>>);

fn contents(log: &PartitionLog) -> Contents {
    let mut entries = Vec::new();
    let mut bytes = Vec::new();
    for base in log.segment_base_offsets() {
        let seg = log.segment(base).unwrap();
        bytes.push(seg.read_bytes(0, seg.size() as usize).unwrap());
        entries.push((base, seg.offset_index_entries().unwrap()));
    }
    (entries, bytes)
}

fn assert_same(got: Contents, expected: &Contents) {
    assert_eq!(got.0, expected.0, "offset index entries");
    assert!(got.1 == expected.1, "the .log bytes differ");
}

#[test]
fn an_unclean_open_that_cuts_nothing_syncs_nothing() {
    let (storage, dir, leo) = fresh();
    let segments = open(&storage, &dir, OpenOptions::default())
        .segment_base_offsets()
        .len();
    assert!(segments >= 10, "{segments} segments");
    storage.take();
    let log = open(&storage, &dir, unclean(0));
    assert_eq!(log.log_end_offset(), leo);
    let syncs = storage.take();
    assert_eq!(
        syncs,
        BTreeMap::new(),
        "syncs of an unclean open rescanning {segments} segments, cutting nothing"
    );
}

/// Cuts the last `n` bytes of the `.log` of the segment at `base`.
fn tear(storage: &Counted, dir: &Path, base: i64, n: usize) {
    let path = LogSegment::log_path(dir, base);
    let mut bytes = storage.inner.live_bytes(&path).unwrap();
    bytes.truncate(bytes.len() - n);
    storage.inner.corrupt(&path, bytes).unwrap();
}

#[test]
fn a_cut_in_the_last_segment_syncs_the_cut_log_once() {
    let (storage, dir, leo) = fresh();
    let bases = open(&storage, &dir, OpenOptions::default()).segment_base_offsets();
    tear(&storage, &dir, *bases.last().unwrap(), 7);
    storage.take();
    let log = open(&storage, &dir, unclean(0));
    assert!(log.log_end_offset() < leo);
    assert_eq!(storage.take(), BTreeMap::from([("log".to_owned(), 1)]));
}

/// A cut in a middle segment deletes every later segment: the cut `.log` is synced, and the directory
/// once, so the deleted segments cannot come back behind the appends that take their offsets.
#[test]
fn a_cut_in_a_middle_segment_syncs_the_cut_log_and_the_directory_once() {
    let (storage, dir, leo) = fresh();
    let bases = open(&storage, &dir, OpenOptions::default()).segment_base_offsets();
    tear(&storage, &dir, bases[bases.len() / 2], 7);
    storage.take();
    let log = open(&storage, &dir, unclean(0));
    assert!(log.log_end_offset() < leo);
    assert_eq!(log.segment_base_offsets(), bases[..=bases.len() / 2]);
    assert_eq!(
        storage.take(),
        BTreeMap::from([("dir".to_owned(), 1), ("log".to_owned(), 1)])
    );
}

/// The unsynced rebuild is safe: a crash right after the unclean open (nothing it wrote durable) leaves
/// a log whose next unclean open finds the same bytes and rebuilds the same indexes.
#[test]
fn a_crash_after_an_unsynced_rebuild_recovers_the_same_log() {
    let (storage, dir, _) = fresh();
    let log = open(&storage, &dir, unclean(0));
    let expected = contents(&log);
    drop(log);
    storage.inner.crash(true);
    let log = open(&storage, &dir, unclean(0));
    assert_same(contents(&log), &expected);
}

/// The flush after an unclean open makes the rebuilt indexes durable before the recovery point passes
/// them. Each `.index` starts sparser than the rebuild makes it (its first entry only: valid, so only a
/// rescan replaces it); after the flush and a crash, an open trusting the flushed recovery point (no
/// rescan of the sealed segments) must find the rebuilt entries, not the sparse ones.
#[test]
fn the_flush_after_an_unclean_open_syncs_the_rebuilt_indexes() {
    let (storage, dir, leo) = fresh();
    for base in open(&storage, &dir, OpenOptions::default()).segment_base_offsets() {
        let index = LogSegment::index_path(&dir, base);
        let mut bytes = storage.inner.live_bytes(&index).unwrap();
        bytes.truncate(8);
        storage.inner.corrupt(&index, bytes).unwrap();
    }
    let log = open(&storage, &dir, unclean(0));
    let expected = contents(&log);
    assert!(
        expected.0.iter().all(|(_, entries)| entries.len() > 1),
        "the rebuild adds entries to every segment"
    );
    log.flush(leo).unwrap();
    assert_eq!(log.recovery_point(), leo);
    drop(log);
    storage.inner.crash(true);
    let dyn_storage = storage.storage();
    let (log, report) = PartitionLog::open(dyn_storage, &dir, config(), unclean(leo)).unwrap();
    assert_eq!(report.rebuilt_indexes, Vec::<i64>::new());
    assert_eq!(
        report.recovered_segments.len(),
        1,
        "only the active segment"
    );
    assert_same(contents(&log), &expected);
}

/// Removes the producer snapshots (the clean close left one at the log end), so that the unclean open
/// replays every batch and `take_snapshot` writes one.
fn delete_snapshots(storage: &Counted, dir: &Path) {
    for name in storage.inner.list(dir).unwrap() {
        if name.ends_with(".snapshot") {
            storage.inner.remove(&dir.join(name)).unwrap();
        }
    }
}

/// The producer snapshot at the end of an unclean open (Kafka's `takeSnapshot` at the end of loading)
/// syncs its file, not the directory: its entry is derived state, made durable by the first flush
/// (which syncs the directory after any open) before the recovery point moves. A directory sync per
/// partition was a quarter of a 16-partition load's time (BENCHMARKS.md); Kafka syncs no directory here.
#[test]
fn the_snapshot_at_the_end_of_an_unclean_open_syncs_its_file_and_the_next_flush_the_directory() {
    let (storage, dir, leo) = fresh();
    delete_snapshots(&storage, &dir);
    let log = open(&storage, &dir, unclean(0));
    storage.take();
    assert!(log.take_snapshot().unwrap());
    assert_eq!(storage.take(), BTreeMap::from([("snapshot".to_owned(), 1)]));
    log.flush(leo).unwrap();
    assert_eq!(storage.take().get("dir"), Some(&1), "the flush syncs it");
    drop(log);
    storage.inner.crash(true);
    let names = storage.inner.list(&dir).unwrap();
    assert!(
        names.contains(&format!("{leo:020}.snapshot")),
        "durable after the flush: {names:?}"
    );
}

/// A crash before that flush may lose the snapshot's entry: the next open replays the batches instead,
/// to the same producer state.
#[test]
fn a_crash_before_the_flush_loses_at_most_the_snapshot_not_the_producer_state() {
    let (storage, dir, _) = fresh();
    delete_snapshots(&storage, &dir);
    let log = open(&storage, &dir, unclean(0));
    assert!(log.take_snapshot().unwrap());
    let expected = format!("{:?}", log.producers());
    drop(log);
    storage.inner.crash(true);
    let log = open(&storage, &dir, unclean(0));
    assert_eq!(format!("{:?}", log.producers()), expected);
}
