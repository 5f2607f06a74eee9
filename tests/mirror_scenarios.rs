//! KIP-1279 end-to-end scenarios S1-S13 (spec `kip-1279.md` §7) on local clusters in one process.
//! Every test checks offsets, batch bytes and producer state, not only that nothing failed.

#[path = "mirror_support/mod.rs"]
mod support;

use std::sync::Arc;

use klog::log::clock::Clock;
use klog::log::format::{ControlRecordType, RecordBatch};
use klog::mirror::records::{MirrorKey, MirrorRecord};
use klog::mirror::{Cluster, ClusterOptions, MirrorState};
use support::*;

const PID: i64 = 4242;

/// S1's source: 3 idempotent records at e(0), two leader elections, 3 more at e(2).
fn s1_source(env: &Env, name: &str) -> Arc<Cluster> {
    let a = env.cluster(name);
    a.create_topic("t", 1, None, &[]).unwrap();
    let mut b = batch(PID, 0, 0, 3, false, "a0");
    assert_eq!(a.produce("t", 0, &mut b).unwrap().first_offset, 0);
    a.bump_leader_epoch("t", 0, 0).unwrap();
    assert_eq!(a.bump_leader_epoch("t", 0, 0).unwrap(), 2);
    let mut b = batch(PID, 0, 3, 3, false, "a1");
    assert_eq!(a.produce("t", 0, &mut b).unwrap().first_offset, 3);
    a
}

/// Every `__mirror_state` key (its record kind and mirror partition), and whether its last value is
/// non-null, from the records decoded as the store decodes them.
fn last_mirror_state_values(
    c: &Cluster,
) -> std::collections::BTreeMap<(&'static str, MirrorKey), bool> {
    let mut last = std::collections::BTreeMap::new();
    let partitions = ClusterOptions::default().mirror_state_partitions as i32;
    for p in 0..partitions {
        for stored in batches(&c.log("__mirror_state", p).unwrap()) {
            let (batch, _) = RecordBatch::parse(&stored.bytes, 0).unwrap();
            if batch.is_control() {
                continue;
            }
            let mut scratch = Vec::new();
            for record in batch.records(&mut scratch).unwrap() {
                let record = record.unwrap();
                let (kind, key, live) = match MirrorRecord::decode(record.key, record.value) {
                    Ok(MirrorRecord::State(key, v)) => ("state", key, v.is_some()),
                    Ok(MirrorRecord::LastMirrorEpoch(key, v)) => {
                        ("last mirror epoch", key, v.is_some())
                    }
                    Err(e) => panic!("__mirror_state-{p} offset {}: {e}", record.offset),
                };
                last.insert((kind, key), live);
            }
        }
    }
    last
}

fn assert_mirrors(dest: &Cluster, source: &Cluster, topic: &str) {
    let d = batches(&log(dest, topic));
    let s = batches(&log(source, topic));
    assert_eq!(
        d, s,
        "{topic}: destination batches differ from the source's"
    );
    assert_eq!(
        log(dest, topic).leader_epochs(),
        log(source, topic).leader_epochs()
    );
    // Producer state is rebuilt from the mirrored batches: the same producers, epochs, last sequences,
    // last offsets and open transactions as the source's.
    let state = |c: &Cluster| {
        log(c, topic)
            .producers()
            .iter()
            .map(|p| {
                (
                    p.producer_id(),
                    p.producer_epoch(),
                    p.last_seq(),
                    p.last_data_offset(),
                    p.current_txn_first_offset(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(state(dest), state(source), "{topic}: producer state");
    assert_eq!(
        log(dest, topic).last_stable_offset(),
        log(source, topic)
            .last_stable_offset()
            .min(log(dest, topic).log_end_offset())
    );
}

/// S1: initial sync, byte-identical, read-only.
#[test]
fn s1_initial_sync_is_byte_identical_and_read_only() {
    let env = Env::new();
    let a = s1_source(&env, "a");
    let b = env.cluster("b");
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    assert_eq!(b.topic("t").unwrap().id, a.topic("t").unwrap().id);
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Unknown));
    let report = b.run_until_idle(100);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let states: Vec<_> = report.transitions.iter().map(|t| t.3).collect();
    // The first fetched batch is at the source's epoch 2, above ours (0): EPOCH_FENCING bumps ours to
    // 12 before anything is appended.
    assert_eq!(
        states,
        [
            MirrorState::Preparing,
            MirrorState::Mirroring,
            MirrorState::EpochFencing,
            MirrorState::Mirroring
        ]
    );
    assert_eq!(b.leader_epoch("t", 0), Some(12));
    assert_mirrors(&b, &a, "t");
    let bl = log(&b, "t");
    assert_eq!(bl.log_end_offset(), 6);
    let epochs: Vec<(i32, i64)> = bl
        .leader_epochs()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect();
    assert_eq!(epochs, [(0, 0), (2, 3)]);
    assert_eq!(
        bl.producers()
            .iter()
            .map(|p| (p.producer_id(), p.last_seq()))
            .collect::<Vec<_>>(),
        [(PID, 5)]
    );
    let d = b.describe();
    assert_eq!(d[0].lag, Some(0));
    assert_eq!(d[0].source_end_offset, Some(6));
    // Read-only: a produce fails, nothing is written.
    let err = b.produce("t", 0, &mut plain(1, "x")).unwrap_err();
    assert_eq!(err.error_name(), Some("READ_ONLY_TOPIC"), "{err}");
    let err = b
        .append_markers("t", 0, &mut marker(true, PID, 0))
        .unwrap_err();
    assert_eq!(err.error_name(), Some("READ_ONLY_TOPIC"));
    assert_eq!(bl.log_end_offset(), 6);
    // Segment files are byte-identical.
    // Segment and index files are byte-identical.
    for name in [
        "00000000000000000000.log",
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
    ] {
        assert!(
            files_equal(
                &a.root().join("t-0").join(name),
                &b.root().join("t-0").join(name)
            ),
            "{name}"
        );
    }
}

/// S2: failover. LME 2, the barrier at offset 6 at our epoch 12 (kept 10 above the source's while
/// mirroring), producer state empty, a local
/// producer reusing a mirrored producer id starts at sequence 0.
#[test]
fn s2_failover_writes_the_barrier_and_clears_producers() {
    let env = Env::new();
    let (a, b) = synced_pair(&env);
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    let report = b.run_until_idle(100);
    let states: Vec<_> = report.transitions.iter().map(|t| t.3).collect();
    assert_eq!(states, [MirrorState::Stopping, MirrorState::Stopped]);
    assert_eq!(lme_of(&b, "t"), Some(2));
    assert_eq!(b.leader_epoch("t", 0), Some(12));
    let bl = log(&b, "t");
    assert_eq!(bl.log_end_offset(), 7);
    let all = batches(&bl);
    let barrier = all.last().unwrap();
    assert_eq!((barrier.base_offset, barrier.last_offset), (6, 6));
    assert_eq!(barrier.producer_id, -1);
    assert_eq!(barrier.epoch, 12);
    assert_eq!(
        control_type(barrier),
        Some(ControlRecordType::MirrorPidReset)
    );
    assert!(barrier_value_is_klogs(barrier));
    assert_eq!(all[..all.len() - 1], batches(&log(&a, "t"))[..]);
    assert!(bl.producers().is_empty());
    // A local producer with the mirrored producer id writes at sequence 0: no OutOfOrderSequence.
    let info = b
        .produce("t", 0, &mut batch(PID, 0, 0, 1, false, "local"))
        .unwrap();
    assert_eq!(info.first_offset, 7);
    assert_eq!(batches(&bl).last().unwrap().epoch, 12);
    let p = bl.producers();
    assert_eq!((p[0].producer_id(), p[0].last_seq()), (PID, 0));
    // A transactional producer reusing it too.
    let info = b
        .produce("t", 0, &mut batch(PID + 1, 0, 0, 2, true, "tx"))
        .unwrap();
    assert_eq!(info.first_offset, 8);
    b.append_markers("t", 0, &mut marker(true, PID + 1, 0))
        .unwrap();
    assert_eq!(bl.last_stable_offset(), 11);
    // The state survives a restart: still STOPPED, writable, same LME.
    b.close().unwrap();
    let b2 = env.reopen(Arc::new(klog::log::io::StdStorage), "b");
    assert_eq!(state_of(&b2, "t", 0), Some(MirrorState::Stopped));
    assert_eq!(lme_of(&b2, "t"), Some(2));
    assert!(b2.run_until_idle(10).transitions.is_empty());
    b2.produce("t", 0, &mut plain(1, "after")).unwrap();
}

/// S3: failback, case a (A wrote 6-7 at e(2)) and case b (A moved to e(4) first).
#[test]
fn s3_failback_truncates_by_lme_in_both_cases() {
    for case_b in [false, true] {
        let env = Env::new();
        let (a, b) = synced_pair(&env);
        all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
        b.run_until_idle(100);
        b.produce("t", 0, &mut plain(1, "b-primary")).unwrap(); // offset 7 at e(12)
                                                                // A kept taking writes while cut off: offsets 6-7.
        if case_b {
            a.bump_leader_epoch("t", 0, 4).unwrap();
        }
        a.produce("t", 0, &mut plain(2, "a-stray")).unwrap();
        assert_eq!(log(&a, "t").log_end_offset(), 8);
        // Failback: A mirrors from B.
        link(&a, "back", &b);
        all_ok(a.add_topics("back", &topics(&["t"])).unwrap());
        let report = a.run_until_idle(100);
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert_eq!(state_of(&a, "t", 0), Some(MirrorState::Mirroring));
        assert!(report.truncations >= 1, "case b={case_b}: {report:?}");
        assert_mirrors(&a, &b, "t");
        let al = log(&a, "t");
        assert_eq!(al.log_end_offset(), 8);
        let data: usize = batches(&al)
            .iter()
            .filter(|s| !s.control)
            .map(|s| (s.last_offset - s.base_offset + 1) as usize)
            .sum();
        assert_eq!(data, 7, "7 data records");
        assert!(al.producers().is_empty() || al.producers().iter().all(|p| p.producer_id() != PID));
        // Make A primary again: stop on A (barrier at 8, LME 12), then B mirrors back from A.
        all_ok(a.remove_topics("back", &topics(&["t"])).unwrap());
        a.run_until_idle(100);
        assert_eq!(lme_of(&a, "t"), Some(12));
        assert_eq!(log(&a, "t").log_end_offset(), 9);
        let bm = b.metadata();
        assert!(bm.mirrors.contains_key("m"));
        // B's topic is STOPPED in mirror m; re-add it to m (pointing at A).
        all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
        let report = b.run_until_idle(100);
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert_mirrors(&b, &a, "t");
        assert_eq!(log(&b, "t").log_end_offset(), 9);
    }
}

fn synced_pair(env: &Env) -> (Arc<Cluster>, Arc<Cluster>) {
    let a = s1_source(env, "a");
    let b = env.cluster("b");
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    assert_mirrors(&b, &a, "t");
    (a, b)
}

fn error_of(results: Vec<(String, Result<(), klog::mirror::Error>)>) -> &'static str {
    results[0]
        .1
        .as_ref()
        .unwrap_err()
        .error_name()
        .expect("a named error")
}

/// S4: pause/resume with no truncation, and the lifecycle errors.
#[test]
fn s4_pause_resume_without_truncation() {
    let env = Env::new();
    let (a, b) = synced_pair(&env);
    all_ok(b.pause_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(100);
    let states: Vec<_> = r.transitions.iter().map(|t| t.3).collect();
    assert_eq!(states, [MirrorState::Pausing, MirrorState::Paused]);
    a.produce("t", 0, &mut batch(PID, 0, 6, 1, false, "while-paused"))
        .unwrap();
    assert!(!b.run_until_idle(100).progressed());
    assert_eq!(log(&b, "t").log_end_offset(), 6);
    assert_eq!(
        b.produce("t", 0, &mut plain(1, "x"))
            .unwrap_err()
            .error_name(),
        Some("READ_ONLY_TOPIC")
    );
    // Pausing again is accepted (P1), resuming a paused topic works.
    all_ok(b.pause_topics("m", &topics(&["t"])).unwrap());
    all_ok(b.resume_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(100);
    assert_eq!(r.truncations, 0, "resume never truncates");
    assert_eq!(r.transitions[0].3, MirrorState::Mirroring);
    assert_mirrors(&b, &a, "t");
    assert_eq!(log(&b, "t").log_end_offset(), 7);
    // Lifecycle errors.
    assert_eq!(
        error_of(b.resume_topics("m", &topics(&["t"])).unwrap()),
        "MIRROR_TOPIC_NOT_PAUSED"
    );
    assert_eq!(
        error_of(b.add_topics("m", &topics(&["t"])).unwrap()),
        "TOPIC_ALREADY_IN_MIRROR"
    );
    b.create_mirror("other", a.root().to_str().unwrap())
        .unwrap();
    assert_eq!(
        error_of(b.pause_topics("other", &topics(&["t"])).unwrap()),
        "TOPIC_NOT_IN_MIRROR"
    );
    assert_eq!(
        b.pause_topics("nope", &topics(&["t"]))
            .unwrap_err()
            .error_name(),
        Some("UNKNOWN_MIRROR")
    );
    b.create_topic("plain", 1, None, &[]).unwrap();
    assert_eq!(
        error_of(b.pause_topics("m", &topics(&["plain"])).unwrap()),
        "UNKNOWN_MIRROR"
    );
    assert_eq!(
        error_of(b.pause_topics("m", &topics(&["missing"])).unwrap()),
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert_eq!(
        b.create_mirror("m", "x").unwrap_err().error_name(),
        Some("CLUSTER_MIRROR_ALREADY_EXISTS")
    );
    assert_eq!(
        b.create_mirror("m.paused", "x").unwrap_err().error_name(),
        Some("INVALID_MIRROR_NAME")
    );
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    assert_eq!(
        error_of(b.pause_topics("m", &topics(&["t"])).unwrap()),
        "MIRROR_TOPIC_BEING_REMOVED"
    );
}

/// S5: stop with an open transaction (seed semantics: read_committed fetch, truncation to the local LSO).
#[test]
fn s5_stop_with_an_open_transaction_truncates_to_the_lso() {
    let env = Env::new();
    let a = env.cluster("a");
    a.create_topic("t", 1, None, &[]).unwrap();
    a.produce("t", 0, &mut batch(1, 0, 0, 1, true, "t1"))
        .unwrap(); // 0
    a.produce("t", 0, &mut batch(2, 0, 0, 1, true, "t2"))
        .unwrap(); // 1
    a.append_markers("t", 0, &mut marker(true, 1, 0)).unwrap(); // 2: T1 commits, T2 stays open
    assert_eq!(log(&a, "t").last_stable_offset(), 1);
    let b = env.cluster("b");
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    let bl = log(&b, "t");
    assert_eq!(bl.log_end_offset(), 1, "only up to the source LSO");
    assert_eq!(
        bl.last_stable_offset(),
        0,
        "T1 is open from B's point of view"
    );
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    let all = batches(&bl);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].base_offset, 0);
    assert_eq!(
        control_type(&all[0]),
        Some(ControlRecordType::MirrorPidReset)
    );
    assert_eq!(bl.log_end_offset(), 1);
    assert!(bl.producers().is_empty());
    let (read, aborted) = bl.read_committed(0, 1 << 20, true).unwrap();
    assert!(aborted.is_empty());
    let data = klog::log::format::Batches::new(read.records.as_slice())
        .filter(|b| matches!(b, Ok(klog::log::format::AnyBatch::V2(v)) if !v.is_control()))
        .count();
    assert_eq!(data, 0, "T1's record is gone, as the seed design accepts");
    // Producers may start transactions afresh.
    b.produce("t", 0, &mut batch(1, 0, 0, 1, true, "new"))
        .unwrap();
    b.append_markers("t", 0, &mut marker(true, 1, 0)).unwrap();
    assert_eq!(bl.last_stable_offset(), bl.log_end_offset());

    // Variant with no open transaction: nothing is truncated, B LEO = A LEO + 1.
    let env = Env::new();
    let (a, b) = synced_pair(&env);
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(100);
    assert_eq!(r.truncations, 0);
    assert_eq!(
        log(&b, "t").log_end_offset(),
        log(&a, "t").log_end_offset() + 1
    );
}

/// S6: the source's retention moves its log start past our log end: OFFSET_OUT_OF_RANGE, restart there.
#[test]
fn s6_source_retention_restarts_at_the_source_log_start() {
    let env = Env::new();
    let (a, b) = synced_pair(&env);
    all_ok(b.pause_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    for i in 0..6 {
        a.produce("t", 0, &mut batch(PID, 0, 6 + i, 1, false, "more"))
            .unwrap();
    }
    let al = log(&a, "t");
    assert!(al.increment_log_start_offset(9).unwrap());
    all_ok(b.resume_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let bl = log(&b, "t");
    assert_eq!(bl.log_start_offset(), 9);
    assert_eq!(bl.log_end_offset(), 12);
    let from_a: Vec<_> = batches(&al)
        .into_iter()
        .filter(|s| s.base_offset >= 9)
        .collect();
    assert_eq!(batches(&bl), from_a);
    // Rebuilt from offset 9 on: the producer's state after its last batch, as on the source.
    let last = |l: &klog::log::partition_log::PartitionLog| {
        l.producers()
            .iter()
            .map(|p| (p.producer_id(), p.last_seq(), p.last_data_offset()))
            .collect::<Vec<_>>()
    };
    assert_eq!(last(&bl), [(PID, 11, 11)]);
    assert_eq!(last(&bl), last(&al));
    // Steady state: our log start follows the source's.
    a.produce("t", 0, &mut plain(1, "x")).unwrap();
    al.increment_log_start_offset(11).unwrap();
    b.run_until_idle(100);
    assert_eq!(bl.log_start_offset(), 11);
    assert_eq!(bl.log_end_offset(), 13);
}

/// S8: an unclean election on the source, with `mirror.support.unclean.leader.election` on: the
/// diverging epoch truncates us (ULE_RECOVERY), then we converge. (Without it: FAILED, not retried,
/// `tests/mirror_epochs.rs`.)
#[test]
fn s8_source_divergence_truncates_and_converges() {
    let env = Env::new();
    let a = env.cluster("a");
    a.create_topic("t", 1, None, &[]).unwrap();
    a.bump_leader_epoch("t", 0, 1).unwrap();
    for _ in 0..10 {
        a.produce("t", 0, &mut plain(1, "e1")).unwrap();
    }
    let b = env.cluster("b");
    let option = [(
        "mirror.support.unclean.leader.election".to_owned(),
        "true".to_owned(),
    )];
    b.create_mirror_with_configs("m", a.root().to_str().unwrap(), &option)
        .unwrap();
    b.connect_source("m", Arc::new(a.as_source()));
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    assert_eq!(log(&b, "t").log_end_offset(), 10);
    // A stale replica (LEO 5) is elected uncleanly at e(2) and writes 5-7.
    let al = log(&a, "t");
    al.truncate_to(5).unwrap();
    a.bump_leader_epoch("t", 0, 2).unwrap();
    for _ in 0..3 {
        a.produce("t", 0, &mut plain(1, "e2")).unwrap();
    }
    let r = b.run_until_idle(100);
    assert!(r.truncations >= 1);
    assert_mirrors(&b, &a, "t");
    assert_eq!(log(&b, "t").log_end_offset(), 8);
}

/// S9: fan-out A -> B and A -> C; each fails over on its own and A never knows.
#[test]
fn s9_fan_out() {
    let env = Env::new();
    let a = s1_source(&env, "a");
    let (b, c) = (env.cluster("b"), env.cluster("c"));
    link(&b, "m1", &a);
    link(&c, "m2", &a);
    all_ok(b.add_topics("m1", &topics(&["t"])).unwrap());
    all_ok(c.add_topics("m2", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    c.run_until_idle(100);
    assert_mirrors(&b, &a, "t");
    assert_mirrors(&c, &a, "t");
    all_ok(b.remove_topics("m1", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    a.produce("t", 0, &mut batch(PID, 0, 6, 1, false, "more"))
        .unwrap();
    c.run_until_idle(100);
    assert_mirrors(&c, &a, "t");
    assert_eq!(state_of(&c, "t", 0), Some(MirrorState::Mirroring));
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Stopped));
    assert_eq!(log(&b, "t").log_end_offset(), 7);
    assert!(a.describe().iter().all(|d| d.mirror.is_none()));
}

/// S10: fan-in A -> C (orders-a) and B -> C (orders-b); a topic belongs to one mirror.
#[test]
fn s10_fan_in() {
    let env = Env::new();
    let (a, b, c) = (env.cluster("a"), env.cluster("b"), env.cluster("c"));
    a.create_topic("orders-a", 1, None, &[]).unwrap();
    b.create_topic("orders-b", 2, None, &[]).unwrap();
    a.produce("orders-a", 0, &mut plain(3, "a")).unwrap();
    b.produce("orders-b", 1, &mut plain(2, "b")).unwrap();
    link(&c, "ma", &a);
    link(&c, "mb", &b);
    all_ok(c.add_topics("ma", &topics(&["orders-a"])).unwrap());
    all_ok(c.add_topics("mb", &topics(&["orders-b"])).unwrap());
    assert_eq!(
        error_of(c.add_topics("mb", &topics(&["orders-a"])).unwrap()),
        "UNKNOWN_TOPIC_OR_PARTITION",
        "B has no orders-a"
    );
    b.create_topic("orders-a", 1, None, &[]).unwrap();
    assert_eq!(
        error_of(c.add_topics("mb", &topics(&["orders-a"])).unwrap()),
        "TOPIC_ALREADY_IN_MIRROR"
    );
    c.run_until_idle(100);
    assert_mirrors(&c, &a, "orders-a");
    assert_eq!(
        batches(&c.log("orders-b", 1).unwrap()),
        batches(&b.log("orders-b", 1).unwrap())
    );
    assert_eq!(c.log("orders-b", 0).unwrap().log_end_offset(), 0);
}

/// S11: chain A -> B -> C; B's failover barrier flows to C and clears C's producer state there.
#[test]
fn s11_chain_carries_the_barrier() {
    let env = Env::new();
    let (a, b) = synced_pair(&env);
    let c = env.cluster("c");
    link(&c, "mc", &b);
    all_ok(c.add_topics("mc", &topics(&["t"])).unwrap());
    c.run_until_idle(100);
    assert_mirrors(&c, &a, "t");
    assert_eq!(log(&c, "t").producers().len(), 1);
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    b.produce("t", 0, &mut batch(77, 0, 0, 2, false, "b-local"))
        .unwrap();
    c.run_until_idle(100);
    assert_mirrors(&c, &b, "t");
    let cl = log(&c, "t");
    let all = batches(&cl);
    assert_eq!(
        control_type(&all[all.len() - 2]),
        Some(ControlRecordType::MirrorPidReset)
    );
    let p = cl.producers();
    assert_eq!(p.len(), 1, "only B's post-failover producer");
    assert_eq!((p[0].producer_id(), p[0].last_seq()), (77, 1));
    assert_eq!(state_of(&c, "t", 0), Some(MirrorState::Mirroring));
}

/// S7: a compacted source (offset gaps) is copied with the same gaps.
#[test]
fn s7_offset_gaps_are_kept() {
    let env = Env::new();
    let a = env.cluster("a");
    a.create_topic("t", 1, None, &[]).unwrap();
    let al = log(&a, "t");
    for base in [0i64, 5, 9] {
        let mut b = plain(2, "compacted");
        klog::log::format::RecordBatchMut::parse(&mut b)
            .unwrap()
            .set_base_offset(base);
        al.append_as_follower(&b).unwrap();
    }
    al.update_high_watermark(al.log_end_offset());
    let b = env.cluster("b");
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    let got: Vec<i64> = batches(&log(&b, "t"))
        .iter()
        .map(|s| s.base_offset)
        .collect();
    assert_eq!(got, [0, 5, 9]);
    assert_mirrors(&b, &a, "t");
}

/// A source that can be switched off (all source brokers down) and back on.
struct Switchable {
    inner: klog::mirror::LocalSource,
    down: std::sync::atomic::AtomicBool,
}

impl Switchable {
    fn check(&self) -> Result<(), klog::mirror::source::SourceError> {
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(klog::mirror::source::SourceError::Unavailable(
                "connection refused".into(),
            ));
        }
        Ok(())
    }
}

impl klog::mirror::MirrorSource for Switchable {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn cluster_id(&self) -> Result<String, klog::mirror::source::SourceError> {
        self.check()?;
        self.inner.cluster_id()
    }
    fn topic(
        &self,
        name: &str,
    ) -> Result<Option<klog::mirror::source::SourceTopic>, klog::mirror::source::SourceError> {
        self.check()?;
        self.inner.topic(name)
    }
    fn fetch(
        &self,
        r: &klog::mirror::source::FetchRequest,
    ) -> Result<klog::mirror::source::FetchResponse, klog::mirror::source::SourceError> {
        self.check()?;
        self.inner.fetch(r)
    }
    fn list_offsets(
        &self,
        t: &str,
        id: klog::log::checkpoint::TopicId,
        p: i32,
    ) -> Result<(i64, i64), klog::mirror::source::SourceError> {
        self.check()?;
        self.inner.list_offsets(t, id, p)
    }
    fn last_mirrored_epoch(
        &self,
        c: &str,
        id: klog::log::checkpoint::TopicId,
        p: i32,
    ) -> Result<i32, klog::mirror::source::SourceError> {
        self.check()?;
        self.inner.last_mirrored_epoch(c, id, p)
    }
    fn committed_offsets(
        &self,
        topics: &std::collections::BTreeSet<String>,
    ) -> Result<Vec<klog::mirror::source::SourceGroup>, klog::mirror::source::SourceError> {
        self.check()?;
        self.inner.committed_offsets(topics)
    }
    fn topic_configs(
        &self,
        t: &str,
    ) -> Result<Option<std::collections::BTreeMap<String, String>>, klog::mirror::source::SourceError>
    {
        self.check()?;
        self.inner.topic_configs(t)
    }
    fn acls(
        &self,
    ) -> Result<Option<Vec<klog::mirror::acl::AclBinding>>, klog::mirror::source::SourceError> {
        self.check()?;
        self.inner.acls()
    }
}

/// S12: lifecycle errors, DeleteMirror, FAILED with backoff while the source is down, and a deleted
/// source topic.
#[test]
fn s12_delete_mirror_failed_retry_and_source_topic_deletion() {
    use std::sync::atomic::Ordering;
    let env = Env::new();
    let (a, b) = synced_pair(&env);
    // FAILED and retry: the source goes away, then comes back.
    let switch = Arc::new(Switchable {
        inner: a.as_source(),
        down: std::sync::atomic::AtomicBool::new(true),
    });
    b.connect_source("m", switch.clone());
    let r = b.tick();
    assert_eq!(r.transitions.last().unwrap().3, MirrorState::Failed);
    let d = &b.describe()[0];
    assert_eq!(d.state, Some(MirrorState::Failed));
    assert_eq!(d.retry_attempt, Some(1));
    assert!(d.error.as_deref().unwrap().contains("connection refused"));
    let first_retry = r.next_retry_ms.unwrap() - env.clock.now_ms();
    assert!((800..=1200).contains(&first_retry), "{first_retry}");
    assert!(
        b.tick().transitions.is_empty(),
        "no retry before the backoff"
    );
    env.clock.advance(first_retry);
    b.connect_source("m", switch.clone());
    let r = b.tick();
    let steps: Vec<_> = r.transitions.iter().map(|t| (t.2, t.3)).collect();
    assert_eq!(
        steps,
        [
            (MirrorState::Failed, MirrorState::Mirroring),
            (MirrorState::Mirroring, MirrorState::Failed)
        ]
    );
    assert_eq!(b.describe()[0].retry_attempt, Some(2));
    let second = r.next_retry_ms.unwrap() - env.clock.now_ms();
    assert!((1600..=2400).contains(&second), "backoff doubles: {second}");
    a.produce("t", 0, &mut batch(PID, 0, 6, 1, false, "while-down"))
        .unwrap();
    switch.down.store(false, Ordering::SeqCst);
    env.clock.advance(second);
    b.connect_source("m", switch.clone());
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Mirroring));
    assert_mirrors(&b, &a, "t");
    assert_eq!(log(&b, "t").log_end_offset(), 7);

    // DeleteMirror while mirroring: MIRROR_NOT_EMPTY; after stop it succeeds and tombstones the state.
    assert_eq!(
        b.delete_mirror("m").unwrap_err().error_name(),
        Some("MIRROR_NOT_EMPTY")
    );
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    assert_eq!(
        b.delete_mirror("m").unwrap_err().error_name(),
        Some("MIRROR_NOT_EMPTY"),
        "removed but not yet STOPPED"
    );
    b.run_until_idle(100);
    b.delete_mirror("m").unwrap();
    assert_eq!(
        b.delete_mirror("m").unwrap_err().error_name(),
        Some("UNKNOWN_MIRROR")
    );
    assert!(b.mirrors().is_empty());
    let d = &b.describe()[0];
    assert_eq!(
        (d.mirror.as_deref(), d.state, d.last_mirrored_epoch),
        (None, None, None)
    );
    assert!(!b.metadata().topics["t"].configs.contains_key("mirror.name"));
    b.produce("t", 0, &mut plain(1, "ordinary")).unwrap();
    b.close().unwrap();
    let b2 = env.reopen(Arc::new(klog::log::io::StdStorage), "b");
    assert!(b2.describe().iter().all(|d| d.state.is_none()));
    // The tombstones are in __mirror_state: the last value of every key is null, and the deleted
    // mirror's keys (both kinds, for t-0) are among them.
    let last = last_mirror_state_values(&b2);
    let alive: Vec<_> = last.iter().filter(|(_, live)| **live).collect();
    assert!(alive.is_empty(), "keys not tombstoned: {alive:?}");
    for kind in ["state", "last mirror epoch"] {
        assert!(
            last.keys()
                .any(|(k, key)| *k == kind && key.mirror == "m" && key.partition == 0),
            "no {kind} record of mirror m for t-0 in __mirror_state: {last:?}"
        );
    }

    // A deleted source topic: FAILED, not retried; the operator fails over.
    let env = Env::new();
    let (a, b) = synced_pair(&env);
    let cut = Arc::new(Switchable {
        inner: a.as_source(),
        down: std::sync::atomic::AtomicBool::new(false),
    });
    b.connect_source("m", cut);
    let _ = &a;
    // Delete the topic on the source: fetches of its id fail with UNKNOWN_TOPIC_OR_PARTITION.
    a.delete_topic("t").unwrap();
    let r = b.tick();
    assert_eq!(r.transitions.last().unwrap().3, MirrorState::Failed);
    let d = &b.describe()[0];
    assert_eq!(
        d.retry_attempt,
        Some(-1),
        "a deleted source topic is not retried"
    );
    assert!(d.error.as_deref().unwrap().contains("source topic is gone"));
    env.clock.advance(1_000_000);
    assert!(b.tick().transitions.is_empty());
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    let states: Vec<_> = b
        .run_until_idle(100)
        .transitions
        .iter()
        .map(|t| t.3)
        .collect();
    assert_eq!(states, [MirrorState::Stopping, MirrorState::Stopped]);
    assert_eq!(log(&b, "t").log_end_offset(), 7);
}

fn s1_source_on(env: &Env, storage: Arc<dyn klog::log::io::Storage>, name: &str) -> Arc<Cluster> {
    let a = env.cluster_on(storage, name);
    a.create_topic("t", 1, None, &[]).unwrap();
    a.produce("t", 0, &mut batch(PID, 0, 0, 3, false, "a0"))
        .unwrap();
    a.bump_leader_epoch("t", 0, 2).unwrap();
    a.produce("t", 0, &mut batch(PID, 0, 3, 3, false, "a1"))
        .unwrap();
    a
}

/// Runs `cluster` until idle with the simulated disk losing power at its `k`-th storage operation from
/// now, crashes the disk (torn writes), and opens the cluster again with its mirror reconnected to
/// `source`. Also returns whether the run finished before the power-off point.
fn power_off_run_and_restart(
    env: &Env,
    sim: &Arc<klog::log::io::SimStorage>,
    cluster: Arc<Cluster>,
    name: &str,
    k: u64,
    (mirror, source): (&str, &Arc<Cluster>),
) -> (Arc<Cluster>, bool) {
    let start = sim.ops();
    sim.power_off_at(start + k);
    cluster.run_until_idle(100);
    let finished = sim.ops() < start + k;
    drop(cluster);
    sim.crash(true);
    sim.clear_faults();
    let cluster = env.reopen(sim.clone(), name);
    cluster.connect_source(mirror, Arc::new(source.as_source()));
    (cluster, finished)
}

/// S13 (STOPPING): power off at every storage operation of the stop, recover, restart: the end state
/// is the one without a crash, with exactly one barrier (the stop knows the barrier it wrote).
#[test]
fn s13_crash_at_every_step_of_stopping() {
    let mut crashed_runs = 0;
    for k in 1.. {
        let env = Env::new();
        let sim = Arc::new(klog::log::io::SimStorage::new(k));
        let a = s1_source(&env, "a");
        let b = env.cluster_on(sim.clone(), "b");
        link(&b, "m", &a);
        all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
        b.run_until_idle(100);
        b.checkpoint().unwrap(); // what was mirrored is durable: the crash is in the stop, not before it
        all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
        let (b, finished) = power_off_run_and_restart(&env, &sim, b, "b", k, ("m", &a));
        let r = b.run_until_idle(100);
        assert!(r.errors.is_empty(), "k={k}: {:?}", r.errors);
        assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Stopped), "k={k}");
        assert_eq!(lme_of(&b, "t"), Some(2), "k={k}");
        assert_eq!(b.leader_epoch("t", 0), Some(12), "k={k}");
        let bl = log(&b, "t");
        let all = batches(&bl);
        let mirrored = batches(&log(&a, "t"));
        assert_eq!(all[..mirrored.len()], mirrored[..], "k={k}");
        let barriers = &all[mirrored.len()..];
        assert_eq!(barriers.len(), 1, "k={k}: {} barriers", barriers.len());
        for s in barriers {
            assert_eq!(
                control_type(s),
                Some(ControlRecordType::MirrorPidReset),
                "k={k}"
            );
            assert_eq!(s.epoch, 12);
        }
        assert!(bl.producers().is_empty(), "k={k}");
        let info = b
            .produce("t", 0, &mut batch(PID, 0, 0, 1, false, "after"))
            .unwrap();
        assert_eq!(info.first_offset, 6 + barriers.len() as i64);
        if finished {
            break;
        }
        crashed_runs += 1;
    }
    assert!(
        crashed_runs >= 5,
        "the stop performs several storage operations"
    );
}

/// S13 (PREPARING): failback case b with a power-off at every storage operation of PREPARING (and the
/// first fetches), then restart: A converges on B's log.
#[test]
fn s13_crash_at_every_step_of_preparing() {
    let mut crashed_runs = 0;
    for k in 1.. {
        let env = Env::new();
        let sim = Arc::new(klog::log::io::SimStorage::new(k));
        let a = s1_source_on(&env, sim.clone(), "a");
        let b = env.cluster("b");
        link(&b, "m", &a);
        all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
        b.run_until_idle(100);
        all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
        b.run_until_idle(100);
        b.produce("t", 0, &mut plain(1, "b-primary")).unwrap();
        a.bump_leader_epoch("t", 0, 4).unwrap();
        a.produce("t", 0, &mut plain(2, "a-stray")).unwrap();
        a.checkpoint().unwrap();
        link(&a, "back", &b);
        all_ok(a.add_topics("back", &topics(&["t"])).unwrap());
        let (a, finished) = power_off_run_and_restart(&env, &sim, a, "a", k, ("back", &b));
        let r = a.run_until_idle(100);
        assert!(r.errors.is_empty(), "k={k}: {:?}", r.errors);
        assert_eq!(state_of(&a, "t", 0), Some(MirrorState::Mirroring), "k={k}");
        assert_mirrors(&a, &b, "t");
        assert_eq!(log(&a, "t").log_end_offset(), 8, "k={k}");
        if finished {
            break;
        }
        crashed_runs += 1;
    }
    assert!(crashed_runs >= 3);
}

/// S13 (MIRRORING, leader change / restart): the new leader re-enters MIRRORING and its fetcher resumes
/// from the local log end: no truncation, no duplicate, same bytes.
#[test]
fn s13_restart_mid_mirroring_resumes_from_the_log_end() {
    let env = Env::new();
    let a = s1_source(&env, "a");
    for i in 0..20 {
        a.produce("t", 0, &mut batch(PID + 1, 0, i, 1, false, "more"))
            .unwrap();
    }
    let b = env.cluster("b");
    let b = Arc::new(
        Arc::try_unwrap(b)
            .unwrap()
            .with_settings(klog::mirror::MirrorSettings {
                fetch_max_bytes: 1, // one batch per fetch
                ..Default::default()
            }),
    );
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    for _ in 0..6 {
        b.tick();
    }
    let partial = log(&b, "t").log_end_offset();
    assert!(partial > 0 && partial < 26, "{partial}");
    b.close().unwrap();
    drop(b);
    let b = env.reopen(Arc::new(klog::log::io::StdStorage), "b");
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Mirroring));
    b.connect_source("m", Arc::new(a.as_source()));
    let r = b.run_until_idle(100);
    assert!(
        r.transitions.is_empty(),
        "re-entered without a rewrite: {r:?}"
    );
    assert_eq!(r.truncations, 0);
    assert_mirrors(&b, &a, "t");
    let (pa, pb) = (log(&a, "t").producers(), log(&b, "t").producers());
    assert_eq!(pa.len(), 2);
    // A snapshot keeps each producer's last batch only (as Kafka's does), so compare what it keeps.
    let key = |p: &klog::psm::ProducerStateEntry| {
        (
            p.producer_id(),
            p.producer_epoch(),
            p.last_seq(),
            p.last_data_offset(),
            p.last_timestamp(),
        )
    };
    assert_eq!(
        pa.iter().map(key).collect::<Vec<_>>(),
        pb.iter().map(key).collect::<Vec<_>>()
    );
}

/// S12 (partition count): the source topic grows; the metadata sync creates the new partition here and
/// it goes through PREPARING to MIRRORING like any new mirror partition.
#[test]
fn s12_source_partition_increase_is_followed() {
    let env = Env::new();
    let (a, b) = synced_pair(&env);
    a.create_partitions("t", 2).unwrap();
    a.produce("t", 1, &mut batch(9, 0, 0, 3, false, "p1"))
        .unwrap();
    // Within the refresh interval nothing is described again.
    b.run_until_idle(100);
    assert_eq!(b.topic("t").unwrap().partitions, 1);
    env.clock.advance(30_000);
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let t = b.topic("t").unwrap();
    assert_eq!((t.partitions, t.leader_epochs.len()), (2, 2));
    let p1: Vec<_> = r
        .transitions
        .iter()
        .filter(|t| t.1 == 1)
        .map(|t| t.3)
        .collect();
    assert_eq!(p1, [MirrorState::Preparing, MirrorState::Mirroring]);
    assert_eq!(
        batches(&b.log("t", 1).unwrap()),
        batches(&a.log("t", 1).unwrap())
    );
    assert_eq!(
        b.produce("t", 1, &mut plain(1, "x"))
            .unwrap_err()
            .error_name(),
        Some("READ_ONLY_TOPIC")
    );
    assert_eq!(
        b.log("t", 1)
            .unwrap()
            .topic_id()
            .unwrap()
            .unwrap()
            .to_string(),
        a.topic("t").unwrap().id
    );
    assert_eq!(
        a.create_partitions("t", 2).unwrap_err().error_name(),
        Some("INVALID_REQUEST")
    );
}
