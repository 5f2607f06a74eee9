//! One codec for every schema in `schemas.rs`: bytes to a [`Struct`] and back, as Kafka's generated
//! message classes read and write them (classic encodings before a schema's first flexible version, compact
//! ones and tagged fields from it), and a [`Struct`] to Kafka's JSON (its generated `JsonConverter`s).
//!
//! Bytes are not trusted: every length and count is checked against what remains before anything is
//! allocated, and a failure names the field and the byte it was at.

use super::json::Json;
use super::schema::{Default, Field, FieldType, Schema};
use super::{FieldCorruption, Part};

/// A decoded value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A null string, bytes, array or struct.
    Null,
    /// Every integer type (int8, int16, uint16, int32, int64).
    Int(i64),
    /// A string.
    String(String),
    /// Bytes.
    Bytes(Vec<u8>),
    /// A UUID.
    Uuid([u8; 16]),
    /// An array.
    Array(Vec<Value>),
    /// A struct.
    Struct(Struct),
}

/// A decoded message or struct: the fields that exist at its version, in schema order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Struct {
    /// Each field with its value, in schema order.
    pub fields: Vec<(&'static Field, Value)>,
}

impl Struct {
    /// The value of the field with Kafka's JSON name `name`, if it exists at the struct's version.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields
            .iter()
            .find(|(f, _)| f.name == name)
            .map(|(_, v)| v)
    }

    /// The integer field `name`, if it exists and is an integer.
    pub fn int(&self, name: &str) -> Option<i64> {
        match self.get(name)? {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The string field `name`, if it exists and is a non-null string.
    pub fn string(&self, name: &str) -> Option<&str> {
        match self.get(name)? {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
}

/// Where a decode failed: the field and the byte offset in the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field's JSON name.
    pub field: &'static str,
    /// The byte offset in the key or value where it failed.
    pub position: usize,
    /// What was wrong.
    pub reason: FieldCorruption,
}

/// Decodes `schema` at `version` from the start of `buf`; bytes after the message are ignored, as Kafka's
/// readers ignore them.
pub fn decode(schema: &Schema, version: i16, buf: &[u8]) -> Result<Struct, FieldError> {
    let mut r = Reader {
        buf,
        pos: 0,
        flexible: schema.flexible.contains(version),
        version,
    };
    r.read_struct(schema.fields)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    flexible: bool,
    version: i16,
}

impl<'a> Reader<'a> {
    fn fail<T>(&self, field: &'static Field, reason: FieldCorruption) -> Result<T, FieldError> {
        Err(FieldError {
            field: field.name,
            position: self.pos,
            reason,
        })
    }

    fn take(&mut self, field: &'static Field, n: usize) -> Result<&'a [u8], FieldError> {
        if self.buf.len() - self.pos < n {
            return self.fail(field, FieldCorruption::Truncated);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn int(&mut self, field: &'static Field, n: usize) -> Result<i64, FieldError> {
        let b = self.take(field, n)?;
        Ok(match n {
            1 => b[0] as i8 as i64,
            2 => i16::from_be_bytes([b[0], b[1]]) as i64,
            4 => i32::from_be_bytes([b[0], b[1], b[2], b[3]]) as i64,
            _ => i64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        })
    }

    /// Kafka's unsigned varint (at most 5 bytes, 32 bits).
    fn uvarint(&mut self, field: &'static Field) -> Result<u32, FieldError> {
        let mut value = 0u32;
        for i in 0..5 {
            let b = self.take(field, 1)?[0];
            value |= ((b & 0x7f) as u32) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        self.fail(field, FieldCorruption::VarintTooLong)
    }

    /// A string, bytes or array length: `None` for null (any negative length, as Kafka reads it).
    fn length(
        &mut self,
        field: &'static Field,
        classic_bytes: usize,
    ) -> Result<Option<usize>, FieldError> {
        let n = if self.flexible {
            self.uvarint(field)? as i64 - 1
        } else {
            self.int(field, classic_bytes)?
        };
        Ok(usize::try_from(n).ok())
    }

    fn null_or_fail(
        &self,
        field: &'static Field,
        ty: &'static FieldType,
    ) -> Result<Value, FieldError> {
        if nullable(field, ty, self.version) {
            Ok(Value::Null)
        } else {
            self.fail(field, FieldCorruption::NullNotNullable)
        }
    }

    fn read_struct(&mut self, fields: &'static [Field]) -> Result<Struct, FieldError> {
        let mut out = Vec::with_capacity(fields.len());
        let version = self.version;
        for f in fields.iter().filter(|f| f.versions.contains(version)) {
            let value = if f.is_tagged(self.version) {
                default_value(f)
            } else {
                self.read(f, &f.ty)?
            };
            out.push((f, value));
        }
        if self.flexible {
            self.read_tagged(fields, &mut out)?;
        }
        Ok(Struct { fields: out })
    }

    /// The tagged-field section: known tags replace their defaults, unknown ones are skipped.
    fn read_tagged(
        &mut self,
        fields: &'static [Field],
        out: &mut [(&'static Field, Value)],
    ) -> Result<(), FieldError> {
        static TAGS: Field = Field {
            name: "_taggedFields",
            ty: FieldType::Bytes,
            versions: super::schema::Versions::from(0),
            nullable: super::schema::Versions::NONE,
            tag: None,
            tagged: super::schema::Versions::NONE,
            default: Default::Zero,
        };
        let count = self.uvarint(&TAGS)?;
        for _ in 0..count {
            let tag = self.uvarint(&TAGS)?;
            let size = self.uvarint(&TAGS)? as usize;
            let start = self.pos;
            let data = self.take(&TAGS, size)?;
            let known = fields
                .iter()
                .position(|f| f.tag == Some(tag) && f.is_tagged(self.version));
            if let Some(i) = known {
                let f = &fields[i];
                let mut sub = Reader {
                    buf: data,
                    pos: 0,
                    flexible: true,
                    version: self.version,
                };
                let value = sub.read_tagged_value(f).map_err(|mut e| {
                    e.position += start;
                    e
                })?;
                if let Some(slot) = out.iter_mut().find(|(g, _)| std::ptr::eq(*g, f)) {
                    slot.1 = value;
                }
            }
        }
        Ok(())
    }

    /// A tagged field's data. A tagged struct carries its own presence as a varint (0: null), where an
    /// untagged nullable struct has a byte, as Kafka's generated readers do.
    fn read_tagged_value(&mut self, f: &'static Field) -> Result<Value, FieldError> {
        match &f.ty {
            FieldType::Struct(fields) => {
                if self.uvarint(f)? == 0 {
                    Ok(Value::Null)
                } else {
                    Ok(Value::Struct(self.read_struct(fields)?))
                }
            }
            ty => self.read(f, ty),
        }
    }

    fn read(&mut self, f: &'static Field, ty: &'static FieldType) -> Result<Value, FieldError> {
        Ok(match ty {
            FieldType::Int8 => Value::Int(self.int(f, 1)?),
            FieldType::Int16 => Value::Int(self.int(f, 2)?),
            FieldType::UInt16 => Value::Int(self.int(f, 2)? & 0xffff),
            FieldType::Int32 => Value::Int(self.int(f, 4)?),
            FieldType::Int64 => Value::Int(self.int(f, 8)?),
            FieldType::Uuid => {
                let b = self.take(f, 16)?;
                Value::Uuid(b.try_into().expect("16 bytes taken"))
            }
            FieldType::String => match self.length(f, 2)? {
                None => self.null_or_fail(f, ty)?,
                Some(n) if n > i16::MAX as usize => {
                    return self.fail(f, FieldCorruption::InvalidLength(n as i64))
                }
                Some(n) => Value::String(String::from_utf8_lossy(self.take(f, n)?).into_owned()),
            },
            FieldType::Bytes => match self.length(f, 4)? {
                None => self.null_or_fail(f, ty)?,
                Some(n) => Value::Bytes(self.take(f, n)?.to_vec()),
            },
            FieldType::Struct(fields) => {
                if nullable(f, ty, self.version) && self.int(f, 1)? < 0 {
                    Value::Null
                } else {
                    Value::Struct(self.read_struct(fields)?)
                }
            }
            FieldType::Array(inner) => self.read_array(f, inner)?,
        })
    }

    fn read_array(
        &mut self,
        f: &'static Field,
        inner: &'static FieldType,
    ) -> Result<Value, FieldError> {
        let Some(n) = self.length(f, 4)? else {
            return self.null_or_fail(f, &f.ty);
        };
        let remaining = self.buf.len() - self.pos;
        if n > remaining {
            return self.fail(
                f,
                FieldCorruption::TooManyElements {
                    count: n as u64,
                    remaining: remaining as u64,
                },
            );
        }
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.read(f, inner)?);
        }
        Ok(Value::Array(items))
    }
}

/// Whether `ty`, the field's own type (not an element of its array), may be null at `version`.
fn nullable(f: &Field, ty: &FieldType, version: i16) -> bool {
    std::ptr::eq(ty, &f.ty) && f.nullable.contains(version)
}

/// The value a field has when it is absent (a tagged field not written). A struct's is a struct of its
/// fields' defaults even when it declares `null`: Kafka's generated code reads an absent tagged struct
/// so, writes and prints one only when it differs from that, and writes and prints a null one.
pub fn default_value(f: &Field) -> Value {
    match (f.default, &f.ty) {
        (_, FieldType::Struct(fields)) => Value::Struct(Struct {
            fields: fields.iter().map(|g| (g, default_value(g))).collect(),
        }),
        (Default::Null, _) => Value::Null,
        (Default::Int(i), _) => Value::Int(i),
        (Default::Zero, FieldType::String) => Value::String(String::new()),
        (Default::Zero, FieldType::Bytes) => Value::Bytes(Vec::new()),
        (Default::Zero, FieldType::Uuid) => Value::Uuid([0; 16]),
        (Default::Zero, FieldType::Array(_)) => Value::Array(Vec::new()),
        (Default::Zero, _) => Value::Int(0),
    }
}

/// Encodes `s` as `schema` at `version` (the inverse of [`decode`]): tagged fields are written only when
/// they differ from their default, in tag order, as Kafka writes them. `None` when a value does not fit
/// its field (a null where the version allows none, a string longer than 32767 bytes, a wrong type).
pub fn encode(schema: &Schema, version: i16, s: &Struct) -> Option<Vec<u8>> {
    let mut w = Writer {
        out: Vec::new(),
        flexible: schema.flexible.contains(version),
        version,
    };
    w.write_struct(s)?;
    Some(w.out)
}

struct Writer {
    out: Vec<u8>,
    flexible: bool,
    version: i16,
}

impl Writer {
    fn length(&mut self, n: Option<usize>, classic_bytes: usize) -> Option<()> {
        if self.flexible {
            let v = match n {
                None => 0,
                Some(n) => u32::try_from(n).ok()?.checked_add(1)?,
            };
            put_uvarint(&mut self.out, v);
        } else {
            let v = match n {
                None => -1,
                Some(n) => i64::try_from(n).ok()?,
            };
            if classic_bytes == 2 {
                self.out
                    .extend_from_slice(&i16::try_from(v).ok()?.to_be_bytes());
            } else {
                self.out
                    .extend_from_slice(&i32::try_from(v).ok()?.to_be_bytes());
            }
        }
        Some(())
    }

    fn write_struct(&mut self, s: &Struct) -> Option<()> {
        let mut tagged: Vec<(u32, Vec<u8>)> = Vec::new();
        for (f, v) in &s.fields {
            if !f.versions.contains(self.version) {
                continue;
            }
            if f.is_tagged(self.version) {
                if *v != default_value(f) {
                    let mut sub = Writer {
                        out: Vec::new(),
                        flexible: true,
                        version: self.version,
                    };
                    sub.write_tagged_value(f, v)?;
                    tagged.push((f.tag?, sub.out));
                }
            } else {
                self.write(f, &f.ty, v)?;
            }
        }
        if self.flexible {
            tagged.sort_by_key(|(t, _)| *t);
            put_uvarint(&mut self.out, tagged.len() as u32);
            for (tag, data) in tagged {
                put_uvarint(&mut self.out, tag);
                put_uvarint(&mut self.out, u32::try_from(data.len()).ok()?);
                self.out.extend_from_slice(&data);
            }
        }
        Some(())
    }

    fn write_tagged_value(&mut self, f: &Field, v: &Value) -> Option<()> {
        match (&f.ty, v) {
            (FieldType::Struct(_), Value::Null) => put_uvarint(&mut self.out, 0),
            (FieldType::Struct(_), Value::Struct(s)) => {
                put_uvarint(&mut self.out, 1);
                self.write_struct(s)?;
            }
            (ty, v) => self.write(f, ty, v)?,
        }
        Some(())
    }

    fn write(&mut self, f: &Field, ty: &FieldType, v: &Value) -> Option<()> {
        if *v == Value::Null {
            if !nullable(f, ty, self.version) {
                return None;
            }
            return match ty {
                FieldType::String => self.length(None, 2),
                FieldType::Bytes | FieldType::Array(_) => self.length(None, 4),
                FieldType::Struct(_) => {
                    self.out.push(0xff);
                    Some(())
                }
                _ => None,
            };
        }
        match (ty, v) {
            (FieldType::Int8, Value::Int(i)) => self.out.push(i8::try_from(*i).ok()? as u8),
            (FieldType::Int16, Value::Int(i)) => self
                .out
                .extend_from_slice(&i16::try_from(*i).ok()?.to_be_bytes()),
            (FieldType::UInt16, Value::Int(i)) => self
                .out
                .extend_from_slice(&u16::try_from(*i).ok()?.to_be_bytes()),
            (FieldType::Int32, Value::Int(i)) => self
                .out
                .extend_from_slice(&i32::try_from(*i).ok()?.to_be_bytes()),
            (FieldType::Int64, Value::Int(i)) => self.out.extend_from_slice(&i.to_be_bytes()),
            (FieldType::Uuid, Value::Uuid(u)) => self.out.extend_from_slice(u),
            (FieldType::String, Value::String(s)) => {
                if s.len() > i16::MAX as usize {
                    return None;
                }
                self.length(Some(s.len()), 2)?;
                self.out.extend_from_slice(s.as_bytes());
            }
            (FieldType::Bytes, Value::Bytes(b)) => {
                self.length(Some(b.len()), 4)?;
                self.out.extend_from_slice(b);
            }
            (FieldType::Struct(_), Value::Struct(s)) => {
                if nullable(f, ty, self.version) {
                    self.out.push(1);
                }
                self.write_struct(s)?;
            }
            (FieldType::Array(inner), Value::Array(items)) => {
                self.length(Some(items.len()), 4)?;
                for item in items {
                    self.write(f, inner, item)?;
                }
            }
            _ => return None,
        }
        Some(())
    }
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// `s` as Kafka's generated `JsonConverter.write(s, version)` builds it: the fields that exist at the
/// struct's version in schema order, a tagged field only when it differs from its default, bytes in
/// base64, UUIDs as Kafka prints them.
pub fn to_json(s: &Struct, version: i16) -> Json {
    Json::Object(
        s.fields
            .iter()
            .filter(|(f, v)| !f.is_tagged(version) || *v != default_value(f))
            .map(|(f, v)| (f.name.to_string(), value_json(v, version)))
            .collect(),
    )
}

fn value_json(v: &Value, version: i16) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Int(i) => Json::Number(*i),
        Value::String(s) => Json::String(s.clone()),
        Value::Bytes(b) => Json::String(super::json::base64(b)),
        Value::Uuid(u) => Json::String(super::json::kafka_uuid(u)),
        Value::Array(items) => Json::Array(items.iter().map(|i| value_json(i, version)).collect()),
        Value::Struct(s) => to_json(s, version),
    }
}

/// Which part of a record a failure was in, for messages.
pub(super) fn part_name(part: Part) -> &'static str {
    match part {
        Part::Key => "key",
        Part::Value => "value",
    }
}

#[cfg(test)]
mod tests {
    use super::super::schemas::{GROUP_RECORD_TYPES, TRANSACTION_RECORD_TYPES};
    use super::*;

    fn all_schemas() -> impl Iterator<Item = &'static Schema> {
        GROUP_RECORD_TYPES
            .iter()
            .chain(TRANSACTION_RECORD_TYPES)
            .flat_map(|(_, k, v)| [*k, *v])
    }

    proptest::proptest! {
        /// Any bytes, any schema, any valid version: an answer, never a panic; what decodes re-encodes to
        /// bytes that decode to the same thing.
        #[test]
        fn decode_never_panics_and_reencodes(bytes in proptest::collection::vec(0u8.., 0..200), pick in 0usize..1000, v in 0i16..6) {
            let schemas: Vec<&Schema> = all_schemas().collect();
            let schema = schemas[pick % schemas.len()];
            let version = v.clamp(schema.valid.low, schema.valid.high);
            if let Ok(s) = decode(schema, version, &bytes) {
                let again = encode(schema, version, &s).expect("a decoded struct encodes");
                proptest::prop_assert_eq!(decode(schema, version, &again).unwrap(), s);
            }
        }
    }

    /// A tagged nullable struct (ConsumerGroupMemberMetadataValue.classicMemberMetadata), as Kafka 4.4's
    /// generated code handles it: absent is a struct of defaults (left out of the JSON), present with a
    /// zero varint is null (printed as null), and each writes back as it was read.
    #[test]
    fn a_tagged_struct_is_absent_null_or_present() {
        let schema = &super::super::schemas::CONSUMER_GROUP_MEMBER_METADATA_VALUE;
        // instanceId null, rackId null, clientId "c", clientHost "h", topics ["t"], regex null,
        // rebalanceTimeoutMs 5, serverAssignor null; then the tagged section.
        let fixed = [0u8, 0, 2, b'c', 2, b'h', 2, 2, b't', 0, 0, 0, 0, 5, 0];
        let absent = [&fixed[..], &[0]].concat();
        let null = [&fixed[..], &[1, 0, 1, 0]].concat();
        let present = [&fixed[..], &[1, 0, 7, 1, 0, 0, 0, 9, 1, 0]].concat();
        let json = |b: &[u8]| to_json(&decode(schema, 0, b).unwrap(), 0).to_string();
        assert!(!json(&absent).contains("classicMemberMetadata"));
        assert!(json(&null).ends_with(r#""serverAssignor":null,"classicMemberMetadata":null}"#));
        assert!(json(&present).ends_with(
            r#""classicMemberMetadata":{"sessionTimeoutMs":9,"supportedProtocols":[]}}"#
        ));
        for bytes in [absent, null, present] {
            let s = decode(schema, 0, &bytes).unwrap();
            assert_eq!(encode(schema, 0, &s).unwrap(), bytes);
        }
    }

    /// A count far beyond the buffer is refused before anything is allocated.
    #[test]
    fn a_huge_array_count_is_refused_up_front() {
        let schema = &super::super::schemas::TRANSACTION_LOG_VALUE;
        let mut bytes = vec![0u8; 15];
        bytes.extend_from_slice(&i32::MAX.to_be_bytes());
        let e = decode(schema, 0, &bytes).unwrap_err();
        assert_eq!(e.field, "transactionPartitions");
        assert_eq!(
            e.reason,
            FieldCorruption::TooManyElements {
                count: i32::MAX as u64,
                remaining: 0
            }
        );
    }
}
