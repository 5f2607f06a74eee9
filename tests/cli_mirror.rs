//! The S2 failover and S3 failback run by hand with `klog cluster/topic/append/mirror` (the script in
//! docs/mirroring.md), checking `klog mirror describe --json` against what the spec predicts.

mod common;

use std::path::Path;

use common::{fixtures, klog, klog_ok, scratch_dir, stderr, stdout};
use serde_json::Value;

fn batch(name: &str) -> String {
    fixtures()
        .join("batches")
        .join(name)
        .to_str()
        .unwrap()
        .to_owned()
}

fn describe(root: &Path) -> Value {
    let out = klog_ok(&["mirror", "describe", root.to_str().unwrap(), "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    v["partitions"][0].clone()
}

#[test]
fn failover_and_failback_by_hand() {
    let dir = scratch_dir("cli_mirror");
    let (a, b) = (dir.join("A"), dir.join("B"));
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    let (at, bt) = (a.join("t-0"), b.join("t-0"));
    let (at_s, bt_s) = (at.to_str().unwrap(), bt.to_str().unwrap());
    klog_ok(&["cluster", "init", a_s]);
    klog_ok(&["cluster", "init", b_s]);
    klog_ok(&["topic", "create", a_s, "t"]);
    // Source data (fixtures/batches, five records per batch): an idempotent producer, a committed
    // transaction and its COMMIT marker, two elections, another idempotent producer at epoch 2.
    klog_ok(&["append", at_s, &batch("idempotent-none.bin")]);
    klog_ok(&["append", at_s, &batch("txn-none.bin")]);
    klog_ok(&["append", at_s, &batch("control-commit.bin")]);
    klog_ok(&["topic", "elect", a_s, "t"]);
    klog_ok(&["topic", "elect", a_s, "t"]);
    klog_ok(&["append", at_s, &batch("idempotent-gzip.bin")]);

    // S1: mirror A -> B.
    klog_ok(&["mirror", "create", b_s, "m", "--source", a_s]);
    klog_ok(&["mirror", "add", b_s, "m", "t"]);
    let run = klog_ok(&["mirror", "run", b_s, "--until-idle"]);
    assert!(run.contains("t-0: UNKNOWN -> PREPARING") && run.contains("PREPARING -> MIRRORING"));
    let d = describe(&b);
    assert_eq!(d["state"], "MIRRORING");
    assert_eq!(d["log_end_offset"], 16);
    assert_eq!(d["lag"], 0);
    assert_eq!(
        std::fs::read(at.join("00000000000000000000.log")).unwrap(),
        std::fs::read(bt.join("00000000000000000000.log")).unwrap()
    );
    // Read-only: `klog append` on the mirror partition is refused.
    let out = klog(&["append", bt_s, &batch("idempotent-lz4.bin"), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let line: Value = serde_json::from_str(stdout(&out).lines().next().unwrap()).unwrap();
    assert_eq!(line["error"], "READ_ONLY_TOPIC");

    // S2: failover.
    klog_ok(&["mirror", "remove", b_s, "m", "t"]);
    let run = klog_ok(&["mirror", "run", b_s, "--until-idle"]);
    assert!(run.contains("MIRRORING -> STOPPING") && run.contains("STOPPING -> STOPPED"));
    let d = describe(&b);
    assert_eq!(d["state"], "STOPPED");
    assert_eq!(d["last_mirrored_epoch"], 2);
    // Kept 10 above the source's epoch (2) while mirroring: the barrier is at it.
    assert_eq!(d["leader_epoch"], 12);
    assert_eq!(d["log_end_offset"], 17, "the barrier takes offset 16");
    assert_eq!(d["producers"], 0);
    let dump = klog_ok(&[
        "dump",
        "--deep",
        bt.join("00000000000000000000.log").to_str().unwrap(),
    ]);
    assert!(
        dump.contains("| offset: 16 ") && dump.contains(r#"mirrorPidReset: {"version":0}"#),
        "{dump}"
    );
    // The first idempotent producer starts again at sequence 0: accepted, not a duplicate.
    let appended = klog_ok(&["append", bt_s, &batch("idempotent-none.bin")]);
    assert!(appended.contains("appended offsets 17..=21"), "{appended}");

    // S3 case a: A took a stray write while cut off, then mirrors back from B.
    klog_ok(&["append", at_s, &batch("idempotent-snappy.bin")]);
    klog_ok(&["mirror", "create", a_s, "back", "--source", b_s]);
    klog_ok(&["mirror", "add", a_s, "back", "t"]);
    let run = klog_ok(&["mirror", "run", a_s, "--until-idle", "--json"]);
    let summary: Value = serde_json::from_str(run.lines().last().unwrap()).unwrap();
    assert_eq!(
        summary["truncations"], 1,
        "PREPARING's alignment cut the stray write"
    );
    let d = describe(&a);
    assert_eq!(d["state"], "MIRRORING");
    assert_eq!(d["log_end_offset"], 22);
    assert_eq!(
        std::fs::read(at.join("00000000000000000000.log")).unwrap(),
        std::fs::read(bt.join("00000000000000000000.log")).unwrap(),
        "A's log is B's, byte for byte"
    );
    // __mirror_state is decoded by dump.
    let state_dump = klog_ok(&[
        "dump",
        a.join("__mirror_state-0")
            .join("00000000000000000000.log")
            .to_str()
            .unwrap(),
        a.join("__mirror_state-1")
            .join("00000000000000000000.log")
            .to_str()
            .unwrap(),
        a.join("__mirror_state-2")
            .join("00000000000000000000.log")
            .to_str()
            .unwrap(),
    ]);
    assert!(
        state_dump.contains("\"state\":\"MIRRORING\""),
        "{state_dump}"
    );
    assert!(state_dump.contains("\"mirrorName\":\"back\""));

    // Lifecycle from the CLI: deleting a mirror with a topic still mirroring fails.
    let out = klog(&["mirror", "delete", a_s, "back"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("MIRROR_NOT_EMPTY"));
    let out = klog(&["mirror", "pause", a_s, "nope", "t", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("UNKNOWN_MIRROR"));
    let out = klog(&["mirror", "describe", dir.join("nothing").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("not a klog cluster"),
        "{}",
        stderr(&out)
    );
}

/// `klog demo` tells the failover story end to end and leaves clusters the CLI can read.
#[test]
fn demo_tells_the_failover_story() {
    let dir = scratch_dir("cli_demo");
    let out = klog_ok(&["demo", "--dir", dir.to_str().unwrap()]);
    for needle in [
        "1. [",
        "orders-0: UNKNOWN -> PREPARING",
        "segment byte-identical",
        "refused with READ_ONLY_TOPIC",
        "orders-0: STOPPING -> STOPPED",
        "MIRROR_PID_RESET at offset 38",
        "writes again from sequence 0 at offset 39",
        "stray write at offset 38 was cut (1 truncation)",
        "both logs byte-identical, 44 offsets",
        "mirror state STOPPED",
        "group billing committed offset 19",
        "group billing's offset 19 carried into __consumer_offsets",
        "group billing: offset 19 on the new primary as on the old",
        r#"mirrorPidReset: {"version":0}"#,
        "export for a stock Kafka broker: 2 partitions",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
    }
    let d = describe(&dir.join("dr"));
    assert_eq!(d["state"], "STOPPED");
    assert_eq!(d["log_end_offset"], 49);
    assert!(
        dir.join("kafka/meta.properties").is_file(),
        "the export step"
    );
    let d = describe(&dir.join("primary"));
    assert_eq!(d["state"], "MIRRORING");
    assert_eq!(d["mirror"], "failback");
}

/// `klog group commit|describe`, and `klog mirror run` carrying a commit from a source read from disk,
/// clamped to what was mirrored (reported as an `offset_clamped` event) and followed once more arrives.
#[test]
fn group_offsets_by_hand() {
    let dir = scratch_dir("cli_group");
    let (a, b) = (dir.join("A"), dir.join("B"));
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    let at = a.join("t-0");
    klog_ok(&["cluster", "init", a_s]);
    klog_ok(&["cluster", "init", b_s]);
    klog_ok(&["topic", "create", a_s, "t"]);
    klog_ok(&[
        "append",
        at.to_str().unwrap(),
        &batch("idempotent-none.bin"),
    ]);
    let c: Value = serde_json::from_str(&klog_ok(&[
        "group", "commit", a_s, "g", "t", "0", "7", "--json",
    ]))
    .unwrap();
    assert_eq!(
        (c["group"].as_str(), c["offset"].as_i64()),
        (Some("g"), Some(7))
    );
    assert_eq!(c["leader_epoch"], 0);
    let text = klog_ok(&["group", "commit", a_s, "g", "t", "0", "3"]);
    assert!(
        text.contains("group g committed t-0 at offset 3 (leader epoch 0)"),
        "{text}"
    );
    let out = klog(&["group", "commit", a_s, "g", "nope", "0", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("UNKNOWN_TOPIC_OR_PARTITION"),
        "{}",
        stderr(&out)
    );
    let d: Value = serde_json::from_str(&klog_ok(&["group", "describe", a_s, "--json"])).unwrap();
    let row = &d["offsets"][0];
    assert_eq!(
        (
            &row["committed_offset"],
            &row["log_end_offset"],
            &row["lag"]
        ),
        (&Value::from(3), &Value::from(5), &Value::from(2))
    );
    // Committed beyond the source's end: the mirror clamps it to what it has.
    klog_ok(&["group", "commit", a_s, "h", "t", "0", "9"]);
    klog_ok(&["mirror", "create", b_s, "m", "--source", a_s]);
    klog_ok(&["mirror", "add", b_s, "m", "t"]);
    let run = klog_ok(&["mirror", "run", b_s, "--until-idle", "--json"]);
    let events: Vec<Value> = run
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let clamped: Vec<_> = events
        .iter()
        .filter(|e| e["event"] == "offset_clamped" && e["group"] == "h")
        .map(|e| (e["source_offset"].as_i64(), e["synced_offset"].as_i64()))
        .collect();
    assert_eq!(clamped.last(), Some(&(Some(9), Some(5))), "{run}");
    assert_eq!(
        events.last().unwrap()["offsets_synced"]
            .as_u64()
            .map(|n| n >= 2),
        Some(true)
    );
    let d: Value = serde_json::from_str(&klog_ok(&["group", "describe", b_s, "--json"])).unwrap();
    let rows: Vec<_> = d["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["group"].as_str().unwrap().to_owned(),
                r["committed_offset"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows, [("g".to_owned(), 3), ("h".to_owned(), 5)]);
    let text = klog_ok(&["group", "describe", b_s]);
    assert!(text.starts_with("GROUP"), "{text}");
}

/// `--stop-mode abort` by hand: a transaction open at the source (a transactional batch with no
/// marker) is mirrored (read_uncommitted) and aborted at the failover, at its source offset; describe
/// shows the mode. The default stays `truncate`; another value is a usage error.
#[test]
fn an_abort_mode_mirror_by_hand() {
    let dir = scratch_dir("cli_mirror_abort");
    let (a, b, c) = (dir.join("A"), dir.join("B"), dir.join("C"));
    let (a_s, b_s, c_s) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        c.to_str().unwrap(),
    );
    let at = a.join("t-0");
    for root in [a_s, b_s, c_s] {
        klog_ok(&["cluster", "init", root]);
    }
    klog_ok(&["topic", "create", a_s, "t"]);
    klog_ok(&[
        "append",
        at.to_str().unwrap(),
        &batch("idempotent-none.bin"),
    ]);
    klog_ok(&["append", at.to_str().unwrap(), &batch("txn-none.bin")]); // 5-9, left open
    let out = klog(&[
        "mirror",
        "create",
        b_s,
        "m",
        "--source",
        a_s,
        "--stop-mode",
        "drop",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let created = klog_ok(&[
        "mirror",
        "create",
        b_s,
        "m",
        "--source",
        a_s,
        "--stop-mode",
        "abort",
    ]);
    assert!(created.contains("(stop mode abort)"), "{created}");
    klog_ok(&["mirror", "create", c_s, "m", "--source", a_s]);
    for root in [b_s, c_s] {
        klog_ok(&["mirror", "add", root, "m", "t"]);
        klog_ok(&["mirror", "run", root, "--until-idle"]);
    }
    let (d, dc) = (describe(&b), describe(&c));
    assert_eq!(
        (&d["stop_mode"], &dc["stop_mode"]),
        (&"abort".into(), &"truncate".into())
    );
    assert_eq!(
        d["log_end_offset"], 10,
        "read_uncommitted: the open transaction too"
    );
    assert_eq!(
        dc["log_end_offset"], 5,
        "read_committed: up to the source's LSO"
    );
    let text = klog_ok(&["mirror", "describe", b_s]);
    assert!(text.contains("mirror m: stop mode abort"), "{text}");
    klog_ok(&["mirror", "remove", b_s, "m", "t"]);
    klog_ok(&["mirror", "run", b_s, "--until-idle"]);
    let d = describe(&b);
    assert_eq!(d["state"], "STOPPED");
    assert_eq!(d["log_end_offset"], 12, "an ABORT at 10, the barrier at 11");
    assert_eq!(d["last_stable_offset"], 12);
}

#[test]
fn mirror_create_takes_the_unclean_election_option_and_refuses_what_it_does_not_know() {
    let dir = scratch_dir("cli_mirror_configs_option");
    let (a, b) = (dir.join("A"), dir.join("B"));
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    klog_ok(&["cluster", "init", a_s]);
    klog_ok(&["cluster", "init", b_s]);
    let out = klog(&[
        "mirror",
        "create",
        b_s,
        "m",
        "--source",
        a_s,
        "--config",
        "mirror.no.such=1",
    ]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("mirror.no.such"), "{}", stderr(&out));
    let out = klog(&[
        "mirror", "create", b_s, "m", "--source", a_s, "--config", "novalue",
    ]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr(&out).contains("KEY=VALUE"), "{}", stderr(&out));
    klog_ok(&[
        "mirror",
        "create",
        b_s,
        "m",
        "--source",
        a_s,
        "--config",
        "mirror.support.unclean.leader.election=true",
    ]);
    let meta: Value =
        serde_json::from_slice(&std::fs::read(b.join("cluster.json")).unwrap()).unwrap();
    assert_eq!(
        meta["mirrors"]["m"]["support_unclean_leader_election"],
        true
    );
}
