//! `klog dump`'s KRaft metadata decoder (`kafka-dump-log --cluster-metadata-decoder`): the records of
//! `__cluster_metadata` segments and of KRaft snapshots (`<end offset>-<epoch>.checkpoint`), and the KRaft
//! control records (snapshot header and footer, KRaft version, voters) wherever they appear.
//!
//! Text is Kafka's: ` payload: {"type":"TOPIC_RECORD","version":0,"data":{...}}` per data record, ` Error at
//! <offset>, skipping. <why>` for one that does not decode, ` SnapshotHeader {...}` for a control record.
//! JSON adds `"cluster_metadata"` to each record object (docs/cli.md).

use std::path::Path;

use klog::log::format::{ControlRecordType, Record};
use klog::log::kraft::{decode_control_value, MetadataRecord, SnapshotId, METADATA_PARTITION_DIR};

/// Kafka's name of the bootstrap snapshot (`BootstrapDirectory.BINARY_BOOTSTRAP_FILENAME`).
const BOOTSTRAP_SNAPSHOT: &str = "bootstrap.checkpoint";

/// Whether the file's records are metadata records: asked for, or a file of `__cluster_metadata-0`, or a
/// KRaft snapshot wherever it is.
pub fn applies(asked: bool, path: &Path) -> bool {
    let in_metadata_dir = path
        .parent()
        .and_then(|p| p.file_name())
        .is_some_and(|n| n == METADATA_PARTITION_DIR);
    asked || in_metadata_dir || snapshot_header(path).is_some()
}

/// For a KRaft snapshot file, the line `kafka-dump-log` prints before its batches.
pub fn snapshot_header(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    if name == BOOTSTRAP_SNAPSHOT {
        return Some("KRaft bootstrap snapshot".into());
    }
    let id = SnapshotId::parse_file_name(name)?;
    Some(format!(
        "Snapshot end offset: {}, epoch: {}",
        id.end_offset, id.epoch
    ))
}

/// A data record's text: ` payload: <Kafka's JSON>`, or Kafka's error line and the problem to report.
pub fn payload_text(r: &Record<'_>) -> (String, Option<String>) {
    match MetadataRecord::decode(r.value) {
        Ok(m) => (format!(" payload: {}", m.to_kafka_json()), None),
        Err(e) => (
            format!(" payload: Error at {}, skipping. {e}", r.offset),
            Some(format!("metadata record at offset {}: {e}", r.offset)),
        ),
    }
}

/// A data record's `"cluster_metadata"`: `{"type", "version", "data"}` as Kafka prints it, or `{"error"}`.
pub fn record_json(r: &Record<'_>) -> serde_json::Value {
    match MetadataRecord::decode(r.value) {
        Ok(m) => serde_json::from_str(&m.to_kafka_json())
            .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() })),
        Err(e) => serde_json::json!({ "error": e.to_string() }),
    }
}

/// A KRaft control record's text as Kafka prints it (` SnapshotHeader {...}`); `None` for other types.
pub fn control_text(record_type: ControlRecordType, value: Option<&[u8]>) -> Option<String> {
    let decoded = decode_control_value(record_type, value.unwrap_or_default())?;
    Some(match decoded {
        Ok((label, message)) => format!(" {label} {}", message.to_kafka_json()),
        Err(e) => format!(" controlError: {e}"),
    })
}

/// A KRaft control record's `"cluster_metadata"`: `{"type": "SnapshotHeader", "data": {...}}`.
pub fn control_json(
    record_type: ControlRecordType,
    value: Option<&[u8]>,
) -> Option<serde_json::Value> {
    let decoded = decode_control_value(record_type, value.unwrap_or_default())?;
    Some(match decoded {
        Ok((label, message)) => {
            let data: serde_json::Value =
                serde_json::from_str(&message.to_kafka_json()).unwrap_or_default();
            serde_json::json!({ "type": label, "data": data })
        }
        Err(e) => serde_json::json!({ "error": e.to_string() }),
    })
}
