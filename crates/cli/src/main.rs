//! The `shoal` command. Flags are defined in `args.rs`; each subcommand lives
//! in its own module. Errors print as one line, never a panic trace.

mod args;
mod clients;
mod control;
mod daemon;
mod dump;
mod metrics;
mod mountinfo;
mod stats;
mod status;

use args::{Cli, Cmd};
use clap::Parser;
use shoal_cluster::ClusterStore;
use shoal_core::Error;
use std::path::Path;
use std::sync::Arc;

/// mimalloc instead of glibc malloc: the cache allocates and frees millions of
/// small objects of mixed sizes; measured in docs/perf-log/04-memory-bound-50m-round-trips.md ("Allocator").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        // Never panic here (eprintln! does when stderr's disk is full).
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "shoal: internal error: {msg}{at} (please report this)"
        );
    }));
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Mkfs(a) => cmd_mkfs(&a),
        Cmd::Mount(a) => daemon::cmd_mount(&a),
        Cmd::Umount(a) => daemon::cmd_umount(&a),
        Cmd::Fsck(a) => cmd_fsck(&a),
        Cmd::Bench(a) => shoal_bench::cli::run(*a).map_err(|e| e.to_string()),
        Cmd::Stats(a) => stats::cmd_stats(&a),
        Cmd::Sync(a) => control::cmd_sync(&a),
        Cmd::Dump(a) => dump::cmd_dump(&a),
        Cmd::Load(a) => dump::cmd_load(&a),
        Cmd::Status(a) => status::cmd_status(&a),
        Cmd::Config(a) => cmd_config(&a),
        Cmd::Run(a) => clients::cmd_run(&a),
    };
    match r {
        Ok(code) => std::process::exit(code),
        Err(msg) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "shoal: {msg}");
            std::process::exit(1);
        }
    }
}

/// A store error as one line a user can act on.
pub fn store_error(store: &Path, e: Error) -> String {
    let s = store.display();
    match e {
        Error::NotFound => format!("no shoal store at {s} (create one with `shoal mkfs {s}`)"),
        Error::Invalid => format!("{s} is not a shoal store"),
        Error::Exists => format!("{s} already holds a shoal store"),
        Error::Corrupted(m) => format!("store {s} is damaged: {m}; run `shoal fsck {s}` to see what, and `shoal fsck --repair {s}` to save what can be read"),
        Error::NoSpace => format!("no space left on the device holding {s}"),
        Error::Io(m) => m,
        other => format!("{s}: {other}"),
    }
}

/// Whether `src` names a filesystem on a shared store (`etcd://H:P,.../NAME`,
/// `tikv://PD:P,.../NAME`) rather than a store directory.
pub fn is_shared(src: &str) -> bool {
    src.starts_with("etcd://") || src.starts_with("tikv://")
}

/// Whether this shoal can serve the shared store `url` names, without
/// connecting (a mount says so before its daemon forks).
pub fn shared_check(url: &str) -> Result<(), String> {
    if url.starts_with("tikv://") {
        return tikv_check(url);
    }
    shoal_etcd::EtcdUrl::parse(url).map(|_| ())
}

/// The shared store `url` names, connected.
pub fn shared_connect(url: &str) -> Result<Arc<dyn ClusterStore>, String> {
    shared_check(url)?;
    #[cfg(feature = "tikv")]
    if url.starts_with("tikv://") {
        let s = shoal_tikv::client::connect(url).map_err(|e| format!("{url}: {e}"))?;
        return Ok(s);
    }
    let u = shoal_etcd::EtcdUrl::parse(url)?;
    let s = shoal_etcd::EtcdStore::connect(&u, std::time::Duration::from_secs(5))
        .map_err(|e| format!("{}: {e}", shoal_etcd::redact(url)))?;
    Ok(s)
}

#[cfg(feature = "tikv")]
fn tikv_check(url: &str) -> Result<(), String> {
    shoal_tikv::client::parse_url(url)
        .map(|_| ())
        .map_err(|e| format!("{url}: {e}"))
}

#[cfg(not(feature = "tikv"))]
fn tikv_check(url: &str) -> Result<(), String> {
    Err(format!(
        "{url}: this shoal was built without TiKV; build it with `cargo build --release --features tikv` (untested against a live TiKV cluster)"
    ))
}

/// A filesystem on a shared store rather than a store directory.
fn shared_target(p: &Path) -> Option<Result<Arc<dyn ClusterStore>, String>> {
    let s = p.to_str().filter(|s| is_shared(s))?;
    Some(shared_connect(s))
}

/// `shoal config URL [--data NEW]`: the recorded object store, shown or
/// changed. The new one is opened and probed with this machine's
/// credentials, and must hold a few of the namespace's objects (unless
/// --force), so a mistyped endpoint or bucket is refused before any mount
/// takes it.
fn cmd_config(a: &args::ConfigArgs) -> Result<i32, String> {
    let shown = shoal_etcd::redact(&a.store.to_string_lossy());
    let Some(store) = shared_target(&a.store) else {
        return Err(format!(
            "{shown}: shoal config is for a filesystem on etcd (etcd://H:P,.../NAME); a store directory has no settings to change"
        ));
    };
    let store = store?;
    let fail = |e: Error| format!("{shown}: {e}");
    if !shoal_cluster::ns::is_formatted(&*store).map_err(fail)? {
        return Err(format!(
            "{shown}: no shoal filesystem there (make one with shoal mkfs)"
        ));
    }
    let old = shoal_cluster::ns::data_url(&*store).map_err(fail)?;
    let Some(new) = &a.data else {
        match old {
            Some(d) => println!("data {}", status::redact(&d)),
            None => println!("data none (files stay within 4 KiB)"),
        }
        return Ok(0);
    };
    let b = shoal_objects::ObjectBlobs::open(new).map_err(|e| e.to_string())?;
    b.probe().map_err(|e| e.to_string())?;
    if !a.force {
        use shoal_cluster::blob::Blobs;
        let names = shoal_cluster::ns::all_tables(&*store).map_err(fail)?;
        for n in names.iter().take(3) {
            match b.get(n, 0, 1) {
                Ok(_) => {}
                Err(Error::NotFound) => {
                    return Err(format!(
                        "{new}: does not hold this filesystem's object {n} ({} objects named): copy the objects there first, or give --force",
                        names.len()
                    ))
                }
                Err(e) => return Err(format!("{new}: reading object {n}: {e}")),
            }
        }
    }
    shoal_cluster::ns::set_data_url(&*store, new).map_err(fail)?;
    println!(
        "{shown}: file data now in {new} (was {}); mounts take it when they next mount",
        old.as_deref()
            .map(status::redact)
            .unwrap_or_else(|| "none".into())
    );
    Ok(0)
}

fn cmd_mkfs(a: &args::MkfsArgs) -> Result<i32, String> {
    if let Some(store) = shared_target(&a.store) {
        let shown = shoal_etcd::redact(&a.store.to_string_lossy());
        if let Some(url) = &a.data {
            let b = shoal_objects::ObjectBlobs::open(url).map_err(|e| e.to_string())?;
            b.probe().map_err(|e| e.to_string())?;
        }
        shoal_cluster::ns::mkfs_with_data(&*store?, a.data.as_deref()).map_err(|e| match e {
            Error::Exists => format!(
                "{} already holds a shoal filesystem (pick another NAME)",
                shown
            ),
            e => format!("{}: {e}", shown),
        })?;
        match &a.data {
            Some(d) => println!("created shoal filesystem at {} (file data in {d})", shown),
            None => println!(
                "created shoal filesystem at {} (no object store: files stay within 4 KiB)",
                shown
            ),
        }
        return Ok(0);
    }
    if a.data.is_some() {
        return Err(
            "--data is for a filesystem on etcd (etcd://H:P,.../NAME); a store directory keeps its file data itself"
                .into(),
        );
    }
    shoal_store::FjallStore::create(&a.store, |s| shoal_core::Engine::mkfs(s, a.ags)).map_err(
        |e| match e {
            // `create` refuses a directory with files in it that is no store.
            Error::Invalid => format!(
                "{} is not empty (and holds no shoal store): mkfs makes a store in a new or empty directory; \
                 pick another path, or empty this one",
                a.store.display()
            ),
            e => store_error(&a.store, e),
        },
    )?;
    println!(
        "created shoal store at {} ({} allocation groups)",
        a.store.display(),
        a.ags
    );
    let reserve = shoal_store::fjall_store::default_reserve_at(&a.store);
    println!(
        "a writable mount keeps {}/reserve, {} MiB on this device: room held for deletes \
         should other programs fill the device (half of the 1/32 of it shoal keeps free, \
         at most {} MiB; `-o reserve_mb=N` sets that limit, 0 for no file; \
         docs/design.md, \"A full disk\")",
        a.store.display(),
        reserve >> 20,
        shoal_store::fjall_store::DEFAULT_RESERVE_MAX >> 20
    );
    Ok(0)
}

/// What `shoal fsck`'s walk takes besides its sorts and the store's cache,
/// in MiB: the allocator's slack, the scans' chunks, the merges' records
/// (measured: docs/BENCHMARKS.md, "fsck").
const FSCK_SLACK_MB: u64 = 40;
/// The least a walk sorts in, in MiB, however little the budget leaves.
const FSCK_MIN_SORT_MB: u64 = 4;

/// VmHWM: the peak resident memory of this process so far, in MiB.
fn peak_rss_mb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb >> 10)
}

fn cmd_fsck(a: &args::FsckArgs) -> Result<i32, String> {
    if let Some(store) = shared_target(&a.store) {
        let store = store?;
        // The namespace as it was at one revision where the store keeps
        // past ones (etcd), so that mounts changing it meanwhile cannot
        // show a problem that never was (a lease's batch committed between
        // two pages of the scan, CI 2026-11-28); read live elsewhere (TiKV).
        let mut r = match shoal_cluster::pinned::Pinned::now(store.clone()) {
            Ok(at) => {
                println!("namespace read at revision {}", at.revision_pinned());
                shoal_cluster::ns::check(&at)
            }
            Err(shoal_cluster::KvError::Unsupported(_)) => shoal_cluster::ns::check(&*store),
            Err(e) => {
                return Err(format!(
                    "{}: {e}",
                    shoal_etcd::redact(&a.store.to_string_lossy())
                ))
            }
        }
        .map_err(|e| e.to_string())?;
        if let Some(b) = daemon::data_store(&*store)? {
            let c = shoal_cluster::filedata::collect(&*store, &*b, !a.repair)
                .map_err(|e| e.to_string())?;
            for m in &c.missing {
                r.problems.push(format!(
                    "object {m}: a file names it, the object store lacks it"
                ));
            }
            println!(
                "objects: {} in the store, {} named by no file ({} bytes, {}), {} of live sessions kept",
                c.objects,
                c.unnamed,
                c.unnamed_bytes,
                if a.repair {
                    "deleted"
                } else {
                    "`shoal fsck --repair` deletes them"
                },
                c.in_flight
            );
        }
        for p in &r.problems {
            println!("problem: {p}");
        }
        println!(
            "{}: {} inodes, {} entries, {} problems",
            a.store.display(),
            r.inodes,
            r.entries,
            r.problems.len()
        );
        return Ok(if r.problems.is_empty() { 0 } else { 4 });
    }
    // Without --repair nothing is written: the store may be on read-only media.
    // --memory-mb holds everything: a sixteenth (4 to 64 MiB) for the store's
    // block cache; what opening the store took (the process, fjall's pinned
    // filter and index blocks, a journal replayed after a crash), measured;
    // a slack for the allocator and the scans; the rest for fsck's sorts
    // (docs/design.md, "fsck in bounded memory").
    let mb = a.memory_mb;
    let cache = (mb / 16).clamp(4, 64);
    let opened = shoal_store::FjallStore::open_bounded(&a.store, !a.repair, cache << 20);
    let mut spent = (0, 0);
    let checked = opened.and_then(|store| {
        // The peak so far, not the resident memory now: what the open
        // freed may not go back to the system. (A journal replayed after a
        // crash stays in memtables: docs/design.md, "fsck in bounded memory".)
        let open_mb = peak_rss_mb().max(metrics::rss_bytes() >> 20);
        let left = mb.saturating_sub(open_mb + cache + FSCK_SLACK_MB);
        if left < FSCK_MIN_SORT_MB {
            eprintln!(
                "shoal: opening {} took {open_mb} MiB of --memory-mb {mb}, which leaves the walk its least: {FSCK_MIN_SORT_MB} MiB of sort buffers",
                a.store.display()
            );
        }
        spent = (open_mb, left.max(FSCK_MIN_SORT_MB));
        let opts = shoal_core::fsck::Options {
            memory: (left.max(FSCK_MIN_SORT_MB) << 20) as usize,
            scratch: a.scratch.clone().unwrap_or_else(std::env::temp_dir),
        };
        shoal_core::fsck::check(&store, a.repair, &opts)
    });
    let r = match checked {
        Ok(r) => r,
        // Records that cannot be read: copy what can be into a new store.
        Err(Error::Corrupted(_)) if a.repair => return salvage(&a.store),
        Err(Error::Corrupted(m)) => {
            return Err(format!(
                "store {s} is damaged: {m}; run `shoal fsck --repair {s}` to save what can be read into a new store (the damaged one is kept)",
                s = a.store.display()
            ))
        }
        Err(e) => return Err(store_error(&a.store, e)),
    };
    for p in &r.problems {
        println!("problem: {p}");
    }
    if r.scratch_bytes > 0 {
        println!(
            "sorted {} MiB in runs on disk (--memory-mb {mb}: {} MiB opening the store, {cache} MiB its cache, {} MiB the walk's sorts)",
            r.scratch_bytes >> 20,
            spent.0,
            spent.1
        );
    }
    println!(
        "{}: {} inodes, {} entries, {} data objects{}, {} problems{}",
        a.store.display(),
        r.inodes,
        r.entries,
        r.data_objects + r.data_blocks,
        if r.leftover_objects > 0 {
            format!(
                " ({} left by a crash: the next mount removes them)",
                r.leftover_objects
            )
        } else {
            String::new()
        },
        r.problems.len(),
        if a.repair {
            format!(", {} records repaired", r.repaired)
        } else {
            String::new()
        }
    );
    Ok(if r.is_clean() || a.repair { 0 } else { 4 })
}

fn salvage(store: &Path) -> Result<i32, String> {
    eprintln!(
        "shoal: {} cannot be read whole: saving what can be read into a new store",
        store.display()
    );
    let (s, kept) = shoal_store::salvage::salvage_store(store).map_err(|e| match e {
        Error::Corrupted(m) => format!(
            "store {} cannot be salvaged: {m}; its tables or their list are damaged beyond what shoal can read around: restore it from a copy",
            store.display()
        ),
        e => store_error(store, e),
    })?;
    for l in &s.lost {
        println!("lost: {l}");
    }
    for p in &s.repair.problems {
        println!("repaired: {p}");
    }
    println!(
        "{}: salvaged {} records ({} damaged ranges skipped), {} lost items listed; {} inodes, {} entries, {} data objects now. \
         The damaged store is kept at {} (remove it when the new one serves you).",
        store.display(),
        s.records,
        s.damaged.len(),
        s.lost.len(),
        s.repair.inodes,
        s.repair.entries,
        s.repair.data_objects + s.repair.data_blocks,
        kept.display()
    );
    Ok(0)
}
