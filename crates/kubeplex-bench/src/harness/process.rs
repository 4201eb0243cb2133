//! The measurement processes as the parent runs them (this binary again, with a hidden subcommand, under
//! the profiler wrapper if any) and as they answer (one JSON line, then an exit without teardown).

use std::convert::Infallible;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::bench::Bench;

/// The command that runs `exe` under `wrapper` (`KUBEPLEX_BENCH_CHILD_WRAPPER`, split on whitespace) if
/// there is one, its `{n}` and `{side}` replaced by `n` and `side`, or `exe` alone.
pub(crate) fn command(
    wrapper: &[String],
    exe: &Path,
    n: &str,
    side: &str,
) -> tokio::process::Command {
    match wrapper.split_first() {
        Some((program, args)) => {
            let mut command = tokio::process::Command::new(program);
            command.args(
                args.iter()
                    .map(|a| a.replace("{n}", n).replace("{side}", side)),
            );
            command.arg(exe);
            command
        }
        None => tokio::process::Command::new(exe),
    }
}

impl Bench {
    /// Runs one `subcommand` process of `side` with `spec` (under the wrapper if set) and reads its outcome;
    /// it fails when the process takes longer than `timeout`. `what` names the run in errors.
    pub(crate) async fn run<T: DeserializeOwned>(
        &self,
        subcommand: &str,
        spec: &impl Serialize,
        side: &str,
        what: &str,
        timeout: Duration,
    ) -> Result<T, String> {
        let json = serde_json::to_string(spec).map_err(|e| e.to_string())?;
        let n = self
            .children
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .to_string();
        let mut command = command(&self.wrapper, &self.exe, &n, side);
        command.arg(subcommand).arg(json).kill_on_drop(true);
        let output = tokio::time::timeout(timeout, command.output())
            .await
            .map_err(|_| format!("a {side} {what} did not finish in {timeout:?}"))?
            .map_err(|e| format!("cannot run {}: {e}", self.exe.display()))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(format!(
                "a {side} {what} failed ({}): {}",
                output.status,
                tail.join("\n")
            ));
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        // A profiler wrapping the process may print after it: the outcome is the last JSON line.
        let line = stdout
            .lines()
            .rfind(|l| l.starts_with('{'))
            .unwrap_or_default();
        serde_json::from_str(line).map_err(|e| format!("a {side} {what} printed {line:?}: {e}"))
    }
}

/// Prints `outcome` as the process's one JSON line for [`Bench::run`], then exits at once: the parent has
/// what it needs, and teardown is not measured.
pub(crate) fn answer(outcome: &impl Serialize) -> Result<Infallible, String> {
    let line = serde_json::to_string(outcome).map_err(|e| e.to_string())?;
    println!("{line}");
    let _ = std::io::stdout().flush();
    std::process::exit(0);
}

/// Waits until `running` has started (every cache synced), within `limit`.
pub(crate) async fn wait_started(
    running: &kubeplex::Running,
    limit: Duration,
) -> Result<(), String> {
    tokio::time::timeout(limit, running.wait_started())
        .await
        .map_err(|_| "the caches did not sync in time".to_owned())?
        .map_err(|e| e.to_string())
}

/// The `/metrics` text of a kubeplex operator whose probe server is at `address`.
pub(crate) async fn operator_metrics(address: &str) -> Result<String, String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let read = async {
        let mut stream = tokio::net::TcpStream::connect(address).await?;
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&response).into_owned())
    };
    read.await
        .map_err(|e| format!("reading the operator's /metrics: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(command: &tokio::process::Command) -> Vec<String> {
        let command = command.as_std();
        let program = std::iter::once(command.get_program());
        let all = program.chain(command.get_args());
        all.map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn the_wrapper_runs_the_binary_with_its_run_and_side_filled_in() {
        let exe = Path::new("/bin/kubeplex-bench");
        let wrapper = ["heaptrack", "-o", "/tmp/{side}-{n}"].map(String::from);
        assert_eq!(
            parts(&command(&wrapper, exe, "3", "kubeplex")),
            ["heaptrack", "-o", "/tmp/kubeplex-3", "/bin/kubeplex-bench"]
        );
        assert_eq!(
            parts(&command(&[], exe, "3", "kubeplex")),
            ["/bin/kubeplex-bench"]
        );
    }
}
