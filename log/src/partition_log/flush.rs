//! Flushes (Kafka's `LocalLog.flush` and the recovery point): group commit of concurrent appends, the
//! flush due by `flush.messages` / `flush.ms`, and flushing many logs together.

use std::ops::Bound::{Excluded, Unbounded};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::segment::LogSegment;
use crate::Error;

use super::{on_threads, PartitionLog};

/// Who is flushing and who waits for it (under `flush_lock`).
///
/// Group commit, as a database's log does it: ONE flush at a time gathers its group, reads its target
/// (the log end offset) and syncs; every caller that arrives meanwhile, covered or not, sleeps until it
/// ends, and all of them are woken at once. Those it covered return; the first one it did not cover
/// leads the next flush, which gathers the callers this one released before it reads its target. A
/// second sync started beside a running one (as before issue #28) covered only the appends that missed
/// the first, and the group stayed split: traced on a group of 8, 444 fdatasyncs for 1,602 appends,
/// 193 of them covering one append. The appends themselves never wait for a flush: the next group is
/// written while this one's sync runs.
#[derive(Debug, Default)]
pub(super) struct FlushState {
    /// A flush is under way (gathering or syncing).
    running: bool,
    /// Callers asleep on `flush_done`.
    waiting: usize,
    /// Callers woken by the last flush that have not yet rechecked: those it covered return and, as a
    /// rule, append again at once; the next flush waits for them (see `gather_appends`).
    rechecking: usize,
    /// Callers the last flush covered (its leader included): they usually append again at once.
    released: u64,
    /// `appends_started` when the last flush ended.
    appends_started_at_release: u64,
    /// Flushes ended so far: a waiter that rechecks after a wake that no flush's end caused is not
    /// one the last flush released.
    ended: u64,
    /// Flushes that synced, and the callers whose offsets they covered (leaders and waiters that
    /// returned): how many appends a sync covers, for tests and `klog bench`.
    syncs: u64,
    covered: u64,
    /// How long the last flush's syncs took: the gather waits for released appenders up to half of it.
    last_sync: std::time::Duration,
}

/// A flush under way, from the moment it took its turn. When it ends (or unwinds), every waiter is
/// woken and rechecks.
struct FlushTurn<'a> {
    log: &'a PartitionLog,
    /// How long its syncs took, once they ran.
    synced_in: Option<std::time::Duration>,
}

impl Drop for FlushTurn<'_> {
    fn drop(&mut self) {
        let mut state = self
            .log
            .flush_lock
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        state.running = false;
        if let Some(took) = self.synced_in {
            state.last_sync = took;
        }
        state.rechecking = state.waiting;
        state.released = 1;
        state.ended += 1;
        state.syncs += 1;
        state.covered += 1;
        state.appends_started_at_release = self.log.appends_started.load(Ordering::Acquire);
        drop(state);
        self.log.flush_done.notify_all();
    }
}

/// The least a flush leader may wait for the appenders the last flush released (and the appends under
/// way) before it syncs; it may wait up to half the last flush's sync time if that is longer. An
/// appender that misses the sync waits for the whole next one, so waiting up to half a sync for it is
/// the cheaper side: with a fixed 100 us, a group of 8 on a loaded 2-CPU machine still had 50 of 305
/// syncs cover one append (the released appenders woke and appended after the leader gave up).
const GATHER_MIN: std::time::Duration = std::time::Duration::from_micros(100);
/// The most a gather waits, whatever the last sync took (a stalled device must not stall the next flush
/// further).
const GATHER_MAX: std::time::Duration = std::time::Duration::from_millis(2);

/// How a log's flushes grouped its callers so far (see [`PartitionLog::flush_groups`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlushGroups {
    /// Flushes that ran (each syncs the log once).
    pub flushes: u64,
    /// `flush` calls those flushes covered: their leaders, and the callers that waited for them.
    pub callers: u64,
    /// Callers asleep now, waiting for the flush under way to end.
    pub waiting: usize,
}

impl PartitionLog {
    fn flush_inner(&self, offset: i64) -> Result<(), Error> {
        if self.recovery_point() >= offset {
            return Ok(());
        }
        let mut flushing = self.flush_lock.lock().expect("flush lock poisoned");
        while flushing.running {
            flushing.waiting += 1;
            let ended = flushing.ended;
            flushing = self.flush_done.wait(flushing).expect("flush lock poisoned");
            flushing.waiting -= 1;
            if flushing.ended != ended {
                flushing.rechecking = flushing.rechecking.saturating_sub(1);
            }
            if self.recovery_point() >= offset {
                flushing.released += 1;
                flushing.covered += 1;
                return Ok(());
            }
        }
        if self.recovery_point() >= offset {
            return Ok(());
        }
        flushing.running = true;
        drop(flushing);
        let mut turn = FlushTurn {
            log: self,
            synced_in: None,
        };
        self.gather_appends();
        let target = self.log_end_offset();
        let started = std::time::Instant::now();
        self.flush_covering(target)?;
        turn.synced_in = Some(started.elapsed());
        Ok(())
    }

    /// How this log's flushes grouped their callers since it opened: flushes that ran, the `flush` calls
    /// they covered (a group commit of N appenders at its best covers N per flush), and who waits now.
    pub fn flush_groups(&self) -> FlushGroups {
        let state = self.flush_lock.lock().unwrap_or_else(|e| e.into_inner());
        FlushGroups {
            flushes: state.syncs,
            callers: state.covered,
            waiting: state.waiting,
        }
    }

    /// Group commit: before syncing, let the appenders the last flush released come back and the appends
    /// under way publish, so this sync covers them rather than the next one. Without it a new flush starts
    /// the moment the last one ends and covers only what was appended during it: each appender then waits
    /// for two syncs. Bounded by half the last sync (within `GATHER_MIN`..`GATHER_MAX`); a lone appender
    /// never waits (nothing is under way).
    /// Durability is unchanged: the flush covers the log end offset read after this wait.
    pub(super) fn gather_appends(&self) {
        let mut deadline = None;
        loop {
            let (rechecking, awaited, bound) = {
                let state = self.flush_lock.lock().expect("flush lock poisoned");
                let started = self.appends_started.load(Ordering::Acquire);
                let back = started.saturating_sub(state.appends_started_at_release);
                let bound = (state.last_sync / 2).clamp(GATHER_MIN, GATHER_MAX);
                (state.rechecking, state.released.saturating_sub(back), bound)
            };
            if rechecking == 0
                && awaited == 0
                && self.appends_in_progress.load(Ordering::Acquire) == 0
            {
                return;
            }
            let deadline = *deadline.get_or_insert_with(|| std::time::Instant::now() + bound);
            if std::time::Instant::now() >= deadline {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// The flush itself: everything up to `target` (the log end offset read after the gather), and what
    /// was appended since; the recovery point moves to `target` only once the syncs covered it.
    fn flush_covering(&self, target: i64) -> Result<(), Error> {
        let from = self.recovery_point();
        for seg in self.segment_list() {
            let next_base = self
                .segments
                .read()
                .expect("segments lock poisoned")
                .range((Excluded(seg.base_offset()), Unbounded))
                .next()
                .map(|(b, _)| *b);
            // Below the recovery point only a freshly sealed segment still needs its indexes synced (its
            // time index holds the max timestamp retention relies on).
            if next_base.is_some_and(|n| n <= from) && !seg.has_unsynced_indexes() {
                continue;
            }
            seg.flush()?;
        }
        // Held until the snapshots and the directory are synced: a close writing them beside a flush
        // must not find them taken or the directory clean and go on before they are durable.
        let _files = self.flush_files.lock().expect("flush files lock poisoned");
        self.write_pending_snapshots()?;
        // A new segment's (and snapshot's) directory entry must be durable before the recovery point passes it.
        if self.dir_dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = self.storage.sync_dir(&self.dir) {
                self.dir_dirty.store(true, Ordering::Release);
                return Err(Error::io(&self.dir, e));
            }
        }
        self.recovery_point.fetch_max(target, Ordering::AcqRel);
        self.last_flush_ms
            .store(self.clock.now_ms(), Ordering::Release);
        Ok(())
    }

    /// Whether the topic's flush settings ask for a flush now: `flush.messages` unflushed messages, or
    /// `flush.ms` since the last flush, with something unflushed. (Kafka's defaults never ask.)
    pub fn flush_due(&self) -> bool {
        // The recovery point comes from a checkpoint and may be far below the log (even i64::MIN).
        let unflushed = self.log_end_offset().saturating_sub(self.recovery_point());
        let since = self
            .clock
            .now_ms()
            .saturating_sub(self.last_flush_ms.load(Ordering::Acquire));
        unflushed > 0 && (unflushed >= self.config.flush_messages || since >= self.config.flush_ms)
    }

    /// Flushes if `flush.ms` has passed since the last flush.
    pub fn maybe_flush(&self) -> Result<(), Error> {
        let last = self.last_flush_ms.load(Ordering::Acquire);
        if self.clock.now_ms().saturating_sub(last) >= self.config.flush_ms {
            self.flush(self.log_end_offset())?;
        }
        Ok(())
    }

    /// `flush.messages`: checked after the append released the writer lock, so the sync does not hold
    /// up other appenders (they join the next flush as a group instead).
    pub(super) fn flush_if_messages_due(&self) -> Result<(), Error> {
        // The recovery point comes from a checkpoint and may be far below the log (even i64::MIN).
        let unflushed = self.log_end_offset().saturating_sub(self.recovery_point());
        if unflushed >= self.config.flush_messages {
            self.flush(self.log_end_offset())?;
        }
        Ok(())
    }

    /// Syncs everything up to at least `offset` and moves the recovery point. Concurrent callers share one
    /// sync (group commit): whoever syncs covers every append published before it started.
    pub fn flush(&self, offset: i64) -> Result<(), Error> {
        if self.read_only || self.is_closed() {
            return Ok(()); // nothing of a reader's is ever written
        }
        self.guarded(|| self.flush_inner(offset))
    }

    /// Flushes every log to its log end offset (a log directory's periodic flush, a group commit across
    /// partitions). Where the storage syncs files together (io_uring: every partition's writes in one
    /// submission, `RWF_DSYNC`, instead of one `fdatasync` after another) their `.log`s are synced in one
    /// call first; then each log's own flush finds them synced and moves its recovery point. A failure of
    /// that shared call is left to each log's flush to meet again and report (the direct path keeps a
    /// failed file failed), so the log it belongs to is the one taken offline.
    pub fn flush_many(logs: &[&PartitionLog]) -> Result<(), Error> {
        Self::sync_logs_together(logs);
        for log in logs {
            log.flush(log.log_end_offset())?;
        }
        Ok(())
    }

    /// Flushes every log to its log end offset and returns each log's own result (a failover of many
    /// partitions, where one partition's failed sync must fail only that partition). Where the storage
    /// syncs files together their `.log`s go in one call first, as in [`PartitionLog::flush_many`]; then
    /// the logs' own flushes (what is left: indexes, new segments' directories, or on other storages
    /// everything) run on up to [`FLUSH_THREADS`](super::FLUSH_THREADS) threads: an `fdatasync` waits on the disk, not the
    /// CPU, and a disk (and its journal) takes many at once in about the time of one.
    pub fn flush_each(logs: &[&PartitionLog]) -> Vec<Result<(), Error>> {
        Self::sync_logs_together(logs);
        on_threads(logs, |_, l| l.flush(l.log_end_offset()))
    }

    /// Where the storage syncs files together, the `.log`s of every log with unflushed data in one
    /// [`Storage::sync_files`] call. Its failure is left to each log's own flush to meet again and report
    /// (the direct path keeps a failed file failed), so the log it belongs to is the one taken offline.
    fn sync_logs_together(logs: &[&PartitionLog]) {
        let Some(first) = logs.first() else { return };
        if !first.storage.syncs_together() {
            return;
        }
        let files: Vec<_> = logs
            .iter()
            .filter(|l| !l.read_only && !l.is_closed())
            .filter(|l| l.recovery_point() < l.log_end_offset())
            .flat_map(|l| l.segments_to_sync())
            .map(|seg| seg.log_file())
            .collect();
        let _ = first.storage.sync_files(&files);
    }

    /// The segments a flush to the log end syncs: from the one holding the recovery point, and any
    /// freshly sealed one whose indexes are not yet synced.
    fn segments_to_sync(&self) -> Vec<Arc<LogSegment>> {
        let from = self.recovery_point();
        let segments = self.segment_list();
        let mut out = Vec::new();
        for (i, seg) in segments.iter().enumerate() {
            let next_base = segments.get(i + 1).map(|s| s.base_offset());
            if next_base.is_some_and(|n| n <= from) && !seg.has_unsynced_indexes() {
                continue;
            }
            out.push(seg.clone());
        }
        out
    }
}
