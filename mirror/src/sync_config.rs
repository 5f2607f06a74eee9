//! A mirror's metadata-sync filters, with the names and defaults of the reference implementation
//! (showuon/kafka `mirror-coordinator/.../ClusterMirrorConfig.java`, `server-common/.../MirrorUtils.java`):
//!
//! - `topic.properties.exclude`: the source topic configs not synced (regexes, whole-name match);
//! - `groups.include` / `groups.exclude`: the consumer groups whose offsets are synced (regexes; the
//!   exclude list wins);
//! - `acls.include`: the ACL bindings synced ([`AclRule`]s, `*` for every binding).
//!
//! Each is a Kafka LIST config: comma-separated, each item trimmed, empty items dropped. A regex list
//! is matched as the reference compiles it, `^(p1|p2|...)$`; an empty list is no filter (nothing
//! excluded, every group included). The mirror keeps what the operator set (`cluster.json`, the
//! mirror's `configs`, as Kafka's CLUSTER_MIRROR config resource); a name not set takes its default.
//!
//! Whatever `topic.properties.exclude` says, [`never_synced`] configs are never taken from a source.

use std::collections::BTreeMap;

use regex::Regex;

use crate::acl::{AclBinding, AclRule};

/// The source topic configs not synced.
pub const TOPIC_PROPERTIES_EXCLUDE: &str = "topic.properties.exclude";
/// The consumer groups whose offsets are synced.
pub const GROUPS_INCLUDE: &str = "groups.include";
/// The consumer groups whose offsets are not synced (wins over `groups.include`).
pub const GROUPS_EXCLUDE: &str = "groups.exclude";
/// The ACL bindings synced.
pub const ACLS_INCLUDE: &str = "acls.include";

/// The reference's default `topic.properties.exclude`, verbatim (`ClusterMirrorConfig.java`): how the
/// destination itself replicates, throttles and stamps, never the data.
pub const TOPIC_PROPERTIES_EXCLUDE_DEFAULT: &str = "follower.replication.throttled.replicas,\
leader.replication.throttled.replicas,message.timestamp.difference.max.ms,\
log.message.timestamp.before.max.ms,log.message.timestamp.after.max.ms,message.timestamp.type,\
unclean.leader.election.enable,min.insync.replicas,mirror.replication.throttled.replicas,\
mirror.support.unclean.leader.election";
/// The reference's default `groups.include`: every group.
pub const GROUPS_INCLUDE_DEFAULT: &str = ".*";
/// The reference's default `groups.exclude`: none.
pub const GROUPS_EXCLUDE_DEFAULT: &str = "";
/// The reference's default `acls.include`: every binding.
pub const ACLS_INCLUDE_DEFAULT: &str = "*";

/// The mirror configs `klog mirror create --config` takes, with their defaults.
pub const MIRROR_SYNC_CONFIGS: [(&str, &str); 4] = [
    (TOPIC_PROPERTIES_EXCLUDE, TOPIC_PROPERTIES_EXCLUDE_DEFAULT),
    (GROUPS_INCLUDE, GROUPS_INCLUDE_DEFAULT),
    (GROUPS_EXCLUDE, GROUPS_EXCLUDE_DEFAULT),
    (ACLS_INCLUDE, ACLS_INCLUDE_DEFAULT),
];

/// Topic configs never taken from a source, whatever `topic.properties.exclude` says:
/// - `mirror.*`: a topic's own mirroring where it is set (`mirror.name` drives the mirror's state,
///   the reference always excludes it; `mirror.support.unclean.leader.election` and the mirror
///   throttle are the destination's policy, not the data: in a chain A -> B -> C, B's would
///   otherwise decide C's);
/// - `io_backend`: klog's own, about the destination's host;
/// - the tiered-storage configs (`remote.storage.enable`, `remote.log.*`, `local.retention.*`): klog
///   keeps every segment locally and has no remote tier, so they would claim a tier that was never
///   written (the reference fails tiered destination partitions).
pub fn never_synced(key: &str) -> bool {
    key.starts_with("mirror.")
        || key.starts_with("remote.log.")
        || key.starts_with("local.retention.")
        || matches!(key, "io_backend" | "remote.storage.enable")
}

/// A mirror's sync filters, compiled.
#[derive(Debug, Clone)]
pub struct SyncFilters {
    topic_properties_exclude: Option<Regex>,
    groups_include: Option<Regex>,
    groups_exclude: Option<Regex>,
    acls_include: Vec<AclRule>,
}

impl Default for SyncFilters {
    fn default() -> Self {
        SyncFilters::from_configs(&BTreeMap::new()).expect("the defaults compile")
    }
}

impl SyncFilters {
    /// The filters of a mirror's configs (defaults for the names not set). An unknown name, a bad
    /// regex or a bad ACL rule is named.
    pub fn from_configs(configs: &BTreeMap<String, String>) -> Result<Self, String> {
        for name in configs.keys() {
            if !MIRROR_SYNC_CONFIGS.iter().any(|(n, _)| n == name) {
                let known: Vec<&str> = MIRROR_SYNC_CONFIGS.iter().map(|(n, _)| *n).collect();
                return Err(format!(
                    "unknown mirror config {name:?} (known: {})",
                    known.join(", ")
                ));
            }
        }
        let value = |name: &str| effective_value(configs, name);
        let rules = list(&value(ACLS_INCLUDE))
            .iter()
            .map(|r| AclRule::parse(r).map_err(|e| format!("{ACLS_INCLUDE}: rule {r:?}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SyncFilters {
            topic_properties_exclude: pattern_list(
                TOPIC_PROPERTIES_EXCLUDE,
                &value(TOPIC_PROPERTIES_EXCLUDE),
            )?,
            groups_include: pattern_list(GROUPS_INCLUDE, &value(GROUPS_INCLUDE))?,
            groups_exclude: pattern_list(GROUPS_EXCLUDE, &value(GROUPS_EXCLUDE))?,
            acls_include: rules,
        })
    }

    /// Whether the source's value of topic config `key` is synced.
    pub fn syncs_topic_config(&self, key: &str) -> bool {
        !never_synced(key)
            && !self
                .topic_properties_exclude
                .as_ref()
                .is_some_and(|p| p.is_match(key))
    }

    /// Whether group `group`'s offsets are synced (`groups.include`, then `groups.exclude`).
    pub fn syncs_group(&self, group: &str) -> bool {
        self.groups_include
            .as_ref()
            .is_none_or(|p| p.is_match(group))
            && !self
                .groups_exclude
                .as_ref()
                .is_some_and(|p| p.is_match(group))
    }

    /// Whether `binding` matches some rule of `acls.include`.
    pub fn syncs_acl(&self, binding: &AclBinding) -> bool {
        self.acls_include.iter().any(|r| r.matches(binding))
    }
}

/// A mirror config's value in force: the one set, else the default.
pub fn effective_value(configs: &BTreeMap<String, String>, name: &str) -> String {
    configs.get(name).cloned().unwrap_or_else(|| {
        MIRROR_SYNC_CONFIGS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or_else(String::new, |(_, d)| (*d).to_owned())
    })
}

/// Kafka's LIST parsing: split at commas, items trimmed, empty ones dropped.
fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The reference's `compilePatternList`: `^(p1|p2|...)$`, or no pattern for an empty list.
fn pattern_list(name: &str, value: &str) -> Result<Option<Regex>, String> {
    let items = list(value);
    for p in &items {
        Regex::new(p).map_err(|e| format!("{name}: bad regex {p:?}: {e}"))?;
    }
    if items.is_empty() {
        return Ok(None);
    }
    Regex::new(&format!("^({})$", items.join("|")))
        .map(Some)
        .map_err(|e| format!("{name}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_defaults_are_the_references() {
        let f = SyncFilters::default();
        for excluded in [
            "follower.replication.throttled.replicas",
            "leader.replication.throttled.replicas",
            "message.timestamp.type",
            "message.timestamp.difference.max.ms",
            "unclean.leader.election.enable",
            "min.insync.replicas",
            "mirror.name",
            "mirror.support.unclean.leader.election",
        ] {
            assert!(!f.syncs_topic_config(excluded), "{excluded}");
        }
        for synced in [
            "retention.ms",
            "flush.ms",
            "compression.type",
            "cleanup.policy",
        ] {
            assert!(f.syncs_topic_config(synced), "{synced}");
        }
        assert!(f.syncs_group("any-group") && f.syncs_group(""));
        let b = AclBinding::parse(
            "cluster",
            "kafka-cluster",
            "literal",
            "User:a",
            "*",
            "alter",
            "deny",
        )
        .unwrap();
        assert!(f.syncs_acl(&b));
    }

    #[test]
    fn lists_are_whole_name_regexes_and_the_exclude_wins() {
        let f = SyncFilters::from_configs(&configs(&[
            (TOPIC_PROPERTIES_EXCLUDE, "retention\\..*, segment.ms"),
            (GROUPS_INCLUDE, "app-.*,billing"),
            (GROUPS_EXCLUDE, "app-test.*"),
        ]))
        .unwrap();
        assert!(!f.syncs_topic_config("retention.ms") && !f.syncs_topic_config("segment.ms"));
        // Whole-name match: a pattern does not match inside a longer name.
        assert!(f.syncs_topic_config("segment.msx") && f.syncs_topic_config("local.retention"));
        // The reference's list no longer applies once the operator sets one; mirror.* still never.
        assert!(f.syncs_topic_config("min.insync.replicas"));
        assert!(!f.syncs_topic_config("mirror.name") && !f.syncs_topic_config("io_backend"));
        assert!(f.syncs_group("app-1") && f.syncs_group("billing"));
        assert!(!f.syncs_group("app-test-1") && !f.syncs_group("billing2"));
        // An empty exclude list excludes nothing but the never-synced configs.
        let none = SyncFilters::from_configs(&configs(&[(TOPIC_PROPERTIES_EXCLUDE, "")])).unwrap();
        assert!(none.syncs_topic_config("message.timestamp.type"));
        assert!(!none.syncs_topic_config("remote.storage.enable"));
    }

    #[test]
    fn bad_configs_are_named() {
        for (pairs, what) in [
            (
                vec![("groups.includ", "x")],
                "unknown mirror config \"groups.includ\"",
            ),
            (
                vec![(GROUPS_INCLUDE, "ok,(")],
                "groups.include: bad regex \"(\"",
            ),
            (
                vec![(ACLS_INCLUDE, "TOPICS;x")],
                "acls.include: rule \"TOPICS;x\"",
            ),
        ] {
            let e = SyncFilters::from_configs(&configs(&pairs)).unwrap_err();
            assert!(e.contains(what), "{e}");
        }
    }
}
