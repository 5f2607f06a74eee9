//! klog's side of the real-Kafka compaction tests: a broker's topic config read from its KRaft metadata
//! log, the broker's clean time recovered from the delete horizons it wrote, klog's pass over a copy of
//! the broker's log directory (`LogDir::clean`, the root's `cleaner-offset-checkpoint` read and written
//! as a broker does), and the records klog serves, in the Java consumer's JSON shape.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use klog::log::cleaner::{CleanOptions, CleanReport, CleanerConfig};
use klog::log::config::LogConfig;
use klog::log::format::{AnyBatch, Batches};
use klog::log::io::StdStorage;
use klog::log::kraft::loader::load_metadata_log;
use klog::log::log_dir::LogDir;
use klog::log::partition_log::PartitionLog;
use klog::log::Error;
use serde_json::{json, Value};

use super::cleaned::{batches, hex, owned_records, segments};
use super::compaction::{PARTITION, TOPIC};

/// TOPIC's config as broker 1 applies it, from the metadata log in `meta` (`metadata.log.dir`).
pub fn topic_config(meta: &Path) -> LogConfig {
    let dir = meta.join("__cluster_metadata-0");
    let metadata = load_metadata_log(&StdStorage, &dir)
        .unwrap_or_else(|e| panic!("the metadata log {}: {e}", dir.display()));
    let topic = metadata.image.topic_config(TOPIC, Some(1));
    let refused: Vec<_> = topic
        .entries
        .iter()
        .filter(|e| e.refused.is_some())
        .collect();
    assert!(refused.is_empty(), "configs klog refuses: {refused:?}");
    topic.config
}

/// Every delete horizon (the base timestamp of a batch with attribute bit 6) in a partition directory.
pub fn delete_horizons(partition: &Path) -> BTreeSet<i64> {
    segments(partition)
        .values()
        .flat_map(|s| {
            batches(&s.log)
                .iter()
                .filter_map(|b| b.delete_horizon_ms())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The `currentTime` of a broker's pass: each horizon the pass set is `currentTime +
/// delete.retention.ms`, one clock reading per pass, so `new_horizons` (the horizons in the cleaned
/// directory that were not there before the pass) hold one value. A pass that set none (no tombstone or
/// emptied marker kept) wrote nothing that depends on its clock beyond which older horizons had passed;
/// its time is then bounded only by `window` (wall-clock ms before the pass was allowed to run and
/// after its checkpoint was seen), and the middle of it is used.
pub fn clean_time(
    new_horizons: &BTreeSet<i64>,
    delete_retention_ms: i64,
    window: (i64, i64),
) -> i64 {
    assert!(
        new_horizons.len() <= 1,
        "one pass set several delete horizons (one clock reading per pass): {new_horizons:?}"
    );
    let Some(horizon) = new_horizons.first() else {
        return window.0 + (window.1 - window.0) / 2;
    };
    let now = horizon - delete_retention_ms;
    // The broker's clock and the test's are the same machine's; a second of slack for the ms rounding.
    assert!(
        window.0 - 1000 <= now && now <= window.1 + 1000,
        "the pass's time {now} (horizon {horizon}) is outside the window {window:?} it ran in"
    );
    now
}

/// Wall-clock now in ms.
pub fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// klog's pass over PARTITION of the log directory `root` (a copy of a stopped broker's), with the
/// broker's cleaner defaults and the broker's clean time: `LogDir::clean` as a broker's cleaner thread
/// picks a log (the dirty ratio tested), then the directory closed cleanly.
pub fn clean(root: &Path, config: &LogConfig, now_ms: i64) -> CleanReport {
    let mut log_dir = LogDir::open(Arc::new(StdStorage), root)
        .unwrap_or_else(|e| panic!("open {}: {e}", root.display()));
    let (log, _) = log_dir
        .open_partition(PARTITION, config.clone())
        .expect("open the partition");
    let mut reports = clean_logs(&mut log_dir, &log, now_ms).expect("klog's pass");
    log_dir.close_partition(log).expect("close the partition");
    log_dir.close().expect("close the log directory");
    reports.pop().expect("one report per log")
}

/// `LogDir::clean` of one log with the broker's cleaner defaults at `now_ms`.
pub fn clean_logs(
    log_dir: &mut LogDir,
    log: &PartitionLog,
    now_ms: i64,
) -> Result<Vec<CleanReport>, Error> {
    let options = CleanOptions {
        now_ms,
        ..CleanOptions::default()
    };
    log_dir.clean(&[log], &CleanerConfig::default(), &options)
}

/// Every data record klog serves from `partition` of `root` (read uncommitted, from its log start to
/// its log end), as the workload's `consume` prints them: offset, timestamp, key, value, headers.
pub fn served_records(root: &Path, partition: &str, config: &LogConfig) -> Vec<Value> {
    let log_dir = LogDir::open_read_only(Arc::new(StdStorage), root).expect("open read-only");
    let (log, _) = log_dir
        .open_partition(partition, config.clone())
        .expect("open the partition");
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let read = log.read(offset, 1 << 20, None, true).expect("klog reads");
        assert!(read.next_offset > offset, "no progress at {offset}");
        for batch in Batches::new(read.records.as_slice()) {
            let AnyBatch::V2(batch) = batch.expect("a batch klog serves parses") else {
                panic!("a v0/v1 entry in a cleaned log");
            };
            if batch.is_control() {
                continue;
            }
            for (offset, timestamp, _, key, value, headers) in
                owned_records(&batch).expect("records klog serves")
            {
                if offset < log.log_start_offset() {
                    continue;
                }
                let headers: Vec<Value> = headers
                    .iter()
                    .map(|(k, v)| json!({"key": String::from_utf8_lossy(k), "value": v.as_deref().map(hex)}))
                    .collect();
                out.push(json!({
                    "offset": offset,
                    "timestamp": timestamp,
                    "key": key.as_deref().map(hex),
                    "value": value.as_deref().map(hex),
                    "headers": headers,
                }));
            }
        }
        offset = read.next_offset;
    }
    out
}
