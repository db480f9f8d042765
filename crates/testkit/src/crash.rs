//! What a crash may leave, checked against the model's history (the
//! power-cut tests of the engine and the SIGKILL test through a mount).

use crate::model::{self, Model, State};

/// Each state's files' model nodes by path (the model's inode identity):
/// which bytes came from the same data object.
pub type Nodes = std::collections::HashMap<String, usize>;

pub fn nodes_of(m: &Model, s: &State) -> Nodes {
    s.iter()
        .filter(|e| e.1 == model::K::File)
        .filter_map(|e| m.node_of(&e.0).map(|i| (e.0.clone(), i)))
        .collect()
}

/// Whether the recovered tree `got` can be history state `j`. Names, kinds,
/// link counts and sizes must be exactly state j's (they are metadata, a
/// prefix of history). So must the bytes of a file of at most INLINE_MAX
/// (in its inode record). Past INLINE_MAX the bytes are in the file's data
/// object, durable at fsync and written in place (docs/design.md, "File
/// data"): each byte may be state j's, zero, or what that byte of the same
/// inode held in another state (an older write the crash kept, or a newer
/// one that reached the object before the size that covers it was
/// committed), never another file's or anything else; and a file fsync'ed
/// at state f <= j and not changed from f to j must be exactly state j's.
pub fn may_be(
    got: &State,
    states: &[State],
    inos: &[Nodes],
    j: usize,
    fsynced: &[(usize, String)],
) -> bool {
    why_not(got, states, inos, j, fsynced).is_none()
}

/// Why the recovered tree `got` cannot be history state `j` (the first rule
/// of `may_be` it breaks), or None if it can.
pub fn why_not(
    got: &State,
    states: &[State],
    inos: &[Nodes],
    j: usize,
    fsynced: &[(usize, String)],
) -> Option<String> {
    let want = &states[j];
    if got.len() != want.len() {
        return Some(format!("{} entries, state has {}", got.len(), want.len()));
    }
    for (g, w) in got.iter().zip(want) {
        if (&g.0, &g.1, g.2) != (&w.0, &w.1, w.2) || g.3.len() != w.3.len() {
            return Some(format!(
                "{}: {:?} nlink {} len {}, state has {}: {:?} nlink {} len {}",
                g.0,
                g.1,
                g.2,
                g.3.len(),
                w.0,
                w.1,
                w.2,
                w.3.len()
            ));
        }
        if g.3 == w.3 {
            continue;
        }
        let first = g.3.iter().zip(&w.3).position(|(a, b)| a != b);
        if g.3.len() as u64 <= shoal_core::INLINE_MAX {
            return Some(format!("{}: inline bytes differ at {first:?}", g.0));
        }
        let content = |s: &State, p: &str| s.iter().find(|e| e.0 == p).map(|e| e.3.clone());
        let synced_unchanged = fsynced.iter().any(|(f, p)| {
            *p == g.0 && *f <= j && (*f..=j).all(|k| content(&states[k], p).as_ref() == Some(&w.3))
        });
        if synced_unchanged {
            return Some(format!(
                "{}: fsync'ed and unchanged, bytes differ at {first:?}",
                g.0
            ));
        }
        let Some(&ino) = inos[j].get(&g.0) else {
            return Some(format!("{}: no model inode", g.0));
        };
        let same_inode: Vec<Vec<u8>> = (0..states.len())
            .flat_map(|k| {
                inos[k]
                    .iter()
                    .filter(|(_, &i)| i == ino)
                    .filter_map(|(p, _)| content(&states[k], p))
                    .collect::<Vec<_>>()
            })
            .collect();
        let bad = g.3.iter().enumerate().position(|(i, &b)| {
            !(b == 0 || b == w.3[i] || same_inode.iter().any(|c| c.get(i) == Some(&b)))
        });
        if let Some(i) = bad {
            return Some(format!(
                "{}: byte {i} is {:#x}: neither zero, the state's {:#x}, nor one its inode held",
                g.0, g.3[i], w.3[i]
            ));
        }
    }
    None
}
