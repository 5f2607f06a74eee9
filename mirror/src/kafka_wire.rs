//! One TCP connection to a Kafka broker: Kafka's size-prefixed frames, request headers and correlation
//! ids, the API versions both sides speak (learned with ApiVersions when the connection opens), and a
//! bound on the size of every response read. Async over tokio; [`KafkaSource`](crate::kafka_source)
//! owns the runtime and blocks on it.
//!
//! Every failure names the broker address and the API: a broken or refused connection is
//! `SourceError::Unavailable` (retried by the manager with backoff), a broker that does not speak a
//! version we can use is `SourceError::Refused`.
//!
//! Responses are decoded by the kafka-protocol crate, whose decoders return errors for short or
//! malformed input, but preallocate arrays by the count the peer sends: a hostile count inside a
//! bounded frame can still ask for a huge allocation. Sources are configured clusters, not arbitrary
//! peers; a fix belongs in the crate (bound a count by the bytes that remain).

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{
    Decodable, Encodable, HeaderVersion, Message, Request, StrBytes, VersionRange,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::source::SourceError;

/// How long a TCP connect may take.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request may wait for its response (fetches use a `max_wait_ms` far below this).
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest response to a request that carries no records (ApiVersions, Metadata, ListOffsets).
pub(crate) const CONTROL_RESPONSE_LIMIT: usize = 8 << 20;
const CLIENT_ID: &str = "klog-mirror";
/// The ApiVersions version we ask with first (v3 is flexible and is what Kafka 2.4+ answers).
const API_VERSIONS_FIRST: i16 = 3;
const UNSUPPORTED_VERSION: i16 = 35;

fn unavailable(address: &str, what: impl std::fmt::Display) -> SourceError {
    SourceError::Unavailable(format!("{address}: {what}"))
}

/// The highest version in both `ours` and the broker's `theirs` that is at least `needed`.
pub(crate) fn pick_version(
    ours: VersionRange,
    theirs: Option<(i16, i16)>,
    needed: i16,
) -> Option<i16> {
    let (min, max) = theirs?;
    let both = ours.intersect(&VersionRange { min, max });
    (!both.is_empty() && both.max >= needed).then_some(both.max)
}

/// Kafka's name for an error code (`FENCED_LEADER_EPOCH`), from the crate's variant name.
pub(crate) fn error_name(code: i16) -> String {
    match kafka_protocol::ResponseError::try_from_code(code) {
        None => "NONE".to_owned(),
        Some(kafka_protocol::ResponseError::Unknown(c)) => format!("UNKNOWN_ERROR_CODE_{c}"),
        Some(e) => {
            let camel = format!("{e:?}");
            let mut out = String::with_capacity(camel.len() + 8);
            for (i, c) in camel.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(c.to_ascii_uppercase());
            }
            out
        }
    }
}

/// The length of a frame as its 4-byte prefix declares it, checked against `limit`.
pub(crate) fn frame_length(prefix: [u8; 4], limit: usize) -> Result<usize, String> {
    let n = i32::from_be_bytes(prefix);
    if n < 4 {
        return Err(format!(
            "response frame length {n} is below 4 (no room for a header)"
        ));
    }
    if n as usize > limit {
        return Err(format!(
            "response frame of {n} bytes is over the {limit}-byte limit for this request"
        ));
    }
    Ok(n as usize)
}

pub(crate) struct Connection {
    address: String,
    stream: TcpStream,
    next_correlation_id: i32,
    /// The broker's `(min, max)` version per API key.
    versions: BTreeMap<i16, (i16, i16)>,
}

impl Connection {
    /// Connects to `address` and learns the broker's API versions.
    pub(crate) async fn open(address: &str) -> Result<Connection, SourceError> {
        let stream = timeout(CONNECT_TIMEOUT, TcpStream::connect(address))
            .await
            .map_err(|_| unavailable(address, "connect timed out"))?
            .map_err(|e| unavailable(address, format!("connect: {e}")))?;
        let _ = stream.set_nodelay(true);
        let mut c = Connection {
            address: address.to_owned(),
            stream,
            next_correlation_id: 0,
            versions: BTreeMap::new(),
        };
        c.api_versions().await?;
        Ok(c)
    }

    /// ApiVersions: asked at v3; a broker that does not know v3 answers UNSUPPORTED_VERSION in v0 with
    /// its own range, and we ask again at its highest.
    async fn api_versions(&mut self) -> Result<(), SourceError> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("klog"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut version = API_VERSIONS_FIRST;
        for _ in 0..2 {
            let body = self
                .round_trip(&request, version, CONTROL_RESPONSE_LIMIT)
                .await?;
            let code = body
                .get(..2)
                .map_or(0, |b| i16::from_be_bytes([b[0], b[1]]));
            let decode_at = if code == UNSUPPORTED_VERSION {
                0
            } else {
                version
            };
            let response: ApiVersionsResponse = self.decode_body(body, decode_at, "ApiVersions")?;
            if response.error_code == UNSUPPORTED_VERSION {
                let theirs = response
                    .api_keys
                    .iter()
                    .find(|k| k.api_key == ApiKey::ApiVersions as i16)
                    .map(|k| (k.min_version, k.max_version));
                match pick_version(ApiVersionsRequest::VERSIONS, theirs, 0) {
                    Some(v) if v < version => {
                        version = v;
                        continue;
                    }
                    _ => break,
                }
            }
            if response.error_code != 0 {
                return Err(SourceError::Refused(format!(
                    "{}: ApiVersions v{version}: {}",
                    self.address,
                    error_name(response.error_code)
                )));
            }
            self.versions = response
                .api_keys
                .iter()
                .map(|k| (k.api_key, (k.min_version, k.max_version)))
                .collect();
            return Ok(());
        }
        Err(SourceError::Refused(format!(
            "{}: the broker speaks no ApiVersions version we know",
            self.address
        )))
    }

    /// The version to send `R` at: the highest both sides speak, at least `needed`.
    pub(crate) fn version<R: Request>(&self, needed: i16) -> Result<i16, SourceError> {
        let theirs = self.versions.get(&R::KEY).copied();
        pick_version(R::VERSIONS, theirs, needed).ok_or_else(|| {
            SourceError::Refused(format!(
                "{}: API key {} needs version {needed} or later (we speak {}, the broker {})",
                self.address,
                R::KEY,
                R::VERSIONS,
                theirs.map_or("none".to_owned(), |(a, b)| format!("{a}..{b}"))
            ))
        })
    }

    /// Sends `request` at `version` and decodes its response, read through a frame of at most `limit`.
    pub(crate) async fn call<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        limit: usize,
    ) -> Result<R::Response, SourceError> {
        let body = self.round_trip(request, version, limit).await?;
        self.decode_body(body, version, api_name(R::KEY))
    }

    fn decode_body<T: Decodable>(
        &self,
        mut body: Bytes,
        version: i16,
        api: &str,
    ) -> Result<T, SourceError> {
        T::decode(&mut body, version).map_err(|e| {
            unavailable(
                &self.address,
                format!("{api} v{version} response does not decode: {e}"),
            )
        })
    }

    /// Writes one request frame and reads its response frame; returns the body after the response
    /// header (whose correlation id must be ours).
    async fn round_trip<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        limit: usize,
    ) -> Result<Bytes, SourceError> {
        let api = api_name(R::KEY);
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
        let mut frame = BytesMut::with_capacity(256);
        frame.extend_from_slice(&[0; 4]);
        header
            .encode(&mut frame, R::header_version(version))
            .and_then(|()| request.encode(&mut frame, version))
            .map_err(|e| {
                SourceError::Refused(format!(
                    "{}: {api} v{version} does not encode: {e}",
                    self.address
                ))
            })?;
        let length = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&length.to_be_bytes());
        let address = self.address.clone();
        let io = async {
            self.stream.write_all(&frame).await?;
            let mut prefix = [0u8; 4];
            self.stream.read_exact(&mut prefix).await?;
            let n = frame_length(prefix, limit)
                .map_err(|m| std::io::Error::new(std::io::ErrorKind::InvalidData, m))?;
            let mut body = vec![0u8; n];
            self.stream.read_exact(&mut body).await?;
            Ok::<_, std::io::Error>(Bytes::from(body))
        };
        let mut body = timeout(REQUEST_TIMEOUT, io)
            .await
            .map_err(|_| {
                unavailable(
                    &address,
                    format!("{api} v{version}: no response in {REQUEST_TIMEOUT:?}"),
                )
            })?
            .map_err(|e| unavailable(&address, format!("{api} v{version}: {e}")))?;
        let header_version = R::Response::header_version(version);
        let header = ResponseHeader::decode(&mut body, header_version).map_err(|e| {
            unavailable(
                &address,
                format!("{api} v{version}: response header does not decode: {e}"),
            )
        })?;
        if header.correlation_id != correlation_id {
            return Err(unavailable(
                &address,
                format!(
                    "{api} v{version}: response correlation id {} where {correlation_id} was sent",
                    header.correlation_id
                ),
            ));
        }
        Ok(body)
    }
}

pub(crate) fn api_name(key: i16) -> &'static str {
    match ApiKey::try_from(key) {
        Ok(ApiKey::ApiVersions) => "ApiVersions",
        Ok(ApiKey::Metadata) => "Metadata",
        Ok(ApiKey::Fetch) => "Fetch",
        Ok(ApiKey::ListOffsets) => "ListOffsets",
        _ => "request",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_the_highest_both_sides_speak_above_the_minimum() {
        let ours = VersionRange { min: 4, max: 18 };
        assert_eq!(pick_version(ours, Some((4, 17)), 12), Some(17));
        assert_eq!(pick_version(ours, Some((0, 30)), 12), Some(18));
        assert_eq!(
            pick_version(ours, Some((0, 11)), 12),
            None,
            "too old for LastFetchedEpoch"
        );
        assert_eq!(pick_version(ours, Some((19, 20)), 0), None, "no overlap");
        assert_eq!(
            pick_version(ours, None, 0),
            None,
            "the broker lacks the API"
        );
    }

    #[test]
    fn error_codes_have_kafkas_names() {
        assert_eq!(error_name(74), "FENCED_LEADER_EPOCH");
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(1), "OFFSET_OUT_OF_RANGE");
        assert_eq!(error_name(100), "UNKNOWN_TOPIC_ID");
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(31000), "UNKNOWN_ERROR_CODE_31000");
    }

    #[test]
    fn frame_lengths_are_bounded() {
        assert_eq!(frame_length(100i32.to_be_bytes(), 100), Ok(100));
        let over = frame_length(101i32.to_be_bytes(), 100).unwrap_err();
        assert!(
            over.contains("101 bytes") && over.contains("100-byte limit"),
            "{over}"
        );
        assert!(frame_length((-7i32).to_be_bytes(), 100).is_err());
        assert!(frame_length(3i32.to_be_bytes(), 100).is_err());
    }
}
