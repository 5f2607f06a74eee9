//! Crashes during and after an unclean open. Recovery rebuilds the indexes of every segment it rescans
//! without syncing them (`IndexFile::rebuild`): they are derived, the recovery point stays below those
//! segments until a flush syncs them, and every unclean open rescans them again. This checks that claim
//! at every operation: a partition (sometimes with a torn batch in a middle segment, which the open cuts,
//! deleting every later segment) is opened uncleanly, appended to and flushed, the power goes out at
//! operation `n`, and the next unclean open (from the recovery point the last good flush left) must
//! - keep everything flushed, and hold a prefix of what the first open kept followed by the appends;
//! - trust no index entry that is not true of its `.log` (checked by `verify_partition` after a clean
//!   close, which writes out the entries that open held, rebuilt or loaded from the files).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Batches, Compression};
use klog_log::io::{SimStorage, Storage};
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_log::segment::LogSegment;
use klog_recovery::verify_partition;

const BATCHES: i64 = 150;
const APPENDS: i64 = 6;

fn config() -> LogConfig {
    LogConfig::from_pairs(["segment.bytes=2500", "index.interval.bytes=256"]).unwrap()
}

fn unclean(recovery_point: i64) -> OpenOptions {
    OpenOptions {
        recovery_point,
        log_start_offset: 0,
        clean_shutdown: false,
    }
}

fn batch(i: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    for r in 0..2 {
        b.append(
            1_700_000_000_000 + i,
            Some(b"key"),
            Some(format!("value {i} {r}").as_bytes()),
            &[],
        )
        .unwrap();
    }
    b.build().unwrap()
}

/// A flushed, closed partition; with `torn`, the last batch of a middle segment loses its end (as if
/// that segment had been written without a flush).
fn build(sim: &SimStorage, dir: &Path, torn: bool) {
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let (log, _) = PartitionLog::open(storage, dir, config(), OpenOptions::default()).unwrap();
    for i in 0..BATCHES {
        log.append_as_leader(&mut batch(i), 0).unwrap();
    }
    let bases = log.segment_base_offsets();
    log.close().unwrap();
    assert!(bases.len() >= 6, "{} segments", bases.len());
    if torn {
        let middle = LogSegment::log_path(dir, bases[bases.len() / 2]);
        let mut bytes = sim.live_bytes(&middle).unwrap();
        bytes.truncate(bytes.len() - 5);
        sim.corrupt(&middle, bytes).unwrap();
    }
}

/// Every batch of the log, in order, as bytes.
fn batches(log: &PartitionLog) -> Vec<Vec<u8>> {
    log.update_high_watermark(log.log_end_offset());
    let mut got = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let r = log.read(offset, 1 << 20, None, true).unwrap();
        for b in Batches::new(r.records.as_slice()) {
            let b = b.unwrap();
            offset = b.last_offset() + 1;
            got.push(b.as_bytes().to_vec());
        }
    }
    got
}

/// What the first unclean open keeps, then the batches the run appends after it.
fn expected(torn: bool) -> Vec<Vec<u8>> {
    let sim = SimStorage::new(3);
    let dir = PathBuf::from("/crash/t-0");
    build(&sim, &dir, torn);
    let (log, _) = PartitionLog::open(Arc::new(sim), &dir, config(), unclean(0)).unwrap();
    let mut all = batches(&log);
    for i in 0..APPENDS {
        log.append_as_leader(&mut batch(BATCHES + i), 0).unwrap();
    }
    all.extend(batches(&log).split_off(all.len()));
    all
}

/// The unclean open, appends with a flush in the middle, stopped by the first error (the power going
/// out). Returns the recovery point the last good flush left.
fn run(sim: &SimStorage, dir: &Path) -> i64 {
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let Ok((log, _)) = PartitionLog::open(storage, dir, config(), unclean(0)) else {
        return 0;
    };
    let mut flushed = 0;
    for i in 0..APPENDS {
        if log.append_as_leader(&mut batch(BATCHES + i), 0).is_err() {
            break;
        }
        if i == APPENDS / 2 {
            if log.flush(log.log_end_offset()).is_err() {
                break;
            }
            flushed = log.recovery_point();
        }
    }
    flushed
}

fn crash_points(torn: bool) {
    let expected = expected(torn);
    let mut crashes = 0;
    for crash_at in 1.. {
        let sim = SimStorage::new(3 + crash_at);
        let dir = PathBuf::from("/crash/t-0");
        build(&sim, &dir, torn);
        let start = sim.ops();
        sim.power_off_at(start + crash_at);
        let flushed = run(&sim, &dir);
        // The run ended before the operation the power went out at: every point has been tried.
        let done = sim.ops() - start < crash_at;
        sim.crash(crash_at % 2 == 0);
        let ctx = format!("torn {torn}, power off at op +{crash_at}");
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let (log, _) = PartitionLog::open(storage, &dir, config(), unclean(flushed))
            .unwrap_or_else(|e| panic!("{ctx}: recovery failed: {e}"));
        assert!(log.log_end_offset() >= flushed, "{ctx}: lost flushed data");
        let got = batches(&log);
        assert!(
            got.len() <= expected.len() && got == expected[..got.len()],
            "{ctx}: the log is not a prefix of what the first open kept and the appends: {} batches \
             (expected a prefix of {}), first difference at batch {:?}",
            got.len(),
            expected.len(),
            got.iter().zip(&expected).position(|(g, e)| g != e)
        );
        log.close().unwrap();
        drop(log);
        assert_eq!(verify_partition(&sim, &dir).unwrap(), vec![], "{ctx}");
        crashes += 1;
        if done {
            break;
        }
        assert!(crashes < 5_000, "{ctx}: the run never ended");
    }
    assert!(crashes > 20, "only {crashes} crash points");
}

#[test]
fn a_crash_at_any_operation_of_an_unclean_open_and_the_appends_after_it() {
    crash_points(false);
}

#[test]
fn a_crash_at_any_operation_of_an_unclean_open_that_cuts_and_the_appends_after_it() {
    crash_points(true);
}
