//! The metadata a mirror syncs beside the data: `klog acl add|remove|list` (a cluster's own ACL bindings,
//! data for the layer above klog: klog has no authorizer), `klog topic config` (local topic configs, on a
//! mirror topic overrides of the source's), `klog mirror create --config` (a mirror's sync filters) and
//! the mirror, config and ACL parts of `klog mirror describe`.
//! Output formats are in `docs/cli.md`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use klog::mirror::acl::AclBinding;
use klog::mirror::config_sync::{AclEntry, TopicConfigs};
use serde_json::json;

use super::cluster_open::{with_cluster, with_reader};

#[derive(Debug, Subcommand)]
pub enum AclCommand {
    /// Add an ACL binding to the cluster's own list (kafka-acls --add).
    Add(AclArgs),
    /// Remove an ACL binding from the cluster's own list.
    Remove(AclArgs),
    /// The cluster's own bindings, then those each mirror synced from its source.
    List {
        root: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct AclArgs {
    root: PathBuf,
    /// TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER (any case).
    #[arg(long)]
    resource_type: String,
    #[arg(long)]
    resource_name: String,
    /// LITERAL or PREFIXED.
    #[arg(long, default_value = "literal")]
    pattern_type: String,
    /// TYPE:NAME, e.g. User:alice.
    #[arg(long)]
    principal: String,
    #[arg(long, default_value = "*")]
    host: String,
    /// READ, WRITE, DESCRIBE, ALL, ... (Kafka's AclOperation names).
    #[arg(long)]
    operation: String,
    /// ALLOW or DENY.
    #[arg(long, default_value = "allow")]
    permission_type: String,
}

impl AclArgs {
    fn binding(&self) -> anyhow::Result<AclBinding> {
        AclBinding::parse(
            &self.resource_type,
            &self.resource_name,
            &self.pattern_type,
            &self.principal,
            &self.host,
            &self.operation,
            &self.permission_type,
        )
        .map_err(|e| anyhow::anyhow!("bad ACL binding: {e}"))
    }
}

pub fn acl(cmd: &AclCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        AclCommand::Add(a) => {
            let binding = a.binding()?;
            let added = with_cluster(&a.root, |c| Ok(c.add_acl(binding.clone())?))?;
            outln!(
                "{} {}",
                if added { "added" } else { "already there:" },
                text(&binding)
            );
        }
        AclCommand::Remove(a) => {
            let binding = a.binding()?;
            let removed = with_cluster(&a.root, |c| Ok(c.remove_acl(&binding)?))?;
            outln!(
                "{} {}",
                if removed { "removed" } else { "not there:" },
                text(&binding)
            );
        }
        AclCommand::List { root, json } => {
            let entries = with_reader(root, |c| Ok(c.describe_acls()))?;
            if *json {
                outln!("{}", json!({ "acls": entries }));
            } else {
                print_acls(&entries);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `klog topic config ROOT TOPIC [--set K=V]... [--delete K]...`: changes local configs, then prints
/// the topic's configs in force.
#[derive(Debug, Args)]
pub struct TopicConfigArgs {
    root: PathBuf,
    topic: String,
    /// Set a local config, `key=value` with Kafka's names (repeatable); on a mirror topic it overrides
    /// the source's value.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Remove a local config (repeatable); on a mirror topic the source's value applies again.
    #[arg(long = "delete", value_name = "KEY")]
    delete: Vec<String>,
    #[arg(long)]
    json: bool,
}

pub fn topic_config(a: &TopicConfigArgs) -> anyhow::Result<ExitCode> {
    let mut changes = Vec::new();
    for kv in &a.set {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--set {kv:?}: expected KEY=VALUE"))?;
        changes.push((k.trim().to_owned(), Some(v.trim().to_owned())));
    }
    changes.extend(a.delete.iter().map(|k| (k.trim().to_owned(), None)));
    let describe = |c: &klog::mirror::Cluster| {
        anyhow::ensure!(c.topic(&a.topic).is_some(), "no topic {}", a.topic);
        Ok(c.describe_configs())
    };
    // Listing is a reader (it answers beside a running writer); a change is a writer's.
    let configs = if changes.is_empty() {
        with_reader(&a.root, describe)?
    } else {
        with_cluster(&a.root, |c| {
            c.alter_topic_configs(&a.topic, &changes)?;
            describe(c)
        })?
    };
    let mine: Vec<TopicConfigs> = configs.into_iter().filter(|t| t.topic == a.topic).collect();
    if a.json {
        let entries = mine.first().map(|t| t.configs.clone()).unwrap_or_default();
        outln!("{}", json!({"topic": a.topic, "configs": entries}));
    } else {
        print_configs(&mine);
    }
    Ok(ExitCode::SUCCESS)
}

fn text(b: &AclBinding) -> String {
    format!(
        "{} {} on {} {} ({}) for {} from host {}",
        b.permission_type,
        b.operation,
        b.resource_type,
        b.resource_name,
        b.pattern_type,
        b.principal,
        b.host
    )
}

/// The configs table of `mirror describe` and `topic config`.
pub fn print_configs(topics: &[TopicConfigs]) {
    outln!("{:<24} {:<34} {:<20} FROM", "TOPIC", "CONFIG", "VALUE");
    for t in topics {
        for c in &t.configs {
            let from = match &c.source_value {
                Some(v) => format!("{} (source: {v})", c.source),
                None => c.source.to_owned(),
            };
            outln!("{:<24} {:<34} {:<20} {from}", t.topic, c.name, c.value);
        }
    }
}

/// The ACL table of `mirror describe --acls` and `acl list`.
pub fn print_acls(entries: &[AclEntry]) {
    outln!(
        "{:<12} {:<16} {:<24} {:<8} {:<20} {:<6} {:<16} PERMISSION",
        "MIRROR",
        "RESOURCE-TYPE",
        "RESOURCE-NAME",
        "PATTERN",
        "PRINCIPAL",
        "HOST",
        "OPERATION"
    );
    for e in entries {
        let b = &e.binding;
        outln!(
            "{:<12} {:<16} {:<24} {:<8} {:<20} {:<6} {:<16} {}",
            e.mirror.as_deref().unwrap_or("-"),
            b.resource_type,
            b.resource_name,
            b.pattern_type,
            b.principal,
            b.host,
            b.operation,
            b.permission_type
        );
    }
}

/// `mirror create --config KEY=VALUE`s: the mirror's sync configs (checked again by the cluster, which
/// names a bad regex or rule).
pub fn mirror_configs(pairs: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for kv in pairs {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--config {kv:?}: expected KEY=VALUE"))?;
        anyhow::ensure!(
            out.insert(k.trim().to_owned(), v.trim().to_owned())
                .is_none(),
            "--config {}: given twice",
            k.trim()
        );
    }
    Ok(out)
}

/// The mirrors table of `mirror describe`: each mirror's source and lag, then its sync configs.
pub fn print_mirrors(mirrors: &[klog::mirror::MirrorDescription]) {
    outln!(
        "{:<12} {:>10} {:>10} {:>6} SOURCE",
        "MIRROR",
        "LAG",
        "MAX-LAG",
        "PARTS"
    );
    let opt = |v: Option<i64>| v.map_or("-".to_owned(), |v| v.to_string());
    for m in mirrors {
        outln!(
            "{:<12} {:>10} {:>10} {:>6} {}",
            m.mirror,
            opt(m.lag),
            opt(m.max_partition_lag),
            m.partitions,
            m.source
        );
    }
    outln!("");
    outln!("{:<12} {:<26} VALUE", "MIRROR", "CONFIG");
    for m in mirrors {
        for c in &m.configs {
            let note = if c.default { "  (default)" } else { "" };
            outln!("{:<12} {:<26} {}{note}", m.mirror, c.name, c.value);
        }
    }
}
