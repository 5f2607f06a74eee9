//! Batch builders and an append helper shared by the integration tests.
#![allow(dead_code)]

use klog_psm::{
    increment_sequence, AppendOrigin, BatchSummary, CompletedTxn, ControlKind, DuplicateBatch,
    Error, ProducerStateManager, PsmConfig, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
};

/// The timestamp every builder gives a batch unless told otherwise.
pub fn default_timestamp(first_offset: i64) -> i64 {
    1_000 + first_offset
}

/// A non-transactional data batch of `records` records.
pub fn data(
    producer_id: i64,
    epoch: i16,
    first_seq: i32,
    first_offset: i64,
    records: i32,
) -> BatchSummary {
    BatchSummary {
        producer_id,
        producer_epoch: epoch,
        first_sequence: first_seq,
        last_sequence: if first_seq == NO_SEQUENCE {
            NO_SEQUENCE
        } else {
            increment_sequence(first_seq, records - 1)
        },
        first_offset,
        last_offset: first_offset + i64::from(records) - 1,
        max_timestamp: default_timestamp(first_offset),
        is_transactional: false,
        control: None,
    }
}

/// A transactional data batch.
pub fn txn(
    producer_id: i64,
    epoch: i16,
    first_seq: i32,
    first_offset: i64,
    records: i32,
) -> BatchSummary {
    BatchSummary {
        is_transactional: true,
        ..data(producer_id, epoch, first_seq, first_offset, records)
    }
}

fn marker(producer_id: i64, epoch: i16, offset: i64, control: ControlKind) -> BatchSummary {
    BatchSummary {
        producer_id,
        producer_epoch: epoch,
        first_sequence: NO_SEQUENCE,
        last_sequence: NO_SEQUENCE,
        first_offset: offset,
        last_offset: offset,
        max_timestamp: default_timestamp(offset),
        is_transactional: true,
        control: Some(control),
    }
}

pub fn commit(producer_id: i64, epoch: i16, coordinator_epoch: i32, offset: i64) -> BatchSummary {
    marker(
        producer_id,
        epoch,
        offset,
        ControlKind::Commit { coordinator_epoch },
    )
}

pub fn abort(producer_id: i64, epoch: i16, coordinator_epoch: i32, offset: i64) -> BatchSummary {
    marker(
        producer_id,
        epoch,
        offset,
        ControlKind::Abort { coordinator_epoch },
    )
}

/// A control batch of another kind (KRaft, unknown) for `producer_id`.
pub fn other_control(producer_id: i64, offset: i64) -> BatchSummary {
    BatchSummary {
        is_transactional: false,
        ..marker(producer_id, 0, offset, ControlKind::Other)
    }
}

/// The KIP-1279 barrier as the leader writes it: producer id −1, not transactional.
pub fn mirror_pid_reset(offset: i64) -> BatchSummary {
    BatchSummary {
        producer_epoch: NO_PRODUCER_EPOCH,
        is_transactional: false,
        ..marker(
            NO_PRODUCER_ID,
            NO_PRODUCER_EPOCH,
            offset,
            ControlKind::MirrorPidReset,
        )
    }
}

pub fn at(batch: BatchSummary, timestamp: i64) -> BatchSummary {
    BatchSummary {
        max_timestamp: timestamp,
        ..batch
    }
}

pub fn psm() -> ProducerStateManager {
    ProducerStateManager::new(PsmConfig::default())
}

/// What an append came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub duplicate: Option<DuplicateBatch>,
    pub completed: Vec<CompletedTxn>,
}

/// Plans, "writes", applies, and moves the map end offset, as the partition log does.
pub fn append(
    psm: &mut ProducerStateManager,
    origin: AppendOrigin,
    batches: &[BatchSummary],
) -> Result<Outcome, Error> {
    let plan = psm.plan_append(batches, origin)?;
    let duplicate = plan.duplicate;
    let completed = psm.apply(plan);
    if duplicate.is_none() {
        if let Some(last) = batches.iter().map(|b| b.last_offset).max() {
            psm.update_map_end_offset(last + 1);
        }
    }
    psm.assert_invariants();
    Ok(Outcome {
        duplicate,
        completed,
    })
}

/// Appends and expects success.
pub fn ok(
    psm: &mut ProducerStateManager,
    origin: AppendOrigin,
    batches: &[BatchSummary],
) -> Outcome {
    match append(psm, origin, batches) {
        Ok(outcome) => outcome,
        Err(error) => panic!("append of {batches:?} failed: {error}"),
    }
}

/// Appends and expects an error, checking the state did not change.
pub fn refused(
    psm: &mut ProducerStateManager,
    origin: AppendOrigin,
    batches: &[BatchSummary],
) -> Error {
    let before = psm.snapshot();
    let first_unstable = psm.first_unstable_offset();
    match append(psm, origin, batches) {
        Ok(outcome) => panic!("append of {batches:?} succeeded: {outcome:?}"),
        Err(error) => {
            assert_eq!(psm.snapshot(), before, "a refused append changed the state");
            assert_eq!(psm.first_unstable_offset(), first_unstable);
            error
        }
    }
}
