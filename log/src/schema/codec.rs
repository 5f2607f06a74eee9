//! One codec for every schema: bytes to a [`Struct`] and back, as Kafka's generated message classes read
//! and write them: classic encodings before a schema's first flexible version (int16 / int32 lengths, -1
//! for null), compact ones and tagged fields from it (unsigned varint length + 1, 0 for null; each struct
//! ending in a tagged-fields section whose unknown tags are skipped).
//!
//! Bytes are not trusted: every length and count is checked against what remains before anything is
//! sliced or allocated, as Kafka's readers check them, and a failure names the field and the byte it was
//! at. The encoder is the decoder's exact inverse on what Kafka writes: tagged fields only when they
//! differ from their default, in tag order.

use std::borrow::Cow;

use super::types::{Field, MessageSchema, SchemaKind, Type};
use super::value::{default_value, Struct, Value};

/// Why a field did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FieldCorruption {
    /// The buffer ends inside the field.
    #[error("the buffer ends inside it")]
    Truncated,
    /// A null where the schema allows none.
    #[error("null, but the field is not nullable at this version")]
    NullNotNullable,
    /// A string length Kafka refuses.
    #[error("string length {0} is over 32767")]
    InvalidLength(i64),
    /// An array or map announcing more elements than bytes remain.
    #[error("{count} elements announced but only {remaining} bytes remain")]
    TooManyElements {
        /// The announced count.
        count: u64,
        /// The bytes left in the buffer.
        remaining: u64,
    },
    /// An unsigned varint of more than 5 bytes.
    #[error("an unsigned varint longer than 5 bytes")]
    VarintTooLong,
    /// A string that is not UTF-8 (refused only with [`DecodeOptions::strict_utf8`]; otherwise decoded
    /// lossily).
    #[error("the string is not UTF-8")]
    NotUtf8,
    /// A known tagged field whose declared size differs from what its value took (checked for KRaft
    /// records, whose loader refuses such a record, and with [`DecodeOptions::strict_tag_sizes`]).
    #[error("tagged field {tag} is {declared} bytes but its value took {used}")]
    TaggedFieldSize {
        /// The tag.
        tag: u32,
        /// The declared size.
        declared: u32,
        /// The bytes its value used.
        used: usize,
    },
}

/// Where a decode failed: the field, the part of it being read, and the byte offset in the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field's JSON name (`_taggedFields` for the tagged-fields section itself).
    pub field: &'static str,
    /// What was being read: the field's name, or in the tagged-fields section `tagged fields` (the
    /// count), `tag`, `tag size` or `tagged field` (its bytes).
    pub what: &'static str,
    /// The byte offset in the buffer where it failed.
    pub position: usize,
    /// Whether it failed in the length of a string, bytes or array (not in what follows the length).
    pub in_length: bool,
    /// For [`FieldCorruption::Truncated`]: the bytes the read needed (0 otherwise).
    pub need: usize,
    /// The bytes left, when it failed, in what was being read (the buffer, or a tagged field's bytes).
    pub remaining: usize,
    /// What was wrong.
    pub reason: FieldCorruption,
}

/// Why a struct could not be encoded: a value that does not fit its field (a null where none is allowed,
/// an integer out of range, a string over 32767 bytes, a value of another type).
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

/// Decodes `schema` at `version` from the start of `buf`; bytes after the message are ignored, as Kafka's
/// readers ignore them.
pub fn decode<'a>(
    schema: &MessageSchema,
    version: i16,
    buf: &'a [u8],
) -> Result<Struct<'a>, FieldError> {
    decode_prefix(schema, version, buf).map(|(s, _)| s)
}

/// How strictly a decode reads what Kafka's generated readers would take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Refuse a string that is not UTF-8 ([`FieldCorruption::NotUtf8`]) instead of decoding it lossily.
    pub strict_utf8: bool,
    /// Refuse a known tagged field whose declared size differs from what its value took
    /// ([`FieldCorruption::TaggedFieldSize`]).
    pub strict_tag_sizes: bool,
}

impl DecodeOptions {
    /// What [`decode`] and [`decode_prefix`] use for `schema`: strings decoded lossily, tagged-field
    /// sizes checked for KRaft records only.
    pub fn for_schema(schema: &MessageSchema) -> Self {
        DecodeOptions {
            strict_utf8: false,
            strict_tag_sizes: matches!(schema.kind, SchemaKind::Metadata | SchemaKind::Control),
        }
    }
}

/// Decodes `schema` at `version` from the start of `buf`, and says how many bytes it took.
pub fn decode_prefix<'a>(
    schema: &MessageSchema,
    version: i16,
    buf: &'a [u8],
) -> Result<(Struct<'a>, usize), FieldError> {
    decode_prefix_with(schema, version, buf, DecodeOptions::for_schema(schema))
}

/// [`decode_prefix`] with the given options.
pub fn decode_prefix_with<'a>(
    schema: &MessageSchema,
    version: i16,
    buf: &'a [u8],
    options: DecodeOptions,
) -> Result<(Struct<'a>, usize), FieldError> {
    let (s, used, failed) = decode_partial(schema, version, buf, options);
    match failed {
        None => Ok((s, used)),
        Some(e) => Err(e),
    }
}

/// [`decode_prefix_with`] that keeps what it read: the top-level fields decoded before a failure (in
/// schema order, tagged ones at their defaults), the bytes taken, and the failure if there was one.
/// For a reader that checks each field's value as it is read, as a hand-written reader would.
pub fn decode_partial<'a>(
    schema: &MessageSchema,
    version: i16,
    buf: &'a [u8],
    options: DecodeOptions,
) -> (Struct<'a>, usize, Option<FieldError>) {
    let mut r = Reader {
        buf,
        pos: 0,
        flexible: schema.flexible.contains(version),
        strict_tags: options.strict_tag_sizes,
        strict_utf8: options.strict_utf8,
        version,
    };
    let mut s = Struct {
        version,
        fields: Vec::with_capacity(schema.fields.len()),
    };
    let failed = r.read_struct_into(schema.fields, &mut s).err();
    (s, r.pos, failed)
}

/// The tagged-fields section, named in errors.
static TAGS: Field = Field::new("_taggedFields", Type::Bytes, 0, i16::MAX);

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    flexible: bool,
    strict_tags: bool,
    strict_utf8: bool,
    version: i16,
}

impl<'a> Reader<'a> {
    fn fail<T>(
        &self,
        field: &'static Field,
        what: &'static str,
        reason: FieldCorruption,
    ) -> Result<T, FieldError> {
        self.fail_needing(field, what, reason, 0)
    }

    fn fail_needing<T>(
        &self,
        field: &'static Field,
        what: &'static str,
        reason: FieldCorruption,
        need: usize,
    ) -> Result<T, FieldError> {
        Err(FieldError {
            field: field.name,
            what,
            position: self.pos,
            in_length: false,
            need,
            remaining: self.buf.len() - self.pos,
            reason,
        })
    }

    fn take_as(
        &mut self,
        field: &'static Field,
        what: &'static str,
        n: usize,
    ) -> Result<&'a [u8], FieldError> {
        if self.buf.len() - self.pos < n {
            return self.fail_needing(field, what, FieldCorruption::Truncated, n);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn take(&mut self, field: &'static Field, n: usize) -> Result<&'a [u8], FieldError> {
        self.take_as(field, field.name, n)
    }

    fn int(&mut self, field: &'static Field, n: usize) -> Result<i64, FieldError> {
        let b = self.take(field, n)?;
        let mut be = [0u8; 8];
        be[8 - n..].copy_from_slice(b);
        // Sign-extend from the field's width.
        let shift = 64 - 8 * n as u32;
        Ok((i64::from_be_bytes(be) << shift) >> shift)
    }

    /// Kafka's unsigned varint (at most 5 bytes, 32 bits).
    fn uvarint_as(&mut self, field: &'static Field, what: &'static str) -> Result<u32, FieldError> {
        let mut value = 0u32;
        for i in 0..5 {
            let b = self.take_as(field, what, 1)?[0];
            value |= ((b & 0x7f) as u32).wrapping_shl(7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        self.fail(field, what, FieldCorruption::VarintTooLong)
    }

    /// A string, bytes or array length: `None` for null (any negative length, as Kafka reads it).
    fn length(
        &mut self,
        field: &'static Field,
        classic_bytes: usize,
    ) -> Result<Option<usize>, FieldError> {
        let n = if self.flexible {
            self.uvarint_as(field, field.name).map_err(in_length)? as i64 - 1
        } else {
            self.int(field, classic_bytes).map_err(in_length)?
        };
        Ok(usize::try_from(n).ok())
    }

    fn null_or_fail(&self, field: &'static Field, ty: &Type) -> Result<Value<'a>, FieldError> {
        if nullable(field, ty, self.version) {
            Ok(Value::Null)
        } else {
            self.fail(field, field.name, FieldCorruption::NullNotNullable)
        }
    }

    fn read_struct(&mut self, fields: &'static [Field]) -> Result<Struct<'a>, FieldError> {
        let mut out = Struct {
            version: self.version,
            fields: Vec::with_capacity(fields.len()),
        };
        self.read_struct_into(fields, &mut out)?;
        Ok(out)
    }

    /// [`Self::read_struct`] into `out`, which holds the fields read when it fails.
    fn read_struct_into(
        &mut self,
        fields: &'static [Field],
        out: &mut Struct<'a>,
    ) -> Result<(), FieldError> {
        let version = self.version;
        for f in fields.iter().filter(|f| f.versions.contains(version)) {
            let value = if f.is_tagged_at(version) {
                default_value(f, version)
            } else {
                self.read(f, &f.ty)?
            };
            out.fields.push((f, value));
        }
        if self.flexible {
            self.read_tagged(out)?;
        }
        Ok(())
    }

    /// The tagged-fields section: known tags replace their defaults, unknown ones are skipped.
    fn read_tagged(&mut self, out: &mut Struct<'a>) -> Result<(), FieldError> {
        let count = self.uvarint_as(&TAGS, "tagged fields")?;
        for _ in 0..count {
            let tag = self.uvarint_as(&TAGS, "tag")?;
            let size = self.uvarint_as(&TAGS, "tag size")?;
            let start = self.pos;
            let data = self.take_as(&TAGS, "tagged field", size as usize)?;
            let version = self.version;
            let Some((f, slot)) = out
                .fields
                .iter_mut()
                .find(|(f, _)| f.tag == Some(tag) && f.is_tagged_at(version))
            else {
                continue;
            };
            let mut sub = Reader {
                buf: data,
                pos: 0,
                flexible: true,
                strict_tags: self.strict_tags,
                strict_utf8: self.strict_utf8,
                version,
            };
            *slot = sub.read_tagged_value(f).map_err(|mut e| {
                // `remaining` stays the tagged field's own: what was left of its bytes.
                e.position += start;
                e
            })?;
            if self.strict_tags && sub.pos != data.len() {
                return Err(FieldError {
                    field: f.name,
                    what: f.name,
                    position: start,
                    in_length: false,
                    need: 0,
                    remaining: data.len() - sub.pos,
                    reason: FieldCorruption::TaggedFieldSize {
                        tag,
                        declared: size,
                        used: sub.pos,
                    },
                });
            }
        }
        Ok(())
    }

    /// A tagged field's data. A tagged struct carries its own presence as a varint (0: null), where an
    /// untagged nullable struct has a byte, as Kafka's generated readers do.
    fn read_tagged_value(&mut self, f: &'static Field) -> Result<Value<'a>, FieldError> {
        match &f.ty {
            Type::Struct(fields) => {
                if self.uvarint_as(f, f.name)? == 0 {
                    Ok(Value::Null)
                } else {
                    Ok(Value::Struct(self.read_struct(fields)?))
                }
            }
            ty => self.read(f, ty),
        }
    }

    fn read(&mut self, f: &'static Field, ty: &'static Type) -> Result<Value<'a>, FieldError> {
        Ok(match ty {
            Type::Bool => Value::Bool(self.int(f, 1)? != 0),
            Type::Int8 => Value::Int(self.int(f, 1)?),
            Type::Int16 => Value::Int(self.int(f, 2)?),
            Type::Uint16 => Value::Int(self.int(f, 2)? & 0xffff),
            Type::Int32 => Value::Int(self.int(f, 4)?),
            Type::Uint32 => Value::Int(self.int(f, 4)? & 0xffff_ffff),
            Type::Int64 => Value::Int(self.int(f, 8)?),
            Type::Float64 => Value::Float(f64::from_bits(self.int(f, 8)? as u64)),
            Type::Uuid => {
                let mut u = [0u8; 16];
                u.copy_from_slice(self.take(f, 16)?);
                Value::Uuid(u)
            }
            Type::String => match self.length(f, 2)? {
                None => self.null_or_fail(f, ty)?,
                Some(n) if n > i16::MAX as usize => {
                    return self.fail(f, f.name, FieldCorruption::InvalidLength(n as i64))
                }
                Some(n) => {
                    let start = self.pos;
                    let bytes = self.take(f, n)?;
                    if self.strict_utf8 && std::str::from_utf8(bytes).is_err() {
                        self.pos = start;
                        return self.fail(f, f.name, FieldCorruption::NotUtf8);
                    }
                    Value::Str(String::from_utf8_lossy(bytes))
                }
            },
            Type::Bytes => match self.length(f, 4)? {
                None => self.null_or_fail(f, ty)?,
                Some(n) => Value::Bytes(Cow::Borrowed(self.take(f, n)?)),
            },
            Type::Struct(fields) => {
                if nullable(f, ty, self.version) && self.int(f, 1)? < 0 {
                    Value::Null
                } else {
                    Value::Struct(self.read_struct(fields)?)
                }
            }
            Type::Array(inner) => self.read_array(f, ty, inner)?,
        })
    }

    fn read_array(
        &mut self,
        f: &'static Field,
        ty: &'static Type,
        inner: &'static Type,
    ) -> Result<Value<'a>, FieldError> {
        let Some(n) = self.length(f, 4)? else {
            return self.null_or_fail(f, ty);
        };
        // Every element takes at least one byte: a count past the rest is corruption, never an
        // allocation.
        let remaining = self.buf.len() - self.pos;
        if n > remaining {
            return self.fail(
                f,
                f.name,
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

/// Marks an error as one in a length.
fn in_length(e: FieldError) -> FieldError {
    FieldError {
        in_length: true,
        ..e
    }
}

/// Whether `ty`, the field's own type (not an element of its array), may be null at `version`.
fn nullable(f: &Field, ty: &Type, version: i16) -> bool {
    std::ptr::eq(ty, &f.ty) && f.nullable.contains(version)
}

/// Encodes `s` as `schema` at `version` (the inverse of [`decode`]). Fields of `s` that do not exist at
/// `version` are left out.
pub fn encode(
    schema: &MessageSchema,
    version: i16,
    s: &Struct<'_>,
) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    encode_into(&mut out, schema, version, s)?;
    Ok(out)
}

/// [`encode`], appending to `out`.
pub fn encode_into(
    out: &mut Vec<u8>,
    schema: &MessageSchema,
    version: i16,
    s: &Struct<'_>,
) -> Result<(), EncodeError> {
    let mut w = Writer {
        out: std::mem::take(out),
        record: schema.name,
        flexible: schema.flexible.contains(version),
        version,
    };
    let written = w.write_struct(s);
    *out = w.out;
    written
}

struct Writer {
    out: Vec<u8>,
    record: &'static str,
    flexible: bool,
    version: i16,
}

impl Writer {
    fn fail<T>(&self, f: &Field, reason: &'static str) -> Result<T, EncodeError> {
        Err(EncodeError {
            record: self.record,
            field: f.name,
            reason,
        })
    }

    fn length(
        &mut self,
        f: &Field,
        n: Option<usize>,
        classic_bytes: usize,
    ) -> Result<(), EncodeError> {
        if self.flexible {
            let v = match n {
                None => Some(0),
                Some(n) => u32::try_from(n).ok().and_then(|n| n.checked_add(1)),
            };
            let Some(v) = v else {
                return self.fail(f, "a length past 2^32");
            };
            put_uvarint(&mut self.out, v);
        } else {
            let v = n.map_or(Some(-1), |n| i64::try_from(n).ok());
            let fits = match (v, classic_bytes) {
                (Some(v), 2) => i16::try_from(v).map(|v| self.out.extend(v.to_be_bytes())),
                (Some(v), _) => i32::try_from(v).map(|v| self.out.extend(v.to_be_bytes())),
                (None, _) => return self.fail(f, "a length past 2^63"),
            };
            if fits.is_err() {
                return self.fail(f, "a length past the classic encoding's");
            }
        }
        Ok(())
    }

    fn write_struct(&mut self, s: &Struct<'_>) -> Result<(), EncodeError> {
        let mut tagged: Vec<(u32, Vec<u8>)> = Vec::new();
        for (f, v) in &s.fields {
            if !f.versions.contains(self.version) {
                continue;
            }
            if f.is_tagged_at(self.version) {
                if *v != default_value(f, self.version) {
                    let mut sub = Writer {
                        out: Vec::new(),
                        record: self.record,
                        flexible: true,
                        version: self.version,
                    };
                    sub.write_tagged_value(f, v)?;
                    tagged.push((f.tag.unwrap_or(0), sub.out));
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
                put_uvarint(&mut self.out, data.len() as u32);
                self.out.extend_from_slice(&data);
            }
        }
        Ok(())
    }

    fn write_tagged_value(&mut self, f: &Field, v: &Value<'_>) -> Result<(), EncodeError> {
        match (&f.ty, v) {
            (Type::Struct(_), Value::Null) => put_uvarint(&mut self.out, 0),
            (Type::Struct(_), Value::Struct(s)) => {
                put_uvarint(&mut self.out, 1);
                self.write_struct(s)?;
            }
            (ty, v) => self.write(f, ty, v)?,
        }
        Ok(())
    }

    fn write_null(&mut self, f: &Field, ty: &Type) -> Result<(), EncodeError> {
        if !nullable(f, ty, self.version) {
            return self.fail(f, "null, but the field is not nullable at this version");
        }
        match ty {
            Type::String => self.length(f, None, 2),
            Type::Bytes | Type::Array(_) => self.length(f, None, 4),
            Type::Struct(_) => {
                self.out.push(0xff);
                Ok(())
            }
            _ => self.fail(f, "null in a field of a type that has none"),
        }
    }

    fn write(&mut self, f: &Field, ty: &Type, v: &Value<'_>) -> Result<(), EncodeError> {
        let range = "an integer out of the field type's range";
        match (ty, v) {
            (_, Value::Null) => self.write_null(f, ty)?,
            (Type::Bool, Value::Bool(b)) => self.out.push(u8::from(*b)),
            (Type::Int8, Value::Int(i)) => match i8::try_from(*i) {
                Ok(i) => self.out.extend(i.to_be_bytes()),
                Err(_) => return self.fail(f, range),
            },
            (Type::Int16, Value::Int(i)) => match i16::try_from(*i) {
                Ok(i) => self.out.extend(i.to_be_bytes()),
                Err(_) => return self.fail(f, range),
            },
            (Type::Uint16, Value::Int(i)) => match u16::try_from(*i) {
                Ok(i) => self.out.extend(i.to_be_bytes()),
                Err(_) => return self.fail(f, range),
            },
            (Type::Int32, Value::Int(i)) => match i32::try_from(*i) {
                Ok(i) => self.out.extend(i.to_be_bytes()),
                Err(_) => return self.fail(f, range),
            },
            (Type::Uint32, Value::Int(i)) => match u32::try_from(*i) {
                Ok(i) => self.out.extend(i.to_be_bytes()),
                Err(_) => return self.fail(f, range),
            },
            (Type::Int64, Value::Int(i)) => self.out.extend(i.to_be_bytes()),
            (Type::Float64, Value::Float(x)) => self.out.extend(x.to_bits().to_be_bytes()),
            (Type::Uuid, Value::Uuid(u)) => self.out.extend_from_slice(u),
            (Type::String, Value::Str(s)) => {
                if s.len() > i16::MAX as usize {
                    return self.fail(f, "a string longer than 32767 bytes");
                }
                self.length(f, Some(s.len()), 2)?;
                self.out.extend_from_slice(s.as_bytes());
            }
            (Type::Bytes, Value::Bytes(b)) => {
                self.length(f, Some(b.len()), 4)?;
                self.out.extend_from_slice(b);
            }
            (Type::Struct(_), Value::Struct(s)) => {
                if nullable(f, ty, self.version) {
                    self.out.push(1);
                }
                self.write_struct(s)?;
            }
            (Type::Array(inner), Value::Array(items)) => {
                self.length(f, Some(items.len()), 4)?;
                for item in items {
                    self.write(f, inner, item)?;
                }
            }
            _ => return self.fail(f, "a value of another type than the field's"),
        }
        Ok(())
    }
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
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
            .map(|f| (f, default_value(f, version)))
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
    use crate::coordinator::schemas::{GROUP_RECORD_TYPES, TRANSACTION_RECORD_TYPES};
    use crate::kraft::schemas::{CONTROL_RECORDS, METADATA_RECORDS};
    use crate::schema::to_json;

    /// Every table of every family: the coordinators' and KRaft's.
    fn all_schemas() -> impl Iterator<Item = &'static MessageSchema> {
        GROUP_RECORD_TYPES
            .iter()
            .chain(TRANSACTION_RECORD_TYPES)
            .flat_map(|(_, k, v)| [*k, *v])
            .chain(METADATA_RECORDS)
            .chain(CONTROL_RECORDS)
    }

    proptest::proptest! {
        /// Any bytes, any schema of any family, any valid version: an answer, never a panic; what
        /// decodes re-encodes to bytes that decode to the same thing (compared as bytes: a float may be
        /// NaN).
        #[test]
        fn decode_never_panics_and_reencodes(bytes in proptest::collection::vec(0u8.., 0..200), pick in 0usize..1000, v in 0i16..6) {
            let schemas: Vec<&MessageSchema> = all_schemas().collect();
            let schema = schemas[pick % schemas.len()];
            let version = v.clamp(schema.valid.lo, schema.valid.hi);
            if let Ok(s) = decode(schema, version, &bytes) {
                let again = encode(schema, version, &s).expect("a decoded struct encodes");
                let back = decode(schema, version, &again).unwrap();
                proptest::prop_assert_eq!(&encode(schema, version, &back).unwrap(), &again);
                proptest::prop_assert_eq!(back.fields.len(), s.fields.len());
            }
        }
    }

    /// A tagged nullable struct (ConsumerGroupMemberMetadataValue.classicMemberMetadata), as Kafka 4.4's
    /// generated code handles it: absent is a struct of defaults (left out of the JSON), present with a
    /// zero varint is null (printed as null), and each writes back as it was read.
    #[test]
    fn a_tagged_struct_is_absent_null_or_present() {
        let schema = &crate::coordinator::schemas::CONSUMER_GROUP_MEMBER_METADATA_VALUE;
        // instanceId null, rackId null, clientId "c", clientHost "h", topics ["t"], regex null,
        // rebalanceTimeoutMs 5, serverAssignor null; then the tagged section.
        let fixed = [0u8, 0, 2, b'c', 2, b'h', 2, 2, b't', 0, 0, 0, 0, 5, 0];
        let absent = [&fixed[..], &[0]].concat();
        let null = [&fixed[..], &[1, 0, 1, 0]].concat();
        let present = [&fixed[..], &[1, 0, 7, 1, 0, 0, 0, 9, 1, 0]].concat();
        let json = |b: &[u8]| to_json(&decode(schema, 0, b).unwrap()).to_string();
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

    /// Strings decode lossily by default (KRaft and coordinator output is unchanged), and are refused
    /// when the options ask for UTF-8; a partial decode keeps the fields read before the failure.
    #[test]
    fn strict_utf8_refuses_and_a_partial_decode_keeps_what_it_read() {
        let schema = &crate::coordinator::schemas::TRANSACTION_LOG_KEY;
        let bytes = [0u8, 2, b'a', 0xff];
        let lossy = decode(schema, 0, &bytes).unwrap();
        assert_eq!(lossy.str("transactionalId"), Some("a\u{fffd}"));
        let strict = DecodeOptions {
            strict_utf8: true,
            strict_tag_sizes: false,
        };
        let e = decode_prefix_with(schema, 0, &bytes, strict).unwrap_err();
        assert_eq!(
            (e.field, e.position, e.reason),
            ("transactionalId", 2, FieldCorruption::NotUtf8)
        );
        let value = &crate::coordinator::schemas::TRANSACTION_LOG_VALUE;
        // producerId 7, then producerEpoch cut short.
        let bytes = [0u8, 0, 0, 0, 0, 0, 0, 7, 0];
        let (s, used, failed) = decode_partial(value, 0, &bytes, strict);
        assert_eq!(s.int("producerId"), Some(7));
        assert_eq!(s.fields.len(), 1);
        assert_eq!(used, 8);
        let failed = failed.unwrap();
        assert_eq!(
            (failed.need, failed.remaining, failed.reason),
            (2, 1, FieldCorruption::Truncated)
        );
    }

    /// A count far beyond the buffer is refused before anything is allocated.
    #[test]
    fn a_huge_array_count_is_refused_up_front() {
        let schema = &crate::coordinator::schemas::TRANSACTION_LOG_VALUE;
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
