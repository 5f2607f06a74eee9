//! The offset map's digest never reaches disk: the same log cleaned with MD5 (Kafka 4.4.0's) and with
//! XXH3-128 (klog's default) leaves byte-identical segments, indexes and cleaner checkpoint, whether the
//! map holds every key or fills and ends the pass early.

mod cleaner_common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use cleaner_common::{config, fill, NOW};
use klog_log::cleaner::{CleanOptions, CleanReport, CleanerConfig, DigestKind};
use klog_log::clock::ManualClock;
use klog_log::io::{read_file, SimStorage, Storage};
use klog_log::log_dir::LogDir;

/// The root's cleaner checkpoint and every file of the partition directory, with their bytes.
fn files(storage: &dyn Storage, root: &Path) -> BTreeMap<String, Vec<u8>> {
    let read = |path: &Path| read_file(storage, path).unwrap().unwrap_or_default();
    let mut out = BTreeMap::new();
    let checkpoint = "cleaner-offset-checkpoint";
    out.insert(checkpoint.to_owned(), read(&root.join(checkpoint)));
    let dir = root.join("compacted-0");
    for name in storage.list(&dir).unwrap() {
        if name != ".lock" {
            let bytes = read(&dir.join(&name));
            out.insert(name, bytes);
        }
    }
    out
}

/// Two passes through the log directory (the second over what the first left dirty) with `digest`.
fn clean_with(
    digest: DigestKind,
    dedupe_buffer_size: usize,
) -> (Vec<CleanReport>, BTreeMap<String, Vec<u8>>) {
    let storage: Arc<dyn Storage> = Arc::new(SimStorage::new(7));
    let root = Path::new("/logs");
    let mut log_dir = LogDir::open(storage.clone(), root).unwrap();
    let clock = Arc::new(ManualClock::new(NOW));
    let (log, _) = log_dir
        .open_partition_with_clock("compacted-0", config(), clock)
        .unwrap();
    fill(&log);
    let cleaner = CleanerConfig {
        dedupe_buffer_size,
        digest,
        ..CleanerConfig::default()
    };
    let opts = CleanOptions {
        now_ms: NOW,
        force: true,
        ..CleanOptions::default()
    };
    let mut reports = log_dir.clean(&[&log], &cleaner, &opts).unwrap();
    reports.extend(log_dir.clean(&[&log], &cleaner, &opts).unwrap());
    log.close().unwrap();
    (reports, files(storage.as_ref(), root))
}

fn assert_same(dedupe_buffer_size: usize, expect_full: bool) {
    let (md5_reports, md5_files) = clean_with(DigestKind::Md5, dedupe_buffer_size);
    let (xxh3_reports, xxh3_files) = clean_with(DigestKind::Xxh3, dedupe_buffer_size);
    assert_eq!(md5_reports[0].map_full, expect_full, "{md5_reports:?}");
    assert!(md5_reports[0].cleaned, "{md5_reports:?}");
    for (m, x) in md5_reports.iter().zip(&xxh3_reports) {
        assert_eq!(
            (m.end_offset, m.map_entries, m.map_full, &m.groups),
            (x.end_offset, x.map_entries, x.map_full, &x.groups)
        );
    }
    assert!(!md5_files["cleaner-offset-checkpoint"].is_empty());
    assert!(md5_files.keys().any(|n| n.ends_with(".log")));
    assert!(md5_files.keys().any(|n| n.ends_with(".index")));
    assert_eq!(
        md5_files.keys().collect::<Vec<_>>(),
        xxh3_files.keys().collect::<Vec<_>>()
    );
    for (name, bytes) in &md5_files {
        assert!(xxh3_files[name] == *bytes, "{name} differs");
    }
}

#[test]
fn md5_and_xxh3_clean_to_the_same_bytes() {
    assert_same(CleanerConfig::default().dedupe_buffer_size, false);
}

#[test]
fn md5_and_xxh3_fill_the_map_at_the_same_offset() {
    // 20 slots of 24 bytes (a 16-byte digest + the offset): full at 18 distinct keys, for both.
    assert_same(20 * 24, true);
}
