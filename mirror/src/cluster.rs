//! A local cluster: the public face of one [`Node`] and the [`Manager`] that mirrors into it. Each
//! method hands the request to the module that owns the concern: [`crate::topics`] (CreateTopics,
//! DeleteTopics, CreatePartitions), [`crate::admin`] (the mirror RPCs), [`crate::serving`] (answering
//! another cluster's mirror fetches), [`crate::manager`] (driving mirror partitions),
//! [`crate::config_sync`] (topic configs and ACL bindings), [`crate::groups`] (consumer-group offsets)
//! and [`crate::describe`].

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use klog_log::checkpoint::TopicId;
use klog_log::cleaner::{CleanOptions, CleanerConfig};
use klog_log::clock::Clock;
use klog_log::io::{BackendChoice, IoBackend, IoWorkload, StdStorage, Storage};
use klog_log::log_dir::LogDir;
use klog_log::partition_log::{LogAppendInfo, PartitionLog};
use klog_recovery::loader::RecoveryReport;

use crate::acl::AclBinding;
use crate::admin;
use crate::config_sync::{self, AclEntry, TopicConfigs};
use crate::describe;
use crate::error::Error;
use crate::groups::{self, GroupOffsetDescription, OffsetKey};
use crate::log_cleaner::{self, CleanedLog};
use crate::manager::resolver::SourceFactory;
use crate::manager::{Manager, TickReport};
use crate::metadata::{ClusterMeta, MirrorMeta, StopMode, TopicMeta};
use crate::node::Node;
use crate::serving::LocalSource;
use crate::source::{CommittedOffset, MirrorSource};
use crate::topics;

pub use crate::admin::{RetryResults, TopicResults};
pub use crate::describe::{MirrorDescription, PartitionDescription};
pub use crate::manager::MirrorSettings;
pub use crate::node::{partition_dir_name, random_bytes, ClusterOptions};

/// A local cluster (see the module docs).
pub struct Cluster {
    node: Arc<Node>,
    manager: Manager,
    /// The backend its storage is and why, when opened through [`Cluster::open_backend`].
    choice: Option<BackendChoice>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("root", &self.node.root())
            .finish()
    }
}

impl Cluster {
    /// Whether `root` holds a cluster (a `cluster.json`).
    pub fn exists(storage: &dyn Storage, root: &Path) -> bool {
        Node::exists(storage, root)
    }

    /// Creates a cluster in `root` (which must not hold one) and opens it.
    pub fn init(
        storage: Arc<dyn Storage>,
        clock: Arc<dyn Clock>,
        root: &Path,
        options: ClusterOptions,
    ) -> Result<Cluster, Error> {
        Ok(Cluster::of(Node::init(storage, clock, root, options)?))
    }

    /// Opens the cluster in `root`: every partition (recovering them as needed), then `__mirror_state`
    /// replayed, and a DeleteMirror a crash interrupted finished. Mirror partitions re-enter their
    /// recorded state on the next `tick`.
    pub fn open(
        storage: Arc<dyn Storage>,
        clock: Arc<dyn Clock>,
        root: &Path,
    ) -> Result<Cluster, Error> {
        let node = Node::open(storage, clock, root)?;
        if !node.storage().is_read_only() {
            // A failure here (a full disk) only postpones it: CreateMirror tombstones again before a
            // mirror name can be reused, and until then nothing looks the orphans up.
            let _ = node.tombstone_orphans();
        }
        tracing::info!(root = %root.display(), "cluster opened");
        Ok(Cluster::of(node))
    }

    /// [`Cluster::init`] on the backend `backend` names, chosen as [`Cluster::open_backend`] does.
    pub fn init_backend(
        backend: IoBackend,
        clock: Arc<dyn Clock>,
        root: &Path,
        options: ClusterOptions,
    ) -> Result<Cluster, Error> {
        if Cluster::exists(&StdStorage, root) {
            // Refused as `init` refuses it, before anything is measured or recorded.
            return Cluster::init(Arc::new(StdStorage), clock, root, options);
        }
        let (storage, choice) = LogDir::backend_for(backend, root, IoWorkload::Durable)?;
        let mut cluster = Cluster::init(storage, clock, root, options)?;
        cluster.choice = Some(choice);
        Ok(cluster)
    }

    /// [`Cluster::open`] on the backend `backend` names, for the workload a cluster does most: durable
    /// appends (`__mirror_state` and mirrored batches are synced as they are written). `Auto` is the
    /// directory's measured decision ([`LogDir::backend_for`]: recorded in the root, or probed and
    /// recorded); the choice is logged at info and kept ([`Cluster::backend_choice`]). A root that
    /// holds no cluster is refused as `open` refuses it, with nothing measured or written there.
    pub fn open_backend(
        backend: IoBackend,
        clock: Arc<dyn Clock>,
        root: &Path,
    ) -> Result<Cluster, Error> {
        if !Cluster::exists(&StdStorage, root) {
            return Cluster::open(Arc::new(StdStorage), clock, root);
        }
        let (storage, choice) = LogDir::backend_for(backend, root, IoWorkload::Durable)?;
        let mut cluster = Cluster::open(storage, clock, root)?;
        cluster.choice = Some(choice);
        Ok(cluster)
    }

    /// The backend its storage is and why, when opened through [`Cluster::open_backend`] or
    /// [`Cluster::init_backend`].
    pub fn backend_choice(&self) -> Option<&BackendChoice> {
        self.choice.as_ref()
    }

    fn of(node: Node) -> Cluster {
        let node = Arc::new(node);
        Cluster {
            manager: Manager::new(Arc::clone(&node)),
            node,
            choice: None,
        }
    }

    /// What opening did to each partition (recovery after a crash: cut tails, rebuilt indexes, producer
    /// state replayed).
    pub fn open_reports(&self) -> &[RecoveryReport] {
        self.node.open_reports()
    }

    /// The mirroring knobs this cluster runs with.
    pub fn with_settings(mut self, settings: MirrorSettings) -> Self {
        self.manager.set_settings(settings);
        self
    }

    /// The mirroring knobs.
    pub fn settings(&self) -> &MirrorSettings {
        self.manager.settings()
    }

    /// Clean shutdown: the local sources opened for mirrors closed, then every partition flushed and
    /// closed, checkpoints written, the clean-shutdown marker put down, the lock released.
    pub fn close(&self) -> Result<(), Error> {
        self.manager.sources().close()?;
        self.node.close()
    }

    /// Writes the log-directory checkpoints without closing (after a run, so a crash recovers less).
    pub fn checkpoint(&self) -> Result<(), Error> {
        self.node.checkpoint()
    }

    /// The cluster's root (its log directory).
    pub fn root(&self) -> &Path {
        self.node.root()
    }

    /// The storage its files are read and written through.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        self.node.storage()
    }

    /// The clock its logs and mirror states use.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        self.node.clock()
    }

    /// Kafka's cluster id (22-character base64).
    pub fn cluster_id(&self) -> String {
        self.node.cluster_id()
    }

    /// A copy of the controller metadata.
    pub fn metadata(&self) -> ClusterMeta {
        self.node.metadata()
    }

    /// This cluster as a mirror source for another cluster in the same process.
    pub fn as_source(&self) -> LocalSource {
        LocalSource::new(Arc::clone(&self.node))
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
        topics::create_topic(&self.node, name, partitions, topic_id, configs)
    }

    /// DeleteTopics: the topic leaves the metadata and its partition directories are renamed the way
    /// Kafka marks them for deletion (`<topic>-<p>.<id>-delete`); their files are left for the operator.
    pub fn delete_topic(&self, name: &str) -> Result<(), Error> {
        topics::delete_topic(&self.node, name)
    }

    /// CreatePartitions: grows `topic` to `total` partitions (never shrinks).
    pub fn create_partitions(&self, topic: &str, total: i32) -> Result<(), Error> {
        topics::create_partitions(&self.node, topic, total)
    }

    /// The metadata of topic `name`.
    pub fn topic(&self, name: &str) -> Option<TopicMeta> {
        self.node.topic(name)
    }

    /// The open log of a partition.
    pub fn log(&self, topic: &str, partition: i32) -> Option<Arc<PartitionLog>> {
        self.node.log(topic, partition)
    }

    /// A partition's current leader epoch.
    pub fn leader_epoch(&self, topic: &str, partition: i32) -> Option<i32> {
        self.node.leader_epoch(topic, partition)
    }

    /// A leader election: the partition's leader epoch goes up by one (and at least to `min`).
    pub fn bump_leader_epoch(&self, topic: &str, partition: i32, min: i32) -> Result<i32, Error> {
        self.node.bump_leader_epoch(topic, partition, min)
    }

    /// A client's produce: a leader append at the partition's leader epoch. A mirror partition refuses it
    /// with READ_ONLY_TOPIC unless STOPPED.
    pub fn produce(
        &self,
        topic: &str,
        partition: i32,
        batches: &mut [u8],
    ) -> Result<LogAppendInfo, Error> {
        self.node.produce(topic, partition, batches)
    }

    /// A transaction coordinator's append (COMMIT/ABORT markers). Also refused on a read-only partition.
    pub fn append_markers(
        &self,
        topic: &str,
        partition: i32,
        batches: &mut [u8],
    ) -> Result<LogAppendInfo, Error> {
        self.node.append_markers(topic, partition, batches)
    }

    // ---- mirror administration ------------------------------------------------------------------------

    /// CreateMirror: `source` is a cluster root or `kafka://host:port`; its failover truncates open
    /// transactions to the LSO (the seed design, [`StopMode::Truncate`]).
    pub fn create_mirror(&self, name: &str, source: &str) -> Result<(), Error> {
        admin::create_mirror(&self.node, name, source, StopMode::Truncate, &[])
    }

    /// CreateMirror with the stop design chosen ([`StopMode`]).
    pub fn create_mirror_with_stop_mode(
        &self,
        name: &str,
        source: &str,
        stop_mode: StopMode,
    ) -> Result<(), Error> {
        admin::create_mirror(&self.node, name, source, stop_mode, &[])
    }

    /// CreateMirror with mirror configs (the reference's names): `mirror.support.unclean.leader.election`
    /// and the sync filters `topic.properties.exclude`, `groups.include`, `groups.exclude`,
    /// `acls.include` (`crate::sync_config`).
    pub fn create_mirror_with_configs(
        &self,
        name: &str,
        source: &str,
        configs: &[(String, String)],
    ) -> Result<(), Error> {
        admin::create_mirror(&self.node, name, source, StopMode::Truncate, configs)
    }

    /// CreateMirror with the stop design and the mirror's configs both chosen.
    pub fn create_mirror_with(
        &self,
        name: &str,
        source: &str,
        stop_mode: StopMode,
        configs: &[(String, String)],
    ) -> Result<(), Error> {
        admin::create_mirror(&self.node, name, source, stop_mode, configs)
    }

    /// The mirrors, by name.
    pub fn mirrors(&self) -> BTreeMap<String, MirrorMeta> {
        self.node.mirrors()
    }

    /// AddTopicsToMirror: creates missing topics from the source's description (same name, partition
    /// count and topic id), then marks them to be mirrored. Per-topic results.
    pub fn add_topics(&self, mirror: &str, topics: &[String]) -> Result<TopicResults, Error> {
        admin::require_mirror(&self.node.metadata(), mirror)?;
        let source = self.manager.source_for(mirror).map_err(|e| Error::Source {
            source_name: mirror.to_owned(),
            message: e.to_string(),
        })?;
        admin::add_topics(&self.node, source.as_ref(), mirror, topics)
    }

    /// RemoveTopicsFromMirror (failover).
    pub fn remove_topics(&self, mirror: &str, topics: &[String]) -> Result<TopicResults, Error> {
        admin::remove_topics(&self.node, mirror, topics)
    }

    /// PauseMirrorTopics.
    pub fn pause_topics(&self, mirror: &str, topics: &[String]) -> Result<TopicResults, Error> {
        admin::pause_topics(&self.node, mirror, topics)
    }

    /// ResumeMirrorTopics. It also resets the topics' FAILED partitions (attempts, a non-retryable
    /// mark): they are retried at the next pass. A started topic with FAILED partitions may be resumed
    /// for that alone; any other topic that is not paused gets MIRROR_TOPIC_NOT_PAUSED.
    pub fn resume_topics(&self, mirror: &str, topics: &[String]) -> Result<TopicResults, Error> {
        let (results, reset) = admin::resume_topics(&self.node, mirror, topics)?;
        for (topic, partitions) in reset {
            self.manager.reset_failures(&topic, &partitions);
        }
        Ok(results)
    }

    /// `klog mirror retry`: resets the FAILED partitions of `topics` (every topic of the mirror when
    /// empty), whatever their desired state, so they are retried at the next pass. Per topic, the
    /// partitions reset (none if none was FAILED).
    pub fn retry_topics(&self, mirror: &str, topics: &[String]) -> Result<RetryResults, Error> {
        let results = admin::retry_topics(&self.node, mirror, topics)?;
        for (topic, r) in &results {
            if let Ok(partitions) = r {
                self.manager.reset_failures(topic, partitions);
            }
        }
        Ok(results)
    }

    /// DeleteMirror: only when every topic of the mirror is STOPPED (MIRROR_NOT_EMPTY otherwise).
    pub fn delete_mirror(&self, mirror: &str) -> Result<(), Error> {
        admin::delete_mirror(&self.node, mirror)?;
        self.manager.forget_mirror(mirror);
        Ok(())
    }

    // ---- consumer groups --------------------------------------------------------------------------------

    /// A consumer group's OffsetCommit for one partition (stored in `__consumer_offsets`, as Kafka does).
    pub fn commit_offset(
        &self,
        group: &str,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<CommittedOffset, Error> {
        groups::commit(&self.node, group, topic, partition, offset)
    }

    /// OffsetDelete: the group's committed offset for one partition is deleted (a tombstone).
    pub fn delete_offset(&self, group: &str, topic: &str, partition: i32) -> Result<(), Error> {
        let key = (group.to_owned(), topic.to_owned(), partition);
        groups::write(&self.node, &[groups::OffsetChange::Delete(key)])
    }

    /// Every committed offset, by (group, topic, partition).
    pub fn committed_offsets(&self) -> Result<BTreeMap<OffsetKey, CommittedOffset>, Error> {
        groups::committed_offsets(&self.node)
    }

    /// Every committed offset with its partition's log end and the lag.
    pub fn describe_groups(&self) -> Result<Vec<GroupOffsetDescription>, Error> {
        groups::describe(&self.node)
    }

    // ---- the log cleaner ------------------------------------------------------------------------------

    /// One cleaner pass on each compacted log of the cluster the node's cleaner may clean (`__mirror_state`,
    /// `__consumer_offsets`, compacted topics not being mirrored) that is cleanable, or every one with
    /// `opts.force`; a skipped report for the other partitions. In (topic, partition) order, each log on
    /// its own (`klog clean ROOT`; `tick` runs the same cleaner in the background).
    pub fn clean(&self, config: &CleanerConfig, opts: &CleanOptions) -> Vec<CleanedLog> {
        log_cleaner::clean_all(&self.node, config, opts)
    }

    // ---- the manager ----------------------------------------------------------------------------------

    /// Registers how mirrors find their sources (replacing the default, which opens local cluster roots).
    pub fn set_source_factory(&self, factory: SourceFactory) {
        self.manager.sources().set_factory(factory);
    }

    /// Connects `mirror` to an already open source (tests; one process holding several clusters).
    pub fn connect_source(&self, mirror: &str, source: Arc<dyn MirrorSource>) {
        self.manager.sources().connect(mirror, source);
    }

    /// One step for every mirror partition: apply desired-state changes, run due actions, fetch once.
    pub fn tick(&self) -> TickReport {
        self.manager.tick()
    }

    /// Ticks until a tick changes nothing, or `max_ticks`. Returns the merged report.
    pub fn run_until_idle(&self, max_ticks: usize) -> TickReport {
        self.manager.run_until_idle(max_ticks)
    }

    // ---- describe -------------------------------------------------------------------------------------

    /// `describe`, with the source's end offset asked from the source for mirror partitions the fetcher
    /// has not reported on yet (a fresh process): lag is then known without running the fetcher.
    pub fn describe_live(&self) -> Vec<PartitionDescription> {
        describe::describe_live(&self.node, &self.manager)
    }

    /// Every partition with its mirror state, offsets and lag as the fetcher last saw them.
    pub fn describe(&self) -> Vec<PartitionDescription> {
        describe::describe(&self.node, &self.manager)
    }

    /// Every mirror with its sync configs and the lag of its partitions among `rows` (from
    /// [`describe`](Self::describe) or [`describe_live`](Self::describe_live)).
    pub fn describe_mirrors(&self, rows: &[PartitionDescription]) -> Vec<MirrorDescription> {
        describe::describe_mirrors(&self.node.metadata(), rows)
    }

    // ---- topic configs and ACLs (crate::config_sync) ----------------------------------------------------

    /// Sets (`Some`) or removes (`None`) local topic configs; on a mirror topic they are overrides that
    /// win over the source's values.
    pub fn alter_topic_configs(
        &self,
        topic: &str,
        changes: &[(String, Option<String>)],
    ) -> Result<(), Error> {
        self.node.alter_topic_configs(topic, changes)
    }

    /// Adds a binding to the cluster's own ACL list; `false` if it was there already.
    pub fn add_acl(&self, binding: AclBinding) -> Result<bool, Error> {
        self.node.add_acl(binding)
    }

    /// Removes a binding from the cluster's own ACL list; `false` if it was not there.
    pub fn remove_acl(&self, binding: &AclBinding) -> Result<bool, Error> {
        self.node.remove_acl(binding)
    }

    /// Every topic's configs in force, each with where it comes from.
    pub fn describe_configs(&self) -> Vec<TopicConfigs> {
        config_sync::describe_configs(&self.node.metadata())
    }

    /// The cluster's own ACL bindings, then those each mirror synced.
    pub fn describe_acls(&self) -> Vec<AclEntry> {
        config_sync::describe_acls(&self.node.metadata())
    }
}
