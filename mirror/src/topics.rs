//! Topic administration on a local node (the controller's side of CreateTopics, DeleteTopics and
//! CreatePartitions). Partition directories are made before the metadata names them, so a crash leaves
//! unreferenced empty directories, never a topic without its files.

use std::collections::BTreeMap;
use std::sync::Arc;

use klog_log::checkpoint::TopicId;
use klog_log::partition_log::{PartitionLog, WriteMode};

use crate::error::{Error, MirrorError};
use crate::metadata::{validate_topic_name, TopicMeta};
use crate::node::{lock, partition_dir_name, random_bytes, topic_config, unknown_topic, Node};

/// Creates a topic (CreateTopics; with `topic_id` it keeps a source's id, as a mirror does).
pub(crate) fn create_topic(
    node: &Node,
    name: &str,
    partitions: i32,
    topic_id: Option<TopicId>,
    configs: &[(String, String)],
) -> Result<TopicId, Error> {
    validate_topic_name(name)?;
    if name.starts_with("__") {
        return Err(Error::mirror(
            MirrorError::InvalidRequest,
            format!("topic {name:?}: names starting with __ are internal"),
        ));
    }
    if !(1..=10_000).contains(&partitions) {
        return Err(Error::mirror(
            MirrorError::InvalidRequest,
            format!("topic {name}: {partitions} partitions (1 to 10000 allowed)"),
        ));
    }
    let mut guard = lock(&node.meta);
    if guard.topics.contains_key(name) {
        return Err(Error::mirror(
            MirrorError::TopicAlreadyExists,
            format!("topic {name} already exists"),
        ));
    }
    let id = topic_id.unwrap_or_else(|| TopicId::from_random(random_bytes()));
    if let Some((other, _)) = guard.topics.iter().find(|(_, t)| t.id == id.to_string()) {
        return Err(Error::mirror(
            MirrorError::InvalidRequest,
            format!("topic id {id} is already used by topic {other}"),
        ));
    }
    let mut configs: BTreeMap<String, String> = configs.iter().cloned().collect();
    if configs
        .remove(crate::metadata::MIRROR_NAME_CONFIG)
        .is_some()
    {
        return Err(Error::mirror(
            MirrorError::InvalidRequest,
            "mirror.name can only be changed through the mirror commands",
        ));
    }
    let topic = TopicMeta {
        id: id.to_string(),
        partitions,
        leader_epochs: vec![0; partitions as usize],
        configs,
        source_configs: BTreeMap::new(),
        mirror: None,
    };
    let config = topic_config(&topic)?;
    // The partition directories first (a crash leaves unreferenced empty directories, not a topic
    // without its files), then the metadata.
    let mut opened = Vec::new();
    {
        let log_dir = lock(&node.log_dir);
        for p in 0..partitions {
            let (log, _) = log_dir.open_partition_with_clock(
                &partition_dir_name(name, p),
                config.clone(),
                Arc::clone(&node.clock),
            )?;
            log.set_topic_id(id)?;
            opened.push((p, Arc::new(log)));
        }
    }
    let mut meta = guard.clone();
    meta.topics.insert(name.to_owned(), topic);
    node.save_meta(&mut guard, meta)?;
    let mut logs = lock(&node.logs);
    for (p, log) in opened {
        logs.insert((name.to_owned(), p), log);
    }
    Ok(id)
}

/// DeleteTopics: the topic leaves the metadata and its partition directories are renamed the way
/// Kafka marks them for deletion (`<topic>-<p>.<id>-delete`); their files are left for the operator.
pub(crate) fn delete_topic(node: &Node, name: &str) -> Result<(), Error> {
    let mut guard = lock(&node.meta);
    let t = guard
        .topics
        .get(name)
        .cloned()
        .ok_or_else(|| unknown_topic(name))?;
    let mut meta = guard.clone();
    meta.topics.remove(name);
    node.save_meta(&mut guard, meta)?;
    let mut logs = lock(&node.logs);
    let removed: Vec<_> = (0..t.partitions)
        .filter_map(|p| logs.remove(&(name.to_owned(), p)))
        .collect();
    let refs: Vec<&PartitionLog> = removed.iter().map(|l| l.as_ref()).collect();
    for closed in PartitionLog::close_each(&refs) {
        closed?;
    }
    lock(&node.log_dir).checkpoint_many(&refs)?;
    for p in 0..t.partitions {
        let dir = node.root.join(partition_dir_name(name, p));
        let to = node.root.join(format!(
            "{}.{}-delete",
            partition_dir_name(name, p),
            t.id.replace('-', "_")
        ));
        node.storage
            .rename(&dir, &to)
            .map_err(|e| Error::io(&dir, e))?;
    }
    node.storage
        .sync_dir(&node.root)
        .map_err(|e| Error::io(&node.root, e))?;
    Ok(())
}

/// CreatePartitions: grows `topic` to `total` partitions (never shrinks); the new ones start empty at
/// leader epoch 0 with the topic's id.
pub(crate) fn create_partitions(node: &Node, topic: &str, total: i32) -> Result<(), Error> {
    let current = node.topic(topic).ok_or_else(|| unknown_topic(topic))?;
    if total <= current.partitions || total > 10_000 {
        return Err(Error::mirror(
            MirrorError::InvalidRequest,
            format!(
                "topic {topic} has {} partitions; {total} is not a larger count (at most 10000)",
                current.partitions
            ),
        ));
    }
    let id = TopicId::parse(&current.id).expect("validated");
    let config = topic_config(&current)?;
    let mut opened = Vec::new();
    {
        let log_dir = lock(&node.log_dir);
        for p in current.partitions..total {
            let (log, _) = log_dir.open_partition_with_clock(
                &partition_dir_name(topic, p),
                config.clone(),
                Arc::clone(&node.clock),
            )?;
            log.set_topic_id(id)?;
            opened.push((p, Arc::new(log)));
        }
    }
    node.update_topic(topic, |t| {
        t.partitions = total;
        t.leader_epochs.resize(total as usize, 0);
        Ok(Some(()))
    })?;
    let mut logs = lock(&node.logs);
    for (p, log) in opened {
        // A mirror partition is read-only from its first moment (UNKNOWN).
        if current.mirror.is_some() {
            log.set_write_mode(WriteMode::ReadOnly);
        }
        logs.insert((topic.to_owned(), p), log);
    }
    Ok(())
}
