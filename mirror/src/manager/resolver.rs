//! How a mirror finds its source: `kafka://` sources as a [`KafkaSource`], anything else as a local
//! cluster root served by a [`LocalSource`], or whatever a registered factory (tests) returns. A source
//! is connected on first use; its cluster id is learned then and checked on every later connect.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::kafka_source::{KafkaSource, KAFKA_SCHEME};
use crate::metadata::MirrorMeta;
use crate::node::{lock, Node};
use crate::serving::LocalSource;
use crate::source::{MirrorSource, SourceError};

/// Opens the source a mirror names. The default opens `kafka://` sources as a [`KafkaSource`] and
/// anything else as a local cluster root; tests register their own.
pub type SourceFactory =
    Arc<dyn Fn(&str, &MirrorMeta) -> Result<Arc<dyn MirrorSource>, SourceError> + Send + Sync>;

#[derive(Default)]
struct Connections {
    connected: BTreeMap<String, Arc<dyn MirrorSource>>,
    factory: Option<SourceFactory>,
    /// Local nodes opened here as sources (closed with the destination).
    owned: Vec<Arc<Node>>,
}

/// The connected sources of one destination's mirrors.
#[derive(Default)]
pub struct Sources {
    inner: Mutex<Connections>,
}

impl Sources {
    /// Registers how mirrors find their sources (replacing the default).
    pub(crate) fn set_factory(&self, factory: SourceFactory) {
        let mut c = lock(&self.inner);
        c.factory = Some(factory);
        c.connected.clear();
    }

    /// Connects `mirror` to an already open source.
    pub(crate) fn connect(&self, mirror: &str, source: Arc<dyn MirrorSource>) {
        lock(&self.inner)
            .connected
            .insert(mirror.to_owned(), source);
    }

    /// Forgets `mirror`'s connection (after a source error, or when the mirror is deleted).
    pub(crate) fn forget(&self, mirror: &str) {
        lock(&self.inner).connected.remove(mirror);
    }

    /// Closes the local sources opened here.
    pub(crate) fn close(&self) -> Result<(), crate::Error> {
        let owned = {
            let mut c = lock(&self.inner);
            c.connected.clear();
            std::mem::take(&mut c.owned)
        };
        for node in owned {
            node.close()?;
        }
        Ok(())
    }

    /// The source of `mirror` on `node`, connected on first use; its cluster id is learned then
    /// (persisted in the mirror's metadata) and checked after.
    pub(crate) fn get(
        &self,
        node: &Node,
        mirror: &str,
    ) -> Result<Arc<dyn MirrorSource>, SourceError> {
        let mirror_meta = lock(&node.meta)
            .mirrors
            .get(mirror)
            .cloned()
            .ok_or_else(|| SourceError::Refused(format!("no mirror named {mirror}")))?;
        let existing = {
            let c = lock(&self.inner);
            c.connected
                .get(mirror)
                .cloned()
                .map(Ok)
                .or_else(|| c.factory.as_ref().map(Arc::clone).map(Err))
        };
        let source = match existing {
            Some(Ok(s)) => s,
            Some(Err(factory)) => factory(mirror, &mirror_meta)?,
            None if mirror_meta.source.starts_with(KAFKA_SCHEME) => {
                Arc::new(KafkaSource::new(&mirror_meta.source)?)
            }
            None => {
                let local = open_local_source(&mirror_meta, node.storage().is_read_only())?;
                lock(&self.inner).owned.push(Arc::clone(&local));
                Arc::new(LocalSource::new(local))
            }
        };
        let id = source.cluster_id()?;
        if id == node.cluster_id() {
            return Err(SourceError::Refused(format!(
                "mirror {mirror}: the source {} is this cluster ({id})",
                source.describe()
            )));
        }
        match &mirror_meta.source_cluster_id {
            Some(known) if *known != id => {
                return Err(SourceError::Refused(format!(
                    "mirror {mirror}: the source cluster id changed from {known} to {id}"
                )));
            }
            Some(_) => {}
            None => {
                let mut guard = lock(&node.meta);
                let mut meta = guard.clone();
                if let Some(m) = meta.mirrors.get_mut(mirror) {
                    m.source_cluster_id = Some(id);
                    node.save_meta(&mut guard, meta)
                        .map_err(|e| SourceError::Unavailable(e.to_string()))?;
                }
            }
        }
        lock(&self.inner)
            .connected
            .insert(mirror.to_owned(), Arc::clone(&source));
        Ok(source)
    }
}

/// A local source cluster, opened as a writer (it serves fetches and LME lookups from its own state), or
/// read-only when the destination itself was opened read-only (`klog mirror describe`).
fn open_local_source(meta: &MirrorMeta, read_only: bool) -> Result<Arc<Node>, SourceError> {
    let root = std::path::Path::new(&meta.source);
    let std: Arc<dyn klog_log::io::Storage> = Arc::new(klog_log::io::StdStorage);
    let storage = if read_only {
        klog_log::partition_log::read_only_view(std)
    } else {
        std
    };
    let node = Node::open(storage, Arc::new(klog_log::clock::SystemClock), root)
        .map_err(|e| SourceError::Unavailable(format!("{}: {e}", meta.source)))?;
    Ok(Arc::new(node))
}
