//! `shoal status SOURCE [--json]`: what an operator asks of a store or a
//! namespace before touching it. Its format and settings (never a secret:
//! URLs are shown with their credentials masked, `redact`), the mounts on it
//! (host, pid, since when, shoal's version), files held open past an unlink,
//! file locks, directory leases, space and inodes.
//!
//! Where each answer comes from:
//! - an etcd namespace: the store alone (`shoal_cluster::status`); each
//!   mount's session record carries what its daemon wrote about itself
//!   (`daemon_info`, a JSON object; a daemon from before 2026-11-28 wrote
//!   "HOST pid N", shown as it is);
//! - a store directory: its daemon, over the control socket ("status":
//!   `embedded_daemon_status`), which reads the store through its engine;
//!   with no daemon, the store opened read-only. File locks of an embedded
//!   mount are the kernel's (shoal's adapter leaves them to it), so they are
//!   read from /proc/locks by the mount's device.

use crate::args::StatusArgs;
use serde_json::{json, Value};
use shoal_core::schema;
use shoal_core::Engine;
use std::path::Path;

/// What a daemon says about itself: in its etcd session record and in its
/// control socket's "status" answer.
pub fn daemon_info(mnt: &Path, options: &[String], read_only: bool) -> Value {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    json!({
        "host": hostname(),
        "pid": std::process::id(),
        "since": since,
        "version": env!("CARGO_PKG_VERSION"),
        "mountpoint": mnt.display().to_string(),
        "options": options.join(","),
        "read_only": read_only,
    })
}

fn hostname() -> String {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    h.trim().to_string()
}

/// `url` with what could be a secret masked: a user and password
/// (`s3://KEY:SECRET@host`), and query parameters that name a secret,
/// a password, a token, a signature or a key.
pub fn redact(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let mut out = match base.split_once("://") {
        // The last '@' ends the credentials (a secret may hold '/'); one
        // in a path masks more than it must, never less.
        Some((scheme, rest)) => match rest.rfind('@') {
            Some(i) => format!("{scheme}://***@{}", &rest[i + 1..]),
            None => base.to_string(),
        },
        None => base.to_string(),
    };
    if let Some(q) = query {
        let parts: Vec<String> = q
            .split('&')
            .map(|p| {
                let (k, _) = p.split_once('=').unwrap_or((p, ""));
                let kl = k.to_ascii_lowercase();
                let secret = ["secret", "password", "passwd", "token", "signature", "key"]
                    .iter()
                    .any(|s| kl.contains(s));
                if secret && p.contains('=') {
                    format!("{k}=***")
                } else {
                    p.to_string()
                }
            })
            .collect();
        out.push('?');
        out.push_str(&parts.join("&"));
    }
    out
}

/// The facts of an embedded store read through `store`: format, allocation
/// groups, inode numbers handed out (what `df -i` counts as used), and the
/// inodes unlinked while open (kept until their last close).
pub fn store_facts(store: &dyn shoal_core::Store) -> Result<Value, String> {
    let e = |e: shoal_core::Error| e.to_string();
    let sb = store
        .get(&schema::super_key())
        .map_err(e)?
        .ok_or("no superblock")?;
    let (ags, format) = schema::decode_super_format(&sb).map_err(e)?;
    let mut used = 0u64;
    for ag in 0..ags {
        if let Some(v) = store.get(&schema::ag_key(ag)).map_err(e)? {
            used += schema::decode_u64("allocation group", &v).map_err(e)?;
        }
    }
    // Orphans: `O ino`, one key each; shown up to a thousand, all counted.
    let (mut orphans, mut n, mut from) = (vec![], 0u64, vec![schema::K_ORPHAN]);
    loop {
        let page = store
            .scan(&from, &[schema::K_ORPHAN + 1], 1000)
            .map_err(e)?;
        for (k, _) in &page {
            n += 1;
            if orphans.len() < 1000 {
                orphans.push(schema::parse_orphan_key(k).map_err(e)?);
            }
        }
        match page.last() {
            Some((k, _)) if page.len() == 1000 => {
                from = k.clone();
                from.push(0);
            }
            _ => break,
        }
    }
    let (total, free) = store.space();
    Ok(json!({
        "format": format,
        "allocation_groups": ags,
        "inodes_used": used,
        "open_unlinked": orphans,
        "open_unlinked_count": n,
        "space": {"total_bytes": total, "free_bytes": free},
    }))
}

/// A daemon's answer to "status": what it says about itself and the store.
pub fn embedded_daemon_status(e: &Engine, info: &Value) -> Value {
    // The store as of now: what the open epoch holds (an unlink of an open
    // file a moment ago) is committed first, one group commit (a few ms;
    // file data is not synced, as `shoal sync` would). A mount that can no
    // longer commit answers with what is in the store.
    let _ = e.committer.sync_all();
    let mut v = info.clone();
    v["store"] = store_facts(&**e.store()).unwrap_or_else(|err| json!({ "error": err }));
    v
}

pub fn cmd_status(a: &StatusArgs) -> Result<i32, String> {
    let mut src = a.source.to_string_lossy().into_owned();
    // A mountpoint stands for what is mounted there.
    if !crate::is_shared(&src) {
        if let Ok(m) = crate::mountinfo::shoal_at(&a.source) {
            src = m.source;
        }
    }
    let v = if crate::is_shared(&src) {
        shared_status(&src)?
    } else {
        embedded_status(&crate::mountinfo::store_of(&src))?
    };
    if a.json {
        println!("{v}");
    } else {
        print!("{}", human(&v));
    }
    Ok(0)
}

fn unix_time(v: &Value) -> String {
    let Some(s) = v.as_u64() else {
        return "?".into();
    };
    let out = std::process::Command::new("date")
        .args(["-u", "-d", &format!("@{s}"), "+%Y-%m-%dT%H:%M:%SZ"])
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => format!("@{s}"),
    }
}

/// The locks the kernel holds on the mount with device `dev` ("MAJ:MIN",
/// decimal, as mountinfo gives it), from /proc/locks.
fn kernel_locks(dev: &str) -> Vec<Value> {
    let Some((maj, min)) = dev.split_once(':') else {
        return vec![];
    };
    let (Ok(maj), Ok(min)) = (maj.parse::<u32>(), min.parse::<u32>()) else {
        return vec![];
    };
    let text = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    let mut out = vec![];
    for line in text.lines() {
        // "1: POSIX  ADVISORY  WRITE 1234 00:2d:5678 0 EOF"; a waiter's
        // line has "->" after the number.
        let f: Vec<&str> = line.split_whitespace().filter(|x| *x != "->").collect();
        if f.len() < 8 {
            continue;
        }
        let id: Vec<&str> = f[5].split(':').collect();
        if id.len() != 3 {
            continue;
        }
        let hex = |s: &str| u64::from_str_radix(s, 16).ok();
        if hex(id[0]) != Some(maj as u64) || hex(id[1]) != Some(min as u64) {
            continue;
        }
        out.push(json!({
            "kind": f[1].to_ascii_lowercase(),
            "mode": f[3].to_ascii_lowercase(),
            "pid": f[4].parse::<u64>().unwrap_or(0),
            "inode": id[2].parse::<u64>().unwrap_or(0),
            "start": f[6].parse::<u64>().unwrap_or(0),
            "end": f[7].parse::<u64>().map_or(json!("EOF"), |e| json!(e)),
        }));
    }
    out
}

fn embedded_status(store: &Path) -> Result<Value, String> {
    let path = std::fs::canonicalize(store)
        .map_err(|_| crate::store_error(store, shoal_core::Error::NotFound))?;
    shoal_store::FjallStore::probe(&path).map_err(|e| crate::store_error(&path, e))?;
    let mounts: Vec<crate::mountinfo::Mount> = crate::mountinfo::all()
        .into_iter()
        .filter(|m| {
            crate::mountinfo::is_shoal(&m.source, &m.fstype)
                && !crate::is_shared(&m.source)
                && std::fs::canonicalize(crate::mountinfo::store_of(&m.source)).ok()
                    == Some(path.clone())
        })
        .collect();
    let sock = crate::control::socket_of(&path);
    // A daemon from before "status" answered every unknown line with its
    // stats: then what it says of itself is its pid file.
    let daemon = crate::control::request(&sock, "status").ok().map(|d| {
        if d.get("pid").is_some() {
            d
        } else {
            let pid = std::fs::read_to_string(sock.with_file_name("daemon.pid"))
                .ok()
                .and_then(|p| p.trim().parse::<u64>().ok());
            json!({"pid": pid, "version": "older than 0.1 (no status answer)"})
        }
    });
    let facts = match daemon.as_ref().and_then(|d| d.get("store")) {
        Some(f) => f.clone(),
        None if mounts.is_empty() => {
            let s = shoal_store::FjallStore::open_read_only(&path)
                .map_err(|e| crate::store_error(&path, e))?;
            store_facts(&s)?
        }
        None => json!({"error": "mounted, and its daemon did not answer `status`"}),
    };
    let mut mv = vec![];
    for m in &mounts {
        let mut x = json!({
            "mountpoint": m.point.display().to_string(),
            "source": m.source,
            "read_only": m.read_only,
            "locks": kernel_locks(&m.dev),
        });
        if let Some(d) = &daemon {
            for k in ["host", "pid", "since", "version", "options"] {
                if let Some(val) = d.get(k) {
                    x[k] = val.clone();
                }
            }
        }
        mv.push(x);
    }
    Ok(json!({
        "kind": "embedded",
        "source": path.display().to_string(),
        "store": facts,
        "mounts": mv,
        "directory_leases": [],
    }))
}

fn shared_status(src: &str) -> Result<Value, String> {
    let store = crate::shared_connect(src)?;
    let s = shoal_cluster::status::status(&*store).map_err(|e| format!("{src}: {e}"))?;
    let here: Vec<crate::mountinfo::Mount> = crate::mountinfo::all()
        .into_iter()
        .filter(|m| m.source == src)
        .collect();
    let sessions: Vec<Value> = s
        .sessions
        .iter()
        .map(|x| {
            let mut v = match serde_json::from_str::<Value>(&x.who) {
                Ok(v @ Value::Object(_)) => v,
                // A daemon from before 2026-11-28: "HOST pid N".
                _ => json!({ "who": x.who }),
            };
            v["session"] = json!(format!("{:x}", x.sid));
            let held = |sid: u64| s.open_unlinked.iter().filter(move |o| o.0 == sid);
            v["open_unlinked"] = json!(held(x.sid).map(|o| o.1).collect::<Vec<_>>());
            v
        })
        .collect();
    let locks: Vec<Value> = s
        .locks
        .iter()
        .map(|(ino, sid, l)| {
            json!({
                "inode": ino,
                "session": format!("{sid:x}"),
                "kind": if l.flock { "flock" } else { "posix" },
                "mode": if l.write { "write" } else { "read" },
                "start": l.start,
                "end": if l.end >= i64::MAX as u64 { json!("EOF") } else { json!(l.end) },
                "pid": l.pid,
            })
        })
        .collect();
    let leases: Vec<Value> = s
        .leases
        .iter()
        .map(|(dir, lo, sid)| {
            json!({
                "directory": dir,
                "from_name": String::from_utf8_lossy(lo),
                "session": format!("{sid:x}"),
            })
        })
        .collect();
    Ok(json!({
        "kind": if src.starts_with("tikv://") { "tikv" } else { "etcd" },
        "source": redact(src),
        "format": s.format,
        "data": s.data.as_deref().map(redact),
        "next_inode_chunk": s.next_inode_chunk,
        "mounts": sessions,
        "mounted_here": here.iter().map(|m| m.point.display().to_string()).collect::<Vec<_>>(),
        "open_unlinked": s.open_unlinked.iter().map(|(sid, ino)| json!({"inode": ino, "session": format!("{sid:x}")})).collect::<Vec<_>>(),
        "holds": s.holds.iter().map(|(ino, sid)| json!({"inode": ino, "session": format!("{sid:x}")})).collect::<Vec<_>>(),
        "locks": locks,
        "directory_leases": leases,
        "lease_requests": s.lease_requests,
        "inodes": {"total": s.inodes, "files": s.files, "directories": s.dirs},
        "space": {"file_bytes": s.file_bytes},
    }))
}

/// `v` (what --json prints) as lines for a person.
fn human(v: &Value) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let src = v["source"].as_str().unwrap_or("");
    let mounts = v["mounts"].as_array().cloned().unwrap_or_default();
    let who = |m: &Value| {
        if let Some(w) = m["who"].as_str() {
            return w.to_string();
        }
        format!(
            "{} pid {} since {} shoal {}",
            m["host"].as_str().unwrap_or("?"),
            m["pid"],
            unix_time(&m["since"]),
            m["version"].as_str().unwrap_or("?")
        )
    };
    if v["kind"] != "embedded" {
        let _ = writeln!(o, "namespace {src}: shared format {}", v["format"]);
        let _ = writeln!(
            o,
            "file data: {}",
            v["data"]
                .as_str()
                .unwrap_or("none (files stay within 4 KiB)")
        );
        let _ = writeln!(
            o,
            "inodes: {} ({} files, {} directories), {} bytes in files",
            v["inodes"]["total"],
            v["inodes"]["files"],
            v["inodes"]["directories"],
            v["space"]["file_bytes"]
        );
        let _ = writeln!(o, "mounts: {}", mounts.len());
        for m in &mounts {
            let _ = writeln!(
                o,
                "  session {}: {} at {}",
                m["session"].as_str().unwrap_or("?"),
                who(m),
                m["mountpoint"].as_str().unwrap_or("?")
            );
        }
    } else {
        let s = &v["store"];
        let _ = writeln!(
            o,
            "store {src}: format {}, {} allocation groups",
            s["format"], s["allocation_groups"]
        );
        let _ = writeln!(
            o,
            "inodes used: {}  space: {} of {} bytes free",
            s["inodes_used"], s["space"]["free_bytes"], s["space"]["total_bytes"]
        );
        let _ = writeln!(o, "mounts: {}", mounts.len());
        for m in &mounts {
            let _ = writeln!(
                o,
                "  {} ({}{}): {}",
                m["mountpoint"].as_str().unwrap_or("?"),
                m["source"].as_str().unwrap_or("?"),
                if m["read_only"] == true { ", ro" } else { "" },
                who(m)
            );
        }
    }
    // Lists are cut at 20 lines (--json has them whole).
    let list = |o: &mut String, title: &str, items: &[String]| {
        let _ = writeln!(o, "{title}: {}", items.len());
        for i in items.iter().take(20) {
            let _ = writeln!(o, "  {i}");
        }
        if items.len() > 20 {
            let _ = writeln!(o, "  ... and {} more", items.len() - 20);
        }
    };
    let unlinked: Vec<String> = if v["kind"] != "embedded" {
        v["open_unlinked"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| {
                format!(
                    "inode {} (session {})",
                    x["inode"],
                    x["session"].as_str().unwrap_or("?")
                )
            })
            .collect()
    } else {
        v["store"]["open_unlinked"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| format!("inode {x}"))
            .collect()
    };
    // On etcd the unlinking session keeps every unlinked file for the
    // grace (`unlinked_grace_s`), open anywhere or not (`holds.rs`).
    let title = if v["kind"] != "embedded" {
        "unlinked, kept while open or for the unlinked grace"
    } else {
        "open past an unlink"
    };
    list(&mut o, title, &unlinked);
    if v["kind"] != "embedded" {
        let holds: Vec<String> = v["holds"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| {
                format!(
                    "inode {} (session {})",
                    x["inode"],
                    x["session"].as_str().unwrap_or("?")
                )
            })
            .collect();
        list(&mut o, "unlinked, held open by another mount", &holds);
    }
    let lock_line = |l: &Value| {
        format!(
            "inode {} {} {} {}-{} pid {}{}",
            l["inode"],
            l["kind"].as_str().unwrap_or("?"),
            l["mode"].as_str().unwrap_or("?"),
            l["start"]
                .as_str()
                .map_or(l["start"].to_string(), String::from),
            l["end"].as_str().map_or(l["end"].to_string(), String::from),
            l["pid"],
            l["session"]
                .as_str()
                .map_or(String::new(), |s| format!(" (session {s})"))
        )
    };
    let locks: Vec<String> = if v["kind"] != "embedded" {
        v["locks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(lock_line)
            .collect()
    } else {
        mounts
            .iter()
            .flat_map(|m| m["locks"].as_array().cloned().unwrap_or_default())
            .map(|l| lock_line(&l))
            .collect()
    };
    list(&mut o, "file locks", &locks);
    let leases: Vec<String> = v["directory_leases"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| {
            format!(
                "directory {} from {:?}: session {}",
                l["directory"],
                l["from_name"].as_str().unwrap_or(""),
                l["session"].as_str().unwrap_or("?")
            )
        })
        .collect();
    list(&mut o, "directory leases", &leases);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_in_urls_are_masked() {
        assert_eq!(
            redact("s3://AKIA:sekrit@bucket/p?endpoint=http://h:8333&secret_key=x&region=r"),
            "s3://***@bucket/p?endpoint=http://h:8333&secret_key=***&region=r"
        );
        assert_eq!(redact("file:///srv/objects"), "file:///srv/objects");
        assert_eq!(
            redact("etcd://u:p@h1:2379,h2:2379/ns"),
            "etcd://***@h1:2379,h2:2379/ns"
        );
    }
}
