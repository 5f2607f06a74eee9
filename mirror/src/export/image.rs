//! The KRaft metadata image an export writes as `__cluster_metadata-0/<end>-<epoch>.checkpoint`
//! (Route B of the bootstrap research: a snapshot holding the whole image, no `bootstrap.checkpoint`,
//! no `quorum-state`), encoded by `klog_log::kraft::writer`.
//!
//! The image: `metadata.version` 4.0-IV3 (level 25, which every Kafka 4.x broker knows; its
//! PartitionRecord version is 2), a TopicRecord per topic with klog's id, one PartitionRecord per
//! partition (this node as the only replica, ISR and leader, at the partition's export epoch, the
//! directory of OUT's `meta.properties`), `__consumer_offsets` with exactly the target's N partitions
//! and the configs Kafka's auto-creation gives it, each topic's configs (a `min.insync.replicas` above 1
//! lowered to 1: one replica could never satisfy it), and a ProducerIdsRecord whose next id is above
//! every producer id in the data (else a new producer is handed id 0 again).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use klog_log::checkpoint::TopicId;
use klog_log::coordinator::CONSUMER_OFFSETS_TOPIC;
use klog_log::kraft::writer::{write_snapshot, MetadataRecordOut};

use super::{ExportOptions, Plan};
use crate::error::Error;

/// `metadata.version` 4.0-IV3: the newest level Kafka 4.0.0 already supports.
pub const METADATA_VERSION_LEVEL: i16 = 25;

/// ConfigResource.Type TOPIC.
const TOPIC_RESOURCE: i8 = 2;

/// The configs Kafka's `AutoTopicCreationManager` gives `__consumer_offsets`
/// (`GroupCoordinatorService.groupMetadataTopicConfigs`, `offsets.topic.segment.bytes` default).
const OFFSETS_TOPIC_CONFIGS: [(&str, &str); 3] = [
    ("cleanup.policy", "compact"),
    ("compression.type", "producer"),
    ("segment.bytes", "104857600"),
];

/// The snapshot's id: end offset 1 (above Kafka's bootstrap id 0-0), epoch 1.
const SNAPSHOT_END_OFFSET: i64 = 1;
const SNAPSHOT_EPOCH: i32 = 1;

/// One topic of the image.
#[derive(Debug, Clone)]
struct TopicImage {
    id: TopicId,
    /// (partition, leader epoch = partition epoch).
    partitions: Vec<(i32, i32)>,
    configs: Vec<(String, String)>,
}

/// The image to write.
#[derive(Debug, Clone)]
pub struct Image {
    node_id: i32,
    directory_id: TopicId,
    topics: BTreeMap<String, TopicImage>,
    /// The ProducerIdsRecord's next producer id.
    pub next_producer_id: i64,
    /// `topic: key old -> new` for configs lowered for a one-replica broker.
    pub configs_changed: Vec<String>,
}

impl Image {
    /// The image of the exported partitions `plans`, with `configs` per topic.
    pub(crate) fn of(
        plans: &[Plan],
        configs: &BTreeMap<String, BTreeMap<String, String>>,
        options: &ExportOptions,
        offsets_id: TopicId,
        directory_id: TopicId,
    ) -> Image {
        let mut topics: BTreeMap<String, TopicImage> = BTreeMap::new();
        let mut configs_changed = Vec::new();
        for (name, topic_configs) in configs {
            let mut list = Vec::new();
            for (k, v) in topic_configs {
                if k == "min.insync.replicas" && v.trim().parse::<i64>().is_ok_and(|n| n > 1) {
                    configs_changed.push(format!("{name}: min.insync.replicas {v} -> 1"));
                    list.push((k.clone(), "1".to_owned()));
                } else {
                    list.push((k.clone(), v.clone()));
                }
            }
            topics.insert(
                name.clone(),
                TopicImage {
                    id: TopicId([0; 16]),
                    partitions: Vec::new(),
                    configs: list,
                },
            );
        }
        for p in plans
            .iter()
            .filter(|p| p.row.topic != CONSUMER_OFFSETS_TOPIC)
        {
            let t = topics
                .entry(p.row.topic.clone())
                .or_insert_with(|| TopicImage {
                    id: p.id,
                    partitions: Vec::new(),
                    configs: Vec::new(),
                });
            t.id = p.id;
            t.partitions.push((p.row.partition, p.row.leader_epoch));
        }
        // Exactly the target's N partitions, whether or not a group's records are in one.
        let offsets_epochs: BTreeMap<i32, i32> = plans
            .iter()
            .filter(|p| p.row.topic == CONSUMER_OFFSETS_TOPIC)
            .map(|p| (p.row.partition, p.row.leader_epoch))
            .collect();
        topics.insert(
            CONSUMER_OFFSETS_TOPIC.to_owned(),
            TopicImage {
                id: offsets_id,
                partitions: (0..options.offsets_partitions as i32)
                    .map(|q| (q, offsets_epochs.get(&q).copied().unwrap_or(0)))
                    .collect(),
                configs: OFFSETS_TOPIC_CONFIGS
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            },
        );
        let max_pid = plans.iter().filter_map(|p| p.max_producer_id).max();
        Image {
            node_id: options.node_id,
            directory_id,
            topics,
            next_producer_id: max_pid.map_or(0, |m| m.saturating_add(1)),
            configs_changed,
        }
    }

    /// The records, in the order Kafka replays them (features, then each topic before its partitions
    /// and configs, then producer ids).
    fn records(&self) -> Vec<MetadataRecordOut> {
        let mut out = vec![MetadataRecordOut::FeatureLevel {
            name: "metadata.version".into(),
            feature_level: METADATA_VERSION_LEVEL,
        }];
        for (name, t) in &self.topics {
            out.push(MetadataRecordOut::Topic {
                name: name.clone(),
                topic_id: t.id.0,
            });
            for (partition, epoch) in &t.partitions {
                out.push(MetadataRecordOut::Partition {
                    partition_id: *partition,
                    topic_id: t.id.0,
                    replicas: vec![self.node_id],
                    isr: vec![self.node_id],
                    leader: self.node_id,
                    leader_epoch: *epoch,
                    partition_epoch: *epoch,
                    directories: vec![self.directory_id.0],
                });
            }
            for (k, v) in &t.configs {
                out.push(MetadataRecordOut::Config {
                    resource_type: TOPIC_RESOURCE,
                    resource_name: name.clone(),
                    name: k.clone(),
                    value: Some(v.clone()),
                });
            }
        }
        out.push(MetadataRecordOut::ProducerIds {
            broker_id: self.node_id,
            broker_epoch: -1,
            next_producer_id: self.next_producer_id,
        });
        out
    }
}

/// Writes `image` as the snapshot in `out/__cluster_metadata-0` (created); its path.
pub fn write(out: &Path, image: &Image, now_ms: i64) -> Result<PathBuf, Error> {
    let dir = out.join("__cluster_metadata-0");
    std::fs::create_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    super::files::sync_dir(out)?;
    Ok(write_snapshot(
        &dir,
        SNAPSHOT_END_OFFSET,
        SNAPSHOT_EPOCH,
        now_ms,
        &image.records(),
    )?)
}
