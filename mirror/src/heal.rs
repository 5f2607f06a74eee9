//! Finishing, on a running node, what a crash or a failed write interrupted:
//!
//! - DeleteMirror saves the metadata first and tombstones the mirror's `__mirror_state` records after;
//!   a crash in between leaves records of a mirror that no longer exists. Open tombstones them, and
//!   CreateMirror does again before a name can be reused, so a new mirror never adopts an old LME.
//! - A partition log that failed a write (a full disk, EIO) refuses writes until it is reopened: a
//!   failed fsync may have dropped dirty pages. The manager reopens it here, with recovery from its
//!   last good sync, before the partition's next retry, and swaps it in; `__mirror_state`'s partitions
//!   likewise (and its cache is replayed from what recovery kept), and a `__consumer_offsets` partition
//!   before the next group-offset sync. No restart needed.

use std::sync::Arc;

use klog_log::config::LogConfig;
use klog_log::coordinator::CONSUMER_OFFSETS_TOPIC;
use klog_log::partition_log::{OpenOptions, PartitionLog};
use klog_recovery::swap::complete_swaps;

use crate::error::Error;
use crate::node::{
    consumer_offsets_config, lock, mirror_state_config, topic_config, unknown_topic, Node,
};
use crate::store::MIRROR_STATE_TOPIC;

impl Node {
    /// Tombstones the `__mirror_state` records (states and LMEs) of mirrors the metadata no longer has.
    pub(crate) fn tombstone_orphans(&self) -> Result<(), Error> {
        self.heal_store()?;
        let meta = lock(&self.meta);
        let mut store = lock(&self.store);
        let tombstones = store.orphan_tombstones(|m| meta.mirrors.contains_key(m));
        if !tombstones.is_empty() {
            store.write(tombstones)?;
        }
        Ok(())
    }

    /// Reopens `topic-partition` with recovery if it failed a write. A reopen that fails (the disk is
    /// still full) leaves the failed log in place, to be tried again at the next retry.
    pub(crate) fn heal_partition(&self, topic: &str, partition: i32) -> Result<(), Error> {
        let Some(old) = self.log(topic, partition).filter(|l| l.is_failed()) else {
            return Ok(());
        };
        let config = topic_config(&self.topic(topic).ok_or_else(|| unknown_topic(topic))?)?;
        let log = Arc::new(self.reopen(&old, config)?);
        lock(&self.logs).insert((topic.to_owned(), partition), log);
        Ok(())
    }

    /// Reopens `__consumer_offsets-<partition>` with recovery if it failed a write (before the next
    /// group-offset write to it; what is committed is replayed from the log, so nothing else changes).
    pub(crate) fn heal_offsets_partition(&self, partition: i32) -> Result<(), Error> {
        let Some(old) = self
            .log(CONSUMER_OFFSETS_TOPIC, partition)
            .filter(|l| l.is_failed())
        else {
            return Ok(());
        };
        let log = Arc::new(self.reopen(&old, consumer_offsets_config()?)?);
        lock(&self.logs).insert((CONSUMER_OFFSETS_TOPIC.to_owned(), partition), log);
        Ok(())
    }

    /// Reopens every `__mirror_state` partition that failed a write, and replays it into the store.
    pub(crate) fn heal_store(&self) -> Result<(), Error> {
        let failed = lock(&self.store).failed_partitions();
        for p in failed {
            let Some(old) = self.log(MIRROR_STATE_TOPIC, p as i32) else {
                continue;
            };
            let log = Arc::new(self.reopen(&old, mirror_state_config()?)?);
            lock(&self.store).replace_partition(p, Arc::clone(&log))?;
            lock(&self.logs).insert((MIRROR_STATE_TOPIC.to_owned(), p as i32), log);
        }
        Ok(())
    }

    /// A new open of `old`'s directory that recovers everything after `old`'s last good sync (Kafka's
    /// unclean-shutdown path), keeping its write mode. `old` lets go of the partition first.
    pub(crate) fn reopen(
        &self,
        old: &PartitionLog,
        config: LogConfig,
    ) -> Result<PartitionLog, Error> {
        // A failed log cannot close cleanly (that error is the failure being healed); it still releases
        // the partition.
        let _ = old.close();
        let dir = old.dir().to_owned();
        complete_swaps(self.storage.as_ref(), &dir)?;
        let options = OpenOptions {
            recovery_point: old.recovery_point(),
            log_start_offset: old.log_start_offset(),
            clean_shutdown: false,
        };
        let (log, _) = PartitionLog::open_with_clock(
            Arc::clone(&self.storage),
            &dir,
            config,
            options,
            Arc::clone(&self.clock),
        )?;
        log.update_high_watermark(log.log_end_offset());
        log.set_write_mode(old.write_mode());
        Ok(log)
    }
}
