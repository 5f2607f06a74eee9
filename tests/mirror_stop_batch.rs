//! A failover of many mirror partitions at once (issue 17, item 3): the states of all the partitions
//! changing in a pass are written to `__mirror_state` together, a constant number of writes whatever
//! the partition count, and the stop of many partitions runs step by step across them while every
//! partition keeps its stop's crash safety: a power cut at any storage operation of a batched stop
//! leaves every partition recoverable to exactly one barrier above its recorded LME.

#[path = "mirror_support/mod.rs"]
mod support;

use std::sync::Arc;

use klog::log::format::ControlRecordType;
use klog::log::io::{CountingStorage, IoOp, SimStorage, StdStorage, Storage};
use klog::mirror::{Cluster, MirrorState};
use support::*;

/// Source A's topic `t` with `n` partitions: partition p holds p % 3 + 1 batches at epoch 0, and every
/// odd partition had a leader election and one more batch at epoch 1 (so the LMEs differ).
fn source(env: &Env, n: i32) -> Arc<Cluster> {
    source_with(env, n, true)
}

/// [`source`], the leader elections optional (each is a metadata write: slow for many partitions).
fn source_with(env: &Env, n: i32, elections: bool) -> Arc<Cluster> {
    let a = env.cluster_on(Arc::new(StdStorage), "a");
    a.create_topic("t", n, None, &[]).unwrap();
    for p in 0..n {
        for i in 0..(p % 3 + 1) {
            a.produce("t", p, &mut plain(2, &format!("p{p}-{i}")))
                .unwrap();
        }
        if elections && p % 2 == 1 {
            a.bump_leader_epoch("t", p, 0).unwrap();
            a.produce("t", p, &mut plain(1, &format!("p{p}-e1")))
                .unwrap();
        }
    }
    a
}

/// B (on `storage`) mirrors every partition of A's `t` until idle.
fn mirrored(env: &Env, storage: Arc<dyn Storage>, a: &Arc<Cluster>, n: i32) -> Arc<Cluster> {
    let b = env.cluster_on(storage, "b");
    link(&b, "m", a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let described = b.describe();
    for p in 0..n {
        let d = described
            .iter()
            .find(|d| d.topic == "t" && d.partition == p);
        assert_eq!(
            d.and_then(|d| d.state),
            Some(MirrorState::Mirroring),
            "t-{p}"
        );
    }
    b
}

/// Batches in every partition of B's `__mirror_state`.
fn state_batches(b: &Cluster) -> usize {
    (0..)
        .map_while(|p| b.log("__mirror_state", p))
        .map(|log| batches(&log).len())
        .sum()
}

fn partitions_of_mirror_state(b: &Cluster) -> usize {
    (0..)
        .take_while(|p| b.log("__mirror_state", *p).is_some())
        .count()
}

/// What every stopped partition of B must hold: A's batches unchanged, then exactly one barrier of
/// B's own at an epoch above the LME recorded for it, that LME being A's latest epoch.
fn assert_stopped(a: &Cluster, b: &Cluster, n: i32, what: &str) {
    let described = b.describe();
    for p in 0..n {
        let d = described
            .iter()
            .find(|d| d.topic == "t" && d.partition == p)
            .unwrap();
        assert_eq!(d.state, Some(MirrorState::Stopped), "{what}: t-{p}");
        let lme = a.log("t", p).unwrap().latest_epoch().unwrap();
        assert_eq!(d.last_mirrored_epoch, Some(lme), "{what}: t-{p}'s LME");
        let from_a = batches(&a.log("t", p).unwrap());
        let all = batches(&b.log("t", p).unwrap());
        assert_eq!(all[..from_a.len()], from_a[..], "{what}: t-{p} lost data");
        let own = &all[from_a.len()..];
        assert_eq!(own.len(), 1, "{what}: t-{p}'s own batches: {own:?}");
        assert_eq!(
            control_type(&own[0]),
            Some(ControlRecordType::MirrorPidReset),
            "{what}: t-{p}"
        );
        assert!(
            own[0].epoch > lme,
            "{what}: t-{p}'s barrier at {}",
            own[0].epoch
        );
        assert_eq!(b.leader_epoch("t", p), Some(own[0].epoch), "{what}: t-{p}");
        assert!(barrier_value_is_klogs(&own[0]), "{what}");
    }
}

/// Starting and stopping N partitions writes each pass's states in one `__mirror_state` write: a
/// batch per `__mirror_state` partition at most, however many mirror partitions change.
#[test]
fn the_states_of_many_partitions_are_written_together() {
    let n = 40;
    let env = Env::new();
    let a = source(&env, n);
    let b = env.cluster_on(Arc::new(StdStorage), "b");
    let writes_max = partitions_of_mirror_state(&b);
    link(&b, "m", &a);
    let before = state_batches(&b);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let started = state_batches(&b) - before;
    // Four writes: PREPARING for all, MIRRORING for all, then EPOCH_FENCING for all (the first
    // fetched batches are at the source's epochs, above ours) and MIRRORING again.
    assert!(
        started <= 4 * writes_max,
        "starting {n} partitions wrote {started} __mirror_state batches"
    );
    let before = state_batches(&b);
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_stopped(&a, &b, n, "stop");
    let stopped = state_batches(&b) - before;
    // Three writes: STOPPING for all, their LMEs (each with its STOPPING record), STOPPED for all.
    assert!(
        stopped <= 3 * writes_max,
        "stopping {n} partitions wrote {stopped} __mirror_state batches"
    );
}

/// 20 partitions stopped together, the simulated disk losing power at every storage operation of the
/// stop in turn: after the crash, a reopen and a run to idle, every partition is STOPPED with exactly
/// one barrier above its recorded LME and nothing mirrored is lost.
#[test]
fn a_batched_stop_survives_a_power_cut_at_every_storage_operation() {
    power_cut_at_every_operation(20, SimStorage::new);
}

/// The same (with fewer partitions: every chunk write is an operation) on the direct write path io_uring
/// uses, where the logs' syncs go in one batch (`Storage::sync_files`) and a power cut lands each write
/// of a batch in flight whole, torn or not at all.
#[test]
fn a_batched_stop_with_syncs_together_survives_a_power_cut_at_every_storage_operation() {
    power_cut_at_every_operation(6, |k| SimStorage::new(k).with_direct_writes());
}

fn power_cut_at_every_operation(n: i32, storage: impl Fn(u64) -> SimStorage) {
    let env = Env::new();
    let a = source(&env, n);
    let mut crashed_runs = 0;
    for k in 1.. {
        let sim = Arc::new(storage(k));
        let b = mirrored(&env, sim.clone(), &a, n);
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
        // A write that failed may still have reached the disk (the direct path's batch in flight at the
        // cut): a FAILED record among them waits for its retry time, so the clock passes it.
        env.clock
            .advance(b.settings().failed_retry_max_backoff_ms + 1);
        let r = b.run_until_idle(100);
        assert!(r.errors.is_empty(), "k={k}: {:?}", r.errors);
        assert_stopped(
            &a,
            &b,
            n,
            &format!("power off at operation {k} of the stop"),
        );
        if finished {
            break;
        }
        crashed_runs += 1;
    }
    assert!(
        crashed_runs >= 3 * n,
        "the stop performs {crashed_runs} storage operations"
    );
}

/// One partition whose step fails in a batched stop (its log was closed under it: the cut and the
/// barrier are refused) goes to FAILED from STOPPING with the LME it recorded; the others stop. After a
/// restart its retry finishes the stop it began: one barrier, the same LME.
#[test]
fn a_partition_failing_in_a_batched_stop_fails_alone() {
    let n = 10;
    let env = Env::new();
    let a = source(&env, n);
    let b = mirrored(&env, Arc::new(StdStorage), &a, n);
    b.log("t", 3).unwrap().close().unwrap();
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(100);
    assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
    assert_eq!((r.errors[0].0.as_str(), r.errors[0].1), ("t", 3));
    let failed = b
        .describe()
        .into_iter()
        .find(|d| d.topic == "t" && d.partition == 3)
        .unwrap();
    assert_eq!(failed.state, Some(MirrorState::Failed));
    let lme = a.log("t", 3).unwrap().latest_epoch().unwrap();
    assert_eq!(failed.last_mirrored_epoch, Some(lme));
    for p in (0..n).filter(|p| *p != 3) {
        assert_eq!(state_of(&b, "t", p), Some(MirrorState::Stopped), "t-{p}");
    }
    drop(b);
    let b = env.reopen(Arc::new(StdStorage), "b");
    b.connect_source("m", Arc::new(a.as_source()));
    env.clock
        .advance(b.settings().failed_retry_max_backoff_ms + 1);
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_stopped(&a, &b, n, "after the retry");
}

/// Source A with `topics` topics `t0`, `t1`, ... of `partitions` partitions each, one batch in every
/// partition, and B mirroring all of them until idle (on `storage`).
fn mirrored_topics(
    env: &Env,
    storage: Arc<dyn Storage>,
    topics: usize,
    partitions: i32,
) -> (Arc<Cluster>, Arc<Cluster>, Vec<String>) {
    let a = env.cluster_on(Arc::new(StdStorage), "a");
    let names: Vec<String> = (0..topics).map(|t| format!("t{t}")).collect();
    for t in &names {
        a.create_topic(t, partitions, None, &[]).unwrap();
        for p in 0..partitions {
            // Idempotent, as a producer's batches are: the barrier then resets a producer.
            let mut b = batch(1000 + p as i64, 0, 0, 2, false, &format!("{t}-{p}"));
            a.produce(t, p, &mut b).unwrap();
        }
    }
    let b = env.cluster_on(storage, "b");
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &names).unwrap());
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    (a, b, names)
}

/// What a failover of every topic of `b`'s mirror `m` syncs, by the kind of file (`log`, `json` for
/// `cluster.json`, `tmp` for a checkpoint's temp file, `dir` for directories, ...), and how many times
/// it puts `cluster.json` in place: the remove request and every tick until idle.
fn failover_io(
    storage: &CountingStorage,
    b: &Cluster,
    names: &[String],
) -> (std::collections::BTreeMap<String, u64>, u64) {
    storage.take();
    all_ok(b.remove_topics("m", names).unwrap());
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let mut syncs = std::collections::BTreeMap::new();
    let mut metadata_writes = 0;
    for ((op, kind), count) in storage.take() {
        if matches!(op, IoOp::Sync | IoOp::SyncDir) {
            *syncs.entry(kind.clone()).or_default() += count;
        }
        if op == IoOp::Rename && kind == "json" {
            metadata_writes += count;
        }
    }
    (syncs, metadata_writes)
}

/// A failover of a mirror of many topics writes `cluster.json` a fixed number of times (the remove
/// request's desired states, the epoch bumps), not once per topic: each write is synced, and at 20
/// topics the per-topic writes were a third of the failover of 1,000 partitions.
#[test]
fn a_failover_of_many_topics_writes_the_metadata_a_fixed_number_of_times() {
    let env = Env::new();
    let storage = Arc::new(CountingStorage::new(Arc::new(StdStorage)));
    let (a, b, names) = mirrored_topics(&env, storage.clone(), 12, 2);
    let (_, metadata_writes) = failover_io(&storage, &b, &names);
    assert!(
        metadata_writes <= 2,
        "a failover of {} topics wrote cluster.json {metadata_writes} times",
        names.len()
    );
    for t in &names {
        for p in 0..2 {
            assert_eq!(state_of(&b, t, p), Some(MirrorState::Stopped), "{t}-{p}");
            let from_a = batches(&a.log(t, p).unwrap());
            let all = batches(&b.log(t, p).unwrap());
            assert_eq!(
                all.len(),
                from_a.len() + 1,
                "{t}-{p}: A's batches and a barrier"
            );
        }
    }
}

/// What each partition adds to a failover's syncs, the constant parts (`__mirror_state`, `cluster.json`)
/// taken out by failing over twice as many: per partition, its `.log` twice (what it mirrored, before
/// its LME is recorded; then its barrier), the leader-epoch checkpoint of its new epoch once (a temp
/// file, synced, renamed) and its directory twice (its segment's entry at its first flush, the
/// checkpoint renamed into it), nothing else: these are the syncs the failover's bound is made of
/// (BENCHMARKS.md, "Mirroring"). (A barrier whose timestamp is `segment.ms` past the segment's first
/// batch rolls a segment as Kafka does, which adds the sealed indexes, a snapshot and the new files.)
#[test]
fn a_failover_syncs_each_partition_a_fixed_number_of_times() {
    let syncs = |topics: usize| {
        let env = Env::new();
        let storage = Arc::new(CountingStorage::new(Arc::new(StdStorage)));
        let (_a, b, names) = mirrored_topics(&env, storage.clone(), topics, 4);
        failover_io(&storage, &b, &names).0
    };
    let (small, large) = (syncs(2), syncs(4));
    let per_partition = |kind: &str| {
        let count = |m: &std::collections::BTreeMap<String, u64>| m.get(kind).copied().unwrap_or(0);
        (count(&large) - count(&small)) as f64 / 8.0
    };
    assert_eq!(per_partition("log"), 2.0, "{small:?} {large:?}");
    assert_eq!(per_partition("tmp"), 1.0, "{small:?} {large:?}");
    assert_eq!(per_partition("dir"), 2.0, "{small:?} {large:?}");
    let kinds: Vec<&String> = large.keys().collect();
    assert_eq!(kinds, ["dir", "json", "log", "tmp"], "{large:?}");
    assert_eq!(per_partition("json"), 0.0, "{small:?} {large:?}");
}
