//! Kafka's small text files: offset checkpoints, `partition.metadata`, `.kafka_cleanshutdown`.
//!
//! Checkpoint format (`CheckpointFile.java`): `<version>\n<count>\n<entry>\n...`, entries split on
//! whitespace; written through a temp file, fsync, rename and a directory fsync.
//!
//! A line that does not parse is an error naming the file and the line ([`read_offsets`]); only recovery
//! reads past it ([`read_offsets_salvaging`]), keeping every entry that parses and naming the others.

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;

use crate::error::IoContext;
use crate::io::{read_file, write_atomic, Storage};
use crate::topic_partition::validate_topic;
use crate::Error;

/// The log directory's checkpoint of each partition's recovery point (`recovery-point-offset-checkpoint`).
pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
/// The log directory's checkpoint of log start offsets above a partition's first segment.
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
/// The log directory's checkpoint of each partition's high watermark.
pub const REPLICATION_OFFSET_CHECKPOINT: &str = "replication-offset-checkpoint";
/// The clean-shutdown marker: present, nothing needs rescanning at the next open.
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
/// A partition directory's topic id file.
pub const PARTITION_METADATA_FILE: &str = "partition.metadata";
/// A partition directory's leader-epoch cache.
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";

/// The entry lines of a version-0 checkpoint file, each split on whitespace. A missing or empty file has none.
pub fn read_checkpoint(storage: &dyn Storage, path: &Path) -> Result<Vec<Vec<String>>, Error> {
    let lines = read_checkpoint_lines(storage, path)?;
    Ok(lines.into_iter().map(|(_, fields)| fields).collect())
}

/// An entry line of a checkpoint file: its line number (1-based) and its fields.
pub type CheckpointLine = (usize, Vec<String>);

/// [`read_checkpoint`] with each entry's line number in the file.
pub fn read_checkpoint_lines(
    storage: &dyn Storage,
    path: &Path,
) -> Result<Vec<CheckpointLine>, Error> {
    let (entries, problems) = checkpoint_lines(storage, path)?;
    match problems.into_iter().next() {
        Some(first) => Err(first),
        None => Ok(entries),
    }
}

/// The entry lines that could be read, and every problem found (header first, in line order).
fn checkpoint_lines(
    storage: &dyn Storage,
    path: &Path,
) -> Result<(Vec<CheckpointLine>, Vec<Error>), Error> {
    let Some(bytes) = read_file(storage, path).at(path)? else {
        return Ok((Vec::new(), Vec::new()));
    };
    let corrupt = |line: usize, reason: String| Error::CorruptFile {
        path: path.to_owned(),
        line,
        reason,
    };
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let bytes = e.as_bytes();
            let line = 1 + bytes[..e.utf8_error().valid_up_to()]
                .iter()
                .filter(|b| **b == b'\n')
                .count();
            return Ok((Vec::new(), vec![corrupt(line, "not UTF-8".into())]));
        }
    };
    let mut lines = text.lines();
    let Some(version) = lines.next() else {
        return Ok((Vec::new(), Vec::new()));
    };
    if version.trim() != "0" {
        let problem = corrupt(1, format!("unsupported version {version:?}"));
        return Ok((Vec::new(), vec![problem]));
    }
    let count = lines.next().and_then(|l| l.trim().parse::<usize>().ok());
    let entries: Vec<CheckpointLine> = lines
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i + 3, l.split_whitespace().map(str::to_owned).collect()))
        .collect();
    let problems = match count {
        None => vec![corrupt(2, "missing entry count".into())],
        Some(c) if c != entries.len() => vec![corrupt(
            2,
            format!("header says {c} entries, found {}", entries.len()),
        )],
        Some(_) => Vec::new(),
    };
    Ok((entries, problems))
}

/// Writes a version-0 checkpoint file durably.
pub fn write_checkpoint(
    storage: &dyn Storage,
    path: &Path,
    entries: &[String],
) -> Result<(), Error> {
    let mut text = format!("0\n{}\n", entries.len());
    for e in entries {
        text.push_str(e);
        text.push('\n');
    }
    write_atomic(storage, path, text.as_bytes()).at(path)
}

/// A `(topic, partition) -> offset` checkpoint of a log directory.
pub type OffsetMap = BTreeMap<(String, i32), i64>;

/// A `(topic, partition) -> offset` checkpoint; any line that does not parse is an error naming it.
pub fn read_offsets(storage: &dyn Storage, path: &Path) -> Result<OffsetMap, Error> {
    let (map, problems) = read_offsets_salvaging(storage, path)?;
    match problems.into_iter().next() {
        Some(first) => Err(first),
        None => Ok(map),
    }
}

/// For recovery: the entries that parse, and a `CorruptFile` naming each line that does not (a bad
/// header keeps the entries below it; an unknown version keeps none). Only I/O failures are errors.
pub fn read_offsets_salvaging(
    storage: &dyn Storage,
    path: &Path,
) -> Result<(OffsetMap, Vec<Error>), Error> {
    let (lines, mut problems) = checkpoint_lines(storage, path)?;
    let mut map = OffsetMap::new();
    for (line, e) in lines {
        let parsed = match e.as_slice() {
            [topic, partition, offset] => partition
                .parse::<i32>()
                .ok()
                .zip(offset.parse::<i64>().ok())
                .map(|(p, o)| (topic, p, o)),
            _ => None,
        };
        match parsed {
            Some((topic, partition, offset)) => {
                map.insert((topic.clone(), partition), offset);
            }
            None => problems.push(Error::CorruptFile {
                path: path.to_owned(),
                line,
                reason: format!("expected 'topic partition offset', got {e:?}"),
            }),
        }
    }
    problems.sort_by_key(|p| match p {
        Error::CorruptFile { line, .. } => *line,
        _ => 0,
    });
    Ok((map, problems))
}

/// Writes a `(topic, partition) -> offset` checkpoint. Every entry must name a legal topic and a
/// non-negative partition: a line klog (or Kafka) could not read back would make the whole file unreadable.
pub fn write_offsets(storage: &dyn Storage, path: &Path, map: &OffsetMap) -> Result<(), Error> {
    if let Some(((t, p), _)) = map
        .iter()
        .find(|((t, p), _)| *p < 0 || validate_topic(t).is_err())
    {
        return Err(Error::Config {
            key: "(checkpoint entry)",
            value: format!("{t} {p}"),
            reason: "not a legal topic and partition: the file could not be read back",
        });
    }
    let entries: Vec<String> = map
        .iter()
        .map(|((t, p), o)| format!("{t} {p} {o}"))
        .collect();
    write_checkpoint(storage, path, &entries)
}

/// A topic id: 16 bytes, written as URL-safe base64 without padding (Kafka's `Uuid.toString()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicId(pub [u8; 16]);

impl TopicId {
    /// Parses Kafka's base64 (URL-safe, unpadded, 22 characters) form.
    pub fn parse(s: &str) -> Option<Self> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s)
            .ok()?;
        let id = TopicId(bytes.try_into().ok()?);
        (id.0 != [0; 16]).then_some(id)
    }

    /// A fresh random id (version-4 style bits, as Kafka's `Uuid.randomUuid`), from a caller's entropy.
    pub fn from_random(mut bytes: [u8; 16]) -> Self {
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        TopicId(bytes)
    }
}

impl std::fmt::Display for TopicId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(self.0))
    }
}

/// `partition.metadata`: exactly `version: 0\ntopic_id: <id>`, no trailing newline.
pub fn write_partition_metadata(
    storage: &dyn Storage,
    dir: &Path,
    topic_id: TopicId,
) -> Result<(), Error> {
    let path = dir.join(PARTITION_METADATA_FILE);
    write_atomic(
        storage,
        &path,
        format!("version: 0\ntopic_id: {topic_id}").as_bytes(),
    )
    .at(&path)
}

/// Reads a partition directory's `partition.metadata` (version and topic id); `None` when absent.
pub fn read_partition_metadata(
    storage: &dyn Storage,
    dir: &Path,
) -> Result<Option<TopicId>, Error> {
    let path = dir.join(PARTITION_METADATA_FILE);
    let Some(bytes) = read_file(storage, &path).at(&path)? else {
        return Ok(None);
    };
    let corrupt = |line, reason: &str| Error::CorruptFile {
        path: path.clone(),
        line,
        reason: reason.into(),
    };
    let text = String::from_utf8(bytes).map_err(|_| corrupt(0, "not UTF-8"))?;
    let mut version = None;
    let mut topic_id = None;
    for (i, line) in text.lines().enumerate() {
        let (k, v) = line
            .split_once(':')
            .ok_or_else(|| corrupt(i + 1, "expected 'key: value'"))?;
        match k.trim() {
            "version" => version = v.trim().parse::<i32>().ok().filter(|v| *v >= 0),
            "topic_id" => topic_id = TopicId::parse(v.trim()),
            _ => return Err(corrupt(i + 1, "unknown key")),
        }
    }
    version.ok_or_else(|| corrupt(1, "missing or negative version"))?;
    topic_id
        .map(Some)
        .ok_or_else(|| corrupt(2, "missing or invalid topic id"))
}

/// `.kafka_cleanshutdown`: `{"version":0,"brokerEpoch":<epoch>}`; its existence is what counts.
pub fn write_clean_shutdown(
    storage: &dyn Storage,
    log_dir: &Path,
    broker_epoch: i64,
) -> Result<(), Error> {
    let path = log_dir.join(CLEAN_SHUTDOWN_FILE);
    write_atomic(
        storage,
        &path,
        format!("{{\"version\":0,\"brokerEpoch\":{broker_epoch}}}").as_bytes(),
    )
    .at(&path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::SimStorage;

    #[test]
    fn offsets_round_trip_in_kafkas_text() {
        let sim = SimStorage::new(1);
        let dir = Path::new("/logs");
        sim.create_dir_all(dir).unwrap();
        let path = dir.join(RECOVERY_POINT_CHECKPOINT);
        let mut map = OffsetMap::new();
        map.insert(("orders".into(), 3), 1200);
        map.insert(("__consumer_offsets".into(), 15), 256);
        write_offsets(&sim, &path, &map).unwrap();
        assert_eq!(
            String::from_utf8(sim.live_bytes(&path).unwrap()).unwrap(),
            "0\n2\n__consumer_offsets 15 256\norders 3 1200\n"
        );
        assert_eq!(read_offsets(&sim, &path).unwrap(), map);
        assert!(read_offsets(&sim, &dir.join("missing")).unwrap().is_empty());
        sim.corrupt(&path, b"0\n3\na 1 2\n".to_vec()).unwrap();
        assert!(read_offsets(&sim, &path)
            .unwrap_err()
            .to_string()
            .contains("header says 3"));
        sim.corrupt(&path, b"1\n0\n".to_vec()).unwrap();
        assert!(read_offsets(&sim, &path).is_err());
        sim.corrupt(&path, b"0\n1\na x 2\n".to_vec()).unwrap();
        assert!(read_offsets(&sim, &path).is_err());
    }

    #[test]
    fn partition_metadata_is_kafkas_exact_text() {
        let sim = SimStorage::new(1);
        let dir = Path::new("/logs/t-0");
        sim.create_dir_all(dir).unwrap();
        let id = TopicId::parse("Kgd3sAsuQ8OKtmYXbOf_vQ").unwrap();
        write_partition_metadata(&sim, dir, id).unwrap();
        assert_eq!(
            sim.live_bytes(&dir.join(PARTITION_METADATA_FILE)).unwrap(),
            b"version: 0\ntopic_id: Kgd3sAsuQ8OKtmYXbOf_vQ"
        );
        assert_eq!(read_partition_metadata(&sim, dir).unwrap(), Some(id));
        assert_eq!(
            TopicId::parse("AAAAAAAAAAAAAAAAAAAAAA"),
            None,
            "the zero id is refused"
        );
    }
}
