//! The wire side of a scripted Kafka broker for tests: length-prefixed frames in and out, each
//! request's header decoded and the response header written, and ApiVersions. What a broker answers is
//! the test's script.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, ResponseHeader};
use kafka_protocol::protocol::{decode_request_header_from_buffer, Encodable};

/// One request: its API, version and body (after the header).
pub struct Request {
    pub key: ApiKey,
    pub version: i16,
    pub body: Bytes,
}

/// Serves `stream` until the peer hangs up or `respond` returns `None` (hang up instead of
/// answering). `respond` gets the request and a response buffer that already holds the header.
pub fn serve(mut stream: TcpStream, mut respond: impl FnMut(Request, &mut BytesMut) -> Option<()>) {
    loop {
        let mut prefix = [0u8; 4];
        if stream.read_exact(&mut prefix).is_err() {
            return;
        }
        let mut body = vec![0u8; i32::from_be_bytes(prefix) as usize];
        stream.read_exact(&mut body).unwrap();
        let mut frame = Bytes::from(body);
        let header = decode_request_header_from_buffer(&mut frame).unwrap();
        let key = ApiKey::try_from(header.request_api_key).unwrap();
        let version = header.request_api_version;
        let mut out = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(header.correlation_id)
            .encode(&mut out, key.response_header_version(version))
            .unwrap();
        let request = Request {
            key,
            version,
            body: frame,
        };
        if respond(request, &mut out).is_none() {
            return;
        }
        stream.write_all(&(out.len() as i32).to_be_bytes()).unwrap();
        stream.write_all(&out).unwrap();
    }
}

/// An ApiVersions response offering `(api, min, max)` for each API.
pub fn api_versions(out: &mut BytesMut, version: i16, apis: &[(ApiKey, i16, i16)]) {
    let keys = apis
        .iter()
        .map(|&(k, min, max)| {
            ApiVersion::default()
                .with_api_key(k as i16)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect();
    ApiVersionsResponse::default()
        .with_api_keys(keys)
        .encode(out, version)
        .unwrap();
}
