//! ACL bindings as Kafka names them (`AclBinding`: a resource pattern and an access control entry).
//! klog has no authorizer: these are data kept in `cluster.json` for the layer above klog to enforce,
//! either created locally (`klog acl add`) or synced from a mirror's source (KIP-1279 §3.5).
//!
//! The enum values are Kafka's names (`ResourceType`, `PatternType`, `AclOperation`,
//! `AclPermissionType`), upper case as `kafka-acls` prints them; the wire codes are converted here so a
//! Kafka source's DescribeAcls answer and a local binding compare equal.

use serde::{Deserialize, Serialize};

/// One ACL binding: who may do what on which resources.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    /// `TOPIC`, `GROUP`, `CLUSTER`, `TRANSACTIONAL_ID`, `DELEGATION_TOKEN`, `USER`.
    pub resource_type: String,
    /// The resource's name (`*`: every resource of the type, with LITERAL) or name prefix (PREFIXED).
    pub resource_name: String,
    /// `LITERAL` or `PREFIXED`.
    pub pattern_type: String,
    /// `User:alice`.
    pub principal: String,
    /// `*` for any host.
    pub host: String,
    /// `READ`, `WRITE`, `DESCRIBE`, `ALL`, ...
    pub operation: String,
    /// `ALLOW` or `DENY`.
    pub permission_type: String,
}

/// Kafka's `ResourceType` codes, by name.
const RESOURCE_TYPES: [(i8, &str); 7] = [
    (2, "TOPIC"),
    (3, "GROUP"),
    (4, "CLUSTER"),
    (5, "TRANSACTIONAL_ID"),
    (6, "DELEGATION_TOKEN"),
    (7, "USER"),
    (8, "CLUSTER_MIRROR"),
];
/// Kafka's `PatternType` codes (only the concrete ones a binding can have).
const PATTERN_TYPES: [(i8, &str); 2] = [(3, "LITERAL"), (4, "PREFIXED")];
/// Kafka's `AclOperation` codes.
const OPERATIONS: [(i8, &str); 14] = [
    (2, "ALL"),
    (3, "READ"),
    (4, "WRITE"),
    (5, "CREATE"),
    (6, "DELETE"),
    (7, "ALTER"),
    (8, "DESCRIBE"),
    (9, "CLUSTER_ACTION"),
    (10, "DESCRIBE_CONFIGS"),
    (11, "ALTER_CONFIGS"),
    (12, "IDEMPOTENT_WRITE"),
    (13, "CREATE_TOKENS"),
    (14, "DESCRIBE_TOKENS"),
    (15, "TWO_PHASE_COMMIT"),
];
/// Kafka's `AclPermissionType` codes.
const PERMISSION_TYPES: [(i8, &str); 2] = [(2, "DENY"), (3, "ALLOW")];

fn by_code(table: &[(i8, &'static str)], code: i8) -> Option<&'static str> {
    table.iter().find(|(c, _)| *c == code).map(|(_, n)| *n)
}

fn by_name(table: &[(i8, &'static str)], name: &str) -> Option<&'static str> {
    table
        .iter()
        .find(|(_, n)| n.eq_ignore_ascii_case(name))
        .map(|(_, n)| *n)
}

/// The names of a binding's wire codes (a DescribeAcls answer); `None` names the code that is unknown.
pub fn names_of_codes(
    resource_type: i8,
    pattern_type: i8,
    operation: i8,
    permission_type: i8,
) -> Result<(&'static str, &'static str, &'static str, &'static str), String> {
    let unknown = |what: &str, code: i8| format!("unknown {what} code {code}");
    Ok((
        by_code(&RESOURCE_TYPES, resource_type)
            .ok_or_else(|| unknown("resource type", resource_type))?,
        by_code(&PATTERN_TYPES, pattern_type)
            .ok_or_else(|| unknown("pattern type", pattern_type))?,
        by_code(&OPERATIONS, operation).ok_or_else(|| unknown("operation", operation))?,
        by_code(&PERMISSION_TYPES, permission_type)
            .ok_or_else(|| unknown("permission type", permission_type))?,
    ))
}

impl AclBinding {
    /// A binding from names as an operator types them (any case); each is checked against Kafka's
    /// names and stored in Kafka's spelling. A bad one is named.
    pub fn parse(
        resource_type: &str,
        resource_name: &str,
        pattern_type: &str,
        principal: &str,
        host: &str,
        operation: &str,
        permission_type: &str,
    ) -> Result<Self, String> {
        let pick = |table: &[(i8, &'static str)], what: &str, v: &str| {
            by_name(table, v).ok_or_else(|| {
                let names: Vec<&str> = table.iter().map(|(_, n)| *n).collect();
                format!("{what} {v:?} is not one of {}", names.join(", "))
            })
        };
        if resource_name.is_empty() {
            return Err("the resource name is empty".into());
        }
        if !principal.contains(':') {
            return Err(format!(
                "principal {principal:?} is not TYPE:NAME (User:alice)"
            ));
        }
        if host.is_empty() {
            return Err("the host is empty (* for any host)".into());
        }
        Ok(AclBinding {
            resource_type: pick(&RESOURCE_TYPES, "resource type", resource_type)?.to_owned(),
            resource_name: resource_name.to_owned(),
            pattern_type: pick(&PATTERN_TYPES, "pattern type", pattern_type)?.to_owned(),
            principal: principal.to_owned(),
            host: host.to_owned(),
            operation: pick(&OPERATIONS, "operation", operation)?.to_owned(),
            permission_type: pick(&PERMISSION_TYPES, "permission type", permission_type)?
                .to_owned(),
        })
    }

    /// Whether this binding's resource pattern covers the resource `kind`/`name` (Kafka's matching:
    /// a literal name, the wildcard `*`, or a prefix).
    pub fn covers(&self, kind: &str, name: &str) -> bool {
        if self.resource_type != kind {
            return false;
        }
        match self.pattern_type.as_str() {
            "LITERAL" => self.resource_name == name || self.resource_name == "*",
            "PREFIXED" => name.starts_with(&self.resource_name),
            _ => false,
        }
    }
}

/// One rule of a mirror's `acls.include` (the reference's `MirrorUtils.AclRule`):
/// `resourceType;resourceName;operation;permissionType;principal`, each field `*` for any value,
/// trailing fields omitted as `*`. The resource name and the principal are regexes matched against
/// the whole value; the other fields are Kafka's names (any case).
#[derive(Debug, Clone)]
pub struct AclRule {
    resource_type: Option<&'static str>,
    resource_name: Option<regex::Regex>,
    operation: Option<&'static str>,
    permission_type: Option<&'static str>,
    principal: Option<regex::Regex>,
}

impl AclRule {
    /// Parses a rule; a bad field is named.
    pub fn parse(rule: &str) -> Result<Self, String> {
        let parts: Vec<&str> = rule.trim().split(';').map(str::trim).collect();
        if parts.len() > 5 {
            return Err(format!(
                "{} fields (at most 5: resourceType;resourceName;operation;permissionType;principal)",
                parts.len()
            ));
        }
        let field = |i: usize| parts.get(i).copied().filter(|f| *f != "*");
        let name = |table: &[(i8, &'static str)], what: &str, i: usize| {
            field(i)
                .map(|v| {
                    by_name(table, v).ok_or_else(|| format!("{what} {v:?} is not a Kafka {what}"))
                })
                .transpose()
        };
        let regex = |what: &str, i: usize| {
            field(i)
                .map(|v| {
                    regex::Regex::new(&format!("^(?:{v})$"))
                        .map_err(|e| format!("{what} {v:?} is not a regex: {e}"))
                })
                .transpose()
        };
        Ok(AclRule {
            resource_type: name(&RESOURCE_TYPES, "resource type", 0)?,
            resource_name: regex("resource name", 1)?,
            operation: name(&OPERATIONS, "operation", 2)?,
            permission_type: name(&PERMISSION_TYPES, "permission type", 3)?,
            principal: regex("principal", 4)?,
        })
    }

    /// Whether `b` matches every field of the rule that is not a wildcard.
    pub fn matches(&self, b: &AclBinding) -> bool {
        self.resource_type.is_none_or(|t| t == b.resource_type)
            && self
                .resource_name
                .as_ref()
                .is_none_or(|r| r.is_match(&b.resource_name))
            && self.operation.is_none_or(|o| o == b.operation)
            && self.permission_type.is_none_or(|p| p == b.permission_type)
            && self
                .principal
                .as_ref()
                .is_none_or(|r| r.is_match(&b.principal))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kafkas_and_bad_ones_are_named() {
        let b = AclBinding::parse("topic", "t", "literal", "User:a", "*", "read", "allow").unwrap();
        assert_eq!(
            (
                b.resource_type.as_str(),
                b.operation.as_str(),
                b.permission_type.as_str()
            ),
            ("TOPIC", "READ", "ALLOW")
        );
        assert_eq!(
            names_of_codes(2, 3, 3, 3).unwrap(),
            ("TOPIC", "LITERAL", "READ", "ALLOW")
        );
        assert!(names_of_codes(2, 9, 3, 3)
            .unwrap_err()
            .contains("pattern type code 9"));
        let e = AclBinding::parse("topic", "t", "literal", "User:a", "*", "fly", "allow");
        assert!(e.unwrap_err().contains("operation \"fly\""));
        assert!(AclBinding::parse("topic", "t", "literal", "alice", "*", "read", "allow").is_err());
    }

    #[test]
    fn patterns_cover_as_kafka_matches() {
        let lit =
            AclBinding::parse("topic", "t", "literal", "User:a", "*", "read", "allow").unwrap();
        let any = AclBinding {
            resource_name: "*".into(),
            ..lit.clone()
        };
        let pre = AclBinding {
            resource_name: "orders-".into(),
            pattern_type: "PREFIXED".into(),
            ..lit.clone()
        };
        assert!(lit.covers("TOPIC", "t") && !lit.covers("TOPIC", "u") && !lit.covers("GROUP", "t"));
        assert!(any.covers("TOPIC", "u"));
        assert!(pre.covers("TOPIC", "orders-eu") && !pre.covers("TOPIC", "order"));
    }

    #[test]
    fn include_rules_match_as_the_reference_does() {
        let b = |kind: &str, name: &str, op: &str, perm: &str, who: &str| {
            AclBinding::parse(kind, name, "literal", who, "*", op, perm).unwrap()
        };
        let orders = b("topic", "orders-eu", "read", "allow", "User:alice");
        let rule = |r: &str| AclRule::parse(r).unwrap();
        assert!(rule("*").matches(&orders));
        assert!(rule("TOPIC;orders.*").matches(&orders));
        assert!(
            !rule("TOPIC;orders").matches(&orders),
            "the name regex matches whole names"
        );
        assert!(!rule("GROUP;orders.*").matches(&orders));
        assert!(rule("topic;*;READ;allow").matches(&orders));
        assert!(!rule("TOPIC;*;WRITE").matches(&orders));
        assert!(!rule("*;*;*;DENY").matches(&orders));
        assert!(rule("*;*;*;*;User:al.*").matches(&orders));
        assert!(!rule("*;*;*;*;User:bob").matches(&orders));
        for (bad, what) in [
            ("TOPICS", "resource type \"TOPICS\""),
            ("TOPIC;(", "resource name \"(\""),
            ("TOPIC;*;FLY", "operation \"FLY\""),
            ("*;*;*;*;*;x", "6 fields"),
        ] {
            let e = AclRule::parse(bad).unwrap_err();
            assert!(e.contains(what), "{e}");
        }
    }
}
