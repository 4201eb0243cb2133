//! A program a test runs and reads line by line, with a deadline on every wait: a program that hangs fails
//! the test with what it printed instead of hanging the test run.

use std::io::{BufRead as _, BufReader, Read};
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// A running program whose stdout and stderr lines are collected as they come (in arrival order).
///
/// Every wait takes a timeout; on timeout the program is killed and the test panics with its output.
/// Dropping it kills the program.
pub struct Watched {
    what: String,
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Watched {
    /// Starts `command` with stdout and stderr piped; `what` names it in panics.
    pub fn spawn(what: impl Into<String>, command: &mut Command) -> std::io::Result<Self> {
        crate::deadline::arm_test_deadline();
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()?;
        let (sender, lines) = mpsc::channel();
        let streams: [Box<dyn Read + Send>; 2] = [
            Box::new(child.stdout.take().expect("piped")),
            Box::new(child.stderr.take().expect("piped")),
        ];
        for stream in streams {
            let sender = sender.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if sender.send(line).is_err() {
                        return;
                    }
                }
            });
        }
        Ok(Self {
            what: what.into(),
            child,
            lines,
            seen: Vec::new(),
        })
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Every line printed so far.
    pub fn lines(&mut self) -> &[String] {
        self.seen.extend(self.lines.try_iter());
        &self.seen
    }

    /// Waits for the first line (from now on) that `matches`, and returns it.
    ///
    /// # Panics
    /// When no such line comes within `timeout`, or the program closes its output first.
    pub fn wait_for_line(&mut self, matches: impl Fn(&str) -> bool, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if matches(&line) {
                        return line;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.fail(&format!("no expected line within {timeout:?}"))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.fail("closed its output before the expected line")
                }
            }
        }
    }

    /// Waits for the program to exit and returns its status and every line it printed.
    ///
    /// # Panics
    /// When it is still running after `timeout` (it is killed first).
    pub fn wait(mut self, timeout: Duration) -> (ExitStatus, Vec<String>) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("waiting for the program") {
                // Its output threads end with the program; collect what they still carry.
                let drain_deadline = Instant::now() + Duration::from_secs(5);
                while let Ok(line) = self
                    .lines
                    .recv_timeout(drain_deadline.saturating_duration_since(Instant::now()))
                {
                    self.seen.push(line);
                }
                return (status, std::mem::take(&mut self.seen));
            }
            if Instant::now() >= deadline {
                self.fail(&format!("still running after {timeout:?}"));
            }
            self.seen.extend(self.lines.try_iter());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn fail(&mut self, why: &str) -> ! {
        kill_group(&mut self.child);
        // The killed group's pipes close, so the readers end; take what they still carry.
        let drain_deadline = Instant::now() + Duration::from_secs(5);
        while let Ok(line) = self
            .lines
            .recv_timeout(drain_deadline.saturating_duration_since(Instant::now()))
        {
            self.seen.push(line);
        }
        panic!("{} {why}; its output:\n{}", self.what, self.seen.join("\n"));
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        kill_group(&mut self.child);
    }
}

/// Kills `child` and whatever it started in its process group, and reaps it.
fn kill_group(child: &mut Child) {
    crate::process_group::kill_group(child.id());
    let _ = child.kill();
    let _ = child.wait();
}

/// `command.output()` with a deadline: runs it to the end and returns its status, stdout and stderr.
///
/// # Panics
/// When it cannot start, or is still running after `timeout` (it is killed, and the panic shows what it
/// printed).
pub fn output_within(command: &mut Command, timeout: Duration) -> Output {
    crate::deadline::arm_test_deadline();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    let read = |stream: Option<Box<dyn Read + Send>>| {
        let mut stream = stream.expect("piped");
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = stream.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = read(child.stdout.take().map(|s| Box::new(s) as _));
    let stderr = read(child.stderr.take().map(|s| Box::new(s) as _));
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the program") {
            break status;
        }
        if Instant::now() >= deadline {
            kill_group(&mut child);
            let (out, err) = (
                stdout.join().unwrap_or_default(),
                stderr.join().unwrap_or_default(),
            );
            panic!(
                "{command:?} still running after {timeout:?}; stdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&err)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_both_streams_arrive_and_the_exit_is_reported() {
        let mut watched = Watched::spawn(
            "sh",
            Command::new("sh").args(["-c", "echo one; echo two >&2; echo three; exit 3"]),
        )
        .unwrap();
        assert_eq!(
            watched.wait_for_line(|l| l == "three", Duration::from_secs(30)),
            "three"
        );
        let (status, lines) = watched.wait(Duration::from_secs(30));
        assert_eq!(status.code(), Some(3));
        for line in ["one", "two", "three"] {
            assert!(lines.iter().any(|l| l == line), "{lines:?}");
        }
    }

    #[test]
    fn a_program_that_hangs_fails_with_its_output() {
        let mut watched = Watched::spawn(
            "sleeper",
            Command::new("sh").args(["-c", "echo started; sleep 600"]),
        )
        .unwrap();
        watched.wait_for_line(|l| l == "started", Duration::from_secs(30));
        let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            watched.wait(Duration::from_millis(300))
        }))
        .unwrap_err();
        let message = panic.downcast_ref::<String>().unwrap();
        assert!(message.contains("sleeper still running"), "{message}");
        assert!(message.contains("started"), "{message}");
    }

    #[test]
    fn output_within_keeps_the_streams_apart_and_stops_a_hung_program() {
        let output = output_within(
            Command::new("sh").args(["-c", "echo out; echo err >&2"]),
            Duration::from_secs(30),
        );
        assert!(output.status.success());
        assert_eq!(output.stdout, b"out\n");
        assert_eq!(output.stderr, b"err\n");
        let panic = std::panic::catch_unwind(|| {
            output_within(
                Command::new("sh").args(["-c", "echo waiting; sleep 600"]),
                Duration::from_secs(2),
            )
        })
        .unwrap_err();
        let message = panic.downcast_ref::<String>().unwrap();
        assert!(
            message.contains("still running") && message.contains("waiting"),
            "{message}"
        );
    }

    #[test]
    fn a_line_that_never_comes_fails_instead_of_blocking() {
        let mut watched = Watched::spawn(
            "quiet",
            Command::new("sh").args(["-c", "echo nothing here; sleep 600"]),
        )
        .unwrap();
        // Its first line is read before the short wait, so a loaded machine cannot make it miss the panic.
        watched.wait_for_line(|l| l == "nothing here", Duration::from_secs(30));
        let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            watched.wait_for_line(|l| l == "ready", Duration::from_millis(300))
        }))
        .unwrap_err();
        let message = panic.downcast_ref::<String>().unwrap();
        assert!(message.contains("no expected line"), "{message}");
        assert!(message.contains("nothing here"), "{message}");
    }
}
