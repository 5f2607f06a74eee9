//! The transactions a partition tracks (`ProducerStateManager.ongoingTxns` and `unreplicatedTxns`):
//! they decide the first unstable offset, hence the last stable offset.
//!
//! Keys are `(first offset, producer id)` so two producers can never collide on one key, even with a
//! snapshot that claims they do.

use std::collections::{BTreeMap, BTreeSet};

use crate::completed_txn::CompletedTxn;

#[derive(Debug, Clone, Default)]
pub(crate) struct Transactions {
    /// Open transactions, ordered by first offset.
    ongoing: BTreeSet<(i64, i64)>,
    /// Ended transactions whose marker is not yet below the high watermark: marker offset by key.
    unreplicated: BTreeMap<(i64, i64), i64>,
}

impl Transactions {
    pub(crate) fn start(&mut self, first_offset: i64, producer_id: i64) {
        self.ongoing.insert((first_offset, producer_id));
    }

    /// Forgets an open transaction without ending it (its producer was replaced by a snapshot load).
    pub(crate) fn forget(&mut self, first_offset: i64, producer_id: i64) {
        self.ongoing.remove(&(first_offset, producer_id));
    }

    /// `lastStableOffset(completedTxn)`: the first offset of the earliest open transaction of another
    /// producer, else the marker offset + 1.
    pub(crate) fn last_stable_offset(&self, producer_id: i64, marker_offset: i64) -> i64 {
        self.ongoing
            .iter()
            .find(|(_, pid)| *pid != producer_id)
            .map_or(marker_offset.wrapping_add(1), |(first, _)| *first)
    }

    /// `completeTxn`: the transaction moves from open to unreplicated.
    pub(crate) fn complete(&mut self, txn: &CompletedTxn) {
        let key = (txn.first_offset, txn.producer_id);
        assert!(
            self.ongoing.remove(&key),
            "completed transaction {txn:?} was never started"
        );
        self.unreplicated.insert(key, txn.last_offset);
    }

    /// Drops ended transactions whose marker offset is below `offset` (`removeUnreplicatedTransactions`).
    pub(crate) fn remove_unreplicated_before(&mut self, offset: i64) {
        self.unreplicated
            .retain(|_, marker_offset| *marker_offset >= offset);
    }

    /// `firstUnstableOffset`: the earlier of the first unreplicated and the first open transaction.
    pub(crate) fn first_unstable_offset(&self) -> Option<i64> {
        let unreplicated = self.unreplicated.keys().next().map(|(first, _)| *first);
        match (unreplicated, self.first_undecided_offset()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// `firstUndecidedOffset`: the first offset of the earliest open transaction.
    pub(crate) fn first_undecided_offset(&self) -> Option<i64> {
        self.ongoing.iter().next().map(|(first, _)| *first)
    }

    pub(crate) fn ongoing(&self) -> std::collections::BTreeSet<(i64, i64)> {
        self.ongoing.clone()
    }

    pub(crate) fn has_unreplicated(&self) -> bool {
        !self.unreplicated.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        self.ongoing.clear();
        self.unreplicated.clear();
    }
}
