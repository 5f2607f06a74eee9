//! A broker's committed group offsets carried into the new cluster's `__consumer_offsets`.
//!
//! klog places a group in `partition_for_group(group, 50)` ([`crate::groups::OFFSETS_TOPIC_PARTITIONS`]).
//! A broker whose `offsets.topic.num.partitions` is 50 placed every group where klog looks for it, so its
//! partitions are taken as they are (files linked or copied like any partition). With any other count a
//! group's records sit in another partition than the one klog appends its next commit to, so the
//! broker's partitions are replayed (the last commit of a key wins, a tombstone deletes it) and every
//! committed offset is written again, offset, leader epoch, metadata and commit time unchanged, as
//! OffsetCommit records in the partition klog computes. The group metadata records (members,
//! generations) are not carried over then: klog has no group coordinator.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use klog_log::checkpoint::TopicId;
use klog_log::clock::Clock;
use klog_log::coordinator::{partition_for_group, CONSUMER_OFFSETS_TOPIC};
use klog_log::io::Storage;
use klog_log::log_dir::LogDir;
use klog_log::partition_log::read_only_view;
use klog_recovery::loader::LogLoader;

use crate::error::Error;
use crate::groups::{self, OffsetChange, OffsetKey, OFFSETS_TOPIC_PARTITIONS};
use crate::node::{consumer_offsets_config, partition_dir_name};
use crate::source::CommittedOffset;

/// Every offset committed in the broker's `__consumer_offsets` partitions `partitions` of log directory
/// `source`, read through a read-only view (an unclean partition is recovered in memory only).
pub(crate) fn read_broker_offsets(
    storage: &Arc<dyn Storage>,
    source: &Path,
    partitions: &[i32],
) -> Result<BTreeMap<OffsetKey, CommittedOffset>, Error> {
    let reader = read_only_view(Arc::clone(storage));
    let log_dir = LogDir::open_read_only(Arc::clone(&reader), source)?;
    let loader = LogLoader::new(reader, consumer_offsets_config()?);
    let mut out = BTreeMap::new();
    for &p in partitions {
        let name = partition_dir_name(CONSUMER_OFFSETS_TOPIC, p);
        let (log, _) = loader.load_partition(&log_dir, &name, false)?;
        log.update_high_watermark(log.log_end_offset());
        groups::replay(p, &log, &mut out)?;
    }
    Ok(out)
}

/// Writes `offsets` into log directory `into` as klog places them: one batch per `__consumer_offsets`
/// partition, synced and closed cleanly, each partition with topic id `topic_id`. Returns the
/// partitions written.
pub(crate) fn write_offsets(
    storage: &Arc<dyn Storage>,
    clock: &Arc<dyn Clock>,
    into: &Path,
    topic_id: TopicId,
    offsets: &BTreeMap<OffsetKey, CommittedOffset>,
) -> Result<Vec<u32>, Error> {
    let mut by_partition: BTreeMap<u32, Vec<OffsetChange>> = BTreeMap::new();
    for c in offsets.values() {
        by_partition
            .entry(partition_for_group(&c.group, OFFSETS_TOPIC_PARTITIONS))
            .or_default()
            .push(OffsetChange::Commit(c.clone()));
    }
    let mut log_dir = LogDir::open(Arc::clone(storage), into)?;
    let now = clock.now_ms();
    for (p, changes) in &by_partition {
        let name = partition_dir_name(CONSUMER_OFFSETS_TOPIC, *p as i32);
        let dir = into.join(&name);
        storage
            .create_dir_all(&dir)
            .map_err(|e| Error::io(&dir, e))?;
        let (log, _) = log_dir.open_partition_with_clock(
            &name,
            consumer_offsets_config()?,
            Arc::clone(clock),
        )?;
        log.set_topic_id(topic_id)?;
        let refs: Vec<&OffsetChange> = changes.iter().collect();
        let mut bytes = groups::offsets_batch(&refs, now)?;
        log.append_as_leader(&mut bytes, 0)?;
        log.update_high_watermark(log.log_end_offset());
        log.flush(log.log_end_offset())?;
        log_dir.close_partition(log)?;
    }
    log_dir.shut_down()?;
    Ok(by_partition.into_keys().collect())
}
