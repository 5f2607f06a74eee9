//! `offset_for_timestamp` walks forward from the time index's entry a chunk at a time: the first record at
//! or after the timestamp is found whether it sits in the first chunk, many chunks on, or in a batch larger
//! than a chunk, in the active segment and in sealed (memory-mapped) ones, on every backend.

#[path = "../../tests/common/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::clock::ManualClock;
use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression};
use klog_log::io::{SimStorage, StdStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};

const BASE_TS: i64 = 1_800_000_000_000;

fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn backends(name: &str) -> Vec<(&'static str, Arc<dyn Storage>, PathBuf)> {
    let mut v: Vec<(&'static str, Arc<dyn Storage>, PathBuf)> = vec![
        (
            "std",
            Arc::new(StdStorage),
            temp_dir(&format!("{name}-std")).join("t-0"),
        ),
        (
            "sim",
            Arc::new(SimStorage::new(7)),
            PathBuf::from(format!("/sim/{name}/t-0")),
        ),
    ];
    if let Ok(uring) = klog_log::io::open_backend(klog_log::io::IoBackend::Uring) {
        v.push((
            "uring",
            uring,
            temp_dir(&format!("{name}-uring")).join("t-0"),
        ));
    } else if std::env::var("KLOG_REQUIRE_URING").is_ok_and(|v| v == "1") {
        panic!("KLOG_REQUIRE_URING=1 but the io_uring backend is unavailable");
    } else {
        skip::skip("the uring backend's runs: io_uring is unavailable here");
    }
    v
}

fn open(storage: &Arc<dyn Storage>, dir: &Path, options: OpenOptions) -> PartitionLog {
    let mut config = LogConfig::default();
    config
        .set("segment.bytes", &(1u64 << 20).to_string())
        .unwrap();
    // One time-index entry per MiB (a segment): most searches walk many 64 KiB chunks from its start.
    config
        .set("index.interval.bytes", &(1u64 << 20).to_string())
        .unwrap();
    let clock = Arc::new(ManualClock::new(BASE_TS));
    PartitionLog::open_with_clock(storage.clone(), dir, config, options, clock)
        .unwrap()
        .0
}

/// Batch `i` holds `records` records with timestamps `BASE_TS + 10 * i + r` (r < records); every 7th batch
/// carries one ~200 KiB record (larger than a search chunk), the others 3 records of 1 KiB.
fn write(log: &PartitionLog, batches: usize) -> Vec<(i64, i64, usize)> {
    let mut expected = Vec::new();
    for i in 0..batches {
        let (records, value_bytes) = if i % 7 == 3 {
            (1, 200 << 10)
        } else {
            (3, 1024)
        };
        let value = vec![(i % 251) as u8; value_bytes];
        let mut b = BatchBuilder::new(Compression::None);
        for r in 0..records {
            b.append(
                BASE_TS + 10 * i as i64 + r as i64,
                Some(b"k"),
                Some(&value),
                &[],
            )
            .unwrap();
        }
        let mut batch = b.build().unwrap();
        let info = log.append_as_leader(&mut batch, 0).unwrap();
        expected.push((BASE_TS + 10 * i as i64, info.first_offset, records));
    }
    expected
}

fn check(backend: &str, log: &PartitionLog, expected: &[(i64, i64, usize)]) {
    for &(ts, first_offset, records) in expected {
        // Each record's own timestamp, and a timestamp between batches (the next batch's first record).
        for r in 0..records as i64 {
            assert_eq!(
                log.offset_for_timestamp(ts + r).unwrap(),
                Some((ts + r, first_offset + r)),
                "{backend}: ts {}",
                ts + r
            );
        }
        let between = ts + 5;
        let next = expected.iter().find(|e| e.0 >= between);
        assert_eq!(
            log.offset_for_timestamp(between).unwrap(),
            next.map(|&(t, o, _)| (t, o)),
            "{backend}: ts {between}"
        );
    }
    assert_eq!(
        log.offset_for_timestamp(BASE_TS - 1).unwrap(),
        Some((BASE_TS, 0))
    );
    let last = expected.last().unwrap();
    assert_eq!(
        log.offset_for_timestamp(last.0 + 10).unwrap(),
        None,
        "{backend}: past the last timestamp"
    );
}

#[test]
fn timestamps_are_found_across_chunks_segments_and_large_batches() {
    for (backend, storage, dir) in backends("timestamps") {
        let log = open(&storage, &dir, OpenOptions::default());
        let expected = write(&log, 120);
        assert!(
            log.segment_base_offsets().len() >= 3,
            "{backend}: the log should have sealed segments"
        );
        check(backend, &log, &expected);
        let leo = log.log_end_offset();
        log.flush(leo).unwrap();
        log.close().unwrap();
        drop(log);
        // Reopened: sealed segments are read through their map.
        let log = open(
            &storage,
            &dir,
            OpenOptions {
                recovery_point: leo,
                log_start_offset: 0,
                clean_shutdown: true,
            },
        );
        check(backend, &log, &expected);
        log.close().unwrap();
    }
}
