//! A FUSE file system that loses, at a "power cut", every write not yet synced: for tests
//! that a program's state survives a crash of the machine, not only of its process.
//!
//! One concern: keeping apart what a program has written from what it has made durable, and
//! throwing the former away on [`PowerFs::cut`]. The file system lives in this process's
//! memory (a test's state is small); each file and directory has two images:
//!
//! - a **file**'s current bytes (what `read` sees) and its durable bytes. `write`, `truncate`
//!   and `ftruncate` change only the current bytes; `fsync` or `fdatasync` of that file (any
//!   descriptor of it) copies them to the durable image, whole.
//! - a **directory**'s current entries and its durable entries. `create`, `mknod`, `mkdir`,
//!   `unlink`, `rmdir` and `rename` change only the current entries; `fsync` of that
//!   directory copies them to the durable ones. Nothing else makes a directory operation
//!   durable: **not** an `fsync` of a file it created, and not a `rename` (a rename is atomic
//!   in what `read`/`open` see, and is durable only with its directories' `fsync`).
//!
//! [`PowerFs::cut`] sets every current image back to its durable one: a file's unsynced
//! writes are gone (all of them: no part of a pending write survives), a file created and
//! never named in a synced directory is gone, a file unlinked or renamed since its
//! directories' last sync is back under its old name. [`PowerFs::sync_all`] is `sync(2)`.
//!
//! This is the strictest model that SQLite's documented requirements of a file system allow
//! (<https://www.sqlite.org/atomiccommit.html>, "Hardware assumptions"; `unixSync` fsyncs
//! the directory after the first sync of a journal or WAL it created): stricter than ext4 with
//! `data=ordered`, where an `fsync` of a new file also commits its directory entry, and a
//! rename over a file replaces it atomically on disk too. What it does not model: a write
//! torn within itself or only partly lost (pending writes are lost whole, which SQLite's WAL
//! checksums would also catch), metadata (mode, owner, times: durable at once), hard links,
//! symlinks, extended attributes.
//!
//! Locks: the file system does not ask the kernel for `FUSE_POSIX_LOCKS` nor
//! `FUSE_FLOCK_LOCKS`, so the kernel keeps `fcntl` and `flock` locks itself, which is exact
//! for processes of one machine. Files open without `direct_io`, so the page cache and a
//! shared `mmap` (SQLite's `-shm`) work. A test unmounts (which drops the kernel's caches),
//! cuts, and mounts again: see [`PowerFs::mount`].

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

/// How long the kernel may cache names and attributes (every change goes through it).
const TTL: Duration = Duration::from_secs(1);

#[derive(Debug)]
enum Kind {
    File {
        cur: Vec<u8>,
        dur: Vec<u8>,
    },
    Dir {
        cur: BTreeMap<OsString, u64>,
        dur: BTreeMap<OsString, u64>,
    },
    /// A socket or fifo (`mknod`): no contents.
    Special(FileType),
}

#[derive(Debug)]
struct Node {
    kind: Kind,
    perm: u16,
    uid: u32,
    gid: u32,
    atime: SystemTime,
    mtime: SystemTime,
    ctime: SystemTime,
}

/// What happened to the file system, for a test's report.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// `fsync`/`fdatasync` of files.
    pub file_syncs: u64,
    /// `fsync` of directories.
    pub dir_syncs: u64,
    /// Power cuts.
    pub cuts: u64,
    /// Files whose unsynced writes a cut threw away.
    pub files_reverted: u64,
    /// Bytes of unsynced data those files had (current length, when it differed).
    pub bytes_lost: u64,
    /// Directories whose unsynced entries a cut threw away.
    pub dirs_reverted: u64,
}

#[derive(Debug)]
struct Tree {
    nodes: HashMap<u64, Node>,
    next: u64,
    stats: Stats,
}

/// The file system's state, shared by every mount of it (it outlives them: that is the disk).
#[derive(Debug, Clone)]
pub struct PowerFs {
    tree: Arc<Mutex<Tree>>,
}

/// A mounted [`PowerFs`]; dropping it unmounts.
pub struct Mounted {
    session: Option<fuser::BackgroundSession>,
}

impl Mounted {
    /// Unmounts (the kernel drops its caches of this file system).
    pub fn unmount(mut self) -> io::Result<()> {
        match self.session.take() {
            Some(s) => s.umount_and_join(),
            None => Ok(()),
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            let _ = s.umount_and_join();
        }
    }
}

fn now() -> SystemTime {
    SystemTime::now()
}

impl Default for PowerFs {
    fn default() -> Self {
        Self::new()
    }
}

impl PowerFs {
    /// An empty file system (its root directory, durable).
    pub fn new() -> Self {
        let mut nodes = HashMap::new();
        nodes.insert(
            1,
            Node {
                kind: Kind::Dir {
                    cur: BTreeMap::new(),
                    dur: BTreeMap::new(),
                },
                perm: 0o755,
                uid: 0,
                gid: 0,
                atime: now(),
                mtime: now(),
                ctime: now(),
            },
        );
        Self {
            tree: Arc::new(Mutex::new(Tree {
                nodes,
                next: 2,
                stats: Stats::default(),
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Tree> {
        self.tree.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Mounts the file system at `at` (an existing directory), served by a thread of this
    /// process. Needs `/dev/fuse` and the right to mount (root: fuser calls mount(2) itself).
    pub fn mount(&self, at: &Path) -> io::Result<Mounted> {
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::FSName("powerloss".into()),
            fuser::MountOption::Subtype("powerloss".into()),
        ];
        let session = fuser::spawn_mount(Fs { fs: self.clone() }, at, &config)?;
        Ok(Mounted {
            session: Some(session),
        })
    }

    /// A power cut: every file and directory goes back to what was last synced. Meant for a
    /// file system that is not mounted (the kernel's caches would still show the lost data).
    pub fn cut(&self) {
        let mut t = self.lock();
        let Tree { nodes, stats, .. } = &mut *t;
        stats.cuts += 1;
        for node in nodes.values_mut() {
            match &mut node.kind {
                Kind::File { cur, dur } => {
                    if cur != dur {
                        stats.files_reverted += 1;
                        stats.bytes_lost += cur.len() as u64;
                        cur.clone_from(dur);
                    }
                }
                Kind::Dir { cur, dur } => {
                    if cur != dur {
                        stats.dirs_reverted += 1;
                        cur.clone_from(dur);
                    }
                }
                Kind::Special(_) => {}
            }
        }
    }

    /// `sync(2)`: everything written so far becomes durable.
    pub fn sync_all(&self) {
        let mut t = self.lock();
        for node in t.nodes.values_mut() {
            match &mut node.kind {
                Kind::File { cur, dur } => dur.clone_from(cur),
                Kind::Dir { cur, dur } => dur.clone_from(cur),
                Kind::Special(_) => {}
            }
        }
    }

    /// What happened so far.
    pub fn stats(&self) -> Stats {
        self.lock().stats
    }
}

/// Why this machine cannot run power-loss tests (`None`: it can): no `/dev/fuse`, or a
/// mount fails (not root, no `fusermount`, a container without the right).
pub fn unavailable() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse does not exist".into());
    }
    // A mount point of this call's own: tests of one process probe at the same time, and two
    // mounts on one folder, one unmounted under the other, hung a test.
    static PROBES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("powerloss-probe-{}-{n}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return Some(format!("cannot make a mount point: {e}"));
    }
    let fs = PowerFs::new();
    let out = match fs.mount(&dir) {
        Ok(m) => {
            let probe = std::fs::write(dir.join("probe"), b"x");
            let _ = m.unmount();
            probe
                .err()
                .map(|e| format!("the mounted file system does not work: {e}"))
        }
        Err(e) => Some(format!("mounting a FUSE file system failed: {e}")),
    };
    let _ = std::fs::remove_dir(&dir);
    out
}

/// The FUSE side of a [`PowerFs`].
struct Fs {
    fs: PowerFs,
}

impl Tree {
    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let n = self.nodes.get(&ino)?;
        let (kind, size, nlink) = match &n.kind {
            Kind::File { cur, .. } => (FileType::RegularFile, cur.len() as u64, 1),
            Kind::Dir { .. } => (FileType::Directory, 0, 2),
            Kind::Special(k) => (*k, 0, 1),
        };
        Some(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: n.atime,
            mtime: n.mtime,
            ctime: n.ctime,
            crtime: n.ctime,
            kind,
            perm: n.perm,
            nlink,
            uid: n.uid,
            gid: n.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    fn dir(&mut self, ino: u64) -> Result<&mut BTreeMap<OsString, u64>, Errno> {
        match self.nodes.get_mut(&ino).map(|n| &mut n.kind) {
            Some(Kind::Dir { cur, .. }) => Ok(cur),
            Some(_) => Err(Errno::ENOTDIR),
            None => Err(Errno::ENOENT),
        }
    }

    fn file(&mut self, ino: u64) -> Result<&mut Vec<u8>, Errno> {
        match self.nodes.get_mut(&ino).map(|n| &mut n.kind) {
            Some(Kind::File { cur, .. }) => Ok(cur),
            Some(Kind::Dir { .. }) => Err(Errno::EISDIR),
            Some(Kind::Special(_)) => Err(Errno::EINVAL),
            None => Err(Errno::ENOENT),
        }
    }

    /// Makes a new node named `name` in `parent`.
    fn make(
        &mut self,
        req: &Request,
        parent: u64,
        name: &OsStr,
        kind: Kind,
        mode: u32,
        umask: u32,
    ) -> Result<FileAttr, Errno> {
        let dir = self.dir(parent)?;
        if dir.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        let ino = self.next;
        self.next += 1;
        self.dir(parent)?.insert(name.to_owned(), ino);
        self.nodes.insert(
            ino,
            Node {
                kind,
                perm: (mode & !umask & 0o7777) as u16,
                uid: req.uid(),
                gid: req.gid(),
                atime: now(),
                mtime: now(),
                ctime: now(),
            },
        );
        self.attr(ino).ok_or(Errno::EIO)
    }

    fn is_empty_dir(&self, ino: u64) -> bool {
        matches!(self.nodes.get(&ino).map(|n| &n.kind), Some(Kind::Dir { cur, .. }) if cur.is_empty())
    }
}

fn time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => now(),
    }
}

impl Filesystem for Fs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut t = self.fs.lock();
        let found = t.dir(parent.0).map(|d| d.get(name).copied());
        match found {
            Ok(Some(ino)) => match t.attr(ino) {
                Some(a) => reply.entry(&TTL, &a, Generation(0)),
                None => reply.error(Errno::ENOENT),
            },
            Ok(None) => reply.error(Errno::ENOENT),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.fs.lock().attr(ino.0) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut t = self.fs.lock();
        if let Some(size) = size {
            match t.file(ino.0) {
                Ok(cur) => cur.resize(usize::try_from(size).unwrap_or(usize::MAX), 0),
                Err(e) => return reply.error(e),
            }
        }
        let Some(n) = t.nodes.get_mut(&ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        if let Some(m) = mode {
            n.perm = (m & 0o7777) as u16;
        }
        if let Some(u) = uid {
            n.uid = u;
        }
        if let Some(g) = gid {
            n.gid = g;
        }
        if let Some(a) = atime {
            n.atime = time(a);
        }
        if let Some(m) = mtime {
            n.mtime = time(m);
        } else if size.is_some() {
            n.mtime = now();
        }
        n.ctime = now();
        match t.attr(ino.0) {
            Some(a) => reply.attr(&TTL, &a),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        let kind = match mode & 0o170000 {
            0o100000 | 0 => Kind::File {
                cur: Vec::new(),
                dur: Vec::new(),
            },
            0o140000 => Kind::Special(FileType::Socket),
            0o010000 => Kind::Special(FileType::NamedPipe),
            _ => return reply.error(Errno::EPERM),
        };
        match self.fs.lock().make(req, parent.0, name, kind, mode, umask) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let kind = Kind::Dir {
            cur: BTreeMap::new(),
            dur: BTreeMap::new(),
        };
        match self.fs.lock().make(req, parent.0, name, kind, mode, umask) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut t = self.fs.lock();
        let ino = match t.dir(parent.0).map(|d| d.get(name).copied()) {
            Ok(Some(ino)) => ino,
            Ok(None) => return reply.error(Errno::ENOENT),
            Err(e) => return reply.error(e),
        };
        if matches!(t.nodes.get(&ino).map(|n| &n.kind), Some(Kind::Dir { .. })) {
            return reply.error(Errno::EISDIR);
        }
        if let Ok(d) = t.dir(parent.0) {
            d.remove(name);
        }
        reply.ok();
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let mut t = self.fs.lock();
        let ino = match t.dir(parent.0).map(|d| d.get(name).copied()) {
            Ok(Some(ino)) => ino,
            Ok(None) => return reply.error(Errno::ENOENT),
            Err(e) => return reply.error(e),
        };
        if !matches!(t.nodes.get(&ino).map(|n| &n.kind), Some(Kind::Dir { .. })) {
            return reply.error(Errno::ENOTDIR);
        }
        if !t.is_empty_dir(ino) {
            return reply.error(Errno::ENOTEMPTY);
        }
        if let Ok(d) = t.dir(parent.0) {
            d.remove(name);
        }
        reply.ok();
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let mut t = self.fs.lock();
        let bits = flags.bits();
        // RENAME_EXCHANGE and RENAME_WHITEOUT are not modelled.
        if bits & !1 != 0 {
            return reply.error(Errno::EINVAL);
        }
        let ino = match t.dir(parent.0).map(|d| d.get(name).copied()) {
            Ok(Some(ino)) => ino,
            Ok(None) => return reply.error(Errno::ENOENT),
            Err(e) => return reply.error(e),
        };
        let target = match t.dir(newparent.0).map(|d| d.get(newname).copied()) {
            Ok(x) => x,
            Err(e) => return reply.error(e),
        };
        if let Some(old) = target {
            if bits & 1 != 0 {
                return reply.error(Errno::EEXIST);
            }
            if old == ino {
                return reply.ok();
            }
            let src_dir = matches!(t.nodes.get(&ino).map(|n| &n.kind), Some(Kind::Dir { .. }));
            let dst_dir = matches!(t.nodes.get(&old).map(|n| &n.kind), Some(Kind::Dir { .. }));
            if dst_dir && !src_dir {
                return reply.error(Errno::EISDIR);
            }
            if src_dir && !dst_dir {
                return reply.error(Errno::ENOTDIR);
            }
            if dst_dir && !t.is_empty_dir(old) {
                return reply.error(Errno::ENOTEMPTY);
            }
        }
        if let Ok(d) = t.dir(parent.0) {
            d.remove(name);
        }
        if let Ok(d) = t.dir(newparent.0) {
            d.insert(newname.to_owned(), ino);
        }
        if let Some(n) = t.nodes.get_mut(&ino) {
            n.ctime = now();
        }
        reply.ok();
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if self.fs.lock().nodes.contains_key(&ino.0) {
            reply.opened(FileHandle(0), FopenFlags::empty());
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let mut t = self.fs.lock();
        match t.file(ino.0) {
            Ok(cur) => {
                let start = usize::try_from(offset).unwrap_or(usize::MAX).min(cur.len());
                let end = start.saturating_add(size as usize).min(cur.len());
                reply.data(&cur[start..end]);
            }
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut t = self.fs.lock();
        match t.file(ino.0) {
            Ok(cur) => {
                let Ok(start) = usize::try_from(offset) else {
                    return reply.error(Errno::EFBIG);
                };
                let end = start + data.len();
                if cur.len() < end {
                    cur.resize(end, 0);
                }
                cur[start..end].copy_from_slice(data);
                if let Some(n) = t.nodes.get_mut(&ino.0) {
                    n.mtime = now();
                }
                reply.written(data.len() as u32);
            }
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let mut t = self.fs.lock();
        t.stats.file_syncs += 1;
        match t.nodes.get_mut(&ino.0).map(|n| &mut n.kind) {
            Some(Kind::File { cur, dur }) => {
                dur.clone_from(cur);
                reply.ok();
            }
            Some(_) => reply.ok(),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let mut t = self.fs.lock();
        let entries: Vec<(OsString, u64)> = match t.dir(ino.0) {
            Ok(d) => d.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            Err(e) => return reply.error(e),
        };
        let mut all = vec![
            (OsString::from("."), ino.0, FileType::Directory),
            (OsString::from(".."), ino.0, FileType::Directory),
        ];
        for (name, child) in entries {
            if let Some(a) = t.attr(child) {
                all.push((name, child, a.kind));
            }
        }
        for (i, (name, child, kind)) in all.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(child), (i + 1) as u64, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let mut t = self.fs.lock();
        t.stats.dir_syncs += 1;
        match t.nodes.get_mut(&ino.0).map(|n| &mut n.kind) {
            Some(Kind::Dir { cur, dur }) => {
                dur.clone_from(cur);
                reply.ok();
            }
            Some(_) => reply.error(Errno::ENOTDIR),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(1 << 24, 1 << 23, 1 << 23, 1 << 20, 1 << 19, 4096, 255, 4096);
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        if self.fs.lock().nodes.contains_key(&ino.0) {
            reply.ok();
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let kind = Kind::File {
            cur: Vec::new(),
            dur: Vec::new(),
        };
        match self.fs.lock().make(req, parent.0, name, kind, mode, umask) {
            Ok(a) => reply.created(&TTL, &a, Generation(0), FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }
}
