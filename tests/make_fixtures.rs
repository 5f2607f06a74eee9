//! Writes the repository's `fixtures/` with a real Kafka broker (the pinned jars, `tests/common/kafka.rs`)
//! and the Java workload (`interop/workload`). Not a test: `scripts/make-fixtures.sh` runs it
//! (`cargo test --test make_fixtures`, `harness = false`, left out of `cargo test`).
//!
//! One broker run: the single batches (`fixture-batches`: five records per batch, every codec, idempotent
//! and transactional producers, a COMMIT and an ABORT marker) into topic `batches`, the Java workload
//! (`produce`: every codec, transactions committed, aborted and fenced) into topic `workload` with 16 KiB
//! segments; then SIGKILL (the `killed` copy), a restart that recovers, a clean stop (the `clean` copy).
//! `manifest.json` records what a regeneration may change (producer ids, timestamps, CRCs, offsets),
//! taken from Kafka's own `kafka-dump-log` and from what the Java producers sent, never from klog.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::kafka::{copy_dir, dump_log, workload, Cluster};
use common::{repo_path, scratch_dir, sorted_entries};
use serde_json::{json, Value};

/// Small segments so the workload rolls several; small index files so the killed copy's preallocated
/// active index stays small.
const WORKLOAD_CONFIGS: [&str; 2] = ["internal.segment.bytes=16384", "segment.index.bytes=4096"];
const WORKLOAD_RECORDS: &str = "30";

fn main() {
    let out = std::env::var_os("KLOG_FIXTURES_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_path("fixtures"));
    assert!(
        common::kafka::kafka_available(),
        "make_fixtures needs java (and Maven Central) to run the broker"
    );
    let root = scratch_dir("make-fixtures");
    let cluster = Cluster::format(&root);
    let broker = cluster.start();
    let bootstrap = broker.bootstrap.clone();
    workload(&["create-topic", &bootstrap, "batches"]);
    let sent_batches = workload(&["fixture-batches", &bootstrap, "batches"]);
    let mut create = vec!["create-topic", &bootstrap, "workload"];
    create.extend(WORKLOAD_CONFIGS);
    workload(&create);
    let sent_workload = workload(&["produce", &bootstrap, "workload", WORKLOAD_RECORDS]);
    broker.kill();
    let staging = root.join("out");
    let killed = staging.join("kafka-segments/killed");
    copy_log_dir(&cluster.data, &killed, &["workload-0"]);

    let broker = cluster.start();
    let errors = broker.error_lines();
    assert!(errors.is_empty(), "the broker logged errors: {errors:#?}");
    broker.stop();
    let clean = staging.join("kafka-segments/clean");
    copy_log_dir(
        &cluster.data,
        &clean,
        &["batches-0", "workload-0", "__transaction_state-0"],
    );
    let metadata = clean.join("__cluster_metadata-0");
    copy_dir(&cluster.root.join("meta/__cluster_metadata-0"), &metadata);
    // The metadata log's active indexes stay preallocated (10 MiB each) after a clean stop: left out, as a
    // copy of the directory without indexes (klog and Kafka rebuild them).
    for e in sorted_entries(&metadata) {
        if e.extension()
            .is_some_and(|x| x == "index" || x == "timeindex")
        {
            std::fs::remove_file(&e).expect("remove a preallocated index");
        }
    }

    let batches = cut_batches(
        &clean.join("batches-0"),
        &sent_batches,
        &staging.join("batches"),
    );
    let manifest = json!({
        "description": "Written by scripts/make-fixtures.sh (tests/make_fixtures.rs): a real Apache Kafka broker \
            from interop/pom.xml and the Java workload in interop/workload. Values a regeneration changes are \
            recorded here; batch fields come from kafka-dump-log, record bytes from what the producers sent. \
            Producer batches are stored as sent (base offset 0, partition leader epoch -1; log_base_offset is \
            where the broker put them), control batches as the broker wrote them.",
        "kafka_version": String::from_utf8_lossy(&common::kafka::kafka_tools(&["version"]).stdout).trim(),
        "workload": {"topic_configs": WORKLOAD_CONFIGS, "records_per_producer": WORKLOAD_RECORDS},
        "batches": batches,
        "partitions": partitions(&staging.join("kafka-segments")),
        "workload_records": sent_workload.len(),
    });
    std::fs::write(
        staging.join("manifest.json"),
        serde_json::to_string_pretty(&manifest).expect("json") + "\n",
    )
    .expect("write manifest.json");
    replace_dir(&staging, &out);
    println!("fixtures written to {}", out.display());
}

/// A log directory's top-level files (checkpoints, `meta.properties`, the clean-shutdown marker) and the
/// named partitions.
fn copy_log_dir(from: &Path, to: &Path, partitions: &[&str]) {
    std::fs::create_dir_all(to).expect("create the copy");
    for e in sorted_entries(from) {
        let name = e.file_name().expect("a name").to_owned();
        if e.is_file() {
            std::fs::copy(&e, to.join(&name)).expect("copy a file");
        } else if partitions.iter().any(|p| name == *p) {
            copy_dir(&e, &to.join(&name));
        }
    }
}

fn replace_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).expect("create the fixtures directory");
    copy_dir(from, to);
    let readme = to.join("README.md");
    if !readme.exists() {
        // The README is kept in git; a fresh output directory gets a pointer to it.
        std::fs::write(readme, "See the repository's fixtures/README.md.\n").expect("write README");
    }
}

/// One batch of `kafka-dump-log --deep-iteration`: its fields and each record's.
struct DumpedBatch {
    file: PathBuf,
    fields: BTreeMap<String, String>,
    records: Vec<BTreeMap<String, String>>,
}

/// `name: value` pairs of one dump line (`headerKeys: [a,b]` holds no spaces: Kafka joins with commas).
fn pairs(line: &str) -> BTreeMap<String, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut map = BTreeMap::new();
    for w in words.chunks(2) {
        if let [name, value] = w {
            map.insert(name.trim_end_matches(':').to_owned(), (*value).to_owned());
        }
    }
    map
}

/// Every batch of the `.log` files of one partition directory, in offset order.
fn dumped(partition: &Path) -> Vec<DumpedBatch> {
    let logs: Vec<PathBuf> = sorted_entries(partition)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    if logs.is_empty() {
        return Vec::new();
    }
    let text = dump_log(&logs, &["--deep-iteration"]);
    let mut batches = Vec::new();
    let mut file = PathBuf::new();
    for line in text.lines() {
        if let Some(path) = line.strip_prefix("Dumping ") {
            file = PathBuf::from(path);
        } else if let Some(rest) = line.strip_prefix("| ") {
            let batch: &mut DumpedBatch = batches.last_mut().expect("a record follows its batch");
            batch.records.push(pairs(rest));
        } else if line.starts_with("baseOffset: ") {
            batches.push(DumpedBatch {
                file: file.clone(),
                fields: pairs(line),
                records: Vec::new(),
            });
        }
    }
    batches
}

fn int(fields: &BTreeMap<String, String>, name: &str) -> i64 {
    fields
        .get(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("kafka-dump-log printed no integer {name}: {fields:?}"))
}

fn flag(fields: &BTreeMap<String, String>, name: &str) -> bool {
    fields.get(name).is_some_and(|v| v == "true")
}

/// A producer batch as the producer sent it: base offset 0 and partition leader epoch -1. The broker's
/// in-place offset assignment sets only these two fields of a v2 CreateTime batch, and the CRC covers
/// neither (kafka-storage.md §1.1), so the rest is the broker's bytes and the CRC holds.
fn as_sent(batch: &mut [u8]) {
    batch[0..8].copy_from_slice(&0i64.to_be_bytes());
    batch[12..16].copy_from_slice(&(-1i32).to_be_bytes());
}

/// Cuts each batch of the `batches` topic into `<producer>.bin` (or `control-commit.bin` for the COMMIT of
/// `txn-none`, `control-abort.bin` for the ABORT) and describes it. Producer batches are written as sent
/// (`as_sent`), ready for `klog append`; the markers as the broker wrote them.
fn cut_batches(partition: &Path, sent: &[Value], out: &Path) -> Vec<Value> {
    std::fs::create_dir_all(out).expect("create batches/");
    let by_offset: BTreeMap<i64, &Value> = sent
        .iter()
        .map(|r| (r["offset"].as_i64().expect("offset"), r))
        .collect();
    let mut described = Vec::new();
    for b in dumped(partition) {
        let base = int(&b.fields, "baseOffset");
        let last = int(&b.fields, "lastOffset");
        let control = flag(&b.fields, "isControl");
        let (name, control_type, records) = if control {
            let r = &b.records[0];
            let marker = r.get("endTxnMarker").expect("an end-transaction marker");
            let epoch = int(r, "coordinatorEpoch");
            let previous = &by_offset[&(base - 1)]["producer"];
            let name = match (marker.as_str(), previous.as_str()) {
                ("COMMIT", Some("txn-none")) => "control-commit",
                ("ABORT", _) => "control-abort",
                _ => continue,
            };
            (
                name.to_owned(),
                json!(marker.to_lowercase()),
                vec![control_record(r, base, marker, epoch)],
            )
        } else {
            let first = by_offset[&base];
            let records: Vec<Value> = (base..=last).map(|o| record(by_offset[&o], base)).collect();
            (
                first["producer"].as_str().expect("producer").to_owned(),
                Value::Null,
                records,
            )
        };
        let position = int(&b.fields, "position") as usize;
        let size = int(&b.fields, "size") as usize;
        let segment = std::fs::read(&b.file).expect("read the segment");
        let mut bytes = segment[position..position + size].to_vec();
        if !control {
            as_sent(&mut bytes);
        }
        let file = format!("{name}.bin");
        std::fs::write(out.join(&file), &bytes).expect("write a batch");
        described.push(batch_json(&file, &b, control_type, records));
    }
    described
}

fn batch_json(file: &str, b: &DumpedBatch, control_type: Value, records: Vec<Value>) -> Value {
    let f = &b.fields;
    let log_base_offset = int(f, "baseOffset");
    let control = flag(f, "isControl");
    let (base, epoch) = if control {
        (log_base_offset, int(f, "partitionLeaderEpoch"))
    } else {
        (0, -1)
    };
    json!({
        "file": file,
        "size": int(f, "size"),
        "base_offset": base,
        "log_base_offset": log_base_offset,
        "batch_length": int(f, "size") - 12,
        "partition_leader_epoch": epoch,
        "magic": int(f, "magic"),
        "crc": int(f, "crc"),
        "codec": f["compresscodec"],
        "timestamp_type": "CreateTime",
        "is_transactional": flag(f, "isTransactional"),
        "is_control": flag(f, "isControl"),
        "last_offset_delta": int(f, "lastOffset") - log_base_offset,
        "first_timestamp": records[0]["timestamp"],
        "max_timestamp": int(f, "CreateTime"),
        "producer_id": int(f, "producerId"),
        "producer_epoch": int(f, "producerEpoch"),
        "base_sequence": int(f, "baseSequence"),
        "record_count": int(f, "count"),
        "control_type": control_type,
        "records": records,
    })
}

/// A record as the producer sent it (headers as `[key, value hex]` pairs), its offset counted from the
/// batch's base offset `base` in the log, as in the batch the producer sent.
fn record(sent: &Value, base: i64) -> Value {
    let headers: Vec<Value> = sent["headers"]
        .as_array()
        .expect("headers")
        .iter()
        .map(|h| json!([h["key"], h["value"]]))
        .collect();
    json!({
        "offset": sent["offset"].as_i64().expect("offset") - base,
        "timestamp": sent["timestamp"],
        "key": sent["key"],
        "value": sent["value"],
        "headers": headers,
    })
}

/// An end-transaction marker's record: key (version 0, type) and value (version 0, coordinator epoch),
/// kafka-storage.md §1.4, from the type and epoch `kafka-dump-log` printed.
fn control_record(r: &BTreeMap<String, String>, offset: i64, marker: &str, epoch: i64) -> Value {
    let kind = if marker == "COMMIT" { 1 } else { 0 };
    json!({
        "offset": offset,
        "timestamp": int(r, "CreateTime"),
        "key": format!("0000{kind:04x}"),
        "value": format!("0000{epoch:08x}"),
        "headers": [],
    })
}

/// Per copy and partition: each segment's batches, records and control batches as Kafka counts them, and
/// the log end offset.
fn partitions(root: &Path) -> Value {
    let mut copies = serde_json::Map::new();
    for copy in sorted_entries(root) {
        let mut parts = serde_json::Map::new();
        for partition in sorted_entries(&copy).into_iter().filter(|p| p.is_dir()) {
            let mut segments: BTreeMap<String, (usize, i64, usize)> = BTreeMap::new();
            let mut end = 0;
            for b in dumped(&partition) {
                let name = b
                    .file
                    .file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned();
                let seg = segments.entry(name).or_default();
                seg.0 += 1;
                seg.1 += int(&b.fields, "count");
                seg.2 += usize::from(flag(&b.fields, "isControl"));
                end = int(&b.fields, "lastOffset") + 1;
            }
            let segments: Vec<Value> = segments
                .into_iter()
                .map(|(file, (batches, records, control))| {
                    json!({"file": file, "batches": batches, "records": records, "control_batches": control})
                })
                .collect();
            let name = partition
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            parts.insert(name, json!({"log_end_offset": end, "segments": segments}));
        }
        let name = copy
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        copies.insert(name, Value::Object(parts));
    }
    Value::Object(copies)
}
