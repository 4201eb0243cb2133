//! Ending a child started in a process group of its own, with whatever it started.

/// Kills the process group `pid` leads: a shell's children hold its output open, and SIGKILL also ends a
/// stopped (frozen) process.
pub(crate) fn kill_group(pid: u32) {
    if let Ok(group) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) on the process group our own child leads (it was started with `process_group(0)`).
        unsafe { libc::kill(-group, libc::SIGKILL) };
    }
}
