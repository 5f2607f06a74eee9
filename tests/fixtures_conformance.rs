//! `klog dump --json --deep` against the fixtures: every field of every manifest entry, and every batch and
//! record of the real Kafka segments. The repository's own `fixtures/` always; `../shared/fixtures` too
//! when it is beside the checkout (required in CI).

mod common;

use std::path::Path;

use common::{fixture_manifest, fixture_segments, fixtures, klog, shared_fixtures, stdout};
use serde_json::Value;

fn dump_json(path: &std::path::Path) -> Vec<Value> {
    let out = klog(&["dump", "--json", "--deep", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "dump failed on {}: {}",
        path.display(),
        common::stderr(&out)
    );
    stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

fn timestamp_type(manifest: &str) -> &'static str {
    match manifest {
        "CreateTime" => "create_time",
        "LogAppendTime" => "log_append_time",
        other => panic!("unexpected timestamp type {other}"),
    }
}

/// Every single-batch file of `fixtures/batches/` is in the manifest, and klog's dump agrees with it.
#[test]
fn dump_reproduces_every_manifest_entry() {
    let dir = fixtures().join("batches");
    let manifest = fixture_manifest();
    let entries = manifest["batches"].as_array().unwrap();
    let bins = common::sorted_entries(&dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .count();
    assert_eq!(entries.len(), bins, "every .bin is described");
    let want: u64 = entries
        .iter()
        .map(|m| m["record_count"].as_u64().unwrap())
        .sum();
    assert_eq!(check_manifest_entries(&dir, entries), want);
    for kind in ["none", "gzip", "snappy", "lz4", "zstd"] {
        assert!(entries.iter().any(|m| m["codec"] == kind), "{kind}");
    }
    for control in ["commit", "abort"] {
        assert!(entries.iter().any(|m| m["control_type"] == control));
    }
}

#[test]
fn dump_reproduces_every_shared_manifest_entry() {
    let Some(shared) = shared_fixtures() else {
        return;
    };
    let dir = shared.join("batches");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let files = manifest["files"].as_array().unwrap();
    assert_eq!(files.len(), 13);
    assert_eq!(check_manifest_entries(&dir, files), 5 * 11 + 2);
}

/// Dumps each described file and compares every field and record; returns the records checked.
fn check_manifest_entries(dir: &Path, files: &[Value]) -> u64 {
    let mut records_checked = 0;
    for m in files {
        let name = m["file"].as_str().unwrap();
        let batches = dump_json(&dir.join(name));
        assert_eq!(batches.len(), 1, "{name} holds one batch");
        let b = &batches[0];
        let same = |ours: &str, theirs: &str| assert_eq!(b[ours], m[theirs], "{name}: {ours}");
        same("base_offset", "base_offset");
        same("partition_leader_epoch", "partition_leader_epoch");
        same("magic", "magic");
        same("crc", "crc");
        same("compression", "codec");
        same("is_transactional", "is_transactional");
        same("is_control", "is_control");
        same("control_type", "control_type");
        same("producer_id", "producer_id");
        same("producer_epoch", "producer_epoch");
        same("base_sequence", "base_sequence");
        same("record_count", "record_count");
        same("base_timestamp", "first_timestamp");
        same("max_timestamp", "max_timestamp");
        assert_eq!(b["batch_size"], m["size"], "{name}: size");
        assert_eq!(
            b["batch_size"].as_i64().unwrap(),
            m["batch_length"].as_i64().unwrap() + 12
        );
        assert_eq!(b["crc_valid"], Value::Bool(true), "{name}");
        assert_eq!(
            b["timestamp_type"],
            timestamp_type(m["timestamp_type"].as_str().unwrap()),
            "{name}"
        );
        let last = m["base_offset"].as_i64().unwrap() + m["last_offset_delta"].as_i64().unwrap();
        assert_eq!(b["last_offset"], last, "{name}: last offset");
        let records = b["records"].as_array().unwrap();
        let expected = m["records"].as_array().unwrap();
        assert_eq!(records.len(), expected.len(), "{name}: record count");
        for (r, e) in records.iter().zip(expected) {
            for k in ["offset", "timestamp", "key", "value"] {
                assert_eq!(r[k], e[k], "{name}: record {} {k}", e["offset"]);
            }
            let headers: Vec<(Value, Value)> = r["headers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| (h["key"].clone(), h["value"].clone()))
                .collect();
            let want: Vec<(Value, Value)> = e["headers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| (h[0].clone(), h[1].clone()))
                .collect();
            assert_eq!(headers, want, "{name}: record {} headers", e["offset"]);
            records_checked += 1;
        }
    }
    records_checked
}

/// Every segment of the repository's Kafka partition directories: batch and record counts as
/// `kafka-dump-log` counted them (the manifest), contiguous offsets and positions, valid CRCs.
#[test]
fn dump_decodes_every_fixture_segment() {
    let manifest = fixture_manifest();
    let root = fixtures();
    let segments = fixture_segments(&root);
    let mut expected = Vec::new();
    for (copy, partitions) in manifest["partitions"].as_object().unwrap() {
        for (partition, p) in partitions.as_object().unwrap() {
            for seg in p["segments"].as_array().unwrap() {
                let path = root
                    .join("kafka-segments")
                    .join(copy)
                    .join(partition)
                    .join(seg["file"].as_str().unwrap());
                let counts = (
                    seg["batches"].as_u64().unwrap(),
                    seg["records"].as_u64().unwrap(),
                );
                expected.push((path, counts));
            }
        }
    }
    expected.sort();
    let listed: Vec<_> = expected.iter().map(|(p, _)| p.clone()).collect();
    assert_eq!(segments, listed, "the manifest describes every segment");
    for (seg, (batches, records)) in &expected {
        check_segment(seg, *batches as usize, *records as i64);
    }
    // The quirks that make these logs worth having: a KRaft log opening with control records, producer ids
    // on every workload batch, transactions ended by markers.
    let dumped = |p: &str| dump_json(&root.join("kafka-segments/clean").join(p));
    let metadata = dumped("__cluster_metadata-0/00000000000000000000.log");
    assert!(metadata[0]["is_control"] == true && metadata.iter().all(|b| b["producer_id"] == -1));
    let txn = dumped("batches-0/00000000000000000000.log");
    assert!(txn.iter().all(|b| b["producer_id"].as_i64().unwrap() >= 0));
    assert!(txn.iter().any(|b| b["control_type"] == "abort"));
}

/// The four real Kafka segments of the shared fixtures (numbers from their README).
#[test]
fn dump_decodes_every_shared_fixture_segment() {
    let Some(shared) = shared_fixtures() else {
        return;
    };
    let expected = [
        ("cities-0", 11, 11),
        ("__cluster_metadata-0", 1842, 2067),
        ("__consumer_offsets-15", 88, 256),
        ("test-0", 28, 97),
    ];
    let segments = fixture_segments(&shared);
    assert_eq!(segments.len(), 4);
    for seg in segments {
        let partition = seg.parent().unwrap().file_name().unwrap().to_str().unwrap();
        let &(_, batches_want, records_want) = expected
            .iter()
            .find(|(p, ..)| *p == partition)
            .expect("known partition");
        let batches = check_segment(&seg, batches_want, records_want);
        // Quirks the README documents.
        match partition {
            "__cluster_metadata-0" => assert_eq!(batches[0]["control_type"], "leader_change"),
            "__consumer_offsets-15" => {
                assert!(batches
                    .iter()
                    .all(|b| b["producer_id"] == -1 && b["base_sequence"] == 0))
            }
            "test-0" => assert!(batches
                .iter()
                .all(|b| b["producer_id"] == 0 && b["base_sequence"] == b["base_offset"])),
            _ => {}
        }
    }
}

/// Dumps one segment (named by its base offset) and checks its counts, offsets, positions and CRCs.
fn check_segment(seg: &Path, batches_want: usize, records_want: i64) -> Vec<Value> {
    let partition = seg.parent().unwrap().display().to_string();
    let base_offset: i64 = seg.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    let batches = dump_json(seg);
    assert_eq!(batches.len(), batches_want, "{partition}");
    let mut next_offset = base_offset;
    let mut position = 0;
    let mut records = 0;
    for b in &batches {
        assert_eq!(b["crc_valid"], Value::Bool(true));
        assert_eq!(
            b["base_offset"], next_offset,
            "{partition}: offsets are contiguous"
        );
        assert_eq!(
            b["position"], position,
            "{partition}: positions are contiguous"
        );
        for r in b["records"].as_array().unwrap() {
            assert_eq!(r["offset"], next_offset);
            next_offset += 1;
            records += 1;
        }
        assert_eq!(b["last_offset"], next_offset - 1);
        position += b["batch_size"].as_i64().unwrap();
    }
    assert_eq!(records, records_want, "{partition}");
    assert_eq!(
        position as u64,
        std::fs::metadata(seg).unwrap().len(),
        "{partition}: no tail"
    );
    batches
}
