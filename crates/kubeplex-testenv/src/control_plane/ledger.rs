//! An optional record of the API servers started: with [`LEDGER_VAR`] naming a file, each start (a restart
//! included) appends a line `<program> <cluster> <thread>`, so that CI can say how many servers each test binary
//! starts and a test that starts clusters of its own shows the day it lands (libtest names a test's thread
//! after the test).

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::Path;

/// The environment variable naming the ledger file; unset, nothing is recorded.
pub const LEDGER_VAR: &str = "KUBEPLEX_TESTENV_LEDGER";

/// Records that an API server of `cluster` started. Best effort: a ledger that cannot be written never
/// fails a start.
pub(crate) fn record_start(cluster: &str) {
    if let Some(path) = std::env::var_os(LEDGER_VAR) {
        append(Path::new(&path), cluster);
    }
}

/// Appends the line of a start of `cluster` by this program to the ledger at `path`.
fn append(path: &Path, cluster: &str) {
    let exe = std::env::current_exe().ok();
    let program = exe
        .as_deref()
        .and_then(|p| p.file_name())
        .map_or_else(|| "?".into(), |n| n.to_string_lossy());
    let thread = std::thread::current();
    let thread = thread
        .name()
        .unwrap_or("?")
        .replace(char::is_whitespace, "_");
    // One write of one short line to a file opened for appending: lines of processes that start servers at
    // the same time do not interleave.
    let line = format!("{program} {cluster} {thread}\n");
    let ledger = OpenOptions::new().create(true).append(true).open(path);
    let _ = ledger.and_then(|mut file| file.write_all(line.as_bytes()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_start_is_one_line_naming_the_program_the_cluster_and_the_test() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger");
        append(&path, "control");
        append(&path, "cluster-a");
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let program = std::env::current_exe().unwrap();
        let program = program.file_name().unwrap().to_string_lossy();
        let test = "control_plane::ledger::tests::each_start_is_one_line_naming_the_program_the_cluster_and_the_test";
        assert_eq!(
            lines,
            [
                format!("{program} control {test}"),
                format!("{program} cluster-a {test}")
            ]
        );
    }
}
