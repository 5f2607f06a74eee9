//! A Kafka source's consumer-group offsets: ListGroups (v4+, with the group state) to every broker the
//! metadata names, then per classic or consumer group FindCoordinator and OffsetFetch (v8+) at its
//! coordinator, naming every partition of the mirrored topics the metadata resolves. A broker that
//! does not answer ListGroups is passed over (the groups it coordinates wait for it); the call fails
//! only when none answers.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    FindCoordinatorRequest, GroupId, ListGroupsRequest, ListGroupsResponse, OffsetFetchRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::broker_address;
use super::brokers::Brokers;
use crate::kafka_wire::{error_name, CONTROL_RESPONSE_LIMIT};
use crate::source::{CommittedOffset, SourceError, SourceGroup};

/// ListGroups v4 added the group state; FindCoordinator v4 takes a batch of keys; OffsetFetch v8 takes
/// groups (v10 answers by topic id).
const LIST_GROUPS_MIN_VERSION: i16 = 4;
const FIND_COORDINATOR_MIN_VERSION: i16 = 4;
const OFFSET_FETCH_MIN_VERSION: i16 = 8;
/// FindCoordinator's key type of a consumer group.
const GROUP_KEY_TYPE: i8 = 0;

/// The committed offsets on `topics` of every consumer group the source lists (except those it reports
/// Dead).
pub(super) async fn committed_offsets(
    inner: &mut Brokers,
    topics: &BTreeSet<String>,
) -> Result<Vec<SourceGroup>, SourceError> {
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    inner.refresh(&names).await?;
    let listed = list_groups(inner).await?;
    let mut out = Vec::new();
    for (group, state) in listed {
        let answer = group_offsets(inner, &group, topics).await?;
        out.push(SourceGroup { state, ..answer });
    }
    Ok(out)
}

/// Group id -> state, from every broker that answers.
async fn list_groups(inner: &mut Brokers) -> Result<BTreeMap<String, String>, SourceError> {
    let mut listed = BTreeMap::new();
    let brokers: Vec<String> = inner.brokers.values().cloned().collect();
    let mut answered = 0;
    let mut last = None;
    for address in brokers {
        let r: ListGroupsResponse = match inner
            .call(
                &address,
                LIST_GROUPS_MIN_VERSION,
                CONTROL_RESPONSE_LIMIT,
                |_| ListGroupsRequest::default(),
            )
            .await
        {
            Ok((r, _)) if r.error_code == 0 => r,
            Ok((r, _)) => {
                last = Some(SourceError::Unavailable(format!(
                    "{address}: ListGroups: {}",
                    error_name(r.error_code)
                )));
                continue;
            }
            Err(e @ SourceError::Unavailable(_)) => {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        answered += 1;
        for g in r.groups {
            let protocol = g.protocol_type.as_str();
            if g.group_state.as_str() != "Dead" && (protocol.is_empty() || protocol == "consumer") {
                listed.insert(g.group_id.0.to_string(), g.group_state.to_string());
            }
        }
    }
    if answered == 0 {
        return Err(last.unwrap_or_else(|| {
            SourceError::Unavailable(format!("{}: no broker to ask", inner.source))
        }));
    }
    Ok(listed)
}

/// The group's coordinator (FindCoordinator, asked of a broker the metadata named).
async fn coordinator(inner: &mut Brokers, group: &str) -> Result<String, SourceError> {
    let address =
        inner.brokers.values().next().cloned().ok_or_else(|| {
            SourceError::Unavailable(format!("{}: no broker to ask", inner.source))
        })?;
    let build = |_| {
        FindCoordinatorRequest::default()
            .with_key_type(GROUP_KEY_TYPE)
            .with_coordinator_keys(vec![StrBytes::from_string(group.to_owned())])
    };
    let (r, _) = inner
        .call(
            &address,
            FIND_COORDINATOR_MIN_VERSION,
            CONTROL_RESPONSE_LIMIT,
            build,
        )
        .await?;
    let c = r
        .coordinators
        .iter()
        .find(|c| c.key.as_str() == group)
        .ok_or_else(|| {
            SourceError::Unavailable(format!("{address}: FindCoordinator: no answer for {group}"))
        })?;
    if c.error_code != 0 {
        return Err(SourceError::Unavailable(format!(
            "{address}: FindCoordinator for group {group}: {}",
            error_name(c.error_code)
        )));
    }
    Ok(broker_address(c.host.as_str(), c.port))
}

/// The partitions of `topics` the metadata resolves, by name: what OffsetFetch asks about.
fn asked_partitions(inner: &Brokers, topics: &BTreeSet<String>) -> BTreeMap<String, BTreeSet<i32>> {
    topics
        .iter()
        .filter_map(|name| {
            let t = inner.topics.get(name)?;
            Some((name.clone(), t.partitions.keys().copied().collect()))
        })
        .collect()
}

/// OffsetFetch of `group` for every partition of `topics` the metadata resolves, named one by one (not
/// "all topics", where Kafka leaves out a partition with nothing committed and, with an authorizer, a
/// topic the caller may not describe, so that a missing partition would say nothing): each answer is a
/// committed offset, -1 without an error (nothing committed), or an error (not answered).
async fn group_offsets(
    inner: &mut Brokers,
    group: &str,
    topics: &BTreeSet<String>,
) -> Result<SourceGroup, SourceError> {
    let asked = asked_partitions(inner, topics);
    let mut out = SourceGroup {
        group: group.to_owned(),
        state: String::new(),
        offsets: Vec::new(),
        no_committed_offset: BTreeSet::new(),
    };
    if asked.is_empty() {
        return Ok(out);
    }
    let address = coordinator(inner, group).await?;
    let request_topics: Vec<OffsetFetchRequestTopics> = asked
        .iter()
        .map(|(name, partitions)| {
            let id = inner.topics.get(name).map_or([0; 16], |t| t.id.0);
            OffsetFetchRequestTopics::default()
                .with_name(TopicName(StrBytes::from_string(name.clone())))
                .with_topic_id(Uuid::from_bytes(id))
                .with_partition_indexes(partitions.iter().copied().collect())
        })
        .collect();
    let build = |_| {
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
            .with_member_epoch(-1)
            .with_topics(Some(request_topics.clone()))])
    };
    let (r, _) = inner
        .call(
            &address,
            OFFSET_FETCH_MIN_VERSION,
            CONTROL_RESPONSE_LIMIT,
            build,
        )
        .await?;
    let by_id: BTreeMap<[u8; 16], String> = inner
        .topics
        .iter()
        .map(|(name, t)| (t.id.0, name.clone()))
        .collect();
    let what = format!("{address}: OffsetFetch for group {group}");
    let g = r
        .groups
        .iter()
        .find(|g| g.group_id.0.as_str() == group)
        .ok_or_else(|| SourceError::Unavailable(format!("{what}: no answer")))?;
    if g.error_code != 0 {
        return Err(SourceError::Unavailable(format!(
            "{what}: {}",
            error_name(g.error_code)
        )));
    }
    for t in &g.topics {
        // v10 names topics by id only; an id the metadata does not resolve is not an answer.
        let name = if t.name.0.is_empty() {
            by_id.get(t.topic_id.as_bytes()).cloned()
        } else {
            Some(t.name.0.to_string())
        };
        let Some((name, partitions)) = name.and_then(|n| asked.get_key_value(&n)) else {
            continue;
        };
        for p in &t.partitions {
            // An error for a partition (TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, ...),
            // or a partition not asked about, says nothing about its offset.
            if p.error_code != 0 || !partitions.contains(&p.partition_index) {
                continue;
            }
            if p.committed_offset < 0 {
                out.no_committed_offset
                    .insert((name.clone(), p.partition_index));
                continue;
            }
            out.offsets.push(CommittedOffset {
                group: group.to_owned(),
                topic: name.clone(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.metadata.as_ref().map_or(String::new(), |m| m.to_string()),
                // OffsetFetch does not return the commit time: the time it was read stands in.
                commit_timestamp: now_ms(),
            });
        }
    }
    Ok(out)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
