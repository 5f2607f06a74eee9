//! `AppendPlan`: the outcome of validating one append, computed without changing any state.
//!
//! Kafka validates an append (`UnifiedLog.analyzeAndValidateProducerState`), writes the batches, then
//! updates the producer state. We keep the same split: [`plan_append`] reads the state and returns a plan,
//! the caller writes the batches, and the manager applies the plan. A plan is a list of steps in log
//! order: groups of producer updates, and the MIRROR_PID_RESET barriers between them, so a barrier
//! forgets exactly the producers that come before it in the log.

use std::collections::HashMap;

use crate::batch::{AppendOrigin, BatchSummary, TransactionVersion};
use crate::completed_txn::CompletedTxn;
use crate::error::Error;
use crate::one_or_many::OneOrMany;
use crate::producer_append_info::ProducerAppendInfo;
use crate::producer_state_entry::ProducerStateEntry;
use crate::producer_table::ProducerTable;

/// What a client retry duplicates: the offsets and timestamp to answer with (Kafka's `BatchMetadata`
/// of the cached batch; the produce response carries the timestamp as its log-append time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DuplicateBatch {
    /// The first offset the original batch was written at.
    pub first_offset: i64,
    /// The last offset the original batch was written at.
    pub last_offset: i64,
    /// The original batch's timestamp (the log-append time of its response).
    pub timestamp: i64,
}

/// The validated outcome of one append. When `duplicate` is set nothing must be written and applying
/// the plan changes nothing.
#[derive(Debug, Clone)]
#[must_use = "apply the plan once the batches are written"]
pub struct AppendPlan {
    /// Set when the append is a retry of a batch in the log: nothing is written.
    pub duplicate: Option<DuplicateBatch>,
    generation: u64,
    steps: OneOrMany<PlanStep>,
}

/// One step of a plan, in log order.
#[derive(Debug, Clone)]
pub(crate) enum PlanStep {
    /// The producers updated between two barriers, with the transactions their markers ended.
    Updates(PlanUpdates),
    /// Forget every producer and transaction.
    MirrorPidReset,
}

/// Kafka applies all producer updates of an append before it ends any transaction, so the last stable
/// offset of an ended transaction sees every transaction the append opened. Within a group we do the same.
#[derive(Debug, Clone, Default)]
pub(crate) struct PlanUpdates {
    /// What the group changes of each producer (merged into the stored entries), with the first offsets
    /// of the transactions it opened.
    pub(crate) producers: OneOrMany<ProducerAppendInfo>,
    /// In marker order; `last_stable_offset` is filled in when applied.
    pub(crate) completed: OneOrMany<CompletedTxn>,
}

impl AppendPlan {
    /// Whether the append is a duplicate (nothing must be written).
    pub fn is_duplicate(&self) -> bool {
        self.duplicate.is_some()
    }

    /// Whether the append holds a MIRROR_PID_RESET barrier.
    pub fn contains_mirror_pid_reset(&self) -> bool {
        self.steps
            .iter()
            .any(|step| matches!(step, PlanStep::MirrorPidReset))
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    pub(crate) fn steps(&self) -> &[PlanStep] {
        self.steps.as_slice()
    }
}

/// Validates `batches` in order against `producers` (see `ProducerStateManager::plan_append`).
pub(crate) fn plan_append(
    producers: &ProducerTable,
    generation: u64,
    batches: &[BatchSummary],
    origin: AppendOrigin,
    transaction_version: TransactionVersion,
) -> Result<AppendPlan, Error> {
    let mut planner = Planner {
        producers,
        origin,
        transaction_version,
        after_barrier: false,
        info_index: None,
        steps: OneOrMany::Empty,
    };
    for batch in batches {
        if batch.is_mirror_pid_reset() && !batch.has_producer_id() {
            planner.mirror_pid_reset();
        } else if batch.has_producer_id() {
            if let Some(duplicate) = planner.duplicate_of(batch) {
                return Ok(AppendPlan {
                    duplicate: Some(duplicate),
                    generation,
                    steps: OneOrMany::Empty,
                });
            }
            planner.append(batch)?;
        }
    }
    Ok(AppendPlan {
        duplicate: None,
        generation,
        steps: planner.steps,
    })
}

/// Builds the steps in place: the group being planned is the last step, opened by the first producer
/// batch after the start or a barrier.
struct Planner<'a> {
    producers: &'a ProducerTable,
    origin: AppendOrigin,
    transaction_version: TransactionVersion,
    /// After a barrier the stored producers no longer count: every producer starts empty.
    after_barrier: bool,
    /// The open group's producers by id, made only once it has more than `LINEAR_SEARCH_LIMIT`;
    /// below that a scan is cheaper than hashing (and neither allocates nor seeds a hasher).
    info_index: Option<HashMap<i64, usize>>,
    steps: OneOrMany<PlanStep>,
}

const LINEAR_SEARCH_LIMIT: usize = 8;

impl Planner<'_> {
    fn stored(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.stored_at(producer_id).map(|(_, entry)| entry)
    }

    /// The stored entry and where it sits in the table (so applying the plan finds it again without
    /// hashing).
    fn stored_at(&self, producer_id: i64) -> Option<(usize, &ProducerStateEntry)> {
        if self.after_barrier {
            None
        } else {
            self.producers.get_with_bucket(producer_id)
        }
    }

    /// Client retries only: the stored entry (not this append's earlier batches) is searched.
    fn duplicate_of(&self, batch: &BatchSummary) -> Option<DuplicateBatch> {
        if self.origin != AppendOrigin::Client {
            return None;
        }
        let cached = self.stored(batch.producer_id)?.find_duplicate_batch(
            batch.producer_epoch,
            batch.first_sequence,
            batch.last_sequence,
        )?;
        Some(DuplicateBatch {
            first_offset: cached.first_offset(),
            last_offset: cached.last_offset,
            timestamp: cached.timestamp,
        })
    }

    fn append(&mut self, batch: &BatchSummary) -> Result<(), Error> {
        assert!(
            batch.first_offset >= 0,
            "batches reach the producer state with the offsets the log assigned: {batch:?}"
        );
        let producer_id = batch.producer_id;
        if !matches!(self.steps.as_slice().last(), Some(PlanStep::Updates(_))) {
            // The first producer of a group: the step is built with its info in one go.
            let info = ProducerAppendInfo::new(
                producer_id,
                self.stored_at(producer_id),
                self.origin,
                self.transaction_version,
            );
            self.steps.push(PlanStep::Updates(PlanUpdates {
                producers: OneOrMany::One(info),
                completed: OneOrMany::Empty,
            }));
        }
        let index = match self.info_of(producer_id) {
            Some(index) => index,
            None => self.add_info(producer_id),
        };
        let group = open_group(&mut self.steps);
        if let Some(completed) = group.producers.as_mut_slice()[index].append(batch)? {
            group.completed.push(completed);
        }
        Ok(())
    }

    fn info_of(&self, producer_id: i64) -> Option<usize> {
        let Some(PlanStep::Updates(group)) = self.steps.as_slice().last() else {
            return None;
        };
        let infos = group.producers.as_slice();
        if infos.len() > LINEAR_SEARCH_LIMIT {
            self.info_index.as_ref()?.get(&producer_id).copied()
        } else {
            infos.iter().position(|i| i.producer_id() == producer_id)
        }
    }

    fn add_info(&mut self, producer_id: i64) -> usize {
        let info = ProducerAppendInfo::new(
            producer_id,
            self.stored_at(producer_id),
            self.origin,
            self.transaction_version,
        );
        let group = open_group(&mut self.steps);
        group.producers.push(info);
        let infos = group.producers.as_slice();
        let index = infos.len() - 1;
        if index == LINEAR_SEARCH_LIMIT {
            let by_id = infos
                .iter()
                .enumerate()
                .map(|(i, info)| (info.producer_id(), i));
            self.info_index = Some(by_id.collect());
        } else if let Some(by_id) = self
            .info_index
            .as_mut()
            .filter(|_| index > LINEAR_SEARCH_LIMIT)
        {
            by_id.insert(producer_id, index);
        }
        index
    }

    fn mirror_pid_reset(&mut self) {
        self.info_index = None;
        self.steps.push(PlanStep::MirrorPidReset);
        self.after_barrier = true;
    }
}

fn open_group(steps: &mut OneOrMany<PlanStep>) -> &mut PlanUpdates {
    match steps.as_mut_slice().last_mut() {
        Some(PlanStep::Updates(group)) => group,
        _ => unreachable!("append opens a group first"),
    }
}
