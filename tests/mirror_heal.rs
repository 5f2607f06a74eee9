//! Issue #13, defects 4 and 9: a mirror that finishes what a crash interrupted and heals itself.
//!
//! - DeleteMirror survives a crash at any of its writes: the next open tombstones the records of a
//!   mirror that no longer exists, so a new mirror of the same name starts with no state and no LME.
//! - A local source is a reader: it takes no lock (the source's own writer and a second mirror keep
//!   working), it sees what the source appends next, and it survives its directory going away and coming
//!   back.
//! - A destination write that fails (a full disk) poisons the partition log; the next retry reopens it
//!   with recovery and the mirror converges without a restart.

mod mirror_support;

use std::sync::Arc;

use klog::log::io::{Fault, SimStorage, StdStorage};
use klog::mirror::{Cluster, MirrorState};
use mirror_support::*;

const PID: i64 = 7;

/// A source cluster `a` with topic `t`: two producer batches at epoch 0, one at epoch 2.
fn source(env: &Env) -> Arc<Cluster> {
    let a = env.cluster("a");
    a.create_topic("t", 1, None, &[]).unwrap();
    a.produce("t", 0, &mut batch(PID, 0, 0, 3, false, "a0"))
        .unwrap();
    a.produce("t", 0, &mut batch(PID, 0, 3, 3, false, "a1"))
        .unwrap();
    a.bump_leader_epoch("t", 0, 2).unwrap();
    a.produce("t", 0, &mut batch(PID, 0, 6, 3, false, "a2"))
        .unwrap();
    a
}

/// `dest`'s copy of `t` is byte for byte `src`'s.
fn converged(src: &Cluster, dest: &Cluster) -> bool {
    match (src.log("t", 0), dest.log("t", 0)) {
        (Some(s), Some(d)) => batches(&s) == batches(&d),
        _ => false,
    }
}

/// The describe row of `t-0`.
fn row(c: &Cluster) -> klog::mirror::PartitionDescription {
    c.describe()
        .into_iter()
        .find(|d| d.topic == "t" && d.partition == 0)
        .expect("t-0 is described")
}

/// Ticks `dest` with the clock moving `step_ms` each time until `done` or `max` ticks; returns the
/// errors the ticks reported.
fn tick_until(
    env: &Env,
    dest: &Cluster,
    step_ms: i64,
    max: usize,
    mut done: impl FnMut() -> bool,
) -> Vec<String> {
    let mut errors = Vec::new();
    for _ in 0..max {
        if done() {
            break;
        }
        env.clock.advance(step_ms);
        let r = dest.tick();
        errors.extend(r.errors.into_iter().map(|(_, _, e)| e));
    }
    errors
}

// ---- defect 4: DeleteMirror is crash-safe ---------------------------------------------------------------

/// `b` (on `sim`) mirrors `t` from `a` as mirror `m`, then fails over: STOPPED with LME 2.
fn stopped_mirror(env: &Env, sim: &Arc<SimStorage>, a: &Arc<Cluster>) -> Arc<Cluster> {
    let b = env.cluster_on(sim.clone(), "b");
    link(&b, "m", a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Stopped));
    assert_eq!(lme_of(&b, "t"), Some(2));
    b.checkpoint().unwrap();
    b
}

/// A new mirror named `m` from `a`, holding `t` again: it must start with no state and no LME.
fn assert_fresh_mirror_m(b: &Cluster, a: &Arc<Cluster>, what: &str) {
    link(b, "m", a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    let d = row(b);
    assert_eq!(d.mirror.as_deref(), Some("m"), "{what}");
    assert_eq!(
        d.state,
        Some(MirrorState::Unknown),
        "{what}: the deleted mirror's state is back"
    );
    assert_eq!(
        d.last_mirrored_epoch, None,
        "{what}: the deleted mirror's LME is back"
    );
}

/// Power off at every storage operation of DeleteMirror, crash (torn writes), reopen: the deletion is
/// either not done (the mirror is still there and can be deleted) or done completely, and a new mirror
/// of the same name sees none of the old one's records.
#[test]
fn delete_mirror_survives_a_crash_at_every_write() {
    let mut crashed_runs = 0;
    for k in 1.. {
        let env = Env::new();
        let sim = Arc::new(SimStorage::new(k));
        let a = source(&env);
        let b = stopped_mirror(&env, &sim, &a);
        let start = sim.ops();
        sim.power_off_at(start + k);
        let deleted = b.delete_mirror("m");
        let finished = sim.ops() < start + k;
        assert!(deleted.is_ok() || !finished, "k={k}: {deleted:?}");
        drop(b);
        sim.crash(true);
        sim.clear_faults();
        let b = env.reopen(sim.clone(), "b");
        if b.mirrors().contains_key("m") {
            // The metadata did not reach the disk: the mirror is still there, STOPPED, and can be
            // deleted now.
            b.connect_source("m", Arc::new(a.as_source()));
            assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Stopped), "k={k}");
            b.delete_mirror("m").unwrap();
        }
        assert_fresh_mirror_m(&b, &a, &format!("k={k}"));
        // And again after one more restart: nothing comes back from `__mirror_state`.
        drop(b);
        let b = env.reopen(sim.clone(), "b");
        let d = row(&b);
        assert_eq!(d.state, Some(MirrorState::Unknown), "k={k} after reopen");
        assert_eq!(d.last_mirrored_epoch, None, "k={k} after reopen");
        if finished {
            break;
        }
        crashed_runs += 1;
    }
    assert!(
        crashed_runs >= 3,
        "DeleteMirror performs several storage operations"
    );
}

/// DeleteMirror whose tombstone write fails (after the metadata was saved) in a process that goes on:
/// creating a mirror of the same name in that same process must not adopt the old records.
#[test]
fn delete_mirror_whose_tombstones_fail_leaves_nothing_for_the_next_mirror_of_that_name() {
    let mut seen_half_done = 0;
    for j in 1..40 {
        let env = Env::new();
        let sim = Arc::new(SimStorage::new(j));
        let a = source(&env);
        let b = stopped_mirror(&env, &sim, &a);
        let start = sim.ops();
        sim.inject(start + j, Fault::Eio);
        let deleted = b.delete_mirror("m");
        let done_ops = sim.ops() - start;
        if deleted.is_ok() && done_ops < j {
            break; // the deletion finished before the fault
        }
        if deleted.is_err() && !b.mirrors().contains_key("m") {
            seen_half_done += 1;
            assert_fresh_mirror_m(&b, &a, &format!("fault at op {j}"));
        }
    }
    assert!(
        seen_half_done >= 1,
        "some fault falls after the metadata and before the tombstones"
    );
}

// ---- defect 9: a local source is a reader ---------------------------------------------------------------

/// `dest` gets mirror `m` whose source is `a`'s root, opened by the default resolver (as `klog mirror
/// run` does), and mirrors `t`.
fn mirror_by_path(env: &Env, name: &str, a_root: &std::path::Path) -> Arc<Cluster> {
    let dest = env.cluster(name);
    dest.create_mirror("m", a_root.to_str().unwrap()).unwrap();
    all_ok(dest.add_topics("m", &topics(&["t"])).unwrap());
    dest
}

/// The source's own writer keeps writing while two mirrors read it, and both see every new append:
/// a local source takes no lock and is never a stale snapshot.
#[test]
fn a_local_source_is_read_without_its_lock_and_its_new_appends_are_seen() {
    let env = Env::new();
    let a = source(&env);
    let b = mirror_by_path(&env, "b", &env.root("a"));
    b.run_until_idle(100);
    assert!(converged(&a, &b));
    // A second mirror of the same source, at the same time.
    let c = mirror_by_path(&env, "c", &env.root("a"));
    c.run_until_idle(100);
    assert!(converged(&a, &c));
    // The source's writer is not stopped by its readers, and what it writes next is mirrored.
    a.produce("t", 0, &mut batch(PID, 0, 9, 3, false, "a3"))
        .unwrap();
    a.bump_leader_epoch("t", 0, 3).unwrap();
    a.produce("t", 0, &mut batch(PID, 0, 12, 2, false, "a4"))
        .unwrap();
    let errors = tick_until(&env, &b, 100, 50, || converged(&a, &b));
    assert!(
        converged(&a, &b),
        "b did not see a's new appends: {errors:?}"
    );
    let errors = tick_until(&env, &c, 100, 50, || converged(&a, &c));
    assert!(
        converged(&a, &c),
        "c did not see a's new appends: {errors:?}"
    );
    // The source restarts (a clean close, a new writer): the readers follow.
    a.close().unwrap();
    drop(a);
    let a = env.reopen(Arc::new(StdStorage), "a");
    a.produce("t", 0, &mut batch(PID, 0, 14, 4, false, "a5"))
        .unwrap();
    let errors = tick_until(&env, &b, 100, 50, || converged(&a, &b));
    assert!(converged(&a, &b), "after the source restarted: {errors:?}");
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Mirroring));
    assert_eq!(log(&b, "t").log_end_offset(), 18);
}

/// The source's directory goes away and comes back (with new data, written by a new writer while the
/// mirror is still running): the mirror reports the outage and then converges, without a restart.
#[test]
fn a_mirror_rides_out_its_source_directory_vanishing_and_coming_back() {
    let env = Env::new();
    let a = source(&env);
    a.close().unwrap();
    drop(a);
    let b = mirror_by_path(&env, "b", &env.root("a"));
    b.run_until_idle(100);
    let away = env.root("a.away");
    std::fs::rename(env.root("a"), &away).unwrap();
    let mut outage = Vec::new();
    for _ in 0..5 {
        env.clock.advance(1000);
        outage.extend(b.tick().errors.into_iter().map(|(_, _, e)| e));
    }
    assert!(
        !outage.is_empty(),
        "a fetch from a source that is gone reports it"
    );
    std::fs::rename(&away, env.root("a")).unwrap();
    // A writer of the source (a producer's broker coming back) while the mirror runs.
    let a = env.reopen(Arc::new(StdStorage), "a");
    a.produce("t", 0, &mut batch(PID, 0, 9, 3, false, "a3"))
        .unwrap();
    let errors = tick_until(&env, &b, 5_000, 200, || {
        converged(&a, &b) && state_of(&b, "t", 0) == Some(MirrorState::Mirroring)
    });
    assert!(
        converged(&a, &b),
        "no convergence after the source came back: {errors:?}"
    );
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Mirroring));
    // The outage did not leave the source's directory locked for its own writer.
    a.close().unwrap();
    drop(a);
    let a = env.reopen(Arc::new(StdStorage), "a");
    a.produce("t", 0, &mut plain(1, "after")).unwrap();
}

// ---- defect 9: the destination heals after failed writes ------------------------------------------------

/// `b` on `sim` mirrors `t` from the in-process `a` and has converged; `a` then takes one more batch.
fn mirroring_on_sim(env: &Env, sim: &Arc<SimStorage>) -> (Arc<Cluster>, Arc<Cluster>) {
    let a = source(env);
    let b = env.cluster_on(sim.clone(), "b");
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    assert!(converged(&a, &b));
    a.produce("t", 0, &mut batch(PID, 0, 9, 3, false, "a3"))
        .unwrap();
    (a, b)
}

/// One failed storage operation (ENOSPC, then EIO) at each point of the next fetch round: the partition
/// (or `__mirror_state`) log that failed is reopened with recovery on the next retry, and the mirror
/// converges in the same process.
#[test]
fn one_failed_write_anywhere_in_a_fetch_round_heals_without_a_restart() {
    for fault in [Fault::Enospc, Fault::Eio] {
        let mut failed_rounds = 0;
        for j in 1..60 {
            let env = Env::new();
            let sim = Arc::new(SimStorage::new(j));
            let (a, b) = mirroring_on_sim(&env, &sim);
            let start = sim.ops();
            sim.inject(start + j, fault);
            let first = b.tick();
            if sim.ops() - start < j {
                assert!(converged(&a, &b));
                break; // the round finished before the fault
            }
            failed_rounds += !first.errors.is_empty() as usize;
            let errors = tick_until(&env, &b, 2_000, 300, || {
                converged(&a, &b) && state_of(&b, "t", 0) == Some(MirrorState::Mirroring)
            });
            assert!(
                converged(&a, &b),
                "{fault:?} at op {j}: no convergence: {:?} then {errors:?}",
                first.errors
            );
            assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Mirroring));
            assert!(!log(&b, "t").is_failed());
            // What healed is on disk: the next open sees the same log.
            b.close().unwrap();
            drop(b);
            let b = env.reopen(sim.clone(), "b");
            assert!(converged(&a, &b), "{fault:?} at op {j}: after reopen");
        }
        assert!(failed_rounds >= 1, "{fault:?}: the round writes");
    }
}

/// The disk stays full for a while (every write fails), then space is freed: the first error says so,
/// and once space is back the mirror converges without a restart.
#[test]
fn a_full_disk_then_freed_space_heals_without_a_restart() {
    let env = Env::new();
    let sim = Arc::new(SimStorage::new(3));
    let (a, b) = mirroring_on_sim(&env, &sim);
    let start = sim.ops();
    for op in start + 1..start + 10_000 {
        sim.inject(op, Fault::Enospc);
    }
    let mut full = Vec::new();
    for _ in 0..20 {
        env.clock.advance(2_000);
        full.extend(b.tick().errors.into_iter().map(|(_, _, e)| e));
    }
    assert!(
        full.first()
            .is_some_and(|e| e.contains("No space left on device")),
        "the first error names the full disk: {full:?}"
    );
    assert!(!converged(&a, &b));
    sim.clear_faults(); // space freed
    a.produce("t", 0, &mut batch(PID, 0, 12, 2, false, "a4"))
        .unwrap();
    let errors = tick_until(&env, &b, 10_000, 500, || {
        converged(&a, &b) && state_of(&b, "t", 0) == Some(MirrorState::Mirroring)
    });
    assert!(
        converged(&a, &b),
        "no convergence after space was freed: {errors:?}"
    );
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Mirroring));
    assert!(
        !errors.iter().any(|e| e.contains("reopen it to recover")),
        "a retry found the log still poisoned: {errors:?}"
    );
}
