//! The shape of a Kafka message schema (`common/metadata/*.json`): fields with their types, the versions
//! they exist in, nullability, tags and defaults. `schemas.rs` declares Kafka's records in these terms;
//! [`super::message`] decodes and prints any of them from the declaration alone.

/// "Every version from here on": the `+` of Kafka's version ranges.
pub const MAX: i16 = i16::MAX;

/// A range of versions, inclusive (`"0+"`, `"1-3"`); empty when `lo > hi` (`"none"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versions {
    /// The first version.
    pub lo: i16,
    /// The last version ([`MAX`] for `+`).
    pub hi: i16,
}

impl Versions {
    /// No version (`"none"`, or a property the schema does not give).
    pub const NONE: Versions = Versions { lo: 1, hi: 0 };

    /// `lo` to `hi`, inclusive.
    pub const fn new(lo: i16, hi: i16) -> Self {
        Versions { lo, hi }
    }

    /// Whether `version` is in the range.
    pub fn contains(self, version: i16) -> bool {
        self.lo <= version && version <= self.hi
    }
}

/// A field's type. Strings, bytes, arrays and structs use the flexible (compact) encoding: every schema
/// here is flexible in all its versions.
#[derive(Debug, Clone, Copy)]
pub enum Type {
    /// One byte, non-zero is true.
    Bool,
    /// Big-endian integers of 1, 2, 4 and 8 bytes; `uint16` and `uint32` unsigned.
    Int8,
    /// See [`Type::Int8`].
    Int16,
    /// See [`Type::Int8`].
    Uint16,
    /// See [`Type::Int8`].
    Int32,
    /// See [`Type::Int8`].
    Uint32,
    /// See [`Type::Int8`].
    Int64,
    /// An IEEE 754 double, big-endian.
    Float64,
    /// Compact: unsigned varint length + 1 (0: null), then UTF-8 bytes.
    String,
    /// 16 bytes (printed as URL-safe base64 without padding).
    Uuid,
    /// Compact like a string.
    Bytes,
    /// Compact: unsigned varint count + 1 (0: null), then the elements.
    Array(&'static Type),
    /// The fields in order, then a tagged-fields section.
    Struct(&'static [Field]),
}

/// A field's default (`"default"` in the schema): what a tagged field is when absent, and the value Kafka's
/// JSON converter leaves out for a tagged field.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Default {
    /// The type's own: 0, false, "", the zero uuid, an empty array or bytes, a struct of defaults.
    Zero,
    /// `"null"`.
    Null,
    /// An integer default.
    Int(i64),
    /// A boolean default.
    Bool(bool),
    /// A string default.
    Str(&'static str),
    /// A float default.
    Float(f64),
}

/// One field of a message or struct.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// The name as Kafka's JSON converter writes it (camelCase).
    pub name: &'static str,
    /// The type.
    pub ty: Type,
    /// The versions the field exists in.
    pub versions: Versions,
    /// The versions it may be null in.
    pub nullable: Versions,
    /// The tag, for a field written in the tagged-fields section in `tagged` versions.
    pub tag: Option<u32>,
    /// The versions in which the field is tagged.
    pub tagged: Versions,
    /// The default (see [`Default`](enum@Default)).
    pub default: Default,
}

impl Field {
    /// A field of `ty` in versions `lo..=hi`, not nullable, not tagged, with the type's own default.
    pub const fn new(name: &'static str, ty: Type, lo: i16, hi: i16) -> Self {
        Field {
            name,
            ty,
            versions: Versions::new(lo, hi),
            nullable: Versions::NONE,
            tag: None,
            tagged: Versions::NONE,
            default: Default::Zero,
        }
    }

    /// Nullable in versions `lo..=hi`.
    pub const fn nullable(self, lo: i16, hi: i16) -> Self {
        Field {
            nullable: Versions::new(lo, hi),
            ..self
        }
    }

    /// Tagged with `tag` in versions `lo..=hi`.
    pub const fn tagged(self, tag: u32, lo: i16, hi: i16) -> Self {
        Field {
            tag: Some(tag),
            tagged: Versions::new(lo, hi),
            ..self
        }
    }

    /// With this default.
    pub const fn default(self, default: Default) -> Self {
        Field { default, ..self }
    }

    /// Whether the field is in the tagged-fields section at `version`.
    pub fn is_tagged_at(&self, version: i16) -> bool {
        self.tag.is_some() && self.tagged.contains(version)
    }
}

/// Where a schema's messages live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaKind {
    /// A metadata record (`__cluster_metadata` data records), framed with its api key and version.
    Metadata,
    /// The value of a KRaft control record, read at version 0.
    Control,
}

/// One message type.
#[derive(Debug, Clone, Copy)]
pub struct MessageSchema {
    /// Kafka's class name (`TopicRecord`).
    pub name: &'static str,
    /// `MetadataRecordType`'s name (`TOPIC_RECORD`).
    pub type_name: &'static str,
    /// Metadata record or control record value.
    pub kind: SchemaKind,
    /// The record type of a metadata record (-1 for control records).
    pub api_key: i16,
    /// The versions Kafka can read (`validVersions`).
    pub valid: Versions,
    /// The top-level fields.
    pub fields: &'static [Field],
}
