//! Transaction version 2 (KIP-890): the coordinator bumps the producer epoch before every marker, so
//! Kafka 4.x refuses a coordinator's TV2 marker whose epoch is not above the producer's
//! (`ProducerAppendInfo.checkProducerEpoch`). The version is not in the marker's bytes: the coordinator
//! says it; a follower or a replay cannot, and keeps the TV0/1 rule, refusing nothing.

mod common;

use common::*;
use klog_psm::AppendOrigin::{Client, Coordinator, Replication};
use klog_psm::{AppendOrigin, BatchSummary, Error, ProducerStateManager, TransactionVersion};

fn with_version(
    psm: &mut ProducerStateManager,
    origin: AppendOrigin,
    version: TransactionVersion,
    batches: &[BatchSummary],
) -> Result<Outcome, Error> {
    let plan = psm.plan_append_with_transaction_version(batches, origin, version)?;
    let completed = psm.apply(plan);
    if let Some(last) = batches.iter().map(|b| b.last_offset).max() {
        psm.update_map_end_offset(last + 1);
    }
    psm.assert_invariants();
    Ok(Outcome {
        duplicate: None,
        completed,
    })
}

/// Producer 1 ran a transaction at epoch 5, the coordinator aborted it under TV2 with epoch 6, and the
/// producer opened its next transaction at epoch 6 (offset 2).
fn next_transaction_open() -> ProducerStateManager {
    let mut psm = psm();
    ok(&mut psm, Client, &[txn(1, 5, 0, 0, 1)]);
    let ended = with_version(
        &mut psm,
        Coordinator,
        TransactionVersion::TV_2,
        &[abort(1, 6, 0, 1)],
    );
    assert_eq!(ended.unwrap().completed.len(), 1);
    ok(&mut psm, Client, &[txn(1, 6, 0, 2, 1)]);
    psm
}

#[test]
fn a_late_duplicate_tv2_abort_cannot_end_the_next_transaction() {
    let mut psm = next_transaction_open();
    let before = psm.snapshot();
    let error = with_version(
        &mut psm,
        Coordinator,
        TransactionVersion::TV_2,
        &[abort(1, 6, 0, 3)],
    )
    .unwrap_err();
    assert_eq!(
        error,
        Error::InvalidProducerEpoch {
            producer_id: 1,
            offset: 3,
            producer_epoch: 6,
            current_epoch: 6,
            transaction_version: TransactionVersion::TV_2,
        }
    );
    assert_eq!(error.kafka_error_name(), "INVALID_PRODUCER_EPOCH");
    assert_eq!(
        error.to_string(),
        "Epoch of producer 1 at offset 3 is 6, which is <= the last seen epoch 6 (TV2)"
    );
    assert_eq!(psm.snapshot(), before, "nothing changed");
    assert_eq!(
        psm.first_undecided_offset(),
        Some(2),
        "the next transaction is still open"
    );
}

#[test]
fn a_tv2_marker_with_a_bumped_epoch_ends_the_transaction() {
    let mut psm = next_transaction_open();
    let outcome = with_version(
        &mut psm,
        Coordinator,
        TransactionVersion::TV_2,
        &[commit(1, 7, 0, 3)],
    )
    .unwrap();
    assert_eq!(outcome.completed.len(), 1);
    assert_eq!(outcome.completed[0].first_offset, 2);
    assert_eq!(psm.producer(1).map(|e| e.producer_epoch()), Some(7));
}

#[test]
fn a_tv2_marker_retried_after_its_transaction_ended_is_written_and_ends_nothing() {
    // KAFKA-19999: the same epoch with no transaction open is a retry of a marker already written.
    let mut psm = psm();
    ok(&mut psm, Client, &[txn(1, 5, 0, 0, 1)]);
    with_version(
        &mut psm,
        Coordinator,
        TransactionVersion::TV_2,
        &[commit(1, 6, 0, 1)],
    )
    .unwrap();
    let retry = with_version(
        &mut psm,
        Coordinator,
        TransactionVersion::TV_2,
        &[commit(1, 6, 0, 2)],
    )
    .unwrap();
    assert!(retry.completed.is_empty());
    assert_eq!(psm.producer(1).map(|e| e.producer_epoch()), Some(6));
}

#[test]
fn the_same_marker_under_tv0_or_tv1_is_accepted_as_kafka_does() {
    for version in [TransactionVersion::TV_0, TransactionVersion::TV_1] {
        let mut psm = next_transaction_open();
        let outcome = with_version(&mut psm, Coordinator, version, &[abort(1, 6, 0, 3)]).unwrap();
        assert_eq!(
            outcome.completed.len(),
            1,
            "{version:?}: legacy markers may repeat the epoch"
        );
    }
    // `plan_append` without a version keeps the TV0/1 rule.
    let mut psm = next_transaction_open();
    assert_eq!(
        ok(&mut psm, Coordinator, &[abort(1, 6, 0, 3)])
            .completed
            .len(),
        1
    );
}

#[test]
fn replication_never_refuses_a_marker_whatever_the_version() {
    // A follower sees only the bytes; Kafka's leader already checked the version (it only warns here).
    for version in [TransactionVersion::UNKNOWN, TransactionVersion::TV_2] {
        let mut psm = next_transaction_open();
        let outcome = with_version(&mut psm, Replication, version, &[abort(1, 6, 0, 3)]).unwrap();
        assert_eq!(outcome.completed.len(), 1);
    }
}

#[test]
fn data_batches_keep_the_older_epoch_rule_under_tv2() {
    // Kafka checks data batches as TV_UNKNOWN: the producer's own epoch may repeat.
    let mut psm = next_transaction_open();
    let outcome = with_version(
        &mut psm,
        Client,
        TransactionVersion::TV_2,
        &[txn(1, 6, 1, 3, 1)],
    )
    .unwrap();
    assert!(outcome.completed.is_empty());
    let error = with_version(
        &mut psm,
        Client,
        TransactionVersion::TV_2,
        &[txn(1, 5, 2, 4, 1)],
    )
    .unwrap_err();
    assert!(matches!(
        error,
        Error::InvalidProducerEpoch {
            transaction_version: TransactionVersion::UNKNOWN,
            ..
        }
    ));
}
