//! A mutex that a forked child can replace.
//!
//! `fork()` copies only the calling thread: a lock held by any other thread stays held
//! forever in the child. Every lock vramledger keeps across hook calls is one of these,
//! and the child's `atfork` handler swaps in a fresh one (the old one is leaked on
//! purpose: it may still be "held").

use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, MutexGuard};

/// A lazily created, fork-replaceable `Mutex<T>`.
pub struct ForkSafeMutex<T: Default> {
    ptr: AtomicPtr<Mutex<T>>,
}

impl<T: Default> Default for ForkSafeMutex<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Default> ForkSafeMutex<T> {
    /// An empty slot; the mutex is created on first use.
    pub const fn new() -> Self {
        Self {
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    fn get(&self) -> &Mutex<T> {
        let p = self.ptr.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: pointers stored here come from Box::leak and are never freed.
            return unsafe { &*p };
        }
        let fresh = Box::into_raw(Box::new(Mutex::new(T::default())));
        match self.ptr.compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: we just stored it; it is never freed.
            Ok(_) => unsafe { &*fresh },
            Err(current) => {
                // SAFETY: `fresh` was never shared.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: as above.
                unsafe { &*current }
            }
        }
    }

    /// Locks; a poisoned lock is taken over (the data is plain books).
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.get().lock().unwrap_or_else(|e| e.into_inner())
    }

    /// In a forked child: forget the old mutex (it may be held by a thread that is gone).
    pub fn reset_in_child(&self) {
        self.ptr.store(std::ptr::null_mut(), Ordering::Release);
    }
}
