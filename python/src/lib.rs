//! The Python extension `shoal._shoal` over the client (crates/client):
//! os-like calls raising OSError with the errno (so FileNotFoundError,
//! PermissionError... as `os` raises them), and the descriptors of open
//! files, which python/shoal/__init__.py wraps in file objects.

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::collections::HashMap;
use std::sync::Mutex;

fn err(e: std::io::Error) -> PyErr {
    if let Some(p) = shoal_client::Outside::of(&e) {
        return PyOSError::new_err((libc::EXDEV, e.to_string(), p.display().to_string()));
    }
    match e.raw_os_error() {
        Some(code) => {
            let msg = std::io::Error::from_raw_os_error(code).to_string();
            let msg = msg.split(" (os error").next().unwrap_or(&msg).to_string();
            PyOSError::new_err((code, msg))
        }
        None => PyOSError::new_err(e.to_string()),
    }
}

type R<T> = PyResult<T>;

#[pyclass(subclass, module = "shoal._shoal")]
struct Client {
    c: shoal_client::Client,
    /// Files open through `_open`, by descriptor, until `_close`.
    files: Mutex<HashMap<i32, shoal_client::File>>,
}

#[pymethods]
impl Client {
    #[new]
    fn new(mnt: &str) -> R<Self> {
        Ok(Client {
            c: shoal_client::Client::for_mount(mnt).map_err(err)?,
            files: Mutex::new(HashMap::new()),
        })
    }

    /// os.stat: an os.stat_result.
    #[pyo3(signature = (path, follow_symlinks = true))]
    fn stat<'p>(&self, py: Python<'p>, path: &str, follow_symlinks: bool) -> R<Bound<'p, PyAny>> {
        let s = py
            .allow_threads(|| self.c.stat_at(0, path, follow_symlinks))
            .map_err(err)?;
        let f = |t: (i64, u32)| t.0 as f64 + t.1 as f64 * 1e-9;
        let ns = |t: (i64, u32)| t.0 as i128 * 1_000_000_000 + t.1 as i128;
        let fields = (
            (
                s.mode, s.ino, 0u64, s.nlink, s.uid, s.gid, s.size, s.atime.0, s.mtime.0, s.ctime.0,
            ),
            (
                f(s.atime),
                f(s.mtime),
                f(s.ctime),
                ns(s.atime),
                ns(s.mtime),
                ns(s.ctime),
            ),
            (s.blksize, s.blocks, s.rdev),
        );
        let (a, b, c) = fields;
        let mut v: Vec<PyObject> = Vec::new();
        v.extend([
            a.0.into_pyobject(py)?.into_any().unbind(),
            a.1.into_pyobject(py)?.into_any().unbind(),
            a.2.into_pyobject(py)?.into_any().unbind(),
            a.3.into_pyobject(py)?.into_any().unbind(),
            a.4.into_pyobject(py)?.into_any().unbind(),
            a.5.into_pyobject(py)?.into_any().unbind(),
            a.6.into_pyobject(py)?.into_any().unbind(),
            a.7.into_pyobject(py)?.into_any().unbind(),
            a.8.into_pyobject(py)?.into_any().unbind(),
            a.9.into_pyobject(py)?.into_any().unbind(),
            b.0.into_pyobject(py)?.into_any().unbind(),
            b.1.into_pyobject(py)?.into_any().unbind(),
            b.2.into_pyobject(py)?.into_any().unbind(),
            b.3.into_pyobject(py)?.into_any().unbind(),
            b.4.into_pyobject(py)?.into_any().unbind(),
            b.5.into_pyobject(py)?.into_any().unbind(),
            c.0.into_pyobject(py)?.into_any().unbind(),
            c.1.into_pyobject(py)?.into_any().unbind(),
            c.2.into_pyobject(py)?.into_any().unbind(),
        ]);
        let t = pyo3::types::PyTuple::new(py, v)?;
        py.import("os")?.getattr("stat_result")?.call1((t,))
    }

    #[pyo3(signature = (path, mode = 0o777))]
    fn mkdir(&self, py: Python<'_>, path: &str, mode: u32) -> R<()> {
        py.allow_threads(|| self.c.mkdir(path, mode)).map_err(err)?;
        Ok(())
    }
    /// A new, empty file, not opened (FileExistsError if the name is taken).
    #[pyo3(signature = (path, mode = 0o666))]
    fn create(&self, py: Python<'_>, path: &str, mode: u32) -> R<()> {
        py.allow_threads(|| self.c.create(path, mode))
            .map_err(err)?;
        Ok(())
    }
    fn unlink(&self, py: Python<'_>, path: &str) -> R<()> {
        py.allow_threads(|| self.c.unlink(path)).map_err(err)
    }
    fn remove(&self, py: Python<'_>, path: &str) -> R<()> {
        self.unlink(py, path)
    }
    fn rmdir(&self, py: Python<'_>, path: &str) -> R<()> {
        py.allow_threads(|| self.c.rmdir(path)).map_err(err)
    }
    /// rename with renameat2's flags (os.rename replaces; flags=1
    /// RENAME_NOREPLACE, 2 RENAME_EXCHANGE).
    #[pyo3(signature = (src, dst, flags = 0))]
    fn rename(&self, py: Python<'_>, src: &str, dst: &str, flags: u32) -> R<()> {
        py.allow_threads(|| self.c.rename(src, dst, flags))
            .map_err(err)
    }
    fn replace(&self, py: Python<'_>, src: &str, dst: &str) -> R<()> {
        self.rename(py, src, dst, 0)
    }
    fn link(&self, py: Python<'_>, src: &str, dst: &str) -> R<()> {
        py.allow_threads(|| self.c.link(src, dst)).map_err(err)?;
        Ok(())
    }
    fn symlink(&self, py: Python<'_>, target: &str, path: &str) -> R<()> {
        py.allow_threads(|| self.c.symlink(target, path))
            .map_err(err)?;
        Ok(())
    }
    fn readlink(&self, py: Python<'_>, path: &str) -> R<String> {
        let p = py.allow_threads(|| self.c.readlink(path)).map_err(err)?;
        Ok(p.to_string_lossy().into_owned())
    }
    #[pyo3(signature = (path = ""))]
    fn listdir(&self, py: Python<'_>, path: &str) -> R<Vec<String>> {
        let v = py.allow_threads(|| self.c.readdir(path)).map_err(err)?;
        Ok(v.into_iter()
            .map(|e| String::from_utf8_lossy(&e.name).into_owned())
            .collect())
    }
    fn chmod(&self, py: Python<'_>, path: &str, mode: u32) -> R<()> {
        py.allow_threads(|| self.c.chmod(path, mode)).map_err(err)?;
        Ok(())
    }
    fn truncate(&self, py: Python<'_>, path: &str, length: u64) -> R<()> {
        py.allow_threads(|| self.c.truncate(path, length))
            .map_err(err)?;
        Ok(())
    }
    fn getxattr<'p>(&self, py: Python<'p>, path: &str, attribute: &str) -> R<Bound<'p, PyBytes>> {
        let v = py
            .allow_threads(|| self.c.getxattr(path, attribute.as_bytes()))
            .map_err(err)?;
        Ok(PyBytes::new(py, &v))
    }
    #[pyo3(signature = (path, attribute, value, flags = 0))]
    fn setxattr(
        &self,
        py: Python<'_>,
        path: &str,
        attribute: &str,
        value: &[u8],
        flags: u32,
    ) -> R<()> {
        py.allow_threads(|| self.c.setxattr(path, attribute.as_bytes(), value, flags))
            .map_err(err)
    }
    fn listxattr(&self, py: Python<'_>, path: &str) -> R<Vec<String>> {
        let v = py.allow_threads(|| self.c.listxattr(path)).map_err(err)?;
        Ok(v.into_iter()
            .map(|n| String::from_utf8_lossy(&n).into_owned())
            .collect())
    }
    fn removexattr(&self, py: Python<'_>, path: &str, attribute: &str) -> R<()> {
        py.allow_threads(|| self.c.removexattr(path, attribute.as_bytes()))
            .map_err(err)
    }

    /// A regular file's bytes, whole, in one call (EFBIG past the
    /// protocol's answer: `read_bytes` then opens it).
    fn _read_file<'p>(&self, py: Python<'p>, path: &str) -> R<Bound<'p, pyo3::types::PyBytes>> {
        let b = py.allow_threads(|| self.c.read_file(path)).map_err(err)?;
        Ok(pyo3::types::PyBytes::new(py, &b))
    }

    /// open(2): the descriptor (the data object's), kept until `_close`.
    fn _open(&self, py: Python<'_>, path: &str, flags: i32, mode: u32) -> R<i32> {
        let f = py
            .allow_threads(|| self.c.open(path, flags, mode))
            .map_err(err)?;
        let fd = f.fd();
        self.files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(fd, f);
        Ok(fd)
    }
    /// Close a descriptor from `_open`: the daemon takes size and time.
    fn _close(&self, py: Python<'_>, fd: i32) -> R<()> {
        let f = self
            .files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&fd);
        match f {
            Some(f) => py.allow_threads(|| f.close()).map_err(err),
            None => Err(err(std::io::Error::from_raw_os_error(libc::EBADF))),
        }
    }
    #[pyo3(signature = (fd, datasync = false))]
    fn _fsync(&self, py: Python<'_>, fd: i32, datasync: bool) -> R<()> {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let f = files
            .get(&fd)
            .ok_or_else(|| err(std::io::Error::from_raw_os_error(libc::EBADF)))?;
        py.allow_threads(|| {
            if datasync {
                f.sync_data()
            } else {
                f.sync_all()
            }
        })
        .map_err(err)
    }
}

#[pymodule]
fn _shoal(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Client>()?;
    Ok(())
}
