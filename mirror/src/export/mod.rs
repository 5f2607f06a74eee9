//! `klog cluster export --kafka OUT`: a klog cluster written as the log directory of a one-node Apache
//! Kafka 4.x KRaft broker (combined mode) that starts on it with no `kafka-storage format`.
//!
//! What OUT holds, in the order it is written (a crash leaves OUT without `meta.properties`, which Kafka
//! refuses to start on, and which a second export names as incomplete):
//! 1. every partition directory, byte for byte ([`files`]: sealed `.log`s hard-linked, the rest
//!    copied), with `partition.metadata` holding klog's topic id; `__consumer_offsets` linked the same way
//!    when the target's `offsets.topic.num.partitions` is klog's, else re-placed by group ([`offsets`]);
//! 2. the log directory's checkpoints: recovery point and log start offset, and the high watermark as
//!    `replication-offset-checkpoint`;
//! 3. `__cluster_metadata-0/<end>-<epoch>.checkpoint`, a KRaft snapshot of the whole image ([`image`]):
//!    feature levels, a TopicRecord per topic with klog's id, a PartitionRecord per partition with this
//!    node as replica, ISR and leader at an epoch no lower than any in the partition's log, the topic
//!    configs, a ProducerIdsRecord above every producer id in the data;
//! 4. `.kafka_cleanshutdown`, then everything synced, then `meta.properties` (version 1, node id,
//!    cluster id, a new directory id) last.
//!
//! The cluster is opened as a writer (its `.lock`, refused while another writer holds it), checked
//! (a mirror partition that has not failed over is refused unless forced), closed cleanly so its files
//! are final, and its lock kept until the export is done.

pub mod files;
pub mod image;
pub mod offsets;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::checkpoint::{write_clean_shutdown, write_offsets, write_partition_metadata};
use klog_log::checkpoint::{OffsetMap, TopicId};
use klog_log::clock::Clock;
use klog_log::coordinator::CONSUMER_OFFSETS_TOPIC;
use klog_log::dir_lock::DirLock;
use klog_log::io::Storage;

use crate::cluster::Cluster;
use crate::error::Error;
use crate::groups::OFFSETS_TOPIC_PARTITIONS;
use crate::node::{partition_dir_name, random_bytes};
use crate::state::MirrorState;

pub use files::Transfer;

/// What an export is asked to do.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// The Kafka log directory to write (missing or empty).
    pub out: PathBuf,
    /// The target broker's `node.id`.
    pub node_id: i32,
    /// The target's cluster id; `None`: the klog cluster's.
    pub cluster_id: Option<String>,
    /// The target's `offsets.topic.num.partitions`.
    pub offsets_partitions: u32,
    /// Export mirror partitions that have not failed over (their state is named in the report).
    pub force: bool,
}

impl ExportOptions {
    /// Options with the CLI's defaults: node 1, klog's cluster id, 50 offsets partitions, no force.
    pub fn new(out: impl Into<PathBuf>) -> Self {
        ExportOptions {
            out: out.into(),
            node_id: 1,
            cluster_id: None,
            offsets_partitions: OFFSETS_TOPIC_PARTITIONS,
            force: false,
        }
    }
}

/// One exported partition (a row of `klog cluster export --json`'s `partitions`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ExportedPartition {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The topic id (base64), in `partition.metadata` and the TopicRecord.
    pub topic_id: String,
    /// The leader epoch written in the PartitionRecord (the broker serves this + 2 after its first start).
    pub leader_epoch: i32,
    /// The highest epoch in the partition's leader-epoch cache (-1: none).
    pub latest_log_epoch: i32,
    /// The log start offset.
    pub log_start_offset: i64,
    /// The log end offset.
    pub log_end_offset: i64,
    /// The high watermark (`replication-offset-checkpoint`).
    pub high_watermark: i64,
    /// The mirror state the partition had (`None`: not a mirror topic).
    pub mirror_state: Option<String>,
    /// Its files' bytes and counts, linked and copied.
    #[serde(flatten)]
    pub transfer: Transfer,
}

/// What an export wrote (`klog cluster export --json`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ExportReport {
    /// OUT.
    pub out: PathBuf,
    /// `meta.properties`' `cluster.id`.
    pub cluster_id: String,
    /// `meta.properties`' `node.id`.
    pub node_id: i32,
    /// `meta.properties`' `directory.id` (also every PartitionRecord's directory).
    pub directory_id: String,
    /// The target's `offsets.topic.num.partitions`.
    pub offsets_partitions: u32,
    /// Whether `__consumer_offsets` was re-placed by group (the target's count differs from klog's).
    pub offsets_replaced: bool,
    /// The KRaft snapshot written.
    pub metadata_snapshot: PathBuf,
    /// The ProducerIdsRecord's next producer id.
    pub next_producer_id: i64,
    /// Topics (with `__consumer_offsets` when it has records), in name order.
    pub topics: Vec<String>,
    /// Every partition exported.
    pub partitions: Vec<ExportedPartition>,
    /// Topic configs changed so a one-replica broker accepts writes (`min.insync.replicas` above 1).
    pub configs_changed: Vec<String>,
    /// Partitions exported by `--force` although not failed over (`topic-p STATE`).
    pub forced: Vec<String>,
    /// Whether `.kafka_cleanshutdown` was written.
    pub clean_shutdown: bool,
    /// The totals over every file written.
    #[serde(flatten)]
    pub transfer: Transfer,
    /// The broker configuration to start Kafka on OUT with (`key=value` lines).
    pub broker_config: Vec<String>,
}

/// A partition to export, gathered while the cluster is open.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) row: ExportedPartition,
    pub(crate) id: TopicId,
    /// The highest producer id in the partition's producer state.
    pub(crate) max_producer_id: Option<i64>,
    /// The active segment's base offset (its files are copied, never linked).
    active_base: i64,
}

/// Exports the cluster in `root` (see the module docs). `on_step` is called after each durable step with
/// its name (the kill test stops the process there).
pub fn export(
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
    root: &Path,
    options: &ExportOptions,
    on_step: &mut dyn FnMut(&str),
) -> Result<ExportReport, Error> {
    check_options(options)?;
    files::refuse_out_inside(root, &options.out)?;
    files::prepare_out(&options.out)?;
    let cluster = Cluster::open(Arc::clone(&storage), Arc::clone(&clock), root)?;
    // Shares the cluster's lock, and keeps it after the cluster is closed until the export is done.
    let lock = DirLock::acquire(storage.as_ref(), root)?;
    let klog_cluster_id = cluster.cluster_id();
    let gathered = gather(&cluster, options);
    let closed = cluster.close();
    let Gathered {
        mut plans,
        forced,
        configs,
        offsets,
    } = gathered?;
    closed?;
    on_step("cluster closed");
    let out = &options.out;
    let mut transfer = Transfer::default();
    for plan in &mut plans {
        let dir = partition_dir_name(&plan.row.topic, plan.row.partition);
        // The producer state is not enough for the ProducerIdsRecord: a failover's barrier clears it
        // and expiry thins it, while the batches (and their ids) stay in the log.
        let in_batches = files::max_producer_id(&root.join(&dir))?;
        plan.max_producer_id = plan.max_producer_id.max(in_batches);
        let t = files::export_partition_dir(&root.join(&dir), &out.join(&dir), plan.active_base)?;
        write_partition_metadata(storage.as_ref(), &out.join(&dir), plan.id)?;
        plan.row.transfer = t;
        transfer.add(t);
        on_step(&dir);
    }
    if let Some((replaced, id)) = &offsets {
        let ends = offsets::write(Arc::clone(&storage), Arc::clone(&clock), out, replaced, *id)?;
        for (q, end) in ends {
            let row = offsets_row(q as i32, *id, 0, 0, end);
            plans.push(Plan {
                row,
                id: *id,
                max_producer_id: None,
                active_base: 0,
            });
        }
        on_step(CONSUMER_OFFSETS_TOPIC);
    }
    write_checkpoints(storage.as_ref(), out, &plans)?;
    on_step("checkpoints");
    let offsets_id = offsets.as_ref().map(|(_, id)| *id).or_else(|| {
        plans
            .iter()
            .find(|p| p.row.topic == CONSUMER_OFFSETS_TOPIC)
            .map(|p| p.id)
    });
    let directory_id = new_directory_id();
    let cluster_id = target_cluster_id(options, &klog_cluster_id);
    let image = image::Image::of(
        &plans,
        &configs,
        options,
        offsets_id.unwrap_or_else(|| TopicId::from_random(random_bytes())),
        directory_id,
    );
    let snapshot = image::write(out, &image, clock.now_ms())?;
    on_step("metadata snapshot");
    write_clean_shutdown(storage.as_ref(), out, -1)?;
    files::sync_tree(out)?;
    on_step("synced");
    files::write_meta_properties(out, options.node_id, &cluster_id, &directory_id.to_string())?;
    on_step(files::META_PROPERTIES);
    drop(lock);
    let mut topics: Vec<String> = plans.iter().map(|p| p.row.topic.clone()).collect();
    topics.dedup();
    Ok(ExportReport {
        out: out.clone(),
        cluster_id,
        node_id: options.node_id,
        directory_id: directory_id.to_string(),
        offsets_partitions: options.offsets_partitions,
        offsets_replaced: offsets.is_some(),
        metadata_snapshot: snapshot,
        next_producer_id: image.next_producer_id,
        topics,
        partitions: plans.into_iter().map(|p| p.row).collect(),
        configs_changed: image.configs_changed.clone(),
        forced,
        clean_shutdown: true,
        transfer,
        broker_config: broker_config(options),
    })
}

fn check_options(options: &ExportOptions) -> Result<(), Error> {
    if options.node_id < 0 {
        return Err(Error::Refused(format!(
            "--node-id {} is negative (Kafka's node.id is 0 or more)",
            options.node_id
        )));
    }
    if !(1..=10_000).contains(&options.offsets_partitions) {
        return Err(Error::Refused(format!(
            "--offsets-partitions {} is not 1 to 10000",
            options.offsets_partitions
        )));
    }
    if let Some(id) = &options.cluster_id {
        if TopicId::parse(id).is_none() {
            return Err(Error::Refused(format!(
                "--cluster-id {id:?} is not a 22-character base64 UUID (kafka-storage random-uuid)"
            )));
        }
    }
    Ok(())
}

/// `--cluster-id`, else klog's when Kafka accepts it, else a new one.
fn target_cluster_id(options: &ExportOptions, klog_id: &str) -> String {
    match &options.cluster_id {
        Some(id) => id.clone(),
        None if TopicId::parse(klog_id).is_some() => klog_id.to_owned(),
        None => TopicId::from_random(random_bytes()).to_string(),
    }
}

/// A directory id Kafka accepts: random, not reserved (the version bits make the high half non-zero),
/// its string not starting with `-`.
fn new_directory_id() -> TopicId {
    loop {
        let id = TopicId::from_random(random_bytes());
        if !id.to_string().starts_with('-') {
            return id;
        }
    }
}

/// What `gather` found: the partitions, the forced ones, each topic's configs, and `__consumer_offsets`
/// re-placed (with its topic id) when the counts differ.
struct Gathered {
    plans: Vec<Plan>,
    forced: Vec<String>,
    configs: BTreeMap<String, BTreeMap<String, String>>,
    offsets: Option<(offsets::Replaced, TopicId)>,
}

/// Every partition's plan, the forced ones, and `__consumer_offsets` re-placed when the counts differ.
fn gather(cluster: &Cluster, options: &ExportOptions) -> Result<Gathered, Error> {
    let states: BTreeMap<(String, i32), Option<MirrorState>> = cluster
        .describe()
        .into_iter()
        .filter(|r| r.mirror.is_some())
        .map(|r| ((r.topic, r.partition), r.state))
        .collect();
    let not_stopped: Vec<String> = states
        .iter()
        .filter(|(_, s)| **s != Some(MirrorState::Stopped))
        .map(|((t, p), s)| format!("{t}-{p} {}", s.unwrap_or(MirrorState::Unknown).name()))
        .collect();
    if !not_stopped.is_empty() && !options.force {
        return Err(Error::Refused(format!(
            "mirror partitions have not failed over: {} (stop the mirror, or export them as they are with --force)",
            not_stopped.join(", ")
        )));
    }
    let meta = cluster.metadata();
    let mut plans = Vec::new();
    let mut configs = BTreeMap::new();
    for (name, t) in &meta.topics {
        let id = TopicId::parse(&t.id).ok_or_else(|| {
            Error::Refused(format!("topic {name} has no valid topic id ({:?})", t.id))
        })?;
        let topic_configs = t
            .effective_configs()
            .into_iter()
            .filter(|(k, _)| !k.starts_with("mirror."))
            .collect();
        configs.insert(name.clone(), topic_configs);
        for p in 0..t.partitions {
            let state = states.get(&(name.clone(), p)).copied().flatten();
            let epoch = t.leader_epochs.get(p as usize).copied().unwrap_or(0);
            plans.push(plan_of(cluster, name, p, id, epoch, state)?);
        }
    }
    let offsets_logs: Vec<_> = (0..OFFSETS_TOPIC_PARTITIONS as i32)
        .filter_map(|p| cluster.log(CONSUMER_OFFSETS_TOPIC, p).map(|l| (p, l)))
        .collect();
    let offsets_id = match offsets_logs.first() {
        Some((_, log)) => log.topic_id()?,
        None => None,
    }
    .unwrap_or_else(|| TopicId::from_random(random_bytes()));
    let replaced = if options.offsets_partitions == OFFSETS_TOPIC_PARTITIONS {
        for (p, _) in &offsets_logs {
            plans.push(plan_of(
                cluster,
                CONSUMER_OFFSETS_TOPIC,
                *p,
                offsets_id,
                0,
                None,
            )?);
        }
        None
    } else {
        Some((
            offsets::replace(&offsets_logs, options.offsets_partitions)?,
            offsets_id,
        ))
    };
    Ok(Gathered {
        plans,
        forced: not_stopped,
        configs,
        offsets: replaced,
    })
}

fn plan_of(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    id: TopicId,
    metadata_epoch: i32,
    state: Option<MirrorState>,
) -> Result<Plan, Error> {
    let log = cluster.log(topic, partition).ok_or_else(|| {
        Error::Refused(format!(
            "partition {topic}-{partition} is not open in the cluster"
        ))
    })?;
    let latest = log.latest_epoch().unwrap_or(-1);
    let producer_max = log.producers().iter().map(|e| e.producer_id()).max();
    let mut row = offsets_row(
        partition,
        id,
        // Kafka's leader must not start below an epoch its log already holds (kraft-bootstrap §4).
        metadata_epoch.max(latest).max(0),
        log.log_start_offset(),
        log.log_end_offset(),
    );
    row.topic = topic.to_owned();
    row.latest_log_epoch = latest;
    row.high_watermark = log.high_watermark();
    row.mirror_state = state.map(|s| s.name().to_owned());
    Ok(Plan {
        row,
        id,
        max_producer_id: producer_max,
        active_base: log.segment_base_offsets().last().copied().unwrap_or(0),
    })
}

fn offsets_row(partition: i32, id: TopicId, epoch: i32, start: i64, end: i64) -> ExportedPartition {
    ExportedPartition {
        topic: CONSUMER_OFFSETS_TOPIC.to_owned(),
        partition,
        topic_id: id.to_string(),
        leader_epoch: epoch,
        latest_log_epoch: -1,
        log_start_offset: start,
        log_end_offset: end,
        high_watermark: end,
        mirror_state: None,
        transfer: Transfer::default(),
    }
}

/// The three offset checkpoints of OUT; the recovery point is the log end (every log was closed
/// cleanly, so everything below it is flushed).
fn write_checkpoints(storage: &dyn Storage, out: &Path, plans: &[Plan]) -> Result<(), Error> {
    let map = |f: fn(&ExportedPartition) -> i64| -> OffsetMap {
        plans
            .iter()
            .map(|p| ((p.row.topic.clone(), p.row.partition), f(&p.row)))
            .collect()
    };
    write_offsets(
        storage,
        &out.join("recovery-point-offset-checkpoint"),
        &map(|r| r.log_end_offset),
    )?;
    write_offsets(
        storage,
        &out.join("log-start-offset-checkpoint"),
        &map(|r| r.log_start_offset),
    )?;
    write_offsets(
        storage,
        &out.join("replication-offset-checkpoint"),
        &map(|r| r.high_watermark),
    )?;
    Ok(())
}

/// The broker configuration the target needs (a one-node combined KRaft broker, static quorum).
fn broker_config(options: &ExportOptions) -> Vec<String> {
    let id = options.node_id;
    vec![
        "process.roles=broker,controller".into(),
        format!("node.id={id}"),
        format!("controller.quorum.voters={id}@localhost:9093"),
        "listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093".into(),
        "advertised.listeners=PLAINTEXT://localhost:9092".into(),
        "controller.listener.names=CONTROLLER".into(),
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT".into(),
        // Kafka resolves a relative log.dirs against its own working directory, not the user's.
        format!(
            "log.dirs={}",
            std::path::absolute(&options.out)
                .unwrap_or_else(|_| options.out.clone())
                .display()
        ),
        format!(
            "offsets.topic.num.partitions={}",
            options.offsets_partitions
        ),
        "offsets.topic.replication.factor=1".into(),
        "transaction.state.log.replication.factor=1".into(),
        "transaction.state.log.min.isr=1".into(),
    ]
}
