//! The shape of a Kafka message schema (`common/message/*.json`): fields with types, the versions they
//! exist in, nullability, tags and defaults. The tables themselves are in `schemas.rs`.

/// An inclusive range of versions; empty when `low > high` (Kafka's `"none"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Versions {
    /// The first version.
    pub low: i16,
    /// The last version.
    pub high: i16,
}

impl Versions {
    /// No version (`"none"`).
    pub const NONE: Versions = Versions { low: 1, high: 0 };

    /// `"low-high"`.
    pub const fn new(low: i16, high: i16) -> Versions {
        Versions { low, high }
    }

    /// `"low+"`.
    pub const fn from(low: i16) -> Versions {
        Versions {
            low,
            high: i16::MAX,
        }
    }

    /// Whether `version` is in the range.
    pub fn contains(&self, version: i16) -> bool {
        self.low <= version && version <= self.high
    }
}

/// A field's type.
#[derive(Debug)]
pub enum FieldType {
    /// `int8`.
    Int8,
    /// `int16`.
    Int16,
    /// `uint16`.
    UInt16,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `string`.
    String,
    /// `bytes`.
    Bytes,
    /// `uuid`.
    Uuid,
    /// A struct (its fields), inline or from `commonStructs`.
    Struct(&'static [Field]),
    /// `[]T`.
    Array(&'static FieldType),
}

/// A field's declared default (used when a tagged field is absent, and to leave a tagged field out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Default {
    /// The type's zero: 0, `""`, an empty array, the zero UUID, a struct of defaults.
    Zero,
    /// A number.
    Int(i64),
    /// `null`.
    Null,
}

/// One field of a message or struct.
#[derive(Debug)]
pub struct Field {
    /// Kafka's JSON name (the schema's name with its first letter lower-cased).
    pub name: &'static str,
    /// Its type.
    pub ty: FieldType,
    /// The versions it exists in.
    pub versions: Versions,
    /// The versions in which it may be null.
    pub nullable: Versions,
    /// The tag of a tagged field.
    pub tag: Option<u32>,
    /// The versions in which the field is tagged.
    pub tagged: Versions,
    /// Its declared default.
    pub default: Default,
}

/// Schemas are static tables: a field is itself, wherever its name repeats.
impl PartialEq for Field {
    fn eq(&self, other: &Field) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Field {}

impl Field {
    /// Whether the field is a tagged field at `version`.
    pub fn is_tagged(&self, version: i16) -> bool {
        self.tag.is_some() && self.tagged.contains(version)
    }
}

/// A message schema: a coordinator key or value, or a `data` message.
#[derive(Debug)]
pub struct Schema {
    /// Kafka's class name (`OffsetCommitValue`).
    pub name: &'static str,
    /// The record type (a coordinator record's `apiKey`), -1 for `data` messages.
    pub api_key: i16,
    /// The versions that exist.
    pub valid: Versions,
    /// Versions that use the compact encodings and carry tagged fields.
    pub flexible: Versions,
    /// Its fields, in order.
    pub fields: &'static [Field],
}

impl PartialEq for Schema {
    fn eq(&self, other: &Schema) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Schema {}
