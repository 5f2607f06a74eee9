//! The destination's leader epoch kept above the source's (the reference's `validateLeaderEpoch`,
//! EPOCH_FENCING) and unclean leader elections at the source (ULE_RECOVERY or FAILED), between local
//! clusters in one process: deterministic, with the source's epochs raised by hand.

#[path = "mirror_support/mod.rs"]
mod support;

use std::sync::Arc;

use klog::log::format::ControlRecordType;
use klog::mirror::manager::{LEADER_EPOCH_BUMP_INCREMENT, LEADER_EPOCH_BUMP_THRESHOLD};
use klog::mirror::metadata::MIRROR_SUPPORT_UNCLEAN_LEADER_ELECTION;
use klog::mirror::{Cluster, MirrorState};
use support::*;

/// Every batch of `c`'s `t-0` is at or below its leader epoch, which is above `source_epoch`.
fn assert_epoch_above(c: &Cluster, source_epoch: i32, what: &str) {
    let local = c.leader_epoch("t", 0).unwrap();
    assert!(
        local > source_epoch,
        "{what}: local epoch {local} not above the source's {source_epoch}"
    );
    for b in batches(&log(c, "t")) {
        assert!(
            b.epoch <= local,
            "{what}: batch at {} carries epoch {} above the local epoch {local}",
            b.base_offset,
            b.epoch
        );
    }
}

/// A source `a` with topic `t` at leader epoch `epoch` holding three records at it.
fn source_at(env: &Env, epoch: i32) -> Arc<Cluster> {
    let a = env.cluster("a");
    a.create_topic("t", 1, None, &[]).unwrap();
    if epoch > 0 {
        a.bump_leader_epoch("t", 0, epoch).unwrap();
    }
    a.produce("t", 0, &mut plain(3, "first")).unwrap();
    a
}

fn transitions(r: &klog::mirror::TickReport) -> Vec<(MirrorState, MirrorState)> {
    r.transitions.iter().map(|t| (t.2, t.3)).collect()
}

#[test]
fn a_source_epoch_within_the_threshold_bumps_ours_to_it_plus_ten_before_the_next_append() {
    let env = Env::new();
    let a = source_at(&env, 0);
    let b = env.cluster("b");
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    // The first fetch: the source at epoch 0 is within 3 of ours (0): ours goes to 0 + 10.
    assert_eq!(b.leader_epoch("t", 0), Some(LEADER_EPOCH_BUMP_INCREMENT));
    assert_epoch_above(&b, 0, "first fetch");
    // Elections at the source up to 7 = 10 - 3: not yet within the threshold.
    a.bump_leader_epoch("t", 0, 10 - LEADER_EPOCH_BUMP_THRESHOLD)
        .unwrap();
    a.produce("t", 0, &mut plain(1, "at seven")).unwrap();
    b.run_until_idle(100);
    assert_eq!(log(&b, "t").log_end_offset(), 4);
    assert_eq!(b.leader_epoch("t", 0), Some(10));
    // One more: 8 > 10 - 3. The batch at 8 is appended (it is below 10) and our epoch goes to 18,
    // written to cluster.json in the same round, before the partition appends again.
    a.bump_leader_epoch("t", 0, 8).unwrap();
    a.produce("t", 0, &mut plain(1, "at eight")).unwrap();
    let r = b.tick();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let r2 = b.tick();
    let bumps = r.epoch_bumps + r2.epoch_bumps;
    assert_eq!(bumps, 1, "one bump: {r:?} {r2:?}");
    assert_eq!(log(&b, "t").log_end_offset(), 5);
    assert_eq!(b.leader_epoch("t", 0), Some(18));
    assert_eq!(
        r.transitions.len() + r2.transitions.len(),
        0,
        "a proactive bump stays in MIRRORING"
    );
    assert_epoch_above(&b, 8, "after the proactive bump");
    // It is on disk: a restart finds it.
    b.close().unwrap();
    drop(b);
    let b = env.reopen(Arc::new(klog::log::io::StdStorage), "b");
    assert_eq!(b.leader_epoch("t", 0), Some(18));
    // A failover's barrier is at our epoch, above every epoch the source used.
    b.connect_source("m", Arc::new(a.as_source()));
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    let all = batches(&log(&b, "t"));
    let barrier = all.last().unwrap();
    assert_eq!(
        control_type(barrier),
        Some(ControlRecordType::MirrorPidReset)
    );
    assert_eq!(barrier.epoch, 18, "the barrier at the local epoch");
    assert!(barrier.epoch > a.leader_epoch("t", 0).unwrap());
}

#[test]
fn a_batch_above_the_local_epoch_is_refused_and_epoch_fencing_bumps_before_mirroring_resumes() {
    let env = Env::new();
    let a = source_at(&env, 0);
    let b = env.cluster("b");
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    assert_eq!(b.leader_epoch("t", 0), Some(10));
    // Many elections at the source between two fetches: its epoch jumps past ours.
    a.bump_leader_epoch("t", 0, 15).unwrap();
    a.produce("t", 0, &mut plain(2, "at fifteen")).unwrap();
    // The fetch learns epoch 15 (fenced), the next one gets a batch at 15 > 10: not appended.
    let mut seen = Vec::new();
    for _ in 0..10 {
        let r = b.tick();
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        seen.extend(transitions(&r));
        if state_of(&b, "t", 0) == Some(MirrorState::EpochFencing) {
            assert_eq!(
                log(&b, "t").log_end_offset(),
                3,
                "nothing above our epoch appended"
            );
            let d = b.describe();
            assert_eq!(d[0].state, Some(MirrorState::EpochFencing));
        }
        if log(&b, "t").log_end_offset() == 5 {
            break;
        }
    }
    assert_eq!(
        seen,
        [
            (MirrorState::Mirroring, MirrorState::EpochFencing),
            (MirrorState::EpochFencing, MirrorState::Mirroring)
        ]
    );
    assert_eq!(
        b.leader_epoch("t", 0),
        Some(15 + LEADER_EPOCH_BUMP_INCREMENT)
    );
    assert_eq!(batches(&log(&b, "t")), batches(&log(&a, "t")));
    assert_epoch_above(&b, 15, "after EPOCH_FENCING");
}

/// A power cut at every storage operation of EPOCH_FENCING and what follows it: after recovery the
/// partition mirrors on, and no batch above the local epoch was ever appended.
#[test]
fn a_power_cut_anywhere_in_epoch_fencing_never_leaves_a_batch_above_the_local_epoch() {
    let mut crashed_runs = 0;
    for k in 1.. {
        let env = Env::new();
        let sim = Arc::new(klog::log::io::SimStorage::new(k));
        let a = source_at(&env, 0);
        let b = env.cluster_on(sim.clone(), "b");
        link(&b, "m", &a);
        all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
        b.run_until_idle(100);
        b.checkpoint().unwrap();
        a.bump_leader_epoch("t", 0, 15).unwrap();
        a.produce("t", 0, &mut plain(2, "at fifteen")).unwrap();
        let start = sim.ops();
        sim.power_off_at(start + k);
        b.run_until_idle(100);
        let finished = sim.ops() < start + k;
        drop(b);
        sim.crash(true);
        sim.clear_faults();
        let b = env.reopen(sim.clone(), "b");
        assert_epoch_above(&b, 0, &format!("k={k}: after the crash"));
        b.connect_source("m", Arc::new(a.as_source()));
        let r = b.run_until_idle(100);
        assert!(r.errors.is_empty(), "k={k}: {:?}", r.errors);
        assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Mirroring), "k={k}");
        assert_eq!(batches(&log(&b, "t")), batches(&log(&a, "t")), "k={k}");
        assert_epoch_above(&b, 15, &format!("k={k}"));
        if finished {
            break;
        }
        crashed_runs += 1;
    }
    assert!(crashed_runs >= 3, "only {crashed_runs} runs crashed");
}

/// The source loses its last records to an unclean election (a stale replica at offset 5 elected at
/// a new epoch, then written to): what klog has beyond 5 is not on the source any more.
fn unclean_election(a: &Cluster) {
    let al = log(a, "t");
    al.truncate_to(5).unwrap();
    let epoch = a.leader_epoch("t", 0).unwrap();
    a.bump_leader_epoch("t", 0, epoch + 1).unwrap();
    for _ in 0..3 {
        a.produce("t", 0, &mut plain(1, "after the election"))
            .unwrap();
    }
}

fn mirrored_ten(env: &Env, configs: &[(String, String)]) -> (Arc<Cluster>, Arc<Cluster>) {
    let a = env.cluster("a");
    a.create_topic("t", 1, None, &[]).unwrap();
    a.bump_leader_epoch("t", 0, 1).unwrap();
    for _ in 0..10 {
        a.produce("t", 0, &mut plain(1, "e1")).unwrap();
    }
    let b = env.cluster("b");
    b.create_mirror_with_configs("m", a.root().to_str().unwrap(), configs)
        .unwrap();
    b.connect_source("m", Arc::new(a.as_source()));
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(100);
    assert_eq!(log(&b, "t").log_end_offset(), 10);
    (a, b)
}

#[test]
fn an_unclean_election_at_the_source_fails_the_partition_without_retries_by_default() {
    let env = Env::new();
    let (a, b) = mirrored_ten(&env, &[]);
    unclean_election(&a);
    let r = b.run_until_idle(100);
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Failed));
    let d = &b.describe()[0];
    assert_eq!(d.failed_state, Some(MirrorState::Mirroring));
    assert_eq!(d.retry_attempt, Some(-1), "not retried");
    let error = d.error.clone().unwrap();
    for needle in [
        "t-0",
        "unclean leader election",
        "epoch 1 ends at offset 5",
        "log end offset 10",
        "latest epoch 1",
        MIRROR_SUPPORT_UNCLEAN_LEADER_ELECTION,
    ] {
        assert!(error.contains(needle), "{needle:?} not in {error:?}");
    }
    assert!(
        r.errors.iter().any(|(_, _, e)| e == &error),
        "{:?}",
        r.errors
    );
    // Nothing was cut: the records the source lost stay here for the operator.
    assert_eq!(log(&b, "t").log_end_offset(), 10);
    assert_eq!(r.truncations, 0);
    // Time passes: still not retried.
    env.clock.advance(10 * 60 * 1000);
    b.run_until_idle(100);
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Failed));
    assert_eq!(log(&b, "t").log_end_offset(), 10);
}

#[test]
fn with_the_option_on_an_unclean_election_is_converged_through_ule_recovery() {
    let env = Env::new();
    let option = [(
        MIRROR_SUPPORT_UNCLEAN_LEADER_ELECTION.to_owned(),
        "true".to_owned(),
    )];
    let (a, b) = mirrored_ten(&env, &option);
    assert!(b.mirrors()["m"].support_unclean_leader_election);
    unclean_election(&a);
    let r = b.run_until_idle(100);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let t = transitions(&r);
    assert!(
        t.windows(2).any(|w| w
            == [
                (MirrorState::Mirroring, MirrorState::UleRecovery),
                (MirrorState::UleRecovery, MirrorState::Mirroring)
            ]),
        "{t:?}"
    );
    assert!(r.truncations >= 1);
    assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Mirroring));
    assert_eq!(batches(&log(&b, "t")), batches(&log(&a, "t")));
    assert_eq!(log(&b, "t").log_end_offset(), 8);
    assert_epoch_above(&b, a.leader_epoch("t", 0).unwrap(), "after ULE_RECOVERY");
}

#[test]
fn a_mirror_config_klog_does_not_know_or_cannot_parse_is_refused_naming_it() {
    let env = Env::new();
    let a = env.cluster("a");
    let b = env.cluster("b");
    let source = a.root().to_str().unwrap();
    let bad = [("mirror.no.such.thing".to_owned(), "1".to_owned())];
    let e = b.create_mirror_with_configs("m", source, &bad).unwrap_err();
    assert!(e.to_string().contains("mirror.no.such.thing"), "{e}");
    let bad = [(
        MIRROR_SUPPORT_UNCLEAN_LEADER_ELECTION.to_owned(),
        "yes".to_owned(),
    )];
    let e = b.create_mirror_with_configs("m", source, &bad).unwrap_err();
    assert!(e.to_string().contains("\"yes\""), "{e}");
    assert!(b.mirrors().is_empty());
}

/// A source whose batches carry an epoch above its own leader epoch (a klog mirror from before the
/// epoch rule, say): the batch is above the epoch it was fetched at, stale metadata; the partition
/// fails and is retried (the epoch learned again), and nothing above the fetched epoch is appended.
#[test]
fn a_batch_above_the_source_epoch_it_was_fetched_at_is_stale_metadata_and_retried() {
    use klog::log::format::{BatchBuilder, Compression};
    let env = Env::new();
    let a = env.cluster("a");
    a.create_topic("t", 1, None, &[]).unwrap();
    let mut b5 = BatchBuilder::new(Compression::None).partition_leader_epoch(5);
    b5.append(1_700_000_000_000, Some(b"k"), Some(b"v"), &[])
        .unwrap();
    log(&a, "t").append_as_mirror(&b5.build().unwrap()).unwrap();
    assert_eq!(a.leader_epoch("t", 0), Some(0));
    let b = env.cluster("b");
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    let r = b.run_until_idle(100);
    let d = &b.describe()[0];
    assert_eq!(d.state, Some(MirrorState::Failed), "{r:?}");
    assert_eq!(d.failed_state, Some(MirrorState::Mirroring));
    assert!(d.retry_attempt.unwrap() >= 1, "retried: {d:?}");
    let error = d.error.clone().unwrap();
    assert!(
        error.contains("leader epoch 5, above the source leader epoch 0")
            && error.contains("stale metadata"),
        "{error}"
    );
    assert_eq!(log(&b, "t").log_end_offset(), 0, "nothing appended");
}

/// A power cut at every storage operation of ULE_RECOVERY (the transitions, the truncation, what
/// follows): after recovery the partition converges with the source, byte for byte.
#[test]
fn a_power_cut_anywhere_in_ule_recovery_still_converges() {
    let option = [(
        MIRROR_SUPPORT_UNCLEAN_LEADER_ELECTION.to_owned(),
        "true".to_owned(),
    )];
    let mut crashed_runs = 0;
    for k in 1.. {
        let env = Env::new();
        let sim = Arc::new(klog::log::io::SimStorage::new(k));
        let a = env.cluster("a");
        a.create_topic("t", 1, None, &[]).unwrap();
        a.bump_leader_epoch("t", 0, 1).unwrap();
        for _ in 0..10 {
            a.produce("t", 0, &mut plain(1, "e1")).unwrap();
        }
        let b = env.cluster_on(sim.clone(), "b");
        b.create_mirror_with_configs("m", a.root().to_str().unwrap(), &option)
            .unwrap();
        b.connect_source("m", Arc::new(a.as_source()));
        all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
        b.run_until_idle(100);
        b.checkpoint().unwrap();
        unclean_election(&a);
        let start = sim.ops();
        sim.power_off_at(start + k);
        b.run_until_idle(100);
        let finished = sim.ops() < start + k;
        drop(b);
        sim.crash(true);
        sim.clear_faults();
        let b = env.reopen(sim.clone(), "b");
        b.connect_source("m", Arc::new(a.as_source()));
        let r = b.run_until_idle(100);
        assert!(r.errors.is_empty(), "k={k}: {:?}", r.errors);
        assert_eq!(state_of(&b, "t", 0), Some(MirrorState::Mirroring), "k={k}");
        assert_eq!(batches(&log(&b, "t")), batches(&log(&a, "t")), "k={k}");
        assert_epoch_above(&b, a.leader_epoch("t", 0).unwrap(), &format!("k={k}"));
        if finished {
            break;
        }
        crashed_runs += 1;
    }
    assert!(crashed_runs >= 3, "only {crashed_runs} runs crashed");
}

/// A failback's PREPARING cuts the old primary's stray write by aligning with the new primary (not
/// taken for an unclean election), and a power cut at every storage operation of it still ends with
/// the old primary's log equal to the new one's, MIRRORING.
#[test]
fn a_failback_aligns_in_preparing_across_a_power_cut_at_every_storage_operation() {
    let mut crashed_runs = 0;
    for k in 1.. {
        let env = Env::new();
        let sim = Arc::new(klog::log::io::SimStorage::new(k));
        let a = env.cluster_on(sim.clone(), "a");
        a.create_topic("t", 1, None, &[]).unwrap();
        a.produce("t", 0, &mut plain(3, "a0")).unwrap();
        let b = env.cluster("b");
        link(&b, "m", &a);
        all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
        b.run_until_idle(100);
        all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
        b.run_until_idle(100);
        b.produce("t", 0, &mut plain(1, "b-primary")).unwrap();
        // The old primary keeps taking writes in its own epoch, the LME's.
        a.produce("t", 0, &mut plain(2, "a-stray")).unwrap();
        link(&a, "back", &b);
        all_ok(a.add_topics("back", &topics(&["t"])).unwrap());
        a.checkpoint().unwrap();
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
        assert_eq!(state_of(&a, "t", 0), Some(MirrorState::Mirroring), "k={k}");
        assert_eq!(batches(&log(&a, "t")), batches(&log(&b, "t")), "k={k}");
        if finished {
            break;
        }
        crashed_runs += 1;
    }
    assert!(crashed_runs >= 3, "only {crashed_runs} runs crashed");
}
