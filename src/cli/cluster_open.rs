//! Opening a local cluster for a command: as its writer (holding the root's `.lock`), or as a reader
//! through a read-only view (no lock, nothing changed on disk); either way closed cleanly whatever the
//! command returned. Shared by `mirror`, `topic`, `acl` and `group` (`mirror.rs`, `mirror_meta.rs`,
//! `group.rs`).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use klog::log::clock::SystemClock;
use klog::log::io::{open_backend, IoBackend, Storage};
use klog::mirror::Cluster;

/// The storage a command's cluster is opened on: the std backend.
pub(super) fn storage() -> anyhow::Result<Arc<dyn Storage>> {
    Ok(open_backend(IoBackend::Std)?)
}

/// Opens the cluster at `root` as its writer.
pub(super) fn open(root: &Path) -> anyhow::Result<Cluster> {
    Cluster::open(storage()?, Arc::new(SystemClock), root)
        .with_context(|| format!("opening cluster {}", root.display()))
}

/// Runs `f` on the open cluster and closes it cleanly whatever `f` returned.
pub(super) fn with_cluster<T>(
    root: &Path,
    f: impl FnOnce(&Cluster) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let cluster = open(root)?;
    let result = f(&cluster);
    let closed = cluster.close();
    let value = result?;
    closed?;
    Ok(value)
}

/// Runs `f` on the cluster opened as a reader: through a read-only view, no lock (it answers beside a
/// running writer such as `mirror run`, and on a read-only copy), nothing changed on disk.
pub(super) fn with_reader<T>(
    root: &Path,
    f: impl FnOnce(&Cluster) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let reader = klog::log::partition_log::read_only_view(storage()?);
    let cluster = Cluster::open(reader, Arc::new(SystemClock), root)
        .with_context(|| format!("opening cluster {}", root.display()))?;
    let result = f(&cluster);
    let closed = cluster.close();
    let value = result?;
    closed?;
    Ok(value)
}
