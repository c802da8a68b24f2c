//! A SQLite VFS that writes each commit's WAL frames with one system call.
//!
//! SQLite writes a WAL frame as two `pwrite`s, its 24-byte header and then the page, and a
//! frame (4,120 bytes) straddles two pages of the kernel's page cache. A one-message ingest
//! commits about 20 frames: 40 system calls and some 60 page-cache operations, which `perf`
//! put at about half the commit. This VFS wraps the platform's default one and, for WAL files
//! only, keeps a run of contiguous frame writes in memory and writes it in one call when the
//! commit frame's page is written. Everything else goes straight through: the database file,
//! rollback journals, the shared-memory index and every lock are the default VFS's own, so
//! processes that use the default VFS (lossless-claw, the `sqlite3` shell) share the files
//! as before, and the files' contents are byte for byte what SQLite wrote.
//!
//! Why nothing can be lost or seen early:
//! - Bytes reach the file in the order SQLite wrote them: a run is written before any other
//!   operation on the file (read, sync, truncate, size, lock, control, close) and before any
//!   write that does not continue it.
//! - Only a frame header that does not end a transaction, or the log's own header, starts a
//!   run, and a commit frame's header only joins a run it continues; the write after a commit
//!   header (its page) leaves nothing in memory when it returns. So when SQLite goes on to publish the commit
//!   in the shared index, every frame of it is in the file, and a failed write fails the
//!   `xWrite` of the commit frame: SQLite rolls the transaction back and reports the error.
//! - Every other write (a page rewritten in place, a commit header SQLite rewrites with new
//!   checksums, a write split around a sync point) goes straight through.
//!
//! A crash loses what SQLite had not finished writing anyway (an unfinished transaction); the
//! log's checksums make readers and recovery ignore it, as they would without this VFS.

use std::ffi::{c_int, c_void, CStr};
use std::ptr;
use std::sync::OnceLock;

use rusqlite::ffi;

use crate::error::{LcmError, Result};

/// The name connections open the VFS by.
pub(crate) const NAME: &CStr = c"lcm-wal-runs";

/// SQLite's WAL frame header (page number, commit size, salts, checksums).
const FRAME_HEADER: usize = 24;
/// The WAL file's own header, written at offset 0 when the log starts over.
const WAL_HEADER: usize = 32;
/// A run longer than this is written out (large transactions write their frames in pieces).
const MAX_RUN: usize = 1024 * 1024;
/// The most the unix VFS writes in one call: it masks a write's length with 0x1ffff, so a
/// longer run is written in pieces of this size.
const MAX_WRITE: usize = 0x1ffff;

/// A WAL file opened through this VFS. SQLite allocates `szOsFile` bytes for it: this struct,
/// then (at [`REAL_OFFSET`]) the default VFS's own file object.
#[repr(C)]
struct WalFile {
    base: ffi::sqlite3_file,
    run: Run,
}

/// Contiguous writes not yet made: `bytes` belong at `start`.
struct Run {
    start: i64,
    bytes: Vec<u8>,
    /// The last write was a commit frame's header: the next write ends the commit.
    ends_commit: bool,
}

const REAL_OFFSET: usize = std::mem::size_of::<WalFile>().next_multiple_of(16);

/// The default VFS this one wraps (set once, before registration).
static DEFAULT_VFS: OnceLock<usize> = OnceLock::new();

/// Registers the VFS (once per process) and returns its name, for `open_with_flags_and_vfs`.
pub(crate) fn vfs_name() -> Result<&'static CStr> {
    static REGISTERED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    match REGISTERED.get_or_init(register) {
        Ok(()) => Ok(NAME),
        Err(e) => Err(LcmError::Internal(e.clone())),
    }
}

fn register() -> std::result::Result<(), String> {
    // SAFETY: sqlite3_vfs_find initializes SQLite and returns the default VFS, which lives for
    // the whole process. The copy below is leaked, as SQLite keeps the registered pointer.
    unsafe {
        let default = ffi::sqlite3_vfs_find(ptr::null());
        if default.is_null() {
            return Err("SQLite has no default VFS".into());
        }
        let _ = DEFAULT_VFS.set(default as usize);
        // Every method but xOpen is the default VFS's, called with this copy, which carries
        // the same pAppData and limits.
        let mut vfs: ffi::sqlite3_vfs = *default;
        vfs.szOsFile = (REAL_OFFSET as c_int) + (*default).szOsFile;
        vfs.pNext = ptr::null_mut();
        vfs.zName = NAME.as_ptr();
        vfs.xOpen = Some(open);
        let rc = ffi::sqlite3_vfs_register(Box::leak(Box::new(vfs)), 0);
        match rc {
            ffi::SQLITE_OK => Ok(()),
            rc => Err(format!("cannot register the {NAME:?} SQLite VFS (code {rc})")),
        }
    }
}

/// The default VFS's file object inside a [`WalFile`].
///
/// # Safety
/// `f` points to a `WalFile` opened by [`open`].
unsafe fn inner(f: *mut ffi::sqlite3_file) -> *mut ffi::sqlite3_file {
    (f as *mut u8).add(REAL_OFFSET) as *mut ffi::sqlite3_file
}

unsafe fn inner_methods(f: *mut ffi::sqlite3_file) -> &'static ffi::sqlite3_io_methods {
    &*(*inner(f)).pMethods
}

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let Some(default) = DEFAULT_VFS.get().map(|&p| p as *mut ffi::sqlite3_vfs) else {
        return ffi::SQLITE_MISUSE;
    };
    let Some(default_open) = (*default).xOpen else {
        return ffi::SQLITE_MISUSE;
    };
    if flags & ffi::SQLITE_OPEN_WAL == 0 {
        // Not a log: the default VFS's file object, at the start of the allocation, as is.
        return default_open(default, name, file, flags, out_flags);
    }
    let rc = default_open(default, name, inner(file), flags, out_flags);
    if rc != ffi::SQLITE_OK || (*inner(file)).pMethods.is_null() {
        // SQLite reads pMethods after a failed open: NULL means nothing to close.
        (*file).pMethods = ptr::null();
        return rc;
    }
    ptr::write(
        file as *mut WalFile,
        WalFile {
            base: ffi::sqlite3_file { pMethods: &WAL_METHODS },
            run: Run {
                start: 0,
                bytes: Vec::new(),
                ends_commit: false,
            },
        },
    );
    rc
}

/// Version 1: the log needs no shared memory or memory mapping of its own (both belong to the
/// database file), so SQLite never asks this file for them.
static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 1,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: None,
    xUnfetch: None,
};

unsafe fn wal<'a>(f: *mut ffi::sqlite3_file) -> &'a mut WalFile {
    &mut *(f as *mut WalFile)
}

/// Writes the run, if any, with one call to the default VFS. The run is gone afterwards
/// either way: a failed write fails the transaction whose frames it held.
///
/// # Safety
/// `run` is the run of the `WalFile` at `f` (the caller's one borrow of it); the default VFS's
/// file object, reached through `f`, lies after that struct.
unsafe fn write_run(f: *mut ffi::sqlite3_file, run: &mut Run) -> c_int {
    if run.bytes.is_empty() {
        return ffi::SQLITE_OK;
    }
    #[cfg(test)]
    if let Some(code) = testing::injected_failure() {
        run.bytes.clear();
        return code;
    }
    let mut rc = ffi::SQLITE_OK;
    let mut offset = run.start;
    for piece in run.bytes.chunks(MAX_WRITE) {
        rc = write_through(f, piece.as_ptr() as *const c_void, piece.len() as c_int, offset);
        if rc != ffi::SQLITE_OK {
            break;
        }
        offset += piece.len() as i64;
    }
    #[cfg(test)]
    testing::count_write(run.bytes.len());
    run.bytes.clear();
    rc
}

/// Calls the default VFS's method on the file inside (every version-1 method is mandatory,
/// so a missing one is SQLite's misuse, reported rather than a panic across the C boundary).
macro_rules! forward {
    ($f:expr, $method:ident ( $($arg:expr),* )) => {
        match inner_methods($f).$method {
            Some(method) => method(inner($f) $(, $arg)*),
            None => ffi::SQLITE_MISUSE,
        }
    };
}

unsafe fn write_through(f: *mut ffi::sqlite3_file, data: *const c_void, amt: c_int, offset: i64) -> c_int {
    forward!(f, xWrite(data, amt, offset))
}

/// A frame header whose commit field (bytes 4..8, the database size after the commit) is set.
fn is_commit_header(data: &[u8]) -> bool {
    data.len() == FRAME_HEADER && data[4..8] != [0, 0, 0, 0]
}

unsafe extern "C" fn write(f: *mut ffi::sqlite3_file, data: *const c_void, amt: c_int, offset: i64) -> c_int {
    let bytes = std::slice::from_raw_parts(data as *const u8, amt.max(0) as usize);
    let commit_header = is_commit_header(bytes);
    // The one borrow of this file's state for the whole call.
    let run = &mut wal(f).run;
    let continues = !run.bytes.is_empty()
        && offset == run.start + run.bytes.len() as i64
        && run.bytes.len() + bytes.len() <= MAX_RUN;
    let rc = if run.ends_commit {
        // The write after a commit frame's header (its page): nothing stays in memory.
        if continues {
            run.bytes.extend_from_slice(bytes);
            write_run(f, run)
        } else {
            match write_run(f, run) {
                ffi::SQLITE_OK => write_through(f, data, amt, offset),
                rc => rc,
            }
        }
    } else if continues {
        run.bytes.extend_from_slice(bytes);
        ffi::SQLITE_OK
    } else {
        match write_run(f, run) {
            ffi::SQLITE_OK => {
                let starts_run =
                    !commit_header && (bytes.len() == FRAME_HEADER || (bytes.len() == WAL_HEADER && offset == 0));
                if starts_run {
                    run.start = offset;
                    run.bytes.extend_from_slice(bytes);
                    ffi::SQLITE_OK
                } else {
                    write_through(f, data, amt, offset)
                }
            }
            rc => rc,
        }
    };
    run.ends_commit = commit_header && rc == ffi::SQLITE_OK;
    rc
}

unsafe extern "C" fn close(f: *mut ffi::sqlite3_file) -> c_int {
    let rc = write_run(f, &mut wal(f).run);
    ptr::drop_in_place(&mut wal(f).run);
    let closed = forward!(f, xClose());
    if rc != ffi::SQLITE_OK {
        rc
    } else {
        closed
    }
}

/// Writes the run first, then calls the default VFS's method.
macro_rules! after_run {
    ($f:expr, $method:ident ( $($arg:expr),* )) => {{
        let rc = write_run($f, &mut wal($f).run);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        forward!($f, $method($($arg),*))
    }};
}

unsafe extern "C" fn read(f: *mut ffi::sqlite3_file, buf: *mut c_void, amt: c_int, offset: i64) -> c_int {
    after_run!(f, xRead(buf, amt, offset))
}

unsafe extern "C" fn truncate(f: *mut ffi::sqlite3_file, size: i64) -> c_int {
    after_run!(f, xTruncate(size))
}

unsafe extern "C" fn sync(f: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    after_run!(f, xSync(flags))
}

unsafe extern "C" fn file_size(f: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    after_run!(f, xFileSize(size))
}

unsafe extern "C" fn lock(f: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    after_run!(f, xLock(level))
}

unsafe extern "C" fn unlock(f: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    after_run!(f, xUnlock(level))
}

unsafe extern "C" fn check_reserved_lock(f: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    after_run!(f, xCheckReservedLock(out))
}

unsafe extern "C" fn file_control(f: *mut ffi::sqlite3_file, op: c_int, arg: *mut c_void) -> c_int {
    after_run!(f, xFileControl(op, arg))
}

unsafe extern "C" fn sector_size(f: *mut ffi::sqlite3_file) -> c_int {
    forward!(f, xSectorSize())
}

unsafe extern "C" fn device_characteristics(f: *mut ffi::sqlite3_file) -> c_int {
    forward!(f, xDeviceCharacteristics())
}

/// Test hooks, per thread (SQLite runs a connection's I/O on the thread that uses it).
#[cfg(test)]
pub(crate) mod testing {
    use std::cell::Cell;

    thread_local! {
        static WRITES: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
        static FAIL_NEXT: Cell<Option<i32>> = const { Cell::new(None) };
    }

    pub(super) fn count_write(bytes: usize) {
        WRITES.with(|w| {
            let (n, b) = w.get();
            w.set((n + 1, b + bytes as u64))
        });
    }

    /// Runs (their count and bytes) written on this thread so far.
    pub(crate) fn runs_written() -> (u64, u64) {
        WRITES.with(|w| w.get())
    }

    /// Makes the next run on this thread fail with `code` without being written, as a full
    /// disk would.
    pub(crate) fn fail_next_run(code: i32) {
        FAIL_NEXT.with(|f| f.set(Some(code)));
    }

    pub(super) fn injected_failure() -> Option<i32> {
        FAIL_NEXT.with(|f| f.take())
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use rusqlite::{Connection, OpenFlags};

    use super::testing::{fail_next_run, runs_written};
    use super::*;

    /// A connection through this VFS, in WAL mode as lcm-native's are.
    fn open_runs(path: &Path) -> Connection {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags_and_vfs(path, flags, vfs_name().unwrap()).unwrap();
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
            .unwrap();
        conn
    }

    fn db(dir: &tempfile::TempDir) -> PathBuf {
        dir.path().join("runs.db")
    }

    /// What SQLite's recovery makes of the log on disk: the file and its log copied (without
    /// the shared index, so the copy is rebuilt from the log's frames and checksums alone)
    /// and opened with the default VFS. A frame missing or out of order would end the log
    /// early there and lose the commits after it.
    fn recovered(path: &Path) -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("copy.db");
        std::fs::copy(path, &copy).unwrap();
        std::fs::copy(format!("{}-wal", path.display()), format!("{}-wal", copy.display())).unwrap();
        let conn = Connection::open(&copy).unwrap();
        let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(check, "ok");
        (dir, conn)
    }

    fn count(conn: &Connection, sql: &str) -> i64 {
        conn.query_row(sql, [], |r| r.get(0)).unwrap()
    }

    #[test]
    fn a_commit_is_in_the_file_when_it_returns_and_in_one_write() {
        let dir = tempfile::tempdir().unwrap();
        let conn = open_runs(&db(&dir));
        conn.execute_batch("CREATE TABLE t(x TEXT); CREATE INDEX t_x ON t(x);")
            .unwrap();
        let plain = Connection::open(db(&dir)).unwrap();
        for i in 0..50 {
            let (runs, bytes) = runs_written();
            conn.execute("INSERT INTO t VALUES (?1)", [format!("row {i}")]).unwrap();
            let (runs_after, bytes_after) = runs_written();
            // The table's page and the index's page, each a 4,120-byte frame, in one write.
            assert_eq!(runs_after - runs, 1);
            assert!(bytes_after - bytes >= 2 * 4120, "{}", bytes_after - bytes);
            assert_eq!(count(&plain, "SELECT count(*) FROM t"), i + 1);
        }
        let (_copy, recovered) = recovered(&db(&dir));
        assert_eq!(count(&recovered, "SELECT count(*) FROM t"), 50);
    }

    #[test]
    fn the_engines_connections_open_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = db(&dir).to_string_lossy().into_owned();
        let conn = super::super::open_connection(&path, 1000).unwrap();
        super::super::configure(&conn).unwrap();
        conn.execute_batch("CREATE TABLE t(x); CREATE INDEX t_x ON t(x);")
            .unwrap();
        let (runs, _) = runs_written();
        conn.execute_batch("INSERT INTO t VALUES (1)").unwrap();
        assert_eq!(runs_written().0 - runs, 1);
    }

    /// A transaction larger than the page cache writes frames before it commits (a spill),
    /// then rewrites some of them in place and their checksums after them; one rolled back
    /// after spilling leaves frames the next transaction overwrites.
    #[test]
    fn spilled_rewritten_and_rolled_back_transactions_recover_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let conn = open_runs(&db(&dir));
        conn.execute_batch("PRAGMA cache_size = 10; CREATE TABLE t(id INTEGER PRIMARY KEY, x BLOB);")
            .unwrap();
        let fill = |conn: &Connection, from: i64, n: i64| {
            for id in from..from + n {
                conn.execute("INSERT INTO t VALUES (?1, zeroblob(3000))", [id]).unwrap();
            }
        };
        conn.execute_batch("BEGIN").unwrap();
        fill(&conn, 0, 400);
        // Pages spilled early in the transaction, written again before it commits.
        conn.execute_batch("UPDATE t SET x = randomblob(3000) WHERE id < 20; COMMIT")
            .unwrap();
        // Pages spilled a moment ago (their frames maybe not yet written out), changed again:
        // SQLite rewrites those frames in place.
        conn.execute_batch("BEGIN").unwrap();
        for id in 400..700 {
            conn.execute("INSERT INTO t VALUES (?1, zeroblob(3000))", [id]).unwrap();
            if id % 7 == 0 {
                conn.execute("UPDATE t SET x = randomblob(3000) WHERE id = ?1 - 3", [id])
                    .unwrap();
            }
        }
        conn.execute_batch("COMMIT; BEGIN").unwrap();
        fill(&conn, 1000, 400);
        conn.execute_batch("ROLLBACK").unwrap();
        conn.execute_batch("INSERT INTO t VALUES (5000, x'00')").unwrap();
        let rows = |conn: &Connection| -> Vec<(i64, Vec<u8>)> {
            let mut stmt = conn.prepare("SELECT id, x FROM t ORDER BY id").unwrap();
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
            rows.map(|r| r.unwrap()).collect()
        };
        let expected = rows(&conn);
        assert_eq!(expected.len(), 701);

        let (_copy, recovered) = recovered(&db(&dir));
        assert_eq!(
            count(&recovered, "SELECT count(*) FROM t WHERE id >= 1000 AND id < 5000"),
            0
        );
        assert!(rows(&recovered) == expected, "the recovered rows differ");
    }

    #[test]
    fn a_failed_write_fails_the_commit_and_leaves_no_trace() {
        let dir = tempfile::tempdir().unwrap();
        let conn = open_runs(&db(&dir));
        // Two b-trees, so a commit writes two frames (a lone frame is written as it comes).
        conn.execute_batch("CREATE TABLE t(x TEXT); CREATE INDEX t_x ON t(x); INSERT INTO t VALUES ('kept');")
            .unwrap();
        fail_next_run(ffi::SQLITE_FULL);
        let err = conn.execute("INSERT INTO t VALUES ('lost')", []).unwrap_err();
        assert_eq!(err.sqlite_error_code(), Some(rusqlite::ErrorCode::DiskFull), "{err}");
        let plain = Connection::open(db(&dir)).unwrap();
        assert_eq!(count(&plain, "SELECT count(*) FROM t"), 1);
        assert_eq!(count(&conn, "SELECT count(*) FROM t"), 1);
        conn.execute("INSERT INTO t VALUES ('after')", []).unwrap();
        assert_eq!(count(&plain, "SELECT count(*) FROM t WHERE x <> 'lost'"), 2);
        let (_copy, recovered) = recovered(&db(&dir));
        assert_eq!(count(&recovered, "SELECT count(*) FROM t WHERE x = 'lost'"), 0);
        assert_eq!(count(&recovered, "SELECT count(*) FROM t"), 2);
    }

    /// Commits from a connection on the default VFS in between (another process, as far as
    /// the log is concerned), and checkpoints that restart the log at its header.
    #[test]
    fn interleaved_with_the_default_vfs_and_restarts_of_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let runs = open_runs(&db(&dir));
        runs.execute_batch("CREATE TABLE t(who TEXT, i INTEGER)").unwrap();
        let plain = Connection::open(db(&dir)).unwrap();
        for i in 0..120 {
            runs.execute("INSERT INTO t VALUES ('runs', ?1)", [i]).unwrap();
            if i % 3 == 0 {
                plain.execute("INSERT INTO t VALUES ('plain', ?1)", [i]).unwrap();
            }
            if i % 40 == 39 {
                let busy: i64 = plain
                    .query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| r.get(0))
                    .unwrap();
                assert_eq!(busy, 0);
            }
            assert_eq!(count(&plain, "SELECT count(*) FROM t WHERE who = 'runs'"), i + 1);
            assert_eq!(count(&runs, "SELECT count(*) FROM t WHERE who = 'plain'"), i / 3 + 1);
        }
        let (_copy, recovered) = recovered(&db(&dir));
        assert_eq!(count(&recovered, "SELECT count(*) FROM t"), 160);
    }

    /// One operation SQLite might make on a log file.
    #[derive(Debug, Clone)]
    enum Op {
        /// A frame header at the end (commit or not), or the log's header at offset 0.
        Header {
            commit: bool,
        },
        LogHeader,
        /// A page at the end.
        Page,
        /// A header or page written again where it already is (checksums, a spilled page).
        InPlace {
            at: usize,
            header: bool,
            commit: bool,
        },
        Read {
            at: usize,
            len: usize,
        },
        Sync,
        Size,
        Truncate {
            keep: usize,
        },
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            6 => any::<bool>().prop_map(|commit| Op::Header { commit }),
            8 => Just(Op::Page),
            1 => Just(Op::LogHeader),
            2 => (any::<usize>(), any::<bool>(), any::<bool>())
                .prop_map(|(at, header, commit)| Op::InPlace { at, header, commit }),
            2 => (any::<usize>(), 1usize..9000).prop_map(|(at, len)| Op::Read { at, len }),
            1 => Just(Op::Sync),
            1 => Just(Op::Size),
            1 => any::<usize>().prop_map(|keep| Op::Truncate { keep }),
        ]
    }

    /// A log file opened through the VFS by hand, as the pager opens one.
    struct LogFile {
        mem: Vec<u64>,
        path: PathBuf,
    }

    impl LogFile {
        fn open(dir: &tempfile::TempDir) -> LogFile {
            vfs_name().unwrap();
            std::fs::write(dir.path().join("log.db"), b"").unwrap();
            let path = dir.path().join("log.db-wal");
            // SQLite passes names with two NULs after them (room for URI parameters).
            let name = format!("{}\0\0", path.display());
            // SAFETY: the VFS registered by `vfs_name`; `mem` is as large as it asks for a file
            // (szOsFile), and `name` is NUL-terminated and kept alive (forgotten) as SQLite requires.
            unsafe {
                let vfs = ffi::sqlite3_vfs_find(NAME.as_ptr());
                let mut mem = vec![0u64; ((*vfs).szOsFile as usize).div_ceil(8)];
                let flags = ffi::SQLITE_OPEN_WAL | ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_CREATE;
                let mut out = 0;
                let rc = ((*vfs).xOpen.unwrap())(vfs, name.as_ptr().cast(), mem.as_mut_ptr().cast(), flags, &mut out);
                assert_eq!(rc, ffi::SQLITE_OK);
                std::mem::forget(name);
                LogFile { mem, path }
            }
        }

        fn file(&mut self) -> *mut ffi::sqlite3_file {
            self.mem.as_mut_ptr().cast()
        }

        fn methods(&mut self) -> &'static ffi::sqlite3_io_methods {
            // SAFETY: the file was opened by `open`, which set its methods (static tables).
            unsafe { &*(*self.file()).pMethods }
        }

        fn write(&mut self, bytes: &[u8], at: usize) -> c_int {
            let f = self.file();
            // SAFETY: an open file and a live buffer of `bytes.len()` bytes.
            unsafe { (self.methods().xWrite.unwrap())(f, bytes.as_ptr().cast(), bytes.len() as c_int, at as i64) }
        }

        fn on_disk(&self) -> Vec<u8> {
            std::fs::read(&self.path).unwrap()
        }
    }

    fn header(commit: bool, fill: u8) -> Vec<u8> {
        let mut h = vec![fill; FRAME_HEADER];
        h[4..8].copy_from_slice(&(commit as u32).to_be_bytes());
        h
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

        /// Whatever order of writes, reads, syncs and truncations SQLite makes, the file ends up
        /// as if every write had gone straight to it, every read sees every earlier write, and
        /// once the write after a commit header returns, the file holds everything written.
        #[test]
        fn the_file_is_as_if_written_straight_through(ops in proptest::collection::vec(op(), 1..120)) {
            let dir = tempfile::tempdir().unwrap();
            let mut log = LogFile::open(&dir);
            let mut model: Vec<u8> = Vec::new();
            let mut after_commit_header = false;
            for (i, op) in ops.iter().enumerate() {
                let fill = (i % 251) as u8 + 1;
                let f = log.file();
                let end = model.len();
                // Writes: the bytes and where; everything else is checked where it happens.
                let (bytes, at) = match *op {
                    Op::Header { commit } => (header(commit, fill), end),
                    Op::LogHeader => (vec![fill; WAL_HEADER], 0),
                    Op::Page => (vec![fill; 4096], end),
                    Op::InPlace { at, header: h, commit } => {
                        if end < 4096 {
                            continue;
                        }
                        (if h { header(commit, fill) } else { vec![fill; 4096] }, at % (end - 4095))
                    }
                    Op::Read { at, len } => {
                        if end == 0 {
                            continue;
                        }
                        let at = at % end;
                        let len = len.min(end - at);
                        let mut buf = vec![0u8; len];
                        // SAFETY: an open file and a buffer of `len` bytes.
                        let rc = unsafe { (log.methods().xRead.unwrap())(f, buf.as_mut_ptr().cast(), len as c_int, at as i64) };
                        proptest::prop_assert_eq!(rc, ffi::SQLITE_OK);
                        proptest::prop_assert!(buf == model[at..at + len], "read {} bytes at {} differ", len, at);
                        continue;
                    }
                    Op::Sync => {
                        // SAFETY: an open file.
                        let rc = unsafe { (log.methods().xSync.unwrap())(f, ffi::SQLITE_SYNC_NORMAL) };
                        proptest::prop_assert_eq!(rc, ffi::SQLITE_OK);
                        continue;
                    }
                    Op::Size => {
                        let mut size = 0i64;
                        // SAFETY: an open file and a live i64 for the size.
                        let rc = unsafe { (log.methods().xFileSize.unwrap())(f, &mut size) };
                        proptest::prop_assert_eq!(rc, ffi::SQLITE_OK);
                        // The unix VFS reports a one-byte file as empty (an old workaround).
                        proptest::prop_assert_eq!(size as usize, if end == 1 { 0 } else { end });
                        continue;
                    }
                    Op::Truncate { keep } => {
                        let keep = keep % (end + 1);
                        // SAFETY: an open file.
                        let rc = unsafe { (log.methods().xTruncate.unwrap())(f, keep as i64) };
                        proptest::prop_assert_eq!(rc, ffi::SQLITE_OK);
                        model.truncate(keep);
                        continue;
                    }
                };
                proptest::prop_assert_eq!(log.write(&bytes, at), ffi::SQLITE_OK);
                if model.len() < at + bytes.len() {
                    model.resize(at + bytes.len(), 0);
                }
                model[at..at + bytes.len()].copy_from_slice(&bytes);
                if after_commit_header {
                    proptest::prop_assert!(log.on_disk() == model, "a commit's frames are not all in the file");
                }
                after_commit_header = is_commit_header(&bytes);
            }
            let f = log.file();
            // SAFETY: an open file, closed once; not used after.
            proptest::prop_assert_eq!(unsafe { (log.methods().xClose.unwrap())(f) }, ffi::SQLITE_OK);
            proptest::prop_assert!(log.on_disk() == model, "the file differs from the writes made");
        }
    }
}
