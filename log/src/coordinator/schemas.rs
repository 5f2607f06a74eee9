//! Kafka's coordinator record schemas as tables: `__consumer_offsets` (the group coordinator's record
//! types), `__transaction_state` (the transaction coordinator's) and the consumer protocol's
//! subscription and assignment. Transcribed from the pinned Kafka release's `common/message/*.json`
//! by `scripts/gen-coordinator-schemas.py`; regenerate, never edit by hand.

use crate::schema::{Default, Field, MessageSchema, SchemaKind, Type, Versions};

static CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "memberId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ConsumerGroupCurrentMemberAssignmentKey` (coordinator-key, record type 8).
pub static CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY: MessageSchema = MessageSchema { name: "ConsumerGroupCurrentMemberAssignmentKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 8, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_FIELDS };

static CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TOPIC_PARTITIONS: &[Field] = &[
    Field { name: "topicId", ty: Type::Uuid, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "partitions", ty: Type::Array(&Type::Int32), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "assignmentEpochs", ty: Type::Array(&Type::Int32), versions: Versions::from(0), nullable: Versions::from(0), tag: Some(0), tagged: Versions::from(0), default: Default::Zero },
];

static CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_FIELDS: &[Field] = &[
    Field { name: "memberEpoch", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "previousMemberEpoch", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "state", ty: Type::Int8, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "assignedPartitions", ty: Type::Array(&Type::Struct(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TOPIC_PARTITIONS)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "partitionsPendingRevocation", ty: Type::Array(&Type::Struct(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TOPIC_PARTITIONS)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ConsumerGroupCurrentMemberAssignmentValue` (coordinator-value, record type 8).
pub static CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE: MessageSchema = MessageSchema { name: "ConsumerGroupCurrentMemberAssignmentValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 8, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_FIELDS };

static CONSUMER_GROUP_MEMBER_METADATA_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "memberId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ConsumerGroupMemberMetadataKey` (coordinator-key, record type 5).
pub static CONSUMER_GROUP_MEMBER_METADATA_KEY: MessageSchema = MessageSchema { name: "ConsumerGroupMemberMetadataKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 5, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: CONSUMER_GROUP_MEMBER_METADATA_KEY_FIELDS };

static CONSUMER_GROUP_MEMBER_METADATA_VALUE_CLASSIC_PROTOCOL: &[Field] = &[
    Field { name: "name", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "metadata", ty: Type::Bytes, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static CONSUMER_GROUP_MEMBER_METADATA_VALUE_CLASSIC_MEMBER_METADATA: &[Field] = &[
    Field { name: "sessionTimeoutMs", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "supportedProtocols", ty: Type::Array(&Type::Struct(CONSUMER_GROUP_MEMBER_METADATA_VALUE_CLASSIC_PROTOCOL)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static CONSUMER_GROUP_MEMBER_METADATA_VALUE_FIELDS: &[Field] = &[
    Field { name: "instanceId", ty: Type::String, versions: Versions::from(0), nullable: Versions::from(0), tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "rackId", ty: Type::String, versions: Versions::from(0), nullable: Versions::from(0), tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "clientId", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "clientHost", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "subscribedTopicNames", ty: Type::Array(&Type::String), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "subscribedTopicRegex", ty: Type::String, versions: Versions::from(0), nullable: Versions::from(0), tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "rebalanceTimeoutMs", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Int(-1) },
    Field { name: "serverAssignor", ty: Type::String, versions: Versions::from(0), nullable: Versions::from(0), tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "classicMemberMetadata", ty: Type::Struct(CONSUMER_GROUP_MEMBER_METADATA_VALUE_CLASSIC_MEMBER_METADATA), versions: Versions::from(0), nullable: Versions::from(0), tag: Some(0), tagged: Versions::from(0), default: Default::Zero },
];

/// Kafka's `ConsumerGroupMemberMetadataValue` (coordinator-value, record type 5).
pub static CONSUMER_GROUP_MEMBER_METADATA_VALUE: MessageSchema = MessageSchema { name: "ConsumerGroupMemberMetadataValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 5, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: CONSUMER_GROUP_MEMBER_METADATA_VALUE_FIELDS };

static CONSUMER_GROUP_METADATA_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ConsumerGroupMetadataKey` (coordinator-key, record type 3).
pub static CONSUMER_GROUP_METADATA_KEY: MessageSchema = MessageSchema { name: "ConsumerGroupMetadataKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 3, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: CONSUMER_GROUP_METADATA_KEY_FIELDS };

static CONSUMER_GROUP_METADATA_VALUE_FIELDS: &[Field] = &[
    Field { name: "epoch", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "metadataHash", ty: Type::Int64, versions: Versions::from(0), nullable: Versions::NONE, tag: Some(0), tagged: Versions::from(0), default: Default::Int(0) },
];

/// Kafka's `ConsumerGroupMetadataValue` (coordinator-value, record type 3).
pub static CONSUMER_GROUP_METADATA_VALUE: MessageSchema = MessageSchema { name: "ConsumerGroupMetadataValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 3, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: CONSUMER_GROUP_METADATA_VALUE_FIELDS };

static CONSUMER_GROUP_PARTITION_METADATA_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ConsumerGroupPartitionMetadataKey` (coordinator-key, record type 4).
pub static CONSUMER_GROUP_PARTITION_METADATA_KEY: MessageSchema = MessageSchema { name: "ConsumerGroupPartitionMetadataKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 4, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: CONSUMER_GROUP_PARTITION_METADATA_KEY_FIELDS };

static CONSUMER_GROUP_PARTITION_METADATA_VALUE_PARTITION_METADATA: &[Field] = &[
    Field { name: "partition", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "racks", ty: Type::Array(&Type::String), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static CONSUMER_GROUP_PARTITION_METADATA_VALUE_TOPIC_METADATA: &[Field] = &[
    Field { name: "topicId", ty: Type::Uuid, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "topicName", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "numPartitions", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "partitionMetadata", ty: Type::Array(&Type::Struct(CONSUMER_GROUP_PARTITION_METADATA_VALUE_PARTITION_METADATA)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static CONSUMER_GROUP_PARTITION_METADATA_VALUE_FIELDS: &[Field] = &[
    Field { name: "topics", ty: Type::Array(&Type::Struct(CONSUMER_GROUP_PARTITION_METADATA_VALUE_TOPIC_METADATA)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ConsumerGroupPartitionMetadataValue` (coordinator-value, record type 4).
pub static CONSUMER_GROUP_PARTITION_METADATA_VALUE: MessageSchema = MessageSchema { name: "ConsumerGroupPartitionMetadataValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 4, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: CONSUMER_GROUP_PARTITION_METADATA_VALUE_FIELDS };

static CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "regularExpression", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ConsumerGroupRegularExpressionKey` (coordinator-key, record type 16).
pub static CONSUMER_GROUP_REGULAR_EXPRESSION_KEY: MessageSchema = MessageSchema { name: "ConsumerGroupRegularExpressionKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 16, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_FIELDS };

static CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE_FIELDS: &[Field] = &[
    Field { name: "topics", ty: Type::Array(&Type::String), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "version", ty: Type::Int64, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "timestamp", ty: Type::Int64, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ConsumerGroupRegularExpressionValue` (coordinator-value, record type 16).
pub static CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE: MessageSchema = MessageSchema { name: "ConsumerGroupRegularExpressionValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 16, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE_FIELDS };

static CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "memberId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ConsumerGroupTargetAssignmentMemberKey` (coordinator-key, record type 7).
pub static CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY: MessageSchema = MessageSchema { name: "ConsumerGroupTargetAssignmentMemberKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 7, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_FIELDS };

static CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_TOPIC_PARTITION: &[Field] = &[
    Field { name: "topicId", ty: Type::Uuid, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "partitions", ty: Type::Array(&Type::Int32), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_FIELDS: &[Field] = &[
    Field { name: "topicPartitions", ty: Type::Array(&Type::Struct(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_TOPIC_PARTITION)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ConsumerGroupTargetAssignmentMemberValue` (coordinator-value, record type 7).
pub static CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE: MessageSchema = MessageSchema { name: "ConsumerGroupTargetAssignmentMemberValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 7, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_FIELDS };

static CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ConsumerGroupTargetAssignmentMetadataKey` (coordinator-key, record type 6).
pub static CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY: MessageSchema = MessageSchema { name: "ConsumerGroupTargetAssignmentMetadataKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 6, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_FIELDS };

static CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE_FIELDS: &[Field] = &[
    Field { name: "assignmentEpoch", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "assignmentTimestamp", ty: Type::Int64, versions: Versions::from(0), nullable: Versions::NONE, tag: Some(0), tagged: Versions::from(0), default: Default::Int(0) },
];

/// Kafka's `ConsumerGroupTargetAssignmentMetadataValue` (coordinator-value, record type 6).
pub static CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE: MessageSchema = MessageSchema { name: "ConsumerGroupTargetAssignmentMetadataValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 6, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE_FIELDS };

static CONSUMER_PROTOCOL_ASSIGNMENT_TOPIC_PARTITION: &[Field] = &[
    Field { name: "topic", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "partitions", ty: Type::Array(&Type::Int32), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static CONSUMER_PROTOCOL_ASSIGNMENT_FIELDS: &[Field] = &[
    Field { name: "assignedPartitions", ty: Type::Array(&Type::Struct(CONSUMER_PROTOCOL_ASSIGNMENT_TOPIC_PARTITION)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "userData", ty: Type::Bytes, versions: Versions::from(0), nullable: Versions::from(0), tag: None, tagged: Versions::NONE, default: Default::Null },
];

/// Kafka's `ConsumerProtocolAssignment` (data).
pub static CONSUMER_PROTOCOL_ASSIGNMENT: MessageSchema = MessageSchema { name: "ConsumerProtocolAssignment", type_name: "", kind: SchemaKind::Data, api_key: -1, valid: Versions::new(0, 3), flexible: Versions::NONE, fields: CONSUMER_PROTOCOL_ASSIGNMENT_FIELDS };

static CONSUMER_PROTOCOL_SUBSCRIPTION_TOPIC_PARTITION: &[Field] = &[
    Field { name: "topic", ty: Type::String, versions: Versions::from(1), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "partitions", ty: Type::Array(&Type::Int32), versions: Versions::from(1), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static CONSUMER_PROTOCOL_SUBSCRIPTION_FIELDS: &[Field] = &[
    Field { name: "topics", ty: Type::Array(&Type::String), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "userData", ty: Type::Bytes, versions: Versions::from(0), nullable: Versions::from(0), tag: None, tagged: Versions::NONE, default: Default::Null },
    Field { name: "ownedPartitions", ty: Type::Array(&Type::Struct(CONSUMER_PROTOCOL_SUBSCRIPTION_TOPIC_PARTITION)), versions: Versions::from(1), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "generationId", ty: Type::Int32, versions: Versions::from(2), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Int(-1) },
    Field { name: "rackId", ty: Type::String, versions: Versions::from(3), nullable: Versions::from(3), tag: None, tagged: Versions::NONE, default: Default::Null },
];

/// Kafka's `ConsumerProtocolSubscription` (data).
pub static CONSUMER_PROTOCOL_SUBSCRIPTION: MessageSchema = MessageSchema { name: "ConsumerProtocolSubscription", type_name: "", kind: SchemaKind::Data, api_key: -1, valid: Versions::new(0, 3), flexible: Versions::NONE, fields: CONSUMER_PROTOCOL_SUBSCRIPTION_FIELDS };

static GROUP_METADATA_KEY_FIELDS: &[Field] = &[
    Field { name: "group", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `GroupMetadataKey` (coordinator-key, record type 2).
pub static GROUP_METADATA_KEY: MessageSchema = MessageSchema { name: "GroupMetadataKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 2, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: GROUP_METADATA_KEY_FIELDS };

static GROUP_METADATA_VALUE_MEMBER_METADATA: &[Field] = &[
    Field { name: "memberId", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "groupInstanceId", ty: Type::String, versions: Versions::from(3), nullable: Versions::from(3), tag: None, tagged: Versions::NONE, default: Default::Null },
    Field { name: "clientId", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "clientHost", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "rebalanceTimeout", ty: Type::Int32, versions: Versions::from(1), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Int(-1) },
    Field { name: "sessionTimeout", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "subscription", ty: Type::Bytes, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "assignment", ty: Type::Bytes, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static GROUP_METADATA_VALUE_FIELDS: &[Field] = &[
    Field { name: "protocolType", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "generation", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "protocol", ty: Type::String, versions: Versions::from(0), nullable: Versions::from(0), tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "leader", ty: Type::String, versions: Versions::from(0), nullable: Versions::from(0), tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "currentStateTimestamp", ty: Type::Int64, versions: Versions::from(2), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Int(-1) },
    Field { name: "members", ty: Type::Array(&Type::Struct(GROUP_METADATA_VALUE_MEMBER_METADATA)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `GroupMetadataValue` (coordinator-value, record type 2).
pub static GROUP_METADATA_VALUE: MessageSchema = MessageSchema { name: "GroupMetadataValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 2, valid: Versions::new(0, 4), flexible: Versions::from(4), fields: GROUP_METADATA_VALUE_FIELDS };

static LEGACY_OFFSET_COMMIT_KEY_FIELDS: &[Field] = &[
    Field { name: "group", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "topic", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "partition", ty: Type::Int32, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `LegacyOffsetCommitKey` (coordinator-key, record type 0).
pub static LEGACY_OFFSET_COMMIT_KEY: MessageSchema = MessageSchema { name: "LegacyOffsetCommitKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 0, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: LEGACY_OFFSET_COMMIT_KEY_FIELDS };

static LEGACY_OFFSET_COMMIT_VALUE_FIELDS: &[Field] = &[
    Field { name: "offset", ty: Type::Int64, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "metadata", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "commitTimestamp", ty: Type::Int64, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `LegacyOffsetCommitValue` (coordinator-value, record type 0).
pub static LEGACY_OFFSET_COMMIT_VALUE: MessageSchema = MessageSchema { name: "LegacyOffsetCommitValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 0, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: LEGACY_OFFSET_COMMIT_VALUE_FIELDS };

static OFFSET_COMMIT_KEY_FIELDS: &[Field] = &[
    Field { name: "group", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "topic", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "partition", ty: Type::Int32, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `OffsetCommitKey` (coordinator-key, record type 1).
pub static OFFSET_COMMIT_KEY: MessageSchema = MessageSchema { name: "OffsetCommitKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 1, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: OFFSET_COMMIT_KEY_FIELDS };

static OFFSET_COMMIT_VALUE_FIELDS: &[Field] = &[
    Field { name: "offset", ty: Type::Int64, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "leaderEpoch", ty: Type::Int32, versions: Versions::from(3), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Int(-1) },
    Field { name: "metadata", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "commitTimestamp", ty: Type::Int64, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "expireTimestamp", ty: Type::Int64, versions: Versions::new(1, 1), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Int(-1) },
    Field { name: "topicId", ty: Type::Uuid, versions: Versions::from(4), nullable: Versions::NONE, tag: Some(0), tagged: Versions::from(4), default: Default::Zero },
];

/// Kafka's `OffsetCommitValue` (coordinator-value, record type 1).
pub static OFFSET_COMMIT_VALUE: MessageSchema = MessageSchema { name: "OffsetCommitValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 1, valid: Versions::new(0, 4), flexible: Versions::from(4), fields: OFFSET_COMMIT_VALUE_FIELDS };

static SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "memberId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ShareGroupCurrentMemberAssignmentKey` (coordinator-key, record type 14).
pub static SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY: MessageSchema = MessageSchema { name: "ShareGroupCurrentMemberAssignmentKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 14, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_FIELDS };

static SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TOPIC_PARTITIONS: &[Field] = &[
    Field { name: "topicId", ty: Type::Uuid, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "partitions", ty: Type::Array(&Type::Int32), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_FIELDS: &[Field] = &[
    Field { name: "memberEpoch", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "previousMemberEpoch", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "state", ty: Type::Int8, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "assignedPartitions", ty: Type::Array(&Type::Struct(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TOPIC_PARTITIONS)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ShareGroupCurrentMemberAssignmentValue` (coordinator-value, record type 14).
pub static SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE: MessageSchema = MessageSchema { name: "ShareGroupCurrentMemberAssignmentValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 14, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_FIELDS };

static SHARE_GROUP_MEMBER_METADATA_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "memberId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ShareGroupMemberMetadataKey` (coordinator-key, record type 10).
pub static SHARE_GROUP_MEMBER_METADATA_KEY: MessageSchema = MessageSchema { name: "ShareGroupMemberMetadataKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 10, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: SHARE_GROUP_MEMBER_METADATA_KEY_FIELDS };

static SHARE_GROUP_MEMBER_METADATA_VALUE_FIELDS: &[Field] = &[
    Field { name: "rackId", ty: Type::String, versions: Versions::from(0), nullable: Versions::from(0), tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "clientId", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "clientHost", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "subscribedTopicNames", ty: Type::Array(&Type::String), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ShareGroupMemberMetadataValue` (coordinator-value, record type 10).
pub static SHARE_GROUP_MEMBER_METADATA_VALUE: MessageSchema = MessageSchema { name: "ShareGroupMemberMetadataValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 10, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: SHARE_GROUP_MEMBER_METADATA_VALUE_FIELDS };

static SHARE_GROUP_METADATA_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ShareGroupMetadataKey` (coordinator-key, record type 11).
pub static SHARE_GROUP_METADATA_KEY: MessageSchema = MessageSchema { name: "ShareGroupMetadataKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 11, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: SHARE_GROUP_METADATA_KEY_FIELDS };

static SHARE_GROUP_METADATA_VALUE_FIELDS: &[Field] = &[
    Field { name: "epoch", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "metadataHash", ty: Type::Int64, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ShareGroupMetadataValue` (coordinator-value, record type 11).
pub static SHARE_GROUP_METADATA_VALUE: MessageSchema = MessageSchema { name: "ShareGroupMetadataValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 11, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: SHARE_GROUP_METADATA_VALUE_FIELDS };

static SHARE_GROUP_STATE_PARTITION_METADATA_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ShareGroupStatePartitionMetadataKey` (coordinator-key, record type 15).
pub static SHARE_GROUP_STATE_PARTITION_METADATA_KEY: MessageSchema = MessageSchema { name: "ShareGroupStatePartitionMetadataKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 15, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: SHARE_GROUP_STATE_PARTITION_METADATA_KEY_FIELDS };

static SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_TOPIC_PARTITIONS_INFO: &[Field] = &[
    Field { name: "topicId", ty: Type::Uuid, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "topicName", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "partitions", ty: Type::Array(&Type::Int32), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_TOPIC_INFO: &[Field] = &[
    Field { name: "topicId", ty: Type::Uuid, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "topicName", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_FIELDS: &[Field] = &[
    Field { name: "initializingTopics", ty: Type::Array(&Type::Struct(SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_TOPIC_PARTITIONS_INFO)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "initializedTopics", ty: Type::Array(&Type::Struct(SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_TOPIC_PARTITIONS_INFO)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "deletingTopics", ty: Type::Array(&Type::Struct(SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_TOPIC_INFO)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ShareGroupStatePartitionMetadataValue` (coordinator-value, record type 15).
pub static SHARE_GROUP_STATE_PARTITION_METADATA_VALUE: MessageSchema = MessageSchema { name: "ShareGroupStatePartitionMetadataValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 15, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: SHARE_GROUP_STATE_PARTITION_METADATA_VALUE_FIELDS };

static SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "memberId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ShareGroupTargetAssignmentMemberKey` (coordinator-key, record type 13).
pub static SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY: MessageSchema = MessageSchema { name: "ShareGroupTargetAssignmentMemberKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 13, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_FIELDS };

static SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_TOPIC_PARTITION: &[Field] = &[
    Field { name: "topicId", ty: Type::Uuid, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "partitions", ty: Type::Array(&Type::Int32), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_FIELDS: &[Field] = &[
    Field { name: "topicPartitions", ty: Type::Array(&Type::Struct(SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_TOPIC_PARTITION)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ShareGroupTargetAssignmentMemberValue` (coordinator-value, record type 13).
pub static SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE: MessageSchema = MessageSchema { name: "ShareGroupTargetAssignmentMemberValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 13, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_FIELDS };

static SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `ShareGroupTargetAssignmentMetadataKey` (coordinator-key, record type 12).
pub static SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY: MessageSchema = MessageSchema { name: "ShareGroupTargetAssignmentMetadataKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 12, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_FIELDS };

static SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE_FIELDS: &[Field] = &[
    Field { name: "assignmentEpoch", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "assignmentTimestamp", ty: Type::Int64, versions: Versions::from(0), nullable: Versions::NONE, tag: Some(0), tagged: Versions::from(0), default: Default::Int(0) },
];

/// Kafka's `ShareGroupTargetAssignmentMetadataValue` (coordinator-value, record type 12).
pub static SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE: MessageSchema = MessageSchema { name: "ShareGroupTargetAssignmentMetadataValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 12, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE_FIELDS };

static STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "memberId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `StreamsGroupCurrentMemberAssignmentKey` (coordinator-key, record type 22).
pub static STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY: MessageSchema = MessageSchema { name: "StreamsGroupCurrentMemberAssignmentKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 22, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_FIELDS };

static STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TASK_IDS: &[Field] = &[
    Field { name: "subtopologyId", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "partitions", ty: Type::Array(&Type::Int32), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "assignmentEpochs", ty: Type::Array(&Type::Int32), versions: Versions::from(0), nullable: Versions::from(0), tag: Some(0), tagged: Versions::from(0), default: Default::Zero },
];

static STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_FIELDS: &[Field] = &[
    Field { name: "memberEpoch", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "previousMemberEpoch", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "state", ty: Type::Int8, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "activeTasks", ty: Type::Array(&Type::Struct(STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TASK_IDS)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "standbyTasks", ty: Type::Array(&Type::Struct(STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TASK_IDS)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "warmupTasks", ty: Type::Array(&Type::Struct(STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TASK_IDS)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "activeTasksPendingRevocation", ty: Type::Array(&Type::Struct(STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TASK_IDS)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "standbyTasksPendingRevocation", ty: Type::Array(&Type::Struct(STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TASK_IDS)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "warmupTasksPendingRevocation", ty: Type::Array(&Type::Struct(STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_TASK_IDS)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `StreamsGroupCurrentMemberAssignmentValue` (coordinator-value, record type 22).
pub static STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE: MessageSchema = MessageSchema { name: "StreamsGroupCurrentMemberAssignmentValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 22, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE_FIELDS };

static STREAMS_GROUP_MEMBER_METADATA_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "memberId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `StreamsGroupMemberMetadataKey` (coordinator-key, record type 19).
pub static STREAMS_GROUP_MEMBER_METADATA_KEY: MessageSchema = MessageSchema { name: "StreamsGroupMemberMetadataKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 19, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: STREAMS_GROUP_MEMBER_METADATA_KEY_FIELDS };

static STREAMS_GROUP_MEMBER_METADATA_VALUE_ENDPOINT: &[Field] = &[
    Field { name: "host", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "port", ty: Type::Uint16, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static STREAMS_GROUP_MEMBER_METADATA_VALUE_KEY_VALUE: &[Field] = &[
    Field { name: "key", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "value", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static STREAMS_GROUP_MEMBER_METADATA_VALUE_FIELDS: &[Field] = &[
    Field { name: "instanceId", ty: Type::String, versions: Versions::from(0), nullable: Versions::from(0), tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "rackId", ty: Type::String, versions: Versions::from(0), nullable: Versions::from(0), tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "clientId", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "clientHost", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "rebalanceTimeoutMs", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Int(-1) },
    Field { name: "topologyEpoch", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "processId", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "userEndpoint", ty: Type::Struct(STREAMS_GROUP_MEMBER_METADATA_VALUE_ENDPOINT), versions: Versions::from(0), nullable: Versions::from(0), tag: None, tagged: Versions::NONE, default: Default::Null },
    Field { name: "clientTags", ty: Type::Array(&Type::Struct(STREAMS_GROUP_MEMBER_METADATA_VALUE_KEY_VALUE)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `StreamsGroupMemberMetadataValue` (coordinator-value, record type 19).
pub static STREAMS_GROUP_MEMBER_METADATA_VALUE: MessageSchema = MessageSchema { name: "StreamsGroupMemberMetadataValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 19, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: STREAMS_GROUP_MEMBER_METADATA_VALUE_FIELDS };

static STREAMS_GROUP_METADATA_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `StreamsGroupMetadataKey` (coordinator-key, record type 17).
pub static STREAMS_GROUP_METADATA_KEY: MessageSchema = MessageSchema { name: "StreamsGroupMetadataKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 17, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: STREAMS_GROUP_METADATA_KEY_FIELDS };

static STREAMS_GROUP_METADATA_VALUE_LAST_ASSIGNMENT_CONFIG: &[Field] = &[
    Field { name: "key", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "value", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static STREAMS_GROUP_METADATA_VALUE_FIELDS: &[Field] = &[
    Field { name: "epoch", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "metadataHash", ty: Type::Int64, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "validatedTopologyEpoch", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: Some(0), tagged: Versions::from(0), default: Default::Int(-1) },
    Field { name: "lastAssignmentConfigs", ty: Type::Array(&Type::Struct(STREAMS_GROUP_METADATA_VALUE_LAST_ASSIGNMENT_CONFIG)), versions: Versions::from(0), nullable: Versions::from(0), tag: Some(1), tagged: Versions::from(0), default: Default::Zero },
    Field { name: "storedDescriptionTopologyEpoch", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: Some(2), tagged: Versions::from(0), default: Default::Int(-1) },
    Field { name: "failedDescriptionTopologyEpoch", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: Some(3), tagged: Versions::from(0), default: Default::Int(-1) },
];

/// Kafka's `StreamsGroupMetadataValue` (coordinator-value, record type 17).
pub static STREAMS_GROUP_METADATA_VALUE: MessageSchema = MessageSchema { name: "StreamsGroupMetadataValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 17, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: STREAMS_GROUP_METADATA_VALUE_FIELDS };

static STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "memberId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `StreamsGroupTargetAssignmentMemberKey` (coordinator-key, record type 21).
pub static STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY: MessageSchema = MessageSchema { name: "StreamsGroupTargetAssignmentMemberKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 21, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_FIELDS };

static STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_TASK_IDS: &[Field] = &[
    Field { name: "subtopologyId", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "partitions", ty: Type::Array(&Type::Int32), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_FIELDS: &[Field] = &[
    Field { name: "activeTasks", ty: Type::Array(&Type::Struct(STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_TASK_IDS)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "standbyTasks", ty: Type::Array(&Type::Struct(STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_TASK_IDS)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "warmupTasks", ty: Type::Array(&Type::Struct(STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_TASK_IDS)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `StreamsGroupTargetAssignmentMemberValue` (coordinator-value, record type 21).
pub static STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE: MessageSchema = MessageSchema { name: "StreamsGroupTargetAssignmentMemberValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 21, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE_FIELDS };

static STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `StreamsGroupTargetAssignmentMetadataKey` (coordinator-key, record type 20).
pub static STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_KEY: MessageSchema = MessageSchema { name: "StreamsGroupTargetAssignmentMetadataKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 20, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_FIELDS };

static STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE_FIELDS: &[Field] = &[
    Field { name: "assignmentEpoch", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "assignmentTimestamp", ty: Type::Int64, versions: Versions::from(0), nullable: Versions::NONE, tag: Some(0), tagged: Versions::from(0), default: Default::Int(0) },
];

/// Kafka's `StreamsGroupTargetAssignmentMetadataValue` (coordinator-value, record type 20).
pub static STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE: MessageSchema = MessageSchema { name: "StreamsGroupTargetAssignmentMetadataValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 20, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE_FIELDS };

static STREAMS_GROUP_TOPOLOGY_KEY_FIELDS: &[Field] = &[
    Field { name: "groupId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `StreamsGroupTopologyKey` (coordinator-key, record type 23).
pub static STREAMS_GROUP_TOPOLOGY_KEY: MessageSchema = MessageSchema { name: "StreamsGroupTopologyKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 23, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: STREAMS_GROUP_TOPOLOGY_KEY_FIELDS };

static STREAMS_GROUP_TOPOLOGY_VALUE_TOPIC_CONFIG: &[Field] = &[
    Field { name: "key", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "value", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static STREAMS_GROUP_TOPOLOGY_VALUE_TOPIC_INFO: &[Field] = &[
    Field { name: "name", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "partitions", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "replicationFactor", ty: Type::Int16, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "topicConfigs", ty: Type::Array(&Type::Struct(STREAMS_GROUP_TOPOLOGY_VALUE_TOPIC_CONFIG)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static STREAMS_GROUP_TOPOLOGY_VALUE_COPARTITION_GROUP: &[Field] = &[
    Field { name: "sourceTopics", ty: Type::Array(&Type::Int16), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "sourceTopicRegex", ty: Type::Array(&Type::Int16), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "repartitionSourceTopics", ty: Type::Array(&Type::Int16), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static STREAMS_GROUP_TOPOLOGY_VALUE_SUBTOPOLOGY: &[Field] = &[
    Field { name: "subtopologyId", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "sourceTopics", ty: Type::Array(&Type::String), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "sourceTopicRegex", ty: Type::Array(&Type::String), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "stateChangelogTopics", ty: Type::Array(&Type::Struct(STREAMS_GROUP_TOPOLOGY_VALUE_TOPIC_INFO)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "repartitionSinkTopics", ty: Type::Array(&Type::String), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "repartitionSourceTopics", ty: Type::Array(&Type::Struct(STREAMS_GROUP_TOPOLOGY_VALUE_TOPIC_INFO)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "copartitionGroups", ty: Type::Array(&Type::Struct(STREAMS_GROUP_TOPOLOGY_VALUE_COPARTITION_GROUP)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static STREAMS_GROUP_TOPOLOGY_VALUE_FIELDS: &[Field] = &[
    Field { name: "epoch", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "subtopologies", ty: Type::Array(&Type::Struct(STREAMS_GROUP_TOPOLOGY_VALUE_SUBTOPOLOGY)), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `StreamsGroupTopologyValue` (coordinator-value, record type 23).
pub static STREAMS_GROUP_TOPOLOGY_VALUE: MessageSchema = MessageSchema { name: "StreamsGroupTopologyValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 23, valid: Versions::new(0, 0), flexible: Versions::from(0), fields: STREAMS_GROUP_TOPOLOGY_VALUE_FIELDS };

static TRANSACTION_LOG_KEY_FIELDS: &[Field] = &[
    Field { name: "transactionalId", ty: Type::String, versions: Versions::new(0, 0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

/// Kafka's `TransactionLogKey` (coordinator-key, record type 0).
pub static TRANSACTION_LOG_KEY: MessageSchema = MessageSchema { name: "TransactionLogKey", type_name: "", kind: SchemaKind::CoordinatorKey, api_key: 0, valid: Versions::new(0, 0), flexible: Versions::NONE, fields: TRANSACTION_LOG_KEY_FIELDS };

static TRANSACTION_LOG_VALUE_PARTITIONS_SCHEMA: &[Field] = &[
    Field { name: "topic", ty: Type::String, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "partitionIds", ty: Type::Array(&Type::Int32), versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
];

static TRANSACTION_LOG_VALUE_FIELDS: &[Field] = &[
    Field { name: "producerId", ty: Type::Int64, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "previousProducerId", ty: Type::Int64, versions: Versions::from(1), nullable: Versions::NONE, tag: Some(0), tagged: Versions::from(1), default: Default::Int(-1) },
    Field { name: "nextProducerId", ty: Type::Int64, versions: Versions::from(1), nullable: Versions::NONE, tag: Some(1), tagged: Versions::from(1), default: Default::Int(-1) },
    Field { name: "producerEpoch", ty: Type::Int16, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "nextProducerEpoch", ty: Type::Int16, versions: Versions::from(1), nullable: Versions::NONE, tag: Some(3), tagged: Versions::from(1), default: Default::Int(-1) },
    Field { name: "transactionTimeoutMs", ty: Type::Int32, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "transactionStatus", ty: Type::Int8, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "transactionPartitions", ty: Type::Array(&Type::Struct(TRANSACTION_LOG_VALUE_PARTITIONS_SCHEMA)), versions: Versions::from(0), nullable: Versions::from(0), tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "transactionLastUpdateTimestampMs", ty: Type::Int64, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "transactionStartTimestampMs", ty: Type::Int64, versions: Versions::from(0), nullable: Versions::NONE, tag: None, tagged: Versions::NONE, default: Default::Zero },
    Field { name: "clientTransactionVersion", ty: Type::Int16, versions: Versions::from(1), nullable: Versions::NONE, tag: Some(2), tagged: Versions::from(1), default: Default::Int(0) },
];

/// Kafka's `TransactionLogValue` (coordinator-value, record type 0).
pub static TRANSACTION_LOG_VALUE: MessageSchema = MessageSchema { name: "TransactionLogValue", type_name: "", kind: SchemaKind::CoordinatorValue, api_key: 0, valid: Versions::new(0, 1), flexible: Versions::from(1), fields: TRANSACTION_LOG_VALUE_FIELDS };

/// The group coordinator's record types (`__consumer_offsets`): (type, key schema, value schema).
pub static GROUP_RECORD_TYPES: &[(i16, &MessageSchema, &MessageSchema)] = &[
    (0, &LEGACY_OFFSET_COMMIT_KEY, &LEGACY_OFFSET_COMMIT_VALUE),
    (1, &OFFSET_COMMIT_KEY, &OFFSET_COMMIT_VALUE),
    (2, &GROUP_METADATA_KEY, &GROUP_METADATA_VALUE),
    (3, &CONSUMER_GROUP_METADATA_KEY, &CONSUMER_GROUP_METADATA_VALUE),
    (4, &CONSUMER_GROUP_PARTITION_METADATA_KEY, &CONSUMER_GROUP_PARTITION_METADATA_VALUE),
    (5, &CONSUMER_GROUP_MEMBER_METADATA_KEY, &CONSUMER_GROUP_MEMBER_METADATA_VALUE),
    (6, &CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, &CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    (7, &CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, &CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    (8, &CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, &CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    (10, &SHARE_GROUP_MEMBER_METADATA_KEY, &SHARE_GROUP_MEMBER_METADATA_VALUE),
    (11, &SHARE_GROUP_METADATA_KEY, &SHARE_GROUP_METADATA_VALUE),
    (12, &SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, &SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    (13, &SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, &SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    (14, &SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, &SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    (15, &SHARE_GROUP_STATE_PARTITION_METADATA_KEY, &SHARE_GROUP_STATE_PARTITION_METADATA_VALUE),
    (16, &CONSUMER_GROUP_REGULAR_EXPRESSION_KEY, &CONSUMER_GROUP_REGULAR_EXPRESSION_VALUE),
    (17, &STREAMS_GROUP_METADATA_KEY, &STREAMS_GROUP_METADATA_VALUE),
    (19, &STREAMS_GROUP_MEMBER_METADATA_KEY, &STREAMS_GROUP_MEMBER_METADATA_VALUE),
    (20, &STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, &STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_VALUE),
    (21, &STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, &STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_VALUE),
    (22, &STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, &STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_VALUE),
    (23, &STREAMS_GROUP_TOPOLOGY_KEY, &STREAMS_GROUP_TOPOLOGY_VALUE),
];

/// The transaction coordinator's record types (`__transaction_state`): (type, key schema, value schema).
pub static TRANSACTION_RECORD_TYPES: &[(i16, &MessageSchema, &MessageSchema)] = &[
    (0, &TRANSACTION_LOG_KEY, &TRANSACTION_LOG_VALUE),
];
