//! A message as Kafka's generated `JsonConverter`s write it ([`to_json`]), as a JSON tree printed exactly
//! as Jackson's `JsonNode.toString()` prints Kafka's (what `kafka-dump-log` shows): no spaces, keys in
//! insertion order, `\b \t \n \f \r` and other control characters escaped (`\u00XX`, upper-case hex),
//! everything else (non-ASCII included) as is; doubles as Java prints them.

use std::fmt;

use base64::Engine as _;

use super::value::{default_value, Struct, Value};

/// An ordered JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer.
    Number(i64),
    /// A double, printed as Java's `Double.toString`.
    Float(f64),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object, its members in Kafka's order.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// The member `name` of an object.
    pub fn get(&self, name: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            _ => None,
        }
    }
}

impl fmt::Display for Json {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Json::Null => f.write_str("null"),
            Json::Bool(b) => f.write_str(if *b { "true" } else { "false" }),
            Json::Number(n) => write!(f, "{n}"),
            Json::Float(x) => write_java_double(f, *x),
            Json::String(s) => write_string(f, s),
            Json::Array(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Json::Object(members) => {
                f.write_str("{")?;
                for (i, (k, v)) in members.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write_string(f, k)?;
                    write!(f, ":{v}")?;
                }
                f.write_str("}")
            }
        }
    }
}

fn write_string(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str("\"")?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\u{8}' => f.write_str("\\b")?,
            '\t' => f.write_str("\\t")?,
            '\n' => f.write_str("\\n")?,
            '\u{c}' => f.write_str("\\f")?,
            '\r' => f.write_str("\\r")?,
            c if (c as u32) < 0x20 => write!(f, "\\u{:04X}", c as u32)?,
            c => write!(f, "{c}")?,
        }
    }
    f.write_str("\"")
}

/// `s` as Kafka's generated `JsonConverter.write(s, version)` builds it: the fields that exist at the
/// struct's version in schema order, a tagged field only when it differs from its default, bytes in
/// base64, UUIDs as Kafka prints them.
pub fn to_json(s: &Struct<'_>) -> Json {
    Json::Object(
        s.fields
            .iter()
            .filter(|(f, v)| !f.is_tagged_at(s.version) || *v != default_value(f, s.version))
            .map(|(f, v)| (f.name.to_string(), value_json(v)))
            .collect(),
    )
}

impl Struct<'_> {
    /// Kafka's JSON for this struct, printed ([`to_json`]).
    pub fn to_kafka_json(&self) -> String {
        to_json(self).to_string()
    }
}

fn value_json(v: &Value<'_>) -> Json {
    match v {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::Number(*i),
        Value::Float(x) => Json::Float(*x),
        Value::Str(s) => Json::String(s.to_string()),
        Value::Bytes(b) => Json::String(base64(b)),
        Value::Uuid(u) => Json::String(kafka_uuid(u)),
        Value::Array(items) => Json::Array(items.iter().map(value_json).collect()),
        Value::Struct(s) => to_json(s),
    }
}

/// Java's `Double.toString` (what Jackson prints for a double): the shortest digits that read back, in
/// plain notation from 10^-3 to 10^7 and `d.dddE±n` outside it; `NaN` and the infinities quoted, as
/// Jackson quotes non-numeric numbers.
fn write_java_double(out: &mut dyn fmt::Write, f: f64) -> fmt::Result {
    if f.is_nan() {
        out.write_str("\"NaN\"")
    } else if f.is_infinite() {
        out.write_str(if f > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        })
    } else if f == 0.0 || (1e-3..1e7).contains(&f.abs()) {
        let plain = format!("{f}");
        out.write_str(&plain)?;
        if !plain.contains('.') {
            out.write_str(".0")?;
        }
        Ok(())
    } else {
        let sci = format!("{f:e}");
        let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
        out.write_str(mantissa)?;
        if !mantissa.contains('.') {
            out.write_str(".0")?;
        }
        out.write_char('E')?;
        out.write_str(exponent)
    }
}

/// Bytes as Jackson writes a binary node: standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A UUID as Kafka's `Uuid.toString()`: URL-safe base64 without padding (22 characters).
pub fn kafka_uuid(bytes: &[u8; 16]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_as_jackson_does() {
        let j = Json::Object(vec![
            ("a".into(), Json::Number(-1)),
            ("s".into(), Json::String("q\"\\\n\u{1}é/".into())),
            ("n".into(), Json::Null),
            (
                "l".into(),
                Json::Array(vec![Json::Number(1), Json::Number(2)]),
            ),
        ]);
        assert_eq!(
            j.to_string(),
            r#"{"a":-1,"s":"q\"\\\n\u0001é/","n":null,"l":[1,2]}"#
        );
        assert_eq!(kafka_uuid(&[0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    }

    fn double(f: f64) -> String {
        Json::Float(f).to_string()
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
}
