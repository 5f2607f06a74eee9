//! Control records: the key `(int16 version, int16 type)` and the values Kafka and KIP-1279 define.
//!
//! - ABORT (0) / COMMIT (1): `EndTxnMarker` value `(int16 version, int32 coordinatorEpoch)`.
//! - MIRROR_PID_RESET (7): flexible v0 `MirrorPidResetRecord`, in either of the reference forks' layouts:
//!   the newest `{Version}` (int16 version, tagged fields: `00 00 00`), which klog writes, or the earlier
//!   `{Version, SourceClusterId}` (int16 version, compact string, tagged fields). Written with producer
//!   id -1 so unmodified brokers never parse it as a txn marker. docs/compatibility.md says why.
//! - The KRaft types (2-6) are recognized and kept raw.

use std::fmt;

use super::varint::{write_unsigned_varint, Cursor};
use crate::Corruption;

/// Control record types (`ControlRecordType.java`, plus KIP-1279's type 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlRecordType {
    /// ABORT transaction marker (0).
    Abort,
    /// COMMIT transaction marker (1).
    Commit,
    /// KRaft leader change (2).
    LeaderChange,
    /// KRaft snapshot header (3).
    SnapshotHeader,
    /// KRaft snapshot footer (4).
    SnapshotFooter,
    /// KRaft version (5).
    KraftVersion,
    /// KRaft voters (6).
    KraftVoters,
    /// KIP-1279 MIRROR_PID_RESET barrier (7).
    MirrorPidReset,
    /// A type klog does not know, with its id.
    Unknown(i16),
}

impl ControlRecordType {
    /// The type of a control key's type id.
    pub fn from_id(id: i16) -> Self {
        match id {
            0 => Self::Abort,
            1 => Self::Commit,
            2 => Self::LeaderChange,
            3 => Self::SnapshotHeader,
            4 => Self::SnapshotFooter,
            5 => Self::KraftVersion,
            6 => Self::KraftVoters,
            7 => Self::MirrorPidReset,
            other => Self::Unknown(other),
        }
    }

    /// The type id in the control key.
    pub fn id(self) -> i16 {
        match self {
            Self::Abort => 0,
            Self::Commit => 1,
            Self::LeaderChange => 2,
            Self::SnapshotHeader => 3,
            Self::SnapshotFooter => 4,
            Self::KraftVersion => 5,
            Self::KraftVoters => 6,
            Self::MirrorPidReset => 7,
            Self::Unknown(id) => id,
        }
    }

    /// The snake-case name of `klog dump --json` (`unknown_N` for others).
    pub fn json_name(self) -> String {
        match self {
            Self::Abort => "abort".into(),
            Self::Commit => "commit".into(),
            Self::LeaderChange => "leader_change".into(),
            Self::SnapshotHeader => "snapshot_header".into(),
            Self::SnapshotFooter => "snapshot_footer".into(),
            Self::KraftVersion => "kraft_version".into(),
            Self::KraftVoters => "kraft_voters".into(),
            Self::MirrorPidReset => "mirror_pid_reset".into(),
            Self::Unknown(id) => format!("unknown_{id}"),
        }
    }

    /// The Java enum name, as `kafka-dump-log` prints it.
    pub fn kafka_name(self) -> &'static str {
        match self {
            Self::Abort => "ABORT",
            Self::Commit => "COMMIT",
            Self::LeaderChange => "LEADER_CHANGE",
            Self::SnapshotHeader => "SNAPSHOT_HEADER",
            Self::SnapshotFooter => "SNAPSHOT_FOOTER",
            Self::KraftVersion => "KRAFT_VERSION",
            Self::KraftVoters => "KRAFT_VOTERS",
            Self::MirrorPidReset => "MIRROR_PID_RESET",
            Self::Unknown(_) => "UNKNOWN",
        }
    }

    /// `ControlRecordType.parse`: the key's version and type. The type alone decides what a control
    /// record is (a MIRROR_PID_RESET barrier is one whatever its value holds), so it is read apart from
    /// the value.
    pub fn parse_key(key: Option<&[u8]>) -> Result<(i16, Self), Corruption> {
        let key = key.ok_or(Corruption::ControlKey("null control record key"))?;
        if key.len() < 4 {
            return Err(Corruption::ControlKey(
                "control record key shorter than 4 bytes",
            ));
        }
        let key_version = i16::from_be_bytes([key[0], key[1]]);
        if key_version < 0 {
            return Err(Corruption::ControlKey(
                "negative control record key version",
            ));
        }
        Ok((
            key_version,
            Self::from_id(i16::from_be_bytes([key[2], key[3]])),
        ))
    }

    /// The 4-byte control key.
    pub fn key(self) -> [u8; 4] {
        let mut k = [0u8; 4];
        k[2..].copy_from_slice(&self.id().to_be_bytes());
        k
    }
}

impl fmt::Display for ControlRecordType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kafka_name())
    }
}

/// An end-transaction marker's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnMarker {
    /// The value version (0).
    pub version: i16,
    /// The transaction coordinator's epoch.
    pub coordinator_epoch: i32,
}

impl EndTxnMarker {
    /// The 6-byte value: version, coordinator epoch.
    pub fn encode(&self) -> [u8; 6] {
        let mut v = [0u8; 6];
        v[..2].copy_from_slice(&self.version.to_be_bytes());
        v[2..].copy_from_slice(&self.coordinator_epoch.to_be_bytes());
        v
    }

    /// `EndTransactionMarker.deserializeValue`: at least 6 bytes, version >= 0, higher versions read as v0.
    pub fn parse(value: &[u8]) -> Result<Self, Corruption> {
        if value.len() < 6 {
            return Err(Corruption::ControlValue(
                "end transaction marker shorter than 6 bytes",
            ));
        }
        let version = i16::from_be_bytes([value[0], value[1]]);
        if version < 0 {
            return Err(Corruption::ControlValue(
                "negative end transaction marker version",
            ));
        }
        let coordinator_epoch = i32::from_be_bytes([value[2], value[3], value[4], value[5]]);
        Ok(EndTxnMarker {
            version,
            coordinator_epoch,
        })
    }
}

/// KIP-1279's barrier value. The reference forks disagree on its layout, and neither generation's reader
/// takes the other's bytes: the newest (showuon/kafka `MirrorPidResetRecord.json`) is `{Version}`, the
/// earlier one and aiven/kafka's are `{Version, SourceClusterId}`. Both are read; klog writes the newest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorPidReset {
    /// The value version.
    pub version: i16,
    /// The cluster the mirror copied from: only in the earlier layout (`None` in the newest).
    pub source_cluster_id: Option<String>,
}

impl Default for MirrorPidReset {
    fn default() -> Self {
        Self::new()
    }
}

impl MirrorPidReset {
    /// The version klog writes.
    pub const CURRENT_VERSION: i16 = 0;

    /// The barrier klog writes: the newest layout, `{Version}`.
    pub fn new() -> Self {
        MirrorPidReset {
            version: Self::CURRENT_VERSION,
            source_cluster_id: None,
        }
    }

    /// The earlier layout's value, naming the source cluster (what aiven/kafka writes).
    pub fn with_source_cluster_id(source_cluster_id: impl Into<String>) -> Self {
        MirrorPidReset {
            version: Self::CURRENT_VERSION,
            source_cluster_id: Some(source_cluster_id.into()),
        }
    }

    /// Flexible v0 in the value's own layout: int16 version, the compact string (unsigned varint
    /// length + 1) if it names a cluster, empty tagged fields.
    pub fn encode(&self) -> Vec<u8> {
        let id = self.source_cluster_id.as_deref().unwrap_or("").as_bytes();
        let mut v = Vec::with_capacity(2 + 5 + id.len() + 1);
        v.extend_from_slice(&self.version.to_be_bytes());
        if self.source_cluster_id.is_some() {
            write_unsigned_varint(&mut v, id.len() as u32 + 1);
            v.extend_from_slice(id);
        }
        write_unsigned_varint(&mut v, 0);
        v
    }

    /// Decodes the value of a MIRROR_PID_RESET record in either layout. The layout is the one whose
    /// fields take the value's bytes exactly: after the version, the newest has only its tagged-field
    /// section, the earlier a compact string first. No value either fork writes fits both (a 22-character
    /// cluster id's length, read as a tag count, asks for 23 tags in 23 bytes; the newest's `00`, read as
    /// a string length, is a null the earlier schema refuses).
    pub fn parse(value: &[u8]) -> Result<Self, Corruption> {
        let bad = |_| Corruption::ControlValue("truncated MirrorPidResetRecord");
        let mut c = Cursor::new(value);
        let version = c.read_i16("version").map_err(bad)?;
        if version < 0 {
            return Err(Corruption::ControlValue(
                "negative MirrorPidResetRecord version",
            ));
        }
        let fields = &value[2..];
        if exactly_tagged_fields(fields) {
            return Ok(MirrorPidReset {
                version,
                source_cluster_id: None,
            });
        }
        let len = c.read_unsigned_varint("source cluster id").map_err(bad)?;
        if len == 0 {
            return Err(Corruption::ControlValue(
                "MirrorPidResetRecord is neither {Version} nor {Version, SourceClusterId}: null source cluster id",
            ));
        }
        let id = c
            .read_bytes(len as usize - 1, "source cluster id")
            .map_err(bad)?;
        let source_cluster_id = std::str::from_utf8(id)
            .map_err(|_| Corruption::ControlValue("source cluster id is not UTF-8"))?
            .to_owned();
        skip_tagged_fields(&mut c).map_err(bad)?;
        if c.remaining() != 0 {
            return Err(Corruption::ControlValue(
                "bytes after the MirrorPidResetRecord's tagged fields",
            ));
        }
        Ok(MirrorPidReset {
            version,
            source_cluster_id: Some(source_cluster_id),
        })
    }

    /// The JSON `klog dump` prints: the fields the value's layout has, named as Kafka's generated
    /// converter names them.
    pub fn to_kafka_json(&self) -> String {
        match &self.source_cluster_id {
            None => format!("{{\"version\":{}}}", self.version),
            Some(id) => format!(
                "{{\"version\":{},\"sourceClusterId\":{}}}",
                self.version,
                json_string(id)
            ),
        }
    }
}

/// A JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether `bytes` are one tagged-field section and nothing else.
fn exactly_tagged_fields(bytes: &[u8]) -> bool {
    let mut c = Cursor::new(bytes);
    skip_tagged_fields(&mut c).is_ok() && c.remaining() == 0
}

fn skip_tagged_fields(c: &mut Cursor<'_>) -> Result<(), crate::RecordCorruption> {
    let count = c.read_unsigned_varint("tagged field count")?;
    for _ in 0..count {
        c.read_unsigned_varint("tag")?;
        let size = c.read_unsigned_varint("tag size")?;
        c.read_bytes(size as usize, "tagged field")?;
    }
    Ok(())
}

/// KRaft's `LeaderChangeMessage` v0 (flexible): version, leader id, voters, granting voters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderChange {
    /// The value version.
    pub version: i16,
    /// The new leader.
    pub leader_id: i32,
    /// The voters.
    pub voters: Vec<i32>,
    /// The voters that granted the leader their vote.
    pub granting_voters: Vec<i32>,
}

impl LeaderChange {
    /// Decodes the value of a LEADER_CHANGE record.
    pub fn parse(value: &[u8]) -> Result<Self, Corruption> {
        let bad = |_| Corruption::ControlValue("truncated LeaderChangeMessage");
        let mut c = Cursor::new(value);
        let version = c.read_i16("version").map_err(bad)?;
        let leader_id = c.read_i32("leader id").map_err(bad)?;
        let voters = read_voters(&mut c).map_err(bad)?;
        let granting_voters = read_voters(&mut c).map_err(bad)?;
        skip_tagged_fields(&mut c).map_err(bad)?;
        Ok(LeaderChange {
            version,
            leader_id,
            voters,
            granting_voters,
        })
    }

    /// The JSON Kafka's generated converter prints (`kafka-dump-log`: ` LeaderChange: {...}`).
    pub fn to_kafka_json(&self) -> String {
        let list = |v: &[i32]| {
            v.iter()
                .map(|id| format!("{{\"voterId\":{id}}}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            "{{\"version\":{},\"leaderId\":{},\"voters\":[{}],\"grantingVoters\":[{}]}}",
            self.version,
            self.leader_id,
            list(&self.voters),
            list(&self.granting_voters)
        )
    }
}

/// A compact array of `Voter { VoterId int32, tagged fields }`.
fn read_voters(c: &mut Cursor<'_>) -> Result<Vec<i32>, crate::RecordCorruption> {
    let n = c.read_unsigned_varint("voters")?;
    let count = n.saturating_sub(1) as usize;
    if count > c.remaining() / 5 {
        return Err(crate::RecordCorruption::Truncated { field: "voters" });
    }
    let mut voters = Vec::with_capacity(count);
    for _ in 0..count {
        voters.push(c.read_i32("voter id")?);
        skip_tagged_fields(c)?;
    }
    Ok(voters)
}

/// A decoded control value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlValue {
    /// A COMMIT or ABORT marker's value.
    EndTxn(EndTxnMarker),
    /// A MIRROR_PID_RESET barrier's value.
    MirrorPidReset(MirrorPidReset),
    /// A KRaft leader change's value.
    LeaderChange(LeaderChange),
    /// KRaft and unknown types: the raw value bytes (None for a null value).
    Raw(Option<Vec<u8>>),
}

/// The first record of a control batch, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlRecord {
    /// The control key's version.
    pub key_version: i16,
    /// The control type.
    pub record_type: ControlRecordType,
    /// The decoded value.
    pub value: ControlValue,
}

impl ControlRecord {
    /// `ControlRecordType.parse` then the type's value: key at least 4 bytes with a non-negative version.
    pub fn parse(key: Option<&[u8]>, value: Option<&[u8]>) -> Result<Self, Corruption> {
        let (key_version, record_type) = ControlRecordType::parse_key(key)?;
        let value = match record_type {
            ControlRecordType::Abort | ControlRecordType::Commit => {
                let v = value.ok_or(Corruption::ControlValue("null end transaction marker"))?;
                ControlValue::EndTxn(EndTxnMarker::parse(v)?)
            }
            ControlRecordType::MirrorPidReset => {
                let v = value.ok_or(Corruption::ControlValue("null MirrorPidResetRecord"))?;
                ControlValue::MirrorPidReset(MirrorPidReset::parse(v)?)
            }
            ControlRecordType::LeaderChange => {
                let v = value.ok_or(Corruption::ControlValue("null LeaderChangeMessage"))?;
                ControlValue::LeaderChange(LeaderChange::parse(v)?)
            }
            _ => ControlValue::Raw(value.map(<[u8]>::to_vec)),
        };
        Ok(ControlRecord {
            key_version,
            record_type,
            value,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The newest showuon/kafka `MirrorPidResetRecord.json`: v0 flexible, fields `Version int16`. Its
    /// bytes by hand: the version, then an empty tagged-field section.
    #[test]
    fn mirror_pid_reset_reads_the_newest_layout_and_writes_it() {
        let newest = [0x00, 0x00, 0x00];
        let v = MirrorPidReset::parse(&newest).unwrap();
        assert_eq!((v.version, v.source_cluster_id.as_deref()), (0, None));
        assert_eq!(MirrorPidReset::new().encode(), newest);
        assert_eq!(v.to_kafka_json(), r#"{"version":0}"#);
        // An unknown tagged field (a later version's) is skipped, as Kafka's readers skip it.
        let tagged = [0x00, 0x00, 0x01, 0x05, 0x02, 0xaa, 0xbb];
        assert_eq!(
            MirrorPidReset::parse(&tagged).unwrap(),
            MirrorPidReset::new()
        );
    }

    /// aiven/kafka's `MirrorPidResetRecord.json` (and showuon's before it): v0 flexible, fields
    /// `Version int16`, `SourceClusterId string`. By hand: version, compact string (length + 1 = 23,
    /// then the 22 bytes of the id), an empty tagged-field section: 26 bytes.
    #[test]
    fn mirror_pid_reset_reads_the_earlier_layout() {
        let mut earlier = vec![0x00, 0x00, 23];
        earlier.extend_from_slice(b"MkU3OEVBNTcwNTJENDM2Qg");
        earlier.push(0x00);
        assert_eq!(earlier.len(), 26);
        let v = MirrorPidReset::parse(&earlier).unwrap();
        assert_eq!(
            v.source_cluster_id.as_deref(),
            Some("MkU3OEVBNTcwNTJENDM2Qg")
        );
        assert_eq!(
            v.to_kafka_json(),
            r#"{"version":0,"sourceClusterId":"MkU3OEVBNTcwNTJENDM2Qg"}"#
        );
        assert_eq!(
            MirrorPidReset::with_source_cluster_id("MkU3OEVBNTcwNTJENDM2Qg").encode(),
            earlier
        );
        let mut v = vec![0, 0, 3, b'a', b'b'];
        v.extend_from_slice(&[1, 9, 2, 0xaa, 0xbb]);
        assert_eq!(
            MirrorPidReset::parse(&v)
                .unwrap()
                .source_cluster_id
                .as_deref(),
            Some("ab")
        );
    }

    #[test]
    fn mirror_pid_reset_values_of_neither_layout_are_named_errors() {
        for bad in [
            &[0x00, 0x00][..],                               // no tagged fields, no string
            &[0x00, 0x00, 0x03, b'a'][..],                   // a string cut short
            &[0x00, 0x00, 0x03, b'a', b'b', 0x01][..],       // a tag cut short
            &[0x00, 0x00, 0x03, b'a', b'b', 0x00, 0x00][..], // a byte after the tags
        ] {
            assert!(MirrorPidReset::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            MirrorPidReset::parse(&[0xff, 0xff, 0x00]),
            Err(Corruption::ControlValue(
                "negative MirrorPidResetRecord version"
            ))
        );
    }

    #[test]
    fn control_key_checks() {
        assert!(ControlRecord::parse(Some(&[0, 0, 0]), None).is_err());
        assert!(ControlRecord::parse(Some(&[0xff, 0xff, 0, 1]), Some(&[0; 6])).is_err());
        assert!(ControlRecord::parse(Some(&[0, 0, 0, 1]), Some(&[0; 5])).is_err());
        assert!(ControlRecord::parse(Some(&[0, 0, 0, 1]), Some(&[0xff, 0, 0, 0, 0, 0])).is_err());
        let r = ControlRecord::parse(Some(&[0, 1, 0, 1]), Some(&[0, 3, 0, 0, 0, 9, 7])).unwrap();
        assert_eq!(r.record_type, ControlRecordType::Commit);
        assert_eq!(
            r.value,
            ControlValue::EndTxn(EndTxnMarker {
                version: 3,
                coordinator_epoch: 9
            })
        );
        let r = ControlRecord::parse(Some(&[0, 0, 0, 42]), None).unwrap();
        assert_eq!(r.record_type, ControlRecordType::Unknown(42));
        assert_eq!(r.record_type.json_name(), "unknown_42");
    }
}
