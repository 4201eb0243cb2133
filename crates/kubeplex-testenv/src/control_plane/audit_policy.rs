//! The audit policy and kube-apiserver flags of a cluster that writes an audit log (the crate's
//! `audit.rs` reads it).

use std::path::{Path, PathBuf};

use crate::error::{Result, io_error};

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
pub(super) fn write_policy(dir: &Path) -> Result<PathBuf> {
    let policy = dir.join("audit-policy.json");
    std::fs::write(&policy, POLICY).map_err(io_error(format!("writing {}", policy.display())))?;
    Ok(dir.join("audit.log"))
}

/// The kube-apiserver flags that write the log to `log` with the policy [`write_policy`] wrote into `dir`.
pub(super) fn apiserver_flags(dir: &Path, log: &Path) -> Vec<String> {
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
