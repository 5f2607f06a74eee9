//! A message's values: what the codec reads from bytes and writes back, for any schema. Strings and bytes
//! borrow the buffer they were read from ([`Struct::into_owned`] detaches them).

use std::borrow::Cow;

use super::types::{Default, Field, Type};

/// A decoded value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    /// A null string, bytes, array or struct.
    Null,
    /// A `bool`.
    Bool(bool),
    /// Every integer type (int8 to int64, uint16, uint32).
    Int(i64),
    /// A `float64`.
    Float(f64),
    /// Kafka decodes strings as UTF-8 with replacement characters; so does this.
    Str(Cow<'a, str>),
    /// A `bytes` field.
    Bytes(Cow<'a, [u8]>),
    /// A `uuid`.
    Uuid([u8; 16]),
    /// An array's elements.
    Array(Vec<Value<'a>>),
    /// A nested struct.
    Struct(Struct<'a>),
}

impl Value<'_> {
    /// The value with every string and bytes copied out of the buffer.
    pub fn into_owned(self) -> Value<'static> {
        match self {
            Value::Null => Value::Null,
            Value::Bool(b) => Value::Bool(b),
            Value::Int(i) => Value::Int(i),
            Value::Float(f) => Value::Float(f),
            Value::Str(s) => Value::Str(Cow::Owned(s.into_owned())),
            Value::Bytes(b) => Value::Bytes(Cow::Owned(b.into_owned())),
            Value::Uuid(u) => Value::Uuid(u),
            Value::Array(items) => Value::Array(items.into_iter().map(Value::into_owned).collect()),
            Value::Struct(s) => Value::Struct(s.into_owned()),
        }
    }
}

/// A struct's fields that exist at its version, in schema order (a tagged field that was absent holds its
/// default).
#[derive(Debug, Clone)]
pub struct Struct<'a> {
    /// The version the struct was read at (or is to be written at).
    pub version: i16,
    /// The fields of that version and their values.
    pub fields: Vec<(&'static Field, Value<'a>)>,
}

/// Fields compare by name and value: two structs of one schema.
impl PartialEq for Struct<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.version == other.version
            && self.fields.len() == other.fields.len()
            && self
                .fields
                .iter()
                .zip(&other.fields)
                .all(|((f, v), (g, w))| f.name == g.name && v == w)
    }
}

impl<'a> Struct<'a> {
    /// The struct with every string and bytes copied out of the buffer.
    pub fn into_owned(self) -> Struct<'static> {
        Struct {
            version: self.version,
            fields: self
                .fields
                .into_iter()
                .map(|(f, v)| (f, v.into_owned()))
                .collect(),
        }
    }

    /// The value of the field named `name` (JSON spelling, `topicId`), if it exists at this version.
    pub fn get(&self, name: &str) -> Option<&Value<'a>> {
        self.fields
            .iter()
            .find(|(f, _)| f.name == name)
            .map(|(_, v)| v)
    }

    /// A string field's value (`None` when absent or null).
    pub fn str(&self, name: &str) -> Option<&str> {
        match self.get(name)? {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// An integer field's value.
    pub fn int(&self, name: &str) -> Option<i64> {
        match self.get(name)? {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// A uuid field's value.
    pub fn uuid(&self, name: &str) -> Option<[u8; 16]> {
        match self.get(name)? {
            Value::Uuid(u) => Some(*u),
            _ => None,
        }
    }

    /// An array of integers (`replicas`, `isr`); `None` when absent or null.
    pub fn ints(&self, name: &str) -> Option<Vec<i32>> {
        match self.get(name)? {
            Value::Array(items) => Some(
                items
                    .iter()
                    .filter_map(|v| match v {
                        Value::Int(i) => Some(*i as i32),
                        _ => None,
                    })
                    .collect(),
            ),
            _ => None,
        }
    }
}

/// The value a field has when it is absent (a tagged field not written) at `version`. A struct's is a
/// struct of its fields' defaults even when it declares `null`: Kafka's generated code reads an absent
/// tagged struct so, writes and prints one only when it differs from that, and writes and prints a null
/// one.
pub fn default_value(f: &'static Field, version: i16) -> Value<'static> {
    match (f.default, &f.ty) {
        (_, Type::Struct(fields)) => Value::Struct(Struct {
            version,
            fields: fields
                .iter()
                .filter(|g| g.versions.contains(version))
                .map(|g| (g, default_value(g, version)))
                .collect(),
        }),
        (Default::Null, _) => Value::Null,
        (Default::Int(i), _) => Value::Int(i),
        (Default::Bool(b), _) => Value::Bool(b),
        (Default::Str(s), _) => Value::Str(Cow::Borrowed(s)),
        (Default::Float(x), _) => Value::Float(x),
        (Default::Zero, ty) => zero_value(ty),
    }
}

/// A type's own default: 0, false, "", the zero uuid, an empty array or bytes.
fn zero_value(ty: &Type) -> Value<'static> {
    match ty {
        Type::Bool => Value::Bool(false),
        Type::Float64 => Value::Float(0.0),
        Type::String => Value::Str(Cow::Borrowed("")),
        Type::Uuid => Value::Uuid([0; 16]),
        Type::Bytes => Value::Bytes(Cow::Borrowed(&[])),
        Type::Array(_) => Value::Array(Vec::new()),
        Type::Int8
        | Type::Int16
        | Type::Uint16
        | Type::Int32
        | Type::Uint32
        | Type::Int64
        | Type::Struct(_) => Value::Int(0),
    }
}
