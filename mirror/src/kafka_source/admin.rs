//! The metadata sync's side of a Kafka source: a topic's configs (DescribeConfigs) and the cluster's
//! ACL bindings (DescribeAcls), asked of any broker that answers, known brokers first (any broker
//! answers both from its metadata image).

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{DescribeAclsRequest, DescribeConfigsRequest};
use kafka_protocol::protocol::{Request, StrBytes};

use super::brokers::Brokers;
use crate::acl::{names_of_codes, AclBinding};
use crate::kafka_wire::{error_name, CONTROL_RESPONSE_LIMIT};
use crate::source::SourceError;

/// `ConfigResource.Type.TOPIC`.
const TOPIC_RESOURCE: i8 = 2;
/// `ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG`: set on the topic, not a default.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
/// DescribeConfigs v1 added each entry's config source.
const DESCRIBE_CONFIGS_MIN_VERSION: i16 = 1;
/// DescribeAcls v1 added pattern types.
const DESCRIBE_ACLS_MIN_VERSION: i16 = 1;
/// Match-anything filter codes: resource type, pattern type, operation and permission ANY.
const ANY: i8 = 1;
const SECURITY_DISABLED: i16 = 54;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

impl Brokers {
    /// Sends `build` to the first broker that answers (known brokers, then the bootstrap addresses).
    async fn call_any<R: Request + Clone>(
        &mut self,
        needed: i16,
        request: R,
    ) -> Result<R::Response, SourceError> {
        let mut addresses: Vec<String> = self.brokers.values().cloned().collect();
        for b in &self.bootstrap {
            if !addresses.contains(b) {
                addresses.push(b.clone());
            }
        }
        let mut last = None;
        for address in addresses {
            let build = |_| request.clone();
            match self
                .call(&address, needed, CONTROL_RESPONSE_LIMIT, build)
                .await
            {
                Ok((response, _)) => return Ok(response),
                Err(e @ SourceError::Unavailable(_)) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            SourceError::Unavailable(format!("{}: no broker to ask", self.source))
        }))
    }

    pub(super) async fn describe_topic_configs(
        &mut self,
        topic: &str,
    ) -> Result<BTreeMap<String, String>, SourceError> {
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(TOPIC_RESOURCE)
                .with_resource_name(StrBytes::from_string(topic.to_owned()))
                .with_configuration_keys(None),
        ]);
        let response = self.call_any(DESCRIBE_CONFIGS_MIN_VERSION, request).await?;
        let what = format!("{}: DescribeConfigs {topic}", self.source);
        let result = response
            .results
            .iter()
            .find(|r| r.resource_name.as_str() == topic)
            .ok_or_else(|| SourceError::Unavailable(format!("{what}: no result for it")))?;
        match result.error_code {
            0 => {}
            UNKNOWN_TOPIC_OR_PARTITION => {
                return Err(SourceError::UnknownTopicOrPartition(topic.to_owned()))
            }
            code => {
                return Err(SourceError::Unavailable(format!(
                    "{what}: {}",
                    error_name(code)
                )))
            }
        }
        Ok(result
            .configs
            .iter()
            .filter(|c| c.config_source == DYNAMIC_TOPIC_CONFIG && !c.is_sensitive)
            .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
            .collect())
    }

    /// Every binding; none when the source runs no authorizer (SECURITY_DISABLED).
    pub(super) async fn describe_acls(&mut self) -> Result<Vec<AclBinding>, SourceError> {
        let request = DescribeAclsRequest::default()
            .with_resource_type_filter(ANY)
            .with_resource_name_filter(None)
            .with_pattern_type_filter(ANY)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_operation(ANY)
            .with_permission_type(ANY);
        let response = self.call_any(DESCRIBE_ACLS_MIN_VERSION, request).await?;
        match response.error_code {
            0 => {}
            SECURITY_DISABLED => return Ok(Vec::new()),
            code => {
                return Err(SourceError::Unavailable(format!(
                    "{}: DescribeAcls: {}",
                    self.source,
                    error_name(code)
                )))
            }
        }
        let mut out = Vec::new();
        for r in &response.resources {
            for a in &r.acls {
                let (resource_type, pattern_type, operation, permission_type) = names_of_codes(
                    r.resource_type,
                    r.pattern_type,
                    a.operation,
                    a.permission_type,
                )
                .map_err(|e| SourceError::Refused(format!("{}: DescribeAcls: {e}", self.source)))?;
                out.push(AclBinding {
                    resource_type: resource_type.to_owned(),
                    resource_name: r.resource_name.to_string(),
                    pattern_type: pattern_type.to_owned(),
                    principal: a.principal.to_string(),
                    host: a.host.to_string(),
                    operation: operation.to_owned(),
                    permission_type: permission_type.to_owned(),
                });
            }
        }
        out.sort();
        Ok(out)
    }
}
