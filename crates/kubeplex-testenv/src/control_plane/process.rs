//! Child processes that never outlive the program that started them.
//!
//! Three layers, because tests end in three ways: dropping a [`Process`] kills it (a test that returns or
//! panics); an `atexit` hook kills whatever is still registered (environments kept in statics, which are
//! never dropped; see `exit_registry.rs`); and `PR_SET_PDEATHSIG` makes the kernel kill the children when
//! this program dies without running either (SIGKILL, a crashed runner).

use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::thread;

use super::exit_registry;

/// A running child process, killed (with its process group) when dropped.
#[derive(Debug)]
pub(super) struct Process {
    child: Child,
    registration: u64,
}

impl Process {
    /// Starts `command` with stdout and stderr appended to `log`.
    pub(super) fn spawn(mut command: Command, log: &Path) -> io::Result<Self> {
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
        let registration = exit_registry::register_process(child.id());
        Ok(Self {
            child,
            registration,
        })
    }

    /// The process id.
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How the process exited, if it has.
    pub(super) fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Sends `signal` to the process.
    pub(super) fn signal(&self, signal: libc::c_int) -> io::Result<()> {
        // SAFETY: plain kill(2) on our own child's pid.
        if unsafe { libc::kill(self.child.id() as libc::pid_t, signal) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        crate::process_group::kill_group(self.child.id());
        let _ = self.child.wait();
        exit_registry::unregister_process(self.registration);
    }
}

/// The last `lines` lines of a log file.
pub(super) fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not the process: test threads end
/// after each test, so every child is forked from one thread that lives as long as the program.
fn spawn_from_lasting_thread(command: Command) -> io::Result<Child> {
    type Request = (Command, mpsc::Sender<io::Result<Child>>);
    // A `Sender` is `Sync`: every test thread sends on the one channel, with no lock around it.
    static SPAWNER: OnceLock<mpsc::Sender<Request>> = OnceLock::new();
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
        tx
    });
    let (reply, response) = mpsc::channel();
    spawner
        .send((command, reply))
        .map_err(|_| io::Error::other("process spawner thread is gone"))?;
    response
        .recv()
        .map_err(|_| io::Error::other("process spawner thread is gone"))?
}
