//! One pass of the log cleaner over one partition log (Kafka's `Cleaner.clean` / `doClean`), and a log
//! directory's passes over its compacted logs with the `cleaner-offset-checkpoint`
//! (`LogCleanerManager.grabFilthiestCompactedLog`'s test and `doneCleaning`, one log after another).
//!
//! A pass builds the offset map over `[first dirty, first uncleanable)` (`buildOffsetMap`), stopping
//! where the map fills (or at `max_dirty_bytes`); the segments from the log start to the end of the map
//! are grouped (`group.rs`) and each group is written into one `.cleaned` segment and swapped in
//! (`swap.rs`) under the log's writer lock. On more than one thread (`CleanOptions::threads`) the map
//! build's reads (`map_build.rs`) and the groups' writes (`rewrite.rs`) run on workers, with the bytes of
//! one thread. The pass is a writer: a read-only log is refused; appends go on into the active segment
//! meanwhile (it is never cleaned), and a group retention or a truncation changed while it was being
//! cleaned is given up (its `.cleaned` files deleted), never swapped in.

use std::ops::ControlFlow;
use std::sync::Arc;

use std::collections::HashMap;

use crate::format::{AnyBatch, BatchStream};
use crate::log_dir::LogDir;
use crate::partition_log::PartitionLog;
use crate::producer_state as snapshots;
use crate::segment::LogSegment;
use crate::txn_index::AbortedTxn;
use crate::Error;

use super::built::{add_stats, BuiltMap, CrcChecked, DirtyBudget, WrittenGroup};
use super::filter::{for_each_key_any, FilterContext, FilterStats, LastRecord};
use super::group::{clean_into, group_segments_by_size, in_segment, CleanedSink, SegmentSizes};
use super::map_build::build_offset_map_in_parallel;
use super::range::segments_in;
use super::rewrite::rewrite_groups;
use super::swap::{delete_cleaned, remove_deleted, swap_files};
use super::txn_metadata::CleanedTransactionMetadata;
use super::{
    read_cleaner_checkpoint, write_cleaner_checkpoint, CleanOptions, CleanReport, CleanerConfig,
    DigestKind, OffsetMap,
};

impl PartitionLog {
    /// One pass (`Cleaner.clean`) from the checkpointed first dirty offset (`None`: the log start).
    /// A log whose `cleanup.policy` has no `compact`, or with nothing dirty, gets a report with
    /// `skipped`; a dry run computes the same report and writes nothing.
    pub fn clean(
        &self,
        cleaner: &CleanerConfig,
        opts: &CleanOptions,
        checkpoint: Option<i64>,
    ) -> Result<CleanReport, Error> {
        if !opts.dry_run {
            // A dry run writes nothing: it runs on a reader's open too (`klog clean --dry-run`).
            self.writable("cleaning")?;
        }
        let range = self.cleanable(checkpoint, opts.now_ms)?;
        let segments = self.segment_list();
        let bytes: u64 = segments.iter().map(|s| s.size()).sum();
        let mut report = CleanReport {
            range,
            end_offset: range.first_dirty_offset,
            segments_before: segments.len(),
            segments_after: segments.len(),
            bytes_before: bytes,
            bytes_after: bytes,
            ..CleanReport::default()
        };
        if !self.config().cleanup_policy.compact {
            report.skipped = Some("cleanup.policy has no compact".to_owned());
            return Ok(report);
        }
        if range.first_uncleanable_offset <= range.first_dirty_offset {
            report.skipped = Some(format!(
                "nothing to clean: the first dirty offset {} is not below the first uncleanable offset {}",
                range.first_dirty_offset, range.first_uncleanable_offset
            ));
            return Ok(report);
        }
        // Two passes writing `.cleaned` segments at the same base would delete each other's files.
        let _cleaning = if opts.dry_run {
            None
        } else {
            match self.start_cleaning() {
                Some(guard) => Some(guard),
                None => {
                    report.skipped = Some("another cleaner pass is under way".to_owned());
                    return Ok(report);
                }
            }
        };
        self.guarded(|| self.do_clean(&segments, cleaner, opts, &mut report))?;
        Ok(report)
    }

    /// `Cleaner.doClean`: the map, then every group from the log start to the end of the map.
    fn do_clean(
        &self,
        segments: &[Arc<LogSegment>],
        cleaner: &CleanerConfig,
        opts: &CleanOptions,
        report: &mut CleanReport,
    ) -> Result<(), Error> {
        let range = report.range;
        let mut map = OffsetMap::new(
            cleaner.dedupe_buffer_size,
            cleaner.load_factor,
            cleaner.digest,
        );
        let mut budget = DirtyBudget {
            max: opts.max_dirty_bytes,
            used: 0,
        };
        let mut checked = Vec::new();
        report.map_full = self.build_offset_map(
            segments,
            range.first_dirty_offset,
            range.first_uncleanable_offset,
            (&mut map, &mut checked),
            &mut budget,
            (cleaner.digest, opts.rewrite_threads()),
        )?;
        report.map_entries = map.size();
        let end = map.latest_offset().saturating_add(1);
        if end <= range.first_dirty_offset {
            report.skipped = Some(format!(
                "nothing to clean: the map ends at {end}, not past the first dirty offset {}",
                range.first_dirty_offset
            ));
            return Ok(());
        }
        report.end_offset = end;
        let to_clean = segments_in(segments, i64::MIN, end);
        let sizes = to_clean
            .iter()
            .map(|s| SegmentSizes::of(s))
            .collect::<Result<Vec<_>, Error>>()?;
        let config = self.config();
        let groups = group_segments_by_size(
            &sizes,
            config.segment_bytes as u64,
            config.segment_index_bytes as u64,
            range.first_uncleanable_offset,
        );
        report.groups = groups
            .iter()
            .map(|g| {
                to_clean[g.clone()]
                    .iter()
                    .map(|s| s.base_offset())
                    .collect()
            })
            .collect();
        let built = BuiltMap {
            map: &map,
            checked: &checked,
        };
        let groups: Vec<&[Arc<LogSegment>]> = groups.into_iter().map(|g| &to_clean[g]).collect();
        rewrite_groups(self, &groups, built, cleaner, opts, report)?;
        if !opts.dry_run {
            report.segments_after = self.segment_base_offsets().len();
            report.bytes_after = self.size_in_bytes();
        }
        Ok(())
    }

    /// `Cleaner.buildOffsetMap` over the dirty segments of `[start, end)`: true when the map filled (or
    /// the dirty-byte budget ran out) before `end`; the map's latest offset is then the last offset the
    /// pass may clean. On more than one thread the segments are read by readers (`map_build.rs`),
    /// with the same result.
    fn build_offset_map(
        &self,
        segments: &[Arc<LogSegment>],
        start: i64,
        end: i64,
        (map, checked): (&mut OffsetMap, &mut Vec<CrcChecked>),
        budget: &mut DirtyBudget,
        (digest, threads): (DigestKind, usize),
    ) -> Result<bool, Error> {
        // The map is new (Kafka clears its thread's map here; a fresh one is zero already).
        let dirty = segments_in(segments, start, end);
        let mut txn = CleanedTransactionMetadata::new();
        txn.add_aborted_transactions(&self.collect_aborted_transactions(start, end));
        if threads > 1 {
            return build_offset_map_in_parallel(
                &dirty,
                (start, end),
                (map, checked),
                &mut txn,
                budget,
                (digest, threads),
            );
        }
        // One stream for every segment: its buffer is zero-filled once, when it first grows.
        let mut stream = BatchStream::default();
        for (i, seg) in dirty.iter().enumerate() {
            let next_start = dirty.get(i + 1).map_or(end, |s| s.base_offset());
            let read =
                build_offset_map_for_segment(seg, start, map, &mut txn, budget, &mut stream)?;
            let Some((from, to)) = read else {
                return Ok(true);
            };
            checked.push(CrcChecked {
                segment: seg.clone(),
                from,
                to,
            });
            map.update_latest_offset(next_start - 1);
        }
        Ok(false)
    }

    /// Kafka's `collectAbortedTransactions(startOffset, upperBoundOffset)`: from the segment holding
    /// `from` on, the aborted transactions of the `.txnindex`es ending at or after the log start and
    /// beginning before `upper`, until one's last stable offset reaches `upper`.
    pub(super) fn collect_aborted_transactions(&self, from: i64, upper: i64) -> Vec<AbortedTxn> {
        let log_start = self.log_start_offset();
        let segments = self.segment_list();
        let floor = segments
            .iter()
            .rposition(|s| s.base_offset() <= from)
            .unwrap_or(0);
        let mut all = Vec::new();
        for seg in &segments[floor..] {
            let (found, complete) = seg.collect_aborted(log_start, upper);
            all.extend(found);
            if complete {
                break;
            }
        }
        all
    }

    /// `Cleaner.cleanSegments`, its first half: `group` written into one `.cleaned` segment based at its
    /// first base offset and flushed (a dry run writes nothing and only counts), not yet swapped in.
    pub(super) fn write_group(
        &self,
        group: &[Arc<LogSegment>],
        built: BuiltMap<'_>,
        txn: &mut CleanedTransactionMetadata,
        cleaner: &CleanerConfig,
        opts: &CleanOptions,
    ) -> Result<WrittenGroup, Error> {
        let base = group[0].base_offset();
        let sizes: Vec<u64> = group.iter().map(|s| s.size()).collect();
        let (storage, dir, config) = (self.storage(), self.dir(), self.config());
        let cleaned = if opts.dry_run {
            None
        } else {
            delete_cleaned(storage.as_ref(), dir, base)?;
            Some(LogSegment::create_cleaned(
                storage.clone(),
                dir,
                base,
                config.index_interval_bytes,
                config.segment_index_bytes,
                opts.now_ms,
            )?)
        };
        let mut sink = CleanedSink::new(cleaned, base, cleaner.io_buffer_size);
        let mut stats = FilterStats::default();
        let written = self
            .clean_group_into(group, built, txn, opts, &mut sink, &mut stats)
            .and_then(|()| sink.finish());
        match written {
            Ok((cleaned, bytes)) => Ok(WrittenGroup {
                cleaned,
                bytes,
                sizes,
                stats,
            }),
            Err(e) => {
                if !opts.dry_run {
                    // The old segments are intact; a `.cleaned` left by a failed delete goes at the next open.
                    let _ = delete_cleaned(storage.as_ref(), dir, base);
                }
                Err(e)
            }
        }
    }

    /// `Cleaner.cleanSegments`, its second half: the written `group` swapped in and counted in `report`.
    pub(super) fn finish_group(
        &self,
        group: &[Arc<LogSegment>],
        written: WrittenGroup,
        report: &mut CleanReport,
    ) -> Result<(), Error> {
        let WrittenGroup {
            cleaned,
            bytes,
            sizes,
            stats,
        } = written;
        add_stats(&mut report.stats, &stats);
        let group_bytes: u64 = sizes.iter().sum();
        report.bytes_after = report.bytes_after.saturating_sub(group_bytes) + bytes;
        report.segments_after -= group.len() - 1;
        match cleaned {
            Some(cleaned) => {
                report.cleaned |= self.swap_in(cleaned, group, &sizes)?;
            }
            None => report.cleaned = true,
        }
        Ok(())
    }

    /// A written group the pass gives up (a group before it failed): its `.cleaned` files deleted (a
    /// failed delete leaves them to the next open, which deletes every `.cleaned` file).
    pub(super) fn discard_group(&self, written: WrittenGroup) {
        if let Some(cleaned) = written.cleaned {
            let base = cleaned.base_offset();
            drop(cleaned);
            let _ = delete_cleaned(self.storage().as_ref(), self.dir(), base);
        }
    }

    /// Every segment of `group` through the filter into `sink` (`cleanInto`, segment by segment).
    fn clean_group_into(
        &self,
        group: &[Arc<LogSegment>],
        built: BuiltMap<'_>,
        txn: &mut CleanedTransactionMetadata,
        opts: &CleanOptions,
        sink: &mut CleanedSink,
        stats: &mut FilterStats,
    ) -> Result<(), Error> {
        let high_watermark = self.high_watermark();
        let active_producers = self.last_records_of_active_producers();
        for (i, seg) in group.iter().enumerate() {
            let upper = match group.get(i + 1) {
                Some(next) => next.base_offset(),
                None => seg.read_next_offset()?.0,
            };
            // The whole segment's range: the cleaned `.txnindex` is rebuilt from it.
            txn.add_aborted_transactions(
                &self.collect_aborted_transactions(seg.base_offset(), upper),
            );
            let mut ctx = FilterContext {
                map: built.map,
                txn,
                now_ms: opts.now_ms,
                delete_retention_ms: self.config().delete_retention_ms,
                // klog keeps no file mtimes: legacy (v0/v1) deletes are kept, which is what Kafka does
                // for a log whose clean part is empty or was modified within delete.retention.ms.
                retain_legacy_deletes_and_txn_markers: true,
                high_watermark,
                active_producers: &active_producers,
            };
            let checked = built.checked_range(seg);
            clean_into(seg, checked, &mut ctx, sink, stats)?;
        }
        Ok(())
    }

    /// Kafka's `lastRecordsOfActiveProducers`: each producer's last data offset (none after a marker)
    /// and epoch, taken once per group.
    fn last_records_of_active_producers(&self) -> HashMap<i64, LastRecord> {
        self.producers()
            .iter()
            .map(|e| {
                let last = e.last_data_offset();
                let record = LastRecord {
                    last_data_offset: (last >= 0).then_some(last),
                    producer_epoch: e.producer_epoch(),
                };
                (e.producer_id(), record)
            })
            .collect()
    }

    /// Under the writer lock: every segment of `group` is still in the log, the same object with the
    /// size it had when the pass read it, and sealed (a truncation into it makes it active again).
    fn group_unchanged(&self, group: &[Arc<LogSegment>], sizes: &[u64]) -> bool {
        let active = self.active_segment();
        group.iter().zip(sizes).all(|(seg, &size)| {
            self.segment(seg.base_offset())
                .is_some_and(|now| Arc::ptr_eq(&now, seg) && now.size() == size)
                && !Arc::ptr_eq(&active, seg)
        })
    }

    /// Kafka's `replaceSegments` for one cleaned segment, under the writer lock: the files renamed in
    /// Kafka's order (`swap.rs`), then the segment map. Returns false (and deletes the `.cleaned` files)
    /// when a segment of `group` left the log while it was cleaned.
    fn swap_in(
        &self,
        cleaned: LogSegment,
        group: &[Arc<LogSegment>],
        sizes: &[u64],
    ) -> Result<bool, Error> {
        let (base, size) = (cleaned.base_offset(), cleaned.size());
        // Kafka gives the cleaned files the group's last segment's mtime, which its `largestTimestamp`
        // falls back on; klog's fallback is the segment's creation time, taken from the same segment.
        let created_ms = group[group.len() - 1].largest_timestamp()?;
        // Its files are closed before they are renamed.
        drop(cleaned);
        let (storage, dir, config) = (self.storage(), self.dir(), self.config());
        let _writer = self.writer();
        // A log closed meanwhile is no longer this writer's: its files are left to the next open.
        self.writable("cleaning")?;
        let old: Vec<i64> = group.iter().map(|s| s.base_offset()).collect();
        if !self.group_unchanged(group, sizes) {
            tracing::info!(dir = %dir.display(), segments = ?old, "a cleaned group changed while it was cleaned (retention, truncation): not swapped in");
            delete_cleaned(storage.as_ref(), dir, base)?;
            return Ok(false);
        }
        swap_files(storage.as_ref(), dir, base, group)?;
        let new = LogSegment::open(
            storage.clone(),
            dir,
            base,
            size,
            false,
            config.index_interval_bytes,
            config.segment_index_bytes,
            created_ms,
        )?;
        let replaced = self.replace_segments_in_map(Arc::new(new), &old);
        assert!(
            replaced,
            "the group's segments are in the map under the writer lock"
        );
        remove_deleted(storage.as_ref(), dir, group)?;
        for &b in old.iter().filter(|&&b| b != base) {
            snapshots::delete_snapshot(storage.as_ref(), dir, b)?;
        }
        tracing::debug!(dir = %dir.display(), base_offset = base, replaced = ?old, "cleaned segment swapped in");
        Ok(true)
    }
}

/// `buildOffsetMapForSegment`: the keys of `segment`'s batches from `start` on; `None` when the map is
/// full (or the budget spent), else the byte range read (every batch's CRC checked).
fn build_offset_map_for_segment(
    segment: &LogSegment,
    start: i64,
    map: &mut OffsetMap,
    txn: &mut CleanedTransactionMetadata,
    budget: &mut DirtyBudget,
    stream: &mut BatchStream,
) -> Result<Option<(u64, u64)>, Error> {
    // From the index entry at or below `start`, as Kafka reads: the batches before `start` there still
    // move the transaction metadata, and add no key and no latest offset.
    let position = segment.index_lookup_position(start)?;
    let mut full = false;
    let size = segment.size();
    segment
        .scan_to::<Error>(stream, position, size, &mut |batch| {
            let batch = batch?;
            if !budget.take(batch.size_in_bytes() as u64) {
                full = true;
                return Ok(ControlFlow::Break(()));
            }
            put_keys(&batch, start, map, txn, &mut full)?;
            if full {
                return Ok(ControlFlow::Break(()));
            }
            if batch.last_offset() >= start {
                map.update_latest_offset(batch.last_offset());
            }
            Ok(ControlFlow::Continue(()))
        })
        .map_err(|e| in_segment(segment, e))?;
    Ok((!full).then_some((position, size)))
}

/// One batch of the map build: a control batch feeds the transaction metadata, an aborted one adds
/// nothing, any other puts each keyed record at or after `start` while the map is below its desired size.
fn put_keys(
    batch: &AnyBatch<'_>,
    start: i64,
    map: &mut OffsetMap,
    txn: &mut CleanedTransactionMetadata,
    full: &mut bool,
) -> Result<(), Error> {
    let aborted = match batch {
        AnyBatch::V2(b) if b.is_control() => {
            txn.on_control_batch_read(b)?;
            return Ok(());
        }
        AnyBatch::V2(b) => txn.on_batch_read(b),
        AnyBatch::Legacy(_) => txn.on_legacy_batch_read(batch.last_offset()),
    };
    if aborted {
        return Ok(());
    }
    for_each_key_any(batch, &mut |offset, key| {
        if offset >= start && !*full {
            if map.size() < map.max_desired_size() {
                map.put(key, offset);
            } else {
                *full = true;
            }
        }
        Ok(())
    })
}

impl LogDir {
    /// Cleans each compacted log of `logs` that is cleanable (or all, with `force`), reading and writing
    /// the root's `cleaner-offset-checkpoint`; one report per log, in order (a dry run writes nothing).
    /// The checkpoint is rewritten after each log a pass moved (`doneCleaning`), and for a log whose
    /// entry was outside the log (Kafka's `forceUpdateCheckpoint`).
    pub fn clean(
        &mut self,
        logs: &[&PartitionLog],
        cleaner: &CleanerConfig,
        opts: &CleanOptions,
    ) -> Result<Vec<CleanReport>, Error> {
        if self.is_read_only() && !opts.dry_run {
            return Err(Error::ReadOnly {
                dir: self.root().to_owned(),
                operation: "cleaning",
            });
        }
        let (storage, root) = (self.storage().clone(), self.root().to_owned());
        let mut entries = read_cleaner_checkpoint(storage.as_ref(), &root)?;
        let mut reports = Vec::with_capacity(logs.len());
        for log in logs {
            let key = (log.topic().to_owned(), log.partition());
            let checkpoint = entries.get(&key).copied();
            let report = clean_if_cleanable(log, cleaner, opts, checkpoint)?;
            let compact = log.config().cleanup_policy.compact;
            let moved = report.cleaned || (compact && report.range.force_checkpoint);
            if moved && checkpoint != Some(report.end_offset) {
                entries.insert(key, report.end_offset);
                if !opts.dry_run {
                    write_cleaner_checkpoint(storage.as_ref(), &root, &entries)?;
                }
            }
            reports.push(report);
        }
        Ok(reports)
    }
}

/// `grabFilthiestCompactedLog`'s test for one log, then its pass.
fn clean_if_cleanable(
    log: &PartitionLog,
    cleaner: &CleanerConfig,
    opts: &CleanOptions,
    checkpoint: Option<i64>,
) -> Result<CleanReport, Error> {
    let config = log.config();
    if config.cleanup_policy.compact && !opts.force {
        let range = log.cleanable(checkpoint, opts.now_ms)?;
        if !range.is_cleanable(config.min_cleanable_dirty_ratio) {
            let bytes = log.size_in_bytes();
            let segments = log.segment_base_offsets().len();
            return Ok(CleanReport {
                range,
                end_offset: range.first_dirty_offset,
                skipped: Some(format!(
                    "not cleanable: dirty ratio {:.4} is not above min.cleanable.dirty.ratio {} and max.compaction.lag.ms has not passed",
                    range.cleanable_ratio, config.min_cleanable_dirty_ratio
                )),
                segments_before: segments,
                segments_after: segments,
                bytes_before: bytes,
                bytes_after: bytes,
                ..CleanReport::default()
            });
        }
    }
    log.clean(cleaner, opts, checkpoint)
}
