//! A cluster root served as a mirror source from disk, by a reader: the view behind
//! [`LocalSource::read`](crate::LocalSource::read).
//!
//! A local source is read, never written: the view opens the root through a
//! [`read_only_view`](klog_log::partition_log::read_only_view) (files `O_RDONLY`, no `.lock`, every
//! change an open makes kept in memory), so the source cluster's own writer and a second mirror of it
//! keep working beside it. A read-only open sees each file as long as it was when first opened, so the
//! view is refreshed from the files' stamps (names, and the length, mtime and inode of what an append
//! changes):
//!
//! - `cluster.json` changed (a topic, an election): the whole view is opened again;
//! - a partition's directory changed: that partition alone is opened again (a fresh read-only view of
//!   its files), once the fetcher has read what the current one shows, rescanning only from where the
//!   previous view had validated the log (nothing when the source closed cleanly);
//! - `__mirror_state` changed, when an LME is asked for: the whole view again (PREPARING only);
//! - a `__consumer_offsets` partition appeared, when group offsets are asked for: the whole view again
//!   (the others are refreshed like any partition).
//!
//! A fetch round that finds nothing changed costs one `stat` of `cluster.json`, one directory listing
//! and two `stat`s. A refresh beside a writer that is still open rescans the source's active segment
//! (bounded by its `segment.bytes`); one that took long holds the next refresh of that partition off
//! for four times as long, so refreshing never takes more than a fifth of the fetcher's time. A root that is gone (moved away, unmounted) is reported as an unavailable source
//! and forgotten; when it is back the view is opened again, and a root that now holds another cluster
//! is refused.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use klog_log::checkpoint::{CLEAN_SHUTDOWN_FILE, LEADER_EPOCH_CHECKPOINT};
use klog_log::clock::SystemClock;
use klog_log::coordinator::CONSUMER_OFFSETS_TOPIC;
use klog_log::io::{StdStorage, Storage};
use klog_log::partition_log::{parse_dir_name, read_only_view, OpenOptions, PartitionLog};

use crate::metadata::METADATA_FILE;
use crate::node::{lock, partition_dir_name, topic_config, Node};
use crate::source::SourceError;
use crate::store::MIRROR_STATE_TOPIC;

/// What a call needs fresh.
pub(crate) enum Need<'a> {
    /// The metadata (cluster id, topics, leader epochs).
    Meta,
    /// `__mirror_state` (an LME lookup).
    State,
    /// The `__consumer_offsets` partitions (a group-offset sync): a new one reopens the view, the
    /// others are refreshed if they changed.
    Groups,
    /// One partition's log: refreshed if it changed and `offset` reached the end of the current view
    /// (or always, with `None`).
    Partition {
        topic: &'a str,
        partition: i32,
        offset: Option<i64>,
    },
}

/// A file as far as change detection goes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

/// A partition directory's stamp: its file names, and the stamps of the active segment's `.log` and of
/// the leader-epoch checkpoint (an append, a roll, a truncation or a retention deletion changes one).
#[derive(Debug, Clone, PartialEq, Eq)]
struct DirStamp {
    names: Vec<String>,
    active_log: Option<FileStamp>,
    epochs: Option<FileStamp>,
}

struct View {
    node: Arc<Node>,
    meta: FileStamp,
    state: Vec<DirStamp>,
    /// The `__consumer_offsets-<p>` directories when the view was opened.
    groups: Vec<i32>,
    partitions: BTreeMap<(String, i32), DirStamp>,
    /// A partition whose last refresh was expensive is not refreshed again before this.
    not_before: BTreeMap<(String, i32), Instant>,
}

/// A refresh that took longer than this holds the next one off for [`REFRESH_SPACING`] times as long,
/// so refreshing takes at most a fifth of the fetcher's time beside a writer with a large active
/// segment (cheaper refreshes, the usual case, are never held off).
const EXPENSIVE_REFRESH: Duration = Duration::from_millis(50);
const REFRESH_SPACING: u32 = 4;

/// The refreshed read-only view of one cluster root.
pub(crate) struct DiskView {
    root: PathBuf,
    current: Mutex<Option<View>>,
    /// The cluster id first seen here: a root that later holds another cluster is refused.
    cluster_id: Mutex<Option<String>>,
}

fn stamp(path: &Path) -> io::Result<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok(FileStamp {
        len: m.len(),
        modified: m.modified().ok(),
        inode: m.ino(),
    })
}

fn optional(r: io::Result<FileStamp>) -> io::Result<Option<FileStamp>> {
    match r {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn stamp_dir(dir: &Path) -> io::Result<DirStamp> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort_unstable();
    // Segment names are zero-padded base offsets: the last `.log` in name order is the active one.
    let active = names.iter().rev().find(|n| n.ends_with(".log"));
    let active_log = match active {
        Some(name) => optional(stamp(&dir.join(name)))?,
        None => None,
    };
    let epochs = optional(stamp(&dir.join(LEADER_EPOCH_CHECKPOINT)))?;
    Ok(DirStamp {
        names,
        active_log,
        epochs,
    })
}

fn unavailable(root: &Path, what: &str, e: impl std::fmt::Display) -> SourceError {
    SourceError::Unavailable(format!("{}: {what}: {e}", root.display()))
}

impl DiskView {
    pub(crate) fn new(root: &Path) -> Self {
        DiskView {
            root: root.to_owned(),
            current: Mutex::new(None),
            cluster_id: Mutex::new(None),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The view, refreshed as far as `need` requires.
    pub(crate) fn node(&self, need: Need<'_>) -> Result<Arc<Node>, SourceError> {
        let mut current = lock(&self.current);
        let meta = match stamp(&self.root.join(METADATA_FILE)) {
            Ok(s) => s,
            Err(e) => {
                // Gone (moved away, unmounted): forget the view; it is opened again once it is back.
                *current = None;
                return Err(unavailable(&self.root, "the source cluster is missing", e));
            }
        };
        let stale = match (&*current, &need) {
            (None, _) => true,
            (Some(v), _) if v.meta != meta => true,
            (Some(v), Need::State) => v.state != self.state_stamps()?,
            (Some(v), Need::Groups) => v.groups != self.group_partitions()?,
            _ => false,
        };
        if stale {
            *current = Some(self.open()?);
        }
        let view = current.as_mut().expect("opened above");
        if let Need::Partition {
            topic,
            partition,
            offset,
        } = need
        {
            self.refresh_partition(view, topic, partition, offset)?;
        }
        if let Need::Groups = need {
            for p in view.groups.clone() {
                self.refresh_partition(view, CONSUMER_OFFSETS_TOPIC, p, None)?;
            }
        }
        Ok(Arc::clone(&view.node))
    }

    fn state_stamps(&self) -> Result<Vec<DirStamp>, SourceError> {
        let mut out = Vec::new();
        for p in 0.. {
            let dir = self.root.join(partition_dir_name(MIRROR_STATE_TOPIC, p));
            match stamp_dir(&dir) {
                Ok(s) => out.push(s),
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(e) => return Err(unavailable(&self.root, "listing __mirror_state", e)),
            }
        }
        Ok(out)
    }

    /// The partitions of `__consumer_offsets` in the root, in order.
    fn group_partitions(&self) -> Result<Vec<i32>, SourceError> {
        let prefix = format!("{CONSUMER_OFFSETS_TOPIC}-");
        let entries = std::fs::read_dir(&self.root)
            .map_err(|e| unavailable(&self.root, "the source cluster is missing", e))?;
        let mut out: Vec<i32> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str()?.strip_prefix(&prefix)?.parse().ok())
            .collect();
        out.sort_unstable();
        Ok(out)
    }

    /// Opens the whole root again (read-only, no lock), stamping what it opens first: a change made
    /// while it opens is seen by the next call.
    fn open(&self) -> Result<View, SourceError> {
        let meta = stamp(&self.root.join(METADATA_FILE))
            .map_err(|e| unavailable(&self.root, "the source cluster is missing", e))?;
        let state = self.state_stamps()?;
        let groups = self.group_partitions()?;
        let mut partitions = BTreeMap::new();
        let entries = std::fs::read_dir(&self.root)
            .map_err(|e| unavailable(&self.root, "the source cluster is missing", e))?;
        for entry in entries.filter_map(|e| e.ok()) {
            let Some(key) = parse_dir_name(&entry.path()) else {
                continue;
            };
            if let Ok(s) = stamp_dir(&entry.path()) {
                partitions.insert(key, s);
            }
        }
        let storage = read_only_view(Arc::new(StdStorage));
        let node = Node::open(storage, Arc::new(SystemClock), &self.root)
            .map_err(|e| unavailable(&self.root, "opening the source", e))?;
        let id = node.cluster_id();
        let mut known = lock(&self.cluster_id);
        match &*known {
            Some(k) if *k != id => {
                return Err(SourceError::Refused(format!(
                    "{}: the source cluster id changed from {k} to {id}",
                    self.root.display()
                )))
            }
            Some(_) => {}
            None => *known = Some(id),
        }
        Ok(View {
            node: Arc::new(node),
            meta,
            state,
            groups,
            partitions,
            not_before: BTreeMap::new(),
        })
    }

    /// Opens `topic-partition` again if its files changed and the caller has read what the view shows.
    fn refresh_partition(
        &self,
        view: &mut View,
        topic: &str,
        partition: i32,
        offset: Option<i64>,
    ) -> Result<(), SourceError> {
        let Some(old) = view.node.log(topic, partition) else {
            return Ok(()); // not in the metadata: the caller answers UNKNOWN_TOPIC_OR_PARTITION
        };
        if offset.is_some_and(|o| o < old.log_end_offset()) {
            return Ok(()); // what this view holds is not read yet: no need to look
        }
        let dir = self.root.join(partition_dir_name(topic, partition));
        let now = stamp_dir(&dir).map_err(|e| unavailable(&dir, "the partition is missing", e))?;
        let key = (topic.to_owned(), partition);
        if view.partitions.get(&key) == Some(&now) {
            return Ok(());
        }
        let started = Instant::now();
        if view.not_before.get(&key).is_some_and(|t| started < *t) {
            return Ok(()); // the new data is served by a later fetch
        }
        let config = view
            .node
            .topic(topic)
            .map(|t| topic_config(&t))
            .transpose()
            .map_err(|e| unavailable(&dir, "reading its configuration", e))?
            .unwrap_or_default();
        let options = OpenOptions {
            // The previous view validated everything below its end; a source that closed cleanly
            // needs no rescan at all.
            recovery_point: old.log_end_offset(),
            log_start_offset: old.log_start_offset(),
            clean_shutdown: self.root.join(CLEAN_SHUTDOWN_FILE).exists(),
        };
        let storage: Arc<dyn Storage> = read_only_view(Arc::new(StdStorage));
        let (log, _) =
            PartitionLog::open_with_clock(storage, &dir, config, options, Arc::new(SystemClock))
                .map_err(|e| unavailable(&dir, "reading the partition", e))?;
        log.update_high_watermark(log.log_end_offset());
        lock(&view.node.logs).insert(key.clone(), Arc::new(log));
        view.partitions.insert(key.clone(), now);
        let took = started.elapsed();
        if took > EXPENSIVE_REFRESH {
            view.not_before
                .insert(key, Instant::now() + took * REFRESH_SPACING);
        } else {
            view.not_before.remove(&key);
        }
        Ok(())
    }
}
