//! Mirror administration on a local node: the controller's side of the KIP-1279 mirror RPCs
//! (CreateMirror, AddTopicsToMirror, RemoveTopicsFromMirror, Pause/ResumeMirrorTopics, DeleteMirror).
//! These change only the metadata's desired states (and the write modes that follow from recorded
//! states); the [`crate::manager`] drives the partitions towards them.

use std::collections::{BTreeMap, BTreeSet};

use klog_log::checkpoint::TopicId;

use crate::error::{Error, MirrorError};
use crate::metadata::{
    validate_mirror_name, ClusterMeta, DesiredState, MirrorMeta, StopMode, TopicMirror,
    MIRROR_SUPPORT_UNCLEAN_LEADER_ELECTION,
};
use crate::node::{lock, Node};
use crate::records::{MirrorKey, MirrorRecord};
use crate::source::MirrorSource;
use crate::state::MirrorState;
use crate::sync_config::{SyncFilters, MIRROR_SYNC_CONFIGS};
use crate::topics;

/// Per-topic outcomes of a mirror request (the request itself can also fail as a whole).
pub type TopicResults = Vec<(String, Result<(), Error>)>;

/// CreateMirror: `source` is a cluster root or `kafka://host:port`; `stop_mode` is how its failover
/// ends the source's open transactions; `configs` (`key`, `value`, the reference's names) the mirror's
/// own: `mirror.support.unclean.leader.election` and the sync filters ([`crate::sync_config`]). An
/// unknown key, a key given twice or a value that does not parse refuses the request, naming it.
pub(crate) fn create_mirror(
    node: &Node,
    name: &str,
    source: &str,
    stop_mode: StopMode,
    configs: &[(String, String)],
) -> Result<(), Error> {
    validate_mirror_name(name)?;
    let invalid =
        |why: String| Error::mirror(MirrorError::InvalidRequest, format!("mirror {name}: {why}"));
    let mut support_unclean_leader_election = false;
    let mut sync = BTreeMap::new();
    for (key, value) in configs {
        if key == MIRROR_SUPPORT_UNCLEAN_LEADER_ELECTION {
            support_unclean_leader_election = match value.trim() {
                v if v.eq_ignore_ascii_case("true") => true,
                v if v.eq_ignore_ascii_case("false") => false,
                _ => {
                    return Err(invalid(format!(
                        "mirror config {key}={value:?}: expected true or false"
                    )))
                }
            };
        } else if !MIRROR_SYNC_CONFIGS.iter().any(|(n, _)| n == key) {
            let mut known = vec![MIRROR_SUPPORT_UNCLEAN_LEADER_ELECTION];
            known.extend(MIRROR_SYNC_CONFIGS.iter().map(|(n, _)| *n));
            return Err(invalid(format!(
                "unknown mirror config {key:?} (known: {})",
                known.join(", ")
            )));
        } else if sync.insert(key.clone(), value.clone()).is_some() {
            return Err(invalid(format!("mirror config {key} given twice")));
        }
    }
    SyncFilters::from_configs(&sync).map_err(invalid)?;
    if source.is_empty() {
        return Err(Error::mirror(MirrorError::InvalidRequest, "empty source"));
    }
    // A DeleteMirror of this name that did not finish must not hand its LMEs to the new mirror.
    node.tombstone_orphans()?;
    let mut guard = lock(&node.meta);
    if guard.mirrors.contains_key(name) {
        return Err(Error::mirror(
            MirrorError::MirrorAlreadyExists,
            format!("mirror {name} already exists"),
        ));
    }
    let mut meta = guard.clone();
    meta.mirrors.insert(
        name.to_owned(),
        MirrorMeta {
            source: absolute_source(source)?,
            source_cluster_id: None,
            acls: Vec::new(),
            stop_mode,
            support_unclean_leader_election,
            configs: sync,
        },
    );
    node.save_meta(&mut guard, meta)
}

/// A local source is stored as an absolute path: a relative one would name another directory (or
/// nothing) for a process started elsewhere. (The CLI canonicalizes it first; this keeps every other
/// caller from storing a relative path.)
fn absolute_source(source: &str) -> Result<String, Error> {
    if source.starts_with(crate::kafka_source::KAFKA_SCHEME) {
        return Ok(source.to_owned());
    }
    let path = std::path::absolute(source).map_err(|e| {
        Error::mirror(
            MirrorError::InvalidRequest,
            format!("source {source:?}: {e}"),
        )
    })?;
    path.to_str().map(str::to_owned).ok_or_else(|| {
        Error::mirror(
            MirrorError::InvalidRequest,
            format!("source {}: not UTF-8", path.display()),
        )
    })
}

pub(crate) fn require_mirror(meta: &ClusterMeta, name: &str) -> Result<(), Error> {
    if meta.mirrors.contains_key(name) {
        Ok(())
    } else {
        Err(Error::mirror(
            MirrorError::UnknownMirror,
            format!("no mirror named {name}"),
        ))
    }
}

/// AddTopicsToMirror: creates missing topics from the source's description (same name, partition
/// count and topic id), then marks them to be mirrored. Per-topic results.
pub(crate) fn add_topics(
    node: &Node,
    source: &dyn MirrorSource,
    mirror: &str,
    topics: &[String],
) -> Result<TopicResults, Error> {
    require_mirror(&lock(&node.meta), mirror)?;
    let mut results = Vec::new();
    for topic in topics {
        let r = (|| {
            let described = source
                .topic(topic)
                .map_err(|e| Error::Source {
                    source_name: source.describe(),
                    message: e.to_string(),
                })?
                .ok_or_else(|| {
                    Error::mirror(
                        MirrorError::UnknownTopicOrPartition,
                        format!("the source has no topic {topic}"),
                    )
                })?;
            if let Some(local) = node.topic(topic) {
                if let Some(m) = local
                    .mirror
                    .as_ref()
                    .filter(|m| m.desired != DesiredState::Stop)
                {
                    return Err(Error::mirror(
                        MirrorError::TopicAlreadyInMirror,
                        format!("topic {topic} is already in mirror {}", m.name),
                    ));
                }
                if local.id != described.id.to_string() {
                    return Err(Error::mirror(
                        MirrorError::InvalidRequest,
                        format!(
                            "local topic {topic} has id {} but the source's has id {}",
                            local.id, described.id
                        ),
                    ));
                }
                if local.partitions != described.partitions {
                    return Err(Error::mirror(
                        MirrorError::InvalidRequest,
                        format!(
                            "local topic {topic} has {} partitions, the source's {}",
                            local.partitions, described.partitions
                        ),
                    ));
                }
            } else {
                topics::create_topic(node, topic, described.partitions, Some(described.id), &[])?;
            }
            set_desired(node, topic, |current| match current {
                Some(m) if m.desired != DesiredState::Stop => Err(Error::mirror(
                    MirrorError::TopicAlreadyInMirror,
                    format!("topic {topic} is already in mirror {}", m.name),
                )),
                _ => Ok(Some(TopicMirror {
                    name: mirror.to_owned(),
                    desired: DesiredState::Start,
                })),
            })
        })();
        if r.is_ok() {
            // The source's configs before the first fetch, not up to a sync period later.
            crate::config_sync::sync_topic_configs_at_add(node, source, topic);
        }
        results.push((topic.clone(), r));
    }
    node.refresh_write_modes();
    Ok(results)
}

/// RemoveTopicsFromMirror (failover).
pub(crate) fn remove_topics(
    node: &Node,
    mirror: &str,
    topics: &[String],
) -> Result<TopicResults, Error> {
    change_topics(node, mirror, topics, |topic, m| match m.desired {
        DesiredState::Stop => Ok(m.clone()),
        _ => {
            let _ = topic;
            Ok(TopicMirror {
                name: m.name.clone(),
                desired: DesiredState::Stop,
            })
        }
    })
}

/// PauseMirrorTopics.
pub(crate) fn pause_topics(
    node: &Node,
    mirror: &str,
    topics: &[String],
) -> Result<TopicResults, Error> {
    change_topics(node, mirror, topics, |topic, m| match m.desired {
        DesiredState::Stop => Err(Error::mirror(
            MirrorError::MirrorTopicBeingRemoved,
            format!("topic {topic} is being removed from mirror {}", m.name),
        )),
        _ => Ok(TopicMirror {
            name: m.name.clone(),
            desired: DesiredState::Pause,
        }),
    })
}

/// ResumeMirrorTopics. It also resets the topic's FAILED partitions (their attempt count, and a
/// non-retryable mark), so they are retried at the next pass; a started topic with FAILED partitions
/// may be resumed for that alone. Returns the partitions reset per topic beside the results.
pub(crate) fn resume_topics(
    node: &Node,
    mirror: &str,
    topics: &[String],
) -> Result<(TopicResults, PartitionsReset), Error> {
    let failed: BTreeSet<&str> = topics
        .iter()
        .filter(|t| !failed_partitions(node, mirror, t).is_empty())
        .map(String::as_str)
        .collect();
    let mut results = change_topics(node, mirror, topics, |topic, m| match m.desired {
        DesiredState::Pause => Ok(TopicMirror {
            name: m.name.clone(),
            desired: DesiredState::Start,
        }),
        DesiredState::Start if failed.contains(topic) => Ok(m.clone()),
        _ => Err(Error::mirror(
            MirrorError::MirrorTopicNotPaused,
            format!("topic {topic} is not paused"),
        )),
    })?;
    let mut reset = Vec::new();
    for (topic, result) in &mut results {
        if result.is_ok() {
            match reset_failed(node, mirror, topic) {
                Ok(partitions) => reset.push((topic.clone(), partitions)),
                Err(e) => *result = Err(e),
            }
        }
    }
    Ok((results, reset))
}

/// Per topic, the FAILED partitions a request reset.
pub type PartitionsReset = Vec<(String, Vec<i32>)>;

/// Per-topic outcomes of `retry`: the partitions reset.
pub type RetryResults = Vec<(String, Result<Vec<i32>, Error>)>;

/// `klog mirror retry`: resets the FAILED partitions of `topics` (every topic of the mirror when
/// empty), whatever their desired state, so they are retried at the next pass.
pub(crate) fn retry_topics(
    node: &Node,
    mirror: &str,
    topics: &[String],
) -> Result<RetryResults, Error> {
    let meta = node.metadata();
    require_mirror(&meta, mirror)?;
    let all: Vec<String> = if topics.is_empty() {
        meta.topics
            .iter()
            .filter(|(_, t)| t.mirror.as_ref().is_some_and(|m| m.name == mirror))
            .map(|(name, _)| name.clone())
            .collect()
    } else {
        topics.to_vec()
    };
    Ok(all
        .into_iter()
        .map(|topic| {
            let r = match meta.topics.get(&topic).map(|t| t.mirror.as_ref()) {
                None => Err(crate::node::unknown_topic(&topic)),
                Some(None) => Err(Error::mirror(
                    MirrorError::UnknownMirror,
                    format!("topic {topic} is not in any mirror"),
                )),
                Some(Some(m)) if m.name != mirror => Err(Error::mirror(
                    MirrorError::TopicNotInMirror,
                    format!("topic {topic} is in mirror {}, not {mirror}", m.name),
                )),
                Some(Some(_)) => reset_failed(node, mirror, &topic),
            };
            (topic, r)
        })
        .collect())
}

/// The FAILED partitions of `topic` in `mirror`.
fn failed_partitions(node: &Node, mirror: &str, topic: &str) -> Vec<i32> {
    let Some(t) = node.topic(topic) else {
        return Vec::new();
    };
    let id = TopicId::parse(&t.id).expect("validated");
    let store = lock(&node.store);
    (0..t.partitions)
        .filter(|p| {
            let key = MirrorKey {
                mirror: mirror.to_owned(),
                topic_id: id,
                partition: *p,
            };
            store.state(&key).map(|s| s.value.state) == Some(MirrorState::Failed)
        })
        .collect()
}

/// Records each FAILED partition of `topic` again with no attempts and a retry due now (what it failed
/// in, its error and a stop's recorded LME kept). Returns the partitions reset.
fn reset_failed(node: &Node, mirror: &str, topic: &str) -> Result<Vec<i32>, Error> {
    let partitions = failed_partitions(node, mirror, topic);
    let Some(t) = node.topic(topic) else {
        return Ok(Vec::new());
    };
    let id = TopicId::parse(&t.id).expect("validated");
    let now = node.clock.now_ms();
    let mut store = lock(&node.store);
    let mut records = Vec::new();
    for p in &partitions {
        let key = MirrorKey {
            mirror: mirror.to_owned(),
            topic_id: id,
            partition: *p,
        };
        if let Some(s) = store.state(&key) {
            let mut value = s.value.clone();
            value.retry_attempt = 0;
            value.next_retry_ms = Some(now);
            records.push(MirrorRecord::State(key, Some(value)));
        }
    }
    if !records.is_empty() {
        store.write(records)?;
    }
    Ok(partitions)
}

/// A desired-state change of many topics of `mirror` (remove, pause, resume), decided per topic and
/// written in one `cluster.json` write: a failover of a mirror of many topics pays one synced metadata
/// write, not one per topic (20 of them were a third of a 1,000-partition failover). A topic whose change
/// is refused gets its error and the others go on; a failed write changes none of them and is the
/// request's error.
fn change_topics(
    node: &Node,
    mirror: &str,
    topics: &[String],
    change: impl Fn(&str, &TopicMirror) -> Result<TopicMirror, Error>,
) -> Result<TopicResults, Error> {
    let mut guard = lock(&node.meta);
    require_mirror(&guard, mirror)?;
    let mut meta = guard.clone();
    let mut changed = false;
    let results = topics
        .iter()
        .map(|topic| {
            let r = meta
                .topics
                .get_mut(topic.as_str())
                .ok_or_else(|| crate::node::unknown_topic(topic))
                .and_then(|t| {
                    let new = match &t.mirror {
                        None => Err(Error::mirror(
                            MirrorError::UnknownMirror,
                            format!("topic {topic} is not in any mirror"),
                        )),
                        Some(m) if m.name != mirror => Err(Error::mirror(
                            MirrorError::TopicNotInMirror,
                            format!("topic {topic} is in mirror {}, not {mirror}", m.name),
                        )),
                        Some(m) => change(topic, m),
                    }?;
                    if t.mirror.as_ref() != Some(&new) {
                        t.mirror = Some(new);
                        changed = true;
                    }
                    Ok(())
                });
            (topic.clone(), r)
        })
        .collect();
    if changed {
        node.save_meta(&mut guard, meta)?;
    }
    drop(guard);
    node.refresh_write_modes();
    Ok(results)
}

fn set_desired(
    node: &Node,
    topic: &str,
    decide: impl FnOnce(Option<&TopicMirror>) -> Result<Option<TopicMirror>, Error>,
) -> Result<(), Error> {
    node.update_topic(topic, |t| {
        let new = decide(t.mirror.as_ref())?;
        if new == t.mirror {
            return Ok(None);
        }
        t.mirror = new;
        Ok(Some(()))
    })
    .map(|_| ())
}

/// DeleteMirror: only when every topic of the mirror is STOPPED (MIRROR_NOT_EMPTY otherwise). The
/// topics become ordinary topics and the mirror's `__mirror_state` records are tombstoned.
pub(crate) fn delete_mirror(node: &Node, mirror: &str) -> Result<(), Error> {
    let mut guard = lock(&node.meta);
    require_mirror(&guard, mirror)?;
    let mut busy = Vec::new();
    {
        let store = lock(&node.store);
        for (name, t) in &guard.topics {
            let Some(m) = t.mirror.as_ref().filter(|m| m.name == mirror) else {
                continue;
            };
            let id = TopicId::parse(&t.id).expect("validated");
            let stopped = m.desired == DesiredState::Stop
                && (0..t.partitions).all(|p| {
                    let key = MirrorKey {
                        mirror: mirror.to_owned(),
                        topic_id: id,
                        partition: p,
                    };
                    store.state(&key).map(|s| s.value.state) == Some(MirrorState::Stopped)
                });
            if !stopped {
                busy.push(name.clone());
            }
        }
    }
    if !busy.is_empty() {
        return Err(Error::mirror(
            MirrorError::MirrorNotEmpty,
            format!(
                "mirror {mirror} still has topics that are not stopped: {}",
                busy.join(", ")
            ),
        ));
    }
    // Metadata first (the topics become ordinary and writable, the mirror is gone), then the
    // tombstones. A crash (or a failed write) in between leaves records of a mirror that no longer
    // exists: the next open and the next CreateMirror tombstone them (`crate::heal`).
    let mut meta = guard.clone();
    meta.mirrors.remove(mirror);
    for t in meta.topics.values_mut() {
        if t.mirror.as_ref().is_some_and(|m| m.name == mirror) {
            t.mirror = None;
        }
    }
    node.save_meta(&mut guard, meta)?;
    drop(guard);
    node.tombstone_orphans()?;
    node.refresh_write_modes();
    Ok(())
}
