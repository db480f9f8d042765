//! POSIX ACLs (acl(5)) as the kernel stores them in the
//! `system.posix_acl_access` and `system.posix_acl_default` xattrs.
//!
//! The kernel enforces ACLs when it checks permissions (FUSE_POSIX_ACL, which
//! implies `default_permissions`); what it leaves to the filesystem, and what
//! this module computes, is keeping the mode and the ACL in step, as ext4's
//! `posix_acl_update_mode`, `posix_acl_chmod` and `posix_acl_create` do:
//! - setting an access ACL sets the mode's permission bits from it, and an
//!   ACL the mode can express exactly is not stored at all;
//! - chmod rewrites the ACL's owner, mask (or owning group) and other entries;
//! - a new inode in a directory with a default ACL gets that ACL, masked by
//!   the mode it was created with, instead of the umask.

use crate::{Error, Kind, Result};

pub const ACCESS: &[u8] = b"system.posix_acl_access";
pub const DEFAULT: &[u8] = b"system.posix_acl_default";

/// An inode's extended attributes, as name and value pairs.
pub type Xattrs = Vec<(Vec<u8>, Vec<u8>)>;

const VERSION: u32 = 2;
const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    tag: u16,
    perm: u16,
    id: u32,
}

/// An ACL decoded from its xattr form (header, then 8-byte entries).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acl(Vec<Entry>);

impl Acl {
    /// Decode and validate (the rules of the kernel's `posix_acl_valid`:
    /// exactly one owner, owning-group and other entry, a mask whenever
    /// named entries exist, perms within rwx). An empty list is valid
    /// (it removes a default ACL).
    pub fn decode(v: &[u8]) -> Result<Acl> {
        if v.len() < 4
            || !(v.len() - 4).is_multiple_of(8)
            || u32::from_le_bytes(v[..4].try_into().unwrap()) != VERSION
        {
            return Err(Error::Invalid);
        }
        let es: Vec<Entry> = v[4..]
            .chunks_exact(8)
            .map(|c| Entry {
                tag: u16::from_le_bytes([c[0], c[1]]),
                perm: u16::from_le_bytes([c[2], c[3]]),
                id: u32::from_le_bytes(c[4..8].try_into().unwrap()),
            })
            .collect();
        let count = |t: u16| es.iter().filter(|e| e.tag == t).count();
        let bad_tag = es.iter().any(|e| {
            ![USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER].contains(&e.tag) || e.perm & !7 != 0
        });
        let named = count(USER) + count(GROUP);
        if !es.is_empty()
            && (bad_tag
                || count(USER_OBJ) != 1
                || count(GROUP_OBJ) != 1
                || count(OTHER) != 1
                || count(MASK) > 1
                || (named > 0 && count(MASK) == 0))
        {
            return Err(Error::Invalid);
        }
        Ok(Acl(es))
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = VERSION.to_le_bytes().to_vec();
        for e in &self.0 {
            v.extend_from_slice(&e.tag.to_le_bytes());
            v.extend_from_slice(&e.perm.to_le_bytes());
            v.extend_from_slice(&e.id.to_le_bytes());
        }
        v
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn perm(&self, tag: u16) -> u16 {
        self.0.iter().find(|e| e.tag == tag).map_or(0, |e| e.perm)
    }

    fn has(&self, tag: u16) -> bool {
        self.0.iter().any(|e| e.tag == tag)
    }

    /// The permission bits (0777) this ACL gives the mode, and whether the
    /// mode alone expresses it (then it need not be stored).
    pub fn mode(&self) -> (u16, bool) {
        let group = if self.has(MASK) {
            self.perm(MASK)
        } else {
            self.perm(GROUP_OBJ)
        };
        let equiv = !self.0.iter().any(|e| matches!(e.tag, USER | GROUP | MASK));
        (
            (self.perm(USER_OBJ) << 6) | (group << 3) | self.perm(OTHER),
            equiv,
        )
    }

    /// chmod: the owner, mask (owning group without a mask) and other entries
    /// take the new mode's bits.
    pub fn chmod(&mut self, perm: u16) {
        let group_tag = if self.has(MASK) { MASK } else { GROUP_OBJ };
        for e in &mut self.0 {
            if e.tag == USER_OBJ {
                e.perm = (perm >> 6) & 7;
            } else if e.tag == group_tag {
                e.perm = (perm >> 3) & 7;
            } else if e.tag == OTHER {
                e.perm = perm & 7;
            }
        }
    }

    /// A new inode's access ACL from its directory's default ACL and the mode
    /// it was created with: each of owner, mask (or owning group) and other
    /// keeps only what both allow, and the mode keeps only what the ACL
    /// allows. Returns the ACL (None when the mode expresses it) and the
    /// new permission bits (0777 part; the caller keeps the rest).
    pub fn inherit(&self, perm: u16) -> (Option<Acl>, u16) {
        let mut acl = self.clone();
        let mut mode = perm & 0o777;
        let group_tag = if acl.has(MASK) { MASK } else { GROUP_OBJ };
        for e in &mut acl.0 {
            let shift = match e.tag {
                USER_OBJ => 6,
                OTHER => 0,
                t if t == group_tag => 3,
                _ => continue,
            };
            e.perm &= (mode >> shift) & 7;
            mode &= !(7 << shift) | (e.perm << shift);
        }
        let (_, equiv) = acl.mode();
        (if equiv { None } else { Some(acl) }, mode)
    }
}

/// A new inode's permission bits and ACL xattrs (`posix_acl_create`): made
/// with `perm` by a caller with `umask`, in a directory whose default ACL
/// is `default` (its xattr value, if it has one). The default ACL replaces
/// the umask, and a directory inherits it too; a symlink takes neither.
/// Shared by the embedded engine and the shared namespace.
pub fn create(default: Option<&[u8]>, kind: Kind, perm: u16, umask: u32) -> Result<(u16, Xattrs)> {
    let mut xattrs = Vec::new();
    let mut perm = perm;
    match default.map(Acl::decode).transpose()? {
        _ if kind == Kind::Symlink => {}
        Some(d) => {
            let (access, bits) = d.inherit(perm);
            perm = (perm & !0o777) | bits;
            if let Some(a) = access {
                xattrs.push((ACCESS.to_vec(), a.encode()));
            }
            if kind == Kind::Dir {
                xattrs.push((DEFAULT.to_vec(), d.encode()));
            }
        }
        None => perm &= !(umask as u16 & 0o777),
    }
    Ok((perm, xattrs))
}

/// Setting ACL `a` as xattr `name` (ACCESS or DEFAULT) on an inode of
/// `kind` whose mode is `perm`: an access ACL sets the permission bits
/// (`posix_acl_update_mode`) and clears setgid unless `keeps_setgid` (the
/// caller is root or in the file's group). Returns whether the xattr is
/// removed rather than stored (an access ACL the mode expresses, an empty
/// default ACL), or None when there is nothing to do (an empty default
/// ACL on a non-directory). A default ACL on a non-directory is EACCES,
/// as on ext4.
pub fn set(
    name: &[u8],
    a: &Acl,
    kind: Kind,
    perm: &mut u16,
    keeps_setgid: bool,
) -> Result<Option<bool>> {
    if name == DEFAULT {
        if kind != Kind::Dir {
            return if a.is_empty() {
                Ok(None)
            } else {
                Err(Error::PermissionDenied)
            };
        }
        return Ok(Some(a.is_empty()));
    }
    let (bits, equiv) = a.mode();
    *perm = (*perm & !0o777) | bits;
    if !keeps_setgid {
        *perm &= !0o2000;
    }
    Ok(Some(equiv))
}

/// chmod to `perm` (`posix_acl_chmod`): the access ACL among `xattrs`, if
/// any, gets the new owner, mask (or owning group) and other entries. A
/// stored ACL that does not decode is left as it is and its error returned.
pub fn chmod(xattrs: &mut Xattrs, perm: u16) -> Result<()> {
    if let Some(x) = xattrs.iter_mut().find(|(n, _)| n == ACCESS) {
        let mut a = Acl::decode(&x.1)?;
        a.chmod(perm);
        x.1 = a.encode();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(es: &[(u16, u16, u32)]) -> Acl {
        Acl(es
            .iter()
            .map(|&(tag, perm, id)| Entry { tag, perm, id })
            .collect())
    }

    #[test]
    fn round_trip_and_validation() {
        let a = acl(&[
            (USER_OBJ, 6, 0),
            (USER, 4, 1000),
            (GROUP_OBJ, 4, 0),
            (MASK, 6, 0),
            (OTHER, 0, 0),
        ]);
        assert_eq!(Acl::decode(&a.encode()).unwrap(), a);
        // A named entry without a mask, two owners, a bad perm, a bad header.
        let no_mask = acl(&[
            (USER_OBJ, 6, 0),
            (USER, 4, 1000),
            (GROUP_OBJ, 4, 0),
            (OTHER, 0, 0),
        ]);
        assert_eq!(Acl::decode(&no_mask.encode()), Err(Error::Invalid));
        let two = acl(&[
            (USER_OBJ, 6, 0),
            (USER_OBJ, 6, 0),
            (GROUP_OBJ, 4, 0),
            (OTHER, 0, 0),
        ]);
        assert_eq!(Acl::decode(&two.encode()), Err(Error::Invalid));
        let perm = acl(&[(USER_OBJ, 8, 0), (GROUP_OBJ, 4, 0), (OTHER, 0, 0)]);
        assert_eq!(Acl::decode(&perm.encode()), Err(Error::Invalid));
        assert_eq!(Acl::decode(&[1, 0, 0, 0]), Err(Error::Invalid));
        assert!(Acl::decode(&VERSION.to_le_bytes()).unwrap().is_empty());
    }

    #[test]
    fn mode_comes_from_the_mask() {
        // setfacl -m u:nobody:rw on a 0644 file: mask rw, so group bits rw.
        let a = acl(&[
            (USER_OBJ, 6, 0),
            (USER, 6, 65534),
            (GROUP_OBJ, 4, 0),
            (MASK, 6, 0),
            (OTHER, 4, 0),
        ]);
        assert_eq!(a.mode(), (0o664, false));
        let minimal = acl(&[(USER_OBJ, 7, 0), (GROUP_OBJ, 5, 0), (OTHER, 1, 0)]);
        assert_eq!(minimal.mode(), (0o751, true));
    }

    #[test]
    fn chmod_sets_the_mask_not_the_owning_group() {
        let mut a = acl(&[
            (USER_OBJ, 6, 0),
            (USER, 6, 65534),
            (GROUP_OBJ, 4, 0),
            (MASK, 6, 0),
            (OTHER, 4, 0),
        ]);
        a.chmod(0o700);
        assert_eq!(
            a,
            acl(&[
                (USER_OBJ, 7, 0),
                (USER, 6, 65534),
                (GROUP_OBJ, 4, 0),
                (MASK, 0, 0),
                (OTHER, 0, 0)
            ])
        );
    }

    #[test]
    fn inherit_masks_by_the_create_mode() {
        let d = acl(&[
            (USER_OBJ, 7, 0),
            (USER, 7, 1000),
            (GROUP_OBJ, 5, 0),
            (MASK, 7, 0),
            (OTHER, 5, 0),
        ]);
        // open(O_CREAT, 0644) in that directory.
        let (a, mode) = d.inherit(0o644);
        assert_eq!(mode, 0o644);
        assert_eq!(
            a.unwrap(),
            acl(&[
                (USER_OBJ, 6, 0),
                (USER, 7, 1000),
                (GROUP_OBJ, 5, 0),
                (MASK, 4, 0),
                (OTHER, 4, 0)
            ])
        );
        // A minimal default ACL gives no access ACL, only the masked mode.
        let m = acl(&[(USER_OBJ, 7, 0), (GROUP_OBJ, 0, 0), (OTHER, 0, 0)]);
        assert_eq!(m.inherit(0o777), (None, 0o700));
    }
}
