//! A klog cluster mirroring from a real Kafka cluster through `KafkaSource`: the manual clock it runs
//! on and every source it opened, shared by the real-Kafka mirroring tests.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use klog::log::clock::{Clock, ManualClock};
use klog::log::io::StdStorage;
use klog::mirror::metadata::MirrorMeta;
use klog::mirror::{
    Cluster, ClusterOptions, KafkaSource, MirrorSettings, MirrorSource, TickReport,
};

/// A destination cluster whose mirrors connect through recorded [`KafkaSource`]s.
pub struct KafkaMirror {
    pub cluster: Cluster,
    pub clock: Arc<ManualClock>,
    /// Every source the cluster connected, in order.
    pub sources: Arc<Mutex<Vec<Arc<KafkaSource>>>>,
    /// How long real time passes after a tick that changed nothing.
    idle: Duration,
}

impl KafkaMirror {
    /// The cluster at `root` (made there, or opened with `open`) on a manual clock at the wall-clock
    /// now, with `settings`.
    pub fn new(root: &Path, open: bool, settings: MirrorSettings, idle: Duration) -> KafkaMirror {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let clock = Arc::new(ManualClock::new(now));
        let dyn_clock: Arc<dyn Clock> = clock.clone();
        let cluster = if open {
            Cluster::open(Arc::new(StdStorage), dyn_clock, root)
        } else {
            Cluster::init(
                Arc::new(StdStorage),
                dyn_clock,
                root,
                ClusterOptions::default(),
            )
        }
        .unwrap()
        .with_settings(settings);
        let sources: Arc<Mutex<Vec<Arc<KafkaSource>>>> = Arc::default();
        let made = Arc::clone(&sources);
        cluster.set_source_factory(Arc::new(move |_mirror: &str, meta: &MirrorMeta| {
            let source = Arc::new(KafkaSource::new(&meta.source)?);
            made.lock().unwrap().push(Arc::clone(&source));
            Ok(source as Arc<dyn MirrorSource>)
        }));
        KafkaMirror {
            cluster,
            clock,
            sources,
            idle,
        }
    }

    /// The FENCED_LEADER_EPOCH responses that carried CurrentLeader, over every source opened: (epoch
    /// sent, epoch carried).
    pub fn fenced(&self) -> Vec<(i32, i32)> {
        let sources = self.sources.lock().unwrap();
        sources
            .iter()
            .flat_map(|s| s.fenced_leader_epochs())
            .collect()
    }

    /// One tick; when it changed nothing, real time passes (`idle`: a leader move takes a while) and
    /// the manual clock jumps to the next retry, so backoffs never slow the test.
    pub fn tick(&self) -> TickReport {
        let r = self.cluster.tick();
        if !r.progressed() {
            std::thread::sleep(self.idle);
            if let Some(t) = r.next_retry_ms {
                self.clock.set(t.max(self.clock.now_ms()));
            }
        }
        r
    }
}
