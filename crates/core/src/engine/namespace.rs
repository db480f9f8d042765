//! Namespace operations: mknod, create, mkdir, symlink (one `make`), unlink, rmdir, link and rename, each under the per-name locks of docs/locking.md.

use super::*;

/// What `make` creates: the inode's type, its permission bits before the
/// umask or a default ACL apply, its device number and a symlink's target.
pub(super) struct New {
    kind: Kind,
    perm: u16,
    rdev: u32,
    target: Vec<u8>,
    /// Open the new file too (`create_open`).
    open: bool,
    /// No name: an `O_TMPFILE` (`tmpfile`), open and with nlink 0.
    unnamed: bool,
}

impl New {
    /// Anything but a symlink: the mode's permission bits, no target.
    fn node(kind: Kind, mode: u32, rdev: u32, open: bool) -> New {
        New {
            kind,
            perm: (mode & 0o7777) as u16,
            rdev,
            target: Vec::new(),
            open,
            unnamed: false,
        }
    }
}

impl Engine {
    /// Create a file, device node, fifo or socket (mode carries the type; 0 = regular).
    pub fn mknod(&self, ctx: &Ctx, parent: Ino, name: &[u8], mode: u32, rdev: u32) -> Result<Attr> {
        let kind = rules::new_inode::mknod_kind(mode)?;
        let _t = self.stats.start(Op::Create);
        self.make(ctx, parent, name, New::node(kind, mode, rdev, false))
    }

    pub fn create(&self, ctx: &Ctx, parent: Ino, name: &[u8], perm: u32) -> Result<Attr> {
        let _t = self.stats.start(Op::Create);
        self.make(ctx, parent, name, New::node(Kind::File, perm, 0, false))
    }

    /// Create a file and open it, as open(2) with O_CREAT does: the open is
    /// counted before the name's lock is released, so the caller holds an
    /// open file even if another process unlinks the name at once. `mode`
    /// carries the type as in `mknod` (0 = regular).
    pub fn create_open(&self, ctx: &Ctx, parent: Ino, name: &[u8], mode: u32) -> Result<Attr> {
        let kind = match Kind::from_mode(mode) {
            None => Kind::File,
            Some(Kind::Dir | Kind::Symlink) => return Err(Error::Invalid),
            Some(k) => k,
        };
        let _t = self.stats.start(Op::Create);
        self.make(ctx, parent, name, New::node(kind, mode, 0, true))
    }

    /// An unnamed regular file in `parent`, open (open(2) with O_TMPFILE):
    /// nlink 0 and an orphan from birth (its `O` record commits with its
    /// inode record, so a crash before its last close reclaims it, as for a
    /// file unlinked while open). `link` may give it a name (linkat with
    /// AT_EMPTY_PATH; the kernel refuses that after O_EXCL).
    pub fn tmpfile(&self, ctx: &Ctx, parent: Ino, mode: u32) -> Result<Attr> {
        let _t = self.stats.start(Op::Create);
        let new = New {
            unnamed: true,
            ..New::node(Kind::File, mode, 0, true)
        };
        self.make(ctx, parent, b"", new)
    }

    pub fn mkdir(&self, ctx: &Ctx, parent: Ino, name: &[u8], perm: u32) -> Result<Attr> {
        let _t = self.stats.start(Op::Mkdir);
        self.make(ctx, parent, name, New::node(Kind::Dir, perm, 0, false))
    }

    pub fn symlink(&self, ctx: &Ctx, parent: Ino, name: &[u8], target: &[u8]) -> Result<Attr> {
        let _t = self.stats.start(Op::Symlink);
        rules::new_inode::symlink_target(target)?;
        let new = New {
            kind: Kind::Symlink,
            perm: 0o777,
            rdev: 0,
            target: target.to_vec(),
            open: false,
            unnamed: false,
        };
        self.make(ctx, parent, name, new)
    }

    pub(super) fn make(&self, ctx: &Ctx, parent: Ino, name: &[u8], new: New) -> Result<Attr> {
        let New {
            kind,
            perm,
            rdev,
            target,
            open,
            unnamed,
        } = new;
        self.throttle();
        self.writable()?;
        if !unnamed {
            names::check(NameOp::Create, name)?;
        }
        self.room(RECORD_ROOM + 2 * name.len() as u64 + target.len() as u64)?;
        let p = self.dir_ref(parent)?;
        flags::check_add(&p)?;
        let pdir = p.dir.as_ref().expect("directory");
        // The directory's default ACL replaces the umask (acl(5)); read only
        // when the directory has one, so a plain create takes no extra lock.
        let default_acl = if pdir.default_acl.load(Ordering::Relaxed) {
            p.st.lock()
                .xattrs
                .iter()
                .find(|(n, _)| n == acl::DEFAULT)
                .map(|(_, v)| v.clone())
        } else {
            None
        };
        // Search on the directory before the name's test, as Linux (the
        // path walk's `may_lookup`); only when the daemon checks.
        if ctx.check_perms {
            rules::perm::access(ctx, &p.st.lock().attr, rules::perm::X_OK)?;
        }
        let _n = if unnamed {
            None
        } else {
            let n = self.names.lock(&p, name);
            if self.find(&p, name)?.is_some() {
                return Err(Error::Exists);
            }
            Some(n)
        };
        // After the name's test, as Linux answers (EEXIST before EACCES:
        // `filename_create`, then `may_create`), and as the shared
        // namespace does on the parent's record. Only when the daemon
        // checks: the directory's state lock on every create would be the
        // one lock per directory seed 000 removed.
        if ctx.check_perms {
            rules::perm::may_add(ctx, &p.st.lock().attr)?;
        }
        // Under the name's lock: the new inode's owner and mode.
        let parent_is = rules::new_inode::Parent {
            gid: pdir.gid.load(Ordering::Relaxed),
            setgid: pdir.sgid.load(Ordering::Relaxed),
            default_acl: default_acl.as_deref(),
        };
        let made = rules::new_inode::new_inode(ctx, parent_is, kind, perm)?;
        let mut g = self.committer.enter()?;
        let t = now();
        if !unnamed {
            self.dir_update(&mut g, &p, 1, (kind == Kind::Dir) as i64, t)?;
        }
        let ino = self.alloc_ino(&mut g, parent, kind)?;
        g.born(ino);
        let attr = Attr {
            ino,
            kind,
            perm: made.perm,
            nlink: if kind == Kind::Dir {
                2
            } else {
                !unnamed as u32
            },
            uid: made.uid,
            gid: made.gid,
            rdev,
            size: if kind == Kind::Symlink {
                target.len() as u64
            } else {
                0
            },
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            version: 1,
        };
        let blob = if kind == Kind::Dir {
            parent.to_le_bytes().to_vec()
        } else {
            target
        };
        let mut st = self.new_state(attr, blob);
        st.xattrs = made.xattrs;
        st.linkable = unnamed;
        // A new non-directory has one name and no data blocks: its entry is sole.
        let sole = kind != Kind::Dir && !unnamed;
        if sole {
            st.primary = Some((parent, name_hash(name)));
        }
        self.emit_inode(&mut g, &mut st);
        if unnamed {
            g.put(schema::orphan_key(ino), 1, schema::encode_u64(ino));
        }
        let node = Inode::new(
            st,
            self.cfg.name_cache == NameCache::Primed,
            Some(&self.evicted_filter_bytes),
        );
        self.inodes.insert(node.clone());
        if !unnamed {
            self.put_entry(&mut g, &p, name, ino, Some(&node), kind, sole, true);
        }
        self.leave(g)?;
        // Still under the name's lock: no unlink can come between the
        // entry and the caller's references.
        if open {
            node.opens.fetch_add(1, Ordering::AcqRel);
        }
        self.hand_out(ctx, &node);
        Ok(attr)
    }

    /// In SyncEach mode, wait for the commit covering epoch `e`.
    pub(super) fn after_mutation(&self, e: u64) -> Result<()> {
        if self.cfg.durability == Durability::SyncEach {
            self.committer.wait(e)?;
        }
        Ok(())
    }

    /// Sticky-directory rule for library callers.
    pub(super) fn check_delete(&self, ctx: &Ctx, p: &Inode, child: &Inode) -> Result<()> {
        if self.check_delete_dir(ctx, p)? {
            rules::perm::sticky(ctx, child.st.lock().attr.uid)?;
        }
        Ok(())
    }

    /// The part of `check_delete` that needs only the directory. Returns
    /// whether the child's owner must be checked too (a sticky directory the
    /// caller does not own).
    pub(super) fn check_delete_dir(&self, ctx: &Ctx, p: &Inode) -> Result<bool> {
        if !ctx.check_perms {
            return Ok(false);
        }
        let pa = p.st.lock().attr;
        rules::perm::may_delete_in(ctx, &pa)
    }

    pub fn unlink(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<()> {
        self.throttle();
        let _t = self.stats.start(Op::Unlink);
        self.writable()?;
        names::check(NameOp::Unlink, name)?;
        let p = self.dir_ref(parent)?;
        let _n = self.names.lock(&p, name);
        let (ino, kind, sole) = self.find(&p, name)?.ok_or(Error::NotFound)?;
        if kind == Kind::Dir {
            return Err(Error::IsDir);
        }
        flags::check_remove(&p, None)?;
        // A sole entry's inode, if nothing holds it (the kernel's and open
        // handles' inodes are pinned in the cache), is deleted unread: it has
        // no record but its `I` key. This is rm -rf's store read per file saved.
        let unread = sole
            && !self.store.is_null()
            && self.inodes.get(ino).is_none()
            && !self.check_delete_dir(ctx, &p)?;
        let c = if unread { None } else { Some(self.inode(ino)?) };
        if let Some(c) = &c {
            self.check_delete(ctx, &p, c)?;
            flags::check_remove(&p, Some(c))?;
        }
        let mut g = self.committer.enter()?;
        let t = now();
        self.put_entry(&mut g, &p, name, 0, None, kind, false, false);
        self.dir_update(&mut g, &p, -1, 0, t)?;
        match &c {
            Some(c) => self.drop_link(&mut g, c, t)?,
            None => {
                // No record of an uncached inode is queued (dirty inodes are
                // not evicted), so this delete is the key's only record in the epoch.
                g.del(schema::inode_key(ino), u64::MAX);
                self.mark_gone(ino, g.epoch);
                self.unread_unlinks.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.leave(g)
    }

    /// Clear the sole flag of `c`'s entry, and its `primary` pointer, before
    /// an operation breaks the flag's promise: a second name (link) or data
    /// blocks (a size past INLINE_MAX). A separate step before the caller's
    /// own locks, because it takes the entry's name lock; clearing the flag
    /// is always safe (the entry then just costs unlink a read), so it need
    /// not be atomic with the caller's change, only committed no later.
    /// Nothing sets `primary` again once it is clear.
    pub(super) fn unshare(&self, c: &Inode) -> Result<()> {
        loop {
            let Some((parent, h)) = c.st.lock().primary else {
                return Ok(());
            };
            let p = match self.dir_ref(parent) {
                Ok(p) => p,
                Err(Error::NotFound) => return self.lost_primary(c),
                Err(e) => return Err(e),
            };
            let _n = self.names.lock_hash(&p, h);
            if c.st.lock().primary != Some((parent, h)) {
                continue; // renamed meanwhile: its rename moved the pointer
            }
            let Some(name) = self.name_at(&p, h, c.ino)? else {
                return self.lost_primary(c);
            };
            let mut g = self.committer.enter()?;
            self.put_entry(&mut g, &p, &name, c.ino, None, c.kind, false, false);
            let mut cs = c.st.lock();
            cs.primary = None;
            Self::bump(&mut cs);
            self.emit_inode(&mut g, &mut cs);
            return Ok(());
        }
    }

    /// The name of `dir` with hash `h` that names `ino`, if any.
    pub(super) fn name_at(&self, dir: &Inode, h: u64, ino: Ino) -> Result<Option<Vec<u8>>> {
        let d = dir.dir.as_ref().ok_or(Error::NotDir)?;
        let mut names: Vec<Vec<u8>> = d
            .range(h, h, usize::MAX)
            .into_iter()
            .map(|(_, n, _)| n.into_vec())
            .collect();
        if !d.listing_complete() && !self.store.is_null() {
            let (mut lo, hi) = schema::entry_range(dir.ino, h);
            'scan: loop {
                let got = self.store.scan(&lo, &hi, 16)?;
                for (k, _) in &got {
                    let (_, kh, name) = schema::parse_entry_key(k)?;
                    if kh != h {
                        break 'scan;
                    }
                    names.push(name.to_vec());
                }
                match got.last() {
                    Some((k, _)) if got.len() == 16 => {
                        lo = k.clone();
                        lo.push(0);
                    }
                    _ => break,
                }
            }
        }
        for n in names {
            if self.find(dir, &n)?.is_some_and(|f| f.0 == ino) {
                return Ok(Some(n));
            }
        }
        Ok(None)
    }

    /// `c` says a sole entry names it, but none does: an unlink deleted it
    /// unread while this thread loaded it from the store by number (the
    /// window between that unlink and its commit). It is gone.
    pub(super) fn lost_primary(&self, c: &Inode) -> Result<()> {
        let mut cs = c.st.lock();
        cs.primary = None;
        cs.attr.nlink = 0;
        cs.destroyed = true;
        drop(cs);
        self.inodes.remove_if(c.ino, |x| {
            x.lookups.load(Ordering::Acquire) == 0 && x.opens.load(Ordering::Acquire) == 0
        });
        Err(Error::NotFound)
    }

    /// One name of `c` is gone: nlink - 1, and destroy or orphan at zero.
    pub(super) fn drop_link(&self, g: &mut Gate<'_>, c: &Inode, t: Ts) -> Result<()> {
        let mut cs = c.st.lock();
        cs.attr.nlink = cs.attr.nlink.saturating_sub(1);
        // A sole entry is the only name, and it is the one going.
        cs.primary = None;
        if c.kind == Kind::Dir {
            cs.attr.nlink = 0;
            cs.dead = true;
        }
        cs.attr.ctime = t;
        Self::bump(&mut cs);
        if cs.attr.nlink == 0 {
            if c.opens.load(Ordering::Acquire) > 0 {
                // Unlinked while open: keep the records, mark it an orphan so
                // a crash before the last close still reclaims it.
                self.emit_inode(g, &mut cs);
                g.put(
                    schema::orphan_key(c.ino),
                    cs.attr.version,
                    schema::encode_u64(c.ino),
                );
            } else {
                // Never open when its last name went: it has no orphan record.
                self.destroy(g, &mut cs, false)?;
                drop(cs);
                // Nobody can reach it any more unless the kernel holds it (then forget removes it).
                if c.lookups.load(Ordering::Acquire) == 0 {
                    self.inodes.remove_if(c.ino, |x| {
                        x.lookups.load(Ordering::Acquire) == 0
                            && x.opens.load(Ordering::Acquire) == 0
                    });
                }
            }
        } else {
            self.emit_inode(g, &mut cs);
        }
        Ok(())
    }

    /// Delete every record of an inode whose last name and last handle are gone.
    /// `orphan`: it has an orphan record (its last name went while it was open:
    /// `drop_link` put one); otherwise no `O` key is written at all, which
    /// spares the store a tombstone per unlink (a third of what rm -rf wrote).
    pub(super) fn destroy(
        &self,
        g: &mut Gate<'_>,
        st: &mut InodeState,
        orphan: bool,
    ) -> Result<()> {
        let ino = st.attr.ino;
        let ver = st.attr.version;
        st.dirty_epoch = g.epoch;
        st.destroyed = true;
        self.mark_gone(ino, g.epoch);
        g.del(schema::inode_key(ino), ver);
        if orphan {
            g.del(schema::orphan_key(ino), ver);
        }
        if st.object {
            // The data object goes once this deletion is durable (a file
            // that was ever past INLINE_MAX has one, maybe emptied).
            self.doom_data(ino, g.epoch);
        }
        let freed: usize = st.blocks.values().map(|b| b.len()).sum();
        self.cached_data.add(-(freed as i64));
        st.blocks.clear();
        Ok(())
    }

    pub fn rmdir(&self, ctx: &Ctx, parent: Ino, name: &[u8]) -> Result<()> {
        self.throttle();
        let _t = self.stats.start(Op::Rmdir);
        self.writable()?;
        names::check(NameOp::Rmdir, name)?;
        let p = self.dir_ref(parent)?;
        let _n = self.names.lock(&p, name);
        let (ino, kind, _) = self.find(&p, name)?.ok_or(Error::NotFound)?;
        if kind != Kind::Dir {
            return Err(Error::NotDir);
        }
        let c = self.inode(ino)?;
        self.check_delete(ctx, &p, &c)?;
        flags::check_remove(&p, Some(&c))?;
        let mut g = self.committer.enter()?;
        let t = now();
        Self::dir_kill_if_empty(&c)?;
        self.put_entry(&mut g, &p, name, 0, None, kind, false, false);
        self.dir_update(&mut g, &p, -1, -1, t)?;
        self.drop_link(&mut g, &c, t)?;
        self.leave(g)
    }

    pub fn link(&self, ctx: &Ctx, ino: Ino, newparent: Ino, newname: &[u8]) -> Result<Attr> {
        self.throttle();
        let _t = self.stats.start(Op::Link);
        self.writable()?;
        names::check(NameOp::Create, newname)?;
        self.room(RECORD_ROOM + newname.len() as u64)?;
        let np = self.dir_ref(newparent)?;
        // Linux's order: search on the directory (the path walk), the
        // name's test (EEXIST, `filename_create`), then write on it
        // (`may_create`), below under the name's lock.
        if ctx.check_perms {
            rules::perm::access(ctx, &np.st.lock().attr, rules::perm::X_OK)?;
        }
        let c = self.inode(ino)?;
        flags::check_add(&np)?;
        if flags::pinned(&c) {
            return Err(Error::NotPermitted);
        }
        // Before the name lock (unshare takes the old name's). A no-op for
        // directories, which are never sole.
        self.unshare(&c)?;
        let _n = self.names.lock(&np, newname);
        if self.find(&np, newname)?.is_some() {
            return Err(Error::Exists);
        }
        if ctx.check_perms {
            rules::perm::may_add(ctx, &np.st.lock().attr)?;
        }
        let mut g = self.committer.enter()?;
        let t = now();
        // Check and take the new link in one critical section, so a racing
        // unlink of the last other name cannot destroy the inode in between.
        let attr = {
            let mut cs = c.st.lock();
            // nlink 0: only an open file keeps its records (an O_TMPFILE,
            // which the kernel lets linkat name, or a file unlinked while
            // open, which it does not).
            // nlink 0: only an O_TMPFILE not named yet may be named (an
            // open one: its records go at its last close).
            let linkable = cs.linkable && !cs.destroyed && c.opens.load(Ordering::Acquire) > 0;
            rules::link::may_link(c.kind, cs.attr.nlink, linkable)?;
            cs.linkable = false;
            // Only create sets `primary`, and unshare cleared it above.
            debug_assert!(cs.primary.is_none());
            cs.attr.nlink += 1;
            cs.attr.ctime = t;
            Self::bump(&mut cs);
            self.emit_inode(&mut g, &mut cs);
            cs.attr
        };
        if let Err(e) = self.dir_update(&mut g, &np, 1, 0, t) {
            // The new parent was removed meanwhile: give the link back, in the
            // same epoch, so the store never sees the extra link.
            let mut cs = c.st.lock();
            cs.attr.nlink -= 1;
            Self::bump(&mut cs);
            self.emit_inode(&mut g, &mut cs);
            return Err(e);
        }
        if attr.nlink == 1 {
            // Named at last: no longer an orphan.
            g.del(schema::orphan_key(ino), attr.version);
        }
        self.put_entry(&mut g, &np, newname, ino, Some(&c), c.kind, false, true);
        self.leave(g)?;
        self.hand_out(ctx, &c);
        Ok(attr)
    }

    /// Is `anc` an ancestor of (or equal to) directory `d`? Walks parent
    /// pointers; the caller holds the rename mutex so the tree cannot change shape.
    pub(super) fn is_ancestor(&self, anc: Ino, mut d: Ino) -> Result<bool> {
        let mut steps = 0u64;
        loop {
            if d == anc {
                return Ok(true);
            }
            if d == ROOT_INO || d == 0 {
                return Ok(false);
            }
            d = self.inode(d)?.st.lock().parent();
            steps += 1;
            if steps > 1 << 20 {
                return Err(Error::Corrupted(
                    "directory parent chain does not reach the root".into(),
                ));
            }
        }
    }

    pub fn rename(
        &self,
        ctx: &Ctx,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        flags: u32,
    ) -> Result<()> {
        self.throttle();
        let _t = self.stats.start(Op::Rename);
        self.writable()?;
        rules::rename::check_flags(flags)?;
        let whiteout = flags & RENAME_WHITEOUT != 0;
        if whiteout {
            self.room(RECORD_ROOM + name.len() as u64)?;
        }
        names::check(NameOp::Rename, name)?;
        names::check(NameOp::Rename, newname)?;
        let p = self.dir_ref(parent)?;
        let np = self.dir_ref(newparent)?;
        let cross = parent != newparent;
        let _r = if cross {
            Some(self.rename_lock.lock())
        } else {
            None
        };
        let _n = self.names.lock2(&p, name, &np, newname);
        let (sino, skind, ssole) = self.find(&p, name)?.ok_or(Error::NotFound)?;
        let dst = self.find(&np, newname)?;
        let s = self.inode(sino)?;
        self.check_delete(ctx, &p, &s)?;
        if ctx.check_perms {
            rules::perm::may_add(ctx, &np.st.lock().attr)?;
        }
        rules::rename::check_target(flags, dst.is_some())?;
        if let Some((dino, _, _)) = dst {
            if dino == sino {
                return Ok(());
            }
        }
        let exchange = flags & RENAME_EXCHANGE != 0;
        let d = match dst {
            Some((dino, _, _)) => Some(self.inode(dino)?),
            None => None,
        };
        let dsole = dst.is_some_and(|x| x.2);
        // The flag and the inode's pointer change together (create, unshare, rename).
        debug_assert_eq!(
            ssole,
            s.st.lock().primary == Some((parent, name_hash(name)))
        );
        debug_assert!(d.as_ref().is_none_or(
            |d| dsole == (d.st.lock().primary == Some((newparent, name_hash(newname))))
        ));
        if let Some(d) = &d {
            self.check_delete(ctx, &np, d)?;
        }
        // Moving out of `p` is removing a name, into `np` adding one (and
        // removing the replaced one's); an exchange does both both ways.
        flags::check_remove(&p, Some(&s))?;
        flags::check_add(&np)?;
        if let Some(d) = &d {
            flags::check_remove(&np, Some(d))?;
            if exchange {
                flags::check_add(&p)?;
            }
        }
        // A directory may not move under itself.
        if cross && skind == Kind::Dir && self.is_ancestor(sino, newparent)? {
            return Err(Error::Invalid);
        }
        if exchange {
            if let Some(d) = &d {
                if cross && d.kind == Kind::Dir && self.is_ancestor(d.ino, parent)? {
                    return Err(Error::Invalid);
                }
            }
        } else if let Some(d) = &d {
            // The target is an ancestor of the source (Linux's "trap"): ENOTEMPTY.
            if cross && d.kind == Kind::Dir && self.is_ancestor(d.ino, parent)? {
                return Err(Error::NotEmpty);
            }
            rules::rename::check_kinds(flags, skind, d.kind)?;
        }
        let mut g = self.committer.enter()?;
        let t = now();
        let sdir = skind == Kind::Dir;
        let replaced_dir = !exchange && d.as_ref().is_some_and(|d| d.kind == Kind::Dir);
        if replaced_dir {
            // Before any change: a non-empty target directory fails the rename.
            Self::dir_kill_if_empty(d.as_ref().expect("target"))?;
        }
        if cross && !exchange {
            // The new parent first: if it was removed meanwhile, nothing is
            // changed yet (it cannot be if it holds the replaced target).
            self.dir_update(
                &mut g,
                &np,
                d.is_none() as i64,
                sdir as i64 - replaced_dir as i64,
                t,
            )?;
        }
        if exchange {
            let d = d.expect("exchange has a target");
            // Each entry keeps its flag; a sole one's inode follows its name.
            self.put_entry(&mut g, &p, name, d.ino, Some(&d), d.kind, dsole, false);
            self.put_entry(&mut g, &np, newname, sino, Some(&s), skind, ssole, false);
            let ddir = (d.kind == Kind::Dir) as i64;
            if cross {
                self.dir_update(&mut g, &p, 0, ddir - sdir as i64, t)?;
                self.dir_update(&mut g, &np, 0, sdir as i64 - ddir, t)?;
            } else {
                self.dir_update(&mut g, &p, 0, 0, t)?;
            }
            for (node, newp, newh) in [
                (&s, newparent, name_hash(newname)),
                (&d, parent, name_hash(name)),
            ] {
                let mut st = node.st.lock();
                if node.kind == Kind::Dir {
                    st.set_parent(newp);
                }
                if st.primary.is_some() {
                    st.primary = Some((newp, newh));
                }
                st.attr.ctime = t;
                Self::bump(&mut st);
                self.emit_inode(&mut g, &mut st);
            }
        } else {
            if whiteout {
                self.put_whiteout(&mut g, ctx, &p, name, t)?;
            } else {
                self.put_entry(&mut g, &p, name, 0, None, skind, false, false);
            }
            self.put_entry(
                &mut g,
                &np,
                newname,
                sino,
                Some(&s),
                skind,
                ssole,
                d.is_none(),
            );
            // A whiteout keeps the old name in its directory.
            let w = whiteout as i64;
            if cross {
                self.dir_update(&mut g, &p, w - 1, -(sdir as i64), t)?;
            } else {
                self.dir_update(
                    &mut g,
                    &p,
                    w - d.is_some() as i64,
                    -(replaced_dir as i64),
                    t,
                )?;
            }
            {
                let mut ss = s.st.lock();
                if sdir {
                    ss.set_parent(newparent);
                }
                if ss.primary.is_some() {
                    ss.primary = Some((newparent, name_hash(newname)));
                }
                ss.attr.ctime = t;
                Self::bump(&mut ss);
                self.emit_inode(&mut g, &mut ss);
            }
            if let Some(d) = &d {
                self.drop_link(&mut g, d, t)?;
            }
        }
        self.leave(g)
    }

    /// The whiteout a `RENAME_WHITEOUT` leaves at the old name, in the
    /// rename's own commit: a new character device 0:0, mode 0, owned by
    /// the caller (the directory's group under setgid), with a sole entry.
    /// The caller holds the name's lock and has checked the directory.
    fn put_whiteout(
        &self,
        g: &mut Gate<'_>,
        ctx: &Ctx,
        p: &Inode,
        name: &[u8],
        t: Ts,
    ) -> Result<()> {
        let pdir = p.dir.as_ref().expect("directory");
        let ino = self.alloc_ino(g, p.ino, Kind::CharDev)?;
        g.born(ino);
        let gid = if pdir.sgid.load(Ordering::Relaxed) {
            pdir.gid.load(Ordering::Relaxed)
        } else {
            ctx.gid
        };
        let attr = Attr {
            ino,
            kind: Kind::CharDev,
            perm: 0,
            nlink: 1,
            uid: ctx.uid,
            gid,
            rdev: 0,
            size: 0,
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            version: 1,
        };
        let mut st = self.new_state(attr, Vec::new());
        st.primary = Some((p.ino, name_hash(name)));
        self.emit_inode(g, &mut st);
        let node = Inode::new(st, false, Some(&self.evicted_filter_bytes));
        self.inodes.insert(node.clone());
        self.put_entry(g, p, name, ino, Some(&node), Kind::CharDev, true, false);
        Ok(())
    }
}
