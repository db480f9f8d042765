//! A TCP proxy that can cut its link the way a network partition does: no
//! reset, no error, bytes simply stop moving (both ways, on the open
//! connections and on new ones) until the link heals, when they move again.
//! Tests put one in front of each etcd member for one daemon to cut that
//! daemon off while the others keep the cluster.
//!
//! Written here rather than taken from a crate: it is forty lines of
//! threads copying bytes, and a test must know exactly what a cut does.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub struct Proxy {
    addr: SocketAddr,
    cut: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
}

impl Proxy {
    /// Listen on a free port of 127.0.0.1 and forward every connection to
    /// `target`.
    pub fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a proxy port");
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let (c, d) = (cut.clone(), done.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if d.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(client) = conn else { continue };
                let (c, d) = (c.clone(), d.clone());
                std::thread::spawn(move || {
                    // A connection made during a cut waits, as a SYN would
                    // be retransmitted, until the link heals.
                    while c.load(Ordering::Relaxed) && !d.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    let Ok(server) = TcpStream::connect(target) else {
                        return;
                    };
                    let pair = [
                        (client.try_clone().unwrap(), server.try_clone().unwrap()),
                        (server, client),
                    ];
                    for (from, to) in pair {
                        let (c, d) = (c.clone(), d.clone());
                        std::thread::spawn(move || pump(from, to, &c, &d));
                    }
                });
            }
        });
        Proxy { addr, cut, done }
    }

    /// `http://127.0.0.1:PORT`, for an etcd endpoint list.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stop (`true`) or let move again (`false`) every byte through it.
    pub fn cut(&self, on: bool) {
        self.cut.store(on, Ordering::SeqCst);
    }
}

/// Copy `from` to `to` while the link is up; while it is cut, hold what was
/// read and read nothing more (the sender's buffers fill, as they would).
fn pump(mut from: TcpStream, mut to: TcpStream, cut: &AtomicBool, done: &AtomicBool) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        while cut.load(Ordering::Relaxed) && !done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        while cut.load(Ordering::Relaxed) && !done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if done.load(Ordering::Relaxed) || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees `done`.
        let _ = TcpStream::connect(self.addr);
    }
}
