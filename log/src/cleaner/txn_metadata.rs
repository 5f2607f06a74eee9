//! `CleanedTransactionMetadata` (Kafka's class of that name, `storage/.../log/CleanedTransactionMetadata.java`):
//! the transaction state one cleaning pass carries from batch to batch, in log order.
//!
//! It owns the aborted transactions the pass has collected but not yet reached (ordered by first offset),
//! the producers whose aborted transaction is under way at the batch being read, and the producers that
//! wrote transactional data since their last marker. From these it decides, per batch, whether data
//! belongs to an aborted transaction (removed) and whether a COMMIT or ABORT marker may go (nothing of its
//! transaction was seen this pass). An ABORT marker that must stay has its original `AbortedTxn` queued
//! for the cleaned segment's `.txnindex` ([`CleanedTransactionMetadata::take_retained_aborted_transactions`]).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use crate::format::{ControlRecordType, RecordBatch};
use crate::txn_index::AbortedTxn;
use crate::Error;

/// An aborted transaction reached by the pass, with the last offset of its data seen so far
/// (Kafka's `AbortedTransactionMetadata`).
#[derive(Debug, Clone, Copy)]
struct OngoingAborted {
    txn: AbortedTxn,
    last_observed_batch_offset: Option<i64>,
}

/// The transaction state of one cleaning pass (Kafka's `CleanedTransactionMetadata`).
#[derive(Debug, Default, Clone)]
pub struct CleanedTransactionMetadata {
    /// Min-heap on (first offset, arrival order) of the collected aborted transactions not yet reached.
    aborted: BinaryHeap<Reverse<(i64, u64)>>,
    aborted_by_arrival: HashMap<u64, AbortedTxn>,
    arrivals: u64,
    ongoing_aborted: HashMap<i64, OngoingAborted>,
    ongoing_committed: HashSet<i64>,
    retained_aborted: Vec<AbortedTxn>,
}

impl CleanedTransactionMetadata {
    /// No transactions known.
    pub fn new() -> Self {
        Self::default()
    }

    /// Kafka's `addAbortedTransactions`: the pass adds each segment's collected aborted transactions before
    /// reading it (the same entry added twice is harmless: a producer's ongoing entry is kept once).
    pub fn add_aborted_transactions(&mut self, aborted: &[AbortedTxn]) {
        for txn in aborted {
            let arrival = self.arrivals;
            self.arrivals += 1;
            self.aborted
                .push(Reverse((txn.first_offset.get(), arrival)));
            self.aborted_by_arrival.insert(arrival, *txn);
        }
    }

    /// Kafka's `consumeAbortedTxnsUpTo`: every collected transaction starting at or before `offset` is
    /// now under way for its producer (the first one reached wins, as `computeIfAbsent`).
    fn consume_aborted_up_to(&mut self, offset: i64) {
        while let Some(Reverse((first_offset, arrival))) = self.aborted.peek().copied() {
            if first_offset > offset {
                break;
            }
            self.aborted.pop();
            if let Some(txn) = self.aborted_by_arrival.remove(&arrival) {
                self.ongoing_aborted
                    .entry(txn.producer_id.get())
                    .or_insert(OngoingAborted {
                        txn,
                        last_observed_batch_offset: None,
                    });
            }
        }
    }

    /// Kafka's `onControlBatchRead`: true when the control batch may be discarded.
    ///
    /// A control batch with no records was emptied by an earlier pass: discardable. ABORT: its producer's
    /// ongoing aborted transaction ends; the marker stays (false) only if data of that transaction was seen
    /// this pass, and then its `AbortedTxn` is queued for the cleaned `.txnindex`. COMMIT: discardable iff no
    /// transactional data of the producer was seen since its last marker. Any other type stays.
    pub fn on_control_batch_read(&mut self, batch: &RecordBatch<'_>) -> Result<bool, Error> {
        self.consume_aborted_up_to(batch.last_offset());
        // Tested before `control_record`, which treats a control batch without records as corruption.
        if batch.records_count() == 0 {
            return Ok(true);
        }
        let mut scratch = Vec::new();
        let mut records = batch.records(&mut scratch)?;
        let first = match records.next() {
            Some(record) => record?,
            None => return Ok(true),
        };
        let (_, control_type) =
            ControlRecordType::parse_key(first.key).map_err(|reason| Error::CorruptBatch {
                position: batch.position(),
                reason,
            })?;
        let producer_id = batch.producer_id();
        Ok(match control_type {
            ControlRecordType::Abort => match self.ongoing_aborted.remove(&producer_id) {
                Some(ongoing) if ongoing.last_observed_batch_offset.is_some() => {
                    self.retained_aborted.push(ongoing.txn);
                    false
                }
                _ => true,
            },
            ControlRecordType::Commit => !self.ongoing_committed.remove(&producer_id),
            _ => false,
        })
    }

    /// Kafka's `onBatchRead`: true when the (data) batch belongs to an aborted transaction.
    pub fn on_batch_read(&mut self, batch: &RecordBatch<'_>) -> bool {
        self.on_data_batch_header(
            batch.last_offset(),
            batch.producer_id(),
            batch.is_transactional(),
        )
    }

    /// [`CleanedTransactionMetadata::on_batch_read`] from the three header fields it reads (a walk that
    /// reads only the batch headers replays the state with it).
    pub fn on_data_batch_header(
        &mut self,
        last_offset: i64,
        producer_id: i64,
        transactional: bool,
    ) -> bool {
        self.consume_aborted_up_to(last_offset);
        if !transactional {
            return false;
        }
        match self.ongoing_aborted.get_mut(&producer_id) {
            Some(ongoing) => {
                ongoing.last_observed_batch_offset = Some(last_offset);
                true
            }
            None => {
                self.ongoing_committed.insert(producer_id);
                false
            }
        }
    }

    /// Kafka's `onBatchRead` for a v0/v1 entry: never transactional, so it only moves the aborted
    /// transactions reached up to `last_offset` under way.
    pub fn on_legacy_batch_read(&mut self, last_offset: i64) -> bool {
        self.consume_aborted_up_to(last_offset);
        false
    }

    /// The `AbortedTxn`s of the ABORT markers kept since the last call, in marker order: what Kafka appends
    /// to the cleaned segment's `.txnindex` (`cleanedIndex`). The pass takes them after each group.
    pub fn take_retained_aborted_transactions(&mut self) -> Vec<AbortedTxn> {
        std::mem::take(&mut self.retained_aborted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{BatchBuilder, Compression};

    const PID: i64 = 7;

    fn data_batch(base_offset: i64, count: i32, transactional: bool) -> Vec<u8> {
        let mut b = BatchBuilder::new(Compression::None)
            .base_offset(base_offset)
            .producer(PID, 0, base_offset as i32)
            .transactional(transactional);
        for i in 0..count {
            b.append(1_000 + i as i64, Some(b"k"), Some(b"v"), &[])
                .unwrap();
        }
        b.build().unwrap()
    }

    fn marker(kind: ControlRecordType, offset: i64) -> Vec<u8> {
        BatchBuilder::end_txn_marker(kind, PID, 0, 3, 2_000)
            .unwrap()
            .base_offset(offset)
            .build()
            .unwrap()
    }

    fn view(bytes: &[u8]) -> RecordBatch<'_> {
        RecordBatch::parse(bytes, 0).unwrap().0
    }

    /// Kafka's empty control header (`writeEmptyHeader`) of a marker at `offset`.
    fn empty_control(offset: i64) -> Vec<u8> {
        let mut h = marker(ControlRecordType::Commit, offset);
        h.truncate(61);
        h[8..12].copy_from_slice(&49i32.to_be_bytes());
        h[57..61].copy_from_slice(&0i32.to_be_bytes());
        let crc = crate::format::crc32c(&h[21..]);
        h[17..21].copy_from_slice(&crc.to_be_bytes());
        h
    }

    #[test]
    fn committed_data_is_kept_and_its_commit_marker_stays_while_data_was_seen() {
        let mut t = CleanedTransactionMetadata::new();
        let data = data_batch(0, 2, true);
        assert!(!t.on_batch_read(&view(&data)));
        let commit = marker(ControlRecordType::Commit, 2);
        assert!(!t.on_control_batch_read(&view(&commit)).unwrap());
        // The transaction is over: a second COMMIT of the producer with no data between may go.
        let commit2 = marker(ControlRecordType::Commit, 3);
        assert!(t.on_control_batch_read(&view(&commit2)).unwrap());
        assert!(t.take_retained_aborted_transactions().is_empty());
    }

    #[test]
    fn aborted_data_is_discarded_and_its_abort_marker_kept_with_its_index_entry() {
        let mut t = CleanedTransactionMetadata::new();
        let txn = AbortedTxn::new(PID, 10, 12, 10);
        t.add_aborted_transactions(&[txn]);
        let before = data_batch(5, 2, true);
        assert!(!t.on_batch_read(&view(&before)), "before the aborted txn");
        let commit = marker(ControlRecordType::Commit, 7);
        assert!(!t.on_control_batch_read(&view(&commit)).unwrap());
        let aborted = data_batch(10, 2, true);
        assert!(t.on_batch_read(&view(&aborted)));
        let abort = marker(ControlRecordType::Abort, 12);
        assert!(!t.on_control_batch_read(&view(&abort)).unwrap());
        assert_eq!(t.take_retained_aborted_transactions(), vec![txn]);
        assert!(t.take_retained_aborted_transactions().is_empty());
    }

    #[test]
    fn abort_marker_whose_data_is_gone_may_be_discarded() {
        let mut t = CleanedTransactionMetadata::new();
        t.add_aborted_transactions(&[AbortedTxn::new(PID, 10, 12, 10)]);
        // An earlier pass removed the data: the marker is the first batch of the transaction seen.
        let abort = marker(ControlRecordType::Abort, 12);
        assert!(t.on_control_batch_read(&view(&abort)).unwrap());
        assert!(t.take_retained_aborted_transactions().is_empty());
        // No aborted transaction known at all: an ABORT is discardable too.
        let abort2 = marker(ControlRecordType::Abort, 20);
        assert!(t.on_control_batch_read(&view(&abort2)).unwrap());
    }

    #[test]
    fn commit_marker_with_no_data_seen_may_be_discarded() {
        let mut t = CleanedTransactionMetadata::new();
        let commit = marker(ControlRecordType::Commit, 4);
        assert!(t.on_control_batch_read(&view(&commit)).unwrap());
        // Non-transactional data does not open a transaction.
        let plain = data_batch(5, 1, false);
        assert!(!t.on_batch_read(&view(&plain)));
        let commit2 = marker(ControlRecordType::Commit, 6);
        assert!(t.on_control_batch_read(&view(&commit2)).unwrap());
    }

    #[test]
    fn control_batch_without_records_was_already_cleaned() {
        let mut t = CleanedTransactionMetadata::new();
        let empty = empty_control(9);
        let batch = view(&empty);
        assert!(batch.is_control() && batch.records_count() == 0);
        assert!(t.on_control_batch_read(&batch).unwrap());
    }

    #[test]
    fn other_control_types_stay() {
        let mut t = CleanedTransactionMetadata::new();
        let reset = BatchBuilder::mirror_pid_reset(5).unwrap().build().unwrap();
        assert!(!t.on_control_batch_read(&view(&reset)).unwrap());
    }

    #[test]
    fn a_corrupt_control_key_is_an_error_naming_the_batch() {
        let mut t = CleanedTransactionMetadata::new();
        let mut b = BatchBuilder::kraft_control(ControlRecordType::LeaderChange, b"x", 1).unwrap();
        b = b.base_offset(3);
        let mut bytes = b.build().unwrap();
        // The key's version (first int16 of the key, at 61 + length + attributes + ts + offset + keylen).
        let key_at = 61 + 1 + 1 + 1 + 1 + 1;
        bytes[key_at] = 0xff;
        let crc = crate::format::crc32c(&bytes[21..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        let err = t.on_control_batch_read(&view(&bytes)).unwrap_err();
        assert!(
            matches!(err, Error::CorruptBatch { position: 0, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("control record key"), "{err}");
    }

    #[test]
    fn aborted_transactions_are_reached_in_first_offset_order() {
        let mut t = CleanedTransactionMetadata::new();
        let other = 8;
        // Added out of order, as two segments' collections may overlap.
        t.add_aborted_transactions(&[AbortedTxn::new(other, 30, 40, 30)]);
        t.add_aborted_transactions(&[
            AbortedTxn::new(PID, 10, 12, 10),
            AbortedTxn::new(PID, 10, 12, 10),
        ]);
        let mut early = BatchBuilder::new(Compression::None)
            .base_offset(20)
            .producer(other, 0, 0)
            .transactional(true);
        early.append(1, Some(b"k"), Some(b"v"), &[]).unwrap();
        let early = early.build().unwrap();
        assert!(!t.on_batch_read(&view(&early)), "other's txn starts at 30");
        let aborted = data_batch(10, 1, true);
        assert!(t.on_batch_read(&view(&aborted)));
        assert!(!t.on_legacy_batch_read(35));
        let mut late = BatchBuilder::new(Compression::None)
            .base_offset(36)
            .producer(other, 0, 1)
            .transactional(true);
        late.append(1, Some(b"k"), Some(b"v"), &[]).unwrap();
        let late = late.build().unwrap();
        assert!(
            t.on_batch_read(&view(&late)),
            "other's txn 30..40 under way"
        );
    }
}
