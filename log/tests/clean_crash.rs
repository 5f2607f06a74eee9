//! The cleaner's pass cut by a power failure at every one of its storage operations, then the
//! partition reopened (the open finishes or undoes the swap): no `.cleaned`, `.swap` or `.deleted`
//! file is left, and each group the pass rewrote reads either as before the pass or as after it,
//! record for record (so no record the pass keeps is lost, no aborted record comes back once its
//! group was swapped, and offsets never reorder). The cleaner checkpoint names the pass's end only
//! once the whole pass is durable, and a pass over the recovered log ends where the uncut pass did.
//!
//! The operations of one uncut `LogDir::clean` are counted first; then for every operation k, on a
//! fresh copy of the same partition: the power is cut at k (every later operation fails), the machine
//! crashes (with and without a torn last write), and the log directory is opened again; or operation k
//! fails with ENOSPC, the process goes on, and the log directory is opened again without a crash. The
//! power cuts run on the plain simulation and on its direct write path (the uring backend's), where a
//! segment `.log`'s unsynced writes land whole, torn or not at all.

mod cleaner_common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use cleaner_common::{config, fill, records, same_records, Rec, NOW};
use klog_log::cleaner::{read_cleaner_checkpoint, CleanOptions, CleanReport, CleanerConfig};
use klog_log::clock::ManualClock;
use klog_log::io::{Fault, SimStorage, Storage};
use klog_log::log_dir::LogDir;
use klog_log::partition_log::PartitionLog;

const ROOT: &str = "/logs";
const PARTITION: &str = "compacted-0";

/// A 1 MiB map: the pass's few keys never fill it, and each pass does not zero Kafka's 128 MiB.
fn cleaner() -> CleanerConfig {
    CleanerConfig {
        dedupe_buffer_size: 1 << 20,
        ..CleanerConfig::default()
    }
}

fn opts() -> CleanOptions {
    CleanOptions {
        now_ms: NOW,
        ..CleanOptions::default()
    }
}

fn open(sim: &SimStorage) -> (LogDir, PartitionLog) {
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let log_dir = LogDir::open(storage, Path::new(ROOT)).unwrap();
    let clock = Arc::new(ManualClock::new(NOW));
    let (log, _) = log_dir
        .open_partition_with_clock(PARTITION, config(), clock)
        .unwrap();
    (log_dir, log)
}

/// A fresh copy of the partition, filled and flushed, before the pass.
fn fresh(direct: bool) -> (SimStorage, LogDir, PartitionLog) {
    let sim = SimStorage::new(11);
    let sim = if direct {
        sim.with_direct_writes()
    } else {
        sim
    };
    let (log_dir, log) = open(&sim);
    fill(&log);
    (sim, log_dir, log)
}

fn checkpoint(sim: &SimStorage) -> Option<i64> {
    read_cleaner_checkpoint(sim, Path::new(ROOT))
        .unwrap()
        .get(&("compacted".to_owned(), 0))
        .copied()
}

/// The offset ranges of the groups the pass rewrote: from a group's first base offset to the next
/// segment's base after its last one.
fn group_ranges(report: &CleanReport, bases: &[i64]) -> Vec<(i64, i64)> {
    report
        .groups
        .iter()
        .map(|g| {
            let last = *g.last().unwrap();
            let next = bases.iter().copied().find(|&b| b > last).unwrap();
            (g[0], next)
        })
        .collect()
}

fn slice(m: &BTreeMap<i64, Rec>, from: i64, to: i64) -> BTreeMap<i64, Rec> {
    m.range(from..to).map(|(o, r)| (*o, r.clone())).collect()
}

/// The reference: records before and after one uncut pass, its report and how many operations it took.
struct Reference {
    before: BTreeMap<i64, Rec>,
    after: BTreeMap<i64, Rec>,
    report: CleanReport,
    bases: Vec<i64>,
    log_end_offset: i64,
    ops: u64,
}

fn reference(direct: bool) -> Reference {
    let (sim, mut log_dir, log) = fresh(direct);
    let before = records(&log);
    let bases = log.segment_base_offsets();
    let start = sim.ops();
    let report = log_dir
        .clean(&[&log], &cleaner(), &opts())
        .unwrap()
        .remove(0);
    let ops = sim.ops() - start;
    assert!(report.cleaned && report.groups.len() > 1, "{report:?}");
    assert_eq!(checkpoint(&sim), Some(report.end_offset));
    Reference {
        after: records(&log),
        before,
        report,
        bases,
        log_end_offset: log.log_end_offset(),
        ops,
    }
}

fn check_recovered(r: &Reference, sim: &SimStorage, what: &str) {
    let (mut log_dir, log) = open(sim);
    let dir = Path::new(ROOT).join(PARTITION);
    let names = sim.list(&dir).unwrap();
    assert!(
        names
            .iter()
            .all(|n| !n.ends_with(".cleaned") && !n.ends_with(".swap") && !n.ends_with(".deleted")),
        "{what}: {names:?}"
    );
    let now = records(&log);
    assert_eq!(log.log_end_offset(), r.log_end_offset, "{what}");
    for (from, to) in group_ranges(&r.report, &r.bases) {
        let got = slice(&now, from, to);
        assert!(
            got == slice(&r.before, from, to) || got == slice(&r.after, from, to),
            "{what}: offsets {from}..{to} read neither as before nor as after the pass: {got:?}"
        );
    }
    let rest = slice(&now, r.report.end_offset, i64::MAX);
    assert_eq!(
        rest,
        slice(&r.before, r.report.end_offset, i64::MAX),
        "{what}"
    );
    if checkpoint(sim) == Some(r.report.end_offset) {
        assert_eq!(
            now, r.after,
            "{what}: the checkpoint moved before the pass was durable"
        );
    } else {
        assert_eq!(checkpoint(sim), None, "{what}");
    }
    // No replication-offset checkpoint was written: the high watermark is set again, as a leader would.
    log.update_high_watermark(log.log_end_offset());
    let again = log_dir
        .clean(&[&log], &cleaner(), &opts())
        .unwrap()
        .remove(0);
    assert!(
        same_records(&records(&log), &r.after),
        "{what}: a pass over the recovered log does not end where the uncut one did ({again:?})"
    );
}

/// How operation k fails.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// The power goes at k; then a crash, tearing the last unsynced write or not.
    Power { tear: bool },
    /// ENOSPC at k; the process goes on.
    Enospc,
}

fn cut_everywhere(direct: bool, cuts: &[Cut]) {
    let r = reference(direct);
    assert!(r.ops > 20, "{} operations", r.ops);
    for k in 1..=r.ops {
        for &cut in cuts {
            let (sim, mut log_dir, log) = fresh(direct);
            match cut {
                Cut::Power { .. } => sim.power_off_at(sim.ops() + k),
                Cut::Enospc => sim.inject(sim.ops() + k, Fault::Enospc),
            }
            let result = log_dir.clean(&[&log], &cleaner(), &opts());
            drop(log);
            drop(log_dir);
            if let Cut::Power { tear } = cut {
                assert!(
                    result.is_err(),
                    "the pass fails once the power is off at {k}"
                );
                sim.crash(tear);
            }
            let what = format!("{cut:?} at operation {k} of {} (direct: {direct})", r.ops);
            check_recovered(&r, &sim, &what);
        }
    }
}

#[test]
fn a_pass_cut_at_any_operation_leaves_the_log_before_or_after_it() {
    let cuts = [
        Cut::Power { tear: false },
        Cut::Power { tear: true },
        Cut::Enospc,
    ];
    cut_everywhere(false, &cuts);
}

#[test]
fn a_pass_cut_at_any_operation_on_the_direct_write_path_leaves_the_log_before_or_after_it() {
    cut_everywhere(true, &[Cut::Power { tear: true }]);
}
