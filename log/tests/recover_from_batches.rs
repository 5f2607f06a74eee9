//! Recovery derives the log from the batches it scans, whatever lies beside them: an offset gap between
//! intact segments (a compacted or mirrored log) is kept, only invalid bytes cut the log and delete the
//! segments after the cut (Kafka's `LogLoader.recoverLog`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression};
use klog_log::io::{SimStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog, TruncationReason};
use klog_log::segment::LogSegment;

const TS: i64 = 1_700_000_000_000;

fn config() -> LogConfig {
    LogConfig {
        // Two of the test's batches fill a segment: the third rolls at its own first offset.
        segment_bytes: 300,
        index_interval_bytes: 64,
        ..LogConfig::default()
    }
}

fn unclean(recovery_point: i64) -> OpenOptions {
    OpenOptions {
        recovery_point,
        log_start_offset: 0,
        clean_shutdown: false,
    }
}

/// A follower batch of three records at `base`, in leader epoch `epoch`.
fn follower_batch(base: i64, epoch: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None)
        .base_offset(base)
        .partition_leader_epoch(epoch);
    for i in 0..3 {
        b.append(
            TS,
            Some(b"k"),
            Some(format!("value {base} {i}").as_bytes()),
            &[],
        )
        .unwrap();
    }
    b.build().unwrap()
}

fn fresh(name: &str) -> (SimStorage, Arc<dyn Storage>, PathBuf) {
    let sim = SimStorage::new(7);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    (sim, storage, PathBuf::from(format!("/sim/{name}/t-0")))
}

/// Appends `batches` as a follower, flushes and closes; returns the log's segment bases.
fn write_follower_log(storage: &Arc<dyn Storage>, dir: &Path, batches: &[Vec<u8>]) -> Vec<i64> {
    let (log, _) =
        PartitionLog::open(storage.clone(), dir, config(), OpenOptions::default()).unwrap();
    for b in batches {
        log.append_as_follower(b).unwrap();
    }
    log.flush(log.log_end_offset()).unwrap();
    let bases = log.segment_base_offsets();
    log.close().unwrap();
    bases
}

/// Every batch's base offset, read through the log.
fn batch_offsets(log: &PartitionLog) -> Vec<i64> {
    log.update_high_watermark(log.log_end_offset());
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let r = log.read(offset, 1 << 20, None, true).unwrap();
        let before = out.len();
        for b in klog_log::format::Batches::new(r.records.as_slice()) {
            let b = b.unwrap();
            out.push(b.base_offset());
            offset = b.last_offset() + 1;
        }
        assert!(out.len() > before, "a read at {offset} returned no batch");
    }
    out
}

fn assert_gap_kept(name: &str, later: i64) {
    let (_, storage, dir) = fresh(name);
    let batches = [
        follower_batch(0, 0),
        follower_batch(3, 0),
        follower_batch(later, 0),
        follower_batch(later + 3, 0),
    ];
    assert_eq!(
        write_follower_log(&storage, &dir, &batches),
        [0, later],
        "the third batch rolls a segment at its own offset"
    );
    let (log, report) = PartitionLog::open(storage.clone(), &dir, config(), unclean(0)).unwrap();
    assert!(
        report.truncations.is_empty(),
        "{name}: an offset gap between intact segments cut the log: {:?}",
        report.truncations
    );
    assert_eq!(
        report.recovered_segments.len(),
        2,
        "both segments rescanned"
    );
    assert_eq!(log.segment_base_offsets(), [0, later]);
    assert_eq!(log.log_end_offset(), later + 6);
    assert_eq!(batch_offsets(&log), [0, 3, later, later + 3]);
    log.close().unwrap();
}

#[test]
fn an_offset_gap_between_intact_segments_keeps_the_later_segment() {
    assert_gap_kept("gap", 1006);
}

#[test]
fn a_jump_past_two_to_the_31_between_intact_segments_keeps_the_later_segment() {
    // Beyond what a relative offset of the first segment can hold: the later batch rolls a segment.
    assert_gap_kept("jump", (1 << 31) + 10);
}

#[test]
fn a_torn_batch_before_a_gap_still_deletes_every_later_segment() {
    let (sim, storage, dir) = fresh("torn-gap");
    let batches = [
        follower_batch(0, 0),
        follower_batch(3, 0),
        follower_batch(1006, 0),
        follower_batch(1009, 0),
    ];
    write_follower_log(&storage, &dir, &batches);
    // Half of the second batch: invalid bytes at the end of the first segment.
    let path = LogSegment::log_path(&dir, 0);
    let bytes = sim.live_bytes(&path).unwrap();
    let torn = batches[0].len() + batches[1].len() / 2;
    sim.corrupt(&path, bytes[..torn].to_vec()).unwrap();
    let (log, report) = PartitionLog::open(storage.clone(), &dir, config(), unclean(0)).unwrap();
    assert_eq!(log.segment_base_offsets(), [0]);
    assert_eq!(log.log_end_offset(), 3);
    assert_eq!(report.deleted_segments, [1006]);
    assert!(
        matches!(
            report.truncations.last().map(|t| &t.reason),
            Some(TruncationReason::AfterCut { cut_segment: 0 })
        ),
        "{:?}",
        report.truncations
    );
    log.close().unwrap();
}
