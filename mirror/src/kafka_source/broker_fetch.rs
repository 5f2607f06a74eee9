//! One broker's share of a `fetch_many`: a single Fetch request carrying every partition that broker
//! leads, inside its KIP-227 session. It owns the broker's connection and session while it runs, so
//! the fetches to different brokers run concurrently (tasks on the source's runtime) and nothing is
//! shared between them; the caller takes both back when it ends.

use std::collections::BTreeMap;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{FetchRequest as KafkaFetch, FetchResponse as KafkaFetchResponse};
use uuid::Uuid;

use super::fetch_session::{
    FetchSession, PartitionFetchState, SessionRequest, Wanted, FETCH_SESSION_ID_NOT_FOUND,
    FETCH_SESSION_TOPIC_ID_ERROR, INVALID_FETCH_SESSION_EPOCH,
};
use super::topic_name;
use crate::kafka_wire::Connection;
use crate::source::{FetchRequest, Isolation, SourceError};

/// Fetch v12 added `LastFetchedEpoch` and `DivergingEpoch`; v13 fetches by topic id.
pub(super) const FETCH_MIN_VERSION: i16 = 12;
pub(super) const FETCH_TOPIC_ID_VERSION: i16 = 13;
/// A fetch response may exceed `max_bytes` by one batch (KIP-74: the first batch is always returned
/// whole), up to the source's `max.message.bytes` (1 MiB by default), plus headers.
pub(super) const FETCH_RESPONSE_SLACK: usize = 2 << 20;
/// Room for each partition's header in a response (ids, offsets, aborted transactions).
const PARTITION_RESPONSE_SLACK: usize = 4 << 10;

/// The partitions one broker is asked for, with what it needs to ask.
pub(super) struct BrokerFetch {
    pub(super) address: String,
    /// Its open connection (`None`: open one).
    pub(super) connection: Option<Connection>,
    /// Its fetch session; `None`: a sessionless fetch (a retry at a leader that moved mid-round).
    pub(super) session: Option<FetchSession>,
    /// `(index into the caller's requests, request)`, all at this broker.
    pub(super) partitions: Vec<(usize, FetchRequest)>,
    /// The whole response's `MaxBytes`.
    pub(super) max_bytes: i32,
    pub(super) isolation: Isolation,
}

/// How a [`BrokerFetch`] ended: what the caller takes back, what was sent, and the answer.
pub(super) struct BrokerFetched {
    pub(super) address: String,
    /// The connection, unless it broke (or never opened).
    pub(super) connection: Option<Connection>,
    pub(super) session: Option<FetchSession>,
    pub(super) partitions: Vec<(usize, FetchRequest)>,
    /// `Some`: a connection was opened (Ok) or failed to open (Err) on the way.
    pub(super) opened: Option<Result<(), SourceError>>,
    /// Fetch requests sent (two when the broker had lost the session).
    pub(super) fetches_sent: u32,
    /// The response and the version it was decoded at; a top-level error stays in it.
    pub(super) outcome: Result<(KafkaFetchResponse, i16), SourceError>,
}

impl BrokerFetch {
    /// Connects if needed and sends the fetch; a broker that lost the session or expected another
    /// epoch is asked once more with a full fetch at once (that is not an error for the partitions).
    pub(super) async fn run(mut self) -> BrokerFetched {
        let mut opened = None;
        let mut conn = match self.connection.take() {
            Some(c) => c,
            None => match Connection::open(&self.address).await {
                Ok(c) => {
                    opened = Some(Ok(()));
                    c
                }
                Err(e) => {
                    opened = Some(Err(e.clone()));
                    return self.ended(None, opened, 0, Err(e));
                }
            },
        };
        let version = match conn.version::<KafkaFetch>(FETCH_MIN_VERSION) {
            Ok(v) => v,
            Err(e) => return self.ended(Some(conn), opened, 0, Err(e)),
        };
        let wanted: Vec<Wanted> = self.partitions.iter().map(|(_, r)| wanted(r)).collect();
        let limit = (self.max_bytes as usize)
            .saturating_add(FETCH_RESPONSE_SLACK)
            .saturating_add(PARTITION_RESPONSE_SLACK.saturating_mul(wanted.len()));
        let mut sent = 0;
        loop {
            let plan = match &self.session {
                Some(s) => s.next_request(&wanted, self.isolation),
                None => SessionRequest::sessionless(&wanted),
            };
            let request = self.build(&plan, &wanted, version);
            sent += 1;
            tracing::debug!(
                address = self.address,
                version,
                session_id = plan.session_id,
                session_epoch = plan.session_epoch,
                partitions = plan.send.len(),
                forgotten = plan.forget.len(),
                of = wanted.len(),
                max_bytes = self.max_bytes,
                "Fetch to the source"
            );
            let response = match conn.call(&request, version, limit).await {
                Ok(r) => r,
                Err(e) => {
                    // A broken connection is not given back, and its session goes with it.
                    let kept = (!matches!(e, SourceError::Unavailable(_))).then_some(conn);
                    return self.ended(kept, opened, sent, Err(e));
                }
            };
            let code = response.error_code;
            let Some(session) = self.session.as_mut() else {
                return self.ended(Some(conn), opened, sent, Ok((response, version)));
            };
            if code == 0 {
                session.answered(&plan, &wanted, self.isolation, response.session_id);
                return self.ended(Some(conn), opened, sent, Ok((response, version)));
            }
            session.failed(code);
            let session_lost = matches!(
                code,
                FETCH_SESSION_ID_NOT_FOUND
                    | INVALID_FETCH_SESSION_EPOCH
                    | FETCH_SESSION_TOPIC_ID_ERROR
            );
            if !session_lost || plan.is_full() {
                return self.ended(Some(conn), opened, sent, Ok((response, version)));
            }
            tracing::debug!(
                address = self.address,
                error_code = code,
                "the source broker lost our fetch session: a full fetch again"
            );
        }
    }

    fn ended(
        self,
        connection: Option<Connection>,
        opened: Option<Result<(), SourceError>>,
        fetches_sent: u32,
        outcome: Result<(KafkaFetchResponse, i16), SourceError>,
    ) -> BrokerFetched {
        BrokerFetched {
            address: self.address,
            connection,
            session: self.session,
            partitions: self.partitions,
            opened,
            fetches_sent,
            outcome,
        }
    }

    /// The Fetch request for `plan`: the partitions it sends, grouped by topic, and those it forgets.
    fn build(&self, plan: &SessionRequest, wanted: &[Wanted], version: i16) -> KafkaFetch {
        let by_id = version >= FETCH_TOPIC_ID_VERSION;
        let mut topics: BTreeMap<(&str, [u8; 16]), Vec<FetchPartition>> = BTreeMap::new();
        for &i in &plan.send {
            let req = &self.partitions[i].1;
            let s = &wanted[i].state;
            topics
                .entry((req.topic.as_str(), req.topic_id.0))
                .or_default()
                .push(
                    FetchPartition::default()
                        .with_partition(req.partition)
                        .with_current_leader_epoch(s.current_leader_epoch)
                        .with_fetch_offset(s.fetch_offset)
                        .with_last_fetched_epoch(s.last_fetched_epoch)
                        .with_log_start_offset(-1)
                        .with_partition_max_bytes(s.partition_max_bytes),
                );
        }
        let topics = topics
            .into_iter()
            .map(|((name, id), partitions)| {
                topic_ref(by_id, name, id, FetchTopic::default()).with_partitions(partitions)
            })
            .collect();
        let mut forgotten: BTreeMap<(&str, [u8; 16]), Vec<i32>> = BTreeMap::new();
        for (name, (id, partition)) in &plan.forget {
            forgotten
                .entry((name.as_str(), id.0))
                .or_default()
                .push(*partition);
        }
        let forgotten = forgotten
            .into_iter()
            .map(|((name, id), partitions)| {
                forgotten_ref(by_id, name, id).with_partitions(partitions)
            })
            .collect();
        KafkaFetch::default()
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(self.max_bytes)
            .with_isolation_level(match self.isolation {
                Isolation::ReadUncommitted => 0,
                Isolation::ReadCommitted => 1,
            })
            .with_session_id(plan.session_id)
            .with_session_epoch(plan.session_epoch)
            .with_topics(topics)
            .with_forgotten_topics_data(forgotten)
    }
}

fn wanted(req: &FetchRequest) -> Wanted {
    Wanted {
        key: (req.topic_id, req.partition),
        topic: req.topic.clone(),
        state: PartitionFetchState::of(req),
    }
}

/// A topic by id from Fetch v13, by name before.
fn topic_ref(by_id: bool, name: &str, id: [u8; 16], t: FetchTopic) -> FetchTopic {
    if by_id {
        t.with_topic_id(Uuid::from_bytes(id))
    } else {
        t.with_topic(topic_name(name))
    }
}

fn forgotten_ref(by_id: bool, name: &str, id: [u8; 16]) -> ForgottenTopic {
    if by_id {
        ForgottenTopic::default().with_topic_id(Uuid::from_bytes(id))
    } else {
        ForgottenTopic::default().with_topic(topic_name(name))
    }
}
