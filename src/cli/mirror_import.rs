//! `klog cluster import`'s text output: what the import took from the broker and how (the JSON form is
//! the report itself; both in `docs/cli.md`).

use klog::mirror::import::files::PlacedFiles;
use klog::mirror::import::ImportReport;

fn files(f: &PlacedFiles) -> String {
    format!(
        "{} file(s) linked ({} bytes), {} copied ({} bytes)",
        f.linked_files, f.linked_bytes, f.copied_files, f.copied_bytes
    )
}

/// Prints `report` as text.
pub fn print_report(r: &ImportReport) {
    let shutdown = if r.clean_shutdown {
        "clean shutdown"
    } else {
        "unclean shutdown: recovered"
    };
    outln!(
        "imported {} into {} (cluster {}, broker {}, {shutdown})",
        r.source.display(),
        r.into.display(),
        r.cluster_id,
        r.node_id
    );
    let m = &r.metadata;
    outln!(
        "metadata: {} ({} records, snapshot {}, end offset {})",
        m.dir.display(),
        m.records,
        m.snapshot.as_deref().unwrap_or("none"),
        m.end_offset
    );
    if let Some(offset) = m.open_transaction {
        outln!("metadata: a transaction open at offset {offset} was not applied");
    }
    for t in &r.topics {
        let configs: Vec<String> = t.configs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        outln!(
            "topic {} ({}): {} partition(s), configs: {}",
            t.topic,
            t.topic_id,
            t.partitions.len(),
            if configs.is_empty() {
                "none".to_owned()
            } else {
                configs.join(", ")
            }
        );
        for c in &t.configs_left_out {
            outln!("  config left out: {c}");
        }
        for p in &t.partitions {
            let made = if p.created_empty {
                "created empty (the broker had no directory)".to_owned()
            } else {
                files(&p.files)
            };
            let cut = if p.bytes_truncated > 0 {
                format!(", recovery cut {} bytes", p.bytes_truncated)
            } else {
                String::new()
            };
            outln!(
                "  {}-{}: offsets {}..{}, leader epoch {}, {made}{cut}",
                t.topic,
                p.partition,
                p.log_start_offset,
                p.log_end_offset,
                p.leader_epoch
            );
        }
    }
    let g = &r.group_offsets;
    match g.placement {
        "as_is" => outln!(
            "group offsets: the broker's {} __consumer_offsets partitions taken as they are, {}",
            g.broker_partitions,
            files(&g.files)
        ),
        "replaced" => outln!(
            "group offsets: {} committed offset(s) from {} __consumer_offsets partition(s) written again in klog's 50",
            g.offsets,
            g.broker_partitions
        ),
        _ => outln!("group offsets: none"),
    }
    for s in &r.skipped {
        outln!("skipped {}: {} ({})", s.dir, s.reason, s.message);
    }
    outln!("files: {}", files(&r.files));
    if let Some(why) = &r.link_failure {
        outln!("copied instead of linked (another file system?): {why}");
    }
}
