//! `CompletedTxn`: a transaction that a COMMIT or ABORT marker ended.

/// A transaction ended by a marker (`CompletedTxn`), with the last stable offset Kafka stores beside an
/// aborted one in the `.txnindex` (`ProducerStateManager.lastStableOffset(completedTxn)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CompletedTxn {
    /// The producer whose transaction ended.
    pub producer_id: i64,
    /// The first offset of the transaction's first batch.
    pub first_offset: i64,
    /// The offset of the marker.
    pub last_offset: i64,
    /// Whether the transaction ended with an ABORT marker (a `.txnindex` entry is due).
    pub is_aborted: bool,
    /// The first offset of the earliest transaction of another producer still open once the append's
    /// batches are applied, else `last_offset + 1`.
    pub last_stable_offset: i64,
}

impl CompletedTxn {
    /// The 34-byte `.txnindex` entry Kafka appends for an aborted transaction (`AbortedTxn`): version 0,
    /// producer id, first offset, last offset, last stable offset, big-endian.
    pub fn aborted_txn_entry(&self) -> [u8; 34] {
        let mut entry = [0; 34];
        entry[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        entry[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        entry[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        entry[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        entry
    }
}
