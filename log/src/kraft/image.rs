//! `MetadataImage`: what the metadata records say once replayed in order (Kafka's `MetadataImage`, reduced
//! to what a log directory's reader needs): topics with their ids and partitions, the configs of every
//! resource, and the finalized feature levels.
//!
//! Replay follows Kafka's deltas: a `RemoveTopicRecord` drops the topic and its configs, a `ConfigRecord`
//! with a null value deletes the key, a `FeatureLevelRecord` at level 0 removes the feature, a
//! `PartitionChangeRecord` changes only the fields it carries and bumps the epochs as
//! `PartitionRegistration.merge` does. Other record types (brokers, ACLs, quotas, ...) are read and left.

use std::collections::BTreeMap;

use super::record::MetadataRecord;
use crate::checkpoint::TopicId;

/// `ConfigResource.Type`: what a `ConfigRecord` configures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConfigResourceType {
    /// 2: a topic, by name.
    Topic,
    /// 4: a broker, by node id; `""` is the cluster-wide default.
    Broker,
    /// 8: a broker's loggers.
    BrokerLogger,
    /// 16: client metrics subscriptions.
    ClientMetrics,
    /// 32: a consumer or share group.
    Group,
    /// Any other id.
    Unknown(i8),
}

impl ConfigResourceType {
    /// The type of a `ConfigRecord`'s `resourceType`.
    pub fn from_id(id: i8) -> Self {
        match id {
            2 => Self::Topic,
            4 => Self::Broker,
            8 => Self::BrokerLogger,
            16 => Self::ClientMetrics,
            32 => Self::Group,
            other => Self::Unknown(other),
        }
    }

    /// Kafka's name (`TOPIC`, `BROKER`, ...).
    pub fn name(self) -> String {
        match self {
            Self::Topic => "TOPIC".into(),
            Self::Broker => "BROKER".into(),
            Self::BrokerLogger => "BROKER_LOGGER".into(),
            Self::ClientMetrics => "CLIENT_METRICS".into(),
            Self::Group => "GROUP".into(),
            Self::Unknown(id) => format!("UNKNOWN({id})"),
        }
    }
}

/// A configured resource: a topic by name, a broker by id (`""`: the cluster-wide default), ...
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConfigResource {
    /// What kind of resource.
    pub resource_type: ConfigResourceType,
    /// Its name (`""` for the cluster-wide broker default).
    pub name: String,
}

/// One partition's registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionImage {
    /// The replicas' broker ids, preferred leader first.
    pub replicas: Vec<i32>,
    /// The in-sync replicas.
    pub isr: Vec<i32>,
    /// -1: no leader.
    pub leader: i32,
    /// Bumped whenever the leader is set.
    pub leader_epoch: i32,
    /// Bumped by every change.
    pub partition_epoch: i32,
}

/// A live topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicImage {
    /// The topic's name.
    pub name: String,
    /// The topic's id (what `partition.metadata` holds).
    pub topic_id: TopicId,
    /// Its partitions by number.
    pub partitions: BTreeMap<i32, PartitionImage>,
}

/// The replayed state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataImage {
    /// The live topics by id.
    pub topics: BTreeMap<TopicId, TopicImage>,
    /// The live topics' ids by name (a log directory's partitions are named by topic).
    pub topic_ids: BTreeMap<String, TopicId>,
    /// Every resource's configs (name to value).
    pub configs: BTreeMap<ConfigResource, BTreeMap<String, String>>,
    /// The finalized feature levels (`metadata.version`, `kraft.version`, ...).
    pub features: BTreeMap<String, i16>,
}

/// `PartitionChangeRecord`'s leader when the leader does not change.
const NO_LEADER_CHANGE: i64 = -2;

impl MetadataImage {
    /// The live topic named `name`.
    pub fn topic(&self, name: &str) -> Option<&TopicImage> {
        self.topics.get(self.topic_ids.get(name)?)
    }

    /// The configs set on a resource (empty when none).
    pub fn configs_of(
        &self,
        resource_type: ConfigResourceType,
        name: &str,
    ) -> BTreeMap<String, String> {
        let key = ConfigResource {
            resource_type,
            name: name.to_owned(),
        };
        self.configs.get(&key).cloned().unwrap_or_default()
    }

    /// Applies one record. Records of types that change nothing here are accepted and ignored.
    pub fn replay(&mut self, record: &MetadataRecord<'_>) {
        let d = &record.data;
        match record.type_name() {
            "TOPIC_RECORD" => {
                if let (Some(name), Some(id)) = (d.str("name"), d.uuid("topicId")) {
                    let topic = TopicImage {
                        name: name.to_owned(),
                        topic_id: TopicId(id),
                        partitions: BTreeMap::new(),
                    };
                    self.topic_ids.insert(name.to_owned(), TopicId(id));
                    self.topics.insert(TopicId(id), topic);
                }
            }
            "PARTITION_RECORD" => self.replay_partition(record),
            "PARTITION_CHANGE_RECORD" => self.replay_partition_change(record),
            "REMOVE_TOPIC_RECORD" => {
                if let Some(topic) = d
                    .uuid("topicId")
                    .and_then(|id| self.topics.remove(&TopicId(id)))
                {
                    self.topic_ids.remove(&topic.name);
                    self.configs.remove(&ConfigResource {
                        resource_type: ConfigResourceType::Topic,
                        name: topic.name,
                    });
                }
            }
            "CONFIG_RECORD" => self.replay_config(record),
            "FEATURE_LEVEL_RECORD" => {
                if let (Some(name), Some(level)) = (d.str("name"), d.int("featureLevel")) {
                    if level == 0 {
                        self.features.remove(name);
                    } else {
                        self.features.insert(name.to_owned(), level as i16);
                    }
                }
            }
            _ => {}
        }
    }

    fn replay_config(&mut self, record: &MetadataRecord<'_>) {
        let d = &record.data;
        let (Some(resource_type), Some(resource), Some(name)) =
            (d.int("resourceType"), d.str("resourceName"), d.str("name"))
        else {
            return;
        };
        let key = ConfigResource {
            resource_type: ConfigResourceType::from_id(resource_type as i8),
            name: resource.to_owned(),
        };
        match d.str("value") {
            Some(value) => {
                let configs = self.configs.entry(key).or_default();
                configs.insert(name.to_owned(), value.to_owned());
            }
            None => {
                if let Some(configs) = self.configs.get_mut(&key) {
                    configs.remove(name);
                    if configs.is_empty() {
                        self.configs.remove(&key);
                    }
                }
            }
        }
    }

    fn replay_partition(&mut self, record: &MetadataRecord<'_>) {
        let d = &record.data;
        let (Some(id), Some(partition)) = (d.uuid("topicId"), d.int("partitionId")) else {
            return;
        };
        let Some(topic) = self.topics.get_mut(&TopicId(id)) else {
            return;
        };
        let image = PartitionImage {
            replicas: d.ints("replicas").unwrap_or_default(),
            isr: d.ints("isr").unwrap_or_default(),
            leader: d.int("leader").unwrap_or(-1) as i32,
            leader_epoch: d.int("leaderEpoch").unwrap_or(-1) as i32,
            partition_epoch: d.int("partitionEpoch").unwrap_or(-1) as i32,
        };
        topic.partitions.insert(partition as i32, image);
    }

    fn replay_partition_change(&mut self, record: &MetadataRecord<'_>) {
        let d = &record.data;
        let (Some(id), Some(partition)) = (d.uuid("topicId"), d.int("partitionId")) else {
            return;
        };
        let Some(p) = self
            .topics
            .get_mut(&TopicId(id))
            .and_then(|t| t.partitions.get_mut(&(partition as i32)))
        else {
            return;
        };
        if let Some(isr) = d.ints("isr") {
            p.isr = isr;
        }
        if let Some(replicas) = d.ints("replicas") {
            p.replicas = replicas;
        }
        match d.int("leader") {
            Some(NO_LEADER_CHANGE) | None => {}
            Some(leader) => {
                p.leader = leader as i32;
                p.leader_epoch += 1;
            }
        }
        p.partition_epoch += 1;
    }
}
