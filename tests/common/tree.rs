//! A directory tree as a value, to prove a reader changed nothing: every file's and directory's name,
//! type, permissions, size, bytes and modification time. Two snapshots compare equal only if nothing
//! under the root was created, removed, renamed, written, truncated, extended, chmodded or touched.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// One entry of a [`Tree`]: a directory has no bytes (its listing is the tree's keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub dir: bool,
    pub mode: u32,
    pub len: u64,
    pub modified: Option<SystemTime>,
    pub bytes: Vec<u8>,
}

/// Every path under a root (the root included), relative to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree(pub BTreeMap<PathBuf, Entry>);

impl Tree {
    pub fn of(root: &Path) -> Tree {
        let mut out = BTreeMap::new();
        let mut stack = vec![root.to_owned()];
        while let Some(path) = stack.pop() {
            let meta = std::fs::symlink_metadata(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let dir = meta.is_dir();
            let bytes = if dir {
                let entries =
                    std::fs::read_dir(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                for e in entries {
                    stack.push(e.expect("a readable directory entry").path());
                }
                Vec::new()
            } else {
                std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            };
            let rel = path.strip_prefix(root).expect("under the root").to_owned();
            out.insert(
                rel,
                Entry {
                    dir,
                    mode: meta.permissions().mode(),
                    len: meta.len(),
                    modified: meta.modified().ok(),
                    bytes,
                },
            );
        }
        Tree(out)
    }

    /// What differs from `before`, one line per path (empty when the trees are equal).
    pub fn changes_since(&self, before: &Tree) -> Vec<String> {
        let mut out = Vec::new();
        for (path, was) in &before.0 {
            match self.0.get(path) {
                None => out.push(format!("{}: removed", path.display())),
                Some(now) if now != was => {
                    let mut what = Vec::new();
                    if now.dir != was.dir {
                        what.push("type".to_owned());
                    }
                    if now.mode != was.mode {
                        what.push(format!("mode {:o} -> {:o}", was.mode, now.mode));
                    }
                    if now.len != was.len {
                        what.push(format!("size {} -> {}", was.len, now.len));
                    } else if now.bytes != was.bytes {
                        what.push("bytes".to_owned());
                    }
                    if now.modified != was.modified {
                        what.push("mtime".to_owned());
                    }
                    out.push(format!("{}: {}", path.display(), what.join(", ")));
                }
                Some(_) => {}
            }
        }
        for path in self.0.keys().filter(|p| !before.0.contains_key(*p)) {
            out.push(format!("{}: created", path.display()));
        }
        out
    }
}
