//! The mirror manager: drives each mirror partition through the state machine and runs its actions
//! (KIP-1279 §1.3-1.6, §2.3, §2.6, §3.3). It is a step function, [`Manager::tick`], so tests drive it
//! deterministically and `klog mirror run` loops it.
//!
//! Rules it keeps:
//! - a state is persisted to `__mirror_state` before its actions run; on open every partition re-runs
//!   the actions of its recorded state. The states of a tick are written in two batches (one
//!   `__mirror_state` write each, synced once, whatever the partition count): first every desired-state
//!   change of the pass (their actions run after it), then every state the actions lead to
//!   (PREPARING -> MIRRORING, PAUSING -> PAUSED, STOPPING -> STOPPED, FAILED), whose own actions wait
//!   for that write;
//! - no lock of this cluster that serving takes is held while a source is called (a source may be
//!   another cluster that is fetching from this one); a streamed answer is appended from inside the
//!   source's call, which holds no lock of its own meanwhile (`MirrorSource::fetch_each`);
//! - one partition's failure moves only that partition to FAILED.
//!
//! Its parts: [`resolver`] (connecting each mirror to its source), `fetcher` (PREPARING and the fetch
//! round of the MIRRORING partitions: one request per source, `fetch_each`), `stopping` (the failover
//! of many partitions, step by step across them) and `group_sync` (the consumer-group offsets that
//! ride along). It works on a [`Node`]; it knows sources only through [`MirrorSource`].

mod fencing;
mod fetcher;
mod group_sync;
pub mod resolver;
mod retry;
mod stopping;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use klog_log::checkpoint::TopicId;
use klog_log::partition_log::{PartitionLog, WriteMode};

use crate::error::Error;
use crate::log_cleaner::{CleanedSummary, CleanerSchedule, CleanerSettings};
use crate::metadata::{DesiredState, TopicMeta};
use crate::node::{lock, Node};
use crate::records::{MirrorKey, MirrorRecord, PartitionStateValue};
use crate::source::{MirrorSource, SourceError};
use crate::state::MirrorState;
use crate::store::MIRROR_STATE_TOPIC;
use crate::topics;
pub use fencing::{LEADER_EPOCH_BUMP_INCREMENT, LEADER_EPOCH_BUMP_THRESHOLD};
pub use group_sync::OffsetClamp;
use resolver::Sources;
use retry::{target_state, waiting};

/// The mirroring knobs (KIP-1279 §6.3 names in the docs).
#[derive(Debug, Clone)]
pub struct MirrorSettings {
    /// `mirror.fetch.max.bytes`: per partition fetch (Kafka's `max.partition.fetch.bytes`).
    pub fetch_max_bytes: usize,
    /// `mirror.fetch.response.max.bytes` (Kafka's `fetch.max.bytes`): the cap on fetched bytes in flight
    /// across every partition and source of a fetch round, whatever the partition count. One batch
    /// larger than the cap still comes through alone, as in Kafka (the first partition with records
    /// gets at least one batch).
    pub fetch_response_max_bytes: usize,
    /// `mirror.fetch.backoff.ms`: after a fetch error that does not fail the partition.
    pub fetch_backoff_ms: i64,
    /// `mirror.metadata.refresh.interval.ms`: how often a mirror's source topics are described (a
    /// partition-count increase creates the new partitions here).
    pub metadata_refresh_ms: i64,
    /// `mirror.failed.retry.initial.backoff.ms`, `.max.backoff.ms`, `.max.attempts`.
    pub failed_retry_initial_backoff_ms: i64,
    /// `mirror.failed.retry.max.backoff.ms`.
    pub failed_retry_max_backoff_ms: i64,
    /// `mirror.failed.retry.max.attempts`.
    pub failed_retry_max_attempts: i16,
    /// Sync `__mirror_state` writes and the log at STOPPING (before the LME is read, after the barrier).
    /// Off only in benchmarks that measure what the syncs cost: a crash may then lose state.
    pub fsync: bool,
    /// The node's log cleaner (`log.cleaner.*`): how often a pass runs and what it may clean.
    pub cleaner: CleanerSettings,
}

impl Default for MirrorSettings {
    fn default() -> Self {
        MirrorSettings {
            fetch_max_bytes: 1 << 20,
            fetch_response_max_bytes: 50 << 20,
            fetch_backoff_ms: 1000,
            metadata_refresh_ms: 30_000,
            failed_retry_initial_backoff_ms: 1000,
            failed_retry_max_backoff_ms: 300_000,
            failed_retry_max_attempts: 100,
            fsync: true,
            cleaner: CleanerSettings::default(),
        }
    }
}

/// What the fetcher knows of a partition between ticks (not persisted: rebuilt on restart).
#[derive(Debug, Clone, Default)]
pub(crate) struct PartitionRuntime {
    pub(crate) mirror: String,
    /// The recorded state's actions have run since open (otherwise the next tick re-runs them).
    pub(crate) entered: bool,
    /// The source leader epoch learned by fencing.
    pub(crate) source_epoch: i32,
    /// The epoch of a batch that was refused for being above the local epoch (EPOCH_FENCING bumps
    /// above it).
    pub(crate) fence_epoch: i32,
    pub(crate) source_high_watermark: Option<i64>,
    /// Not before this time: a fetch backoff, or the retry time of a failed action (also recorded in
    /// FAILED, which is what a restart goes by).
    pub(crate) not_before_ms: i64,
    /// Consecutive failures (the FAILED retry count), reset by a successful action.
    pub(crate) failures: i16,
    /// An error that could not be recorded (the state write itself failed): nothing of the partition
    /// runs before this time, and `unrecorded` such errors in a row set the wait.
    pub(crate) unrecorded_until_ms: i64,
    pub(crate) unrecorded: i16,
}

/// What one tick did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickReport {
    /// `(topic, partition, from, to)` for every persisted transition.
    pub transitions: Vec<(String, i32, MirrorState, MirrorState)>,
    /// Batches appended by fetches.
    pub batches_appended: u64,
    /// Bytes appended by fetches.
    pub bytes_appended: u64,
    /// Truncations (PREPARING, divergence, out of range, STOPPING's LSO cut).
    pub truncations: u64,
    /// Partitions whose action failed this tick, with the error.
    pub errors: Vec<(String, i32, String)>,
    /// The earliest time a backed-off or FAILED partition wants another try.
    pub next_retry_ms: Option<i64>,
    /// Consumer-group offsets written to `__consumer_offsets` (commits and tombstones).
    pub offsets_synced: u64,
    /// Source leader epochs learned by fencing (the partition fetches at it next round).
    pub epochs_learned: u64,
    /// Synced offsets moved into the local log (the source committed beyond what is mirrored).
    pub offset_clamps: Vec<OffsetClamp>,
    /// Local leader epochs bumped above the source's (EPOCH_FENCING, or a source epoch within
    /// `LEADER_EPOCH_BUMP_THRESHOLD` of ours).
    pub epoch_bumps: u64,
    /// The cleaner pass the tick ran, if one was due and a compacted log was cleanable (a failed pass is
    /// in `errors` too).
    pub cleaned: Vec<CleanedSummary>,
}

impl TickReport {
    /// Whether anything changed (states, log contents).
    pub fn progressed(&self) -> bool {
        !self.transitions.is_empty()
            || self.batches_appended > 0
            || self.truncations > 0
            || self.offsets_synced > 0
            || self.epochs_learned > 0
            || self.epoch_bumps > 0
    }
}

/// What a partition's step leaves for the round.
enum Step {
    /// Nothing more this tick.
    Done,
    /// A MIRRORING partition's fetch is due (with what the fetcher knew of it).
    Fetch(PartitionRuntime),
    /// A STOPPING partition's stop is due.
    Stop,
    /// An EPOCH_FENCING partition's epoch bump is due.
    Fence,
}

/// What a tick does for many partitions together, after every partition's step.
#[derive(Default)]
struct Round {
    fetch: Vec<(Work, PartitionRuntime)>,
    stop: Vec<Work>,
    fence: Vec<Work>,
}

#[derive(Clone)]
pub(crate) struct Work {
    pub(crate) topic: String,
    pub(crate) partition: i32,
    pub(crate) key: MirrorKey,
    pub(crate) desired: DesiredState,
    pub(crate) stored: Option<(PartitionStateValue, i64)>,
}

/// A source's error as the manager's: a refusal naming the wrong cluster stays a refusal; anything else
/// names the source.
fn source_error(source: &str, e: SourceError) -> Error {
    match e {
        SourceError::Refused(m)
            if m.contains("cluster id changed") || m.contains("is this cluster") =>
        {
            Error::Refused(m)
        }
        other => Error::Source {
            source_name: source.to_owned(),
            message: other.to_string(),
        },
    }
}

/// The local log of a work item's partition.
fn partition_log(node: &Node, w: &Work) -> Result<std::sync::Arc<PartitionLog>, Error> {
    node.log(&w.topic, w.partition)
        .ok_or_else(|| Error::Refused(format!("{}-{} has no log", w.topic, w.partition)))
}

/// Drives one node's mirror partitions (see the module docs).
pub struct Manager {
    node: Arc<Node>,
    settings: MirrorSettings,
    runtime: Mutex<BTreeMap<(String, i32), PartitionRuntime>>,
    sources: Sources,
    /// Per mirror, when its source's topic metadata is next described.
    next_metadata_sync: Mutex<BTreeMap<String, i64>>,
    /// The consumer-group offset sync's schedule (`group_sync`).
    group_sync: Mutex<group_sync::GroupSyncState>,
    /// Per mirror, the partition its last fetch round took records from last: the next round starts
    /// after it (`fetcher::rotate`).
    fetch_rotation: Mutex<BTreeMap<String, (String, i32)>>,
    /// Transitions decided but not yet written: written together by [`Manager::commit_transitions`].
    pending: Mutex<Vec<(Work, PartitionStateValue)>>,
    /// Held for a whole tick: one tick's commit must never take (and not yet have written) another's
    /// queued transitions while that one runs their actions.
    ticking: Mutex<()>,
    /// When the cleaner step next looks for a log to clean.
    cleaner: Mutex<CleanerSchedule>,
}

impl Manager {
    pub(crate) fn new(node: Arc<Node>) -> Self {
        Manager {
            node,
            settings: MirrorSettings::default(),
            runtime: Mutex::new(BTreeMap::new()),
            sources: Sources::default(),
            next_metadata_sync: Mutex::new(BTreeMap::new()),
            group_sync: Mutex::new(Default::default()),
            fetch_rotation: Mutex::new(BTreeMap::new()),
            pending: Mutex::new(Vec::new()),
            ticking: Mutex::new(()),
            cleaner: Mutex::new(CleanerSchedule::default()),
        }
    }

    pub(crate) fn set_settings(&mut self, settings: MirrorSettings) {
        self.node.set_sync(settings.fsync);
        self.settings = settings;
    }

    pub(crate) fn settings(&self) -> &MirrorSettings {
        &self.settings
    }

    pub(crate) fn sources(&self) -> &Sources {
        &self.sources
    }

    /// The source of `mirror`, connected on first use.
    pub(crate) fn source_for(
        &self,
        mirror: &str,
    ) -> Result<Arc<dyn MirrorSource>, crate::source::SourceError> {
        self.sources.get(&self.node, mirror)
    }

    /// What the fetcher last learned of a partition's source (its high watermark), if anything.
    pub(crate) fn source_high_watermark(&self, topic: &str, partition: i32) -> Option<i64> {
        lock(&self.runtime)
            .get(&(topic.to_owned(), partition))
            .and_then(|r| r.source_high_watermark)
    }

    /// Forgets everything about `mirror` (it was deleted).
    pub(crate) fn forget_mirror(&self, mirror: &str) {
        lock(&self.runtime).retain(|_, rt| rt.mirror != mirror);
        lock(&self.fetch_rotation).remove(mirror);
        self.sources.forget(mirror);
    }

    /// The mirror partitions to drive, with their recorded states.
    fn work(&self) -> Vec<Work> {
        let meta = self.node.metadata();
        let store = lock(&self.node.store);
        let mut out = Vec::new();
        for (name, t) in &meta.topics {
            let Some(m) = &t.mirror else { continue };
            let id = TopicId::parse(&t.id).expect("validated");
            for p in 0..t.partitions {
                let key = MirrorKey {
                    mirror: m.name.clone(),
                    topic_id: id,
                    partition: p,
                };
                let stored = store.state(&key).map(|s| (s.value.clone(), s.offset));
                out.push(Work {
                    topic: name.clone(),
                    partition: p,
                    key,
                    desired: m.desired,
                    stored,
                });
            }
        }
        out
    }

    /// One step for every mirror partition: apply desired-state changes, run due actions, fetch once.
    pub fn tick(&self) -> TickReport {
        let _one_tick = lock(&self.ticking);
        let mut report = TickReport::default();
        let now = self.node.clock.now_ms();
        // `__mirror_state` takes every transition: a partition of it that failed a write is reopened
        // (with recovery) before anything else, or no state could be recorded again without a restart.
        if let Err(e) = self.node.heal_store() {
            report
                .errors
                .push((MIRROR_STATE_TOPIC.to_owned(), -1, e.to_string()));
        }
        self.sync_metadata(now, &mut report);
        // The desired-state changes of every partition, persisted in one write before any action.
        let mut due = Vec::new();
        for w in self.work() {
            if let Some((target, entering)) = self.plan(&w, now) {
                if let Some(value) = entering {
                    self.queue(&w, value);
                }
                due.push((w, target));
            }
        }
        let unrecorded = self.commit_transitions(now, &mut report);
        let mut round = Round::default();
        for (w, target) in due {
            if unrecorded.contains(&(w.topic.clone(), w.partition)) {
                continue; // its new state is not on disk: none of its actions run
            }
            match self.step(&w, target, now, &mut report) {
                Ok(Step::Done) => {}
                Ok(Step::Fetch(rt)) => round.fetch.push((w, rt)),
                Ok(Step::Stop) => round.stop.push(w),
                Ok(Step::Fence) => round.fence.push(w),
                Err(e) => self.unrecorded_error(&w, e, now, &mut report),
            }
        }
        // The partitions' own actions done, what is done together for many partitions: the fetches
        // of the round, then the stops; the epoch bumps of EPOCH_FENCING in one metadata write.
        self.fence_round(round.fence, now, &mut report);
        self.fetch_round(round.fetch, now, &mut report);
        self.stop_round(round.stop, now, &mut report);
        // The states the actions led to, in one write.
        self.commit_transitions(now, &mut report);
        // After the steps: a partition that reached MIRRORING this tick takes its offsets now.
        self.sync_group_offsets(now, &mut report);
        self.clean_step(now, &mut report);
        report.next_retry_ms = self.next_retry_ms(now);
        // Kafka's periodic producer expiration, for partitions no append reached (an append runs it
        // itself): one clock read per partition when the check is not due.
        let logs: Vec<_> = lock(&self.node.logs).values().cloned().collect();
        for log in logs {
            log.maybe_expire_producers();
        }
        report
    }

    /// The log cleaner's step (`crate::log_cleaner`): at most one bounded pass, when due.
    fn clean_step(&self, now: i64, report: &mut TickReport) {
        let done = lock(&self.cleaner).maybe_clean(&self.node, &self.settings.cleaner, now);
        if let Some(summary) = done.map(CleanedSummary::of) {
            if let Some(e) = &summary.error {
                let error = format!("log cleaner: {e}");
                report
                    .errors
                    .push((summary.topic.clone(), summary.partition, error));
            }
            report.cleaned.push(summary);
        }
    }

    /// The earliest time after `now` a partition wants another try (see [`retry::next_retry_ms`]).
    fn next_retry_ms(&self, now: i64) -> Option<i64> {
        let work = self.work();
        let rt = lock(&self.runtime);
        let waits = rt
            .values()
            .flat_map(|r| [r.not_before_ms, r.unrecorded_until_ms]);
        retry::next_retry_ms(&work, waits, now)
    }

    /// The metadata sync that rides along (§3.5), every `metadata_refresh_ms` per mirror: a source topic
    /// that gained partitions gets them here too (they then go through PREPARING like any new mirror
    /// partition). A source that cannot be reached is skipped; the fetcher reports it.
    fn sync_metadata(&self, now: i64, report: &mut TickReport) {
        let meta = self.node.metadata();
        for mirror in meta.mirrors.keys() {
            // Only started topics: a paused topic syncs nothing (§1.1: no fetcher, no metadata sync),
            // a stopped one is no longer the source's.
            let topics: Vec<(&String, &TopicMeta)> = meta
                .topics
                .iter()
                .filter(|(_, t)| {
                    t.mirror
                        .as_ref()
                        .is_some_and(|m| m.name == *mirror && m.desired == DesiredState::Start)
                })
                .collect();
            if topics.is_empty() {
                continue;
            }
            {
                let mut next = lock(&self.next_metadata_sync);
                if next.get(mirror).is_some_and(|t| now < *t) {
                    continue;
                }
                next.insert(mirror.clone(), now + self.settings.metadata_refresh_ms);
            }
            let Ok(source) = self.source_for(mirror) else {
                continue;
            };
            for (name, local) in topics {
                let Ok(Some(remote)) = source.topic(name) else {
                    continue;
                };
                if remote.id.to_string() != local.id || remote.partitions <= local.partitions {
                    continue;
                }
                if let Err(e) = topics::create_partitions(&self.node, name, remote.partitions) {
                    report.errors.push((name.clone(), -1, e.to_string()));
                }
            }
            // Configs and ACL bindings ride along (config_sync: started topics only).
            for (topic, e) in crate::config_sync::sync_mirror(&self.node, source.as_ref(), mirror) {
                report.errors.push((topic, -1, e));
            }
        }
    }

    /// Ticks until a tick changes nothing, or `max_ticks`. Returns the merged report.
    pub fn run_until_idle(&self, max_ticks: usize) -> TickReport {
        let mut all = TickReport::default();
        for _ in 0..max_ticks {
            let r = self.tick();
            let progressed = r.progressed();
            all.transitions.extend(r.transitions);
            all.batches_appended += r.batches_appended;
            all.bytes_appended += r.bytes_appended;
            all.truncations += r.truncations;
            all.errors.extend(r.errors);
            all.next_retry_ms = r.next_retry_ms;
            all.offsets_synced += r.offsets_synced;
            all.epochs_learned += r.epochs_learned;
            all.epoch_bumps += r.epoch_bumps;
            all.offset_clamps.extend(r.offset_clamps);
            all.cleaned.extend(r.cleaned);
            if !progressed {
                break;
            }
        }
        all
    }

    fn runtime_of(&self, w: &Work) -> PartitionRuntime {
        let mut rt = lock(&self.runtime);
        let entry = rt
            .entry((w.topic.clone(), w.partition))
            .or_insert_with(|| PartitionRuntime {
                mirror: w.key.mirror.clone(),
                ..Default::default()
            });
        if entry.mirror != w.key.mirror {
            *entry = PartitionRuntime {
                mirror: w.key.mirror.clone(),
                ..Default::default()
            };
        }
        entry.clone()
    }

    fn update_runtime(&self, w: &Work, f: impl FnOnce(&mut PartitionRuntime)) {
        let mut rt = lock(&self.runtime);
        if let Some(r) = rt.get_mut(&(w.topic.clone(), w.partition)) {
            f(r);
        }
    }

    /// A partition's plan for this tick: the state whose actions are due, with the value to record
    /// first when that is a desired-state change; `None` when nothing is due.
    fn plan(&self, w: &Work, now: i64) -> Option<(MirrorState, Option<PartitionStateValue>)> {
        use MirrorState::*;
        let rt = self.runtime_of(w);
        if waiting(now, rt.unrecorded_until_ms, &self.settings) {
            return None; // the backoff rule holds for an error no state could record, too
        }
        let current = w.stored.as_ref().map_or(Unknown, |(v, _)| v.state);
        let target = target_state(w, current, now, &self.settings)?;
        if target != current {
            if !current.can_transition_to(target) {
                return None; // "Skipping invalid transition"
            }
            return Some((target, Some(self.entering(w, current, target))));
        }
        if rt.entered && matches!(target, Paused | Stopped) {
            return None;
        }
        if waiting(now, rt.not_before_ms, &self.settings) {
            // One backoff rule: a state whose action failed (and could not even record FAILED, or is
            // backing off a fetch) runs it again only when due.
            return None;
        }
        // Otherwise the state's actions run: every tick for MIRRORING (one fetch), and once after open
        // for a recorded state being re-entered (no rewrite: PREPARING truncates again, STOPPING redoes
        // its idempotent steps).
        Some((target, None))
    }

    /// A partition's step, its state `target` recorded: the state's actions, or (MIRRORING's fetch,
    /// STOPPING's stop) what the round does for it together with the others.
    fn step(
        &self,
        w: &Work,
        target: MirrorState,
        now: i64,
        report: &mut TickReport,
    ) -> Result<Step, Error> {
        use MirrorState::*;
        let rt = self.runtime_of(w);
        // A write of this partition failed earlier (a full disk): reopen it with recovery first.
        self.node.heal_partition(&w.topic, w.partition)?;
        self.update_runtime(w, |r| r.entered = true);
        match target {
            Preparing => match self
                .source(w)
                .and_then(|s| fetcher::prepare(&self.node, s.as_ref(), w))
            {
                Ok(truncated) => {
                    report.truncations += truncated as u64;
                    self.update_runtime(w, |r| {
                        r.source_epoch = 0;
                        r.not_before_ms = 0;
                    });
                    self.transition(w, self.entering(w, Preparing, Mirroring), report)?;
                    Ok(Step::Done)
                }
                Err(e) => self.fail(w, Preparing, e, now, report).map(|()| Step::Done),
            },
            Mirroring if waiting(now, rt.not_before_ms, &self.settings) => Ok(Step::Done),
            Mirroring => Ok(Step::Fetch(rt)),
            Pausing => {
                // The fetcher is removed (ours runs only inside tick, so there is nothing to wait for).
                self.transition(w, self.entering(w, Pausing, Paused), report)?;
                Ok(Step::Done)
            }
            EpochFencing => Ok(Step::Fence),
            UleRecovery => self
                .recover_from_unclean_election(w, now, report)
                .map(|()| Step::Done),
            Stopping => Ok(Step::Stop),
            Paused | Stopped | Failed | Unknown => Ok(Step::Done),
        }
    }

    /// The fetches of a round (docs/mirroring.md, "The fetch round"): the due MIRRORING partitions
    /// grouped by mirror, one `fetch_each` to each mirror's source (`fetcher::fetch_from`), then one
    /// flush of the logs that need one.
    fn fetch_round(&self, fetch: Vec<(Work, PartitionRuntime)>, now: i64, report: &mut TickReport) {
        let mut by_mirror: BTreeMap<String, Vec<(Work, PartitionRuntime)>> = BTreeMap::new();
        for (w, rt) in fetch {
            by_mirror
                .entry(w.key.mirror.clone())
                .or_default()
                .push((w, rt));
        }
        let mut appended = Vec::new();
        for (mirror, partitions) in by_mirror {
            self.fetch_from(&mirror, partitions, now, report, &mut appended);
        }
        self.flush_round(appended, now, report);
    }

    /// The stops of a round (a failover): the STOPPING partitions' steps, each step for all of them
    /// together ([`stopping::stop_many`]), then STOPPED.
    fn stop_round(&self, stop: Vec<Work>, now: i64, report: &mut TickReport) {
        use MirrorState::*;
        let works: Vec<&Work> = stop.iter().collect();
        let results = stopping::stop_many(&self.node, &self.settings, &works);
        for (w, result) in stop.iter().zip(results) {
            let done = match result {
                Ok(truncated) => {
                    report.truncations += truncated as u64;
                    self.update_runtime(w, |r| {
                        r.failures = 0;
                        r.not_before_ms = 0;
                    });
                    self.transition(w, self.entering(w, Stopping, Stopped), report)
                }
                Err(e) => self.fail(w, Stopping, e, now, report),
            };
            if let Err(e) = done {
                self.unrecorded_error(w, e, now, report);
            }
        }
    }

    /// An error no state recorded (writing the state itself failed): reported, and the partition backs off.
    fn unrecorded_error(&self, w: &Work, e: Error, now: i64, report: &mut TickReport) {
        self.back_off_unrecorded(w, now);
        report
            .errors
            .push((w.topic.clone(), w.partition, e.to_string()));
    }

    /// The value recorded when `w` enters `to` from `from`. A retried stop (FAILED -> STOPPING) carries
    /// the LME its earlier attempt recorded: the stop goes on, it does not start again.
    fn entering(&self, w: &Work, from: MirrorState, to: MirrorState) -> PartitionStateValue {
        let mut value = PartitionStateValue {
            previous: from,
            ..PartitionStateValue::new(to)
        };
        if to == MirrorState::Stopping {
            value.stopping_last_mirror_epoch = stopping::lme_of_stop_in_progress(&self.node, w);
        }
        value
    }

    /// Queues `value` for the next [`Manager::commit_transitions`] ([`Manager::queue`]). Always `Ok`: a
    /// failed write is met by the commit, which backs the partition off.
    fn transition(
        &self,
        w: &Work,
        value: PartitionStateValue,
        _report: &mut TickReport,
    ) -> Result<(), Error> {
        self.queue(w, value);
        Ok(())
    }

    /// Queues `value` for the next [`Manager::commit_transitions`], which persists it before anything
    /// it implies happens (the write mode, the state's actions).
    fn queue(&self, w: &Work, mut value: PartitionStateValue) {
        // The reference's LeaderEpoch: the partition's leader epoch as the state is written.
        value.leader_epoch = self.node.leader_epoch(&w.topic, w.partition).unwrap_or(-1);
        lock(&self.pending).push((w.clone(), value));
    }

    /// Writes every queued transition in one `__mirror_state` write (a batch per partition of it, all
    /// synced together), then sets the write modes they imply. Returns the partitions whose state could
    /// not be written: they back off as for any unrecorded error, and nothing of the new state runs.
    fn commit_transitions(
        &self,
        now: i64,
        report: &mut TickReport,
    ) -> std::collections::BTreeSet<(String, i32)> {
        let pending = std::mem::take(&mut *lock(&self.pending));
        let mut unrecorded = std::collections::BTreeSet::new();
        if pending.is_empty() {
            return unrecorded;
        }
        let records = pending
            .iter()
            .map(|(w, v)| MirrorRecord::State(w.key.clone(), Some(v.clone())))
            .collect();
        let (written, partitions): (BTreeMap<u32, Result<(), Error>>, Vec<u32>) = {
            let mut store = lock(&self.node.store);
            let written = store.write_partitions(records);
            let partitions = pending.iter().map(|(w, _)| store.partition_of(&w.key));
            (written, partitions.collect())
        };
        for ((w, value), p) in pending.into_iter().zip(partitions) {
            if let Some(Err(e)) = written.get(&p) {
                self.back_off_unrecorded(&w, now);
                report.errors.push((
                    w.topic.clone(),
                    w.partition,
                    format!("recording {} failed: {e}", value.state),
                ));
                unrecorded.insert((w.topic.clone(), w.partition));
                continue;
            }
            self.recorded(&w, value.previous, value.state, report);
        }
        unrecorded
    }

    /// What follows a persisted transition of `w` from `from` to `to`: the write mode it implies.
    fn recorded(&self, w: &Work, from: MirrorState, to: MirrorState, report: &mut TickReport) {
        tracing::info!(key = ?w.key, %from, %to, "mirror partition state transition");
        self.update_runtime(w, |r| r.unrecorded = 0);
        if let Some(log) = self.node.log(&w.topic, w.partition) {
            log.set_write_mode(match to {
                MirrorState::Stopped => WriteMode::Writable,
                MirrorState::Stopping => self.node.stopping_write_mode(&w.key.mirror),
                _ => WriteMode::ReadOnly,
            });
        }
        report
            .transitions
            .push((w.topic.clone(), w.partition, from, to));
    }

    /// FAILED from `previous` (the state whose action failed), with the next retry time persisted
    /// beside the attempt count ([`retry::failure`]).
    fn fail(
        &self,
        w: &Work,
        previous: MirrorState,
        error: Error,
        now: i64,
        report: &mut TickReport,
    ) -> Result<(), Error> {
        // The count is of consecutive failures of one request: the FAILED this retry came from
        // recorded it (a stop asked for after another action failed starts its own count), or, for a
        // fetch that failed a pass after its retry, this process kept it until a fetch succeeds.
        let stored_attempts = w
            .stored
            .as_ref()
            .filter(|(v, _)| v.state == MirrorState::Failed)
            .filter(|(v, _)| previous != MirrorState::Stopping || v.previous == previous)
            .map_or(0, |(v, _)| v.retry_attempt.max(0));
        let kept = if previous == MirrorState::Mirroring {
            self.runtime_of(w).failures
        } else {
            0
        };
        let prior = kept.max(stored_attempts);
        let failure = retry::failure(&self.settings, &w.key, prior, &error, now);
        // Until FAILED is recorded (its write may fail too), the same wait holds for the action.
        let not_before = failure
            .next_retry_ms
            .unwrap_or(now + self.settings.failed_retry_max_backoff_ms);
        self.update_runtime(w, |r| {
            r.failures = failure.attempt.max(0);
            r.not_before_ms = not_before;
        });
        if matches!(error, Error::Source { .. }) {
            self.sources.forget(&w.key.mirror);
        }
        tracing::warn!(key = ?w.key, %previous, attempt = failure.attempt, %error, "mirror partition failed");
        report
            .errors
            .push((w.topic.clone(), w.partition, error.to_string()));
        let stopping_last_mirror_epoch = if previous == MirrorState::Stopping {
            stopping::lme_of_stop_in_progress(&self.node, w)
        } else {
            None
        };
        let value = PartitionStateValue {
            previous,
            retry_attempt: failure.attempt,
            error: Some(failure.message),
            next_retry_ms: failure.next_retry_ms,
            stopping_last_mirror_epoch,
            ..PartitionStateValue::new(MirrorState::Failed)
        };
        self.transition(w, value, report)
    }

    /// A step failed with an error that no state recorded (writing a state failed, or the partition
    /// could not be reopened): the partition waits as a FAILED one would, doubling with each one in a row.
    fn back_off_unrecorded(&self, w: &Work, now: i64) {
        let settings = &self.settings;
        self.update_runtime(w, |r| {
            r.unrecorded = r.unrecorded.saturating_add(1);
            r.unrecorded_until_ms = now + retry::backoff_ms(settings, &w.key, r.unrecorded);
        });
    }

    /// Forgets the failure counts and backoffs of the given partitions (an operator reset them).
    pub(crate) fn reset_failures(&self, topic: &str, partitions: &[i32]) {
        let mut rt = lock(&self.runtime);
        for p in partitions {
            if let Some(r) = rt.get_mut(&(topic.to_owned(), *p)) {
                r.failures = 0;
                r.not_before_ms = 0;
                r.unrecorded = 0;
                r.unrecorded_until_ms = 0;
            }
        }
    }

    fn source(&self, w: &Work) -> Result<Arc<dyn MirrorSource>, Error> {
        self.source_for(&w.key.mirror)
            .map_err(|e| source_error(&w.key.mirror, e))
    }
}
