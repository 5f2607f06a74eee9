//! KIP-1279's write modes of a mirror partition as the log enforces them: in STOPPING a leader append is
//! refused with READ_ONLY_TOPIC unless it is the coordinator's barrier, and, for a mirror whose stop
//! aborts open transactions (`WriteMode::AbortsAndBarrier`), the coordinator's ABORT markers of
//! producers whose transaction is open; nothing else (a client's data, a COMMIT, an ABORT for a
//! producer with nothing open) gets through.

use std::path::PathBuf;
use std::sync::Arc;

use klog_log::clock::ManualClock;
use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression, ControlRecordType};
use klog_log::io::{SimStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog, WriteMode};
use klog_log::validator::AppendOrigin;
use klog_log::KafkaError;

const NOW: i64 = 1_800_000_000_000;

/// A log holding an open transaction of producer 7 (epoch 2) at offset 0.
fn log_with_an_open_transaction() -> PartitionLog {
    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(5));
    let log = PartitionLog::open_with_clock(
        storage,
        &PathBuf::from("/p/orders-0"),
        LogConfig::default(),
        OpenOptions::default(),
        Arc::new(ManualClock::new(NOW)),
    )
    .unwrap()
    .0;
    let mut b = BatchBuilder::new(Compression::None)
        .producer(7, 2, 0)
        .transactional(true);
    b.append(NOW, None, Some(b"v"), &[]).unwrap();
    log.append_as_leader(&mut b.build().unwrap(), 0).unwrap();
    assert!(log.has_open_transaction(7));
    assert!(!log.has_open_transaction(8));
    log
}

fn marker(kind: ControlRecordType, pid: i64, epoch: i16) -> Vec<u8> {
    BatchBuilder::end_txn_marker(kind, pid, epoch, 0, NOW)
        .unwrap()
        .build()
        .unwrap()
}

fn refused(log: &PartitionLog, mut batch: Vec<u8>, origin: AppendOrigin) -> String {
    let e = log
        .append_as_leader_with_origin(&mut batch, 1, origin)
        .unwrap_err();
    assert_eq!(e.kafka_error(), KafkaError::ReadOnlyTopic, "{e}");
    e.to_string()
}

#[test]
fn a_stop_that_aborts_admits_only_abort_markers_of_open_transactions_and_the_barrier() {
    let log = log_with_an_open_transaction();
    log.set_write_mode(WriteMode::AbortsAndBarrier);
    assert_eq!(log.write_mode(), WriteMode::AbortsAndBarrier);
    let mut data = BatchBuilder::new(Compression::None);
    data.append(NOW, None, Some(b"x"), &[]).unwrap();
    let why = refused(&log, data.build().unwrap(), AppendOrigin::Client);
    assert!(
        why.contains("only ABORT markers of its open transactions"),
        "{why}"
    );
    refused(
        &log,
        marker(ControlRecordType::Commit, 7, 2),
        AppendOrigin::Coordinator,
    );
    refused(
        &log,
        marker(ControlRecordType::Abort, 8, 0),
        AppendOrigin::Coordinator,
    );
    assert_eq!(log.log_end_offset(), 1, "nothing refused was written");
    let mut abort = marker(ControlRecordType::Abort, 7, 2);
    log.append_as_leader_with_origin(&mut abort, 1, AppendOrigin::Coordinator)
        .unwrap();
    assert!(!log.has_open_transaction(7));
    // Its transaction is closed now: a second ABORT is refused like any other.
    refused(
        &log,
        marker(ControlRecordType::Abort, 7, 2),
        AppendOrigin::Coordinator,
    );
    let mut barrier = BatchBuilder::mirror_pid_reset(NOW)
        .unwrap()
        .build()
        .unwrap();
    log.append_as_leader_with_origin(&mut barrier, 1, AppendOrigin::Coordinator)
        .unwrap();
    assert_eq!(log.log_end_offset(), 3);
}

#[test]
fn a_stop_that_truncates_admits_only_the_barrier() {
    let log = log_with_an_open_transaction();
    log.set_write_mode(WriteMode::BarrierOnly);
    let why = refused(
        &log,
        marker(ControlRecordType::Abort, 7, 2),
        AppendOrigin::Coordinator,
    );
    assert!(why.contains("only its MIRROR_PID_RESET barrier"), "{why}");
    assert!(log.has_open_transaction(7));
}

/// The barrier admits only itself: a coordinator set holding it beside a data batch is refused whole in
/// both stopping modes (it was admitted when any batch of the set was the barrier).
#[test]
fn a_set_holding_the_barrier_beside_another_batch_is_refused() {
    for mode in [WriteMode::BarrierOnly, WriteMode::AbortsAndBarrier] {
        let log = log_with_an_open_transaction();
        log.set_write_mode(mode);
        let mut data = BatchBuilder::new(Compression::None);
        data.append(NOW, None, Some(b"x"), &[]).unwrap();
        let mut set = data.build().unwrap();
        set.extend(
            BatchBuilder::mirror_pid_reset(NOW)
                .unwrap()
                .build()
                .unwrap(),
        );
        refused(&log, set, AppendOrigin::Coordinator);
        assert_eq!(
            log.log_end_offset(),
            1,
            "{mode:?}: nothing refused was written"
        );
    }
}
