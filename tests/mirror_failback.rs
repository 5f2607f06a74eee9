//! Failback after a leader election (issue 13, defect 1): A -> B, B fails over (its barrier at epoch 1),
//! A has one leader election (epoch 1), mirrors back from B and is stopped. A's stop must record its own
//! last mirrored epoch, bump its epoch above it and write its own barrier, even though its log already
//! ends with B's barrier at A's current epoch; and every step must stay idempotent across a power-off.
//! (Since the epoch rule keeps a mirror's epoch 7 to 10 above its source's, B's epochs are 10 and A's
//! 20 after mirroring back: A's stop still records B's barrier epoch as its LME and writes its own.)

#[path = "mirror_support/mod.rs"]
mod support;

use std::sync::Arc;

use klog::log::format::ControlRecordType;
use klog::log::io::{SimStorage, StdStorage, Storage};
use klog::mirror::{Cluster, MirrorState};
use support::*;

const PID: i64 = 77;

/// A's topic `t`: 3 idempotent records at epoch 0.
fn source_a(env: &Env, storage: Arc<dyn Storage>) -> Arc<Cluster> {
    let a = env.cluster_on(storage, "a");
    a.create_topic("t", 1, None, &[]).unwrap();
    a.produce("t", 0, &mut batch(PID, 0, 0, 3, false, "a0"))
        .unwrap();
    a
}

/// B mirrors A and fails over (LME 0, epoch 10, barrier at offset 3); A has one leader election and
/// mirrors back from B until its log is B's (ending in B's barrier at epoch 10; A's epoch fenced to
/// 20). Returns (A, B).
fn failed_back(env: &Env, a: Arc<Cluster>) -> (Arc<Cluster>, Arc<Cluster>) {
    let b = env.cluster("b");
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Stopped));
    assert_eq!(
        (lme_of(&b, "t"), b.leader_epoch("t", 0)),
        (Some(0), Some(10))
    );
    assert_eq!(a.bump_leader_epoch("t", 0, 0).unwrap(), 1);
    link(&a, "back", &b);
    all_ok(a.add_topics("back", &topics(&["t"])).unwrap());
    let r = a.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(state_of(&a, "t", 0), Some(MirrorState::Mirroring));
    assert_eq!(batches(&log(&a, "t")), batches(&log(&b, "t")));
    let last = batches(&log(&a, "t")).pop().unwrap();
    assert_eq!(control_type(&last), Some(ControlRecordType::MirrorPidReset));
    assert_eq!((last.base_offset, last.epoch), (3, 10), "B's barrier");
    assert_eq!(a.leader_epoch("t", 0), Some(20), "A's epoch above B's");
    (a, b)
}

/// What A's completed stop must have left: LME 10 (B's barrier epoch), epoch 20, exactly one barrier
/// of its own at offset 4 and epoch 20 carrying B's cluster id, after B's log unchanged.
fn assert_a_stopped(a: &Cluster, b: &Cluster, what: &str) {
    assert_eq!(state_of(a, "t", 0), Some(MirrorState::Stopped), "{what}");
    assert_eq!(lme_of(a, "t"), Some(10), "{what}: A's last mirrored epoch");
    assert_eq!(a.leader_epoch("t", 0), Some(20), "{what}: A's epoch");
    let all = batches(&log(a, "t"));
    let from_b = batches(&log(b, "t"));
    assert_eq!(all[..from_b.len()], from_b[..], "{what}");
    let own = &all[from_b.len()..];
    assert_eq!(own.len(), 1, "{what}: A's own barriers: {own:?}");
    assert_eq!(
        control_type(&own[0]),
        Some(ControlRecordType::MirrorPidReset),
        "{what}"
    );
    assert_eq!((own[0].base_offset, own[0].epoch), (4, 20), "{what}");
    assert!(barrier_value_is_klogs(&own[0]), "{what}");
    assert!(log(a, "t").producers().is_empty(), "{what}");
}

#[test]
fn failback_stop_after_a_leader_election_does_every_step() {
    let env = Env::new();
    let a = source_a(&env, Arc::new(StdStorage));
    let (a, b) = failed_back(&env, a);
    all_ok(a.remove_topics("back", &topics(&["t"])).unwrap());
    let r = a.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_a_stopped(&a, &b, "stop");
    // A's new writes are at its own epoch 20, never sharing B's epoch 10.
    let info = a
        .produce("t", 0, &mut batch(PID, 0, 0, 1, false, "a-again"))
        .unwrap();
    assert_eq!(info.first_offset, 5);
    assert_eq!(batches(&log(&a, "t")).last().unwrap().epoch, 20);
    // B mirrors back from A: A's LME (10) keeps everything B has; nothing is truncated or copied again.
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.truncations, 0, "B keeps its log: {r:?}");
    assert_eq!(r.batches_appended, 2, "only A's barrier and A's new write");
    assert_eq!(batches(&log(&b, "t")), batches(&log(&a, "t")));
}

/// The same stop with the simulated disk losing power at every storage operation of it: after
/// recovery and a restart the end state is the one without a crash, with exactly one barrier of A's.
#[test]
fn failback_stop_survives_a_power_off_at_every_step() {
    let mut crashed_runs = 0;
    for k in 1.. {
        let env = Env::new();
        let sim = Arc::new(SimStorage::new(k));
        let a = source_a(&env, sim.clone());
        let (a, b) = failed_back(&env, a);
        a.checkpoint().unwrap(); // the crash is in the stop, not in what was mirrored before it
        all_ok(a.remove_topics("back", &topics(&["t"])).unwrap());
        let start = sim.ops();
        sim.power_off_at(start + k);
        a.run_until_idle(100);
        let finished = sim.ops() < start + k;
        drop(a);
        sim.crash(true);
        sim.clear_faults();
        let a = env.reopen(sim.clone(), "a");
        a.connect_source("back", Arc::new(b.as_source()));
        let r = a.run_until_idle(100);
        assert!(r.errors.is_empty(), "k={k}: {:?}", r.errors);
        assert_a_stopped(&a, &b, &format!("power off at operation {k} of the stop"));
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
