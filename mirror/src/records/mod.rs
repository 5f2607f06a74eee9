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

use klog_log::checkpoint::TopicId;

use crate::state::MirrorState;

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
        let (kind, key) = match self {
            MirrorRecord::State(k, _) => (PARTITION_STATE_TYPE, k),
            MirrorRecord::LastMirrorEpoch(k, _) => (LAST_MIRROR_EPOCH_TYPE, k),
        };
        let mut kb = Vec::with_capacity(24 + key.mirror.len());
        kb.extend_from_slice(&kind.to_be_bytes());
        kb.extend_from_slice(&(key.mirror.len() as i16).to_be_bytes());
        kb.extend_from_slice(key.mirror.as_bytes());
        kb.extend_from_slice(&key.topic_id.0);
        kb.extend_from_slice(&key.partition.to_be_bytes());
        let value = match self {
            MirrorRecord::State(_, None) | MirrorRecord::LastMirrorEpoch(_, None) => None,
            MirrorRecord::State(_, Some(v)) => Some(encode_state(v)),
            MirrorRecord::LastMirrorEpoch(_, Some(epoch)) => {
                let mut b = vec![0, 0];
                b.extend_from_slice(&epoch.to_be_bytes());
                put_uvarint(&mut b, 0);
                Some(b)
            }
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
        let mut k = Reader(key.ok_or("record has no key")?);
        let kind = k.i16("record type")?;
        let name_len = k.i16("mirror name length")?;
        if name_len < 0 {
            return Err("mirror name is null".into());
        }
        let mirror = String::from_utf8(k.take(name_len as usize, "mirror name")?.to_vec())
            .map_err(|_| "mirror name is not UTF-8".to_string())?;
        let mut id = [0u8; 16];
        id.copy_from_slice(k.take(16, "topic id")?);
        let partition = k.i32("partition")?;
        k.end("key")?;
        let key = MirrorKey {
            mirror,
            topic_id: TopicId(id),
            partition,
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
        let mut v = Reader(value);
        let version = v.i16("value version")?;
        if version != 0 {
            return Err(format!("unsupported value version {version}"));
        }
        if kind == PARTITION_STATE_TYPE {
            let (state, layout) = decode_state(v.0)?;
            return Ok(DecodedRecord {
                record: MirrorRecord::State(key, Some(state)),
                layout: Some(layout),
                last_mirror_offset: None,
            });
        }
        let epoch = v.i32("last mirror epoch")?;
        // The reference's LastMirrorOffset (int64) follows the epoch; klog's older values end there.
        let (offset, layout) = match Reader(v.0).whole(|r| {
            let offset = r.i64("last mirror offset")?;
            r.tagged_fields(|_, _| Ok(()))?;
            Ok(offset)
        }) {
            Ok(offset) => (Some(offset), ValueLayout::Reference),
            Err(_) => {
                v.tagged_fields(|_, _| Ok(()))?;
                v.end("value")?;
                (None, ValueLayout::Older)
            }
        };
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

/// A state value in the reference layout, with klog's tagged fields (ascending, as the flexible
/// format requires).
fn encode_state(v: &PartitionStateValue) -> Vec<u8> {
    let mut b = vec![0, 0]; // value version 0
    b.push(v.state.to_byte() as u8);
    b.extend_from_slice(&v.leader_epoch.to_be_bytes());
    b.extend_from_slice(&v.state_epoch.to_be_bytes());
    match &v.error {
        None => put_uvarint(&mut b, 0),
        Some(e) => {
            put_uvarint(&mut b, e.len() as u32 + 1);
            b.extend_from_slice(e.as_bytes());
        }
    }
    b.extend_from_slice(&v.retry_attempt.to_be_bytes());
    b.push(v.previous.to_byte() as u8);
    let mut fields: Vec<(u32, Vec<u8>)> = vec![(KLOG_LAYOUT_TAG, vec![KLOG_LAYOUT_REVISION as u8])];
    if let Some(t) = v.next_retry_ms {
        fields.push((NEXT_RETRY_TIME_TAG, t.to_be_bytes().to_vec()));
    }
    if let Some(e) = v.stopping_last_mirror_epoch {
        fields.push((STOPPING_LAST_MIRROR_EPOCH_TAG, e.to_be_bytes().to_vec()));
    }
    put_uvarint(&mut b, fields.len() as u32);
    for (tag, data) in fields {
        put_uvarint(&mut b, tag);
        put_uvarint(&mut b, data.len() as u32);
        b.extend_from_slice(&data);
    }
    b
}

/// A state value after its version: klog's (the reference layout with [`KLOG_LAYOUT_TAG`]), else the
/// older layout, else the reference's; each must take the bytes exactly. The error is the reference
/// layout's, naming its field.
fn decode_state(bytes: &[u8]) -> Result<(PartitionStateValue, ValueLayout), String> {
    let reference = Reader(bytes).whole(read_reference_state);
    if let Ok((value, true)) = reference {
        return Ok((value, ValueLayout::Klog));
    }
    if let Ok(value) = Reader(bytes).whole(read_older_state) {
        return Ok((value, ValueLayout::Older));
    }
    reference.map(|(value, _)| (value, ValueLayout::Reference))
}

fn read_state(r: &mut Reader<'_>, what: &str, older: bool) -> Result<MirrorState, String> {
    let b = r.i8(what)?;
    let decoded = if older {
        MirrorState::from_older_byte(b)
    } else {
        MirrorState::from_byte(b)
    };
    decoded.ok_or_else(|| format!("unknown {what} {b}"))
}

fn read_error_message(r: &mut Reader<'_>) -> Result<Option<String>, String> {
    match r.uvarint("error message length")? {
        0 => Ok(None),
        n => String::from_utf8(r.take(n as usize - 1, "error message")?.to_vec())
            .map(Some)
            .map_err(|_| "error message is not UTF-8".to_string()),
    }
}

/// The reference layout; the flag says whether klog's layout tag was there.
fn read_reference_state(r: &mut Reader<'_>) -> Result<(PartitionStateValue, bool), String> {
    let state = read_state(r, "state", false)?;
    let leader_epoch = r.i32("leader epoch")?;
    let state_epoch = r.i32("state epoch")?;
    let error = read_error_message(r)?;
    let retry_attempt = r.i16("retry attempt")?;
    let previous = read_state(r, "previous state", false)?;
    let mut value = PartitionStateValue {
        leader_epoch,
        state_epoch,
        previous,
        retry_attempt,
        error,
        ..PartitionStateValue::new(state)
    };
    let mut klog = false;
    r.tagged_fields(|tag, mut field| {
        match tag {
            KLOG_LAYOUT_TAG => {
                field.i8("klog layout")?;
                klog = true;
            }
            NEXT_RETRY_TIME_TAG => value.next_retry_ms = Some(field.i64("next retry time")?),
            STOPPING_LAST_MIRROR_EPOCH_TAG => {
                value.stopping_last_mirror_epoch = Some(field.i32("stopping last mirror epoch")?)
            }
            _ => return Ok(()), // a later version's field: skipped, as Kafka does
        }
        field.end("tagged field")
    })?;
    Ok((value, klog))
}

/// The older layout: State, PreviousState (older numbering), RetryAttempt, ErrorMessage, tags 0 and 1.
fn read_older_state(r: &mut Reader<'_>) -> Result<PartitionStateValue, String> {
    let state = read_state(r, "state", true)?;
    let previous = read_state(r, "previous state", true)?;
    let retry_attempt = r.i16("retry attempt")?;
    let error = read_error_message(r)?;
    let mut value = PartitionStateValue {
        previous,
        retry_attempt,
        error,
        ..PartitionStateValue::new(state)
    };
    r.tagged_fields(|tag, mut field| {
        match tag {
            OLDER_NEXT_RETRY_TIME_TAG => value.next_retry_ms = Some(field.i64("next retry time")?),
            OLDER_STOPPING_LAST_MIRROR_EPOCH_TAG => {
                value.stopping_last_mirror_epoch = Some(field.i32("stopping last mirror epoch")?)
            }
            _ => return Ok(()),
        }
        field.end("tagged field")
    })?;
    Ok(value)
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!("{what}: need {n} bytes, {} remain", self.0.len()));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn i8(&mut self, what: &str) -> Result<i8, String> {
        Ok(self.take(1, what)?[0] as i8)
    }

    fn i16(&mut self, what: &str) -> Result<i16, String> {
        Ok(i16::from_be_bytes(
            self.take(2, what)?.try_into().expect("2"),
        ))
    }

    fn i32(&mut self, what: &str) -> Result<i32, String> {
        Ok(i32::from_be_bytes(
            self.take(4, what)?.try_into().expect("4"),
        ))
    }

    fn i64(&mut self, what: &str) -> Result<i64, String> {
        Ok(i64::from_be_bytes(
            self.take(8, what)?.try_into().expect("8"),
        ))
    }

    fn uvarint(&mut self, what: &str) -> Result<u32, String> {
        let mut v = 0u32;
        for shift in (0..35).step_by(7) {
            let b = self.take(1, what)?[0];
            v |= u32::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("{what}: varint longer than 5 bytes"))
    }

    /// Reads the tagged-field section, handing each field's tag and bytes to `field` (which skips the
    /// tags it does not know: the flexible format allows them).
    fn tagged_fields(
        &mut self,
        mut field: impl FnMut(u32, Reader<'a>) -> Result<(), String>,
    ) -> Result<(), String> {
        let n = self.uvarint("tagged field count")?;
        for _ in 0..n {
            let tag = self.uvarint("tag")?;
            let size = self.uvarint("tagged field size")?;
            field(tag, Reader(self.take(size as usize, "tagged field")?))?;
        }
        Ok(())
    }

    /// Runs `read` over the reader, which must then be at its end.
    fn whole<T>(
        mut self,
        read: impl FnOnce(&mut Reader<'a>) -> Result<T, String>,
    ) -> Result<T, String> {
        let value = read(&mut self)?;
        self.end("value")?;
        Ok(value)
    }

    fn end(&self, what: &str) -> Result<(), String> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(format!("{} bytes left after the {what}", self.0.len()))
        }
    }
}

#[cfg(test)]
mod tests;
