//! A local cluster's controller metadata (`cluster.json`): its id, topics (id, partition count, per
//! partition leader epoch, configs), mirrors and each topic's desired mirror state.
//!
//! The desired state is an explicit (mirror, desired state) pair, as KIP-1279's final design keeps it
//! (`MirrorTopicStateChangeRecord`). The seed design's topic config `mirror.name` (`m`, `m.paused`,
//! `m.removed`) is still written alongside and read when the pair is missing, for compatibility. Stripping
//! one suffix from the right, and never deriving the name from a config that has two, avoids the
//! prototype's `m.paused.removed` bug.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::acl::AclBinding;
use crate::error::{Error, MirrorError};
use crate::sync_config::SyncFilters;

/// The cluster's metadata file in its root.
pub const METADATA_FILE: &str = "cluster.json";
/// The topic config that names a topic's mirror (seed design).
pub const MIRROR_NAME_CONFIG: &str = "mirror.name";
/// Kafka topic configs klog keeps in the metadata but does not apply to its logs: it has no replicas
/// and no recompression. A mirror carries them (unless its `topic.properties.exclude` leaves them out)
/// so that the topic is whole after a failover, for whoever runs it then. The compaction configs
/// (`cleanup.policy`, `min.cleanable.dirty.ratio`, `min.compaction.lag.ms`, `max.compaction.lag.ms`,
/// `delete.retention.ms`) are applied: klog's `LogConfig` takes them and its cleaner runs them
/// (`crate::cleaning`).
pub const UNAPPLIED_TOPIC_CONFIGS: [&str; 10] = [
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "message.downconversion.enable",
    "message.timestamp.difference.max.ms",
    "min.insync.replicas",
    "unclean.leader.election.enable",
];
const PAUSED_SUFFIX: &str = ".paused";
const REMOVED_SUFFIX: &str = ".removed";

/// What the operator asked of a mirror topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DesiredState {
    /// Mirror it (AddTopicsToMirror / ResumeMirrorTopics).
    Start,
    /// Fail over: stop mirroring, make it writable (RemoveTopicsFromMirror).
    Stop,
    /// PauseMirrorTopics.
    Pause,
}

/// How a mirror's failover (STOPPING) ends the source's transactions that are still open, chosen per
/// mirror at CreateMirror (docs/mirroring.md weighs the two).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum StopMode {
    /// The seed design: fetch read_committed (up to the source's LSO), truncate to the local LSO at
    /// the stop. Offsets the source gave an open transaction are reused after the failover.
    #[default]
    Truncate,
    /// The reference forks' design: fetch read_uncommitted (up to the source's high watermark), and at
    /// the stop append one ABORT marker per open transaction at the bumped epoch. Every offset the
    /// source assigned is kept.
    Abort,
}

impl StopMode {
    /// Its name, as `--stop-mode` takes it and `describe` prints it.
    pub fn name(self) -> &'static str {
        match self {
            StopMode::Truncate => "truncate",
            StopMode::Abort => "abort",
        }
    }

    /// Parses a `--stop-mode` value.
    pub fn parse(value: &str) -> Result<Self, Error> {
        match value {
            "truncate" => Ok(StopMode::Truncate),
            "abort" => Ok(StopMode::Abort),
            other => Err(Error::mirror(
                MirrorError::InvalidRequest,
                format!("stop mode {other:?}: expected truncate or abort"),
            )),
        }
    }

    fn is_truncate(&self) -> bool {
        *self == StopMode::Truncate
    }
}

impl std::fmt::Display for StopMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A topic's mirror, and what the operator asked of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMirror {
    /// The mirror's name.
    pub name: String,
    /// What was asked.
    pub desired: DesiredState,
}

impl TopicMirror {
    /// The seed design's `mirror.name` value.
    pub fn config_value(&self) -> String {
        match self.desired {
            DesiredState::Start => self.name.clone(),
            DesiredState::Pause => format!("{}{PAUSED_SUFFIX}", self.name),
            DesiredState::Stop => format!("{}{REMOVED_SUFFIX}", self.name),
        }
    }

    /// Parses a `mirror.name` value: one suffix, stripped from the right.
    pub fn from_config_value(value: &str) -> Option<Self> {
        let (name, desired) = if let Some(n) = value.strip_suffix(REMOVED_SUFFIX) {
            (n, DesiredState::Stop)
        } else if let Some(n) = value.strip_suffix(PAUSED_SUFFIX) {
            (n, DesiredState::Pause)
        } else {
            (value, DesiredState::Start)
        };
        validate_mirror_name(name).ok()?;
        Some(TopicMirror {
            name: name.to_owned(),
            desired,
        })
    }
}

/// A topic in `cluster.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    /// Kafka's base64 topic id.
    pub id: String,
    /// Number of partitions.
    pub partitions: i32,
    /// The current leader epoch of each partition (what a leader append stamps).
    pub leader_epochs: Vec<i32>,
    /// The topic's own configs (Kafka's names). On a mirror topic these are its local overrides: each
    /// wins over the source's value of the same key.
    #[serde(default)]
    pub configs: BTreeMap<String, String>,
    /// What the mirror's metadata sync last read from the source (its configs set on the topic, less
    /// the mirror's `topic.properties.exclude` and [`crate::sync_config::never_synced`]); applied
    /// under `configs`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub source_configs: BTreeMap<String, String>,
    /// Its mirror, if mirrored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror: Option<TopicMirror>,
}

impl TopicMeta {
    /// The configs in force: the source's, then the local ones over them (`mirror.name` left out).
    pub fn effective_configs(&self) -> BTreeMap<String, String> {
        let mut out = self.source_configs.clone();
        out.extend(self.configs.clone());
        out.remove(MIRROR_NAME_CONFIG);
        out
    }
}

/// A mirror in `cluster.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorMeta {
    /// Where the source is: a local cluster root, or `kafka://host:port`.
    pub source: String,
    /// Learned on first contact; a later change is refused.
    #[serde(default)]
    pub source_cluster_id: Option<String>,
    /// The source's ACL bindings for this mirror's topics and groups, as last synced (data for the
    /// layer above klog to enforce: klog has no authorizer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acls: Vec<AclBinding>,
    /// How its failover ends open transactions. Absent (a mirror created before klog had the choice):
    /// `truncate`, the seed design it was created under; written only when it is `abort`, so a
    /// `truncate` mirror's `cluster.json` is what an older klog wrote and reads.
    #[serde(default, skip_serializing_if = "StopMode::is_truncate")]
    pub stop_mode: StopMode,
    /// `mirror.support.unclean.leader.election`: a source that truncates below our log end while
    /// mirroring (an unclean election there) is converged with (ULE_RECOVERY) instead of failing the
    /// partition without retries (the default).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub support_unclean_leader_election: bool,
    /// The mirror's sync configs as set at `mirror create` (the reference's names: see
    /// [`crate::sync_config`]); a name not set takes its default.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub configs: BTreeMap<String, String>,
}

impl MirrorMeta {
    /// The mirror's sync filters (checked when the mirror was created and when the file is read).
    pub fn sync_filters(&self) -> SyncFilters {
        SyncFilters::from_configs(&self.configs).unwrap_or_default()
    }
}

/// The mirror config that allows converging with a source's unclean leader election.
pub const MIRROR_SUPPORT_UNCLEAN_LEADER_ELECTION: &str = "mirror.support.unclean.leader.election";

/// `cluster.json`: the controller metadata of a local cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMeta {
    /// Format version ([`ClusterMeta::VERSION`]).
    pub version: u32,
    /// Kafka's base64 cluster id.
    pub cluster_id: String,
    /// Partitions of `__mirror_state` (fixed at creation).
    pub mirror_state_partitions: u32,
    /// Topics by name.
    #[serde(default)]
    pub topics: BTreeMap<String, TopicMeta>,
    /// Mirrors by name.
    #[serde(default)]
    pub mirrors: BTreeMap<String, MirrorMeta>,
    /// ACL bindings created on this cluster (`klog acl add`); a mirror's synced ones are in its entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acls: Vec<AclBinding>,
}

impl ClusterMeta {
    /// The format version written.
    pub const VERSION: u32 = 1;

    /// Parses `cluster.json` (`path` names it in errors).
    pub fn decode(bytes: &[u8], path: &std::path::Path) -> Result<Self, Error> {
        let corrupt = |reason: String| Error::CorruptMetadata {
            path: path.to_owned(),
            reason,
        };
        let mut meta: ClusterMeta =
            serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
        if meta.version != Self::VERSION {
            return Err(corrupt(format!(
                "version {} (this klog reads {})",
                meta.version,
                Self::VERSION
            )));
        }
        if !(1..=10_000).contains(&meta.mirror_state_partitions) {
            return Err(corrupt(format!(
                "mirror_state_partitions {} is not 1 to 10000",
                meta.mirror_state_partitions
            )));
        }
        for (name, m) in &meta.mirrors {
            SyncFilters::from_configs(&m.configs)
                .map_err(|why| corrupt(format!("mirror {name}: {why}")))?;
        }
        for (name, t) in &mut meta.topics {
            if t.partitions <= 0 || t.leader_epochs.len() != t.partitions as usize {
                return Err(corrupt(format!(
                    "topic {name}: {} partitions but {} leader epochs",
                    t.partitions,
                    t.leader_epochs.len()
                )));
            }
            if klog_log::checkpoint::TopicId::parse(&t.id).is_none() {
                return Err(corrupt(format!("topic {name}: bad topic id {:?}", t.id)));
            }
            if t.mirror.is_none() {
                t.mirror = t
                    .configs
                    .get(MIRROR_NAME_CONFIG)
                    .filter(|v| !v.is_empty())
                    .and_then(|v| TopicMirror::from_config_value(v));
            }
        }
        Ok(meta)
    }

    /// Serialized with `mirror.name` rewritten from each topic's pair.
    pub fn encode(&self) -> Vec<u8> {
        let mut meta = self.clone();
        for t in meta.topics.values_mut() {
            match &t.mirror {
                Some(m) => {
                    t.configs
                        .insert(MIRROR_NAME_CONFIG.to_owned(), m.config_value());
                }
                None => {
                    t.configs.remove(MIRROR_NAME_CONFIG);
                }
            }
        }
        let mut out = serde_json::to_vec_pretty(&meta).expect("metadata serializes");
        out.push(b'\n');
        out
    }
}

/// Checks a value of one of [`UNAPPLIED_TOPIC_CONFIGS`] as Kafka's `LogConfig` would (the others are
/// checked by klog's own `LogConfig`).
pub fn validate_unapplied_config(key: &str, value: &str) -> Result<(), String> {
    let v = value.trim();
    let int_in = |min: i64, max: i64| v.parse::<i64>().is_ok_and(|n| (min..=max).contains(&n));
    let ok = match key {
        "compression.type" => {
            matches!(
                v,
                "uncompressed" | "zstd" | "lz4" | "snappy" | "gzip" | "producer"
            )
        }
        "compression.gzip.level" => v == "-1" || int_in(1, 9),
        "compression.lz4.level" => int_in(1, 17),
        "compression.zstd.level" => int_in(-131_072, 22),
        "message.downconversion.enable" | "unclean.leader.election.enable" => {
            matches!(v, "true" | "false")
        }
        "min.insync.replicas" => int_in(1, i32::MAX as i64),
        // `*`, or `partition:broker` pairs: whoever replicates the topic reads them.
        "follower.replication.throttled.replicas" | "leader.replication.throttled.replicas" => true,
        _ => int_in(0, i64::MAX),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{key}={value:?} is not a valid value"))
    }
}

/// Mirror names follow topic-name rules and must not end in a state suffix (INVALID_MIRROR_NAME).
pub fn validate_mirror_name(name: &str) -> Result<(), Error> {
    let bad = |why: &str| {
        Err(Error::mirror(
            MirrorError::InvalidMirrorName,
            format!("{name:?}: {why}"),
        ))
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > 249 {
        return bad("longer than 249 characters");
    }
    if name == "." || name == ".." {
        return bad("'.' and '..' are not allowed");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return bad("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    if name.ends_with(PAUSED_SUFFIX) || name.ends_with(REMOVED_SUFFIX) {
        return bad("must not end in .paused or .removed");
    }
    Ok(())
}

/// Topic names: Kafka's `Topic.validate`, the rule partition directories are checked by.
pub fn validate_topic_name(name: &str) -> Result<(), Error> {
    klog_log::topic_partition::validate_topic(name).map_err(|why| {
        Error::mirror(
            MirrorError::InvalidRequest,
            format!("topic {name:?}: {why}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_names_follow_the_rules() {
        for ok in ["m", "a-to-b", "x_y.z", &"n".repeat(249)] {
            validate_mirror_name(ok).unwrap();
        }
        for bad in [
            "",
            ".",
            "..",
            "a b",
            "m.paused",
            "m.removed",
            "é",
            &"n".repeat(250),
        ] {
            let e = validate_mirror_name(bad).unwrap_err();
            assert_eq!(e.error_name(), Some("INVALID_MIRROR_NAME"), "{bad:?}");
        }
    }

    #[test]
    fn mirror_name_config_round_trips_one_suffix() {
        for desired in [DesiredState::Start, DesiredState::Pause, DesiredState::Stop] {
            let m = TopicMirror {
                name: "m".into(),
                desired,
            };
            assert_eq!(TopicMirror::from_config_value(&m.config_value()), Some(m));
        }
        // The prototype's double suffix is not a valid name for either reading.
        assert_eq!(TopicMirror::from_config_value("m.paused.removed"), None);
    }

    #[test]
    fn metadata_without_the_pair_reads_mirror_name() {
        let json = br#"{"version":1,"cluster_id":"c","mirror_state_partitions":3,
            "topics":{"t":{"id":"AAAAAAAAAAAAAAAAAAAAAQ","partitions":1,"leader_epochs":[0],
            "configs":{"mirror.name":"m.paused"}}}}"#;
        let meta = ClusterMeta::decode(json, std::path::Path::new("x")).unwrap();
        assert_eq!(
            meta.topics["t"].mirror,
            Some(TopicMirror {
                name: "m".into(),
                desired: DesiredState::Pause
            })
        );
        let again = ClusterMeta::decode(&meta.encode(), std::path::Path::new("x")).unwrap();
        assert_eq!(again, meta);
    }

    #[test]
    fn stop_mode_defaults_to_truncate_and_is_kept() {
        let json = br#"{"version":1,"cluster_id":"c","mirror_state_partitions":3,
            "mirrors":{"old":{"source":"/a"}}}"#;
        let mut meta = ClusterMeta::decode(json, std::path::Path::new("x")).unwrap();
        assert_eq!(meta.mirrors["old"].stop_mode, StopMode::Truncate);
        let plain = String::from_utf8(meta.encode()).unwrap();
        assert!(!plain.contains("stop_mode"), "{plain}");
        meta.mirrors.get_mut("old").unwrap().stop_mode = StopMode::Abort;
        let encoded = meta.encode();
        assert!(String::from_utf8_lossy(&encoded).contains(r#""stop_mode": "abort""#));
        let again = ClusterMeta::decode(&encoded, std::path::Path::new("x")).unwrap();
        assert_eq!(again.mirrors["old"].stop_mode, StopMode::Abort);
        let bad = br#"{"version":1,"cluster_id":"c","mirror_state_partitions":3,
            "mirrors":{"m":{"source":"/a","stop_mode":"drop"}}}"#;
        let e = ClusterMeta::decode(bad, std::path::Path::new("root/cluster.json")).unwrap_err();
        assert!(e.to_string().contains("root/cluster.json"), "{e}");
        assert_eq!(StopMode::parse("abort").unwrap(), StopMode::Abort);
        assert_eq!(
            StopMode::parse("drop").unwrap_err().error_name(),
            Some("INVALID_REQUEST")
        );
    }

    #[test]
    fn broken_metadata_is_named() {
        let p = std::path::Path::new("root/cluster.json");
        for (json, what) in [
            (&b"{"[..], "EOF"),
            (br#"{"version":2,"cluster_id":"c","mirror_state_partitions":3}"#, "version 2"),
            (br#"{"version":1,"cluster_id":"c","mirror_state_partitions":0}"#, "0 is not"),
            (
                br#"{"version":1,"cluster_id":"c","mirror_state_partitions":4000000000}"#,
                "4000000000 is not 1 to 10000",
            ),
            (
                br#"{"version":1,"cluster_id":"c","mirror_state_partitions":1,"topics":{"t":{"id":"AAAAAAAAAAAAAAAAAAAAAQ","partitions":2,"leader_epochs":[0]}}}"#,
                "2 partitions but 1",
            ),
            (
                br#"{"version":1,"cluster_id":"c","mirror_state_partitions":1,"mirrors":{"m":{"source":"/a","configs":{"groups.include":"("}}}}"#,
                "mirror m: groups.include: bad regex",
            ),
        ] {
            let e = ClusterMeta::decode(json, p).unwrap_err().to_string();
            assert!(e.contains("root/cluster.json") && e.contains(what), "{e}");
        }
    }
}
