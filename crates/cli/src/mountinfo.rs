//! Reading /proc/self/mountinfo: is a path a mountpoint, and which store backs it.

use std::path::{Path, PathBuf};

/// One line of /proc/self/mountinfo.
pub struct Mount {
    /// "major:minor" of the filesystem: the same for every place it is
    /// mounted (bind mounts included).
    pub dev: String,
    pub point: PathBuf,
    pub source: String,
    pub fstype: String,
    /// Mounted read-only (the per-mount `ro` flag).
    pub read_only: bool,
}

/// Every mount of this process's namespace, in mount order.
pub fn all() -> Vec<Mount> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let Some(sep) = f.iter().position(|x| *x == "-") else {
            continue;
        };
        if f.len() < sep + 3 || f.len() < 5 {
            continue;
        }
        out.push(Mount {
            dev: f[2].to_string(),
            point: PathBuf::from(unescape(f[4])),
            source: unescape(f[sep + 2]),
            fstype: f[sep + 1].to_string(),
            read_only: f[5].split(',').any(|o| o == "ro"),
        });
    }
    out
}

/// The mount at `mnt` (the last, if mounts are stacked there).
pub fn at(mnt: &Path) -> Option<Mount> {
    let canon = std::fs::canonicalize(mnt).unwrap_or_else(|_| mnt.to_path_buf());
    all().into_iter().rfind(|m| m.point == canon)
}

/// The shoal mount at `mnt`, or the one-line error a command gives.
pub fn shoal_at(mnt: &Path) -> Result<Mount, String> {
    let m = at(mnt).ok_or_else(|| format!("{} is not mounted", mnt.display()))?;
    if !is_shoal(&m.source, &m.fstype) {
        return Err(format!(
            "{} is not a shoal mount ({})",
            mnt.display(),
            m.fstype
        ));
    }
    Ok(m)
}

/// The first place a daemon serves the store directory `store` (a
/// canonical path), if one does: a second mount of it binds this one.
pub fn serving(store: &Path) -> Option<Mount> {
    all().into_iter().find(|m| {
        is_shoal(&m.source, &m.fstype)
            && std::fs::canonicalize(store_of(&m.source)).is_ok_and(|p| p == store)
    })
}

/// (source, fstype) of the mount at `mnt`, if any.
pub fn find(mnt: &Path) -> Option<(String, String)> {
    at(mnt).map(|m| (m.source, m.fstype))
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

/// Is this mount a shoal daemon's? Its type is `fuse.shoal`; a daemon of
/// an older shoal mounted as type `fuse` (its subtype went to fusermount
/// only), and such a mount is one if its source is a shoal store.
pub fn is_shoal(src: &str, ty: &str) -> bool {
    ty == "fuse.shoal"
        || (ty == "fuse" && (crate::is_shared(src) || store_of(src).join("SHOAL").exists()))
}
