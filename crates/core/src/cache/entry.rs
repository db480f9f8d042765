//! A cached directory entry (`Dent`) and the name it is kept under (`Name`:
//! inline up to 20 bytes, boxed past that).

use crate::types::{Ino, Kind};

/// A cached directory entry. `ino == 0` is a negative entry: the name is known
/// absent (a miss cached, or an unlink not yet committed, which must shadow the
/// store's old entry until it is).
#[derive(Clone, Copy, Debug)]
pub struct Dent {
    pub ino: Ino,
    pub kind: Kind,
    /// The entry's sole flag (`schema::encode_entry`): unlink may delete the
    /// inode without reading it.
    pub sole: bool,
    pub ver: u64,
    pub dirty_epoch: u64,
}

/// A cached name in 21 bytes: up to 20 in place (most file names), longer
/// ones on the heap behind a thin pointer. Written by hand because it is the
/// index's hot path: a lookup in a big directory that finds its hash then
/// compares the name without a further pointer chase (a cache miss at 1M
/// entries), a short name costs no allocation of its own, and at 21 bytes
/// with alignment 1 it leaves room in the slot's one cache line for the
/// pointer to the entry's inode (`Slot::inode`). An enum of an inline array
/// and a `Box<[u8]>` takes 24 bytes with alignment 8, which did not fit.
///
/// Layout: the last byte is the length of an inline name, or `NAME_HEAP`;
/// then the first `size_of::<usize>()` bytes hold a pointer from
/// `Box::into_raw(Box<Box<[u8]>>)`, owned by this `Name` alone (it is neither
/// `Clone` nor `Copy`, and `Drop` frees it).
pub struct Name([u8; NAME_BYTES]);

const NAME_BYTES: usize = 21;
const NAME_INLINE: usize = NAME_BYTES - 1;
const NAME_HEAP: u8 = u8::MAX;
const PTR: usize = std::mem::size_of::<usize>();

impl Name {
    pub fn new(n: &[u8]) -> Name {
        let mut b = [0u8; NAME_BYTES];
        if n.len() <= NAME_INLINE {
            b[..n.len()].copy_from_slice(n);
            b[NAME_INLINE] = n.len() as u8;
        } else {
            let p: *mut Box<[u8]> = Box::into_raw(Box::new(Box::<[u8]>::from(n)));
            b[..PTR].copy_from_slice(&(p as usize).to_ne_bytes());
            b[NAME_INLINE] = NAME_HEAP;
        }
        Name(b)
    }

    #[inline]
    fn heap(&self) -> Option<*mut Box<[u8]>> {
        (self.0[NAME_INLINE] == NAME_HEAP)
            .then(|| usize::from_ne_bytes(self.0[..PTR].try_into().unwrap()) as *mut Box<[u8]>)
    }
}

impl std::ops::Deref for Name {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self.heap() {
            // SAFETY: the pointer came from `Box::into_raw` in `new` and is
            // freed only by `drop`, which needs `&mut self`.
            Some(p) => unsafe { &*p },
            None => &self.0[..self.0[NAME_INLINE] as usize],
        }
    }
}

impl Drop for Name {
    fn drop(&mut self) {
        if let Some(p) = self.heap() {
            // SAFETY: as in `deref`; this is the pointer's one owner.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}
