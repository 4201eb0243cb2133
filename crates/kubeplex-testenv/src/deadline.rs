//! A deadline for every test that uses the environment, so that a hang fails the test binary naming the test.
//!
//! libtest runs each test on a thread named after it and gives a test no time limit: a test that hangs
//! holds its binary, and the whole `cargo test`, until something outside kills it, naming nothing. The
//! first use of the environment on a test's thread (starting or sharing one, a wait, a watched process,
//! [`arm_test_deadline`]) arms that test's deadline; the thread's end (the test's) disarms it. A test still running at its
//! deadline is named on stderr and the process exits with libtest's failure status, after the `atexit`
//! hook has stopped the clusters.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write as _;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

/// The environment variable that sets every test's deadline, in seconds.
pub const TEST_DEADLINE_VAR: &str = "KUBEPLEX_TEST_DEADLINE";

/// A test's deadline unless [`TEST_DEADLINE_VAR`] says otherwise: well past the slowest test's time, well
/// under a CI step's limit.
pub const DEFAULT_TEST_DEADLINE: Duration = Duration::from_secs(300);

/// The exit status libtest gives a binary with a failed test.
const FAILED: i32 = 101;

enum Message {
    Arm { id: u64, test: String, at: Instant },
    Disarm(u64),
}

/// Disarms its test's deadline when the test's thread ends.
struct Armed(u64);

impl Drop for Armed {
    fn drop(&mut self) {
        if let Some(watchdog) = WATCHDOG.get() {
            // The watchdog thread never ends while the process runs.
            let _ = watchdog.send(Message::Disarm(self.0));
        }
    }
}

thread_local! {
    static ARMED: RefCell<Option<Armed>> = const { RefCell::new(None) };
}

static WATCHDOG: OnceLock<Sender<Message>> = OnceLock::new();

/// Arms the deadline of the test running on this thread, once per test, for a test that uses nothing else of
/// this crate (everything here that starts, shares, waits or runs a program arms it). Threads that are not a
/// test's (the main thread, tokio's workers, unnamed ones) are left alone.
pub fn arm_test_deadline() {
    let current = thread::current();
    let Some(test) = current.name().filter(|name| is_test_thread(name)) else {
        return;
    };
    ARMED.with(|armed| {
        let mut armed = armed.borrow_mut();
        if armed.is_some() {
            return;
        }
        let id = next_id();
        let message = Message::Arm {
            id,
            test: test.to_owned(),
            at: Instant::now() + limit(),
        };
        if watchdog().send(message).is_ok() {
            *armed = Some(Armed(id));
        }
    });
}

fn is_test_thread(name: &str) -> bool {
    name != "main" && !name.starts_with("tokio-")
}

fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Every test's deadline: [`TEST_DEADLINE_VAR`] in seconds, or [`DEFAULT_TEST_DEADLINE`].
fn limit() -> Duration {
    static LIMIT: OnceLock<Duration> = OnceLock::new();
    *LIMIT.get_or_init(|| match std::env::var(TEST_DEADLINE_VAR) {
        Ok(seconds) => {
            let seconds: u64 = seconds.trim().parse().unwrap_or_else(|_| {
                panic!("{TEST_DEADLINE_VAR} is a number of seconds, not {seconds:?}")
            });
            Duration::from_secs(seconds.max(1))
        }
        Err(_) => DEFAULT_TEST_DEADLINE,
    })
}

fn watchdog() -> &'static Sender<Message> {
    WATCHDOG.get_or_init(|| {
        let (sender, receiver) = mpsc::channel();
        thread::Builder::new()
            .name("kubeplex-testenv-deadlines".into())
            .spawn(move || watch(receiver))
            .expect("spawning the test deadline thread");
        sender
    })
}

/// Keeps the armed deadlines; at the first one passed, names its test and ends the process.
fn watch(messages: mpsc::Receiver<Message>) {
    let mut armed: HashMap<u64, (String, Instant)> = HashMap::new();
    loop {
        let next = armed.values().map(|(_, at)| *at).min();
        let message = match next {
            Some(at) => messages.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => messages.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match message {
            Ok(Message::Arm { id, test, at }) => {
                armed.insert(id, (test, at));
            }
            Ok(Message::Disarm(id)) => {
                armed.remove(&id);
            }
            Err(RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                if let Some((test, _)) = armed.values().find(|(_, at)| *at <= now) {
                    // Straight to stderr: libtest captures `eprintln!` of the thread that armed this
                    // one, and the capture is lost at the exit.
                    let _ = writeln!(
                        std::io::stderr(),
                        "\ntest {test} is still running {:?} after it first used the test environment: \
                         stopped ({TEST_DEADLINE_VAR} sets the deadline in seconds)",
                        limit()
                    );
                    std::process::exit(FAILED);
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}
