//! Recovery derives the log from the batches it scans, whatever lies beside them: an offset gap between
//! intact segments (a compacted or mirrored log) is kept, only invalid bytes cut the log and delete the
//! segments after the cut (Kafka's `LogLoader.recoverLog`); the leader-epoch cache comes from the scanned
//! batches even when a missing index sends a later segment through recovery first, or the checkpoint
//! beside them says otherwise; a producer snapshot recovery did not load is deleted, not left beside the
//! replayed state (Kafka's `truncateAndReload` at the first recovered segment).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression};
use klog_log::io::{SimStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog, TruncationReason};
use klog_log::producer_state::{list_snapshots, snapshot_path};
use klog_log::segment::LogSegment;

const TS: i64 = 1_700_000_000_000;

fn config() -> LogConfig {
    LogConfig {
        // Two of the test's batches fill a segment: the third rolls at its own first offset.
        segment_bytes: 300,
        index_interval_bytes: 64,
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

/// A follower batch of three records at `base`, in leader epoch `epoch`.
fn follower_batch(base: i64, epoch: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None)
        .base_offset(base)
        .partition_leader_epoch(epoch);
    for i in 0..3 {
        b.append(
            TS,
            Some(b"k"),
            Some(format!("value {base} {i}").as_bytes()),
            &[],
        )
        .unwrap();
    }
    b.build().unwrap()
}

fn fresh(name: &str) -> (SimStorage, Arc<dyn Storage>, PathBuf) {
    let sim = SimStorage::new(7);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    (sim, storage, PathBuf::from(format!("/sim/{name}/t-0")))
}

/// Appends `batches` as a follower, flushes and closes; returns the log's segment bases.
fn write_follower_log(storage: &Arc<dyn Storage>, dir: &Path, batches: &[Vec<u8>]) -> Vec<i64> {
    let (log, _) =
        PartitionLog::open(storage.clone(), dir, config(), OpenOptions::default()).unwrap();
    for b in batches {
        log.append_as_follower(b).unwrap();
    }
    log.flush(log.log_end_offset()).unwrap();
    let bases = log.segment_base_offsets();
    log.close().unwrap();
    bases
}

/// Every batch's base offset, read through the log.
fn batch_offsets(log: &PartitionLog) -> Vec<i64> {
    log.update_high_watermark(log.log_end_offset());
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let r = log.read(offset, 1 << 20, None, true).unwrap();
        let before = out.len();
        for b in klog_log::format::Batches::new(r.records.as_slice()) {
            let b = b.unwrap();
            out.push(b.base_offset());
            offset = b.last_offset() + 1;
        }
        assert!(out.len() > before, "a read at {offset} returned no batch");
    }
    out
}

fn epochs(log: &PartitionLog) -> Vec<(i32, i64)> {
    log.leader_epochs()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect()
}

fn assert_gap_kept(name: &str, later: i64) {
    let (_, storage, dir) = fresh(name);
    let batches = [
        follower_batch(0, 0),
        follower_batch(3, 0),
        follower_batch(later, 0),
        follower_batch(later + 3, 0),
    ];
    assert_eq!(
        write_follower_log(&storage, &dir, &batches),
        [0, later],
        "the third batch rolls a segment at its own offset"
    );
    let (log, report) = PartitionLog::open(storage.clone(), &dir, config(), unclean(0)).unwrap();
    assert!(
        report.truncations.is_empty(),
        "{name}: an offset gap between intact segments cut the log: {:?}",
        report.truncations
    );
    assert_eq!(
        report.recovered_segments.len(),
        2,
        "both segments rescanned"
    );
    assert_eq!(log.segment_base_offsets(), [0, later]);
    assert_eq!(log.log_end_offset(), later + 6);
    assert_eq!(batch_offsets(&log), [0, 3, later, later + 3]);
    log.close().unwrap();
}

#[test]
fn an_offset_gap_between_intact_segments_keeps_the_later_segment() {
    assert_gap_kept("gap", 1006);
}

#[test]
fn a_jump_past_two_to_the_31_between_intact_segments_keeps_the_later_segment() {
    // Beyond what a relative offset of the first segment can hold: the later batch rolls a segment.
    assert_gap_kept("jump", (1 << 31) + 10);
}

#[test]
fn a_torn_batch_before_a_gap_still_deletes_every_later_segment() {
    let (sim, storage, dir) = fresh("torn-gap");
    let batches = [
        follower_batch(0, 0),
        follower_batch(3, 0),
        follower_batch(1006, 0),
        follower_batch(1009, 0),
    ];
    write_follower_log(&storage, &dir, &batches);
    // Half of the second batch: invalid bytes at the end of the first segment.
    let path = LogSegment::log_path(&dir, 0);
    let bytes = sim.live_bytes(&path).unwrap();
    let torn = batches[0].len() + batches[1].len() / 2;
    sim.corrupt(&path, bytes[..torn].to_vec()).unwrap();
    let (log, report) = PartitionLog::open(storage.clone(), &dir, config(), unclean(0)).unwrap();
    assert_eq!(log.segment_base_offsets(), [0]);
    assert_eq!(log.log_end_offset(), 3);
    assert_eq!(report.deleted_segments, [1006]);
    assert!(
        matches!(
            report.truncations.last().map(|t| &t.reason),
            Some(TruncationReason::AfterCut { cut_segment: 0 })
        ),
        "{:?}",
        report.truncations
    );
    log.close().unwrap();
}

/// Segments at 0, 6 and 9 of follower batches in epoch 0, 3 records each.
fn epoch_zero_log(storage: &Arc<dyn Storage>, dir: &Path) {
    let batches: Vec<Vec<u8>> = (0..4).map(|i| follower_batch(i * 3, 0)).collect();
    let (log, _) =
        PartitionLog::open(storage.clone(), dir, config(), OpenOptions::default()).unwrap();
    for (i, b) in batches.iter().enumerate() {
        if i == 3 {
            log.roll().unwrap();
        }
        log.append_as_follower(b).unwrap();
    }
    log.flush(log.log_end_offset()).unwrap();
    assert_eq!(log.segment_base_offsets(), [0, 6, 9]);
    log.close().unwrap();
}

#[test]
fn a_missing_index_of_a_later_segment_does_not_move_the_epoch_start() {
    let (_, storage, dir) = fresh("epochs");
    epoch_zero_log(&storage, &dir);
    // What a recovery interrupted while rebuilding segment 6's indexes leaves (the old files removed,
    // the new ones not yet created), and no epoch cache: it is derived, and may be deleted.
    for p in [
        LogSegment::index_path(&dir, 6),
        LogSegment::time_index_path(&dir, 6),
    ] {
        storage.remove(&p).unwrap();
    }
    storage
        .remove(&dir.join("leader-epoch-checkpoint"))
        .unwrap();
    let (log, report) = PartitionLog::open(storage.clone(), &dir, config(), unclean(0)).unwrap();
    assert_eq!(report.rebuilt_indexes, [6]);
    assert_eq!(
        epochs(&log),
        [(0, 0)],
        "every batch is in epoch 0, from offset 0"
    );
    log.close().unwrap();
    let (log, _) = PartitionLog::open(storage, &dir, config(), unclean(0)).unwrap();
    assert_eq!(epochs(&log), [(0, 0)], "the checkpoint written says so too");
    log.close().unwrap();
}

#[test]
fn an_epoch_entry_the_scanned_batches_contradict_is_replaced() {
    let (sim, storage, dir) = fresh("epochs-wrong");
    epoch_zero_log(&storage, &dir);
    // A checkpoint claiming epoch 3 started at 6, where the batches say epoch 0 runs to the end.
    sim.corrupt(
        &dir.join("leader-epoch-checkpoint"),
        b"0\n2\n0 0\n3 6\n".to_vec(),
    )
    .unwrap();
    let (log, _) = PartitionLog::open(storage, &dir, config(), unclean(0)).unwrap();
    assert_eq!(epochs(&log), [(0, 0)]);
    log.close().unwrap();
}

#[test]
fn an_unclean_open_deletes_the_snapshots_it_did_not_load() {
    let (sim, storage, dir) = fresh("snapshots");
    let (log, _) =
        PartitionLog::open(storage.clone(), &dir, config(), OpenOptions::default()).unwrap();
    for i in 0..6 {
        let mut b = BatchBuilder::new(Compression::None).producer(7, 0, i * 3);
        for r in 0..3 {
            b.append(TS, Some(b"k"), Some(format!("v {i} {r}").as_bytes()), &[])
                .unwrap();
        }
        log.append_as_leader(&mut b.build().unwrap(), 0).unwrap();
    }
    log.flush(log.log_end_offset()).unwrap();
    let bases = log.segment_base_offsets();
    log.close().unwrap();
    let snapshots = list_snapshots(&*storage, &dir).unwrap();
    let last = *bases.last().unwrap();
    assert!(snapshots.contains(&last), "{snapshots:?} at {bases:?}");
    // A corrupt snapshot above the first rescanned segment: the replay starts below it.
    let path = snapshot_path(&dir, last);
    let mut bytes = sim.live_bytes(&path).unwrap();
    let n = bytes.len();
    bytes[n - 1] ^= 0xff;
    sim.corrupt(&path, bytes).unwrap();
    let (log, report) = PartitionLog::open(storage.clone(), &dir, config(), unclean(0)).unwrap();
    assert!(
        !list_snapshots(&*storage, &dir).unwrap().contains(&last),
        "the corrupt snapshot {last} survived recovery"
    );
    assert!(
        report.snapshots_deleted.contains(&last),
        "the report names the deleted snapshot: {:?}",
        report.snapshots_deleted
    );
    assert_eq!(log.producers().len(), 1);
    assert_eq!(log.producers()[0].last_seq(), 17);
    log.close().unwrap();
}
