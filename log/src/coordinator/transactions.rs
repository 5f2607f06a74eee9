//! `__transaction_state`: the transaction coordinator's one record type, typed. Key: the transactional
//! id; value (`TransactionLogValue` v0, v1 flexible with tagged fields): the producer id and epoch, the
//! transaction's state, timeout and partitions.

pub use super::record::{transaction_state_name, TRANSACTION_STATE_TOPIC};
use super::record::{Coordinator, CoordinatorRecord};
use crate::schema::Value;
use crate::Error;

/// The key: a transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionLogKey {
    /// The producer's `transactional.id`.
    pub transactional_id: String,
}

/// The value: a transactional id's metadata. Tagged fields (v1) absent from the bytes have their defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionLogValue {
    /// The value's version (0 or 1).
    pub version: i16,
    /// The producer id.
    pub producer_id: i64,
    /// The producer id before the last epoch overflow (-1 when none).
    pub previous_producer_id: i64,
    /// The producer id after an epoch overflow in progress (-1 when none).
    pub next_producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// The epoch the producer moves to (-1 when none).
    pub next_producer_epoch: i16,
    /// `transaction.timeout.ms`.
    pub transaction_timeout_ms: i32,
    /// Kafka's `TransactionState` id: 0 Empty, 1 Ongoing, 2 PrepareCommit, 3 PrepareAbort,
    /// 4 CompleteCommit, 5 CompleteAbort, 6 Dead, 7 PrepareEpochFence.
    pub transaction_status: i8,
    /// (topic, partitions); `None` when null.
    pub transaction_partitions: Option<Vec<(String, Vec<i32>)>>,
    /// When the state last changed (ms).
    pub transaction_last_update_timestamp_ms: i64,
    /// When the transaction started (ms; -1 when none is open).
    pub transaction_start_timestamp_ms: i64,
    /// The transaction version the client uses (tagged field, v1).
    pub client_transaction_version: i16,
}

impl TransactionLogKey {
    /// Decodes a `__transaction_state` key and value (`None` for a tombstone).
    pub fn decode(
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(TransactionLogKey, Option<TransactionLogValue>), Error> {
        let r = CoordinatorRecord::decode(Coordinator::Transaction, Some(key), value)?;
        let k = TransactionLogKey {
            transactional_id: r.key.str("transactionalId").unwrap_or_default().to_owned(),
        };
        let v = r.value.map(|(version, _, s)| {
            let int = |name: &str| s.int(name).unwrap_or(-1);
            let partitions = match s.get("transactionPartitions") {
                Some(Value::Array(items)) => {
                    Some(items.iter().filter_map(topic_partitions).collect())
                }
                _ => None,
            };
            TransactionLogValue {
                version,
                producer_id: int("producerId"),
                previous_producer_id: int("previousProducerId"),
                next_producer_id: int("nextProducerId"),
                producer_epoch: int("producerEpoch") as i16,
                next_producer_epoch: int("nextProducerEpoch") as i16,
                transaction_timeout_ms: int("transactionTimeoutMs") as i32,
                transaction_status: int("transactionStatus") as i8,
                transaction_partitions: partitions,
                transaction_last_update_timestamp_ms: int("transactionLastUpdateTimestampMs"),
                transaction_start_timestamp_ms: int("transactionStartTimestampMs"),
                client_transaction_version: s.int("clientTransactionVersion").unwrap_or(0) as i16,
            }
        });
        Ok((k, v))
    }
}

fn topic_partitions(v: &Value<'_>) -> Option<(String, Vec<i32>)> {
    let Value::Struct(s) = v else { return None };
    let partitions = match s.get("partitionIds")? {
        Value::Array(ids) => ids
            .iter()
            .filter_map(|i| match i {
                Value::Int(i) => Some(*i as i32),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Some((s.str("topic")?.to_owned(), partitions))
}

#[cfg(test)]
mod tests {
    use super::super::schemas::{TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE};
    use super::*;
    use crate::schema::{encode, Field, Struct, Type};

    fn value_struct() -> Struct<'static> {
        let f = TRANSACTION_LOG_VALUE.fields;
        let FieldsOf(ps) = FieldsOf::of(&f[7]);
        Struct {
            version: 1,
            fields: vec![
                (&f[0], Value::Int(1000)),
                (&f[1], Value::Int(-1)),
                (&f[2], Value::Int(1001)),
                (&f[3], Value::Int(4)),
                (&f[4], Value::Int(-1)),
                (&f[5], Value::Int(60_000)),
                (&f[6], Value::Int(1)),
                (
                    &f[7],
                    Value::Array(vec![Value::Struct(Struct {
                        version: 1,
                        fields: vec![
                            (&ps[0], Value::Str("orders".into())),
                            (&ps[1], Value::Array(vec![Value::Int(0), Value::Int(3)])),
                        ],
                    })]),
                ),
                (&f[8], Value::Int(1_700_000_000_500)),
                (&f[9], Value::Int(1_700_000_000_000)),
                (&f[10], Value::Int(2)),
            ],
        }
    }

    /// The fields of an array-of-structs field.
    struct FieldsOf(&'static [Field]);

    impl FieldsOf {
        fn of(f: &'static Field) -> FieldsOf {
            match &f.ty {
                Type::Array(Type::Struct(fields)) => FieldsOf(fields),
                _ => panic!("{} is not an array of structs", f.name),
            }
        }
    }

    #[test]
    fn v1_tagged_fields_round_trip_and_defaults_are_left_out() {
        let key = [
            &[0u8, 0][..],
            &encode(
                &TRANSACTION_LOG_KEY,
                0,
                &Struct {
                    version: 0,
                    fields: vec![(&TRANSACTION_LOG_KEY.fields[0], Value::Str("tx".into()))],
                },
            )
            .unwrap(),
        ]
        .concat();
        assert_eq!(key, [0, 0, 0, 2, b't', b'x']);
        let body = encode(&TRANSACTION_LOG_VALUE, 1, &value_struct()).unwrap();
        let value = [&[0u8, 1][..], &body].concat();
        // Tagged, in tag order: nextProducerId (tag 1, 8 bytes) and clientTransactionVersion (tag 2, 2
        // bytes); previousProducerId and nextProducerEpoch have their defaults and are not written.
        assert_eq!(
            &body[body.len() - 15..],
            &[2, 1, 8, 0, 0, 0, 0, 0, 0, 3, 0xe9, 2, 2, 0, 2]
        );
        let (k, v) = TransactionLogKey::decode(&key, Some(&value)).unwrap();
        assert_eq!(k.transactional_id, "tx");
        let v = v.unwrap();
        assert_eq!(
            (v.producer_id, v.previous_producer_id, v.next_producer_id),
            (1000, -1, 1001)
        );
        assert_eq!(v.client_transaction_version, 2);
        assert_eq!(v.next_producer_epoch, -1);
        assert_eq!(
            v.transaction_partitions,
            Some(vec![("orders".to_string(), vec![0, 3])])
        );
        assert_eq!(
            transaction_state_name(v.transaction_status),
            Some("Ongoing")
        );
        assert_eq!(TransactionLogKey::decode(&key, None).unwrap().1, None);
    }
}
