//! The `__mirror_state` record schemas as tables of the log crate's one schema engine
//! (`klog_log::schema`), in the form of the coordinator tables: the key (shared by both record types),
//! the state value in the reference's layout (showuon/kafka `MirrorPartitionStateValue.json`) with
//! klog's tagged fields 10000-10002, the state value in klog's older layout, and the last-mirror-epoch
//! value in both layouts. Every layout is value version 0, so each is its own table.
//!
//! klog's tagged fields default to null although they are not nullable: absent reads as
//! `Value::Null` (`None`), present reads as its value even when that value is 0, and an encode writes
//! exactly the ones that are not null.

use klog_log::schema::{Default, Field, MessageSchema, SchemaKind, Type, Versions};

use super::{
    KLOG_LAYOUT_TAG, LAST_MIRROR_EPOCH_TYPE, NEXT_RETRY_TIME_TAG, OLDER_NEXT_RETRY_TIME_TAG,
    OLDER_STOPPING_LAST_MIRROR_EPOCH_TAG, PARTITION_STATE_TYPE, STOPPING_LAST_MIRROR_EPOCH_TAG,
};

/// A field present in version 0.
const fn field(name: &'static str, ty: Type) -> Field {
    Field::new(name, ty, 0, 0)
}

/// A klog tagged field: absent is null (`None`).
const fn optional(name: &'static str, ty: Type, tag: u32) -> Field {
    field(name, ty).tagged(tag, 0, 0).default(Default::Null)
}

static KEY_FIELDS: &[Field] = &[
    field("mirrorName", Type::String),
    field("topicId", Type::Uuid),
    field("partition", Type::Int32),
];

/// A version-0 schema of `kind` (flexible for a value).
const fn schema(
    name: &'static str,
    kind: SchemaKind,
    api_key: i16,
    fields: &'static [Field],
) -> MessageSchema {
    MessageSchema {
        name,
        type_name: "",
        kind,
        api_key,
        valid: Versions::new(0, 0),
        flexible: match kind {
            SchemaKind::CoordinatorKey => Versions::NONE,
            _ => Versions::from(0),
        },
        fields,
    }
}

/// The key of a `MirrorPartitionState` record (record type 2; non-flexible).
pub static PARTITION_STATE_KEY: MessageSchema = schema(
    "MirrorPartitionStateKey",
    SchemaKind::CoordinatorKey,
    PARTITION_STATE_TYPE,
    KEY_FIELDS,
);

/// The key of a `LastMirrorEpochs` record (record type 1; the same fields).
pub static LAST_MIRROR_EPOCH_KEY: MessageSchema = schema(
    "LastMirrorEpochsKey",
    SchemaKind::CoordinatorKey,
    LAST_MIRROR_EPOCH_TYPE,
    KEY_FIELDS,
);

/// The error message. Kafka's schema says string; it is declared as bytes, whose compact encoding is
/// the same, because klog has always written and read error messages of any length where a Kafka
/// string stops at 32767 bytes (its UTF-8 is checked by the records module).
const ERROR_MESSAGE: Field = field("errorMessage", Type::Bytes).nullable(0, 0);

static REFERENCE_STATE_FIELDS: &[Field] = &[
    field("state", Type::Int8),
    field("leaderEpoch", Type::Int32),
    field("stateEpoch", Type::Int32),
    ERROR_MESSAGE,
    field("retryAttempt", Type::Int16),
    field("previousState", Type::Int8),
    optional("klogLayout", Type::Int8, KLOG_LAYOUT_TAG),
    optional("nextRetryTimeMs", Type::Int64, NEXT_RETRY_TIME_TAG),
    optional(
        "stoppingLastMirrorEpoch",
        Type::Int32,
        STOPPING_LAST_MIRROR_EPOCH_TAG,
    ),
];

/// The state value in the reference's layout, with klog's tagged fields (what klog writes).
pub static REFERENCE_STATE_VALUE: MessageSchema = schema(
    "MirrorPartitionStateValue",
    SchemaKind::CoordinatorValue,
    PARTITION_STATE_TYPE,
    REFERENCE_STATE_FIELDS,
);

static OLDER_STATE_FIELDS: &[Field] = &[
    field("state", Type::Int8),
    field("previousState", Type::Int8),
    field("retryAttempt", Type::Int16),
    ERROR_MESSAGE,
    optional("nextRetryTimeMs", Type::Int64, OLDER_NEXT_RETRY_TIME_TAG),
    optional(
        "stoppingLastMirrorEpoch",
        Type::Int32,
        OLDER_STOPPING_LAST_MIRROR_EPOCH_TAG,
    ),
];

/// The state value in klog's older layout (aiven/kafka's numbering of the states).
pub static OLDER_STATE_VALUE: MessageSchema = schema(
    "MirrorPartitionStateValue (older)",
    SchemaKind::CoordinatorValue,
    PARTITION_STATE_TYPE,
    OLDER_STATE_FIELDS,
);

static REFERENCE_LAST_MIRROR_EPOCH_FIELDS: &[Field] = &[
    field("lastMirrorEpoch", Type::Int32),
    field("lastMirrorOffset", Type::Int64),
];

/// The last-mirror-epoch value in the reference's layout (`LastMirrorEpochsValue`).
pub static REFERENCE_LAST_MIRROR_EPOCH_VALUE: MessageSchema = schema(
    "LastMirrorEpochsValue",
    SchemaKind::CoordinatorValue,
    LAST_MIRROR_EPOCH_TYPE,
    REFERENCE_LAST_MIRROR_EPOCH_FIELDS,
);

static OLDER_LAST_MIRROR_EPOCH_FIELDS: &[Field] = &[field("lastMirrorEpoch", Type::Int32)];

/// The last-mirror-epoch value in klog's older layout (the epoch alone; what klog writes).
pub static OLDER_LAST_MIRROR_EPOCH_VALUE: MessageSchema = schema(
    "LastMirrorEpochsValue (older)",
    SchemaKind::CoordinatorValue,
    LAST_MIRROR_EPOCH_TYPE,
    OLDER_LAST_MIRROR_EPOCH_FIELDS,
);
