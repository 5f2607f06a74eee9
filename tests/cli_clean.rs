//! `klog clean` end to end (issue #27, item 5): the binary on a log directory the library wrote (keys
//! written over and over, a tombstone, an aborted and a committed transaction, small segments), then
//! what it leaves, read back through the library; `--dry-run` changing nothing at all; and bad input:
//! a missing directory, a topic that is not compacted, a corrupt segment, a directory another process
//! holds, output into a pipe that closes.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::tree::Tree;
use common::{klog, scratch_dir, stderr, stdout};
use klog::log::config::LogConfig;
use klog::log::dir_lock::DirLock;
use klog::log::format::{AnyBatch, BatchBuilder, Batches, Compression, ControlRecordType};
use klog::log::io::StdStorage;
use klog::log::log_dir::LogDir;
use klog::log::partition_log::PartitionLog;
use klog::log::validator::AppendOrigin;
use serde_json::Value;

/// The records' time, and the pass's clock a minute later.
const T: i64 = 1_700_000_000_000;
const NOW: i64 = T + 60_000;
const DAY_MS: i64 = 86_400_000;

const CONFIG: [&str; 2] = ["cleanup.policy=compact", "segment.bytes=1024"];

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn append(log: &PartitionLog, records: &[(&str, Option<&str>)], producer: Option<(i64, i32)>) {
    let mut b = BatchBuilder::new(Compression::None);
    if let Some((pid, seq)) = producer {
        b = b.producer(pid, 0, seq).transactional(true);
    }
    for (k, v) in records {
        b.append(T, Some(k.as_bytes()), v.map(str::as_bytes), &[])
            .unwrap();
    }
    log.append_as_leader(&mut b.build().unwrap(), 0).unwrap();
}

fn end_txn(log: &PartitionLog, kind: ControlRecordType, pid: i64) {
    let mut m = BatchBuilder::end_txn_marker(kind, pid, 0, 0, T)
        .unwrap()
        .build()
        .unwrap();
    log.append_as_leader_with_origin(&mut m, 0, AppendOrigin::Coordinator)
        .unwrap();
}

/// Five rounds over keys k0..k4 (`k<i>=r<round>`), each round its own batch.
fn rounds(log: &PartitionLog, from: usize, to: usize) {
    rounds_of(log, "k", from, to)
}

/// Rounds over keys `<prefix>0..<prefix>4`.
fn rounds_of(log: &PartitionLog, prefix: &str, from: usize, to: usize) {
    for round in from..to {
        let values: Vec<String> = (0..5)
            .map(|_| format!("r{round}-{}", "x".repeat(60)))
            .collect();
        let keys: Vec<String> = (0..5).map(|k| format!("{prefix}{k}")).collect();
        let records: Vec<(&str, Option<&str>)> = keys
            .iter()
            .zip(&values)
            .map(|(k, v)| (k.as_str(), Some(v.as_str())))
            .collect();
        append(log, &records, None);
    }
}

/// Opens `<root>/<name>` with the test's compacted config, runs `f`, rolls (so everything is in sealed
/// segments), publishes the high watermark and closes the log directory cleanly.
fn write(root: &Path, name: &str, config: &[&str], f: impl FnOnce(&PartitionLog)) {
    let mut log_dir = LogDir::open(Arc::new(StdStorage), root).unwrap();
    let (log, _) = log_dir
        .open_partition(name, LogConfig::from_pairs(config.iter().copied()).unwrap())
        .unwrap();
    f(&log);
    log.roll().unwrap();
    log.update_high_watermark(log.log_end_offset());
    log.flush(log.log_end_offset()).unwrap();
    log_dir.close_partition(log).unwrap();
    log_dir.close().unwrap();
}

/// The test's partition: rounds 0..6 of k0..k4, k1 deleted, an aborted transaction (a0..a2), a
/// committed one (c0, c1), then rounds 6..8.
fn history(log: &PartitionLog) {
    rounds(log, 0, 6);
    append(log, &[("k1", None)], None);
    append(
        log,
        &[("a0", Some("A")), ("a1", Some("A")), ("a2", Some("A"))],
        Some((7, 0)),
    );
    end_txn(log, ControlRecordType::Abort, 7);
    append(log, &[("c0", Some("C")), ("c1", Some("C"))], Some((8, 0)));
    end_txn(log, ControlRecordType::Commit, 8);
    rounds(log, 6, 8);
}

/// Every data record of the partition, in offset order: (offset, key, value), and the control
/// batches' count.
fn records(root: &Path, name: &str) -> (Vec<(i64, String, Option<String>)>, usize) {
    let log_dir = LogDir::open_read_only(Arc::new(StdStorage), root).unwrap();
    let (log, _) = log_dir
        .open_partition(name, LogConfig::from_pairs(CONFIG).unwrap())
        .unwrap();
    let mut out = Vec::new();
    let mut controls = 0;
    let mut scratch = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let read = log.read(offset, 1 << 20, None, true).unwrap();
        let bytes = read.records.as_slice().to_vec();
        assert!(!bytes.is_empty(), "nothing read at {offset}");
        for batch in Batches::new(&bytes) {
            let AnyBatch::V2(batch) = batch.unwrap() else {
                panic!("a legacy batch")
            };
            offset = batch.last_offset() + 1;
            if batch.is_control() {
                controls += 1;
                continue;
            }
            for r in batch.records(&mut scratch).unwrap() {
                let r = r.unwrap();
                let key = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
                let value = r.value.map(|v| String::from_utf8(v.to_vec()).unwrap());
                out.push((batch.base_offset() + r.offset_delta as i64, key, value));
            }
        }
    }
    (out, controls)
}

/// `klog clean ARGS --json`: its exit code and one JSON object per partition.
fn clean_json(args: &[&str]) -> (i32, Vec<Value>, String) {
    let mut all = vec!["clean", "--json"];
    all.extend_from_slice(args);
    let out = klog(&all);
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    let reports = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    (out.status.code().unwrap_or(-1), reports, stderr(&out))
}

/// The CLI's topic config: compacted, with Kafka's default `segment.bytes`, so the small segments the
/// library wrote are grouped into one cleaned segment.
fn config_args() -> Vec<String> {
    vec!["--config".to_owned(), "cleanup.policy=compact".to_owned()]
}

fn log_files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    common::sorted_entries(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

#[test]
fn a_pass_keeps_the_latest_record_of_each_key_and_drops_the_aborted_transaction() {
    let root = scratch_dir("cli-clean-e2e").join("logs");
    write(&root, "c-0", &CONFIG, history);
    let (before, _) = records(&root, "c-0");
    let now = NOW.to_string();
    let extra = config_args();
    let mut args = vec![s(&root), "--now", &now];
    args.extend(extra.iter().map(String::as_str));
    let (code, reports, err) = clean_json(&args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(reports.len(), 1, "{reports:?}");
    let r = &reports[0];
    assert_eq!(r["partition"], "c-0", "{r}");
    assert_eq!(r["cleaned"], true, "{r}");
    assert_eq!(r["skipped"], Value::Null, "{r}");
    assert_eq!(r["first_dirty_offset"], 0, "{r}");
    let end = r["end_offset"].as_i64().unwrap();
    assert_eq!(Some(end), r["first_uncleanable_offset"].as_i64(), "{r}");
    assert_eq!(r["stats"]["aborted_removed"], 3, "{r}");
    assert!(
        r["bytes_after"].as_u64() < r["bytes_before"].as_u64(),
        "{r}"
    );
    assert!(
        r["segments_after"].as_u64() < r["segments_before"].as_u64(),
        "{r}"
    );
    assert!(r["map_entries"].as_u64() >= Some(7), "{r}");

    // What is left: the latest record of each key at its own offset (k1's tombstone was written over),
    // the committed transaction, nothing of the aborted one.
    let (after, _) = records(&root, "c-0");
    let latest: BTreeMap<String, (i64, Option<String>)> = before
        .iter()
        .filter(|(_, k, _)| !k.starts_with('a'))
        .map(|(o, k, v)| (k.clone(), (*o, v.clone())))
        .collect();
    let kept: BTreeMap<String, (i64, Option<String>)> = after
        .iter()
        .map(|(o, k, v)| (k.clone(), (*o, v.clone())))
        .collect();
    assert_eq!(after.len(), kept.len(), "one record per key: {after:?}");
    assert_eq!(kept, latest);
    assert_eq!(kept["k1"].1, Some(format!("r7-{}", "x".repeat(60))));
    assert!(kept.contains_key("c0") && kept.contains_key("c1"));
    let checkpoint = std::fs::read_to_string(root.join("cleaner-offset-checkpoint")).unwrap();
    assert_eq!(checkpoint, format!("0\n1\nc 0 {end}\n"));

    // Nothing new is dirty: the next pass skips the partition (exit 0) and changes no segment.
    let files = log_files(&root.join("c-0"));
    let out = klog(
        &[
            &["clean", s(&root), "--now", &now][..],
            &extra.iter().map(String::as_str).collect::<Vec<_>>(),
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(&format!("{}: skipped: ", root.join("c-0").display())),
        "{text}"
    );
    assert_eq!(log_files(&root.join("c-0")), files);
}

#[test]
fn a_tombstone_goes_on_a_pass_after_its_delete_horizon() {
    let root = scratch_dir("cli-clean-horizon").join("logs");
    write(&root, "c-0", &CONFIG, |log| {
        rounds(log, 0, 3);
        append(log, &[("k1", None)], None);
        rounds(log, 3, 4);
        append(log, &[("k2", None)], None);
    });
    let extra = config_args();
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let now = NOW.to_string();
    let (code, _, err) = clean_json(&[&[s(&root), "--now", &now][..], &extra].concat());
    assert_eq!(code, 0, "{err}");
    let (after, _) = records(&root, "c-0");
    assert!(
        after.iter().any(|(_, k, v)| k == "k2" && v.is_none()),
        "{after:?}"
    );
    // New dirty data (other keys), and a pass two days on: the horizon the first pass set has passed.
    write(&root, "c-0", &CONFIG, |log| rounds_of(log, "n", 0, 2));
    let later = (NOW + 2 * DAY_MS).to_string();
    let (code, reports, err) = clean_json(&[&[s(&root), "--now", &later][..], &extra].concat());
    assert_eq!(code, 0, "{err}");
    assert!(
        reports[0]["stats"]["tombstones_removed"].as_u64() >= Some(1),
        "{reports:?}"
    );
    let (after, _) = records(&root, "c-0");
    assert!(
        !after.iter().any(|(_, k, v)| k == "k2" && v.is_none()),
        "{after:?}"
    );
}

#[test]
fn a_dry_run_reports_the_pass_and_changes_nothing() {
    let root = scratch_dir("cli-clean-dry-run").join("logs");
    write(&root, "c-0", &CONFIG, history);
    let before = Tree::of(&root);
    let now = NOW.to_string();
    let extra = config_args();
    let mut args = vec![s(&root), "--dry-run", "--now", &now];
    args.extend(extra.iter().map(String::as_str));
    let (code, reports, err) = clean_json(&args);
    assert_eq!(code, 0, "{err}");
    assert_eq!(reports[0]["dry_run"], true, "{reports:?}");
    assert_eq!(reports[0]["stats"]["aborted_removed"], 3, "{reports:?}");
    assert!(
        reports[0]["stats"]["records_retained"].as_u64()
            < reports[0]["stats"]["records_read"].as_u64()
    );
    assert_eq!(Tree::of(&root).changes_since(&before), Vec::<String>::new());
    assert_eq!(Tree::of(&root), before);
    // The same pass for real then does what the dry run said.
    let (code, real, err) = clean_json(
        &args[..1]
            .iter()
            .chain(&args[2..])
            .copied()
            .collect::<Vec<_>>(),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(real[0]["stats"], reports[0]["stats"]);
    assert_eq!(real[0]["end_offset"], reports[0]["end_offset"]);
}

#[test]
fn a_topic_that_is_not_compacted_is_skipped_and_a_missing_directory_refused() {
    let root = scratch_dir("cli-clean-not-compacted").join("logs");
    write(&root, "d-0", &["segment.bytes=1024"], |log| {
        rounds(log, 0, 4)
    });
    let files = log_files(&root.join("d-0"));
    let out = klog(&["clean", s(&root)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "{}: skipped: not compacted (cleanup.policy has no compact)\n",
            root.join("d-0").display()
        )
    );
    assert_eq!(log_files(&root.join("d-0")), files);
    assert!(!root.join("cleaner-offset-checkpoint").exists());

    let missing = root.join("nope");
    let out = klog(&["clean", s(&missing)]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        format!("klog: error: {}: no such directory\n", missing.display())
    );
    let out = klog(&["clean", s(&root), "--dedupe-buffer-size", "10"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--dedupe-buffer-size"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_corrupt_segment_is_an_error_naming_it_and_nothing_changes() {
    let root = scratch_dir("cli-clean-corrupt").join("logs");
    write(&root, "c-0", &CONFIG, history);
    write(&root, "ok-0", &CONFIG, |log| rounds(log, 0, 8));
    let dir = root.join("c-0");
    // One byte inside the second segment's first batch's records (past its 61-byte header).
    let segments: Vec<PathBuf> = log_files(&dir).into_keys().collect();
    let victim = &segments[1];
    let mut bytes = std::fs::read(victim).unwrap();
    bytes[70] ^= 0xff;
    std::fs::write(victim, &bytes).unwrap();
    let files = log_files(&dir);
    let now = NOW.to_string();
    let extra = config_args();
    let mut args = vec![s(&root), "--now", &now];
    args.extend(extra.iter().map(String::as_str));
    let (code, reports, err) = clean_json(&args);
    assert_eq!(code, 1, "{err}");
    let bad = reports.iter().find(|r| r["partition"] == "c-0").unwrap();
    let message = bad["error"].as_str().unwrap();
    let name = victim.file_name().unwrap().to_str().unwrap();
    assert!(message.contains(name), "names the file: {message}");
    assert!(
        message.contains("position"),
        "names the position: {message}"
    );
    // Nothing of that partition changed: the same segments, no leftovers, no checkpoint entry; the
    // other partition was cleaned.
    assert_eq!(log_files(&dir), files);
    for entry in common::sorted_entries(&dir) {
        let n = entry.to_string_lossy().into_owned();
        assert!(
            !n.ends_with(".cleaned") && !n.ends_with(".swap") && !n.ends_with(".deleted"),
            "{n}"
        );
    }
    let ok = reports.iter().find(|r| r["partition"] == "ok-0").unwrap();
    assert_eq!(ok["cleaned"], true, "{ok}");
    let checkpoint = std::fs::read_to_string(root.join("cleaner-offset-checkpoint")).unwrap();
    assert!(!checkpoint.contains("c 0 "), "{checkpoint}");
    // In text, the error line names the partition directory too.
    let out = klog(&[&["clean"][..], &args].concat());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with(&format!("klog: error: {}: ", dir.display())),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_directory_another_process_holds_is_refused() {
    let root = scratch_dir("cli-clean-locked").join("logs");
    write(&root, "c-0", &CONFIG, history);
    let files = log_files(&root.join("c-0"));
    let lock = DirLock::acquire(&StdStorage, &root).unwrap();
    let out = klog(&["clean", s(&root), "--config", "cleanup.policy=compact"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).starts_with("klog: error: ")
            && stderr(&out).contains("Failed to acquire lock on file .lock in "),
        "{}",
        stderr(&out)
    );
    drop(lock);
    assert_eq!(log_files(&root.join("c-0")), files);
    // A dry run is a reader: it runs beside the writer.
    let lock = DirLock::acquire(&StdStorage, &root).unwrap();
    let out = klog(&[
        "clean",
        s(&root),
        "--dry-run",
        "--config",
        "cleanup.policy=compact",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    drop(lock);
}

#[test]
fn output_into_a_closed_pipe_still_cleans_every_partition() {
    let root = scratch_dir("cli-clean-pipe").join("logs");
    let names: Vec<String> = (0..6).map(|p| format!("c-{p}")).collect();
    for name in &names {
        write(&root, name, &CONFIG, |log| rounds(log, 0, 8));
    }
    let klog_bin = env!("CARGO_BIN_EXE_klog");
    let script = format!(
        "set -o pipefail; '{klog_bin}' clean '{}' --config cleanup.policy=compact --config segment.bytes=1024 | head -1",
        root.display()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 1);
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    let checkpoint = std::fs::read_to_string(root.join("cleaner-offset-checkpoint")).unwrap();
    for p in 0..6 {
        assert!(checkpoint.contains(&format!("c {p} ")), "{checkpoint}");
    }
}

#[test]
fn a_cluster_root_cleans_its_compacted_topics_with_cluster_json_configs() {
    use klog::log::clock::SystemClock;
    use klog::mirror::{Cluster, ClusterOptions};
    let root = scratch_dir("cli-clean-cluster").join("c");
    let cluster = Cluster::init(
        Arc::new(StdStorage),
        Arc::new(SystemClock),
        &root,
        ClusterOptions::default(),
    )
    .unwrap();
    let compact = [
        ("cleanup.policy".to_owned(), "compact".to_owned()),
        ("segment.bytes".to_owned(), "1024".to_owned()),
    ];
    cluster.create_topic("c", 1, None, &compact).unwrap();
    cluster.create_topic("d", 1, None, &[]).unwrap();
    for round in 0..8 {
        let mut b = BatchBuilder::new(Compression::None);
        for k in 0..5 {
            let value = format!("r{round}-{}", "x".repeat(60));
            b.append(
                T,
                Some(format!("k{k}").as_bytes()),
                Some(value.as_bytes()),
                &[],
            )
            .unwrap();
        }
        cluster.produce("c", 0, &mut b.build().unwrap()).unwrap();
    }
    cluster.log("c", 0).unwrap().roll().unwrap();
    cluster.close().unwrap();
    drop(cluster);
    let before = Tree::of(&root);
    let (code, dry, err) = clean_json(&[s(&root), "--dry-run"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(Tree::of(&root), before, "a dry run changes nothing");
    let (code, reports, err) = clean_json(&[s(&root)]);
    assert_eq!(code, 0, "{err}");
    let by_name = |rs: &[Value], n: &str| rs.iter().find(|r| r["partition"] == n).cloned().unwrap();
    let c = by_name(&reports, "c-0");
    assert_eq!(c["cleaned"], true, "{c}");
    assert_eq!(c["stats"]["records_retained"], 5, "{c}");
    assert_eq!(by_name(&dry, "c-0")["stats"], c["stats"]);
    let d = by_name(&reports, "d-0");
    assert_eq!(
        d["skipped"], "not compacted (cleanup.policy has no compact)",
        "{d}"
    );
    // The internal topics are compacted, with nothing dirty yet.
    let state = by_name(&reports, "__mirror_state-0");
    assert_eq!(state["cleaned"], false, "{state}");
    assert!(state["skipped"].as_str().is_some(), "{state}");
    // The cluster opens again, with the latest value of every key.
    let cluster = Cluster::open(Arc::new(StdStorage), Arc::new(SystemClock), &root).unwrap();
    let log = cluster.log("c", 0).unwrap();
    let read = log.read(0, 1 << 20, None, true).unwrap();
    let bytes = read.records.as_slice().to_vec();
    let mut scratch = Vec::new();
    let mut values = Vec::new();
    for batch in Batches::new(&bytes) {
        let AnyBatch::V2(batch) = batch.unwrap() else {
            panic!("a legacy batch")
        };
        for r in batch.records(&mut scratch).unwrap() {
            values.push(String::from_utf8(r.unwrap().value.unwrap().to_vec()).unwrap());
        }
    }
    assert_eq!(values, vec![format!("r7-{}", "x".repeat(60)); 5]);
    cluster.close().unwrap();
}
