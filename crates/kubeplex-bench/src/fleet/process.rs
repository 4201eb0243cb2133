//! One operator of the fleet section as the parent sees it: a child process (under the profiler wrapper, if
//! any) that prints JSON lines and answers `report` on stdin.

use std::process::Stdio;
use std::time::Duration;

use serde::de::DeserializeOwned;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::child::{FleetSpec, Reading};
use super::setup::{Host, PHASE};
use crate::harness::command;

/// A running operator process: JSON lines out, requests in.
pub(crate) struct Operator {
    process: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: tokio::task::JoinHandle<String>,
}

impl Operator {
    pub fn spawn(host: &Host<'_>, spec: &FleetSpec, n: usize) -> Result<Self, String> {
        let json = serde_json::to_string(spec).map_err(|e| e.to_string())?;
        let n = format!("fleet-{n}");
        let mut process = command(&host.wrapper, &host.exe, &n, spec.side.name())
            .arg("__fleet")
            .arg(json)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", host.exe.display()))?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (
            process.stdin.take(),
            process.stdout.take(),
            process.stderr.take(),
        ) else {
            return Err("the operator's pipes are missing".into());
        };
        // Keeps the last lines of the operator's log for an error message.
        let stderr = tokio::spawn(async move {
            let mut tail = std::collections::VecDeque::new();
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tail.len() == 20 {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
            Vec::from(tail).join("\n")
        });
        Ok(Self {
            process,
            stdin,
            stdout: BufReader::new(stdout).lines(),
            stderr,
        })
    }

    /// The next JSON line (a profiler wrapping the operator may print other lines).
    pub async fn next<T: DeserializeOwned>(&mut self, what: &str) -> Result<T, String> {
        loop {
            let line = tokio::time::timeout(PHASE, self.stdout.next_line())
                .await
                .map_err(|_| format!("the operator did not report {what} in time"))?
                .map_err(|e| format!("reading from the operator: {e}"))?;
            let Some(line) = line else {
                let _ = self.process.wait().await;
                let stderr = (&mut self.stderr).await.unwrap_or_default();
                return Err(format!("the operator ended before {what}:\n{stderr}"));
            };
            if line.starts_with('{') {
                return serde_json::from_str(&line)
                    .map_err(|e| format!("the operator printed {line:?}: {e}"));
            }
        }
    }

    pub async fn ask(&mut self) -> Result<Reading, String> {
        self.stdin
            .write_all(b"report\n")
            .await
            .map_err(|e| format!("asking the operator: {e}"))?;
        self.next("a reading").await
    }

    /// SIGKILL, as a lost node or an OOM kill ends it: nothing released, nothing flushed.
    pub async fn kill(mut self) -> Result<(), String> {
        self.process
            .kill()
            .await
            .map_err(|e| format!("killing the operator: {e}"))
    }

    pub async fn exit(mut self) -> Result<(), String> {
        let _ = self.stdin.write_all(b"exit\n").await;
        tokio::time::timeout(Duration::from_secs(60), self.process.wait())
            .await
            .map_err(|_| "the operator did not exit".to_owned())?
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}
