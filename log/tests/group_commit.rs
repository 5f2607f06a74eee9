//! Group commit on simulated storage whose `.log` syncs the test holds at a gate: how many syncs a group
//! of appenders costs, counted, never timed. Each scenario waits for a state (appends published, callers
//! asleep, a sync at the gate), so the counts do not depend on the machine's speed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier, Condvar, Mutex};

use klog_log::clock::ManualClock;
use klog_log::config::LogConfig;
use klog_log::format::{BatchBuilder, Compression};
use klog_log::io::{SimStorage, Storage, StorageFile};
use klog_log::partition_log::{FlushGroups, OpenOptions, PartitionLog};

/// Syncs of `.log` files that reached the storage, and whether they may complete.
#[derive(Debug, Default)]
struct GateState {
    open: bool,
    entered: u64,
}

#[derive(Debug, Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    fn set_open(&self, open: bool) {
        self.state.lock().unwrap().open = open;
        self.changed.notify_all();
    }

    fn entered(&self) -> u64 {
        self.state.lock().unwrap().entered
    }

    /// A `.log` sync: counted, then held until the gate is open.
    fn pass(&self) {
        let mut state = self.state.lock().unwrap();
        state.entered += 1;
        self.changed.notify_all();
        while !state.open {
            state = self.changed.wait(state).unwrap();
        }
    }

    /// Waits (yielding) until `done` holds of the syncs that have reached the gate; returns their count.
    fn wait_until(&self, mut done: impl FnMut(u64) -> bool) -> u64 {
        loop {
            let entered = self.entered();
            if done(entered) {
                return entered;
            }
            std::thread::yield_now();
        }
    }
}

/// [`SimStorage`] whose segment `.log` files sync through a [`Gate`].
#[derive(Debug)]
struct GatedStorage {
    inner: SimStorage,
    gate: Arc<Gate>,
}

#[derive(Debug)]
struct GatedFile {
    inner: Arc<dyn StorageFile>,
    gate: Arc<Gate>,
}

impl StorageFile for GatedFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> std::io::Result<usize> {
        self.inner.read_at(buf, position)
    }
    fn write_at(&self, buf: &[u8], position: u64) -> std::io::Result<()> {
        self.inner.write_at(buf, position)
    }
    fn sync(&self) -> std::io::Result<()> {
        self.gate.pass();
        self.inner.sync()
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.inner.set_len(len)
    }
    fn seal(&self, size: u64) -> std::io::Result<()> {
        self.inner.seal(size)
    }
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn os_path(&self) -> Option<&Path> {
        self.inner.os_path()
    }
}

impl GatedStorage {
    fn gated(&self, path: &Path, file: Arc<dyn StorageFile>) -> Arc<dyn StorageFile> {
        if path.extension().is_some_and(|e| e == "log") {
            Arc::new(GatedFile {
                inner: file,
                gate: self.gate.clone(),
            })
        } else {
            file
        }
    }
}

impl Storage for GatedStorage {
    fn create(&self, path: &Path) -> std::io::Result<Arc<dyn StorageFile>> {
        Ok(self.gated(path, self.inner.create(path)?))
    }
    fn open(&self, path: &Path) -> std::io::Result<Arc<dyn StorageFile>> {
        Ok(self.gated(path, self.inner.open(path)?))
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        self.inner.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn name(&self) -> &'static str {
        "gated-sim"
    }
    fn lock_dir(&self, dir: &Path) -> std::io::Result<Option<std::fs::File>> {
        self.inner.lock_dir(dir)
    }
}

fn batch(i: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(1_000 + i as i64, Some(b"key"), Some(&[i as u8; 200]), &[])
        .unwrap();
    b.build().unwrap()
}

/// A log on gated storage, with one append already flushed (its segment and directory exist), the gate
/// closed again.
fn gated_log(name: &str) -> (Arc<PartitionLog>, Arc<Gate>) {
    let gate = Arc::new(Gate::default());
    gate.set_open(true);
    let storage: Arc<dyn Storage> = Arc::new(GatedStorage {
        inner: SimStorage::new(7),
        gate: gate.clone(),
    });
    let (log, _) = PartitionLog::open_with_clock(
        storage,
        &PathBuf::from(format!("/group-commit/{name}-0")),
        LogConfig::default(),
        OpenOptions::default(),
        Arc::new(ManualClock::new(5_000)),
    )
    .unwrap();
    log.append_as_leader(&mut batch(0), 1).unwrap();
    log.flush(log.log_end_offset()).unwrap();
    gate.set_open(false);
    (Arc::new(log), gate)
}

/// Appends one batch and flushes up to it.
fn append_and_flush(log: &PartitionLog, i: usize) {
    let info = log.append_as_leader(&mut batch(i), 1).unwrap();
    log.flush(info.last_offset + 1).unwrap();
}

fn since(before: FlushGroups, after: FlushGroups) -> (u64, u64) {
    (
        after.flushes - before.flushes,
        after.callers - before.callers,
    )
}

/// The split group of issue #28: one appender's sync is on the device when the other seven append. They
/// must not start syncs of their own beside it (each would cover only the appends that missed the first,
/// and the group would stay split); they wait, and the next flush covers all seven: 8 appends, 2 syncs.
#[test]
fn appends_that_miss_a_sync_in_flight_share_the_next_one() {
    const STRAGGLERS: usize = 7;
    let (log, gate) = gated_log("split");
    let before = log.flush_groups();
    let entered = gate.entered();
    std::thread::scope(|s| {
        let first = {
            let log = &log;
            s.spawn(move || append_and_flush(log, 1))
        };
        gate.wait_until(|e| e == entered + 1);
        let leo = log.log_end_offset();
        let stragglers: Vec<_> = (0..STRAGGLERS)
            .map(|i| {
                let log = &log;
                s.spawn(move || append_and_flush(log, 2 + i))
            })
            .collect();
        // Every straggler asleep in its flush, or one of them syncing beside the first (the defect).
        let at_gate =
            gate.wait_until(|e| e > entered + 1 || log.flush_groups().waiting == STRAGGLERS);
        let appended = log.log_end_offset() - leo;
        // Open before any assertion, so that a failure reports instead of leaving syncs at the gate.
        gate.set_open(true);
        first.join().unwrap();
        for t in stragglers {
            t.join().unwrap();
        }
        assert_eq!(
            at_gate,
            entered + 1,
            "a flush started its own sync while another was on the device"
        );
        assert_eq!(appended, STRAGGLERS as i64);
    });
    assert_eq!(
        gate.entered() - entered,
        2,
        "8 appends: the first one's sync, and one for the seven that missed it"
    );
    assert_eq!(
        since(before, log.flush_groups()),
        (2, 1 + STRAGGLERS as u64),
        "(flushes, callers covered)"
    );
    assert_eq!(log.recovery_point(), log.log_end_offset());
}

/// Appends published before a flush reads its target are all covered by that flush: N appenders that
/// all appended before any of them flushes cost one sync, however their flushes interleave.
#[test]
fn appends_published_before_a_flush_starts_share_its_sync() {
    const APPENDERS: usize = 8;
    let (log, gate) = gated_log("together");
    gate.set_open(true);
    let entered = gate.entered();
    let appended = Barrier::new(APPENDERS);
    std::thread::scope(|s| {
        for i in 0..APPENDERS {
            let (log, appended) = (&log, &appended);
            s.spawn(move || {
                let info = log.append_as_leader(&mut batch(1 + i), 1).unwrap();
                appended.wait();
                log.flush(info.last_offset + 1).unwrap();
            });
        }
    });
    assert_eq!(
        gate.entered() - entered,
        1,
        "one sync for {APPENDERS} appends"
    );
    assert_eq!(log.recovery_point(), log.log_end_offset());
}
