//! A message decoded from its schema alone ([`super::schema`]), encoded back (the exact inverse), and
//! printed as Kafka's generated JSON converters print it (`kafka-dump-log --cluster-metadata-decoder`,
//! the KRaft control records).
//!
//! Decoding follows the generated `read` methods for flexible versions: compact strings, bytes and arrays
//! (length + 1, 0 for null), a uuid in 16 bytes, each struct ending in a tagged-fields section whose
//! unknown tags are skipped. Lengths are checked against what remains before anything is sliced or
//! allocated, as Kafka's readers check them.

use std::borrow::Cow;
use std::fmt::Write as _;

use base64::Engine;

use super::schema::{Default, Field, Type};
use crate::format::varint::{write_unsigned_varint, Cursor};
use crate::MetadataCorruption;

/// A decoded value. Strings and bytes borrow the record.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    /// A null string, bytes or array.
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
    Bytes(&'a [u8]),
    /// A `uuid`.
    Uuid([u8; 16]),
    /// An array's elements.
    Array(Vec<Value<'a>>),
    /// A nested struct.
    Struct(Struct<'a>),
}

/// A struct's fields that exist at its version, in schema order (a tagged field that was absent holds its
/// default).
#[derive(Debug, Clone)]
pub struct Struct<'a> {
    /// The version the struct was read at.
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

    /// Kafka's JSON for this struct (`XxxJsonConverter.write`): every field of the version in schema order,
    /// a tagged field only when it differs from its default.
    pub fn to_kafka_json(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }

    fn write_json(&self, out: &mut String) {
        out.push('{');
        let mut first = true;
        for (field, value) in &self.fields {
            if field.is_tagged_at(self.version) && is_default(field, value) {
                continue;
            }
            if !first {
                out.push(',');
            }
            first = false;
            write_json_string(out, field.name);
            out.push(':');
            value.write_json(out);
        }
        out.push('}');
    }
}

impl Value<'_> {
    fn write_json(&self, out: &mut String) {
        match self {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Value::Float(f) => write_java_double(out, *f),
            Value::Str(s) => write_json_string(out, s),
            // Jackson writes a BinaryNode as standard base64 with padding.
            Value::Bytes(b) => {
                write_json_string(out, &base64::engine::general_purpose::STANDARD.encode(b))
            }
            Value::Uuid(u) => write_json_string(out, &uuid_string(u)),
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write_json(out);
                }
                out.push(']');
            }
            Value::Struct(s) => s.write_json(out),
        }
    }
}

/// Kafka's `Uuid.toString()`: URL-safe base64 without padding.
pub fn uuid_string(u: &[u8; 16]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(u)
}

/// A JSON string as Jackson writes it: `"` and `\` escaped, control characters as `\n`, `\t`, ... or
/// `\u00XX`, everything else (non-ASCII included) as is.
fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Java's `Double.toString` (what Jackson prints for a double): the shortest digits that read back, in
/// plain notation from 10^-3 to 10^7 and `d.dddE±n` outside it; `NaN` and the infinities quoted, as
/// Jackson quotes non-numeric numbers.
fn write_java_double(out: &mut String, f: f64) {
    if f.is_nan() {
        out.push_str("\"NaN\"");
    } else if f.is_infinite() {
        out.push_str(if f > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        });
    } else if f == 0.0 || (1e-3..1e7).contains(&f.abs()) {
        let plain = format!("{f}");
        out.push_str(&plain);
        if !plain.contains('.') {
            out.push_str(".0");
        }
    } else {
        let sci = format!("{f:e}");
        let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
        out.push_str(mantissa);
        if !mantissa.contains('.') {
            out.push_str(".0");
        }
        out.push('E');
        out.push_str(exponent);
    }
}

/// Whether a tagged field holds its default (Kafka's converter leaves it out then).
fn is_default(field: &Field, value: &Value<'_>) -> bool {
    match (field.default, value) {
        (Default::Null, v) => *v == Value::Null,
        (Default::Int(d), Value::Int(i)) => d == *i,
        (Default::Bool(d), Value::Bool(b)) => d == *b,
        (Default::Str(d), Value::Str(s)) => d == s.as_ref(),
        (Default::Float(d), Value::Float(f)) => d == *f,
        (Default::Zero, v) => *v == zero_value(&field.ty),
        _ => false,
    }
}

/// A type's own default value.
fn zero_value(ty: &Type) -> Value<'static> {
    match ty {
        Type::Bool => Value::Bool(false),
        Type::Int8 | Type::Int16 | Type::Uint16 | Type::Int32 | Type::Uint32 | Type::Int64 => {
            Value::Int(0)
        }
        Type::Float64 => Value::Float(0.0),
        Type::String => Value::Str(Cow::Borrowed("")),
        Type::Uuid => Value::Uuid([0; 16]),
        Type::Bytes => Value::Bytes(&[]),
        Type::Array(_) => Value::Array(Vec::new()),
        Type::Struct(fields) => Value::Struct(Struct {
            version: 0,
            fields: fields.iter().map(|f| (f, default_value(f))).collect(),
        }),
    }
}

/// The value an absent field holds.
fn default_value(field: &'static Field) -> Value<'static> {
    match field.default {
        Default::Zero => zero_value(&field.ty),
        Default::Null => Value::Null,
        Default::Int(i) => Value::Int(i),
        Default::Bool(b) => Value::Bool(b),
        Default::Str(s) => Value::Str(Cow::Borrowed(s)),
        Default::Float(f) => Value::Float(f),
    }
}

/// Reads one struct of `fields` at `version` from `cursor`. `record` names the message in errors.
pub fn decode_struct<'a>(
    cursor: &mut Cursor<'a>,
    record: &'static str,
    fields: &'static [Field],
    version: i16,
) -> Result<Struct<'a>, MetadataCorruption> {
    let mut out = Struct {
        version,
        fields: Vec::with_capacity(fields.len()),
    };
    for field in fields.iter().filter(|f| f.versions.contains(version)) {
        let value = if field.is_tagged_at(version) {
            default_value(field)
        } else {
            decode_value(cursor, record, field, &field.ty, version)?
        };
        out.fields.push((field, value));
    }
    decode_tagged(cursor, record, &mut out)?;
    Ok(out)
}

/// The tagged-fields section: a count, then (tag, size, value) each; unknown tags are skipped.
fn decode_tagged<'a>(
    cursor: &mut Cursor<'a>,
    record: &'static str,
    out: &mut Struct<'a>,
) -> Result<(), MetadataCorruption> {
    let at = |reason| MetadataCorruption::Field {
        record,
        field: "(tagged fields)",
        reason,
    };
    let count = cursor.read_unsigned_varint("tagged fields").map_err(at)?;
    for _ in 0..count {
        let tag = cursor.read_unsigned_varint("tag").map_err(at)?;
        let size = cursor.read_unsigned_varint("tag size").map_err(at)?;
        let bytes = cursor
            .read_bytes(size as usize, "tagged field")
            .map_err(at)?;
        let version = out.version;
        let Some((field, slot)) = out
            .fields
            .iter_mut()
            .find(|(f, _)| f.tag == Some(tag) && f.tagged.contains(version))
        else {
            continue;
        };
        let mut inner = Cursor::new(bytes);
        *slot = decode_value(&mut inner, record, field, &field.ty, version)?;
        if inner.remaining() != 0 {
            return Err(MetadataCorruption::TaggedFieldSize {
                record,
                tag,
                declared: size,
                used: inner.position(),
            });
        }
    }
    Ok(())
}

fn decode_value<'a>(
    cursor: &mut Cursor<'a>,
    record: &'static str,
    field: &'static Field,
    ty: &'static Type,
    version: i16,
) -> Result<Value<'a>, MetadataCorruption> {
    let name = field.name;
    let at = |reason| MetadataCorruption::Field {
        record,
        field: name,
        reason,
    };
    Ok(match ty {
        Type::Bool => Value::Bool(cursor.read_u8(name).map_err(at)? != 0),
        Type::Int8 => Value::Int(cursor.read_u8(name).map_err(at)? as i8 as i64),
        Type::Int16 => Value::Int(cursor.read_i16(name).map_err(at)? as i64),
        Type::Uint16 => Value::Int(cursor.read_i16(name).map_err(at)? as u16 as i64),
        Type::Int32 => Value::Int(cursor.read_i32(name).map_err(at)? as i64),
        Type::Uint32 => Value::Int(cursor.read_i32(name).map_err(at)? as u32 as i64),
        Type::Int64 => Value::Int(cursor.read_i64(name).map_err(at)?),
        Type::Float64 => Value::Float(f64::from_bits(cursor.read_i64(name).map_err(at)? as u64)),
        Type::Uuid => Value::Uuid(cursor.read_array(name).map_err(at)?),
        Type::String | Type::Bytes => match compact_length(cursor, record, field, version)? {
            None => Value::Null,
            Some(len) => {
                if matches!(ty, Type::String) && len > 0x7fff {
                    let length = len as u32;
                    return Err(MetadataCorruption::StringLength {
                        record,
                        field: name,
                        length,
                    });
                }
                let bytes = cursor.read_bytes(len, name).map_err(at)?;
                match ty {
                    Type::String => Value::Str(String::from_utf8_lossy(bytes)),
                    _ => Value::Bytes(bytes),
                }
            }
        },
        Type::Array(item) => match compact_length(cursor, record, field, version)? {
            None => Value::Null,
            Some(len) => {
                // Every element takes at least one byte: a count past the rest is corruption, and never
                // an allocation.
                if len > cursor.remaining() {
                    return Err(MetadataCorruption::ArrayLength {
                        record,
                        field: name,
                        length: len as u32,
                        remaining: cursor.remaining(),
                    });
                }
                let mut items = Vec::with_capacity(len);
                for _ in 0..len {
                    items.push(decode_value(cursor, record, field, item, version)?);
                }
                Value::Array(items)
            }
        },
        Type::Struct(fields) => Value::Struct(decode_struct(cursor, record, fields, version)?),
    })
}

/// A compact length (unsigned varint of length + 1): `None` for null, refused when the field is not
/// nullable at `version`.
fn compact_length(
    cursor: &mut Cursor<'_>,
    record: &'static str,
    field: &'static Field,
    version: i16,
) -> Result<Option<usize>, MetadataCorruption> {
    let raw =
        cursor
            .read_unsigned_varint(field.name)
            .map_err(|reason| MetadataCorruption::Field {
                record,
                field: field.name,
                reason,
            })?;
    if raw == 0 {
        if field.nullable.contains(version) {
            return Ok(None);
        }
        return Err(MetadataCorruption::NullField {
            record,
            field: field.name,
        });
    }
    Ok(Some(raw as usize - 1))
}

/// Why a struct could not be encoded: a value that does not fit its field (our own mistake, or a string
/// longer than Kafka's 32767 bytes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{record}: field {field}: {reason}")]
pub struct EncodeError {
    /// The message's name.
    pub record: &'static str,
    /// The field.
    pub field: &'static str,
    /// What did not fit.
    pub reason: &'static str,
}

/// Writes `s` (read or built at `s.version`) in the flexible encoding: the exact inverse of
/// [`decode_struct`] for every message Kafka writes. Untagged fields in schema order; then the
/// tagged-fields section with each tagged field that differs from its default, in tag order, as Kafka's
/// generated `write` methods do.
pub fn encode_struct(
    out: &mut Vec<u8>,
    record: &'static str,
    s: &Struct<'_>,
) -> Result<(), EncodeError> {
    let mut tagged: Vec<(u32, Vec<u8>)> = Vec::new();
    for (field, value) in &s.fields {
        if field.is_tagged_at(s.version) {
            if is_default(field, value) {
                continue;
            }
            let mut bytes = Vec::new();
            encode_value(&mut bytes, record, field, &field.ty, value, s.version)?;
            tagged.push((field.tag.unwrap_or(0), bytes));
        } else {
            encode_value(out, record, field, &field.ty, value, s.version)?;
        }
    }
    tagged.sort_by_key(|(tag, _)| *tag);
    write_unsigned_varint(out, tagged.len() as u32);
    for (tag, bytes) in tagged {
        write_unsigned_varint(out, tag);
        write_unsigned_varint(out, bytes.len() as u32);
        out.extend_from_slice(&bytes);
    }
    Ok(())
}

fn encode_value(
    out: &mut Vec<u8>,
    record: &'static str,
    field: &'static Field,
    ty: &'static Type,
    value: &Value<'_>,
    version: i16,
) -> Result<(), EncodeError> {
    let fail = |reason| EncodeError {
        record,
        field: field.name,
        reason,
    };
    match (ty, value) {
        (Type::String | Type::Bytes | Type::Array(_), Value::Null) => {
            // As the decoder reads it: a null where the field is nullable (Kafka never writes null
            // elements, so this only writes back what was read).
            if !field.nullable.contains(version) {
                return Err(fail("null, but the field is not nullable at this version"));
            }
            out.push(0);
        }
        (Type::Bool, Value::Bool(b)) => out.push(u8::from(*b)),
        (Type::Int8, Value::Int(i)) => {
            out.push(int_in(*i, i8::MIN as i64, i8::MAX as i64, fail)? as u8)
        }
        (Type::Int16, Value::Int(i)) => out.extend_from_slice(
            &(int_in(*i, i16::MIN as i64, i16::MAX as i64, fail)? as i16).to_be_bytes(),
        ),
        (Type::Uint16, Value::Int(i)) => {
            out.extend_from_slice(&(int_in(*i, 0, u16::MAX as i64, fail)? as u16).to_be_bytes())
        }
        (Type::Int32, Value::Int(i)) => out.extend_from_slice(
            &(int_in(*i, i32::MIN as i64, i32::MAX as i64, fail)? as i32).to_be_bytes(),
        ),
        (Type::Uint32, Value::Int(i)) => {
            out.extend_from_slice(&(int_in(*i, 0, u32::MAX as i64, fail)? as u32).to_be_bytes())
        }
        (Type::Int64, Value::Int(i)) => out.extend_from_slice(&i.to_be_bytes()),
        (Type::Float64, Value::Float(f)) => out.extend_from_slice(&f.to_bits().to_be_bytes()),
        (Type::Uuid, Value::Uuid(u)) => out.extend_from_slice(u),
        (Type::String, Value::Str(s)) => {
            if s.len() > 0x7fff {
                return Err(fail("a string longer than 32767 bytes"));
            }
            write_unsigned_varint(out, s.len() as u32 + 1);
            out.extend_from_slice(s.as_bytes());
        }
        (Type::Bytes, Value::Bytes(b)) => {
            let len = u32::try_from(b.len())
                .ok()
                .filter(|n| *n < u32::MAX)
                .ok_or_else(|| fail("bytes longer than 4 GiB"))?;
            write_unsigned_varint(out, len + 1);
            out.extend_from_slice(b);
        }
        (Type::Array(item), Value::Array(items)) => {
            let len = u32::try_from(items.len())
                .ok()
                .filter(|n| *n < u32::MAX)
                .ok_or_else(|| fail("too many elements"))?;
            write_unsigned_varint(out, len + 1);
            for v in items {
                encode_value(out, record, field, item, v, version)?;
            }
        }
        (Type::Struct(_), Value::Struct(s)) => encode_struct(out, record, s)?,
        _ => return Err(fail("a value of another type than the field's")),
    }
    Ok(())
}

/// `i` when it is in `lo..=hi`.
fn int_in(
    i: i64,
    lo: i64,
    hi: i64,
    fail: impl Fn(&'static str) -> EncodeError,
) -> Result<i64, EncodeError> {
    if (lo..=hi).contains(&i) {
        Ok(i)
    } else {
        Err(fail("an integer out of the field type's range"))
    }
}

/// A struct of `fields` at `version`, each field that exists there holding the value `values` gives it
/// (by JSON name) or its default. A name in `values` that is no field of that version is refused.
pub fn build_struct<'a>(
    record: &'static str,
    fields: &'static [Field],
    version: i16,
    values: Vec<(&'static str, Value<'a>)>,
) -> Result<Struct<'a>, EncodeError> {
    let mut out = Struct {
        version,
        fields: fields
            .iter()
            .filter(|f| f.versions.contains(version))
            .map(|f| (f, default_value(f)))
            .collect(),
    };
    for (name, value) in values {
        let Some(slot) = out.fields.iter_mut().find(|(f, _)| f.name == name) else {
            return Err(EncodeError {
                record,
                field: name,
                reason: "no such field at this version",
            });
        };
        slot.1 = value;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn double(f: f64) -> String {
        let mut s = String::new();
        write_java_double(&mut s, f);
        s
    }

    #[test]
    fn doubles_print_as_java_prints_them() {
        assert_eq!(double(1.0), "1.0");
        assert_eq!(double(0.5), "0.5");
        assert_eq!(double(1234.5), "1234.5");
        assert_eq!(double(1e7), "1.0E7");
        assert_eq!(double(12345678.9), "1.23456789E7");
        assert_eq!(double(0.001), "0.001");
        assert_eq!(double(0.0001), "1.0E-4");
        assert_eq!(double(-2.5e-5), "-2.5E-5");
        assert_eq!(double(0.0), "0.0");
        assert_eq!(double(-0.0), "-0.0");
    }

    #[test]
    fn strings_are_escaped_as_jackson_escapes_them() {
        let mut s = String::new();
        write_json_string(&mut s, "a\"b\\c\nd\u{1}é/");
        assert_eq!(s, "\"a\\\"b\\\\c\\nd\\u0001é/\"");
    }
}
