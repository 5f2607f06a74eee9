//! The segments of a partition log (Kafka's `LocalLog` over `LogSegments`): lookups in the segment map,
//! creating and rolling the active segment, and closing the log.

use std::ops::Bound::{Excluded, Unbounded};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::error::IoContext;
use crate::producer_state as snapshots;
use crate::segment::LogSegment;
use crate::Error;
use klog_psm::ProducerStateManager;

use super::{on_threads, PartitionLog};

impl PartitionLog {
    /// The segment holding `offset` (or the first one, when `offset` is below every base) and every
    /// segment after it.
    pub(super) fn segments_from(&self, offset: i64) -> Vec<Arc<LogSegment>> {
        let map = self.segments.read().expect("segments lock poisoned");
        let floor = map
            .range(..=offset)
            .next_back()
            .map_or(i64::MIN, |(b, _)| *b);
        map.range(floor..).map(|(_, s)| s.clone()).collect()
    }

    /// The segment holding `offset` (the first one when `offset` is below every base).
    pub(super) fn segment_floor(&self, offset: i64) -> Option<Arc<LogSegment>> {
        let map = self.segments.read().expect("segments lock poisoned");
        map.range(..=offset)
            .next_back()
            .or_else(|| map.iter().next())
            .map(|(_, s)| s.clone())
    }

    /// The segment after the one based at `base`.
    pub(super) fn segment_after(&self, base: i64) -> Option<Arc<LogSegment>> {
        self.segments
            .read()
            .expect("segments lock poisoned")
            .range((Excluded(base), Unbounded))
            .next()
            .map(|(_, s)| s.clone())
    }

    /// The base offset of the segment after the one based at `base`.
    pub(super) fn next_base_offset(&self, base: i64) -> Option<i64> {
        self.segments
            .read()
            .expect("segments lock poisoned")
            .range((Excluded(base), Unbounded))
            .next()
            .map(|(b, _)| *b)
    }

    pub(crate) fn segment_list(&self) -> Vec<Arc<LogSegment>> {
        self.segments
            .read()
            .expect("segments lock poisoned")
            .values()
            .cloned()
            .collect()
    }

    pub(crate) fn active_segment(&self) -> Arc<LogSegment> {
        self.segments
            .read()
            .expect("segments lock poisoned")
            .values()
            .next_back()
            .cloned()
            .expect("a log always has an active segment")
    }

    pub(super) fn new_segment(&self, base: i64) -> Result<LogSegment, Error> {
        self.dir_dirty.store(true, Ordering::Release);
        let c = &self.config;
        LogSegment::create(
            self.storage.clone(),
            &self.dir,
            base,
            c.index_interval_bytes,
            c.segment_index_bytes,
            c.preallocate.then_some(c.segment_bytes),
            self.clock.now_ms(),
        )
    }

    /// `LogConfig.maxSegmentMs` (`segment.ms`, or `min(max.compaction.lag.ms, segment.ms)` for a compacted
    /// topic) less this segment's jitter: Kafka draws it at random in `[0, min(jitter, segment.ms))`;
    /// here it is a hash of the segment's base offset, so it is spread the same way but reproducible.
    fn max_segment_ms(&self, segment_base: i64) -> i64 {
        let bound = self.config.segment_jitter_ms.min(self.config.segment_ms);
        if bound <= 0 {
            return self.config.max_segment_ms();
        }
        let mut x = segment_base as u64 ^ 0x9E37_79B9_7F4A_7C15;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        self.config.max_segment_ms() - (x % bound as u64) as i64
    }

    pub(super) fn maybe_roll(
        &self,
        size: u64,
        max_ts: i64,
        first_offset: i64,
        last_offset: i64,
        now: i64,
        psm: &mut ProducerStateManager,
    ) -> Result<Arc<LogSegment>, Error> {
        let active = self.active_segment();
        let roll = active.should_roll(
            size,
            max_ts,
            last_offset,
            self.config.segment_bytes as u64,
            self.max_segment_ms(active.base_offset()),
            now,
        )? || first_offset.saturating_sub(active.base_offset()) > i32::MAX as i64;
        if !roll {
            return Ok(active);
        }
        self.roll_at(first_offset.max(self.log_end_offset()), psm)
    }

    fn roll_inner(&self) -> Result<(), Error> {
        let _writer = self.writer();
        self.roll_at(self.log_end_offset(), &mut self.psm())
            .map(|_| ())
    }

    /// Rolls at `base`; the caller holds the producer state (the snapshot is taken from it).
    pub(super) fn roll_at(
        &self,
        base: i64,
        psm: &mut ProducerStateManager,
    ) -> Result<Arc<LogSegment>, Error> {
        let active = self.active_segment();
        if active.base_offset() == base && active.size() == 0 {
            return Ok(active);
        }
        assert!(
            base > active.base_offset(),
            "roll to {base} below the active segment {}",
            active.base_offset()
        );
        tracing::debug!(dir = %self.dir.display(), base_offset = base, sealed = active.base_offset(), "rolled a new segment");
        active.on_become_inactive()?;
        let seg = Arc::new(self.new_segment(base)?);
        self.segments
            .write()
            .expect("segments lock poisoned")
            .insert(base, seg.clone());
        // The producer snapshot at the new base: encoded now, written by the next flush (no fsync here).
        psm.update_map_end_offset(base);
        let bytes = klog_psm::encode_snapshot(&psm.snapshot());
        self.pending_snapshots
            .lock()
            .expect("pending snapshots lock poisoned")
            .push((base, bytes));
        Ok(seg)
    }

    fn close_inner(&self) -> Result<(), Error> {
        let _writer = self.writer();
        let leo = self.log_end_offset();
        self.write_pending_snapshots()?;
        for seg in self.segment_list() {
            seg.close()?;
        }
        // A clean close leaves a snapshot at the log end, so the next open replays nothing.
        if !snapshots::list_snapshots(self.storage.as_ref(), &self.dir)?.contains(&leo) {
            let bytes = klog_psm::encode_snapshot(&self.psm().snapshot());
            snapshots::write_snapshot(self.storage.as_ref(), &self.dir, leo, &bytes)?;
            tracing::debug!(dir = %self.dir.display(), offset = leo, "producer snapshot written at close");
        }
        self.storage.sync_dir(&self.dir).at(&self.dir)?;
        self.recovery_point.fetch_max(leo, Ordering::AcqRel);
        tracing::debug!(dir = %self.dir.display(), log_end_offset = leo, "partition log closed");
        Ok(())
    }

    /// Rolls a new active segment at the log end offset.
    pub fn roll(&self) -> Result<(), Error> {
        self.writable("roll")?;
        self.guarded(|| self.roll_inner())
    }

    /// Closes every log ([`PartitionLog::close`]) and returns each log's own result (a clean shutdown
    /// of many partitions): flushed together first ([`PartitionLog::flush_each`]), then closed on up to
    /// [`FLUSH_THREADS`](super::FLUSH_THREADS) threads, since each close syncs its indexes and writes a producer snapshot.
    pub fn close_each(logs: &[&PartitionLog]) -> Vec<Result<(), Error>> {
        let flushed = Self::flush_each(logs);
        let closed = on_threads(logs, |_, l| l.close());
        // A log whose flush failed is failed: its close lets go of it and reports what went wrong first.
        flushed
            .into_iter()
            .zip(closed)
            .map(|(f, c)| f.and(c))
            .collect()
    }

    /// Clean close: everything flushed, the active segment's closing time-index entry written.
    /// A closed log refuses changes, and its directory may be opened again (the claim and the log
    /// directory's lock are released).
    pub fn close(&self) -> Result<(), Error> {
        if self.read_only || self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        let closed = self.guarded(|| self.close_inner());
        // A log that failed a write cannot close cleanly (nothing since its last good sync is trusted),
        // but it still lets go of the partition, so the writer can reopen it and recover.
        if closed.is_ok() || self.is_failed() {
            self.closed.store(true, Ordering::Release);
            self.claim.lock().unwrap_or_else(|e| e.into_inner()).take();
        }
        closed
    }

    /// Kafka's `LocalLog.replaceSegments` on the segment map, under the caller's writer lock: the
    /// segments based at `old` leave the map and `new` takes its base offset, in one step readers see
    /// whole. Returns whether every one of `old` was still there (retention or a truncation may have
    /// removed some since the cleaner read them; then nothing is changed).
    pub(crate) fn replace_segments_in_map(&self, new: Arc<LogSegment>, old: &[i64]) -> bool {
        let mut map = self.segments.write().expect("segments lock poisoned");
        if !old.iter().all(|b| map.contains_key(b)) {
            return false;
        }
        for base in old {
            map.remove(base);
        }
        map.insert(new.base_offset(), new);
        true
    }

    /// For tests and tools: the segment at `base`.
    pub fn segment(&self, base: i64) -> Option<Arc<LogSegment>> {
        self.segments
            .read()
            .expect("segments lock poisoned")
            .get(&base)
            .cloned()
    }
}
