//! Disaster recovery with a cold standby, judged by real Kafka 4.4 (issue 26, build items 1 and 4; issue
//! 25's "a consumer group that read past the barrier resumes on an adopting broker in a second
//! session"): a source broker holds a three-partition topic with transactions on partition 0 (commits,
//! aborts, an epoch-bumping re-initialisation, one transaction left open), idempotent producers on every
//! partition, a leader election (a restart: every leader epoch rises) and a read_committed consumer
//! group that committed. Two klog standbys mirror it over `kafka://` (stop modes `truncate`, the
//! default, and `abort`), the source is killed, both fail over and `klog cluster export --kafka OUT`
//! writes a log directory from each. A stock broker starts on OUT with no format step, three times:
//! the `truncate` standby with `offsets.topic.num.partitions` 50 (klog's) and with 7 (every group's
//! records re-placed), the `abort` standby with 50. Each time:
//! - every partition's batches equal the source's byte for byte up to the barrier (`truncate`: below
//!   the LSO; `abort`: all of them, then the open transaction's ABORT), then the barrier;
//! - `kafka-dump-log` reads every file of OUT (the metadata snapshot with its decoder);
//! - the Java read_committed group resumes exactly at its mirrored offsets and reads exactly the
//!   committed records, commits; an idempotent producer writes, and a second session of the group
//!   resumes where the first left off and reads exactly the new records.
//!
//! Skips with one line without Java, unless `KLOG_REQUIRE_KAFKA=1` (CI), where it fails.

mod common;
#[path = "mirror_support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::kafka::{dump_log, kafka_available, workload, Cluster as KafkaCluster};
use common::{klog_ok, scratch_dir};
use klog::log::clock::SystemClock;
use klog::log::format::ControlRecordType;
use klog::log::io::StdStorage;
use klog::mirror::{Cluster, ClusterOptions, MirrorState, StopMode};
use serde_json::Value;
use support::{all_ok, control_type, converge, kafka_batches, state_of, topics};

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 3;
const GROUP: &str = "readers";
/// A record as the group-read workload prints it.
type Rec = (i64, i64, String, String);

fn rec(v: &Value) -> Rec {
    (
        v["partition"].as_i64().unwrap(),
        v["offset"].as_i64().unwrap(),
        v["key"].to_string(),
        v["value"].to_string(),
    )
}

/// A read_committed session of `group` over every partition: the records read and the positions
/// committed at its end.
fn group_read(
    bootstrap: &str,
    group: &str,
    max: usize,
    reset: &str,
) -> (Vec<Rec>, BTreeMap<i64, i64>) {
    let mut lines = workload(&[
        "group-read",
        bootstrap,
        TOPIC,
        group,
        &max.to_string(),
        reset,
    ]);
    let last = lines.pop().expect("the positions line");
    let positions = last["positions"]
        .as_object()
        .unwrap_or_else(|| panic!("{last}"))
        .iter()
        .map(|(p, o)| (p.parse().unwrap(), o.as_i64().unwrap()))
        .collect();
    (lines.iter().map(rec).collect(), positions)
}

fn partition_dir(root: &Path, p: i32) -> PathBuf {
    root.join(format!("{TOPIC}-{p}"))
}

/// Every file `kafka-dump-log` reads, in OUT's partition directories and its metadata log.
fn dumpable_files(out: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in std::fs::read_dir(out).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            let ext = f.extension().and_then(|e| e.to_str()).unwrap_or("");
            if [
                "log",
                "index",
                "timeindex",
                "txnindex",
                "snapshot",
                "checkpoint",
            ]
            .contains(&ext)
                && f.file_name().unwrap() != "leader-epoch-checkpoint"
            {
                files.push(f);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn a_stock_broker_starts_on_an_export_and_a_consumer_group_resumes_in_two_sessions() {
    if !kafka_available() {
        return;
    }
    let root = scratch_dir("kafka-export");
    let source = KafkaCluster::format(&root.join("source"));
    let mut broker = source.start();
    workload(&["create-topic-assigned", &broker.bootstrap, TOPIC, "1/1/1"]);
    for p in 0..PARTITIONS {
        workload(&[
            "send",
            &broker.bootstrap,
            TOPIC,
            &p.to_string(),
            "10",
            "all",
        ]);
    }
    // Partition 0: committed and aborted transactions, a re-initialised transactional id.
    workload(&["produce", &broker.bootstrap, TOPIC, "30"]);
    // A leader election: a restart raises every partition's leader epoch.
    broker.stop();
    broker = source.start();
    for p in 0..PARTITIONS {
        workload(&["send", &broker.bootstrap, TOPIC, &p.to_string(), "5", "all"]);
    }
    let (first_read, mirrored_positions) = group_read(&broker.bootstrap, GROUP, 12, "earliest");
    assert_eq!(first_read.len(), 12);
    let open = workload(&["open-transactions", &broker.bootstrap, TOPIC, "3", "1"]);
    let lso0 = open
        .iter()
        .filter(|r| r["committed"] == false)
        .map(|r| r["offset"].as_i64().unwrap())
        .min()
        .expect("an open transaction");
    // Everything a read_committed consumer sees at the source (another group, from the beginning).
    let (committed_records, source_ends) =
        group_read(&broker.bootstrap, "everything", 1 << 20, "earliest");
    assert_eq!(
        source_ends[&0], lso0,
        "read_committed stops at the open transaction"
    );

    // Two klog standbys mirror it, the group's offsets with them: one in `truncate` mode (the default:
    // read_committed, cut to the LSO at failover), one in `abort` mode (read_uncommitted, the open
    // transaction aborted at failover). The source dies; both fail over.
    let source_leo0 = open
        .iter()
        .map(|r| r["offset"].as_i64().unwrap())
        .max()
        .unwrap()
        + 1;
    let mut standbys = Vec::new();
    for mode in [StopMode::Truncate, StopMode::Abort] {
        let klog_root = root.join(format!("klog-{}", mode.name()));
        let b = Cluster::init(
            Arc::new(StdStorage),
            Arc::new(SystemClock),
            &klog_root,
            ClusterOptions::default(),
        )
        .unwrap();
        b.create_mirror_with_stop_mode("m", &format!("kafka://{}", broker.bootstrap), mode)
            .unwrap();
        all_ok(b.add_topics("m", &topics(&[TOPIC])).unwrap());
        standbys.push((mode, klog_root, b));
    }
    for (mode, _, b) in &standbys {
        converge(b, "mirrored to the source's ends and group offsets", |b| {
            let offsets = b.committed_offsets().unwrap();
            (0..PARTITIONS).all(|p| {
                let end = match (mode, p) {
                    (StopMode::Abort, 0) => source_leo0,
                    _ => source_ends[&(p as i64)],
                };
                b.log(TOPIC, p).unwrap().log_end_offset() >= end
                    && offsets.values().any(|c| {
                        c.group == GROUP
                            && c.partition == p
                            && c.offset == mirrored_positions[&(p as i64)]
                    })
            })
        });
    }
    broker.kill();
    let mut exports = Vec::new();
    for (mode, klog_root, b) in standbys {
        all_ok(b.remove_topics("m", &topics(&[TOPIC])).unwrap());
        converge(&b, "failover", |b| {
            (0..PARTITIONS).all(|p| state_of(b, TOPIC, p) == Some(MirrorState::Stopped))
        });
        let ends: Vec<i64> = (0..PARTITIONS)
            .map(|p| b.log(TOPIC, p).unwrap().log_end_offset())
            .collect();
        b.close().unwrap();
        drop(b);
        let counts: &[u32] = if mode == StopMode::Truncate {
            &[50, 7]
        } else {
            &[50]
        };
        for &n in counts {
            exports.push((mode, klog_root.clone(), ends.clone(), n));
        }
    }

    for (mode, klog_root, ends, n) in exports {
        let out = root.join(format!("out-{}-{n}", mode.name()));
        let report: Value = serde_json::from_str(&klog_ok(&[
            "cluster",
            "export",
            klog_root.to_str().unwrap(),
            "--kafka",
            out.to_str().unwrap(),
            "--offsets-partitions",
            &n.to_string(),
            "--json",
        ]))
        .unwrap();
        assert_eq!(report["offsets_replaced"], n != 50, "{report}");
        // Byte for byte the source's batches below the barrier, then the barrier.
        for p in 0..PARTITIONS {
            let theirs = kafka_batches(&partition_dir(&source.data, p));
            let ours = kafka_batches(&partition_dir(&out, p));
            let barrier = ends[p as usize] - 1;
            // truncate: the source's batches below the LSO; abort: all of them, then an ABORT for the
            // open transaction (partition 0). Then the barrier.
            let (kept, own) = match mode {
                StopMode::Truncate => (
                    theirs
                        .iter()
                        .take_while(|s| s.last_offset < barrier)
                        .count(),
                    vec![Some(ControlRecordType::MirrorPidReset)],
                ),
                StopMode::Abort if p == 0 => (
                    theirs.len(),
                    vec![
                        Some(ControlRecordType::Abort),
                        Some(ControlRecordType::MirrorPidReset),
                    ],
                ),
                StopMode::Abort => (theirs.len(), vec![Some(ControlRecordType::MirrorPidReset)]),
            };
            assert_eq!(ours.len(), kept + own.len(), "{TOPIC}-{p} ({mode:?})");
            assert_eq!(
                ours[..kept],
                theirs[..kept],
                "{TOPIC}-{p} ({mode:?}): the source's batches"
            );
            assert_eq!(
                ours[kept..].iter().map(control_type).collect::<Vec<_>>(),
                own,
                "{TOPIC}-{p} ({mode:?}): klog's own batches"
            );
            assert_eq!(ours.last().unwrap().last_offset, barrier);
            let row = report["partitions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["topic"] == TOPIC && r["partition"] == p)
                .unwrap();
            assert!(row["leader_epoch"].as_i64().unwrap() >= ours.last().unwrap().epoch as i64);
        }
        // Kafka's own reader takes every file: segments, indexes, snapshots, the metadata snapshot.
        let files = dumpable_files(&out);
        let (meta, data): (Vec<PathBuf>, Vec<PathBuf>) = files
            .into_iter()
            .partition(|f| f.to_string_lossy().contains("__cluster_metadata-0"));
        assert!(!data.is_empty() && meta.len() == 1, "{data:?} {meta:?}");
        dump_log(&data, &["--deep-iteration"]);
        let image = dump_log(&meta, &["--cluster-metadata-decoder"]);
        assert!(
            image.contains(TOPIC) && image.contains("\"name\":\"metadata.version\""),
            "{image}"
        );

        // A stock broker on OUT: no format step.
        let target = KafkaCluster::unformatted(
            &root.join(format!("target-{}-{n}", mode.name())),
            &out,
            1,
            &format!("offsets.topic.num.partitions={n}\n"),
        );
        let target_broker = target.start();
        // Session 1: at the mirrored offsets, exactly the committed records after them.
        let (read, positions) = group_read(&target_broker.bootstrap, GROUP, 1 << 20, "none");
        let want: Vec<Rec> = committed_records
            .iter()
            .filter(|r| r.1 >= mirrored_positions[&r.0])
            .cloned()
            .collect();
        let by_partition = |rs: &[Rec]| -> BTreeMap<i64, Vec<Rec>> {
            let mut m: BTreeMap<i64, Vec<Rec>> = BTreeMap::new();
            for r in rs {
                m.entry(r.0).or_default().push(r.clone());
            }
            m
        };
        assert_eq!(
            by_partition(&read),
            by_partition(&want),
            "{mode:?} N={n}: session 1"
        );
        // An idempotent producer writes on the new broker; session 2 resumes where session 1 left
        // off and reads exactly what it wrote.
        let mut sent: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        for p in 0..PARTITIONS {
            for r in workload(&[
                "send",
                &target_broker.bootstrap,
                TOPIC,
                &p.to_string(),
                "4",
                "all",
            ]) {
                sent.entry(p as i64)
                    .or_default()
                    .push(r["offset"].as_i64().unwrap());
            }
        }
        let (read2, _) = group_read(&target_broker.bootstrap, GROUP, 1 << 20, "none");
        let mut got: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        for r in &read2 {
            got.entry(r.0).or_default().push(r.1);
        }
        assert_eq!(
            got, sent,
            "{mode:?} N={n}: session 2 reads exactly the new records"
        );
        for (p, offsets) in &sent {
            assert_eq!(
                offsets[0], positions[p],
                "{mode:?} N={n}: partition {p} resumes where session 1 left off"
            );
        }
        let errors = target_broker.error_lines_beyond_first_start();
        assert!(
            errors.is_empty(),
            "{mode:?} N={n}: the broker logged errors: {errors:#?}"
        );
        target_broker.stop();
    }
}
