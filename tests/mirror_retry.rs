//! FAILED and its retries (issue 13, defects 3, 5 and 10): a failing stop waits for its backoff and
//! records its last mirrored epoch once; a paused topic syncs nothing; the next retry time survives
//! restarts; `resume` and `retry` reset a FAILED partition; `describe` says why and when.

#[path = "mirror_support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use klog::log::checkpoint::TopicId;
use klog::log::clock::Clock;
use klog::log::format::{ControlRecordType, RecordBatch};
use klog::log::io::{Fault, SimStorage, StdStorage};
use klog::mirror::records::MirrorRecord;
use klog::mirror::source::{FetchRequest, FetchResponse, SourceError, SourceTopic};
use klog::mirror::{
    Cluster, ClusterOptions, LocalSource, MirrorSettings, MirrorSource, MirrorState,
    PartitionDescription,
};
use support::*;

const PID: i64 = 4242;

/// 3 idempotent records at epoch 0, two leader elections, 3 more at epoch 2.
fn source(env: &Env) -> Arc<Cluster> {
    let a = env.cluster("a");
    a.create_topic("t", 1, None, &[]).unwrap();
    a.produce("t", 0, &mut batch(PID, 0, 0, 3, false, "a0"))
        .unwrap();
    a.bump_leader_epoch("t", 0, 2).unwrap();
    a.produce("t", 0, &mut batch(PID, 0, 3, 3, false, "a1"))
        .unwrap();
    a
}

fn synced(env: &Env, b: &Arc<Cluster>, a: &Arc<Cluster>) {
    link(b, "m", a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(batches(&log(b, "t")), batches(&log(a, "t")));
    let _ = env;
}

/// The log end offset of every `__mirror_state` partition: what has been written to it so far.
fn state_log_ends(c: &Cluster) -> Vec<i64> {
    (0..ClusterOptions::default().mirror_state_partitions as i32)
        .map(|p| c.log("__mirror_state", p).unwrap().log_end_offset())
        .collect()
}

/// How many non-null LastMirrorEpoch records `__mirror_state` holds for mirror `m`.
fn lme_records(c: &Cluster) -> usize {
    let mut n = 0;
    for p in 0..ClusterOptions::default().mirror_state_partitions as i32 {
        for stored in batches(&c.log("__mirror_state", p).unwrap()) {
            let (batch, _) = RecordBatch::parse(&stored.bytes, 0).unwrap();
            if batch.is_control() {
                continue;
            }
            let mut scratch = Vec::new();
            for record in batch.records(&mut scratch).unwrap() {
                let record = record.unwrap();
                if let Ok(MirrorRecord::LastMirrorEpoch(k, Some(_))) =
                    MirrorRecord::decode(record.key, record.value)
                {
                    n += (k.mirror == "m") as usize;
                }
            }
        }
    }
    n
}

fn row(c: &Cluster) -> PartitionDescription {
    c.describe().into_iter().find(|d| d.topic == "t").unwrap()
}

/// A stop that fails at any one storage operation goes to FAILED once, waits for its backoff however
/// many passes run, and its retry (after a restart, since a failed write leaves the log refusing writes
/// until reopened) completes the same stop: the LME recorded once, one barrier.
#[test]
fn a_failing_stop_waits_for_its_backoff_and_records_its_lme_once() {
    let mut faulted_runs = 0;
    for k in 1.. {
        let env = Env::new();
        let sim = Arc::new(SimStorage::new(k));
        let a = source(&env);
        let b = env.cluster_on(sim.clone(), "b");
        synced(&env, &b, &a);
        b.checkpoint().unwrap();
        all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
        let start = sim.ops();
        sim.inject(start + k, Fault::Eio);
        b.tick();
        let finished = sim.ops() < start + k;
        let written = state_log_ends(&b);
        for _ in 0..5 {
            b.tick();
        }
        assert_eq!(
            state_log_ends(&b),
            written,
            "k={k}: a failed stop is retried before its backoff"
        );
        if row(&b).state == Some(MirrorState::Failed) {
            assert_eq!(row(&b).retry_attempt, Some(1), "k={k}");
        }
        drop(b);
        sim.clear_faults();
        let b = env.reopen(sim.clone(), "b");
        b.connect_source("m", Arc::new(a.as_source()));
        env.clock.advance(5_000);
        let r = b.run_until_idle(100);
        assert!(r.errors.is_empty(), "k={k}: {:?}", r.errors);
        assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Stopped), "k={k}");
        assert_eq!(lme_of(&b, "t"), Some(2), "k={k}");
        assert_eq!(b.leader_epoch("t", 0), Some(12), "k={k}");
        assert_eq!(
            lme_records(&b),
            1,
            "k={k}: the LME is recorded once per stop"
        );
        let all = batches(&log(&b, "t"));
        let mirrored = batches(&log(&a, "t"));
        assert_eq!(all[..mirrored.len()], mirrored[..], "k={k}");
        let barriers = &all[mirrored.len()..];
        assert_eq!(barriers.len(), 1, "k={k}: {barriers:?}");
        assert_eq!(
            control_type(&barriers[0]),
            Some(ControlRecordType::MirrorPidReset)
        );
        assert_eq!(barriers[0].epoch, 12, "k={k}");
        if finished {
            break;
        }
        faulted_runs += 1;
    }
    assert!(
        faulted_runs >= 5,
        "the stop performs several storage operations"
    );
}

/// A source that can be switched off and counts every call made to it.
struct Watched {
    inner: LocalSource,
    down: AtomicBool,
    calls: AtomicUsize,
}

impl Watched {
    fn new(a: &Arc<Cluster>) -> Arc<Self> {
        Arc::new(Watched {
            inner: a.as_source(),
            down: AtomicBool::new(false),
            calls: AtomicUsize::new(0),
        })
    }

    fn check(&self) -> Result<(), SourceError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            return Err(SourceError::Unavailable("connection refused".into()));
        }
        Ok(())
    }
}

impl MirrorSource for Watched {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn cluster_id(&self) -> Result<String, SourceError> {
        self.check()?;
        self.inner.cluster_id()
    }
    fn topic(&self, name: &str) -> Result<Option<SourceTopic>, SourceError> {
        self.check()?;
        self.inner.topic(name)
    }
    fn fetch(&self, r: &FetchRequest) -> Result<FetchResponse, SourceError> {
        self.check()?;
        self.inner.fetch(r)
    }
    fn list_offsets(&self, t: &str, id: TopicId, p: i32) -> Result<(i64, i64), SourceError> {
        self.check()?;
        self.inner.list_offsets(t, id, p)
    }
    fn last_mirrored_epoch(&self, c: &str, id: TopicId, p: i32) -> Result<i32, SourceError> {
        self.check()?;
        self.inner.last_mirrored_epoch(c, id, p)
    }
    fn committed_offsets(
        &self,
        topics: &std::collections::BTreeSet<String>,
    ) -> Result<Vec<klog::mirror::source::SourceGroup>, SourceError> {
        self.check()?;
        self.inner.committed_offsets(topics)
    }
}

/// A paused topic syncs nothing: a source partition-count increase is neither applied nor even asked
/// about while paused (no source call at all); after resume the next metadata sync picks it up.
#[test]
fn a_paused_topic_syncs_no_metadata() {
    let env = Env::new();
    let a = source(&env);
    let b = env.cluster("b");
    synced(&env, &b, &a);
    all_ok(b.pause_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Paused));
    let watched = Watched::new(&a);
    b.connect_source("m", watched.clone());
    a.create_partitions("t", 2).unwrap();
    a.produce("t", 1, &mut plain(2, "p1")).unwrap();
    for _ in 0..3 {
        env.clock.advance(30_000);
        let r = b.run_until_idle(100);
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert!(r.transitions.is_empty(), "{r:?}");
    }
    assert_eq!(b.topic("t").unwrap().partitions, 1, "synced while paused");
    assert_eq!(
        watched.calls.load(Ordering::SeqCst),
        0,
        "the source was called while paused"
    );
    all_ok(b.resume_topics("m", &topics(&["t"])).unwrap());
    env.clock.advance(30_000);
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(b.topic("t").unwrap().partitions, 2);
    assert_eq!(
        batches(&b.log("t", 1).unwrap()),
        batches(&a.log("t", 1).unwrap())
    );
    assert_eq!(state_of(&b, "t", 1), Some(MirrorState::Mirroring));
}

/// The retry time is kept with the attempt count: short runs after restarts do not retry early, so
/// restarts alone never use up the attempts; after the backoff the retry happens.
#[test]
fn the_next_retry_time_survives_restarts() {
    let env = Env::new();
    let a = source(&env);
    let mut b = env.cluster("b");
    synced(&env, &b, &a);
    let watched = Watched::new(&a);
    watched.down.store(true, Ordering::SeqCst);
    b.connect_source("m", watched.clone());
    let r = b.tick();
    assert_eq!(r.transitions.last().unwrap().3, MirrorState::Failed);
    let first = r.next_retry_ms.unwrap();
    assert!((800..=1200).contains(&(first - env.clock.now_ms())));
    for restart in 0..5 {
        b.close().unwrap();
        drop(b);
        b = env.reopen(Arc::new(StdStorage), "b");
        b.connect_source("m", watched.clone());
        let r = b.run_until_idle(100);
        assert!(r.transitions.is_empty(), "restart {restart}: {r:?}");
        assert_eq!(row(&b).retry_attempt, Some(1), "restart {restart}");
        assert_eq!(r.next_retry_ms, Some(first), "restart {restart}");
    }
    env.clock.advance(first - env.clock.now_ms());
    b.connect_source("m", watched.clone());
    let r = b.tick();
    let steps: Vec<_> = r.transitions.iter().map(|t| (t.2, t.3)).collect();
    assert_eq!(
        steps,
        [
            (MirrorState::Failed, MirrorState::Mirroring),
            (MirrorState::Mirroring, MirrorState::Failed)
        ]
    );
    let d = row(&b);
    assert_eq!(d.retry_attempt, Some(2));
    assert_eq!(d.failed_state, Some(MirrorState::Mirroring));
    let recorded_at = env.clock.now_ms();
    assert!(d.error.unwrap().contains("connection refused"));
    assert_eq!(d.next_retry_ms, r.next_retry_ms);
    let second = d.next_retry_ms.unwrap() - env.clock.now_ms();
    assert!((1600..=2400).contains(&second), "backoff doubles: {second}");
    // The clock goes back an hour: a recorded time further ahead than any backoff is due, not an
    // hour's wait.
    env.clock.set(recorded_at - 3_600_000);
    b.connect_source("m", watched.clone());
    let r = b.tick();
    assert_eq!(
        r.transitions.first().map(|t| t.2),
        Some(MirrorState::Failed),
        "{r:?}"
    );
    assert_eq!(row(&b).retry_attempt, Some(3));
}

/// Pause + resume resets a FAILED partition, even one no longer retried: it is retried at once.
#[test]
fn resume_resets_a_failed_partition() {
    let env = Env::new();
    let a = source(&env);
    let b = env.cluster("b");
    let b = Arc::new(Arc::try_unwrap(b).unwrap().with_settings(MirrorSettings {
        failed_retry_max_attempts: 2,
        ..Default::default()
    }));
    synced(&env, &b, &a);
    let watched = Watched::new(&a);
    watched.down.store(true, Ordering::SeqCst);
    b.connect_source("m", watched.clone());
    // (A source error drops the connection: the test connects its source again each time.)
    for _ in 0..5 {
        b.connect_source("m", watched.clone());
        b.tick();
        env.clock.advance(600_000);
    }
    assert_eq!(row(&b).state, Some(MirrorState::Failed));
    let d = row(&b);
    assert_eq!(d.retry_attempt, Some(-1), "attempts used up");
    assert_eq!(d.next_retry_ms, None);
    assert!(d.error.unwrap().contains("max.attempts is 2"));
    a.produce("t", 0, &mut plain(1, "while-failed")).unwrap();
    watched.down.store(false, Ordering::SeqCst);
    env.clock.advance(600_000);
    assert!(b.run_until_idle(100).transitions.is_empty(), "not retried");
    all_ok(b.pause_topics("m", &topics(&["t"])).unwrap());
    assert!(b.run_until_idle(100).transitions.is_empty());
    all_ok(b.resume_topics("m", &topics(&["t"])).unwrap());
    let d = row(&b);
    assert_eq!(
        (d.state, d.retry_attempt),
        (Some(MirrorState::Failed), Some(0))
    );
    assert_eq!(d.next_retry_ms, Some(env.clock.now_ms()), "due at once");
    b.connect_source("m", watched.clone());
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Mirroring));
    assert_eq!(batches(&log(&b, "t")), batches(&log(&a, "t")));
    // Resume of a topic that is neither paused nor failed is still refused.
    let results = b.resume_topics("m", &topics(&["t"])).unwrap();
    assert_eq!(
        results[0].1.as_ref().unwrap_err().error_name(),
        Some("MIRROR_TOPIC_NOT_PAUSED")
    );
}

/// A stop whose failure is not retried (no attempts allowed) stays FAILED across passes, time and a
/// restart, writing nothing; `retry` resets it and the same stop completes (its LME recorded once).
#[test]
fn retry_resets_a_stop_that_is_no_longer_retried() {
    for k in 1.. {
        let env = Env::new();
        let sim = Arc::new(SimStorage::new(k));
        let a = source(&env);
        let b = env.cluster_on(sim.clone(), "b");
        let b = Arc::new(Arc::try_unwrap(b).unwrap().with_settings(MirrorSettings {
            failed_retry_max_attempts: 0,
            ..Default::default()
        }));
        synced(&env, &b, &a);
        b.checkpoint().unwrap();
        all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
        let start = sim.ops();
        sim.inject(start + k, Fault::Eio);
        b.tick();
        assert!(
            sim.ops() >= start + k,
            "no fault point of the stop records FAILED"
        );
        let d = row(&b);
        if d.failed_state != Some(MirrorState::Stopping) {
            continue; // the fault hit a `__mirror_state` write: FAILED itself could not be recorded
        }
        assert_eq!(
            (d.retry_attempt, d.next_retry_ms),
            (Some(-1), None),
            "k={k}"
        );
        let written = state_log_ends(&b);
        for _ in 0..3 {
            env.clock.advance(600_000);
            assert!(b.run_until_idle(100).transitions.is_empty(), "k={k}");
        }
        assert_eq!(state_log_ends(&b), written, "k={k}");
        drop(b);
        sim.clear_faults();
        let b = env.reopen(sim.clone(), "b");
        b.connect_source("m", Arc::new(a.as_source()));
        assert!(b.run_until_idle(100).transitions.is_empty(), "k={k}");
        let results = b.retry_topics("m", &[]).unwrap();
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].0, "t");
        assert_eq!(results[0].1.as_ref().unwrap(), &[0]);
        let r = b.run_until_idle(100);
        assert!(r.errors.is_empty(), "k={k}: {:?}", r.errors);
        assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Stopped), "k={k}");
        assert_eq!(
            (lme_of(&b, "t"), b.leader_epoch("t", 0)),
            (Some(2), Some(12))
        );
        assert_eq!(lme_records(&b), 1, "k={k}");
        assert_eq!(
            batches(&log(&b, "t")).len(),
            batches(&log(&a, "t")).len() + 1,
            "k={k}: one barrier"
        );
        // Nothing FAILED any more: retry resets nothing; a topic of no mirror is named.
        let again = b.retry_topics("m", &topics(&["t"])).unwrap();
        assert!(again[0].1.as_ref().unwrap().is_empty());
        b.create_topic("plain", 1, None, &[]).unwrap();
        let other = b.retry_topics("m", &topics(&["plain", "nope"])).unwrap();
        assert_eq!(
            other[0].1.as_ref().unwrap_err().error_name(),
            Some("UNKNOWN_MIRROR")
        );
        assert_eq!(
            other[1].1.as_ref().unwrap_err().error_name(),
            Some("UNKNOWN_TOPIC_OR_PARTITION")
        );
        assert_eq!(
            b.retry_topics("nope", &[]).unwrap_err().error_name(),
            Some("UNKNOWN_MIRROR")
        );
        return;
    }
}
