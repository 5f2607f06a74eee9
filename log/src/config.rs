//! Per-partition log configuration, with Kafka's names and defaults (`LogConfig.java`, spec §2.9).
//! Invalid values are refused with the key and the reason.

use crate::format::TimestampType;
use crate::io::IoBackend;
use crate::Error;

/// A partition's topic configuration, with Kafka's names and defaults (`LogConfig.java`).
///
/// ```
/// let mut config = klog_log::config::LogConfig::default();
/// config.set("segment.bytes", "1048576")?;
/// assert_eq!(config.segment_bytes, 1 << 20);
/// assert!(config.set("segment.bytes", "-1").is_err()); // refused, naming the key
/// # Ok::<(), klog_log::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would exceed this.
    pub segment_bytes: u32,
    /// `segment.ms`: roll when the active segment's first timestamp is this old.
    pub segment_ms: i64,
    /// `segment.jitter.ms`: up to this much is taken off `segment.ms` per segment.
    pub segment_jitter_ms: i64,
    /// `segment.index.bytes`: the size limit of each `.index` / `.timeindex`.
    pub segment_index_bytes: u32,
    /// `index.interval.bytes`: bytes between two offset index entries.
    pub index_interval_bytes: u32,
    /// `retention.ms` (-1: keep forever).
    pub retention_ms: i64,
    /// `retention.bytes` (-1: no limit).
    pub retention_bytes: i64,
    /// `max.message.bytes`: the largest batch accepted.
    pub max_message_bytes: u32,
    /// `flush.messages`: fsync after this many messages since the last flush.
    pub flush_messages: i64,
    /// `flush.ms`: fsync when the last flush is this old (checked by `maybe_flush`).
    pub flush_ms: i64,
    /// `preallocate`: create segments at full size and trim them when they roll.
    pub preallocate: bool,
    /// `message.timestamp.type`.
    pub message_timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms` / `message.timestamp.after.max.ms`: how far a CreateTime record
    /// may lie behind / ahead of the broker's clock. Kafka 4.0 (KIP-1030) made the second one hour.
    pub message_timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms` (see above).
    pub message_timestamp_after_max_ms: i64,
    /// `file.delete.delay.ms`: how long `.deleted` files are kept.
    pub file_delete_delay_ms: i64,
    /// `io_backend` (klog's own): `auto`, `std` or `uring`.
    pub io_backend: IoBackend,
    /// `producer.id.expiration.ms`: how long an idle producer (no open transaction) is remembered.
    pub producer_id_expiration_ms: i64,
    /// `producer.id.expiration.check.interval.ms`: how often a running log forgets expired producers
    /// (`PartitionLog::maybe_expire_producers`). A broker setting in Kafka; here per log.
    pub producer_id_expiration_check_interval_ms: i64,
    /// `cleanup.policy`: a list of `compact` and `delete` (default `delete`).
    pub cleanup_policy: CleanupPolicy,
    /// `min.cleanable.dirty.ratio` (0.5): a log is cleaned when its dirty ratio is above this.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms` (0): records younger than this stay uncleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms` (`i64::MAX`): a dirty segment older than this is cleaned whatever the ratio,
    /// and a compacted topic's active segment rolls at `min(max.compaction.lag.ms, segment.ms)`.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms` (86400000): how long the cleaner keeps tombstones and transaction markers.
    pub delete_retention_ms: i64,
}

/// `cleanup.policy`: which of Kafka's two cleanups apply (`LogConfig.compact` / `LogConfig.delete`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// `compact`: the cleaner keeps the latest record of each key.
    pub compact: bool,
    /// `delete`: retention by `retention.ms` / `retention.bytes`.
    pub delete: bool,
}

impl Default for CleanupPolicy {
    fn default() -> Self {
        CleanupPolicy {
            compact: false,
            delete: true,
        }
    }
}

impl CleanupPolicy {
    /// Parses Kafka's list (`ValidList.in("compact", "delete")`): comma-separated, spaces around items
    /// ignored, each item exactly `compact` or `delete`.
    pub fn parse(value: &str) -> Result<Self, Error> {
        let mut policy = CleanupPolicy {
            compact: false,
            delete: false,
        };
        if value.trim().is_empty() {
            return Ok(policy);
        }
        for item in value.split(',').map(str::trim) {
            match item {
                "compact" => policy.compact = true,
                "delete" => policy.delete = true,
                _ => {
                    return Err(bad(
                        "cleanup.policy",
                        value,
                        "expected a list of compact and delete",
                    ))
                }
            }
        }
        Ok(policy)
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1_073_741_824,
            segment_ms: 604_800_000,
            segment_jitter_ms: 0,
            segment_index_bytes: 10_485_760,
            index_interval_bytes: 4096,
            retention_ms: 604_800_000,
            retention_bytes: -1,
            max_message_bytes: 1_048_588,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            preallocate: false,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: 3_600_000,
            file_delete_delay_ms: 60_000,
            io_backend: IoBackend::Auto,
            producer_id_expiration_ms: 86_400_000,
            producer_id_expiration_check_interval_ms: 600_000,
            cleanup_policy: CleanupPolicy::default(),
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 86_400_000,
        }
    }
}

/// The keys `set` understands.
pub const KEYS: [&str; 23] = [
    "segment.bytes",
    "segment.ms",
    "segment.jitter.ms",
    "segment.index.bytes",
    "index.interval.bytes",
    "retention.ms",
    "retention.bytes",
    "max.message.bytes",
    "flush.messages",
    "flush.ms",
    "preallocate",
    "message.timestamp.type",
    "message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms",
    "file.delete.delay.ms",
    "io_backend",
    "producer.id.expiration.ms",
    "producer.id.expiration.check.interval.ms",
    "cleanup.policy",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "delete.retention.ms",
];

fn bad(key: &'static str, value: &str, reason: &'static str) -> Error {
    Error::Config {
        key,
        value: value.to_owned(),
        reason,
    }
}

fn int(key: &'static str, value: &str, min: i64, max: i64) -> Result<i64, Error> {
    let v: i64 = value
        .trim()
        .parse()
        .map_err(|_| bad(key, value, "not an integer"))?;
    if v < min {
        return Err(bad(key, value, "below the minimum"));
    }
    if v > max {
        return Err(bad(key, value, "above the maximum"));
    }
    Ok(v)
}

impl LogConfig {
    /// Sets one value by its Kafka name.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), Error> {
        let key: &'static str = KEYS
            .iter()
            .find(|k| **k == key)
            .ok_or_else(|| Error::Config {
                key: "(unknown)",
                value: key.to_owned(),
                reason: "unknown configuration key",
            })?;
        let i32_max = i32::MAX as i64;
        match key {
            "segment.bytes" => self.segment_bytes = int(key, value, 14, i32_max)? as u32,
            "segment.ms" => self.segment_ms = int(key, value, 1, i64::MAX)?,
            "segment.jitter.ms" => self.segment_jitter_ms = int(key, value, 0, i64::MAX)?,
            "segment.index.bytes" => self.segment_index_bytes = int(key, value, 4, i32_max)? as u32,
            "index.interval.bytes" => {
                self.index_interval_bytes = int(key, value, 0, i32_max)? as u32
            }
            "retention.ms" => self.retention_ms = int(key, value, -1, i64::MAX)?,
            "retention.bytes" => self.retention_bytes = int(key, value, i64::MIN, i64::MAX)?,
            "max.message.bytes" => self.max_message_bytes = int(key, value, 0, i32_max)? as u32,
            "flush.messages" => self.flush_messages = int(key, value, 1, i64::MAX)?,
            "flush.ms" => self.flush_ms = int(key, value, 0, i64::MAX)?,
            "preallocate" => {
                self.preallocate = match value {
                    "true" => true,
                    "false" => false,
                    _ => return Err(bad(key, value, "expected true or false")),
                }
            }
            "message.timestamp.type" => {
                self.message_timestamp_type = match value {
                    "CreateTime" => TimestampType::CreateTime,
                    "LogAppendTime" => TimestampType::LogAppendTime,
                    _ => return Err(bad(key, value, "expected CreateTime or LogAppendTime")),
                }
            }
            "message.timestamp.before.max.ms" => {
                self.message_timestamp_before_max_ms = int(key, value, 0, i64::MAX)?
            }
            "message.timestamp.after.max.ms" => {
                self.message_timestamp_after_max_ms = int(key, value, 0, i64::MAX)?
            }
            "file.delete.delay.ms" => self.file_delete_delay_ms = int(key, value, 0, i64::MAX)?,
            "io_backend" => {
                self.io_backend = IoBackend::parse(value)
                    .ok_or_else(|| bad(key, value, "expected auto, std or uring"))?
            }
            "producer.id.expiration.ms" => {
                self.producer_id_expiration_ms = int(key, value, 1, i64::MAX)?
            }
            "producer.id.expiration.check.interval.ms" => {
                self.producer_id_expiration_check_interval_ms = int(key, value, 1, i32::MAX as i64)?
            }
            "cleanup.policy" => self.cleanup_policy = CleanupPolicy::parse(value)?,
            "min.cleanable.dirty.ratio" => {
                let v: f64 = value
                    .trim()
                    .parse()
                    .map_err(|_| bad(key, value, "not a number"))?;
                if !(0.0..=1.0).contains(&v) {
                    return Err(bad(key, value, "not between 0 and 1"));
                }
                self.min_cleanable_dirty_ratio = v
            }
            "min.compaction.lag.ms" => {
                let v = int(key, value, 0, i64::MAX)?;
                if v > self.max_compaction_lag_ms {
                    return Err(bad(key, value, "above max.compaction.lag.ms"));
                }
                self.min_compaction_lag_ms = v
            }
            "max.compaction.lag.ms" => {
                let v = int(key, value, 1, i64::MAX)?;
                if v < self.min_compaction_lag_ms {
                    return Err(bad(key, value, "below min.compaction.lag.ms"));
                }
                self.max_compaction_lag_ms = v
            }
            "delete.retention.ms" => self.delete_retention_ms = int(key, value, 0, i64::MAX)?,
            _ => unreachable!("every key in KEYS is handled"),
        }
        Ok(())
    }

    /// `LogConfig.maxSegmentMs`: a compacted topic with `max.compaction.lag.ms` rolls its active segment
    /// at `min(max.compaction.lag.ms, segment.ms)`, so the cleaner can reach its records in time.
    pub fn max_segment_ms(&self) -> i64 {
        if self.cleanup_policy.compact && self.max_compaction_lag_ms > 0 {
            self.max_compaction_lag_ms.min(self.segment_ms)
        } else {
            self.segment_ms
        }
    }

    /// Parses `key=value` pairs (the CLI's `--config`).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = &'a str>) -> Result<Self, Error> {
        let mut c = LogConfig::default();
        for pair in pairs {
            let (k, v) = pair.split_once('=').ok_or(Error::Config {
                key: "(pair)",
                value: pair.to_owned(),
                reason: "expected key=value",
            })?;
            c.set(k.trim(), v.trim())?;
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_kafkas_and_bad_values_are_refused_by_name() {
        let c = LogConfig::default();
        assert_eq!(
            (c.segment_bytes, c.index_interval_bytes, c.max_message_bytes),
            (1 << 30, 4096, 1_048_588)
        );
        assert_eq!(
            (
                c.message_timestamp_before_max_ms,
                c.message_timestamp_after_max_ms
            ),
            (i64::MAX, 3_600_000),
            "ServerLogConfigs in Kafka 4.x"
        );
        let c =
            LogConfig::from_pairs(["segment.bytes=1024", "message.timestamp.type=LogAppendTime"])
                .unwrap();
        assert_eq!(c.segment_bytes, 1024);
        assert_eq!(c.message_timestamp_type, TimestampType::LogAppendTime);
        let err = LogConfig::from_pairs(["segment.bytes=13"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("segment.bytes") && err.contains("minimum"),
            "{err}"
        );
        assert!(LogConfig::from_pairs(["nope=1"])
            .unwrap_err()
            .to_string()
            .contains("unknown"));
        assert!(LogConfig::from_pairs(["retention.ms=x"]).is_err());
        assert!(LogConfig::from_pairs(["io_backend=floppy"]).is_err());
        assert!(LogConfig::from_pairs(["segment.bytes"]).is_err());
    }

    #[test]
    fn compaction_keys_have_kafkas_defaults_and_validation() {
        let c = LogConfig::default();
        assert_eq!(
            c.cleanup_policy,
            CleanupPolicy {
                compact: false,
                delete: true
            }
        );
        assert_eq!(c.max_segment_ms(), c.segment_ms);
        let c = LogConfig::from_pairs([
            "cleanup.policy=compact, delete",
            "max.compaction.lag.ms=1000",
            "min.cleanable.dirty.ratio=0.1",
        ])
        .unwrap();
        assert!(c.cleanup_policy.compact && c.cleanup_policy.delete);
        assert_eq!(
            c.max_segment_ms(),
            1000,
            "min(max.compaction.lag.ms, segment.ms)"
        );
        for bad in [
            "cleanup.policy=compacted",
            "cleanup.policy=COMPACT",
            "min.cleanable.dirty.ratio=1.5",
            "max.compaction.lag.ms=0",
            "delete.retention.ms=-1",
        ] {
            let err = LogConfig::from_pairs([bad]).unwrap_err().to_string();
            assert!(err.contains(bad.split('=').next().unwrap()), "{bad}: {err}");
        }
        assert!(
            LogConfig::from_pairs(["max.compaction.lag.ms=10", "min.compaction.lag.ms=20"])
                .is_err()
        );
    }
}
