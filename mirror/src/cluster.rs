//! A local cluster: one root directory that is a Kafka log directory (partition directories,
//! checkpoints, `__mirror_state-<i>`), plus `cluster.json` (the controller's metadata) and
//! `meta.properties`. It is a single-node broker: every partition is led here, so a partition's high
//! watermark is its log end offset.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use klog_log::checkpoint::{self, TopicId};
use klog_log::clock::Clock;
use klog_log::config::LogConfig;
use klog_log::dir_lock::DirLock;
use klog_log::io::{read_file, write_atomic, Storage};
use klog_log::log_dir::LogDir;
use klog_log::partition_log::{LogAppendInfo, PartitionLog, WriteMode};
use klog_log::validator::AppendOrigin;
use klog_recovery::loader::{LogLoader, RecoveryReport};

use crate::error::{Error, MirrorError};
use crate::manager::{PartitionRuntime, SourceResolver};
use crate::metadata::{
    validate_mirror_name, validate_topic_name, ClusterMeta, DesiredState, MirrorMeta, TopicMeta,
    TopicMirror, METADATA_FILE,
};
use crate::records::MirrorKey;
use crate::source::{FetchRequest, FetchResponse, Isolation, SourceError, SourceTopic};
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
#[derive(Debug, Clone)]
pub struct MirrorSettings {
    /// `mirror.fetch.max.bytes`: per partition fetch.
    pub fetch_max_bytes: usize,
    /// `mirror.fetch.backoff.ms`: after a fetch error that does not fail the partition.
    pub fetch_backoff_ms: i64,
    /// `mirror.metadata.refresh.interval.ms`: how often a mirror's source topics are described (a
    /// partition-count increase creates the new partitions here).
    pub metadata_refresh_ms: i64,
    /// `mirror.failed.retry.initial.backoff.ms`, `.max.backoff.ms`, `.max.attempts`.
    pub failed_retry_initial_backoff_ms: i64,
    /// `mirror.failed.retry.max.backoff.ms`: the longest wait between retries.
    pub failed_retry_max_backoff_ms: i64,
    /// `mirror.failed.retry.max.attempts`: retries before FAILED is final.
    pub failed_retry_max_attempts: i16,
    /// Sync `__mirror_state` writes and the log at STOPPING (before the LME is read, after the barrier).
    /// Off only in benchmarks that measure what the syncs cost: a crash may then lose state.
    pub fsync: bool,
}

impl Default for MirrorSettings {
    fn default() -> Self {
        MirrorSettings {
            fetch_max_bytes: 1 << 20,
            fetch_backoff_ms: 1000,
            metadata_refresh_ms: 30_000,
            failed_retry_initial_backoff_ms: 1000,
            failed_retry_max_backoff_ms: 300_000,
            failed_retry_max_attempts: 100,
            fsync: true,
        }
    }
}

/// Per-topic outcomes of a mirror request (the request itself can also fail as a whole).
pub type TopicResults = Vec<(String, Result<(), Error>)>;

/// A partition as `describe` reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PartitionDescription {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The topic id (Kafka's base64).
    pub topic_id: String,
    /// The mirror it belongs to, if any.
    pub mirror: Option<String>,
    /// What the operator asked of it (start, pause, stop), if mirrored.
    pub desired: Option<DesiredState>,
    /// Its mirror state (`None`: in no mirror).
    pub state: Option<MirrorState>,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The log start offset.
    pub log_start_offset: i64,
    /// The log end offset.
    pub log_end_offset: i64,
    /// The high watermark.
    pub high_watermark: i64,
    /// The last stable offset.
    pub last_stable_offset: i64,
    /// The source's high watermark, as last fetched.
    pub source_end_offset: Option<i64>,
    /// The source's end offset minus ours.
    pub lag: Option<i64>,
    /// The last mirrored epoch recorded at failover, if any.
    pub last_mirrored_epoch: Option<i32>,
    /// FAILED retries so far (-1: not retried).
    pub retry_attempt: Option<i16>,
    /// The last failure, if any.
    pub error: Option<String>,
    /// Producers the partition knows.
    pub producers: usize,
}

/// A local single-node cluster: one root directory holding a Kafka log directory, `cluster.json`
/// (topics, leader epochs, mirrors) and `__mirror_state`. It takes produce requests (refused on
/// read-only mirror partitions), administers KIP-1279 mirrors, runs them with [`Cluster::tick`], and
/// serves fetches and last-mirrored-epoch lookups as another cluster's source.
///
/// ```
/// use std::sync::Arc;
/// use klog_log::{clock::SystemClock, format::{BatchBuilder, Compression}, io::StdStorage};
/// use klog_mirror::{Cluster, ClusterOptions};
///
/// # let root = std::env::temp_dir().join(format!("klog-doc-cluster-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&root);
/// let cluster = Cluster::init(Arc::new(StdStorage), Arc::new(SystemClock), &root, ClusterOptions::default())?;
/// cluster.create_topic("orders", 1, None, &[])?;
/// let mut batch = BatchBuilder::new(Compression::None);
/// batch.append(1_700_000_000_000, None, Some(b"order"), &[])?;
/// cluster.produce("orders", 0, &mut batch.build()?)?;
/// assert_eq!(cluster.log("orders", 0).map(|l| l.log_end_offset()), Some(1));
/// cluster.close()?;
/// # std::fs::remove_dir_all(&root).unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Cluster {
    pub(crate) root: PathBuf,
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) settings: MirrorSettings,
    pub(crate) meta: Mutex<ClusterMeta>,
    log_dir: Mutex<LogDir>,
    pub(crate) logs: Mutex<BTreeMap<(String, i32), Arc<PartitionLog>>>,
    pub(crate) store: Mutex<MirrorStateStore>,
    pub(crate) runtime: Mutex<BTreeMap<(String, i32), PartitionRuntime>>,
    pub(crate) resolver: Mutex<SourceResolver>,
    /// Per mirror, when its source's topic metadata is next described.
    pub(crate) next_metadata_sync: Mutex<BTreeMap<String, i64>>,
    closed: AtomicBool,
    open_reports: Vec<RecoveryReport>,
    /// Kafka's `.lock` in the log directory, held while the cluster is open (real file systems only).
    dir_lock: Mutex<Option<Arc<DirLock>>>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").field("root", &self.root).finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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

impl Cluster {
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
    ) -> Result<Cluster, Error> {
        let path = root.join(METADATA_FILE);
        if Cluster::exists(storage.as_ref(), root) {
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
        };
        write_atomic(storage.as_ref(), &path, &meta.encode()).map_err(|e| Error::io(&path, e))?;
        Cluster::open(storage, clock, root)
    }

    /// Opens the cluster in `root`: every partition (recovering them as needed), then `__mirror_state`
    /// replayed. Mirror partitions re-enter their recorded state on the next `tick`.
    pub fn open(
        storage: Arc<dyn Storage>,
        clock: Arc<dyn Clock>,
        root: &Path,
    ) -> Result<Cluster, Error> {
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
        let log_dir = LogDir::open(Arc::clone(&storage), root)?;
        let mut logs = BTreeMap::new();
        let mut state_logs = Vec::new();
        let mut reports = Vec::new();
        // `__mirror_state` is never trimmed by time or size: only compaction removes its records.
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
        let clock_for_store = Arc::clone(&clock);
        let store = MirrorStateStore::open(state_logs, Arc::new(move || clock_for_store.now_ms()))?;
        let cluster = Cluster {
            root: root.to_owned(),
            storage,
            clock,
            settings: MirrorSettings::default(),
            meta: Mutex::new(meta),
            log_dir: Mutex::new(log_dir),
            logs: Mutex::new(logs),
            store: Mutex::new(store),
            runtime: Mutex::new(BTreeMap::new()),
            resolver: Mutex::new(SourceResolver::default()),
            next_metadata_sync: Mutex::new(BTreeMap::new()),
            closed: AtomicBool::new(false),
            open_reports: reports,
            dir_lock: Mutex::new(dir_lock),
        };
        tracing::info!(root = %root.display(), "cluster opened");
        cluster.refresh_write_modes();
        Ok(cluster)
    }

    /// What opening did to each partition (recovery after a crash: cut tails, rebuilt indexes, producer
    /// state replayed).
    pub fn open_reports(&self) -> &[RecoveryReport] {
        &self.open_reports
    }

    /// The cluster with other mirroring knobs.
    pub fn with_settings(mut self, settings: MirrorSettings) -> Self {
        lock(&self.store).set_sync(settings.fsync);
        self.settings = settings;
        self
    }

    /// The mirroring knobs.
    pub fn settings(&self) -> &MirrorSettings {
        &self.settings
    }

    /// Clean shutdown: every partition flushed and closed, checkpoints written, the clean-shutdown
    /// marker put down (this process led every partition, so it vouches for all of them).
    pub fn close(&self) -> Result<(), Error> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let owned = self
            .resolver
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take_owned();
        for source in owned {
            source.close()?;
        }
        let logs = lock(&self.logs);
        let mut log_dir = lock(&self.log_dir);
        for log in logs.values() {
            log.close()?;
            log_dir.checkpoint(log)?;
        }
        checkpoint::write_clean_shutdown(self.storage.as_ref(), &self.root, -1)?;
        lock(&self.dir_lock).take();
        Ok(())
    }

    /// Writes the log-directory checkpoints without closing (after a run, so a crash recovers less).
    pub fn checkpoint(&self) -> Result<(), Error> {
        let logs = lock(&self.logs);
        let mut log_dir = lock(&self.log_dir);
        for log in logs.values() {
            log.flush(log.log_end_offset())?;
            log_dir.checkpoint(log)?;
        }
        Ok(())
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The storage it reads and writes through.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The clock its logs and mirrors read.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Kafka's base64 cluster id.
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

    // ---- topics -------------------------------------------------------------------------------------

    /// Creates a topic (CreateTopics; with `topic_id` it keeps a source's id, as a mirror does).
    pub fn create_topic(
        &self,
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
        let mut guard = lock(&self.meta);
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
            mirror: None,
        };
        let config = topic_config(&topic)?;
        // The partition directories first (a crash leaves unreferenced empty directories, not a topic
        // without its files), then the metadata.
        let mut opened = Vec::new();
        {
            let log_dir = lock(&self.log_dir);
            for p in 0..partitions {
                let (log, _) = log_dir.open_partition_with_clock(
                    &partition_dir_name(name, p),
                    config.clone(),
                    Arc::clone(&self.clock),
                )?;
                log.set_topic_id(id)?;
                opened.push((p, Arc::new(log)));
            }
        }
        let mut meta = guard.clone();
        meta.topics.insert(name.to_owned(), topic);
        self.save_meta(&mut guard, meta)?;
        let mut logs = lock(&self.logs);
        for (p, log) in opened {
            logs.insert((name.to_owned(), p), log);
        }
        Ok(id)
    }

    /// DeleteTopics: the topic leaves the metadata and its partition directories are renamed the way
    /// Kafka marks them for deletion (`<topic>-<p>.<id>-delete`); their files are left for the operator.
    pub fn delete_topic(&self, name: &str) -> Result<(), Error> {
        let mut guard = lock(&self.meta);
        let t = guard
            .topics
            .get(name)
            .cloned()
            .ok_or_else(|| unknown_topic(name))?;
        let mut meta = guard.clone();
        meta.topics.remove(name);
        self.save_meta(&mut guard, meta)?;
        let mut logs = lock(&self.logs);
        let mut log_dir = lock(&self.log_dir);
        for p in 0..t.partitions {
            if let Some(log) = logs.remove(&(name.to_owned(), p)) {
                log.close()?;
                log_dir.checkpoint(&log)?;
            }
            let dir = self.root.join(partition_dir_name(name, p));
            let to = self.root.join(format!(
                "{}.{}-delete",
                partition_dir_name(name, p),
                t.id.replace('-', "_")
            ));
            self.storage
                .rename(&dir, &to)
                .map_err(|e| Error::io(&dir, e))?;
        }
        self.storage
            .sync_dir(&self.root)
            .map_err(|e| Error::io(&self.root, e))?;
        Ok(())
    }

    /// CreatePartitions: grows `topic` to `total` partitions (never shrinks); the new ones start empty at
    /// leader epoch 0 with the topic's id.
    pub fn create_partitions(&self, topic: &str, total: i32) -> Result<(), Error> {
        let current = self.topic(topic).ok_or_else(|| unknown_topic(topic))?;
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
            let log_dir = lock(&self.log_dir);
            for p in current.partitions..total {
                let (log, _) = log_dir.open_partition_with_clock(
                    &partition_dir_name(topic, p),
                    config.clone(),
                    Arc::clone(&self.clock),
                )?;
                log.set_topic_id(id)?;
                opened.push((p, Arc::new(log)));
            }
        }
        self.update_topic(topic, |t| {
            t.partitions = total;
            t.leader_epochs.resize(total as usize, 0);
            Ok(Some(()))
        })?;
        let mut logs = lock(&self.logs);
        for (p, log) in opened {
            // A mirror partition is read-only from its first moment (UNKNOWN).
            if current.mirror.is_some() {
                log.set_write_mode(WriteMode::ReadOnly);
            }
            logs.insert((topic.to_owned(), p), log);
        }
        Ok(())
    }

    /// A topic's metadata.
    pub fn topic(&self, name: &str) -> Option<TopicMeta> {
        lock(&self.meta).topics.get(name).cloned()
    }

    /// A partition's open log.
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

    /// Changes one topic's metadata and persists it. `change` returns `None` for "nothing changed"
    /// (nothing is written then).
    fn update_topic<T>(
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
    /// partitions are writable, STOPPING takes only the barrier, anything else is read-only.
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
                            Some(MirrorState::Stopping) => WriteMode::BarrierOnly,
                            _ => WriteMode::ReadOnly,
                        }
                    }
                };
                log.set_write_mode(mode);
            }
        }
    }

    // ---- mirror administration (the controller's side of the mirror RPCs) -------------------------------

    /// CreateMirror: `source` is a cluster root or `kafka://host:port`.
    pub fn create_mirror(&self, name: &str, source: &str) -> Result<(), Error> {
        validate_mirror_name(name)?;
        if source.is_empty() {
            return Err(Error::mirror(MirrorError::InvalidRequest, "empty source"));
        }
        let mut guard = lock(&self.meta);
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
            },
        );
        self.save_meta(&mut guard, meta)
    }

    /// The mirrors, by name.
    pub fn mirrors(&self) -> BTreeMap<String, MirrorMeta> {
        lock(&self.meta).mirrors.clone()
    }

    fn require_mirror(meta: &ClusterMeta, name: &str) -> Result<(), Error> {
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
    pub fn add_topics(&self, mirror: &str, topics: &[String]) -> Result<TopicResults, Error> {
        Self::require_mirror(&lock(&self.meta), mirror)?;
        let source = self.source_for(mirror).map_err(|e| Error::Source {
            source_name: mirror.to_owned(),
            message: e.to_string(),
        })?;
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
                if let Some(local) = self.topic(topic) {
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
                    self.create_topic(topic, described.partitions, Some(described.id), &[])?;
                }
                self.set_desired(topic, |current| match current {
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
        self.refresh_write_modes();
        Ok(results)
    }

    /// RemoveTopicsFromMirror (failover).
    pub fn remove_topics(&self, mirror: &str, topics: &[String]) -> Result<TopicResults, Error> {
        self.change_topics(mirror, topics, |topic, m| match m.desired {
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
    pub fn pause_topics(&self, mirror: &str, topics: &[String]) -> Result<TopicResults, Error> {
        self.change_topics(mirror, topics, |topic, m| match m.desired {
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
    pub fn resume_topics(&self, mirror: &str, topics: &[String]) -> Result<TopicResults, Error> {
        self.change_topics(mirror, topics, |topic, m| match m.desired {
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
        &self,
        mirror: &str,
        topics: &[String],
        change: impl Fn(&str, &TopicMirror) -> Result<TopicMirror, Error>,
    ) -> Result<TopicResults, Error> {
        Self::require_mirror(&lock(&self.meta), mirror)?;
        let results = topics
            .iter()
            .map(|topic| {
                let r = self.set_desired(topic, |current| match current {
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
        self.refresh_write_modes();
        Ok(results)
    }

    fn set_desired(
        &self,
        topic: &str,
        decide: impl FnOnce(Option<&TopicMirror>) -> Result<Option<TopicMirror>, Error>,
    ) -> Result<(), Error> {
        self.update_topic(topic, |t| {
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
    pub fn delete_mirror(&self, mirror: &str) -> Result<(), Error> {
        let mut guard = lock(&self.meta);
        Self::require_mirror(&guard, mirror)?;
        let mut busy = Vec::new();
        {
            let store = lock(&self.store);
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
        // tombstones. A crash in between leaves records of a mirror that no longer exists; open() drops them.
        let mut meta = guard.clone();
        meta.mirrors.remove(mirror);
        for t in meta.topics.values_mut() {
            if t.mirror.as_ref().is_some_and(|m| m.name == mirror) {
                t.mirror = None;
            }
        }
        self.save_meta(&mut guard, meta)?;
        drop(guard);
        self.tombstone_orphans()?;
        lock(&self.runtime).retain(|_, rt| rt.mirror != mirror);
        lock(&self.resolver).forget(mirror);
        self.refresh_write_modes();
        Ok(())
    }

    /// Tombstones `__mirror_state` records of mirrors that no longer exist.
    pub(crate) fn tombstone_orphans(&self) -> Result<(), Error> {
        let mirrors: Vec<String> = lock(&self.meta).mirrors.keys().cloned().collect();
        let mut store = lock(&self.store);
        let orphans: std::collections::BTreeSet<String> = store
            .states()
            .map(|(k, _)| k.mirror.clone())
            .filter(|m| !mirrors.contains(m))
            .collect();
        let mut tombstones = Vec::new();
        for m in orphans {
            tombstones.extend(store.tombstones_of(&m));
        }
        // LME records of deleted mirrors too.
        if !tombstones.is_empty() {
            store.write(tombstones)?;
        }
        Ok(())
    }

    // ---- serving as a source -------------------------------------------------------------------------

    pub(crate) fn serve_topic(&self, name: &str) -> Option<SourceTopic> {
        let meta = lock(&self.meta);
        let t = meta.topics.get(name)?;
        Some(SourceTopic {
            id: TopicId::parse(&t.id)?,
            partitions: t.partitions,
        })
    }

    fn served_log(
        &self,
        topic: &str,
        topic_id: TopicId,
        partition: i32,
    ) -> Result<(Arc<PartitionLog>, i32), SourceError> {
        self.serving()?;
        let unknown = || SourceError::UnknownTopicOrPartition(format!("{topic}-{partition}"));
        let epoch = {
            let meta = lock(&self.meta);
            let t = meta.topics.get(topic).ok_or_else(unknown)?;
            if t.id != topic_id.to_string() {
                return Err(unknown());
            }
            *t.leader_epochs
                .get(partition as usize)
                .ok_or_else(unknown)?
        };
        let log = self.log(topic, partition).ok_or_else(unknown)?;
        Ok((log, epoch))
    }

    /// A consumer fetch, with Kafka's leader-epoch fencing and divergence check.
    pub(crate) fn serve_fetch(&self, req: &FetchRequest) -> Result<FetchResponse, SourceError> {
        let (log, leader_epoch) = self.served_log(&req.topic, req.topic_id, req.partition)?;
        if req.current_leader_epoch < leader_epoch {
            return Err(SourceError::FencedLeaderEpoch { leader_epoch });
        }
        if req.current_leader_epoch > leader_epoch {
            return Err(SourceError::UnknownLeaderEpoch);
        }
        let base = FetchResponse {
            high_watermark: log.high_watermark(),
            last_stable_offset: log.last_stable_offset(),
            log_start_offset: log.log_start_offset(),
            diverging_epoch: None,
            records: Vec::new(),
        };
        if let Some(fetched) = req.last_fetched_epoch {
            match log.end_offset_for_epoch(fetched) {
                None => return Err(SourceError::OffsetOutOfRange),
                Some((epoch, end)) if epoch < fetched || end < req.fetch_offset => {
                    return Ok(FetchResponse {
                        diverging_epoch: Some((epoch, end)),
                        ..base
                    })
                }
                Some(_) => {}
            }
        }
        if req.fetch_offset < log.log_start_offset() || req.fetch_offset > log.log_end_offset() {
            return Err(SourceError::OffsetOutOfRange);
        }
        let read = match req.isolation {
            Isolation::ReadCommitted => log
                .read_committed(req.fetch_offset, req.max_bytes, true)
                .map(|(r, _)| r),
            Isolation::ReadUncommitted => log.read(
                req.fetch_offset,
                req.max_bytes,
                Some(log.high_watermark()),
                true,
            ),
        }
        .map_err(|e| match e.kafka_error() {
            klog_log::KafkaError::OffsetOutOfRange => SourceError::OffsetOutOfRange,
            _ => SourceError::Unavailable(e.to_string()),
        })?;
        Ok(FetchResponse {
            records: read.records.into_vec(),
            ..base
        })
    }

    pub(crate) fn serve_list_offsets(
        &self,
        topic: &str,
        topic_id: TopicId,
        partition: i32,
    ) -> Result<(i64, i64), SourceError> {
        let (log, _) = self.served_log(topic, topic_id, partition)?;
        Ok((log.log_start_offset(), log.high_watermark()))
    }

    /// The LME lookup (§2.4, keyed as recommended): among this cluster's mirrors from
    /// `requester_cluster_id`, the one holding this topic must have STOPPED the partition (a source that
    /// still mirrors from the requester would make a loop), and its LME record is the answer.
    pub(crate) fn serve_last_mirrored_epoch(
        &self,
        requester_cluster_id: &str,
        topic_id: TopicId,
        partition: i32,
    ) -> Result<i32, SourceError> {
        self.serving()?;
        let meta = lock(&self.meta);
        let Some((_, t)) = meta
            .topics
            .iter()
            .find(|(_, t)| t.id == topic_id.to_string())
        else {
            return Ok(-1);
        };
        let Some(m) = &t.mirror else {
            return Ok(-1);
        };
        let from_requester = meta
            .mirrors
            .get(&m.name)
            .and_then(|mm| mm.source_cluster_id.as_deref())
            == Some(requester_cluster_id);
        if !from_requester {
            return Ok(-1);
        }
        let key = MirrorKey {
            mirror: m.name.clone(),
            topic_id,
            partition,
        };
        let store = lock(&self.store);
        let state = store.state(&key).map(|s| s.value.state);
        if state != Some(MirrorState::Stopped) {
            return Err(SourceError::Refused(format!(
                "partition {partition} of topic {topic_id} is still mirrored from cluster {requester_cluster_id} here \
                 (mirror {}, state {}): stop it before mirroring back",
                m.name,
                state.unwrap_or(MirrorState::Unknown)
            )));
        }
        Ok(store.last_mirror_epoch(&key).map_or(-1, |s| s.value))
    }

    // ---- describe ------------------------------------------------------------------------------------

    /// `describe`, with the source's end offset asked from the source for mirror partitions the fetcher
    /// has not reported on yet (a fresh process): lag is then known without running the fetcher.
    pub fn describe_live(&self) -> Vec<PartitionDescription> {
        let mut rows = self.describe();
        for r in &mut rows {
            let mirroring = matches!(
                r.state,
                Some(
                    MirrorState::Mirroring
                        | MirrorState::Paused
                        | MirrorState::Pausing
                        | MirrorState::Preparing
                )
            );
            let (Some(mirror), true, None) = (r.mirror.clone(), mirroring, r.source_end_offset)
            else {
                continue;
            };
            let Some(id) = TopicId::parse(&r.topic_id) else {
                continue;
            };
            if let Ok(source) = self.source_for(&mirror) {
                if let Ok((_, end)) = source.list_offsets(&r.topic, id, r.partition) {
                    r.source_end_offset = Some(end);
                    r.lag = Some((end - r.high_watermark).max(0));
                }
            }
        }
        rows
    }

    /// Every partition of every topic, with its mirror state (from what is stored, without asking sources).
    pub fn describe(&self) -> Vec<PartitionDescription> {
        let meta = lock(&self.meta).clone();
        let runtime = lock(&self.runtime);
        let store = lock(&self.store);
        let logs = lock(&self.logs);
        let mut out = Vec::new();
        for (name, t) in &meta.topics {
            let id = TopicId::parse(&t.id).expect("validated");
            for p in 0..t.partitions {
                let Some(log) = logs.get(&(name.clone(), p)) else {
                    continue;
                };
                let key = t.mirror.as_ref().map(|m| MirrorKey {
                    mirror: m.name.clone(),
                    topic_id: id,
                    partition: p,
                });
                let stored = key.as_ref().and_then(|k| store.state(k));
                let rt = runtime.get(&(name.clone(), p));
                out.push(PartitionDescription {
                    topic: name.clone(),
                    partition: p,
                    topic_id: t.id.clone(),
                    mirror: t.mirror.as_ref().map(|m| m.name.clone()),
                    desired: t.mirror.as_ref().map(|m| m.desired),
                    state: key
                        .as_ref()
                        .map(|_| stored.map_or(MirrorState::Unknown, |s| s.value.state)),
                    leader_epoch: t.leader_epochs[p as usize],
                    log_start_offset: log.log_start_offset(),
                    log_end_offset: log.log_end_offset(),
                    high_watermark: log.high_watermark(),
                    last_stable_offset: log.last_stable_offset(),
                    source_end_offset: rt.and_then(|r| r.source_high_watermark),
                    lag: rt
                        .and_then(|r| r.source_high_watermark)
                        .map(|hw| (hw - log.high_watermark()).max(0)),
                    last_mirrored_epoch: key
                        .as_ref()
                        .and_then(|k| store.last_mirror_epoch(k))
                        .map(|s| s.value),
                    retry_attempt: stored
                        .filter(|s| s.value.state == MirrorState::Failed)
                        .map(|s| s.value.retry_attempt),
                    error: stored.and_then(|s| s.value.error.clone()),
                    producers: log.producers().len(),
                });
            }
        }
        out
    }
}

/// Takes Kafka's `.lock` in the log directory, so a second process (a `klog mirror run` of another
/// cluster opening this one as its source, say) cannot write the same files at the same time.
fn unknown_topic(topic: &str) -> Error {
    Error::mirror(
        MirrorError::UnknownTopicOrPartition,
        format!("no topic {topic}"),
    )
}

/// `__mirror_state`'s log configuration: `retention.ms=-1`, `retention.bytes=-1`.
fn mirror_state_config() -> Result<LogConfig, Error> {
    Ok(LogConfig::from_pairs([
        "retention.ms=-1",
        "retention.bytes=-1",
    ])?)
}

/// A topic's log configuration from its configs (Kafka's topic-level names).
fn topic_config(t: &TopicMeta) -> Result<LogConfig, Error> {
    let mut config = LogConfig::default();
    for (k, v) in &t.configs {
        if k == crate::metadata::MIRROR_NAME_CONFIG {
            continue;
        }
        config.set(k, v)?;
    }
    Ok(config)
}
