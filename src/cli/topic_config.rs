//! Where `recover`, `verify`, `producers` and `read` take a partition's topic config from: `--config`
//! first, then the KRaft metadata log of the log directory (`__cluster_metadata-0` in it, or in
//! `--metadata-log-dir`, Kafka's `metadata.log.dir`), then Kafka's defaults. Each value set is reported
//! with its source (docs/cli.md, "Topic configs").

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use klog::log::checkpoint::read_partition_metadata;
use klog::log::config::LogConfig;
use klog::log::io::{ReadOnlyStorage, StdStorage};
use klog::log::kraft::{
    load_metadata_log, ConfigSource, MetadataLog, TopicConfig, METADATA_PARTITION_DIR,
};
use klog::log::partition_log::partition_dir_name;
use serde_json::json;

#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    /// A topic configuration, `key=value` with Kafka's names (repeatable); wins over the metadata log.
    #[arg(long = "config", value_name = "KEY=VALUE")]
    pub configs: Vec<String>,
    /// Kafka's `metadata.log.dir`: where `__cluster_metadata-0` is (default: the log directory itself).
    /// Its records give the topics' configs.
    #[arg(long, value_name = "DIR")]
    pub metadata_log_dir: Option<PathBuf>,
}

/// The configs of one log directory's partitions.
pub struct TopicConfigs {
    metadata: Option<MetadataLog>,
    node_id: Option<i32>,
    explicit: Vec<(String, String)>,
}

/// The `__cluster_metadata-0` directory `dir` names: itself, or the one inside it.
pub fn metadata_partition_dir(dir: &Path) -> PathBuf {
    if dir.file_name().is_some_and(|n| n == METADATA_PARTITION_DIR) {
        dir.to_owned()
    } else {
        dir.join(METADATA_PARTITION_DIR)
    }
}

/// Reads a metadata log directory without changing anything (a reader: files opened read-only).
pub fn read_metadata(dir: &Path) -> Result<MetadataLog, klog::log::Error> {
    let storage = ReadOnlyStorage::new(Arc::new(StdStorage));
    load_metadata_log(&storage, dir)
}

impl TopicConfigs {
    /// For the partitions of log directory `root`. A `--config` that is not valid stops the command (exit
    /// 2); a metadata log that cannot be read is a warning, and Kafka's defaults stand.
    pub fn load(args: &ConfigArgs, root: &Path) -> anyhow::Result<Self> {
        LogConfig::from_pairs(args.configs.iter().map(String::as_str))?;
        let explicit = args
            .configs
            .iter()
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect();
        let dir = match &args.metadata_log_dir {
            Some(dir) => {
                let dir = metadata_partition_dir(dir);
                anyhow::ensure!(
                    dir.is_dir(),
                    "{}: no such metadata log directory",
                    dir.display()
                );
                Some(dir)
            }
            None => Some(root.join(METADATA_PARTITION_DIR)).filter(|d| d.is_dir()),
        };
        let metadata = dir.and_then(|dir| match read_metadata(&dir) {
            Ok(log) => Some(log),
            Err(e) => {
                errln!("klog: warning: {e}; the metadata log's topic configs are not used (Kafka's defaults stand unless --config sets them)");
                None
            }
        });
        Ok(TopicConfigs {
            metadata,
            node_id: node_id(root),
            explicit,
        })
    }

    /// The metadata log read, if any.
    pub fn metadata_dir(&self) -> Option<&Path> {
        self.metadata.as_ref().map(|m| m.dir.as_path())
    }

    /// The config of partition directory `name` of log directory `root`. Warnings (a value klog cannot
    /// use, a topic id that differs from the metadata log's) go to stderr.
    pub fn for_partition(&self, root: &Path, name: &str) -> TopicConfig {
        let dir = root.join(name);
        let mut config = match (&self.metadata, partition_dir_name(&dir)) {
            // The metadata log's own config comes from the controller's `metadata.log.*` settings, not
            // from the topic and broker configs it holds.
            _ if name == METADATA_PARTITION_DIR => default_config(),
            (Some(metadata), Ok((topic, _))) => {
                let image = &metadata.image;
                let on_disk = read_partition_metadata(&StdStorage, &dir).ok().flatten();
                match (image.topic(&topic), on_disk) {
                    (Some(t), Some(id)) if t.topic_id != id => {
                        errln!("klog: warning: {}: topic id {id} differs from the metadata log's {} for topic {topic} (a deleted topic's partition?): its configs are not used", dir.display(), t.topic_id);
                        default_config()
                    }
                    _ => image.topic_config(&topic, self.node_id),
                }
            }
            _ => default_config(),
        };
        for (k, v) in &self.explicit {
            config.set(k, k.clone(), v.clone(), ConfigSource::CommandLine);
        }
        for e in config.entries.iter().filter(|e| e.refused.is_some()) {
            errln!(
                "klog: warning: {}: {}={} from {} not used: {}; Kafka's default stands",
                dir.display(),
                e.set_as,
                e.value,
                e.source.name(),
                e.refused.as_deref().unwrap_or_default()
            );
        }
        config
    }
}

fn default_config() -> TopicConfig {
    TopicConfig {
        config: LogConfig::default(),
        entries: Vec::new(),
    }
}

/// `node.id` from the log directory's `meta.properties` (which broker's dynamic configs apply).
fn node_id(root: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(root.join("meta.properties")).ok()?;
    text.lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == "node.id")
        .and_then(|(_, v)| v.trim().parse().ok())
}

/// `"configs"` in the JSON reports: every value set other than by Kafka's default, with its source.
pub fn configs_json(config: &TopicConfig) -> serde_json::Value {
    config
        .entries
        .iter()
        .map(|e| {
            json!({
                "name": e.name,
                "value": e.value,
                "source": e.source.name(),
                "synonym": (e.set_as != e.name).then_some(&e.set_as),
                "refused": e.refused,
            })
        })
        .collect()
}

/// The text form: `name=value (SOURCE), ...`, or `None` when every config is Kafka's default.
pub fn configs_text(config: &TopicConfig) -> Option<String> {
    let used: Vec<String> = config
        .entries
        .iter()
        .filter(|e| e.refused.is_none())
        .map(|e| {
            let via = if e.set_as != e.name {
                format!(" as {}", e.set_as)
            } else {
                String::new()
            };
            format!("{}={} ({}{via})", e.name, e.value, e.source.name())
        })
        .collect();
    (!used.is_empty()).then(|| used.join(", "))
}
