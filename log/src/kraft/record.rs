//! One record of the metadata log: the value of a `__cluster_metadata` data record (Kafka's
//! `MetadataRecordSerde`) and the values of the KRaft control records.
//!
//! A metadata record's value is framed as `frame version` (unsigned varint, 1), `api key` (unsigned varint:
//! the record type), `version` (unsigned varint), then the message in that version's flexible encoding,
//! with nothing after it. See `docs/format.md`. Both decode and encode (the writer's, and the proof that
//! the encoder is the decoder's inverse on Kafka's own records).

use super::schemas::{CONTROL_RECORDS, METADATA_RECORDS};
use crate::format::varint::{write_unsigned_varint, Cursor};
use crate::format::ControlRecordType;
use crate::schema::{
    decode, decode_prefix, encode_into, to_json, EncodeError, FieldCorruption, FieldError,
    MessageSchema, Struct,
};
use crate::{MetadataCorruption, RecordCorruption};

/// The only frame version Kafka writes and reads (`AbstractApiMessageSerde.DEFAULT_FRAME_VERSION`).
pub const FRAME_VERSION: u32 = 1;

/// A decoded metadata record.
#[derive(Debug, Clone)]
pub struct MetadataRecord<'a> {
    /// The record type's schema.
    pub schema: &'static MessageSchema,
    /// The version it was written in.
    pub version: i16,
    /// Its fields.
    pub data: Struct<'a>,
}

impl PartialEq for MetadataRecord<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.schema.api_key == other.schema.api_key
            && self.version == other.version
            && self.data == other.data
    }
}

impl<'a> MetadataRecord<'a> {
    /// Decodes a metadata record's value; `None` (a null value) is refused as Kafka refuses it.
    pub fn decode(value: Option<&'a [u8]>) -> Result<Self, MetadataCorruption> {
        let value = value.ok_or(MetadataCorruption::NullValue)?;
        let mut cursor = Cursor::new(value);
        let header = |cursor: &mut Cursor<'_>, what: &'static str| {
            let v =
                cursor
                    .read_unsigned_varint(what)
                    .map_err(|reason| MetadataCorruption::Field {
                        record: "metadata record",
                        field: what,
                        reason,
                    })?;
            i16::try_from(v).map_err(|_| MetadataCorruption::HeaderTooLarge { what, value: v })
        };
        let frame = header(&mut cursor, "frame version")?;
        if frame as u32 != FRAME_VERSION {
            return Err(MetadataCorruption::FrameVersion(frame as u32));
        }
        let api_key = header(&mut cursor, "type")?;
        let version = header(&mut cursor, "version")?;
        let schema = schema_for(api_key).ok_or(MetadataCorruption::UnknownType(api_key))?;
        if !schema.valid.contains(version) {
            return Err(MetadataCorruption::UnsupportedVersion {
                record: schema.name,
                version,
            });
        }
        let message = cursor.rest();
        let (data, used) = decode_prefix(schema, version, message)
            .map_err(|e| field_corruption(schema.name, e))?;
        if used < message.len() {
            return Err(MetadataCorruption::Garbage {
                record: schema.name,
                bytes: message.len() - used,
            });
        }
        Ok(MetadataRecord {
            schema,
            version,
            data,
        })
    }

    /// The record's value bytes as Kafka frames them (the inverse of [`MetadataRecord::decode`]): frame
    /// version 1, api key and version as unsigned varints, then the message.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        write_unsigned_varint(&mut out, FRAME_VERSION);
        write_unsigned_varint(&mut out, self.schema.api_key as u32);
        write_unsigned_varint(&mut out, self.version as u32);
        encode_into(&mut out, self.schema, self.version, &self.data)?;
        Ok(out)
    }

    /// `MetadataRecordType`'s name (`TOPIC_RECORD`).
    pub fn type_name(&self) -> &'static str {
        self.schema.type_name
    }

    /// What `kafka-dump-log --cluster-metadata-decoder` prints as the payload:
    /// `{"type":"TOPIC_RECORD","version":0,"data":{...}}`.
    pub fn to_kafka_json(&self) -> String {
        format!(
            "{{\"type\":\"{}\",\"version\":{},\"data\":{}}}",
            self.schema.type_name,
            self.version,
            to_json(&self.data)
        )
    }
}

/// The schema of a metadata record type.
pub fn schema_for(api_key: i16) -> Option<&'static MessageSchema> {
    METADATA_RECORDS.iter().find(|s| s.api_key == api_key)
}

/// A KRaft control record's value decoded (`SnapshotHeader`, `SnapshotFooter`, `KRaftVersion`,
/// `KRaftVoters`): its label as `kafka-dump-log` prints it and the message. `None` for other control types.
pub fn decode_control_value(
    record_type: ControlRecordType,
    value: &[u8],
) -> Option<Result<(&'static str, Struct<'_>), MetadataCorruption>> {
    let (label, name) = match record_type {
        ControlRecordType::SnapshotHeader => ("SnapshotHeader", "SnapshotHeaderRecord"),
        ControlRecordType::SnapshotFooter => ("SnapshotFooter", "SnapshotFooterRecord"),
        ControlRecordType::KraftVersion => ("KRaftVersion", "KRaftVersionRecord"),
        ControlRecordType::KraftVoters => ("KRaftVoters", "VotersRecord"),
        _ => return None,
    };
    let schema = CONTROL_RECORDS.iter().find(|s| s.name == name)?;
    // Kafka reads these at the version it writes (0) and prints them with the version field they carry.
    Some(
        decode(schema, 0, value)
            .map(|s| (label, s))
            .map_err(|e| field_corruption(schema.name, e)),
    )
}

/// A KRaft control record's value at version 0 (the inverse of [`decode_control_value`]'s message).
pub fn encode_control_value(
    schema: &MessageSchema,
    message: &Struct<'_>,
) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    encode_into(&mut out, schema, 0, message)?;
    Ok(out)
}

/// The schema of a KRaft control record's value, by Kafka's class name (`SnapshotHeaderRecord`).
pub fn control_schema(name: &str) -> Option<&'static MessageSchema> {
    CONTROL_RECORDS.iter().find(|s| s.name == name)
}

/// A field that did not decode, in the terms of [`MetadataCorruption`].
fn field_corruption(record: &'static str, e: FieldError) -> MetadataCorruption {
    let field = if e.field == "_taggedFields" {
        "(tagged fields)"
    } else {
        e.field
    };
    match e.reason {
        // NotUtf8 is never produced here: KRaft records are decoded with lossy strings, as Kafka's
        // readers decode them.
        FieldCorruption::Truncated | FieldCorruption::NotUtf8 => MetadataCorruption::Field {
            record,
            field,
            reason: RecordCorruption::Truncated { field: e.what },
        },
        FieldCorruption::VarintTooLong => MetadataCorruption::Field {
            record,
            field,
            reason: RecordCorruption::VarintTooLong { field: e.what },
        },
        FieldCorruption::NullNotNullable => MetadataCorruption::NullField { record, field },
        FieldCorruption::InvalidLength(length) => MetadataCorruption::StringLength {
            record,
            field,
            length: length as u32,
        },
        FieldCorruption::TooManyElements { count, remaining } => MetadataCorruption::ArrayLength {
            record,
            field,
            length: count as u32,
            remaining: remaining as usize,
        },
        FieldCorruption::TaggedFieldSize {
            tag,
            declared,
            used,
        } => MetadataCorruption::TaggedFieldSize {
            record,
            tag,
            declared,
            used,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TopicRecord v0 as Kafka frames it: frame 1, type 2, version 0, compact name, uuid, no tags.
    fn topic_record(name: &str, id: [u8; 16]) -> Vec<u8> {
        let mut v = vec![1, 2, 0, name.len() as u8 + 1];
        v.extend_from_slice(name.as_bytes());
        v.extend_from_slice(&id);
        v.push(0);
        v
    }

    #[test]
    fn a_topic_record_decodes_and_prints_as_kafka_does() {
        let bytes = topic_record("t1", [7; 16]);
        let r = MetadataRecord::decode(Some(&bytes)).unwrap();
        assert_eq!(r.type_name(), "TOPIC_RECORD");
        assert_eq!(r.data.str("name"), Some("t1"));
        assert_eq!(
            r.to_kafka_json(),
            "{\"type\":\"TOPIC_RECORD\",\"version\":0,\"data\":{\"name\":\"t1\",\"topicId\":\"BwcHBwcHBwcHBwcHBwcHBw\"}}"
        );
    }

    #[test]
    fn every_truncation_and_bad_header_is_an_error_never_a_panic() {
        let bytes = topic_record("t1", [7; 16]);
        for len in 0..bytes.len() {
            assert!(
                MetadataRecord::decode(Some(&bytes[..len])).is_err(),
                "{len}"
            );
        }
        let mut garbage = bytes.clone();
        garbage.push(9);
        assert_eq!(
            MetadataRecord::decode(Some(&garbage)).unwrap_err(),
            MetadataCorruption::Garbage {
                record: "TopicRecord",
                bytes: 1
            }
        );
        let mut frame0 = bytes.clone();
        frame0[0] = 0;
        assert!(matches!(
            MetadataRecord::decode(Some(&frame0)),
            Err(MetadataCorruption::FrameVersion(0))
        ));
        let mut v9 = bytes.clone();
        v9[2] = 9;
        assert!(matches!(
            MetadataRecord::decode(Some(&v9)),
            Err(MetadataCorruption::UnsupportedVersion { version: 9, .. })
        ));
        let mut unknown = bytes;
        unknown[1] = 120;
        assert!(matches!(
            MetadataRecord::decode(Some(&unknown)),
            Err(MetadataCorruption::UnknownType(120))
        ));
        assert_eq!(
            MetadataRecord::decode(None).unwrap_err(),
            MetadataCorruption::NullValue
        );
    }

    /// The errors keep the words they had before the engine was shared: which field, which part of it.
    #[test]
    fn corruption_names_the_field_and_the_part_read() {
        let bytes = topic_record("t1", [7; 16]);
        let message = |b: &[u8]| MetadataRecord::decode(Some(b)).unwrap_err().to_string();
        assert_eq!(
            message(&bytes[..bytes.len() - 1]),
            "TopicRecord: field (tagged fields): tagged fields runs past the end of the data"
        );
        assert_eq!(
            message(&bytes[..8]),
            "TopicRecord: field topicId: topicId runs past the end of the data"
        );
        let mut tag = bytes.clone();
        tag.pop();
        tag.extend_from_slice(&[1, 5]);
        assert_eq!(
            message(&tag),
            "TopicRecord: field (tagged fields): tag size runs past the end of the data"
        );
        // PartitionChangeRecord v0 with leader (tag 1) declared 5 bytes but an int32 (4).
        let mut sized = vec![1, 5, 0, 0, 0, 0, 0];
        sized.extend_from_slice(&[1; 16]);
        sized.extend_from_slice(&[1, 1, 5, 0, 0, 0, 3, 0]);
        assert_eq!(
            MetadataRecord::decode(Some(&sized)).unwrap_err(),
            MetadataCorruption::TaggedFieldSize {
                record: "PartitionChangeRecord",
                tag: 1,
                declared: 5,
                used: 4
            }
        );
    }

    #[test]
    fn a_null_config_value_is_a_delete_and_prints_null() {
        // ConfigRecord v0: resourceType 2, resourceName "t", name "k", value null.
        let bytes = [1, 4, 0, 2, 2, b't', 2, b'k', 0, 0];
        let r = MetadataRecord::decode(Some(&bytes)).unwrap();
        assert_eq!(
            to_json(&r.data).to_string(),
            "{\"resourceType\":2,\"resourceName\":\"t\",\"name\":\"k\",\"value\":null}"
        );
        // The same with a null name: not nullable.
        let bytes = [1, 4, 0, 2, 2, b't', 0, 0, 0];
        assert!(matches!(
            MetadataRecord::decode(Some(&bytes)),
            Err(MetadataCorruption::NullField { field: "name", .. })
        ));
    }

    #[test]
    fn tagged_fields_are_read_and_printed_only_when_not_default() {
        // PartitionChangeRecord v0: partitionId 0, topicId, tags: leader (tag 1) = 3.
        let mut bytes = vec![1, 5, 0, 0, 0, 0, 0];
        bytes.extend_from_slice(&[1; 16]);
        bytes.extend_from_slice(&[1, 1, 4, 0, 0, 0, 3]);
        let r = MetadataRecord::decode(Some(&bytes)).unwrap();
        assert_eq!(
            to_json(&r.data).to_string(),
            "{\"partitionId\":0,\"topicId\":\"AQEBAQEBAQEBAQEBAQEBAQ\",\"leader\":3}"
        );
        // An array count larger than what remains is refused before anything is allocated.
        let mut bytes = vec![1, 3, 0, 0, 0, 0, 0];
        bytes.extend_from_slice(&[1; 16]);
        bytes.extend_from_slice(&[0xff, 0xff, 0xff, 0x0f]);
        assert!(matches!(
            MetadataRecord::decode(Some(&bytes)),
            Err(MetadataCorruption::ArrayLength {
                field: "replicas",
                ..
            })
        ));
    }
}
