//! Child processes that never outlive the program that started them.
//!
//! Three layers, because tests end in three ways: dropping a [`Process`] kills it (a test that returns or
//! panics); an `atexit` hook kills whatever is still registered (environments kept in statics, which are
//! never dropped); and `PR_SET_PDEATHSIG` makes the kernel kill the children when this program dies
//! without running either (SIGKILL, a crashed runner).

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::thread;

/// A running child process, killed (with its process group) when dropped.
#[derive(Debug)]
pub(crate) struct Process {
    child: Child,
    registration: u64,
}

impl Process {
    /// Starts `command` with stdout and stderr appended to `log`.
    pub(crate) fn spawn(mut command: Command, log: &Path) -> io::Result<Self> {
        let out = File::options().create(true).append(true).open(log)?;
        command
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        // Its own process group: a Ctrl-C in the terminal reaches only us, and we shut down in order.
        command.process_group(0);
        // SAFETY: the closure only calls async-signal-safe functions (prctl, getppid, kill).
        unsafe {
            let parent = libc::getpid();
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died between fork and prctl.
                if libc::getppid() != parent {
                    libc::kill(libc::getpid(), libc::SIGKILL);
                }
                Ok(())
            });
        }
        let child = spawn_from_lasting_thread(command)?;
        let registration = register(child.id());
        Ok(Self {
            child,
            registration,
        })
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How the process exited, if it has.
    pub(crate) fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Sends `signal` to the process.
    pub(crate) fn signal(&self, signal: libc::c_int) -> io::Result<()> {
        // SAFETY: plain kill(2) on our own child's pid.
        if unsafe { libc::kill(self.child.id() as libc::pid_t, signal) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        kill_group(self.child.id());
        let _ = self.child.wait();
        unregister(self.registration);
    }
}

/// The last `lines` lines of a log file.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn kill_group(pid: u32) {
    // SAFETY: kill(2) on the process group our child leads; SIGKILL also ends a stopped (frozen) process.
    unsafe {
        libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
    }
}

/// PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not the process: test threads end
/// after each test, so every child is forked from one thread that lives as long as the program.
fn spawn_from_lasting_thread(command: Command) -> io::Result<Child> {
    type Request = (Command, mpsc::Sender<io::Result<Child>>);
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        thread::Builder::new()
            .name("kubeplex-testenv-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
            })
            .expect("cannot start the process spawner thread");
        Mutex::new(tx)
    });
    let (reply, response) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((command, reply))
        .map_err(|_| io::Error::other("process spawner thread is gone"))?;
    response
        .recv()
        .map_err(|_| io::Error::other("process spawner thread is gone"))?
}

/// Live children by registration number, and directories to remove, for the `atexit` hook.
#[derive(Default)]
struct Registry {
    processes: BTreeMap<u64, u32>,
    directories: BTreeMap<u64, PathBuf>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);
static NEXT: AtomicU64 = AtomicU64::new(0);

fn with_registry<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    static HOOK: OnceLock<()> = OnceLock::new();
    HOOK.get_or_init(|| {
        // SAFETY: registers a plain extern "C" function with no arguments.
        unsafe {
            libc::atexit(clean_up_at_exit);
        }
    });
    let mut guard = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(Registry::default))
}

fn register(pid: u32) -> u64 {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    with_registry(|r| r.processes.insert(id, pid));
    id
}

fn unregister(id: u64) {
    with_registry(|r| r.processes.remove(&id));
}

/// Removes `dir` at exit unless [`forget_directory`] is called first.
pub(crate) fn remove_directory_at_exit(dir: &Path) -> u64 {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    with_registry(|r| r.directories.insert(id, dir.to_path_buf()));
    id
}

/// The directory was removed already.
pub(crate) fn forget_directory(id: u64) {
    with_registry(|r| r.directories.remove(&id));
}

extern "C" fn clean_up_at_exit() {
    let Ok(mut guard) = REGISTRY.try_lock() else {
        return;
    };
    let Some(registry) = guard.as_mut() else {
        return;
    };
    for &pid in registry.processes.values() {
        kill_group(pid);
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
