//! `shoal mount` and `shoal umount`: the daemon's life.
//!
//! Foreground: open the store (walking it first with `-o verify`), start the
//! engine and the control socket, serve FUSE until unmounted, commit, exit.
//! `-d`: start the same command as a detached child logging to
//! `STORE/daemon.log`, and return once the mount shows in mountinfo.

use crate::args::{MountArgs, UmountArgs};
use crate::{mountinfo, store_error};
use shoal_core::{Config, Durability, Engine};
use shoal_fuse::{fuser::MountOption, FuseOptions, ShoalFs};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Parsed {
    pub cfg: Config,
    pub fuse: FuseOptions,
    pub mount: Vec<MountOption>,
    pub allow_other: bool,
    pub verify: bool,
    /// The mount's source as /proc/mounts shows it (default: the store's path).
    pub fsname: Option<String>,
    /// `metrics=ADDR:PORT`: serve Prometheus metrics there (`crate::metrics`).
    pub metrics: Option<String>,
    /// `reserve_mb=N`: the most the store's reserve file holds, in bytes.
    pub reserve_max: u64,
}

/// The least `memory_mb` a mount accepts (see the option's parsing).
const MEMORY_MB_MIN: u64 = 100;

pub fn parse_options(opts: &[String]) -> Result<Parsed, String> {
    let mut p = Parsed {
        cfg: Config::default(),
        fuse: FuseOptions::default(),
        mount: MOUNT_DEFAULTS.to_vec(),
        allow_other: false,
        // Mount costs what the journal holds, not what the store holds:
        // the full walk is fsck's, or `-o verify`'s.
        verify: false,
        fsname: None,
        metrics: None,
        reserve_max: shoal_store::fjall_store::DEFAULT_RESERVE_MAX,
    };
    for o in opts.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let (k, v) = match o.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (o, None),
        };
        let num = |v: Option<&str>| -> Result<u64, String> {
            v.ok_or_else(|| format!("option {k} needs a value"))?
                .parse::<u64>()
                .map_err(|_| format!("option {o}: not a number"))
        };
        match k {
            "allow_other" => p.allow_other = true,
            "default_permissions" | "kernel_permissions" => p.fuse.daemon_permissions = false,
            "ro" => {
                p.cfg.read_only = true;
                p.mount.push(MountOption::RO);
            }
            "relatime" => p.cfg.atime = shoal_core::Atime::Relative,
            "strictatime" | "norelatime" => p.cfg.atime = shoal_core::Atime::Strict,
            "noatime" => {
                p.cfg.atime = shoal_core::Atime::Never;
                p.mount.push(MountOption::NoAtime);
            }
            _ if vfs_option(k, &mut p.mount) => {}
            "durability" => {
                p.cfg.durability = match v {
                    Some("group") => Durability::Group,
                    Some("sync") => Durability::SyncEach,
                    Some("buffered") => Durability::Buffered,
                    _ => return Err(format!("option {o}: use durability=group|sync|buffered")),
                }
            }
            "commit_ms" => p.cfg.commit_interval_ms = num(v)?,
            "cache_mb" => p.cfg.cache_bytes = num(v)? << 20,
            "memory_mb" => {
                // What a mount takes whatever its files: the binary, FUSE's
                // threads and rings, fjall's smallest caches and the cache's
                // 16 MiB floor. Under 100, measured: memory_mb=64 peaked at
                // 70 MiB with 100K files and created 990 a second
                // (tests/scripts/memory-bound.sh with MEMORY_MB=64).
                let mb = num(v)?;
                if mb < MEMORY_MB_MIN {
                    return Err(format!(
                        "option {o}: a mount needs at least {MEMORY_MB_MIN} MiB; \
                         give memory_mb={MEMORY_MB_MIN} or more, or no memory_mb for no bound"
                    ));
                }
                p.cfg.memory_bytes = mb << 20;
            }
            "threads" => p.fuse.threads = num(v)?.max(1) as usize,
            "entry_ttl_ms" => p.fuse.entry_ttl = Duration::from_millis(num(v)?),
            "attr_ttl_ms" => p.fuse.attr_ttl = Duration::from_millis(num(v)?),
            "negative_ttl_ms" => p.fuse.negative_ttl = Duration::from_millis(num(v)?),
            "writeback_cache" => p.fuse.writeback_cache = true,
            "noreaddirplus" => p.fuse.readdirplus = false,
            "noxattr" => p.fuse.xattr = false,
            "readdirplus_always" => p.fuse.readdirplus_auto = false,
            "opendir" => p.fuse.no_opendir = false,
            "noclone_fd" => p.fuse.clone_fd = false,
            "noverify" => p.verify = false,
            "verify" => p.verify = true,
            "fsname" => {
                p.fsname = Some(
                    v.filter(|v| !v.is_empty())
                        .ok_or_else(|| format!("option {k} needs a value"))?
                        .to_string(),
                )
            }
            "metrics" => p.metrics = Some(metrics_addr(o, v)?),
            "reserve_mb" => p.reserve_max = num(v)? << 20,
            "errors" => {
                p.cfg.on_error = match v {
                    Some("shutdown") => shoal_core::OnError::Shutdown,
                    Some("ro") | Some("remount-ro") => shoal_core::OnError::ReadOnly,
                    _ => return Err(format!("option {o}: use errors=shutdown|ro")),
                }
            }
            "daemon_permissions" => p.fuse.daemon_permissions = true,
            "root_squash" => p.fuse.squash = shoal_fuse::Squash::Root,
            "all_squash" => p.fuse.squash = shoal_fuse::Squash::parse_all(v.unwrap_or(""))?,
            "keep_cache" => p.fuse.keep_cache = true,
            "uring" => p.fuse.uring = true,
            "nouring" => p.fuse.uring = false,
            "passthrough" => p.fuse.passthrough = true,
            "nopassthrough" => p.fuse.passthrough = false,
            "nodirect_create" => p.fuse.direct_create = false,
            "nordwr_passthrough" => p.fuse.rdwr_passthrough = false,
            "placement" => {
                p.cfg.placement = match v {
                    Some("near") => shoal_core::Placement::Near,
                    Some("spread") => shoal_core::Placement::Spread,
                    _ => return Err(format!("option {o}: use placement=near|spread")),
                }
            }
            _ => {
                return Err(format!(
                    "unknown mount option '{o}' (see `shoal mount --help`)"
                ))
            }
        }
    }
    if p.fuse.squash != shoal_fuse::Squash::None {
        // The kernel would check the caller's own uid (and let root do
        // anything): the daemon checks as who the request acts as.
        p.fuse.daemon_permissions = true;
    }
    if p.fuse.daemon_permissions {
        p.mount.retain(|m| *m != MountOption::DefaultPermissions);
    }
    if p.cfg.durability == Durability::SyncEach && p.fuse.passthrough {
        // The kernel writes a passthrough file's bytes without the daemon,
        // so nothing would sync them before the write returns.
        tracing::info!("durability=sync: passthrough off (each write is synced by the daemon)");
        p.fuse.passthrough = false;
    }
    Ok(p)
}

/// Whether a stat of a FUSE mountpoint failed because its daemon is gone
/// (kill -9, a crash): ENOTCONN once the kernel has aborted the connection,
/// and ECONNABORTED for a request that was in flight when it did (with FUSE
/// over io_uring the daemon's exit tears its rings down after the process
/// is gone, so a stat right after a kill can meet that window; in it a
/// request queued on the ring is also cancelled, ECANCELED: met once in 3
/// runs of tests/scripts/cli.sh).
fn daemon_gone(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOTCONN | libc::ECONNABORTED | libc::ECANCELED)
    )
}

fn check_mountpoint(m: &Path) -> Result<(), String> {
    let md = std::fs::metadata(m).map_err(|e| {
        if daemon_gone(&e) {
            // A FUSE mount whose daemon died (kill -9, crash): the kernel keeps
            // the mount until someone unmounts it.
            format!(
                "mountpoint {}: a dead mount is still there (its daemon exited); \
                 run `shoal umount {}` and mount again",
                m.display(),
                m.display()
            )
        } else {
            format!("mountpoint {}: {e}", m.display())
        }
    })?;
    if !md.is_dir() {
        return Err(format!("mountpoint {} is not a directory", m.display()));
    }
    if let Some((src, ty)) = mountinfo::find(m) {
        let root = mountinfo::find(Path::new("/")).map(|r| r.0);
        if Some(&src) != root.as_ref() || m != Path::new("/") {
            return Err(format!(
                "mountpoint busy: {} is already mounted ({ty} from {src})",
                m.display()
            ));
        }
    }
    Ok(())
}

pub fn cmd_mount(a: &MountArgs) -> Result<i32, String> {
    if a.store.to_str().is_some_and(crate::is_shared) {
        return mount_shared(a);
    }
    let mut a = a.clone();
    let store_arg = a.store.to_string_lossy().into_owned();
    if let Some(path) = store_arg.strip_prefix(mountinfo::SOURCE_PREFIX) {
        // `shoal:PATH`: the store at PATH, shown in /proc/mounts as given.
        a.store = path.into();
        a.options.push(format!("fsname={store_arg}"));
    }
    let a = &a;
    let parsed = parse_options(&a.options)?;
    let store_path = std::fs::canonicalize(&a.store)
        .map_err(|_| store_error(&a.store, shoal_core::Error::NotFound))?;
    check_mountpoint(&a.mountpoint)?;
    // Mounted over its own store, the daemon could no longer reach it: the
    // mount would serve, but nothing would find the store again by its path.
    let mnt_path = std::fs::canonicalize(&a.mountpoint)
        .map_err(|e| format!("mountpoint {}: {e}", a.mountpoint.display()))?;
    if store_path.starts_with(&mnt_path) {
        return Err(format!(
            "store {} lies inside mountpoint {}: the mount would hide it; mount it somewhere outside the store's path",
            store_path.display(),
            mnt_path.display()
        ));
    }
    // Not a store: say so here, before a background daemon logs into it.
    shoal_store::FjallStore::probe(&store_path).map_err(|e| store_error(&store_path, e))?;
    // One store has one daemon (it holds the store's lock): a store served
    // already is bound from its first mount, one filesystem in two places,
    // as mount(8) does with a second mount of an ext4 device (and as
    // /sbin/mount.fuse.shoal does).
    if let Some(first) = mountinfo::serving(&store_path) {
        return bind_first(&first, &mnt_path, parsed.cfg.read_only);
    }
    if a.daemon && !a.background_child {
        let run = crate::control::run_dir(&store_path, parsed.cfg.read_only);
        return spawn_background(a, &store_path, &run, None);
    }
    init_logging();
    // Bound before the store is opened: a mount whose metrics cannot be
    // served fails, saying why, and leaves the store as it was.
    let metrics = parsed
        .metrics
        .as_deref()
        .map(crate::metrics::Listener::bind)
        .transpose()?;
    // No transparent huge pages for the daemon. mimalloc advises them on its
    // arenas, so a 2 MiB region it purged and then reuses faults back in as
    // one huge page zeroed whole: 27% of the commit thread's cycles went to
    // clear_page under fsmark through the mount. Measured with the same
    // fsmark alternated three times: the commit thread's CPU 1.04-1.24 s ->
    // 0.95-0.99 s, each FUSE thread's 1.92-2.34 s -> 1.93-2.07 s
    // (docs/perf-log/08-shared-lines-threads-commits.md). Engine-mode benchmarks keep THP: there a
    // lookup in a 1M-entry directory gains from the fewer TLB misses.
    // SAFETY: prctl with integer arguments only; it sets a flag of this process.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
    // Under memory_mb, fjall's block cache and memtables take a sixteenth
    // of the bound (4 to 64 MiB each), not 64 MiB each: they are outside
    // the engine's cache, which shrinks to keep the rest under the bound.
    let bound = parsed.cfg.memory_bytes;
    if bound > 0 {
        // mimalloc returns freed pages to the system 10 ms after they empty
        // (its `purge_delay`); with the cache evicting thousands of objects
        // a second, that lag held 90-160 MB of a 200 MB bound (1M creates:
        // peak RSS 246 MB, glibc malloc 177 MB, the live heap 85 MB by
        // heaptrack). Purging at once: 158 MB, and the cache's budget was
        // no longer pinned at its floor (docs/perf-log/30-memory-bound.md).
        // 15 is `mi_option_purge_delay` in mimalloc's v2 and v3 headers; the
        // Rust bindings do not name it.
        // SAFETY: sets one of mimalloc's options; any value is valid.
        unsafe { libmimalloc_sys::mi_option_set(15, 0) };
    }
    let store = if bound > 0 {
        let share = (bound / 16).clamp(4 << 20, 64 << 20);
        shoal_store::FjallStore::open_bounded(&store_path, parsed.cfg.read_only, share)
    } else if parsed.cfg.read_only {
        shoal_store::FjallStore::open_read_only(&store_path)
    } else {
        shoal_store::FjallStore::open(&store_path)
    }
    .map_err(|e| store_error(&store_path, e))?;
    // The clean mark says the last daemon's final commit succeeded (`shoal
    // umount` reports a store left without it). It goes before this daemon
    // can change anything, so a crash from here on leaves the store unmarked.
    let clean_mark = store_path.join(CLEAN_MARK);
    let mut parsed = parsed;
    // Closed cleanly: no crash leftovers among the data objects to sweep.
    parsed.cfg.sweep_data = !clean_mark.exists();
    if !parsed.cfg.read_only && clean_mark.exists() {
        remove_durably(&clean_mark).map_err(|e| format!("{}: {e}", clean_mark.display()))?;
    }
    if parsed.verify {
        let r = shoal_core::fsck::fsck(&store, false).map_err(|e| store_error(&store_path, e))?;
        if !r.is_clean() {
            return Err(format!(
                "store {} has {} problems (first: {}); refusing to mount: run `shoal fsck {}`",
                store_path.display(),
                r.problems.len(),
                r.problems[0],
                store_path.display()
            ));
        }
    }
    if !parsed.cfg.read_only {
        // Room for deletes on a full device (see `FjallStore::keep_room`).
        store.set_reserve_max(parsed.reserve_max);
        store.keep_room();
    }
    let fjall = Arc::new(store);
    let store: Arc<dyn shoal_core::Store> = fjall.clone();
    let engine =
        Engine::open(store, parsed.cfg.clone()).map_err(|e| store_error(&store_path, e))?;
    let run = crate::control::run_dir(&store_path, parsed.cfg.read_only);
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(run.join("daemon.pid"))
            .and_then(|mut f| f.write_all(format!("{}\n", std::process::id()).as_bytes()));
    }
    let mnt = std::fs::canonicalize(&a.mountpoint).map_err(|e| e.to_string())?;
    watch_signals(mnt.clone());
    let mut mopts = parsed.mount.clone();
    mopts.push(MountOption::FSName(
        parsed
            .fsname
            .clone()
            .unwrap_or_else(|| store_path.display().to_string()),
    ));
    mopts.push(MountOption::Subtype("shoal".into()));
    tracing::info!("serving {} at {}", store_path.display(), mnt.display());
    let fs = ShoalFs::new(engine.clone(), parsed.fuse.clone());
    // Programs that reach the daemon without FUSE (docs/client.md).
    let mut clients = crate::clients::Server::new(
        engine.clone(),
        fs.notifier(),
        parsed.fuse.squash,
        parsed.allow_other,
        mnt.clone(),
    );
    clients.writers = Some(fs.client_writers());
    let clients = Arc::new(clients);
    let snap: crate::metrics::Snapshot = {
        let (e, r, c) = (engine.clone(), fs.requests(), clients.clone());
        Arc::new(move || {
            let mut v = crate::stats::snapshot(&e, Some(&r));
            v["client"] = c.stats();
            v
        })
    };
    let info = crate::status::daemon_info(&mnt, &a.options, parsed.cfg.read_only);
    crate::control::serve(engine.clone(), snap.clone(), info, &run);
    if let Err(e) = clients.listen(&run) {
        tracing::warn!("no client socket in {}: {e}", run.display());
    }
    if let Some(m) = metrics {
        m.start(snap);
    }
    let r = fs.mount(&mnt, mopts, parsed.allow_other);
    let mut fin = engine.shutdown();
    if fin.is_ok() && !parsed.cfg.read_only {
        // The next mount then replays an empty journal: its cost does not
        // grow with what this daemon wrote. Bounded: a store that failed
        // (or stopped answering) ends the wait with the reason.
        fin = fjall.flush_memtables();
    }
    // A store that failed shuts the filesystem down (`Committer::fail`):
    // the daemon exits non-zero saying what failed and what to do.
    let fin = fin.map_err(|e| {
        let why = engine.committer.failure().unwrap_or_else(|| e.to_string());
        let s = store_path.display();
        shoal_core::Error::Io(format!(
            "the store failed: {why}. What was fsync'ed before the failure is in its journal, \
             which replays at the next mount once the cause is cleared (a full or read-only device, \
             an immutable file, a failing disk: see the log above); then run `shoal fsck {s}`"
        ))
    });
    let _ = std::fs::remove_file(run.join("daemon.pid"));
    let _ = std::fs::remove_file(run.join(crate::control::SOCKET));
    let _ = std::fs::remove_file(run.join(crate::clients::SOCKET));
    r.map_err(|e| format!("mount {}: {e}", mnt.display()))?;
    fin.map_err(|e| store_error(&store_path, e))?;
    if !parsed.cfg.read_only {
        // Everything is committed: the next mount need not walk the store.
        if let Err(e) = write_durably(&clean_mark) {
            tracing::warn!(
                "{}: {e} (`shoal umount` will report the store as not closed cleanly)",
                clean_mark.display()
            );
        }
    }
    Ok(0)
}

/// The file whose presence says the last daemon closed the store cleanly.
pub const CLEAN_MARK: &str = "clean";

fn sync_dir(p: &Path) -> std::io::Result<()> {
    std::fs::File::open(p.parent().unwrap_or(Path::new(".")))?.sync_all()
}

fn write_durably(p: &Path) -> std::io::Result<()> {
    std::fs::File::create(p)?.sync_all()?;
    sync_dir(p)
}

fn remove_durably(p: &Path) -> std::io::Result<()> {
    std::fs::remove_file(p)?;
    sync_dir(p)
}

fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SHOAL_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,fuser=error")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        // The log may live on the store's own filesystem: when that disk is
        // full, a failed log write must not become a panic (eprintln! would).
        .log_internal_errors(false)
        .try_init();
}

/// SIGINT/SIGTERM unmount cleanly (lazy unmount, so the session ends and the
/// final commit runs).
fn watch_signals(mnt: std::path::PathBuf) {
    // SAFETY: plain libc signal-mask calls on this thread before other threads block them.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        std::thread::spawn(move || {
            let mut sig = 0;
            libc::sigwait(&set, &mut sig);
            tracing::info!("signal {sig}: unmounting {}", mnt.display());
            let c = std::ffi::CString::new(mnt.as_os_str().as_encoded_bytes()).unwrap_or_default();
            if libc::umount2(c.as_ptr(), libc::MNT_DETACH) != 0 {
                let _ = std::process::Command::new("fusermount3")
                    .arg("-uz")
                    .arg(&mnt)
                    .status();
            }
        });
    }
}

/// A daemon log grows by this much at most before the next mount starts
/// a new one (the last one kept as `daemon.log.1`): the run directory of
/// an etcd mount is in /run, which is memory.
const LOG_MAX: u64 = 1 << 20;

/// Open the daemon log at `path` to append, first moving it aside to
/// `daemon.log.1` (replacing the one there) if it reached `LOG_MAX`.
fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() >= LOG_MAX) {
        std::fs::rename(path, path.with_extension("log.1"))?;
    }
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    // The user who mounted and root only: the log names files and paths.
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(f)
}

/// Start the daemon of `store` in the background, its log in `run`.
fn spawn_background(
    a: &MountArgs,
    store: &Path,
    run: &Path,
    password: Option<String>,
) -> Result<i32, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let log_path = run.join("daemon.log");
    let log = open_log(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let start_len = log.metadata().map(|m| m.len()).unwrap_or(0);
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("mount")
        .arg(store)
        .arg(&a.mountpoint)
        .arg("--background-child");
    if !a.options.is_empty() {
        cmd.arg("-o").arg(a.options.join(","));
    }
    if let Some(p) = password {
        // Not on its command line, which every user can read in ps.
        cmd.env("META_PASSWORD", p);
    }
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    // SAFETY: setsid in the child between fork and exec is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("starting the daemon: {e}"))?;
    let t0 = Instant::now();
    loop {
        if let Some((src, ty)) = mountinfo::find(&a.mountpoint) {
            if mountinfo::is_shoal(&src, &ty) {
                println!(
                    "mounted {} at {} (daemon pid {}, log {})",
                    store.display(),
                    a.mountpoint.display(),
                    child.id(),
                    log_path.display()
                );
                return Ok(0);
            }
        }
        if let Ok(Some(st)) = child.try_wait() {
            let text = std::fs::read(&log_path).unwrap_or_default();
            let tail = String::from_utf8_lossy(&text[(start_len as usize).min(text.len())..])
                .trim()
                .to_string();
            let last = tail
                .lines()
                .last()
                .unwrap_or("")
                .trim_start_matches("shoal: ")
                .to_string();
            return Err(if last.is_empty() {
                format!("daemon exited ({st}) before mounting")
            } else {
                last
            });
        }
        if t0.elapsed() > Duration::from_secs(300) {
            return Err("daemon did not mount within 300 s".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Bind the mount `first` at `mnt` (read-only with `ro`); the first
/// mount's daemon and options serve both places.
fn bind_first(first: &mountinfo::Mount, mnt: &Path, read_only: bool) -> Result<i32, String> {
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap_or_default();
    let (from, to) = (c(&first.point), c(mnt));
    // SAFETY: valid C strings; null fstype and data are allowed for a bind.
    let mut rc = unsafe {
        libc::mount(
            from.as_ptr(),
            to.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    };
    if rc == 0 && read_only {
        // SAFETY: as above; a bind remount changes only this place's flags.
        rc = unsafe {
            libc::mount(
                std::ptr::null(),
                to.as_ptr(),
                std::ptr::null(),
                libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY,
                std::ptr::null(),
            )
        };
    }
    if rc != 0 {
        return Err(format!(
            "{} is already mounted at {}; binding it at {}: {}",
            first.source,
            first.point.display(),
            mnt.display(),
            std::io::Error::last_os_error()
        ));
    }
    println!(
        "{} is already mounted at {}: bound there at {}{} (one daemon serves both, with the first mount's options; \
         `shoal umount {}` unmounts this place only)",
        first.source,
        first.point.display(),
        mnt.display(),
        if read_only { ", read-only" } else { "" },
        mnt.display()
    );
    Ok(0)
}

pub fn cmd_umount(a: &UmountArgs) -> Result<i32, String> {
    let m = mountinfo::shoal_at(&a.mountpoint)?;
    // An etcd or TiKV mount's daemon answers on its control socket until
    // it has ended its session: after the unmount, wait for that.
    let sock = crate::is_shared(&m.source)
        .then(|| std::fs::canonicalize(&a.mountpoint).ok())
        .flatten()
        .map(|mnt| crate::control::shared_socket(&m.source, &mnt));
    // A mount whose daemon is gone (kill -9, a crash): unmounting it is all
    // there is to do; the next mount recovers the store.
    let dead = std::fs::metadata(&a.mountpoint).is_err_and(|e| daemon_gone(&e));
    let c = std::ffi::CString::new(a.mountpoint.as_os_str().as_encoded_bytes())
        .map_err(|e| e.to_string())?;
    // SAFETY: c is a valid path string.
    let rc = unsafe { libc::umount2(c.as_ptr(), 0) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        let st = std::process::Command::new("fusermount3")
            .arg("-u")
            .arg(&a.mountpoint)
            .status();
        if !st.is_ok_and(|s| s.success()) {
            return Err(format!("umount {}: {err}", a.mountpoint.display()));
        }
    }
    // Mounted elsewhere too (a bind mount, or a second `mount -t fuse.shoal`
    // of the store): the daemon serves on until the last place is unmounted.
    if mountinfo::all().iter().any(|o| o.dev == m.dev) {
        return Ok(0);
    }
    if let Some(sock) = sock {
        let t0 = Instant::now();
        while std::os::unix::net::UnixStream::connect(&sock).is_ok() {
            if t0.elapsed() > Duration::from_secs(300) {
                return Err(format!(
                    "the daemon serving {} did not exit within 300 s (its log: {})",
                    a.mountpoint.display(),
                    sock.with_file_name("daemon.log").display()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        return Ok(0);
    }
    // Wait until the daemon has committed and released the store.
    let store = mountinfo::store_of(&m.source);
    if !shoal_store::FjallStore::wait_unlocked(&store, Duration::from_secs(300)) {
        return Err(format!(
            "the daemon serving {} did not exit within 300 s",
            a.mountpoint.display()
        ));
    }
    if dead {
        eprintln!(
            "shoal: {}: its daemon had exited without closing {}; the next mount recovers the store (what was fsync'ed is there)",
            a.mountpoint.display(),
            store.display()
        );
        return Ok(0);
    }
    // A writable daemon marks the store clean after its final commit; no
    // mark means that commit failed, and what was not fsync'ed is lost.
    if !m.read_only
        && shoal_store::FjallStore::probe(&store).is_ok()
        && !store.join(CLEAN_MARK).exists()
    {
        // The reason, from the log of this daemon's life (the last "serving").
        let text = std::fs::read_to_string(store.join("daemon.log")).unwrap_or_default();
        let life = text.rfind("serving ").map_or("", |i| &text[i..]);
        let why = life
            .lines()
            .rev()
            .find(|l| l.contains("ERROR") || l.starts_with("shoal: "))
            .map(|l| l.trim().to_string())
            .unwrap_or_else(|| "see the daemon's output".into());
        // The daemon's own line already says what to do when it names fsck.
        let next = if why.contains("shoal fsck") {
            String::new()
        } else {
            format!(
                ": changes not fsync'ed may be lost, what was fsync'ed replays from the journal \
                 at the next mount; run `shoal fsck {}` before mounting again",
                store.display()
            )
        };
        return Err(format!(
            "the daemon serving {} did not close {} cleanly ({why}){next}",
            a.mountpoint.display(),
            store.display(),
        ));
    }
    Ok(0)
}

/// The mount options the kernel's VFS keeps for any filesystem (mount(8)'s
/// and fstab's), on `mount`: true if `k` is one. Device nodes and setuid
/// files work unless the mount says nodev or nosuid, as mount(8) gives
/// root for ext4 (`MOUNT_DEFAULTS`).
fn vfs_option(k: &str, mount: &mut Vec<MountOption>) -> bool {
    match k {
        "rw" | "defaults" | "auto" | "noauto" | "user" | "nouser" | "users" | "_netdev"
        | "nofail" | "nodiratime" | "diratime" | "async" | "loop" | "dev" | "suid" => {}
        "nodev" => {
            mount.retain(|m| *m != MountOption::Dev);
            mount.push(MountOption::NoDev);
        }
        "nosuid" => {
            mount.retain(|m| *m != MountOption::Suid);
            mount.push(MountOption::NoSuid);
        }
        "exec" => mount.push(MountOption::Exec),
        "noexec" => mount.push(MountOption::NoExec),
        _ => return false,
    }
    true
}

/// dev and suid as mount(8) gives root for ext4 (fuser's own default is
/// nodev,nosuid).
const MOUNT_DEFAULTS: [MountOption; 3] = [
    MountOption::DefaultPermissions,
    MountOption::Dev,
    MountOption::Suid,
];

/// `shoal mount etcd://H:P,.../NAME MNT` (or `tikv://PD:P,.../NAME`): a
/// daemon on a namespace shared with other mounts (`shoal_fuse::cluster`).
/// The kernel checks permissions (default_permissions).
fn mount_shared(a: &MountArgs) -> Result<i32, String> {
    // `full` may hold a password (`etcd://USER:PASSWORD@...`): it is used
    // to connect, and `src`, without it, everywhere it could be seen (the
    // source in /proc/mounts, the log, the daemon's command line: the
    // background child gets the password in its environment).
    let full = a.store.to_string_lossy().into_owned();
    let src = shoal_etcd::redact(&full);
    // A bad URL, or TiKV in a shoal built without it, is said before the
    // daemon forks.
    crate::shared_check(&full)?;
    let mut fuse = shoal_fuse::cluster::ClusterOptions::default();
    let mut session = shoal_cluster::ns::SessionOpts::default();
    let mut allow_other = false;
    let mut metrics = None;
    let mut mopts = vec![
        MountOption::FSName(src.clone()),
        MountOption::Subtype("shoal".into()),
    ];
    mopts.extend(MOUNT_DEFAULTS);
    for o in &a.options {
        let (k, v) = match o.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (o.as_str(), None),
        };
        let num = |v: Option<&str>| -> Result<u64, String> {
            v.and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("option {o} needs a number"))
        };
        match k {
            "allow_other" => allow_other = true,
            "default_permissions" | "kernel_permissions" => fuse.daemon_permissions = false,
            "daemon_permissions" => fuse.daemon_permissions = true,
            // The kernel refuses every change (EROFS); the daemon serves reads.
            "ro" => mopts.push(MountOption::RO),
            // Access times are not kept on a shared namespace (a write to
            // etcd per read): the options that ask for fewer updates are
            // kept by the kernel, and asking for every one is refused.
            "noatime" => mopts.push(MountOption::NoAtime),
            "relatime" | "atime" => {}
            "strictatime" => {
                return Err(
                    "option 'strictatime': an etcd or TiKV mount keeps no access times (docs/design.md, \
                     \"Coherence between mounts\"); mount without it"
                        .into(),
                )
            }
            _ if vfs_option(k, &mut mopts) => {}
            "ttl_ms" => fuse.ttl = Duration::from_millis(num(v)?),
            "threads" => fuse.threads = num(v)?.max(1) as usize,
            "session_ttl_s" => session.ttl = Duration::from_secs(num(v)?.max(2)),
            "unlinked_grace_s" => session.unlinked_grace = Duration::from_secs(num(v)?),
            "nodirlease" => session.dir_leases = false,
            "nolocklease" => session.lock_leases = false,
            "uring" => fuse.uring = true,
            "nouring" => fuse.uring = false,
            "root_squash" => fuse.squash = shoal_fuse::Squash::Root,
            "all_squash" => fuse.squash = shoal_fuse::Squash::parse_all(v.unwrap_or(""))?,
            "record_cache_mb" => session.record_cache = num(v)? << 20,
            "metrics" => metrics = Some(metrics_addr(o, v)?),
            _ => {
                return Err(format!(
                    "option '{o}' is not supported on an etcd or TiKV mount (there: allow_other, daemon_permissions, ttl_ms=N, threads=N, session_ttl_s=N, unlinked_grace_s=N, nodirlease, nolocklease, nouring, record_cache_mb=N, metrics=ADDR:PORT, root_squash, all_squash=UID:GID, and mount(8)'s ro, nodev, nosuid, noexec, noatime)"
                ))
            }
        }
    }
    if fuse.daemon_permissions || matches!(fuse.squash, shoal_fuse::Squash::All(..)) {
        // The daemon checks every request (under all_squash each acts as
        // another: the kernel would check the caller's own uid), with the
        // rules of `shoal_core::rules`, on mode bits.
        mopts.retain(|m| *m != MountOption::DefaultPermissions);
    }
    check_mountpoint(&a.mountpoint)?;
    if a.daemon && !a.background_child {
        // The log beside the mount's control socket: one per mount, since
        // several mounts of one namespace may run on one machine.
        let mnt = std::fs::canonicalize(&a.mountpoint).map_err(|e| e.to_string())?;
        let run = crate::control::shared_run_dir(&src, &mnt);
        let mut a = a.clone();
        a.store = src.clone().into();
        return spawn_background(&a, Path::new(&src), &run, shoal_etcd::url_password(&full));
    }
    init_logging();
    let metrics = metrics
        .as_deref()
        .map(crate::metrics::Listener::bind)
        .transpose()?;
    let store = crate::shared_connect(&full)?;
    let mnt = std::fs::canonicalize(&a.mountpoint).map_err(|e| e.to_string())?;
    // The session record: who is mounted, read by `shoal status`.
    let info = crate::status::daemon_info(&mnt, &a.options, false);
    session.who = info.to_string();
    let extra = crate::stats::SharedExtra::default();
    let blobs = data_store(&*store)
        .map_err(|e| format!("{src}: {e}"))?
        .map(|inner| {
            Arc::new(crate::metrics::CountedBlobs {
                inner,
                counts: extra.objects.clone(),
            }) as Arc<dyn shoal_cluster::blob::Blobs>
        });
    let fs = shoal_cluster::ns::ClusterFs::open_with_data(store.clone(), blobs, session)
        .map_err(|e| format!("{src}: {e}"))?;
    watch_signals(mnt.clone());
    let fuse_squash = fuse.squash;
    let f = shoal_fuse::cluster::ClusterFuse::new(fs.clone(), fuse);
    let extra = crate::stats::SharedExtra {
        invalidations: f.invalidations(),
        ..extra
    };
    // Programs that reach the daemon without FUSE (docs/client.md): the
    // same server as an embedded mount's, over the shared namespace.
    let mut clients = crate::clients::Server::new(
        fs.clone(),
        f.notifier(),
        fuse_squash,
        allow_other,
        mnt.clone(),
    );
    clients.dropped = Some(Box::new(f.name_dropped()));
    let clients = Arc::new(clients);
    let snap: crate::metrics::Snapshot = {
        let (fs, c) = (fs.clone(), clients.clone());
        Arc::new(move || {
            let mut v = crate::stats::shared_snapshot(&fs, &extra);
            v["client"] = c.stats();
            v
        })
    };
    let run = crate::control::shared_run_dir(&src, &mnt);
    crate::control::serve_shared(fs.clone(), snap.clone(), info, &run);
    let csock = crate::clients::shared_socket_dir(&run, true);
    if let Err(e) = clients.listen(&csock) {
        tracing::warn!("no client socket in {}: {e}", csock.display());
    }
    if let Some(m) = metrics {
        m.start(snap);
    }
    tracing::info!(
        "serving {src} at {} (session {:x})",
        mnt.display(),
        fs.session()
    );
    let r = f.mount(&mnt, mopts, allow_other);
    // The log stays (for what happened); the socket would answer no one.
    let _ = std::fs::remove_file(crate::control::shared_socket(&src, &mnt));
    let _ = std::fs::remove_file(csock.join(crate::clients::SOCKET));
    r.map_err(|e| format!("mount {}: {e}", mnt.display()))?;
    Ok(0)
}

/// The address of `metrics=ADDR:PORT` (option `o`), checked for its form.
fn metrics_addr(o: &str, v: Option<&str>) -> Result<String, String> {
    match v {
        Some(a) if a.parse::<std::net::SocketAddr>().is_ok() => Ok(a.to_string()),
        _ => Err(format!(
            "option '{o}': use metrics=ADDR:PORT, e.g. metrics=127.0.0.1:9567"
        )),
    }
}

/// The object store a shared filesystem keeps file data in (what mkfs was
/// given with --data), checked to answer.
pub fn data_store(
    store: &dyn shoal_cluster::ClusterStore,
) -> Result<Option<Arc<dyn shoal_cluster::blob::Blobs>>, String> {
    let Some(url) = shoal_cluster::ns::data_url(store).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let b = shoal_objects::ObjectBlobs::open(&url).map_err(|e| e.to_string())?;
    b.probe().map_err(|e| e.to_string())?;
    Ok(Some(Arc::new(b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Passthrough writes never reach the daemon, which could then not sync
    /// them before they return: `durability=sync` turns it off.
    #[test]
    fn durability_sync_turns_passthrough_off() {
        let p = parse_options(&["durability=sync".into()]).unwrap();
        assert!(!p.fuse.passthrough);
        let p = parse_options(&["durability=group".into()]).unwrap();
        assert!(p.fuse.passthrough, "passthrough is the default");
    }

    /// Remount after remount appends to one log: past `LOG_MAX` the next
    /// mount starts a new one and keeps one old.
    #[test]
    fn a_full_daemon_log_is_moved_aside_at_the_next_mount() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("daemon.log");
        std::fs::write(&p, b"small").unwrap();
        drop(open_log(&p).unwrap());
        assert_eq!(std::fs::read(&p).unwrap(), b"small", "a small log is kept");
        for round in 0..3u8 {
            std::fs::write(&p, vec![round; LOG_MAX as usize]).unwrap();
            drop(open_log(&p).unwrap());
            assert_eq!(std::fs::metadata(&p).unwrap().len(), 0, "a new log");
            let old = std::fs::read(d.path().join("daemon.log.1")).unwrap();
            assert!(
                old.len() == LOG_MAX as usize && old[0] == round,
                "the last one kept"
            );
        }
        let names = std::fs::read_dir(d.path()).unwrap().count();
        assert_eq!(names, 2, "one old log, not one per round");
    }
}
