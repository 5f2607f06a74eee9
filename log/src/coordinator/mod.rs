//! The records Kafka's coordinators keep in their internal topics: `__consumer_offsets` (the group
//! coordinator: offset commits, classic group metadata, the consumer/share/streams group records of
//! KIP-848 and after) and `__transaction_state` (the transaction coordinator's transaction metadata).
//!
//! A coordinator record's key is `[record type: int16][key message]` and its value
//! `[version: int16][value message]` (Kafka's `CoordinatorRecordSerde`); a null value is a tombstone.
//! The schemas are tables transcribed from Kafka's own (`schemas.rs`) read by one codec (`message.rs`);
//! `offsets.rs` and `transactions.rs` give typed access to the records a program needs, and
//! [`CoordinatorRecord`] decodes any of them, to Kafka's JSON as `kafka-dump-log` prints it.

mod json;
mod message;
pub mod offsets;
mod record;
pub mod schema;
#[rustfmt::skip]
pub mod schemas;
pub mod transactions;

pub use json::Json;
pub use message::{decode, default_value, encode, to_json, FieldError, Struct, Value};
pub use offsets::{
    java_string_hash_code, partition_for_group, OffsetCommitKey, OffsetCommitValue,
    CONSUMER_OFFSETS_TOPIC,
};
pub use record::{consumer_protocol_json, Coordinator, CoordinatorRecord};
pub use transactions::{TransactionLogKey, TransactionLogValue, TRANSACTION_STATE_TOPIC};

/// The part of a record a failure is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The record's key.
    Key,
    /// The record's value.
    Value,
}

/// Why a coordinator record did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CoordinatorCorruption {
    /// A coordinator record is keyed by its type; this one has a null key.
    #[error("the record has a null key (a coordinator record's key starts with its type)")]
    MissingKey,
    /// The key or value is shorter than its two-byte type or version.
    #[error("the {} has fewer than the 2 bytes of its {}", message::part_name(*.0), if *.0 == Part::Key { "record type" } else { "version" })]
    NoVersion(Part),
    /// A record type the coordinator does not know.
    #[error("unknown record type {0}")]
    UnknownRecordType(i16),
    /// A value version outside its schema's valid versions.
    #[error("unknown version {version} of the value of record type {record_type}")]
    UnknownVersion {
        /// The record type.
        record_type: i16,
        /// The value's version.
        version: i16,
    },
    /// A field that does not decode.
    #[error("{} of record type {record_type} (version {version}), field {} at byte {}: {}", message::part_name(*part), .error.field, .error.position + 2, .error.reason)]
    Field {
        /// Key or value.
        part: Part,
        /// The record type.
        record_type: i16,
        /// The key's or value's version.
        version: i16,
        /// The field and what was wrong with it.
        error: FieldError,
    },
}

/// Why a field did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FieldCorruption {
    /// The buffer ends inside the field.
    #[error("the buffer ends inside it")]
    Truncated,
    /// A null where the schema allows none.
    #[error("null, but the field is not nullable at this version")]
    NullNotNullable,
    /// A string length Kafka refuses.
    #[error("string length {0} is over 32767")]
    InvalidLength(i64),
    /// An array or map announcing more elements than bytes remain.
    #[error("{count} elements announced but only {remaining} bytes remain")]
    TooManyElements {
        /// The announced count.
        count: u64,
        /// The bytes left in the buffer.
        remaining: u64,
    },
    /// An unsigned varint of more than 5 bytes.
    #[error("an unsigned varint longer than 5 bytes")]
    VarintTooLong,
}

impl CoordinatorCorruption {
    /// The message Kafka's `CoordinatorRecordSerde` gives for the same failure (what `kafka-dump-log`
    /// prints after "Error at offset N, skipping. "), as far as Kafka names one.
    pub fn kafka_message(&self) -> String {
        match self {
            CoordinatorCorruption::MissingKey => "message had a missing key".into(),
            CoordinatorCorruption::NoVersion(part) => {
                format!(
                    "Could not read version from {}'s buffer.",
                    message::part_name(*part)
                )
            }
            CoordinatorCorruption::UnknownRecordType(t) => {
                format!("Found an unknown record type {t}")
            }
            CoordinatorCorruption::UnknownVersion {
                record_type,
                version,
            } => format!("Found an unknown record version {version} for {record_type} type"),
            CoordinatorCorruption::Field {
                part,
                record_type,
                version,
                error,
            } => {
                // Kafka reads a key with its record type as the version.
                let v = if *part == Part::Key {
                    *record_type
                } else {
                    *version
                };
                let reason = match &error.reason {
                    FieldCorruption::NullNotNullable => {
                        format!("non-nullable field {} was serialized as null", error.field)
                    }
                    FieldCorruption::InvalidLength(n) => {
                        format!("string field {} had invalid length {n}", error.field)
                    }
                    FieldCorruption::TooManyElements { count, remaining } => format!(
                        "Tried to allocate a collection of size {count}, but there are only {remaining} bytes remaining."
                    ),
                    // A BufferUnderflowException, which has no message.
                    FieldCorruption::Truncated | FieldCorruption::VarintTooLong => "null".into(),
                };
                format!(
                    "Could not read record with version {v} from {}'s buffer due to: {reason}.",
                    message::part_name(*part)
                )
            }
        }
    }
}
