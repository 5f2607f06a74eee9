//! The second core of a segment's mapped recovery pass (`recover.rs`): while the recovering thread
//! checks window k (the CRC-32C of every batch), a helper thread maps and populates window k+1 and
//! unmaps window k-1. Populating a 16 MiB window (its page-table entries, and the disk read on a cold
//! cache) and unmapping it were about 35% of an unclean open on the AMD machine (BENCHMARKS.md,
//! "Recovery"); on the recovering thread they came on top of the CRC, here they run beside it.
//!
//! At most one window is requested at a time and the recovering thread decides whether to use it, so the
//! pass reads the same bytes in the same order as without the helper: only where the kernel work runs
//! changes. Without a helper (a single-window segment, or no thread to be had) every request is served
//! on the calling thread when it is taken.

use std::fs::File;
use std::io;
use std::sync::mpsc;
use std::thread::Scope;

use memmap2::Mmap;

/// Maps `[start, end)` of a file with every page populated (`recover.rs`'s `map_populated`).
pub(super) type MapPopulated = fn(&File, u64, u64) -> io::Result<Mmap>;
/// Starts reading `[position, position + len)` into the page cache if it is not there yet.
pub(super) type ReadAhead = fn(&File, u64, u64);

enum Job {
    /// Map `[start, end)`, then read ahead the `len` bytes after it.
    Map {
        start: u64,
        end: u64,
        ahead: u64,
    },
    Unmap(Mmap),
}

/// A requested window: where it starts, and the map (or the error of mapping it).
pub(super) type Window = (u64, io::Result<Mmap>);

/// The helper thread's end of the pass, or the calling thread's when there is no helper.
pub(super) struct WindowsAhead<'env> {
    file: &'env File,
    map: MapPopulated,
    helper: Option<(mpsc::Sender<Job>, mpsc::Receiver<Window>)>,
    /// The window requested and not yet taken.
    requested: Option<(u64, u64)>,
    /// Whether the helper has the request (else it is mapped when taken).
    pending: bool,
}

impl<'env> WindowsAhead<'env> {
    /// A helper thread in `scope` when `spawn` (the segment has more than one window) and the thread
    /// can be started; otherwise requests are served on the calling thread.
    pub(super) fn start<'scope>(
        scope: &'scope Scope<'scope, 'env>,
        file: &'env File,
        map: MapPopulated,
        read_ahead: ReadAhead,
        spawn: bool,
    ) -> Self {
        let helper = spawn
            .then(|| Self::spawn(scope, file, map, read_ahead))
            .flatten();
        WindowsAhead {
            file,
            map,
            helper,
            requested: None,
            pending: false,
        }
    }

    fn spawn<'scope>(
        scope: &'scope Scope<'scope, 'env>,
        file: &'env File,
        map: MapPopulated,
        read_ahead: ReadAhead,
    ) -> Option<(mpsc::Sender<Job>, mpsc::Receiver<Window>)> {
        let (jobs, job_queue) = mpsc::channel::<Job>();
        let (windows, taken) = mpsc::channel::<Window>();
        std::thread::Builder::new()
            .name("klog-recover-map".into())
            .spawn_scoped(scope, move || {
                for job in job_queue {
                    match job {
                        Job::Map { start, end, ahead } => {
                            let window = map(file, start, end);
                            if windows.send((start, window)).is_err() {
                                return;
                            }
                            if ahead > 0 {
                                read_ahead(file, end, ahead);
                            }
                        }
                        Job::Unmap(window) => drop(window),
                    }
                }
            })
            .ok()?;
        Some((jobs, taken))
    }

    /// Asks for `[start, end)` mapped and populated, and the `ahead` bytes after it read ahead; at most
    /// one request is outstanding (a second before [`take`](Self::take) breaks an assertion).
    pub(super) fn request(&mut self, start: u64, end: u64, ahead: u64) {
        assert!(
            self.requested.is_none(),
            "one window is requested at a time"
        );
        self.requested = Some((start, end));
        self.pending = match &self.helper {
            Some((jobs, _)) => jobs.send(Job::Map { start, end, ahead }).is_ok(),
            None => false,
        };
    }

    /// The window last requested (`None` if none is outstanding): the helper's, or mapped here when
    /// there is no helper (or it stopped).
    pub(super) fn take(&mut self) -> Option<Window> {
        let (start, end) = self.requested.take()?;
        if std::mem::take(&mut self.pending) {
            if let Some(window) = self
                .helper
                .as_ref()
                .and_then(|(_, taken)| taken.recv().ok())
            {
                return Some(window);
            }
        }
        Some((start, (self.map)(self.file, start, end)))
    }

    /// Unmaps `window` on the helper thread (here, without one).
    pub(super) fn unmap(&self, window: Mmap) {
        if let Some((jobs, _)) = &self.helper {
            // A helper that is gone hands the window back inside the error: it is dropped here.
            let _ = jobs.send(Job::Unmap(window));
        }
    }
}
