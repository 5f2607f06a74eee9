//! `klog dump`'s decoders for the coordinators' internal topics, as `kafka-dump-log`'s
//! `--offsets-decoder` (`__consumer_offsets`) and `--transaction-log-decoder` (`__transaction_state`):
//! chosen by flag, or by the partition directory the file is in.
//!
//! Text: Kafka's ` key: {"type":"1","data":{...}} payload: {"version":"3","data":{...}}` after a record's
//! line (`<DELETE>` for a tombstone, Kafka's "Unknown record type" and "Error at offset" texts for records
//! that do not decode). JSON: a `coordinator` object per record (docs/cli.md).

use std::path::Path;

use clap::Args;
use klog::log::coordinator::{
    to_json, Coordinator, CoordinatorCorruption, CoordinatorRecord, Json,
};
use klog::log::topic_partition::{parse_partition_dir_name, PartitionDirName};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};

/// The decoder flags (Kafka's names).
#[derive(Debug, Clone, Default, Args)]
pub struct DecoderArgs {
    /// Decode records as `__consumer_offsets` records (group coordinator), as Kafka's --offsets-decoder;
    /// on by itself for files in `__consumer_offsets-<n>` directories; implies --print-data-log.
    #[arg(long)]
    pub offsets_decoder: bool,
    /// Decode records as `__transaction_state` records (transaction coordinator), as Kafka's
    /// --transaction-log-decoder; on by itself for files in `__transaction_state-<n>` directories;
    /// implies --print-data-log.
    #[arg(long, conflicts_with = "offsets_decoder")]
    pub transaction_log_decoder: bool,
    /// Choose no decoder by the file's partition directory (`__consumer_offsets-<n>`,
    /// `__transaction_state-<n>`, `__mirror_state-<n>`): records print as for any topic, as
    /// kafka-dump-log prints them without a decoder flag.
    #[arg(long)]
    pub no_decoder: bool,
}

impl DecoderArgs {
    /// The coordinator whose records `path` holds: the flag's, else its partition directory's topic.
    pub fn coordinator_for(&self, path: &Path) -> Option<Coordinator> {
        if self.offsets_decoder {
            return Some(Coordinator::Group);
        }
        if self.transaction_log_decoder {
            return Some(Coordinator::Transaction);
        }
        if self.no_decoder {
            return None;
        }
        let dir = path.parent()?.file_name()?.to_str()?;
        match parse_partition_dir_name(dir).ok()? {
            PartitionDirName::Partition { topic, .. } => Coordinator::for_topic(&topic),
            PartitionDirName::Marked { .. } => None,
        }
    }
}

/// A record decoded for the text and the JSON, or why it was not.
pub enum Decoded {
    Record(Box<CoordinatorRecord>),
    /// A record type this release does not know: Kafka skips it (a newer broker's), not an error.
    UnknownType(i16),
    /// Kafka's message for it (what its dump prints), and klog's.
    Error {
        kafka: String,
        klog: String,
    },
}

/// Decodes a record (of a v2 batch or a legacy message set: Kafka's dump decodes both).
pub fn decode(
    coordinator: Coordinator,
    offset: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Decoded {
    match CoordinatorRecord::decode(coordinator, key, value) {
        Ok(rec) => Decoded::Record(Box::new(rec)),
        Err(klog::log::Error::CorruptCoordinatorRecord(CoordinatorCorruption::UnknownRecordType(
            t,
        ))) => Decoded::UnknownType(t),
        Err(klog::log::Error::CorruptCoordinatorRecord(CoordinatorCorruption::MissingKey)) => {
            Decoded::Error {
                kafka: format!("Failed to decode message at offset {} using the specified decoder (message had a missing key)", offset),
                klog: CoordinatorCorruption::MissingKey.to_string(),
            }
        }
        Err(klog::log::Error::CorruptCoordinatorRecord(c)) => Decoded::Error {
            kafka: format!("Error at offset {}, skipping. {}", offset, c.kafka_message()),
            klog: c.to_string(),
        },
        Err(other) => Decoded::Error {
            kafka: format!("Error at offset {}, skipping. {other}", offset),
            klog: other.to_string(),
        },
    }
}

impl Decoded {
    /// What `kafka-dump-log` prints after the record's metadata.
    pub fn kafka_text(&self, offset: i64) -> String {
        match self {
            Decoded::Record(rec) => {
                let payload = rec
                    .value_json()
                    .map_or_else(|| "<DELETE>".to_string(), |v| v.to_string());
                format!(" key: {} payload: {payload}", rec.key_json())
            }
            Decoded::UnknownType(t) => {
                format!(" key: Unknown record type {t} at offset {offset}, skipping.")
            }
            Decoded::Error { kafka, .. } => format!(" key: {kafka}"),
        }
    }

    /// The problem to report (the exit status becomes 1), if any.
    pub fn problem(&self, offset: i64) -> Option<String> {
        match self {
            Decoded::Error { klog, .. } => Some(format!("record at offset {offset}: {klog}")),
            _ => None,
        }
    }

    /// The record's `coordinator` object in `klog dump --json`.
    pub fn json(&self) -> CoordinatorJson {
        match self {
            Decoded::Record(rec) => CoordinatorJson::Record {
                record_type: rec.record_type,
                key_schema: rec.key_schema.name,
                key: JsonOut(to_json(&rec.key)),
                value: rec.value.as_ref().map(|(version, schema, _)| ValueJson {
                    version: *version,
                    schema: schema.name,
                    data: JsonOut(rec.value_data_json().unwrap_or(Json::Null)),
                }),
            },
            Decoded::UnknownType(t) => CoordinatorJson::Error {
                error: format!("unknown record type {t}"),
            },
            Decoded::Error { klog, .. } => CoordinatorJson::Error {
                error: klog.clone(),
            },
        }
    }
}

#[derive(Serialize)]
#[serde(untagged)]
pub enum CoordinatorJson {
    Record {
        record_type: i16,
        key_schema: &'static str,
        key: JsonOut,
        /// `null` for a tombstone.
        value: Option<ValueJson>,
    },
    Error {
        error: String,
    },
}

#[derive(Serialize)]
pub struct ValueJson {
    version: i16,
    schema: &'static str,
    data: JsonOut,
}

/// Kafka's JSON, serialized with its members in Kafka's order.
pub struct JsonOut(Json);

impl Serialize for JsonOut {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_json(&self.0, s)
    }
}

fn serialize_json<S: Serializer>(j: &Json, s: S) -> Result<S::Ok, S::Error> {
    match j {
        Json::Null => s.serialize_none(),
        Json::Bool(b) => s.serialize_bool(*b),
        Json::Number(n) => s.serialize_i64(*n),
        Json::Float(x) => s.serialize_f64(*x),
        Json::String(v) => s.serialize_str(v),
        Json::Array(items) => {
            let mut seq = s.serialize_seq(Some(items.len()))?;
            for i in items {
                seq.serialize_element(&JsonRef(i))?;
            }
            seq.end()
        }
        Json::Object(members) => {
            let mut map = s.serialize_map(Some(members.len()))?;
            for (k, v) in members {
                map.serialize_entry(k, &JsonRef(v))?;
            }
            map.end()
        }
    }
}

struct JsonRef<'a>(&'a Json);

impl Serialize for JsonRef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_json(self.0, s)
    }
}
