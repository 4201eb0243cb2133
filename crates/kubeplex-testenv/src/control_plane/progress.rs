//! What a first run prints while it builds kube-apiserver and etcd (and kube-controller-manager), which
//! takes minutes.
//!
//! Written straight to stderr rather than through `tracing`: programs using the environment (the demo,
//! tests) often filter logs down to warnings, and a silent ten-minute wait looks like a hang.

use std::fmt::Write as _;
use std::io::{self, IsTerminal as _, Write};
use std::time::{Duration, Instant};

/// How long a cold build of kube-apiserver and etcd usually takes, for the first message.
pub(super) const USUAL_BUILD_TIME: &str =
    "8-15 minutes on 2 cores with empty Go caches, less with more cores";
/// The same with kube-controller-manager: it shares most of its packages with kube-apiserver.
pub(super) const USUAL_BUILD_TIME_ALL: &str =
    "11-20 minutes on 2 cores with empty Go caches, less with more cores";
/// kube-controller-manager alone, once kube-apiserver is built (its packages are in Go's build cache).
pub(super) const USUAL_CONTROLLER_MANAGER_BUILD_TIME: &str =
    "3-5 minutes on 2 cores after kube-apiserver's build, seconds when Go's build cache has it all";

/// Without a terminal, a progress line at least this often (besides one per tenth of the packages).
const LINE_INTERVAL: Duration = Duration::from_secs(30);
/// On a terminal, the status line is redrawn this often.
const REDRAW_INTERVAL: Duration = Duration::from_secs(1);

const PREFIX: &str = "kubeplex-testenv: ";

/// Where a program's build is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// `go list`: resolving the packages to compile, downloading modules on a cold machine.
    Resolving,
    /// `go build -v`: compiling `total` packages (an estimate), then linking.
    Compiling { total: Option<usize> },
}

/// The progress of building one program, reported to `out` (stderr).
pub(super) struct Progress<W = io::Stderr> {
    out: W,
    /// Redraw one status line in place (a terminal) instead of printing lines.
    in_place: bool,
    label: String,
    started: Instant,
    last_report: Instant,
    phase: Phase,
    downloaded: usize,
    compiled: usize,
    /// Tenths of the packages already reported, so that a log gets about ten lines per program.
    tenths_reported: usize,
    /// A status line is on screen without its newline.
    line_open: bool,
}

impl Progress {
    /// Progress of the program `label` (e.g. `[1/2] kube-apiserver`) on stderr.
    pub(super) fn stderr(label: impl Into<String>) -> Self {
        let in_place = io::stderr().is_terminal();
        Self::new(io::stderr(), in_place, label.into())
    }
}

/// Prints one message line on stderr.
pub(super) fn say(message: &str) {
    let _ = writeln!(io::stderr(), "{PREFIX}{message}");
}

impl<W: Write> Progress<W> {
    fn new(out: W, in_place: bool, label: String) -> Self {
        let now = Instant::now();
        let mut progress = Self {
            out,
            in_place,
            label,
            started: now,
            last_report: now,
            phase: Phase::Resolving,
            downloaded: 0,
            compiled: 0,
            tenths_reported: 0,
            line_open: false,
        };
        progress.line(&"resolving its packages (downloading modules on a first run) ...");
        progress
    }

    /// Resolving is over; `total` packages (if known) are to be compiled.
    pub(super) fn compiling(&mut self, total: Option<usize>) {
        self.phase = Phase::Compiling { total };
        match total {
            Some(total) => self.line(&format_args!("compiling {} ...", packages(total))),
            None => self.line(&"compiling ..."),
        }
    }

    /// Takes one line of the go command's stderr; returns whether it was progress (a compiled package or
    /// a download) rather than a message worth keeping for an error report.
    pub(super) fn go_output(&mut self, line: &str) -> bool {
        if line.starts_with("go: downloading ") {
            self.downloaded += 1;
            return true;
        }
        // `go build -v` names each package as it compiles it; messages have spaces or start with `#`.
        let package = matches!(self.phase, Phase::Compiling { .. })
            && !line.is_empty()
            && !line.starts_with('#')
            && !line.contains(char::is_whitespace);
        if package {
            self.compiled += 1;
            if let Phase::Compiling { total: Some(total) } = self.phase {
                let tenths = (self.compiled * 10 / total.max(1)).min(10);
                if tenths > self.tenths_reported && !self.in_place {
                    self.tenths_reported = tenths;
                    self.status();
                }
            }
        }
        package
    }

    /// Called about every second: reports the elapsed time even when the go command is quiet.
    pub(super) fn tick(&mut self) {
        let interval = if self.in_place {
            REDRAW_INTERVAL
        } else {
            LINE_INTERVAL
        };
        if self.last_report.elapsed() >= interval {
            self.status();
        }
    }

    /// The program is built.
    pub(super) fn done(&mut self) {
        let elapsed = self.started.elapsed();
        self.line(&format_args!("built in {}", minutes(elapsed)));
    }

    /// Where the build is, with the time spent so far.
    fn status(&mut self) {
        let mut text = String::new();
        match self.phase {
            Phase::Resolving if self.downloaded > 0 => {
                let _ = write!(
                    text,
                    "resolving packages, {} modules downloaded",
                    self.downloaded
                );
            }
            Phase::Resolving => text.push_str("resolving packages"),
            Phase::Compiling { total } => match total {
                Some(total) if self.compiled >= total => {
                    let _ = write!(text, "{} compiled, linking", packages(self.compiled));
                }
                Some(total) => {
                    let _ = write!(text, "{}/{total} packages compiled", self.compiled);
                }
                None => {
                    let _ = write!(text, "{} compiled", packages(self.compiled));
                }
            },
        }
        let _ = write!(text, ", {} elapsed", minutes(self.started.elapsed()));
        if self.in_place {
            let _ = write!(self.out, "\r\x1b[2K{PREFIX}{}: {text}", self.label);
            let _ = self.out.flush();
            self.line_open = true;
        } else {
            let _ = writeln!(self.out, "{PREFIX}{}: {text}", self.label);
        }
        self.last_report = Instant::now();
    }

    /// A line that stays: a phase change.
    fn line(&mut self, message: &dyn std::fmt::Display) {
        if std::mem::take(&mut self.line_open) {
            let _ = write!(self.out, "\r\x1b[2K");
        }
        let _ = writeln!(self.out, "{PREFIX}{}: {message}", self.label);
        self.last_report = Instant::now();
    }
}

fn packages(count: usize) -> String {
    match count {
        1 => "1 package".into(),
        _ => format!("{count} packages"),
    }
}

/// `7m05s`, or `42s` under a minute.
pub(super) fn minutes(elapsed: Duration) -> String {
    let seconds = elapsed.as_secs();
    if seconds < 60 {
        format!("{seconds}s")
    } else {
        format!("{}m{:02}s", seconds / 60, seconds % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(progress: &Progress<Vec<u8>>) -> String {
        String::from_utf8(progress.out.clone()).unwrap()
    }

    #[test]
    fn a_log_gets_a_line_per_tenth_of_the_packages() {
        let mut progress = Progress::new(Vec::new(), false, "[1/2] kube-apiserver".into());
        assert!(progress.go_output("go: downloading k8s.io/api v0.37.2"));
        progress.compiling(Some(20));
        for n in 0..20 {
            assert!(progress.go_output(&format!("k8s.io/pkg{n}")));
        }
        assert!(!progress.go_output("# k8s.io/pkg3"));
        assert!(!progress.go_output("pkg3/a.go:1:2: undefined: x"));
        progress.done();
        let out = String::from_utf8(progress.out).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[..3],
            [
                "kubeplex-testenv: [1/2] kube-apiserver: resolving its packages (downloading modules on a first run) ...",
                "kubeplex-testenv: [1/2] kube-apiserver: compiling 20 packages ...",
                "kubeplex-testenv: [1/2] kube-apiserver: 2/20 packages compiled, 0s elapsed",
            ]
        );
        assert_eq!(lines.len(), 2 + 10 + 1, "{out}");
        assert_eq!(
            lines[11],
            "kubeplex-testenv: [1/2] kube-apiserver: 20 packages compiled, linking, 0s elapsed"
        );
        assert_eq!(
            lines[12],
            "kubeplex-testenv: [1/2] kube-apiserver: built in 0s"
        );
        assert!(!out.contains('\x1b'), "no terminal codes in a log: {out:?}");
    }

    #[test]
    fn a_terminal_gets_one_line_redrawn() {
        let mut progress = Progress::new(Vec::new(), true, "[2/2] etcd".into());
        progress.compiling(None);
        progress.go_output("go.etcd.io/etcd/server/v3");
        progress.last_report -= REDRAW_INTERVAL;
        progress.tick();
        assert!(
            text(&progress)
                .ends_with("\r\x1b[2Kkubeplex-testenv: [2/2] etcd: 1 package compiled, 0s elapsed"),
            "{:?}",
            text(&progress)
        );
        progress.done();
        let out = String::from_utf8(progress.out).unwrap();
        assert!(
            out.ends_with("\r\x1b[2Kkubeplex-testenv: [2/2] etcd: built in 0s\n"),
            "{out:?}"
        );
    }

    #[test]
    fn elapsed_time_reads_as_minutes_and_seconds() {
        assert_eq!(minutes(Duration::from_secs(42)), "42s");
        assert_eq!(minutes(Duration::from_secs(425)), "7m05s");
    }
}
