//! `klog cluster import` without Java: a stopped broker's log directory made by klog itself (a klog
//! cluster's root is a Kafka log directory) with a KRaft metadata snapshot beside it, imported; the
//! broker's files never change whatever klog writes afterwards; a running broker's lock, a non-empty
//! target, an import cut short at every step and an unclean broker directory. The broker's
//! `__consumer_offsets` holds an aborted transactional offset commit, which no reader may count.
//! Real Kafka judges the same in `kafka_import.rs`.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{klog, scratch_dir, stderr, stdout};
use klog::log::checkpoint::{read_partition_metadata, write_partition_metadata, TopicId};
use klog::log::clock::SystemClock;
use klog::log::config::LogConfig;
use klog::log::coordinator::{partition_for_group, OffsetCommitKey, OffsetCommitValue};
use klog::log::format::{BatchBuilder, Compression, ControlRecordType};
use klog::log::io::StdStorage;
use klog::log::log_dir::LogDir;
use klog::log::validator::AppendOrigin;
use klog::mirror::import::{import, import_with_steps, ImportOptions, ImportReport};
use klog::mirror::{Cluster, ClusterOptions, Error};

const TOPIC: &str = "orders";
const GROUP: &str = "billing";
const LEADER_EPOCH: i32 = 5;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn compact(s: &str) -> Vec<u8> {
    assert!(s.len() < 127);
    let mut v = vec![s.len() as u8 + 1];
    v.extend_from_slice(s.as_bytes());
    v
}

/// TopicRecord v0 (frame 1, api key 2).
fn topic_record(name: &str, id: TopicId) -> Vec<u8> {
    let mut v = vec![1, 2, 0];
    v.extend(compact(name));
    v.extend(id.0);
    v.push(0);
    v
}

/// PartitionRecord v0 (api key 3): replica, ISR and leader broker 1.
fn partition_record(partition: i32, id: TopicId, leader_epoch: i32) -> Vec<u8> {
    let mut v = vec![1, 3, 0];
    v.extend(partition.to_be_bytes());
    v.extend(id.0);
    for _ in 0..2 {
        v.push(2);
        v.extend(1i32.to_be_bytes());
    }
    v.extend([1, 1]);
    v.extend(1i32.to_be_bytes());
    v.extend(leader_epoch.to_be_bytes());
    v.extend(leader_epoch.to_be_bytes());
    v.push(0);
    v
}

/// ConfigRecord v0 (api key 4) on a topic.
fn config_record(topic: &str, name: &str, value: &str) -> Vec<u8> {
    let mut v = vec![1, 4, 0, 2];
    v.extend(compact(topic));
    v.extend(compact(name));
    v.extend(compact(value));
    v.push(0);
    v
}

/// One batch of the records (null keys), as a snapshot's data.
fn records_batch(values: &[Vec<u8>]) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    for v in values {
        b.append(1_000, None, Some(v), &[]).unwrap();
    }
    b.build().unwrap()
}

fn batch(producer: i64, epoch: i16, sequence: i32, transactional: bool, value: u8) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None)
        .producer(producer, epoch, sequence)
        .transactional(transactional);
    for j in 0..2u8 {
        b.append(now_ms(), Some(&[j]), Some(&[value; 300]), &[])
            .unwrap();
    }
    b.build().unwrap()
}

/// A stopped broker's log directory: topic `orders` (3 partitions, 1 KiB segments, idempotent producers
/// 7..9, a committed and an aborted transaction of producer 100 on partition 0), group `billing`'s
/// offsets in `__consumer_offsets` of `offsets_partitions` partitions, a stray and a `-delete`
/// directory; the KRaft metadata as a snapshot. Made by a klog cluster (then its `cluster.json` removed).
fn broker_dir(root: &Path, offsets_partitions: i32) -> PathBuf {
    let data = root.join("broker");
    let c = Cluster::init(
        Arc::new(StdStorage),
        Arc::new(SystemClock),
        &data,
        ClusterOptions::default(),
    )
    .unwrap();
    let configs = [("segment.bytes", "1024"), ("retention.ms", "-1")]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let id = c.create_topic(TOPIC, 3, None, &configs).unwrap();
    for p in 0..3 {
        for i in 0..12 {
            let mut b = batch(7 + p as i64, 0, i * 2, false, i as u8);
            c.produce(TOPIC, p, &mut b).unwrap();
        }
    }
    for (seq, marker) in [
        (0, ControlRecordType::Commit),
        (2, ControlRecordType::Abort),
    ] {
        c.produce(TOPIC, 0, &mut batch(100, 3, seq, true, 0xaa))
            .unwrap();
        let mut m = BatchBuilder::end_txn_marker(marker, 100, 3, 0, now_ms())
            .unwrap()
            .build()
            .unwrap();
        c.append_markers(TOPIC, 0, &mut m).unwrap();
    }
    c.commit_offset(GROUP, TOPIC, 0, 25).unwrap();
    c.commit_offset(GROUP, TOPIC, 1, 7).unwrap();
    c.close().unwrap();
    std::fs::remove_file(data.join("cluster.json")).unwrap();
    aborted_offset_commit(&data);

    let klog_offsets = data.join(format!(
        "__consumer_offsets-{}",
        partition_for_group(GROUP, 50)
    ));
    let offsets_id = read_partition_metadata(&StdStorage, &klog_offsets)
        .unwrap()
        .unwrap();
    if offsets_partitions != 50 {
        // The broker placed the group by its own count.
        let p = partition_for_group(GROUP, offsets_partitions as u32);
        std::fs::rename(&klog_offsets, data.join(format!("__consumer_offsets-{p}"))).unwrap();
    }
    let ghost = data.join("ghost-0");
    std::fs::create_dir(&ghost).unwrap();
    write_partition_metadata(&StdStorage, &ghost, TopicId([9; 16])).unwrap();
    std::fs::create_dir(data.join(format!("{TOPIC}-7.{}-delete", "ab".repeat(16)))).unwrap();

    let mut records = vec![topic_record(TOPIC, id)];
    records.extend((0..3).map(|p| partition_record(p, id, LEADER_EPOCH)));
    for (k, v) in [
        ("segment.bytes", "1024"),
        ("retention.ms", "-1"),
        ("min.insync.replicas", "1"),
        ("remote.storage.enable", "false"),
    ] {
        records.push(config_record(TOPIC, k, v));
    }
    records.push(topic_record("__consumer_offsets", offsets_id));
    records.extend((0..offsets_partitions).map(|p| partition_record(p, offsets_id, 0)));
    let meta = data.join("__cluster_metadata-0");
    std::fs::create_dir(&meta).unwrap();
    let name = format!("{:020}-{:010}.checkpoint", records.len(), 1);
    std::fs::write(meta.join(name), records_batch(&records)).unwrap();
    data
}

/// A transactional offset commit (`sendOffsetsToTransaction`) of offset 99 for partition 2, then the
/// ABORT marker: Kafka's coordinator never applies it.
fn aborted_offset_commit(data: &Path) {
    let name = format!("__consumer_offsets-{}", partition_for_group(GROUP, 50));
    let mut dir = LogDir::open(Arc::new(StdStorage), data).unwrap();
    let config = LogConfig::from_pairs(["retention.ms=-1"]).unwrap();
    let (log, _) = dir.open_partition(&name, config).unwrap();
    let key = OffsetCommitKey {
        group: GROUP.into(),
        topic: TOPIC.into(),
        partition: 2,
    };
    let value = OffsetCommitValue {
        offset: 99,
        leader_epoch: 0,
        metadata: String::new(),
        commit_timestamp: now_ms(),
        expire_timestamp: -1,
        topic_id: None,
    };
    let mut b = BatchBuilder::new(Compression::None)
        .producer(300, 0, 0)
        .transactional(true);
    b.append(
        now_ms(),
        Some(&key.encode().unwrap()),
        Some(&value.encode(3).unwrap()),
        &[],
    )
    .unwrap();
    log.append_as_leader(&mut b.build().unwrap(), 0).unwrap();
    let mut abort = BatchBuilder::end_txn_marker(ControlRecordType::Abort, 300, 0, 0, now_ms())
        .unwrap()
        .build()
        .unwrap();
    log.append_as_leader_with_origin(&mut abort, 0, AppendOrigin::Coordinator)
        .unwrap();
    dir.close_partition(log).unwrap();
    dir.shut_down().unwrap();
}

/// Every file under `dir` (recursively) with its bytes.
fn contents(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(contents(&path));
        } else if path.file_name().unwrap() != ".lock" {
            out.insert(path.clone(), std::fs::read(&path).unwrap());
        }
    }
    out
}

fn segment_logs(dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs
}

fn ino(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().ino()
}

fn run(source: &Path, into: &Path) -> ImportReport {
    import(
        Arc::new(StdStorage),
        Arc::new(SystemClock),
        source,
        into,
        &ImportOptions::default(),
    )
    .unwrap()
}

fn open(root: &Path) -> Cluster {
    Cluster::open(Arc::new(StdStorage), Arc::new(SystemClock), root).unwrap()
}

#[test]
fn a_stopped_brokers_topics_files_producers_and_group_offsets_are_imported() {
    let root = scratch_dir("import-clean");
    let source = broker_dir(&root, 1);
    let before = contents(&source);
    let into = root.join("klog");
    let r = run(&source, &into);

    assert!(r.clean_shutdown);
    assert_eq!(r.node_id, 1);
    assert_eq!(r.topics.len(), 1, "{r:?}");
    let t = &r.topics[0];
    assert_eq!(t.topic, TOPIC);
    assert_eq!(t.partitions.len(), 3);
    assert!(t.partitions.iter().all(|p| p.leader_epoch == LEADER_EPOCH));
    assert_eq!(t.configs["segment.bytes"], "1024");
    assert_eq!(t.configs["min.insync.replicas"], "1");
    assert_eq!(t.configs_left_out.len(), 1, "{:?}", t.configs_left_out);
    assert!(t.configs_left_out[0].starts_with("remote.storage.enable=false"));
    let skipped: BTreeMap<&str, &str> = r
        .skipped
        .iter()
        .map(|s| (s.dir.as_str(), s.reason))
        .collect();
    assert_eq!(skipped["ghost-0"], "stray");
    assert_eq!(skipped["__mirror_state-0"], "stray");
    assert_eq!(
        skipped[format!("{TOPIC}-7.{}-delete", "ab".repeat(16)).as_str()],
        "marked"
    );
    assert_eq!(r.group_offsets.placement, "replaced");
    assert_eq!(
        (r.group_offsets.broker_partitions, r.group_offsets.offsets),
        (1, 2)
    );
    assert!(
        r.files.linked_files > 0 && r.files.copied_files > 0,
        "{:?}",
        r.files
    );
    assert_eq!(r.link_failure, None);

    // Sealed segments share the broker's inodes; the active one is klog's own copy.
    for p in 0..3 {
        let name = format!("{TOPIC}-{p}");
        let logs = segment_logs(&source.join(&name));
        assert!(logs.len() >= 3, "several segments: {logs:?}");
        let (active, sealed) = logs.split_last().unwrap();
        for log in sealed {
            assert_eq!(
                ino(log),
                ino(&into.join(&name).join(log.file_name().unwrap()))
            );
        }
        assert_ne!(
            ino(active),
            ino(&into.join(&name).join(active.file_name().unwrap()))
        );
        // Every batch is the broker's, byte for byte.
        let imported: Vec<u8> = segment_logs(&into.join(&name))
            .iter()
            .flat_map(|l| std::fs::read(l).unwrap())
            .collect();
        let broker: Vec<u8> = logs
            .iter()
            .flat_map(|l| std::fs::read(l).unwrap())
            .collect();
        assert_eq!(imported, broker, "{name}");
    }

    let c = open(&into);
    assert_eq!(c.topic(TOPIC).unwrap().id, t.topic_id);
    let offsets: Vec<(i32, i64)> = c
        .committed_offsets()
        .unwrap()
        .values()
        .map(|o| (o.partition, o.offset))
        .collect();
    assert_eq!(offsets, [(0, 25), (1, 7)]);
    c.close().unwrap();
    assert_eq!(
        contents(&source),
        before,
        "the broker's files did not change"
    );

    // The CLI readers agree: producers with their epochs, the group's offsets.
    let producers = stdout(&klog(&[
        "producers",
        into.join(format!("{TOPIC}-0")).to_str().unwrap(),
        "--json",
    ]));
    let producers: serde_json::Value = serde_json::from_str(&producers).unwrap();
    let ids: Vec<(i64, i64)> = producers["producers"]
        .as_array()
        .unwrap_or_else(|| panic!("{producers}"))
        .iter()
        .map(|p| {
            (
                p["producer_id"].as_i64().unwrap(),
                p["producer_epoch"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(ids, [(7, 0), (100, 3)], "{producers}");
    let groups = stdout(&klog(&[
        "group",
        "describe",
        into.to_str().unwrap(),
        "--json",
    ]));
    assert!(groups.contains("\"committed_offset\":25"), "{groups}");
}

#[test]
fn a_broker_with_klogs_fifty_offsets_partitions_has_them_taken_as_they_are() {
    let root = scratch_dir("import-as-is");
    let source = broker_dir(&root, 50);
    let into = root.join("klog");
    let r = run(&source, &into);
    assert_eq!(r.group_offsets.placement, "as_is");
    let files = r.group_offsets.files;
    assert!(files.copied_files + files.linked_files > 0, "{files:?}");
    let c = open(&into);
    assert_eq!(c.committed_offsets().unwrap().len(), 2);
    c.close().unwrap();
}

#[test]
fn a_target_inside_the_brokers_log_dir_is_refused_and_nothing_is_created() {
    let root = scratch_dir("import-into-inside");
    let source = broker_dir(&root, 1);
    let before = contents(&source);
    // Kafka would find a directory that is not `topic-partition` in its log dir and refuse to start;
    // inside a partition directory klog's files would sit among the broker's segments.
    // A dangling symbolic link whose target is inside the broker's log dir resolves there too.
    let dangling = root.join("dangling-into-broker");
    std::os::unix::fs::symlink(source.join("klog-later"), &dangling).unwrap();
    for into in [
        source.join("klog"),
        source.join(format!("{TOPIC}-0")).join("klog"),
        dangling.clone(),
    ] {
        let e = import(
            Arc::new(StdStorage),
            Arc::new(SystemClock),
            &source,
            &into,
            &ImportOptions::default(),
        )
        .expect_err("an import into the broker's own log dir");
        assert!(e.to_string().contains("inside the broker's log dir"), "{e}");
        assert!(!into.exists(), "{} created", into.display());
    }
    assert!(!source.join("klog-later").exists());
    assert_eq!(contents(&source), before, "the broker's files changed");
}

#[test]
fn klogs_writes_after_an_import_never_change_the_brokers_files() {
    let root = scratch_dir("import-no-shared-writes");
    let source = broker_dir(&root, 1);
    let before = contents(&source);
    let into = root.join("klog");
    run(&source, &into);
    let c = open(&into);
    // Appends go to the copied active segment; a truncation into a linked sealed segment (a mirror's
    // divergence does this) must not shrink the broker's inode, nor later appends write into it.
    for i in 0..20 {
        c.produce(TOPIC, 0, &mut batch(7, 0, 24 + i * 2, false, 0x55))
            .unwrap();
    }
    let log = c.log(TOPIC, 1).unwrap();
    let first_sealed = segment_logs(&into.join(format!("{TOPIC}-1")))[0].clone();
    let linked = ino(&first_sealed);
    log.truncate_to(1).unwrap();
    drop(log);
    c.produce(TOPIC, 1, &mut batch(50, 0, 0, false, 0x66))
        .unwrap();
    c.close().unwrap();
    assert_eq!(
        contents(&source),
        before,
        "the broker's files did not change"
    );
    assert_ne!(
        ino(&first_sealed),
        linked,
        "klog's name now has its own file"
    );
}

#[test]
fn a_running_brokers_directory_and_a_non_empty_target_are_refused() {
    let root = scratch_dir("import-refusals");
    let source = broker_dir(&root, 1);
    let busy = root.join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("x"), b"").unwrap();
    let o = klog(&[
        "cluster",
        "import",
        source.to_str().unwrap(),
        "--into",
        busy.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("not empty"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_dir(&busy).unwrap().count(),
        1,
        "nothing written"
    );
    // A source that is not a directory is named as such (not as its lock file).
    let missing = root.join("no-broker");
    let into = root.join("x");
    let o = klog(&[
        "cluster",
        "import",
        missing.to_str().unwrap(),
        "--into",
        into.to_str().unwrap(),
    ]);
    let err = stderr(&o);
    let want = format!("cannot import {}: not a directory", missing.display());
    assert!(err.contains(&want), "{err}");

    // A writer holds the broker's lock (as a running broker does): refused, naming the lock's holder.
    let mut writer = std::process::Command::new(env!("CARGO_BIN_EXE_klog"))
        .args(["torture", source.join("holder-0").to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(writer.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut lines, &mut first).unwrap();
    assert!(first.starts_with("opened"), "{first}");
    let into = root.join("klog");
    let o = klog(&[
        "cluster",
        "import",
        source.to_str().unwrap(),
        "--into",
        into.to_str().unwrap(),
    ]);
    writer.kill().unwrap();
    writer.wait().unwrap();
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains(".lock") && err.contains(source.to_str().unwrap()),
        "{err}"
    );
    assert!(err.contains(&format!("pid {}", writer.id())), "{err}");
    assert!(!into.exists(), "a refused import creates nothing");
}

#[test]
fn an_import_cut_short_at_any_step_leaves_a_directory_klog_refuses_to_open() {
    let root = scratch_dir("import-crash");
    let source = broker_dir(&root, 1);
    let mut steps = Vec::new();
    import_with_steps(
        Arc::new(StdStorage),
        Arc::new(SystemClock),
        &source,
        &root.join("full"),
        &ImportOptions::default(),
        &mut |p| {
            steps.push(p.file_name().unwrap().to_string_lossy().into_owned());
            Ok(())
        },
    )
    .unwrap();
    assert_eq!(
        steps.last().map(String::as_str),
        Some("cluster.json"),
        "{steps:?}"
    );
    assert!(steps.len() > 6, "{steps:?}");
    // Killed right after step k made its file durable, for every step before `cluster.json`.
    for (k, written) in steps.iter().enumerate().take(steps.len() - 1) {
        let into = root.join(format!("cut-{k}"));
        let mut n = 0;
        let cut = import_with_steps(
            Arc::new(StdStorage),
            Arc::new(SystemClock),
            &source,
            &into,
            &ImportOptions::default(),
            &mut |_| {
                n += 1;
                if n > k {
                    Err(Error::Refused("killed".into()))
                } else {
                    Ok(())
                }
            },
        );
        assert!(cut.is_err(), "cut after step {k} ({written})");
        let opened = Cluster::open(Arc::new(StdStorage), Arc::new(SystemClock), &into);
        let err = opened.expect_err(&format!("opened a cluster cut after {written}"));
        assert!(err.to_string().contains("is not a klog cluster"), "{err}");
        let again = klog(&[
            "cluster",
            "import",
            source.to_str().unwrap(),
            "--into",
            into.to_str().unwrap(),
        ]);
        assert!(stderr(&again).contains("not empty"), "{}", stderr(&again));
    }
}

#[test]
fn an_unclean_brokers_directory_is_recovered_and_its_files_stay_as_they_were() {
    let root = scratch_dir("import-unclean");
    let source = broker_dir(&root, 1);
    std::fs::remove_file(source.join(".kafka_cleanshutdown")).unwrap();
    // A torn batch at the end of partition 0's active segment (a crash mid-write).
    let active = segment_logs(&source.join(format!("{TOPIC}-0")))
        .pop()
        .unwrap();
    let mut torn = batch(7, 0, 24, false, 1);
    torn.truncate(torn.len() / 2);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&active)
        .unwrap();
    std::io::Write::write_all(&mut f, &torn).unwrap();
    drop(f);
    // Partition 1's recovery point at 0: every segment of it is rescanned, so none may be linked.
    let rp = source.join("recovery-point-offset-checkpoint");
    let text = std::fs::read_to_string(&rp).unwrap();
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with(&format!("{TOPIC} 1 ")) {
                format!("{TOPIC} 1 0\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(&rp, text).unwrap();
    let before = contents(&source);

    let into = root.join("klog");
    let r = run(&source, &into);
    assert!(!r.clean_shutdown);
    let p = &r.topics[0].partitions;
    assert_eq!(p[0].bytes_truncated, torn.len() as u64, "{p:?}");
    assert_eq!(p[1].files.linked_files, 0, "{p:?}");
    assert!(p[2].files.linked_files > 0, "{p:?}");
    assert_eq!(contents(&source), before, "recovery cut klog's copy only");
    let c = open(&into);
    assert_eq!(
        c.log(TOPIC, 0).unwrap().log_end_offset(),
        p[0].log_end_offset
    );
    c.close().unwrap();
}
