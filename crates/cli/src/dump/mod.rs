//! `shoal dump SOURCE` and `shoal load FILE DEST`: a namespace written as
//! a stream of records and made again from one, between any two kinds of
//! store (a store directory, etcd), the format in docs/dump.md.
//!
//! A store directory that is mounted is dumped by its daemon, from a
//! snapshot of its records taken after a sync (`control.rs`, "dump"): the
//! dump is the filesystem as it was at one instant, with every operation
//! acknowledged before `shoal dump` started.

pub mod format;
pub mod load;
pub mod tree;
pub mod walk;

use crate::args::{DumpArgs, LoadArgs};
use format::{Counts, Head};
use shoal_cluster::ns::{ClusterFs, SessionOpts};
use shoal_cluster::pinned::Pinned;
use shoal_cluster::KvError;
use shoal_core::{Config, Engine};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tree::{EngineTree, SharedTree, Sink};

/// An engine on `store` that only reads: no atime, no sweep, a small cache.
pub fn reading_engine(store: Arc<dyn shoal_core::Store>) -> shoal_core::Result<Arc<Engine>> {
    Engine::open(
        store,
        Config {
            read_only: true,
            sweep_data: false,
            atime: shoal_core::Atime::Never,
            cache_bytes: 64 << 20,
            ..Config::default()
        },
    )
}

/// The engine a load into a store directory writes through: a cache of
/// 64 MiB, not a mount's 256. A load makes each inode once and reads back
/// only the directories open on its path, so a bigger cache only holds
/// inodes it will not touch again: at 10M files, 595 MB peak RSS with the
/// default, over issue 42's 500 MB (docs/perf-log/28-dump-load.md).
fn loading_config() -> Config {
    Config {
        cache_bytes: 64 << 20,
        ..Config::default()
    }
}

/// Where the tree's errors are told: what was being done, then why.
fn fs_err(what: &str, e: shoal_core::Error) -> String {
    format!("{what}: {e}")
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A progress line on a terminal: records and bytes so far.
struct Bar(Option<indicatif::ProgressBar>);

impl Bar {
    fn new(what: &'static str) -> Bar {
        use std::io::IsTerminal;
        if !std::io::stderr().is_terminal() {
            return Bar(None);
        }
        let b = indicatif::ProgressBar::new_spinner();
        b.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {elapsed} {msg}").expect("template"),
        );
        b.enable_steady_tick(Duration::from_millis(200));
        b.set_message(what);
        Bar(Some(b))
    }
    fn show(&self, c: &Counts) {
        if let Some(b) = &self.0 {
            if c.nodes.is_multiple_of(1024) {
                b.set_message(format!(
                    "{} inodes, {} links, {} MiB",
                    c.nodes,
                    c.links,
                    c.bytes >> 20
                ));
            }
        }
    }
    fn bytes(&self, n: u64) {
        if let Some(b) = &self.0 {
            b.set_message(format!("{} MiB of dump", n >> 20));
        }
    }
    fn done(&self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}

impl walk::Progress for Bar {
    fn tick(&self, c: &Counts) {
        self.show(c)
    }
}

/// Where a dump goes: a file (written whole, then renamed into place, so a
/// failed dump leaves no file that looks like one) or standard output;
/// gzip when asked or when the file's name ends in `.gz`.
struct Output {
    w: Box<dyn Write>,
    tmp: Option<(std::path::PathBuf, std::path::PathBuf)>,
}

impl Output {
    fn open(a: &DumpArgs) -> Result<Output, String> {
        let (raw, tmp): (Box<dyn Write>, _) = match a.output.as_deref() {
            None => (Box::new(std::io::stdout().lock()), None),
            Some(p) if p == Path::new("-") => (Box::new(std::io::stdout().lock()), None),
            Some(p) => {
                let t = p.with_extension(format!(
                    "{}partial",
                    p.extension()
                        .map(|e| format!("{}.", e.to_string_lossy()))
                        .unwrap_or_default()
                ));
                let f = std::fs::File::create(&t)
                    .map_err(|e| format!("create {}: {e}", t.display()))?;
                (Box::new(f), Some((t, p.to_path_buf())))
            }
        };
        let gz = a.gzip
            || a.output
                .as_deref()
                .is_some_and(|p| p.extension().is_some_and(|e| e == "gz"));
        let w: Box<dyn Write> = if gz {
            Box::new(flate2::write::GzEncoder::new(
                std::io::BufWriter::with_capacity(1 << 20, raw),
                flate2::Compression::fast(),
            ))
        } else {
            Box::new(std::io::BufWriter::with_capacity(1 << 20, raw))
        };
        Ok(Output { w, tmp })
    }

    /// Flush (the gzip trailer too) and move the file into place.
    fn commit(mut self) -> Result<(), String> {
        self.w.flush().map_err(|e| format!("write the dump: {e}"))?;
        drop(self.w);
        if let Some((t, p)) = self.tmp.take() {
            let f = std::fs::File::open(&t).map_err(|e| e.to_string())?;
            f.sync_all()
                .map_err(|e| format!("sync {}: {e}", t.display()))?;
            std::fs::rename(&t, &p).map_err(|e| format!("rename to {}: {e}", p.display()))?;
        }
        Ok(())
    }

    fn abandon(self) {
        drop(self.w);
        if let Some((t, _)) = &self.tmp {
            let _ = std::fs::remove_file(t);
        }
    }
}

pub fn cmd_dump(a: &DumpArgs) -> Result<i32, String> {
    let src = a.source.to_string_lossy().to_string();
    let out = Output::open(a)?;
    let bar = Bar::new("dumping");
    let r = dump_to(a, &src, out, &bar);
    bar.done();
    let c = r?;
    eprintln!(
        "dumped {}: {} inodes, {} more names, {} bytes of file data",
        shoal_etcd::redact(&src),
        c.nodes,
        c.links,
        c.bytes
    );
    Ok(0)
}

fn dump_to(a: &DumpArgs, src: &str, mut out: Output, bar: &Bar) -> Result<Counts, String> {
    let head = |point: &str| Head {
        version: format::VERSION,
        source: shoal_etcd::redact(src),
        taken: now(),
        point: point.into(),
        subtree: a.subtree.clone().unwrap_or_else(|| "/".into()),
    };
    let subtree = a.subtree.clone().unwrap_or_default();
    let r = if crate::is_shared(src) {
        // At one revision where the store keeps them (etcd), else live.
        let store = crate::shared_connect(src)?;
        let (store, point): (Arc<dyn shoal_cluster::ClusterStore>, String) =
            match Pinned::now(store.clone()) {
                Ok(p) => {
                    let point = format!("revision {}", p.revision_pinned());
                    (Arc::new(p), point)
                }
                Err(KvError::Unsupported(_)) => (store, "live".into()),
                Err(e) => return Err(format!("{}: {e}", shoal_etcd::redact(src))),
            };
        let fs = open_shared_on(store, src, "dump")?;
        let t = SharedTree(fs.clone());
        let r = walk::resolve(&t, &subtree)
            .and_then(|root| walk::dump(&t, root, head(&point), &mut out.w, bar))
            .map_err(|e| {
                if e.contains("compacted") || e.contains("not found") || e.contains("No such") {
                    format!(
                        "{e} (the namespace changed past what etcd or the object store keeps of \
                         the dump's revision: take the dump again, at a quieter time or with \
                         etcd's auto-compaction retention longer than a dump takes)"
                    )
                } else {
                    e
                }
            });
        let _ = fs.close();
        r
    } else if let Some(sock) = daemon_socket(&a.source) {
        // Mounted: its daemon dumps a snapshot and streams it here.
        from_daemon(&sock, &head("snapshot"), &mut out.w, bar)
    } else {
        let store = shoal_store::FjallStore::open_read_only(&a.source)
            .map_err(|e| crate::store_error(&a.source, e))?;
        let e = reading_engine(Arc::new(store)).map_err(|e| crate::store_error(&a.source, e))?;
        let t = EngineTree(e.clone());
        let r = walk::resolve(&t, &subtree)
            .and_then(|root| walk::dump(&t, root, head("unmounted"), &mut out.w, bar));
        let _ = e.shutdown();
        r
    };
    match r {
        Ok(c) => {
            out.commit()?;
            Ok(c)
        }
        Err(e) => {
            out.abandon();
            Err(e)
        }
    }
}

/// The control socket of the daemon serving store directory `store`, if
/// one answers.
fn daemon_socket(store: &Path) -> Option<std::path::PathBuf> {
    let s = crate::control::socket_of(store);
    std::os::unix::net::UnixStream::connect(&s).ok().map(|_| s)
}

/// Ask the daemon at `sock` for a dump and copy it to `out`, checking it
/// ends with its end record.
fn from_daemon(sock: &Path, head: &Head, out: &mut dyn Write, bar: &Bar) -> Result<Counts, String> {
    let mut c = std::os::unix::net::UnixStream::connect(sock)
        .map_err(|e| format!("cannot reach the daemon at {}: {e}", sock.display()))?;
    let req = serde_json::to_string(head).map_err(|e| e.to_string())?;
    c.write_all(format!("dump {req}\n").as_bytes())
        .map_err(|e| format!("ask the daemon for a dump: {e}"))?;
    let mut r = BufReader::with_capacity(1 << 20, c);
    let mut line = String::new();
    let mut total = 0u64;
    loop {
        line.clear();
        let n = r
            .read_line(&mut line)
            .map_err(|e| format!("read the daemon's dump: {e}"))?;
        if n == 0 {
            return Err(
                "the daemon's dump ended early (see its log, daemon.log beside the store)".into(),
            );
        }
        total += n as u64;
        // Only the last records are parsed: the end, or an error.
        if line.starts_with("{\"t\":\"end\"") || line.starts_with("{\"t\":\"error\"") {
            match serde_json::from_str::<format::Rec>(line.trim_end()) {
                Ok(format::Rec::End(cnt)) => {
                    out.write_all(line.as_bytes())
                        .map_err(|e| format!("write the dump: {e}"))?;
                    return Ok(cnt);
                }
                Ok(format::Rec::Failed { msg }) => {
                    return Err(format!("the daemon's dump failed: {msg}"))
                }
                _ => {}
            }
        }
        if line.starts_with("{\"t\":\"refused\"") {
            return Err(format!("the daemon refused the dump: {}", line.trim_end()));
        }
        out.write_all(line.as_bytes())
            .map_err(|e| format!("write the dump: {e}"))?;
        bar.bytes(total);
    }
}

/// The daemon's side of a dump of its mounted store: sync, snapshot the
/// records, and walk an engine that reads only the snapshot.
pub fn serve_dump(e: &Arc<Engine>, req: &str, out: &mut dyn Write) {
    let head: Head = match serde_json::from_str(req) {
        Ok(h) => h,
        Err(err) => {
            let _ = writeln!(out, "{{\"t\":\"refused\",\"msg\":\"{err}\"}}");
            return;
        }
    };
    let fail = |out: &mut dyn Write, msg: String| {
        let _ = walk::write_rec(out, &format::Rec::Failed { msg });
    };
    if let Err(err) = e.sync() {
        return fail(out, format!("sync before the snapshot: {err}"));
    }
    let snap = match e.store().snapshot() {
        Ok(s) => s,
        Err(err) => return fail(out, format!("snapshot: {err}")),
    };
    let se = match reading_engine(snap) {
        Ok(x) => x,
        Err(err) => return fail(out, format!("open the snapshot: {err}")),
    };
    let t = EngineTree(se.clone());
    let mut w = std::io::BufWriter::with_capacity(1 << 20, out);
    let r = walk::resolve(&t, &head.subtree);
    match r {
        Ok(root) => {
            if let Err(err) = walk::dump(&t, root, head, &mut w, &()) {
                tracing::warn!("dump: {err}");
            }
        }
        Err(err) => fail(&mut w, err),
    }
    let _ = w.flush();
    let _ = se.shutdown();
}

/// A session on the etcd namespace `src`, for a dump or a load.
fn open_shared(src: &str, what: &str) -> Result<Arc<ClusterFs>, String> {
    open_shared_on(crate::shared_connect(src)?, src, what)
}

fn open_shared_on(
    store: Arc<dyn shoal_cluster::ClusterStore>,
    src: &str,
    what: &str,
) -> Result<Arc<ClusterFs>, String> {
    let blobs = crate::daemon::data_store(&*store)
        .map_err(|e| format!("{}: {e}", shoal_etcd::redact(src)))?;
    let opts = SessionOpts {
        who: format!("shoal {what} pid {}", std::process::id()),
        // Without directory leases every change commits before it
        // answers: a directory's times, set after its entries, are then
        // not moved again by a batch committed later.
        dir_leases: false,
        // Every read from the store (at the dump's revision): no cache
        // that the change stream would bring past it.
        record_cache: 0,
        ..SessionOpts::default()
    };
    ClusterFs::open_with_data(store, blobs, opts)
        .map_err(|e| format!("{}: {e}", shoal_etcd::redact(src)))
}

pub fn cmd_load(a: &LoadArgs) -> Result<i32, String> {
    let dest = a.dest.to_string_lossy().to_string();
    // The input first: a bad dump makes no store.
    let raw: Box<dyn Read> = if a.file == Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(
            std::fs::File::open(&a.file).map_err(|e| format!("open {}: {e}", a.file.display()))?,
        )
    };
    let mut raw = BufReader::with_capacity(1 << 20, raw);
    let gz = raw
        .fill_buf()
        .map_err(|e| e.to_string())?
        .starts_with(&[0x1f, 0x8b]);
    let mut input: Box<dyn BufRead> = if gz {
        Box::new(BufReader::with_capacity(
            1 << 20,
            flate2::bufread::MultiGzDecoder::new(raw),
        ))
    } else {
        Box::new(raw)
    };
    let head = {
        let buf = input.fill_buf().map_err(|e| e.to_string())?;
        let end = buf.iter().position(|&b| b == b'\n').unwrap_or(buf.len());
        load::head(&String::from_utf8_lossy(&buf[..end]))?
    };
    let bar = Bar::new("loading");
    let tick = |c: &Counts| bar.show(c);
    let r = if crate::is_shared(&dest) {
        let store = crate::shared_connect(&dest)?;
        match shoal_cluster::ns::mkfs_with_data(&*store, a.data.as_deref()) {
            Ok(()) => {}
            Err(shoal_core::Error::Exists) if a.data.is_some() => {
                return Err(format!(
                    "{}: --data is for a new namespace and this one exists: load into it without --data, or into a new NAME",
                    shoal_etcd::redact(&dest)
                ))
            }
            Err(shoal_core::Error::Exists) => {}
            Err(e) => return Err(format!("{}: {e}", shoal_etcd::redact(&dest))),
        }
        let fs = open_shared(&dest, "load")?;
        let t = SharedTree(fs.clone());
        let r = refuse_non_empty(&t, &dest).and_then(|_| load::load(&mut input, &t, &tick));
        let _ = fs.close();
        r
    } else {
        let store = open_dest(&a.dest)?;
        let e = Engine::open(Arc::new(store), loading_config())
            .map_err(|e| crate::store_error(&a.dest, e))?;
        let t = EngineTree(e.clone());
        let r = refuse_non_empty(&t, &dest).and_then(|_| load::load(&mut input, &t, &tick));
        e.shutdown()
            .map_err(|err| crate::store_error(&a.dest, err))?;
        r
    };
    bar.done();
    let l = r?;
    eprintln!(
        "loaded {} (dumped from {} at {}): {} inodes, {} more names, {} bytes of file data",
        shoal_etcd::redact(&dest),
        head.source,
        head.taken,
        l.counts.nodes,
        l.counts.links,
        l.counts.bytes
    );
    if l.flags_lost > 0 {
        eprintln!(
            "warning: {} inodes had chattr flags, which the destination does not keep: they were loaded without them",
            l.flags_lost
        );
    }
    Ok(0)
}

fn refuse_non_empty(t: &dyn Sink, dest: &str) -> Result<(), String> {
    if t.root_entries().map_err(|e| e.to_string())? > 0 {
        return Err(format!(
            "{} is not empty: a load makes a whole namespace and never merges into one; \
             load into a new store directory (`shoal load FILE NEWDIR` makes it) or a new etcd name \
             (`shoal load FILE etcd://H:P/NEWNAME --data URL`)",
            shoal_etcd::redact(dest)
        ));
    }
    Ok(())
}

/// The store directory a load writes: made if missing or empty, else an
/// existing (unmounted) store.
fn open_dest(p: &Path) -> Result<shoal_store::FjallStore, String> {
    if daemon_socket(p).is_some() {
        return Err(format!(
            "{} is mounted: unmount it (`shoal umount MNT`), or load into a new store directory",
            p.display()
        ));
    }
    let empty = match std::fs::read_dir(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(format!("{}: {e}", p.display())),
        Ok(mut d) => d.next().is_none(),
    };
    if empty {
        return shoal_store::FjallStore::create(p, |s| Engine::mkfs(s, 16))
            .map_err(|e| crate::store_error(p, e));
    }
    shoal_store::FjallStore::open(p).map_err(|e| crate::store_error(p, e))
}
