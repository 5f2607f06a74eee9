//! `__consumer_offsets` for a target whose `offsets.topic.num.partitions` differs from klog's: every
//! group's records re-placed in `partition_for_group(group, N)`, as new batches in new partition
//! directories. A group's records all live in one klog partition, so reading each partition in offset
//! order and appending in that order keeps every group's order; tombstones are kept.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use klog_log::checkpoint::TopicId;
use klog_log::clock::Clock;
use klog_log::coordinator::{
    partition_for_group, Coordinator, CoordinatorRecord, Value, CONSUMER_OFFSETS_TOPIC,
};
use klog_log::format::{AnyBatch, BatchBuilder, Batches, Compression, Header};
use klog_log::io::Storage;
use klog_log::log_dir::LogDir;
use klog_log::partition_log::PartitionLog;

use crate::error::Error;
use crate::node::{consumer_offsets_config, partition_dir_name};

/// Records per batch written (Kafka's coordinator writes one batch per request; any size is valid).
const RECORDS_PER_BATCH: usize = 500;

/// One `__consumer_offsets` record, owned.
#[derive(Debug, Clone)]
pub struct OffsetsRecord {
    timestamp: i64,
    key: Vec<u8>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

/// The records of klog's `__consumer_offsets` partitions, by their target partition out of `partitions`.
pub type Replaced = BTreeMap<u32, Vec<OffsetsRecord>>;

/// Reads every record of `logs` (klog's `__consumer_offsets` partitions, in partition order) and places
/// each by its group in one of `partitions`.
pub fn replace(logs: &[(i32, Arc<PartitionLog>)], partitions: u32) -> Result<Replaced, Error> {
    let mut out = Replaced::new();
    let mut scratch = Vec::new();
    for (p, log) in logs {
        let corrupt = |offset: i64, reason: String| Error::CorruptGroupOffsets {
            partition: *p,
            offset,
            reason,
        };
        let mut offset = log.log_start_offset();
        let end = log.log_end_offset();
        while offset < end {
            let read = log.read(offset, 1 << 20, Some(end), true)?;
            if read.next_offset <= offset {
                break;
            }
            for batch in Batches::new(read.records.as_slice()) {
                let AnyBatch::V2(batch) = batch? else {
                    return Err(corrupt(offset, "a legacy (v0/v1) batch".into()));
                };
                if batch.is_transactional() {
                    return Err(corrupt(
                        batch.base_offset(),
                        "a transactional batch: transactional offset commits cannot be re-placed; \
                         export with --offsets-partitions equal to klog's (50)"
                            .into(),
                    ));
                }
                if batch.is_control() {
                    continue;
                }
                for record in batch.records(&mut scratch)? {
                    let record = record?;
                    let decoded =
                        CoordinatorRecord::decode(Coordinator::Group, record.key, record.value)
                            .map_err(|e| corrupt(record.offset, e.to_string()))?;
                    // Every group record's key starts with the group id.
                    let Some((_, Value::Str(group))) = decoded.key.fields.first() else {
                        return Err(corrupt(record.offset, "a key without a group id".into()));
                    };
                    let headers = record
                        .headers
                        .map(|(k, v)| {
                            (
                                String::from_utf8_lossy(k).into_owned(),
                                v.map(<[u8]>::to_vec),
                            )
                        })
                        .collect();
                    out.entry(partition_for_group(group, partitions))
                        .or_default()
                        .push(OffsetsRecord {
                            timestamp: record.timestamp,
                            key: record.key.unwrap_or_default().to_vec(),
                            value: record.value.map(<[u8]>::to_vec),
                            headers,
                        });
                }
            }
            offset = read.next_offset;
        }
    }
    Ok(out)
}

/// Writes `replaced` into `out` as `__consumer_offsets-<q>` directories with `topic_id`, every batch at
/// leader epoch 0, closed cleanly (flushed, indexes and snapshots written). The log ends offsets of the
/// partitions written.
pub fn write(
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
    out: &Path,
    replaced: &Replaced,
    topic_id: TopicId,
) -> Result<BTreeMap<u32, i64>, Error> {
    let mut ends = BTreeMap::new();
    if replaced.is_empty() {
        return Ok(ends);
    }
    let mut log_dir = LogDir::open(storage, out)?;
    // Never trimmed while written (Kafka applies the topic's own configs once it serves them).
    let config = consumer_offsets_config()?;
    for (q, records) in replaced {
        let name = partition_dir_name(CONSUMER_OFFSETS_TOPIC, *q as i32);
        let (log, _) =
            log_dir.open_partition_with_clock(&name, config.clone(), Arc::clone(&clock))?;
        log.set_topic_id(topic_id)?;
        for chunk in records.chunks(RECORDS_PER_BATCH) {
            let mut b = BatchBuilder::new(Compression::None);
            for r in chunk {
                let headers: Vec<Header<'_>> = r
                    .headers
                    .iter()
                    .map(|(k, v)| Header {
                        key: k,
                        value: v.as_deref(),
                    })
                    .collect();
                b.append(r.timestamp, Some(&r.key), r.value.as_deref(), &headers)?;
            }
            let mut bytes = b.build()?;
            log.append_as_leader(&mut bytes, 0)?;
        }
        log.update_high_watermark(log.log_end_offset());
        ends.insert(*q, log.log_end_offset());
        log_dir.close_partition(log)?;
    }
    log_dir.close()?;
    Ok(ends)
}
