//! A topic's [`LogConfig`] as the metadata log states it, and where each value came from.
//!
//! Kafka resolves a topic config in this order (`LogConfig` over `KafkaConfig`, `DynamicBrokerConfig`): the
//! topic's own config (`ConfigRecord` on the TOPIC resource), then the broker's dynamic config (BROKER
//! resource named by the node id), then the cluster-wide dynamic default (BROKER resource `""`), then the
//! broker's static `server.properties`, then Kafka's default. Broker-level values use the topic config's
//! synonyms (`log.index.interval.bytes` for `index.interval.bytes`, `log.retention.hours` for
//! `retention.ms`, ...), first synonym set winning. The static `server.properties` is not in the log
//! directory, so a value set only there is not seen: Kafka's default stands in for it.

use super::image::{ConfigResourceType, MetadataImage};
use crate::config::LogConfig;

/// Where a config value came from (Kafka's `ConfigSource` names, plus the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// A `ConfigRecord` on the topic (Kafka's DYNAMIC_TOPIC_CONFIG).
    Topic,
    /// A `ConfigRecord` on this broker (DYNAMIC_BROKER_CONFIG), its node id from `meta.properties`.
    Broker(i32),
    /// A `ConfigRecord` on the cluster-wide broker default (DYNAMIC_DEFAULT_BROKER_CONFIG).
    ClusterDefault,
    /// The caller's explicit value (`--config`).
    CommandLine,
}

impl ConfigSource {
    /// Kafka's `ConfigSource` name, or `COMMAND_LINE`.
    pub fn name(self) -> &'static str {
        match self {
            ConfigSource::Topic => "DYNAMIC_TOPIC_CONFIG",
            ConfigSource::Broker(_) => "DYNAMIC_BROKER_CONFIG",
            ConfigSource::ClusterDefault => "DYNAMIC_DEFAULT_BROKER_CONFIG",
            ConfigSource::CommandLine => "COMMAND_LINE",
        }
    }
}

/// One config klog uses, set from somewhere other than Kafka's default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    /// The topic config's name (`index.interval.bytes`).
    pub name: String,
    /// The name it was set under (`log.index.interval.bytes` for a broker-level synonym).
    pub set_as: String,
    /// The value in the topic config's unit (`log.retention.hours=2` gives `7200000` for `retention.ms`).
    pub value: String,
    /// Where it came from.
    pub source: ConfigSource,
    /// Why klog could not use the value (it then keeps the default), when it could not.
    pub refused: Option<String>,
}

/// A resolved config: the values and their provenance.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicConfig {
    /// The config to open the partition with.
    pub config: LogConfig,
    /// Every value not at Kafka's default, with its source (in the order set).
    pub entries: Vec<ConfigEntry>,
}

/// Each topic config klog uses, with its broker-level synonyms and what multiplies a synonym's value into
/// the topic config's unit (Kafka's `ServerTopicConfigSynonyms`).
const SYNONYMS: &[(&str, &[(&str, i64)])] = &[
    ("segment.bytes", &[("log.segment.bytes", 1)]),
    (
        "segment.ms",
        &[("log.roll.ms", 1), ("log.roll.hours", 3_600_000)],
    ),
    (
        "segment.jitter.ms",
        &[
            ("log.roll.jitter.ms", 1),
            ("log.roll.jitter.hours", 3_600_000),
        ],
    ),
    ("segment.index.bytes", &[("log.index.size.max.bytes", 1)]),
    ("index.interval.bytes", &[("log.index.interval.bytes", 1)]),
    (
        "retention.ms",
        &[
            ("log.retention.ms", 1),
            ("log.retention.minutes", 60_000),
            ("log.retention.hours", 3_600_000),
        ],
    ),
    ("retention.bytes", &[("log.retention.bytes", 1)]),
    ("max.message.bytes", &[("message.max.bytes", 1)]),
    ("flush.messages", &[("log.flush.interval.messages", 1)]),
    (
        "flush.ms",
        &[
            ("log.flush.interval.ms", 1),
            ("log.flush.scheduler.interval.ms", 1),
        ],
    ),
    ("preallocate", &[("log.preallocate", 1)]),
    (
        "message.timestamp.type",
        &[("log.message.timestamp.type", 1)],
    ),
    (
        "message.timestamp.before.max.ms",
        &[("log.message.timestamp.before.max.ms", 1)],
    ),
    (
        "message.timestamp.after.max.ms",
        &[("log.message.timestamp.after.max.ms", 1)],
    ),
    (
        "file.delete.delay.ms",
        &[("log.segment.delete.delay.ms", 1)],
    ),
    ("cleanup.policy", &[("log.cleanup.policy", 1)]),
    (
        "min.cleanable.dirty.ratio",
        &[("log.cleaner.min.cleanable.ratio", 1)],
    ),
    (
        "min.compaction.lag.ms",
        &[("log.cleaner.min.compaction.lag.ms", 1)],
    ),
    (
        "max.compaction.lag.ms",
        &[("log.cleaner.max.compaction.lag.ms", 1)],
    ),
    (
        "delete.retention.ms",
        &[("log.cleaner.delete.retention.ms", 1)],
    ),
    // A broker config in Kafka, not a topic config: only the broker levels set it.
    (
        "producer.id.expiration.ms",
        &[("producer.id.expiration.ms", 1)],
    ),
];

/// Kafka's internal override of `segment.bytes` (below its 1 MiB minimum, for tests): wins when set.
const INTERNAL_SEGMENT_BYTES: &str = "internal.segment.bytes";

/// Configs that exist only at the broker level in Kafka: a topic config of that name is not Kafka's.
const BROKER_ONLY: &[&str] = &["producer.id.expiration.ms"];

impl MetadataImage {
    /// The config of topic `topic` for broker `node_id` (when known), over Kafka's defaults.
    pub fn topic_config(&self, topic: &str, node_id: Option<i32>) -> TopicConfig {
        let topic_configs = self.configs_of(ConfigResourceType::Topic, topic);
        let broker_configs = node_id
            .map(|id| self.configs_of(ConfigResourceType::Broker, &id.to_string()))
            .unwrap_or_default();
        let default_configs = self.configs_of(ConfigResourceType::Broker, "");
        let mut out = TopicConfig {
            config: LogConfig::default(),
            entries: Vec::new(),
        };
        for (name, synonyms) in SYNONYMS {
            let from_topic = (!BROKER_ONLY.contains(name))
                .then(|| topic_configs.get(*name))
                .flatten()
                .map(|v| (name.to_string(), v.clone(), ConfigSource::Topic));
            let from_broker = |configs: &std::collections::BTreeMap<String, String>, source| {
                synonyms.iter().find_map(|(synonym, unit)| {
                    let v = configs.get(*synonym)?;
                    Some((synonym.to_string(), scaled(v, *unit), source))
                })
            };
            let found = from_topic
                .or_else(|| {
                    from_broker(&broker_configs, ConfigSource::Broker(node_id.unwrap_or(-1)))
                })
                .or_else(|| from_broker(&default_configs, ConfigSource::ClusterDefault));
            if let Some((set_as, value, source)) = found {
                out.set(name, set_as, value, source);
            }
        }
        if let Some(v) = topic_configs.get(INTERNAL_SEGMENT_BYTES) {
            out.set(
                "segment.bytes",
                INTERNAL_SEGMENT_BYTES.into(),
                v.clone(),
                ConfigSource::Topic,
            );
        }
        out
    }
}

impl TopicConfig {
    /// Sets `name` (a [`LogConfig`] key) to `value`, replacing an earlier entry for it; a value klog
    /// refuses is kept as an entry saying why, and the config keeps what it had.
    pub fn set(&mut self, name: &str, set_as: String, value: String, source: ConfigSource) {
        self.entries.retain(|e| e.name != name);
        let refused = self.config.set(name, &value).err().map(|e| e.to_string());
        self.entries.push(ConfigEntry {
            name: name.to_owned(),
            set_as,
            value,
            source,
            refused,
        });
    }
}

/// A broker synonym's value in the topic config's unit (`log.retention.hours=168` -> 604800000 ms; any
/// negative value -> -1, as `KafkaConfig.logRetentionTimeMillis`); a value that is not a number (or
/// overflows) is passed on as is, to be refused by name.
fn scaled(value: &str, unit: i64) -> String {
    if unit == 1 {
        return value.to_owned();
    }
    match value.trim().parse::<i64>() {
        Ok(v) if v < 0 => "-1".to_owned(),
        Ok(v) => v
            .checked_mul(unit)
            .map_or_else(|| value.to_owned(), |ms| ms.to_string()),
        Err(_) => value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kraft::image::ConfigResource;

    fn image(configs: &[(ConfigResourceType, &str, &str, &str)]) -> MetadataImage {
        let mut image = MetadataImage::default();
        for (t, resource, k, v) in configs {
            image
                .configs
                .entry(ConfigResource {
                    resource_type: *t,
                    name: resource.to_string(),
                })
                .or_default()
                .insert(k.to_string(), v.to_string());
        }
        image
    }

    #[test]
    fn topic_wins_over_broker_over_cluster_default_and_synonyms_scale() {
        use ConfigResourceType::{Broker, Topic};
        let image = image(&[
            (Topic, "t", "index.interval.bytes", "512"),
            (Topic, "t", "cleanup.policy", "compact"),
            (Broker, "", "log.index.interval.bytes", "1024"),
            (Broker, "", "log.retention.hours", "2"),
            (Broker, "1", "log.segment.bytes", "2097152"),
            (Broker, "", "log.segment.bytes", "1048576"),
        ]);
        let c = image.topic_config("t", Some(1));
        assert_eq!(c.config.index_interval_bytes, 512);
        assert_eq!(c.config.retention_ms, 7_200_000);
        assert_eq!(c.config.segment_bytes, 2_097_152);
        let source = |n: &str| c.entries.iter().find(|e| e.name == n).unwrap().source;
        assert_eq!(source("index.interval.bytes"), ConfigSource::Topic);
        assert_eq!(source("retention.ms"), ConfigSource::ClusterDefault);
        assert_eq!(source("segment.bytes"), ConfigSource::Broker(1));
        assert_eq!(source("cleanup.policy"), ConfigSource::Topic);
        assert_eq!(c.entries.len(), 4, "{:?}", c.entries);
        // Another broker sees the cluster default.
        let other = image.topic_config("t", Some(2));
        assert_eq!(other.config.segment_bytes, 1_048_576);
        // Another topic sees the broker levels only.
        assert_eq!(
            image.topic_config("u", None).config.index_interval_bytes,
            1024
        );
    }

    #[test]
    fn the_compaction_configs_are_read_from_the_topic_and_the_brokers_synonyms() {
        use ConfigResourceType::{Broker, Topic};
        let image = image(&[
            (Topic, "t", "cleanup.policy", "compact,delete"),
            (Topic, "t", "delete.retention.ms", "15000"),
            (Topic, "t", "min.cleanable.dirty.ratio", "0.01"),
            (Broker, "", "log.cleaner.min.compaction.lag.ms", "7"),
            (Broker, "", "log.cleaner.max.compaction.lag.ms", "90000"),
            (Broker, "", "log.cleanup.policy", "compact"),
            (Broker, "", "log.cleaner.delete.retention.ms", "1"),
            (Broker, "", "log.cleaner.min.cleanable.ratio", "0.7"),
        ]);
        let c = image.topic_config("t", None).config;
        assert!(c.cleanup_policy.compact && c.cleanup_policy.delete);
        assert_eq!(c.delete_retention_ms, 15_000);
        assert_eq!(c.min_cleanable_dirty_ratio, 0.01);
        assert_eq!(c.min_compaction_lag_ms, 7);
        assert_eq!(c.max_compaction_lag_ms, 90_000);
        let other = image.topic_config("u", None).config;
        assert!(other.cleanup_policy.compact && !other.cleanup_policy.delete);
        assert_eq!(other.delete_retention_ms, 1);
        assert_eq!(other.min_cleanable_dirty_ratio, 0.7);
    }

    #[test]
    fn internal_segment_bytes_wins_and_a_refused_value_keeps_the_default() {
        use ConfigResourceType::Topic;
        let image = image(&[
            (Topic, "t", "segment.bytes", "1048576"),
            (Topic, "t", "internal.segment.bytes", "32768"),
            (Topic, "t", "index.interval.bytes", "-5"),
        ]);
        let c = image.topic_config("t", None);
        assert_eq!(c.config.segment_bytes, 32768);
        assert_eq!(c.config.index_interval_bytes, 4096);
        let refused = c
            .entries
            .iter()
            .find(|e| e.name == "index.interval.bytes")
            .unwrap();
        assert!(refused.refused.as_deref().unwrap().contains("minimum"));
    }
}
