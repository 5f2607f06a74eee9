//! Kafka -> klog: a partition a real Kafka 4.4 broker wrote (the Java workload: idempotent producers in every
//! codec, transactions committed and aborted, an epoch bumped by re-initialising a transactional.id, small
//! segments) opens in klog after a clean shutdown and after SIGKILL, and klog agrees with Kafka on every
//! batch and record, on the rebuilt `.index`/`.timeindex`/`.txnindex` bytes and on the producer state;
//! and `BatchBuilder`, fed the records the Java producer sent, writes the broker's uncompressed batches.
//!
//! One broker run serves every test of this file: it is formatted, started, loaded, killed, started again
//! (so it recovers) and stopped cleanly; the two copies of its log directory are what the tests read.
//! Skips with one line without Java, unless `KLOG_REQUIRE_KAFKA=1` (CI), where it fails.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::kafka::{copy_dir, dump_log, kafka_available, workload, Cluster};
use common::{klog, scratch_dir, sorted_entries, stderr};
use serde_json::Value;

const TOPIC: &str = "workload";
const PARTITION: &str = "workload-0";

struct Run {
    /// The log directory as SIGKILL left it.
    crashed: PathBuf,
    /// The log directory after Kafka recovered the crash and shut down cleanly.
    clean: PathBuf,
    /// What the workload wrote, one object per record (offset, producer, txn outcome, record fields).
    produced: Vec<Value>,
}

static RUN: OnceLock<Result<Run, String>> = OnceLock::new();

/// The broker run, once per test binary; None when Kafka cannot run here.
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

fn broker_run() -> Run {
    let root = scratch_dir("kafka-to-klog");
    let cluster = Cluster::format(&root);
    let broker = cluster.start();
    let bootstrap = broker.bootstrap.clone();
    workload(&[
        "create-topic",
        &bootstrap,
        TOPIC,
        "internal.segment.bytes=32768",
    ]);
    let produced = workload(&["produce", &bootstrap, TOPIC, "60"]);
    broker.kill();
    let crashed = root.join("crashed");
    copy_dir(&cluster.data, &crashed);
    assert!(!crashed.join(".kafka_cleanshutdown").exists());

    let broker = cluster.start();
    let errors = broker.error_lines();
    assert!(errors.is_empty(), "the broker logged errors: {errors:#?}");
    broker.stop();
    let clean = root.join("clean");
    copy_dir(&cluster.data, &clean);
    assert!(clean.join(".kafka_cleanshutdown").exists());
    Run {
        crashed,
        clean,
        produced,
    }
}

/// A fresh log directory holding only our partition (plus the log directory's checkpoints and marker).
fn copy_partition(from: &Path, name: &str) -> PathBuf {
    let to = scratch_dir(name);
    for e in sorted_entries(from) {
        let file = e.file_name().unwrap().to_str().unwrap().to_owned();
        if e.is_file() {
            std::fs::copy(&e, to.join(&file)).unwrap();
        } else if file == PARTITION {
            copy_dir(&e, &to.join(&file));
        }
    }
    to
}

fn files_with(dir: &Path, ext: &str) -> Vec<PathBuf> {
    sorted_entries(dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect()
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

fn klog_ok(args: &[&str]) -> String {
    let out = klog(args);
    assert!(out.status.success(), "klog {args:?}: {}", stderr(&out));
    common::stdout(&out)
}

/// `klog recover --json DIR`: the one partition's report.
fn klog_recover(log_dir: &Path) -> Value {
    let reports = json_lines(&klog_ok(&["recover", "--json", log_dir.to_str().unwrap()]));
    assert_eq!(reports.len(), 1, "{reports:?}");
    reports.into_iter().next().unwrap()
}

/// One batch of `kafka-dump-log --deep-iteration --print-data-log`: its `name: value` fields, and each
/// record's (with `headerKeys` as a list).
#[derive(Debug)]
struct KafkaBatch {
    fields: BTreeMap<String, String>,
    records: Vec<(BTreeMap<String, String>, Vec<String>)>,
}

fn pairs(line: &str) -> BTreeMap<String, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut map = BTreeMap::new();
    let mut i = 0;
    while i + 1 < words.len() {
        let name = words[i]
            .strip_suffix(':')
            .unwrap_or_else(|| panic!("{line:?}: {:?} is not a field name", words[i]));
        map.insert(name.to_owned(), words[i + 1].to_owned());
        i += 2;
    }
    map
}

/// Kafka's dump of several `.log` files, per file name.
fn parse_kafka_dump(text: &str) -> BTreeMap<String, Vec<KafkaBatch>> {
    let mut files: BTreeMap<String, Vec<KafkaBatch>> = BTreeMap::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(path) = line.strip_prefix("Dumping ") {
            current = Path::new(path)
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .into();
            files.entry(current.clone()).or_default();
        } else if line.starts_with("Log starting offset: ") {
        } else if let Some(rest) = line.strip_prefix("| ") {
            let open = rest.find("headerKeys: [").expect("headerKeys") + "headerKeys: [".len();
            let close = open + rest[open..].find(']').expect("]");
            let keys = rest[open..close]
                .split(',')
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .collect();
            let without = format!("{}{}", &rest[..open - 13], &rest[close + 1..]);
            let batch = files.get_mut(&current).unwrap().last_mut().unwrap();
            batch.records.push((pairs(&without), keys));
        } else if line.starts_with("baseOffset: ") {
            files.get_mut(&current).unwrap().push(KafkaBatch {
                fields: pairs(line),
                records: Vec::new(),
            });
        } else {
            panic!("unexpected line in kafka-dump-log's output: {line:?}");
        }
    }
    files
}

fn hex_to_text(v: &Value) -> Option<String> {
    let hex = v.as_str()?;
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    Some(String::from_utf8(bytes).expect("the workload writes utf-8"))
}

fn hex_len(v: &Value) -> i64 {
    v.as_str().map_or(-1, |h| h.len() as i64 / 2)
}

/// Every field Kafka prints for a batch and its records, against klog's JSON of the same batch.
fn assert_batch_agrees(k: &KafkaBatch, ours: &Value, what: &str) {
    let f = |name: &str| k.fields[name].clone();
    let num = |v: &Value| v.as_i64().map_or("null".into(), |n| n.to_string());
    let expect = [
        ("baseOffset", num(&ours["base_offset"])),
        ("lastOffset", num(&ours["last_offset"])),
        ("count", num(&ours["record_count"])),
        ("baseSequence", num(&ours["base_sequence"])),
        ("lastSequence", num(&ours["last_sequence"])),
        ("producerId", num(&ours["producer_id"])),
        ("producerEpoch", num(&ours["producer_epoch"])),
        ("partitionLeaderEpoch", num(&ours["partition_leader_epoch"])),
        ("isTransactional", ours["is_transactional"].to_string()),
        ("isControl", ours["is_control"].to_string()),
        ("position", num(&ours["position"])),
        ("CreateTime", num(&ours["max_timestamp"])),
        ("size", num(&ours["batch_size"])),
        ("magic", num(&ours["magic"])),
        (
            "compresscodec",
            ours["compression"].as_str().unwrap().into(),
        ),
        ("crc", num(&ours["crc"])),
        ("isvalid", ours["crc_valid"].to_string()),
    ];
    for (name, value) in expect {
        assert_eq!(f(name), value, "{what}: batch field {name}");
    }
    let records = ours["records"].as_array().unwrap();
    assert_eq!(k.records.len(), records.len(), "{what}: records");
    for ((kr, keys), r) in k.records.iter().zip(records) {
        let what = format!("{what} record {}", kr["offset"]);
        assert_eq!(kr["offset"], num(&r["offset"]), "{what}: offset");
        assert_eq!(kr["CreateTime"], num(&r["timestamp"]), "{what}: timestamp");
        assert_eq!(
            kr["keySize"],
            hex_len(&r["key"]).to_string(),
            "{what}: keySize"
        );
        assert_eq!(kr["valueSize"], hex_len(&r["value"]).to_string(), "{what}");
        let our_keys: Vec<String> = r["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["key"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(keys, &our_keys, "{what}: headerKeys");
        if ours["is_control"] == true {
            let marker = ours["control_type"].as_str().unwrap().to_uppercase();
            assert_eq!(kr["endTxnMarker"], marker, "{what}: endTxnMarker");
        } else {
            assert_eq!(
                kr.get("key").cloned(),
                hex_to_text(&r["key"]),
                "{what}: key"
            );
            assert_eq!(
                kr.get("payload").cloned(),
                hex_to_text(&r["value"]),
                "{what}"
            );
        }
    }
}

/// The latest `.snapshot` of a partition as `kafka-dump-log` prints it: its entry lines, sorted.
fn snapshot_entries(file: &Path) -> Vec<String> {
    let mut lines: Vec<String> = dump_log(&[file.to_owned()], &[])
        .lines()
        .filter(|l| !l.starts_with("Dumping "))
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

fn log_end_offset(clean: &Path) -> i64 {
    let out = klog_ok(&[
        "producers",
        "--json",
        clean.join(PARTITION).to_str().unwrap(),
    ]);
    serde_json::from_str::<Value>(&out).unwrap()["log_end_offset"]
        .as_i64()
        .unwrap()
}

#[test]
fn clean_copy_opens_in_klog_with_kafkas_log_end_and_every_batch_field() {
    let Some(run) = run() else { return };
    let dir = copy_partition(&run.clean, "kafka-to-klog-clean-open");
    let part = dir.join(PARTITION);
    let logs = files_with(&part, "log");
    assert!(logs.len() >= 4, "small segments rolled: {logs:?}");

    let kafka = parse_kafka_dump(&dump_log(&logs, &["--deep-iteration", "--print-data-log"]));
    let mut ours_by_offset = BTreeMap::new();
    let mut batches = 0;
    for log in &logs {
        let name = log.file_name().unwrap().to_str().unwrap();
        let ours = json_lines(&klog_ok(&[
            "dump",
            "--json",
            "--deep",
            log.to_str().unwrap(),
        ]));
        let theirs = &kafka[name];
        assert_eq!(ours.len(), theirs.len(), "{name}: batch count");
        for (k, o) in theirs.iter().zip(&ours) {
            assert_batch_agrees(k, o, &format!("{name} batch at {}", k.fields["position"]));
            for r in o["records"].as_array().unwrap() {
                ours_by_offset.insert(r["offset"].as_i64().unwrap(), r.clone());
            }
        }
        batches += ours.len();
    }
    let last = kafka.values().flatten().last().unwrap();
    let kafka_end: i64 = last.fields["lastOffset"].parse::<i64>().unwrap() + 1;

    // Every record the workload wrote is where Kafka acknowledged it, with its fields.
    for p in &run.produced {
        let r = &ours_by_offset[&p["offset"].as_i64().unwrap()];
        for field in ["timestamp", "key", "value", "headers"] {
            assert_eq!(r[field], p[field], "record {} {field}", p["offset"]);
        }
    }

    // Opened by the library (clean: nothing rescanned) with Kafka's log end offset.
    let storage: std::sync::Arc<dyn klog::log::io::Storage> =
        std::sync::Arc::new(klog::log::io::StdStorage);
    let log_dir = klog::log::log_dir::LogDir::open(storage, &dir).unwrap();
    assert!(log_dir.had_clean_shutdown());
    let (log, report) = log_dir
        .open_partition(PARTITION, klog::log::config::LogConfig::default())
        .unwrap();
    assert_eq!(log.log_end_offset(), kafka_end);
    assert_eq!(log.high_watermark(), kafka_end, "the HW checkpoint");
    assert!(report.recovered_segments.is_empty(), "{report:?}");
    assert_eq!(log.segment_base_offsets().len(), logs.len());
    assert!(batches > 20);
}

#[test]
fn crashed_copy_recovers_in_klog_to_kafkas_log_and_indexes() {
    let Some(run) = run() else { return };
    let dir = copy_partition(&run.crashed, "kafka-to-klog-crashed");
    let report = klog_recover(&dir);
    assert_eq!(report["clean_shutdown"], false);
    assert_eq!(
        report["truncated"],
        serde_json::json!([]),
        "nothing torn: {report}"
    );
    assert_eq!(report["log_end_offset"], log_end_offset(&run.clean));
    // Kafka recovered the same crash and shut down cleanly: the same files, byte for byte.
    let ours = dir.join(PARTITION);
    let kafkas = run.clean.join(PARTITION);
    for ext in ["log", "index", "timeindex", "txnindex"] {
        let names = |d: &Path| -> Vec<_> {
            files_with(d, ext)
                .iter()
                .map(|p| p.file_name().unwrap().to_owned())
                .collect()
        };
        assert_eq!(names(&ours), names(&kafkas), ".{ext} files");
        for name in names(&kafkas) {
            let (a, b) = (
                std::fs::read(ours.join(&name)),
                std::fs::read(kafkas.join(&name)),
            );
            assert!(a.unwrap() == b.unwrap(), "{name:?} differs from Kafka's");
        }
    }
}

#[test]
fn indexes_klog_rebuilds_are_byte_identical_to_kafkas() {
    let Some(run) = run() else { return };
    let dir = copy_partition(&run.clean, "kafka-to-klog-rebuild");
    let part = dir.join(PARTITION);
    let mut removed = Vec::new();
    for ext in ["index", "timeindex", "txnindex"] {
        for f in files_with(&part, ext) {
            std::fs::remove_file(&f).unwrap();
            removed.push(f.file_name().unwrap().to_owned());
        }
    }
    assert!(removed
        .iter()
        .any(|n| n.to_str().unwrap().ends_with(".txnindex")));
    let report = klog_recover(&dir);
    assert!(
        !report["rebuilt_indexes"].as_array().unwrap().is_empty(),
        "{report}"
    );
    for name in &removed {
        let ours = std::fs::read(part.join(name)).expect("klog rebuilt the index");
        let kafkas = std::fs::read(run.clean.join(PARTITION).join(name)).unwrap();
        assert!(
            ours == kafkas,
            "{name:?}: klog's rebuilt index differs from Kafka's"
        );
    }
}

#[test]
fn producer_state_matches_kafkas_snapshot_and_klogs_snapshot_reads_back_in_kafka() {
    let Some(run) = run() else { return };
    let kafkas = run.clean.join(PARTITION);
    let end = log_end_offset(&run.clean);
    let kafka_snapshot = kafkas.join(format!("{end:020}.snapshot"));
    assert!(kafka_snapshot.exists(), "Kafka's snapshot at the log end");
    let theirs = snapshot_entries(&kafka_snapshot);

    // klog's producer state loaded from Kafka's directory, field by field against Kafka's snapshot.
    let dir = copy_partition(&run.clean, "kafka-to-klog-producers");
    let state: Value = serde_json::from_str(&klog_ok(&[
        "producers",
        "--json",
        dir.join(PARTITION).to_str().unwrap(),
    ]))
    .unwrap();
    let producers = state["producers"].as_array().unwrap();
    assert_eq!(producers.len(), theirs.len(), "{producers:?}\n{theirs:#?}");
    let mut epochs_bumped = false;
    for line in &theirs {
        let k = pairs(line);
        let id: i64 = k["producerId"].parse().unwrap();
        let p = producers
            .iter()
            .find(|p| p["producer_id"] == id)
            .unwrap_or_else(|| panic!("producer {id} missing in klog"));
        let txn_first = match k["currentTxnFirstOffset"].as_str() {
            "OptionalLong.empty" => "null".to_owned(),
            s => s
                .trim_start_matches("OptionalLong[")
                .trim_end_matches(']')
                .into(),
        };
        let expect = [
            ("producerEpoch", "producer_epoch"),
            ("coordinatorEpoch", "coordinator_epoch"),
            ("lastTimestamp", "last_timestamp"),
            ("lastSequence", "last_sequence"),
            ("lastOffset", "last_offset"),
            ("offsetDelta", "offset_delta"),
        ];
        for (kafka_name, our_name) in expect {
            if let Some(v) = k.get(kafka_name) {
                assert_eq!(*v, p[our_name].to_string(), "producer {id} {kafka_name}");
            }
        }
        assert_eq!(txn_first, p["current_txn_first_offset"].to_string());
        epochs_bumped |= k["producerEpoch"] != "0";
    }
    assert!(epochs_bumped, "transactional producers' epochs were bumped");

    // The snapshot klog writes for the same state prints the same entries in Kafka's own dump tool.
    let part = dir.join(PARTITION);
    for f in files_with(&part, "snapshot") {
        std::fs::remove_file(f).unwrap();
    }
    let report = klog_recover(&dir);
    assert_eq!(report["snapshots_written"], 1, "{report}");
    let ours = part.join(format!("{end:020}.snapshot"));
    assert_eq!(snapshot_entries(&ours), theirs);
}

fn hex_bytes(v: &Value) -> Option<Vec<u8>> {
    let hex = v.as_str()?;
    Some(
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect(),
    )
}

/// `BatchBuilder` rebuilds, from what the Java producer sent (the workload's records: timestamps, keys,
/// values, headers) and the batch header fields the producer and broker set (producer id, epoch and
/// base sequence, transactional flag; base offset and leader epoch assigned by the broker), every
/// uncompressed data batch in the broker's `.log` files byte for byte; and the COMMIT/ABORT markers the
/// broker wrote from their producer id, epoch, coordinator epoch and timestamp. Seen to fail: with
/// `write_record` writing a record attributes byte of 1 instead of Java's 0, the batch at offset 0
/// differed from the broker's.
#[test]
fn batch_builder_writes_the_java_producers_uncompressed_batches() {
    use klog::log::format::{AnyBatch, BatchBuilder, Batches, Compression, ControlValue, Header};
    let Some(run) = run() else { return };
    let by_offset: BTreeMap<i64, &Value> = run
        .produced
        .iter()
        .map(|p| (p["offset"].as_i64().unwrap(), p))
        .collect();
    let (mut data, mut markers, mut records) = (0, 0, 0);
    for log in files_with(&run.clean.join(PARTITION), "log") {
        let bytes = std::fs::read(&log).unwrap();
        for b in Batches::new(&bytes) {
            let AnyBatch::V2(b) = b.unwrap() else {
                panic!("{log:?}: a legacy batch")
            };
            if b.compression().unwrap() != Compression::None {
                continue;
            }
            let what = format!("{log:?}: batch at offset {}", b.base_offset());
            let builder = if let Some(control) = b.control_record().unwrap() {
                let ControlValue::EndTxn(marker) = control.value else {
                    panic!("{what}: {control:?}")
                };
                markers += 1;
                BatchBuilder::end_txn_marker(
                    control.record_type,
                    b.producer_id(),
                    b.producer_epoch(),
                    marker.coordinator_epoch,
                    b.max_timestamp(),
                )
                .unwrap()
            } else {
                data += 1;
                let mut builder = BatchBuilder::new(Compression::None)
                    .producer(b.producer_id(), b.producer_epoch(), b.base_sequence())
                    .transactional(b.is_transactional());
                for offset in b.base_offset()..=b.last_offset() {
                    let p = by_offset
                        .get(&offset)
                        .unwrap_or_else(|| panic!("{what}: the workload sent no record {offset}"));
                    let headers: Vec<(String, Option<Vec<u8>>)> = p["headers"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|h| {
                            (
                                h["key"].as_str().unwrap().to_owned(),
                                hex_bytes(&h["value"]),
                            )
                        })
                        .collect();
                    let headers: Vec<Header> = headers
                        .iter()
                        .map(|(key, value)| Header {
                            key,
                            value: value.as_deref(),
                        })
                        .collect();
                    builder
                        .append(
                            p["timestamp"].as_i64().unwrap(),
                            hex_bytes(&p["key"]).as_deref(),
                            hex_bytes(&p["value"]).as_deref(),
                            &headers,
                        )
                        .unwrap();
                    records += 1;
                }
                builder
            };
            let built = builder
                .base_offset(b.base_offset())
                .partition_leader_epoch(b.partition_leader_epoch())
                .build()
                .unwrap();
            assert!(
                built == b.as_bytes(),
                "{what}: BatchBuilder's bytes differ from the broker's"
            );
        }
    }
    // Every record of the uncompressed producer, in however many batches it sent (3 when seen); six
    // markers: klog-txn-a's commit, abort, commit, klog-txn-b's commit, its abort when the
    // re-initialisation bumped the epoch, and the new producer's commit.
    let uncompressed = run
        .produced
        .iter()
        .filter(|p| p["producer"] == "idempotent-none")
        .count();
    assert_eq!(records, uncompressed, "{data} uncompressed data batches");
    assert!(data >= 2, "{data} batches");
    assert_eq!(markers, 6);
}
