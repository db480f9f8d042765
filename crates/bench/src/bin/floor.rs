//! `shoal-floor MOUNTPOINT [THREADS] [kernel_permissions]`: mount the floor
//! filesystem (foreground). Like shoal's default, the kernel does no
//! permission checks unless `kernel_permissions` is given (default_permissions).
//!
//! `shoal-floor --uring|--raw MOUNTPOINT [THREADS]`: the same kind of
//! filesystem on its own FUSE transport (`shoal_bench::uring_floor`), over
//! io_uring (per-CPU queues; needs `fuse.enable_uring=Y`) or over classic
//! /dev/fuse reads (`--raw`, the control for the transport alone).
fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(mode @ ("--uring" | "--raw")) = args.get(1).map(|s| s.as_str()) {
        let Some(mnt) = args.get(2) else {
            eprintln!("usage: shoal-floor --uring|--raw MOUNTPOINT [THREADS]");
            std::process::exit(2);
        };
        let threads = args.get(3).and_then(|t| t.parse().ok()).unwrap_or(shoal_fuse::FuseOptions::default().threads);
        if let Err(e) = shoal_bench::uring_floor::mount(std::path::Path::new(mnt), threads, mode == "--uring", 8) {
            eprintln!("shoal-floor: {e}");
            std::process::exit(1);
        }
        return;
    }
    let Some(mnt) = args.get(1) else {
        eprintln!("usage: shoal-floor MOUNTPOINT [THREADS] [kernel_permissions]");
        std::process::exit(2);
    };
    // By default as many threads as shoal's mount: the floor runs with its settings.
    let threads = args.get(2).and_then(|t| t.parse().ok()).unwrap_or(shoal_fuse::FuseOptions::default().threads);
    let kernel_perms = args.get(3).is_some_and(|a| a == "kernel_permissions");
    if let Err(e) = shoal_bench::floor::mount(std::path::Path::new(mnt), threads, kernel_perms) {
        eprintln!("shoal-floor: {e}");
        std::process::exit(1);
    }
}
