// Copyright (c) 2024-present, fjall-rs
// This source code is licensed under both the Apache 2.0 and MIT License
// (found in the LICENSE-* files in the repository)

use std::sync::{atomic::AtomicBool, Arc, Mutex};

/// shoal patch (PATCHED.md): the signal also keeps why, when a background
/// worker set it, so the database's user can say what failed
/// (`Database::poisoned`).
#[derive(Clone, Debug, Default)]
pub struct PoisonSignal(Arc<AtomicBool>, Arc<Mutex<Option<String>>>);

impl PoisonSignal {
    pub fn is_poisoned(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn poison(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Poison, keeping the first reason given.
    pub fn poison_because(&self, why: String) {
        if let Ok(mut r) = self.1.lock() {
            r.get_or_insert(why);
        }
        self.poison();
    }

    /// Why a worker poisoned the database (None: not poisoned, or poisoned
    /// by a failed journal write, whose caller got the error).
    pub fn reason(&self) -> Option<String> {
        self.1.lock().ok().and_then(|r| r.clone())
    }
}

/// RAII guard to catch panics in background workers and poison a database
#[derive(Clone)]
pub struct PoisonDart(PoisonSignal);

impl PoisonDart {
    pub fn new(signal: PoisonSignal) -> Self {
        Self(signal)
    }

    pub fn poison(&self) {
        self.0.poison();
    }

    pub fn poison_because(&self, why: String) {
        self.0.poison_because(why);
    }
}

impl Drop for PoisonDart {
    fn drop(&mut self) {
        if std::thread::panicking() {
            log::error!("Poisoning database because of panic in background worker");
            self.poison();
        }
    }
}
