//! The topic configs and ACL bindings a mirror takes from its source, the part of KIP-1279's metadata
//! sync (§3.5) beyond partition counts; run by the manager every `metadata_refresh_ms`, for the topics
//! whose desired state is `start` only (a paused topic syncs nothing, a stopped one is the
//! destination's own), and for a topic's configs once more when it is added to a mirror (so its first
//! fetches already run with them).
//!
//! - Topic configs: every config the source has set on the topic (Kafka: DYNAMIC_TOPIC_CONFIG), less
//!   the mirror's `topic.properties.exclude` and the configs never synced
//!   ([`crate::sync_config::never_synced`]), is kept in the topic's `source_configs` in
//!   `cluster.json`; the topic's own `configs` are its local overrides and win. A key klog knows
//!   neither as its own nor as a Kafka topic config is refused and reported (as Kafka's
//!   IncrementalAlterConfigs refuses it), the previous value kept.
//!   A change is applied to the open partition logs at once: each is closed cleanly and opened again
//!   with the new `LogConfig` (klog's partition log takes its config at open).
//! - ACLs: klog has no authorizer. The source's bindings that match the mirror's `acls.include` and
//!   cover a started topic, and its GROUP bindings that match it, are kept in the mirror's entry of `cluster.json` (bindings no longer on the source are
//!   dropped, as the KIP's sync deletes extras), for the layer above klog to enforce. Kept per mirror, so
//!   two mirrors into one cluster never delete each other's bindings (the prototype's fan-in fight).
//!   The cluster's own bindings (`klog acl add`) are in its top-level list.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use klog_log::config::LogConfig;

use crate::acl::AclBinding;
use crate::error::{Error, MirrorError};
use crate::metadata::{
    validate_unapplied_config, ClusterMeta, DesiredState, TopicMeta, UNAPPLIED_TOPIC_CONFIGS,
};
use crate::node::{lock, topic_config, unknown_topic, Node};
use crate::source::MirrorSource;
use crate::sync_config::SyncFilters;

/// Syncs the configs of `mirror`'s started topics and its ACL bindings from `source`. Errors are
/// returned per topic (`-1` partition, as the manager reports metadata errors); one topic's failure
/// does not stop the others.
pub(crate) fn sync_mirror(
    node: &Node,
    source: &dyn MirrorSource,
    mirror: &str,
) -> Vec<(String, String)> {
    let meta = node.metadata();
    let started = started_topics(&meta, mirror);
    let mut errors = Vec::new();
    let Some(filters) = meta.mirrors.get(mirror).map(|m| m.sync_filters()) else {
        return errors;
    };
    if started.is_empty() {
        return errors;
    }
    for topic in &started {
        let result = match source.topic_configs(topic) {
            Ok(Some(configs)) => apply_source_configs(node, &filters, topic, &configs),
            Ok(None) => Ok(Vec::new()), // this source does not describe configs
            Err(e) => Err(format!("topic configs from {}: {e}", source.describe())),
        };
        match result {
            Ok(refused) => errors.extend(refused.into_iter().map(|r| (topic.clone(), r))),
            Err(e) => errors.push((topic.clone(), e)),
        }
    }
    let acls = match source.acls() {
        Ok(Some(acls)) => {
            apply_source_acls(node, &filters, mirror, &started, acls).map_err(|e| e.to_string())
        }
        Ok(None) => Ok(()), // this source does not describe ACLs
        Err(e) => Err(format!("ACLs from {}: {e}", source.describe())),
    };
    if let Err(e) = acls {
        errors.push((format!("mirror {mirror}"), e));
    }
    errors
}

/// A topic just added to a mirror takes the source's configs at once, so its first fetches run with
/// them (a batch only the source's `max.message.bytes` admits, segments rolled where the source rolls).
/// A failure is left to the periodic sync, which reports it: adding the topic does not depend on it.
pub(crate) fn sync_topic_configs_at_add(node: &Node, source: &dyn MirrorSource, topic: &str) {
    let meta = node.metadata();
    let mirror = meta.topics.get(topic).and_then(|t| t.mirror.as_ref());
    let Some(filters) = mirror
        .and_then(|m| meta.mirrors.get(&m.name))
        .map(|m| m.sync_filters())
    else {
        return;
    };
    if let Ok(Some(configs)) = source.topic_configs(topic) {
        let _ = apply_source_configs(node, &filters, topic, &configs);
    }
}

/// The topics of `mirror` whose desired state is `start`.
fn started_topics(meta: &ClusterMeta, mirror: &str) -> Vec<String> {
    meta.topics
        .iter()
        .filter(|(_, t)| {
            t.mirror
                .as_ref()
                .is_some_and(|m| m.name == mirror && m.desired == DesiredState::Start)
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// Checks one value as the destination would apply it: a klog config, or a Kafka topic config klog
/// keeps without applying; any other key is refused by name.
fn check_value(key: &str, value: &str) -> Result<(), String> {
    if UNAPPLIED_TOPIC_CONFIGS.contains(&key) {
        return validate_unapplied_config(key, value);
    }
    if !klog_log::config::KEYS.contains(&key) {
        return Err(format!("{key}: not a topic config klog knows"));
    }
    LogConfig::default()
        .set(key, value)
        .map_err(|e| e.to_string())
}

/// Keeps the source's configs of `topic` that the mirror's filters let through and applies them. A
/// value the destination refuses keeps the previous one and is returned as a message; the rest go
/// ahead.
fn apply_source_configs(
    node: &Node,
    filters: &SyncFilters,
    topic: &str,
    source: &BTreeMap<String, String>,
) -> Result<Vec<String>, String> {
    let previous = node
        .topic(topic)
        .ok_or_else(|| unknown_topic(topic).to_string())?
        .source_configs;
    let mut wanted = BTreeMap::new();
    let mut refused = Vec::new();
    for (k, v) in source.iter().filter(|(k, _)| filters.syncs_topic_config(k)) {
        match check_value(k, v) {
            Ok(()) => {
                wanted.insert(k.clone(), v.clone());
            }
            Err(why) => {
                refused.push(format!(
                    "source topic config refused, previous value kept (the mirror's \
                     topic.properties.exclude can leave it out): {why}"
                ));
                if let Some(old) = previous.get(k) {
                    wanted.insert(k.clone(), old.clone());
                }
            }
        }
    }
    let changed = node
        .update_topic(topic, |t| {
            if t.source_configs == wanted {
                return Ok(None);
            }
            t.source_configs = wanted;
            Ok(Some(()))
        })
        .map_err(|e| e.to_string())?;
    if changed.is_some() {
        node.apply_topic_config(topic).map_err(|e| e.to_string())?;
    }
    Ok(refused)
}

/// Replaces `mirror`'s synced bindings: the source's that match `acls.include` and cover a started
/// topic or a group, plus the previous ones of topics that are not started (paused: halted; stopped:
/// the destination's own now).
fn apply_source_acls(
    node: &Node,
    filters: &SyncFilters,
    mirror: &str,
    started: &[String],
    source: Vec<AclBinding>,
) -> Result<(), Error> {
    let covers_started = |b: &AclBinding| started.iter().any(|t| b.covers("TOPIC", t));
    let mut guard = lock(&node.meta);
    let Some(entry) = guard.mirrors.get(mirror) else {
        return Ok(()); // deleted meanwhile
    };
    let kept = entry
        .acls
        .iter()
        .filter(|b| b.resource_type == "TOPIC" && !covers_started(b))
        .cloned();
    let synced = source
        .into_iter()
        .filter(|b| filters.syncs_acl(b))
        .filter(|b| b.resource_type == "GROUP" || covers_started(b));
    let wanted: Vec<AclBinding> = kept
        .chain(synced)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if entry.acls == wanted {
        return Ok(());
    }
    let mut meta = guard.clone();
    if let Some(m) = meta.mirrors.get_mut(mirror) {
        m.acls = wanted;
    }
    node.save_meta(&mut guard, meta)
}

impl Node {
    /// Opens again, with the topic's config in force, every partition log of `topic` whose config
    /// differs (closed cleanly first; its write mode kept).
    pub(crate) fn apply_topic_config(&self, topic: &str) -> Result<(), Error> {
        let t = self.topic(topic).ok_or_else(|| unknown_topic(topic))?;
        let config = topic_config(&t)?;
        for p in 0..t.partitions {
            let Some(old) = self.log(topic, p) else {
                continue;
            };
            if old.config() == &config || old.is_failed() {
                continue; // a failed log is reopened by its next retry, with this config
            }
            old.close()?;
            let log = Arc::new(self.reopen(&old, config.clone())?);
            lock(&self.logs).insert((topic.to_owned(), p), log);
        }
        Ok(())
    }

    /// Sets (`Some`) or removes (`None`) local configs of `topic`; on a mirror topic they are
    /// overrides that win over the source's values. Applied to the open logs at once.
    pub fn alter_topic_configs(
        &self,
        topic: &str,
        changes: &[(String, Option<String>)],
    ) -> Result<(), Error> {
        for (k, v) in changes {
            if k == crate::metadata::MIRROR_NAME_CONFIG {
                return Err(Error::mirror(
                    MirrorError::InvalidRequest,
                    "mirror.name can only be changed through the mirror commands",
                ));
            }
            if let Some(v) = v {
                check_value(k, v).map_err(|why| {
                    Error::mirror(MirrorError::InvalidRequest, format!("topic {topic}: {why}"))
                })?;
            }
        }
        self.update_topic(topic, |t| {
            for (k, v) in changes {
                match v {
                    Some(v) => t.configs.insert(k.clone(), v.clone()),
                    None => t.configs.remove(k),
                };
            }
            Ok(Some(()))
        })?;
        self.apply_topic_config(topic)
    }

    /// Adds a binding to the cluster's own ACL list (no-op if it is there).
    pub fn add_acl(&self, binding: AclBinding) -> Result<bool, Error> {
        let mut guard = lock(&self.meta);
        if guard.acls.contains(&binding) {
            return Ok(false);
        }
        let mut meta = guard.clone();
        meta.acls.push(binding);
        meta.acls.sort();
        self.save_meta(&mut guard, meta)?;
        Ok(true)
    }

    /// Removes a binding from the cluster's own ACL list; `false` if it was not there.
    pub fn remove_acl(&self, binding: &AclBinding) -> Result<bool, Error> {
        let mut guard = lock(&self.meta);
        if !guard.acls.contains(binding) {
            return Ok(false);
        }
        let mut meta = guard.clone();
        meta.acls.retain(|b| b != binding);
        self.save_meta(&mut guard, meta)?;
        Ok(true)
    }
}

/// Where a config in force comes from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConfigEntry {
    /// Kafka's config name.
    pub name: String,
    /// The value in force.
    pub value: String,
    /// `mirror` (synced from the source) or `local` (set on this cluster: on a mirror topic, an
    /// override).
    pub source: &'static str,
    /// The source's value an override hides.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_value: Option<String>,
}

/// A topic's configs in force, each with where it comes from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TopicConfigs {
    /// The topic's name.
    pub topic: String,
    /// Its mirror, if mirrored.
    pub mirror: Option<String>,
    /// Its configs in force, by name.
    pub configs: Vec<ConfigEntry>,
}

/// An ACL binding and where it is kept: `None` for the cluster's own, else the mirror that synced it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AclEntry {
    /// The mirror that synced it; `None` for the cluster's own.
    pub mirror: Option<String>,
    /// The binding (flattened into the entry in JSON).
    #[serde(flatten)]
    pub binding: AclBinding,
}

/// Every topic with configs in force.
pub(crate) fn describe_configs(meta: &ClusterMeta) -> Vec<TopicConfigs> {
    meta.topics
        .iter()
        .map(|(name, t)| TopicConfigs {
            topic: name.clone(),
            mirror: t.mirror.as_ref().map(|m| m.name.clone()),
            configs: config_entries(t),
        })
        .filter(|t| !t.configs.is_empty())
        .collect()
}

fn config_entries(t: &TopicMeta) -> Vec<ConfigEntry> {
    t.effective_configs()
        .into_iter()
        .map(|(name, value)| {
            let local = t.configs.contains_key(&name);
            ConfigEntry {
                source: if local { "local" } else { "mirror" },
                source_value: t.source_configs.get(&name).filter(|_| local).cloned(),
                name,
                value,
            }
        })
        .collect()
}

/// The cluster's own bindings, then each mirror's.
pub(crate) fn describe_acls(meta: &ClusterMeta) -> Vec<AclEntry> {
    let own = meta.acls.iter().map(|b| AclEntry {
        mirror: None,
        binding: b.clone(),
    });
    let synced = meta.mirrors.iter().flat_map(|(name, m)| {
        m.acls.iter().map(move |b| AclEntry {
            mirror: Some(name.clone()),
            binding: b.clone(),
        })
    });
    own.chain(synced).collect()
}
