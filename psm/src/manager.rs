//! `ProducerStateManager`: the producer state of one partition, and the transactions that decide its
//! last stable offset. No I/O: the partition log writes and reads the `.snapshot` files and calls in.

use crate::append_plan::{self, AppendPlan, PlanStep, PlanUpdates};
use crate::batch::{AppendOrigin, BatchSummary, TransactionVersion};
use crate::completed_txn::CompletedTxn;
use crate::error::Error;
use crate::expiration::is_expired;
use crate::producer_append_info::{ProducerAppendInfo, TransactionStillOpen};
use crate::producer_state_entry::ProducerStateEntry;
use crate::producer_table::ProducerTable;
use crate::snapshot::SnapshotEntry;
use crate::transactions::Transactions;

/// Settings of a [`ProducerStateManager`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PsmConfig {
    /// `producer.id.expiration.ms`: how long a producer without an open transaction is remembered after
    /// its last timestamp.
    pub producer_id_expiration_ms: i64,
    /// klog's bound (Kafka has none): above it, the producers without an open transaction that have the
    /// oldest last timestamps are forgotten after each append or snapshot load.
    pub max_producers: usize,
}

impl Default for PsmConfig {
    /// Kafka's default expiration (one day) and no bound, as in Kafka.
    fn default() -> Self {
        PsmConfig {
            producer_id_expiration_ms: 86_400_000,
            max_producers: usize::MAX,
        }
    }
}

/// The producer state of one partition (`ProducerStateManager`).
///
/// An append is planned ([`plan_append`](Self::plan_append)), written by the caller, then applied
/// ([`apply`](Self::apply)) before anything else changes the state; then the caller moves the map end
/// offset ([`update_map_end_offset`](Self::update_map_end_offset)) to the append's last offset + 1.
#[derive(Debug, Clone)]
pub struct ProducerStateManager {
    config: PsmConfig,
    producers: ProducerTable,
    transactions: Transactions,
    /// `lastMapOffset`: the offset up to which (exclusive) the log has been applied.
    map_end_offset: i64,
    /// Counts changes to producers and open transactions, so a stale plan is caught.
    generation: u64,
}

impl ProducerStateManager {
    /// An empty producer state with `config`.
    pub fn new(config: PsmConfig) -> Self {
        ProducerStateManager {
            config,
            producers: ProducerTable::default(),
            transactions: Transactions::default(),
            map_end_offset: 0,
            generation: 0,
        }
    }

    /// The configuration the manager was made with.
    pub fn config(&self) -> PsmConfig {
        self.config
    }

    /// Validates the batches of one append in order, without changing state
    /// (`analyzeAndValidateProducerState`). Batches without a producer id are skipped, except the
    /// MIRROR_PID_RESET barrier. For a client append, a batch that exactly matches one of the producer's
    /// cached batches makes the whole append a duplicate: `Ok` with `duplicate` set, nothing to write.
    ///
    /// Markers are checked under the transaction version 0/1 rule; a coordinator that ended the
    /// transaction under version 2 says so with
    /// [`plan_append_with_transaction_version`](Self::plan_append_with_transaction_version).
    pub fn plan_append(
        &self,
        batches: &[BatchSummary],
        origin: AppendOrigin,
    ) -> Result<AppendPlan, Error> {
        self.plan_append_with_transaction_version(batches, origin, TransactionVersion::UNKNOWN)
    }

    /// [`plan_append`](Self::plan_append) with the transaction version the coordinator wrote the
    /// append's markers under (Kafka's `transactionVersion` argument of `appendAsLeader`). From
    /// version 2 on, a coordinator's marker must carry an epoch above the producer's, except a retry
    /// of a marker already written (no transaction open, same epoch). Replication is never refused.
    pub fn plan_append_with_transaction_version(
        &self,
        batches: &[BatchSummary],
        origin: AppendOrigin,
        transaction_version: TransactionVersion,
    ) -> Result<AppendPlan, Error> {
        append_plan::plan_append(
            &self.producers,
            self.generation,
            batches,
            origin,
            transaction_version,
        )
    }

    /// Applies a plan after its batches were written. Returns the transactions its markers ended, in
    /// marker order, each with the last stable offset to store in the `.txnindex` if it was aborted.
    ///
    /// # Panics
    /// If the state changed since the plan was made (a plan applies once, to the state it was made from).
    pub fn apply(&mut self, plan: AppendPlan) -> Vec<CompletedTxn> {
        assert_eq!(
            plan.generation(),
            self.generation,
            "an AppendPlan applies once, to the state it was planned against"
        );
        if plan.is_duplicate() {
            return Vec::new();
        }
        let mut completed = Vec::new();
        for step in plan.steps() {
            match step {
                PlanStep::Updates(updates) => self.apply_updates(updates, &mut completed),
                PlanStep::MirrorPidReset => self.clear(),
            }
        }
        self.evict_above_bound();
        self.generation += 1;
        completed
    }

    /// `update(appendInfo)` for each producer (which starts the transactions the group opened), then, in
    /// marker order, `lastStableOffset` and `completeTxn`.
    fn apply_updates(&mut self, updates: &PlanUpdates, completed: &mut Vec<CompletedTxn>) {
        for info in updates.producers.iter() {
            self.update_producer(info);
        }
        for txn in updates.completed.iter() {
            self.transactions.start(txn.first_offset, txn.producer_id);
        }
        for &txn in updates.completed.iter() {
            completed.push(self.complete_txn(txn));
        }
    }

    fn update_producer(&mut self, info: &ProducerAppendInfo) {
        let producer_id = info.producer_id();
        self.producers
            .update_at(info.bucket(), producer_id, |entry| info.merge_into(entry));
        if let Some(first_offset) = info.opened_transaction() {
            self.transactions.start(first_offset, producer_id);
        }
    }

    /// `lastStableOffset` and `completeTxn` of a transaction a marker ended.
    fn complete_txn(&mut self, mut txn: CompletedTxn) -> CompletedTxn {
        txn.last_stable_offset = self
            .transactions
            .last_stable_offset(txn.producer_id, txn.last_offset);
        self.transactions.complete(&txn);
        txn
    }

    /// One batch as a replica (or recovery) applies it: exactly [`plan_append`](Self::plan_append) of
    /// `[batch]` with [`AppendOrigin::Replication`] followed by [`apply`](Self::apply), without building
    /// the plan (recovery replays every batch of the log this way). Returns the transaction the batch's
    /// marker ended, if any; on an error nothing changed.
    #[inline]
    pub fn replay(&mut self, batch: &BatchSummary) -> Result<Option<CompletedTxn>, Error> {
        let completed = if batch.has_producer_id() {
            self.replay_producer_batch(batch)?
        } else {
            if batch.is_mirror_pid_reset() {
                self.clear();
            }
            None
        };
        self.evict_above_bound();
        self.generation += 1;
        Ok(completed)
    }

    /// Loads `producer_id`'s entry, both cache lines of it, so that replaying one of its batches soon
    /// after finds it in cache: recovery calls it for the next batch before replaying the current one,
    /// and the two independent loads overlap each other and that work. Changes nothing.
    #[inline]
    pub fn prefetch(&self, producer_id: i64) {
        if let Some(entry) = self.producers.get(producer_id) {
            std::hint::black_box(entry.touch());
        }
    }

    #[inline]
    fn replay_producer_batch(
        &mut self,
        batch: &BatchSummary,
    ) -> Result<Option<CompletedTxn>, Error> {
        assert!(
            batch.first_offset >= 0,
            "batches reach the producer state with the offsets the log assigned: {batch:?}"
        );
        if batch.control.is_none() {
            self.replay_data_batch(batch)?;
            return Ok(None);
        }
        self.replay_control_batch(batch)
    }

    /// Most batches: no transaction can end here, and the stored entry changes in place (one probe,
    /// no `ProducerAppendInfo`).
    #[inline]
    fn replay_data_batch(&mut self, batch: &BatchSummary) -> Result<(), Error> {
        let opened = self
            .producers
            .try_update(batch.producer_id, |entry| {
                ProducerAppendInfo::replay_data_batch(entry, batch)
            })
            .map_err(|TransactionStillOpen| Error::InvalidTxnState {
                producer_id: batch.producer_id,
                offset: batch.first_offset,
            })?;
        if let Some(first_offset) = opened {
            self.transactions.start(first_offset, batch.producer_id);
        }
        Ok(())
    }

    /// A marker (or an empty control batch), through `ProducerAppendInfo` as an append would go; out of
    /// line, so the data batches' path stays small.
    #[inline(never)]
    fn replay_control_batch(
        &mut self,
        batch: &BatchSummary,
    ) -> Result<Option<CompletedTxn>, Error> {
        let stored = self.producers.get_with_bucket(batch.producer_id);
        let mut info = ProducerAppendInfo::new(
            batch.producer_id,
            stored,
            AppendOrigin::Replication,
            TransactionVersion::UNKNOWN,
        );
        let completed = info.append(batch)?;
        self.update_producer(&info);
        Ok(completed.map(|txn| {
            self.transactions.start(txn.first_offset, txn.producer_id);
            self.complete_txn(txn)
        }))
    }

    fn evict_above_bound(&mut self) {
        while self.producers.len() > self.config.max_producers {
            if self.producers.evict_oldest().is_none() {
                break;
            }
        }
    }

    /// `updateMapEndOffset`: call after every append (last offset + 1), with or without producer ids.
    pub fn update_map_end_offset(&mut self, offset: i64) {
        self.map_end_offset = offset;
    }

    /// The offset the state is up to date with: the next offset after the last applied append.
    pub fn map_end_offset(&self) -> i64 {
        self.map_end_offset
    }

    /// `onHighWatermarkUpdated`: ended transactions whose marker is below `high_watermark` become stable.
    pub fn on_high_watermark_updated(&mut self, high_watermark: i64) {
        self.transactions.remove_unreplicated_before(high_watermark);
    }

    /// `onLogStartOffsetIncremented`: ended transactions whose marker is below the new log start are
    /// dropped, and the map end offset is raised to it if it was lower.
    pub fn on_log_start_offset_incremented(&mut self, log_start_offset: i64) {
        self.transactions
            .remove_unreplicated_before(log_start_offset);
        self.map_end_offset = self.map_end_offset.max(log_start_offset);
    }

    /// `firstUnstableOffset`: the first offset of the earliest open transaction or of the earliest ended
    /// one whose marker is not yet below the high watermark. (`UnifiedLog` raises it to the log start
    /// offset when it is below.)
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.transactions.first_unstable_offset()
    }

    /// `firstUndecidedOffset`: the first offset of the earliest open transaction.
    pub fn first_undecided_offset(&self) -> Option<i64> {
        self.transactions.first_undecided_offset()
    }

    /// The last stable offset: the first unstable offset if it is below the high watermark, else the
    /// high watermark.
    pub fn last_stable_offset(&self, high_watermark: i64) -> i64 {
        match self.first_unstable_offset() {
            Some(offset) if offset < high_watermark => offset,
            _ => high_watermark,
        }
    }

    /// `lastEntry(producerId)`.
    pub fn producer(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.get(producer_id)
    }

    /// Every producer, by ascending producer id.
    pub fn producers(&self) -> impl Iterator<Item = (i64, &ProducerStateEntry)> {
        let mut entries: Vec<&ProducerStateEntry> = self.producers.iter().collect();
        entries.sort_unstable_by_key(|entry| entry.producer_id());
        entries
            .into_iter()
            .map(|entry| (entry.producer_id(), entry))
    }

    /// The number of producers (`producerIdCount`).
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Kafka's `isEmpty()`: no producer *and* no ended transaction awaiting the high watermark (the
    /// producer-state rebuild depends on exactly this).
    pub fn is_empty(&self) -> bool {
        self.producers.len() == 0 && !self.transactions.has_unreplicated()
    }

    /// `removeExpiredProducers`: forgets producers without an open transaction whose last timestamp is
    /// `producer_id_expiration_ms` or more before `now_ms`. Returns how many were removed.
    pub fn remove_expired_producers(&mut self, now_ms: i64) -> usize {
        let removed = self
            .producers
            .remove_expired(now_ms, self.config.producer_id_expiration_ms);
        if removed > 0 {
            self.generation += 1;
        }
        removed
    }

    /// `truncateFullyAndStartAt`: forgets everything; the map end offset becomes `offset`. (The caller
    /// deletes the snapshot files.)
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) {
        self.clear();
        self.map_end_offset = offset;
    }

    /// Forgets every producer and transaction; the map end offset stays. This is also what a
    /// MIRROR_PID_RESET barrier does at its place in the log.
    pub fn clear(&mut self) {
        self.producers.clear();
        self.transactions.clear();
        self.generation += 1;
    }

    /// The entries of a snapshot of the current state (`writeSnapshot`; only each producer's last batch
    /// is kept), sorted by producer id.
    pub fn snapshot(&self) -> Vec<SnapshotEntry> {
        self.producers()
            .map(|(_, entry)| entry.to_snapshot())
            .collect()
    }

    /// Replaces the state with a snapshot's entries (`loadFromSnapshot` after `truncateAndReload`
    /// cleared it), skipping producers that are expired at `now_ms`, and sets the map end offset (the
    /// snapshot file's offset).
    pub fn load_snapshot(&mut self, entries: Vec<SnapshotEntry>, map_end_offset: i64, now_ms: i64) {
        self.clear();
        for snapshot_entry in &entries {
            let entry = ProducerStateEntry::from_snapshot(snapshot_entry);
            if self.is_producer_expired(now_ms, &entry) {
                continue;
            }
            self.load_producer_entry(entry);
        }
        self.map_end_offset = map_end_offset;
        self.evict_above_bound();
    }

    /// `loadProducerEntry`: a later entry for the same producer replaces the earlier one.
    fn load_producer_entry(&mut self, entry: ProducerStateEntry) {
        let producer_id = entry.producer_id();
        let txn_first_offset = entry.current_txn_first_offset();
        if let Some(replaced) = self.producers.upsert(entry) {
            if let Some(first_offset) = replaced.current_txn_first_offset() {
                self.transactions.forget(first_offset, producer_id);
            }
        }
        if let Some(first_offset) = txn_first_offset {
            self.transactions.start(first_offset, producer_id);
        }
    }

    fn is_producer_expired(&self, now_ms: i64, entry: &ProducerStateEntry) -> bool {
        entry.current_txn_first_offset().is_none()
            && is_expired(
                now_ms,
                entry.last_timestamp(),
                self.config.producer_id_expiration_ms,
            )
    }

    /// Checks the manager's internal invariants (for tests): the expiration index holds every producer
    /// without an open transaction (and keys only of its entries), and each open transaction belongs to
    /// its producer's entry.
    ///
    /// # Panics
    /// If an invariant is broken.
    #[doc(hidden)]
    pub fn assert_invariants(&self) {
        self.producers.assert_consistent();
        let open: std::collections::BTreeSet<(i64, i64)> = self
            .producers
            .iter()
            .filter_map(|e| e.current_txn_first_offset().map(|f| (f, e.producer_id())))
            .collect();
        assert_eq!(
            open,
            self.transactions.ongoing(),
            "open transactions out of step"
        );
    }
}
