//! A JSON tree printed exactly as Jackson's `JsonNode.toString()` prints Kafka's (what `kafka-dump-log`
//! shows): no spaces, keys in insertion order, `\b \t \n \f \r` and other control characters escaped
//! (`\u00XX`, upper-case hex), everything else (non-ASCII included) as is.

use std::fmt;

use base64::Engine as _;

/// An ordered JSON value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Json {
    /// `null`.
    Null,
    /// A number (coordinator records hold integers only).
    Number(i64),
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
            Json::Number(n) => write!(f, "{n}"),
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
}
