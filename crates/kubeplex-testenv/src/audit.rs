//! Audit logs: with [`TestEnvBuilder::audit_log`](crate::TestEnvBuilder::audit_log) every API server records
//! each request it serves (who, what verb, which object and subresource, the response code) as one JSON line
//! in `audit.log` in its cluster's directory, so a test can count the writes a program really made.
//!
//! The log backend runs in `blocking` mode and without rotation: the event of a request is appended to the
//! file before its response is sent (the audit filter runs inside the request timeout filter, which sends
//! the response only when the inner handlers are done), so a test that has the answer to a request finds
//! its event in the log, with no batching delay.

use std::path::{Path, PathBuf};

use crate::env::TestEnv;
use crate::error::{Error, Result, io_error};

impl TestEnv {
    /// Where the API server of `cluster` writes its audit log (`audit.log` in the cluster's directory).
    /// Fails unless the environment was started with
    /// [`TestEnvBuilder::audit_log`](crate::TestEnvBuilder::audit_log).
    pub fn audit_log_path(&self, cluster: &str) -> Result<PathBuf> {
        self.lock(cluster)?
            .audit_log()
            .map(Path::to_path_buf)
            .ok_or_else(|| Error::NoAuditLog {
                cluster: cluster.to_owned(),
            })
    }

    /// The audit events of `cluster` so far, oldest first: one `audit.k8s.io/v1` `Event` per served request
    /// (`verb`, `user.username`, `objectRef.{resource,subresource,namespace,name}`, `responseStatus.code`,
    /// `stage`, ...). A request's event is there once its response has arrived. Fails unless the
    /// environment was started with [`TestEnvBuilder::audit_log`](crate::TestEnvBuilder::audit_log).
    pub fn audit_events(&self, cluster: &str) -> Result<Vec<serde_json::Value>> {
        let path = self.audit_log_path(cluster)?;
        let from = self.lock(cluster)?.audit_from();
        let text = match read_from(&path, from) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(error) => return Err(io_error(format!("reading {}", path.display()))(error)),
        };
        // Only complete lines: a line still being appended has no newline yet.
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        complete
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                serde_json::from_str(line).map_err(|error| Error::Io {
                    what: format!("parsing an audit event of {}", path.display()),
                    source: std::io::Error::new(std::io::ErrorKind::InvalidData, error),
                })
            })
            .collect()
    }
}

/// The log from byte `from` on, starting at a line's beginning: a line `from` falls inside of is left out
/// (it was written before).
fn read_from(path: &Path, from: u64) -> std::io::Result<String> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(from.saturating_sub(1)))?;
    file.read_to_end(&mut bytes)?;
    let start = match from {
        0 => 0,
        _ => bytes
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |end| end + 1),
    };
    String::from_utf8(bytes.split_off(start))
        .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, error))
}
