//! KIP-1279 end-to-end scenarios S1-S13 (spec `kip-1279.md` §7) on local clusters in one process.
//! Every test checks offsets, batch bytes and producer state, not only that nothing failed.

#[path = "mirror_support/mod.rs"]
mod support;

use std::sync::Arc;

use klog::log::format::ControlRecordType;
use klog::mirror::{Cluster, MirrorState};
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
    assert_eq!(states, [MirrorState::Preparing, MirrorState::Mirroring]);
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
    for name in ["00000000000000000000.log"] {
        assert!(files_equal(
            &a.root().join("t-0").join(name),
            &b.root().join("t-0").join(name)
        ));
    }
}

/// S2: failover. LME 2, epoch bumped to 3, the barrier at offset 6, producer state empty, a local
/// producer reusing a mirrored producer id starts at sequence 0.
#[test]
fn s2_failover_writes_the_barrier_and_clears_producers() {
    let env = Env::new();
    let a = s1_source(&env, "a");
    let b = env.cluster("b");
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    let report = b.run_until_idle(100);
    let states: Vec<_> = report.transitions.iter().map(|t| t.3).collect();
    assert_eq!(states, [MirrorState::Stopping, MirrorState::Stopped]);
    assert_eq!(lme_of(&b, "t"), Some(2));
    assert_eq!(b.leader_epoch("t", 0), Some(3));
    let bl = log(&b, "t");
    assert_eq!(bl.log_end_offset(), 7);
    let all = batches(&bl);
    let barrier = all.last().unwrap();
    assert_eq!((barrier.base_offset, barrier.last_offset), (6, 6));
    assert_eq!(barrier.producer_id, -1);
    assert_eq!(barrier.epoch, 3);
    assert_eq!(
        control_type(barrier),
        Some(ControlRecordType::MirrorPidReset)
    );
    assert_eq!(barrier_cluster_id(barrier), a.cluster_id());
    assert_eq!(all[..all.len() - 1], batches(&log(&a, "t"))[..]);
    assert!(bl.producers().is_empty());
    // A local producer with the mirrored producer id writes at sequence 0: no OutOfOrderSequence.
    let info = b
        .produce("t", 0, &mut batch(PID, 0, 0, 1, false, "local"))
        .unwrap();
    assert_eq!(info.first_offset, 7);
    assert_eq!(batches(&bl).last().unwrap().epoch, 3);
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
        let a = s1_source(&env, "a");
        let b = env.cluster("b");
        link(&b, "m", &a);
        all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
        b.run_until_idle(100);
        all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
        b.run_until_idle(100);
        b.produce("t", 0, &mut plain(1, "b-primary")).unwrap(); // offset 7 at e(3)
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
        // Make A primary again: stop on A (barrier at 8, LME 3), then B mirrors back from A.
        all_ok(a.remove_topics("back", &topics(&["t"])).unwrap());
        a.run_until_idle(100);
        assert_eq!(lme_of(&a, "t"), Some(3));
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
