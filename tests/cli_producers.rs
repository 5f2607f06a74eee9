//! `klog producers` and `klog append` with real producers' batches: idempotence, a transaction, a retry, and
//! a MIRROR_PID_RESET barrier in the middle that leaves only later producers.

mod common;

use common::{fixture_batch, fixtures, klog, scratch_dir, stderr, stdout};
use klog::log::format::{BatchBuilder, Compression};
use serde_json::Value;

/// The producer id, epoch and base sequence the broker gave a fixture batch (`fixtures/manifest.json`).
fn producer_of(file: &str) -> (i64, i16, i32) {
    let m = fixture_batch(file);
    let int = |k: &str| m[k].as_i64().unwrap();
    (
        int("producer_id"),
        int("producer_epoch") as i16,
        int("base_sequence") as i32,
    )
}

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

    let (idempotent, _, _) = producer_of("idempotent-none.bin");
    let (gzip, _, _) = producer_of("idempotent-gzip.bin");
    let (txn, txn_epoch, txn_sequence) = producer_of("txn-none.bin");
    assert_eq!(
        append(d, &batches.join("idempotent-none.bin"))[0]["last_offset"],
        4
    );
    assert_eq!(
        append(d, &batches.join("idempotent-gzip.bin"))[0]["base_offset"],
        5
    );
    let appended = append(d, &batches.join("txn-none.bin"));
    assert_eq!(
        (
            appended[0]["base_offset"].as_i64(),
            appended[0]["last_offset"].as_i64()
        ),
        (Some(10), Some(14))
    );
    // The same producer, epoch and sequences again, in another codec: a retry. Nothing is written; the
    // original offsets return.
    let mut again = BatchBuilder::new(Compression::Gzip)
        .producer(txn, txn_epoch, txn_sequence)
        .transactional(true);
    for i in 0..5 {
        again
            .append(1_700_000_000_000 + i, Some(b"k"), Some(b"retried"), &[])
            .unwrap();
    }
    let retry_file = root.join("retry.bin");
    std::fs::write(&retry_file, again.build().unwrap()).unwrap();
    let retry = append(d, &retry_file);
    assert_eq!(retry[0]["duplicate"], true);
    assert_eq!(
        (
            retry[0]["base_offset"].as_i64(),
            retry[0]["last_offset"].as_i64()
        ),
        (Some(10), Some(14))
    );

    let state = producers(d);
    let mut all = vec![idempotent, gzip, txn];
    all.sort();
    assert_eq!(pids(&state), all);
    assert_eq!(state["log_end_offset"], 15);
    assert_eq!(state["high_watermark"], 15);
    assert_eq!(
        state["first_unstable_offset"], 10,
        "the transaction is open"
    );
    assert_eq!(state["last_stable_offset"], 10);
    let of = |pid: i64| {
        state["producers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["producer_id"] == pid)
            .unwrap()
            .clone()
    };
    let p_txn = of(txn);
    assert_eq!(
        (
            p_txn["producer_epoch"].as_i64(),
            p_txn["last_sequence"].as_i64()
        ),
        (
            Some(i64::from(txn_epoch)),
            Some(i64::from(txn_sequence) + 4)
        )
    );
    assert_eq!(p_txn["current_txn_first_offset"], 10);
    assert_eq!(
        (
            p_txn["last_offset"].as_i64(),
            p_txn["offset_delta"].as_i64()
        ),
        (Some(14), Some(4))
    );
    let p1 = of(idempotent);
    assert_eq!(
        (
            p1["last_sequence"].as_i64(),
            p1["current_txn_first_offset"].clone()
        ),
        (Some(4), Value::Null)
    );

    // The first idempotent producer's batch again: a retry of its last batch.
    let out = klog(&[
        "append",
        d,
        batches.join("idempotent-none.bin").to_str().unwrap(),
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
        BatchBuilder::mirror_pid_reset(1_700_000_000_000)
            .unwrap()
            .build()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(append(d, &barrier)[0]["base_offset"], 15);
    assert_eq!(
        append(d, &batches.join("idempotent-lz4.bin"))[0]["base_offset"],
        16
    );
    let (lz4, _, _) = producer_of("idempotent-lz4.bin");
    let state = producers(d);
    assert_eq!(
        pids(&state),
        vec![lz4],
        "only the producer after the barrier"
    );
    assert_eq!(state["first_unstable_offset"], Value::Null);
    assert_eq!(state["last_stable_offset"], 21);

    // A clean close left a snapshot at the log end; its dump shows the lz4 producer.
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
        (Some(lz4), Some(4))
    );
}
