//! `klog read --isolation-level`: a read_committed fetch stops at the last stable offset and leaves out the
//! batches of aborted transactions (from the `.txnindex`), as a Kafka consumer at that level sees the log.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{klog, scratch_dir, stderr, stdout};
use klog::log::config::LogConfig;
use klog::log::format::{BatchBuilder, Compression, ControlRecordType};
use klog::log::io::StdStorage;
use klog::log::log_dir::LogDir;
use klog::log::validator::AppendOrigin;
use serde_json::Value;

const TS: i64 = 1_700_000_000_000;

/// A batch of 2 records; with a producer it is transactional.
fn data(producer_id: Option<i64>) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    if let Some(pid) = producer_id {
        b = b.producer(pid, 0, 0).transactional(true);
    }
    b.append(TS, Some(b"k"), Some(b"v1"), &[]).unwrap();
    b.append(TS, Some(b"k"), Some(b"v2"), &[]).unwrap();
    b.build().unwrap()
}

fn marker(kind: ControlRecordType, producer_id: i64) -> Vec<u8> {
    BatchBuilder::end_txn_marker(kind, producer_id, 0, 0, TS)
        .unwrap()
        .build()
        .unwrap()
}

/// Offsets: 0-1 txn of producer 1 (committed at 6), 2-3 txn of producer 2 (aborted at 7), 4-5 plain,
/// 6 COMMIT, 7 ABORT, 8-9 txn of producer 3 (still open: the LSO is 8), 10-11 plain. High watermark 12.
fn write_log(root: &Path) {
    let mut log_dir = LogDir::open(Arc::new(StdStorage), root).unwrap();
    let (log, _) = log_dir
        .open_partition("payments-0", LogConfig::default())
        .unwrap();
    for (mut bytes, origin) in [
        (data(Some(1)), AppendOrigin::Client),
        (data(Some(2)), AppendOrigin::Client),
        (data(None), AppendOrigin::Client),
        (
            marker(ControlRecordType::Commit, 1),
            AppendOrigin::Coordinator,
        ),
        (
            marker(ControlRecordType::Abort, 2),
            AppendOrigin::Coordinator,
        ),
        (data(Some(3)), AppendOrigin::Client),
        (data(None), AppendOrigin::Client),
    ] {
        log.append_as_leader_with_origin(&mut bytes, 0, origin)
            .unwrap();
    }
    assert_eq!(log.log_end_offset(), 12);
    log.update_high_watermark(12);
    log_dir.close_partition(log).unwrap();
    log_dir.close().unwrap();
}

fn read_json(dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["read", dir.to_str().unwrap(), "--offset", "0", "--json"];
    args.extend_from_slice(extra);
    let out = klog(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

fn base_offsets(v: &Value) -> Vec<i64> {
    v["batches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["base_offset"].as_i64().unwrap())
        .collect()
}

#[test]
fn read_committed_stops_at_the_lso_and_leaves_out_aborted_batches() {
    let root = scratch_dir("cli-read-isolation");
    write_log(&root);
    let dir = root.join("payments-0");

    let v = read_json(&dir, &["--isolation-level", "read_committed"]);
    assert_eq!(v["isolation_level"], "read_committed");
    assert_eq!(v["last_stable_offset"], 8);
    assert_eq!(v["next_offset"], 8, "bounded by the LSO, not the HW");
    // Producer 2's batch at 2 is aborted; the markers stay (a fetch returns them, the consumer skips them).
    assert_eq!(base_offsets(&v), vec![0, 4, 6, 7]);
    assert_eq!(
        v["aborted_transactions"],
        serde_json::json!([{"producer_id": 2, "first_offset": 2}])
    );

    let v = read_json(&dir, &["--isolation-level", "read_uncommitted"]);
    assert_eq!(v["isolation_level"], "read_uncommitted");
    assert_eq!(v["next_offset"], 12);
    assert_eq!(base_offsets(&v), vec![0, 2, 4, 6, 7, 8, 10]);
    // The default is a consumer's default: read_uncommitted.
    assert_eq!(base_offsets(&read_json(&dir, &[])), base_offsets(&v));

    // Text mode names the level and the LSO too.
    let out = klog(&[
        "read",
        dir.to_str().unwrap(),
        "--offset",
        "0",
        "--isolation-level",
        "read_committed",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("last stable offset: 8"), "{text}");
    assert!(!text.contains("baseOffset: 2 "), "{text}");
    assert!(text.contains("baseOffset: 4 "), "{text}");
}

#[test]
fn an_unknown_isolation_level_is_refused_by_name() {
    let root = scratch_dir("cli-read-isolation-bad");
    write_log(&root);
    let out = klog(&[
        "read",
        root.join("payments-0").to_str().unwrap(),
        "--offset",
        "0",
        "--isolation-level",
        "serializable",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("serializable") && err.contains("read_committed"),
        "{err}"
    );
}
