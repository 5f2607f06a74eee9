//! Mirroring from a real three-broker Kafka 4.4 cluster (KRaft, three combined broker+controller
//! nodes) over `kafka://`: the failures a single broker never shows.
//!
//! - Partitions led by different brokers: the fetcher sends each partition's fetch to the leader
//!   Metadata names (a follower refuses a consumer's fetch), and every partition converges byte for
//!   byte to its leader's `.log` files.
//! - A leader killed mid-mirror (SIGKILL, the partition re-led by its follower at a new leader epoch)
//!   and a leader moved by a clean shutdown: the fetcher finds the new leader and follows it, fenced at
//!   its old epoch and told the new one.
//! - A real diverging epoch: a topic with `unclean.leader.election.enable`, its follower stopped,
//!   `acks=1` records accepted by the leader alone (klog mirrors them), the leader killed, the stale
//!   replica elected uncleanly, more records written. A klog mirror with
//!   `mirror.support.unclean.leader.election=true` goes through ULE_RECOVERY: it truncates where Kafka's
//!   own follower (the old leader, restarted) truncates, and ends byte for byte equal to the new
//!   leader's `.log`; a second klog cluster mirroring the same partition without the option fails it,
//!   not retried, and cuts nothing.
//! - Through every election klog's leader epoch stays above the source's (the reference's epoch rule):
//!   no mirrored batch above it, and the barrier of the failover above every epoch the source used.
//! - Then failover (`remove`): LME, barrier at klog's epoch and producers, as `kafka_mirror.rs` checks
//!   them.
//!
//! One cluster for the file, one test, phases in order on different topics (each JVM start costs
//! seconds). Skips with one line without Java, unless `KLOG_REQUIRE_KAFKA=1` (CI), where it fails.

mod common;
#[path = "mirror_support/mod.rs"]
mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::kafka::{kafka_available, workload, KraftCluster};
use common::scratch_dir;
use klog::log::format::{AnyBatch, Batches, ControlRecordType};
use klog::log::partition_log::PartitionLog;
use klog::mirror::manager::LEADER_EPOCH_BUMP_THRESHOLD;
use klog::mirror::metadata::MIRROR_SUPPORT_UNCLEAN_LEADER_ELECTION;
use klog::mirror::{MirrorSettings, MirrorState, TickReport};
use support::kafka::KafkaMirror as Mirror;
use support::{all_ok, batch, batches, kafka_batches, kafka_end, state_of, topics};

/// Three partitions, each led by a different broker (its first replica), each with one follower.
const SPREAD: &str = "spread";
const SPREAD_ASSIGNMENT: &str = "1,2/2,3/3,1";
/// One partition led by node 3 with node 2 as its only follower; unclean elections allowed.
const DIVERGE: &str = "diverge";
const OLD_LEADER: i32 = 3;
const STALE_REPLICA: i32 = 2;
/// No wait is longer than this (a hang guard, not a timing assertion).
const CONVERGE: Duration = Duration::from_secs(120);

/// (epoch, first offset) of each run of batches in a broker's files.
fn kafka_epochs(partition_dir: &Path) -> Vec<(i32, i64)> {
    let mut out: Vec<(i32, i64)> = Vec::new();
    for b in kafka_batches(partition_dir) {
        if out.last().is_none_or(|&(epoch, _)| epoch != b.epoch) {
            out.push((b.epoch, b.base_offset));
        }
    }
    out
}

fn klog_epochs(local: &PartitionLog) -> Vec<(i32, i64)> {
    local
        .leader_epochs()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect()
}

/// klog's partition holds exactly the broker's batches, from offset 0 to the broker's end.
fn assert_same_log(local: &PartitionLog, partition_dir: &Path, what: &str) {
    let ours = batches(local);
    let theirs = kafka_batches(partition_dir);
    assert_eq!(local.log_start_offset(), 0, "{what}");
    assert_eq!(
        ours.len(),
        theirs.len(),
        "{what}: klog holds {} batches to {}, {} holds {} to {}",
        ours.len(),
        local.log_end_offset(),
        partition_dir.display(),
        theirs.len(),
        kafka_end(partition_dir)
    );
    for (o, t) in ours.iter().zip(&theirs) {
        assert_eq!(
            (o.base_offset, o.last_offset, o.epoch),
            (t.base_offset, t.last_offset, t.epoch),
            "{what}"
        );
        assert!(
            o.bytes == t.bytes,
            "{what}: batch at {} differs",
            o.base_offset
        );
    }
    assert_eq!(
        klog_epochs(local),
        kafka_epochs(partition_dir),
        "{what}: epochs"
    );
}

/// A partition as the Admin client describes it.
#[derive(Debug)]
struct PartitionInfo {
    leader: i32,
    isr: Vec<i32>,
}

fn describe(bootstrap: &str, topic: &str) -> Vec<PartitionInfo> {
    workload(&["describe-topic", bootstrap, topic])
        .iter()
        .map(|p| PartitionInfo {
            leader: p["leader"].as_i64().unwrap() as i32,
            isr: p["isr"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i.as_i64().unwrap() as i32)
                .collect(),
        })
        .collect()
}

/// Polls Admin until `partition` of `topic` satisfies `ok`; returns what it saw last.
fn wait_for(
    bootstrap: &str,
    topic: &str,
    partition: usize,
    ok: impl Fn(&PartitionInfo) -> bool,
) -> PartitionInfo {
    let deadline = Instant::now() + CONVERGE;
    loop {
        let mut all = describe(bootstrap, topic);
        if ok(&all[partition]) {
            return all.swap_remove(partition);
        }
        assert!(
            Instant::now() < deadline,
            "{topic}-{partition} never got there: {:?}",
            all[partition]
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `send BOOTSTRAP TOPIC PARTITION COUNT ACKS`: the offsets written.
fn send(bootstrap: &str, topic: &str, partition: i32, count: usize, acks: &str) -> Vec<i64> {
    workload(&[
        "send",
        bootstrap,
        topic,
        &partition.to_string(),
        &count.to_string(),
        acks,
    ])
    .iter()
    .map(|r| r["offset"].as_i64().unwrap())
    .collect()
}

/// What these tests ask of the shared [`Mirror`] beyond its ticks.
trait MirrorExt {
    fn log(&self, topic: &str, partition: i32) -> Arc<PartitionLog>;
    /// Ticks until every `(topic, partition, end)` is MIRRORING at `end`; the ticks' reports summed.
    fn converge(&self, targets: &[(&str, i32, i64)]) -> TickReport;
}

impl MirrorExt for Mirror {
    fn log(&self, topic: &str, partition: i32) -> Arc<PartitionLog> {
        self.cluster.log(topic, partition).unwrap()
    }

    fn converge(&self, targets: &[(&str, i32, i64)]) -> TickReport {
        let deadline = Instant::now() + CONVERGE;
        let mut all = TickReport::default();
        loop {
            let r = self.tick();
            all.batches_appended += r.batches_appended;
            all.truncations += r.truncations;
            all.epoch_bumps += r.epoch_bumps;
            all.errors.extend(r.errors);
            all.transitions.extend(r.transitions);
            let behind: Vec<_> = targets
                .iter()
                .filter(|&&(t, p, end)| {
                    self.log(t, p).log_end_offset() != end
                        || state_of(&self.cluster, t, p) != Some(MirrorState::Mirroring)
                })
                .map(|&(t, p, end)| {
                    (
                        format!("{t}-{p}"),
                        end,
                        self.log(t, p).log_end_offset(),
                        state_of(&self.cluster, t, p),
                    )
                })
                .collect();
            if behind.is_empty() {
                return all;
            }
            assert!(
                Instant::now() < deadline,
                "no convergence (partition, end, at, state): {behind:?}; errors {:?}",
                all.errors
            );
        }
    }
}

/// klog's leader epoch of `topic`-`p` is above the epoch of every batch in the source's `partition_dir`
/// (by at least the threshold, as the epoch rule keeps it), and no batch of klog's is above it.
fn assert_epoch_above_source(m: &Mirror, topic: &str, p: i32, partition_dir: &Path, what: &str) {
    let local = m.cluster.leader_epoch(topic, p).unwrap();
    let source = kafka_epochs(partition_dir).last().unwrap().0;
    assert!(
        local >= source + LEADER_EPOCH_BUMP_THRESHOLD,
        "{what}: klog's epoch {local}, the source's {source}"
    );
    for b in batches(&m.log(topic, p)) {
        assert!(
            b.epoch <= local,
            "{what}: a batch at epoch {} > {local}",
            b.epoch
        );
    }
}

/// A klog cluster at `root` mirroring through recorded Kafka sources: small fetches (many round trips,
/// responses that end in a partial batch); a leader move takes seconds, so idle ticks wait 250 ms.
fn mirror(root: &Path) -> Mirror {
    let settings = MirrorSettings {
        fetch_max_bytes: 16 << 10,
        ..MirrorSettings::default()
    };
    Mirror::new(root, false, settings, Duration::from_millis(250))
}

#[test]
fn three_brokers_leaders_move_and_an_unclean_election_diverges() {
    if !kafka_available() {
        return;
    }
    let started = Instant::now();
    let phase = |name: &str| eprintln!("{name}: {:?} since start", started.elapsed());
    let root = scratch_dir("kafka-multi-broker");
    let mut kafka = KraftCluster::format(&root.join("kafka"), 3);
    kafka.start_all();
    phase("three nodes started");
    let bootstrap = kafka.bootstrap();
    workload(&[
        "create-topic-assigned",
        &bootstrap,
        SPREAD,
        SPREAD_ASSIGNMENT,
        "internal.segment.bytes=16384",
    ]);
    let assignment = format!("{OLD_LEADER},{STALE_REPLICA}");
    workload(&[
        "create-topic-assigned",
        &bootstrap,
        DIVERGE,
        &assignment,
        "unclean.leader.election.enable=true",
        "min.insync.replicas=1",
        "internal.segment.bytes=16384",
    ]);
    let leaders: Vec<i32> = describe(&bootstrap, SPREAD)
        .iter()
        .map(|p| p.leader)
        .collect();
    assert_eq!(
        leaders,
        [1, 2, 3],
        "each partition led by its first replica"
    );

    // Phase 1: records in every partition (idempotent, acks=all), then a klog cluster mirrors both
    // topics from the three brokers.
    std::thread::scope(|s| {
        for p in 0..3 {
            let bootstrap = &bootstrap;
            s.spawn(move || send(bootstrap, SPREAD, p, 150, "all"));
        }
        s.spawn(|| send(&bootstrap, DIVERGE, 0, 80, "all"));
    });
    let m = mirror(&root.join("klog"));
    let option = [(
        MIRROR_SUPPORT_UNCLEAN_LEADER_ELECTION.to_owned(),
        "true".to_owned(),
    )];
    m.cluster
        .create_mirror_with_configs("m", &format!("kafka://{bootstrap}"), &option)
        .unwrap();
    // A second klog cluster mirrors diverge without the option (the default).
    let strict = mirror(&root.join("klog-strict"));
    strict
        .cluster
        .create_mirror("m", &format!("kafka://{bootstrap}"))
        .unwrap();
    all_ok(strict.cluster.add_topics("m", &topics(&[DIVERGE])).unwrap());
    all_ok(
        m.cluster
            .add_topics("m", &topics(&[SPREAD, DIVERGE]))
            .unwrap(),
    );
    assert_eq!(m.cluster.topic(SPREAD).unwrap().partitions, 3);
    // Where each node keeps a partition (a path: the nodes stop and start below).
    let data: Vec<std::path::PathBuf> = kafka.nodes.iter().map(|n| n.data.clone()).collect();
    let dir = |node: i32, topic: &str, p: i32| data[node as usize - 1].join(format!("{topic}-{p}"));
    let targets: Vec<(&str, i32, i64)> = (0..3)
        .map(|p| (SPREAD, p, kafka_end(&dir(p + 1, SPREAD, p))))
        .chain([(DIVERGE, 0, kafka_end(&dir(OLD_LEADER, DIVERGE, 0)))])
        .collect();
    assert!(targets.iter().all(|t| t.2 >= 150 || t.0 == DIVERGE));
    let first = m.converge(&targets);
    assert!(
        first.epoch_bumps > 0,
        "klog's epochs went above the source's"
    );
    for p in 0..3 {
        assert_same_log(
            &m.log(SPREAD, p),
            &dir(p + 1, SPREAD, p),
            "spread, led by its broker",
        );
    }
    assert_same_log(&m.log(DIVERGE, 0), &dir(OLD_LEADER, DIVERGE, 0), "diverge");
    phase("phase 1 (three leaders)");

    // Phase 2: spread-0's leader (node 1) is killed while a producer writes to it and klog mirrors
    // it; the controller fences node 1 and node 2 leads at a new epoch.
    let epoch_before = m.log(SPREAD, 0).latest_epoch().unwrap();
    let end_before = m.log(SPREAD, 0).log_end_offset();
    let writer = {
        let bootstrap = bootstrap.clone();
        std::thread::spawn(move || {
            workload(&["send", &bootstrap, SPREAD, "0", "300", "all", "100"]).len()
        })
    };
    let mut errors = Vec::new();
    let deadline = Instant::now() + CONVERGE;
    while m.log(SPREAD, 0).log_end_offset() < end_before + 40 {
        errors.extend(m.tick().errors);
        assert!(Instant::now() < deadline, "klog mirrored nothing new");
    }
    kafka.kill(1);
    while !writer.is_finished() {
        errors.extend(m.tick().errors);
    }
    assert_eq!(writer.join().unwrap(), 300, "every record acknowledged");
    wait_for(&bootstrap, SPREAD, 0, |p| p.leader == 2);
    let report = m.converge(&[(SPREAD, 0, kafka_end(&dir(2, SPREAD, 0)))]);
    errors.extend(report.errors);
    assert_same_log(
        &m.log(SPREAD, 0),
        &dir(2, SPREAD, 0),
        "spread-0 after its leader died",
    );
    let epoch_after = m.log(SPREAD, 0).latest_epoch().unwrap();
    assert!(
        epoch_after > epoch_before,
        "{epoch_before} -> {epoch_after}"
    );
    assert_epoch_above_source(
        &m,
        SPREAD,
        0,
        &dir(2, SPREAD, 0),
        "spread-0 after a new leader",
    );
    eprintln!(
        "phase 2: {} failed fetches while node 1 was dead or not yet replaced",
        errors.len()
    );
    let node1 = kafka.node(1).bootstrap(); // an owned String: node 1 restarts below
    assert!(
        errors
            .iter()
            .any(|(t, _, e)| t == SPREAD && e.contains(&node1)),
        "a fetch failed naming the dead leader {node1}: {errors:?}"
    );
    let fenced = m.fenced();
    assert!(
        fenced
            .iter()
            .any(|&(sent, carried)| sent < carried && carried == epoch_after),
        "the new leader fenced our old epoch and named its own, {epoch_after}: {fenced:?}"
    );
    kafka.start(1);
    phase("phase 2 (leader killed)");

    // Phase 3: leaders that move while their brokers stay healthy are followed without FAILED (no
    // FAILED record, no retry backoff): the fetcher finds the new leader at once, as Kafka's own
    // fetchers do. First a preferred election moves spread-0 back to node 1 while node 2 runs (node 2
    // fences our old epoch and names the new leader), then a clean shutdown of node 2 moves spread-1
    // to node 3 (the cached leader refuses connections; Metadata from the others names the new one).
    // diverge's follower is node 2 too: it drops out of the ISR.
    wait_for(&bootstrap, SPREAD, 0, |p| p.isr.len() == 2);
    let elected = workload(&["elect-leaders", &bootstrap, SPREAD, "0", "preferred"]);
    assert_eq!(elected[0]["error"], serde_json::Value::Null, "{elected:?}");
    wait_for(&bootstrap, SPREAD, 0, |p| p.leader == 1);
    send(&bootstrap, SPREAD, 0, 30, "all");
    let report = m.converge(&[(SPREAD, 0, kafka_end(&dir(1, SPREAD, 0)))]);
    assert_no_failed(&report, "spread-0 moved by a preferred election");
    assert_same_log(
        &m.log(SPREAD, 0),
        &dir(1, SPREAD, 0),
        "spread-0 moved back to node 1",
    );
    assert_epoch_above_source(
        &m,
        SPREAD,
        0,
        &dir(1, SPREAD, 0),
        "spread-0 after two elections",
    );
    wait_for(&bootstrap, SPREAD, 1, |p| p.isr.len() == 2);
    kafka.stop(STALE_REPLICA);
    let isr = wait_for(&bootstrap, DIVERGE, 0, |p| p.isr == [OLD_LEADER]);
    assert_eq!(isr.leader, OLD_LEADER);
    assert_eq!(describe(&bootstrap, SPREAD)[1].leader, 3);
    send(&bootstrap, SPREAD, 1, 60, "all");
    let report = m.converge(&[(SPREAD, 1, kafka_end(&dir(3, SPREAD, 1)))]);
    assert_no_failed(&report, "spread-1 moved by a clean shutdown");
    assert_same_log(
        &m.log(SPREAD, 1),
        &dir(3, SPREAD, 1),
        "spread-1 moved to node 3",
    );
    phase("phase 3 (clean leader moves)");

    // Phase 4: the diverging epoch. The leader takes acks=1 records its stopped follower never sees;
    // klog mirrors them (the ISR is the leader alone, so its high watermark covers them).
    let stale = dir(STALE_REPLICA, DIVERGE, 0);
    let kept = kafka_end(&stale);
    let unreplicated = send(&bootstrap, DIVERGE, 0, 60, "1");
    assert_eq!(
        unreplicated[0], kept,
        "the leader's next offset is its follower's end"
    );
    let diverged_end = kafka_end(&dir(OLD_LEADER, DIVERGE, 0));
    assert!(diverged_end > kept);
    // spread is paused while its partitions lose their leaders below (no fetch, no failures).
    all_ok(m.cluster.pause_topics("m", &topics(&[SPREAD])).unwrap());
    m.converge(&[(DIVERGE, 0, diverged_end)]);
    strict.converge(&[(DIVERGE, 0, diverged_end)]);
    assert_same_log(
        &m.log(DIVERGE, 0),
        &dir(OLD_LEADER, DIVERGE, 0),
        "diverge before",
    );
    assert_same_log(
        &strict.log(DIVERGE, 0),
        &dir(OLD_LEADER, DIVERGE, 0),
        "diverge before, without the option",
    );
    let old_epoch = m.log(DIVERGE, 0).latest_epoch().unwrap();

    // The leader crashes; the stale replica comes back and is elected uncleanly (by the controller,
    // as the topic allows, or by an explicit unclean election if it has not happened yet).
    kafka.kill(OLD_LEADER);
    kafka.start(STALE_REPLICA);
    let deadline = Instant::now() + CONVERGE;
    loop {
        let p = &describe(&bootstrap, DIVERGE)[0];
        if p.leader == STALE_REPLICA {
            break;
        }
        let elected = workload(&["elect-leaders", &bootstrap, DIVERGE, "0", "unclean"]);
        eprintln!("diverge-0 {p:?}; unclean election: {:?}", elected[0]);
        assert!(Instant::now() < deadline, "no unclean election: {p:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let after = send(&bootstrap, DIVERGE, 0, 40, "all");
    assert_eq!(after[0], kept, "the new leader writes from its own end");
    let new_epochs = kafka_epochs(&stale);
    let new_epoch = new_epochs.last().unwrap().0;
    assert!(new_epoch > old_epoch, "{new_epochs:?}");
    assert_eq!(new_epochs.last().unwrap().1, kept, "{new_epochs:?}");

    // klog's next fetch (at its last epoch, from its end) meets the new leader: fenced, then told
    // its log diverges: the source truncated what it had served. Without the option: FAILED, not
    // retried, naming the partition, the offsets and the epochs, and nothing cut.
    // (A FAILED that is retried is the dead leader's: the fetcher goes on until the new one answers.)
    let deadline = Instant::now() + CONVERGE;
    while strict.cluster.describe()[0].retry_attempt != Some(-1) {
        let r = strict.tick();
        assert_eq!(r.truncations, 0, "{r:?}");
        assert!(Instant::now() < deadline, "never FAILED for good: {r:?}");
    }
    let d = &strict.cluster.describe()[0];
    assert_eq!(d.state, Some(MirrorState::Failed));
    assert_eq!(
        (d.retry_attempt, d.failed_state),
        (Some(-1), Some(MirrorState::Mirroring))
    );
    let error = d.error.clone().unwrap();
    for needle in [
        "diverge-0",
        "unclean leader election",
        &format!("ends at offset {kept}"),
        &format!("log end offset {diverged_end}"),
        MIRROR_SUPPORT_UNCLEAN_LEADER_ELECTION,
    ] {
        assert!(error.contains(needle), "{needle:?} not in {error:?}");
    }
    assert_eq!(strict.log(DIVERGE, 0).log_end_offset(), diverged_end);
    strict.cluster.close().unwrap();
    // With the option: ULE_RECOVERY truncates once, to where the new leader's history forks.
    let deadline = Instant::now() + CONVERGE;
    let mut errors = Vec::new();
    let mut seen = Vec::new();
    loop {
        let r = m.tick();
        errors.extend(r.errors);
        seen.extend(r.transitions.iter().map(|t| (t.2, t.3)));
        if r.truncations > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no truncation: {errors:?}");
    }
    assert!(
        seen.contains(&(MirrorState::Mirroring, MirrorState::UleRecovery)),
        "{seen:?}"
    );
    eprintln!("phase 4: failed fetches before the truncation: {errors:?}");
    assert_eq!(
        m.log(DIVERGE, 0).log_end_offset(),
        kept,
        "klog truncated to the end of epoch {old_epoch} at the new leader"
    );
    let new_end = kafka_end(&stale);
    m.converge(&[(DIVERGE, 0, new_end)]);
    assert_same_log(&m.log(DIVERGE, 0), &stale, "diverge at the new leader");
    assert_epoch_above_source(&m, DIVERGE, 0, &stale, "diverge after the unclean election");
    assert!(
        m.fenced()
            .iter()
            .any(|&(sent, carried)| sent < carried && carried == new_epoch),
        "{:?}",
        m.fenced()
    );

    // Kafka's own follower: the old leader restarts, truncates its unreplicated records and
    // follows. Its files then equal the new leader's, and klog's.
    kafka.start(OLD_LEADER);
    let old_copy = dir(OLD_LEADER, DIVERGE, 0);
    let deadline = Instant::now() + CONVERGE;
    while kafka_batches(&old_copy) != kafka_batches(&stale) {
        assert!(Instant::now() < deadline, "the old leader never caught up");
        std::thread::sleep(Duration::from_millis(500));
    }
    let truncated_at = follower_truncation(kafka.node(OLD_LEADER).log_file(), DIVERGE);
    assert_eq!(
        truncated_at,
        Some(kept),
        "Kafka's follower truncated where klog did"
    );
    assert_same_log(
        &m.log(DIVERGE, 0),
        &old_copy,
        "diverge against the old leader",
    );
    phase("phase 4 (unclean election)");

    // Phase 5: spread resumes against its current leaders, then failover of both topics.
    all_ok(m.cluster.resume_topics("m", &topics(&[SPREAD])).unwrap());
    let spread = describe(&bootstrap, SPREAD);
    let spread_targets: Vec<(&str, i32, i64)> = (0..3)
        .map(|p| {
            (
                SPREAD,
                p,
                kafka_end(&dir(spread[p as usize].leader, SPREAD, p)),
            )
        })
        .collect();
    m.converge(&spread_targets);
    failover(&m, &kafka, &bootstrap);
    phase("kafka_multi_broker");
}

/// The offset the node's replica of `topic`-0 was last truncated to, from its log4j output
/// (`UnifiedLog`'s "Truncating to offset N" for that partition).
fn follower_truncation(log_file: &Path, topic: &str) -> Option<i64> {
    let text = std::fs::read_to_string(log_file).unwrap_or_default();
    let partition = format!("partition={topic}-0,");
    text.lines()
        .rev()
        .filter(|l| l.contains(&partition))
        .filter_map(|l| l.split("Truncating to offset ").nth(1))
        .find_map(|rest| {
            rest.split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|n| n.parse().ok())
        })
}

/// No partition went FAILED in these ticks.
fn assert_no_failed(report: &TickReport, what: &str) {
    let failed: Vec<_> = report
        .transitions
        .iter()
        .filter(|t| t.3 == MirrorState::Failed)
        .collect();
    assert!(
        failed.is_empty(),
        "{what}: FAILED {failed:?}; errors {:?}",
        report.errors
    );
}

/// `remove` of both topics: STOPPING -> STOPPED for every partition, each with the LME of the
/// source's last batch, klog's epoch above every epoch the source used, the barrier at the end at that
/// epoch carrying the source's cluster id,
/// and producers cleared (a producer id the source used starts again at sequence 0).
fn failover(m: &Mirror, kafka: &KraftCluster, bootstrap: &str) {
    all_ok(
        m.cluster
            .remove_topics("m", &topics(&[SPREAD, DIVERGE]))
            .unwrap(),
    );
    let report = m.cluster.run_until_idle(40);
    assert!(report.errors.is_empty(), "{report:?}");
    let mut partitions: Vec<(&str, i32)> = (0..3).map(|p| (SPREAD, p)).collect();
    partitions.push((DIVERGE, 0));
    let descriptions = m.cluster.describe();
    let spread = describe(bootstrap, SPREAD);
    let diverge = describe(bootstrap, DIVERGE);
    for (topic, p) in partitions {
        let infos = if topic == SPREAD { &spread } else { &diverge };
        let leader = infos[p as usize].leader;
        let theirs = kafka_batches(&kafka.node(leader).partition_dir(topic, p));
        let d = descriptions
            .iter()
            .find(|d| d.topic == topic && d.partition == p)
            .unwrap();
        let what = format!("{topic}-{p}");
        assert_eq!(d.state, Some(MirrorState::Stopped), "{what}");
        let last = theirs.last().unwrap();
        assert_eq!(d.last_mirrored_epoch, Some(last.epoch), "{what}");
        let source_epoch = theirs.iter().map(|b| b.epoch).max().unwrap();
        assert!(
            d.leader_epoch >= source_epoch + LEADER_EPOCH_BUMP_THRESHOLD,
            "{what}: klog's epoch {} against the source's {source_epoch}",
            d.leader_epoch
        );
        assert_eq!(d.producers, 0, "{what}");
        let local = m.log(topic, p);
        let ours = batches(&local);
        let (barrier, before) = ours.split_last().unwrap();
        assert_eq!(
            before,
            &theirs[..],
            "{what}: Kafka's bytes up to the barrier"
        );
        assert_eq!(barrier.base_offset, last.last_offset + 1, "{what}");
        assert_eq!(
            barrier.epoch, d.leader_epoch,
            "{what}: the barrier at klog's epoch"
        );
        assert_eq!(
            support::control_type(barrier),
            Some(ControlRecordType::MirrorPidReset)
        );
        assert!(support::barrier_value_is_klogs(barrier));
        // A producer id the source used appends again from sequence 0 after the barrier.
        let source_producer = theirs
            .iter()
            .rev()
            .find(|b| b.producer_id >= 0 && !b.control);
        let Some(source_producer) = source_producer else {
            continue;
        };
        let Some(Ok(AnyBatch::V2(b))) = Batches::new(&source_producer.bytes).next() else {
            panic!("{what}: a batch of Kafka's does not parse")
        };
        let appended = m
            .cluster
            .produce(
                topic,
                p,
                &mut batch(b.producer_id(), b.producer_epoch(), 0, 2, false, "after"),
            )
            .unwrap();
        assert_eq!(appended.first_offset, barrier.base_offset + 1, "{what}");
    }
    m.cluster.close().unwrap();
}
