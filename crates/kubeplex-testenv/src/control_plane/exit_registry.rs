//! What is left to clean up when the program exits without dropping it: the children of environments kept in
//! statics (which are never dropped) and their directories. An `atexit` hook kills and removes them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Live children by registration number, and directories to remove, for the `atexit` hook.
#[derive(Default)]
struct ExitRegistry {
    processes: BTreeMap<u64, u32>,
    directories: BTreeMap<u64, PathBuf>,
}

static REGISTRY: Mutex<Option<ExitRegistry>> = Mutex::new(None);
static NEXT: AtomicU64 = AtomicU64::new(0);

fn with_registry<T>(f: impl FnOnce(&mut ExitRegistry) -> T) -> T {
    static HOOK: OnceLock<()> = OnceLock::new();
    HOOK.get_or_init(|| {
        // SAFETY: registers a plain extern "C" function with no arguments.
        unsafe {
            libc::atexit(clean_up_at_exit);
        }
    });
    let mut guard = REGISTRY.lock();
    f(guard.get_or_insert_with(ExitRegistry::default))
}

pub(super) fn register_process(pid: u32) -> u64 {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    with_registry(|r| r.processes.insert(id, pid));
    id
}

pub(super) fn unregister_process(id: u64) {
    with_registry(|r| r.processes.remove(&id));
}

/// Removes `dir` at exit unless [`forget_directory`] is called first.
pub(super) fn remove_directory_at_exit(dir: &Path) -> u64 {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    with_registry(|r| r.directories.insert(id, dir.to_path_buf()));
    id
}

/// The directory was removed already.
pub(super) fn forget_directory(id: u64) {
    with_registry(|r| r.directories.remove(&id));
}

extern "C" fn clean_up_at_exit() {
    let Some(mut guard) = REGISTRY.try_lock() else {
        return;
    };
    let Some(registry) = guard.as_mut() else {
        return;
    };
    for &pid in registry.processes.values() {
        crate::process_group::kill_group(pid);
    }
    for &pid in registry.processes.values() {
        // SAFETY: reaps our own children so that their directories can be removed.
        unsafe {
            libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0);
        }
    }
    for dir in registry.directories.values() {
        let _ = std::fs::remove_dir_all(dir);
    }
}
