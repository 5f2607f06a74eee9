//! The local node: one root directory that is a Kafka log directory (partition directories,
//! checkpoints, `__mirror_state-<i>`), plus `cluster.json` (the controller's metadata) and
//! `meta.properties`. It is a single-node broker: every partition is led here, so a partition's high
//! watermark is its log end offset.
//!
//! A [`Node`] owns the state every other part works on: the metadata, the open partition logs, the
//! `__mirror_state` store and the directory's `.lock`. Topic administration ([`crate::topics`]), mirror
//! administration ([`crate::admin`]), serving as a source ([`crate::serving`]) and the mirror manager
//! ([`crate::manager`]) are functions over it; [`crate::Cluster`] puts them together.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use klog_log::checkpoint::TopicId;
use klog_log::clock::Clock;
use klog_log::config::LogConfig;
use klog_log::coordinator::CONSUMER_OFFSETS_TOPIC;
use klog_log::dir_lock::DirLock;
use klog_log::io::{read_file, write_atomic, Storage};
use klog_log::log_dir::{partition_dir_names, LogDir};
use klog_log::partition_log::{LogAppendInfo, PartitionLog, WriteMode};
use klog_log::validator::AppendOrigin;
use klog_recovery::loader::{LogLoader, RecoveryReport};

use crate::error::{Error, MirrorError};
use crate::metadata::{
    validate_unapplied_config, ClusterMeta, MirrorMeta, StopMode, TopicMeta, METADATA_FILE,
    UNAPPLIED_TOPIC_CONFIGS,
};
use crate::records::MirrorKey;
use crate::source::SourceError;
use crate::state::MirrorState;
use crate::store::{MirrorStateStore, MIRROR_STATE_TOPIC};

/// How a cluster is created.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Kafka's 22-character base64 cluster id; random when absent.
    pub cluster_id: Option<String>,
    /// `mirror.state.topic.num.partitions` (fixed at creation).
    pub mirror_state_partitions: u32,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            cluster_id: None,
            mirror_state_partitions: 3,
        }
    }
}

/// The mirroring knobs (KIP-1279 §6.3 names in the docs).
/// A local single-node broker's state (see the module docs).
pub struct Node {
    pub(crate) root: PathBuf,
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) meta: Mutex<ClusterMeta>,
    pub(crate) log_dir: Mutex<LogDir>,
    pub(crate) logs: Mutex<BTreeMap<(String, i32), Arc<PartitionLog>>>,
    pub(crate) store: Mutex<MirrorStateStore>,
    closed: AtomicBool,
    open_reports: Vec<RecoveryReport>,
    /// Kafka's `.lock` in the log directory, held while the node is open (real file systems only).
    dir_lock: Mutex<Option<Arc<DirLock>>>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("root", &self.root).finish()
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// 16 random bytes from the OS.
pub fn random_bytes() -> [u8; 16] {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random source works");
    b
}

/// A partition's directory name, `<topic>-<partition>`.
pub fn partition_dir_name(topic: &str, partition: i32) -> String {
    format!("{topic}-{partition}")
}

impl Node {
    /// Whether `root` holds a cluster (a `cluster.json`).
    pub fn exists(storage: &dyn Storage, root: &Path) -> bool {
        matches!(read_file(storage, &root.join(METADATA_FILE)), Ok(Some(_)))
    }

    /// Creates a cluster in `root` (which must not hold one) and opens it.
    pub fn init(
        storage: Arc<dyn Storage>,
        clock: Arc<dyn Clock>,
        root: &Path,
        options: ClusterOptions,
    ) -> Result<Node, Error> {
        let path = root.join(METADATA_FILE);
        if Node::exists(storage.as_ref(), root) {
            return Err(Error::Refused(format!(
                "{} already holds a cluster",
                root.display()
            )));
        }
        // Partition numbers are i32 (a larger count wrapped to none, and the coordinator hash divided by 0).
        if !(1..=10_000).contains(&options.mirror_state_partitions) {
            return Err(Error::Refused(
                "mirror.state.topic.num.partitions must be 1 to 10000".into(),
            ));
        }
        let cluster_id = match options.cluster_id {
            Some(id) => {
                if TopicId::parse(&id).is_none() {
                    return Err(Error::Refused(format!(
                        "cluster id {id:?} is not a 22-character base64 UUID (kafka-storage random-uuid)"
                    )));
                }
                id
            }
            None => TopicId::from_random(random_bytes()).to_string(),
        };
        storage
            .create_dir_all(root)
            .map_err(|e| Error::io(root, e))?;
        let properties = format!("version=1\ncluster.id={cluster_id}\nnode.id=1\n");
        write_atomic(
            storage.as_ref(),
            &root.join("meta.properties"),
            properties.as_bytes(),
        )
        .map_err(|e| Error::io(&root.join("meta.properties"), e))?;
        let meta = ClusterMeta {
            version: ClusterMeta::VERSION,
            cluster_id,
            mirror_state_partitions: options.mirror_state_partitions,
            topics: BTreeMap::new(),
            mirrors: BTreeMap::new(),
            acls: Vec::new(),
        };
        write_atomic(storage.as_ref(), &path, &meta.encode()).map_err(|e| Error::io(&path, e))?;
        Node::open(storage, clock, root)
    }

    /// Opens the cluster in `root`: every partition (recovering them as needed), then `__mirror_state`
    /// replayed. Mirror partitions re-enter their recorded state on the next `tick`.
    pub fn open(
        storage: Arc<dyn Storage>,
        clock: Arc<dyn Clock>,
        root: &Path,
    ) -> Result<Node, Error> {
        let path = root.join(METADATA_FILE);
        let bytes = read_file(storage.as_ref(), &path)
            .map_err(|e| Error::io(&path, e))?
            .ok_or_else(|| {
                Error::Refused(format!(
                    "{} is not a klog cluster (no {METADATA_FILE}; create one with `klog cluster init`)",
                    root.display()
                ))
            })?;
        let meta = ClusterMeta::decode(&bytes, &path)?;
        // A writer holds the log directory's `.lock` for its life; a read-only open (through a
        // `ReadOnlyStorage`: `klog mirror describe`) takes none and changes nothing on disk.
        let dir_lock = if storage.is_read_only() {
            None
        } else {
            Some(DirLock::acquire(storage.as_ref(), root)?)
        };
        let mut log_dir = LogDir::open(Arc::clone(&storage), root)?;
        let mut logs = BTreeMap::new();
        let mut state_logs = Vec::new();
        let mut reports = Vec::new();
        // `__mirror_state` is never trimmed by time or size (compacted only): the cleaner removes its
        // superseded records.
        let internal = LogLoader::new(Arc::clone(&storage), mirror_state_config()?)
            .with_clock(Arc::clone(&clock));
        let ensure_dir = |name: &str| {
            let dir = root.join(name);
            storage.create_dir_all(&dir).map_err(|e| Error::io(&dir, e))
        };
        for p in 0..meta.mirror_state_partitions as i32 {
            let name = partition_dir_name(MIRROR_STATE_TOPIC, p);
            ensure_dir(&name)?;
            let (log, report) = internal.load_partition(&log_dir, &name, false)?;
            reports.push(report);
            let log = Arc::new(log);
            log.update_high_watermark(log.log_end_offset());
            state_logs.push(Arc::clone(&log));
            logs.insert((MIRROR_STATE_TOPIC.to_owned(), p), log);
        }
        for (name, t) in &meta.topics {
            let loader = LogLoader::new(Arc::clone(&storage), topic_config(t)?)
                .with_clock(Arc::clone(&clock));
            for p in 0..t.partitions {
                let dir_name = partition_dir_name(name, p);
                ensure_dir(&dir_name)?;
                let (log, report) = loader.load_partition(&log_dir, &dir_name, false)?;
                reports.push(report);
                log.update_high_watermark(log.log_end_offset());
                logs.insert((name.clone(), p), Arc::new(log));
            }
        }
        // `__consumer_offsets` partitions exist once a group committed there (`crate::groups`).
        let offsets = LogLoader::new(Arc::clone(&storage), consumer_offsets_config()?)
            .with_clock(Arc::clone(&clock));
        for (p, name) in consumer_offsets_dirs(storage.as_ref(), root)? {
            let (log, report) = offsets.load_partition(&log_dir, &name, false)?;
            reports.push(report);
            log.update_high_watermark(log.log_end_offset());
            logs.insert((CONSUMER_OFFSETS_TOPIC.to_owned(), p), Arc::new(log));
        }
        if !log_dir.had_clean_shutdown() && !storage.is_read_only() {
            let known: Vec<String> = logs
                .keys()
                .map(|(t, p)| partition_dir_name(t, *p))
                .collect();
            recover_unknown_partitions(&internal, &mut log_dir, &known)?;
        }
        let clock_for_store = Arc::clone(&clock);
        let store = MirrorStateStore::open(state_logs, Arc::new(move || clock_for_store.now_ms()))?;
        let node = Node {
            root: root.to_owned(),
            storage,
            clock,
            meta: Mutex::new(meta),
            log_dir: Mutex::new(log_dir),
            logs: Mutex::new(logs),
            store: Mutex::new(store),
            closed: AtomicBool::new(false),
            open_reports: reports,
            dir_lock: Mutex::new(dir_lock),
        };
        node.refresh_write_modes();
        Ok(node)
    }

    /// What opening did to each partition (recovery after a crash: cut tails, rebuilt indexes, producer
    /// state replayed).
    pub fn open_reports(&self) -> &[RecoveryReport] {
        &self.open_reports
    }

    /// Whether `__mirror_state` writes are synced (off only in benchmarks of what the syncs cost).
    pub(crate) fn set_sync(&self, sync: bool) {
        lock(&self.store).set_sync(sync);
    }

    /// Clean shutdown: every partition flushed and closed, checkpoints written, and the clean-shutdown
    /// marker put down by the log directory's rule ([`LogDir::shut_down`]): only if every partition
    /// directory of the root closed cleanly here or was untouched since a clean shutdown. A partition
    /// that failed to close is the error, and no marker is written.
    pub fn close(&self) -> Result<(), Error> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let logs = lock(&self.logs);
        let logs: Vec<&PartitionLog> = logs.values().map(|l| l.as_ref()).collect();
        let mut log_dir = lock(&self.log_dir);
        let closed = log_dir.close_logs(&logs)?;
        if let Some(e) = closed.into_iter().find_map(Result::err) {
            return Err(e.into());
        }
        log_dir.shut_down()?;
        lock(&self.dir_lock).take();
        Ok(())
    }

    /// Writes the log-directory checkpoints without closing (after a run, so a crash recovers less).
    pub fn checkpoint(&self) -> Result<(), Error> {
        let logs = lock(&self.logs);
        let logs: Vec<&PartitionLog> = logs.values().map(|l| l.as_ref()).collect();
        let flushed = PartitionLog::flush_each(&logs);
        self.checkpoint_those(&logs, flushed)
    }

    /// Checkpoints, in one write of each file, the logs whose flush or close succeeded; then the first
    /// failure, if any (a clean shutdown is then not vouched for).
    fn checkpoint_those(
        &self,
        logs: &[&PartitionLog],
        results: Vec<Result<(), klog_log::Error>>,
    ) -> Result<(), Error> {
        let mut good = Vec::with_capacity(logs.len());
        let mut first_error = None;
        for (log, result) in logs.iter().zip(results) {
            match result {
                Ok(()) => good.push(*log),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        lock(&self.log_dir).checkpoint_many(&good)?;
        match first_error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// The root (the log directory).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The storage its files go through.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The clock its logs use.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Kafka's cluster id.
    pub fn cluster_id(&self) -> String {
        lock(&self.meta).cluster_id.clone()
    }

    /// A copy of the controller metadata.
    pub fn metadata(&self) -> ClusterMeta {
        lock(&self.meta).clone()
    }

    pub(crate) fn serving(&self) -> Result<(), SourceError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(SourceError::Unavailable(format!(
                "{} is shut down",
                self.root.display()
            )));
        }
        Ok(())
    }

    /// Persists `meta` (atomically: temp file, sync, rename, directory sync) and then adopts it.
    pub(crate) fn save_meta(
        &self,
        guard: &mut MutexGuard<'_, ClusterMeta>,
        meta: ClusterMeta,
    ) -> Result<(), Error> {
        let path = self.root.join(METADATA_FILE);
        write_atomic(self.storage.as_ref(), &path, &meta.encode())
            .map_err(|e| Error::io(&path, e))?;
        **guard = meta;
        Ok(())
    }

    /// The metadata of topic `name`.
    pub fn topic(&self, name: &str) -> Option<TopicMeta> {
        lock(&self.meta).topics.get(name).cloned()
    }

    /// The open log of a partition.
    pub fn log(&self, topic: &str, partition: i32) -> Option<Arc<PartitionLog>> {
        lock(&self.logs)
            .get(&(topic.to_owned(), partition))
            .cloned()
    }

    fn log_or_unknown(&self, topic: &str, partition: i32) -> Result<Arc<PartitionLog>, Error> {
        self.log(topic, partition).ok_or_else(|| {
            Error::mirror(
                MirrorError::UnknownTopicOrPartition,
                format!("{topic}-{partition} does not exist"),
            )
        })
    }

    /// A partition's current leader epoch.
    pub fn leader_epoch(&self, topic: &str, partition: i32) -> Option<i32> {
        lock(&self.meta)
            .topics
            .get(topic)
            .and_then(|t| t.leader_epochs.get(partition as usize).copied())
    }

    /// A leader election: the partition's leader epoch goes up by one (and at least to `min`).
    pub fn bump_leader_epoch(&self, topic: &str, partition: i32, min: i32) -> Result<i32, Error> {
        self.update_topic(topic, |t| {
            let e = t.leader_epochs.get_mut(partition as usize).ok_or_else(|| {
                Error::mirror(
                    MirrorError::UnknownTopicOrPartition,
                    format!("{topic}-{partition} does not exist"),
                )
            })?;
            *e = (*e + 1).max(min);
            Ok(Some(*e))
        })
        .map(|e| e.expect("always changed"))
    }

    /// Leader elections of many partitions at once (a failover): each `(topic, partition, min)` epoch
    /// goes up by one and at least to `min`, all in one metadata write (one file sync, not one per
    /// partition). Returns the new epochs in order; an unknown partition refuses the whole change.
    pub fn bump_leader_epochs(&self, bumps: &[(&str, i32, i32)]) -> Result<Vec<i32>, Error> {
        if bumps.is_empty() {
            return Ok(Vec::new());
        }
        let mut guard = lock(&self.meta);
        let mut meta = guard.clone();
        let mut epochs = Vec::with_capacity(bumps.len());
        for &(topic, partition, min) in bumps {
            let e = meta
                .topics
                .get_mut(topic)
                .ok_or_else(|| unknown_topic(topic))?
                .leader_epochs
                .get_mut(partition as usize)
                .ok_or_else(|| {
                    Error::mirror(
                        MirrorError::UnknownTopicOrPartition,
                        format!("{topic}-{partition} does not exist"),
                    )
                })?;
            *e = (*e + 1).max(min);
            epochs.push(*e);
        }
        self.save_meta(&mut guard, meta)?;
        Ok(epochs)
    }

    /// Changes one topic's metadata and persists it. `change` returns `None` for "nothing changed"
    /// (nothing is written then).
    pub(crate) fn update_topic<T>(
        &self,
        topic: &str,
        change: impl FnOnce(&mut TopicMeta) -> Result<Option<T>, Error>,
    ) -> Result<Option<T>, Error> {
        let mut guard = lock(&self.meta);
        let mut meta = guard.clone();
        let t = meta
            .topics
            .get_mut(topic)
            .ok_or_else(|| unknown_topic(topic))?;
        let changed = change(t)?;
        if changed.is_some() {
            self.save_meta(&mut guard, meta)?;
        }
        Ok(changed)
    }

    /// A client's produce: a leader append at the partition's leader epoch. A mirror partition refuses it
    /// with READ_ONLY_TOPIC unless STOPPED.
    pub fn produce(
        &self,
        topic: &str,
        partition: i32,
        batches: &mut [u8],
    ) -> Result<LogAppendInfo, Error> {
        self.append_with_origin(topic, partition, batches, AppendOrigin::Client)
    }

    /// A transaction coordinator's append (COMMIT/ABORT markers). Also refused on a read-only partition.
    pub fn append_markers(
        &self,
        topic: &str,
        partition: i32,
        batches: &mut [u8],
    ) -> Result<LogAppendInfo, Error> {
        self.append_with_origin(topic, partition, batches, AppendOrigin::Coordinator)
    }

    fn append_with_origin(
        &self,
        topic: &str,
        partition: i32,
        batches: &mut [u8],
        origin: AppendOrigin,
    ) -> Result<LogAppendInfo, Error> {
        let log = self.log_or_unknown(topic, partition)?;
        let epoch = self.leader_epoch(topic, partition).unwrap_or(0);
        let info = log.append_as_leader_with_origin(batches, epoch, origin)?;
        log.update_high_watermark(log.log_end_offset());
        Ok(info)
    }

    /// Sets each partition's write mode from its mirror state: ordinary topics and STOPPED mirror
    /// partitions are writable, STOPPING takes only the barrier (and, for a mirror whose stop aborts,
    /// the ABORT markers of open transactions), anything else is read-only.
    pub(crate) fn refresh_write_modes(&self) {
        let meta = lock(&self.meta);
        let logs = lock(&self.logs);
        let store = lock(&self.store);
        for (name, t) in &meta.topics {
            let id = TopicId::parse(&t.id).expect("validated at load");
            for p in 0..t.partitions {
                let Some(log) = logs.get(&(name.clone(), p)) else {
                    continue;
                };
                let mode = match &t.mirror {
                    None => WriteMode::Writable,
                    Some(m) => {
                        let key = MirrorKey {
                            mirror: m.name.clone(),
                            topic_id: id,
                            partition: p,
                        };
                        match store.state(&key).map(|s| s.value.state) {
                            Some(MirrorState::Stopped) => WriteMode::Writable,
                            Some(MirrorState::Stopping) => stopping_write_mode(&meta, &m.name),
                            _ => WriteMode::ReadOnly,
                        }
                    }
                };
                log.set_write_mode(mode);
            }
        }
    }

    /// The mirrors, by name.
    pub fn mirrors(&self) -> BTreeMap<String, MirrorMeta> {
        lock(&self.meta).mirrors.clone()
    }

    /// The write mode of a STOPPING partition of `mirror` ([`stopping_write_mode`]).
    pub(crate) fn stopping_write_mode(&self, mirror: &str) -> WriteMode {
        stopping_write_mode(&lock(&self.meta), mirror)
    }
}

/// What a STOPPING partition of `mirror` admits: the barrier, and for a mirror whose stop aborts
/// ([`StopMode::Abort`]) the ABORT markers of its open transactions too.
fn stopping_write_mode(meta: &ClusterMeta, mirror: &str) -> WriteMode {
    match meta.mirrors.get(mirror).map(|m| m.stop_mode) {
        Some(StopMode::Abort) => WriteMode::AbortsAndBarrier,
        Some(StopMode::Truncate) | None => WriteMode::BarrierOnly,
    }
}

/// Kafka loads every partition directory of its log directory at startup; after an unclean shutdown the
/// node recovers (and closes at once) those its metadata does not name (a directory that held partitions
/// before `cluster init`, a topic's leftovers), so the marker its close writes is true for them too. One
/// that fails to load is logged and withholds the marker; the cluster opens without it.
fn recover_unknown_partitions(
    loader: &LogLoader,
    log_dir: &mut LogDir,
    known: &[String],
) -> Result<(), Error> {
    let names = partition_dir_names(log_dir.storage().as_ref(), log_dir.root())?;
    for name in names.iter().filter(|n| !known.contains(n)) {
        let closed = loader
            .load_partition(log_dir, name, false)
            .and_then(|(log, _)| log_dir.close_partition(log));
        if let Err(e) = closed {
            tracing::warn!(partition = %name, error = %e, "a partition directory outside the cluster's metadata failed to recover; no clean-shutdown marker until it does");
        }
    }
    Ok(())
}

/// The `__consumer_offsets-<p>` directories in `root`, with their partition numbers.
fn consumer_offsets_dirs(storage: &dyn Storage, root: &Path) -> Result<Vec<(i32, String)>, Error> {
    let prefix = format!("{CONSUMER_OFFSETS_TOPIC}-");
    let names = storage.list(root).map_err(|e| Error::io(root, e))?;
    Ok(names
        .into_iter()
        .filter_map(|n| {
            let p: i32 = n.strip_prefix(&prefix)?.parse().ok()?;
            (0..10_000).contains(&p).then_some((p, n))
        })
        .collect())
}

pub(crate) fn unknown_topic(topic: &str) -> Error {
    Error::mirror(
        MirrorError::UnknownTopicOrPartition,
        format!("no topic {topic}"),
    )
}

/// The segment size of klog's coordinator-state topics: Kafka's `offsets.topic.segment.bytes` and
/// `transaction.state.log.segment.bytes` default (100 MiB), which `__mirror_state` follows too.
const INTERNAL_SEGMENT_BYTES: &str = "segment.bytes=104857600";

/// `__mirror_state`'s log configuration: compacted only (`cleanup.policy=compact`, as Kafka creates its
/// coordinators' topics), so neither time nor size retention ever removes a state; the cleaner keeps it
/// bounded (`crate::cleaning`).
pub(crate) fn mirror_state_config() -> Result<LogConfig, Error> {
    Ok(LogConfig::from_pairs([
        "cleanup.policy=compact",
        INTERNAL_SEGMENT_BYTES,
    ])?)
}

/// `__consumer_offsets`' log configuration, the configs Kafka's group coordinator creates it with
/// (`GroupCoordinatorService.groupMetadataTopicConfigs`): `cleanup.policy=compact` and
/// `offsets.topic.segment.bytes`. (`compression.type=producer` is klog's only behaviour.)
pub(crate) fn consumer_offsets_config() -> Result<LogConfig, Error> {
    Ok(LogConfig::from_pairs([
        "cleanup.policy=compact",
        INTERNAL_SEGMENT_BYTES,
    ])?)
}

/// A topic's log configuration from its configs in force (the source's under the local ones; Kafka's
/// topic-level names). The configs klog keeps but does not apply are checked, then left out.
pub(crate) fn topic_config(t: &TopicMeta) -> Result<LogConfig, Error> {
    let mut config = LogConfig::default();
    for (k, v) in &t.effective_configs() {
        if UNAPPLIED_TOPIC_CONFIGS.contains(&k.as_str()) {
            validate_unapplied_config(k, v).map_err(|why| {
                Error::mirror(MirrorError::InvalidRequest, format!("topic config {why}"))
            })?;
            continue;
        }
        config.set(k, v)?;
    }
    Ok(config)
}
