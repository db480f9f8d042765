//! The daemon's control socket, `STORE/control.sock`: one request a
//! connection, a line the client writes ("stats", "sync" or "status"), one
//! JSON answer.
//! `shoal stats` reads counters through it, `shoal sync` makes everything
//! the mount acknowledged durable (the kernel does not pass sync(2) and
//! syncfs(2) on to a FUSE daemon: docs/design.md, "What sync means").

use serde_json::{json, Value};
use shoal_core::Engine;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub const SOCKET: &str = "control.sock";

/// Where the daemon serving `store` keeps its socket, pid file and (with
/// `-d`) its log: the store itself, or for a read-only mount, which writes
/// nothing there, a directory named after the store's path (`/` as `%`)
/// under `/run/shoal` (root), else under `$XDG_RUNTIME_DIR/shoal` or the
/// temporary directory.
pub fn run_dir(store: &Path, read_only: bool) -> std::path::PathBuf {
    if !read_only {
        return store.to_path_buf();
    }
    run_dir_named(&run_name(store))
}

/// The first run directory `name` can be made in (see `run_dir`): the
/// daemon's own, mode 0700 (its socket, pid file and log are for the user
/// who mounted and root only; one an older shoal made 0755 is narrowed).
fn run_dir_named(name: &str) -> std::path::PathBuf {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    for base in run_bases() {
        let d = base.join(name);
        if std::fs::create_dir_all(&base).is_err() {
            continue;
        }
        let made = std::fs::DirBuilder::new().mode(0o700).create(&d);
        if made.is_err() && !d.is_dir() {
            continue;
        }
        match std::fs::symlink_metadata(&d) {
            // Another user's directory (or a link) under a shared base is
            // not ours to use.
            Ok(m) if m.is_dir() && m.uid() == unsafe { libc::geteuid() } => {
                if m.mode() & 0o077 != 0 {
                    let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
                }
                return d;
            }
            _ => continue,
        }
    }
    std::env::temp_dir()
}

/// A store's run directory's name: its path with `/` as `%`.
fn run_name(store: &Path) -> String {
    store.to_string_lossy().replace('/', "%")
}

fn run_bases() -> Vec<std::path::PathBuf> {
    let mut v = vec![std::path::PathBuf::from("/run/shoal")];
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR") {
        v.push(Path::new(&x).join("shoal"));
    }
    v.push(std::env::temp_dir().join("shoal-run"));
    v
}

/// The control socket of the daemon serving `store`, read-only or not: the
/// one that answers (a killed daemon leaves its socket behind).
pub fn socket_of(store: &Path) -> std::path::PathBuf {
    run_bases()
        .into_iter()
        .map(|b| b.join(run_name(store)).join(SOCKET))
        .find(|p| UnixStream::connect(p).is_ok())
        .unwrap_or_else(|| store.join(SOCKET))
}

/// Serve the control socket of an embedded mount; its "stats" answer is
/// `snap`'s, the snapshot `-o metrics` encodes too.
pub fn serve(e: Arc<Engine>, snap: crate::metrics::Snapshot, info: Value, store: &Path) {
    // "dump HEAD": the dump of a snapshot streamed back (`crate::dump`), on
    // a thread of its own, so stats and sync answer meanwhile.
    let de = e.clone();
    let dump: Stream = Arc::new(move |req: &str, mut c: UnixStream| {
        let _ = c.set_read_timeout(None);
        crate::dump::serve_dump(&de, req, &mut c);
    });
    listen_with(&store.join(SOCKET), Some(dump), move |what| match what {
        "status" => crate::status::embedded_daemon_status(&e, &info),
        "sync" => match e.sync() {
            Ok(()) => json!({"synced": true, "durable_epoch": e.committer.durable_epoch()}),
            Err(err) => json!({"error": err.to_string()}),
        },
        _ => snap(),
    });
}

/// Serve the control socket at `path` on a thread of its own: for each
/// connection, one request line, `answer`'s JSON back. One at a time: a
/// sync waits for a commit, a few ms.
fn listen(path: &Path, answer: impl Fn(&str) -> Value + Send + 'static) {
    listen_with(path, None, answer)
}

/// A request answered by a stream of its own rather than one JSON value.
type Stream = Arc<dyn Fn(&str, UnixStream) + Send + Sync>;

/// `listen`, with requests "dump ..." handed with their connection to
/// `stream` on a thread of their own.
fn listen_with(
    path: &Path,
    stream: Option<Stream>,
    answer: impl Fn(&str) -> Value + Send + 'static,
) {
    let _ = std::fs::remove_file(path);
    let l = match UnixListener::bind(path) {
        Ok(l) => l,
        Err(err) => {
            tracing::warn!("no control socket at {}: {err}", path.display());
            return;
        }
    };
    // Connecting takes write permission on the socket: the user who
    // mounted and root only (stats, sync, status and dumps of the whole
    // namespace go through it). Its directory is 0700 too where it is ours
    // (`run_dir_named`); in a store directory, this is what guards it.
    {
        use std::os::unix::fs::PermissionsExt;
        if let Err(err) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
            tracing::warn!("control socket {}: {err}; not serving it", path.display());
            return;
        }
    }
    std::thread::Builder::new()
        .name("shoal-control".into())
        .spawn(move || {
            for mut c in l.incoming().flatten() {
                let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
                let mut line = String::new();
                if BufReader::new(&c).read_line(&mut line).is_err() {
                    continue;
                }
                if let (Some(req), Some(st)) = (line.trim().strip_prefix("dump "), &stream) {
                    let (req, st) = (req.to_string(), st.clone());
                    let _ = std::thread::Builder::new()
                        .name("shoal-dump".into())
                        .spawn(move || st(&req, c));
                    continue;
                }
                let _ = c.write_all(answer(line.trim()).to_string().as_bytes());
            }
        })
        .ok();
}

/// Where the daemon of an etcd mount keeps its control socket: per mount,
/// since several mounts of one namespace may run on one machine.
pub fn shared_run_dir(src: &str, mnt: &Path) -> std::path::PathBuf {
    run_dir_named(&shared_run_name(src, mnt))
}

fn shared_run_name(src: &str, mnt: &Path) -> String {
    // A hash, not the names: a socket's path must fit in 108 bytes, and an
    // etcd URL with three endpoints is most of that. The daemon and
    // `shoal stats` are the same binary, so the same hasher.
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (src, mnt).hash(&mut h);
    format!("etcd-mount-{:016x}", h.finish())
}

/// Where the run directory of etcd mount `src` at `mnt` may be, as seen
/// by any user (nothing made): another user's daemon's is under a base
/// this user could not make its own in.
pub fn shared_run_dirs(src: &str, mnt: &Path) -> Vec<std::path::PathBuf> {
    let name = shared_run_name(src, mnt);
    run_bases().into_iter().map(|b| b.join(&name)).collect()
}

/// The control socket of the daemon of etcd mount `src` at `mnt` (a
/// canonical path).
pub fn shared_socket(src: &str, mnt: &Path) -> std::path::PathBuf {
    shared_run_dir(src, mnt).join(SOCKET)
}

/// The control socket of an etcd mount's daemon: "stats" answers the
/// namespace's counters (transactions, conflicts, retries, object store
/// calls), "sync" commits every buffered write.
pub fn serve_shared(
    fs: Arc<shoal_cluster::ns::ClusterFs>,
    snap: crate::metrics::Snapshot,
    info: Value,
    dir: &Path,
) {
    listen(&dir.join(SOCKET), move |what| match what {
        "status" => info.clone(),
        "sync" => match fs.flush_all() {
            Ok(()) => json!({"synced": true}),
            Err(err) => json!({"error": err.to_string()}),
        },
        _ => snap(),
    });
}

/// Send `what` to the daemon behind `sock` and return its answer.
pub fn request(sock: &Path, what: &str) -> Result<Value, String> {
    let mut c = UnixStream::connect(sock)
        .map_err(|e| format!("cannot reach the daemon at {}: {e}", sock.display()))?;
    c.write_all(format!("{what}\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let mut s = String::new();
    c.read_to_string(&mut s).map_err(|e| e.to_string())?;
    serde_json::from_str(&s).map_err(|e| e.to_string())
}

/// `shoal sync MNT`: everything acknowledged on the mount is durable when
/// this returns 0.
pub fn cmd_sync(a: &crate::args::SyncArgs) -> Result<i32, String> {
    let m = crate::mountinfo::shoal_at(&a.mountpoint)?;
    if crate::is_shared(&m.source) {
        let mnt = std::fs::canonicalize(&a.mountpoint).map_err(|e| e.to_string())?;
        let sock = shared_socket(&m.source, &mnt);
        let v = request(&sock, "sync")?;
        return match v["error"].as_str() {
            None => Ok(0),
            Some(err) => Err(format!("{}: not synced: {err}", a.mountpoint.display())),
        };
    }
    let store = crate::mountinfo::store_of(&m.source);
    let v = request(&socket_of(&store), "sync")?;
    match v["error"].as_str() {
        None => Ok(0),
        Some(err) => Err(format!(
            "{}: not synced: {err}; the daemon's log says why ({}), and `shoal umount` then `shoal fsck {}` shows what is on disk",
            a.mountpoint.display(),
            store.join("daemon.log").display(),
            store.display()
        )),
    }
}
