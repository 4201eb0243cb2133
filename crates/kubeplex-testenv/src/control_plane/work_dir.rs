//! The directory an environment keeps its clusters' files and kubeconfig in.

use std::path::{Path, PathBuf};

use super::cluster::rand_u64;
use super::exit_registry;
use crate::error::{Result, io_error};

/// A fresh directory `kubeplex-testenv.PID.RANDOM` in the temp dir, removed when dropped or, for an
/// environment that is never dropped (a static), when the program exits.
#[derive(Debug)]
pub(crate) struct WorkDir {
    path: PathBuf,
    registration: u64,
}

impl WorkDir {
    /// Creates the directory; first removes those of dead processes (killed too hard to clean up after
    /// themselves).
    pub(crate) fn create() -> Result<Self> {
        let tmp = std::env::temp_dir();
        sweep_dead(&tmp);
        let path = tmp.join(format!(
            "kubeplex-testenv.{}.{:08x}",
            std::process::id(),
            rand_u64() as u32
        ));
        std::fs::create_dir_all(&path).map_err(io_error(format!("creating {}", path.display())))?;
        let registration = exit_registry::remove_directory_at_exit(&path);
        Ok(Self { path, registration })
    }

    /// Where it is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
        exit_registry::forget_directory(self.registration);
    }
}

/// Removes the directories in `tmp` of processes that no longer exist.
fn sweep_dead(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("kubeplex-testenv."))
            .and_then(|rest| {
                rest.split('.')
                    .next()
                    .and_then(|pid| pid.parse::<libc::pid_t>().ok())
            })
        else {
            continue;
        };
        // SAFETY: signal 0 only checks whether the process exists.
        let dead = unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if dead {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
