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

/// Every request at `Metadata` level (no bodies), one event per request when its response is complete;
/// long-running requests (watches) also get one when their response starts.
const POLICY: &str = r#"{
  "apiVersion": "audit.k8s.io/v1",
  "kind": "Policy",
  "omitStages": ["RequestReceived"],
  "rules": [{ "level": "Metadata" }]
}
"#;

/// Writes the audit policy into the cluster's directory; returns where the log will be.
pub(crate) fn write_policy(dir: &Path) -> Result<PathBuf> {
    let policy = dir.join("audit-policy.json");
    std::fs::write(&policy, POLICY).map_err(io_error(format!("writing {}", policy.display())))?;
    Ok(dir.join("audit.log"))
}

/// The kube-apiserver flags that write the log to `log` with the policy [`write_policy`] wrote into `dir`.
pub(crate) fn apiserver_flags(dir: &Path, log: &Path) -> Vec<String> {
    vec![
        format!(
            "--audit-policy-file={}",
            dir.join("audit-policy.json").display()
        ),
        format!("--audit-log-path={}", log.display()),
        "--audit-log-format=json".into(),
        "--audit-log-version=audit.k8s.io/v1".into(),
        // Each event written before the response is sent, not batched.
        "--audit-log-mode=blocking".into(),
        // One file (0 disables rotation), appended to across a stop and start of the API server.
        "--audit-log-maxsize=0".into(),
    ]
}

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
        let text = match std::fs::read_to_string(&path) {
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
