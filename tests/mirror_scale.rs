//! Mirroring at cluster scale (issue #17): the fetch round asks each source once per round for every
//! partition it serves (`MirrorSource::fetch_many`), keeps the bytes in flight under
//! `fetch_response_max_bytes`, rotates the partitions so a short budget starves none of them, and a
//! whole mirror of 1,000 partitions converges byte-identical and fails over.

#[path = "mirror_support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use klog::log::checkpoint::TopicId;
use klog::log::format::ControlRecordType;
use klog::log::io::{StdStorage, Storage, StorageFile};
use klog::mirror::source::{
    FetchManyResponse, FetchRequest, FetchResponse, SourceError, SourceGroup, SourceTopic,
};
use klog::mirror::{Cluster, MirrorSettings, MirrorSource, MirrorState};
use support::*;

/// A local source that counts what the fetcher asks of it: `fetch` and `fetch_many` calls, and the
/// record bytes returned since the last [`Counted::take_round`].
struct Counted {
    inner: klog::mirror::LocalSource,
    fetches: AtomicU64,
    fetch_manys: AtomicU64,
    /// Partitions asked for in each `fetch_many` since the last `take_round`.
    asked: Mutex<Vec<usize>>,
    round_bytes: AtomicUsize,
    /// The fetching cluster, once known: each answer handed on is then checked to be in its log before
    /// the next one is read (`streamed`), or not (`held`).
    dest: OnceLock<Weak<Cluster>>,
    streamed: AtomicU64,
    held: AtomicU64,
}

/// What one round asked of a [`Counted`] source.
#[derive(Debug, Default)]
struct Round {
    fetches: u64,
    fetch_manys: u64,
    asked: Vec<usize>,
    bytes: usize,
}

impl Counted {
    fn new(source: &Cluster) -> Arc<Self> {
        Arc::new(Counted {
            inner: source.as_source(),
            fetches: AtomicU64::new(0),
            fetch_manys: AtomicU64::new(0),
            asked: Mutex::new(Vec::new()),
            round_bytes: AtomicUsize::new(0),
            dest: OnceLock::new(),
            streamed: AtomicU64::new(0),
            held: AtomicU64::new(0),
        })
    }

    /// What was asked since the last call.
    fn take_round(&self) -> Round {
        Round {
            fetches: self.fetches.swap(0, Ordering::SeqCst),
            fetch_manys: self.fetch_manys.swap(0, Ordering::SeqCst),
            asked: std::mem::take(&mut *self.asked.lock().unwrap()),
            bytes: self.round_bytes.swap(0, Ordering::SeqCst),
        }
    }
}

impl MirrorSource for Counted {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn cluster_id(&self) -> Result<String, SourceError> {
        self.inner.cluster_id()
    }
    fn topic(&self, name: &str) -> Result<Option<SourceTopic>, SourceError> {
        self.inner.topic(name)
    }
    fn fetch(&self, request: &FetchRequest) -> Result<FetchResponse, SourceError> {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        let r = self.inner.fetch(request);
        if let Ok(r) = &r {
            self.round_bytes
                .fetch_add(r.records.len(), Ordering::SeqCst);
        }
        r
    }
    fn fetch_many(&self, requests: &[FetchRequest], max_bytes: usize) -> FetchManyResponse {
        self.fetch_manys.fetch_add(1, Ordering::SeqCst);
        self.asked.lock().unwrap().push(requests.len());
        let answer = self.inner.fetch_many(requests, max_bytes);
        let bytes: usize = answer
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .map(|r| r.records.len())
            .sum();
        self.round_bytes.fetch_add(bytes, Ordering::SeqCst);
        answer
    }
    /// Counted as one `fetch_many` (one request); the answers are passed on as the inner source hands
    /// them over.
    fn fetch_each(
        &self,
        requests: &[FetchRequest],
        max_bytes: usize,
        on_answer: &mut dyn FnMut(usize, Result<FetchResponse, SourceError>),
    ) {
        self.fetch_manys.fetch_add(1, Ordering::SeqCst);
        self.asked.lock().unwrap().push(requests.len());
        let dest = self.dest.get().and_then(Weak::upgrade);
        let mut previous: Option<(usize, i64)> = None;
        self.inner
            .fetch_each(requests, max_bytes, &mut |i, answer| {
                if let (Some(dest), Some((j, end))) = (&dest, previous.take()) {
                    let r = &requests[j];
                    let counter = match dest.log(&r.topic, r.partition) {
                        Some(log) if log.log_end_offset() >= end => &self.streamed,
                        _ => &self.held,
                    };
                    counter.fetch_add(1, Ordering::SeqCst);
                }
                if let Ok(a) = &answer {
                    self.round_bytes
                        .fetch_add(a.records.len(), Ordering::SeqCst);
                    let last = klog::log::format::Batches::new(&a.records)
                        .without_crc()
                        .filter_map(Result::ok)
                        .map(|b| b.last_offset())
                        .last();
                    previous = last.map(|l| (i, l + 1));
                }
                on_answer(i, answer);
            });
    }
    fn list_offsets(
        &self,
        topic: &str,
        topic_id: TopicId,
        partition: i32,
    ) -> Result<(i64, i64), SourceError> {
        self.inner.list_offsets(topic, topic_id, partition)
    }
    fn last_mirrored_epoch(
        &self,
        requester_cluster_id: &str,
        topic_id: TopicId,
        partition: i32,
    ) -> Result<i32, SourceError> {
        self.inner
            .last_mirrored_epoch(requester_cluster_id, topic_id, partition)
    }
    fn committed_offsets(
        &self,
        topics: &BTreeSet<String>,
    ) -> Result<Vec<SourceGroup>, SourceError> {
        self.inner.committed_offsets(topics)
    }
}

/// `dest` gets mirror `name` from `source` through a counting wrapper.
fn link_counted(dest: &Cluster, name: &str, source: &Arc<Cluster>) -> Arc<Counted> {
    dest.create_mirror(name, source.root().to_str().unwrap())
        .unwrap();
    let counted = Counted::new(source);
    dest.connect_source(name, counted.clone());
    counted
}

/// A cluster with `topics` topics named `{prefix}{i}` of `partitions` partitions, each holding
/// `batches` plain batches of `records` records.
fn source_with(
    env: &Env,
    name: &str,
    prefix: &str,
    (topics, partitions): (usize, i32),
    (batches, records): (usize, usize),
) -> (Arc<Cluster>, Vec<String>) {
    let c = env.cluster(name);
    let names: Vec<String> = (0..topics).map(|i| format!("{prefix}{i}")).collect();
    for t in &names {
        c.create_topic(t, partitions, None, &[]).unwrap();
        for p in 0..partitions {
            for b in 0..batches {
                c.produce(t, p, &mut plain(records, &format!("{t}-{p}-{b}")))
                    .unwrap();
            }
        }
    }
    (c, names)
}

fn with_settings(c: Arc<Cluster>, settings: MirrorSettings) -> Arc<Cluster> {
    Arc::new(Arc::try_unwrap(c).ok().unwrap().with_settings(settings))
}

/// Every partition of `topics` holds the same batches in `dest` as in `source`.
fn assert_converged(dest: &Cluster, source: &Cluster, topics: &[String]) {
    for t in topics {
        let partitions = source.topic(t).unwrap().partitions;
        for p in 0..partitions {
            let (d, s) = (dest.log(t, p).unwrap(), source.log(t, p).unwrap());
            assert_eq!(batches(&d), batches(&s), "{t}-{p}");
            assert_eq!(d.leader_epochs(), s.leader_epochs(), "{t}-{p}");
        }
    }
}

/// 1,000 partitions from two sources (10 topics x 50 each) mirror with one `fetch_many` per source per
/// round and no per-partition `fetch`, converge byte-identical, and then the whole mirror fails over:
/// every partition STOPPED with its barrier.
#[test]
fn a_thousand_partitions_converge_with_one_fetch_per_source_per_round_and_fail_over() {
    let env = Env::new();
    let (a, a_topics) = source_with(&env, "a", "a", (10, 50), (2, 2));
    let (c, c_topics) = source_with(&env, "c", "c", (10, 50), (2, 2));
    // With every sync on, as a mirror runs: the states of a pass are written together and the failover
    // syncs all partitions at once, so 1,000 partitions cost seconds, not a sync each.
    let b = env.cluster("b");
    let from_a = link_counted(&b, "ma", &a);
    let from_c = link_counted(&b, "mc", &c);
    all_ok(b.add_topics("ma", &a_topics).unwrap());
    all_ok(b.add_topics("mc", &c_topics).unwrap());
    let mut rounds_with_fetches = 0;
    for tick in 0.. {
        assert!(tick < 50, "not idle after 50 ticks");
        let report = b.tick();
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        for (what, source) in [("a", &from_a), ("c", &from_c)] {
            let round = source.take_round();
            assert_eq!(
                round.fetches, 0,
                "tick {tick}, source {what}: per-partition fetches"
            );
            assert!(
                round.fetch_manys <= 1,
                "tick {tick}, source {what}: {} fetch_many calls",
                round.fetch_manys
            );
            if round.fetch_manys == 1 {
                rounds_with_fetches += 1;
                assert_eq!(
                    round.asked,
                    [500],
                    "tick {tick}, source {what}: every partition asked"
                );
            }
        }
        if !report.progressed() {
            break;
        }
    }
    assert!(rounds_with_fetches >= 4, "{rounds_with_fetches}");
    assert_converged(&b, &a, &a_topics);
    assert_converged(&b, &c, &c_topics);

    // The failover of the whole mirror: every partition of both mirrors stopped, each log ending in
    // exactly one barrier after the mirrored batches.
    all_ok(b.remove_topics("ma", &a_topics).unwrap());
    all_ok(b.remove_topics("mc", &c_topics).unwrap());
    let report = b.run_until_idle(20);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    // One describe for all (`state_of` describes every partition each time).
    let states: BTreeMap<(String, i32), Option<MirrorState>> = b
        .describe()
        .into_iter()
        .map(|d| ((d.topic, d.partition), d.state))
        .collect();
    for (source, topics) in [(&a, &a_topics), (&c, &c_topics)] {
        for t in topics {
            for p in 0..50 {
                let state = states.get(&(t.clone(), p)).copied().flatten();
                assert_eq!(state, Some(MirrorState::Stopped), "{t}-{p}");
                let mirrored = batches(&source.log(t, p).unwrap());
                let all = batches(&b.log(t, p).unwrap());
                assert_eq!(all[..mirrored.len()], mirrored[..], "{t}-{p}");
                let own = &all[mirrored.len()..];
                assert_eq!(own.len(), 1, "{t}-{p}: {own:?}");
                assert_eq!(
                    control_type(&own[0]),
                    Some(ControlRecordType::MirrorPidReset),
                    "{t}-{p}"
                );
            }
        }
    }
}

/// A round never holds more fetched bytes than `fetch_response_max_bytes`, though every partition holds
/// more than that, and the mirror still converges.
#[test]
fn fetched_bytes_in_flight_stay_under_the_cap() {
    let env = Env::new();
    // 40 partitions of 6 batches of ~1.3 KiB (20 records of ~65 bytes): ~8 KiB each.
    let (a, names) = source_with(&env, "a", "t", (4, 10), (6, 20));
    let one_partition: usize = batches(&a.log("t0", 0).unwrap())
        .iter()
        .map(|b| b.bytes.len())
        .sum();
    let cap = 4096;
    assert!(one_partition > 2 * cap, "{one_partition}");
    let b = with_settings(
        env.cluster("b"),
        MirrorSettings {
            fetch_response_max_bytes: cap,
            ..MirrorSettings::default()
        },
    );
    let source = link_counted(&b, "m", &a);
    all_ok(b.add_topics("m", &names).unwrap());
    let mut max_round = 0;
    let mut total = 0;
    for tick in 0.. {
        assert!(tick < 1000, "not idle after 1000 ticks");
        let report = b.tick();
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        let round = source.take_round();
        max_round = max_round.max(round.bytes);
        total += round.bytes;
        if !report.progressed() {
            break;
        }
    }
    assert!(
        max_round <= cap,
        "a round held {max_round} fetched bytes, over the cap of {cap}"
    );
    assert_eq!(total, 40 * one_partition, "every byte fetched once");
    assert_converged(&b, &a, &names);
}

/// With a cap that lets a round serve about one partition, and every partition of the source growing
/// each round, the rotation still reaches every partition (without it the first would take every round).
#[test]
fn rotation_reaches_every_partition_when_the_cap_runs_out() {
    let env = Env::new();
    let (a, names) = source_with(&env, "a", "t", (1, 10), (1, 20));
    let batch_bytes = batches(&a.log("t0", 0).unwrap())[0].bytes.len();
    let b = with_settings(
        env.cluster("b"),
        MirrorSettings {
            fetch_response_max_bytes: batch_bytes + batch_bytes / 2,
            ..MirrorSettings::default()
        },
    );
    let _source = link_counted(&b, "m", &a);
    all_ok(b.add_topics("m", &names).unwrap());
    for round in 0..40 {
        for p in 0..10 {
            a.produce("t0", p, &mut plain(20, &format!("r{round}-{p}")))
                .unwrap();
        }
        let report = b.tick();
        assert!(report.errors.is_empty(), "{:?}", report.errors);
    }
    let reached: Vec<i32> = (0..10)
        .filter(|p| b.log("t0", *p).unwrap().log_end_offset() > 0)
        .collect();
    assert_eq!(
        reached,
        (0..10).collect::<Vec<_>>(),
        "partitions that got data"
    );
}

/// The std backend, claiming to sync files together (as io_uring does), counting each `sync_files`
/// call with the number of files it was given.
#[derive(Debug, Default)]
struct Gathering {
    calls: Mutex<Vec<usize>>,
}

impl Storage for Gathering {
    fn create(&self, path: &Path) -> std::io::Result<Arc<dyn StorageFile>> {
        StdStorage.create(path)
    }
    fn open(&self, path: &Path) -> std::io::Result<Arc<dyn StorageFile>> {
        StdStorage.open(path)
    }
    fn open_read(&self, path: &Path) -> std::io::Result<Arc<dyn StorageFile>> {
        StdStorage.open_read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        StdStorage.rename(from, to)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        StdStorage.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        StdStorage.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        StdStorage.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        StdStorage.create_dir_all(dir)
    }
    fn name(&self) -> &'static str {
        "gathering"
    }
    fn lock_dir(&self, dir: &Path) -> std::io::Result<Option<std::fs::File>> {
        StdStorage.lock_dir(dir)
    }
    fn sync_files(&self, files: &[Arc<dyn StorageFile>]) -> std::io::Result<()> {
        self.calls.lock().unwrap().push(files.len());
        files.iter().try_for_each(|f| f.sync())
    }
    fn syncs_together(&self) -> bool {
        true
    }
}

/// With `flush.messages=1` on the destination's topic, a round that appends to every partition syncs
/// them all in one `sync_files` call at its end (one io_uring submission), not one sync per append,
/// and leaves every log flushed to its end.
#[test]
fn a_round_flushes_the_partitions_that_need_it_together() {
    let env = Env::new();
    let (a, names) = source_with(&env, "a", "t", (1, 20), (2, 3));
    let storage = Arc::new(Gathering::default());
    let b = env.cluster_on(storage.clone(), "b");
    let _source = link_counted(&b, "m", &a);
    all_ok(b.add_topics("m", &names).unwrap());
    b.alter_topic_configs("t0", &[("flush.messages".into(), Some("1".into()))])
        .unwrap();
    b.tick(); // PREPARING -> MIRRORING: nothing fetched yet
    storage.calls.lock().unwrap().clear();
    let report = b.tick();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.batches_appended, 40);
    assert_eq!(
        *storage.calls.lock().unwrap(),
        [20],
        "sync_files calls of the round, with their file counts"
    );
    for p in 0..20 {
        let log = b.log("t0", p).unwrap();
        assert_eq!(log.recovery_point(), log.log_end_offset(), "t0-{p}");
    }
    assert_converged(&b, &a, &names);
}

/// A fetch answer as comparable values.
type Answer = Result<(i64, i64, i64, Option<(i32, i64)>, Vec<u8>), SourceError>;

fn answer(r: Result<FetchResponse, SourceError>) -> Answer {
    r.map(|r| {
        (
            r.high_watermark,
            r.last_stable_offset,
            r.log_start_offset,
            r.diverging_epoch,
            r.records,
        )
    })
}

/// `LocalSource::fetch_many` answers every partition as `fetch` does (records, fencing, unknown
/// partitions, out of range), and within a budget only the first partition with records gets a batch
/// beyond it; the partitions after the budget ran out are left out.
#[test]
fn local_fetch_many_answers_as_fetch_does_within_the_budget() {
    let env = Env::new();
    let (a, _) = source_with(&env, "a", "t", (1, 4), (3, 20));
    assert_eq!(a.bump_leader_epoch("t0", 1, 0).unwrap(), 1);
    let id = TopicId::parse(&a.topic("t0").unwrap().id).unwrap();
    let source = a.as_source();
    let request = |partition: i32, fetch_offset: i64| FetchRequest {
        topic: "t0".into(),
        topic_id: id,
        partition,
        fetch_offset,
        last_fetched_epoch: None,
        current_leader_epoch: 0,
        max_bytes: 1 << 20,
        isolation: klog::mirror::source::Isolation::ReadCommitted,
    };
    let requests = vec![
        request(0, 0),
        request(1, 0),  // fenced: the source leads at epoch 1
        request(2, 99), // out of range
        request(7, 0),  // no such partition
        request(3, 20),
    ];
    let many: Vec<(usize, Answer)> = source
        .fetch_many(&requests, 1 << 20)
        .into_iter()
        .map(|(i, r)| (i, answer(r)))
        .collect();
    let one_by_one: Vec<(usize, Answer)> = requests
        .iter()
        .enumerate()
        .map(|(i, r)| (i, answer(source.fetch(r))))
        .collect();
    assert_eq!(many, one_by_one);
    assert!(matches!(
        many[1].1,
        Err(SourceError::FencedLeaderEpoch { leader_epoch: 1 })
    ));
    assert_eq!(many[0].1.as_ref().unwrap().4.len(), {
        let all = batches(&a.log("t0", 0).unwrap());
        all.iter().map(|b| b.bytes.len()).sum::<usize>()
    });

    // A budget of half a batch: the first partition still gets one whole batch, the second none (its
    // answer is empty), and nothing is asked after the budget is spent.
    let batch_bytes = batches(&a.log("t0", 0).unwrap())[0].bytes.len();
    let small = vec![request(0, 0), request(2, 0), request(3, 0)];
    let cut = source.fetch_many(&small, batch_bytes / 2);
    let sizes: Vec<(usize, usize)> = cut
        .into_iter()
        .map(|(i, r)| (i, r.unwrap().records.len()))
        .collect();
    assert_eq!(sizes, [(0, batch_bytes)]);
    // A budget of one and a half batches: the first takes one batch, the second gets no part of a batch.
    let cut = source.fetch_many(&small, batch_bytes + batch_bytes / 2);
    let sizes: Vec<(usize, usize)> = cut
        .into_iter()
        .map(|(i, r)| (i, r.unwrap().records.len()))
        .collect();
    assert_eq!(sizes, [(0, batch_bytes), (1, 0), (2, 0)]);
}

/// A source whose partitions lead at a later epoch fences the first round's fetches: the round learns
/// the epochs without asking again, and the next round fetches at them (one `fetch_many` each).
#[test]
fn fencing_is_retried_at_the_learned_epoch_next_round() {
    let env = Env::new();
    let (a, names) = source_with(&env, "a", "t", (1, 5), (1, 2));
    for p in 0..5 {
        a.bump_leader_epoch("t0", p, 0).unwrap();
        a.bump_leader_epoch("t0", p, 0).unwrap();
    }
    let b = env.cluster("b");
    let source = link_counted(&b, "m", &a);
    all_ok(b.add_topics("m", &names).unwrap());
    b.tick(); // PREPARING -> MIRRORING
    source.take_round();
    let fenced = b.tick();
    assert!(fenced.errors.is_empty(), "{:?}", fenced.errors);
    assert_eq!((fenced.epochs_learned, fenced.batches_appended), (5, 0));
    assert!(fenced.progressed(), "learning an epoch is progress");
    let round = source.take_round();
    assert_eq!((round.fetch_manys, round.fetches), (1, 0));
    let fetched = b.tick();
    assert_eq!((fetched.epochs_learned, fetched.batches_appended), (0, 5));
    assert_eq!(source.take_round().fetch_manys, 1);
    assert_converged(&b, &a, &names);
}

/// A local source hands each partition's answer over as soon as it is read, and the fetcher appends it
/// before the next is read: what a round holds is one answer, not all of them (the cap bounds the rest).
#[test]
fn each_answer_is_appended_before_the_next_is_read() {
    let env = Env::new();
    let (a, a_topics) = source_with(&env, "a", "a", (2, 10), (3, 2));
    let b = env.cluster("b");
    let from_a = link_counted(&b, "ma", &a);
    from_a.dest.set(Arc::downgrade(&b)).unwrap();
    all_ok(b.add_topics("ma", &a_topics).unwrap());
    let r = b.run_until_idle(20);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_converged(&b, &a, &a_topics);
    assert_eq!(from_a.held.load(Ordering::SeqCst), 0, "answers held back");
    assert!(
        from_a.streamed.load(Ordering::SeqCst) >= 19,
        "answers appended as they came: {}",
        from_a.streamed.load(Ordering::SeqCst)
    );
}

/// Two clusters that mirror from each other (A takes `b*` from B, B takes `a*` from A), ticked at the
/// same time on two threads: an answer is appended from inside the other cluster's `fetch_each`, so
/// neither may hold a lock the other's serving needs. Both converge; a deadlock trips the hang guard.
#[test]
fn two_clusters_mirroring_each_other_tick_at_once_without_deadlock() {
    let env = Env::new();
    let (a, a_topics) = source_with(&env, "a", "a", (2, 10), (3, 2));
    let b = env.cluster("b");
    let b_topics: Vec<String> = (0..2).map(|i| format!("b{i}")).collect();
    for t in &b_topics {
        b.create_topic(t, 10, None, &[]).unwrap();
        for p in 0..10 {
            b.produce(t, p, &mut plain(2, &format!("{t}-{p}"))).unwrap();
        }
    }
    link(&a, "from-b", &b);
    link(&b, "from-a", &a);
    all_ok(a.add_topics("from-b", &b_topics).unwrap());
    all_ok(b.add_topics("from-a", &a_topics).unwrap());
    let (done, finished) = std::sync::mpsc::channel();
    for c in [a.clone(), b.clone()] {
        let done = done.clone();
        std::thread::spawn(move || {
            for _ in 0..30 {
                let r = c.tick();
                assert!(r.errors.is_empty(), "{:?}", r.errors);
            }
            done.send(()).unwrap();
        });
    }
    for _ in 0..2 {
        finished
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("both clusters tick to the end (a deadlock would stop them)");
    }
    assert_converged(&a, &b, &b_topics);
    assert_converged(&b, &a, &a_topics);
}
