//! The client's request log, counted: every request a [`KafkaSource`](super::KafkaSource) sends, by
//! API and broker. How a test (or an operator) sees the shape of the traffic: at steady state a mirror
//! round costs one Fetch per source broker, whatever the partition count.

use std::collections::BTreeMap;

use kafka_protocol::messages::ApiKey;

/// Requests sent, per (API name, broker address). API names are Kafka's (`Fetch`, `Metadata`,
/// `ApiVersions`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts {
    sent: BTreeMap<(String, String), u64>,
}

impl RequestCounts {
    /// Counts one request of API `key` sent to `address`.
    pub(crate) fn record(&mut self, key: i16, address: &str) {
        let api =
            ApiKey::try_from(key).map_or_else(|_| format!("ApiKey{key}"), |k| format!("{k:?}"));
        *self.sent.entry((api, address.to_owned())).or_default() += 1;
    }

    /// The `api` requests sent to `address`.
    pub fn get(&self, api: &str, address: &str) -> u64 {
        self.sent
            .get(&(api.to_owned(), address.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// The `api` requests sent to any broker.
    pub fn total(&self, api: &str) -> u64 {
        self.by_broker(api).values().sum()
    }

    /// The `api` requests sent, per broker address (brokers never sent one are absent).
    pub fn by_broker(&self, api: &str) -> BTreeMap<String, u64> {
        self.sent
            .iter()
            .filter(|((a, _), _)| a == api)
            .map(|((_, address), n)| (address.clone(), *n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_kafkas_api_name_and_broker() {
        let mut c = RequestCounts::default();
        c.record(ApiKey::Fetch as i16, "a:1");
        c.record(ApiKey::Fetch as i16, "a:1");
        c.record(ApiKey::Fetch as i16, "b:2");
        c.record(ApiKey::Metadata as i16, "b:2");
        assert_eq!(c.get("Fetch", "a:1"), 2);
        assert_eq!(c.get("Fetch", "c:3"), 0);
        assert_eq!(c.total("Fetch"), 3);
        assert_eq!(c.total("Metadata"), 1);
        assert_eq!(
            c.by_broker("Fetch"),
            BTreeMap::from([("a:1".to_owned(), 2), ("b:2".to_owned(), 1)])
        );
    }
}
