//! What the operator in a test logs, captured for the test's assertions.

use std::sync::Arc;

use parking_lot::Mutex;

/// What a test's tracing subscriber wrote, as plain text.
#[derive(Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    /// Captures what this thread logs at `level` and above, without colours, until the guard is dropped.
    /// The default test runtime is single-threaded: the manager's tasks run, and log, on this thread.
    pub fn capture(level: tracing::Level) -> (Self, tracing::subscriber::DefaultGuard) {
        let logs = Self::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_ansi(false)
            .with_max_level(level)
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock()).into_owned()
    }

    /// Everything written so far, line by line.
    pub fn lines(&self) -> Vec<String> {
        self.text().lines().map(str::to_owned).collect()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl tracing_subscriber::fmt::MakeWriter<'_> for Logs {
    type Writer = Logs;

    fn make_writer(&self) -> Logs {
        self.clone()
    }
}
