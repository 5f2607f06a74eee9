//! Any coordinator record, decoded by its type: [`CoordinatorRecord`], and its JSON as `kafka-dump-log`'s
//! `--offsets-decoder` and `--transaction-log-decoder` print it. The layer under the typed records
//! (`offsets.rs`, `transactions.rs`): it owns the coordinators' topic names and the transaction state
//! names its JSON prints, and imports neither of them.

use super::schemas::{
    CONSUMER_PROTOCOL_ASSIGNMENT, CONSUMER_PROTOCOL_SUBSCRIPTION, GROUP_RECORD_TYPES,
    TRANSACTION_RECORD_TYPES,
};
use super::{CoordinatorCorruption, Part};
use crate::schema::{decode, to_json, Json, MessageSchema, Struct, Value};
use crate::Error;

/// Kafka's name of a `TransactionState` id.
pub fn transaction_state_name(id: i8) -> Option<&'static str> {
    const NAMES: [&str; 8] = [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ];
    NAMES.get(usize::try_from(id).ok()?).copied()
}

/// The group coordinator's topic.
pub const CONSUMER_OFFSETS_TOPIC: &str = "__consumer_offsets";

/// The transaction coordinator's topic.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// The coordinator whose records a topic holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coordinator {
    /// `__consumer_offsets`.
    Group,
    /// `__transaction_state`.
    Transaction,
}

impl Coordinator {
    /// The coordinator of an internal topic, by its name.
    pub fn for_topic(topic: &str) -> Option<Coordinator> {
        match topic {
            CONSUMER_OFFSETS_TOPIC => Some(Coordinator::Group),
            TRANSACTION_STATE_TOPIC => Some(Coordinator::Transaction),
            _ => None,
        }
    }

    /// Its record types: (type, key schema, value schema).
    pub fn record_types(self) -> &'static [(i16, &'static MessageSchema, &'static MessageSchema)] {
        match self {
            Coordinator::Group => GROUP_RECORD_TYPES,
            Coordinator::Transaction => TRANSACTION_RECORD_TYPES,
        }
    }

    fn schemas(self, record_type: i16) -> Option<(&'static MessageSchema, &'static MessageSchema)> {
        self.record_types()
            .iter()
            .find(|(t, _, _)| *t == record_type)
            .map(|(_, k, v)| (*k, *v))
    }
}

/// A decoded coordinator record.
#[derive(Debug, Clone, PartialEq)]
pub struct CoordinatorRecord {
    /// The record type (the key's first two bytes).
    pub record_type: i16,
    /// The key's schema.
    pub key_schema: &'static MessageSchema,
    /// The key's fields.
    pub key: Struct<'static>,
    /// The value's version, schema and fields; `None` for a tombstone.
    pub value: Option<(i16, &'static MessageSchema, Struct<'static>)>,
}

fn corrupt(c: CoordinatorCorruption) -> Error {
    Error::CorruptCoordinatorRecord(c)
}

fn version_prefix(buf: &[u8], part: Part) -> Result<(i16, &[u8]), Error> {
    match buf {
        [a, b, rest @ ..] => Ok((i16::from_be_bytes([*a, *b]), rest)),
        _ => Err(corrupt(CoordinatorCorruption::NoVersion(part))),
    }
}

impl CoordinatorRecord {
    /// Decodes a record of `coordinator`'s topic as Kafka's `CoordinatorRecordSerde` does: the key's
    /// type selects the schemas, the value's version must be one its schema knows, bytes after a
    /// message are ignored.
    pub fn decode(
        coordinator: Coordinator,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<CoordinatorRecord, Error> {
        let key = key.ok_or(corrupt(CoordinatorCorruption::MissingKey))?;
        let (record_type, key_bytes) = version_prefix(key, Part::Key)?;
        let (key_schema, value_schema) = coordinator.schemas(record_type).ok_or(corrupt(
            CoordinatorCorruption::UnknownRecordType(record_type),
        ))?;
        // Keys have one version, 0, whatever their type.
        let key_struct = decode(key_schema, 0, key_bytes)
            .map_err(|error| {
                corrupt(CoordinatorCorruption::Field {
                    part: Part::Key,
                    record_type,
                    version: 0,
                    error,
                })
            })?
            .into_owned();
        let value = match value {
            None => None,
            Some(v) => {
                let (version, bytes) = version_prefix(v, Part::Value)?;
                if !value_schema.valid.contains(version) {
                    return Err(corrupt(CoordinatorCorruption::UnknownVersion {
                        record_type,
                        version,
                    }));
                }
                let s = decode(value_schema, version, bytes).map_err(|error| {
                    corrupt(CoordinatorCorruption::Field {
                        part: Part::Value,
                        record_type,
                        version,
                        error,
                    })
                })?;
                Some((version, value_schema, s.into_owned()))
            }
        };
        Ok(CoordinatorRecord {
            record_type,
            key_schema,
            key: key_struct,
            value,
        })
    }

    /// The key as `kafka-dump-log` prints it: `{"type":"<type>","data":{...}}`.
    pub fn key_json(&self) -> Json {
        Json::Object(vec![
            ("type".into(), Json::String(self.record_type.to_string())),
            ("data".into(), to_json(&self.key)),
        ])
    }

    /// The value's fields as Kafka's JSON (`None` for a tombstone). As in Kafka's dump, a classic consumer
    /// group's member subscriptions and assignments are decoded (other bytes are base64), and a
    /// transaction's status is its state's name.
    pub fn value_data_json(&self) -> Option<Json> {
        let (_, schema, s) = self.value.as_ref()?;
        let mut json = to_json(s);
        if schema.name == "GroupMetadataValue" && s.str("protocolType") == Some("consumer") {
            decode_consumer_protocol(s, &mut json);
        }
        if schema.name == "TransactionLogValue" {
            if let (Some(id), Some(slot)) = (
                s.int("transactionStatus"),
                json_member_mut(&mut json, "transactionStatus"),
            ) {
                let name = transaction_state_name(id as i8);
                *slot = Json::String(name.map_or_else(|| id.to_string(), str::to_string));
            }
        }
        Some(json)
    }

    /// The value as `kafka-dump-log` prints it: `{"version":"<version>","data":{...}}`, or `None`
    /// for a tombstone (which it prints as `<DELETE>`).
    pub fn value_json(&self) -> Option<Json> {
        let version = self.value.as_ref()?.0;
        Some(Json::Object(vec![
            ("version".into(), Json::String(version.to_string())),
            ("data".into(), self.value_data_json()?),
        ]))
    }
}

/// Replaces each member's `subscription` and `assignment` bytes by the consumer protocol message they
/// hold; bytes that do not decode stay as they were.
fn decode_consumer_protocol(s: &Struct<'_>, json: &mut Json) {
    let (Some(Value::Array(members)), Some(Json::Array(members_json))) =
        (s.get("members"), json_member_mut(json, "members"))
    else {
        return;
    };
    for (member, member_json) in members.iter().zip(members_json.iter_mut()) {
        let (Value::Struct(member), Json::Object(fields)) = (member, member_json) else {
            continue;
        };
        for (name, schema) in [
            ("subscription", &CONSUMER_PROTOCOL_SUBSCRIPTION),
            ("assignment", &CONSUMER_PROTOCOL_ASSIGNMENT),
        ] {
            let Some(Value::Bytes(bytes)) = member.get(name) else {
                continue;
            };
            if let Some(decoded) = consumer_protocol_json(schema, bytes) {
                if let Some(slot) = fields.iter_mut().find(|(k, _)| k == name) {
                    slot.1 = decoded;
                }
            }
        }
    }
}

fn json_member_mut<'a>(json: &'a mut Json, name: &str) -> Option<&'a mut Json> {
    match json {
        Json::Object(members) => members.iter_mut().find(|(k, _)| k == name).map(|(_, v)| v),
        _ => None,
    }
}

/// A consumer protocol message (`[version: int16][message]`, the bytes a classic consumer group keeps
/// per member) as Kafka's JSON, or `None` when it does not decode.
pub fn consumer_protocol_json(schema: &MessageSchema, bytes: &[u8]) -> Option<Json> {
    let (version, rest) = version_prefix(bytes, Part::Value).ok()?;
    let s = decode(schema, version, rest).ok()?;
    Some(to_json(&s))
}
