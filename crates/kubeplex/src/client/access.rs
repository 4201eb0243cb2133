//! How a cluster is reached: its configuration, and its credentials read once — TLS settings and the
//! requests' authorization — shared by every client of the cluster.
//!
//! The controllers' client, the pings' and the leases' clients share them, so the pings judge the
//! credential the controllers use (a ping that ran an exec plugin afresh would find the cluster answering
//! while the controllers' token is refused), and a token renewed after a 401 on one client is every
//! client's.

use std::sync::Arc;
use std::time::Duration;

use super::authorization::{Authorization, RENEW_AT_MOST_EVERY};
use super::credential_plugin::CredentialPlugin;
use super::identity::IdentityGate;
use super::last_answer::LastAnswer;
use super::no_access::NoAccess;
use super::tls::Tls;

/// A cluster's configuration and credentials.
#[derive(Clone)]
pub(crate) struct Access {
    config: Arc<kube::Config>,
    pub(super) tls: Arc<Tls>,
    pub(super) authorization: Arc<Authorization>,
    /// When the server last answered any client of the cluster.
    pub(super) last_answer: LastAnswer,
    /// The gate the cluster's writes pass: which cluster these credentials reach.
    pub(super) identity: Arc<IdentityGate>,
}

impl Access {
    /// The access `config` gives the cluster `context` (an exec plugin is run now, for at most
    /// `plugin_timeout`), or why it gives none.
    pub(crate) async fn of(
        context: &str,
        config: kube::Config,
        plugin_timeout: Duration,
    ) -> Result<Self, NoAccess> {
        Self::renewing_every(context, config, plugin_timeout, RENEW_AT_MOST_EVERY).await
    }

    /// As [`of`](Self::of), with an exec plugin run again after a 401 at most every `every`.
    pub(super) async fn renewing_every(
        context: &str,
        config: kube::Config,
        plugin_timeout: Duration,
        every: Duration,
    ) -> Result<Self, NoAccess> {
        // The plugin runs once, here; kube is given what it answered and never runs it itself.
        let plugin = CredentialPlugin::of(&config.auth_info, plugin_timeout);
        let (credentials, credential) = match &plugin {
            Some(plugin) => {
                let credential = plugin.run().await?;
                let mut given = config.clone();
                given.auth_info = credential.given_to(&config.auth_info);
                (given, Some(credential))
            }
            None => (config.clone(), None),
        };
        let (tls, authorization) = if credentials.auth_info.auth_provider.is_some() {
            // kube runs an auth provider's command (gcp's `cmd-path`) as it reads them, twice and without
            // a deadline: off the async workers.
            let context = context.to_owned();
            let read = move || -> Result<_, NoAccess> {
                let tls = Tls::of(&credentials)?;
                Ok((tls, Authorization::of(&context, &credentials, None, every)?))
            };
            tokio::task::spawn_blocking(read)
                .await
                .map_err(|e| NoAccess::from(format!("reading the credentials stopped: {e}")))??
        } else {
            let tls = Tls::of(&credentials)?;
            let plugin = plugin.zip(credential.as_ref());
            (
                tls,
                Authorization::of(context, &credentials, plugin, every)?,
            )
        };
        Ok(Self {
            config: Arc::new(config),
            tls: Arc::new(tls),
            authorization: Arc::new(authorization),
            last_answer: LastAnswer::default(),
            // Open until whoever asks the cluster who it is holds it (the manager, a member's join).
            identity: Arc::new(IdentityGate::unasked()),
        })
    }

    /// The cluster's configuration.
    pub(crate) fn config(&self) -> &kube::Config {
        &self.config
    }

    /// The gate the cluster's writes pass, shared by every client built on these credentials.
    pub(crate) fn identity(&self) -> &Arc<IdentityGate> {
        &self.identity
    }

    /// When the cluster's server last answered one of its clients with the credentials taken and the
    /// request served (whatever its outcome), if it has.
    pub(crate) fn last_answer(&self) -> Option<tokio::time::Instant> {
        self.last_answer.at()
    }

    /// The stamp [`Access::last_answer`] reads, shared with whoever else needs to read it.
    pub(crate) fn answers(&self) -> LastAnswer {
        self.last_answer.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn an_auth_providers_command_runs_off_the_async_workers() {
        // A gcp provider whose command waits until this test, on the runtime's only thread, releases it.
        let dir = tempfile::tempdir().unwrap();
        let (started, release) = (dir.path().join("started"), dir.path().join("release"));
        let script = format!(
            "#!/bin/sh\ntouch {}\nfor i in $(seq 100); do [ -e {} ] && break; sleep 0.05; done\nprintf token",
            started.display(),
            release.display()
        );
        let command = dir.path().join("gcp");
        std::fs::write(&command, script).unwrap();
        std::fs::set_permissions(&command, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
        config.auth_info = serde_json::from_value(serde_json::json!({ "auth-provider": {
            "name": "gcp",
            "config": { "cmd-path": command.to_string_lossy() },
        }}))
        .unwrap();
        let build = tokio::spawn(Access::of("cluster-a", config, Duration::from_secs(30)));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !started.exists() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the command never ran"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            !build.is_finished(),
            "the build ended before the command was released: it held the runtime's only thread"
        );
        std::fs::write(&release, "").unwrap();
        build.await.unwrap().unwrap();
    }
}
