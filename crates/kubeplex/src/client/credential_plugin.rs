//! An exec credential plugin (`users[].user.exec`), run by kubeplex rather than by kube: never interactive,
//! under a deadline, its stderr discarded, once per client build and once per renewal.
//!
//! It speaks client-go's `client.authentication.k8s.io` protocol as kube does: the command with its
//! arguments and variables, `KUBERNETES_EXEC_INFO` (the requested `apiVersion`, `spec.interactive: false`
//! and, with `provideClusterInfo`, the cluster), and an `ExecCredential` on stdout whose `status` gives a
//! token or a client certificate and key, and when they expire. The credential is then handed to kube as
//! static credentials, so kube never runs the plugin itself (it would run it twice per client, on the
//! async workers, without a deadline, with the terminal's stdin and stderr when the kubeconfig asks).

use std::io::Read as _;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use kube::config::{AuthInfo, ExecConfig};
use serde::Deserialize;
use tokio::time::Instant;

use super::no_access::NoAccess;

/// How long a plugin may take to answer unless the manager says otherwise
/// (`Manager::credential_plugin_timeout`).
pub const DEFAULT_PLUGIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The most a plugin may print: an `ExecCredential` with a certificate chain and key is a few KB.
const OUTPUT_AT_MOST: u64 = 1024 * 1024;

/// How long before its expiry a token is asked for again (kube's and client-go's margin).
const RENEW_BEFORE_EXPIRY: Duration = Duration::from_secs(60);

/// Why a plugin gave no credential. No variant holds what the plugin printed: it may hold credentials.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PluginError {
    #[error("the credential plugin has no command (users[].user.exec.command)")]
    NoCommand,
    #[error(
        "the credential plugin asks for the cluster's information (provideClusterInfo), which was not given"
    )]
    NoClusterInfo,
    #[error("the credential plugin (users[].user.exec.command) could not be started: {0}")]
    Start(#[source] std::io::Error),
    #[error("the credential plugin did not answer within {} s and was stopped", .0.as_secs_f64())]
    TimedOut(Duration),
    #[error(
        "the credential plugin (the user's `exec`) failed ({0}); its output is not shown, as it may hold credentials"
    )]
    Failed(ExitStatus),
    #[error("the credential plugin printed more than {OUTPUT_AT_MOST} bytes and was stopped")]
    TooLong,
    #[error("reading the credential plugin's output failed: {0}")]
    Read(#[source] std::io::Error),
    #[error(
        "the credential plugin's output is not an ExecCredential{0}; its output is not shown, as it may hold credentials"
    )]
    NotACredential(String),
    #[error("the credential plugin's ExecCredential has no status")]
    NoStatus,
    #[error(
        "the credential plugin's ExecCredential gives neither a token nor a client certificate and key"
    )]
    NoCredential,
    #[error("the credential plugin's expirationTimestamp is not an RFC 3339 time")]
    BadExpiry,
    #[error("the credential plugin's task ended: {0}")]
    Stopped(String),
}

impl PluginError {
    /// Whether running the plugin again, as configured, may succeed.
    fn may_pass(&self) -> bool {
        match self {
            Self::NoCommand | Self::NoClusterInfo => false,
            Self::Start(io) => !matches!(
                io.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
            ),
            _ => true,
        }
    }
}

impl From<PluginError> for NoAccess {
    fn from(error: PluginError) -> Self {
        Self {
            may_pass: error.may_pass(),
            reason: error.to_string(),
        }
    }
}

/// A user's exec plugin, and how long it may take.
#[derive(Clone)]
pub(crate) struct CredentialPlugin {
    exec: ExecConfig,
    timeout: Duration,
}

/// What a plugin answered. Never printed: no `Debug`.
pub(crate) struct Credential {
    token: Option<String>,
    /// The client certificate and key, in PEM.
    certificate: Option<(String, String)>,
    /// When to ask for a new token: a minute before it expires, on tokio's clock.
    pub(crate) renew_at: Option<Instant>,
}

/// The part of an `ExecCredential` read.
#[derive(Deserialize)]
struct ExecCredential {
    status: Option<Status>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    token: Option<String>,
    client_certificate_data: Option<String>,
    client_key_data: Option<String>,
    expiration_timestamp: Option<String>,
}

impl CredentialPlugin {
    /// The plugin that gives `user`'s credentials, if one does: kube reads an auth provider, a user name
    /// and password, a token and a token file before it.
    pub(crate) fn of(user: &AuthInfo, timeout: Duration) -> Option<Self> {
        let exec = user.exec.as_ref()?;
        let before = user.auth_provider.is_some()
            || (user.username.is_some() && user.password.is_some())
            || user.token.is_some()
            || user.token_file.is_some();
        (!before).then(|| Self {
            exec: exec.clone(),
            timeout,
        })
    }

    /// Runs the plugin once, and reads its credential.
    ///
    /// The plugin is read and waited for on a thread of the blocking pool, never on the async workers, and
    /// the deadline is on tokio's clock: when it passes, or when the build is dropped (a member that left
    /// meanwhile, the manager stopping), the plugin's process group is stopped, which ends that thread too.
    /// (A paused test clock does not run past the deadline while the plugin works: tokio holds it still
    /// for blocking tasks.)
    pub(crate) async fn run(&self) -> Result<Credential, PluginError> {
        let mut command = self.command()?;
        let child = spawn(&mut command).await.map_err(PluginError::Start)?;
        let running = PluginProcess::new(child.id());
        let reaped = running.reaped.clone();
        let answering = tokio::task::spawn_blocking(move || answer(child, &reaped));
        let answered = tokio::time::timeout(self.timeout, answering).await;
        drop(running);
        let (status, output) = match answered {
            Ok(Ok(answer)) => answer?,
            Ok(Err(ended)) => return Err(PluginError::Stopped(ended.to_string())),
            Err(_) => return Err(PluginError::TimedOut(self.timeout)),
        };
        if !status.success() {
            return Err(PluginError::Failed(status));
        }
        credential(&output)
    }

    /// The plugin's command: never interactive, nothing on stdin, stdout and stderr read by kubeplex.
    fn command(&self) -> Result<std::process::Command, PluginError> {
        let exec = &self.exec;
        let program = exec.command.as_deref().ok_or(PluginError::NoCommand)?;
        let mut command = std::process::Command::new(program);
        command.args(exec.args.iter().flatten());
        for var in exec.env.iter().flatten() {
            if let (Some(name), Some(value)) = (var.get("name"), var.get("value")) {
                command.env(name, value);
            }
        }
        let mut spec = serde_json::json!({ "interactive": false });
        if exec.provide_cluster_info {
            let cluster = exec.cluster.as_ref().ok_or(PluginError::NoClusterInfo)?;
            spec["cluster"] =
                serde_json::to_value(cluster).map_err(|_| PluginError::NoClusterInfo)?;
        }
        let info = serde_json::json!({
            "apiVersion": exec.api_version,
            "kind": "ExecCredential",
            "spec": spec,
        });
        command.env("KUBERNETES_EXEC_INFO", info.to_string());
        for name in exec.drop_env.iter().flatten() {
            command.env_remove(name);
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Its own process group, so that what it started is stopped with it.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        Ok(command)
    }
}

/// How often a spawn refused because the plugin's file is busy is tried, and how long apart: up to ~0.5 s,
/// as a fork on a loaded machine can take that long to reach its `exec`.
const BUSY_TRIES: u32 = 10;
const BUSY_PAUSE: Duration = Duration::from_millis(50);

/// Starts `command`. A plugin file written a moment ago (installed or replaced in place) can be refused
/// with "text file busy" while any thread of this process forks with it still open for writing; that lasts
/// until the fork's `exec`, so the spawn is tried again after a short pause.
async fn spawn(command: &mut std::process::Command) -> std::io::Result<std::process::Child> {
    let mut tries = 1;
    loop {
        match command.spawn() {
            Err(error)
                if error.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < BUSY_TRIES =>
            {
                tries += 1;
                tokio::time::sleep(BUSY_PAUSE).await;
            }
            spawned => return spawned,
        }
    }
}

/// A plugin's process group, stopped when this is dropped unless the plugin was reaped.
struct PluginProcess {
    pid: u32,
    reaped: Arc<AtomicBool>,
}

impl PluginProcess {
    fn new(pid: u32) -> Self {
        Self {
            pid,
            reaped: Arc::default(),
        }
    }
}

impl Drop for PluginProcess {
    fn drop(&mut self) {
        if !self.reaped.load(Ordering::Acquire) {
            stop(self.pid);
        }
    }
}

/// Stops the process group of the plugin `pid`, which has not been reaped (so its pid, the group's id,
/// is not anyone else's).
fn stop(pid: u32) {
    #[cfg(unix)]
    if let Ok(pid) = i32::try_from(pid) {
        // SAFETY: `kill` has no memory effects; the group is the plugin's own (`process_group(0)`).
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}

/// What the plugin printed, at most [`OUTPUT_AT_MOST`] bytes of it, and how it ended; blocking.
fn answer(
    mut child: std::process::Child,
    reaped: &AtomicBool,
) -> Result<(ExitStatus, Vec<u8>), PluginError> {
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    // Read to its end and dropped: what a plugin says there never reaches a log (it may quote a token).
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let mut output = Vec::new();
    let read = (&mut stdout)
        .take(OUTPUT_AT_MOST + 1)
        .read_to_end(&mut output);
    let problem = match read {
        Err(error) => Some(PluginError::Read(error)),
        Ok(_) if output.len() as u64 > OUTPUT_AT_MOST => Some(PluginError::TooLong),
        Ok(_) => None,
    };
    if problem.is_some() {
        stop(child.id());
    }
    let status = child.wait();
    reaped.store(true, Ordering::Release);
    match problem {
        Some(problem) => Err(problem),
        None => Ok((status.map_err(PluginError::Read)?, output)),
    }
}

/// The credential an `ExecCredential` gives.
fn credential(output: &[u8]) -> Result<Credential, PluginError> {
    // client-go decodes the output as YAML (JSON is YAML), and so do some plugins print it.
    let parsed: ExecCredential = serde_saphyr::from_slice(output).map_err(|error| {
        let at = error
            .location()
            .map(|l| format!(" at line {}, column {}", l.line(), l.column()))
            .unwrap_or_default();
        PluginError::NotACredential(at)
    })?;
    let status = parsed.status.ok_or(PluginError::NoStatus)?;
    let certificate = match (status.client_certificate_data, status.client_key_data) {
        (Some(certificate), Some(key)) => Some((certificate, key)),
        _ => None,
    };
    let token = status.token.filter(|t| !t.is_empty());
    if token.is_none() && certificate.is_none() {
        return Err(PluginError::NoCredential);
    }
    let renew_at = match status.expiration_timestamp {
        Some(at) => Some(renew_at(&at)?),
        None => None,
    };
    Ok(Credential {
        token,
        certificate,
        renew_at: renew_at.flatten(),
    })
}

/// A minute before the expiry `at`, on tokio's clock; `None` when that is too far to count.
fn renew_at(at: &str) -> Result<Option<Instant>, PluginError> {
    let time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time =
        serde_json::from_value(serde_json::Value::String(at.to_owned()))
            .map_err(|_| PluginError::BadExpiry)?;
    let expires = SystemTime::from(time.0);
    let left = expires
        .duration_since(SystemTime::now())
        .unwrap_or_default()
        .saturating_sub(RENEW_BEFORE_EXPIRY);
    Ok(Instant::now().checked_add(left))
}

impl Credential {
    /// `user` with this credential in the plugin's place: kube finds a token (or a client certificate) and
    /// no plugin to run.
    pub(crate) fn given_to(&self, user: &AuthInfo) -> AuthInfo {
        use base64::Engine as _;
        let mut user = user.clone();
        user.exec = None;
        if let Some(token) = &self.token {
            user.token = Some(token.clone().into());
        }
        if let Some((certificate, key)) = &self.certificate {
            let base64 = base64::engine::general_purpose::STANDARD;
            user.client_certificate = None;
            user.client_key = None;
            user.client_certificate_data = Some(base64.encode(certificate));
            user.client_key_data = Some(base64.encode(key).into());
        }
        user
    }

    /// Whether the credential authenticates requests with a token (else with a client certificate alone).
    pub(crate) fn has_token(&self) -> bool {
        self.token.is_some()
    }
}

#[cfg(test)]
mod tests;
