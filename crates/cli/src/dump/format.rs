//! The dump format, version 1 (docs/dump.md): JSON lines, one
//! record a line, in the order of a depth-first walk, each directory's
//! entries after its own record and before its end record, so a load
//! needs to remember only the directories open on the walk's path and the
//! inodes that have more than one name.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use shoal_core::{Attr, Kind, Ts};

pub const VERSION: u32 = 1;

/// One line of a dump.
#[derive(Serialize, Deserialize, Debug)]
#[serde(tag = "t")]
pub enum Rec {
    /// The first line.
    #[serde(rename = "shoal-dump")]
    Head(Head),
    /// An inode under its first name (the dumped root: parent 0, no name).
    #[serde(rename = "n")]
    Node(Node),
    /// Another name of an inode dumped before (a hard link).
    #[serde(rename = "h")]
    Link { p: u64, n: Name, i: u64 },
    /// Bytes of the file of the last `n` record, at offset `o` (base64).
    /// What no record covers up to the file's size is a hole.
    #[serde(rename = "d")]
    Data { o: u64, b: String },
    /// The end of directory `i`'s entries.
    #[serde(rename = "e")]
    EndDir { i: u64 },
    /// The last line of a whole dump, with its counts.
    #[serde(rename = "end")]
    End(Counts),
    /// The source failed part way: no `end` follows.
    #[serde(rename = "error")]
    Failed { msg: String },
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Head {
    pub version: u32,
    /// The store or namespace dumped, without credentials.
    pub source: String,
    /// When the dump started (seconds since the epoch).
    pub taken: u64,
    /// What instant the records are of: "snapshot" (one commit of the
    /// embedded store, taken after a sync), "unmounted" (nothing changed
    /// it), or "live" (read while it changed: etcd, see docs/operations.md).
    pub point: String,
    /// The directory dumped, from the source's root.
    pub subtree: String,
}

#[derive(Serialize, Deserialize, Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub nodes: u64,
    pub links: u64,
    pub bytes: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Node {
    /// Parent's inode number in the source (0 for the dump's root).
    pub p: u64,
    pub n: Name,
    /// Inode number in the source.
    pub i: u64,
    /// Kind: f d l p s c b.
    pub k: char,
    /// Permission bits (07777).
    pub m: u16,
    pub u: u32,
    pub g: u32,
    pub s: u64,
    /// atime, mtime, ctime: seconds and nanoseconds.
    pub a: (i64, u32),
    pub mt: (i64, u32),
    pub ct: (i64, u32),
    #[serde(default, skip_serializing_if = "is_zero")]
    pub r: u32,
    /// Links in the source (a load checks the count it made).
    pub nl: u32,
    /// chattr flags.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fl: u32,
    /// A symlink's target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l: Option<Name>,
    /// Extended attributes (ACLs among them): name, value in base64.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub x: Vec<(Name, String)>,
}

fn is_zero(x: &u32) -> bool {
    *x == 0
}

/// A name: a JSON string when it is UTF-8, else its bytes in base64.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(untagged)]
pub enum Name {
    Text(String),
    Raw { b64: String },
}

impl Name {
    pub fn of(b: &[u8]) -> Name {
        match std::str::from_utf8(b) {
            Ok(s) => Name::Text(s.to_string()),
            Err(_) => Name::Raw { b64: b64(b) },
        }
    }
    pub fn bytes(&self) -> Result<Vec<u8>, String> {
        match self {
            Name::Text(s) => Ok(s.as_bytes().to_vec()),
            Name::Raw { b64 } => unb64(b64),
        }
    }
}

pub fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

pub fn unb64(s: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| format!("bad base64 in the dump: {e}"))
}

pub fn kind_char(k: Kind) -> char {
    match k {
        Kind::File => 'f',
        Kind::Dir => 'd',
        Kind::Symlink => 'l',
        Kind::Fifo => 'p',
        Kind::Socket => 's',
        Kind::CharDev => 'c',
        Kind::BlockDev => 'b',
    }
}

pub fn char_kind(c: char) -> Option<Kind> {
    Some(match c {
        'f' => Kind::File,
        'd' => Kind::Dir,
        'l' => Kind::Symlink,
        'p' => Kind::Fifo,
        's' => Kind::Socket,
        'c' => Kind::CharDev,
        'b' => Kind::BlockDev,
        _ => return None,
    })
}

pub fn ts(t: Ts) -> (i64, u32) {
    (t.sec, t.nsec)
}

pub fn unts(t: (i64, u32)) -> Ts {
    Ts {
        sec: t.0,
        nsec: t.1,
    }
}

impl Node {
    pub fn of(parent: u64, name: &[u8], a: &Attr) -> Node {
        Node {
            p: parent,
            n: Name::of(name),
            i: a.ino,
            k: kind_char(a.kind),
            m: a.perm,
            u: a.uid,
            g: a.gid,
            s: a.size,
            a: ts(a.atime),
            mt: ts(a.mtime),
            ct: ts(a.ctime),
            r: a.rdev,
            nl: a.nlink,
            fl: 0,
            l: None,
            x: Vec::new(),
        }
    }
}
