//! The stop design as a per-mirror choice (issue 25, item 1): `abort`, the reference forks' failover
//! (fetch read_uncommitted, then at STOPPING one ABORT marker per open transaction at the bumped epoch,
//! then the barrier; every offset the source assigned is kept), beside `truncate`, the seed's
//! (read_committed, cut to the LSO), on local clusters. The power-cut test checks that every step of
//! an abort-mode stop is crash-safe: exactly one ABORT per open producer and one barrier after the retry.

#[path = "mirror_support/mod.rs"]
mod support;

use std::sync::Arc;

use klog::log::format::{BatchBuilder, ControlRecordType, EndTxnMarker, RecordBatch};
use klog::log::io::{SimStorage, StdStorage, Storage};
use klog::mirror::{Cluster, MirrorState, StopMode};
use support::*;

/// Source A's `t-0`, with two transactions open at the failover:
/// - 0: producer 1's transaction, 1: its COMMIT (epoch 0); then a leader election (epoch 1);
/// - 2-3: producer 2 (producer epoch 3), 4: its COMMIT by coordinator epoch 5, 5: its next
///   transaction, left open;
/// - 6: producer 3's transaction, left open; 7: a plain batch.
///
/// Log end 8, LSO 5, latest epoch 1.
fn source_with_open_transactions(env: &Env) -> Arc<Cluster> {
    let a = env.cluster_on(Arc::new(StdStorage), "a");
    a.create_topic("t", 1, None, &[]).unwrap();
    a.produce("t", 0, &mut batch(1, 0, 0, 1, true, "t1"))
        .unwrap();
    a.append_markers("t", 0, &mut marker(true, 1, 0)).unwrap();
    assert_eq!(a.bump_leader_epoch("t", 0, 0).unwrap(), 1);
    a.produce("t", 0, &mut batch(2, 3, 0, 2, true, "t2"))
        .unwrap();
    let mut commit =
        BatchBuilder::end_txn_marker(ControlRecordType::Commit, 2, 3, 5, 1_700_000_000_000)
            .unwrap()
            .build()
            .unwrap();
    a.append_markers("t", 0, &mut commit).unwrap();
    assert_eq!(
        a.produce("t", 0, &mut batch(2, 3, 2, 1, true, "t2-open"))
            .unwrap()
            .first_offset,
        5
    );
    assert_eq!(
        a.produce("t", 0, &mut batch(3, 0, 0, 1, true, "t3-open"))
            .unwrap()
            .first_offset,
        6
    );
    a.produce("t", 0, &mut plain(1, "plain")).unwrap();
    let al = log(&a, "t");
    assert_eq!((al.log_end_offset(), al.last_stable_offset()), (8, 5));
    a
}

/// B (on `storage`) mirrors A's `t` with `mode` until idle (MIRRORING).
fn mirrored(
    env: &Env,
    storage: Arc<dyn Storage>,
    a: &Arc<Cluster>,
    mode: StopMode,
) -> Arc<Cluster> {
    let b = env.cluster_on(storage, "b");
    b.create_mirror_with_stop_mode("m", a.root().to_str().unwrap(), mode)
        .unwrap();
    b.connect_source("m", Arc::new(a.as_source()));
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Mirroring));
    b
}

/// `(producer id, producer epoch, coordinator epoch)` of an end-transaction marker batch.
fn marker_of(s: &Stored) -> (i64, i16, i32) {
    let (b, _) = RecordBatch::parse(&s.bytes, 0).unwrap();
    let mut scratch = Vec::new();
    let r = b.records(&mut scratch).unwrap().next().unwrap().unwrap();
    let value = EndTxnMarker::parse(r.value.unwrap()).unwrap();
    (b.producer_id(), b.producer_epoch(), value.coordinator_epoch)
}

/// What an abort-mode stop must leave in B: A's batches unchanged at A's offsets, then one ABORT per
/// open producer (2, then 3: in the order their transactions began) and one barrier, all at an epoch
/// above A's; nothing open, the `.txnindex` as Kafka's leader writes it.
fn assert_aborted(a: &Cluster, b: &Cluster, what: &str) {
    assert_eq!(state_of(b, "t", 0), Some(MirrorState::Stopped), "{what}");
    let from_a = batches(&log(a, "t"));
    let bl = log(b, "t");
    let all = batches(&bl);
    assert_eq!(all[..from_a.len()], from_a[..], "{what}: A's batches");
    let own = &all[from_a.len()..];
    let kinds: Vec<_> = own.iter().map(control_type).collect();
    assert_eq!(
        kinds,
        [
            Some(ControlRecordType::Abort),
            Some(ControlRecordType::Abort),
            Some(ControlRecordType::MirrorPidReset)
        ],
        "{what}: B's own batches {own:?}"
    );
    let source_epoch = log(a, "t").latest_epoch().unwrap();
    assert_eq!(lme_of(b, "t"), Some(source_epoch), "{what}: LME");
    for s in own {
        assert!(s.epoch > source_epoch, "{what}: {s:?} at epoch {}", s.epoch);
        assert_eq!(b.leader_epoch("t", 0), Some(s.epoch), "{what}");
    }
    assert_eq!(
        [marker_of(&own[0]), marker_of(&own[1])],
        [(2, 3, 5), (3, 0, 0)],
        "{what}: each marker is its producer's, at its epoch and coordinator epoch"
    );
    assert_eq!(
        own.iter().map(|s| s.base_offset).collect::<Vec<_>>(),
        [8, 9, 10],
        "{what}"
    );
    assert!(barrier_value_is_klogs(&own[2]), "{what}");
    assert_eq!(bl.log_end_offset(), 11, "{what}");
    assert_eq!(bl.last_stable_offset(), 11, "{what}: nothing stays open");
    assert!(
        bl.producers().is_empty(),
        "{what}: the barrier cleared them"
    );
    // A read_committed consumer sees the two transactions as aborted, at their source offsets.
    let (_, aborted) = bl.read_committed(0, 1 << 20, true).unwrap();
    let aborted: Vec<(i64, i64)> = aborted
        .iter()
        .map(|t| (t.producer_id.get(), t.first_offset.get()))
        .collect();
    assert_eq!(aborted, [(2, 5), (3, 6)], "{what}: aborted transactions");
}

/// The `.txnindex` of B's `t-0` (written when the active segment is closed) holds the entries Kafka's
/// leader writes for the two aborts: (version 0, producer id, first offset, marker offset, LSO once the
/// marker is written: producer 3's start, then the offset after the marker).
fn assert_txnindex(root: &std::path::Path) {
    let txnindex = root.join("t-0").join(format!("{:020}.txnindex", 0));
    let bytes = std::fs::read(&txnindex).unwrap();
    let mut want = Vec::new();
    for (pid, first, last, lso) in [(2i64, 5i64, 8i64, 6i64), (3, 6, 9, 10)] {
        want.extend_from_slice(&0i16.to_be_bytes());
        for v in [pid, first, last, lso] {
            want.extend_from_slice(&v.to_be_bytes());
        }
    }
    assert_eq!(bytes, want, "{}", txnindex.display());
}

#[test]
fn an_abort_mode_failover_keeps_every_source_offset_and_aborts_each_open_transaction() {
    let env = Env::new();
    let a = source_with_open_transactions(&env);
    let b = mirrored(&env, Arc::new(StdStorage), &a, StopMode::Abort);
    let d = &b.describe()[0];
    assert_eq!(d.stop_mode, Some(StopMode::Abort));
    let bl = log(&b, "t");
    // read_uncommitted: the open transactions are mirrored too, up to the source's high watermark.
    assert_eq!(bl.log_end_offset(), 8, "mirrored up to the source's HW");
    assert_eq!(bl.last_stable_offset(), 5, "as open here as at the source");
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.truncations, 0, "an abort-mode stop truncates nothing");
    assert_aborted(&a, &b, "abort-mode stop");
    // Producers start afresh on the new primary, after every offset the source assigned.
    b.produce("t", 0, &mut batch(2, 0, 0, 1, true, "new"))
        .unwrap();
    b.append_markers("t", 0, &mut marker(true, 2, 0)).unwrap();
    assert_eq!(bl.last_stable_offset(), bl.log_end_offset());
    assert_eq!(bl.log_end_offset(), 13);
    // The mode is kept in `cluster.json`: a restart finds it.
    drop(bl);
    b.close().unwrap();
    drop(b);
    assert_txnindex(&env.root("b"));
    let b = env.reopen(Arc::new(StdStorage), "b");
    assert_eq!(b.mirrors()["m"].stop_mode, StopMode::Abort);
    assert_eq!(b.describe()[0].stop_mode, Some(StopMode::Abort));
}

/// The default stays the seed's: read_committed (up to the source's LSO), the cut to the local LSO,
/// so offsets the source gave the open transactions are reused after the failover.
#[test]
fn a_truncate_mode_failover_is_the_seed_design() {
    let env = Env::new();
    let a = source_with_open_transactions(&env);
    let b = env.cluster("b");
    link(&b, "m", &a);
    assert_eq!(b.mirrors()["m"].stop_mode, StopMode::Truncate);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    let bl = log(&b, "t");
    assert_eq!(bl.log_end_offset(), 5, "only up to the source LSO");
    assert_eq!(b.describe()[0].stop_mode, Some(StopMode::Truncate));
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let from_a = batches(&log(&a, "t"));
    let all = batches(&bl);
    assert_eq!(all[..4], from_a[..4], "the committed prefix is A's");
    assert_eq!(all.len(), 5);
    assert_eq!(
        all[4].base_offset, 5,
        "the barrier reuses offset 5, A's open transaction's"
    );
    assert_eq!(
        control_type(&all[4]),
        Some(ControlRecordType::MirrorPidReset)
    );
    assert!(
        !all.iter()
            .any(|s| control_type(s) == Some(ControlRecordType::Abort)),
        "no marker in truncate mode"
    );
}

/// An abort-mode stop with the simulated disk losing power at every storage operation in turn: after
/// the crash, a reopen and a run to idle, B holds A's batches, exactly one ABORT per open producer and
/// one barrier.
#[test]
fn an_abort_mode_stop_survives_a_power_cut_at_every_storage_operation() {
    let env = Env::new();
    let a = source_with_open_transactions(&env);
    let mut crashed_runs = 0;
    for k in 1.. {
        let sim = Arc::new(SimStorage::new(k));
        let b = mirrored(&env, sim.clone(), &a, StopMode::Abort);
        b.checkpoint().unwrap(); // the crash is in the stop, not in what was mirrored before it
        all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
        let start = sim.ops();
        sim.power_off_at(start + k);
        b.run_until_idle(100);
        let finished = sim.ops() < start + k;
        drop(b);
        sim.crash(true);
        sim.clear_faults();
        let b = env.reopen(sim.clone(), "b");
        b.connect_source("m", Arc::new(a.as_source()));
        env.clock
            .advance(b.settings().failed_retry_max_backoff_ms + 1);
        let r = b.run_until_idle(100);
        assert!(r.errors.is_empty(), "k={k}: {:?}", r.errors);
        assert_aborted(&a, &b, &format!("power off at operation {k} of the stop"));
        drop(b);
        if finished {
            break;
        }
        crashed_runs += 1;
    }
    assert!(
        crashed_runs >= 15,
        "the stop performs {crashed_runs} storage operations"
    );
}
