//! `__mirror_state` records (KIP-1279 §4): the coordinator-record framing, the two record kinds keyed by
//! (mirror name, topic id, partition), and the coordinator partition of a key.
//!
//! Framing (Kafka's coordinator-record convention): key = `int16 recordType` + the key struct at version
//! 0 (non-flexible); value = `int16 valueVersion` + the value struct (flexible: compact strings, tagged
//! fields); a tombstone has a null value.
//!
//! Values come in two layouts, both at value version 0 (docs/format.md, docs/compatibility.md): the
//! reference's (showuon/kafka `MirrorPartitionStateValue.json`: State, LeaderEpoch, StateEpoch,
//! ErrorMessage, RetryAttempt, PreviousState; `LastMirrorEpochsValue`: LastMirrorEpoch, LastMirrorOffset),
//! which klog writes with its own fields as tagged fields, and the older one klog wrote before (State,
//! PreviousState, RetryAttempt, ErrorMessage in the older numbering; LastMirrorEpoch alone). The version
//! does not tell them apart; the bytes do: klog's values in the reference layout carry the
//! [`KLOG_LAYOUT_TAG`], and otherwise the layout is the one whose fields take the value exactly.
//!
//! The layouts' schemas are tables of the log crate's schema engine (`schemas.rs`), decoded and encoded
//! by its codec; this module owns what is specific: the framing, layout detection, typed access, and
//! klog's wording of what failed.

use klog_log::checkpoint::TopicId;
use klog_log::schema::{
    build_struct, decode_partial, decode_prefix_with, encode_into, DecodeOptions, FieldCorruption,
    FieldError, MessageSchema, Struct, Value,
};

use crate::state::MirrorState;

mod schemas;
use schemas::{
    LAST_MIRROR_EPOCH_KEY, OLDER_LAST_MIRROR_EPOCH_VALUE, OLDER_STATE_VALUE, PARTITION_STATE_KEY,
    REFERENCE_LAST_MIRROR_EPOCH_VALUE, REFERENCE_STATE_VALUE,
};

/// `LastMirrorEpochs` (seed name LastMirroredEpochs).
pub const LAST_MIRROR_EPOCH_TYPE: i16 = 1;
/// `MirrorPartitionState`.
pub const PARTITION_STATE_TYPE: i16 = 2;

/// A mirror partition: the key of both record kinds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MirrorKey {
    /// The mirror's name.
    pub mirror: String,
    /// The topic id.
    pub topic_id: TopicId,
    /// The partition.
    pub partition: i32,
}

impl MirrorKey {
    /// `"<mirror>:<topic id base64>:<partition>"`, hashed to pick the coordinator partition.
    pub fn coordinator_key(&self) -> String {
        format!("{}:{}:{}", self.mirror, self.topic_id, self.partition)
    }

    /// `abs(javaStringHash(key)) % partitions` with Kafka's `Utils.abs` (MIN_VALUE -> 0).
    pub fn coordinator_partition(&self, partitions: u32) -> u32 {
        let h = java_string_hash(&self.coordinator_key());
        let abs = if h == i32::MIN { 0 } else { h.abs() };
        abs as u32 % partitions
    }
}

/// Java's `String.hashCode`: `h = 31*h + c` over UTF-16 code units, wrapping.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

/// The older layout's tagged field 0: when a FAILED partition is next retried.
pub const OLDER_NEXT_RETRY_TIME_TAG: u32 = 0;
/// The older layout's tagged field 1: the LME a stop in progress recorded.
pub const OLDER_STOPPING_LAST_MIRROR_EPOCH_TAG: u32 = 1;
/// klog's tagged fields in the reference layout are numbered far above any the reference may add.
/// This one (int8, klog's layout revision, 1) is in every state value klog writes.
pub const KLOG_LAYOUT_TAG: u32 = 10_000;
/// The reference layout's klog tagged field: when a FAILED partition is next retried (int64 ms).
pub const NEXT_RETRY_TIME_TAG: u32 = 10_001;
/// The reference layout's klog tagged field: the LME a stop in progress recorded (int32).
pub const STOPPING_LAST_MIRROR_EPOCH_TAG: u32 = 10_002;
/// The revision [`KLOG_LAYOUT_TAG`] carries.
const KLOG_LAYOUT_REVISION: i8 = 1;

/// The layout a value was decoded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueLayout {
    /// The reference's, as klog writes it (with [`KLOG_LAYOUT_TAG`]).
    Klog,
    /// The reference's, without klog's tag (as a reference broker writes it).
    Reference,
    /// The older layout klog wrote before the reference's (aiven/kafka's numbering).
    Older,
}

impl ValueLayout {
    /// The name `klog dump` prints.
    pub fn name(self) -> &'static str {
        match self {
            ValueLayout::Klog => "klog",
            ValueLayout::Reference => "reference",
            ValueLayout::Older => "older",
        }
    }
}

/// The `MirrorPartitionState` value: P2's fields, and two tagged fields of klog's that keep a retry
/// and a stop going across restarts (absent in records written before them, which read as `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionStateValue {
    /// The state.
    pub state: MirrorState,
    /// The reference's LeaderEpoch: the highest leader epoch seen for the partition, -1 if not known
    /// (what klog writes, and what the older layout reads as).
    pub leader_epoch: i32,
    /// The reference's StateEpoch, with which its coordinator fences stale writers (0 when not kept).
    pub state_epoch: i32,
    /// The state before it.
    pub previous: MirrorState,
    /// FAILED retries so far; -1 marks a non-retryable failure.
    pub retry_attempt: i16,
    /// The failure that led to FAILED, if any.
    pub error: Option<String>,
    /// FAILED: the time (ms, the cluster's clock) of the next retry. `None` (a record from before the
    /// field): retried at the next pass.
    pub next_retry_ms: Option<i64>,
    /// STOPPING, and FAILED from STOPPING: the last mirrored epoch this stop recorded (-1: the log had no
    /// epoch). Carried from STOPPING to FAILED and back, so a retried stop never derives it again.
    pub stopping_last_mirror_epoch: Option<i32>,
}

impl PartitionStateValue {
    /// A value in `state`, with no previous state or failure.
    pub fn new(state: MirrorState) -> Self {
        PartitionStateValue {
            state,
            leader_epoch: -1,
            state_epoch: 0,
            previous: MirrorState::Unknown,
            retry_attempt: 0,
            error: None,
            next_retry_ms: None,
            stopping_last_mirror_epoch: None,
        }
    }
}

/// A decoded `__mirror_state` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorRecord {
    /// A partition's state (`None`: a tombstone).
    State(MirrorKey, Option<PartitionStateValue>),
    /// A partition's last mirrored epoch, recorded at failover (`None`: a tombstone).
    LastMirrorEpoch(MirrorKey, Option<i32>),
}

impl MirrorRecord {
    /// The partition it is about.
    pub fn key(&self) -> &MirrorKey {
        match self {
            MirrorRecord::State(k, _) | MirrorRecord::LastMirrorEpoch(k, _) => k,
        }
    }

    /// The record's key and value bytes; values in the reference layout (a state value with klog's
    /// tagged fields).
    pub fn encode(&self) -> (Vec<u8>, Option<Vec<u8>>) {
        let (schema, key) = match self {
            MirrorRecord::State(k, _) => (&PARTITION_STATE_KEY, k),
            MirrorRecord::LastMirrorEpoch(k, _) => (&LAST_MIRROR_EPOCH_KEY, k),
        };
        let kb = framed(
            schema,
            vec![
                ("mirrorName", Value::Str(key.mirror.as_str().into())),
                ("topicId", Value::Uuid(key.topic_id.0)),
                ("partition", Value::Int(key.partition.into())),
            ],
        );
        let value = match self {
            MirrorRecord::State(_, None) | MirrorRecord::LastMirrorEpoch(_, None) => None,
            MirrorRecord::State(_, Some(v)) => Some(encode_state(v)),
            MirrorRecord::LastMirrorEpoch(_, Some(epoch)) => Some(framed(
                &OLDER_LAST_MIRROR_EPOCH_VALUE,
                vec![("lastMirrorEpoch", Value::Int((*epoch).into()))],
            )),
        };
        (kb, value)
    }

    /// Decodes one record, in either layout; the error names the field that failed.
    pub fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Self, String> {
        DecodedRecord::decode(key, value).map(|d| d.record)
    }
}

/// A decoded record with what its bytes said beyond klog's types: the layout, and the reference's
/// LastMirrorOffset when a last-mirror-epoch value carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedRecord {
    /// The record.
    pub record: MirrorRecord,
    /// The value's layout (`None`: a tombstone).
    pub layout: Option<ValueLayout>,
    /// The reference's LastMirrorOffset, in a last-mirror-epoch value that has it.
    pub last_mirror_offset: Option<i64>,
}

impl DecodedRecord {
    /// Decodes one record, in either layout; the error names the field that failed.
    pub fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Self, String> {
        let key = key.ok_or("record has no key")?;
        let kind = i16::from_be_bytes(prefix::<2>(key, "record type")?);
        let schema = match kind {
            LAST_MIRROR_EPOCH_TYPE => &LAST_MIRROR_EPOCH_KEY,
            _ => &PARTITION_STATE_KEY,
        };
        let k = decode_exactly(schema, &key[2..], "key")?;
        let key = MirrorKey {
            mirror: k.str("mirrorName").unwrap_or_default().to_string(),
            topic_id: TopicId(k.uuid("topicId").unwrap_or_default()),
            partition: int(&k, "partition")? as i32,
        };
        if kind != PARTITION_STATE_TYPE && kind != LAST_MIRROR_EPOCH_TYPE {
            return Err(format!("unknown record type {kind}"));
        }
        let Some(value) = value else {
            let record = match kind {
                PARTITION_STATE_TYPE => MirrorRecord::State(key, None),
                _ => MirrorRecord::LastMirrorEpoch(key, None),
            };
            return Ok(DecodedRecord {
                record,
                layout: None,
                last_mirror_offset: None,
            });
        };
        let version = i16::from_be_bytes(prefix::<2>(value, "value version")?);
        if version != 0 {
            return Err(format!("unsupported value version {version}"));
        }
        let body = &value[2..];
        if kind == PARTITION_STATE_TYPE {
            let (state, layout) = decode_state(body)?;
            return Ok(DecodedRecord {
                record: MirrorRecord::State(key, Some(state)),
                layout: Some(layout),
                last_mirror_offset: None,
            });
        }
        // The reference's LastMirrorOffset (int64) follows the epoch; klog's older values end there.
        let (v, offset, layout) =
            match decode_exactly(&REFERENCE_LAST_MIRROR_EPOCH_VALUE, body, "value") {
                Ok(v) => {
                    let offset = int(&v, "lastMirrorOffset")?;
                    (v, Some(offset), ValueLayout::Reference)
                }
                Err(_) => (
                    decode_exactly(&OLDER_LAST_MIRROR_EPOCH_VALUE, body, "value")?,
                    None,
                    ValueLayout::Older,
                ),
            };
        let epoch = int(&v, "lastMirrorEpoch")? as i32;
        Ok(DecodedRecord {
            record: MirrorRecord::LastMirrorEpoch(key, Some(epoch)),
            layout: Some(layout),
            last_mirror_offset: offset,
        })
    }

    /// The record as JSON, as kafka-dump-log's decoders print internal topics: `{"key": {...},
    /// "payload": {...}}`, with the value's layout beside them.
    pub fn to_json(&self) -> serde_json::Value {
        let mut json = self.record.to_json();
        if let Some(layout) = self.layout {
            json["layout"] = layout.name().into();
        }
        if let Some(offset) = self.last_mirror_offset {
            json["payload"]["lastMirrorOffset"] = offset.into();
        }
        json
    }
}

impl MirrorRecord {
    /// Kafka-dump-log style text: `key: {...} payload: {...}`.
    pub fn to_json(&self) -> serde_json::Value {
        let k = self.key();
        let key = serde_json::json!({
            "type": match self {
                MirrorRecord::State(..) => "MirrorPartitionState",
                MirrorRecord::LastMirrorEpoch(..) => "LastMirrorEpoch",
            },
            "mirrorName": k.mirror,
            "topicId": k.topic_id.to_string(),
            "partition": k.partition,
        });
        let payload = match self {
            MirrorRecord::State(_, None) | MirrorRecord::LastMirrorEpoch(_, None) => {
                serde_json::Value::Null
            }
            MirrorRecord::State(_, Some(v)) => {
                let mut payload = serde_json::json!({
                    "state": v.state.name(),
                    "leaderEpoch": v.leader_epoch,
                    "stateEpoch": v.state_epoch,
                    "errorMessage": v.error,
                    "retryAttempt": v.retry_attempt,
                    "previousState": v.previous.name(),
                });
                // Tagged fields are printed only when present, as Kafka prints non-default ones.
                if let Some(t) = v.next_retry_ms {
                    payload["nextRetryTimeMs"] = t.into();
                }
                if let Some(e) = v.stopping_last_mirror_epoch {
                    payload["stoppingLastMirrorEpoch"] = e.into();
                }
                payload
            }
            MirrorRecord::LastMirrorEpoch(_, Some(e)) => serde_json::json!({"lastMirrorEpoch": e}),
        };
        serde_json::json!({"key": key, "payload": payload})
    }
}

/// A state value in the reference layout, with klog's tagged fields (the codec writes them ascending,
/// as the flexible format requires, and only the ones present).
fn encode_state(v: &PartitionStateValue) -> Vec<u8> {
    let opt = |x: Option<i64>| x.map_or(Value::Null, Value::Int);
    framed(
        &REFERENCE_STATE_VALUE,
        vec![
            ("state", Value::Int(v.state.to_byte().into())),
            ("leaderEpoch", Value::Int(v.leader_epoch.into())),
            ("stateEpoch", Value::Int(v.state_epoch.into())),
            (
                "errorMessage",
                v.error
                    .as_deref()
                    .map_or(Value::Null, |e| Value::Bytes(e.as_bytes().into())),
            ),
            ("retryAttempt", Value::Int(v.retry_attempt.into())),
            ("previousState", Value::Int(v.previous.to_byte().into())),
            ("klogLayout", Value::Int(KLOG_LAYOUT_REVISION.into())),
            ("nextRetryTimeMs", opt(v.next_retry_ms)),
            (
                "stoppingLastMirrorEpoch",
                opt(v.stopping_last_mirror_epoch.map(i64::from)),
            ),
        ],
    )
}

/// A key (`int16 recordType`, then the key) or a value (`int16 version` 0, then the value) of `schema`
/// holding `values`.
fn framed(schema: &'static MessageSchema, values: Vec<(&'static str, Value<'_>)>) -> Vec<u8> {
    let frame = match schema.kind {
        klog_log::schema::SchemaKind::CoordinatorKey => schema.api_key,
        _ => 0,
    };
    let mut out = frame.to_be_bytes().to_vec();
    // The names are the tables' and every value is of its field's type and range (klog's own types),
    // so neither step can fail.
    let s = build_struct(schema.name, schema.fields, 0, values)
        .expect("the records' fields are in their tables");
    encode_into(&mut out, schema, 0, &s).expect("klog's values fit their fields");
    out
}

/// The records refuse what Kafka's readers would refuse, and strings that are not UTF-8.
const STRICT: DecodeOptions = DecodeOptions {
    strict_utf8: true,
    strict_tag_sizes: true,
};

/// Decodes `schema` from `bytes`, which it must take exactly (`what` names them in the error).
fn decode_exactly<'a>(
    schema: &MessageSchema,
    bytes: &'a [u8],
    what: &str,
) -> Result<Struct<'a>, String> {
    let (s, used) = decode_prefix_with(schema, 0, bytes, STRICT).map_err(|e| wording(&e))?;
    match bytes.len() - used {
        0 => Ok(s),
        left => Err(format!("{left} bytes left after the {what}")),
    }
}

/// The first `N` bytes of a record's key or value (its framing).
fn prefix<const N: usize>(bytes: &[u8], what: &str) -> Result<[u8; N], String> {
    bytes
        .get(..N)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| format!("{what}: need {N} bytes, {} remain", bytes.len()))
}

/// klog's wording of a field that did not decode: `"<what>: need N bytes, M remain"` and the like.
fn wording(e: &FieldError) -> String {
    let name = match (e.field, e.what) {
        ("_taggedFields", "tagged fields") => "tagged field count",
        ("_taggedFields", "tag size") => "tagged field size",
        ("_taggedFields", what) => what,
        ("mirrorName", _) if e.in_length => "mirror name length",
        ("errorMessage", _) if e.in_length => "error message length",
        (field, _) => label(field),
    };
    match e.reason {
        FieldCorruption::Truncated => {
            format!("{name}: need {} bytes, {} remain", e.need, e.remaining)
        }
        FieldCorruption::VarintTooLong => format!("{name}: varint longer than 5 bytes"),
        FieldCorruption::NullNotNullable => format!("{name} is null"),
        FieldCorruption::NotUtf8 => format!("{name} is not UTF-8"),
        FieldCorruption::TaggedFieldSize { .. } => {
            format!("{} bytes left after the tagged field", e.remaining)
        }
        ref other => format!("{name}: {other}"),
    }
}

/// The words klog's errors use for a field.
fn label(field: &str) -> &str {
    match field {
        "mirrorName" => "mirror name",
        "topicId" => "topic id",
        "leaderEpoch" => "leader epoch",
        "stateEpoch" => "state epoch",
        "errorMessage" => "error message",
        "retryAttempt" => "retry attempt",
        "previousState" => "previous state",
        "klogLayout" => "klog layout",
        "nextRetryTimeMs" => "next retry time",
        "stoppingLastMirrorEpoch" => "stopping last mirror epoch",
        "lastMirrorEpoch" => "last mirror epoch",
        "lastMirrorOffset" => "last mirror offset",
        other => other,
    }
}

/// An integer field of a decoded struct (every field of version 0 is in it).
fn int(s: &Struct<'_>, name: &str) -> Result<i64, String> {
    s.int(name)
        .ok_or_else(|| format!("{} is missing", label(name)))
}

/// A klog tagged field: `None` when absent.
fn optional(s: &Struct<'_>, name: &str) -> Option<i64> {
    s.int(name)
}

/// A state value after its version: klog's (the reference layout with [`KLOG_LAYOUT_TAG`]), else the
/// older layout, else the reference's; each must take the bytes exactly. The error is the reference
/// layout's, naming its field.
fn decode_state(bytes: &[u8]) -> Result<(PartitionStateValue, ValueLayout), String> {
    let reference = read_state_value(bytes, false);
    if let Ok((value, true)) = reference {
        return Ok((value, ValueLayout::Klog));
    }
    if let Ok((value, _)) = read_state_value(bytes, true) {
        return Ok((value, ValueLayout::Older));
    }
    reference.map(|(value, _)| (value, ValueLayout::Reference))
}

fn to_state(b: i64, what: &str, older: bool) -> Result<MirrorState, String> {
    let b = b as i8;
    let decoded = if older {
        MirrorState::from_older_byte(b)
    } else {
        MirrorState::from_byte(b)
    };
    decoded.ok_or_else(|| format!("unknown {what} {b}"))
}

/// The reference layout, or (`older`) the older one: State, PreviousState (older numbering),
/// RetryAttempt, ErrorMessage, tags 0 and 1. The flag says whether klog's layout tag was there.
fn read_state_value(bytes: &[u8], older: bool) -> Result<(PartitionStateValue, bool), String> {
    let schema = if older {
        &OLDER_STATE_VALUE
    } else {
        &REFERENCE_STATE_VALUE
    };
    // klog checks each field as it is read: a field read before what failed is checked first.
    let (s, used, failed) = decode_partial(schema, 0, bytes, STRICT);
    let read = |name| s.get(name).is_some();
    let state = |name, what| match s.int(name) {
        Some(b) => to_state(b, what, older).map(Some),
        None => Ok(None),
    };
    let error = || match s.get("errorMessage") {
        Some(Value::Bytes(b)) => String::from_utf8(b.to_vec())
            .map(Some)
            .map_err(|_| "error message is not UTF-8".to_string()),
        _ => Ok(None),
    };
    let first = state("state", "state")?;
    // In each layout's order: the older one has the previous state before the error message.
    let (previous, error) = if older {
        let p = state("previousState", "previous state")?;
        (p, error()?)
    } else {
        let e = error()?;
        (state("previousState", "previous state")?, e)
    };
    if let Some(e) = failed {
        return Err(wording(&e));
    }
    let (Some(state), Some(previous), true) = (first, previous, read("retryAttempt")) else {
        return Err("a field is missing".into());
    };
    if used != bytes.len() {
        return Err(format!("{} bytes left after the value", bytes.len() - used));
    }
    let value = PartitionStateValue {
        leader_epoch: if older {
            -1
        } else {
            int(&s, "leaderEpoch")? as i32
        },
        state_epoch: if older {
            0
        } else {
            int(&s, "stateEpoch")? as i32
        },
        previous,
        retry_attempt: int(&s, "retryAttempt")? as i16,
        error,
        next_retry_ms: optional(&s, "nextRetryTimeMs"),
        stopping_last_mirror_epoch: optional(&s, "stoppingLastMirrorEpoch").map(|e| e as i32),
        ..PartitionStateValue::new(state)
    };
    Ok((value, optional(&s, "klogLayout").is_some()))
}

#[cfg(test)]
mod tests;
