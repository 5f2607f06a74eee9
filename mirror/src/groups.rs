//! Consumer-group offsets on a local node, stored the way Kafka's group coordinator stores them:
//! OffsetCommit records (Kafka's key and value schemas, `klog_log::coordinator::offsets`) in
//! `__consumer_offsets-<N>`, N = `partition_for_group(group, 50)`, a deleted offset as a tombstone. A
//! Kafka broker that adopts these partitions loads the same groups (an offset commit alone makes
//! Kafka's coordinator create the group as an empty "simple" group), and `kafka-dump-log
//! --offsets-decoder` prints them.
//!
//! klog has no group coordinator: no members, no generations, no expiry. The partitions exist once a
//! group has committed into them (a node opens whichever are on disk); they are never trimmed by time or
//! size, and klog does not compact them (Kafka's cleaner does once a broker owns them), so a writer
//! appends a commit only when it changes what is committed. What is committed is read back by replaying
//! the partitions: the last record of a key wins, a tombstone removes it, and a transactional offset
//! commit counts only once its producer's COMMIT marker is read (an ABORT drops it), as Kafka's
//! coordinator applies `TxnOffsetCommit`.

use std::collections::BTreeMap;
use std::sync::Arc;

use klog_log::checkpoint::TopicId;
use klog_log::coordinator::{
    partition_for_group, OffsetCommitKey, OffsetCommitValue, CONSUMER_OFFSETS_TOPIC,
};
use klog_log::format::{AnyBatch, BatchBuilder, Batches, Compression, ControlRecordType, Record};
use klog_log::partition_log::PartitionLog;
use serde::Serialize;

use crate::error::{Error, MirrorError};
use crate::node::{consumer_offsets_config, lock, partition_dir_name, random_bytes, Node};
use crate::source::CommittedOffset;

/// `offsets.topic.num.partitions`: Kafka's default, which a broker adopting these files must also use
/// (the partition of a group is a function of it).
pub const OFFSETS_TOPIC_PARTITIONS: u32 = 50;

/// The version of OffsetCommitValue klog writes: Kafka 4.x's plain commit (offset, leader epoch,
/// metadata, commit timestamp), which every 4.x broker reads.
const VALUE_VERSION: i16 = 3;

/// `(group, topic, partition)`: what an offset commit is keyed by.
pub type OffsetKey = (String, String, i32);

/// A change to what is committed: a commit, or a tombstone (the offset is deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetChange {
    /// The offset committed (a record with a value).
    Commit(CommittedOffset),
    /// The offset deleted (a tombstone: the key with a null value).
    Delete(OffsetKey),
}

impl OffsetChange {
    fn group(&self) -> &str {
        match self {
            OffsetChange::Commit(c) => &c.group,
            OffsetChange::Delete((g, _, _)) => g,
        }
    }

    fn encode(&self) -> Result<(Vec<u8>, Option<Vec<u8>>), Error> {
        let (group, topic, partition) = match self {
            OffsetChange::Commit(c) => (&c.group, &c.topic, c.partition),
            OffsetChange::Delete((g, t, p)) => (g, t, *p),
        };
        let key = OffsetCommitKey {
            group: group.clone(),
            topic: topic.clone(),
            partition,
        }
        .encode()?;
        let value = match self {
            OffsetChange::Commit(c) => Some(
                OffsetCommitValue {
                    offset: c.offset,
                    leader_epoch: c.leader_epoch,
                    metadata: c.metadata.clone(),
                    commit_timestamp: c.commit_timestamp,
                    expire_timestamp: -1,
                    topic_id: None,
                }
                .encode(VALUE_VERSION)?,
            ),
            OffsetChange::Delete(_) => None,
        };
        Ok((key, value))
    }
}

/// One committed offset as `klog group describe` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupOffsetDescription {
    /// The group id.
    pub group: String,
    /// The topic the offset is for.
    pub topic: String,
    /// The partition the offset is for.
    pub partition: i32,
    /// The next offset the group reads.
    pub committed_offset: i64,
    /// The leader epoch committed with it (-1: unknown).
    pub leader_epoch: i32,
    /// The partition's log end offset here; `None` when the topic or partition does not exist here.
    pub log_end_offset: Option<i64>,
    /// `log_end_offset - committed_offset`, never below 0.
    pub lag: Option<i64>,
    /// Which `__consumer_offsets` partition holds the commit.
    pub offsets_partition: u32,
}

/// Every committed offset of the node, by key (the partitions replayed).
pub fn committed_offsets(node: &Node) -> Result<BTreeMap<OffsetKey, CommittedOffset>, Error> {
    let logs: Vec<(i32, Arc<PartitionLog>)> = lock(&node.logs)
        .iter()
        .filter(|((t, _), _)| t == CONSUMER_OFFSETS_TOPIC)
        .map(|((_, p), log)| (*p, Arc::clone(log)))
        .collect();
    let mut out = BTreeMap::new();
    for (p, log) in logs {
        replay(p, &log, &mut out)?;
    }
    Ok(out)
}

/// One offset commit record: the key, and the offset (`None`: a tombstone, the offset deleted).
type OffsetRecord = (OffsetKey, Option<CommittedOffset>);

/// Applies partition `p`'s offset commits in order; other coordinator records (group metadata, the
/// consumer-group records of KIP-848) are not offsets and are passed over. A transactional offset
/// commit (`sendOffsetsToTransaction`) waits for its producer's marker, as in Kafka's coordinator:
/// applied at COMMIT, dropped at ABORT, never applied while the transaction is open.
pub(crate) fn replay(
    p: i32,
    log: &PartitionLog,
    out: &mut BTreeMap<OffsetKey, CommittedOffset>,
) -> Result<(), Error> {
    let mut offset = log.log_start_offset();
    let end = log.high_watermark();
    let mut scratch = Vec::new();
    let mut pending: BTreeMap<i64, Vec<OffsetRecord>> = BTreeMap::new();
    while offset < end {
        let read = log.read(offset, 1 << 20, Some(end), true)?;
        if read.next_offset <= offset {
            break;
        }
        for batch in Batches::new(read.records.as_slice()) {
            let AnyBatch::V2(batch) = batch? else {
                return Err(corrupt(p, offset, "a legacy (v0/v1) batch".into()));
            };
            if batch.is_control() {
                let ended = pending.remove(&batch.producer_id()).unwrap_or_default();
                let control = batch.control_record()?.map(|c| c.record_type);
                if batch.is_transactional() && control == Some(ControlRecordType::Commit) {
                    ended.into_iter().for_each(|r| apply(out, r));
                }
                continue;
            }
            for record in batch.records(&mut scratch)? {
                let Some(r) = offset_record(p, &record?)? else {
                    continue;
                };
                if batch.is_transactional() {
                    pending.entry(batch.producer_id()).or_default().push(r);
                } else {
                    apply(out, r);
                }
            }
        }
        offset = read.next_offset;
    }
    Ok(())
}

fn corrupt(partition: i32, offset: i64, reason: String) -> Error {
    Error::CorruptGroupOffsets {
        partition,
        offset,
        reason,
    }
}

fn apply(out: &mut BTreeMap<OffsetKey, CommittedOffset>, (id, value): OffsetRecord) {
    match value {
        None => {
            out.remove(&id);
        }
        Some(c) => {
            out.insert(id, c);
        }
    }
}

/// The offset commit a record of partition `p` holds; `None` for the other group records.
fn offset_record(p: i32, record: &Record<'_>) -> Result<Option<OffsetRecord>, Error> {
    let Some(key) = record.key else {
        return Err(corrupt(p, record.offset, "a record without a key".into()));
    };
    // Record types 0 and 1 are offset commits; 2 and up are other group records.
    if key.len() >= 2 && i16::from_be_bytes([key[0], key[1]]) > 1 {
        return Ok(None);
    }
    let k = OffsetCommitKey::decode(key).map_err(|e| corrupt(p, record.offset, e.to_string()))?;
    let id = (k.group, k.topic, k.partition);
    let Some(v) = record.value else {
        return Ok(Some((id, None)));
    };
    let (_, v) =
        OffsetCommitValue::decode(v).map_err(|e| corrupt(p, record.offset, e.to_string()))?;
    let committed = CommittedOffset {
        group: id.0.clone(),
        topic: id.1.clone(),
        partition: id.2,
        offset: v.offset,
        leader_epoch: v.leader_epoch,
        metadata: v.metadata,
        commit_timestamp: v.commit_timestamp,
    };
    Ok(Some((id, Some(committed))))
}

/// Reopens with recovery every `__consumer_offsets` partition that failed a write (its last records
/// may not be durable: what recovery keeps is what is committed, so a sync compares with that).
pub fn heal(node: &Node) -> Result<(), Error> {
    let failed: Vec<i32> = lock(&node.logs)
        .iter()
        .filter(|((t, _), log)| t == CONSUMER_OFFSETS_TOPIC && log.is_failed())
        .map(|((_, p), _)| *p)
        .collect();
    for p in failed {
        node.heal_offsets_partition(p)?;
    }
    Ok(())
}

/// Writes `changes`: one batch per `__consumer_offsets` partition (created on first use), synced.
pub fn write(node: &Node, changes: &[OffsetChange]) -> Result<(), Error> {
    let mut by_partition: BTreeMap<u32, Vec<&OffsetChange>> = BTreeMap::new();
    for c in changes {
        by_partition
            .entry(partition_for_group(c.group(), OFFSETS_TOPIC_PARTITIONS))
            .or_default()
            .push(c);
    }
    let now = node.clock.now_ms();
    for (p, changes) in by_partition {
        let log = offsets_log(node, p as i32)?;
        let mut bytes = offsets_batch(&changes, now)?;
        log.append_as_leader(&mut bytes, 0)?;
        log.update_high_watermark(log.log_end_offset());
        log.flush(log.log_end_offset())?;
    }
    Ok(())
}

/// One uncompressed batch of OffsetCommit records (keys and values as Kafka's coordinator writes them).
pub(crate) fn offsets_batch(changes: &[&OffsetChange], now_ms: i64) -> Result<Vec<u8>, Error> {
    let mut b = BatchBuilder::new(Compression::None);
    for c in changes {
        let (k, v) = c.encode()?;
        b.append(now_ms, Some(&k), v.as_deref(), &[])?;
    }
    Ok(b.build()?)
}

/// `__consumer_offsets-<p>`, opened (reopened with recovery if it failed a write) or created. A new partition gets the topic id its siblings have
/// (one topic), or a new random one for the first.
fn offsets_log(node: &Node, p: i32) -> Result<Arc<PartitionLog>, Error> {
    // A write that failed (a full disk) took the log offline: reopen it with recovery first.
    node.heal_offsets_partition(p)?;
    if let Some(log) = node.log(CONSUMER_OFFSETS_TOPIC, p) {
        return Ok(log);
    }
    let sibling = lock(&node.logs)
        .iter()
        .find(|((t, _), _)| t == CONSUMER_OFFSETS_TOPIC)
        .map(|(_, log)| Arc::clone(log));
    let id = match sibling {
        Some(log) => log.topic_id()?,
        None => None,
    }
    .unwrap_or_else(|| TopicId::from_random(random_bytes()));
    let (log, _) = lock(&node.log_dir).open_partition_with_clock(
        &partition_dir_name(CONSUMER_OFFSETS_TOPIC, p),
        consumer_offsets_config()?,
        Arc::clone(&node.clock),
    )?;
    log.set_topic_id(id)?;
    let log = Arc::new(log);
    lock(&node.logs).insert((CONSUMER_OFFSETS_TOPIC.to_owned(), p), Arc::clone(&log));
    Ok(log)
}

/// The leader epoch of the record before `offset` in `log` (what a consumer that read up to `offset`
/// commits), -1 when `offset` is 0 or the log has no epochs.
pub fn epoch_before(log: &PartitionLog, offset: i64) -> i32 {
    log.leader_epochs()
        .iter()
        .take_while(|e| e.start_offset < offset)
        .last()
        .map_or(-1, |e| e.epoch)
}

/// `klog group commit`: `group` commits `offset` for `topic`-`partition` on this node, as a consumer's
/// OffsetCommit would (the partition must exist; the offset is at least 0).
pub fn commit(
    node: &Node,
    group: &str,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<CommittedOffset, Error> {
    if group.is_empty() {
        return Err(Error::mirror(
            MirrorError::InvalidRequest,
            "the group id is empty",
        ));
    }
    // A topic of the cluster's metadata (not an internal log such as `__mirror_state`).
    let log = node.topic(topic).and_then(|_| node.log(topic, partition));
    let log = log.ok_or_else(|| {
        Error::mirror(
            MirrorError::UnknownTopicOrPartition,
            format!("{topic}-{partition} does not exist"),
        )
    })?;
    if offset < 0 {
        return Err(Error::mirror(
            MirrorError::InvalidRequest,
            format!("offset {offset} is negative"),
        ));
    }
    let committed = CommittedOffset {
        group: group.to_owned(),
        topic: topic.to_owned(),
        partition,
        offset,
        leader_epoch: epoch_before(&log, offset),
        metadata: String::new(),
        commit_timestamp: node.clock.now_ms(),
    };
    write(node, &[OffsetChange::Commit(committed.clone())])?;
    Ok(committed)
}

/// `klog group describe`: every committed offset with the partition's log end and the lag.
pub fn describe(node: &Node) -> Result<Vec<GroupOffsetDescription>, Error> {
    let offsets = committed_offsets(node)?;
    Ok(offsets
        .into_values()
        .map(|c| {
            let log_end_offset = node
                .topic(&c.topic)
                .and_then(|_| node.log(&c.topic, c.partition))
                .map(|l| l.log_end_offset());
            GroupOffsetDescription {
                offsets_partition: partition_for_group(&c.group, OFFSETS_TOPIC_PARTITIONS),
                lag: log_end_offset.map(|end| (end - c.offset).max(0)),
                log_end_offset,
                committed_offset: c.offset,
                leader_epoch: c.leader_epoch,
                group: c.group,
                topic: c.topic,
                partition: c.partition,
            }
        })
        .collect())
}
