//! What `klog cluster import` did: the report it returns and `--json` prints (the fields are in
//! docs/cli.md, a contract).

use std::collections::BTreeMap;
use std::path::PathBuf;

use klog_log::kraft::MetadataLog;
use serde::Serialize;

use super::files::PlacedFiles;

/// What an import did (`klog cluster import --json` prints it; the fields are in docs/cli.md).
#[derive(Debug, Clone, Serialize)]
pub struct ImportReport {
    /// The broker's log directory.
    pub source: PathBuf,
    /// The new cluster's root.
    pub into: PathBuf,
    /// The broker's cluster id, kept.
    pub cluster_id: String,
    /// The broker's `node.id`.
    pub node_id: i32,
    /// Whether the broker shut down cleanly (`.kafka_cleanshutdown`); if not, the cluster's first open
    /// recovered the partitions.
    pub clean_shutdown: bool,
    /// What the metadata log said, and where it was read.
    pub metadata: MetadataSummary,
    /// The topics imported.
    pub topics: Vec<ImportedTopic>,
    /// The group offsets of `__consumer_offsets`.
    pub group_offsets: GroupOffsetsImport,
    /// Directories left where they are, with why.
    pub skipped: Vec<SkippedDir>,
    /// Every file placed: linked and copied.
    pub files: PlacedFiles,
    /// Why a hard link was not possible (another file system), when a file that could be linked was copied.
    pub link_failure: Option<String>,
}

/// The metadata log read.
#[derive(Debug, Clone, Serialize)]
pub struct MetadataSummary {
    /// The `__cluster_metadata-0` directory.
    pub dir: PathBuf,
    /// The snapshot the image starts from (its file name).
    pub snapshot: Option<String>,
    /// The offset after the last record applied.
    pub end_offset: i64,
    /// Records applied.
    pub records: u64,
    /// A metadata transaction the log ends inside (not applied): its first offset.
    pub open_transaction: Option<i64>,
}

/// One topic imported.
#[derive(Debug, Clone, Serialize)]
pub struct ImportedTopic {
    /// The topic's name.
    pub topic: String,
    /// Its id (base64), kept.
    pub topic_id: String,
    /// Its partitions.
    pub partitions: Vec<ImportedPartition>,
    /// The topic configs kept (Kafka's names).
    pub configs: BTreeMap<String, String>,
    /// Topic configs left out because klog refuses them, with why.
    pub configs_left_out: Vec<String>,
}

/// One partition imported.
#[derive(Debug, Clone, Serialize)]
pub struct ImportedPartition {
    /// The partition.
    pub partition: i32,
    /// The leader epoch the cluster stamps its next appends with (the broker's, or the log's newest).
    pub leader_epoch: i32,
    /// The log start and end offsets once opened here.
    pub log_start_offset: i64,
    /// The log end offset once opened here.
    pub log_end_offset: i64,
    /// Bytes an unclean broker's recovery cut here (0 after a clean shutdown).
    pub bytes_truncated: u64,
    /// Whether the broker had no directory for it (created empty).
    pub created_empty: bool,
    /// Its files.
    pub files: PlacedFiles,
}

/// How the group offsets came along.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GroupOffsetsImport {
    /// The broker's `__consumer_offsets` partition count (0: it had none).
    pub broker_partitions: i32,
    /// `as_is` (the broker's partitions taken whole: it had klog's 50), `replaced` (every committed
    /// offset written again in klog's placement) or `none`.
    pub placement: &'static str,
    /// The offsets committed (group, topic, partition) carried over when replaced.
    pub offsets: usize,
    /// The broker's `__consumer_offsets` files placed (as_is).
    pub files: PlacedFiles,
}

/// A directory of the broker's log directory not imported.
#[derive(Debug, Clone, Serialize)]
pub struct SkippedDir {
    /// Its name.
    pub dir: String,
    /// Why: `stray` (the metadata does not have it), `marked` (`-delete`, `-stray`, `-future`),
    /// `internal` (a Kafka internal topic klog does not keep), `not_a_partition`.
    pub reason: &'static str,
    /// The details.
    pub message: String,
}

impl MetadataSummary {
    /// What `m` says, for the report.
    pub(crate) fn of(m: &MetadataLog) -> Self {
        MetadataSummary {
            dir: m.dir.clone(),
            snapshot: m.snapshot.map(|s| s.file_name()),
            end_offset: m.end_offset,
            records: m.records,
            open_transaction: m.open_transaction,
        }
    }
}
