//! A cluster's kube-controller-manager, for the clusters that ask for one: the controllers that work
//! without nodes, a kubelet or a cloud, connected to the cluster's API server with a certificate of their own.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

use super::pki::ClusterPki;
use super::process::Process;
use super::reserved_port::ReservedPort;
use crate::error::{Error, Result, io_error};

/// The program's name, in its log file's name and in errors.
pub(super) const PROGRAM: &str = "kube-controller-manager";

/// The controllers a cluster's kube-controller-manager runs (its `--controllers`), by their upstream names.
///
/// Those that need nodes, a kubelet, a cloud or a certificate signer are left out, since there are none;
/// so are those that only add objects to every namespace (`kube-root-ca.crt`) or act on nodes and Pods
/// that never run.
pub const CONTROLLER_MANAGER_CONTROLLERS: &[&str] = &[
    "namespace-controller",
    "garbage-collector-controller",
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "daemonset-controller",
    "job-controller",
    "cronjob-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
];

/// The files and port of one cluster's controller manager, and its process while it runs.
#[derive(Debug)]
pub(super) struct ControllerManager {
    program: PathBuf,
    kubeconfig: PathBuf,
    // Declared before the port, so that the process is killed before its port is released.
    process: Option<Process>,
    port: ReservedPort,
}

impl ControllerManager {
    /// Writes its credentials and kubeconfig into the cluster's `dir` (which holds `ca.crt`, `sa.key` and
    /// the serving certificate already) and reserves its port; nothing runs yet.
    pub(super) fn prepare(
        cluster: &str,
        dir: &Path,
        program: PathBuf,
        pki: &ClusterPki,
        server_url: &str,
    ) -> Result<Self> {
        let credential = pki.controller_manager.as_ref().ok_or_else(|| {
            Error::Pki(format!(
                "cluster {cluster}: no certificate was made for a controller manager"
            ))
        })?;
        let (cert, key) = (
            dir.join(format!("{PROGRAM}.crt")),
            dir.join(format!("{PROGRAM}.key")),
        );
        let kubeconfig = dir.join(format!("{PROGRAM}.kubeconfig"));
        let document = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{ "name": cluster, "cluster": {
                "server": server_url,
                "certificate-authority": dir.join("ca.crt"),
            }}],
            "users": [{ "name": PROGRAM, "user": {
                "client-certificate": cert,
                "client-key": key,
            }}],
            "contexts": [{ "name": cluster, "context": { "cluster": cluster, "user": PROGRAM } }],
            "current-context": cluster,
        });
        let files = [
            (&cert, credential.cert_pem.clone()),
            (&key, credential.key_pem.clone()),
            (
                &kubeconfig,
                serde_json::to_string_pretty(&document).expect("JSON values serialize"),
            ),
        ];
        for (path, content) in files {
            fs::write(path, content).map_err(io_error(format!("writing {}", path.display())))?;
        }
        let port = ReservedPort::new().map_err(io_error("reserving a loopback port"))?;
        Ok(Self {
            program,
            kubeconfig,
            process: None,
            port,
        })
    }

    /// `https://127.0.0.1:PORT`, where it serves `/healthz`; stable across stop and start.
    pub(super) fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port.port())
    }

    /// The running process, if it runs.
    pub(super) fn process(&mut self) -> Option<&mut Process> {
        self.process.as_mut()
    }

    /// The process id, if it runs.
    pub(super) fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(Process::pid)
    }

    /// Starts it (if it is not running) with its log in the cluster's `dir`.
    pub(super) fn start(&mut self, cluster: &str, dir: &Path) -> Result<()> {
        if self.process.is_none() {
            let log = dir.join(format!("{PROGRAM}.log"));
            let process = Process::spawn(self.command(dir), &log)
                .map_err(io_error(format!("cluster {cluster}: starting {PROGRAM}")))?;
            self.process = Some(process);
        }
        Ok(())
    }

    /// Kills it; [`ControllerManager::start`] starts it again.
    pub(super) fn stop(&mut self) {
        self.process = None;
    }

    fn command(&self, dir: &Path) -> Command {
        let file = |name: &str| dir.join(name).display().to_string();
        let mut command = Command::new(&self.program);
        command
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg(format!(
                "--controllers={}",
                CONTROLLER_MANAGER_CONTROLLERS.join(",")
            ))
            // One client with the certificate's rights for every controller, as the only manager there is.
            .arg("--use-service-account-credentials=false")
            .arg("--leader-elect=false")
            // Its `/healthz` tells when the controllers are built and started; served on a port of ours,
            // shared as the API server shares its (`reserved_port.rs`), with the cluster's serving
            // certificate so that a client trusting the cluster's CA can ask.
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={}", self.port.port()))
            .arg("--permit-port-sharing=true")
            .arg(format!("--tls-cert-file={}", file("serving.crt")))
            .arg(format!("--tls-private-key-file={}", file("serving.key")))
            // The token controller fills legacy token Secrets, signed as the API server expects.
            .arg(format!(
                "--service-account-private-key-file={}",
                file("sa.key")
            ))
            .arg(format!("--root-ca-file={}", file("ca.crt")));
        command
    }
}

/// Which of [`CONTROLLER_MANAGER_CONTROLLERS`] a verbose `/healthz` answer does not report healthy (`[+]NAME ok`).
pub(crate) fn controllers_not_healthy(healthz: &str) -> Vec<&'static str> {
    CONTROLLER_MANAGER_CONTROLLERS
        .iter()
        .copied()
        .filter(|name| {
            !healthz
                .lines()
                .any(|line| line.trim() == format!("[+]{name} ok"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthz_reports_which_controllers_are_not_there_yet() {
        // Before its controllers are built, the controller manager's /healthz has no check of theirs.
        assert_eq!(
            controllers_not_healthy("[+]ping ok\nhealthz check passed\n"),
            CONTROLLER_MANAGER_CONTROLLERS
        );
        let all: String = CONTROLLER_MANAGER_CONTROLLERS
            .iter()
            .map(|name| format!("[+]{name} ok\n"))
            .chain(Some("healthz check passed\n".into()))
            .collect();
        assert!(controllers_not_healthy(&all).is_empty(), "{all}");
        let one_failing = all.replace("[+]job-controller ok", "[-]job-controller failed");
        assert_eq!(controllers_not_healthy(&one_failing), ["job-controller"]);
    }
}
