//! Kafka's names for topics and partition directories: `Topic.validate` (ASCII letters, digits, `.`,
//! `_` and `-`; 1 to 249 characters; not `.` or `..`) and `LocalLog.parseTopicPartitionName`
//! (`<topic>-<partition>`, plus the `<topic>-<partition>.<id>-delete`, `-future` and `-stray`
//! directories of partitions being deleted, moved between log directories or dropped).
//!
//! Checked before a partition directory or a checkpoint line is written: a name klog accepted but
//! cannot read back (a space splits a checkpoint line) would make the whole checkpoint file unreadable.

/// `Topic.MAX_NAME_LENGTH`.
pub const MAX_TOPIC_NAME_LENGTH: usize = 249;

/// Directories of partitions on their way out or in (`LogFileUtils`): not partitions a reader opens.
pub const DELETE_DIR_SUFFIX: &str = "-delete";
/// The suffix of a future replica's directory (a move between log directories).
pub const FUTURE_DIR_SUFFIX: &str = "-future";
/// The suffix of a stray partition's directory (no longer assigned to this broker).
pub const STRAY_DIR_SUFFIX: &str = "-stray";

/// `RemoteIndexCache.DIR_NAME`: the one non-partition directory Kafka keeps in a log directory.
pub const REMOTE_INDEX_CACHE_DIR: &str = "remote-log-index-cache";

/// What a directory of a log directory is, by its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionDirName {
    /// `<topic>-<partition>`: a live partition.
    Partition {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// `<topic>-<partition>.<id><suffix>` with one of the three suffixes above.
    Marked {
        /// `-delete`, `-future` or `-stray`.
        suffix: &'static str,
    },
}

/// Kafka's `Topic.validate`: why `topic` is not a legal topic name.
pub fn validate_topic(topic: &str) -> Result<(), String> {
    if topic.is_empty() {
        return Err("the topic name is empty".into());
    }
    if topic == "." || topic == ".." {
        return Err(format!("{topic:?} is not a legal topic name"));
    }
    if topic.len() > MAX_TOPIC_NAME_LENGTH {
        return Err(format!(
            "the topic name is {} characters, more than {MAX_TOPIC_NAME_LENGTH}",
            topic.len()
        ));
    }
    match topic.chars().find(|c| !is_legal_char(*c)) {
        Some(c) => Err(format!(
            "{c:?} is not allowed in a topic name (only ASCII letters, digits, '.', '_' and '-')"
        )),
        None => Ok(()),
    }
}

fn is_legal_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// Parses a directory name as Kafka's `parseTopicPartitionName` does, with the topic under
/// `Topic.validate` and the partition written as Kafka writes it (decimal, no sign, no leading zero), so
/// that every accepted name is exactly `<topic>-<partition>` and no two directories name one partition.
pub fn parse_partition_dir_name(name: &str) -> Result<PartitionDirName, String> {
    for suffix in [DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX] {
        if let Some(rest) = name.strip_suffix(suffix) {
            // `^(\S+)-(\S+)\.(\S+)<suffix>`: a partition directory name, a dot, an id.
            let marked = rest
                .rsplit_once('.')
                .filter(|(dir, id)| !id.is_empty() && !dir.contains(char::is_whitespace))
                .is_some_and(|(dir, _)| parse_live(dir).is_ok());
            return if marked {
                Ok(PartitionDirName::Marked { suffix })
            } else {
                Err(format!(
                    "a name ending in {suffix} must be <topic>-<partition>.<id>{suffix}"
                ))
            };
        }
    }
    parse_live(name)
}

fn parse_live(name: &str) -> Result<PartitionDirName, String> {
    let (topic, partition) = name
        .rsplit_once('-')
        .ok_or_else(|| "there is no '-' before a partition number".to_owned())?;
    validate_topic(topic)?;
    let canonical = !partition.is_empty()
        && partition.bytes().all(|b| b.is_ascii_digit())
        && (partition == "0" || !partition.starts_with('0'));
    let partition = canonical
        .then(|| partition.parse::<i32>().ok())
        .flatten()
        .ok_or_else(|| {
            format!("partition {partition:?} is not a non-negative 32-bit number written without sign or leading zero")
        })?;
    Ok(PartitionDirName::Partition {
        topic: topic.to_owned(),
        partition,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_topic_rules() {
        for ok in [
            "a",
            "A.b_c-d",
            "__consumer_offsets",
            &"t".repeat(249),
            "...",
        ] {
            validate_topic(ok).unwrap();
        }
        for bad in ["", ".", "..", "a b", "a/b", "ä", "a\tb", &"t".repeat(250)] {
            assert!(validate_topic(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn partition_directory_names() {
        let live = |topic: &str, partition| PartitionDirName::Partition {
            topic: topic.into(),
            partition,
        };
        assert_eq!(parse_partition_dir_name("t-0"), Ok(live("t", 0)));
        assert_eq!(parse_partition_dir_name("a-b-12"), Ok(live("a-b", 12)));
        assert_eq!(
            parse_partition_dir_name("t--0"),
            Ok(live("t-", 0)),
            "Kafka splits at the last '-'"
        );
        assert_eq!(
            parse_partition_dir_name("t-3.9f1c2e-delete"),
            Ok(PartitionDirName::Marked {
                suffix: DELETE_DIR_SUFFIX
            })
        );
        assert_eq!(
            parse_partition_dir_name("t-3.x-stray"),
            Ok(PartitionDirName::Marked {
                suffix: STRAY_DIR_SUFFIX
            })
        );
        for bad in [
            "t",
            "t-",
            "-0",
            "t-x",
            "t-+1",
            "t-01",
            "t--1x",
            "t-2147483648",
            "a b-0",
            "t-delete",
            "t-0.-future",
            "t-0-stray",
        ] {
            assert!(parse_partition_dir_name(bad).is_err(), "{bad:?}");
        }
    }
}
