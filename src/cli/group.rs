//! `klog group`: consumer-group offsets of a local cluster, kept in `__consumer_offsets` as Kafka's
//! group coordinator keeps them (so a mirror carries them and a Kafka broker adopting the files loads
//! them). klog has no group coordinator: `commit` is a consumer's OffsetCommit, `describe` what
//! `kafka-consumer-groups --describe` shows of the offsets. Output formats are in `docs/cli.md`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Subcommand;
use klog::log::clock::SystemClock;
use klog::log::io::IoBackend;
use klog::mirror::groups::GroupOffsetDescription;
use klog::mirror::Cluster;
use serde_json::json;

#[derive(Debug, Subcommand)]
pub enum GroupCommand {
    /// GROUP commits OFFSET (the next record it will read) for TOPIC-PARTITION.
    Commit {
        root: PathBuf,
        group: String,
        topic: String,
        partition: i32,
        offset: i64,
        #[arg(long)]
        json: bool,
    },
    /// Per group and partition: the committed offset, the partition's log end, the lag.
    Describe {
        root: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: &GroupCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        GroupCommand::Commit {
            root,
            group,
            topic,
            partition,
            offset,
            json,
        } => commit(root, group, topic, *partition, *offset, *json),
        GroupCommand::Describe { root, json } => describe(root, *json),
    }
}

fn commit(
    root: &Path,
    group: &str,
    topic: &str,
    partition: i32,
    offset: i64,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let cluster = Cluster::open_backend(IoBackend::Auto, Arc::new(SystemClock), root)
        .with_context(|| format!("opening cluster {}", root.display()))?;
    let result = cluster.commit_offset(group, topic, partition, offset);
    let closed = cluster.close();
    let committed = match result {
        Ok(c) => c,
        Err(e) => {
            closed?;
            return match e.error_name() {
                Some(name) => {
                    if json {
                        outln!("{}", json!({"error": name, "message": e.message()}));
                    } else {
                        super::print_error(Some(name), e.message());
                    }
                    Ok(ExitCode::from(1))
                }
                None => Err(e.into()),
            };
        }
    };
    closed?;
    if json {
        outln!("{}", serde_json::to_string(&committed)?);
    } else {
        outln!(
            "group {group} committed {topic}-{partition} at offset {offset} (leader epoch {})",
            committed.leader_epoch
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(root: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let rows = super::cluster_open::with_reader(root, |cluster| Ok(cluster.describe_groups()?))?;
    print(&rows, json);
    Ok(ExitCode::SUCCESS)
}

/// The describe table (or its JSON), also printed by `klog demo`.
pub fn print(rows: &[GroupOffsetDescription], json: bool) {
    if json {
        outln!("{}", json!({ "offsets": rows }));
        return;
    }
    outln!(
        "{:<24} {:<24} {:>4} {:>10} {:>10} {:>8}",
        "GROUP",
        "TOPIC",
        "PART",
        "COMMITTED",
        "LOG-END",
        "LAG"
    );
    let opt = |v: Option<i64>| v.map_or("-".to_owned(), |v| v.to_string());
    for r in rows {
        outln!(
            "{:<24} {:<24} {:>4} {:>10} {:>10} {:>8}",
            r.group,
            r.topic,
            r.partition,
            r.committed_offset,
            opt(r.log_end_offset),
            opt(r.lag)
        );
    }
}
