//! Opening a local cluster for a command: as its writer (holding the root's `.lock`, on the backend
//! `io_backend=auto` measured for the root's durable appends), or as a reader through a read-only view
//! (no lock, nothing changed on disk, nothing probed); either way closed cleanly whatever the command
//! returned. Shared by `mirror`, `topic`, `acl` and `group` (`mirror.rs`, `mirror_meta.rs`, `group.rs`).
//! [`writer_storage`] is the same choice for the other writers (`append`, `recover`, `cluster export`,
//! `cluster import`).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use klog::log::clock::SystemClock;
use klog::log::io::{IoBackend, IoWorkload, StdStorage, Storage};
use klog::log::log_dir::LogDir;
use klog::mirror::Cluster;

/// The storage a reader opens through (in a read-only view): std, no probe, nothing written.
pub(super) fn storage() -> Arc<dyn Storage> {
    Arc::new(StdStorage)
}

/// The storage a writer of the log directory `root` takes for `workload`: a forced `backend` as it is,
/// `Auto` through the directory's measured decision ([`LogDir::backend_for`], named at `-v`).
pub(super) fn writer_storage(
    backend: IoBackend,
    root: &Path,
    workload: IoWorkload,
) -> anyhow::Result<Arc<dyn Storage>> {
    let (storage, _choice) = LogDir::backend_for(backend, root, workload)
        .with_context(|| format!("choosing the I/O backend of {}", root.display()))?;
    Ok(storage)
}

/// Opens the cluster at `root` as its writer, on `io_backend=auto`'s choice for durable appends.
pub(super) fn open(root: &Path) -> anyhow::Result<Cluster> {
    Cluster::open_backend(IoBackend::Auto, Arc::new(SystemClock), root)
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
    let reader = klog::log::partition_log::read_only_view(storage());
    let cluster = Cluster::open(reader, Arc::new(SystemClock), root)
        .with_context(|| format!("opening cluster {}", root.display()))?;
    let result = f(&cluster);
    let closed = cluster.close();
    let value = result?;
    closed?;
    Ok(value)
}
