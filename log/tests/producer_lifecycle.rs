//! Producer state over a partition's life: what Kafka 4.x decides at the edges. A MIRROR_PID_RESET is
//! known by its control type alone, a snapshot at the log start offset is never loaded, idle producers
//! expire while the log runs, and a transaction version 2 marker must carry a bumped epoch.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::clock::ManualClock;
use klog_log::config::LogConfig;
use klog_log::format::{crc32c, BatchBuilder, Compression, ControlRecordType};
use klog_log::io::{SimStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog, TransactionVersion};
use klog_log::validator::AppendOrigin::Coordinator;
use klog_log::KafkaError;

const NOW: i64 = 1_800_000_000_000;

fn open_at(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    config: LogConfig,
    options: OpenOptions,
    clock: &Arc<ManualClock>,
) -> PartitionLog {
    PartitionLog::open_with_clock(storage.clone(), dir, config, options, clock.clone())
        .unwrap()
        .0
}

fn sim() -> (Arc<dyn Storage>, PathBuf, Arc<ManualClock>) {
    (
        Arc::new(SimStorage::new(11)),
        PathBuf::from("/p/orders-0"),
        Arc::new(ManualClock::new(NOW)),
    )
}

fn unclean() -> OpenOptions {
    OpenOptions {
        clean_shutdown: false,
        ..OpenOptions::default()
    }
}

fn data_at(base_offset: i64, pid: i64, epoch: i16, seq: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None)
        .producer(pid, epoch, seq)
        .base_offset(base_offset)
        .partition_leader_epoch(0);
    b.append(NOW, None, Some(b"v"), &[]).unwrap();
    b.build().unwrap()
}

fn pids(log: &PartitionLog) -> Vec<i64> {
    log.producers().iter().map(|p| p.producer_id()).collect()
}

/// A MIRROR_PID_RESET barrier (control type 7, producer id -1) whose value is not a
/// `MirrorPidResetRecord`: its version is negative. The CRC is made valid again.
fn barrier_with_bad_value(base_offset: i64) -> Vec<u8> {
    let mut bytes = BatchBuilder::mirror_pid_reset(NOW)
        .unwrap()
        .base_offset(base_offset)
        .partition_leader_epoch(0)
        .build()
        .unwrap();
    // The one record ends with its value `00 00 00` ({Version}) and an empty header count.
    let at = bytes.len() - 4;
    assert_eq!(
        bytes[at..],
        [0, 0, 0, 0],
        "the barrier's value, then no headers"
    );
    bytes[at] = 0xff;
    let crc = crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    bytes
}

#[test]
fn a_barrier_whose_value_does_not_parse_still_forgets_the_producers() {
    let (s, dir, clock) = sim();
    let log = open_at(
        &s,
        &dir,
        LogConfig::default(),
        OpenOptions::default(),
        &clock,
    );
    let mut set = data_at(0, 1, 0, 0);
    set.extend(barrier_with_bad_value(1));
    set.extend(data_at(2, 2, 0, 0));
    log.append_as_follower(&set).unwrap();
    assert_eq!(pids(&log), vec![2], "the barrier is decided by its type");
    drop(log);
    let log = open_at(&s, &dir, LogConfig::default(), unclean(), &clock);
    assert_eq!(pids(&log), vec![2], "and the replay decides the same");
}

fn leader_data(pid: i64, seq: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None).producer(pid, 0, seq);
    b.append(NOW, None, Some(b"v"), &[]).unwrap();
    b.build().unwrap()
}

/// Producer 1's records are all below the log start offset, and the only snapshot is exactly at the log
/// start. Kafka's `truncateAndReload` deletes snapshots `<= logStartOffset` and replays from the log
/// start, so the producer is forgotten on reload, clean or not.
#[test]
fn a_snapshot_at_exactly_the_log_start_offset_is_deleted_not_loaded() {
    for clean_shutdown in [true, false] {
        let (s, dir, clock) = sim();
        let log = open_at(
            &s,
            &dir,
            LogConfig::default(),
            OpenOptions::default(),
            &clock,
        );
        log.append_as_leader(&mut leader_data(1, 0), 0).unwrap();
        log.append_as_leader(&mut leader_data(1, 1), 0).unwrap();
        log.roll().unwrap();
        log.flush(2).unwrap();
        log.update_high_watermark(2);
        assert!(log.increment_log_start_offset(2).unwrap());
        assert_eq!(log.delete_old_segments().unwrap(), vec![0]);
        log.close().unwrap();
        drop(log);
        let snapshot = dir.join(format!("{:020}.snapshot", 2));
        assert!(s.open(&snapshot).is_ok(), "the roll's snapshot is at 2");

        let options = OpenOptions {
            recovery_point: 2,
            log_start_offset: 2,
            clean_shutdown,
        };
        let (log, report) = PartitionLog::open_with_clock(
            s.clone(),
            &dir,
            LogConfig::default(),
            options,
            clock.clone(),
        )
        .unwrap();
        assert_eq!(log.log_start_offset(), 2);
        assert_eq!(
            pids(&log),
            Vec::<i64>::new(),
            "clean shutdown {clean_shutdown}"
        );
        assert_eq!(report.snapshot_loaded, None);
        assert!(report.snapshots_deleted.contains(&2), "{report:?}");
        assert!(s.open(&snapshot).is_err(), "deleted as Kafka does");
    }
}

fn txn_data(pid: i64, epoch: i16, seq: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None)
        .producer(pid, epoch, seq)
        .transactional(true);
    b.append(NOW, None, Some(b"v"), &[]).unwrap();
    b.build().unwrap()
}

fn abort_marker(pid: i64, epoch: i16) -> Vec<u8> {
    BatchBuilder::end_txn_marker(ControlRecordType::Abort, pid, epoch, 0, NOW)
        .unwrap()
        .build()
        .unwrap()
}

/// Under transaction version 2 the coordinator ended producer 1's first transaction with epoch 6; the
/// producer's next transaction (epoch 6) is open at offset 2 when a late duplicate of that ABORT arrives.
#[test]
fn a_late_tv2_abort_is_refused_by_the_leader_and_writes_nothing() {
    let (s, dir, clock) = sim();
    let log = open_at(
        &s,
        &dir,
        LogConfig::default(),
        OpenOptions::default(),
        &clock,
    );
    log.append_as_leader(&mut txn_data(1, 5, 0), 0).unwrap();
    let tv2 = TransactionVersion::TV_2;
    log.append_as_leader_with_transaction_version(&mut abort_marker(1, 6), 0, Coordinator, tv2)
        .unwrap();
    log.append_as_leader(&mut txn_data(1, 6, 0), 0).unwrap();
    log.update_high_watermark(3);
    assert_eq!(log.last_stable_offset(), 2);

    let err = log
        .append_as_leader_with_transaction_version(&mut abort_marker(1, 6), 0, Coordinator, tv2)
        .unwrap_err();
    assert_eq!(err.kafka_error(), KafkaError::InvalidProducerEpoch);
    assert!(
        err.to_string().contains("<= the last seen epoch 6"),
        "{err}"
    );
    assert_eq!(log.log_end_offset(), 3, "nothing written");
    assert_eq!(
        log.last_stable_offset(),
        2,
        "the open transaction stays open"
    );

    // A marker that bumps the epoch ends it.
    log.append_as_leader_with_transaction_version(&mut abort_marker(1, 7), 0, Coordinator, tv2)
        .unwrap();
    log.update_high_watermark(4);
    assert_eq!(log.last_stable_offset(), 4);
}

/// A follower cannot know the version (it is not in the bytes) and copies what its leader accepted, as
/// Kafka's follower does (TV_UNKNOWN, a warning at most).
#[test]
fn a_follower_appends_the_same_late_marker() {
    let (s, dir, clock) = sim();
    let log = open_at(
        &s,
        &dir,
        LogConfig::default(),
        OpenOptions::default(),
        &clock,
    );
    let mut set = Vec::new();
    for (offset, bytes) in [
        (0, txn_data(1, 5, 0)),
        (1, abort_marker(1, 6)),
        (2, txn_data(1, 6, 0)),
        (3, abort_marker(1, 6)),
    ] {
        let mut bytes = bytes;
        bytes[..8].copy_from_slice(&i64::to_be_bytes(offset));
        set.extend(bytes);
    }
    log.append_as_follower(&set).unwrap();
    assert_eq!(log.log_end_offset(), 4);
    log.update_high_watermark(4);
    assert_eq!(log.last_stable_offset(), 4, "the replica's marker ended it");
}

fn data_with_timestamp(pid: i64, seq: i32, timestamp: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None).producer(pid, 0, seq);
    b.append(timestamp, None, Some(b"v"), &[]).unwrap();
    b.build().unwrap()
}

fn expiring_config() -> LogConfig {
    LogConfig::from_pairs([
        "producer.id.expiration.ms=1000",
        "producer.id.expiration.check.interval.ms=500",
    ])
    .unwrap()
}

/// Kafka removes producers idle for `producer.id.expiration.ms` every
/// `producer.id.expiration.check.interval.ms` while the log runs, not only when a snapshot is loaded.
#[test]
fn idle_producers_expire_while_the_log_runs() {
    let kafka_default = LogConfig::default().producer_id_expiration_check_interval_ms;
    assert_eq!(kafka_default, 600_000);
    let (s, dir, clock) = sim();
    let log = open_at(&s, &dir, expiring_config(), OpenOptions::default(), &clock);
    log.append_as_leader(&mut data_with_timestamp(1, 0, NOW), 0)
        .unwrap();
    clock.set(NOW + 1_000);
    log.append_as_leader(&mut data_with_timestamp(2, 0, NOW + 1_000), 0)
        .unwrap();
    assert_eq!(
        pids(&log),
        vec![2],
        "producer 1 expired on the append's check"
    );

    // A partition without appends is checked by its embedder's tick, on the same interval.
    clock.set(NOW + 1_400);
    assert_eq!(log.maybe_expire_producers(), 0, "next check due at +1500");
    clock.set(NOW + 2_000);
    assert_eq!(log.maybe_expire_producers(), 1);
    assert_eq!(pids(&log), Vec::<i64>::new());

    // Expired but not yet due: the interval decides when, not each call.
    log.append_as_leader(&mut data_with_timestamp(3, 0, NOW), 0)
        .unwrap();
    assert_eq!(pids(&log), vec![3], "appended within the interval: kept");
    clock.set(NOW + 2_499);
    assert_eq!(log.maybe_expire_producers(), 0);
    assert_eq!(pids(&log), vec![3]);
    clock.set(NOW + 2_500);
    assert_eq!(log.maybe_expire_producers(), 1);
}

#[test]
fn a_producer_with_an_open_transaction_never_expires() {
    let (s, dir, clock) = sim();
    let log = open_at(&s, &dir, expiring_config(), OpenOptions::default(), &clock);
    log.append_as_leader(&mut txn_data(1, 0, 0), 0).unwrap();
    clock.set(NOW + 10_000);
    assert_eq!(log.maybe_expire_producers(), 0);
    assert_eq!(pids(&log), vec![1]);
}
