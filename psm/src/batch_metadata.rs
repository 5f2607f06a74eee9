//! `BatchMetadata`: what a producer's entry remembers of one of its recent batches.

use crate::batch::BatchSummary;
use crate::sequence::decrement_sequence;

/// One cached batch of a producer (`BatchMetadata`). The first sequence and first offset are derived,
/// as Kafka derives them, from the last ones and `offset_delta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BatchMetadata {
    /// The batch's last sequence number.
    pub last_seq: i32,
    /// The batch's last offset in the log.
    pub last_offset: i64,
    /// `last_offset - first_offset`.
    pub offset_delta: i32,
    /// The batch's max timestamp.
    pub timestamp: i64,
}

impl BatchMetadata {
    /// What a producer's entry keeps of a data batch.
    #[inline]
    pub(crate) fn of_data_batch(batch: &BatchSummary) -> Self {
        BatchMetadata {
            last_seq: batch.last_sequence,
            last_offset: batch.last_offset,
            // Java's `(int) (lastOffset - firstOffset)`.
            offset_delta: batch.last_offset.wrapping_sub(batch.first_offset) as i32,
            timestamp: batch.max_timestamp,
        }
    }

    /// `decrementSequence(lastSeq, offsetDelta)`.
    #[inline]
    pub fn first_seq(&self) -> i32 {
        decrement_sequence(self.last_seq, self.offset_delta)
    }

    /// `lastOffset - offsetDelta`.
    #[inline]
    pub fn first_offset(&self) -> i64 {
        self.last_offset.wrapping_sub(i64::from(self.offset_delta))
    }
}
