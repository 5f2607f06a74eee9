//! How a mirror finds its source: `kafka://` sources as a [`KafkaSource`], anything else as a local
//! cluster root read from disk by a [`LocalSource`] (a reader: no lock, so the source's own writer
//! and other mirrors of it keep working), or whatever a registered factory (tests) returns. A source
//! is connected on first use; its cluster id is learned then and checked on every later connect.

use std::collections::BTreeMap;
use std::path::Path;
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

    /// Drops every connection (a local source is a reader: there is nothing to close).
    pub(crate) fn close(&self) -> Result<(), crate::Error> {
        lock(&self.inner).connected.clear();
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
            None => Arc::new(LocalSource::read(Path::new(&mirror_meta.source))),
        };
        let id = source
            .cluster_id()
            .map_err(|e| relative_source_hint(&mirror_meta, e))?;
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

/// A local source stored as a relative path (by a klog before sources were stored absolute) is resolved
/// from this process's working directory: when it cannot be read, say so and how to fix it.
fn relative_source_hint(meta: &MirrorMeta, e: SourceError) -> SourceError {
    let relative = !meta.source.starts_with(KAFKA_SCHEME) && Path::new(&meta.source).is_relative();
    match e {
        SourceError::Unavailable(m) if relative => SourceError::Unavailable(format!(
            "{m} (the source is stored as the relative path {}, resolved from this process's working \
             directory: create the mirror again with an absolute --source)",
            meta.source
        )),
        other => other,
    }
}
