//! Named fault-injection points (XFS errortags, FoundationDB BUGGIFY). They
//! compile to nothing unless the `faults` feature is on; `tests/faults.rs`
//! arms them. Every point is listed here:
//!
//! - `commit.before_write`: the committer's write of a closed epoch fails
//!   with the armed error, as if the store had refused it.

use crate::error::Result;

#[cfg(feature = "faults")]
static ARMED: crate::sync::PlainMutex<Vec<(&'static str, crate::error::Error)>> =
    crate::sync::const_plain_mutex(Vec::new());

/// Arm a point: its next hit returns `err`.
#[cfg(feature = "faults")]
pub fn arm(name: &'static str, err: crate::error::Error) {
    ARMED.lock().push((name, err));
}

#[inline]
pub fn point(_name: &'static str) -> Result<()> {
    #[cfg(feature = "faults")]
    {
        let mut a = ARMED.lock();
        if let Some(i) = a.iter().position(|(n, _)| *n == _name) {
            return Err(a.remove(i).1);
        }
    }
    Ok(())
}
