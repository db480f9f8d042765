//! `shoal-floor MOUNTPOINT [THREADS]`: mount the floor filesystem (foreground).
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(mnt) = args.get(1) else {
        eprintln!("usage: shoal-floor MOUNTPOINT [THREADS]");
        std::process::exit(2);
    };
    let threads = args.get(2).and_then(|t| t.parse().ok()).unwrap_or(2);
    if let Err(e) = shoal_bench::floor::mount(std::path::Path::new(mnt), threads) {
        eprintln!("shoal-floor: {e}");
        std::process::exit(1);
    }
}
