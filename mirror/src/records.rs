//! `__mirror_state` records (KIP-1279 §4): the coordinator-record framing, the two record kinds keyed by
//! (mirror name, topic id, partition), and the coordinator partition of a key.
//!
//! Framing (Kafka's coordinator-record convention): key = `int16 recordType` + the key struct at version
//! 0 (non-flexible); value = `int16 valueVersion` + the value struct (flexible: compact strings, tagged
//! fields); a tombstone has a null value.

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

/// `MirrorPartitionState` tagged field 0: when a FAILED partition is next retried.
pub const NEXT_RETRY_TIME_TAG: u32 = 0;
/// `MirrorPartitionState` tagged field 1: the LME a stop in progress recorded.
pub const STOPPING_LAST_MIRROR_EPOCH_TAG: u32 = 1;

/// The `MirrorPartitionState` value: P2's fields, and two tagged fields of klog's that keep a retry
/// and a stop going across restarts (absent in records written before them, which read as `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionStateValue {
    /// The state.
    pub state: MirrorState,
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

    /// The record's key and value bytes.
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
            MirrorRecord::State(_, Some(v)) => {
                let mut b = vec![0, 0]; // value version 0
                b.push(v.state.to_byte() as u8);
                b.push(v.previous.to_byte() as u8);
                b.extend_from_slice(&v.retry_attempt.to_be_bytes());
                match &v.error {
                    None => put_uvarint(&mut b, 0),
                    Some(e) => {
                        put_uvarint(&mut b, e.len() as u32 + 1);
                        b.extend_from_slice(e.as_bytes());
                    }
                }
                put_state_tags(&mut b, v);
                Some(b)
            }
            MirrorRecord::LastMirrorEpoch(_, Some(epoch)) => {
                let mut b = vec![0, 0];
                b.extend_from_slice(&epoch.to_be_bytes());
                put_uvarint(&mut b, 0);
                Some(b)
            }
        };
        (kb, value)
    }

    /// Decodes one record; the error names the field that failed.
    pub fn decode(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Self, String> {
        let mut k = Reader(key.ok_or("record has no key")?);
        let kind = k.i16("record type")?;
        let name_len = k.i16("mirror name length")?;
        if name_len < 0 {
            return Err("mirror name is null".into());
        }
        let mirror = String::from_utf8(k.take(name_len as usize, "mirror name")?.to_vec())
            .map_err(|_| "mirror name is not UTF-8".to_string())?;
        let topic_id = TopicId(k.take(16, "topic id")?.try_into().expect("16 bytes"));
        let partition = k.i32("partition")?;
        k.end("key")?;
        let key = MirrorKey {
            mirror,
            topic_id,
            partition,
        };
        let Some(value) = value else {
            return match kind {
                PARTITION_STATE_TYPE => Ok(MirrorRecord::State(key, None)),
                LAST_MIRROR_EPOCH_TYPE => Ok(MirrorRecord::LastMirrorEpoch(key, None)),
                other => Err(format!("unknown record type {other}")),
            };
        };
        let mut v = Reader(value);
        let version = v.i16("value version")?;
        if version != 0 {
            return Err(format!("unsupported value version {version}"));
        }
        let record = match kind {
            PARTITION_STATE_TYPE => {
                let state_byte = v.i8("state")?;
                let state = MirrorState::from_byte(state_byte)
                    .ok_or_else(|| format!("unknown state {state_byte}"))?;
                let prev_byte = v.i8("previous state")?;
                let previous = MirrorState::from_byte(prev_byte)
                    .ok_or_else(|| format!("unknown previous state {prev_byte}"))?;
                let retry_attempt = v.i16("retry attempt")?;
                let len = v.uvarint("error message length")?;
                let error = match len {
                    0 => None,
                    n => Some(
                        String::from_utf8(v.take(n as usize - 1, "error message")?.to_vec())
                            .map_err(|_| "error message is not UTF-8".to_string())?,
                    ),
                };
                let mut value = PartitionStateValue {
                    state,
                    previous,
                    retry_attempt,
                    error,
                    next_retry_ms: None,
                    stopping_last_mirror_epoch: None,
                };
                v.tagged_fields(|tag, mut field| {
                    match tag {
                        NEXT_RETRY_TIME_TAG => {
                            value.next_retry_ms = Some(field.i64("next retry time")?)
                        }
                        STOPPING_LAST_MIRROR_EPOCH_TAG => {
                            value.stopping_last_mirror_epoch =
                                Some(field.i32("stopping last mirror epoch")?)
                        }
                        _ => return Ok(()), // a later version's field: skipped, as Kafka does
                    }
                    field.end("tagged field")
                })?;
                MirrorRecord::State(key, Some(value))
            }
            LAST_MIRROR_EPOCH_TYPE => {
                let epoch = v.i32("last mirror epoch")?;
                v.tagged_fields(|_, _| Ok(()))?;
                MirrorRecord::LastMirrorEpoch(key, Some(epoch))
            }
            other => return Err(format!("unknown record type {other}")),
        };
        v.end("value")?;
        Ok(record)
    }

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
                    "previousState": v.previous.name(),
                    "retryAttempt": v.retry_attempt,
                    "errorMessage": v.error,
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

/// The state value's tagged fields, in tag order (the flexible format requires ascending tags).
fn put_state_tags(out: &mut Vec<u8>, v: &PartitionStateValue) {
    let mut fields: Vec<(u32, Vec<u8>)> = Vec::new();
    if let Some(t) = v.next_retry_ms {
        fields.push((NEXT_RETRY_TIME_TAG, t.to_be_bytes().to_vec()));
    }
    if let Some(e) = v.stopping_last_mirror_epoch {
        fields.push((STOPPING_LAST_MIRROR_EPOCH_TAG, e.to_be_bytes().to_vec()));
    }
    put_uvarint(out, fields.len() as u32);
    for (tag, data) in fields {
        put_uvarint(out, tag);
        put_uvarint(out, data.len() as u32);
        out.extend_from_slice(&data);
    }
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

    fn end(&self, what: &str) -> Result<(), String> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(format!("{} bytes left after the {what}", self.0.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(p: i32) -> MirrorKey {
        MirrorKey {
            mirror: "m".into(),
            topic_id: TopicId::parse("AAAAAAAAAAAAAAAAAAAAAQ").unwrap(),
            partition: p,
        }
    }

    #[test]
    fn java_string_hash_matches_java() {
        // Values computed by java.lang.String.hashCode.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99162322);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        // Non-BMP characters hash as two UTF-16 units.
        assert_eq!(java_string_hash("\u{1F600}"), 1772899);
    }

    #[test]
    fn coordinator_partition_uses_kafka_abs() {
        // "polygenelubricants" hashes to Integer.MIN_VALUE: Utils.abs gives 0, not a negative number.
        let h = java_string_hash("polygenelubricants");
        assert_eq!(h, i32::MIN);
        let k = key(3);
        let expected = java_string_hash(&k.coordinator_key()).unsigned_abs() % 50;
        assert_eq!(k.coordinator_partition(50), expected);
        assert_eq!(k.coordinator_key(), "m:AAAAAAAAAAAAAAAAAAAAAQ:3");
    }

    #[test]
    fn records_round_trip_including_tombstones() {
        let records = [
            MirrorRecord::State(
                key(0),
                Some(PartitionStateValue::new(MirrorState::Mirroring)),
            ),
            MirrorRecord::State(
                key(1),
                Some(PartitionStateValue {
                    state: MirrorState::Failed,
                    previous: MirrorState::Preparing,
                    retry_attempt: -1,
                    error: Some("source is gone".into()),
                    next_retry_ms: None,
                    stopping_last_mirror_epoch: None,
                }),
            ),
            MirrorRecord::State(
                key(3),
                Some(PartitionStateValue {
                    state: MirrorState::Failed,
                    previous: MirrorState::Stopping,
                    retry_attempt: 2,
                    error: Some("disk full".into()),
                    next_retry_ms: Some(1_700_000_002_000),
                    stopping_last_mirror_epoch: Some(-1),
                }),
            ),
            MirrorRecord::State(key(2), None),
            MirrorRecord::LastMirrorEpoch(key(0), Some(7)),
            MirrorRecord::LastMirrorEpoch(key(0), None),
        ];
        for r in records {
            let (k, v) = r.encode();
            assert_eq!(MirrorRecord::decode(Some(&k), v.as_deref()).unwrap(), r);
        }
    }

    #[test]
    fn state_value_layout_is_fixed() {
        let r = MirrorRecord::State(key(5), Some(PartitionStateValue::new(MirrorState::Stopped)));
        let (k, v) = r.encode();
        let mut expected_key = vec![0, 2, 0, 1, b'm'];
        expected_key.extend_from_slice(&key(5).topic_id.0);
        expected_key.extend_from_slice(&[0, 0, 0, 5]);
        assert_eq!(k, expected_key);
        // version 0, STOPPED=5, previous UNKNOWN=16, retry 0, null message, no tags.
        assert_eq!(v.unwrap(), vec![0, 0, 5, 16, 0, 0, 0, 0]);
    }

    #[test]
    fn tagged_fields_are_appended_and_old_or_newer_values_still_decode() {
        let mut v = PartitionStateValue::new(MirrorState::Stopping);
        v.stopping_last_mirror_epoch = Some(7);
        v.next_retry_ms = Some(0x0102);
        let (k, bytes) = MirrorRecord::State(key(5), Some(v.clone())).encode();
        let bytes = bytes.unwrap();
        // The v0 fields unchanged, then 2 tagged fields: tag 0 (8 bytes), tag 1 (4 bytes).
        let mut expected = vec![0, 0, 4, 16, 0, 0, 0, 2];
        expected.extend_from_slice(&[0, 8, 0, 0, 0, 0, 0, 0, 1, 2]);
        expected.extend_from_slice(&[1, 4, 0, 0, 0, 7]);
        assert_eq!(bytes, expected);
        // A record written before the fields decodes with neither.
        let old = [0, 0, 4, 16, 0, 0, 0, 0];
        let MirrorRecord::State(_, Some(decoded)) =
            MirrorRecord::decode(Some(&k), Some(&old)).unwrap()
        else {
            panic!("a state record")
        };
        assert_eq!(decoded, PartitionStateValue::new(MirrorState::Stopping));
        // A later version's unknown tag is skipped.
        let newer = [0, 0, 4, 16, 0, 0, 0, 1, 9, 2, 0xab, 0xcd];
        let MirrorRecord::State(_, Some(decoded)) =
            MirrorRecord::decode(Some(&k), Some(&newer)).unwrap()
        else {
            panic!("a state record")
        };
        assert_eq!(decoded, PartitionStateValue::new(MirrorState::Stopping));
        // A known tag of the wrong size is a named error.
        let short = [0, 0, 4, 16, 0, 0, 0, 1, 1, 2, 0, 7];
        assert!(MirrorRecord::decode(Some(&k), Some(&short))
            .unwrap_err()
            .contains("stopping last mirror epoch"));
    }

    #[test]
    fn malformed_records_are_named_errors() {
        let (k, v) = MirrorRecord::LastMirrorEpoch(key(0), Some(3)).encode();
        let v = v.unwrap();
        assert!(MirrorRecord::decode(None, Some(&v))
            .unwrap_err()
            .contains("no key"));
        assert!(MirrorRecord::decode(Some(&k[..5]), Some(&v))
            .unwrap_err()
            .contains("topic id"));
        assert!(MirrorRecord::decode(Some(&k), Some(&v[..4]))
            .unwrap_err()
            .contains("last mirror epoch"));
        let mut bad = v.clone();
        bad[1] = 9;
        assert!(MirrorRecord::decode(Some(&k), Some(&bad))
            .unwrap_err()
            .contains("version 9"));
        let mut long = v.clone();
        long.push(0);
        assert!(MirrorRecord::decode(Some(&k), Some(&long))
            .unwrap_err()
            .contains("left after"));
        let mut kind = k.clone();
        kind[1] = 9;
        assert!(MirrorRecord::decode(Some(&kind), Some(&v))
            .unwrap_err()
            .contains("record type 9"));
    }
}
