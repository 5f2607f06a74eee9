//! KRaft metadata from a real Kafka 4.4 broker: the topic configs klog learns from the broker's metadata log
//! (`__cluster_metadata-0`), the index placement across restarts, and `klog dump` of the metadata log and
//! its snapshots beside `kafka-dump-log --cluster-metadata-decoder`.
//!
//! One broker run serves every test of this file. Topics: `configured` (index.interval.bytes=512,
//! segment.bytes=1 MiB, max.message.bytes later deleted, retention.ms added), `rolled`
//! (internal.segment.bytes=32 KiB so it rolls, index.interval.bytes=700), `restarted`
//! (index.interval.bytes=1024, written in four phases: A, clean restart, B, C, SIGKILL and restart, D),
//! `gone` (created and deleted); plus a cluster-wide dynamic default `log.retention.ms`. The controller
//! takes a snapshot every few seconds, so the metadata log holds snapshots and a log after them.
//! Skips with one line without Java, unless `KLOG_REQUIRE_KAFKA=1` (CI), where it fails.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::kafka::{copy_dir, dump_log, kafka_available, kafka_tools, workload, Cluster};
use common::{klog, scratch_dir, sorted_entries, stderr};
use serde_json::Value;

const SEGMENT: &str = "00000000000000000000";

struct Run {
    /// The data directory (`log.dirs`) and the metadata directory after the last clean shutdown.
    data: PathBuf,
    meta: PathBuf,
    /// `restarted-0` after phase B (A, a clean restart, B) and a clean shutdown.
    after_clean_restart: PathBuf,
    /// The length of `restarted-0`'s `.log` at the end of phases A, B and C.
    phase_ends: [u64; 3],
    /// Topic ids as the broker returned them at creation.
    topic_ids: BTreeMap<String, String>,
}

static RUN: OnceLock<Result<Run, String>> = OnceLock::new();

fn run() -> Option<&'static Run> {
    if !kafka_available() {
        return None;
    }
    let run = RUN.get_or_init(|| {
        std::panic::catch_unwind(broker_run).map_err(|p| {
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        })
    });
    Some(
        run.as_ref()
            .unwrap_or_else(|e| panic!("the Kafka broker run failed: {e}")),
    )
}

fn configs(bootstrap: &str, entity: &[&str], change: &[&str]) {
    let mut args = vec![
        "run",
        "org.apache.kafka.tools.ConfigCommand",
        "--bootstrap-server",
        bootstrap,
        "--alter",
    ];
    args.extend_from_slice(entity);
    args.extend_from_slice(change);
    kafka_tools(&args);
}

fn create(bootstrap: &str, topic: &str, configs: &[&str], ids: &mut BTreeMap<String, String>) {
    let mut args = vec!["create-topic", bootstrap, topic];
    args.extend_from_slice(configs);
    let out = workload(&args);
    let id = out[0]["topic_id"].as_str().expect("a topic id").to_owned();
    ids.insert(topic.to_owned(), id);
}

fn log_len(data: &Path) -> u64 {
    std::fs::metadata(data.join("restarted-0").join(format!("{SEGMENT}.log")))
        .expect("restarted-0's segment")
        .len()
}

fn broker_run() -> Run {
    let root = scratch_dir("kafka-metadata");
    let cluster = Cluster::format_with(&root, "metadata.log.max.snapshot.interval.ms=3000\n");
    let mut ids = BTreeMap::new();

    // Phase A.
    let broker = cluster.start();
    let b = broker.bootstrap.clone();
    create(
        &b,
        "configured",
        &[
            "index.interval.bytes=512",
            "segment.bytes=1048576",
            "max.message.bytes=200000",
        ],
        &mut ids,
    );
    create(
        &b,
        "rolled",
        &["internal.segment.bytes=32768", "index.interval.bytes=700"],
        &mut ids,
    );
    create(
        &b,
        "restarted",
        &["index.interval.bytes=1024", "segment.bytes=1048576"],
        &mut ids,
    );
    create(&b, "gone", &[], &mut ids);
    workload(&["produce", &b, "configured", "60"]);
    workload(&["produce", &b, "rolled", "60"]);
    workload(&["produce", &b, "restarted", "30"]);
    let topic = ["--entity-type", "topics", "--entity-name", "configured"];
    configs(&b, &topic, &["--add-config", "retention.ms=86400000"]);
    configs(&b, &topic, &["--delete-config", "max.message.bytes"]);
    configs(
        &b,
        &["--entity-type", "brokers", "--entity-default"],
        &["--add-config", "log.retention.ms=7200000"],
    );
    broker.stop();
    let a_end = log_len(&cluster.data);

    // Phase B, after a clean restart.
    let broker = cluster.start();
    let b = broker.bootstrap.clone();
    workload(&["produce", &b, "restarted", "30"]);
    kafka_tools(&[
        "run",
        "org.apache.kafka.tools.TopicCommand",
        "--bootstrap-server",
        &b,
        "--delete",
        "--topic",
        "gone",
    ]);
    broker.stop();
    let b_end = log_len(&cluster.data);
    let after_clean_restart = root.join("after-clean-restart");
    copy_dir(&cluster.data.join("restarted-0"), &after_clean_restart);

    // Phase C, then a crash; phase D after Kafka recovered it.
    let broker = cluster.start();
    let b = broker.bootstrap.clone();
    workload(&["produce", &b, "restarted", "30"]);
    broker.kill();
    let c_end = log_len(&cluster.data);
    let broker = cluster.start();
    let b = broker.bootstrap.clone();
    workload(&["produce", &b, "restarted", "30"]);
    let errors = broker.error_lines();
    assert!(errors.is_empty(), "the broker logged errors: {errors:#?}");
    broker.stop();

    let data = root.join("final-data");
    let meta = root.join("final-meta");
    copy_dir(&cluster.data, &data);
    copy_dir(&cluster.meta, &meta);
    Run {
        data,
        meta,
        after_clean_restart,
        phase_ends: [a_end, b_end, c_end],
        topic_ids: ids,
    }
}

fn klog_ok(args: &[&str]) -> String {
    let out = klog(args);
    assert!(out.status.success(), "klog {args:?}: {}", stderr(&out));
    common::stdout(&out)
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

fn metadata_dir(run: &Run) -> PathBuf {
    run.meta.join("__cluster_metadata-0")
}

fn files_with(dir: &Path, ext: &str) -> Vec<PathBuf> {
    sorted_entries(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect()
}

/// A copy of the data directory with the `.index`/`.timeindex` files of `topics` deleted.
fn without_indexes(run: &Run, name: &str, topics: &[&str]) -> PathBuf {
    let dir = scratch_dir(name);
    copy_dir(&run.data, &dir);
    for topic in topics {
        for ext in ["index", "timeindex"] {
            for f in files_with(&dir.join(format!("{topic}-0")), ext) {
                std::fs::remove_file(f).unwrap();
            }
        }
    }
    dir
}

/// Every `.index`/`.timeindex` of `topic-0` in `ours` against the broker's, byte for byte.
fn assert_indexes_are_kafkas(run: &Run, ours: &Path, topic: &str) -> usize {
    let kafkas = run.data.join(format!("{topic}-0"));
    let mut compared = 0;
    for ext in ["index", "timeindex"] {
        for theirs in files_with(&kafkas, ext) {
            let name = theirs.file_name().unwrap();
            let mine = std::fs::read(ours.join(format!("{topic}-0")).join(name))
                .unwrap_or_else(|e| panic!("{topic}: {name:?} not rebuilt: {e}"));
            assert!(
                mine == std::fs::read(&theirs).unwrap(),
                "{topic}: {name:?} differs from Kafka's"
            );
            compared += 1;
        }
    }
    compared
}

fn reports_by_partition(text: &str) -> BTreeMap<String, Value> {
    json_lines(text)
        .into_iter()
        .map(|r| (r["partition"].as_str().unwrap().to_owned(), r))
        .collect()
}

fn config_source(report: &Value, name: &str) -> (String, String) {
    let entry = report["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {report}"));
    (
        entry["value"].as_str().unwrap().to_owned(),
        entry["source"].as_str().unwrap().to_owned(),
    )
}

/// The done-when of issue #16: with the broker's metadata log and no `--config`, `klog recover` rebuilds
/// the indexes of topics that set `index.interval.bytes` (and `segment.bytes`, `internal.segment.bytes`)
/// byte for byte as Kafka wrote them, and says where each config came from. Seen to fail before the
/// metadata log was read: the indexes were rebuilt every 4096 bytes (the control below).
#[test]
fn recover_rebuilds_kafkas_indexes_with_the_configs_of_the_metadata_log() {
    let Some(run) = run() else { return };
    let dir = without_indexes(run, "kafka-metadata-recover", &["configured", "rolled"]);
    let out = klog_ok(&[
        "recover",
        "--json",
        "--metadata-log-dir",
        run.meta.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    let reports = reports_by_partition(&out);
    assert!(assert_indexes_are_kafkas(run, &dir, "configured") >= 2);
    assert!(
        assert_indexes_are_kafkas(run, &dir, "rolled") >= 6,
        "rolled has several segments"
    );
    let configured = &reports["configured-0"];
    assert_eq!(
        configured["metadata_log"],
        metadata_dir(run).display().to_string()
    );
    let topic = "DYNAMIC_TOPIC_CONFIG".to_string();
    assert_eq!(
        config_source(configured, "index.interval.bytes"),
        ("512".into(), topic.clone())
    );
    assert_eq!(
        config_source(configured, "segment.bytes"),
        ("1048576".into(), topic.clone())
    );
    assert_eq!(
        config_source(configured, "retention.ms"),
        ("86400000".into(), topic.clone())
    );
    assert_eq!(
        config_source(&reports["rolled-0"], "segment.bytes"),
        ("32768".into(), topic.clone())
    );
    // A topic without its own retention gets the cluster-wide dynamic default.
    assert_eq!(
        config_source(&reports["restarted-0"], "retention.ms"),
        ("7200000".into(), "DYNAMIC_DEFAULT_BROKER_CONFIG".into())
    );
    // --config wins, and says so.
    let dir = without_indexes(run, "kafka-metadata-recover-explicit", &["configured"]);
    let out = klog_ok(&[
        "recover",
        "--json",
        "--metadata-log-dir",
        run.meta.to_str().unwrap(),
        "--config",
        "index.interval.bytes=4096",
        dir.join("configured-0").to_str().unwrap(),
    ]);
    let report = &reports_by_partition(&out)["configured-0"];
    assert_eq!(
        config_source(report, "index.interval.bytes"),
        ("4096".into(), "COMMAND_LINE".into())
    );

    // The control: without the metadata log, the same recovery places the entries elsewhere.
    let dir = without_indexes(run, "kafka-metadata-recover-blind", &["configured"]);
    klog_ok(&["recover", "--json", dir.to_str().unwrap()]);
    let name = format!("{SEGMENT}.index");
    assert!(
        std::fs::read(dir.join("configured-0").join(&name)).unwrap()
            != std::fs::read(run.data.join("configured-0").join(&name)).unwrap(),
        "the default interval gives another index (else this test shows nothing)"
    );
}

/// Kafka's default layout keeps `__cluster_metadata-0` in the (first) log directory: klog finds it there
/// with no option at all.
#[test]
fn a_metadata_log_inside_the_log_directory_is_found_without_options() {
    let Some(run) = run() else { return };
    let dir = without_indexes(run, "kafka-metadata-inside", &["configured"]);
    copy_dir(&metadata_dir(run), &dir.join("__cluster_metadata-0"));
    let out = klog_ok(&["recover", dir.to_str().unwrap()]);
    assert!(
        out.lines().any(|l| l.contains("configured-0")
            && l.contains("index.interval.bytes=512 (DYNAMIC_TOPIC_CONFIG)")),
        "{out}"
    );
    assert_indexes_are_kafkas(run, &dir, "configured");
    // The readers report the same configs.
    let part = dir.join("configured-0");
    let producers: Value =
        serde_json::from_str(&klog_ok(&["producers", "--json", part.to_str().unwrap()])).unwrap();
    assert_eq!(
        config_source(&producers, "index.interval.bytes"),
        ("512".into(), "DYNAMIC_TOPIC_CONFIG".into())
    );
    let read: Value = serde_json::from_str(&klog_ok(&[
        "read",
        "--json",
        "--offset",
        "0",
        part.to_str().unwrap(),
    ]))
    .unwrap();
    assert_eq!(config_source(&read, "segment.bytes").0, "1048576");
    let verify = json_lines(&klog_ok(&["verify", "--json", dir.to_str().unwrap()]));
    let configured = verify
        .iter()
        .find(|v| v["partition"] == "configured-0")
        .unwrap();
    assert_eq!(configured["ok"], true, "{configured}");
    assert_eq!(
        config_source(configured, "retention.ms"),
        ("86400000".into(), "DYNAMIC_TOPIC_CONFIG".into())
    );
}

/// `klog topics` lists the broker's live topics with their ids, partitions and configs, as the broker
/// returned and stored them: a deleted config is gone, a deleted topic is gone.
#[test]
fn topics_lists_kafkas_topics_and_configs() {
    let Some(run) = run() else { return };
    let v: Value =
        serde_json::from_str(&klog_ok(&["topics", "--json", run.meta.to_str().unwrap()])).unwrap();
    assert!(v["snapshot"].is_object(), "a snapshot was taken: {v}");
    // Whether records follow the newest snapshot depends on when the broker last took one (every 3 s
    // of new records, and the controller writes idle records): on a slow machine the last snapshot can
    // end the log. The log past a snapshot is covered by log/tests/kraft_loader.rs either way.
    assert!(
        v["end_offset"].as_i64().unwrap() >= v["snapshot"]["end_offset"].as_i64().unwrap(),
        "the log ends before its snapshot: {v}"
    );
    assert!(v["features"]["metadata.version"].as_i64().unwrap() > 0);
    let topics: BTreeMap<&str, &Value> = v["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), t))
        .collect();
    assert!(!topics.contains_key("gone"), "deleted: {v}");
    for (name, id) in &run.topic_ids {
        if name == "gone" {
            continue;
        }
        let t = topics[name.as_str()];
        assert_eq!(t["topic_id"], *id, "{name}");
        assert_eq!(t["partitions"].as_array().unwrap().len(), 1, "{name}");
        assert_eq!(t["partitions"][0]["replicas"], serde_json::json!([1]));
    }
    let want = |pairs: &[(&str, &str)]| -> Value {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(*v)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    assert_eq!(
        topics["configured"]["configs"],
        want(&[
            ("index.interval.bytes", "512"),
            ("retention.ms", "86400000"),
            ("segment.bytes", "1048576"),
        ])
    );
    assert_eq!(
        topics["rolled"]["configs"],
        want(&[
            ("index.interval.bytes", "700"),
            ("internal.segment.bytes", "32768"),
        ])
    );
    let defaults = v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource_type"] == "BROKER" && r["resource_name"] == "")
        .expect("the cluster-wide broker default");
    assert_eq!(defaults["configs"]["log.retention.ms"], "7200000");
    // The partition directories name the same topic ids.
    for name in ["configured", "rolled", "restarted"] {
        let pm =
            std::fs::read_to_string(run.data.join(format!("{name}-0/partition.metadata"))).unwrap();
        assert!(pm.ends_with(run.topic_ids[name].as_str()), "{pm}");
    }
    // Text: one line per topic in kafka-topics' layout.
    let text = klog_ok(&["topics", metadata_dir(run).to_str().unwrap()]);
    let line = text
        .lines()
        .find(|l| l.starts_with("Topic: configured\t"))
        .expect("the configured topic's line");
    assert!(
        line.ends_with(
            "Configs: index.interval.bytes=512,retention.ms=86400000,segment.bytes=1048576"
        ),
        "{line}"
    );
}

/// The `.log` of `restarted-0` from Kafka's final segment, cut at the given lengths into phase files in
/// `dir`.
fn phases(run: &Run, dir: &Path, ends: &[u64]) -> Vec<PathBuf> {
    let log = std::fs::read(run.data.join(format!("restarted-0/{SEGMENT}.log"))).unwrap();
    let mut start = 0usize;
    let mut files = Vec::new();
    for (i, &end) in ends.iter().chain([&(log.len() as u64)]).enumerate() {
        let file = dir.join(format!("phase-{i}.bin"));
        std::fs::write(&file, &log[start..end as usize]).unwrap();
        files.push(file);
        start = end as usize;
    }
    files
}

/// Appends each phase file as a follower in its own `klog append` (its own open and close); with `unclean`,
/// `.kafka_cleanshutdown` is removed before each, so every open recovers.
fn append_phases(part: &Path, files: &[PathBuf], unclean: bool) {
    let marker = part.parent().unwrap().join(".kafka_cleanshutdown");
    for f in files {
        if unclean {
            let _ = std::fs::remove_file(&marker);
        }
        klog_ok(&[
            "append",
            part.to_str().unwrap(),
            f.to_str().unwrap(),
            "--as",
            "follower",
            "--config",
            "index.interval.bytes=1024",
            "--config",
            "segment.bytes=1048576",
        ]);
    }
}

fn index_of(part: &Path) -> (Vec<u8>, Vec<u8>) {
    (
        std::fs::read(part.join(format!("{SEGMENT}.index"))).unwrap(),
        std::fs::read(part.join(format!("{SEGMENT}.timeindex"))).unwrap(),
    )
}

/// Issue #16, item 2: a segment appended to across a clean restart has Kafka's index: the broker counts
/// the bytes since the last index entry from 0 for a loaded segment, and so does klog across a close and
/// reopen. The same batches, appended by klog in the same two steps, give the broker's `.index` and
/// `.timeindex` byte for byte.
#[test]
fn indexes_across_a_clean_restart_are_kafkas() {
    let Some(run) = run() else { return };
    let dir = scratch_dir("kafka-metadata-clean-restart");
    let files = phases(run, &dir, &run.phase_ends[..2]);
    std::fs::write(dir.join(".kafka_cleanshutdown"), b"").unwrap();
    let part = dir.join("restarted-0");
    append_phases(&part, &files[..2], false);
    assert!(
        dir.join(".kafka_cleanshutdown").exists(),
        "every open clean"
    );
    let (index, time_index) = index_of(&part);
    let (kafka_index, kafka_time_index) = index_of(&run.after_clean_restart);
    assert!(
        kafka_index.len() >= 16,
        "entries on both sides of the restart"
    );
    assert!(index == kafka_index, "the .index differs from Kafka's");
    assert!(time_index == kafka_time_index, "the .timeindex differs");
}

/// The same after an unclean restart: the broker was killed after phase C and recovered the active segment
/// (rebuilding its indexes) before phase D. klog, its every open unclean (no `.kafka_cleanshutdown`),
/// recovers the segment at each open and then appends: the final indexes are the broker's. Seen to fail
/// with recovery carrying its pass's byte count over to the next append (the defect 71e358c fixed): the
/// first entry of phase D came earlier than Kafka's.
#[test]
fn indexes_across_an_unclean_restart_are_kafkas() {
    let Some(run) = run() else { return };
    let dir = scratch_dir("kafka-metadata-unclean-restart");
    let files = phases(run, &dir, &run.phase_ends);
    let part = dir.join("restarted-0");
    append_phases(&part, &files, true);
    let (index, time_index) = index_of(&part);
    let (kafka_index, kafka_time_index) = index_of(&run.data.join("restarted-0"));
    assert!(index == kafka_index, "the .index differs from Kafka's");
    assert!(time_index == kafka_time_index, "the .timeindex differs");
}

/// `klog dump` of every file of the broker's metadata log (segments and KRaft snapshots, the bootstrap one
/// included) prints what `kafka-dump-log --cluster-metadata-decoder` prints, line for line; klog picks
/// the decoder by itself for a `__cluster_metadata-0` file. Before the decoder, a `.checkpoint` snapshot
/// failed with "not UTF-8" (read as a text checkpoint).
#[test]
fn dump_of_the_metadata_log_and_snapshots_matches_kafka_dump_log() {
    let Some(run) = run() else { return };
    let dir = metadata_dir(run);
    let mut files = files_with(&dir, "log");
    let snapshots = files_with(&dir, "checkpoint");
    assert!(
        snapshots.len() >= 2,
        "the bootstrap snapshot and the controller's: {snapshots:?}"
    );
    files.extend(snapshots);
    let kafka = dump_log(&files, &["--cluster-metadata-decoder"]);
    let mut args = vec!["dump"];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    let ours = klog_ok(&args);
    let (k, o): (Vec<&str>, Vec<&str>) = (kafka.lines().collect(), ours.lines().collect());
    for (i, (a, b)) in k.iter().zip(&o).enumerate() {
        assert_eq!(b, a, "line {}", i + 1);
    }
    assert_eq!(o.len(), k.len(), "line count");
    for kind in [
        "TOPIC_RECORD",
        "PARTITION_RECORD",
        "CONFIG_RECORD",
        "REMOVE_TOPIC_RECORD",
        "FEATURE_LEVEL_RECORD",
        "\"value\":null",
        "SnapshotHeader",
        "Snapshot end offset",
    ] {
        assert!(ours.contains(kind), "no {kind} in the dump");
    }
    assert!(
        !ours.contains("Error at"),
        "every record decodes: {}",
        ours.lines().find(|l| l.contains("Error at")).unwrap_or("")
    );

    // Outside its directory a segment needs the flag, and then prints the same.
    let elsewhere = scratch_dir("kafka-metadata-dump").join(format!("{SEGMENT}.log"));
    std::fs::copy(dir.join(format!("{SEGMENT}.log")), &elsewhere).unwrap();
    let with_flag = klog_ok(&[
        "dump",
        "--cluster-metadata-decoder",
        elsewhere.to_str().unwrap(),
    ]);
    let kafka = dump_log(
        std::slice::from_ref(&elsewhere),
        &["--cluster-metadata-decoder"],
    );
    assert_eq!(with_flag, kafka);

    // JSON: every record of a data batch carries its decoded record.
    let json = klog_ok(&[
        "dump",
        "--json",
        "--cluster-metadata-decoder",
        elsewhere.to_str().unwrap(),
    ]);
    for line in json_lines(&json) {
        for r in line["records"].as_array().unwrap() {
            let m = &r["cluster_metadata"];
            if line["is_control"] == false {
                assert!(m["type"].as_str().unwrap().ends_with("_RECORD"), "{r}");
                assert!(m["data"].is_object(), "{r}");
            }
        }
    }
}

/// Kafka's default layout with a dynamic quorum (KRaft version 1): the metadata log is inside the log
/// directory and holds KRaftVersion and Voters control records. `klog dump` prints them as
/// `kafka-dump-log` does, and `klog recover` of the log directory, with no option, rebuilds the indexes of
/// a topic that set `index.interval.bytes` as the broker wrote them.
#[test]
fn a_dynamic_quorum_broker_in_kafkas_default_layout() {
    if !kafka_available() {
        return;
    }
    let root = scratch_dir("kafka-metadata-standalone");
    let cluster = Cluster::format_standalone(&root, "metadata.log.max.snapshot.interval.ms=3000\n");
    let broker = cluster.start();
    let b = broker.bootstrap.clone();
    let mut ids = BTreeMap::new();
    create(&b, "spaced", &["index.interval.bytes=256"], &mut ids);
    workload(&["produce", &b, "spaced", "30"]);
    broker.stop();
    assert_eq!(cluster.meta, cluster.data);

    let metadata = cluster.data.join("__cluster_metadata-0");
    let mut files = files_with(&metadata, "log");
    files.extend(files_with(&metadata, "checkpoint"));
    let kafka = dump_log(&files, &["--cluster-metadata-decoder"]);
    let mut args = vec!["dump"];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    let ours = klog_ok(&args);
    assert_eq!(ours, kafka);
    assert!(ours.contains(" KRaftVoters {\"version\":0,\"voters\":[{\"voterId\":1,"));
    assert!(ours.contains(" KRaftVersion {\"version\":0,\"kRaftVersion\":1}"));

    let dir = root.join("copy");
    copy_dir(&cluster.data, &dir);
    for ext in ["index", "timeindex"] {
        for f in files_with(&dir.join("spaced-0"), ext) {
            std::fs::remove_file(f).unwrap();
        }
    }
    let reports = reports_by_partition(&klog_ok(&["recover", "--json", dir.to_str().unwrap()]));
    let spaced = &reports["spaced-0"];
    assert_eq!(
        config_source(spaced, "index.interval.bytes"),
        ("256".into(), "DYNAMIC_TOPIC_CONFIG".into())
    );
    for ext in ["index", "timeindex"] {
        let name = format!("{SEGMENT}.{ext}");
        let theirs = std::fs::read(cluster.data.join("spaced-0").join(&name)).unwrap();
        assert!(theirs.len() > 8, "several entries");
        assert!(
            std::fs::read(dir.join("spaced-0").join(&name)).unwrap() == theirs,
            "{name} differs from Kafka's"
        );
    }
    let topics: Value =
        serde_json::from_str(&klog_ok(&["topics", "--json", dir.to_str().unwrap()])).unwrap();
    let spaced = topics["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "spaced")
        .unwrap();
    assert_eq!(spaced["topic_id"], ids["spaced"].as_str());
}

/// Bad metadata is named, never a panic, and never stops what does not need it: `klog topics` refuses a
/// record that does not decode (exit 2, file and offset), `klog dump` prints Kafka's error line for it and
/// exits 1, `klog recover` warns and recovers with Kafka's defaults, and a missing metadata log is exit 2.
/// Needs no broker.
#[test]
fn a_corrupt_metadata_record_is_named_and_recovery_goes_on() {
    use klog::log::format::{BatchBuilder, Compression};
    let dir = scratch_dir("kafka-metadata-corrupt");
    let metadata = dir.join("__cluster_metadata-0");
    std::fs::create_dir_all(&metadata).unwrap();
    // TopicRecord v0 "t", then the same with a byte of garbage after it.
    let mut topic = vec![1, 2, 0, 2, b't'];
    topic.extend([7; 16]);
    topic.push(0);
    let mut garbage = topic.clone();
    garbage.push(9);
    let mut b = BatchBuilder::new(Compression::None);
    b.append(1_000, None, Some(&topic), &[]).unwrap();
    b.append(1_000, None, Some(&garbage), &[]).unwrap();
    let segment = metadata.join(format!("{SEGMENT}.log"));
    std::fs::write(&segment, b.build().unwrap()).unwrap();

    let out = klog(&["topics", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("metadata record at offset 1: found 1 byte(s) of garbage after TopicRecord"),
        "{}",
        stderr(&out)
    );

    let out = klog(&["dump", segment.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = common::stdout(&out);
    assert!(text
        .contains("payload: {\"type\":\"TOPIC_RECORD\",\"version\":0,\"data\":{\"name\":\"t\","));
    assert!(
        text.contains(
            "payload: Error at 1, skipping. found 1 byte(s) of garbage after TopicRecord"
        ),
        "{text}"
    );

    std::fs::create_dir_all(dir.join("t-0")).unwrap();
    let out = klog(&["recover", "--json", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the metadata log's topic configs are not used"),
        "{}",
        stderr(&out)
    );

    let out = klog(&[
        "topics",
        scratch_dir("kafka-metadata-none").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no KRaft metadata log"),
        "{}",
        stderr(&out)
    );
}
