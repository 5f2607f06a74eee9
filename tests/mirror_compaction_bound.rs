//! klog's own compacted internal topics (issue #27, item 5): `__mirror_state` and `__consumer_offsets`
//! are created compacted, as Kafka creates its coordinators' topics, so only the cleaner ever removes
//! their superseded records and neither time nor size retention removes a live one; the node's
//! background cleaner (a step of `tick`, on the node's clock) keeps them bounded over months of a
//! manual clock, whatever the run's length.

#[path = "mirror_support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use klog::log::coordinator::{partition_for_group, CONSUMER_OFFSETS_TOPIC};
use klog::log::io::{SimStorage, StdStorage};
use klog::mirror::{MirrorSettings, MirrorState};
use support::*;

#[test]
fn the_internal_topics_are_compacted_as_kafka_creates_them() {
    let env = Env::new();
    let a = env.cluster("a");
    a.create_topic("t", 1, None, &[]).unwrap();
    a.produce("t", 0, &mut plain(3, "t")).unwrap();
    a.commit_offset("g", "t", 0, 2).unwrap();
    let p = partition_for_group("g", 50) as i32;
    let check = |c: &klog::mirror::Cluster| {
        for (topic, partition) in [("__mirror_state", 0), (CONSUMER_OFFSETS_TOPIC, p)] {
            let config = c.log(topic, partition).unwrap().config().clone();
            assert!(
                config.cleanup_policy.compact && !config.cleanup_policy.delete,
                "{topic}: {:?}",
                config.cleanup_policy
            );
            // Kafka's `offsets.topic.segment.bytes` default, for both coordinator-state topics.
            assert_eq!(config.segment_bytes, 104_857_600, "{topic}");
        }
        // A plain topic keeps Kafka's default policy.
        assert!(c.log("t", 0).unwrap().config().cleanup_policy.delete);
    };
    check(&a);
    a.close().unwrap();
    drop(a);
    // Reopened, the partitions found on disk get the same configs.
    let a = env.reopen(Arc::new(StdStorage), "a");
    check(&a);
    assert_eq!(a.committed_offsets().unwrap().len(), 1);
}

/// One step of the simulated run: an hour of the node's clock (the cleaner checks every 15 s, so each
/// tick of a step may run one pass).
const STEP_MS: i64 = 3_600_000;
/// Offsets each group commits per step (the last one wins).
const COMMITS_PER_STEP: i64 = 10;
/// The mirror topic's partitions: their states are the `__mirror_state` keys.
const MIRROR_PARTITIONS: i32 = 4;
/// `segment.ms`'s default: the internal topics' active segments roll weekly (their 100 MiB
/// `segment.bytes` is never reached here).
const WEEK_MS: i64 = 7 * 86_400_000;
const GROUPS: [&str; 3] = ["billing", "audit", "search"];

/// What a run saw: the largest size of each internal topic after any step, its size at the end of
/// the first week (one `segment.ms` of writes, before anything could be cleaned), the bytes written,
/// the passes that replaced segments, and what a restart reads back.
#[derive(Debug)]
struct Run {
    max_offsets_bytes: u64,
    max_state_bytes: u64,
    week_offsets_bytes: u64,
    week_state_bytes: u64,
    commits: u64,
    passes: u64,
}

fn topic_bytes(c: &klog::mirror::Cluster, topic: &str) -> u64 {
    (0..50)
        .filter_map(|p| c.log(topic, p))
        .map(|l| l.size_in_bytes())
        .sum()
}

/// A mirror `m` of topic `t` whose partitions are paused and resumed at every step (state updates on
/// four keys), three groups committing offsets of a local topic ten times each at every step (three
/// keys), for `weeks` weeks of the node's clock. Then closed, reopened, and read back.
fn run(weeks: i64) -> Run {
    let env = Env::new();
    let storage: Arc<dyn klog::log::io::Storage> = Arc::new(SimStorage::new(7));
    let a = env.cluster_on(Arc::clone(&storage), "a");
    a.create_topic("t", MIRROR_PARTITIONS, None, &[]).unwrap();
    for p in 0..MIRROR_PARTITIONS {
        a.produce("t", p, &mut plain(5, "t")).unwrap();
    }
    // The metadata sync (configs, ACLs) is not what this test is about: once a day is enough.
    let settings = MirrorSettings {
        metadata_refresh_ms: 86_400_000,
        ..MirrorSettings::default()
    };
    let b = env.cluster_on(Arc::clone(&storage), "b");
    let b = Arc::new(Arc::try_unwrap(b).unwrap().with_settings(settings));
    b.create_topic("local", 1, None, &[]).unwrap();
    b.produce("local", 0, &mut plain(100, "l")).unwrap();
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    b.run_until_idle(20);
    let steps = weeks * WEEK_MS / STEP_MS;
    let mut out = Run {
        max_offsets_bytes: 0,
        max_state_bytes: 0,
        week_offsets_bytes: 0,
        week_state_bytes: 0,
        commits: 0,
        passes: 0,
    };
    let mut paused = false;
    for step in 0..steps {
        env.clock.advance(STEP_MS);
        for i in 0..COMMITS_PER_STEP {
            for (g, group) in GROUPS.iter().enumerate() {
                b.commit_offset(group, "local", 0, (step + i + g as i64) % 100)
                    .unwrap();
                out.commits += 1;
            }
        }
        let changed = if paused {
            b.resume_topics("m", &topics(&["t"])).unwrap()
        } else {
            b.pause_topics("m", &topics(&["t"])).unwrap()
        };
        all_ok(changed);
        paused = !paused;
        for _ in 0..2 {
            let r = b.tick();
            assert!(r.errors.is_empty(), "step {step}: {:?}", r.errors);
            out.passes += r.cleaned.iter().filter(|c| c.cleaned).count() as u64;
        }
        let offsets = topic_bytes(&b, CONSUMER_OFFSETS_TOPIC);
        let state = topic_bytes(&b, "__mirror_state");
        if (step + 1) * STEP_MS == WEEK_MS - STEP_MS {
            (out.week_offsets_bytes, out.week_state_bytes) = (offsets, state);
        }
        out.max_offsets_bytes = out.max_offsets_bytes.max(offsets);
        out.max_state_bytes = out.max_state_bytes.max(state);
    }
    // The latest of everything survives the passes and a restart.
    let last = steps - 1;
    let expected: BTreeMap<String, i64> = GROUPS
        .iter()
        .enumerate()
        .map(|(g, group)| {
            let offset = (last + COMMITS_PER_STEP - 1 + g as i64) % 100;
            (group.to_string(), offset)
        })
        .collect();
    let states_before: Vec<_> = (0..MIRROR_PARTITIONS)
        .map(|p| state_of(&b, "t", p))
        .collect();
    b.close().unwrap();
    drop(b);
    let b = env.reopen(Arc::clone(&storage), "b");
    let committed: BTreeMap<String, i64> = b
        .committed_offsets()
        .unwrap()
        .into_iter()
        .map(|((g, _, _), v)| (g, v.offset))
        .collect();
    assert_eq!(committed, expected, "after {weeks} weeks");
    let states: Vec<_> = (0..MIRROR_PARTITIONS)
        .map(|p| state_of(&b, "t", p))
        .collect();
    assert_eq!(states, states_before);
    let want = if paused {
        MirrorState::Paused
    } else {
        MirrorState::Mirroring
    };
    assert!(states.iter().all(|s| *s == Some(want)), "{states:?}");
    b.close().unwrap();
    out
}

/// Months of offset commits and mirror state updates on a few keys keep `__consumer_offsets` and
/// `__mirror_state` below a bound that does not grow with the run: the bound is two weeks of writes
/// (the active segment, which rolls weekly and is never cleaned, and the segment sealed at the last
/// roll, until the cleaner reaches it) plus 64 KiB for the cleaned segments of the live keys. A run 4
/// times as long stays within the same bound, though it writes 4 times as much.
#[test]
fn months_of_commits_and_state_updates_stay_within_a_bound_independent_of_duration() {
    let short = run(4);
    let long = run(16);
    eprintln!("4 weeks: {short:?}\n16 weeks: {long:?}");
    for r in [&short, &long] {
        assert!(r.passes > 0, "{r:?}");
    }
    // The week's volume is the workload's, the same in both runs: the bound is derived once.
    assert_eq!(short.week_offsets_bytes, long.week_offsets_bytes);
    let slack = 64 << 10;
    let offsets_bound = 2 * short.week_offsets_bytes + slack;
    let state_bound = 2 * short.week_state_bytes + slack;
    for r in [&short, &long] {
        assert!(
            r.max_offsets_bytes <= offsets_bound,
            "__consumer_offsets: {r:?}, bound {offsets_bound}"
        );
        assert!(
            r.max_state_bytes <= state_bound,
            "__mirror_state: {r:?}, bound {state_bound}"
        );
    }
    // The bound is far below what the long run wrote (about a week's volume per week).
    assert!(16 * long.week_offsets_bytes > 6 * offsets_bound, "{long:?}");
    assert!(16 * long.week_state_bytes > 6 * state_bound, "{long:?}");
    assert_eq!(long.commits, 4 * short.commits);
}

/// A compacted topic mirrored into the node keeps the source's batches byte for byte while it is
/// mirrored (the cleaner leaves it alone); once failed over (STOPPED) it is the node's, and the
/// background cleaner compacts it.
#[test]
fn a_mirrored_compacted_topic_is_cleaned_only_once_it_is_stopped() {
    let env = Env::new();
    let a = env.cluster("a");
    let compact = [
        ("cleanup.policy".to_owned(), "compact".to_owned()),
        ("segment.bytes".to_owned(), "1024".to_owned()),
    ];
    a.create_topic("t", 1, None, &compact).unwrap();
    for _ in 0..12 {
        a.produce("t", 0, &mut plain(3, "same")).unwrap();
    }
    let b = env.cluster("b");
    link(&b, "m", &a);
    all_ok(b.add_topics("m", &topics(&["t"])).unwrap());
    converge(&b, "mirroring", |b| {
        state_of(b, "t", 0) == Some(MirrorState::Mirroring)
            && log(b, "t").log_end_offset() == log(&a, "t").log_end_offset()
    });
    assert!(log(&b, "t").config().cleanup_policy.compact);
    for _ in 0..5 {
        env.clock.advance(20_000);
        b.tick();
    }
    assert_eq!(
        batches(&log(&b, "t")),
        batches(&log(&a, "t")),
        "mirrored bytes kept"
    );
    let before = log(&b, "t").size_in_bytes();
    all_ok(b.remove_topics("m", &topics(&["t"])).unwrap());
    converge(&b, "stopped", |b| {
        state_of(b, "t", 0) == Some(MirrorState::Stopped)
    });
    // The failover's barrier went into the active segment; roll so the mirrored data is cleanable.
    log(&b, "t").roll().unwrap();
    let mut cleaned = false;
    for _ in 0..5 {
        env.clock.advance(20_000);
        cleaned |= b
            .tick()
            .cleaned
            .iter()
            .any(|c| c.topic == "t" && c.cleaned && c.error.is_none());
    }
    assert!(cleaned, "the stopped topic was cleaned");
    assert!(
        log(&b, "t").size_in_bytes() < before / 4,
        "{} of {before}",
        log(&b, "t").size_in_bytes()
    );
}
