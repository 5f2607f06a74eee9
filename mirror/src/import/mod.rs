//! `klog cluster import`: a stopped Kafka broker's log directory taken over as a new klog cluster.
//!
//! The broker's `__cluster_metadata` (its newest snapshot, then its log) says which topics exist, with
//! their ids, partition counts, leader epochs and topic configs; every partition directory whose name and
//! `partition.metadata` topic id the metadata knows (Kafka's `isStrayKraftReplica` rule) becomes a
//! partition of the cluster, its files placed by [`files`] (sealed segments hard-linked when on the same
//! file system, everything klog may write copied). The group offsets of `__consumer_offsets` come along
//! (`offsets.rs`). Stray directories, `-delete`/`-stray`/`-future` ones and internal topics klog does not
//! keep (`__transaction_state`) are reported and left.
//!
//! The broker must be stopped: its `.lock` (and its metadata directory's) is held for the whole import.
//! The target must be empty, and the cluster's own metadata file (`cluster.json`, what makes a
//! directory a klog cluster) is written last, so an import cut short at any step leaves a directory
//! that klog refuses to open as a cluster and that a new import refuses as not empty. Then the cluster is
//! opened once: a broker that did not shut down cleanly (no `.kafka_cleanshutdown`) is recovered there as
//! klog recovers any unclean log directory, and closed cleanly.

pub mod files;
mod offsets;
mod report;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use klog_log::checkpoint::{
    read_offsets, read_partition_metadata, write_clean_shutdown, write_offsets,
    write_partition_metadata, TopicId, CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT,
};
use klog_log::clock::Clock;
use klog_log::config::LogConfig;
use klog_log::coordinator::CONSUMER_OFFSETS_TOPIC;
use klog_log::dir_lock::DirLock;
use klog_log::io::{
    read_file, write_atomic, IoBackend, IoWorkload, Storage, AUTO_DECISION_FILE, LOCK_FILE,
};
use klog_log::kraft::{
    load_metadata_log, ConfigResourceType, MetadataImage, MetadataLog, TopicImage,
    METADATA_PARTITION_DIR,
};
use klog_log::log_dir::LogDir;
use klog_log::topic_partition::{parse_partition_dir_name, PartitionDirName};

use crate::cluster::Cluster;
use crate::error::Error;
use crate::groups::OFFSETS_TOPIC_PARTITIONS;
use crate::metadata::{
    validate_unapplied_config, ClusterMeta, TopicMeta, METADATA_FILE, UNAPPLIED_TOPIC_CONFIGS,
};
use crate::node::{partition_dir_name, random_bytes};
use files::{sync_dir, PlacedFiles, Placer};
pub use report::{
    GroupOffsetsImport, ImportReport, ImportedPartition, ImportedTopic, MetadataSummary, SkippedDir,
};

/// How an import runs.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The broker's `metadata.log.dir`, when `__cluster_metadata-0` is not in the log directory itself.
    pub metadata_log_dir: Option<PathBuf>,
    /// Copy every file, never hard-link (the broker's directory may be started again afterwards).
    pub copy: bool,
    /// `mirror.state.topic.num.partitions` of the new cluster.
    pub mirror_state_partitions: u32,
    /// `None`: every file through the storage given. `Some(backend)`: once nothing can refuse the
    /// import, the storage `backend` resolves to for `into`'s buffered writes
    /// ([`LogDir::backend_for`]: `Auto` probes and records its decision in `into`), so a refused
    /// import writes nothing there.
    pub io_backend: Option<IoBackend>,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            metadata_log_dir: None,
            copy: false,
            mirror_state_partitions: 3,
            io_backend: None,
        }
    }
}

/// Each imported partition's files, and whether it was created empty.
type Placed = BTreeMap<(String, i32), (PlacedFiles, bool)>;

/// A partition directory the metadata knows, with what to do with it.
struct Planned {
    topic: String,
    partition: i32,
    /// The broker's directory; `None`: the broker had none (created empty).
    dir: Option<String>,
}

/// What the broker's log directory holds, sorted into what is imported and what is not.
struct Survey {
    partitions: Vec<Planned>,
    offsets_partitions: Vec<i32>,
    skipped: Vec<SkippedDir>,
}

/// Imports the stopped broker's log directory `source` into `into` (missing or empty).
pub fn import(
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
    source: &Path,
    into: &Path,
    options: &ImportOptions,
) -> Result<ImportReport, Error> {
    import_with_steps(storage, clock, source, into, options, &mut |_| Ok(()))
}

/// [`import`], calling `step` with each file or directory of `into` once it is durable, in the order
/// written (`cluster.json` last); an error from `step` stops the import there, as a crash would.
pub fn import_with_steps(
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
    source: &Path,
    into: &Path,
    options: &ImportOptions,
    step: &mut dyn FnMut(&Path) -> Result<(), Error>,
) -> Result<ImportReport, Error> {
    let meta_dir = options
        .metadata_log_dir
        .clone()
        .unwrap_or_else(|| source.to_owned());
    for dir in [source, &meta_dir] {
        if let Err(e) = storage.list(dir) {
            return Err(Error::ImportRefused {
                path: dir.to_owned(),
                reason: format!("not a directory that can be listed ({e})"),
            });
        }
    }
    // The broker must be stopped: its lock (Kafka's `.lock`, in every log directory it uses) held to the end.
    let _locks = lock_broker(storage.as_ref(), source, &meta_dir)?;
    let (cluster_id, node_id) = read_meta_properties(storage.as_ref(), source)?;
    refuse_inside_broker(source, &meta_dir, into)?;
    refuse_non_empty(storage.as_ref(), into)?;
    let metadata = read_metadata(storage.as_ref(), &meta_dir)?;
    let survey = survey(storage.as_ref(), source, &metadata.image, node_id)?;
    // Everything that can refuse the import is checked before the first file is written.
    let topics = cluster_topics(&metadata.image, &survey)?;
    let clean_shutdown = matches!(
        read_file(storage.as_ref(), &source.join(CLEAN_SHUTDOWN_FILE)),
        Ok(Some(_))
    );
    let storage = match options.io_backend {
        Some(backend) => LogDir::backend_for(backend, into, IoWorkload::Buffered)?.0,
        None => storage,
    };
    storage
        .create_dir_all(into)
        .map_err(|e| Error::io(into, e))?;
    let rescan_from = if clean_shutdown {
        None
    } else {
        // Kafka reads an unreadable checkpoint as 0 (everything rescanned): copy everything then.
        Some(
            read_offsets(storage.as_ref(), &source.join(RECOVERY_POINT_CHECKPOINT))
                .unwrap_or_default(),
        )
    };
    let mut placer = Placer::new(options.copy);
    let mut placed = BTreeMap::new();
    for p in &survey.partitions {
        let files = place(
            &mut placer,
            storage.as_ref(),
            source,
            into,
            p,
            &metadata.image,
            &rescan_from,
        )?;
        step(&into.join(partition_dir_name(&p.topic, p.partition)))?;
        placed.insert((p.topic.clone(), p.partition), (files, p.dir.is_none()));
    }
    let group_offsets = import_group_offsets(
        &storage,
        &clock,
        (source, into),
        &metadata.image,
        &survey,
        &rescan_from,
        clean_shutdown,
        &mut placer,
        step,
    )?;
    write_cluster(storage.as_ref(), into, &cluster_id, &topics, options, step)?;
    let topics = open_once(storage, clock, into, &topics, &placed)?;
    let mut files = group_offsets.files;
    placed.values().for_each(|(f, _)| files.add(f));
    Ok(ImportReport {
        source: source.to_owned(),
        into: into.to_owned(),
        cluster_id,
        node_id,
        clean_shutdown,
        metadata: MetadataSummary::of(&metadata),
        topics,
        group_offsets,
        skipped: survey.skipped,
        files,
        link_failure: placer.link_failure,
    })
}

/// The broker's `__consumer_offsets`: its partitions placed as they are when it had klog's 50, else
/// every committed offset written again in klog's placement; and the log directory's own files, which
/// name the partitions placed as they are (written before a replacement opens the directory).
#[allow(clippy::too_many_arguments)]
fn import_group_offsets(
    storage: &Arc<dyn Storage>,
    clock: &Arc<dyn Clock>,
    (source, into): (&Path, &Path),
    image: &MetadataImage,
    survey: &Survey,
    rescan_from: &Option<klog_log::checkpoint::OffsetMap>,
    clean_shutdown: bool,
    placer: &mut Placer,
    step: &mut dyn FnMut(&Path) -> Result<(), Error>,
) -> Result<GroupOffsetsImport, Error> {
    let mut g = GroupOffsetsImport {
        broker_partitions: image
            .topic(CONSUMER_OFFSETS_TOPIC)
            .map_or(0, |t| t.partitions.len() as i32),
        placement: "none",
        ..GroupOffsetsImport::default()
    };
    let as_is = g.broker_partitions == OFFSETS_TOPIC_PARTITIONS as i32;
    if as_is && !survey.offsets_partitions.is_empty() {
        g.placement = "as_is";
        for &p in &survey.offsets_partitions {
            let name = partition_dir_name(CONSUMER_OFFSETS_TOPIC, p);
            let rescan = rescan_point(rescan_from, CONSUMER_OFFSETS_TOPIC, p);
            let files = placer.place_partition(&source.join(&name), &into.join(&name), rescan)?;
            g.files.add(&files);
            step(&into.join(&name))?;
        }
    }
    write_root_files(
        storage.as_ref(),
        source,
        into,
        survey,
        as_is,
        clean_shutdown,
        step,
    )?;
    if !as_is && !survey.offsets_partitions.is_empty() {
        let offsets = offsets::read_broker_offsets(storage, source, &survey.offsets_partitions)?;
        let topic_id = image
            .topic(CONSUMER_OFFSETS_TOPIC)
            .map(|t| t.topic_id)
            .unwrap_or_else(|| TopicId::from_random(random_bytes()));
        for p in offsets::write_offsets(storage, clock, into, topic_id, &offsets)? {
            step(&into.join(partition_dir_name(CONSUMER_OFFSETS_TOPIC, p as i32)))?;
        }
        g.placement = "replaced";
        g.offsets = offsets.len();
    }
    Ok(g)
}

fn lock_broker(
    storage: &dyn Storage,
    source: &Path,
    meta_dir: &Path,
) -> Result<Vec<Arc<DirLock>>, Error> {
    let mut locks = vec![DirLock::acquire(storage, source)?];
    if meta_dir != source {
        locks.push(DirLock::acquire(storage, meta_dir)?);
    }
    Ok(locks)
}

/// The broker's `cluster.id` and `node.id` from its `meta.properties`.
fn read_meta_properties(storage: &dyn Storage, source: &Path) -> Result<(String, i32), Error> {
    let path = source.join("meta.properties");
    let refused = |reason: String| Error::ImportRefused {
        path: path.clone(),
        reason,
    };
    let bytes = read_file(storage, &path)
        .map_err(|e| Error::io(&path, e))?
        .ok_or_else(|| {
            refused("missing: not a Kafka log directory (kafka-storage format writes it)".into())
        })?;
    let text = String::from_utf8(bytes).map_err(|_| refused("not UTF-8".into()))?;
    let mut props = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            props.insert(k.trim(), v.trim());
        }
    }
    let cluster_id = props
        .get("cluster.id")
        .filter(|id| TopicId::parse(id).is_some())
        .ok_or_else(|| refused("no cluster.id that is a 22-character base64 UUID".into()))?;
    let node_id = props
        .get("node.id")
        .and_then(|n| n.parse::<i32>().ok())
        .filter(|n| *n >= 0)
        .ok_or_else(|| refused("no node.id (a KRaft broker's meta.properties has one)".into()))?;
    Ok(((*cluster_id).to_owned(), node_id))
}

/// Refuses a target that is one of the broker's log directories or lies inside one (symbolic links
/// resolved): the broker refuses to start on a directory that is not `topic-partition`, and inside a
/// partition directory klog's files would sit among the broker's segments.
fn refuse_inside_broker(source: &Path, meta_dir: &Path, into: &Path) -> Result<(), Error> {
    let into_real = crate::export::files::resolved(into)?;
    for dir in [source, meta_dir] {
        if into_real.starts_with(crate::export::files::resolved(dir)?) {
            return Err(Error::ImportRefused {
                path: into.to_owned(),
                reason: format!(
                    "inside the broker's log dir {}: import into a directory outside it",
                    dir.display()
                ),
            });
        }
    }
    Ok(())
}

/// `into` must be missing or empty; the files a klog writer puts down at its open before writing
/// anything (the `.lock`, `io_backend=auto`'s recorded decision) hold no data and do not count.
fn refuse_non_empty(storage: &dyn Storage, into: &Path) -> Result<(), Error> {
    let data = |names: Vec<String>| -> Vec<String> {
        names
            .into_iter()
            .filter(|n| n != LOCK_FILE && n != AUTO_DECISION_FILE)
            .collect()
    };
    match storage.list(into).map(data) {
        Ok(names) if names.is_empty() => Ok(()),
        Ok(names) => Err(Error::ImportRefused {
            path: into.to_owned(),
            reason: format!(
                "not empty ({} entries, {}): an import makes a new cluster in an empty directory",
                names.len(),
                names.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
            ),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(into, e)),
    }
}

fn read_metadata(storage: &dyn Storage, meta_dir: &Path) -> Result<MetadataLog, Error> {
    let dir = meta_dir.join(METADATA_PARTITION_DIR);
    if storage.list(&dir).is_err() {
        return Err(Error::ImportRefused {
            path: dir,
            reason:
                "no metadata log: not a KRaft broker's log directory, or its metadata.log.dir is \
                     elsewhere (give it with --metadata-log-dir)"
                    .into(),
        });
    }
    Ok(load_metadata_log(storage, &dir)?)
}

/// Sorts the broker's directories: partitions the metadata knows (by name and topic id), the
/// `__consumer_offsets` partitions, and what is skipped; then the metadata's partitions with no directory.
fn survey(
    storage: &dyn Storage,
    source: &Path,
    image: &MetadataImage,
    node_id: i32,
) -> Result<Survey, Error> {
    let mut s = Survey {
        partitions: Vec::new(),
        offsets_partitions: Vec::new(),
        skipped: Vec::new(),
    };
    let mut names = storage.list(source).map_err(|e| Error::io(source, e))?;
    names.sort();
    for name in names {
        if storage.list(&source.join(&name)).is_err() || name == METADATA_PARTITION_DIR {
            continue; // a file (meta.properties, checkpoints, .lock) or the metadata log
        }
        let skip = |reason, message: String| SkippedDir {
            dir: name.clone(),
            reason,
            message,
        };
        let (topic, partition) = match parse_partition_dir_name(&name) {
            Ok(PartitionDirName::Partition { topic, partition }) => (topic, partition),
            Ok(PartitionDirName::Marked { suffix }) => {
                s.skipped
                    .push(skip("marked", format!("a {suffix} directory")));
                continue;
            }
            Err(why) => {
                s.skipped.push(skip("not_a_partition", why));
                continue;
            }
        };
        match classify(
            storage,
            &source.join(&name),
            image,
            &topic,
            partition,
            node_id,
        )? {
            Ok(()) if topic == CONSUMER_OFFSETS_TOPIC => s.offsets_partitions.push(partition),
            Ok(()) if topic.starts_with("__") => s.skipped.push(skip(
                "internal",
                format!("{topic} is a Kafka internal topic klog does not keep"),
            )),
            Ok(()) => s.partitions.push(Planned {
                topic,
                partition,
                dir: Some(name.clone()),
            }),
            Err(why) => s.skipped.push(skip("stray", why)),
        }
    }
    add_missing_partitions(image, node_id, &mut s)?;
    Ok(s)
}

/// Whether directory `dir` is partition `topic`-`partition` of the metadata: Kafka's stray rule (the topic
/// id of its `partition.metadata` live in the image, this node among the partition's replicas).
fn classify(
    storage: &dyn Storage,
    dir: &Path,
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    node_id: i32,
) -> Result<Result<(), String>, Error> {
    let Some(t) = image.topic(topic) else {
        return Ok(Err(format!("the metadata has no topic {topic}")));
    };
    let Some(p) = t.partitions.get(&partition) else {
        return Ok(Err(format!(
            "topic {topic} has no partition {partition} in the metadata"
        )));
    };
    match read_partition_metadata(storage, dir)? {
        None => return Ok(Err("no partition.metadata (no topic id)".into())),
        Some(id) if id != t.topic_id => {
            return Ok(Err(format!(
                "topic id {id} is not the metadata's {} for {topic}",
                t.topic_id
            )))
        }
        Some(_) => {}
    }
    if !p.replicas.contains(&node_id) {
        return Ok(Err(format!(
            "the partition's replicas {:?} do not include this broker ({node_id})",
            p.replicas
        )));
    }
    Ok(Ok(()))
}

/// The metadata's partitions of imported topics that the broker has no directory for: created empty
/// (Kafka creates them at leadership). A partition hosted only by other brokers is refused: the import
/// takes one broker's data, and would silently lose the rest.
fn add_missing_partitions(
    image: &MetadataImage,
    node_id: i32,
    s: &mut Survey,
) -> Result<(), Error> {
    let topics: Vec<&TopicImage> = image
        .topics
        .values()
        .filter(|t| !t.name.starts_with("__"))
        .collect();
    for t in topics {
        for (&partition, p) in &t.partitions {
            let known = s
                .partitions
                .iter()
                .any(|x| x.topic == t.name && x.partition == partition);
            if known
                || s.skipped
                    .iter()
                    .any(|d| d.dir == partition_dir_name(&t.name, partition))
            {
                continue;
            }
            if !p.replicas.contains(&node_id) {
                return Err(Error::ImportRefused {
                    path: PathBuf::from(partition_dir_name(&t.name, partition)),
                    reason: format!(
                        "its replicas {:?} do not include broker {node_id}: an import takes a \
                         single broker's log directory holding every partition",
                        p.replicas
                    ),
                });
            }
            s.partitions.push(Planned {
                topic: t.name.clone(),
                partition,
                dir: None,
            });
        }
    }
    s.partitions
        .sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    Ok(())
}

fn rescan_point(
    rescan_from: &Option<klog_log::checkpoint::OffsetMap>,
    topic: &str,
    partition: i32,
) -> Option<i64> {
    rescan_from
        .as_ref()
        .map(|m| m.get(&(topic.to_owned(), partition)).copied().unwrap_or(0))
}

fn place(
    placer: &mut Placer,
    storage: &dyn Storage,
    source: &Path,
    into: &Path,
    p: &Planned,
    image: &MetadataImage,
    rescan_from: &Option<klog_log::checkpoint::OffsetMap>,
) -> Result<PlacedFiles, Error> {
    let dst = into.join(partition_dir_name(&p.topic, p.partition));
    match &p.dir {
        Some(name) => placer.place_partition(
            &source.join(name),
            &dst,
            rescan_point(rescan_from, &p.topic, p.partition),
        ),
        None => {
            let id = image
                .topic(&p.topic)
                .map(|t| t.topic_id)
                .expect("a planned partition's topic is in the image");
            storage
                .create_dir_all(&dst)
                .map_err(|e| Error::io(&dst, e))?;
            write_partition_metadata(storage, &dst, id)?;
            sync_dir(&dst)?;
            Ok(PlacedFiles::default())
        }
    }
}

/// The log directory's own files: the three offset checkpoints with the imported partitions' entries,
/// `.kafka_cleanshutdown` when the broker shut down cleanly, `meta.properties` comes with the cluster.
fn write_root_files(
    storage: &dyn Storage,
    source: &Path,
    into: &Path,
    survey: &Survey,
    offsets_as_is: bool,
    clean_shutdown: bool,
    step: &mut dyn FnMut(&Path) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut kept: Vec<(String, i32)> = survey
        .partitions
        .iter()
        .filter(|p| p.dir.is_some())
        .map(|p| (p.topic.clone(), p.partition))
        .collect();
    if offsets_as_is {
        kept.extend(
            survey
                .offsets_partitions
                .iter()
                .map(|p| (CONSUMER_OFFSETS_TOPIC.to_owned(), *p)),
        );
    }
    for file in [
        RECOVERY_POINT_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
        REPLICATION_OFFSET_CHECKPOINT,
    ] {
        // A checkpoint that does not parse: the entries are left out, as Kafka reads such a file (0).
        let map = read_offsets(storage, &source.join(file)).unwrap_or_default();
        let map = map.into_iter().filter(|(k, _)| kept.contains(k)).collect();
        write_offsets(storage, &into.join(file), &map)?;
        step(&into.join(file))?;
    }
    if clean_shutdown {
        write_clean_shutdown(storage, into, 0)?;
        step(&into.join(CLEAN_SHUTDOWN_FILE))?;
    }
    Ok(())
}

/// The cluster's topics: ids, partition counts, leader epochs, topic configs (those klog refuses left
/// out, each with why).
struct ClusterTopics(BTreeMap<String, TopicMeta>, BTreeMap<String, Vec<String>>);

fn cluster_topics(image: &MetadataImage, survey: &Survey) -> Result<ClusterTopics, Error> {
    let mut topics = BTreeMap::new();
    let mut left_out = BTreeMap::new();
    let names: std::collections::BTreeSet<&str> =
        survey.partitions.iter().map(|p| p.topic.as_str()).collect();
    for name in names {
        let t = image.topic(name).expect("a planned topic is in the image");
        let count = t.partitions.len() as i32;
        if t.partitions.keys().copied().ne(0..count) {
            return Err(Error::ImportRefused {
                path: PathBuf::from(name),
                reason: format!(
                    "the metadata's partitions {:?} are not 0 to {}",
                    t.partitions.keys().collect::<Vec<_>>(),
                    count - 1
                ),
            });
        }
        let (configs, refused) = kept_configs(image, name);
        topics.insert(
            name.to_owned(),
            TopicMeta {
                id: t.topic_id.to_string(),
                partitions: count,
                leader_epochs: t
                    .partitions
                    .values()
                    .map(|p| p.leader_epoch.max(0))
                    .collect(),
                configs,
                source_configs: BTreeMap::new(),
                mirror: None,
            },
        );
        left_out.insert(name.to_owned(), refused);
    }
    Ok(ClusterTopics(topics, left_out))
}

/// A topic's configs set in the metadata that klog takes; the others, each with why.
fn kept_configs(image: &MetadataImage, topic: &str) -> (BTreeMap<String, String>, Vec<String>) {
    let mut kept = BTreeMap::new();
    let mut refused = Vec::new();
    for (k, v) in image.configs_of(ConfigResourceType::Topic, topic) {
        let why = if UNAPPLIED_TOPIC_CONFIGS.contains(&k.as_str()) {
            validate_unapplied_config(&k, &v).err()
        } else {
            LogConfig::default()
                .set(&k, &v)
                .err()
                .map(|e| e.to_string())
        };
        match why {
            None => {
                kept.insert(k, v);
            }
            Some(why) => refused.push(format!("{k}={v}: {why}")),
        }
    }
    (kept, refused)
}

/// `meta.properties`, then `cluster.json`: the file that makes `into` a cluster, last.
fn write_cluster(
    storage: &dyn Storage,
    into: &Path,
    cluster_id: &str,
    topics: &ClusterTopics,
    options: &ImportOptions,
    step: &mut dyn FnMut(&Path) -> Result<(), Error>,
) -> Result<(), Error> {
    let properties = into.join("meta.properties");
    let text = format!("version=1\ncluster.id={cluster_id}\nnode.id=1\n");
    write_atomic(storage, &properties, text.as_bytes()).map_err(|e| Error::io(&properties, e))?;
    step(&properties)?;
    let meta = ClusterMeta {
        version: ClusterMeta::VERSION,
        cluster_id: cluster_id.to_owned(),
        mirror_state_partitions: options.mirror_state_partitions,
        topics: topics.0.clone(),
        mirrors: BTreeMap::new(),
        acls: Vec::new(),
    };
    let path = into.join(METADATA_FILE);
    write_atomic(storage, &path, &meta.encode()).map_err(|e| Error::io(&path, e))?;
    step(&path)
}

/// Opens the new cluster once (recovering an unclean broker's partitions), raises a leader epoch below
/// the log's newest to it, and closes it cleanly; returns each topic's partitions as opened.
fn open_once(
    storage: Arc<dyn Storage>,
    clock: Arc<dyn Clock>,
    into: &Path,
    topics: &ClusterTopics,
    placed: &Placed,
) -> Result<Vec<ImportedTopic>, Error> {
    let cluster = Cluster::open(storage, clock, into)?;
    let result = describe_opened(&cluster, topics, placed);
    let closed = cluster.close();
    let out = result?;
    closed?;
    Ok(out)
}

fn describe_opened(
    cluster: &Cluster,
    topics: &ClusterTopics,
    placed: &Placed,
) -> Result<Vec<ImportedTopic>, Error> {
    let truncated: BTreeMap<&str, u64> = cluster
        .open_reports()
        .iter()
        .map(|r| (r.partition.as_str(), r.bytes_truncated))
        .collect();
    let mut out = Vec::new();
    for (name, meta) in &topics.0 {
        let mut partitions = Vec::new();
        for p in 0..meta.partitions {
            let log = cluster
                .log(name, p)
                .expect("an imported partition is open in the cluster");
            // Kafka's epoch is at least its log's newest; a log above it would get appends below its own.
            let newest = log.leader_epochs().last().map_or(0, |e| e.epoch);
            let mut leader_epoch = cluster.leader_epoch(name, p).unwrap_or(0);
            if leader_epoch < newest {
                leader_epoch = cluster.bump_leader_epoch(name, p, newest)?;
            }
            let (files, created_empty) =
                placed.get(&(name.clone(), p)).copied().unwrap_or_default();
            partitions.push(ImportedPartition {
                partition: p,
                leader_epoch,
                log_start_offset: log.log_start_offset(),
                log_end_offset: log.log_end_offset(),
                bytes_truncated: truncated
                    .get(partition_dir_name(name, p).as_str())
                    .copied()
                    .unwrap_or(0),
                created_empty,
                files,
            });
        }
        out.push(ImportedTopic {
            topic: name.clone(),
            topic_id: meta.id.clone(),
            partitions,
            configs: meta.configs.clone(),
            configs_left_out: topics.1.get(name).cloned().unwrap_or_default(),
        });
    }
    Ok(out)
}
