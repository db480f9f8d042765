//! Reading /proc/self/mountinfo: is a path a mountpoint, and which store backs it.

use std::path::{Path, PathBuf};

/// (source, fstype) of the mount at `mnt`, if any.
pub fn find(mnt: &Path) -> Option<(String, String)> {
    let canon = std::fs::canonicalize(mnt).unwrap_or_else(|_| mnt.to_path_buf());
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut found = None;
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let Some(sep) = f.iter().position(|x| *x == "-") else { continue };
        if f.len() < sep + 3 || f.len() < 5 {
            continue;
        }
        let point = unescape(f[4]);
        if PathBuf::from(&point) == canon {
            found = Some((unescape(f[sep + 2]), f[sep + 1].to_string()));
        }
    }
    found
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The store behind a mount's source: the source is the store's path, or
/// `shoal:PATH` (a source that is not a directory, so `umount SOURCE` finds
/// the mount by its source as it does a device's).
pub fn store_of(src: &str) -> PathBuf {
    PathBuf::from(src.strip_prefix(SOURCE_PREFIX).unwrap_or(src))
}

pub const SOURCE_PREFIX: &str = "shoal:";

/// Is this mount a shoal daemon's? Mounted as root, the kernel records type
/// `fuse` (the subtype is lost), so the source must also be a shoal store.
pub fn is_shoal(src: &str, ty: &str) -> bool {
    ty == "fuse.shoal" || (ty == "fuse" && store_of(src).join("SHOAL").exists())
}
