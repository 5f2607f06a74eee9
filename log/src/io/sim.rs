//! Simulated storage for deterministic crash and fault tests.
//!
//! Each file has a `live` image (what reads see) and a `durable` image (what survives a crash); `sync`
//! copies live to durable. Directory entries likewise: creations, renames and removals become durable only
//! with `sync_dir`. `crash()` drops everything not durable and can tear the last unsynced write at a
//! 512-byte boundary. On the direct write path (`with_direct_writes`) every write completed since its
//! file's last sync is at the mercy of a crash, as in a device's volatile cache: each one, in the order
//! they completed, reaches the durable image whole, torn at a sector, or not at all (zero fills
//! included). Faults (EIO, ENOSPC, a short write) fire at a chosen operation number. Everything is a pure
//! function of the operations and the seed.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::direct::{self, ChunkDevice, ChunkWrite, TailFile};
use super::{Storage, StorageFile};

const SECTOR: u64 = 512;

/// A failure to inject at an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The operation fails with EIO and changes nothing.
    Eio,
    /// The operation fails with ENOSPC and changes nothing.
    Enospc,
    /// A write stores only a sector-aligned prefix (possibly nothing), then fails with EIO.
    ShortWrite,
}

#[derive(Debug, Default)]
struct Inode {
    live: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Debug, Default)]
struct State {
    inodes: BTreeMap<u64, Inode>,
    live_dirs: BTreeMap<PathBuf, BTreeMap<String, u64>>,
    durable_dirs: BTreeMap<PathBuf, BTreeMap<String, u64>>,
    next_inode: u64,
    generation: u64,
    ops: u64,
    faults: BTreeMap<u64, Fault>,
    /// From this operation on, every operation fails (the power went out mid-run).
    power_off_from: Option<u64>,
    /// The last write not yet synced: (inode, position, bytes), a candidate for tearing.
    last_unsynced_write: Option<(u64, u64, Vec<u8>)>,
    /// Writes of the direct path completed and not yet synced, in completion order: (inode, position,
    /// bytes). A crash lands each whole, torn, or not at all.
    unsynced_chunks: Vec<(u64, u64, Vec<u8>)>,
    /// Device cache flushes: fdatasyncs of files (a device without FUA flushes its cache for each).
    device_flushes: u64,
    rng: u64,
    /// Segment `.log`s go through the direct write path (`direct.rs`), as on the uring backend.
    direct_writes: bool,
    /// Batches of the direct write path run so far (each one io_uring submission on the uring backend).
    batches: u64,
    /// Directories whose listing fails with EACCES (a partition directory an operator made unreadable).
    unlistable: std::collections::BTreeSet<PathBuf>,
}

/// In-memory storage with crash simulation. Clones share the same state.
#[derive(Debug, Clone)]
pub struct SimStorage {
    state: Arc<Mutex<State>>,
}

#[derive(Debug)]
struct SimFile {
    state: Arc<Mutex<State>>,
    inode: u64,
    generation: u64,
}

fn split(path: &Path) -> io::Result<(PathBuf, String)> {
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?
        .to_string_lossy()
        .into_owned();
    Ok((dir, name))
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: no such file (sim)", path.display()),
    )
}

impl State {
    /// Counts the operation and returns the fault planned for it, if any.
    fn tick(&mut self) -> Option<Fault> {
        self.ops += 1;
        if self.power_off_from.is_some_and(|from| self.ops >= from) {
            return Some(Fault::Eio);
        }
        self.faults.remove(&self.ops)
    }

    fn fail(fault: Fault) -> io::Error {
        match fault {
            Fault::Enospc => io::Error::from_raw_os_error(28),
            Fault::Eio | Fault::ShortWrite => io::Error::from_raw_os_error(5),
        }
    }

    fn next_random(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn lookup(&self, path: &Path) -> io::Result<u64> {
        let (dir, name) = split(path)?;
        self.live_dirs
            .get(&dir)
            .and_then(|d| d.get(&name))
            .copied()
            .ok_or_else(|| not_found(path))
    }
}

impl SimStorage {
    /// An empty simulated file system; `seed` drives torn writes.
    pub fn new(seed: u64) -> Self {
        let state = State {
            rng: seed | 1,
            ..State::default()
        };
        SimStorage {
            state: Arc::new(Mutex::new(state)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("sim state lock poisoned")
    }

    /// Segment `.log`s go through the direct write path the uring backend uses (an in-memory tail,
    /// aligned chunks written in batches, each batch in flight at once: a power failure during one lands
    /// each of its writes whole, torn at a sector, or not at all).
    pub fn with_direct_writes(self) -> Self {
        self.lock().direct_writes = true;
        self
    }

    /// Batches of writes and of syncs the direct write path has run (one io_uring submission each on
    /// the uring backend).
    pub fn batches(&self) -> u64 {
        self.lock().batches
    }

    /// Device cache flushes so far: every file sync (what one fdatasync costs on a device without FUA).
    pub fn device_flushes(&self) -> u64 {
        self.lock().device_flushes
    }

    /// Operations performed so far (writes, syncs, resizes, creations, renames, removals, dir syncs).
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// Fails operation number `op` (1-based, counting from the storage's creation) with `fault`.
    pub fn inject(&self, op: u64, fault: Fault) {
        self.lock().faults.insert(op, fault);
    }

    /// Makes every listing of `dir` fail with EACCES, as a directory with mode 000 does for a user
    /// other than root (the directory and its files stay as they are).
    pub fn deny_list(&self, dir: &Path) {
        self.lock().unlistable.insert(dir.to_owned());
    }

    /// Removes every injected fault.
    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    /// From operation number `op` on, every write, sync, resize and directory change fails with EIO, as if
    /// the machine lost power there; `crash` then decides what survived.
    pub fn power_off_at(&self, op: u64) {
        self.lock().power_off_from = Some(op);
    }

    /// Simulates power loss: everything not durable is gone; with `tear`, a sector-aligned prefix of the
    /// last unsynced write may have reached the disk. Handles opened before the crash stop working.
    pub fn crash(&self, tear: bool) {
        let mut s = self.lock();
        for (inode, position, bytes) in std::mem::take(&mut s.unsynced_chunks) {
            if tear {
                let landed = s.landed(bytes.len());
                if landed > 0 {
                    s.put(inode, position, &bytes[..landed], true);
                }
            }
        }
        if let Some((inode, position, bytes)) = s.last_unsynced_write.take() {
            let r = s.next_random();
            if tear && !bytes.is_empty() {
                let end = position + r % bytes.len() as u64;
                let cut = (end / SECTOR * SECTOR).saturating_sub(position) as usize;
                if let Some(node) = s.inodes.get_mut(&inode) {
                    let to = position as usize + cut;
                    if node.durable.len() < to {
                        node.durable.resize(to, 0);
                    }
                    node.durable[position as usize..to].copy_from_slice(&bytes[..cut]);
                }
            }
        }
        s.live_dirs = s.durable_dirs.clone();
        let reachable: std::collections::BTreeSet<u64> = s
            .durable_dirs
            .values()
            .flat_map(|d| d.values().copied())
            .collect();
        s.inodes.retain(|id, _| reachable.contains(id));
        for node in s.inodes.values_mut() {
            node.live = node.durable.clone();
        }
        s.generation += 1;
        s.faults.clear();
        s.power_off_from = None;
    }

    /// The live bytes of a file (what a reader sees now), for tests.
    pub fn live_bytes(&self, path: &Path) -> io::Result<Vec<u8>> {
        let s = self.lock();
        let id = s.lookup(path)?;
        Ok(s.inodes[&id].live.clone())
    }

    /// Overwrites a file's bytes, live and durable, bypassing fault injection: for corruption tests.
    pub fn corrupt(&self, path: &Path, bytes: Vec<u8>) -> io::Result<()> {
        let mut s = self.lock();
        let id = s.lookup(path)?;
        let node = s.inodes.get_mut(&id).expect("inode of a live entry");
        node.live = bytes.clone();
        node.durable = bytes;
        Ok(())
    }

    fn file(&self, inode: u64, generation: u64) -> Arc<dyn StorageFile> {
        Arc::new(SimFile {
            state: Arc::clone(&self.state),
            inode,
            generation,
        })
    }
}

impl SimFile {
    fn with<T>(&self, f: impl FnOnce(&mut State, u64) -> io::Result<T>) -> io::Result<T> {
        let mut s = self.state.lock().expect("sim state lock poisoned");
        if s.generation != self.generation || !s.inodes.contains_key(&self.inode) {
            return Err(io::Error::other("stale handle: the storage crashed"));
        }
        f(&mut s, self.inode)
    }
}

impl StorageFile for SimFile {
    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        self.with(|s, id| {
            let live = &s.inodes[&id].live;
            let start = (position as usize).min(live.len());
            let n = buf.len().min(live.len() - start);
            buf[..n].copy_from_slice(&live[start..start + n]);
            Ok(n)
        })
    }

    fn write_at(&self, buf: &[u8], position: u64) -> io::Result<()> {
        self.with(|s, id| {
            let fault = s.tick();
            let len = match fault {
                None => buf.len(),
                Some(Fault::ShortWrite) => {
                    let end = (position + buf.len() as u64 / 2) / SECTOR * SECTOR;
                    end.saturating_sub(position) as usize
                }
                Some(f) => return Err(State::fail(f)),
            };
            let node = s.inodes.get_mut(&id).expect("checked");
            let end = position as usize + len;
            if node.live.len() < end {
                node.live.resize(end, 0);
            }
            node.live[position as usize..end].copy_from_slice(&buf[..len]);
            s.last_unsynced_write = Some((id, position, buf[..len].to_vec()));
            match fault {
                Some(f) => Err(State::fail(f)),
                None => Ok(()),
            }
        })
    }

    fn sync(&self) -> io::Result<()> {
        self.with(|s, id| {
            if let Some(f) = s.tick() {
                return Err(State::fail(f));
            }
            s.device_flushes += 1;
            let node = s.inodes.get_mut(&id).expect("checked");
            node.durable = node.live.clone();
            if s.last_unsynced_write.as_ref().is_some_and(|w| w.0 == id) {
                s.last_unsynced_write = None;
            }
            s.unsynced_chunks.retain(|w| w.0 != id);
            Ok(())
        })
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.with(|s, id| {
            if let Some(f) = s.tick() {
                return Err(State::fail(f));
            }
            s.inodes
                .get_mut(&id)
                .expect("checked")
                .live
                .resize(len as usize, 0);
            Ok(())
        })
    }

    fn len(&self) -> io::Result<u64> {
        self.with(|s, id| Ok(s.inodes[&id].live.len() as u64))
    }

    fn os_path(&self) -> Option<&Path> {
        None
    }
}

impl State {
    /// How many of a write's `len` bytes reach the disk when it is caught by a power failure: all, a
    /// sector-aligned prefix, or none, chosen by the seed.
    fn landed(&mut self, len: usize) -> usize {
        let r = self.next_random();
        match r % 3 {
            0 => len,
            1 => ((r >> 8) % len.max(1) as u64 / SECTOR * SECTOR) as usize,
            _ => 0,
        }
    }

    /// Puts `bytes` at `position` in the live image and, with `durable`, in the durable one too.
    fn put(&mut self, id: u64, position: u64, bytes: &[u8], durable: bool) {
        let node = self.inodes.get_mut(&id).expect("checked");
        let end = position as usize + bytes.len();
        let images = if durable {
            vec![&mut node.live, &mut node.durable]
        } else {
            vec![&mut node.live]
        };
        for image in images {
            if image.len() < end {
                image.resize(end, 0);
            }
            image[position as usize..end].copy_from_slice(bytes);
        }
    }
}

impl ChunkDevice for SimFile {
    /// Each write is one operation, and none is durable until its file is synced. When one of them
    /// fails (the power went out, an injected fault), the whole batch was in flight: each write reached
    /// the device whole, torn at a sector, or not at all, chosen by the seed, and every write of the
    /// batch fails. A batch issued after the power went out was never in flight: none of it lands.
    fn write_batch(writes: &[ChunkWrite<'_, Self>]) -> Vec<io::Result<()>> {
        let Some(first) = writes.first() else {
            return Vec::new();
        };
        let mut s = first.dev.state.lock().expect("sim state lock poisoned");
        s.batches += 1;
        if writes
            .iter()
            .any(|w| w.dev.generation != s.generation || !s.inodes.contains_key(&w.dev.inode))
        {
            return writes
                .iter()
                .map(|_| Err(io::Error::other("stale handle: the storage crashed")))
                .collect();
        }
        // Issued after the operation the power went out at: never in flight, nothing of it lands.
        let power_was_off = s.power_off_from.is_some_and(|from| s.ops >= from);
        let mut fault = None;
        for _ in writes {
            if let Some(f) = s.tick() {
                fault.get_or_insert(f);
            }
        }
        for w in writes {
            let landed = match fault {
                None => w.bytes.len(),
                Some(_) if power_was_off => 0,
                Some(_) => s.landed(w.bytes.len()),
            };
            if landed > 0 {
                let bytes = &w.bytes[..landed];
                s.put(w.dev.inode, w.position, bytes, false);
                s.unsynced_chunks
                    .push((w.dev.inode, w.position, bytes.to_vec()));
            }
        }
        match fault {
            None => writes.iter().map(|_| Ok(())).collect(),
            Some(fault) => writes.iter().map(|_| Err(State::fail(fault))).collect(),
        }
    }

    fn sync_batch(devs: &[&Self]) -> Vec<io::Result<()>> {
        if let Some(d) = devs.first() {
            d.state.lock().expect("sim state lock poisoned").batches += 1;
        }
        devs.iter().map(|d| StorageFile::sync(*d)).collect()
    }

    fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        StorageFile::read_at(self, buf, position)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        StorageFile::set_len(self, len)
    }

    fn len(&self) -> io::Result<u64> {
        StorageFile::len(self)
    }

    fn path(&self) -> Option<&Path> {
        None
    }
}

impl Storage for SimStorage {
    fn open_segment_log(
        &self,
        path: &Path,
        create: bool,
        size: u64,
        preallocate: Option<u64>,
    ) -> io::Result<Arc<dyn StorageFile>> {
        if create {
            self.create(path)?;
        }
        let s = self.lock();
        let (inode, generation, direct) = (s.lookup(path)?, s.generation, s.direct_writes);
        drop(s);
        let dev = SimFile {
            state: Arc::clone(&self.state),
            inode,
            generation,
        };
        if create {
            if let Some(bytes) = preallocate {
                StorageFile::set_len(&dev, bytes)?;
            }
        }
        if direct {
            Ok(Arc::new(TailFile::new(dev, path, size)?))
        } else {
            Ok(Arc::new(dev))
        }
    }

    fn sync_files(&self, files: &[Arc<dyn StorageFile>]) -> io::Result<()> {
        direct::sync_files::<SimFile>(files)
    }

    fn syncs_together(&self) -> bool {
        self.lock().direct_writes
    }

    fn create(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let (dir, name) = split(path)?;
        let mut s = self.lock();
        if let Some(f) = s.tick() {
            return Err(State::fail(f));
        }
        let generation = s.generation;
        let entries = s.live_dirs.get(&dir).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{}: no such directory", dir.display()),
            )
        })?;
        if entries.contains_key(&name) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists", path.display()),
            ));
        }
        s.next_inode += 1;
        let id = s.next_inode;
        s.inodes.insert(id, Inode::default());
        s.live_dirs.get_mut(&dir).expect("checked").insert(name, id);
        drop(s);
        Ok(self.file(id, generation))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn StorageFile>> {
        let s = self.lock();
        let id = s.lookup(path)?;
        let generation = s.generation;
        drop(s);
        Ok(self.file(id, generation))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from_dir, from_name) = split(from)?;
        let (to_dir, to_name) = split(to)?;
        let mut s = self.lock();
        if let Some(f) = s.tick() {
            return Err(State::fail(f));
        }
        let id = s.lookup(from)?;
        if !s.live_dirs.contains_key(&to_dir) {
            return Err(not_found(to));
        }
        s.live_dirs
            .get_mut(&from_dir)
            .expect("looked up")
            .remove(&from_name);
        s.live_dirs
            .get_mut(&to_dir)
            .expect("checked")
            .insert(to_name, id);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let (dir, name) = split(path)?;
        let mut s = self.lock();
        if let Some(f) = s.tick() {
            return Err(State::fail(f));
        }
        s.lookup(path)?;
        s.live_dirs.get_mut(&dir).expect("looked up").remove(&name);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        if let Some(f) = s.tick() {
            return Err(State::fail(f));
        }
        let entries = s
            .live_dirs
            .get(dir)
            .cloned()
            .ok_or_else(|| not_found(dir))?;
        s.durable_dirs.insert(dir.to_owned(), entries);
        Ok(())
    }

    /// File entries and subdirectories, sorted.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let s = self.lock();
        if s.unlistable.contains(dir) {
            return Err(io::Error::from_raw_os_error(13));
        }
        let entries = s.live_dirs.get(dir).ok_or_else(|| not_found(dir))?;
        let mut names: Vec<String> = entries.keys().cloned().collect();
        let subdirs = s.live_dirs.keys().filter(|d| d.parent() == Some(dir));
        names.extend(
            subdirs
                .filter_map(|d| d.file_name())
                .map(|n| n.to_string_lossy().into_owned()),
        );
        names.sort();
        Ok(names)
    }

    /// Directories are created durable at once (a simplification: crash tests start from made directories).
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        let mut d = Some(dir);
        while let Some(p) = d {
            s.live_dirs.entry(p.to_owned()).or_default();
            s.durable_dirs.entry(p.to_owned()).or_default();
            d = p.parent().filter(|p| !p.as_os_str().is_empty());
        }
        Ok(())
    }

    fn name(&self) -> &'static str {
        "sim"
    }

    fn lock_dir(&self, _dir: &Path) -> io::Result<Option<std::fs::File>> {
        Ok(None) // an in-memory disk: no other process can open it
    }
}
