//! `klog topics DIR`: the topics, their partitions and configs, the other configured resources and the
//! finalized features, as a KRaft metadata log (`__cluster_metadata-0`: newest snapshot, then the log)
//! states them. A reader: nothing is written.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use klog::log::kraft::{ConfigResourceType, MetadataLog, TopicImage};
use serde_json::json;

use super::topic_config::{metadata_partition_dir, read_metadata};

#[derive(Debug, Args)]
pub struct TopicsArgs {
    /// A log directory holding `__cluster_metadata-0` (Kafka's `metadata.log.dir`), or that directory.
    dir: PathBuf,
    /// One JSON object (see docs/cli.md).
    #[arg(long)]
    json: bool,
}

pub fn run(args: &TopicsArgs) -> anyhow::Result<ExitCode> {
    let dir = metadata_partition_dir(&args.dir);
    anyhow::ensure!(
        dir.is_dir(),
        "{}: no KRaft metadata log (no __cluster_metadata-0 directory)",
        args.dir.display()
    );
    let log = read_metadata(&dir)?;
    if args.json {
        outln!("{}", to_json(&log));
    } else {
        print_text(&log);
    }
    Ok(ExitCode::SUCCESS)
}

/// Topics sorted by name.
fn topics_by_name(log: &MetadataLog) -> Vec<&TopicImage> {
    let mut topics: Vec<&TopicImage> = log.image.topics.values().collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    topics
}

fn to_json(log: &MetadataLog) -> serde_json::Value {
    let image = &log.image;
    let topics: Vec<serde_json::Value> = topics_by_name(log)
        .into_iter()
        .map(|t| {
            let partitions: Vec<serde_json::Value> = t
                .partitions
                .iter()
                .map(|(p, r)| {
                    json!({"partition": p, "leader": r.leader, "leader_epoch": r.leader_epoch,
                        "partition_epoch": r.partition_epoch, "replicas": r.replicas, "isr": r.isr})
                })
                .collect();
            json!({
                "name": t.name,
                "topic_id": t.topic_id.to_string(),
                "partitions": partitions,
                "configs": image.configs_of(ConfigResourceType::Topic, &t.name),
            })
        })
        .collect();
    let resources: Vec<serde_json::Value> = image
        .configs
        .iter()
        .filter(|(r, _)| r.resource_type != ConfigResourceType::Topic)
        .map(|(r, configs)| {
            json!({"resource_type": r.resource_type.name(), "resource_name": r.name, "configs": configs})
        })
        .collect();
    json!({
        "metadata_log": log.dir.display().to_string(),
        "snapshot": log.snapshot.map(|s| json!({"end_offset": s.end_offset, "epoch": s.epoch})),
        "end_offset": log.end_offset,
        "records": log.records,
        "open_transaction": log.open_transaction,
        "features": image.features,
        "topics": topics,
        "resources": resources,
    })
}

fn joined(ids: &[i32]) -> String {
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

fn pairs(configs: &BTreeMap<String, String>) -> String {
    configs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn print_text(log: &MetadataLog) {
    let image = &log.image;
    let snapshot = log.snapshot.map_or("no snapshot".to_string(), |s| {
        format!("snapshot {}", s.file_name())
    });
    outln!(
        "Metadata log: {} ({snapshot}, {} records to offset {})",
        log.dir.display(),
        log.records,
        log.end_offset
    );
    if let Some(first) = log.open_transaction {
        outln!("Open transaction from offset {first}: its records are not applied");
    }
    let features: Vec<String> = image
        .features
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    outln!("Features: {}", features.join(","));
    // The layout of `kafka-topics.sh --describe`.
    for t in topics_by_name(log) {
        let configs = image.configs_of(ConfigResourceType::Topic, &t.name);
        let replication = t.partitions.values().next().map_or(0, |p| p.replicas.len());
        outln!(
            "Topic: {}\tTopicId: {}\tPartitionCount: {}\tReplicationFactor: {replication}\tConfigs: {}",
            t.name,
            t.topic_id,
            t.partitions.len(),
            pairs(&configs)
        );
        for (p, r) in &t.partitions {
            let leader = if r.leader < 0 {
                "none".to_string()
            } else {
                r.leader.to_string()
            };
            outln!(
                "\tTopic: {}\tPartition: {p}\tLeader: {leader}\tLeaderEpoch: {}\tReplicas: {}\tIsr: {}",
                t.name,
                r.leader_epoch,
                joined(&r.replicas),
                joined(&r.isr)
            );
        }
    }
    for (r, configs) in &image.configs {
        if r.resource_type != ConfigResourceType::Topic {
            let name = if r.name.is_empty() {
                "<default>"
            } else {
                &r.name
            };
            outln!(
                "Configs of {} {name}: {}",
                r.resource_type.name(),
                pairs(configs)
            );
        }
    }
}
