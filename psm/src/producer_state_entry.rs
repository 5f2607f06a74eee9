//! `ProducerStateEntry`: what the partition remembers of one producer id.

use crate::batch::NO_PRODUCER_EPOCH;
use crate::batch_metadata::BatchMetadata;
use crate::batch_metadata_queue::BatchMetadataQueue;
use crate::sequence::NO_SEQUENCE;
use crate::snapshot::SnapshotEntry;

/// `-1`, Kafka's "none" for offsets, timestamps and coordinator epochs.
const NONE: i64 = -1;

/// `expiration_lag` of an entry the expiration index holds no key for (`expiration_index.rs`).
pub(crate) const NOT_INDEXED: u16 = u16::MAX;

/// 24 bytes of fields and the 56-byte batch queue: the per-producer memory budget rests on this.
const _: () = assert!(core::mem::size_of::<ProducerStateEntry>() == 80);
/// The queue is last (`repr(C)`), so [`ProducerStateEntry::touch`] reaches the entry's last byte.
const _: () = assert!(core::mem::offset_of!(ProducerStateEntry, batch_metadata) == 24);

/// The state of one producer id (`ProducerStateEntry`): its epoch, the epoch of the last transaction
/// coordinator that wrote a marker for it, its last timestamp, its open transaction and its last five
/// batches. Read-only outside this crate: the manager keeps its indexes in step with these fields.
/// `repr(C)` keeps the producer id first and the batch queue last (see its `touch`).
#[derive(Debug, Clone)]
#[repr(C)]
pub struct ProducerStateEntry {
    producer_id: i64,
    /// `NONE` when no transaction is open (offsets are never negative).
    current_txn_first_offset: i64,
    coordinator_epoch: i32,
    producer_epoch: i16,
    /// Where the producer table's expiration index holds this entry (see `expiration_index.rs`); it
    /// lives in what would be padding, and is not part of the producer's state.
    expiration_lag: u16,
    /// The cached batches and `lastTimestamp`, which share storage.
    batch_metadata: BatchMetadataQueue,
}

/// Equal producer state; where the expiration index keeps the entry does not count.
impl PartialEq for ProducerStateEntry {
    fn eq(&self, other: &Self) -> bool {
        self.producer_id == other.producer_id
            && self.current_txn_first_offset == other.current_txn_first_offset
            && self.coordinator_epoch == other.coordinator_epoch
            && self.producer_epoch == other.producer_epoch
            && self.batch_metadata == other.batch_metadata
    }
}

impl Eq for ProducerStateEntry {}

impl ProducerStateEntry {
    /// `ProducerStateEntry.empty`: epoch −1, coordinator epoch −1, timestamp −1, no batches, no txn.
    pub(crate) fn empty(producer_id: i64) -> Self {
        ProducerStateEntry {
            producer_id,
            current_txn_first_offset: NONE,
            coordinator_epoch: -1,
            producer_epoch: NO_PRODUCER_EPOCH,
            expiration_lag: NOT_INDEXED,
            batch_metadata: BatchMetadataQueue::new(NONE),
        }
    }

    /// The producer id.
    #[inline]
    pub fn producer_id(&self) -> i64 {
        self.producer_id
    }

    /// Reads the entry's first and last bytes: a table bucket of 80 bytes at a 16-byte boundary spans
    /// two cache lines, and a prefetch that loads only the first leaves the replay to wait on the
    /// second (the batch queue). The value means nothing.
    #[inline]
    pub(crate) fn touch(&self) -> u64 {
        (self.producer_id as u64) ^ self.batch_metadata.touch()
    }

    #[inline]
    pub(crate) fn expiration_lag(&self) -> u16 {
        self.expiration_lag
    }

    #[inline]
    pub(crate) fn set_expiration_lag(&mut self, lag: u16) {
        self.expiration_lag = lag;
    }

    /// The producer's current epoch.
    #[inline]
    pub fn producer_epoch(&self) -> i16 {
        self.producer_epoch
    }

    /// The epoch of the transaction coordinator that wrote the producer's last marker.
    pub fn coordinator_epoch(&self) -> i32 {
        self.coordinator_epoch
    }

    /// The max timestamp of the last data batch, or the timestamp of the last marker.
    #[inline]
    pub fn last_timestamp(&self) -> i64 {
        self.batch_metadata.last_timestamp()
    }

    /// The first offset of the open transaction, if one is open.
    #[inline]
    pub fn current_txn_first_offset(&self) -> Option<i64> {
        (self.current_txn_first_offset >= 0).then_some(self.current_txn_first_offset)
    }

    /// The cached batches, oldest first (at most five).
    pub fn batch_metadata(&self) -> impl Iterator<Item = BatchMetadata> {
        let mut newest_first = [BatchMetadata::default(); crate::NUM_BATCHES_TO_RETAIN];
        let mut count = 0;
        for (slot, batch) in newest_first
            .iter_mut()
            .zip(self.batch_metadata.newest_first())
        {
            *slot = batch;
            count += 1;
        }
        newest_first.into_iter().take(count).rev()
    }

    /// Whether no batch is cached (Kafka's `isEmpty()`).
    pub fn is_empty(&self) -> bool {
        self.batch_metadata.is_empty()
    }

    /// The first sequence of the oldest batch kept (-1 when none is kept).
    pub fn first_seq(&self) -> i32 {
        self.batch_metadata
            .first()
            .map_or(NO_SEQUENCE, |b| b.first_seq())
    }

    /// The last sequence of the newest batch kept (-1 when none is kept).
    pub fn last_seq(&self) -> i32 {
        self.batch_metadata
            .last()
            .map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    /// The first offset of the oldest batch kept (-1 when none is kept).
    pub fn first_data_offset(&self) -> i64 {
        self.batch_metadata
            .first()
            .map_or(NONE, |b| b.first_offset())
    }

    /// The last offset of the newest batch kept (-1 when none is kept).
    pub fn last_data_offset(&self) -> i64 {
        self.batch_metadata.last().map_or(NONE, |b| b.last_offset)
    }

    /// The newest batch's last offset minus its first offset (0 when none is kept).
    pub fn last_offset_delta(&self) -> i32 {
        self.batch_metadata.last().map_or(0, |b| b.offset_delta)
    }

    /// The cached batch a retry duplicates (`findDuplicateBatch`): same epoch and exactly the same
    /// sequence range.
    pub fn find_duplicate_batch(
        &self,
        producer_epoch: i16,
        first_seq: i32,
        last_seq: i32,
    ) -> Option<BatchMetadata> {
        if producer_epoch != self.producer_epoch {
            return None;
        }
        self.batch_metadata
            .newest_first()
            .filter(|b| b.first_seq() == first_seq && b.last_seq == last_seq)
            .last()
    }

    /// Whether the older cached batches no longer fit the entry's fixed-width slots and were moved
    /// to a boxed array (96 more bytes); for memory accounting.
    pub fn has_spilled_batch_metadata(&self) -> bool {
        self.batch_metadata.is_spilled()
    }

    /// A new epoch forgets the cached batches (`maybeUpdateProducerEpoch`).
    #[inline]
    pub(crate) fn maybe_update_producer_epoch(&mut self, producer_epoch: i16) -> bool {
        if self.producer_epoch == producer_epoch {
            return false;
        }
        self.batch_metadata.clear();
        self.producer_epoch = producer_epoch;
        true
    }

    /// `addBatch`: a new epoch forgets the cached batches, then `batch` becomes the newest and its
    /// timestamp the last timestamp.
    #[inline]
    pub(crate) fn add_batch(&mut self, producer_epoch: i16, batch: BatchMetadata) {
        self.maybe_update_producer_epoch(producer_epoch);
        self.batch_metadata.push(batch);
    }

    /// Opens a transaction at `first_offset` (the manager tracks it).
    #[inline]
    pub(crate) fn open_transaction(&mut self, first_offset: i64) {
        self.current_txn_first_offset = first_offset.max(NONE);
    }

    /// Merges an append's result into the stored entry (`update(ProducerStateEntry nextEntry)`): the
    /// new epoch (clearing the cache if it changed), the append's batches (oldest first) after the
    /// cached ones, and the append's coordinator epoch, transaction (`-1`: none) and timestamp.
    pub(crate) fn update(
        &mut self,
        producer_epoch: i16,
        batches: &[BatchMetadata],
        coordinator_epoch: i32,
        current_txn_first_offset: i64,
        last_timestamp: i64,
    ) {
        self.maybe_update_producer_epoch(producer_epoch);
        let skip = batches.len().saturating_sub(crate::NUM_BATCHES_TO_RETAIN);
        for batch in &batches[skip..] {
            self.batch_metadata.push(*batch);
        }
        self.coordinator_epoch = coordinator_epoch;
        self.current_txn_first_offset = current_txn_first_offset.max(NONE);
        self.batch_metadata.set_last_timestamp(last_timestamp);
    }

    /// An entry read from a snapshot: the batch only if `last_offset >= 0`, the transaction only if its
    /// first offset is `>= 0` (`readSnapshot`).
    pub(crate) fn from_snapshot(entry: &SnapshotEntry) -> Self {
        let mut batch_metadata = BatchMetadataQueue::new(entry.timestamp);
        if entry.last_offset >= 0 {
            batch_metadata.push(BatchMetadata {
                last_seq: entry.last_sequence,
                last_offset: entry.last_offset,
                offset_delta: entry.offset_delta,
                timestamp: entry.timestamp,
            });
        }
        ProducerStateEntry {
            producer_id: entry.producer_id,
            current_txn_first_offset: entry.current_txn_first_offset.max(NONE),
            coordinator_epoch: entry.coordinator_epoch,
            producer_epoch: entry.producer_epoch,
            expiration_lag: NOT_INDEXED,
            batch_metadata,
        }
    }

    /// The snapshot form: only the newest batch survives (`writeSnapshot`).
    pub(crate) fn to_snapshot(&self) -> SnapshotEntry {
        SnapshotEntry {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            last_sequence: self.last_seq(),
            last_offset: self.last_data_offset(),
            offset_delta: self.last_offset_delta(),
            timestamp: self.last_timestamp(),
            coordinator_epoch: self.coordinator_epoch,
            current_txn_first_offset: self.current_txn_first_offset,
        }
    }
}
