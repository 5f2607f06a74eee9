//! Mirror administration on a local node: the controller's side of the KIP-1279 mirror RPCs
//! (CreateMirror, AddTopicsToMirror, RemoveTopicsFromMirror, Pause/ResumeMirrorTopics, DeleteMirror).
//! These change only the metadata's desired states (and the write modes that follow from recorded
//! states); the [`crate::manager`] drives the partitions towards them.

use klog_log::checkpoint::TopicId;

use crate::error::{Error, MirrorError};
use crate::metadata::{validate_mirror_name, ClusterMeta, DesiredState, MirrorMeta, TopicMirror};
use crate::node::{lock, Node};
use crate::records::MirrorKey;
use crate::source::MirrorSource;
use crate::state::MirrorState;
use crate::topics;

/// Per-topic outcomes of a mirror request (the request itself can also fail as a whole).
pub type TopicResults = Vec<(String, Result<(), Error>)>;

/// CreateMirror: `source` is a cluster root or `kafka://host:port`.
pub(crate) fn create_mirror(node: &Node, name: &str, source: &str) -> Result<(), Error> {
    validate_mirror_name(name)?;
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
            source: source.to_owned(),
            source_cluster_id: None,
            acls: Vec::new(),
        },
    );
    node.save_meta(&mut guard, meta)
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

/// ResumeMirrorTopics.
pub(crate) fn resume_topics(
    node: &Node,
    mirror: &str,
    topics: &[String],
) -> Result<TopicResults, Error> {
    change_topics(node, mirror, topics, |topic, m| match m.desired {
        DesiredState::Pause => Ok(TopicMirror {
            name: m.name.clone(),
            desired: DesiredState::Start,
        }),
        _ => Err(Error::mirror(
            MirrorError::MirrorTopicNotPaused,
            format!("topic {topic} is not paused"),
        )),
    })
}

fn change_topics(
    node: &Node,
    mirror: &str,
    topics: &[String],
    change: impl Fn(&str, &TopicMirror) -> Result<TopicMirror, Error>,
) -> Result<TopicResults, Error> {
    require_mirror(&lock(&node.meta), mirror)?;
    let results = topics
        .iter()
        .map(|topic| {
            let r = set_desired(node, topic, |current| match current {
                None => Err(Error::mirror(
                    MirrorError::UnknownMirror,
                    format!("topic {topic} is not in any mirror"),
                )),
                Some(m) if m.name != mirror => Err(Error::mirror(
                    MirrorError::TopicNotInMirror,
                    format!("topic {topic} is in mirror {}, not {mirror}", m.name),
                )),
                Some(m) => change(topic, m).map(Some),
            });
            (topic.clone(), r)
        })
        .collect();
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
