//! Every flag of every subcommand, in one place.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "shoal",
    version = version(),
    about = "shoal: a filesystem for millions of small files and many cores"
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

/// `shoal --version`: the version, then the store formats this shoal reads.
pub fn version() -> &'static str {
    static V: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        use shoal_core::schema::{FORMAT, FORMAT_MIN};
        format!(
            "{}\nstore directory formats {FORMAT_MIN} to {FORMAT} (an older one is upgraded to {FORMAT} by its first writable mount)\n\
             shared namespace (etcd, TiKV) format {}\n\
             dump format {}",
            env!("CARGO_PKG_VERSION"),
            shoal_cluster::ns::SHARED_FORMAT,
            crate::dump::format::VERSION,
        )
    })
}

#[derive(Subcommand)]
pub enum Cmd {
    /// Create a new, empty store.
    Mkfs(MkfsArgs),
    /// Mount a store (foreground unless -d).
    Mount(MountArgs),
    /// Unmount a shoal mount and wait until its store is closed.
    Umount(UmountArgs),
    /// Check a store's invariants (and repair with --repair). The store must not be mounted.
    Fsck(FsckArgs),
    /// Run the seeds' benchmarks (in-process on the engine, or on mounted paths).
    Bench(Box<shoal_bench::cli::BenchArgs>),
    /// Live view of a running daemon: ops/s, latencies, commits, cache, locks.
    Stats(StatsArgs),
    /// Make everything acknowledged on a mount durable (sync(1) does not
    /// reach a FUSE daemon; this does).
    Sync(SyncArgs),
    /// Write a namespace (records, names, xattrs, ACLs, flags, file data)
    /// as a stream a load makes again: a backup, or a move between stores.
    /// A mounted store is dumped at one instant.
    Dump(DumpArgs),
    /// Make a namespace from a dump, in a new store directory or an empty
    /// namespace on etcd.
    Load(LoadArgs),
    /// A store's or an etcd namespace's format, settings, mounts, held
    /// files, locks, leases, space and inodes.
    Status(StatusArgs),
    /// Show or change a namespace's settings recorded at mkfs: its object
    /// store (--data), e.g. when the object store's endpoint moves.
    Config(ConfigArgs),
    /// Run a command with its calls on absolute paths under a mount served
    /// by the client, without FUSE (LD_PRELOAD of libshoal_shim.so; only
    /// this command and its children; see docs/client.md).
    Run(RunArgs),
}

#[derive(Args)]
pub struct RunArgs {
    /// A shoal mountpoint (a writable embedded mount).
    pub mountpoint: PathBuf,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    pub command: Vec<std::ffi::OsString>,
}

#[derive(Args)]
pub struct ConfigArgs {
    /// An etcd://H:P,.../NAME URL.
    pub store: PathBuf,
    /// The object store's new URL (as `shoal mkfs --data`). Checked first:
    /// it must answer with this machine's credentials and hold the
    /// namespace's objects. Mounts take it when they next mount.
    #[arg(long, value_name = "URL")]
    pub data: Option<String>,
    /// Record --data even when it does not hold the namespace's objects
    /// (they were not copied yet, or are gone).
    #[arg(long)]
    pub force: bool,
}

#[derive(Args)]
pub struct StatusArgs {
    /// A store directory or an etcd://H:P,.../NAME URL (or a mountpoint
    /// of either).
    pub source: PathBuf,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct DumpArgs {
    /// A store directory (mounted or not) or an etcd://H:P,.../NAME URL.
    pub source: PathBuf,
    /// The file to write (`-`: standard output, the default). Written
    /// whole under a temporary name, then renamed into place.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Compress with gzip (also when the output's name ends in `.gz`).
    #[arg(short = 'z', long)]
    pub gzip: bool,
    /// Dump only this directory (a path from the source's root); it
    /// becomes the root of a store loaded from the dump.
    #[arg(long, value_name = "PATH")]
    pub subtree: Option<String>,
}

#[derive(Args)]
pub struct LoadArgs {
    /// A dump made by `shoal dump` (`-`: standard input; gzip or not).
    pub file: PathBuf,
    /// A new or empty store directory, or an etcd://H:P,.../NAME URL (a
    /// namespace made here if missing, else one with an empty root).
    pub dest: PathBuf,
    /// For a namespace on etcd made by this load: its object store (as
    /// `shoal mkfs --data`).
    #[arg(long, value_name = "URL")]
    pub data: Option<String>,
}

#[derive(Args)]
pub struct SyncArgs {
    /// A shoal mountpoint.
    pub mountpoint: PathBuf,
}

#[derive(Args)]
pub struct MkfsArgs {
    /// Directory to hold the store (created if missing; must be empty).
    pub store: PathBuf,
    /// Number of allocation groups (1 to 1024).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=shoal_core::MAX_AGS as i64))]
    pub ags: u32,
    /// For a filesystem on etcd: the object store for file data past 4 KiB,
    /// s3://BUCKET[/PREFIX][?endpoint=https://H:P&region=R&cacert=CA.pem
    /// &credentials-file=FILE&profile=P&anonymous=1] or file:///DIR.
    /// Credentials never in the URL: from AWS_ACCESS_KEY_ID and
    /// AWS_SECRET_ACCESS_KEY, else the AWS credentials file
    /// (~/.aws/credentials, AWS_PROFILE); none is refused unless the URL
    /// says anonymous=1 (docs/security.md). Without --data, files on etcd
    /// stay within 4 KiB.
    #[arg(long, value_name = "URL")]
    pub data: Option<String>,
}

#[derive(Args, Clone)]
pub struct MountArgs {
    /// The store directory (made by `shoal mkfs`).
    pub store: PathBuf,
    /// Where to mount it.
    pub mountpoint: PathBuf,
    /// Return once the mount is serving (the daemon keeps running in the background).
    #[arg(short = 'd', long)]
    pub daemon: bool,
    /// Mount options, comma separated, in FUSE's conventions: allow_other,
    /// default_permissions (the kernel checks permissions and POSIX ACLs:
    /// the default), ro, and shoal's own: daemon_permissions (the daemon
    /// checks permissions instead: two round trips less per create+unlink,
    /// no ACLs), root_squash, all_squash=UID:GID (docs/security.md),
    /// durability=group|sync|buffered, commit_ms=N, cache_mb=N, threads=N,
    /// entry_ttl_ms=N, attr_ttl_ms=N, negative_ttl_ms=N (how long the kernel
    /// keeps names, attributes and misses: an hour by default, as the daemon
    /// tells the kernel of every change; an etcd mount's ttl_ms is 1 s;
    /// docs/design.md, "The kernel's caches"), writeback_cache,
    /// noreaddirplus, keep_cache (keep cached file pages across opens), verify (walk the store with fsck's checks before serving),
    /// memory_mb=N, noxattr, readdirplus_always, placement=near|spread (where
    /// new directories go: the parent's allocation group, or round-robin),
    /// nouring (serve /dev/fuse instead of FUSE over io_uring's per-CPU
    /// request queues, the default where the kernel offers them: Linux
    /// 6.14+ with the fuse module's enable_uring=Y), nopassthrough,
    /// nodirect_create (a file created write-only keeps its written bytes
    /// in the FUSE page cache too, as before 2026-11-27), nordwr_passthrough
    /// (a file created read-write is served by the daemon until reopened
    /// past 4 KiB, as before 2026-11-29), metrics=IP:PORT
    /// (Prometheus metrics at http://IP:PORT/metrics; docs/operations.md),
    /// reserve_mb=N (the most STORE/reserve holds, 64 by default; 0: no
    /// reserve file; docs/design.md, "A full disk"), errors=shutdown|ro
    /// (after a store I/O error every change gets EIO, the default, or
    /// EROFS; reads go on; docs/design.md, "An I/O error"). A store already mounted
    /// is bound from its first mount, whose options serve both places.
    #[arg(short = 'o', value_delimiter = ',')]
    pub options: Vec<String>,
    /// Internal: set by `-d` in the background child.
    #[arg(long, hide = true)]
    pub background_child: bool,
}

#[derive(Args)]
pub struct UmountArgs {
    pub mountpoint: PathBuf,
}

#[derive(Args)]
pub struct FsckArgs {
    pub store: PathBuf,
    /// Fix what can be fixed safely (on etcd: delete the objects no file
    /// names that sessions now gone left behind).
    #[arg(long)]
    pub repair: bool,
    /// The memory fsck of a store directory may take, in MiB: its peak
    /// RSS, the process, the store's cache and the walk's sorts together
    /// (what does not fit is sorted in runs on disk under --scratch, as
    /// e2fsck's scratch files). A store not closed cleanly replays its
    /// journal first, which can take more. At least 64: below it the
    /// process, the store's open and the walk's least do not fit.
    #[arg(long, default_value_t = shoal_core::fsck::DEFAULT_MEMORY_MB as u64, value_parser = clap::value_parser!(u64).range(64..))]
    pub memory_mb: u64,
    /// Where fsck's runs go when its sorts do not fit --memory-mb (a
    /// private directory under it, removed at the end; default $TMPDIR or
    /// /tmp). Takes up to 30 bytes a name plus the name (2 GB at 50M files).
    #[arg(long)]
    pub scratch: Option<PathBuf>,
}

#[derive(Args)]
pub struct StatsArgs {
    /// A shoal mountpoint.
    pub mountpoint: PathBuf,
    /// Print one JSON snapshot and exit.
    #[arg(long)]
    pub json: bool,
    /// Refresh interval in seconds.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Stop after this many refreshes (0 = until interrupted).
    #[arg(long, default_value_t = 0)]
    pub count: u64,
}
