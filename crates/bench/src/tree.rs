//! The tree workload of seed 004: untar a kernel source tree, tar it to
//! nowhere, unpack a second copy and diff the two, rm -rf both.
//!
//! Path mode runs the real tools (GNU tar, diff, rm) on each target. Engine
//! mode does the same work through the library API: the tarball is parsed
//! with the `tar` crate, "tar" reads every entry's attributes and data,
//! "diff" walks both copies comparing kinds, sizes, targets and bytes.
//! With `--cold`, every phase starts cold: the engine and its store are
//! reopened and the page cache dropped (engine mode), or the page cache is
//! dropped and `--between` runs, e.g. a remount (path mode). Store reads per
//! phase explain locality (seed 004): where the cures place inodes decides how
//! many store blocks a cold walk touches.

use crate::cli::{
    append_json, git_commit, host, rusage, rusage_of, tempfile_dir, unix_now, BenchArgs, Switches,
};
use serde_json::{json, Value};
use shoal_core::{Attr, Ctx, Engine, Ino, Kind, NullStore, Store, ROOT_INO};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

const PHASES: [&str; 5] = ["untar", "tar", "untar2", "diff", "rm"];

struct Phase {
    secs: f64,
    /// Store reads (gets + scans) during the phase; engine mode only.
    reads: u64,
    /// Bytes this process read from the disk (/proc/self/io read_bytes);
    /// engine mode only: with a dropped page cache, what locality saves.
    disk: u64,
}

fn disk_read_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("read_bytes:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The tarball, uncompressed. Debian's linux-source ships .tar.xz; it is
/// decompressed once (outside any timing) with xz.
fn tarball(a: &BenchArgs) -> Result<PathBuf, String> {
    if let Some(t) = &a.tarball {
        return Ok(t.clone());
    }
    let out = PathBuf::from("/var/tmp/shoal-bench-linux.tar");
    if out.exists() {
        return Ok(out);
    }
    let xz = std::fs::read_dir("/usr/src")
        .map_err(|e| format!("/usr/src: {e}"))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("linux-source-") && n.ends_with(".tar.xz"))
        })
        .min()
        .ok_or(
            "no /usr/src/linux-source-*.tar.xz: apt-get install linux-source, or pass --tarball",
        )?;
    eprintln!("decompressing {} to {} (once)", xz.display(), out.display());
    let tmp = out.with_extension("tmp");
    let f = std::fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let st = std::process::Command::new("xz")
        .arg("-dc")
        .arg(&xz)
        .stdout(f)
        .status()
        .map_err(|e| format!("xz: {e}"))?;
    if !st.success() {
        return Err(format!("xz -dc {} failed", xz.display()));
    }
    std::fs::rename(&tmp, &out).map_err(|e| e.to_string())?;
    Ok(out)
}

fn drop_page_cache() {
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
    // Needs root; without it the phase is only as cold as the engine reopen makes it.
    let _ = std::fs::write("/proc/sys/vm/drop_caches", "3\n");
}

pub(crate) fn run(
    a: &BenchArgs,
    combos: &[Switches],
    targets: &[(String, PathBuf)],
) -> Result<i32, String> {
    let tar = tarball(a)?;
    if !a.cold {
        // Warm: the tarball comes from the page cache for every target alike
        // (otherwise the first target pays reading it from the disk).
        std::io::copy(
            &mut std::fs::File::open(&tar).map_err(|e| e.to_string())?,
            &mut std::io::sink(),
        )
        .map_err(|e| e.to_string())?;
    }
    let (commit, host) = (git_commit(), host());
    println!(
        "tree: {} ({})",
        tar.display(),
        if a.cold {
            "cold: each phase starts cold"
        } else {
            "warm"
        }
    );
    println!(
        "{:<8} {:<6} {:<34} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8}  store reads; disk MiB read (untar/tar/untar2/diff/rm)",
        "target",
        "mode",
        "switches",
        "entries",
        "untar s",
        "tar s",
        "diff s",
        "rm s",
        "cs/ent"
    );
    let mut rows = vec![];
    for (tname, tpath) in targets {
        let sws: Vec<Switches> = if a.mode == "engine" {
            combos.to_vec()
        } else {
            vec![combos[0].clone()]
        };
        for sw in sws {
            let pb = indicatif::ProgressBar::new_spinner();
            pb.set_message(format!("tree {tname} {}", sw.short()));
            pb.enable_steady_tick(std::time::Duration::from_millis(200));
            let (_, cs0) = rusage();
            let cs_kids0 = rusage_of(libc::RUSAGE_CHILDREN).1;
            let r = if a.mode == "engine" {
                engine_tree(a, &sw, &tar)
            } else {
                path_tree(a, tname, tpath, &tar)
            };
            pb.finish_and_clear();
            let (entries, ph) = r?;
            let cs = rusage().1 - cs0 + rusage_of(libc::RUSAGE_CHILDREN).1 - cs_kids0;
            let secs = |n: &str| ph[PHASES.iter().position(|x| *x == n).unwrap()].secs;
            let reads: Vec<String> = ph.iter().map(|p| p.reads.to_string()).collect();
            let disk: Vec<String> = ph
                .iter()
                .map(|p| format!("{:.0}", p.disk as f64 / (1 << 20) as f64))
                .collect();
            println!(
                "{:<8} {:<6} {:<34} {:>9} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2}  {}",
                tname,
                a.mode,
                if a.mode == "engine" {
                    sw.short()
                } else {
                    "-".into()
                },
                entries,
                secs("untar"),
                secs("tar"),
                secs("diff"),
                secs("rm"),
                cs as f64 / entries.max(1) as f64,
                if a.mode == "engine" {
                    format!("{}; {}", reads.join("/"), disk.join("/"))
                } else {
                    "-".into()
                }
            );
            let row = json!({
                "workload": "tree", "target": tname, "mode": a.mode, "workers": 1,
                "ops_per_s": entries as f64 / secs("untar").max(1e-9),
                "cs_per_op": cs as f64 / (entries.max(1) * 4) as f64,
                "entries": entries, "cold": a.cold,
                "switches": if a.mode == "engine" { sw.json() } else { Value::Null },
                "phases": PHASES.iter().zip(&ph).map(|(n, p)| json!({"name": n, "secs": p.secs, "store_reads": p.reads, "disk_read_bytes": p.disk})).collect::<Vec<_>>(),
                "git": commit, "host": host,
                "time": unix_now(),
            });
            append_json(a.json.as_ref(), &row)?;
            rows.push(row);
        }
    }
    if rows.len() > 1 {
        let base: Vec<f64> = PHASES
            .iter()
            .enumerate()
            .map(|(i, _)| rows[0]["phases"][i]["secs"].as_f64().unwrap_or(1.0))
            .collect();
        println!("time relative to the first row (untar/tar/untar2/diff/rm; >1 = slower):");
        for r in &rows {
            let v: Vec<String> = (0..PHASES.len())
                .map(|i| {
                    format!(
                        "{:.2}",
                        r["phases"][i]["secs"].as_f64().unwrap_or(0.0) / base[i].max(1e-9)
                    )
                })
                .collect();
            println!(
                "  {:<8} {:<34} {}",
                r["target"].as_str().unwrap_or(""),
                r["switches"].to_string(),
                v.join(" ")
            );
        }
    }
    Ok(0)
}

// ---------------------------------------------------------------- path mode

fn sh(cmd: &mut std::process::Command) -> Result<(), String> {
    let st = cmd.status().map_err(|e| format!("{cmd:?}: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed: {st}"))
    }
}

fn path_tree(
    a: &BenchArgs,
    tname: &str,
    root: &Path,
    tar: &Path,
) -> Result<(u64, Vec<Phase>), String> {
    use std::process::Command;
    let top = root.join(format!("bench-tree-{}", std::process::id()));
    let (da, db) = (top.join("a"), top.join("b"));
    std::fs::create_dir_all(&da).map_err(|e| format!("{}: {e}", da.display()))?;
    std::fs::create_dir_all(&db).map_err(|e| format!("{}: {e}", db.display()))?;
    let between = || -> Result<(), String> {
        if a.cold {
            drop_page_cache();
            if let Some(c) = &a.between {
                sh(Command::new("sh")
                    .arg("-c")
                    .arg(c)
                    .env("SHOAL_BENCH_TARGET", tname)
                    .env("SHOAL_BENCH_PATH", root))?;
            }
        }
        Ok(())
    };
    let mut out = vec![];
    let mut entries = 0;
    for ph in PHASES {
        between()?;
        let t = Instant::now();
        match ph {
            "untar" => sh(Command::new("tar").arg("-xf").arg(tar).arg("-C").arg(&da))?,
            "tar" => sh(Command::new("tar")
                .arg("-cf")
                .arg("/dev/null")
                .arg("-C")
                .arg(&da)
                .arg("."))?,
            "untar2" => sh(Command::new("tar").arg("-xf").arg(tar).arg("-C").arg(&db))?,
            "diff" => sh(Command::new("diff")
                .arg("-r")
                .arg(&da)
                .arg(&db)
                .stdout(std::process::Stdio::null()))?,
            _ => sh(Command::new("rm").arg("-rf").arg(&top))?,
        }
        out.push(Phase {
            secs: t.elapsed().as_secs_f64(),
            reads: 0,
            disk: 0,
        });
        if ph == "untar" {
            entries = walkdir_count(&da);
        }
    }
    Ok((entries, out))
}

fn walkdir_count(p: &Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            n += 1;
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                n += walkdir_count(&e.path());
            }
        }
    }
    n
}

// -------------------------------------------------------------- engine mode

fn ee(e: shoal_core::Error) -> String {
    e.to_string()
}

/// Unpack `tar` under directory `top` of the engine; returns the entry count.
fn untar(e: &Engine, top: Ino, tar: &Path) -> Result<u64, String> {
    let ctx = Ctx::root();
    let f = std::fs::File::open(tar).map_err(|x| format!("{}: {x}", tar.display()))?;
    let mut ar = tar::Archive::new(std::io::BufReader::with_capacity(1 << 20, f));
    let mut dirs: HashMap<PathBuf, Ino> = HashMap::new();
    dirs.insert(PathBuf::new(), top);
    let mut n = 0;
    let mut buf = Vec::new();
    // The parent directory of `p`, creating missing ones (tarballs may omit them).
    fn parent_of(e: &Engine, dirs: &mut HashMap<PathBuf, Ino>, p: &Path) -> Result<Ino, String> {
        let parent = p.parent().unwrap_or(Path::new("")).to_path_buf();
        if let Some(i) = dirs.get(&parent) {
            return Ok(*i);
        }
        let gp = parent_of(e, dirs, &parent)?;
        let name = parent
            .file_name()
            .ok_or("bad path in tarball")?
            .as_encoded_bytes();
        let ino = match e.mkdir(&Ctx::root(), gp, name, 0o755) {
            Ok(a) => a.ino,
            Err(shoal_core::Error::Exists) => e.lookup(&Ctx::root(), gp, name).map_err(ee)?.ino,
            Err(x) => return Err(x.to_string()),
        };
        dirs.insert(parent, ino);
        Ok(ino)
    }
    for ent in ar.entries().map_err(|x| x.to_string())? {
        let mut ent = ent.map_err(|x| x.to_string())?;
        let path: PathBuf = ent
            .path()
            .map_err(|x| x.to_string())?
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        if path.as_os_str().is_empty() {
            continue;
        }
        let name = path.file_name().unwrap().as_encoded_bytes().to_vec();
        let parent = parent_of(e, &mut dirs, &path)?;
        let mode = ent.header().mode().unwrap_or(0o644) & 0o7777;
        match ent.header().entry_type() {
            tar::EntryType::Directory => {
                let ino = match e.mkdir(&ctx, parent, &name, mode) {
                    Ok(a) => a.ino,
                    Err(shoal_core::Error::Exists) => {
                        e.lookup(&ctx, parent, &name).map_err(ee)?.ino
                    }
                    Err(x) => return Err(x.to_string()),
                };
                dirs.insert(path, ino);
            }
            tar::EntryType::Symlink => {
                let t = ent
                    .link_name()
                    .map_err(|x| x.to_string())?
                    .ok_or("symlink without target")?;
                e.symlink(&ctx, parent, &name, t.as_os_str().as_encoded_bytes())
                    .map_err(ee)?;
            }
            tar::EntryType::Link => {
                let t = ent
                    .link_name()
                    .map_err(|x| x.to_string())?
                    .ok_or("hard link without target")?;
                let tp: PathBuf = t
                    .components()
                    .filter(|c| matches!(c, Component::Normal(_)))
                    .collect();
                let tparent = parent_of(e, &mut dirs, &tp)?;
                let target = e
                    .lookup(&ctx, tparent, tp.file_name().unwrap().as_encoded_bytes())
                    .map_err(ee)?;
                e.link(&ctx, target.ino, parent, &name).map_err(ee)?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let a = e.create(&ctx, parent, &name, mode).map_err(ee)?;
                buf.clear();
                ent.read_to_end(&mut buf).map_err(|x| x.to_string())?;
                let mut off = 0;
                while off < buf.len() {
                    let end = (off + (1 << 17)).min(buf.len());
                    e.write(a.ino, off as u64, &buf[off..end]).map_err(ee)?;
                    off = end;
                }
                e.release(a.ino).map_err(ee)?;
            }
            _ => continue, // pax headers and the like carry no entry
        }
        n += 1;
    }
    Ok(n)
}

/// Every entry under `dir`: (name, attributes), as `ls -l` / tar see them.
fn list(e: &Engine, dir: Ino) -> Result<Vec<(Vec<u8>, Attr)>, String> {
    let mut out = vec![];
    let mut cookie = 0;
    loop {
        let got = e.readdir(dir, cookie, 1024).map_err(ee)?;
        let Some(last) = got.last() else { break };
        cookie = last.cookie;
        for d in got {
            let a = e.lookup(&Ctx::root(), dir, &d.name).map_err(ee)?;
            out.push((d.name, a));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn read_all(e: &Engine, a: &Attr) -> Result<Vec<u8>, String> {
    let mut v = Vec::with_capacity(a.size as usize);
    while (v.len() as u64) < a.size {
        let got = e.read(a.ino, v.len() as u64, 1 << 17).map_err(ee)?;
        if got.is_empty() {
            break;
        }
        v.extend_from_slice(&got);
    }
    Ok(v)
}

/// tar -cf /dev/null: every entry's attributes, every file's bytes, every link's target.
fn tar_walk(e: &Engine, dir: Ino) -> Result<u64, String> {
    let mut bytes = 0;
    for (_, a) in list(e, dir)? {
        match a.kind {
            Kind::Dir => bytes += tar_walk(e, a.ino)?,
            Kind::Symlink => bytes += e.readlink(a.ino).map_err(ee)?.len() as u64,
            Kind::File => bytes += read_all(e, &a)?.len() as u64,
            _ => {}
        }
    }
    Ok(bytes)
}

/// diff -r: same names, kinds, sizes, link targets and bytes.
fn diff(e: &Engine, x: Ino, y: Ino) -> Result<(), String> {
    let (lx, ly) = (list(e, x)?, list(e, y)?);
    if lx.len() != ly.len() {
        return Err(format!("diff: directories {x} and {y} differ in length"));
    }
    for ((nx, ax), (ny, ay)) in lx.iter().zip(&ly) {
        let what = String::from_utf8_lossy(nx);
        if nx != ny || ax.kind != ay.kind || (ax.kind != Kind::Dir && ax.size != ay.size) {
            return Err(format!("diff: {what} differs"));
        }
        match ax.kind {
            Kind::Dir => diff(e, ax.ino, ay.ino)?,
            Kind::Symlink
                if e.readlink(ax.ino).map_err(ee)? != e.readlink(ay.ino).map_err(ee)? =>
            {
                return Err(format!("diff: link {what} differs"))
            }
            Kind::File if read_all(e, ax)? != read_all(e, ay)? => {
                return Err(format!("diff: {what} content differs"))
            }
            _ => {}
        }
    }
    Ok(())
}

/// rm -rf of everything under `dir` (not `dir` itself).
fn rm_rf(e: &Engine, dir: Ino) -> Result<(), String> {
    for (name, a) in list(e, dir)? {
        if a.kind == Kind::Dir {
            rm_rf(e, a.ino)?;
            e.rmdir(&Ctx::root(), dir, &name).map_err(ee)?;
        } else {
            e.unlink(&Ctx::root(), dir, &name).map_err(ee)?;
        }
    }
    Ok(())
}

fn reads(s: &dyn Store) -> u64 {
    let c = s.counters();
    c.gets + c.scans
}

fn engine_tree(a: &BenchArgs, sw: &Switches, tar: &Path) -> Result<(u64, Vec<Phase>), String> {
    let cfg = sw.config(a.cache_mb)?;
    let null = sw.commit == "none";
    if a.cold && null {
        return Err("--cold needs a store: use --commit group or sync".into());
    }
    let tmp = tempfile_dir()?;
    let dir = match &a.store_dir {
        Some(d) => d.join(format!("bench-tree-{}", std::process::id())),
        None => tmp.join("store"),
    };
    let _ = std::fs::remove_dir_all(&dir);
    let open = |fresh: bool| -> Result<(Arc<Engine>, Arc<dyn Store>), String> {
        let s: Arc<dyn Store> = if null {
            Arc::new(NullStore)
        } else if fresh {
            let s =
                shoal_store::FjallStore::create(&dir, |s| Engine::mkfs(s, cfg.ags)).map_err(ee)?;
            Arc::new(s)
        } else {
            Arc::new(shoal_store::FjallStore::open(&dir).map_err(ee)?)
        };
        Ok((Engine::open(s.clone(), cfg.clone()).map_err(ee)?, s))
    };
    let (mut e, mut s) = open(true)?;
    let ctx = Ctx::root();
    for d in [b"a".as_slice(), b"b".as_slice()] {
        e.mkdir(&ctx, ROOT_INO, d, 0o755).map_err(ee)?;
    }
    let mut out = vec![];
    let mut entries = 0;
    for ph in PHASES {
        if a.cold {
            e.shutdown().map_err(ee)?;
            drop(e);
            drop(s);
            drop_page_cache();
            (e, s) = open(false)?;
        }
        let (ia, ib) = (
            e.lookup(&ctx, ROOT_INO, b"a").map_err(ee)?.ino,
            e.lookup(&ctx, ROOT_INO, b"b").map_err(ee)?.ino,
        );
        let r0 = reads(&*s);
        let d0 = disk_read_bytes();
        let t = Instant::now();
        match ph {
            "untar" => entries = untar(&e, ia, tar)?,
            "tar" => {
                tar_walk(&e, ia)?;
            }
            "untar2" => {
                untar(&e, ib, tar)?;
            }
            "diff" => diff(&e, ia, ib)?,
            _ => {
                rm_rf(&e, ia)?;
                rm_rf(&e, ib)?;
            }
        }
        // Group commit: a phase ends when its work is committed.
        e.sync().map_err(ee)?;
        out.push(Phase {
            secs: t.elapsed().as_secs_f64(),
            reads: reads(&*s) - r0,
            disk: disk_read_bytes() - d0,
        });
    }
    e.shutdown().map_err(ee)?;
    drop(e);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&tmp);
    Ok((entries, out))
}
