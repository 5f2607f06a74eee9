//! Consumer-group offsets carried by a mirror between local clusters (issue 15, item 1): what the
//! source's groups committed on mirrored topics reaches the destination's `__consumer_offsets` as Kafka's
//! own OffsetCommit records, only while the partition is MIRRORING, clamped to what was mirrored, with
//! tombstones for deleted offsets; after failover the group finds the same offsets.

#[path = "mirror_support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use klog::log::checkpoint::TopicId;
use klog::log::coordinator::{
    partition_for_group, OffsetCommitKey, OffsetCommitValue, CONSUMER_OFFSETS_TOPIC,
};
use klog::log::format::{AnyBatch, Batches};
use klog::mirror::source::{
    CommittedOffset, FetchRequest, FetchResponse, SourceError, SourceGroup, SourceTopic,
};
use klog::mirror::{Cluster, LocalSource, MirrorSettings, MirrorSource, MirrorState};
use support::*;

/// The refresh period the tests step over with the manual clock.
const REFRESH_MS: i64 = 30_000;

/// A source with topic `t` (2 partitions: 10 and 5 records) and topic `other` (3 records).
fn source(env: &Env) -> Arc<Cluster> {
    let a = env.cluster("a");
    a.create_topic("t", 2, None, &[]).unwrap();
    a.create_topic("other", 1, None, &[]).unwrap();
    a.produce("t", 0, &mut plain(10, "t0")).unwrap();
    a.produce("t", 1, &mut plain(5, "t1")).unwrap();
    a.produce("other", 0, &mut plain(3, "o")).unwrap();
    a
}

/// (group, topic, partition) -> offset.
fn offsets(c: &Cluster) -> BTreeMap<(String, String, i32), i64> {
    c.committed_offsets()
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, v.offset))
        .collect()
}

fn key(g: &str, t: &str, p: i32) -> (String, String, i32) {
    (g.into(), t.into(), p)
}

/// Every record of a `__consumer_offsets` partition, decoded with Kafka's schemas (None: tombstone).
fn offset_records(c: &Cluster, p: i32) -> Vec<(OffsetCommitKey, Option<OffsetCommitValue>)> {
    let log = c
        .log(CONSUMER_OFFSETS_TOPIC, p)
        .expect("the partition exists");
    let read = log.read(0, 1 << 20, None, true).unwrap();
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    for batch in Batches::new(read.records.as_slice()) {
        let AnyBatch::V2(batch) = batch.unwrap() else {
            panic!("a legacy batch")
        };
        for r in batch.records(&mut scratch).unwrap() {
            let r = r.unwrap();
            let k = OffsetCommitKey::decode(r.key.unwrap()).unwrap();
            let v = r.value.map(|v| OffsetCommitValue::decode(v).unwrap().1);
            out.push((k, v));
        }
    }
    out
}

fn mirrored_pair(env: &Env) -> (Arc<Cluster>, Arc<Cluster>) {
    let a = source(env);
    let b = env.cluster("b");
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    (a, b)
}

#[test]
fn offsets_are_synced_while_mirroring_and_kept_after_failover() {
    let env = Env::new();
    let (a, b) = mirrored_pair(&env);
    let g1 = a.commit_offset("g1", "t", 0, 4).unwrap();
    a.commit_offset("g1", "t", 1, 5).unwrap();
    a.commit_offset("g2", "t", 0, 10).unwrap();
    a.commit_offset("g1", "other", 0, 3).unwrap();
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert!(r.offset_clamps.iter().all(|c| c.synced_offset <= 10));
    // Only the mirrored topic's offsets, verbatim (offset, leader epoch, metadata, commit time).
    let want: BTreeMap<_, _> = [
        (key("g1", "t", 0), 4),
        (key("g1", "t", 1), 5),
        (key("g2", "t", 0), 10),
    ]
    .into();
    assert_eq!(offsets(&b), want);
    assert_eq!(b.committed_offsets().unwrap()[&key("g1", "t", 0)], g1);
    // Stored as Kafka stores them: in the group's partition of __consumer_offsets, Kafka's records.
    let p = partition_for_group("g1", 50) as i32;
    let records = offset_records(&b, p);
    let last = records
        .iter()
        .rev()
        .find(|(k, _)| k.group == "g1" && k.partition == 0)
        .unwrap();
    assert_eq!(last.1.as_ref().unwrap().offset, 4);
    assert_eq!(
        last.1.as_ref().unwrap().commit_timestamp,
        g1.commit_timestamp
    );
    // Nothing changed at the source: the next sync writes nothing.
    env.clock.advance(REFRESH_MS);
    let before = records.len();
    let r = b.tick();
    assert_eq!(r.offsets_synced, 0);
    assert_eq!(offset_records(&b, p).len(), before);
    // The source commits more: the next sync carries it.
    a.commit_offset("g1", "t", 0, 8).unwrap();
    b.tick();
    assert_eq!(offsets(&b)[&key("g1", "t", 0)], 4, "not before the period");
    env.clock.advance(REFRESH_MS);
    assert_eq!(b.tick().offsets_synced, 1);
    assert_eq!(offsets(&b)[&key("g1", "t", 0)], 8);
    // Failover: once STOPPED the destination's own consumers own the offsets.
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Stopped));
    a.commit_offset("g1", "t", 0, 9).unwrap();
    env.clock.advance(REFRESH_MS);
    b.run_until_idle(10);
    assert_eq!(offsets(&b)[&key("g1", "t", 0)], 8);
    let d = b
        .describe_groups()
        .unwrap()
        .into_iter()
        .find(|d| d.group == "g1" && d.partition == 0)
        .unwrap();
    // The log end is 11: failover appended the MIRROR_PID_RESET barrier.
    assert_eq!(
        (d.committed_offset, d.log_end_offset, d.lag),
        (8, Some(11), Some(3))
    );
    // The group resumes on the new primary and commits there.
    b.produce("t", 0, &mut plain(2, "b")).unwrap();
    b.commit_offset("g1", "t", 0, 13).unwrap();
    assert_eq!(offsets(&b)[&key("g1", "t", 0)], 13);
    // A reopened cluster replays the same offsets.
    b.close().unwrap();
    drop(b);
    let b = env.reopen(Arc::new(klog::log::io::StdStorage), "b");
    assert_eq!(offsets(&b)[&key("g1", "t", 0)], 13);
    assert_eq!(offsets(&b)[&key("g2", "t", 0)], 10);
}

#[test]
fn paused_topics_take_no_offsets_and_resume_catches_up() {
    let env = Env::new();
    let (a, b) = mirrored_pair(&env);
    a.commit_offset("g", "t", 0, 3).unwrap();
    b.run_until_idle(100);
    assert_eq!(offsets(&b)[&key("g", "t", 0)], 3);
    all_ok(b.pause_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Paused));
    a.commit_offset("g", "t", 0, 7).unwrap();
    a.commit_offset("h", "t", 1, 2).unwrap();
    for _ in 0..3 {
        env.clock.advance(REFRESH_MS);
        let r = b.tick();
        assert_eq!(r.offsets_synced, 0);
    }
    assert_eq!(offsets(&b).len(), 1);
    assert_eq!(offsets(&b)[&key("g", "t", 0)], 3);
    all_ok(b.resume_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    env.clock.advance(REFRESH_MS);
    b.run_until_idle(100);
    assert_eq!(offsets(&b)[&key("g", "t", 0)], 7);
    assert_eq!(offsets(&b)[&key("h", "t", 1)], 2);
}

#[test]
fn offsets_beyond_the_mirrored_log_are_clamped_and_reported() {
    let env = Env::new();
    let a = source(&env);
    let b = env.cluster("b");
    // One small fetch per tick: the mirror is behind the source for several ticks.
    let b = Arc::new(Arc::try_unwrap(b).unwrap().with_settings(MirrorSettings {
        fetch_max_bytes: 1,
        ..MirrorSettings::default()
    }));
    link(&b, "m", &a);
    a.produce("t", 0, &mut plain(3, "more")).unwrap();
    a.produce("t", 0, &mut plain(3, "more")).unwrap();
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    a.commit_offset("g", "t", 0, 16).unwrap();
    // Committed beyond the source's own end (Kafka allows it): clamped to whatever is mirrored.
    a.commit_offset("g", "t", 1, 50).unwrap();
    let first = b.tick();
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Mirroring));
    let clamp = first
        .offset_clamps
        .iter()
        .find(|c| c.topic == "t" && c.partition == 0)
        .expect("reported");
    assert_eq!((clamp.group.as_str(), clamp.source_offset), ("g", 16));
    assert_eq!(clamp.synced_offset, b.log("t", 0).unwrap().log_end_offset());
    assert_eq!(clamp.synced_offset, 0);
    // Clamped where the log has no leader epoch yet: not written (the reference's syncer skips it).
    assert_eq!(offsets(&b).get(&key("g", "t", 0)), None);
    // As the data arrives the offset follows it, without waiting for the period.
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(b.log("t", 0).unwrap().log_end_offset(), 16);
    assert_eq!(offsets(&b)[&key("g", "t", 0)], 16);
    assert_eq!(offsets(&b)[&key("g", "t", 1)], 5);
    let last = r.offset_clamps.last().unwrap();
    assert_eq!(
        (last.partition, last.source_offset, last.synced_offset),
        (1, 50, 5)
    );
    // The clamped commit carries the epoch of the offset it was clamped to (Kafka's epochForOffset).
    assert_eq!(
        b.committed_offsets().unwrap()[&key("g", "t", 1)].leader_epoch,
        0
    );
}

#[test]
fn a_deleted_source_offset_is_a_tombstone_and_other_groups_are_left_alone() {
    let env = Env::new();
    let (a, b) = mirrored_pair(&env);
    a.commit_offset("g", "t", 0, 3).unwrap();
    a.commit_offset("g", "t", 1, 1).unwrap();
    b.run_until_idle(100);
    // A group of the destination's own (a consumer of the read-only mirror topic).
    b.commit_offset("local", "t", 0, 2).unwrap();
    a.delete_offset("g", "t", 1).unwrap();
    env.clock.advance(REFRESH_MS);
    assert_eq!(b.tick().offsets_synced, 1);
    let want: BTreeMap<_, _> = [(key("g", "t", 0), 3), (key("local", "t", 0), 2)].into();
    assert_eq!(offsets(&b), want);
    let p = partition_for_group("g", 50) as i32;
    let last = offset_records(&b, p).pop().unwrap();
    assert_eq!((last.0.partition, last.1), (1, None), "a tombstone");
}

/// A source whose committed-offsets answer leaves out the partitions `omit` names (topic, and a
/// partition or every one): what a Kafka source gets for an OffsetFetch error on a partition, a topic id
/// its metadata does not resolve, or a topic an authorizer hides (Kafka drops a topic the caller may not
/// describe from the answer, silently).
struct Omitting {
    inner: LocalSource,
    omit: Mutex<Option<(String, Option<i32>)>>,
}

impl Omitting {
    fn omits(&self, topic: &str, partition: i32) -> bool {
        self.omit
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|(t, p)| t == topic && p.is_none_or(|p| p == partition))
    }
}

impl MirrorSource for Omitting {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn cluster_id(&self) -> Result<String, SourceError> {
        self.inner.cluster_id()
    }
    fn topic(&self, name: &str) -> Result<Option<SourceTopic>, SourceError> {
        self.inner.topic(name)
    }
    fn fetch(&self, r: &FetchRequest) -> Result<FetchResponse, SourceError> {
        self.inner.fetch(r)
    }
    fn list_offsets(&self, t: &str, id: TopicId, p: i32) -> Result<(i64, i64), SourceError> {
        self.inner.list_offsets(t, id, p)
    }
    fn last_mirrored_epoch(&self, c: &str, id: TopicId, p: i32) -> Result<i32, SourceError> {
        self.inner.last_mirrored_epoch(c, id, p)
    }
    fn committed_offsets(
        &self,
        topics: &BTreeSet<String>,
    ) -> Result<Vec<SourceGroup>, SourceError> {
        let mut groups = self.inner.committed_offsets(topics)?;
        for g in &mut groups {
            g.offsets.retain(|c| !self.omits(&c.topic, c.partition));
            g.no_committed_offset.retain(|(t, p)| !self.omits(t, *p));
        }
        Ok(groups)
    }
}

/// A partition the source did not answer for (an error, an unresolved topic, a topic hidden by an ACL)
/// is not a deleted offset: no tombstone, the synced offset stays. Only a partition the source answered
/// with "no committed offset" is deleted here.
#[test]
fn a_partition_the_source_did_not_answer_for_keeps_its_offset() {
    let env = Env::new();
    let (a, b) = mirrored_pair(&env);
    a.commit_offset("g", "t", 0, 3).unwrap();
    a.commit_offset("g", "t", 1, 1).unwrap();
    b.run_until_idle(100);
    let synced: BTreeMap<_, _> = [(key("g", "t", 0), 3), (key("g", "t", 1), 1)].into();
    assert_eq!(offsets(&b), synced);
    let source = Arc::new(Omitting {
        inner: a.as_source(),
        omit: Mutex::new(None),
    });
    b.connect_source("m", source.clone());
    for omit in [("t", Some(1)), ("t", None)] {
        *source.omit.lock().unwrap() = Some((omit.0.to_owned(), omit.1));
        env.clock.advance(REFRESH_MS);
        let r = b.tick();
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(r.offsets_synced, 0, "{omit:?}: nothing to write");
        assert_eq!(offsets(&b), synced, "{omit:?}: no tombstone");
    }
    // Answered again, with the offset deleted at the source: now it goes.
    *source.omit.lock().unwrap() = None;
    a.delete_offset("g", "t", 1).unwrap();
    env.clock.advance(REFRESH_MS);
    assert_eq!(b.tick().offsets_synced, 1);
    assert_eq!(offsets(&b), [(key("g", "t", 0), 3)].into());
}

#[test]
fn a_source_read_from_disk_shows_new_groups_and_commits() {
    let env = Env::new();
    let a = source(&env);
    let b = env.cluster("b");
    b.create_mirror("m", a.root().to_str().unwrap()).unwrap();
    // The source stays open (its writer holds the lock); the mirror reads its files.
    b.connect_source("m", Arc::new(LocalSource::read(a.root())));
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    a.commit_offset("g1", "t", 0, 2).unwrap();
    b.run_until_idle(100);
    assert_eq!(offsets(&b)[&key("g1", "t", 0)], 2);
    // A commit into the same partition, and a group in a partition the view has not seen yet.
    a.commit_offset("g1", "t", 0, 6).unwrap();
    let g2 = (0..100)
        .map(|i| format!("g{i}"))
        .find(|g| partition_for_group(g, 50) != partition_for_group("g1", 50))
        .unwrap();
    a.commit_offset(&g2, "t", 1, 4).unwrap();
    env.clock.advance(REFRESH_MS);
    b.tick();
    assert_eq!(offsets(&b)[&key("g1", "t", 0)], 6);
    assert_eq!(offsets(&b)[&key(&g2, "t", 1)], 4);
}

#[test]
fn commits_are_checked() {
    let env = Env::new();
    let a = source(&env);
    let e = a.commit_offset("g", "nope", 0, 1).unwrap_err();
    assert_eq!(e.error_name(), Some("UNKNOWN_TOPIC_OR_PARTITION"), "{e}");
    let e = a.commit_offset("g", "__mirror_state", 0, 1).unwrap_err();
    assert_eq!(e.error_name(), Some("UNKNOWN_TOPIC_OR_PARTITION"), "{e}");
    let e = a.commit_offset("g", "t", 2, 1).unwrap_err();
    assert_eq!(e.error_name(), Some("UNKNOWN_TOPIC_OR_PARTITION"), "{e}");
    let e = a.commit_offset("g", "t", 0, -1).unwrap_err();
    assert!(e.to_string().contains("negative"), "{e}");
    let e = a.commit_offset("", "t", 0, 1).unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    let c: CommittedOffset = a.commit_offset("g", "t", 0, 0).unwrap();
    assert_eq!(c.leader_epoch, -1, "nothing before offset 0");
}

/// A failed write of a `__consumer_offsets` partition (ENOSPC, EIO at each storage operation of a sync)
/// takes that log offline; the next sync reopens it with recovery and the offsets arrive, without a
/// restart, and survive a reopen.
#[test]
fn a_failed_offsets_write_heals_at_the_next_sync() {
    use klog::log::io::{Fault, SimStorage};
    for fault in [Fault::Enospc, Fault::Eio] {
        let mut failed = 0;
        for j in 1..40 {
            let env = Env::new();
            let sim = Arc::new(SimStorage::new(j));
            let a = source(&env);
            let b = env.cluster_on(sim.clone(), "b");
            link(&b, "m", &a);
            all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
            a.commit_offset("g", "t", 0, 2).unwrap();
            b.run_until_idle(100);
            assert_eq!(offsets(&b)[&key("g", "t", 0)], 2);
            a.commit_offset("g", "t", 0, 6).unwrap();
            env.clock.advance(REFRESH_MS);
            let start = sim.ops();
            sim.inject(start + j, fault);
            let first = b.tick();
            if sim.ops() - start < j {
                break; // the sync finished before the fault
            }
            failed += !first.errors.is_empty() as usize;
            for _ in 0..3 {
                env.clock.advance(REFRESH_MS);
                b.tick();
            }
            assert_eq!(
                offsets(&b)[&key("g", "t", 0)],
                6,
                "{fault:?} at op {j}: {:?}",
                first.errors
            );
            let p = partition_for_group("g", 50) as i32;
            assert!(!b.log(CONSUMER_OFFSETS_TOPIC, p).unwrap().is_failed());
            b.close().unwrap();
            drop(b);
            let b = env.reopen(sim.clone(), "b");
            assert_eq!(
                offsets(&b)[&key("g", "t", 0)],
                6,
                "{fault:?} at op {j}: reopened"
            );
        }
        assert!(failed >= 1, "{fault:?}: the sync writes");
    }
}
