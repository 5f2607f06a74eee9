//! `__consumer_offsets`: the offset-commit record, typed, in both directions, and the partition a group's
//! records go to (Kafka's `GroupCoordinatorService.partitionFor`: `Utils.abs(groupId.hashCode()) %
//! offsets.topic.num.partitions`).

pub use super::record::CONSUMER_OFFSETS_TOPIC;
use super::record::{Coordinator, CoordinatorRecord};
use super::schemas::{OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE};
use super::{CoordinatorCorruption, Part};
use crate::schema::{decode, encode, Struct, Value};
use crate::Error;

/// The record type of an offset commit as Kafka writes it (type 0, `LegacyOffsetCommitKey`, has the same
/// key layout and is read too).
const OFFSET_COMMIT_TYPE: i16 = 1;

/// Java's `String.hashCode()`: `s[0]*31^(n-1) + ... + s[n-1]` over the string's UTF-16 code units, in
/// wrapping 32-bit arithmetic (a character outside the BMP counts as its two surrogates).
pub fn java_string_hash_code(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(unit as i32))
}

/// The `__consumer_offsets` partition that holds `group`'s records when the topic has `partitions`
/// partitions (`offsets.topic.num.partitions`, 50 by default). Kafka's `Utils.abs` maps
/// `Integer.MIN_VALUE` to 0 where `Math.abs` would leave it negative.
pub fn partition_for_group(group: &str, partitions: u32) -> u32 {
    assert!(partitions > 0, "a topic has at least one partition");
    let hash = java_string_hash_code(group);
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs as u32 % partitions
}

/// The key of an offset commit: which group committed an offset for which partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitKey {
    /// The consumer group id.
    pub group: String,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
}

/// The value of an offset commit (`OffsetCommitValue`, versions 0 to 4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitValue {
    /// The committed offset: the next record the group reads.
    pub offset: i64,
    /// Versions 3+; -1 when unknown.
    pub leader_epoch: i32,
    /// The client's metadata string.
    pub metadata: String,
    /// When the offset was committed (ms).
    pub commit_timestamp: i64,
    /// Version 1 only; -1 otherwise.
    pub expire_timestamp: i64,
    /// Version 4+ (a tagged field); `None` is Kafka's zero UUID.
    pub topic_id: Option<[u8; 16]>,
}

impl OffsetCommitKey {
    /// `[type 1][group][topic][partition]`, as Kafka's group coordinator writes it.
    pub fn encode(&self) -> Result<Vec<u8>, Error> {
        let s = Struct {
            version: 0,
            fields: vec![
                (
                    &OFFSET_COMMIT_KEY.fields[0],
                    Value::Str(self.group.clone().into()),
                ),
                (
                    &OFFSET_COMMIT_KEY.fields[1],
                    Value::Str(self.topic.clone().into()),
                ),
                (
                    &OFFSET_COMMIT_KEY.fields[2],
                    Value::Int(self.partition as i64),
                ),
            ],
        };
        let body = encode(&OFFSET_COMMIT_KEY, 0, &s)
            .map_err(|_| Error::InvalidInput("a group or topic name longer than 32767 bytes"))?;
        Ok([&OFFSET_COMMIT_TYPE.to_be_bytes()[..], &body].concat())
    }

    /// Decodes the key of an offset commit (record type 0 or 1); another record type is an error.
    pub fn decode(key: &[u8]) -> Result<OffsetCommitKey, Error> {
        let r = CoordinatorRecord::decode(Coordinator::Group, Some(key), None)?;
        if r.record_type > OFFSET_COMMIT_TYPE {
            return Err(Error::CorruptCoordinatorRecord(
                CoordinatorCorruption::UnknownRecordType(r.record_type),
            ));
        }
        Ok(OffsetCommitKey {
            group: r.key.str("group").unwrap_or_default().to_owned(),
            topic: r.key.str("topic").unwrap_or_default().to_owned(),
            partition: r.key.int("partition").unwrap_or_default() as i32,
        })
    }
}

impl OffsetCommitValue {
    /// The value at `version` (0..=4): fields the version lacks are left out, as Kafka's writer does.
    /// Kafka 4.x writes version 4 (Kafka 4.4 with the topic id), 1 for a commit with an expire timestamp.
    pub fn encode(&self, version: i16) -> Result<Vec<u8>, Error> {
        if !OFFSET_COMMIT_VALUE.valid.contains(version) {
            return Err(Error::InvalidInput("OffsetCommitValue has versions 0 to 4"));
        }
        let values = [
            Value::Int(self.offset),
            Value::Int(self.leader_epoch as i64),
            Value::Str(self.metadata.clone().into()),
            Value::Int(self.commit_timestamp),
            Value::Int(self.expire_timestamp),
            Value::Uuid(self.topic_id.unwrap_or([0; 16])),
        ];
        let s = Struct {
            version,
            fields: OFFSET_COMMIT_VALUE.fields.iter().zip(values).collect(),
        };
        let body = encode(&OFFSET_COMMIT_VALUE, version, &s)
            .map_err(|_| Error::InvalidInput("metadata longer than 32767 bytes"))?;
        Ok([&version.to_be_bytes()[..], &body].concat())
    }

    /// Decodes an offset commit's value; the version it was written at comes back with it.
    pub fn decode(value: &[u8]) -> Result<(i16, OffsetCommitValue), Error> {
        let version = match value {
            [a, b, ..] => i16::from_be_bytes([*a, *b]),
            _ => {
                return Err(Error::CorruptCoordinatorRecord(
                    CoordinatorCorruption::NoVersion(Part::Value),
                ))
            }
        };
        if !OFFSET_COMMIT_VALUE.valid.contains(version) {
            return Err(Error::CorruptCoordinatorRecord(
                CoordinatorCorruption::UnknownVersion {
                    record_type: OFFSET_COMMIT_TYPE,
                    version,
                },
            ));
        }
        let s = decode(&OFFSET_COMMIT_VALUE, version, &value[2..]).map_err(|error| {
            Error::CorruptCoordinatorRecord(CoordinatorCorruption::Field {
                part: Part::Value,
                record_type: OFFSET_COMMIT_TYPE,
                version,
                error,
            })
        })?;
        let topic_id = match s.get("topicId") {
            Some(Value::Uuid(u)) if *u != [0; 16] => Some(*u),
            _ => None,
        };
        Ok((
            version,
            OffsetCommitValue {
                offset: s.int("offset").unwrap_or(-1),
                leader_epoch: s.int("leaderEpoch").unwrap_or(-1) as i32,
                metadata: s.str("metadata").unwrap_or_default().to_owned(),
                commit_timestamp: s.int("commitTimestamp").unwrap_or(-1),
                expire_timestamp: s.int("expireTimestamp").unwrap_or(-1),
                topic_id,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each expected value was computed by Java 17 (`jshell`): `s.hashCode()` and
    /// `org.apache.kafka.common.utils.Utils.abs(s.hashCode()) % 50`.
    #[test]
    fn hash_and_partition_match_java() {
        for (s, hash, partition) in JAVA_VALUES {
            assert_eq!(java_string_hash_code(s), *hash, "hashCode of {s:?}");
            assert_eq!(partition_for_group(s, 50), *partition, "partition of {s:?}");
        }
        assert_eq!(partition_for_group("anything", 1), 0);
    }

    const JAVA_VALUES: &[(&str, i32, u32)] = include!("java_hash_values.in");

    #[test]
    fn offset_commit_round_trips_at_every_version() {
        let key = OffsetCommitKey {
            group: "g".into(),
            topic: "orders".into(),
            partition: 7,
        };
        let bytes = key.encode().unwrap();
        assert_eq!(
            bytes,
            [&[0, 1, 0, 1, b'g', 0, 6][..], b"orders", &[0, 0, 0, 7]].concat()
        );
        assert_eq!(OffsetCommitKey::decode(&bytes).unwrap(), key);
        let value = OffsetCommitValue {
            offset: 42,
            leader_epoch: 3,
            metadata: "m".into(),
            commit_timestamp: 1_700_000_000_000,
            expire_timestamp: -1,
            topic_id: Some([9; 16]),
        };
        for version in 0..=4 {
            let bytes = value.encode(version).unwrap();
            let (v, back) = OffsetCommitValue::decode(&bytes).unwrap();
            assert_eq!(v, version);
            assert_eq!(back.offset, 42);
            assert_eq!(back.leader_epoch, if version >= 3 { 3 } else { -1 });
            assert_eq!(back.topic_id, (version >= 4).then_some([9; 16]));
        }
        // Version 3, as Kafka 4.x writes a plain commit: offset, leader epoch, metadata, timestamp.
        let v3 = value.encode(3).unwrap();
        let mut want = vec![0, 3];
        want.extend_from_slice(&42i64.to_be_bytes());
        want.extend_from_slice(&3i32.to_be_bytes());
        want.extend_from_slice(&[0, 1, b'm']);
        want.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        assert_eq!(v3, want);
        // Version 4 is flexible: compact string, then the tagged topic id (tag 0, 16 bytes).
        let v4 = value.encode(4).unwrap();
        assert_eq!(&v4[14..16], &[2, b'm']);
        assert_eq!(&v4[24..27], &[1, 0, 16]);
        assert_eq!(v4.len(), 27 + 16);
        assert!(value.encode(5).is_err());
    }

    #[test]
    fn bad_bytes_are_errors_naming_the_field() {
        let key = OffsetCommitKey {
            group: "group".into(),
            topic: "t".into(),
            partition: 0,
        }
        .encode()
        .unwrap();
        for cut in 0..key.len() {
            let e = OffsetCommitKey::decode(&key[..cut])
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("record type") || e.contains("field"),
                "{cut}: {e}"
            );
        }
        let e = OffsetCommitValue::decode(&[0, 9]).unwrap_err().to_string();
        assert!(e.contains("unknown version 9"), "{e}");
        let e = OffsetCommitKey::decode(&[0, 2, 0, 1, b'g'])
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown record type 2"), "{e}");
    }
}
