//! Producer state through the partition log: idempotence and transactions on append, `.txnindex`,
//! read_committed, snapshots at roll and close, truncation, reopen, and the MIRROR_PID_RESET barrier.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::clock::ManualClock;
use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression, ControlRecordType};
use klog_log::io::{SimStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::producer_state::list_snapshots;
use klog_log::validator::AppendOrigin;
use klog_log::KafkaError;

fn open_at(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    config: LogConfig,
    options: OpenOptions,
) -> PartitionLog {
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    PartitionLog::open_with_clock(storage.clone(), dir, config, options, clock)
        .unwrap()
        .0
}

fn sim() -> (Arc<dyn Storage>, PathBuf) {
    (Arc::new(SimStorage::new(7)), PathBuf::from("/p/orders-0"))
}

fn data(pid: i64, epoch: i16, seq: i32, n: usize, txn: bool) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None)
        .producer(pid, epoch, seq)
        .transactional(txn);
    for i in 0..n {
        b.append(1_800_000_000_000, Some(&[i as u8]), Some(b"value"), &[])
            .unwrap();
    }
    b.build().unwrap()
}

fn marker(kind: ControlRecordType, pid: i64, epoch: i16) -> Vec<u8> {
    BatchBuilder::end_txn_marker(kind, pid, epoch, 0, 1_800_000_000_000)
        .unwrap()
        .build()
        .unwrap()
}

fn append_marker(log: &PartitionLog, kind: ControlRecordType, pid: i64, epoch: i16) -> i64 {
    let info = log
        .append_as_leader_with_origin(&mut marker(kind, pid, epoch), 0, AppendOrigin::Coordinator)
        .unwrap();
    info.first_offset
}

#[test]
fn a_retry_returns_the_original_offsets_and_writes_nothing() {
    let (s, dir) = sim();
    let log = open_at(&s, &dir, LogConfig::default(), OpenOptions::default());
    let first = log
        .append_as_leader(&mut data(5, 0, 0, 3, false), 0)
        .unwrap();
    log.append_as_leader(&mut data(5, 0, 3, 2, false), 0)
        .unwrap();
    let retry = log
        .append_as_leader(&mut data(5, 0, 0, 3, false), 0)
        .unwrap();
    assert!(retry.duplicate);
    assert_eq!(
        (retry.first_offset, retry.last_offset),
        (first.first_offset, first.last_offset)
    );
    assert_eq!(log.log_end_offset(), 5, "the retry wrote nothing");
    let err = log
        .append_as_leader(&mut data(5, 0, 7, 1, false), 0)
        .unwrap_err();
    assert_eq!(err.kafka_error(), KafkaError::OutOfOrderSequenceNumber);
    let err = log
        .append_as_leader(&mut data(5, 1, 9, 1, false), 0)
        .unwrap_err();
    assert_eq!(
        err.kafka_error(),
        KafkaError::OutOfOrderSequenceNumber,
        "a new epoch starts at 0"
    );
    log.append_as_leader(&mut data(5, 1, 0, 1, false), 0)
        .unwrap();
    let err = log
        .append_as_leader(&mut data(5, 0, 5, 1, false), 0)
        .unwrap_err();
    assert_eq!(
        err.kafka_error(),
        KafkaError::InvalidProducerEpoch,
        "the old epoch is fenced"
    );
    assert_eq!(log.log_end_offset(), 6);
}

#[test]
fn transactions_set_the_lso_index_aborts_and_read_committed_returns_them() {
    let (s, dir) = sim();
    let log = open_at(&s, &dir, LogConfig::default(), OpenOptions::default());
    log.append_as_leader(&mut data(1, 0, 0, 2, true), 0)
        .unwrap(); // 0-1 txn of pid 1
    log.append_as_leader(&mut data(2, 0, 0, 2, true), 0)
        .unwrap(); // 2-3 txn of pid 2
    log.append_as_leader(&mut data(9, 0, 0, 1, false), 0)
        .unwrap(); // 4 idempotent
    log.update_high_watermark(log.log_end_offset());
    assert_eq!(log.first_unstable_offset(), Some(0));
    assert_eq!(log.last_stable_offset(), 0);
    let err = log
        .append_as_leader(&mut data(1, 0, 2, 1, false), 0)
        .unwrap_err();
    assert_eq!(err.kafka_error(), KafkaError::InvalidTxnState);
    let abort_at = append_marker(&log, ControlRecordType::Abort, 1, 0); // 5
    log.update_high_watermark(log.log_end_offset());
    assert_eq!(
        log.last_stable_offset(),
        2,
        "pid 2's transaction is still open"
    );
    let commit_at = append_marker(&log, ControlRecordType::Commit, 2, 0); // 6
    log.update_high_watermark(log.log_end_offset());
    assert_eq!((abort_at, commit_at), (5, 6));
    assert_eq!(log.last_stable_offset(), 7);
    let (read, aborted) = log.read_committed(0, 1 << 20, true).unwrap();
    assert_eq!(read.next_offset, 7);
    assert_eq!(aborted.len(), 1);
    let a = aborted[0];
    assert_eq!(
        (
            a.producer_id.get(),
            a.first_offset.get(),
            a.last_offset.get(),
            a.last_stable_offset.get()
        ),
        (1, 0, 5, 2)
    );
    // A marker with no open transaction completes nothing but is written: at the log end, moving the
    // LSO only by itself, and aborting nothing.
    let late = log
        .append_as_leader_with_origin(
            &mut marker(ControlRecordType::Commit, 2, 0),
            0,
            AppendOrigin::Coordinator,
        )
        .unwrap();
    assert_eq!(
        (late.first_offset, late.last_offset, late.duplicate),
        (7, 7, false),
        "a marker with no open transaction is written at the log end"
    );
    assert_eq!(log.log_end_offset(), 8);
    assert_eq!(log.first_unstable_offset(), None, "it opened nothing");
    log.update_high_watermark(log.log_end_offset());
    assert_eq!(log.last_stable_offset(), 8);
    let (read, aborted) = log.read_committed(0, 1 << 20, true).unwrap();
    assert_eq!(read.next_offset, 8);
    assert_eq!(aborted.len(), 1, "the late marker aborted nothing");
}

/// A follower append holding [pid 1 data, MIRROR_PID_RESET, pid 2 data]: only pid 2 survives.
#[test]
fn a_barrier_in_the_middle_of_one_append_leaves_only_later_producers() {
    let (s, dir) = sim();
    let log = open_at(&s, &dir, LogConfig::default(), OpenOptions::default());
    let mut set = Vec::new();
    let b1 = BatchBuilder::new(Compression::None)
        .producer(1, 0, 0)
        .partition_leader_epoch(0);
    let mut b1 = b1;
    b1.append(5, None, Some(b"a"), &[]).unwrap();
    b1.build_into(&mut set).unwrap();
    BatchBuilder::mirror_pid_reset(5)
        .unwrap()
        .base_offset(1)
        .partition_leader_epoch(1)
        .build_into(&mut set)
        .unwrap();
    let mut b2 = BatchBuilder::new(Compression::None)
        .producer(2, 0, 0)
        .base_offset(2)
        .partition_leader_epoch(1);
    b2.append(5, None, Some(b"b"), &[]).unwrap();
    b2.build_into(&mut set).unwrap();
    log.append_as_follower(&set).unwrap();
    let pids: Vec<i64> = log.producers().iter().map(|p| p.producer_id()).collect();
    assert_eq!(pids, vec![2]);
    // And a reopen that replays the log honours the barrier the same way.
    drop(log);
    let log = open_at(
        &s,
        &dir,
        LogConfig::default(),
        OpenOptions {
            clean_shutdown: false,
            ..OpenOptions::default()
        },
    );
    let pids: Vec<i64> = log.producers().iter().map(|p| p.producer_id()).collect();
    assert_eq!(pids, vec![2]);
}

fn state(log: &PartitionLog) -> Vec<(i64, i16, i32, i64, Option<i64>)> {
    log.producers()
        .iter()
        .map(|p| {
            (
                p.producer_id(),
                p.producer_epoch(),
                p.last_seq(),
                p.last_data_offset(),
                p.current_txn_first_offset(),
            )
        })
        .collect()
}

/// Snapshots at roll and clean close; reopening (clean or not) and truncating give the same producer state as
/// a full replay of the same log.
#[test]
fn snapshots_truncation_and_reopen_restore_what_a_full_replay_gives() {
    let (s, dir) = sim();
    let config = LogConfig::from_pairs(["segment.bytes=800"]).unwrap();
    let log = open_at(&s, &dir, config.clone(), OpenOptions::default());
    let mut seqs = [0i32; 4];
    for round in 0..30 {
        let pid = (round % 4) as i64 + 10;
        let txn = pid == 13;
        log.append_as_leader(&mut data(pid, 0, seqs[pid as usize - 10], 2, txn), 0)
            .unwrap();
        seqs[pid as usize - 10] += 2;
        if txn && round % 8 == 7 {
            append_marker(&log, ControlRecordType::Commit, pid, 0);
        }
    }
    log.flush(log.log_end_offset()).unwrap();
    let snaps = list_snapshots(s.as_ref(), &dir).unwrap();
    assert!(snaps.len() >= 3, "a snapshot per roll: {snaps:?}");
    assert_eq!(snaps, log.segment_base_offsets()[1..].to_vec());
    let before = state(&log);
    log.close().unwrap();
    let leo = log.log_end_offset();
    assert!(
        list_snapshots(s.as_ref(), &dir).unwrap().contains(&leo),
        "a clean close snapshots at the log end"
    );
    drop(log);

    let clean = open_at(
        &s,
        &dir,
        config.clone(),
        OpenOptions {
            clean_shutdown: true,
            recovery_point: leo,
            log_start_offset: 0,
        },
    );
    assert_eq!(state(&clean), before, "clean reopen");
    drop(clean);
    // A full replay: every snapshot removed.
    for o in list_snapshots(s.as_ref(), &dir).unwrap() {
        s.remove(&dir.join(format!("{o:020}.snapshot"))).unwrap();
    }
    let replayed = open_at(&s, &dir, config.clone(), OpenOptions::default());
    assert_eq!(state(&replayed), before, "full replay");

    // Truncation reloads from the latest snapshot at or below the target and replays the rest.
    let target = replayed.segment_base_offsets()[2] + 3;
    replayed.truncate_to(target).unwrap();
    let truncated_end = replayed.log_end_offset();
    assert!(
        truncated_end <= target && truncated_end >= target - 2,
        "batch-granular truncation"
    );
    let truncated = state(&replayed);
    drop(replayed);
    for o in list_snapshots(s.as_ref(), &dir).unwrap() {
        s.remove(&dir.join(format!("{o:020}.snapshot"))).unwrap();
    }
    let fresh = open_at(&s, &dir, config, OpenOptions::default());
    assert_eq!(fresh.log_end_offset(), truncated_end);
    assert_eq!(
        state(&fresh),
        truncated,
        "truncate then reload == replay of the truncated log"
    );
}

#[test]
fn a_corrupt_snapshot_is_deleted_and_an_older_one_or_the_log_is_used() {
    let sim = SimStorage::new(3);
    let s: Arc<dyn Storage> = Arc::new(sim.clone());
    let dir = PathBuf::from("/p/c-0");
    let config = LogConfig::from_pairs(["segment.bytes=600"]).unwrap();
    let log = open_at(&s, &dir, config.clone(), OpenOptions::default());
    for i in 0..12 {
        log.append_as_leader(&mut data(77, 0, i * 2, 2, false), 0)
            .unwrap();
    }
    log.close().unwrap();
    let want = state(&log);
    let leo = log.log_end_offset();
    drop(log);
    sim.corrupt(
        &dir.join(format!("{leo:020}.snapshot")),
        vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
    )
    .unwrap();
    let (log, report) = PartitionLog::open_with_clock(
        s.clone(),
        &dir,
        config,
        OpenOptions {
            clean_shutdown: true,
            recovery_point: leo,
            log_start_offset: 0,
        },
        Arc::new(ManualClock::new(1_800_000_000_000)),
    )
    .unwrap();
    assert!(report.snapshots_deleted.contains(&leo), "{report:?}");
    assert!(report.snapshot_loaded.is_some_and(|o| o < leo));
    assert!(report.batches_replayed > 0);
    assert_eq!(state(&log), want);
}
