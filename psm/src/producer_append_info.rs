//! `ProducerAppendInfo`: validates one producer's batches of one append against the state the append
//! started from, and accumulates what the append will change.
//!
//! As in Kafka, two views are kept: the stored entry as it was (`current_*`), and `updated`, its
//! epochs, transaction and timestamp without cached batches, which collects this append's batches. The
//! sequence rules read both. `updated` is not a whole `ProducerStateEntry`: the plan carries only what
//! the append changes, and applying it merges that into the stored entry in place.

use crate::batch::{
    AppendOrigin, BatchSummary, ControlKind, TransactionVersion, NO_PRODUCER_EPOCH,
};
use crate::batch_metadata::BatchMetadata;
use crate::completed_txn::CompletedTxn;
use crate::error::Error;
use crate::one_or_many::OneOrMany;
use crate::producer_state_entry::ProducerStateEntry;
use crate::sequence::{in_sequence, NO_SEQUENCE};

/// Set by the manager once the transaction index is updated in order.
const LAST_STABLE_OFFSET_PENDING: i64 = -1;

/// [`ProducerAppendInfo::replay_data_batch`]'s refusal: a non-transactional batch while the
/// producer's transaction is open ([`Error::InvalidTxnState`]; the caller names the batch). A unit, so
/// the in-place replay returns in registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TransactionStillOpen;

#[derive(Debug, Clone)]
pub(crate) struct ProducerAppendInfo {
    producer_id: i64,
    origin: AppendOrigin,
    /// What the coordinator said its markers were written under; data batches are always checked as
    /// `TV_UNKNOWN`.
    transaction_version: TransactionVersion,
    /// `currentEntry.producerEpoch()`: −1 for a producer the partition does not know.
    current_epoch: i16,
    /// Where the stored entry was in the producer table when the plan was made (a hint: applying
    /// checks the producer id found there).
    bucket: Option<usize>,
    /// The first offset of the transaction the stored entry had open (`-1`: none).
    current_txn_first_offset: i64,
    /// `currentEntry.lastSeq()`.
    current_last_seq: i32,
    updated: UpdatedEntry,
}

/// Kafka's `updatedEntry` (`withProducerIdAndBatchMetadata(producerId, Optional.empty())` of the
/// current entry), with the batches of this append since its last epoch change.
#[derive(Debug, Clone)]
struct UpdatedEntry {
    /// `-1` when no transaction is open.
    current_txn_first_offset: i64,
    last_timestamp: i64,
    coordinator_epoch: i32,
    producer_epoch: i16,
    /// Oldest first; only the last five reach the stored entry.
    batches: OneOrMany<BatchMetadata>,
}

impl UpdatedEntry {
    fn of(current: Option<&ProducerStateEntry>) -> Self {
        match current {
            Some(entry) => UpdatedEntry {
                current_txn_first_offset: entry.current_txn_first_offset().unwrap_or(-1),
                last_timestamp: entry.last_timestamp(),
                coordinator_epoch: entry.coordinator_epoch(),
                producer_epoch: entry.producer_epoch(),
                batches: OneOrMany::Empty,
            },
            None => UpdatedEntry {
                current_txn_first_offset: -1,
                last_timestamp: -1,
                coordinator_epoch: -1,
                producer_epoch: NO_PRODUCER_EPOCH,
                batches: OneOrMany::Empty,
            },
        }
    }

    fn producer_epoch(&self) -> i16 {
        self.producer_epoch
    }

    fn coordinator_epoch(&self) -> i32 {
        self.coordinator_epoch
    }

    fn current_txn_first_offset(&self) -> Option<i64> {
        (self.current_txn_first_offset >= 0).then_some(self.current_txn_first_offset)
    }

    fn set_current_txn_first_offset(&mut self, first_offset: i64) {
        self.current_txn_first_offset = first_offset;
    }

    fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    fn last_seq(&self) -> i32 {
        self.batches
            .as_slice()
            .last()
            .map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    /// `maybeUpdateProducerEpoch`: a new epoch forgets the batches.
    fn maybe_update_producer_epoch(&mut self, producer_epoch: i16) {
        if self.producer_epoch != producer_epoch {
            self.batches = OneOrMany::Empty;
            self.producer_epoch = producer_epoch;
        }
    }

    /// `addBatch`.
    fn add_batch(&mut self, producer_epoch: i16, batch: BatchMetadata) {
        self.maybe_update_producer_epoch(producer_epoch);
        self.batches.push(batch);
        self.last_timestamp = batch.timestamp;
    }

    /// `update(epoch, coordinatorEpoch, lastTimestamp)` after a marker.
    fn end_transaction(&mut self, producer_epoch: i16, coordinator_epoch: i32, timestamp: i64) {
        self.maybe_update_producer_epoch(producer_epoch);
        self.coordinator_epoch = coordinator_epoch;
        self.current_txn_first_offset = -1;
        self.last_timestamp = timestamp;
    }
}

impl ProducerAppendInfo {
    /// `prepareUpdate`: starts from the stored entry, or an empty one.
    pub(crate) fn new(
        producer_id: i64,
        stored: Option<(usize, &ProducerStateEntry)>,
        origin: AppendOrigin,
        transaction_version: TransactionVersion,
    ) -> Self {
        let current = stored.map(|(_, entry)| entry);
        ProducerAppendInfo {
            producer_id,
            origin,
            transaction_version,
            bucket: stored.map(|(bucket, _)| bucket),
            current_txn_first_offset: current
                .and_then(ProducerStateEntry::current_txn_first_offset)
                .unwrap_or(-1),
            current_epoch: current.map_or(NO_PRODUCER_EPOCH, ProducerStateEntry::producer_epoch),
            current_last_seq: current.map_or(NO_SEQUENCE, ProducerStateEntry::last_seq),
            updated: UpdatedEntry::of(current),
        }
    }

    pub(crate) fn producer_id(&self) -> i64 {
        self.producer_id
    }

    /// `append(batch)`: a data batch or a control batch of this producer.
    pub(crate) fn append(&mut self, batch: &BatchSummary) -> Result<Option<CompletedTxn>, Error> {
        match batch.control {
            None => self.append_data_batch(batch).map(|()| None),
            Some(ControlKind::Empty) => Ok(None),
            Some(ControlKind::Commit { coordinator_epoch }) => {
                self.append_end_txn_marker(batch, coordinator_epoch, false)
            }
            Some(ControlKind::Abort { coordinator_epoch }) => {
                self.append_end_txn_marker(batch, coordinator_epoch, true)
            }
            Some(ControlKind::MirrorPidReset | ControlKind::Other) => {
                Err(Error::InvalidTransactionMarker {
                    producer_id: self.producer_id,
                    offset: batch.first_offset,
                })
            }
        }
    }

    /// Merges the append into the producer's stored entry (`update(nextEntry)`; a new producer's
    /// entry starts empty).
    pub(crate) fn merge_into(&self, entry: &mut ProducerStateEntry) {
        let updated = &self.updated;
        entry.update(
            updated.producer_epoch,
            updated.batches.as_slice(),
            updated.coordinator_epoch,
            updated.current_txn_first_offset,
            updated.last_timestamp,
        );
    }

    /// Where the stored entry was when the plan was made, if it was stored.
    pub(crate) fn bucket(&self) -> Option<usize> {
        self.bucket
    }

    /// The first offset of the transaction the append leaves open, if the append opened it (one that
    /// was open before is already tracked). With the first offsets of the transactions the append's
    /// markers ended, it covers every transaction the append opened.
    pub(crate) fn opened_transaction(&self) -> Option<i64> {
        self.updated
            .current_txn_first_offset()
            .filter(|&first_offset| first_offset != self.current_txn_first_offset)
    }

    /// [`append`](Self::append) of a data batch (`control` is `None`).
    pub(crate) fn append_data_batch(&mut self, batch: &BatchSummary) -> Result<(), Error> {
        let first_offset = batch.first_offset;
        self.check_producer_epoch(
            batch.producer_epoch,
            first_offset,
            TransactionVersion::UNKNOWN,
        )?;
        if self.origin == AppendOrigin::Client {
            self.check_sequence(batch.producer_epoch, batch.first_sequence, first_offset)?;
        }
        self.updated
            .add_batch(batch.producer_epoch, BatchMetadata::of_data_batch(batch));
        match (
            self.updated.current_txn_first_offset(),
            batch.is_transactional,
        ) {
            (Some(_), false) => Err(Error::InvalidTxnState {
                producer_id: self.producer_id,
                offset: first_offset,
            }),
            (None, true) => {
                self.updated.set_current_txn_first_offset(first_offset);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// [`append_data_batch`](Self::append_data_batch) of one batch as a replica appends it
    /// ([`AppendOrigin::Replication`]: no epoch or sequence check) followed by
    /// [`merge_into`](Self::merge_into), done on the stored `entry` in place: what recovery does for
    /// most batches of a log. Returns the first offset of the transaction the batch opened; on an error
    /// the entry is unchanged.
    #[inline]
    pub(crate) fn replay_data_batch(
        entry: &mut ProducerStateEntry,
        batch: &BatchSummary,
    ) -> Result<Option<i64>, TransactionStillOpen> {
        let open = entry.current_txn_first_offset().is_some();
        if open && !batch.is_transactional {
            return Err(TransactionStillOpen);
        }
        entry.add_batch(batch.producer_epoch, BatchMetadata::of_data_batch(batch));
        if open || !batch.is_transactional {
            return Ok(None);
        }
        entry.open_transaction(batch.first_offset);
        Ok(Some(batch.first_offset))
    }

    fn append_end_txn_marker(
        &mut self,
        batch: &BatchSummary,
        coordinator_epoch: i32,
        is_aborted: bool,
    ) -> Result<Option<CompletedTxn>, Error> {
        let offset = batch.first_offset;
        self.check_producer_epoch(batch.producer_epoch, offset, self.transaction_version)?;
        self.check_coordinator_epoch(coordinator_epoch, offset)?;
        // A marker without data in the transaction changes neither the LSO nor the .txnindex.
        let completed = self
            .updated
            .current_txn_first_offset()
            .map(|first_offset| CompletedTxn {
                producer_id: self.producer_id,
                first_offset,
                last_offset: offset,
                is_aborted,
                last_stable_offset: LAST_STABLE_OFFSET_PENDING,
            });
        self.updated
            .end_transaction(batch.producer_epoch, coordinator_epoch, batch.max_timestamp);
        Ok(completed)
    }

    /// `checkProducerEpoch`: an older epoch is fenced; under transaction version 2 a marker's epoch must
    /// also be above the producer's (the coordinator bumps it before each marker), so a late duplicate
    /// ABORT of the previous transaction cannot end the next one. Two exceptions, as in Kafka:
    /// replication only copies what the leader accepted (and cannot know the version), and a TV2 marker
    /// at the current epoch when no transaction is open is a retry of one already written (KAFKA-19999).
    fn check_producer_epoch(
        &self,
        producer_epoch: i16,
        offset: i64,
        transaction_version: TransactionVersion,
    ) -> Result<(), Error> {
        let current_epoch = self.updated.producer_epoch();
        let invalid = if transaction_version.marker_bumps_epoch() {
            producer_epoch <= current_epoch
        } else {
            producer_epoch < current_epoch
        };
        let marker_retry = transaction_version.marker_bumps_epoch()
            && producer_epoch == current_epoch
            && self.updated.current_txn_first_offset().is_none();
        if !invalid || marker_retry || self.origin == AppendOrigin::Replication {
            return Ok(());
        }
        Err(Error::InvalidProducerEpoch {
            producer_id: self.producer_id,
            offset,
            producer_epoch,
            current_epoch,
            transaction_version,
        })
    }

    /// `checkSequence` (client appends only).
    fn check_sequence(
        &self,
        producer_epoch: i16,
        first_seq: i32,
        offset: i64,
    ) -> Result<(), Error> {
        let updated_epoch = self.updated.producer_epoch();
        if producer_epoch != updated_epoch {
            if first_seq != 0 && updated_epoch != NO_PRODUCER_EPOCH {
                return Err(Error::InvalidSequenceForNewEpoch {
                    producer_id: self.producer_id,
                    offset,
                    producer_epoch,
                    sequence: first_seq,
                    current_epoch: updated_epoch,
                });
            }
            return Ok(());
        }
        let last_seq = if !self.updated.is_empty() {
            self.updated.last_seq()
        } else if producer_epoch == self.current_epoch {
            self.current_last_seq
        } else {
            NO_SEQUENCE
        };
        // A producer the partition does not know (its records were deleted, or it expired) may continue
        // with any sequence: that is how Kafka lets it resume.
        if self.current_epoch != NO_PRODUCER_EPOCH && !in_sequence(last_seq, first_seq) {
            return Err(Error::OutOfOrderSequence {
                producer_id: self.producer_id,
                offset,
                sequence: first_seq,
                last_sequence: last_seq,
            });
        }
        Ok(())
    }

    fn check_coordinator_epoch(&self, coordinator_epoch: i32, offset: i64) -> Result<(), Error> {
        let current = self.updated.coordinator_epoch();
        if current > coordinator_epoch && self.origin != AppendOrigin::Replication {
            return Err(Error::TransactionCoordinatorFenced {
                producer_id: self.producer_id,
                offset,
                coordinator_epoch,
                current_coordinator_epoch: current,
            });
        }
        Ok(())
    }
}
