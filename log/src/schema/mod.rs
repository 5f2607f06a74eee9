//! One engine for Kafka's message schemas, used by every family of internal records: KRaft metadata
//! (`crate::kraft`), the group and transaction coordinators (`crate::coordinator`), and the mirror
//! crate's `__mirror_state` records. A family is a table of schemas (generated from Kafka's own JSON
//! definitions, or for `__mirror_state` transcribed from the reference fork's); this module is what
//! reads, writes and prints any of them.
//!
//! - `types.rs`: a schema's shape (fields, types, versions, nullability, tags, defaults, flexible
//!   versions).
//! - `value.rs`: a message's values ([`Struct`], [`Value`]) and a field's default.
//! - `codec.rs`: bytes to a [`Struct`] and back, classic and flexible encodings, as Kafka's generated
//!   `read` and `write` methods do.
//! - `json.rs`: a [`Struct`] as Kafka's generated `JsonConverter`s write it ([`Json`]).

mod codec;
mod json;
mod types;
mod value;

pub use codec::{
    build_struct, decode, decode_partial, decode_prefix, decode_prefix_with, encode, encode_into,
    DecodeOptions, EncodeError, FieldCorruption, FieldError,
};
pub use json::{base64, kafka_uuid, to_json, Json};
pub use types::{Default, Field, MessageSchema, SchemaKind, Type, Versions, MAX};
pub use value::{default_value, Struct, Value};
