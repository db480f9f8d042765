//! `shoal-floor [--uring] MOUNTPOINT [THREADS] [kernel_permissions]`: mount
//! the floor filesystem (foreground). Like shoal's default, the kernel does
//! no permission checks unless `kernel_permissions` is given
//! (default_permissions). `--uring`: ask for FUSE over io_uring, as shoal's
//! `-o uring` does (needs the fuse module's enable_uring=Y).
fn main() {
    let mut args: Vec<String> = std::env::args().collect();
    let uring = args.get(1).is_some_and(|a| a == "--uring");
    if uring {
        args.remove(1);
    }
    let Some(mnt) = args.get(1) else {
        eprintln!("usage: shoal-floor [--uring] MOUNTPOINT [THREADS] [kernel_permissions]");
        std::process::exit(2);
    };
    // By default as many threads as shoal's mount: the floor runs with its settings.
    let threads = args
        .get(2)
        .and_then(|t| t.parse().ok())
        .unwrap_or(shoal_fuse::FuseOptions::default().threads);
    let kernel_perms = args.get(3).is_some_and(|a| a == "kernel_permissions");
    if let Err(e) =
        shoal_bench::floor::mount(std::path::Path::new(mnt), threads, kernel_perms, uring)
    {
        eprintln!("shoal-floor: {e}");
        std::process::exit(1);
    }
}
