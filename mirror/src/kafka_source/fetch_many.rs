//! `fetch_many` over the Kafka protocol, the shape of Kafka's own replica fetcher: the partitions are
//! grouped by their source leader (the Metadata cache, one Metadata request for every topic it does
//! not know), and each leader gets ONE Fetch carrying all of its partitions, in its incremental fetch
//! session ([`BrokerFetch`]); the brokers are fetched concurrently.
//!
//! - The call's `max_bytes` is split evenly between the brokers fetched (each request's `MaxBytes`),
//!   so the whole answer stays within it (plus one batch per broker, KIP-74); each request's own
//!   `max_bytes` is its `PartitionMaxBytes`. The isolation level is the first request's (the fetcher
//!   asks every partition at one level).
//! - Each partition's error is its own (mapped as a single [`fetch`](super::fetch::fetch) maps it):
//!   it never fails the broker's other partitions.
//! - A leader that moved is followed within the call, as a single fetch follows it: the partitions
//!   whose broker answered NOT_LEADER_OR_FOLLOWER or could not be reached are grouped again by where
//!   they are led now and fetched once more there, sessionless (their next round joins that
//!   broker's session). Only a partition whose new leader is still unknown fails (with the first
//!   error, naming the broker).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::{ApiKey, FetchResponse as KafkaFetchResponse};
use tokio::task::JoinSet;

use super::broker_fetch::{BrokerFetch, BrokerFetched, FETCH_TOPIC_ID_VERSION};
use super::brokers::Brokers;
use super::fetch::{fetch_failure, partition_result, PartitionFailure};
use crate::kafka_wire::error_name;
use crate::source::{FetchManyResponse, FetchRequest, FetchResponse, SourceError};

type Answers = BTreeMap<usize, Result<FetchResponse, SourceError>>;
/// Partitions whose leader moved or could not be reached: (broker asked, the error it gave).
type Moved = BTreeMap<usize, (String, SourceError)>;

/// Every partition of `requests`, one Fetch per source leader.
pub(super) async fn fetch_many(
    b: &mut Brokers,
    requests: &[FetchRequest],
    max_bytes: usize,
) -> FetchManyResponse {
    let mut answers = Answers::new();
    let all: Vec<usize> = (0..requests.len()).collect();
    let groups = route(b, requests, &all, &mut answers).await;
    let moved = fetch_groups(b, requests, groups, max_bytes, true, &mut answers).await;
    if !moved.is_empty() {
        follow_moved(b, requests, moved, max_bytes, &mut answers).await;
    }
    answers.into_iter().collect()
}

/// The second try for partitions whose leader moved: to where they are led now, when that is
/// another broker; the rest keep their first error.
async fn follow_moved(
    b: &mut Brokers,
    requests: &[FetchRequest],
    moved: Moved,
    max_bytes: usize,
    answers: &mut Answers,
) {
    let indices: Vec<usize> = moved.keys().copied().collect();
    let mut lookups = Answers::new();
    let mut groups = route(b, requests, &indices, &mut lookups).await;
    for (i, e) in lookups {
        // A leader still unknown or unreachable: the first failure names the broker; a topic that is
        // gone says so.
        let first = Err(moved[&i].1.clone());
        answers.insert(
            i,
            if matches!(e, Err(SourceError::Unavailable(_))) {
                first
            } else {
                e
            },
        );
    }
    for (address, group) in groups.iter_mut() {
        group.retain(|i| {
            let (asked, e) = &moved[i];
            let again = asked != address;
            if !again {
                answers.insert(*i, Err(e.clone()));
            }
            again
        });
    }
    groups.retain(|_, g| !g.is_empty());
    let failed = fetch_groups(b, requests, groups, max_bytes, false, answers).await;
    for (i, (_, e)) in failed {
        answers.insert(i, Err(e));
    }
}

/// Groups `indices` by the address of their partition's leader; a partition that cannot be routed
/// gets its error in `answers`. Topics the cache does not know are asked of Metadata in one request.
async fn route(
    b: &mut Brokers,
    requests: &[FetchRequest],
    indices: &[usize],
    answers: &mut Answers,
) -> BTreeMap<String, Vec<usize>> {
    let unknown: BTreeSet<&str> = indices
        .iter()
        .map(|&i| &requests[i])
        .filter(|r| !b.knows(&r.topic, r.partition))
        .map(|r| r.topic.as_str())
        .collect();
    let mut refused: BTreeMap<String, SourceError> = BTreeMap::new();
    if !unknown.is_empty() {
        let topics: Vec<&str> = unknown.iter().copied().collect();
        match b.refresh(&topics).await {
            Ok(m) => {
                for t in &m.topics {
                    let Some(name) = t.name.as_ref() else {
                        continue;
                    };
                    if t.error_code != 0 && t.error_code != 3 {
                        let e = SourceError::Unavailable(format!(
                            "{}: Metadata for {}: {}",
                            b.source,
                            name.0.as_str(),
                            error_name(t.error_code)
                        ));
                        refused.insert(name.0.as_str().to_owned(), e);
                    }
                }
            }
            Err(e) => {
                for t in topics {
                    refused.insert(t.to_owned(), e.clone());
                }
            }
        }
    }
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for &i in indices {
        let r = &requests[i];
        if let Some(e) = refused.get(&r.topic) {
            answers.insert(i, Err(e.clone()));
            continue;
        }
        match b.cached_leader(&r.topic, r.topic_id, r.partition) {
            Ok((address, _)) => groups.entry(address).or_default().push(i),
            Err(e) => {
                answers.insert(i, Err(e));
            }
        }
    }
    groups
}

/// One Fetch per broker group, concurrently (in the broker's session when `sessions`); the answers
/// go into `answers`, the partitions whose leader moved or could not be reached are returned.
async fn fetch_groups(
    b: &mut Brokers,
    requests: &[FetchRequest],
    groups: BTreeMap<String, Vec<usize>>,
    max_bytes: usize,
    sessions: bool,
    answers: &mut Answers,
) -> Moved {
    let mut moved = Moved::new();
    let Some(first) = groups.values().flatten().next() else {
        return moved;
    };
    let isolation = requests[*first].isolation;
    let share = (max_bytes / groups.len()).clamp(1, i32::MAX as usize) as i32;
    let mut running = JoinSet::new();
    for (address, group) in groups {
        let connection = match b.check_out(&address) {
            Ok(c) => c,
            Err(e) => {
                for i in group {
                    b.forget_leader(&requests[i].topic);
                    moved.insert(i, (address.clone(), e.clone()));
                }
                continue;
            }
        };
        let session = sessions.then(|| b.sessions.remove(&address).unwrap_or_default());
        let fetch = BrokerFetch {
            partitions: group.iter().map(|&i| (i, requests[i].clone())).collect(),
            address,
            connection,
            session,
            max_bytes: share,
            isolation,
        };
        running.spawn(fetch.run());
    }
    while let Some(joined) = running.join_next().await {
        // A task only ends early by panicking, which is a bug of ours: let it propagate.
        let fetched = joined.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        absorb(b, requests, fetched, answers, &mut moved).await;
    }
    moved
}

/// Takes a broker's connection and session back, counts what was sent, and maps its answer.
async fn absorb(
    b: &mut Brokers,
    requests: &[FetchRequest],
    fetched: BrokerFetched,
    answers: &mut Answers,
    moved: &mut Moved,
) {
    let BrokerFetched {
        address,
        connection,
        session,
        partitions,
        opened,
        fetches_sent,
        outcome,
    } = fetched;
    if let Some(opened) = opened {
        b.opened(&address, opened.as_ref().err());
    }
    for _ in 0..fetches_sent {
        b.counts.record(ApiKey::Fetch as i16, &address);
    }
    let broken = connection.is_none();
    b.check_in(&address, connection);
    if let (Some(s), false) = (session, broken) {
        b.sessions.insert(address.clone(), s);
    }
    let (response, version) = match outcome {
        Ok(r) => r,
        Err(e @ SourceError::Unavailable(_)) => {
            for (i, r) in partitions {
                b.forget_leader(&r.topic);
                moved.insert(i, (address.clone(), e.clone()));
            }
            return;
        }
        Err(e) => {
            answers.extend(partitions.into_iter().map(|(i, _)| (i, Err(e.clone()))));
            return;
        }
    };
    if response.error_code != 0 {
        let e = SourceError::Unavailable(format!(
            "{address}: Fetch: {}",
            error_name(response.error_code)
        ));
        for (i, r) in partitions {
            b.forget_leader(&r.topic);
            answers.insert(i, Err(e.clone()));
        }
        return;
    }
    let at = Answered {
        address: &address,
        version,
        partitions: &partitions,
    };
    at.map(b, requests, &response, answers, moved).await;
}

/// A broker's answer without a top-level error, and what it was asked.
struct Answered<'a> {
    address: &'a str,
    version: i16,
    partitions: &'a [(usize, FetchRequest)],
}

impl Answered<'_> {
    /// Each partition's data or error; a partition the broker left out stays absent.
    async fn map(
        &self,
        b: &mut Brokers,
        requests: &[FetchRequest],
        response: &KafkaFetchResponse,
        answers: &mut Answers,
        moved: &mut Moved,
    ) {
        let index: BTreeMap<([u8; 16], i32), usize> = self
            .partitions
            .iter()
            .map(|(i, r)| ((r.topic_id.0, r.partition), *i))
            .collect();
        let by_name: BTreeMap<&str, [u8; 16]> = self
            .partitions
            .iter()
            .map(|(_, r)| (r.topic.as_str(), r.topic_id.0))
            .collect();
        for t in &response.responses {
            let id = if self.version >= FETCH_TOPIC_ID_VERSION {
                Some(*t.topic_id.as_bytes())
            } else {
                by_name.get(t.topic.0.as_str()).copied()
            };
            let Some(id) = id else { continue };
            for p in &t.partitions {
                // A partition we did not ask for is ignored.
                let Some(&i) = index.get(&(id, p.partition_index)) else {
                    continue;
                };
                let req = &requests[i];
                let what = format!("{}-{} at {}", req.topic, req.partition, self.address);
                match partition_result(p) {
                    Ok(r) => {
                        answers.insert(i, Ok(r));
                    }
                    Err(PartitionFailure::NotLeader(named)) => {
                        b.learn_leader(&req.topic, req.partition, named);
                        let e = SourceError::Unavailable(format!("{what}: NOT_LEADER_OR_FOLLOWER"));
                        moved.insert(i, (self.address.to_owned(), e));
                    }
                    Err(failure) => {
                        let result = fetch_failure(b, req, &what, failure).await;
                        answers.insert(i, result);
                    }
                }
            }
        }
    }
}
