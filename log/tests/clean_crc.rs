//! A pass checks each batch's CRC once: the rewrite skips the check only for the bytes its own map build
//! checked in the same segment. Bytes the map build did not read (the clean part of the log, the rest of
//! the segment where a full map stopped) are still checked, and a corrupt batch there ends the pass
//! naming its segment.

mod cleaner_common;

use std::path::Path;
use std::sync::Arc;

use cleaner_common::{config, fill, NOW};
use klog_log::cleaner::{CleanOptions, CleanerConfig};
use klog_log::clock::ManualClock;
use klog_log::io::{SimStorage, Storage};
use klog_log::log_dir::LogDir;
use klog_log::partition_log::PartitionLog;
use klog_log::segment::LogSegment;

fn opened(sim: &SimStorage) -> (LogDir, PartitionLog) {
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let log_dir = LogDir::open(storage, Path::new("/logs")).unwrap();
    let clock = Arc::new(ManualClock::new(NOW));
    let (log, _) = log_dir
        .open_partition_with_clock("crc-0", config(), clock)
        .unwrap();
    fill(&log);
    (log_dir, log)
}

fn opts(dry_run: bool) -> CleanOptions {
    CleanOptions {
        now_ms: NOW,
        force: true,
        dry_run,
        ..CleanOptions::default()
    }
}

/// Flips a byte `from_end` bytes before the end of the segment at `base` (inside its last batch's records).
fn corrupt(sim: &SimStorage, base: i64, from_end: usize) -> String {
    let path = LogSegment::log_path(Path::new("/logs/crc-0"), base);
    let mut bytes = sim.live_bytes(&path).unwrap();
    let at = bytes.len() - from_end;
    bytes[at] ^= 0xff;
    sim.corrupt(&path, bytes).unwrap();
    path.display().to_string()
}

#[test]
fn a_corrupt_batch_in_the_clean_part_is_refused_by_the_rewrite() {
    let sim = SimStorage::new(21);
    let (_dir, log) = opened(&sim);
    let bases = log.segment_base_offsets();
    // The map build reads from the checkpoint (segment 5) on; segment 1 is read only by the rewrite.
    let path = corrupt(&sim, bases[1], 5);
    let err = log
        .clean(&CleanerConfig::default(), &opts(false), Some(bases[5]))
        .unwrap_err();
    let message = err.to_string();
    assert!(message.contains(&path), "{message}");
    assert!(
        message.contains("crc") || message.contains("CRC"),
        "{message}"
    );
}

#[test]
fn a_corrupt_batch_past_where_a_full_map_stopped_is_refused_by_the_rewrite() {
    let sim = SimStorage::new(22);
    let (_dir, log) = opened(&sim);
    // 20 slots of 24 bytes: full at 18 distinct keys, in the middle of a segment.
    let cleaner = CleanerConfig {
        dedupe_buffer_size: 20 * 24,
        ..CleanerConfig::default()
    };
    let dry = log.clean(&cleaner, &opts(true), None).unwrap();
    assert!(dry.map_full, "{dry:?}");
    let bases = log.segment_base_offsets();
    let holder = bases.iter().rposition(|&b| b < dry.end_offset).unwrap();
    assert!(
        bases[holder + 1] > dry.end_offset,
        "the segment's last batch lies past the map's end: {dry:?} {bases:?}"
    );
    let path = corrupt(&sim, bases[holder], 5);
    let err = log.clean(&cleaner, &opts(false), None).unwrap_err();
    let message = err.to_string();
    assert!(message.contains(&path), "{message}");
}
