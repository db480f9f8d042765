//! Salvaging a damaged fjall store in place (`shoal fsck --repair` when the
//! store cannot be read whole): the fjall side of `shoal_core::salvage`
//! (opening around a damaged journal, the new store beside the old one).

use shoal_core::salvage::{salvage, Salvage};
use shoal_core::{fsck, schema, Error, Result, Store};

/// Salvage the fjall store at `path` in place: its readable records go to a
/// new store made beside it (`PATH.salvage`), which is repaired and then takes
/// the store's path; the damaged store is kept as `PATH.damaged-SECONDS`.
/// Returns the report and where the damaged store was kept.
pub fn salvage_store(path: &std::path::Path) -> Result<(Salvage, std::path::PathBuf)> {
    use crate::FjallStore;
    let path =
        std::fs::canonicalize(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    let mut journal_note = None;
    let src = match FjallStore::open_read_only(&path) {
        Err(Error::Corrupted(m)) if m.contains(crate::fjall_store::JOURNAL_DAMAGED) => {
            // Keep the longest part of the journal that opens (a prefix
            // that opens stays openable when shortened: bisection).
            let total = FjallStore::journal_len(&path);
            let (mut ok, mut bad) = (0u64, total);
            while bad - ok > 1 {
                let mid = ok + (bad - ok) / 2;
                if FjallStore::open_read_only_journal(&path, mid).is_ok() {
                    ok = mid;
                } else {
                    bad = mid;
                }
            }
            journal_note = Some(format!(
                "the journal past its byte {ok} of {total} (the latest operations before the damage; they cannot be named)"
            ));
            FjallStore::open_read_only_journal(&path, ok)?
        }
        r => r?,
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let new = path.with_file_name(format!("{name}.salvage"));
    let _ = std::fs::remove_dir_all(&new);
    let mut report = None;
    let dst = FjallStore::create(&new, |dst| {
        // The data objects come along as hard links: the salvage's fsck
        // drops those of files it could not save, and the damaged store
        // keeps its own until the user removes it.
        link_tree(&path.join("data"), &new.join("data"))?;
        let mut r = salvage(&src, dst)?;
        if dst.get(&schema::super_key())?.is_none() {
            // The superblock was in the damage: count the groups that survived.
            let ags = dst
                .scan(&[schema::K_AG], &[schema::K_AG + 1], usize::MAX)?
                .len()
                .max(1) as u32;
            dst.write(
                &[(schema::super_key(), Some(schema::encode_super(ags)))],
                true,
            )?;
            r.lost.push(format!(
                "the superblock (rewritten with {ags} allocation groups)"
            ));
            r.repair = fsck::fsck(dst, true)?;
        }
        if let Some(n) = journal_note.take() {
            r.lost.push(n);
        }
        report = Some(r);
        Ok(())
    })?;
    drop(dst);
    drop(src);
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let kept = path.with_file_name(format!("{name}.damaged-{secs}"));
    let io = |what: &str, e: std::io::Error| Error::Io(format!("{what}: {e}"));
    std::fs::rename(&path, &kept).map_err(|e| {
        io(
            &format!("rename {} to {}", path.display(), kept.display()),
            e,
        )
    })?;
    std::fs::rename(&new, &path).map_err(|e| {
        io(
            &format!("rename {} to {}", new.display(), path.display()),
            e,
        )
    })?;
    if let Some(parent) = path.parent() {
        std::fs::File::open(parent)
            .and_then(|d| d.sync_all())
            .map_err(|e| io("sync", e))?;
    }
    Ok((report.unwrap_or_default(), kept))
}

/// Hard-link every file under `from` into the same place under `to`.
fn link_tree(from: &std::path::Path, to: &std::path::Path) -> Result<()> {
    let io = |what: &str, p: &std::path::Path, e: std::io::Error| {
        Error::Io(format!("{what} {}: {e}", p.display()))
    };
    let dirs = match std::fs::read_dir(from) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("list", from, e)),
    };
    for d in dirs {
        let d = d.map_err(|e| io("list", from, e))?.path();
        let Some(name) = d.file_name() else { continue };
        let sub = to.join(name);
        std::fs::create_dir_all(&sub).map_err(|e| io("create", &sub, e))?;
        for f in std::fs::read_dir(&d).map_err(|e| io("list", &d, e))? {
            let f = f.map_err(|e| io("list", &d, e))?.path();
            if let Some(n) = f.file_name() {
                let t = sub.join(n);
                std::fs::hard_link(&f, &t).map_err(|e| io("link", &t, e))?;
            }
        }
    }
    Ok(())
}
