//! `klog append`, `klog read` and `klog dump` of the files around the batches, on a fresh log directory and
//! on a copy of a real Kafka partition directory.

mod common;

use std::path::Path;

use common::{fixture_manifest, fixtures, klog, scratch_dir, shared_fixtures, stderr, stdout};
use klog::log::format::{BatchBuilder, Compression};
use serde_json::Value;

/// `n` batches of 2 records. With `base_offset` None they are producer batches (base offset 0 each);
/// otherwise follower batches numbered from it.
fn batches(n: usize, base_offset: Option<i64>, epoch: i32) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        let base = base_offset.map_or(0, |b| b + i as i64 * 2);
        let mut b = BatchBuilder::new(Compression::None)
            .base_offset(base)
            .partition_leader_epoch(epoch);
        for j in 0..2 {
            b.append(
                1_700_000_000_000 + (i * 2 + j) as i64,
                Some(b"key"),
                Some(&vec![b'x'; 3000]),
                &[],
            )
            .unwrap();
        }
        b.build_into(&mut out).unwrap();
    }
    out
}

fn json_lines(s: &str) -> Vec<Value> {
    s.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn append_read_and_dump_on_a_fresh_directory() {
    let root = scratch_dir("cli-log-fresh");
    let input = root.join("in.bin");
    std::fs::write(&input, batches(12, None, 0)).unwrap();
    let dir = root.join("logs/orders-3");
    let d = dir.to_str().unwrap();
    let out = klog(&[
        "append",
        d,
        input.to_str().unwrap(),
        "--leader-epoch",
        "4",
        "--json",
        "--config",
        "segment.bytes=20000",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = json_lines(&stdout(&out));
    assert_eq!(lines.len(), 12);
    assert_eq!(
        (
            lines[11]["base_offset"].as_i64(),
            lines[11]["last_offset"].as_i64()
        ),
        (Some(22), Some(23))
    );

    let out = klog(&["read", d, "--offset", "5", "--max-bytes", "10", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        v["batches"].as_array().unwrap().len(),
        1,
        "at least one whole batch"
    );
    assert_eq!(v["batches"][0]["base_offset"], 4);
    assert_eq!(v["batches"][0]["partition_leader_epoch"], 4);
    assert_eq!(
        (
            v["next_offset"].as_i64(),
            v["high_watermark"].as_i64(),
            v["log_end_offset"].as_i64()
        ),
        (Some(6), Some(24), Some(24))
    );

    // segment.bytes=20000 rolled: several segments, each with an index and a time index.
    let mut segments: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    segments.sort();
    assert!(segments.len() >= 2, "{segments:?}");
    let index = segments[0].with_extension("index");
    let out = klog(&["dump", "--json", index.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let entries = json_lines(&stdout(&out));
    assert!(
        !entries.is_empty(),
        "3 KiB records with a 4096-byte interval give index entries"
    );
    let out = klog(&["dump", "--index-sanity-check", index.to_str().unwrap()]);
    assert!(
        stdout(&out).contains("passed sanity check."),
        "{}",
        stdout(&out)
    );
    let out = klog(&[
        "dump",
        "--json",
        dir.join("leader-epoch-checkpoint").to_str().unwrap(),
    ]);
    assert_eq!(
        json_lines(&stdout(&out)),
        vec![serde_json::json!({"epoch": 4, "start_offset": 0})]
    );
    let out = klog(&[
        "dump",
        "--json",
        root.join("logs/recovery-point-offset-checkpoint")
            .to_str()
            .unwrap(),
    ]);
    assert_eq!(
        json_lines(&stdout(&out)),
        vec![serde_json::json!({"topic": "orders", "partition": 3, "offset": 24})]
    );
    let out = klog(&[
        "dump",
        "--json",
        root.join("logs/replication-offset-checkpoint")
            .to_str()
            .unwrap(),
    ]);
    assert_eq!(json_lines(&stdout(&out))[0]["offset"], 24);

    // A stale leader epoch is fenced; nothing is written.
    let out = klog(&[
        "append",
        d,
        input.to_str().unwrap(),
        "--leader-epoch",
        "2",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(json_lines(&stdout(&out))
        .iter()
        .all(|l| l["error"] == "FENCED_LEADER_EPOCH"));
    let out = klog(&["read", d, "--offset", "24", "--json"]);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["log_end_offset"], 24);
    let out = klog(&["read", d, "--offset", "99", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        serde_json::from_str::<Value>(&stdout(&out)).unwrap()["error"],
        "OFFSET_OUT_OF_RANGE"
    );
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
    }
}

/// A copy of the broker's `batches-0` (its `.log` and `partition.metadata` only), appended to as a follower.
#[test]
fn follower_append_to_a_copy_of_a_kafka_directory() {
    let root = scratch_dir("cli-log-kafka-copy");
    let dir = root.join("logs/batches-0");
    let src = fixtures().join("kafka-segments/clean/batches-0");
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["00000000000000000000.log", "partition.metadata"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let p = &fixture_manifest()["partitions"]["clean"]["batches-0"];
    let end = p["log_end_offset"].as_i64().unwrap();
    let kafka_batches = p["segments"][0]["batches"].as_u64().unwrap() as usize;
    follower_append_to(&root, &dir, end, kafka_batches);
}

/// The shared fixtures' Kafka 3.4 `test-0` (97 records in 28 batches), when present.
#[test]
fn follower_append_to_a_copy_of_a_shared_kafka_directory() {
    let Some(shared) = shared_fixtures() else {
        return;
    };
    let root = scratch_dir("cli-log-shared-kafka-copy");
    let dir = root.join("logs/test-0");
    copy_dir(&shared.join("kafka-segments/panic08/test-0"), &dir);
    follower_append_to(&root, &dir, 97, 28);
}

/// Appends three follower batches (two records each) at `end` to a Kafka partition directory without
/// indexes, reads everything back, checks the rebuilt indexes and a refused append going backwards.
fn follower_append_to(root: &Path, dir: &Path, end: i64, kafka_batches: usize) {
    let input = root.join("more.bin");
    std::fs::write(&input, batches(3, Some(end), 0)).unwrap();
    let d = dir.to_str().unwrap();
    let out = klog(&[
        "append",
        d,
        input.to_str().unwrap(),
        "--as",
        "follower",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json_lines(&stdout(&out))[2]["last_offset"], end + 5);
    // Kafka's records then ours, readable from the start (a read stays in one segment), every CRC valid.
    let mut offset = 0;
    let mut count = 0;
    while offset < end + 6 {
        let out = klog(&[
            "read",
            d,
            "--offset",
            &offset.to_string(),
            "--max-bytes",
            "100000000",
            "--json",
        ]);
        let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
        let batches = v["batches"].as_array().unwrap();
        assert!(batches.iter().all(|b| b["crc_valid"] == true));
        assert_eq!(v["log_end_offset"], end + 6);
        count += batches.len();
        offset = v["next_offset"].as_i64().unwrap();
    }
    assert_eq!(count, kafka_batches + 3);
    // Our append rebuilt the missing indexes; the dump checks them against the .log.
    let index = dir.join("00000000000000000000.index");
    let out = klog(&[
        "dump",
        index.to_str().unwrap(),
        dir.join("00000000000000000000.timeindex").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    // Appending a batch that goes backwards is refused with Kafka's reason.
    let out = klog(&[
        "append",
        d,
        input.to_str().unwrap(),
        "--as",
        "follower",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        json_lines(&stdout(&out))[0]["error"],
        "UNEXPECTED_APPEND_OFFSET"
    );
}

#[test]
fn bad_input_to_append_is_named() {
    let root = scratch_dir("cli-log-bad");
    let d = root.join("logs/t-0");
    let mut bytes = batches(2, None, 0);
    let n = bytes.len();
    bytes[n - 1] ^= 0xff;
    let input = root.join("bad.bin");
    std::fs::write(&input, &bytes).unwrap();
    let out = klog(&[
        "append",
        d.to_str().unwrap(),
        input.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let lines = json_lines(&stdout(&out));
    assert_eq!(lines[0]["base_offset"], 0);
    assert_eq!(lines[1]["error"], "CORRUPT_MESSAGE");
    assert!(
        lines[1]["message"].as_str().unwrap().contains("crc"),
        "{}",
        lines[1]
    );

    let out = klog(&[
        "append",
        d.to_str().unwrap(),
        input.to_str().unwrap(),
        "--config",
        "segment.bytes=12",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("segment.bytes"), "{}", stderr(&out));
    let out = klog(&["append", d.to_str().unwrap(), "/nonexistent.bin"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("/nonexistent.bin"));
    let out = klog(&[
        "read",
        root.join("logs/missing-0").to_str().unwrap(),
        "--offset",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(2));
}
