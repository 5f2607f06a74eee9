//! An abort-mode failover from a real three-broker Kafka 4.4 cluster, judged on a stock broker that
//! adopted klog's export (issue 25, item 1, on the three-broker harness).
//!
//! A topic with replication factor 3 and two partitions led by different brokers; three Java
//! transactional producers each commit a transaction and leave the next one open, two of them on
//! partition 0 and one on partition 1. klog mirrors the topic over `kafka://` in `--stop-mode abort`
//! (read_uncommitted: the open transactions too). While it mirrors, partition 0's leader shuts down
//! and its follower leads at a new epoch, and more records follow the open transactions. Then every
//! source broker is killed, klog fails over and `klog cluster export --kafka OUT` writes a log
//! directory. For each partition:
//! - OUT's batches are the source leader's byte for byte up to its log end, then exactly one ABORT
//!   per producer open on that partition, then one MIRROR_PID_RESET barrier, each at an epoch above
//!   every epoch the source used;
//! - a stock broker started on OUT (no format step) serves them: a Java read_committed consumer sees
//!   none of the open transactions' records, a read_uncommitted one sees every record at the offset
//!   the source assigned it.
//!
//! Skips with one line without Java, unless `KLOG_REQUIRE_KAFKA=1` (CI), where it fails.

mod common;
#[path = "mirror_support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::kafka::{kafka_available, workload, Cluster as KafkaCluster, KraftCluster};
use common::{klog_ok, scratch_dir};
use klog::log::format::ControlRecordType;
use klog::mirror::manager::LEADER_EPOCH_BUMP_THRESHOLD;
use klog::mirror::{MirrorSettings, MirrorState, StopMode};
use serde_json::Value;
use support::kafka::KafkaMirror;
use support::{all_ok, control_type, kafka_batches, kafka_end, state_of, topics};

const TOPIC: &str = "open-at-failover";
/// Partition 0 led by node 1, partition 1 by node 2; every node holds both.
const ASSIGNMENT: &str = "1,2,3/2,3,1";
/// Producer n of `open-transactions` writes to the n-th of these: two open on partition 0, one on 1.
const OPEN_ON: &str = "0,1,0";
/// No wait is longer than this (a hang guard, not a timing assertion).
const CONVERGE: Duration = Duration::from_secs(120);

/// The records of a `consume` run of one partition (its last line is `{"end_offset", "position"}`).
fn consume(bootstrap: &str, partition: i32, isolation: &str) -> Vec<Value> {
    let mut lines = workload(&[
        "consume",
        bootstrap,
        TOPIC,
        isolation,
        &partition.to_string(),
    ]);
    let last = lines.pop().expect("the end line");
    assert!(last.get("end_offset").is_some(), "{last}");
    lines
}

fn offset(r: &Value) -> i64 {
    r["offset"].as_i64().unwrap()
}

/// The leader of each partition of TOPIC, as the Admin client describes it.
fn leaders(bootstrap: &str) -> Vec<i32> {
    workload(&["describe-topic", bootstrap, TOPIC])
        .iter()
        .map(|p| p["leader"].as_i64().unwrap() as i32)
        .collect()
}

/// Ticks until every partition of TOPIC is MIRRORING at the end of its leader's files.
fn converge(m: &KafkaMirror, kafka: &KraftCluster, bootstrap: &str) {
    let leaders = leaders(bootstrap);
    let deadline = Instant::now() + CONVERGE;
    loop {
        let behind: Vec<(i32, i64, i64)> = leaders
            .iter()
            .enumerate()
            .map(|(p, &leader)| {
                let p = p as i32;
                let end = kafka_end(&kafka.node(leader).partition_dir(TOPIC, p));
                (p, end, m.cluster.log(TOPIC, p).unwrap().log_end_offset())
            })
            .filter(|&(p, end, at)| {
                end != at || state_of(&m.cluster, TOPIC, p) != Some(MirrorState::Mirroring)
            })
            .collect();
        if behind.is_empty() {
            return;
        }
        let r = m.tick();
        assert!(
            Instant::now() < deadline,
            "no convergence (partition, source end, klog end): {behind:?}; {r:?}"
        );
    }
}

#[test]
fn an_abort_mode_failover_from_three_brokers_is_served_by_an_adopting_broker() {
    if !kafka_available() {
        return;
    }
    let started = Instant::now();
    let phase = |name: &str| eprintln!("{name}: {:?} since start", started.elapsed());
    let root = scratch_dir("kafka-multi-broker-abort");
    let mut kafka = KraftCluster::format(&root.join("kafka"), 3);
    kafka.start_all();
    let bootstrap = kafka.bootstrap();
    workload(&["create-topic-assigned", &bootstrap, TOPIC, ASSIGNMENT]);
    assert_eq!(
        leaders(&bootstrap),
        [1, 2],
        "each partition led by its first replica"
    );
    for p in 0..2 {
        workload(&["send", &bootstrap, TOPIC, &p.to_string(), "20", "all"]);
    }
    let sent = workload(&["open-transactions", &bootstrap, TOPIC, "5", "3", OPEN_ON]);
    assert_eq!(sent.len(), 30);
    // Per partition, the offsets of the records whose transaction stays open.
    let mut open: BTreeMap<i32, BTreeSet<i64>> = BTreeMap::new();
    for r in sent.iter().filter(|r| r["committed"] == false) {
        open.entry(r["partition"].as_i64().unwrap() as i32)
            .or_default()
            .insert(offset(r));
    }
    assert_eq!(
        open.values().map(BTreeSet::len).collect::<Vec<_>>(),
        [10, 5]
    );
    phase("three nodes, transactions open");

    // klog mirrors in abort mode.
    let settings = MirrorSettings {
        fetch_max_bytes: 16 << 10,
        ..MirrorSettings::default()
    };
    let klog_root = root.join("klog");
    let m = KafkaMirror::new(&klog_root, false, settings, Duration::from_millis(250));
    m.cluster
        .create_mirror_with_stop_mode("m", &format!("kafka://{bootstrap}"), StopMode::Abort)
        .unwrap();
    all_ok(m.cluster.add_topics("m", &topics(&[TOPIC])).unwrap());
    converge(&m, &kafka, &bootstrap);

    // A leader election at the source while klog mirrors: partition 0's leader shuts down, its
    // follower leads at a higher epoch and takes records after the open transactions.
    kafka.stop(1);
    let deadline = Instant::now() + CONVERGE;
    while leaders(&bootstrap)[0] == 1 {
        assert!(Instant::now() < deadline, "partition 0 never moved");
        std::thread::sleep(Duration::from_millis(250));
    }
    for p in 0..2 {
        workload(&["send", &bootstrap, TOPIC, &p.to_string(), "10", "all"]);
    }
    converge(&m, &kafka, &bootstrap);
    let leaders = leaders(&bootstrap);
    assert_ne!(leaders[0], 1);
    // klog's epoch stays above the source's through the election (the reference's epoch rule).
    for (p, &leader) in leaders.iter().enumerate() {
        let theirs = kafka_batches(&kafka.node(leader).partition_dir(TOPIC, p as i32));
        let source_epoch = theirs.iter().map(|b| b.epoch).max().unwrap();
        let ours = m.cluster.leader_epoch(TOPIC, p as i32).unwrap();
        assert!(
            ours >= source_epoch + LEADER_EPOCH_BUMP_THRESHOLD,
            "partition {p}: klog's epoch {ours}, the source's {source_epoch}"
        );
    }
    phase("mirrored through an election");

    // What the source's consumers see and hold, then every source broker dies.
    let source_records: Vec<Vec<Value>> = (0..2)
        .map(|p| consume(&bootstrap, p, "read_uncommitted"))
        .collect();
    for (p, records) in source_records.iter().enumerate() {
        let seen: BTreeSet<i64> = records.iter().map(offset).collect();
        assert!(open[&(p as i32)].is_subset(&seen), "partition {p}");
    }
    for id in [2, 3] {
        kafka.kill(id);
    }
    let source: Vec<_> = (0..2)
        .map(|p| kafka_batches(&kafka.node(leaders[p]).partition_dir(TOPIC, p as i32)))
        .collect();
    let epoch_of = |p: usize| source[p].iter().map(|b| b.epoch).max().unwrap();
    assert!(epoch_of(0) > 0, "the election raised partition 0's epoch");

    // Failover, then the export.
    all_ok(m.cluster.remove_topics("m", &topics(&[TOPIC])).unwrap());
    let deadline = Instant::now() + CONVERGE;
    while (0..2).any(|p| state_of(&m.cluster, TOPIC, p) != Some(MirrorState::Stopped)) {
        let r = m.tick();
        assert!(Instant::now() < deadline, "no failover: {r:?}");
    }
    m.cluster.close().unwrap();
    drop(m);
    let out = root.join("out");
    klog_ok(&[
        "cluster",
        "export",
        klog_root.to_str().unwrap(),
        "--kafka",
        out.to_str().unwrap(),
    ]);
    phase("failed over and exported");

    // Byte for byte the source's batches, then one ABORT per open producer, then the barrier, above
    // every source epoch.
    for (p, theirs) in source.iter().enumerate() {
        let what = format!("{TOPIC}-{p}");
        let ours = kafka_batches(&out.join(&what));
        assert!(ours.len() > theirs.len(), "{what}: {} batches", ours.len());
        assert_eq!(
            ours[..theirs.len()],
            theirs[..],
            "{what}: the source's batches"
        );
        let own = &ours[theirs.len()..];
        let source_epoch = epoch_of(p);
        let open_producers: BTreeSet<i64> = theirs
            .iter()
            .filter(|b| open[&(p as i32)].contains(&b.base_offset))
            .map(|b| b.producer_id)
            .collect();
        let mut want = vec![Some(ControlRecordType::Abort); open_producers.len()];
        want.push(Some(ControlRecordType::MirrorPidReset));
        assert_eq!(
            own.iter().map(control_type).collect::<Vec<_>>(),
            want,
            "{what}: {own:?}"
        );
        let aborted: BTreeSet<i64> = own[..open_producers.len()]
            .iter()
            .map(|b| b.producer_id)
            .collect();
        assert_eq!(
            aborted, open_producers,
            "{what}: one ABORT per open producer"
        );
        assert!(
            own.iter().all(|b| b.epoch > source_epoch),
            "{what}: klog's batches at epochs {:?}, the source's up to {source_epoch}",
            own.iter().map(|b| b.epoch).collect::<Vec<_>>()
        );
        assert_eq!(
            own[0].base_offset,
            theirs.last().unwrap().last_offset + 1,
            "{what}"
        );
        eprintln!(
            "{what}: {} source batches to offset {}, epochs up to {source_epoch}; klog's {:?} at epochs {:?}",
            theirs.len(),
            own[0].base_offset,
            own.iter().map(control_type).collect::<Vec<_>>(),
            own.iter().map(|b| b.epoch).collect::<Vec<_>>()
        );
    }

    // A stock broker on OUT: read_committed sees none of the open transactions' records,
    // read_uncommitted every record at its source offset.
    let target = KafkaCluster::unformatted(&root.join("target"), &out, 1, "");
    let broker = target.start();
    for (p, all) in source_records.iter().enumerate() {
        let open = &open[&(p as i32)];
        let committed = consume(&broker.bootstrap, p as i32, "read_committed");
        let open_seen: Vec<i64> = committed
            .iter()
            .map(offset)
            .filter(|o| open.contains(o))
            .collect();
        assert!(
            open_seen.is_empty(),
            "partition {p}: read_committed saw {open_seen:?}"
        );
        let want: Vec<&Value> = all.iter().filter(|r| !open.contains(&offset(r))).collect();
        assert_eq!(
            committed.iter().collect::<Vec<_>>(),
            want,
            "partition {p}: read_committed"
        );
        assert_eq!(
            &consume(&broker.bootstrap, p as i32, "read_uncommitted"),
            all,
            "partition {p}: read_uncommitted, every record at its source offset"
        );
    }
    let errors = broker.error_lines_beyond_first_start();
    assert!(errors.is_empty(), "the broker logged errors: {errors:#?}");
    broker.stop();
    phase("kafka_multi_broker_abort");
}
