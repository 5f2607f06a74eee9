//! `klog producers` and `klog append` with real producers' batches: idempotence, a transaction, a retry, and
//! a MIRROR_PID_RESET barrier in the middle that leaves only later producers.

mod common;

use common::{fixtures, klog, scratch_dir, stderr, stdout};
use klog::log::format::BatchBuilder;
use serde_json::Value;

/// The fixtures' producers last wrote when the fixtures were recorded, longer ago than Kafka's default
/// `producer.id.expiration.ms` (one day). Each command closes the directory cleanly, so the next open loads
/// the producer snapshot, which expires them as Kafka's `loadFromSnapshot` does: the test remembers them
/// for ten years instead.
const KEEP_PRODUCERS: &str = "producer.id.expiration.ms=315360000000";

fn append(dir: &str, file: &std::path::Path) -> Vec<Value> {
    let out = klog(&[
        "append",
        dir,
        file.to_str().unwrap(),
        "--json",
        "--config",
        KEEP_PRODUCERS,
    ]);
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn producers(dir: &str) -> Value {
    let out = klog(&["producers", dir, "--json", "--config", KEEP_PRODUCERS]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

fn pids(v: &Value) -> Vec<i64> {
    v["producers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["producer_id"].as_i64().unwrap())
        .collect()
}

#[test]
fn producers_show_idempotent_and_transactional_state_and_the_barrier_clears_it() {
    let root = scratch_dir("cli-producers");
    let dir = root.join("logs/orders-0");
    let d = dir.to_str().unwrap();
    let batches = fixtures().join("batches");

    assert_eq!(
        append(d, &batches.join("librdkafka-idempotent-none.bin"))[0]["last_offset"],
        4
    );
    assert_eq!(
        append(d, &batches.join("librdkafka-idempotent-gzip.bin"))[0]["base_offset"],
        5
    );
    let txn = append(d, &batches.join("kafka-python-txn-none.bin"));
    assert_eq!(
        (
            txn[0]["base_offset"].as_i64(),
            txn[0]["last_offset"].as_i64()
        ),
        (Some(10), Some(14))
    );
    // The same producer, epoch and sequences again: a retry. Nothing is written; the original offsets return.
    let retry = append(d, &batches.join("kafka-python-txn-gzip.bin"));
    assert_eq!(retry[0]["duplicate"], true);
    assert_eq!(
        (
            retry[0]["base_offset"].as_i64(),
            retry[0]["last_offset"].as_i64()
        ),
        (Some(10), Some(14))
    );

    let state = producers(d);
    assert_eq!(pids(&state), vec![1, 2, 4242]);
    assert_eq!(state["log_end_offset"], 15);
    assert_eq!(state["high_watermark"], 15);
    assert_eq!(
        state["first_unstable_offset"], 10,
        "the kafka-python transaction is open"
    );
    assert_eq!(state["last_stable_offset"], 10);
    let p4242 = &state["producers"][2];
    assert_eq!(
        (
            p4242["producer_epoch"].as_i64(),
            p4242["last_sequence"].as_i64()
        ),
        (Some(3), Some(21))
    );
    assert_eq!(p4242["current_txn_first_offset"], 10);
    assert_eq!(
        (
            p4242["last_offset"].as_i64(),
            p4242["offset_delta"].as_i64()
        ),
        (Some(14), Some(4))
    );
    let p1 = &state["producers"][0];
    assert_eq!(
        (
            p1["last_sequence"].as_i64(),
            p1["current_txn_first_offset"].clone()
        ),
        (Some(4), Value::Null)
    );

    // A stale sequence from producer 1 is refused with Kafka's error name.
    let out = klog(&[
        "append",
        d,
        batches
            .join("librdkafka-idempotent-none.bin")
            .to_str()
            .unwrap(),
        "--json",
        "--config",
        KEEP_PRODUCERS,
    ]);
    let v: Value = serde_json::from_str(stdout(&out).lines().next().unwrap()).unwrap();
    assert_eq!(
        v["duplicate"], true,
        "the same batch again is a retry of the last one"
    );

    // The barrier: every producer and the open transaction are forgotten.
    let barrier = root.join("barrier.bin");
    std::fs::write(
        &barrier,
        BatchBuilder::mirror_pid_reset("c291cmNlLWNsdXN0ZXItaWQ", 1_700_000_000_000)
            .unwrap()
            .build()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(append(d, &barrier)[0]["base_offset"], 15);
    assert_eq!(
        append(d, &batches.join("librdkafka-idempotent-lz4.bin"))[0]["base_offset"],
        16
    );
    let state = producers(d);
    assert_eq!(pids(&state), vec![4], "only the producer after the barrier");
    assert_eq!(state["first_unstable_offset"], Value::Null);
    assert_eq!(state["last_stable_offset"], 21);

    // A clean close left a snapshot at the log end; its dump shows producer 4.
    let snap = dir.join("00000000000000000021.snapshot");
    let out = klog(&["dump", "--json", snap.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let entries: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        (
            entries[0]["producer_id"].as_i64(),
            entries[0]["last_sequence"].as_i64()
        ),
        (Some(4), Some(4))
    );
}
