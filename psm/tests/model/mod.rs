//! A deliberately simple reference model of Kafka's producer-state rules, written straight from
//! `ProducerAppendInfo.java`, `ProducerStateEntry.java` and `ProducerStateManager.java`: a `BTreeMap` of
//! producers holding a `VecDeque` of batches, `Vec`s of transactions, linear scans, and an append that
//! works on a clone of the whole state. No packing, no indexes, no plans.

use std::collections::{BTreeMap, VecDeque};

use klog_psm::{
    AppendOrigin, BatchMetadata, BatchSummary, CompletedTxn, ControlKind, DuplicateBatch, Error,
    SnapshotEntry,
};

const MAX_BATCHES: usize = 5;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub epoch: i16,
    pub coordinator_epoch: i32,
    pub last_timestamp: i64,
    pub txn_first_offset: Option<i64>,
    pub batches: VecDeque<BatchMetadata>,
}

impl Entry {
    fn empty() -> Self {
        Entry {
            epoch: -1,
            coordinator_epoch: -1,
            last_timestamp: -1,
            txn_first_offset: None,
            batches: VecDeque::new(),
        }
    }

    fn last_seq(&self) -> i32 {
        self.batches.back().map_or(-1, |b| b.last_seq)
    }

    fn set_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
    }

    fn push(&mut self, batch: BatchMetadata) {
        self.batches.push_back(batch);
        if self.batches.len() > MAX_BATCHES {
            self.batches.pop_front();
        }
    }
}

/// Which kind of refusal (the model does not reproduce messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Epoch,
    Sequence,
    TxnState,
    CoordinatorFenced,
    NotAMarker,
}

impl Refusal {
    pub fn of(error: &Error) -> Refusal {
        match error {
            Error::InvalidProducerEpoch { .. } => Refusal::Epoch,
            Error::OutOfOrderSequence { .. } | Error::InvalidSequenceForNewEpoch { .. } => {
                Refusal::Sequence
            }
            Error::InvalidTxnState { .. } => Refusal::TxnState,
            Error::TransactionCoordinatorFenced { .. } => Refusal::CoordinatorFenced,
            Error::InvalidTransactionMarker { .. } => Refusal::NotAMarker,
            other => panic!("unexpected error {other:?}"),
        }
    }
}

/// One producer's view during an append: the stored epoch and last sequence, and the updated entry.
#[derive(Debug, Clone)]
struct Info {
    current_epoch: i16,
    current_last_seq: i32,
    updated: Entry,
    started: Vec<i64>,
}

#[derive(Debug, Clone)]
pub struct Model {
    pub producers: BTreeMap<i64, Entry>,
    pub ongoing: Vec<(i64, i64)>,
    pub unreplicated: Vec<(i64, i64, i64)>,
    pub map_end_offset: i64,
    pub expiration_ms: i64,
    pub max_producers: usize,
}

pub type AppendResult = Result<(Option<DuplicateBatch>, Vec<CompletedTxn>), Refusal>;

impl Model {
    pub fn new(expiration_ms: i64, max_producers: usize) -> Self {
        Model {
            producers: BTreeMap::new(),
            ongoing: Vec::new(),
            unreplicated: Vec::new(),
            map_end_offset: 0,
            expiration_ms,
            max_producers,
        }
    }

    pub fn append(&mut self, batches: &[BatchSummary], origin: AppendOrigin) -> AppendResult {
        let mut work = self.clone();
        let mut infos: BTreeMap<i64, Info> = BTreeMap::new();
        let mut ended: Vec<CompletedTxn> = Vec::new();
        let mut out = Vec::new();
        for batch in batches {
            if batch.control == Some(ControlKind::MirrorPidReset) && batch.producer_id < 0 {
                work.commit(&mut infos, &mut ended, &mut out);
                work.producers.clear();
                work.ongoing.clear();
                work.unreplicated.clear();
                continue;
            }
            if batch.producer_id < 0 {
                continue;
            }
            if origin == AppendOrigin::Client {
                if let Some(duplicate) = work.duplicate(batch) {
                    return Ok((Some(duplicate), Vec::new()));
                }
            }
            let stored = work.producers.get(&batch.producer_id);
            let info = infos.entry(batch.producer_id).or_insert_with(|| Info {
                current_epoch: stored.map_or(-1, |e| e.epoch),
                current_last_seq: stored.map_or(-1, Entry::last_seq),
                updated: stored.map_or_else(Entry::empty, |e| Entry {
                    batches: VecDeque::new(),
                    ..e.clone()
                }),
                started: Vec::new(),
            });
            if let Some(txn) = model_append(info, batch, origin)? {
                ended.push(txn);
            }
        }
        work.commit(&mut infos, &mut ended, &mut out);
        work.evict();
        *self = work;
        Ok((None, out))
    }

    fn duplicate(&self, batch: &BatchSummary) -> Option<DuplicateBatch> {
        let entry = self.producers.get(&batch.producer_id)?;
        if entry.epoch != batch.producer_epoch {
            return None;
        }
        entry
            .batches
            .iter()
            .find(|b| b.first_seq() == batch.first_sequence && b.last_seq == batch.last_sequence)
            .map(|b| DuplicateBatch {
                first_offset: b.first_offset(),
                last_offset: b.last_offset,
                timestamp: b.timestamp,
            })
    }

    fn commit(
        &mut self,
        infos: &mut BTreeMap<i64, Info>,
        ended: &mut Vec<CompletedTxn>,
        out: &mut Vec<CompletedTxn>,
    ) {
        for (producer_id, info) in std::mem::take(infos) {
            let entry = self
                .producers
                .entry(producer_id)
                .or_insert_with(Entry::empty);
            entry.set_epoch(info.updated.epoch);
            for batch in info.updated.batches {
                entry.push(batch);
            }
            entry.coordinator_epoch = info.updated.coordinator_epoch;
            entry.txn_first_offset = info.updated.txn_first_offset;
            entry.last_timestamp = info.updated.last_timestamp;
            for first in info.started {
                self.ongoing.push((first, producer_id));
            }
        }
        for mut txn in std::mem::take(ended) {
            let mut open = self.ongoing.clone();
            open.sort();
            txn.last_stable_offset = open
                .iter()
                .find(|(_, pid)| *pid != txn.producer_id)
                .map_or(txn.last_offset + 1, |(first, _)| *first);
            let position = self
                .ongoing
                .iter()
                .position(|t| *t == (txn.first_offset, txn.producer_id))
                .expect("completed a transaction that was started");
            self.ongoing.remove(position);
            self.unreplicated
                .push((txn.first_offset, txn.producer_id, txn.last_offset));
            out.push(txn);
        }
    }

    fn evict(&mut self) {
        while self.producers.len() > self.max_producers {
            let oldest = self
                .producers
                .iter()
                .filter(|(_, e)| e.txn_first_offset.is_none())
                .map(|(pid, e)| (e.last_timestamp, *pid))
                .min();
            match oldest {
                Some((_, pid)) => {
                    self.producers.remove(&pid);
                }
                None => break,
            }
        }
    }

    fn expired(&self, now_ms: i64, entry: &Entry) -> bool {
        entry.txn_first_offset.is_none()
            && now_ms.wrapping_sub(entry.last_timestamp) >= self.expiration_ms
    }

    pub fn remove_expired(&mut self, now_ms: i64) -> usize {
        let expired: Vec<i64> = self
            .producers
            .iter()
            .filter(|(_, e)| self.expired(now_ms, e))
            .map(|(pid, _)| *pid)
            .collect();
        for pid in &expired {
            self.producers.remove(pid);
        }
        expired.len()
    }

    pub fn first_unstable_offset(&self) -> Option<i64> {
        let a = self.unreplicated.iter().map(|t| t.0).min();
        let b = self.first_undecided_offset();
        [a, b].into_iter().flatten().min()
    }

    pub fn first_undecided_offset(&self) -> Option<i64> {
        self.ongoing.iter().map(|t| t.0).min()
    }

    pub fn on_high_watermark(&mut self, high_watermark: i64) {
        self.unreplicated.retain(|t| t.2 >= high_watermark);
    }

    pub fn on_log_start(&mut self, log_start: i64) {
        self.unreplicated.retain(|t| t.2 >= log_start);
        self.map_end_offset = self.map_end_offset.max(log_start);
    }

    pub fn truncate_fully(&mut self, offset: i64) {
        self.clear();
        self.map_end_offset = offset;
    }

    pub fn clear(&mut self) {
        self.producers.clear();
        self.ongoing.clear();
        self.unreplicated.clear();
    }

    pub fn snapshot(&self) -> Vec<SnapshotEntry> {
        self.producers
            .iter()
            .map(|(pid, e)| {
                let last = e.batches.back();
                SnapshotEntry {
                    producer_id: *pid,
                    producer_epoch: e.epoch,
                    last_sequence: last.map_or(-1, |b| b.last_seq),
                    last_offset: last.map_or(-1, |b| b.last_offset),
                    offset_delta: last.map_or(0, |b| b.offset_delta),
                    timestamp: e.last_timestamp,
                    coordinator_epoch: e.coordinator_epoch,
                    current_txn_first_offset: e.txn_first_offset.unwrap_or(-1),
                }
            })
            .collect()
    }

    pub fn load(&mut self, entries: &[SnapshotEntry], map_end_offset: i64, now_ms: i64) {
        self.clear();
        for s in entries {
            let entry = Entry {
                epoch: s.producer_epoch,
                coordinator_epoch: s.coordinator_epoch,
                last_timestamp: s.timestamp,
                txn_first_offset: (s.current_txn_first_offset >= 0)
                    .then_some(s.current_txn_first_offset),
                batches: if s.last_offset >= 0 {
                    VecDeque::from([BatchMetadata {
                        last_seq: s.last_sequence,
                        last_offset: s.last_offset,
                        offset_delta: s.offset_delta,
                        timestamp: s.timestamp,
                    }])
                } else {
                    VecDeque::new()
                },
            };
            if self.expired(now_ms, &entry) {
                continue;
            }
            if let Some(old) = self.producers.insert(s.producer_id, entry.clone()) {
                if let Some(first) = old.txn_first_offset {
                    self.ongoing.retain(|t| *t != (first, s.producer_id));
                }
            }
            if let Some(first) = entry.txn_first_offset {
                self.ongoing.push((first, s.producer_id));
            }
        }
        self.map_end_offset = map_end_offset;
        self.evict();
    }
}

/// `ProducerAppendInfo.append`, literally.
fn model_append(
    info: &mut Info,
    batch: &BatchSummary,
    origin: AppendOrigin,
) -> Result<Option<CompletedTxn>, Refusal> {
    let (coordinator_epoch, is_aborted) = match batch.control {
        None => return model_data(info, batch, origin).map(|()| None),
        Some(ControlKind::Empty) => return Ok(None),
        Some(ControlKind::Commit { coordinator_epoch }) => (coordinator_epoch, false),
        Some(ControlKind::Abort { coordinator_epoch }) => (coordinator_epoch, true),
        Some(ControlKind::MirrorPidReset | ControlKind::Other) => return Err(Refusal::NotAMarker),
    };
    let replication = origin == AppendOrigin::Replication;
    if batch.producer_epoch < info.updated.epoch && !replication {
        return Err(Refusal::Epoch);
    }
    if info.updated.coordinator_epoch > coordinator_epoch && !replication {
        return Err(Refusal::CoordinatorFenced);
    }
    let completed = info.updated.txn_first_offset.map(|first| CompletedTxn {
        producer_id: batch.producer_id,
        first_offset: first,
        last_offset: batch.first_offset,
        is_aborted,
        last_stable_offset: -1,
    });
    info.updated.set_epoch(batch.producer_epoch);
    info.updated.coordinator_epoch = coordinator_epoch;
    info.updated.txn_first_offset = None;
    info.updated.last_timestamp = batch.max_timestamp;
    Ok(completed)
}

fn model_data(info: &mut Info, batch: &BatchSummary, origin: AppendOrigin) -> Result<(), Refusal> {
    if batch.producer_epoch < info.updated.epoch && origin != AppendOrigin::Replication {
        return Err(Refusal::Epoch);
    }
    if origin == AppendOrigin::Client {
        let seq = batch.first_sequence;
        if batch.producer_epoch != info.updated.epoch {
            if seq != 0 && info.updated.epoch != -1 {
                return Err(Refusal::Sequence);
            }
        } else {
            let last = if !info.updated.batches.is_empty() {
                info.updated.last_seq()
            } else if batch.producer_epoch == info.current_epoch {
                info.current_last_seq
            } else {
                -1
            };
            let follows = i64::from(seq) == i64::from(last) + 1 || (seq == 0 && last == i32::MAX);
            if info.current_epoch != -1 && !follows {
                return Err(Refusal::Sequence);
            }
        }
    }
    info.updated.set_epoch(batch.producer_epoch);
    info.updated.push(BatchMetadata {
        last_seq: batch.last_sequence,
        last_offset: batch.last_offset,
        offset_delta: (batch.last_offset - batch.first_offset) as i32,
        timestamp: batch.max_timestamp,
    });
    info.updated.last_timestamp = batch.max_timestamp;
    match (info.updated.txn_first_offset, batch.is_transactional) {
        (Some(_), false) => Err(Refusal::TxnState),
        (None, true) => {
            info.updated.txn_first_offset = Some(batch.first_offset);
            info.started.push(batch.first_offset);
            Ok(())
        }
        _ => Ok(()),
    }
}
