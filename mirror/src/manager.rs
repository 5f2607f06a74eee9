//! The mirror manager: drives each mirror partition through the state machine and runs its actions
//! (KIP-1279 §1.3-1.6, §2.3, §2.6, §3.3). It is a step function, `Cluster::tick`, so tests drive it
//! deterministically and `klog mirror run` loops it.
//!
//! Rules it keeps:
//! - a state is persisted to `__mirror_state` before its actions run; on open every partition re-runs
//!   the actions of its recorded state;
//! - no lock of this cluster is held while a source is called (a source may be another cluster that is
//!   fetching from this one);
//! - one partition's failure moves only that partition to FAILED.

use std::collections::BTreeMap;
use std::sync::Arc;

use klog_log::checkpoint::TopicId;
use klog_log::format::{AnyBatch, BatchBuilder, Batches, ControlRecordType};
use klog_log::partition_log::{PartitionLog, WriteMode};
use klog_log::validator::AppendOrigin;

use crate::cluster::Cluster;
use crate::error::Error;
use crate::kafka_source::{KafkaSource, KAFKA_SCHEME};
use crate::metadata::{DesiredState, MirrorMeta};
use crate::records::{MirrorKey, MirrorRecord, PartitionStateValue};
use crate::source::{FetchRequest, Isolation, LocalSource, MirrorSource, SourceError};
use crate::state::MirrorState;

/// Opens the source a mirror names. The default opens `kafka://` sources as a [`KafkaSource`] and
/// anything else as a local cluster root; tests register their own.
pub type SourceFactory =
    Arc<dyn Fn(&str, &MirrorMeta) -> Result<Arc<dyn MirrorSource>, SourceError> + Send + Sync>;

/// The sources a cluster's mirrors fetch from: connected ones, and a factory for the rest.
#[derive(Default)]
pub struct SourceResolver {
    connected: BTreeMap<String, Arc<dyn MirrorSource>>,
    factory: Option<SourceFactory>,
    /// Local clusters this cluster opened itself as sources (closed with it).
    owned: Vec<Arc<Cluster>>,
}

impl SourceResolver {
    pub(crate) fn forget(&mut self, mirror: &str) {
        self.connected.remove(mirror);
    }

    pub(crate) fn take_owned(&mut self) -> Vec<Arc<Cluster>> {
        self.connected.clear();
        std::mem::take(&mut self.owned)
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
    pub(crate) source_high_watermark: Option<i64>,
    /// Not before this time (fetch backoff, FAILED retry).
    pub(crate) not_before_ms: i64,
    /// Consecutive failures (the FAILED retry count), reset by a successful action.
    pub(crate) failures: i16,
}

/// What one tick did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickReport {
    /// `(topic, partition, from, to)` for every persisted transition.
    pub transitions: Vec<(String, i32, MirrorState, MirrorState)>,
    /// Batches appended by the fetchers.
    pub batches_appended: u64,
    /// Bytes appended by the fetchers.
    pub bytes_appended: u64,
    /// Truncations (PREPARING, a diverging epoch, STOPPING's cut to the LSO).
    pub truncations: u64,
    /// Partitions whose action failed this tick, with the error.
    pub errors: Vec<(String, i32, String)>,
    /// The earliest time a backed-off partition wants another try.
    pub next_retry_ms: Option<i64>,
}

impl TickReport {
    /// Whether anything changed (states, log contents).
    pub fn progressed(&self) -> bool {
        !self.transitions.is_empty() || self.batches_appended > 0 || self.truncations > 0
    }
}

struct Work {
    topic: String,
    partition: i32,
    key: MirrorKey,
    desired: DesiredState,
    stored: Option<(PartitionStateValue, i64)>,
}

impl Cluster {
    /// Registers how mirrors find their sources (replacing the default, which opens local cluster roots).
    pub fn set_source_factory(&self, factory: SourceFactory) {
        let mut r = self.resolver.lock().unwrap_or_else(|e| e.into_inner());
        r.factory = Some(factory);
        r.connected.clear();
    }

    /// Connects `mirror` to an already open source (tests; one process holding several clusters).
    pub fn connect_source(&self, mirror: &str, source: Arc<dyn MirrorSource>) {
        let mut r = self.resolver.lock().unwrap_or_else(|e| e.into_inner());
        r.connected.insert(mirror.to_owned(), source);
    }

    /// The source of `mirror`, connected on first use; its cluster id is learned then and checked after.
    pub(crate) fn source_for(&self, mirror: &str) -> Result<Arc<dyn MirrorSource>, SourceError> {
        let mirror_meta = self
            .meta
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .mirrors
            .get(mirror)
            .cloned()
            .ok_or_else(|| SourceError::Refused(format!("no mirror named {mirror}")))?;
        let existing = {
            let r = self.resolver.lock().unwrap_or_else(|e| e.into_inner());
            r.connected
                .get(mirror)
                .cloned()
                .map(Ok)
                .or_else(|| r.factory.as_ref().map(|f| Arc::clone(f)).map(Err))
        };
        let source = match existing {
            Some(Ok(s)) => s,
            Some(Err(factory)) => factory(mirror, &mirror_meta)?,
            None if mirror_meta.source.starts_with(KAFKA_SCHEME) => {
                Arc::new(KafkaSource::new(&mirror_meta.source)?)
            }
            None => {
                let cluster = open_local_source(&mirror_meta, self.storage().is_read_only())?;
                self.resolver
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .owned
                    .push(Arc::clone(&cluster));
                Arc::new(LocalSource::new(cluster))
            }
        };
        let id = source.cluster_id()?;
        if id == self.cluster_id() {
            return Err(SourceError::Refused(format!(
                "mirror {mirror}: the source {} is this cluster ({id})",
                source.describe()
            )));
        }
        match &mirror_meta.source_cluster_id {
            Some(known) if *known != id => {
                return Err(SourceError::Refused(format!(
                    "mirror {mirror}: the source cluster id changed from {known} to {id}"
                )));
            }
            Some(_) => {}
            None => {
                let mut guard = self.meta.lock().unwrap_or_else(|e| e.into_inner());
                let mut meta = guard.clone();
                if let Some(m) = meta.mirrors.get_mut(mirror) {
                    m.source_cluster_id = Some(id);
                    self.save_meta(&mut guard, meta)
                        .map_err(|e| SourceError::Unavailable(e.to_string()))?;
                }
            }
        }
        self.resolver
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .connected
            .insert(mirror.to_owned(), Arc::clone(&source));
        Ok(source)
    }

    fn drop_source(&self, mirror: &str) {
        self.resolver
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .forget(mirror);
    }

    /// The mirror partitions to drive, with their recorded states.
    fn work(&self) -> Vec<Work> {
        let meta = self.metadata();
        let store = self.store.lock().unwrap_or_else(|e| e.into_inner());
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
        let mut report = TickReport::default();
        let now = self.clock.now_ms();
        self.sync_metadata(now, &mut report);
        for w in self.work() {
            if let Err(e) = self.step(&w, now, &mut report) {
                report
                    .errors
                    .push((w.topic.clone(), w.partition, e.to_string()));
            }
        }
        let rt = self.runtime.lock().unwrap_or_else(|e| e.into_inner());
        report.next_retry_ms = rt
            .values()
            .map(|r| r.not_before_ms)
            .filter(|t| *t > now)
            .min();
        report
    }

    /// The metadata sync that rides along (§3.5), every `metadata_refresh_ms` per mirror: a source topic
    /// that gained partitions gets them here too (they then go through PREPARING like any new mirror
    /// partition). A source that cannot be reached is skipped; the fetcher reports it.
    fn sync_metadata(&self, now: i64, report: &mut TickReport) {
        let meta = self.metadata();
        for mirror in meta.mirrors.keys() {
            {
                let mut next = self
                    .next_metadata_sync
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                if next.get(mirror).is_some_and(|t| now < *t) {
                    continue;
                }
                next.insert(mirror.clone(), now + self.settings.metadata_refresh_ms);
            }
            let topics: Vec<(&String, &crate::metadata::TopicMeta)> = meta
                .topics
                .iter()
                .filter(|(_, t)| {
                    t.mirror
                        .as_ref()
                        .is_some_and(|m| m.name == *mirror && m.desired != DesiredState::Stop)
                })
                .collect();
            if topics.is_empty() {
                continue;
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
                if let Err(e) = self.create_partitions(name, remote.partitions) {
                    report.errors.push((name.clone(), -1, e.to_string()));
                }
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
            if !progressed {
                break;
            }
        }
        all
    }

    fn runtime_of(&self, w: &Work) -> PartitionRuntime {
        let mut rt = self.runtime.lock().unwrap_or_else(|e| e.into_inner());
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
        let mut rt = self.runtime.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = rt.get_mut(&(w.topic.clone(), w.partition)) {
            f(r);
        }
    }

    fn step(&self, w: &Work, now: i64, report: &mut TickReport) -> Result<(), Error> {
        use MirrorState::*;
        let rt = self.runtime_of(w);
        let current = w.stored.as_ref().map_or(Unknown, |(v, _)| v.state);
        let failed = w
            .stored
            .as_ref()
            .filter(|(v, _)| v.state == Failed)
            .map(|(v, _)| v.clone());
        // What the desired state asks for, from the current state (§1.3).
        let target = match (w.desired, current) {
            (DesiredState::Stop, Stopped) => Stopped,
            (DesiredState::Stop, _) => Stopping,
            (_, Failed) => {
                let f = failed.expect("failed state");
                if f.retry_attempt < 0 || now < rt.not_before_ms {
                    return Ok(());
                }
                match f.previous {
                    Unknown | Failed | Stopped => Preparing,
                    Pausing | Paused => Mirroring,
                    other => other,
                }
            }
            (_, Stopping) => Stopping,
            (_, Pausing) => Pausing,
            (_, Unknown | Stopped) => Preparing,
            (DesiredState::Start, Paused) => Mirroring,
            (DesiredState::Pause, Mirroring) => Pausing,
            (DesiredState::Pause, Paused) => Paused,
            (_, s) => s,
        };
        if target != current {
            if !current.can_transition_to(target) {
                return Ok(()); // "Skipping invalid transition"
            }
            self.transition(w, current, target, None, report)?;
        } else if rt.entered && matches!(target, Paused | Stopped) {
            return Ok(());
        }
        // Otherwise the state's actions run: every tick for MIRRORING (one fetch), and once after open
        // for a recorded state being re-entered (no rewrite: PREPARING truncates again, STOPPING redoes
        // its idempotent steps).
        self.update_runtime(w, |r| r.entered = true);
        match target {
            Preparing => match self.prepare(w) {
                Ok(truncated) => {
                    report.truncations += truncated as u64;
                    self.update_runtime(w, |r| {
                        r.source_epoch = 0;
                        r.not_before_ms = 0;
                    });
                    self.transition(w, Preparing, Mirroring, None, report)
                }
                Err(e) => self.fail(w, Preparing, e, now, report),
            },
            Mirroring => {
                if now < rt.not_before_ms {
                    return Ok(());
                }
                match self.fetch_once(w, &rt, report) {
                    Ok(()) => Ok(()),
                    Err(FetchOutcome::Backoff(msg)) => {
                        let until = now + self.settings.fetch_backoff_ms;
                        self.update_runtime(w, |r| r.not_before_ms = until);
                        report.errors.push((w.topic.clone(), w.partition, msg));
                        Ok(())
                    }
                    Err(FetchOutcome::Fail(e)) => self.fail(w, Mirroring, e, now, report),
                }
            }
            Pausing => {
                // The fetcher is removed (ours runs only inside tick, so there is nothing to wait for).
                self.transition(w, Pausing, Paused, None, report)
            }
            Stopping => match self.stop(w) {
                Ok(truncated) => {
                    report.truncations += truncated as u64;
                    self.update_runtime(w, |r| r.failures = 0);
                    self.transition(w, Stopping, Stopped, None, report)
                }
                Err(e) => self.fail(w, Stopping, e, now, report),
            },
            Paused | Stopped | Failed | Unknown => Ok(()),
        }
    }

    /// Persists `to` (with FAILED details) before anything else happens, then sets the write mode.
    fn transition(
        &self,
        w: &Work,
        from: MirrorState,
        to: MirrorState,
        failure: Option<(MirrorState, i16, String)>,
        report: &mut TickReport,
    ) -> Result<(), Error> {
        let value = match failure {
            Some((previous, attempt, error)) => PartitionStateValue {
                state: to,
                previous,
                retry_attempt: attempt,
                error: Some(error),
            },
            None => PartitionStateValue {
                previous: from,
                ..PartitionStateValue::new(to)
            },
        };
        self.store
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .write(vec![MirrorRecord::State(w.key.clone(), Some(value))])?;
        tracing::info!(key = ?w.key, %from, %to, "mirror partition state transition");
        if let Some(log) = self.log(&w.topic, w.partition) {
            log.set_write_mode(match to {
                MirrorState::Stopped => WriteMode::Writable,
                MirrorState::Stopping => WriteMode::BarrierOnly,
                _ => WriteMode::ReadOnly,
            });
        }
        report
            .transitions
            .push((w.topic.clone(), w.partition, from, to));
        Ok(())
    }

    /// FAILED with exponential backoff (20% jitter) from `previous`; a refusal is not retried.
    fn fail(
        &self,
        w: &Work,
        previous: MirrorState,
        error: Error,
        now: i64,
        report: &mut TickReport,
    ) -> Result<(), Error> {
        let stored_attempts = w
            .stored
            .as_ref()
            .filter(|(v, _)| v.state == MirrorState::Failed)
            .map_or(0, |(v, _)| v.retry_attempt.max(0));
        let prior = self.runtime_of(w).failures.max(stored_attempts);
        let retryable = !matches!(error, Error::Refused(_));
        let attempt = if !retryable || prior + 1 > self.settings.failed_retry_max_attempts {
            -1
        } else {
            prior + 1
        };
        self.update_runtime(w, |r| r.failures = attempt.max(0));
        if attempt > 0 {
            let base = self
                .settings
                .failed_retry_initial_backoff_ms
                .saturating_mul(1i64 << (attempt - 1).min(30))
                .min(self.settings.failed_retry_max_backoff_ms);
            let jitter = jitter_fraction(&w.key, attempt);
            let delay = (base as f64 * (1.0 + 0.2 * jitter)) as i64;
            self.update_runtime(w, |r| r.not_before_ms = now + delay.max(1));
        }
        if matches!(error, Error::Source { .. }) {
            self.drop_source(&w.key.mirror);
        }
        // `previous` is the state whose action failed: the state the partition is in now (a retry
        // persisted it before running the action).
        tracing::warn!(key = ?w.key, %previous, attempt, %error, "mirror partition failed");
        report
            .errors
            .push((w.topic.clone(), w.partition, error.to_string()));
        self.transition(
            w,
            previous,
            MirrorState::Failed,
            Some((previous, attempt, error.to_string())),
            report,
        )
    }

    fn partition_log(&self, w: &Work) -> Result<Arc<PartitionLog>, Error> {
        self.log(&w.topic, w.partition)
            .ok_or_else(|| Error::Refused(format!("{}-{} has no log", w.topic, w.partition)))
    }

    fn source(&self, w: &Work) -> Result<Arc<dyn MirrorSource>, Error> {
        self.source_for(&w.key.mirror)
            .map_err(|e| source_error(&w.key.mirror, e))
    }

    /// PREPARING (§2.3): truncate to the end of the last mirrored epoch the source reports. Returns
    /// whether anything was removed.
    fn prepare(&self, w: &Work) -> Result<bool, Error> {
        let source = self.source(w)?;
        let lme = source
            .last_mirrored_epoch(&self.cluster_id(), w.key.topic_id, w.partition)
            .map_err(|e| source_error(&source.describe(), e))?;
        let log = self.partition_log(w)?;
        let leo = log.log_end_offset();
        let target = if lme < 0 {
            0
        } else {
            match log.latest_epoch() {
                None => 0,
                Some(latest) if lme > latest => {
                    return Err(Error::Refused(format!(
                        "{}-{}: the source's last mirrored epoch {lme} is above every local epoch (latest {latest}); \
                         refusing to truncate the log (was data lost here?)",
                        w.topic, w.partition
                    )));
                }
                Some(_) => log.end_offset_for_epoch(lme).map_or(0, |(_, o)| o),
            }
        };
        if target < leo || (target == 0 && log.log_start_offset() > 0) {
            log.truncate_to(target)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// One fetch for a MIRRORING partition (§2.6, §3.3).
    fn fetch_once(
        &self,
        w: &Work,
        rt: &PartitionRuntime,
        report: &mut TickReport,
    ) -> Result<(), FetchOutcome> {
        let source = self.source(w).map_err(FetchOutcome::Fail)?;
        let log = self.partition_log(w).map_err(FetchOutcome::Fail)?;
        let request = FetchRequest {
            topic: w.topic.clone(),
            topic_id: w.key.topic_id,
            partition: w.partition,
            fetch_offset: log.log_end_offset(),
            last_fetched_epoch: log.latest_epoch(),
            current_leader_epoch: rt.source_epoch,
            max_bytes: self.settings.fetch_max_bytes,
            isolation: Isolation::ReadCommitted,
        };
        let response = match source.fetch(&request) {
            Ok(r) => r,
            Err(SourceError::FencedLeaderEpoch { leader_epoch })
                if leader_epoch != rt.source_epoch =>
            {
                self.update_runtime(w, |r| r.source_epoch = leader_epoch);
                return self.fetch_once(
                    w,
                    &PartitionRuntime {
                        source_epoch: leader_epoch,
                        ..rt.clone()
                    },
                    report,
                );
            }
            Err(SourceError::UnknownLeaderEpoch) => {
                // Our idea of the source epoch is ahead of the source's metadata: rediscover it.
                self.update_runtime(w, |r| r.source_epoch = 0);
                return Err(FetchOutcome::Backoff(format!(
                    "{}: UNKNOWN_LEADER_EPOCH at epoch {}",
                    source.describe(),
                    rt.source_epoch
                )));
            }
            Err(SourceError::OffsetOutOfRange) => {
                return self.out_of_range(w, source.as_ref(), &log, report);
            }
            Err(SourceError::UnknownTopicOrPartition(what)) => {
                return Err(FetchOutcome::Fail(Error::Refused(format!(
                    "the source topic is gone ({what}); remove it from the mirror to make it writable"
                ))));
            }
            Err(e) => return Err(FetchOutcome::Fail(source_error(&source.describe(), e))),
        };
        if let Some((epoch, end)) = response.diverging_epoch {
            // Kafka's follower rule: in the same epoch, the smaller end; otherwise our end of that epoch
            // (the next fetch finds the rest).
            let target = match log.end_offset_for_epoch(epoch) {
                Some((e, o)) if e == epoch => end.min(o),
                Some((_, o)) => o,
                None => end.min(log.log_end_offset()),
            };
            log.truncate_to(target)
                .map_err(|e| FetchOutcome::Fail(e.into()))?;
            report.truncations += 1;
            return Ok(());
        }
        let whole = whole_batches(&response.records);
        if whole > 0 {
            let info = log
                .append_as_mirror(&response.records[..whole])
                .map_err(|e| FetchOutcome::Fail(e.into()))?;
            report.batches_appended += info.batches as u64;
            report.bytes_appended += info.bytes as u64;
        }
        let start = response.log_start_offset.min(log.log_end_offset());
        if start > log.log_start_offset() {
            log.increment_log_start_offset(start)
                .map_err(|e| FetchOutcome::Fail(e.into()))?;
        }
        let hw = response.high_watermark;
        self.update_runtime(w, |r| {
            r.source_high_watermark = Some(hw);
            r.not_before_ms = 0;
            r.failures = 0; // a successful fetch ends a FAILED episode's count
        });
        Ok(())
    }

    /// OFFSET_OUT_OF_RANGE (§2.6): behind the source's start -> restart there; ahead of its end -> cut.
    fn out_of_range(
        &self,
        w: &Work,
        source: &dyn MirrorSource,
        log: &PartitionLog,
        report: &mut TickReport,
    ) -> Result<(), FetchOutcome> {
        let (start, end) = source
            .list_offsets(&w.topic, w.key.topic_id, w.partition)
            .map_err(|e| FetchOutcome::Fail(source_error(&source.describe(), e)))?;
        let leo = log.log_end_offset();
        let r = if end < leo {
            log.truncate_to(end)
        } else if start > leo {
            log.truncate_fully_and_start_at(start)
        } else {
            return Err(FetchOutcome::Backoff(format!(
                "{}: OFFSET_OUT_OF_RANGE at {leo} inside the source's range [{start}, {end}]",
                source.describe()
            )));
        };
        r.map_err(|e| FetchOutcome::Fail(e.into()))?;
        report.truncations += 1;
        Ok(())
    }

    /// STOPPING (§1.4, in the corrected order): LME recorded, epoch bumped above it, truncated to the
    /// local LSO, MIRROR_PID_RESET appended and flushed. Every step is idempotent, so re-running it after
    /// a crash ends in the same state. Returns whether the LSO truncation removed anything.
    fn stop(&self, w: &Work) -> Result<bool, Error> {
        // 1. The fetcher is stopped: ours only runs inside tick, and the state is no longer MIRRORING.
        //    What it appended is made durable before the LME is read from it.
        let log = self.partition_log(w)?;
        if self.settings.fsync {
            log.flush(log.log_end_offset())?;
        }
        let epoch_now = self.leader_epoch(&w.topic, w.partition).unwrap_or(0);
        if barrier_at_end(&log, epoch_now)? {
            return Ok(false); // a crash after the barrier: the stop already happened
        }
        // 2. LME: the latest epoch before the bump, recorded once per stop (an LME written after this
        //    STOPPING record belongs to this stop; recomputing it would see the bumped epoch).
        let stopping_offset = self
            .store
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .state(&w.key)
            .filter(|s| s.value.state == MirrorState::Stopping)
            .map(|s| s.offset);
        let recorded = {
            let store = self.store.lock().unwrap_or_else(|e| e.into_inner());
            store
                .last_mirror_epoch(&w.key)
                .filter(|l| stopping_offset.is_some_and(|s| l.offset > s))
                .map(|l| l.value)
        };
        let lme = match recorded {
            Some(l) => Some(l),
            None => {
                let latest = log.latest_epoch();
                if let Some(e) = latest {
                    self.store
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .write(vec![MirrorRecord::LastMirrorEpoch(w.key.clone(), Some(e))])?;
                }
                latest
            }
        };
        // 3. Bump the leader epoch above the LME, to draw the line for a future failback.
        let min = lme.map_or(0, |l| l + 1);
        let epoch = if epoch_now < min {
            self.bump_leader_epoch(&w.topic, w.partition, min)?
        } else {
            epoch_now
        };
        // 4. Truncate to the local LSO: no transaction stays open across the barrier.
        let lso = log.last_stable_offset();
        let truncated = lso < log.log_end_offset();
        if truncated {
            log.truncate_to(lso)?;
        }
        tracing::info!(key = ?w.key, ?lme, epoch, lso, "failover: epoch bumped, log cut to the LSO");
        // 5. The barrier, through the leader path (STOPPING admits exactly this append), then flushed.
        let source_cluster_id = self
            .meta
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .mirrors
            .get(&w.key.mirror)
            .and_then(|m| m.source_cluster_id.clone());
        if let Some(id) = source_cluster_id {
            let mut barrier = BatchBuilder::mirror_pid_reset(&id, self.clock.now_ms())?.build()?;
            log.append_as_leader_with_origin(&mut barrier, epoch, AppendOrigin::Coordinator)?;
            log.update_high_watermark(log.log_end_offset());
            tracing::info!(key = ?w.key, epoch, "failover: MIRROR_PID_RESET barrier written");
        }
        if self.settings.fsync {
            log.flush(log.log_end_offset())?;
        }
        Ok(truncated)
    }
}

enum FetchOutcome {
    /// Retry the fetch after `mirror.fetch.backoff.ms`; the state stays MIRRORING.
    Backoff(String),
    /// Move the partition to FAILED.
    Fail(Error),
}

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

/// Whether the log ends with a MIRROR_PID_RESET barrier written at `epoch`.
fn barrier_at_end(log: &PartitionLog, epoch: i32) -> Result<bool, Error> {
    let leo = log.log_end_offset();
    if leo <= log.log_start_offset() {
        return Ok(false);
    }
    let read = log.read(leo - 1, 1 << 16, Some(leo), true)?;
    let mut last = None;
    let mut scratch = Vec::new();
    for b in Batches::new(read.records.as_slice()) {
        if let AnyBatch::V2(b) = b? {
            let is_barrier = b.is_control()
                && b.partition_leader_epoch() == epoch
                && b.records(&mut scratch)?
                    .next()
                    .and_then(|r| r.ok())
                    .and_then(|r| r.key)
                    .is_some_and(|k| k == ControlRecordType::MirrorPidReset.key());
            last = Some(is_barrier);
        }
    }
    Ok(last == Some(true))
}

/// The length of the complete batches at the front of `bytes` (a fetch may end in a partial batch).
fn whole_batches(bytes: &[u8]) -> usize {
    let mut end = 0;
    for b in Batches::new(bytes).without_crc() {
        match b {
            Ok(b) => end = (b.position() as usize) + b.size_in_bytes(),
            Err(_) => break,
        }
    }
    end
}

/// A deterministic jitter in [-1, 1] for a partition's retry (no clock or RNG: repeatable in tests).
fn jitter_fraction(key: &MirrorKey, attempt: i16) -> f64 {
    let h = crate::records::java_string_hash(&format!("{}:{attempt}", key.coordinator_key()));
    (h as f64) / (i32::MAX as f64)
}

/// A local source cluster, opened as a writer (it serves fetches and LME lookups from its own state), or
/// read-only when the destination itself was opened read-only (`klog mirror describe`).
fn open_local_source(meta: &MirrorMeta, read_only: bool) -> Result<Arc<Cluster>, SourceError> {
    let root = std::path::Path::new(&meta.source);
    let std: Arc<dyn klog_log::io::Storage> = Arc::new(klog_log::io::StdStorage);
    let storage = if read_only {
        klog_log::partition_log::read_only_view(std)
    } else {
        std
    };
    let cluster = Cluster::open(storage, Arc::new(klog_log::clock::SystemClock), root)
        .map_err(|e| SourceError::Unavailable(format!("{}: {e}", meta.source)))?;
    Ok(Arc::new(cluster))
}
