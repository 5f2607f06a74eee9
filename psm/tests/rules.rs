//! One test per producer-state rule (spec §5.2-5.8, kip-1279 §5.4); each fails if its rule is removed.

mod common;

use common::*;
use klog_psm::AppendOrigin::{Client, Coordinator, Replication};
use klog_psm::{
    BatchMetadata, CompletedTxn, DuplicateBatch, Error, ProducerStateManager, PsmConfig,
    SnapshotEntry, TransactionVersion,
};

// ---------------------------------------------------------------------------------------------------
// Epoch fencing

#[test]
fn epoch_fencing_rejects_an_older_epoch_from_a_client() {
    let mut psm = psm();
    ok(&mut psm, Client, &[data(1, 5, 0, 0, 1)]);
    let error = refused(&mut psm, Client, &[data(1, 4, 0, 1, 1)]);
    assert_eq!(
        error,
        Error::InvalidProducerEpoch {
            producer_id: 1,
            offset: 1,
            producer_epoch: 4,
            current_epoch: 5,
            transaction_version: TransactionVersion::UNKNOWN,
        }
    );
    assert_eq!(error.kafka_error_name(), "INVALID_PRODUCER_EPOCH");
    assert_eq!(
        error.to_string(),
        "Epoch of producer 1 at offset 1 is 4, which is smaller than the last seen epoch 5"
    );
}

#[test]
fn epoch_fencing_rejects_an_older_epoch_from_the_coordinator() {
    let mut psm = psm();
    ok(&mut psm, Coordinator, &[data(1, 5, 0, 0, 1)]);
    let error = refused(&mut psm, Coordinator, &[data(1, 4, 0, 1, 1)]);
    assert_eq!(error.kafka_error_name(), "INVALID_PRODUCER_EPOCH");
}

#[test]
fn epoch_fencing_applies_to_earlier_batches_of_the_same_request() {
    let mut psm = psm();
    let error = refused(
        &mut psm,
        Client,
        &[data(1, 5, 0, 0, 1), data(1, 4, 0, 1, 1)],
    );
    assert!(
        matches!(
            error,
            Error::InvalidProducerEpoch {
                current_epoch: 5,
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn replication_accepts_an_older_epoch_and_adopts_it() {
    let mut psm = psm();
    ok(&mut psm, Replication, &[data(1, 5, 0, 0, 2)]);
    ok(&mut psm, Replication, &[data(1, 4, 7, 2, 1)]);
    let entry = psm.producer(1).expect("producer 1");
    assert_eq!(entry.producer_epoch(), 4);
    assert_eq!(
        entry.batch_metadata().count(),
        1,
        "a changed epoch clears the cached batches"
    );
    assert_eq!(entry.last_seq(), 7);
}

// ---------------------------------------------------------------------------------------------------
// Sequences (client appends)

#[test]
fn sequence_must_follow_the_last_sequence() {
    let mut psm = psm();
    ok(&mut psm, Client, &[data(1, 0, 0, 0, 3)]);
    let error = refused(&mut psm, Client, &[data(1, 0, 4, 3, 1)]);
    assert_eq!(
        error,
        Error::OutOfOrderSequence {
            producer_id: 1,
            offset: 3,
            sequence: 4,
            last_sequence: 2
        }
    );
    assert_eq!(error.kafka_error_name(), "OUT_OF_ORDER_SEQUENCE_NUMBER");
    assert_eq!(
        error.to_string(),
        "Out of order sequence number for producer 1 at offset 3: 4 (incoming seq. number), 2 (current end \
         sequence number)"
    );
    ok(&mut psm, Client, &[data(1, 0, 3, 3, 1)]);
}

#[test]
fn coordinator_and_replication_appends_are_not_sequence_checked() {
    let mut psm = psm();
    ok(&mut psm, Client, &[data(1, 0, 0, 0, 3)]);
    ok(&mut psm, Coordinator, &[data(1, 0, 50, 3, 1)]);
    ok(&mut psm, Replication, &[data(1, 0, 9, 4, 1)]);
    assert_eq!(psm.producer(1).map(|e| e.last_seq()), Some(9));
}

#[test]
fn sequence_wraps_from_int_max_to_zero() {
    let mut psm = psm();
    ok(&mut psm, Client, &[data(1, 0, i32::MAX - 1, 0, 2)]);
    assert_eq!(psm.producer(1).map(|e| e.last_seq()), Some(i32::MAX));
    let error = refused(&mut psm, Client, &[data(1, 0, 1, 2, 1)]);
    assert!(
        matches!(
            error,
            Error::OutOfOrderSequence {
                last_sequence: i32::MAX,
                ..
            }
        ),
        "{error:?}"
    );
    ok(&mut psm, Client, &[data(1, 0, 0, 2, 3)]);
    assert_eq!(psm.producer(1).map(|e| e.last_seq()), Some(2));
}

#[test]
fn a_batch_may_span_the_sequence_wrap() {
    let mut psm = psm();
    ok(&mut psm, Client, &[data(1, 0, i32::MAX - 1, 0, 1)]);
    let spanning = data(1, 0, i32::MAX, 1, 3);
    assert_eq!(spanning.last_sequence, 1);
    ok(&mut psm, Client, &[spanning]);
    let entry = psm.producer(1).expect("producer 1");
    assert_eq!(entry.last_seq(), 1);
    assert_eq!(
        entry.batch_metadata().last().map(|b| b.first_seq()),
        Some(i32::MAX)
    );
    ok(&mut psm, Client, &[data(1, 0, 2, 4, 1)]);
}

#[test]
fn a_new_epoch_must_start_at_sequence_zero() {
    let mut psm = psm();
    ok(&mut psm, Client, &[data(1, 0, 0, 0, 3)]);
    let error = refused(&mut psm, Client, &[data(1, 1, 3, 3, 1)]);
    assert_eq!(
        error,
        Error::InvalidSequenceForNewEpoch {
            producer_id: 1,
            offset: 3,
            producer_epoch: 1,
            sequence: 3,
            current_epoch: 0
        }
    );
    assert_eq!(error.kafka_error_name(), "OUT_OF_ORDER_SEQUENCE_NUMBER");
    ok(&mut psm, Client, &[data(1, 1, 0, 3, 1)]);
    assert_eq!(psm.producer(1).map(|e| e.producer_epoch()), Some(1));
}

#[test]
fn an_unknown_producer_may_start_at_any_sequence() {
    let mut psm = psm();
    ok(&mut psm, Client, &[data(1, 3, 42, 0, 1)]);
    assert_eq!(psm.producer(1).map(|e| e.last_seq()), Some(42));
    refused(&mut psm, Client, &[data(1, 3, 44, 1, 1)]);
}

#[test]
fn an_unknown_producer_is_not_sequence_checked_for_its_whole_first_request() {
    // Kafka exempts the request from continuity while the stored epoch is -1 (checkSequence reads
    // currentEntry.producerEpoch()), even for its second batch.
    let mut psm = psm();
    ok(
        &mut psm,
        Client,
        &[data(1, 3, 42, 0, 1), data(1, 3, 100, 1, 1)],
    );
    assert_eq!(psm.producer(1).map(|e| e.last_seq()), Some(100));
    refused(&mut psm, Client, &[data(1, 3, 200, 2, 1)]);
}

#[test]
fn earlier_batches_of_a_request_set_the_expected_sequence() {
    let mut psm = psm();
    ok(&mut psm, Client, &[data(1, 0, 0, 0, 3)]);
    ok(
        &mut psm,
        Client,
        &[data(1, 0, 3, 3, 2), data(1, 0, 5, 5, 1)],
    );
    let error = refused(
        &mut psm,
        Client,
        &[data(1, 0, 6, 6, 2), data(1, 0, 6, 8, 2)],
    );
    assert_eq!(
        error,
        Error::OutOfOrderSequence {
            producer_id: 1,
            offset: 8,
            sequence: 6,
            last_sequence: 7
        }
    );
}

#[test]
fn a_marker_earlier_in_the_request_resets_the_expected_sequence() {
    // After a marker with a new epoch the updated entry has no batches and its epoch differs from the
    // stored one, so Kafka expects sequence 0 (NO_SEQUENCE + 1), not the stored last sequence + 1.
    let mut psm = psm();
    ok(&mut psm, Client, &[data(1, 0, 0, 0, 6)]);
    let error = refused(&mut psm, Client, &[commit(1, 1, 0, 6), data(1, 1, 6, 7, 1)]);
    assert_eq!(
        error,
        Error::OutOfOrderSequence {
            producer_id: 1,
            offset: 7,
            sequence: 6,
            last_sequence: -1
        }
    );
    ok(&mut psm, Client, &[commit(1, 1, 0, 6), data(1, 1, 0, 7, 1)]);
}

// ---------------------------------------------------------------------------------------------------
// Duplicates (client appends)

/// Six batches of two records: sequences 0-1, 2-3, ... 10-11 at offsets 0-1, 2-3, ...
fn six_batches(psm: &mut ProducerStateManager) {
    for i in 0..6 {
        ok(psm, Client, &[data(1, 0, i * 2, i64::from(i) * 2, 2)]);
    }
}

#[test]
fn a_retry_of_one_of_the_last_five_batches_is_a_duplicate() {
    let mut psm = psm();
    six_batches(&mut psm);
    let before = psm.snapshot();
    let retry = data(1, 0, 2, 100, 2);
    let outcome = ok(&mut psm, Client, &[retry]);
    assert_eq!(
        outcome.duplicate,
        Some(DuplicateBatch {
            first_offset: 2,
            last_offset: 3,
            timestamp: default_timestamp(2)
        })
    );
    assert!(outcome.completed.is_empty());
    assert_eq!(psm.snapshot(), before);
    assert_eq!(psm.producer(1).map(|e| e.batch_metadata().count()), Some(5));
}

#[test]
fn a_retry_older_than_the_last_five_batches_is_out_of_order() {
    let mut psm = psm();
    six_batches(&mut psm);
    let error = refused(&mut psm, Client, &[data(1, 0, 0, 100, 2)]);
    assert!(
        matches!(
            error,
            Error::OutOfOrderSequence {
                sequence: 0,
                last_sequence: 11,
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn a_retry_with_another_epoch_is_not_a_duplicate() {
    let mut psm = psm();
    ok(&mut psm, Client, &[data(1, 0, 0, 0, 2)]);
    ok(&mut psm, Client, &[data(1, 1, 0, 2, 2)]);
    let error = refused(&mut psm, Client, &[data(1, 0, 0, 4, 2)]);
    assert_eq!(error.kafka_error_name(), "INVALID_PRODUCER_EPOCH");
}

#[test]
fn a_retry_must_match_the_sequence_range_exactly() {
    let mut psm = psm();
    ok(&mut psm, Client, &[data(1, 0, 0, 0, 5)]);
    let shorter = refused(&mut psm, Client, &[data(1, 0, 0, 5, 3)]);
    assert_eq!(shorter.kafka_error_name(), "OUT_OF_ORDER_SEQUENCE_NUMBER");
    let same_end = refused(&mut psm, Client, &[data(1, 0, 2, 5, 3)]);
    assert_eq!(same_end.kafka_error_name(), "OUT_OF_ORDER_SEQUENCE_NUMBER");
}

#[test]
fn duplicates_are_detected_only_for_client_appends() {
    let mut psm = psm();
    ok(&mut psm, Client, &[data(1, 0, 0, 0, 2)]);
    let outcome = ok(&mut psm, Replication, &[data(1, 0, 0, 2, 2)]);
    assert_eq!(outcome.duplicate, None);
    let ranges: Vec<(i32, i32)> = psm
        .producer(1)
        .expect("producer 1")
        .batch_metadata()
        .map(|b| (b.first_seq(), b.last_seq))
        .collect();
    assert_eq!(ranges, vec![(0, 1), (0, 1)]);
}

#[test]
fn a_duplicate_anywhere_in_a_request_makes_the_whole_request_a_duplicate() {
    let mut psm = psm();
    ok(&mut psm, Client, &[data(1, 0, 0, 0, 2)]);
    let before = psm.snapshot();
    let outcome = ok(
        &mut psm,
        Client,
        &[data(2, 0, 0, 2, 1), data(1, 0, 0, 3, 2)],
    );
    assert_eq!(outcome.duplicate.map(|d| d.first_offset), Some(0));
    assert_eq!(psm.snapshot(), before, "producer 2 is not recorded either");
}

#[test]
fn duplicates_are_searched_in_the_stored_entry_not_in_the_request() {
    let mut psm = psm();
    ok(&mut psm, Client, &[data(1, 0, 0, 0, 2)]);
    let error = refused(
        &mut psm,
        Client,
        &[data(1, 0, 2, 2, 2), data(1, 0, 2, 4, 2)],
    );
    assert!(
        matches!(
            error,
            Error::OutOfOrderSequence {
                sequence: 2,
                last_sequence: 3,
                ..
            }
        ),
        "{error:?}"
    );
}

// ---------------------------------------------------------------------------------------------------
// Transactions

#[test]
fn a_non_transactional_batch_during_a_transaction_is_invalid_txn_state() {
    let mut psm = psm();
    ok(&mut psm, Client, &[txn(1, 0, 0, 0, 1)]);
    let error = refused(&mut psm, Client, &[data(1, 0, 1, 1, 1)]);
    assert_eq!(
        error,
        Error::InvalidTxnState {
            producer_id: 1,
            offset: 1
        }
    );
    assert_eq!(error.kafka_error_name(), "INVALID_TXN_STATE");
    assert_eq!(
        error.to_string(),
        "Expected transactional write from producer 1 at offset 1"
    );
}

#[test]
fn a_replicated_non_transactional_batch_during_a_transaction_is_invalid_txn_state_too() {
    let mut psm = psm();
    ok(&mut psm, Replication, &[txn(1, 0, 0, 0, 1)]);
    let error = refused(&mut psm, Replication, &[data(1, 0, 1, 1, 1)]);
    assert_eq!(error.kafka_error_name(), "INVALID_TXN_STATE");
}

#[test]
fn the_first_transactional_batch_starts_a_transaction() {
    let mut psm = psm();
    ok(&mut psm, Client, &[data(2, 0, 0, 5, 1)]);
    assert_eq!(psm.first_unstable_offset(), None);
    ok(&mut psm, Client, &[txn(1, 0, 0, 10, 2)]);
    ok(&mut psm, Client, &[txn(1, 0, 2, 12, 2)]);
    assert_eq!(
        psm.producer(1).and_then(|e| e.current_txn_first_offset()),
        Some(10)
    );
    assert_eq!(psm.first_unstable_offset(), Some(10));
    assert_eq!(psm.first_undecided_offset(), Some(10));
}

#[test]
fn a_commit_marker_completes_the_transaction() {
    let mut psm = psm();
    ok(&mut psm, Client, &[txn(1, 0, 0, 10, 2)]);
    let outcome = ok(&mut psm, Coordinator, &[commit(1, 0, 0, 12)]);
    assert_eq!(
        outcome.completed,
        vec![CompletedTxn {
            producer_id: 1,
            first_offset: 10,
            last_offset: 12,
            is_aborted: false,
            last_stable_offset: 13
        }]
    );
    assert_eq!(psm.first_undecided_offset(), None);
    assert_eq!(
        psm.first_unstable_offset(),
        Some(10),
        "unstable until the high watermark passes"
    );
}

#[test]
fn an_abort_marker_completes_an_aborted_transaction() {
    let mut psm = psm();
    ok(&mut psm, Client, &[txn(1, 0, 0, 10, 2)]);
    let outcome = ok(&mut psm, Coordinator, &[abort(1, 0, 0, 12)]);
    assert_eq!(outcome.completed.len(), 1);
    assert!(outcome.completed[0].is_aborted);
    let entry = outcome.completed[0].aborted_txn_entry();
    assert_eq!(&entry[..2], &[0, 0]);
    assert_eq!(entry[26..34], 13i64.to_be_bytes());
}

#[test]
fn a_marker_with_an_older_producer_epoch_is_fenced() {
    let mut psm = psm();
    ok(&mut psm, Client, &[txn(1, 3, 0, 10, 1)]);
    let error = refused(&mut psm, Coordinator, &[commit(1, 2, 0, 11)]);
    assert!(matches!(
        error,
        Error::InvalidProducerEpoch {
            producer_epoch: 2,
            current_epoch: 3,
            ..
        }
    ));
}

#[test]
fn a_replicated_marker_with_an_older_producer_epoch_is_accepted() {
    let mut psm = psm();
    ok(&mut psm, Replication, &[txn(1, 3, 0, 10, 1)]);
    let outcome = ok(&mut psm, Replication, &[commit(1, 2, 0, 11)]);
    assert_eq!(outcome.completed.len(), 1);
    assert_eq!(psm.producer(1).map(|e| e.producer_epoch()), Some(2));
}

#[test]
fn a_marker_from_an_older_coordinator_is_fenced() {
    let mut psm = psm();
    ok(&mut psm, Client, &[txn(1, 0, 0, 10, 1)]);
    ok(&mut psm, Coordinator, &[commit(1, 0, 7, 11)]);
    ok(&mut psm, Client, &[txn(1, 0, 1, 12, 1)]);
    let error = refused(&mut psm, Coordinator, &[abort(1, 0, 6, 13)]);
    assert_eq!(
        error,
        Error::TransactionCoordinatorFenced {
            producer_id: 1,
            offset: 13,
            coordinator_epoch: 6,
            current_coordinator_epoch: 7
        }
    );
    assert_eq!(error.kafka_error_name(), "TRANSACTION_COORDINATOR_FENCED");
    assert_eq!(
        error.to_string(),
        "Invalid coordinator epoch for producerId 1 at offset 13: 6 (zombie), 7 (current)"
    );
    ok(&mut psm, Coordinator, &[abort(1, 0, 7, 13)]);
}

#[test]
fn a_replicated_marker_from_an_older_coordinator_is_accepted() {
    let mut psm = psm();
    ok(&mut psm, Replication, &[commit(1, 0, 7, 0)]);
    ok(&mut psm, Replication, &[txn(1, 0, 0, 1, 1)]);
    let outcome = ok(&mut psm, Replication, &[abort(1, 0, 6, 2)]);
    assert_eq!(outcome.completed.len(), 1);
    assert_eq!(psm.producer(1).map(|e| e.coordinator_epoch()), Some(6));
}

#[test]
fn a_marker_without_an_open_transaction_completes_nothing() {
    let mut psm = psm();
    ok(&mut psm, Client, &[data(1, 0, 0, 0, 1)]);
    let outcome = ok(&mut psm, Coordinator, &[commit(1, 0, 0, 1)]);
    assert!(outcome.completed.is_empty());
    assert_eq!(psm.first_unstable_offset(), None);
}

#[test]
fn a_marker_keeps_its_epochs_and_timestamp_and_clears_the_transaction() {
    let mut psm = psm();
    ok(&mut psm, Client, &[at(txn(1, 0, 0, 10, 3), 5_000)]);
    ok(&mut psm, Coordinator, &[at(commit(1, 0, 4, 13), 9_000)]);
    let entry = psm.producer(1).expect("producer 1");
    assert_eq!(entry.producer_epoch(), 0);
    assert_eq!(entry.coordinator_epoch(), 4);
    assert_eq!(entry.last_timestamp(), 9_000);
    assert_eq!(entry.current_txn_first_offset(), None);
    assert_eq!(
        entry.last_seq(),
        2,
        "no batch metadata is added for a marker"
    );
    assert_eq!(entry.last_data_offset(), 12);
}

#[test]
fn a_marker_with_a_new_epoch_clears_the_cached_batches() {
    let mut psm = psm();
    ok(&mut psm, Client, &[txn(1, 0, 0, 10, 3)]);
    ok(&mut psm, Coordinator, &[abort(1, 1, 0, 13)]);
    let entry = psm.producer(1).expect("producer 1");
    assert_eq!(entry.producer_epoch(), 1);
    assert!(entry.is_empty());
    assert_eq!(entry.last_seq(), -1);
    refused(&mut psm, Client, &[data(1, 1, 3, 14, 1)]);
    ok(&mut psm, Client, &[data(1, 1, 0, 14, 1)]);
}

#[test]
fn completed_transactions_come_back_in_marker_order() {
    let mut psm = psm();
    ok(&mut psm, Client, &[txn(2, 0, 0, 10, 1)]);
    ok(&mut psm, Client, &[txn(1, 0, 0, 11, 1)]);
    let outcome = ok(
        &mut psm,
        Replication,
        &[commit(1, 0, 0, 12), abort(2, 0, 0, 13)],
    );
    let order: Vec<i64> = outcome.completed.iter().map(|t| t.producer_id).collect();
    assert_eq!(order, vec![1, 2]);
}

// ---------------------------------------------------------------------------------------------------
// Last stable offsets

#[test]
fn an_ended_transaction_is_stable_up_to_the_earliest_open_transaction_of_another_producer() {
    let mut psm = psm();
    ok(&mut psm, Client, &[txn(1, 0, 0, 10, 1)]);
    ok(&mut psm, Client, &[txn(2, 0, 0, 12, 1)]);
    ok(&mut psm, Client, &[txn(1, 0, 1, 13, 1)]);
    let first = ok(&mut psm, Coordinator, &[abort(1, 0, 0, 14)]);
    assert_eq!(first.completed[0].last_stable_offset, 12);
    let second = ok(&mut psm, Coordinator, &[abort(2, 0, 0, 15)]);
    assert_eq!(second.completed[0].last_stable_offset, 16);
}

#[test]
fn the_last_stable_offset_sees_transactions_opened_later_in_the_same_append() {
    // Kafka applies every producer update of an append before it ends the append's transactions.
    let mut psm = psm();
    ok(&mut psm, Client, &[txn(1, 0, 0, 10, 1)]);
    let outcome = ok(
        &mut psm,
        Replication,
        &[
            commit(1, 0, 0, 11),
            data(3, 0, 0, 12, 1),
            txn(2, 0, 0, 13, 1),
        ],
    );
    assert_eq!(outcome.completed[0].last_stable_offset, 13);
}

#[test]
fn the_high_watermark_releases_ended_transactions() {
    let mut psm = psm();
    ok(&mut psm, Client, &[txn(1, 0, 0, 10, 1)]);
    ok(&mut psm, Coordinator, &[commit(1, 0, 0, 11)]);
    psm.on_high_watermark_updated(11);
    assert_eq!(
        psm.first_unstable_offset(),
        Some(10),
        "marker 11 is not below the high watermark 11"
    );
    psm.on_high_watermark_updated(12);
    assert_eq!(psm.first_unstable_offset(), None);
}

#[test]
fn the_last_stable_offset_is_the_first_unstable_offset_below_the_high_watermark() {
    let mut psm = psm();
    assert_eq!(psm.last_stable_offset(7), 7);
    ok(&mut psm, Client, &[data(2, 0, 0, 0, 10)]);
    ok(&mut psm, Client, &[txn(1, 0, 0, 10, 1)]);
    assert_eq!(psm.last_stable_offset(11), 10);
    assert_eq!(psm.last_stable_offset(10), 10);
    assert_eq!(psm.last_stable_offset(8), 8);
}

#[test]
fn the_log_start_offset_drops_ended_transactions_and_raises_the_map_end_offset() {
    let mut psm = psm();
    ok(&mut psm, Client, &[txn(1, 0, 0, 10, 1)]);
    ok(&mut psm, Coordinator, &[commit(1, 0, 0, 11)]);
    assert_eq!(psm.map_end_offset(), 12);
    psm.on_log_start_offset_incremented(12);
    assert_eq!(psm.first_unstable_offset(), None);
    psm.on_log_start_offset_incremented(20);
    assert_eq!(psm.map_end_offset(), 20);
}

#[test]
fn is_empty_counts_unreplicated_transactions_as_kafka_does() {
    let mut psm = psm();
    assert!(psm.is_empty());
    ok(&mut psm, Client, &[txn(1, 0, 0, 0, 1)]);
    ok(&mut psm, Coordinator, &[commit(1, 0, 0, 1)]);
    psm.remove_expired_producers(i64::MAX / 2);
    assert_eq!(psm.len(), 0);
    assert!(
        !psm.is_empty(),
        "the commit is not yet below the high watermark"
    );
    psm.on_high_watermark_updated(2);
    assert!(psm.is_empty());
}

// ---------------------------------------------------------------------------------------------------
// Batches without producer ids, other control batches

#[test]
fn batches_without_a_producer_id_carry_no_state() {
    let mut psm = psm();
    let outcome = ok(
        &mut psm,
        Client,
        &[
            data(-1, -1, -1, 0, 3),
            commit(-1, -1, 0, 3),
            other_control(-1, 4),
            data(-5, 0, 0, 5, 1),
        ],
    );
    assert_eq!(
        outcome,
        Outcome {
            duplicate: None,
            completed: vec![]
        }
    );
    assert_eq!(psm.len(), 0);
}

#[test]
fn a_control_batch_other_than_a_marker_with_a_producer_id_is_rejected() {
    let mut psm = psm();
    let error = refused(
        &mut psm,
        Replication,
        &[data(1, 0, 0, 0, 1), other_control(1, 1)],
    );
    assert_eq!(
        error,
        Error::InvalidTransactionMarker {
            producer_id: 1,
            offset: 1
        }
    );
    assert_eq!(error.kafka_error_name(), "UNKNOWN_SERVER_ERROR");
    let barrier_with_producer = klog_psm::BatchSummary {
        producer_id: 2,
        ..mirror_pid_reset(1)
    };
    let error = refused(&mut psm, Coordinator, &[barrier_with_producer]);
    assert!(matches!(
        error,
        Error::InvalidTransactionMarker { producer_id: 2, .. }
    ));
}

#[test]
fn an_empty_control_batch_is_ignored_but_registers_its_producer() {
    let mut psm = psm();
    ok(&mut psm, Client, &[txn(1, 0, 0, 0, 1)]);
    let empty = klog_psm::BatchSummary {
        control: Some(klog_psm::ControlKind::Empty),
        ..commit(1, 0, 0, 1)
    };
    let outcome = ok(
        &mut psm,
        Replication,
        &[
            empty,
            klog_psm::BatchSummary {
                producer_id: 2,
                ..empty
            },
        ],
    );
    assert!(outcome.completed.is_empty());
    assert_eq!(
        psm.producer(1).and_then(|e| e.current_txn_first_offset()),
        Some(0)
    );
    let registered = psm
        .producer(2)
        .expect("producer 2 is registered, as Kafka's update() does");
    assert_eq!(
        (registered.producer_epoch(), registered.last_timestamp()),
        (-1, -1)
    );
}

// ---------------------------------------------------------------------------------------------------
// MIRROR_PID_RESET (kip-1279 §5.4)

#[test]
fn mirror_pid_reset_forgets_every_producer_and_transaction() {
    let mut psm = psm();
    ok(&mut psm, Client, &[txn(1, 0, 0, 0, 1)]);
    ok(&mut psm, Client, &[txn(2, 0, 0, 1, 1)]);
    ok(&mut psm, Coordinator, &[commit(2, 0, 0, 2)]);
    ok(&mut psm, Client, &[data(3, 0, 0, 3, 1)]);
    let outcome = ok(&mut psm, Coordinator, &[mirror_pid_reset(4)]);
    assert!(outcome.completed.is_empty());
    assert_eq!(psm.len(), 0);
    assert_eq!(psm.first_unstable_offset(), None);
    assert_eq!(psm.last_stable_offset(5), 5);
    assert!(psm.is_empty());
    assert_eq!(psm.map_end_offset(), 5);
}

#[test]
fn mirror_pid_reset_in_the_middle_of_an_append_keeps_only_later_producers() {
    // The prototype applied its per-call map after the loop and re-inserted producers 1 and 2.
    let mut psm = psm();
    ok(&mut psm, Replication, &[data(9, 0, 0, 0, 1)]);
    let plan = psm
        .plan_append(
            &[
                data(1, 4, 0, 1, 1),
                txn(2, 0, 0, 2, 1),
                mirror_pid_reset(3),
                data(3, 0, 0, 4, 1),
                data(1, 2, 17, 5, 1),
            ],
            Replication,
        )
        .expect("plan");
    assert!(plan.contains_mirror_pid_reset());
    psm.apply(plan);
    psm.assert_invariants();
    let producers: Vec<i64> = psm.producers().map(|(id, _)| id).collect();
    assert_eq!(producers, vec![1, 3]);
    let one = psm.producer(1).expect("producer 1");
    assert_eq!(
        (
            one.producer_epoch(),
            one.last_seq(),
            one.batch_metadata().count()
        ),
        (2, 17, 1)
    );
    assert_eq!(
        psm.first_unstable_offset(),
        None,
        "producer 2's transaction was forgotten"
    );
}

#[test]
fn a_producer_after_the_barrier_starts_from_nothing() {
    let mut psm = psm();
    ok(&mut psm, Client, &[data(1, 3, 0, 0, 1)]);
    // Without the reset, epoch 0 < 3 would be fenced.
    ok(
        &mut psm,
        Coordinator,
        &[mirror_pid_reset(1), data(1, 0, 0, 2, 1)],
    );
    assert_eq!(psm.producer(1).map(|e| e.producer_epoch()), Some(0));
}

#[test]
fn a_transaction_ended_before_the_barrier_is_returned_but_not_tracked() {
    let mut psm = psm();
    ok(&mut psm, Client, &[txn(1, 0, 0, 0, 1)]);
    ok(&mut psm, Client, &[txn(2, 0, 0, 1, 1)]);
    let outcome = ok(
        &mut psm,
        Replication,
        &[abort(1, 0, 0, 2), mirror_pid_reset(3)],
    );
    assert_eq!(
        outcome.completed,
        vec![CompletedTxn {
            producer_id: 1,
            first_offset: 0,
            last_offset: 2,
            is_aborted: true,
            last_stable_offset: 1
        }]
    );
    assert_eq!(psm.first_unstable_offset(), None);
    assert_eq!(psm.len(), 0);
}

// ---------------------------------------------------------------------------------------------------
// Expiration, bound, snapshots, truncation

#[test]
fn idle_producers_expire_at_the_expiration_time() {
    let mut psm = ProducerStateManager::new(PsmConfig {
        producer_id_expiration_ms: 1_000,
        ..PsmConfig::default()
    });
    ok(&mut psm, Client, &[at(data(1, 0, 0, 0, 1), 10_000)]);
    ok(&mut psm, Client, &[at(data(2, 0, 0, 1, 1), 10_500)]);
    assert_eq!(psm.remove_expired_producers(10_999), 0);
    assert_eq!(psm.remove_expired_producers(11_000), 1);
    assert_eq!(
        psm.producers().map(|(id, _)| id).collect::<Vec<_>>(),
        vec![2]
    );
}

#[test]
fn a_producer_with_an_open_transaction_never_expires() {
    let mut psm = ProducerStateManager::new(PsmConfig {
        producer_id_expiration_ms: 1_000,
        ..PsmConfig::default()
    });
    ok(&mut psm, Client, &[at(txn(1, 0, 0, 0, 1), 10_000)]);
    assert_eq!(psm.remove_expired_producers(1_000_000), 0);
    ok(&mut psm, Coordinator, &[at(commit(1, 0, 0, 1), 10_000)]);
    assert_eq!(psm.remove_expired_producers(1_000_000), 1);
}

#[test]
fn producers_above_the_bound_are_evicted_oldest_first_but_never_with_an_open_transaction() {
    let mut psm = ProducerStateManager::new(PsmConfig {
        max_producers: 2,
        ..PsmConfig::default()
    });
    ok(&mut psm, Client, &[at(txn(1, 0, 0, 0, 1), 100)]);
    ok(&mut psm, Client, &[at(data(2, 0, 0, 1, 1), 200)]);
    ok(&mut psm, Client, &[at(data(3, 0, 0, 2, 1), 300)]);
    assert_eq!(
        psm.producers().map(|(id, _)| id).collect::<Vec<_>>(),
        vec![1, 3]
    );
    ok(&mut psm, Client, &[at(data(4, 0, 0, 3, 1), 50)]);
    assert_eq!(
        psm.producers().map(|(id, _)| id).collect::<Vec<_>>(),
        vec![1, 3]
    );
    ok(
        &mut psm,
        Client,
        &[at(txn(5, 0, 0, 4, 1), 400), at(txn(6, 0, 0, 5, 1), 400)],
    );
    assert_eq!(
        psm.producers().map(|(id, _)| id).collect::<Vec<_>>(),
        vec![1, 5, 6],
        "only open transactions remain"
    );
}

#[test]
fn a_snapshot_keeps_only_the_last_batch_of_each_producer() {
    let mut psm = psm();
    ok(
        &mut psm,
        Client,
        &[data(7, 2, 0, 0, 3), data(7, 2, 3, 3, 2)],
    );
    ok(&mut psm, Client, &[txn(3, 0, 0, 5, 1)]);
    assert_eq!(
        psm.snapshot(),
        vec![
            SnapshotEntry {
                producer_id: 3,
                producer_epoch: 0,
                last_sequence: 0,
                last_offset: 5,
                offset_delta: 0,
                timestamp: default_timestamp(5),
                coordinator_epoch: -1,
                current_txn_first_offset: 5,
            },
            SnapshotEntry {
                producer_id: 7,
                producer_epoch: 2,
                last_sequence: 4,
                last_offset: 4,
                offset_delta: 1,
                timestamp: default_timestamp(3),
                coordinator_epoch: -1,
                current_txn_first_offset: -1,
            },
        ]
    );
    let mut reloaded = common::psm();
    reloaded.load_snapshot(psm.snapshot(), 6, 0);
    reloaded.assert_invariants();
    assert_eq!(reloaded.snapshot(), psm.snapshot());
    assert_eq!(reloaded.first_undecided_offset(), Some(5));
    assert_eq!(reloaded.map_end_offset(), 6);
    // Only the last batch survives: a retry of the first one is no longer a duplicate.
    refused(&mut reloaded, Client, &[data(7, 2, 0, 6, 3)]);
    assert!(ok(&mut reloaded, Client, &[data(7, 2, 3, 6, 2)])
        .duplicate
        .is_some());
}

#[test]
fn loading_a_snapshot_skips_expired_producers() {
    let mut psm = ProducerStateManager::new(PsmConfig {
        producer_id_expiration_ms: 1_000,
        ..PsmConfig::default()
    });
    let entry = |producer_id, timestamp, current_txn_first_offset| SnapshotEntry {
        producer_id,
        producer_epoch: 0,
        last_sequence: 0,
        last_offset: 0,
        offset_delta: 0,
        timestamp,
        coordinator_epoch: 0,
        current_txn_first_offset,
    };
    ok(&mut psm, Client, &[data(99, 0, 0, 0, 1)]);
    psm.load_snapshot(
        vec![entry(1, 9_000, -1), entry(2, 9_001, -1), entry(3, 0, 0)],
        10,
        10_000,
    );
    assert_eq!(
        psm.producers().map(|(id, _)| id).collect::<Vec<_>>(),
        vec![2, 3]
    );
    assert_eq!(psm.first_undecided_offset(), Some(0));
    assert_eq!(psm.map_end_offset(), 10);
}

#[test]
fn a_snapshot_entry_without_a_batch_has_no_batch_metadata() {
    let mut psm = psm();
    let entry = SnapshotEntry {
        producer_id: 1,
        producer_epoch: 4,
        last_sequence: -1,
        last_offset: -1,
        offset_delta: 0,
        timestamp: 5,
        coordinator_epoch: 2,
        current_txn_first_offset: -1,
    };
    psm.load_snapshot(vec![entry], 0, 0);
    let loaded = psm.producer(1).expect("producer 1");
    assert!(loaded.is_empty());
    assert_eq!(
        loaded.batch_metadata().collect::<Vec<BatchMetadata>>(),
        vec![]
    );
    assert_eq!(psm.snapshot(), vec![entry]);
}

#[test]
fn truncate_fully_forgets_everything_and_moves_the_map_end_offset() {
    let mut psm = psm();
    ok(&mut psm, Client, &[txn(1, 0, 0, 0, 1), data(2, 0, 0, 1, 1)]);
    psm.truncate_fully_and_start_at(42);
    assert_eq!(psm.len(), 0);
    assert_eq!(psm.first_unstable_offset(), None);
    assert_eq!(psm.map_end_offset(), 42);
}

// ---------------------------------------------------------------------------------------------------
// Plans

#[test]
fn planning_changes_nothing() {
    let mut psm = psm();
    ok(&mut psm, Client, &[data(1, 0, 0, 0, 1)]);
    let before = psm.snapshot();
    let plan = psm
        .plan_append(&[data(1, 0, 1, 1, 1), txn(2, 0, 0, 2, 1)], Client)
        .expect("plan");
    assert_eq!(psm.snapshot(), before);
    assert_eq!(psm.first_unstable_offset(), None);
    drop(plan);
}

#[test]
#[should_panic(expected = "applies once")]
fn a_stale_plan_panics() {
    let mut psm = psm();
    let first = psm
        .plan_append(&[data(1, 0, 0, 0, 1)], Client)
        .expect("plan");
    let second = psm
        .plan_append(&[data(2, 0, 0, 0, 1)], Client)
        .expect("plan");
    psm.apply(first);
    psm.apply(second);
}

#[test]
fn an_append_merges_into_the_stored_entry_as_kafka_does() {
    // ProducerStateEntry.update: the stored batches are cleared only if the append's final epoch
    // differs from the stored one, even if the epoch changed in between.
    let mut psm = psm();
    ok(
        &mut psm,
        Replication,
        &[data(1, 5, 0, 0, 1), data(1, 5, 1, 1, 1)],
    );
    ok(
        &mut psm,
        Replication,
        &[data(1, 6, 0, 2, 1), data(1, 5, 2, 3, 1)],
    );
    let seqs: Vec<i32> = psm
        .producer(1)
        .expect("producer 1")
        .batch_metadata()
        .map(|b| b.last_seq)
        .collect();
    assert_eq!(seqs, vec![0, 1, 2]);
}

#[test]
fn errors_map_to_kafka_codes() {
    let codes = [
        (
            Error::InvalidProducerEpoch {
                producer_id: 0,
                offset: 0,
                producer_epoch: 0,
                current_epoch: 1,
                transaction_version: TransactionVersion::UNKNOWN,
            },
            Some(47),
        ),
        (
            Error::OutOfOrderSequence {
                producer_id: 0,
                offset: 0,
                sequence: 0,
                last_sequence: 0,
            },
            Some(45),
        ),
        (
            Error::InvalidTxnState {
                producer_id: 0,
                offset: 0,
            },
            Some(48),
        ),
        (
            Error::TransactionCoordinatorFenced {
                producer_id: 0,
                offset: 0,
                coordinator_epoch: 0,
                current_coordinator_epoch: 1,
            },
            Some(52),
        ),
        (
            Error::InvalidTransactionMarker {
                producer_id: 0,
                offset: 0,
            },
            Some(-1),
        ),
    ];
    for (error, code) in codes {
        assert_eq!(error.kafka_error_code(), code, "{error:?}");
    }
}
