//! One simulated cluster: an etcd and a kube-apiserver process with their own ports, data and certificates,
//! and a kube-controller-manager when the cluster asks for one; or a cluster another process runs, attached
//! to (its address, certificates and audit log, no process).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::audit_policy;
use super::binaries::Binaries;
use super::controller_manager::{self, ControllerManager};
use super::pki::ClusterPki;
use super::process::{self, Process};
use super::reserved_port::ReservedPort;
use crate::error::{Error, Result, io_error};

/// Lines of a process's log quoted in an error.
const LOG_TAIL_LINES: usize = 30;

/// One cluster; the environment guards it with a mutex for the fault controls.
#[derive(Debug)]
pub(crate) struct Cluster {
    name: String,
    dir: PathBuf,
    pub(crate) pki: ClusterPki,
    /// Where the API server writes its audit log, when the environment asked for one.
    audit_log: Option<PathBuf>,
    /// How much of the audit log was written before this environment attached: its events are not this
    /// environment's.
    audit_from: u64,
    apiserver_port: u16,
    /// Whether a kube-controller-manager runs with it.
    controller_manager: bool,
    /// The processes, when this environment runs them; `None` for a cluster attached to, which no fault
    /// control reaches.
    programs: Option<Programs>,
}

/// The processes of a cluster this environment runs.
#[derive(Debug)]
struct Programs {
    binaries: Binaries,
    /// Prepared when the cluster asks for one; it runs while the API server does (declared first, so that
    /// it is killed before the API server).
    controller_manager: Option<ControllerManager>,
    apiserver: Option<Process>,
    etcd: Process,
    // Held for the cluster's whole life, so nobody else can take a port while a program is (re)starting;
    // declared after the processes so that they are killed before their ports are released.
    apiserver_port: ReservedPort,
    etcd_client_port: ReservedPort,
    _etcd_peer_port: ReservedPort,
    frozen: bool,
    /// How many times its store was replaced by an empty one ([`Cluster::empty_store`]).
    stores: u32,
}

impl Cluster {
    /// Writes the cluster's files under `dir` and starts etcd and the API server (without waiting for them).
    /// With `controller_manager`, its files are written too, but it starts only once the API server is
    /// ready ([`Cluster::start_controller_manager`]).
    pub(crate) fn launch(
        name: &str,
        dir: &Path,
        binaries: &Binaries,
        audit_log: bool,
        controller_manager: bool,
    ) -> Result<Self> {
        fs::create_dir_all(dir).map_err(io_error(format!("creating {}", dir.display())))?;
        let pki = ClusterPki::generate(name, controller_manager)?;
        // A token authenticator with one unused token: any other bearer token then gets a 401, not a 403.
        let known_token = format!("kubeplex-testenv-{name}-{:016x}", rand_u64());
        let files = [
            ("ca.crt", pki.ca.cert_pem.as_str()),
            ("serving.crt", pki.serving.cert_pem.as_str()),
            ("serving.key", pki.serving.key_pem.as_str()),
            ("sa.pub", pki.service_account_key.cert_pem.as_str()),
            ("sa.key", pki.service_account_key.key_pem.as_str()),
        ];
        for (file, content) in files {
            let path = dir.join(file);
            fs::write(&path, content).map_err(io_error(format!("writing {}", path.display())))?;
        }
        let audit_log = if audit_log {
            Some(audit_policy::write_policy(dir)?)
        } else {
            None
        };
        let tokens = dir.join("tokens.csv");
        fs::write(
            &tokens,
            format!("{known_token},kubeplex-testenv:token-user,token-user-uid\n"),
        )
        .map_err(io_error(format!("writing {}", tokens.display())))?;

        let reserve = || ReservedPort::new().map_err(io_error("reserving a loopback port"));
        let (apiserver_port, etcd_client_port, etcd_peer_port) =
            (reserve()?, reserve()?, reserve()?);
        let etcd = spawn(
            name,
            "etcd",
            etcd_command(
                binaries,
                dir,
                etcd_client_port.port(),
                etcd_peer_port.port(),
            ),
            dir,
        )?;
        let controller_manager = if controller_manager {
            let program = binaries.kube_controller_manager.clone().ok_or_else(|| {
                Error::Binaries(format!(
                    "cluster {name} asks for a kube-controller-manager, but {} holds none",
                    binaries.dir.display()
                ))
            })?;
            let server_url = format!("https://127.0.0.1:{}", apiserver_port.port());
            Some(ControllerManager::prepare(
                name,
                dir,
                program,
                &pki,
                &server_url,
            )?)
        } else {
            None
        };
        let mut cluster = Self {
            name: name.to_owned(),
            dir: dir.to_path_buf(),
            pki,
            audit_log,
            audit_from: 0,
            apiserver_port: apiserver_port.port(),
            controller_manager: controller_manager.is_some(),
            programs: Some(Programs {
                binaries: binaries.clone(),
                controller_manager,
                apiserver: None,
                etcd,
                apiserver_port,
                etcd_client_port,
                _etcd_peer_port: etcd_peer_port,
                frozen: false,
                stores: 0,
            }),
        };
        cluster.start_apiserver()?;
        Ok(cluster)
    }

    /// A cluster another process runs, reached at `apiserver_port` with `pki`; its files are in `dir`. Of
    /// its audit log, only what is written from now on is this environment's.
    pub(crate) fn attached(
        name: &str,
        dir: &Path,
        pki: ClusterPki,
        apiserver_port: u16,
        audit_log: Option<PathBuf>,
        controller_manager: bool,
    ) -> Self {
        let audit_from = audit_log
            .as_deref()
            .and_then(|log| fs::metadata(log).ok())
            .map_or(0, |m| m.len());
        Self {
            name: name.to_owned(),
            dir: dir.to_path_buf(),
            pki,
            audit_log,
            audit_from,
            apiserver_port,
            controller_manager,
            programs: None,
        }
    }

    /// The cluster's directory (its certificates, logs and data).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether a kube-controller-manager runs with the cluster.
    pub(crate) fn runs_controller_manager(&self) -> bool {
        self.controller_manager
    }

    fn programs_mut(&mut self) -> Result<&mut Programs> {
        self.programs.as_mut().ok_or_else(|| Error::Attached {
            cluster: self.name.clone(),
        })
    }

    /// `https://127.0.0.1:PORT`, stable across stop and start.
    pub(crate) fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.apiserver_port())
    }

    /// The API server's loopback port, stable across stop and start.
    pub(crate) fn apiserver_port(&self) -> u16 {
        self.apiserver_port
    }

    /// Starts the API server again on its port, with the same etcd (and so the same data).
    pub(crate) fn start_apiserver(&mut self) -> Result<()> {
        let (name, dir, audit_log) = (self.name.clone(), self.dir.clone(), self.audit_log.clone());
        let programs = self.programs_mut()?;
        if programs.apiserver.is_none() {
            let command = programs.apiserver_command(&dir, audit_log.as_deref());
            programs.apiserver = Some(spawn(&name, "kube-apiserver", command, &dir)?);
            super::record_start(&name);
            programs.frozen = false;
        }
        Ok(())
    }

    /// Kills the API server, and the controller manager with it: clients get "connection refused" until
    /// [`Cluster::start_apiserver`] (and [`Cluster::start_controller_manager`]).
    pub(crate) fn stop_apiserver(&mut self) -> Result<()> {
        let programs = self.programs_mut()?;
        if let Some(controller_manager) = &mut programs.controller_manager {
            controller_manager.stop();
        }
        programs.apiserver = None;
        programs.frozen = false;
        Ok(())
    }

    /// From the next start on, the API server keeps its objects under a key prefix of etcd nothing was
    /// written under: it starts as another cluster would (a `kube-system` Namespace with a new UID, none of
    /// the objects before), with the same address, certificates and credentials.
    pub(crate) fn empty_store(&mut self) -> Result<()> {
        self.programs_mut()?.stores += 1;
        Ok(())
    }

    /// Starts the controller manager if the cluster asked for one and it is not running; the API server
    /// should be ready. Returns where it serves `/healthz`, or `None` for a cluster without one (or one
    /// attached to).
    pub(crate) fn start_controller_manager(&mut self) -> Result<Option<String>> {
        let (name, dir) = (self.name.clone(), self.dir.clone());
        let Some(controller_manager) = self
            .programs
            .as_mut()
            .and_then(|p| p.controller_manager.as_mut())
        else {
            return Ok(None);
        };
        controller_manager.start(&name, &dir)?;
        Ok(Some(controller_manager.url()))
    }

    /// Stops (SIGSTOP) or resumes (SIGCONT) the API server: connections hang, as in a network partition.
    pub(crate) fn set_frozen(&mut self, frozen: bool) -> Result<()> {
        if self.programs_mut()?.apiserver.is_none() {
            return Err(self.not_ready(
                "kube-apiserver",
                "is stopped; start it before freezing or thawing".into(),
            ));
        }
        let name = self.name.clone();
        let programs = self.programs_mut()?;
        if let Some(apiserver) = &programs.apiserver {
            let signal = if frozen { libc::SIGSTOP } else { libc::SIGCONT };
            apiserver.signal(signal).map_err(io_error(format!(
                "cluster {name}: signalling kube-apiserver"
            )))?;
        }
        programs.frozen = frozen;
        Ok(())
    }

    /// Fails with the log tail when a process has exited; a running cluster (or one attached to) passes.
    pub(crate) fn check_alive(&mut self) -> Result<()> {
        let Some(programs) = &mut self.programs else {
            return Ok(());
        };
        let exited = if let Some(status) = programs.etcd.exit_status() {
            Some(("etcd", format!("etcd exited ({status})")))
        } else if let Some(status) = programs.apiserver.as_mut().and_then(Process::exit_status) {
            Some((
                "kube-apiserver",
                format!("kube-apiserver exited ({status})"),
            ))
        } else {
            let manager = programs
                .controller_manager
                .as_mut()
                .and_then(ControllerManager::process);
            manager.and_then(Process::exit_status).map(|status| {
                let program = controller_manager::PROGRAM;
                (program, format!("{program} exited ({status})"))
            })
        };
        match exited {
            Some((program, problem)) => Err(self.not_ready(program, problem)),
            None => Ok(()),
        }
    }

    /// An error for this cluster with the program's log tail attached.
    pub(crate) fn not_ready(&self, program: &'static str, problem: String) -> Error {
        let log = self.dir.join(format!("{program}.log"));
        Error::NotReady {
            cluster: self.name.clone(),
            program,
            problem,
            log_tail: process::log_tail(&log, LOG_TAIL_LINES),
        }
    }

    /// Process ids of the running programs: API server, etcd, then the controller manager if it runs.
    pub(crate) fn pids(&self) -> Vec<u32> {
        let Some(programs) = &self.programs else {
            return Vec::new();
        };
        let manager = programs
            .controller_manager
            .as_ref()
            .and_then(ControllerManager::pid);
        programs
            .apiserver
            .iter()
            .chain(Some(&programs.etcd))
            .map(Process::pid)
            .chain(manager)
            .collect()
    }

    /// The API server's audit log, if it writes one.
    pub(crate) fn audit_log(&self) -> Option<&Path> {
        self.audit_log.as_deref()
    }

    /// Where this environment's part of the audit log begins (0 unless attached).
    pub(crate) fn audit_from(&self) -> u64 {
        self.audit_from
    }

    /// Whether the API server is currently stopped with SIGSTOP.
    pub(crate) fn is_frozen(&self) -> bool {
        self.programs.as_ref().is_some_and(|p| p.frozen)
    }
}

impl Programs {
    fn apiserver_command(&self, dir: &Path, audit_log: Option<&Path>) -> Command {
        let port = self.apiserver_port.port();
        let mut command = Command::new(&self.binaries.kube_apiserver);
        command
            .arg(format!(
                "--etcd-servers=http://127.0.0.1:{}",
                self.etcd_client_port.port()
            ))
            .arg(format!("--etcd-prefix=/registry-{}", self.stores))
            .arg("--bind-address=127.0.0.1")
            // A socket of ours reserves the port (`reserved_port.rs`): share it instead of failing to bind.
            .arg("--permit-port-sharing=true")
            .arg("--advertise-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            .arg(format!(
                "--cert-dir={}",
                dir.join("generated-certs").display()
            ))
            .arg(format!(
                "--tls-cert-file={}",
                dir.join("serving.crt").display()
            ))
            .arg(format!(
                "--tls-private-key-file={}",
                dir.join("serving.key").display()
            ))
            .arg(format!("--client-ca-file={}", dir.join("ca.crt").display()))
            .arg(format!(
                "--token-auth-file={}",
                dir.join("tokens.csv").display()
            ))
            .arg(format!(
                "--service-account-issuer=https://127.0.0.1:{port}/"
            ))
            .arg(format!(
                "--service-account-key-file={}",
                dir.join("sa.pub").display()
            ))
            .arg(format!(
                "--service-account-signing-key-file={}",
                dir.join("sa.key").display()
            ))
            .arg("--service-cluster-ip-range=10.0.0.0/24")
            .arg("--allow-privileged=true")
            .arg("--authorization-mode=RBAC")
            // No controller manager runs: it would mint the service-account tokens this plugin waits for.
            .arg("--disable-admission-plugins=ServiceAccount")
            .arg("--endpoint-reconciler-type=none");
        if let Some(log) = audit_log {
            command.args(audit_policy::apiserver_flags(dir, log));
        }
        command
    }
}

fn etcd_command(binaries: &Binaries, dir: &Path, client_port: u16, peer_port: u16) -> Command {
    let client = format!("http://127.0.0.1:{client_port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    let mut command = Command::new(&binaries.etcd);
    command
        .arg("--name=default")
        .arg(format!("--data-dir={}", dir.join("etcd-data").display()))
        .arg(format!("--listen-client-urls={client}"))
        .arg(format!("--advertise-client-urls={client}"))
        .arg(format!("--listen-peer-urls={peer}"))
        .arg(format!("--initial-advertise-peer-urls={peer}"))
        .arg(format!("--initial-cluster=default={peer}"))
        // Sockets of ours reserve both ports (`reserved_port.rs`): share them instead of failing to bind.
        .arg("--socket-reuse-port=true")
        // Test data need not survive a power cut; skipping fsync makes writes fast.
        .arg("--unsafe-no-fsync")
        .arg("--log-level=warn");
    command
}

fn spawn(cluster: &str, program: &'static str, command: Command, dir: &Path) -> Result<Process> {
    let log = dir.join(format!("{program}.log"));
    Process::spawn(command, &log)
        .map_err(io_error(format!("cluster {cluster}: starting {program}")))
}

/// A random number for names and tokens, from the kernel.
pub(super) fn rand_u64() -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: getrandom(2) writes at most `bytes.len()` bytes into the buffer.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    assert_eq!(n, 8, "getrandom failed");
    u64::from_ne_bytes(bytes)
}
