//! The shape of a Kafka message schema (`common/metadata/*.json`, `common/message/*.json`): fields with
//! their types, the versions they exist in, nullability, tags and defaults, and the versions that are
//! flexible. `kraft/schemas.rs` and `coordinator/schemas.rs` declare Kafka's records in these terms; the
//! codec ([`super::decode`], [`super::encode`]) and [`super::to_json`] work from the declaration alone.

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

    /// `lo` to `hi`, inclusive (`"lo-hi"`).
    pub const fn new(lo: i16, hi: i16) -> Self {
        Versions { lo, hi }
    }

    /// `"lo+"`.
    pub const fn from(lo: i16) -> Self {
        Versions { lo, hi: MAX }
    }

    /// Whether `version` is in the range.
    pub fn contains(self, version: i16) -> bool {
        self.lo <= version && version <= self.hi
    }
}

/// A field's type. Strings, bytes and arrays are compact (unsigned varint length + 1, 0: null) in a
/// schema's flexible versions and classic (int16 / int32 length, -1: null) before them.
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
    /// A length, then UTF-8 bytes (at most 32767).
    String,
    /// 16 bytes (printed as URL-safe base64 without padding).
    Uuid,
    /// A length, then the bytes (printed as standard base64).
    Bytes,
    /// A count, then the elements.
    Array(&'static Type),
    /// The fields in order, then (flexible versions) a tagged-fields section; a nullable one starts with
    /// a presence byte.
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
    /// A coordinator record's key (`__consumer_offsets`, `__transaction_state`).
    CoordinatorKey,
    /// A coordinator record's value.
    CoordinatorValue,
    /// A message nested in bytes (the consumer protocol's subscription and assignment).
    Data,
}

/// One message type.
#[derive(Debug, Clone, Copy)]
pub struct MessageSchema {
    /// Kafka's class name (`TopicRecord`, `OffsetCommitValue`).
    pub name: &'static str,
    /// `MetadataRecordType`'s name for a metadata or control record (`TOPIC_RECORD`); empty otherwise.
    pub type_name: &'static str,
    /// Which family of records it belongs to.
    pub kind: SchemaKind,
    /// The record type (`apiKey`: a metadata or coordinator record's), -1 when it has none.
    pub api_key: i16,
    /// The versions Kafka can read (`validVersions`).
    pub valid: Versions,
    /// The versions that use the compact encodings and carry tagged fields (`flexibleVersions`).
    pub flexible: Versions,
    /// The top-level fields.
    pub fields: &'static [Field],
}

/// Schemas are static tables: a schema is itself, wherever its name repeats.
impl PartialEq for MessageSchema {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for MessageSchema {}
