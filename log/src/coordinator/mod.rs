//! The records Kafka's coordinators keep in their internal topics: `__consumer_offsets` (the group
//! coordinator: offset commits, classic group metadata, the consumer/share/streams group records of
//! KIP-848 and after) and `__transaction_state` (the transaction coordinator's transaction metadata).
//!
//! A coordinator record's key is `[record type: int16][key message]` and its value
//! `[version: int16][value message]` (Kafka's `CoordinatorRecordSerde`); a null value is a tombstone.
//! The schemas are tables transcribed from Kafka's own (`schemas.rs`) in the form of the one schema
//! engine ([`crate::schema`]), which reads, writes and prints them; `record.rs` decodes any of them by its
//! type ([`CoordinatorRecord`]), to Kafka's JSON as `kafka-dump-log` prints it; `offsets.rs` and
//! `transactions.rs` give typed access to the records a program needs.

pub mod offsets;
mod record;
#[rustfmt::skip]
pub mod schemas;
pub mod transactions;

pub use crate::schema::{
    decode, default_value, encode, to_json, FieldCorruption, FieldError, Json, Struct, Value,
};
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
    #[error("the {} has fewer than the 2 bytes of its {}", part_name(*.0), if *.0 == Part::Key { "record type" } else { "version" })]
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
    #[error("{} of record type {record_type} (version {version}), field {} at byte {}: {}", part_name(*part), .error.field, .error.position + 2, .error.reason)]
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

impl CoordinatorCorruption {
    /// The message Kafka's `CoordinatorRecordSerde` gives for the same failure (what `kafka-dump-log`
    /// prints after "Error at offset N, skipping. "), as far as Kafka names one.
    pub fn kafka_message(&self) -> String {
        match self {
            CoordinatorCorruption::MissingKey => "message had a missing key".into(),
            CoordinatorCorruption::NoVersion(part) => {
                format!("Could not read version from {}'s buffer.", part_name(*part))
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
                    // A BufferUnderflowException, which has no message (tag sizes are not checked
                    // for coordinator records).
                    // (NotUtf8 and TaggedFieldSize: not asked for by coordinator decodes.)
                    FieldCorruption::Truncated
                    | FieldCorruption::VarintTooLong
                    | FieldCorruption::NotUtf8
                    | FieldCorruption::TaggedFieldSize { .. } => "null".into(),
                };
                format!(
                    "Could not read record with version {v} from {}'s buffer due to: {reason}.",
                    part_name(*part)
                )
            }
        }
    }
}

/// Which part of a record a failure was in, for messages.
fn part_name(part: Part) -> &'static str {
    match part {
        Part::Key => "key",
        Part::Value => "value",
    }
}
